/* gpt2_ops: the CPU reference ops; see gpt2_ops.h. The matmul loops carry `omp simd`
 * (compiled with -fopenmp-simd, no OpenMP runtime): the dot products are summed in vector
 * lanes, a fixed order for a given build, so runs stay reproducible. */
#include "gpt2_ops.h"

#include <assert.h>
#include <math.h>
#include <string.h>

void encoder_forward_ref(float *out, const int *inp, const float *wte, const float *wpe, int B,
                         int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *te = wte + (size_t)inp[b * T + t] * C, *pe = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++)
                o[i] = te[i] + pe[i];
        }
}

void encoder_backward_ref(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                          int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *te = dwte + (size_t)inp[b * T + t] * C, *pe = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) {
                te[i] += d[i];
                pe[i] += d[i];
            }
        }
}

void layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C)
{
    const float eps = 1e-5f;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float m = 0;
        for (int i = 0; i < C; i++)
            m += x[i];
        m /= C;
        float v = 0;
        for (int i = 0; i < C; i++)
            v += (x[i] - m) * (x[i] - m);
        v /= C;
        float s = 1.0f / sqrtf(v + eps);
        float *o = out + (size_t)n * C;
        for (int i = 0; i < C; i++)
            o[i] = (x[i] - m) * s * weight[i] + bias[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

void layernorm_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s, dnorm = weight[i] * d[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s, dnorm = weight[i] * d[i];
            dbias[i] += d[i];
            dweight[i] += norm * d[i];
            dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
}

typedef struct MatmulJob {
    float *out;
    const float *inp, *weight, *bias, *dout;
    float *dinp, *dweight, *dbias;
    int N, C, OC;
} MatmulJob;

static void matmul_rows(void *ctx, size_t begin, size_t end)
{
    const MatmulJob *j = ctx;
    for (size_t n = begin; n < end; n++) {
        const float *x = j->inp + n * (size_t)j->C;
        float *o = j->out + n * (size_t)j->OC;
        for (int oc = 0; oc < j->OC; oc++) {
            const float *w = j->weight + (size_t)oc * j->C;
            float acc = j->bias ? j->bias[oc] : 0;
#pragma omp simd reduction(+ : acc)
            for (int i = 0; i < j->C; i++)
                acc += x[i] * w[i];
            o[oc] = acc;
        }
    }
}

static void run(WorkPool *wp, WorkFn fn, void *ctx, size_t n)
{
    if (wp)
        workpool_run(wp, fn, ctx, n, 1);
    else
        fn(ctx, 0, n);
}

void matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias,
                        int N, int C, int OC, WorkPool *wp)
{
    MatmulJob j = {.out = out, .inp = inp, .weight = weight, .bias = bias, .N = N, .C = C,
                   .OC = OC};
    run(wp, matmul_rows, &j, (size_t)N);
}

/* dinp rows: dinp[n] += dout[n] @ weight. Four weight rows a pass: each dx[i] is loaded and
 * stored once for four additions, made in the order of oc as one row a pass makes them (the
 * same bits). */
static void matmul_dinp_rows(void *ctx, size_t begin, size_t end)
{
    const MatmulJob *j = ctx;
    int C = j->C, OC = j->OC;
    for (size_t n = begin; n < end; n++) {
        const float *d = j->dout + n * (size_t)OC;
        float *dx = j->dinp + n * (size_t)C;
        int oc = 0;
        for (; oc + 4 <= OC; oc += 4) {
            const float *w0 = j->weight + (size_t)oc * C, *w1 = w0 + C, *w2 = w1 + C,
                        *w3 = w2 + C;
            float g0 = d[oc], g1 = d[oc + 1], g2 = d[oc + 2], g3 = d[oc + 3];
#pragma omp simd
            for (int i = 0; i < C; i++)
                dx[i] = dx[i] + w0[i] * g0 + w1[i] * g1 + w2[i] * g2 + w3[i] * g3;
        }
        for (; oc < OC; oc++) {
            const float *w = j->weight + (size_t)oc * C;
            float g = d[oc];
#pragma omp simd
            for (int i = 0; i < C; i++)
                dx[i] += w[i] * g;
        }
    }
}

/* dweight rows: dweight[oc] += sum_n dout[n][oc] * inp[n]; dbias[oc] += sum_n dout[n][oc].
 * Four input rows a pass, in the order of n (the same bits as one a pass). */
static void matmul_dweight_rows(void *ctx, size_t begin, size_t end)
{
    const MatmulJob *j = ctx;
    int C = j->C, OC = j->OC, N = j->N;
    for (size_t oc = begin; oc < end; oc++) {
        float *dw = j->dweight + oc * (size_t)C;
        const float *g = j->dout + oc;
        float db = 0;
        int n = 0;
        for (; n + 4 <= N; n += 4) {
            const float *x0 = j->inp + (size_t)n * C, *x1 = x0 + C, *x2 = x1 + C, *x3 = x2 + C;
            float g0 = g[(size_t)n * OC], g1 = g[(size_t)(n + 1) * OC],
                  g2 = g[(size_t)(n + 2) * OC], g3 = g[(size_t)(n + 3) * OC];
#pragma omp simd
            for (int i = 0; i < C; i++)
                dw[i] = dw[i] + x0[i] * g0 + x1[i] * g1 + x2[i] * g2 + x3[i] * g3;
            db = db + g0 + g1 + g2 + g3;
        }
        for (; n < N; n++) {
            float gn = g[(size_t)n * OC];
            const float *x = j->inp + (size_t)n * C;
#pragma omp simd
            for (int i = 0; i < C; i++)
                dw[i] += x[i] * gn;
            db += gn;
        }
        if (j->dbias)
            j->dbias[oc] += db;
    }
}

void matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC,
                         WorkPool *wp)
{
    MatmulJob j = {.inp = inp, .weight = weight, .dout = dout, .dinp = dinp,
                   .dweight = dweight, .dbias = dbias, .N = N, .C = C, .OC = OC};
    run(wp, matmul_dinp_rows, &j, (size_t)N);
    run(wp, matmul_dweight_rows, &j, (size_t)OC);
}

/* ---- Grouped-query causal attention: GPT-2's with g == h, Llama's ---- */

void attention_gqa_forward_ref(float *out, float *preatt, float *att, const float *qkv, int B,
                               int T, int h, int g, int d)
{
    assert(g > 0 && h % g == 0);
    int row = (h + 2 * g) * d, group = h / g, hd = h * d;
    size_t k_at = (size_t)h * d, v_at = (size_t)(h + g) * d;
    float scale = 1.0f / sqrtf((float)d);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < h; j++) {
            size_t kv = (size_t)(j / group) * d;
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * row + (size_t)j * d;
                float *pre = preatt + (((size_t)b * h + j) * T + t) * T;
                float *a = att + (((size_t)b * h + j) * T + t) * T;
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * row + k_at + kv;
                    float v = 0;
                    for (int i = 0; i < d; i++)
                        v += q[i] * k[i];
                    v *= scale;
                    pre[t2] = v;
                    if (v > maxv)
                        maxv = v;
                }
                float sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    a[t2] = expf(pre[t2] - maxv);
                    sum += a[t2];
                }
                for (int t2 = 0; t2 < T; t2++)
                    a[t2] = t2 <= t ? a[t2] / sum : 0.0f;
                for (int t2 = t + 1; t2 < T; t2++)
                    pre[t2] = 0;
                float *o = out + ((size_t)b * T + t) * hd + (size_t)j * d;
                for (int i = 0; i < d; i++)
                    o[i] = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * row + v_at + kv;
                    for (int i = 0; i < d; i++)
                        o[i] += a[t2] * v[i];
                }
            }
        }
}

void attention_gqa_backward_ref(float *dqkv, float *dpreatt, float *datt, const float *dout,
                                const float *qkv, const float *att, int B, int T, int h, int g,
                                int d)
{
    assert(g > 0 && h % g == 0);
    int row = (h + 2 * g) * d, group = h / g, hd = h * d;
    size_t k_at = (size_t)h * d, v_at = (size_t)(h + g) * d;
    float scale = 1.0f / sqrtf((float)d);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < h; j++) {
            size_t kv = (size_t)(j / group) * d;
            for (int t = 0; t < T; t++) {
                const float *a = att + (((size_t)b * h + j) * T + t) * T;
                float *da = datt + (((size_t)b * h + j) * T + t) * T;
                float *dpre = dpreatt + (((size_t)b * h + j) * T + t) * T;
                const float *q = qkv + ((size_t)b * T + t) * row + (size_t)j * d;
                float *dq = dqkv + ((size_t)b * T + t) * row + (size_t)j * d;
                const float *dy = dout + ((size_t)b * T + t) * hd + (size_t)j * d;
                /* through the value product */
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * row + v_at + kv;
                    float *dv = dqkv + ((size_t)b * T + t2) * row + v_at + kv;
                    for (int i = 0; i < d; i++) {
                        da[t2] += v[i] * dy[i];
                        dv[i] += a[t2] * dy[i];
                    }
                }
                /* through the softmax */
                for (int t2 = 0; t2 <= t; t2++)
                    for (int t3 = 0; t3 <= t; t3++) {
                        float local = a[t2] * ((t2 == t3 ? 1.0f : 0.0f) - a[t3]);
                        dpre[t3] += local * da[t2];
                    }
                /* through the scores */
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * row + k_at + kv;
                    float *dk = dqkv + ((size_t)b * T + t2) * row + k_at + kv;
                    for (int i = 0; i < d; i++) {
                        dq[i] += k[i] * dpre[t2] * scale;
                        dk[i] += q[i] * dpre[t2] * scale;
                    }
                }
            }
        }
}

/* GPT-2's attention is grouped-query attention with as many kv heads as query heads: the
 * same layout of qkv and the same operations. */
void attention_forward_ref(float *out, float *preatt, float *att, const float *qkv, int B, int T,
                           int C, int NH)
{
    attention_gqa_forward_ref(out, preatt, att, qkv, B, T, NH, NH, C / NH);
}

void attention_backward_ref(float *dqkv, float *dpreatt, float *datt, const float *dout,
                            const float *qkv, const float *att, int B, int T, int C, int NH)
{
    attention_gqa_backward_ref(dqkv, dpreatt, datt, dout, qkv, att, B, T, NH, NH, C / NH);
}

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */

void gelu_forward_ref(float *out, const float *inp, int n)
{
    for (int i = 0; i < n; i++) {
        float x = inp[i], cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
    }
}

void gelu_backward_ref(float *dinp, const float *inp, const float *dout, int n)
{
    for (int i = 0; i < n; i++) {
        float x = inp[i], cube = 0.044715f * x * x * x;
        float arg = GELU_SCALE * (x + cube), th = tanhf(arg);
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) +
                      x * 0.5f * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += local * dout[i];
    }
}

void residual_forward_ref(float *out, const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void residual_backward_ref(float *da, float *db, const float *dout, int n)
{
    for (int i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

/* The sum of the exponentials in double: in float, 50257 of them (GPT-2's vocabulary) came out
 * about 1e-5 short, one-sided, which moved every loss by several 1e-6 from a float64 reference;
 * a double sum is exact to the float inputs' rounding. Each probability is the float
 * exponential divided in double, rounded once. */
void softmax_forward_ref(float *probs, const float *logits, int B, int T, int V)
{
    for (size_t r = 0; r < (size_t)B * T; r++) {
        const float *l = logits + r * V;
        float *p = probs + r * V;
        float maxv = -INFINITY;
        double sum = 0;
        for (int i = 0; i < V; i++)
            if (l[i] > maxv)
                maxv = l[i];
        for (int i = 0; i < V; i++) {
            p[i] = expf(l[i] - maxv);
            sum += p[i];
        }
        for (int i = 0; i < V; i++)
            p[i] = (float)(p[i] / sum);
    }
}

void crossentropy_forward_ref(float *losses, const float *probs, const int *targets, int B,
                              int T, int V)
{
    for (size_t r = 0; r < (size_t)B * T; r++)
        losses[r] = targets[r] < 0 ? 0.0f : -logf(probs[r * V + targets[r]]);
}

void crossentropy_softmax_backward_ref(float *dlogits, const float *dlosses, const float *probs,
                                       const int *targets, int B, int T, int V)
{
    for (size_t r = 0; r < (size_t)B * T; r++) {
        if (targets[r] < 0)
            continue;
        const float *p = probs + r * V;
        float *dl = dlogits + r * V;
        for (int i = 0; i < V; i++)
            dl[i] += (p[i] - (i == targets[r] ? 1.0f : 0.0f)) * dlosses[r];
    }
}
