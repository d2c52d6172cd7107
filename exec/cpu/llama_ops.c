/* llama_ops: the Llama block's own CPU reference ops; see llama_ops.h. Plain loops without
 * `omp simd`: every sum runs in index order. */
#include "llama_ops.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- RMSNorm ---- */

void rmsnorm_forward_ref(float *out, float *rstd, const float *inp, const float *weight, int N,
                         int C, float eps)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float ss = 0;
        for (int i = 0; i < C; i++)
            ss += x[i] * x[i];
        float s = 1.0f / sqrtf(ss / C + eps);
        float *o = out + (size_t)n * C;
        for (int i = 0; i < C; i++)
            o[i] = (x[i] * s) * weight[i];
        rstd[n] = s;
    }
}

/* With norm = x * rstd and dnorm = weight * dout: dx = rstd * (dnorm - norm * mean(dnorm *
 * norm)), the second term rstd's own dependence on x. */
void rmsnorm_backward_ref(float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float s = rstd[n], dnorm_norm_mean = 0;
        for (int i = 0; i < C; i++)
            dnorm_norm_mean += weight[i] * d[i] * (x[i] * s);
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; i++) {
            float norm = x[i] * s, dnorm = weight[i] * d[i];
            dweight[i] += norm * d[i];
            dx[i] += (dnorm - norm * dnorm_norm_mean) * s;
        }
    }
}

/* ---- The token embedding ---- */

void embedding_forward_ref(float *out, const int *tokens, const float *wte, int N, int C)
{
    for (int i = 0; i < N; i++)
        memcpy(out + (size_t)i * C, wte + (size_t)tokens[i] * C, (size_t)C * sizeof(float));
}

void embedding_backward_ref(float *dwte, const float *dout, const int *tokens, int N, int C)
{
    for (int i = 0; i < N; i++) {
        float *row = dwte + (size_t)tokens[i] * C;
        const float *d = dout + (size_t)i * C;
        for (int j = 0; j < C; j++)
            row[j] += d[j];
    }
}

/* ---- Rotary position embedding ---- */

static inline bool rope_args_valid(int d, double theta, const RopeScaling *s)
{
    return d > 0 && d % 2 == 0 && theta > 0 &&
           (!s || (s->factor > 0 && s->high_freq_factor > s->low_freq_factor));
}

/* inv_freq[i] of rope_inv_freq. */
static double inv_freq_at(int i, int d, double theta, const RopeScaling *s)
{
    double f = 1.0 / pow(theta, (double)(2 * i) / d);
    if (!s)
        return f;
    double orig = (double)s->original_max_seq;
    double low_freq_wavelen = orig / s->low_freq_factor;
    double high_freq_wavelen = orig / s->high_freq_factor;
    double wavelen = 2 * M_PI / f;
    if (wavelen > low_freq_wavelen)
        return f / s->factor;
    if (wavelen < high_freq_wavelen)
        return f;
    /* transformers' operand order: (1 - smooth) * inv_freq / factor + smooth * inv_freq */
    double smooth =
        (orig / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
    return (1 - smooth) * f / s->factor + smooth * f;
}

void rope_inv_freq(double *inv_freq, int d, double theta, const RopeScaling *scaling)
{
    assert(rope_args_valid(d, theta, scaling));
    for (int i = 0; i < d / 2; i++)
        inv_freq[i] = inv_freq_at(i, d, theta, scaling);
}

void rope_table_fill(float *cos_t, float *sin_t, int T, int d, double theta,
                     const RopeScaling *scaling)
{
    assert(rope_args_valid(d, theta, scaling));
    int half = d / 2;
    for (int i = 0; i < half; i++) {
        double f = inv_freq_at(i, d, theta, scaling);
        for (int t = 0; t < T; t++) {
            double angle = (double)t * f;
            cos_t[(size_t)t * half + i] = (float)cos(angle);
            sin_t[(size_t)t * half + i] = (float)sin(angle);
        }
    }
}

int rope_table_init(RopeTable *t, int T, int d, double theta, const RopeScaling *scaling,
                    Err *e)
{
    assert(T > 0 && d > 0 && d % 2 == 0);
    size_t n = (size_t)T * (d / 2);
    *t = (RopeTable){.T = T, .half = d / 2};
    t->cos = malloc(n * sizeof(float));
    t->sin = malloc(n * sizeof(float));
    if (!t->cos || !t->sin) {
        rope_table_free(t);
        return err_set(e, -ENOMEM, "rope table: out of memory for 2 x %zu floats (T %d, d %d)",
                       n, T, d);
    }
    rope_table_fill(t->cos, t->sin, T, d, theta, scaling);
    return 0;
}

void rope_table_free(RopeTable *t)
{
    free(t->cos);
    free(t->sin);
    *t = (RopeTable){0};
}

/* Each row's first h + g heads (q's and k's) of in turned by their position's angle (sign +1:
 * the forward) or back by it (-1: the backward, the rotation's transpose), into out or, with
 * accumulate, added to it; v's heads copied or added as they are. */
static void rope_turn(float *out, const float *in, int B, int T, int h, int g, int d,
                      const RopeTable *tab, float sign, bool accumulate)
{
    assert(d % 2 == 0 && tab->half == d / 2 && tab->T >= T);
    int half = d / 2, row = (h + 2 * g) * d;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *x = in + ((size_t)b * T + t) * row;
            float *o = out + ((size_t)b * T + t) * row;
            const float *c = tab->cos + (size_t)t * half, *s = tab->sin + (size_t)t * half;
            for (int j = 0; j < h + g; j++) {
                const float *xh = x + (size_t)j * d;
                float *oh = o + (size_t)j * d;
                for (int i = 0; i < half; i++) {
                    float x1 = xh[i], x2 = xh[i + half], sn = sign * s[i];
                    float y1 = x1 * c[i] - x2 * sn, y2 = x2 * c[i] + x1 * sn;
                    oh[i] = accumulate ? oh[i] + y1 : y1;
                    oh[i + half] = accumulate ? oh[i + half] + y2 : y2;
                }
            }
            for (int i = (h + g) * d; i < row; i++)
                o[i] = accumulate ? o[i] + x[i] : x[i];
        }
}

void rope_forward_ref(float *out, const float *qkv, int B, int T, int h, int g, int d,
                      const RopeTable *tab)
{
    rope_turn(out, qkv, B, T, h, g, d, tab, 1.0f, false);
}

void rope_backward_ref(float *dqkv, const float *dout, int B, int T, int h, int g, int d,
                       const RopeTable *tab)
{
    rope_turn(dqkv, dout, B, T, h, g, d, tab, -1.0f, true);
}

/* ---- SwiGLU ---- */

void swiglu_forward_ref(float *out, const float *gate_up, int N, int F)
{
    for (int n = 0; n < N; n++) {
        const float *gate = gate_up + (size_t)n * 2 * F, *up = gate + F;
        float *o = out + (size_t)n * F;
        for (int i = 0; i < F; i++)
            o[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
    }
}

/* silu'(x) = sigmoid(x) * (1 + x * (1 - sigmoid(x))). */
void swiglu_backward_ref(float *dgate_up, const float *dout, const float *gate_up, int N, int F)
{
    for (int n = 0; n < N; n++) {
        const float *gate = gate_up + (size_t)n * 2 * F, *up = gate + F;
        float *dgate = dgate_up + (size_t)n * 2 * F, *dup = dgate + F;
        const float *dy = dout + (size_t)n * F;
        for (int i = 0; i < F; i++) {
            float x = gate[i], sig = 1.0f / (1.0f + expf(-x));
            float silu = x / (1.0f + expf(-x));
            dgate[i] += dy[i] * up[i] * (sig * (1.0f + x * (1.0f - sig)));
            dup[i] += dy[i] * silu;
        }
    }
}
