/* Check suite for exec/cpu/llama_ops and llama_block: every op's backward against central
 * finite differences of its forward (L = sum(out * R) for random R), in test_gpt2_ops.c's
 * tolerance |fd - analytic| <= 2e-2 * max(|fd|, |analytic|) + 2e-3 with h = 1e-2 on O(1)
 * inputs; each forward against its formula evaluated in double; RoPE's properties and the
 * llama3 frequency table against values worked out here from transformers' formula; grouped-
 * query attention against gpt2_ops' attention (bit for bit at g == h, through repeated kv heads
 * at g < h); and a whole block's directional derivative along random directions of its input
 * and of every weight (2e-3 relative + 1e-4, as the GPT-2 model's, with a step of 1e-2 / |d|:
 * the block's curvature in the norm weights made 3e-2's truncation error reach the bound). The
 * block's bounds held with half their margin or more over 100 seeds. */
#include <float.h>
#include <math.h>

#include "cpu_backend.h"
#include "gpt2_ops.h"
#include "llama_block.h"
#include "llama_ops.h"
#include "gradcheck_testutil.h"
#include "testutil.h"

/* ---- RMSNorm ---- */
typedef struct RmsCtx {
    int N, C;
    float eps;
    float *inp, *w, *out, *rstd, *R;
} RmsCtx;

static double rms_loss(void *p)
{
    RmsCtx *c = p;
    rmsnorm_forward_ref(c->out, c->rstd, c->inp, c->w, c->N, c->C, c->eps);
    return dot(c->out, c->R, (size_t)c->N * c->C);
}

START_TEST(rmsnorm)
{
    RmsCtx c = {.N = 6, .C = 16, .eps = 1e-5f};
    size_t n = (size_t)c.N * c.C;
    c.inp = randv(n, 1), c.w = randv(c.C, 1), c.R = randv(n, 1);
    c.out = zeros(n), c.rstd = zeros(c.N);
    for (int i = 0; i < c.C; i++)
        c.inp[i] *= 1e-3f; /* row 0: mean square near eps, which must sit inside the root */
    rms_loss(&c);
    for (int r = 0; r < c.N; r++) {
        const float *x = c.inp + (size_t)r * c.C;
        double ms = 0;
        for (int i = 0; i < c.C; i++)
            ms += (double)x[i] * x[i] / c.C;
        double s = 1 / sqrt(ms + (double)c.eps);
        ck_assert_double_le(fabs(c.rstd[r] - s), 4e-6 * s);
        for (int i = 0; i < c.C; i++) {
            double ref = x[i] * s * c.w[i], got = c.out[(size_t)r * c.C + i];
            ck_assert_msg(fabs(got - ref) <= 1e-7 + 4e-6 * fabs(ref),
                          "rmsnorm out[%d][%d] %.9g, formula %.9g", r, i, got, ref);
        }
    }
    for (int i = 0; i < c.C; i++)
        c.inp[i] *= 1e3f; /* O(1) again for the finite differences' step */
    rms_loss(&c);
    float *dinp = zeros(n), *dw = zeros(c.C);
    rmsnorm_backward_ref(dinp, dw, c.R, c.inp, c.w, c.rstd, c.N, c.C);
    fd_check("rmsnorm dinp", c.inp, dinp, n, rms_loss, &c);
    fd_check("rmsnorm dweight", c.w, dw, c.C, rms_loss, &c);
}
END_TEST

/* ---- rotary embedding ---- */

/* Llama 3.1's rope_scaling; and one for d = 8 and theta 10000 that puts its four frequencies
 * in all three bands (wavelengths 6.3, 63, 628, 6283 against 16 and 64). */
static const RopeScaling llama31 = {.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                                    .original_max_seq = 8192};
static const RopeScaling small_bands = {.factor = 4, .low_freq_factor = 1,
                                        .high_freq_factor = 4,
                                        .original_max_seq = 64};

typedef struct RopeCtx {
    int B, T, h, g, d;
    const RopeTable *tab;
    float *qkv, *out, *R;
} RopeCtx;

static size_t rope_n(const RopeCtx *c)
{
    return (size_t)c->B * c->T * (c->h + 2 * c->g) * c->d;
}

static double rope_loss(void *p)
{
    RopeCtx *c = p;
    rope_forward_ref(c->out, c->qkv, c->B, c->T, c->h, c->g, c->d, c->tab);
    return dot(c->out, c->R, rope_n(c));
}

START_TEST(rope_gradient)
{
    RopeTable tab;
    Err e;
    ck_assert_int_eq(rope_table_init(&tab, 6, 8, 10000, &small_bands, &e), 0);
    RopeCtx c = {.B = 2, .T = 6, .h = 4, .g = 2, .d = 8, .tab = &tab};
    size_t n = rope_n(&c);
    c.qkv = randv(n, 1), c.R = randv(n, 1), c.out = zeros(n);
    float *dqkv = zeros(n);
    rope_backward_ref(dqkv, c.R, c.B, c.T, c.h, c.g, c.d, &tab);
    fd_check("rope dqkv", c.qkv, dqkv, n, rope_loss, &c);
    rope_table_free(&tab);
}
END_TEST

/* Rotate-half pairs (i, i + d/2) by t * inv_freq[i]; each pair's norm kept; position 0 the
 * identity; v copied; the backward of the output gives the input back. */
START_TEST(rope_properties)
{
    enum { B = 2, T = 7, H = 4, G = 2, D = 8, HALF = D / 2, ROW = (H + 2 * G) * D };
    RopeTable tab;
    Err e;
    ck_assert_int_eq(rope_table_init(&tab, T, D, 10000, &small_bands, &e), 0);
    double inv_freq[HALF];
    rope_inv_freq(inv_freq, D, 10000, &small_bands);
    size_t n = (size_t)B * T * ROW;
    float *x = randv(n, 1), *y = zeros(n), *back = zeros(n);
    rope_forward_ref(y, x, B, T, H, G, D, &tab);
    rope_backward_ref(back, y, B, T, H, G, D, &tab);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t r = ((size_t)b * T + t) * ROW;
            if (t == 0)
                ck_assert_int_eq(memcmp(y + r, x + r, ROW * sizeof(float)), 0);
            /* v: the last g heads */
            ck_assert_int_eq(memcmp(y + r + (H + G) * D, x + r + (H + G) * D,
                                    G * D * sizeof(float)), 0);
            for (int j = 0; j < H + G; j++)
                for (int i = 0; i < HALF; i++) {
                    size_t a = r + (size_t)j * D + i, z = a + HALF;
                    double ang = t * inv_freq[i], norm = hypot(x[a], x[z]);
                    double y1 = x[a] * cos(ang) - x[z] * sin(ang);
                    double y2 = x[z] * cos(ang) + x[a] * sin(ang);
                    ck_assert_msg(fabs(y[a] - y1) <= 1e-6 * norm && fabs(y[z] - y2) <= 1e-6 * norm,
                                  "b %d t %d head %d pair %d: (%g, %g), rotate-half (%g, %g)", b,
                                  t, j, i, y[a], y[z], y1, y2);
                    ck_assert_double_le(fabs(hypot(y[a], y[z]) - norm), 4 * FLT_EPSILON * norm);
                    ck_assert_double_le(fabs(back[a] - x[a]), 4 * FLT_EPSILON * norm);
                    ck_assert_double_le(fabs(back[z] - x[z]), 4 * FLT_EPSILON * norm);
                }
            for (int i = (H + G) * D; i < ROW; i++)
                ck_assert(back[r + i] == x[r + i]);
        }
    rope_table_free(&tab);
}
END_TEST

/* Llama 3.1 (theta 500000, d 128, factor 8, low 1, high 4, original 8192): low_freq_wavelen
 * 8192, high_freq_wavelen 2048, wavelen_i = 2 pi 500000^(i/64), so i <= 28 keep their
 * frequency, i >= 35 are divided by 8 and 29..34 are smoothed. */
START_TEST(rope_llama3_table)
{
    enum { D = 128, HALF = D / 2 };
    double plain[HALF], scaled[HALF];
    rope_inv_freq(plain, D, 500000, NULL);
    rope_inv_freq(scaled, D, 500000, &llama31);
    ck_assert(plain[0] == 1);
    ck_assert_double_le(fabs(plain[32] - 1 / sqrt(500000.0)), 1e-15 * plain[32]);
    ck_assert_double_le(fabs(plain[16] - pow(500000.0, -0.25)), 1e-15 * plain[16]);
    for (int i = 0; i < HALF; i++) {
        double f = 1 / pow(500000.0, 2.0 * i / D), wavelen = 2 * M_PI / f;
        ck_assert_double_le(fabs(plain[i] - f), 1e-15 * f);
        if (i > 0)
            ck_assert_double_lt(scaled[i], scaled[i - 1]);
        if (i <= 28) {
            ck_assert(scaled[i] == plain[i]);
            ck_assert_double_lt(wavelen, 2048);
        } else if (i >= 35) {
            ck_assert(scaled[i] == plain[i] / 8);
            ck_assert_double_gt(wavelen, 8192);
        } else {
            double smooth = (8192 / wavelen - 1) / (4 - 1);
            double want = (1 - smooth) * f / 8 + smooth * f;
            ck_assert_msg(fabs(scaled[i] - want) <= 1e-14 * want, "inv_freq[%d] %.17g, want %.17g",
                          i, scaled[i], want);
            ck_assert_double_gt(scaled[i], plain[i] / 8);
            ck_assert_double_lt(scaled[i], plain[i]);
        }
    }
    /* the same formula evaluated apart from this code (Python, float64) */
    ck_assert_double_le(fabs(scaled[29] - 0.002166570763503359), 1e-12 * scaled[29]);
    ck_assert_double_le(fabs(scaled[32] - 0.0005248461609929547), 1e-12 * scaled[32]);
    ck_assert_double_le(fabs(scaled[34] - 0.00017850781276799638), 1e-12 * scaled[34]);

    /* the table: cos and sin of t * inv_freq in double, rounded once */
    RopeTable tab;
    Err e;
    const int T = 8192;
    ck_assert_int_eq(rope_table_init(&tab, T, D, 500000, &llama31, &e), 0);
    ck_assert_int_eq(tab.T, T);
    ck_assert_int_eq(tab.half, HALF);
    const int ts[] = {0, 1, 2, 100, 4095, T - 1};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++)
        for (int i = 0; i < HALF; i++) {
            int t = ts[k];
            double ang = (double)t * scaled[i];
            ck_assert(tab.cos[(size_t)t * HALF + i] == (float)cos(ang));
            ck_assert(tab.sin[(size_t)t * HALF + i] == (float)sin(ang));
        }
    for (int i = 0; i < HALF; i++)
        ck_assert(tab.cos[i] == 1 && tab.sin[i] == 0);
    rope_table_free(&tab);
    rope_table_free(&tab); /* a freed table is a zeroed one */
}
END_TEST

/* ---- grouped-query attention ---- */
typedef struct GqaCtx {
    int B, T, h, g, d;
    float *qkv, *out, *pre, *att, *R;
} GqaCtx;

static double gqa_loss(void *p)
{
    GqaCtx *c = p;
    attention_gqa_forward_ref(c->out, c->pre, c->att, c->qkv, c->B, c->T, c->h, c->g, c->d);
    return dot(c->out, c->R, (size_t)c->B * c->T * c->h * c->d);
}

START_TEST(attention_gqa_gradient)
{
    const int kv_heads[] = {2, 1, 4}; /* g < h twice, and g == h */
    for (int k = 0; k < 3; k++) {
        GqaCtx c = {.B = 2, .T = 5, .h = 4, .g = kv_heads[k], .d = 4};
        int row = (c.h + 2 * c.g) * c.d;
        size_t nq = (size_t)c.B * c.T * row, no = (size_t)c.B * c.T * c.h * c.d;
        size_t na = (size_t)c.B * c.h * c.T * c.T;
        c.qkv = randv(nq, 1), c.R = randv(no, 1), c.out = zeros(no), c.pre = zeros(na);
        c.att = zeros(na);
        gqa_loss(&c);
        float *dqkv = zeros(nq), *dpre = zeros(na), *datt = zeros(na);
        attention_gqa_backward_ref(dqkv, dpre, datt, c.R, c.qkv, c.att, c.B, c.T, c.h, c.g, c.d);
        char what[64];
        snprintf(what, sizeof what, "attention h %d g %d dqkv", c.h, c.g);
        fd_check(what, c.qkv, dqkv, nq, gqa_loss, &c);
        /* causality: the outputs before the last token of batch 0 ignore its q, k and v */
        float *probe = zeros(no);
        memcpy(probe, c.out, no * sizeof(float));
        for (int i = 0; i < row; i++)
            c.qkv[(size_t)(c.T - 1) * row + i] += 5;
        gqa_loss(&c);
        ck_assert_int_eq(memcmp(probe, c.out, (size_t)(c.T - 1) * c.h * c.d * sizeof(float)), 0);
    }
}
END_TEST

/* g == h on GPT-2's layout ([q | k | v] of C each, heads contiguous): gpt2_ops' attention, bit
 * for bit, forward and backward. */
START_TEST(attention_gqa_equals_gpt2)
{
    enum { B = 2, T = 6, NH = 3, HS = 4, C = NH * HS };
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = randv(nq, 1), *dout = randv(no, 1);
    float *o1 = zeros(no), *p1 = zeros(na), *a1 = zeros(na), *o2 = zeros(no), *p2 = zeros(na);
    float *a2 = zeros(na);
    attention_forward_ref(o1, p1, a1, qkv, B, T, C, NH);
    attention_gqa_forward_ref(o2, p2, a2, qkv, B, T, NH, NH, HS);
    ck_assert_int_eq(memcmp(o1, o2, no * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(p1, p2, na * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a1, a2, na * sizeof(float)), 0);
    float *d1 = zeros(nq), *d2 = zeros(nq);
    attention_backward_ref(d1, zeros(na), zeros(na), dout, qkv, a1, B, T, C, NH);
    attention_gqa_backward_ref(d2, zeros(na), zeros(na), dout, qkv, a2, B, T, NH, NH, HS);
    ck_assert_int_eq(memcmp(d1, d2, nq * sizeof(float)), 0);
}
END_TEST

/* g < h is Hugging Face's repeat_kv: query head j reads kv head j / (h/g). The same as GPT-2's
 * attention over a qkv whose kv heads are repeated (forward bit for bit; a kv head's gradient
 * is its query heads' summed, in another order, so to rounding). */
START_TEST(attention_gqa_repeat_kv)
{
    enum { B = 2, T = 5, H = 6, G = 2, D = 4, ROW = (H + 2 * G) * D, C = H * D };
    size_t nq = (size_t)B * T * ROW, nx = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    size_t na = (size_t)B * H * T * T;
    float *qkv = randv(nq, 1), *x = zeros(nx), *dout = randv(no, 1);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int j = 0; j < H; j++) {
            int kv = j / (H / G);
            memcpy(x + r * 3 * C + j * D, qkv + r * ROW + j * D, D * sizeof(float));
            memcpy(x + r * 3 * C + C + j * D, qkv + r * ROW + (H + kv) * D, D * sizeof(float));
            memcpy(x + r * 3 * C + 2 * C + j * D, qkv + r * ROW + (H + G + kv) * D,
                   D * sizeof(float));
        }
    float *o1 = zeros(no), *a1 = zeros(na), *o2 = zeros(no), *a2 = zeros(na);
    attention_forward_ref(o1, zeros(na), a1, x, B, T, C, H);
    attention_gqa_forward_ref(o2, zeros(na), a2, qkv, B, T, H, G, D);
    ck_assert_int_eq(memcmp(o1, o2, no * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(a1, a2, na * sizeof(float)), 0);
    float *dx = zeros(nx), *dq = zeros(nq);
    attention_backward_ref(dx, zeros(na), zeros(na), dout, x, a1, B, T, C, H);
    attention_gqa_backward_ref(dq, zeros(na), zeros(na), dout, qkv, a2, B, T, H, G, D);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int i = 0; i < ROW; i++) {
            double want = 0;
            if (i < H * D) {
                want = dx[r * 3 * C + i];
            } else {
                int kv = (i - H * D) / D % G, v = i >= (H + G) * D, at = i % D;
                for (int j = kv * (H / G); j < (kv + 1) * (H / G); j++)
                    want += dx[r * 3 * C + (1 + v) * C + j * D + at];
            }
            double got = dq[r * ROW + i];
            ck_assert_msg(fabs(got - want) <= 1e-6 + 1e-5 * fabs(want),
                          "row %zu [%d]: %.9g, repeated heads %.9g", r, i, got, want);
        }
}
END_TEST

/* ---- SwiGLU ---- */
typedef struct SwCtx {
    int N, F;
    float *gate_up, *out, *R;
} SwCtx;

static double sw_loss(void *p)
{
    SwCtx *c = p;
    swiglu_forward_ref(c->out, c->gate_up, c->N, c->F);
    return dot(c->out, c->R, (size_t)c->N * c->F);
}

START_TEST(swiglu)
{
    SwCtx c = {.N = 5, .F = 8};
    size_t n = (size_t)c.N * c.F;
    c.gate_up = randv(2 * n, 2), c.R = randv(n, 1), c.out = zeros(n);
    c.gate_up[0] = -100, c.gate_up[1] = 100; /* expf(100) overflows: silu must not */
    sw_loss(&c);
    for (int r = 0; r < c.N; r++)
        for (int i = 0; i < c.F; i++) {
            double gate = c.gate_up[(size_t)r * 2 * c.F + i];
            double up = c.gate_up[(size_t)r * 2 * c.F + c.F + i];
            double ref = gate / (1 + exp(-gate)) * up, got = c.out[(size_t)r * c.F + i];
            ck_assert_msg(fabs(got - ref) <= 1e-7 + 1e-6 * fabs(ref),
                          "swiglu out[%d][%d] %.9g, formula %.9g", r, i, got, ref);
        }
    float *d = zeros(2 * n);
    swiglu_backward_ref(d, c.R, c.gate_up, c.N, c.F);
    ck_assert(isfinite(d[0]) && fabs(d[0]) < 1e-30);
    ck_assert_double_le(fabs(d[1] - c.R[0 * c.F + 1] * c.gate_up[c.F + 1]), 1e-5);
    fd_check("swiglu dgate_up", c.gate_up, d, 2 * n, sw_loss, &c);
}
END_TEST

/* ---- a whole block, op by op ---- */
typedef struct BlockCtx {
    LlamaDims dims;
    LlamaBlockView w, dw;
    LlamaBlockActs a;
    LlamaBlockGrads g;
    float *R; /* (N,C) */
    WorkPool *wp;
} BlockCtx;

/* Random weights (norm weights near 1, matrices of sd 0.3), zeroed activations, gradients and
 * weight gradients. */
static void block_init(BlockCtx *k, const LlamaDims *dims, bool bias)
{
    const LlamaDims *m = dims;
    size_t N = (size_t)m->B * m->T, C = m->C, F = m->F, QKV = (size_t)(m->h + 2 * m->g) * m->d;
    size_t HD = (size_t)m->h * m->d, A = (size_t)m->B * m->h * m->T * m->T;
    *k = (BlockCtx){.dims = *dims};
    k->w = (LlamaBlockView){.norm1_w = randv(C, 0.1), .qkv_w = randv(QKV * C, 0.3),
                            .qkv_b = bias ? randv(QKV, 0.3) : NULL, .o_w = randv(C * HD, 0.3),
                            .norm2_w = randv(C, 0.1), .gate_up_w = randv(2 * F * C, 0.3),
                            .down_w = randv(C * F, 0.3)};
    for (size_t i = 0; i < C; i++)
        k->w.norm1_w[i] += 1, k->w.norm2_w[i] += 1;
    k->dw = (LlamaBlockView){.norm1_w = zeros(C), .qkv_w = zeros(QKV * C),
                             .qkv_b = bias ? zeros(QKV) : NULL, .o_w = zeros(C * HD),
                             .norm2_w = zeros(C), .gate_up_w = zeros(2 * F * C),
                             .down_w = zeros(C * F)};
    k->a = (LlamaBlockActs){.in = randv(N * C, 1), .norm1 = zeros(N * C), .norm1_rstd = zeros(N),
                            .qkv = zeros(N * QKV), .rope = zeros(N * QKV), .attn = zeros(N * HD),
                            .att = zeros(A), .preatt = zeros(A), .o = zeros(N * C),
                            .res1 = zeros(N * C), .norm2 = zeros(N * C), .norm2_rstd = zeros(N),
                            .gate_up = zeros(N * 2 * F), .swiglu = zeros(N * F),
                            .down = zeros(N * C), .out = zeros(N * C)};
    k->R = randv(N * C, 1);
    k->g = (LlamaBlockGrads){.din = zeros(N * C), .norm1 = zeros(N * C), .qkv = zeros(N * QKV),
                             .rope = zeros(N * QKV), .attn = zeros(N * HD), .preatt = zeros(A),
                             .att = zeros(A), .o = zeros(N * C), .res1 = zeros(N * C),
                             .norm2 = zeros(N * C), .gate_up = zeros(N * 2 * F),
                             .swiglu = zeros(N * F), .down = zeros(N * C), .dout = k->R};
}

/* L = sum(out * R) after every op's forward, in order. */
static double block_loss(void *p)
{
    BlockCtx *k = p;
    for (int op = LLAMA_NORM1; op < LLAMA_OPS; op++)
        llama_block_forward_op(op, &k->dims, &k->w, &k->a, k->wp);
    return dot(k->a.out, k->R, (size_t)k->dims.B * k->dims.T * k->dims.C);
}

/* dL/de along a random direction of x equals <grad, direction>. The derivative along a random
 * direction is normal with deviation |grad|; one under a quarter of that (a direction nearly
 * orthogonal to the gradient, 1 in 5) checks fp32 noise more than the gradient, and is drawn
 * again (up to 8 times: a zero gradient still fails). */
static void block_directional(const char *what, BlockCtx *k, float *x, const float *grad,
                              size_t n)
{
    float *dir = randv(n, 1), *x0 = keep(malloc(n * sizeof(float)));
    double an = dot(grad, dir, n), norm = sqrt(dot(grad, grad, n));
    for (int tries = 1; tries < 8 && fabs(an) < 0.25 * norm; tries++) {
        for (size_t i = 0; i < n; i++)
            dir[i] = (float)gsl_ran_gaussian(tu_rng, 1);
        an = dot(grad, dir, n);
    }
    memcpy(x0, x, n * sizeof(float));
    double eps = 1e-2 / sqrt(dot(dir, dir, n)), l[2];
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < n; i++)
            x[i] = x0[i] + (float)((s ? -eps : eps) * dir[i]);
        l[s] = block_loss(k);
    }
    memcpy(x, x0, n * sizeof(float));
    double fd = (l[0] - l[1]) / (2 * eps);
    ck_assert_msg(fabs(fd - an) <= 2e-3 * fabs(an) + 1e-4,
                  "%s: finite difference %.6g, <grad, d> %.6g", what, fd, an);
}

START_TEST(block_ops_by_name)
{
    for (int op = LLAMA_NORM1; op < LLAMA_OPS; op++)
        ck_assert(llama_block_op_has_backward(op) == (op != LLAMA_RES1 && op != LLAMA_RES2));
}
END_TEST

/* Forward of every op, backward of every op with one last to first, then each tensor's
 * gradient along a random direction: Llama's block (g < h, no bias, llama3-scaled RoPE) and
 * Qwen2's (qkv bias), and one with g == h; h d differs from C in the first two. */
START_TEST(block_directional_derivative)
{
    const struct {
        int h, g, d;
        bool bias;
        const RopeScaling *scaling;
    } cases[] = {{4, 2, 6, false, &small_bands}, {4, 2, 6, true, NULL}, {2, 2, 8, true, NULL}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        RopeTable tab;
        Err e;
        ck_assert_int_eq(rope_table_init(&tab, 8, cases[c].d, 10000, cases[c].scaling, &e), 0);
        LlamaDims dims = {.B = 2, .T = 5, .C = 16, .F = 24, .h = cases[c].h, .g = cases[c].g,
                          .d = cases[c].d, .eps = 1e-5f, .rope = &tab};
        BlockCtx k;
        block_init(&k, &dims, cases[c].bias);
        block_loss(&k);
        for (int op = LLAMA_OPS - 1; op >= LLAMA_NORM1; op--)
            if (llama_block_op_has_backward(op))
                llama_block_backward_op(op, &k.dims, &k.w, &k.dw, &k.a, &k.g, NULL);
        size_t N = (size_t)dims.B * dims.T, C = dims.C, F = dims.F;
        size_t QKV = (size_t)(dims.h + 2 * dims.g) * dims.d, HD = (size_t)dims.h * dims.d;
        const struct {
            const char *name;
            float *x, *grad;
            size_t n;
        } t[] = {{"input", k.a.in, k.g.din, N * C},
                 {"norm1", k.w.norm1_w, k.dw.norm1_w, C},
                 {"qkv", k.w.qkv_w, k.dw.qkv_w, QKV * C},
                 {"qkv bias", k.w.qkv_b, k.dw.qkv_b, cases[c].bias ? QKV : 0},
                 {"o", k.w.o_w, k.dw.o_w, C * HD},
                 {"norm2", k.w.norm2_w, k.dw.norm2_w, C},
                 {"gate_up", k.w.gate_up_w, k.dw.gate_up_w, 2 * F * C},
                 {"down", k.w.down_w, k.dw.down_w, C * F}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            if (t[i].n == 0)
                continue;
            char what[96];
            snprintf(what, sizeof what, "block h %d g %d%s: %s", dims.h, dims.g,
                     cases[c].bias ? " with bias" : "", t[i].name);
            block_directional(what, &k, t[i].x, t[i].grad, t[i].n);
        }
        /* the matmuls split over a WorkPool: the same block output, bit for bit */
        size_t n = N * C;
        float *out1 = keep(malloc(n * sizeof(float)));
        block_loss(&k);
        memcpy(out1, k.a.out, n * sizeof(float));
        WorkPool wp;
        ck_assert_int_eq(workpool_init(&wp, 3, &e), 0);
        k.wp = &wp;
        block_loss(&k);
        ck_assert_int_eq(memcmp(out1, k.a.out, n * sizeof(float)), 0);
        workpool_free(&wp);
        rope_table_free(&tab);
    }
}
END_TEST

/* The whole Llama model through the CPU backend (llama_cpu.c): dL/de along a random direction
 * d equals <grad, d>, with kv heads shared (g < h) and not, the head tied and untied, Qwen2's
 * biases and llama3 rope scaling; and the embedding's rows gather and scatter as tokens name
 * them. */
START_TEST(model_directional_derivative)
{
    const ModelConfig base = {.name = "check", .arch = ARCH_LLAMA, .n_layer = 2, .d_model = 16,
                              .n_head = 4, .n_kv_head = 2, .d_ff = 40, .vocab = 32,
                              .max_seq = 8, .dtype = DTYPE_FP32};
    for (int k = 0; k < 4; k++) {
        ModelConfig c = base;
        c.tied = k == 1;
        c.qkv_bias = k == 2;
        c.n_kv_head = k == 3 ? 4 : 2;
        if (k == 2)
            c.rope_scaling = (RopeScaling){.factor = 4, .low_freq_factor = 1,
                                           .high_freq_factor = 4, .original_max_seq = 4};
        Backend *b;
        Err e;
        ck_assert_msg(backend_cpu.create(&b, &c, 2, 8, NULL, &e) == 0, "%s", e.msg);
        size_t P = b->n_params;
        ck_assert_int_eq((int64_t)P, model_param_count(&c));
        float *p = randv(P, 0.2), *d = randv(P, 1), *g = zeros(P), *q = zeros(P);
        int inputs[16], targets[16];
        for (int i = 0; i < 16; i++)
            inputs[i] = (int)gsl_rng_uniform_int(tu_rng, 32), targets[i] = (i * 7 + 3) % 32;
        float loss;
        ck_assert_int_eq(b->ops->write_state(b, p, NULL, NULL, &e), 0);
        ck_assert_int_eq(b->ops->step(b, inputs, targets, true, &loss, &e), 0);
        ck_assert_int_eq(b->ops->read_grads(b, g, &e), 0);
        double an = dot(g, d, P), norm = sqrt(dot(d, d, P));
        const double eps = 3e-2 / norm;
        double l[2];
        for (int s = 0; s < 2; s++) {
            for (size_t i = 0; i < P; i++)
                q[i] = p[i] + (float)((s ? -eps : eps) * d[i]);
            ck_assert_int_eq(b->ops->write_state(b, q, NULL, NULL, &e), 0);
            ck_assert_int_eq(b->ops->step(b, inputs, targets, false, &loss, &e), 0);
            l[s] = loss;
        }
        double fd = (l[0] - l[1]) / (2 * eps);
        printf("llama directional derivative (case %d): finite difference %.6f, <grad, d> "
               "%.6f\n", k, fd, an);
        ck_assert_msg(fabs(fd - an) <= 2e-3 * fabs(an) + 1e-4, "case %d: fd %.6g vs %.6g", k,
                      fd, an);
        /* the embedding's gradient: only the rows of tokens in the batch */
        bool used[32] = {false};
        for (int i = 0; i < 16; i++)
            used[inputs[i]] = true;
        for (int t = 0; t < 32 && !c.tied; t++)
            for (int j = 0; j < 16; j++)
                ck_assert(used[t] || g[(size_t)t * 16 + j] == 0);
        b->ops->destroy(b);
    }
}
END_TEST

int main(void)
{
    tu_rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(tu_rng, 27);
    Suite *s = suite_create("llama_ops");
    TCase *tc = tcase_create("llama_ops");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, tu_free_owned);
    tcase_add_test(tc, rmsnorm);
    tcase_add_test(tc, model_directional_derivative);
    tcase_add_test(tc, rope_gradient);
    tcase_add_test(tc, rope_properties);
    tcase_add_test(tc, rope_llama3_table);
    tcase_add_test(tc, attention_gqa_gradient);
    tcase_add_test(tc, attention_gqa_equals_gpt2);
    tcase_add_test(tc, attention_gqa_repeat_kv);
    tcase_add_test(tc, swiglu);
    tcase_add_test(tc, block_ops_by_name);
    tcase_add_test(tc, block_directional_derivative);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    gsl_rng_free(tu_rng);
    return rc;
}
