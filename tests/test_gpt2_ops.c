/* Check suite for exec/cpu/gpt2_ops and the CPU backend: every op's backward against central
 * finite differences of its forward (L = sum(out * R) for random R), and the whole model's
 * gradient against a directional derivative of the loss. fp32 throughout, so the tolerance is
 * |fd - analytic| <= 2e-2 * max(|fd|, |analytic|) + 2e-3 with h = 1e-2 on O(1) inputs; the
 * cross-entropy at GPT-2's vocabulary against a float64 reference; and masked targets (the
 * loss mask's DATA_IGNORE) left out exactly, by the op and by the backend's mean and gradient. */
#include <errno.h>
#include <math.h>

#include "cpu_backend.h"
#include "gpt2_layout.h"
#include "gpt2_ops.h"
#include "gradcheck_testutil.h"
#include "testutil.h"

/* ---- layernorm ---- */
typedef struct LnCtx {
    int N, C;
    float *inp, *w, *b, *out, *mean, *rstd, *R;
} LnCtx;

static double ln_loss(void *p)
{
    LnCtx *c = p;
    layernorm_forward_ref(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return dot(c->out, c->R, (size_t)c->N * c->C);
}

START_TEST(layernorm)
{
    LnCtx c = {.N = 6, .C = 16};
    size_t n = (size_t)c.N * c.C;
    c.inp = randv(n, 1), c.w = randv(c.C, 1), c.b = randv(c.C, 1), c.R = randv(n, 1);
    c.out = zeros(n), c.mean = zeros(c.N), c.rstd = zeros(c.N);
    float *dinp = zeros(n), *dw = zeros(c.C), *db = zeros(c.C);
    ln_loss(&c);
    layernorm_backward_ref(dinp, dw, db, c.R, c.inp, c.w, c.mean, c.rstd, c.N, c.C);
    fd_check("layernorm dinp", c.inp, dinp, n, ln_loss, &c);
    fd_check("layernorm dweight", c.w, dw, c.C, ln_loss, &c);
    fd_check("layernorm dbias", c.b, db, c.C, ln_loss, &c);
}
END_TEST

/* ---- matmul ---- */
typedef struct MmCtx {
    int N, C, OC;
    float *inp, *w, *b, *out, *R;
} MmCtx;

static double mm_loss(void *p)
{
    MmCtx *c = p;
    matmul_forward_ref(c->out, c->inp, c->w, c->b, c->N, c->C, c->OC, NULL);
    return dot(c->out, c->R, (size_t)c->N * c->OC);
}

START_TEST(matmul)
{
    MmCtx c = {.N = 5, .C = 7, .OC = 9};
    c.inp = randv((size_t)c.N * c.C, 1), c.w = randv((size_t)c.OC * c.C, 1);
    c.b = randv(c.OC, 1), c.R = randv((size_t)c.N * c.OC, 1), c.out = zeros((size_t)c.N * c.OC);
    float *dinp = zeros((size_t)c.N * c.C), *dw = zeros((size_t)c.OC * c.C), *db = zeros(c.OC);
    matmul_backward_ref(dinp, dw, db, c.R, c.inp, c.w, c.N, c.C, c.OC, NULL);
    fd_check("matmul dinp", c.inp, dinp, (size_t)c.N * c.C, mm_loss, &c);
    fd_check("matmul dweight", c.w, dw, (size_t)c.OC * c.C, mm_loss, &c);
    fd_check("matmul dbias", c.b, db, c.OC, mm_loss, &c);
    /* threaded = single-threaded, exactly */
    WorkPool wp;
    Err e;
    ck_assert_int_eq(workpool_init(&wp, 3, &e), 0);
    float *o1 = zeros((size_t)c.N * c.OC);
    matmul_forward_ref(o1, c.inp, c.w, c.b, c.N, c.C, c.OC, &wp);
    mm_loss(&c);
    ck_assert_int_eq(memcmp(o1, c.out, (size_t)c.N * c.OC * sizeof(float)), 0);
    workpool_free(&wp);
}
END_TEST

/* ---- attention ---- */
typedef struct AtCtx {
    int B, T, C, NH;
    float *qkv, *out, *pre, *att, *R;
} AtCtx;

static double at_loss(void *p)
{
    AtCtx *c = p;
    attention_forward_ref(c->out, c->pre, c->att, c->qkv, c->B, c->T, c->C, c->NH);
    return dot(c->out, c->R, (size_t)c->B * c->T * c->C);
}

START_TEST(attention)
{
    AtCtx c = {.B = 2, .T = 5, .C = 8, .NH = 2};
    size_t nq = (size_t)c.B * c.T * 3 * c.C, no = (size_t)c.B * c.T * c.C;
    size_t na = (size_t)c.B * c.NH * c.T * c.T;
    c.qkv = randv(nq, 1), c.R = randv(no, 1), c.out = zeros(no), c.pre = zeros(na);
    c.att = zeros(na);
    at_loss(&c);
    float *dqkv = zeros(nq), *dpre = zeros(na), *datt = zeros(na);
    attention_backward_ref(dqkv, dpre, datt, c.R, c.qkv, c.att, c.B, c.T, c.C, c.NH);
    fd_check("attention dqkv", c.qkv, dqkv, nq, at_loss, &c);
    /* causality: the output at t does not depend on t2 > t */
    float *probe = zeros(no);
    memcpy(probe, c.out, no * sizeof(float));
    c.qkv[(size_t)(c.T - 1) * 3 * c.C] += 5; /* q of the last token of batch 0 */
    c.qkv[(size_t)(c.T - 1) * 3 * c.C + c.C] += 5; /* and its k */
    at_loss(&c);
    for (int t = 0; t < c.T - 1; t++)
        for (int i = 0; i < c.C; i++)
            ck_assert(probe[(size_t)t * c.C + i] == c.out[(size_t)t * c.C + i]);
}
END_TEST

/* ---- gelu, encoder, softmax + cross-entropy ---- */
typedef struct GeCtx {
    int n;
    float *inp, *out, *R;
} GeCtx;

static double ge_loss(void *p)
{
    GeCtx *c = p;
    gelu_forward_ref(c->out, c->inp, c->n);
    return dot(c->out, c->R, (size_t)c->n);
}

START_TEST(gelu)
{
    GeCtx c = {.n = 40};
    c.inp = randv(40, 2), c.R = randv(40, 1), c.out = zeros(40);
    float *d = zeros(40);
    gelu_backward_ref(d, c.inp, c.R, 40);
    fd_check("gelu", c.inp, d, 40, ge_loss, &c);
}
END_TEST

typedef struct EnCtx {
    int B, T, C;
    int *inp;
    float *wte, *wpe, *out, *R;
} EnCtx;

static double en_loss(void *p)
{
    EnCtx *c = p;
    encoder_forward_ref(c->out, c->inp, c->wte, c->wpe, c->B, c->T, c->C);
    return dot(c->out, c->R, (size_t)c->B * c->T * c->C);
}

START_TEST(encoder)
{
    int inp[6] = {3, 1, 3, 0, 2, 3}; /* repeated tokens accumulate */
    EnCtx c = {.B = 2, .T = 3, .C = 4, .inp = inp};
    c.wte = randv(16, 1), c.wpe = randv(12, 1), c.R = randv(24, 1), c.out = zeros(24);
    float *dwte = zeros(16), *dwpe = zeros(12);
    encoder_backward_ref(dwte, dwpe, c.R, inp, 2, 3, 4);
    fd_check("encoder dwte", c.wte, dwte, 16, en_loss, &c);
    fd_check("encoder dwpe", c.wpe, dwpe, 12, en_loss, &c);
}
END_TEST

typedef struct CeCtx {
    int B, T, V;
    int *targets;
    float *logits, *probs, *losses, *R;
} CeCtx;

static double ce_loss(void *p)
{
    CeCtx *c = p;
    softmax_forward_ref(c->probs, c->logits, c->B, c->T, c->V);
    crossentropy_forward_ref(c->losses, c->probs, c->targets, c->B, c->T, c->V);
    return dot(c->losses, c->R, (size_t)c->B * c->T);
}

START_TEST(softmax_crossentropy)
{
    int targets[6] = {0, 4, 2, 2, 1, 3};
    CeCtx c = {.B = 2, .T = 3, .V = 5, .targets = targets};
    c.logits = randv(30, 2), c.probs = zeros(30), c.losses = zeros(6), c.R = randv(6, 1);
    ce_loss(&c);
    float *d = zeros(30);
    crossentropy_softmax_backward_ref(d, c.R, c.probs, targets, 2, 3, 5);
    fd_check("softmax+cross-entropy", c.logits, d, 30, ce_loss, &c);
}
END_TEST

/* The central finite difference of b's loss on (inputs, targets) at p along d (P values): the
 * directional derivative that <grad, d> must match. */
static double loss_fd(Backend *b, const float *p, const float *d, size_t P, const int *inputs,
                      const int *targets)
{
    const double eps = 3e-2 / sqrt(dot(d, d, P)); /* fp32 loss noise ~1e-7 stays small */
    float *q = zeros(P), loss;
    double l[2];
    Err e;
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < P; i++)
            q[i] = p[i] + (float)((k ? -eps : eps) * d[i]);
        ck_assert_int_eq(b->ops->write_state(b, q, NULL, NULL, &e), 0);
        ck_assert_int_eq(b->ops->step(b, inputs, targets, false, &loss, &e), 0);
        l[k] = loss;
    }
    return (l[0] - l[1]) / (2 * eps);
}

/* A negative target (a masked one) is left out exactly: its loss is 0 and its row of dlogits
 * is left as it was, bit for bit; the other rows are what the unmasked call gives them */
START_TEST(crossentropy_masked_rows)
{
    int targets[6] = {0, 4, 2, 2, 1, 3}, masked[6] = {0, -1, 2, 2, -1, 3};
    float *logits = randv(30, 2), *probs = zeros(30), *losses = zeros(6), *mlosses = zeros(6);
    float *dl = randv(6, 1), *d = randv(30, 1), *md = zeros(30), *d0 = zeros(30);
    memcpy(md, d, 30 * sizeof *d);
    memcpy(d0, d, 30 * sizeof *d);
    softmax_forward_ref(probs, logits, 2, 3, 5);
    crossentropy_forward_ref(losses, probs, targets, 2, 3, 5);
    crossentropy_forward_ref(mlosses, probs, masked, 2, 3, 5);
    crossentropy_softmax_backward_ref(d, dl, probs, targets, 2, 3, 5);
    crossentropy_softmax_backward_ref(md, dl, probs, masked, 2, 3, 5);
    for (int r = 0; r < 6; r++) {
        bool off = masked[r] < 0;
        ck_assert(mlosses[r] == (off ? 0.0f : losses[r]));
        ck_assert_int_eq(memcmp(md + r * 5, (off ? d0 : d) + r * 5, 5 * sizeof *md), 0);
    }
}
END_TEST

/* The CPU backend with masked targets: the loss is the mean over the counted targets and its
 * gradient that mean's (a directional derivative), complementary masks add up to the unmasked
 * step (losses and gradients weighted by their counts), and a batch with every target masked
 * has loss 0 and gradients exactly 0 */
START_TEST(model_masked_loss)
{
    const ModelConfig c = {.name = "check", .n_layer = 1, .d_model = 16, .n_head = 4,
                           .d_ff = 48, .vocab = 32, .max_seq = 8, .tied = true,
                           .dtype = DTYPE_FP32};
    enum { N = 16 };
    Backend *b;
    Err e;
    ck_assert_int_eq(backend_cpu.create(&b, &c, 2, 8, NULL, &e), 0);
    size_t P = b->n_params;
    float *p = randv(P, 0.2), *dir = randv(P, 1);
    float *g = zeros(P), *ga = zeros(P), *gb = zeros(P);
    int inputs[N], targets[N], ta[N], tb[N], none[N];
    for (int i = 0; i < N; i++) {
        inputs[i] = (int)gsl_rng_uniform_int(tu_rng, 32), targets[i] = (i * 7 + 3) % 32;
        ta[i] = i % 3 ? targets[i] : DATA_IGNORE; /* 10 counted */
        tb[i] = i % 3 ? DATA_IGNORE : targets[i]; /* 6 */
        none[i] = DATA_IGNORE;
    }
    float loss, la, lb;
    ck_assert_int_eq(b->ops->write_state(b, p, NULL, NULL, &e), 0);
    ck_assert_int_eq(b->ops->step(b, inputs, targets, true, &loss, &e), 0);
    ck_assert_int_eq(b->ops->read_grads(b, g, &e), 0);
    ck_assert_int_eq(b->ops->step(b, inputs, tb, true, &lb, &e), 0);
    ck_assert_int_eq(b->ops->read_grads(b, gb, &e), 0);
    ck_assert_int_eq(b->ops->step(b, inputs, ta, true, &la, &e), 0);
    ck_assert_int_eq(b->ops->read_grads(b, ga, &e), 0);
    ck_assert_int_eq(backend_count_targets(N, ta), 10);
    ck_assert_msg(fabs((10.0 * la + 6.0 * lb) / N - loss) <= 1e-6 * loss, "%.9g %.9g %.9g", la,
                  lb, loss);
    for (size_t i = 0; i < P; i++) {
        double sum = (10.0 * ga[i] + 6.0 * gb[i]) / N;
        ck_assert_msg(fabs(sum - g[i]) <= 1e-7 + 1e-4 * fabs(g[i]), "grad %zu: %.9g vs %.9g", i,
                      sum, g[i]);
    }
    /* ta's gradient is its loss's: the directional derivative of the masked loss */
    double an = dot(ga, dir, P), fd = loss_fd(b, p, dir, P, inputs, ta);
    ck_assert_msg(fabs(fd - an) <= 2e-3 * fabs(an) + 1e-4, "fd %.6g vs %.6g", fd, an);
    ck_assert_int_eq(b->ops->write_state(b, p, NULL, NULL, &e), 0);
    ck_assert_int_eq(b->ops->step(b, inputs, none, true, &loss, &e), 0);
    ck_assert(loss == 0.0f);
    ck_assert_int_eq(b->ops->read_grads(b, g, &e), 0);
    for (size_t i = 0; i < P; i++)
        ck_assert(g[i] == 0.0f);
    /* a target below -1 is still outside the vocabulary */
    none[3] = -2;
    ck_assert_int_eq(b->ops->step(b, inputs, none, false, &loss, &e), -EINVAL);
    b->ops->destroy(b);
}
END_TEST

/* At GPT-2's vocabulary the loss is within about an ulp of a float64 reference: a float sum of
 * 50257 exponentials comes out short and shifts every loss by a few 1e-6, one-sided. */
START_TEST(crossentropy_large_vocab)
{
    enum { ROWS = 64, V = 50257 };
    int targets[ROWS];
    float *logits = randv((size_t)ROWS * V, 2), *probs = zeros((size_t)ROWS * V);
    float *losses = zeros(ROWS);
    for (int r = 0; r < ROWS; r++)
        targets[r] = (int)gsl_rng_uniform_int(tu_rng, V);
    softmax_forward_ref(probs, logits, 1, ROWS, V);
    crossentropy_forward_ref(losses, probs, targets, 1, ROWS, V);
    double worst = 0, bias = 0;
    for (int r = 0; r < ROWS; r++) {
        const float *l = logits + (size_t)r * V;
        double mx = -INFINITY, sum = 0, psum = 0;
        for (int i = 0; i < V; i++)
            mx = fmax(mx, l[i]);
        for (int i = 0; i < V; i++)
            sum += exp((double)l[i] - mx);
        for (int i = 0; i < V; i++)
            psum += probs[(size_t)r * V + i];
        double ref = log(sum) + mx - l[targets[r]], err = losses[r] - ref;
        worst = fmax(worst, fabs(err));
        bias += err / ROWS;
        ck_assert_msg(fabs(psum - 1) < 1e-5, "row %d: probabilities sum to %.9f", r, psum);
    }
    printf("cross-entropy at V %d: worst |loss - float64| %.2e, mean %.2e\n", V, worst, bias);
    /* one ulp of a loss near ln V = 10.8 is 9.5e-7; the float sum was 3-4e-6 off */
    ck_assert_double_lt(worst, 1.5e-6);
    ck_assert_double_lt(fabs(bias), 3e-7);
}
END_TEST

/* The whole model: dL/de along a random direction d equals <grad, d>. */
START_TEST(model_directional_derivative)
{
    const ModelConfig cfg = {.name = "check", .n_layer = 2, .d_model = 16, .n_head = 4,
                             .d_ff = 48, .vocab = 32, .max_seq = 8, .tied = true,
                             .dtype = DTYPE_FP32};
    for (int tied = 1; tied >= 0; tied--) {
        ModelConfig c = cfg;
        c.tied = tied;
        Backend *b;
        Err e;
        ck_assert_int_eq(backend_cpu.create(&b, &c, 2, 8, NULL, &e), 0);
        size_t P = b->n_params;
        float *p = randv(P, 0.2), *d = randv(P, 1), *g = zeros(P);
        int inputs[16], targets[16];
        for (int i = 0; i < 16; i++)
            inputs[i] = (int)gsl_rng_uniform_int(tu_rng, 32), targets[i] = (i * 7 + 3) % 32;
        float loss;
        ck_assert_int_eq(b->ops->write_state(b, p, NULL, NULL, &e), 0);
        ck_assert_int_eq(b->ops->step(b, inputs, targets, true, &loss, &e), 0);
        ck_assert_int_eq(b->ops->read_grads(b, g, &e), 0);
        double an = dot(g, d, P), fd = loss_fd(b, p, d, P, inputs, targets);
        printf("directional derivative (%s head): finite difference %.6f, <grad, d> %.6f\n",
               tied ? "tied" : "untied", fd, an);
        ck_assert_msg(fabs(fd - an) <= 2e-3 * fabs(an) + 1e-4, "fd %.6g vs %.6g", fd, an);
        b->ops->destroy(b);
    }
}
END_TEST

int main(void)
{
    tu_rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(tu_rng, 5);
    Suite *s = suite_create("gpt2_ops");
    TCase *tc = tcase_create("gpt2_ops");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, tu_free_owned);
    tcase_add_test(tc, layernorm);
    tcase_add_test(tc, matmul);
    tcase_add_test(tc, attention);
    tcase_add_test(tc, gelu);
    tcase_add_test(tc, encoder);
    tcase_add_test(tc, softmax_crossentropy);
    tcase_add_test(tc, crossentropy_masked_rows);
    tcase_add_test(tc, crossentropy_large_vocab);
    tcase_add_test(tc, model_masked_loss);
    tcase_add_test(tc, model_directional_derivative);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    gsl_rng_free(tu_rng);
    return rc;
}
