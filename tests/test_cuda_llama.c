/* GPU suite for exec/cuda/llama_kernels: each Llama kernel against its CPU reference
 * (exec/cpu/llama_ops) on random inputs, forward and backward, in bf16 and in fp16. Inputs are
 * rounded to the 16-bit format before either side sees them, so a comparison measures the
 * kernel, not the input rounding. Tolerances are stated in u, the format's unit roundoff (2^-8
 * for bf16, 2^-11 for fp16): an output rounded once from the exact fp32 result is within u of
 * it element by element, so within u in relative L2. The rotary embedding and the embedding's
 * gradient are compared bit for bit; every backward runs twice and must give the same bits.
 * Shapes: head sizes 128, 96, 80, 64, 32 on the fused attention kernels with g < h (Llama 3's
 * 8 query heads over 2 kv heads), multi-query and multi-head cases, 48 on the chunked path, T not
 * a multiple of the 64-row tile, B 2, and sizes that take the 8-wide and the 1-wide kernels.
 * Without a GPU it prints SKIP and exits 77. Run without fork (CK_FORK=no). */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdbool.h>

#include "adam.h"
#include "arch.h"
#include "cuda_device.h"
#include "cuda_testutil.h"
#include "flash_attention.h"
#include "gpt2_kernels.h"
#include "llama_kernels.h"
#include "llama_ops.h"
#include "model.h"
#include "testutil.h"

/* the unit roundoff of the format under test */
static double unit16(void)
{
    return ty == GK_FP16 ? ldexp(1, -11) : ldexp(1, -8);
}

static float *randf(size_t n, double sd)
{
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)gsl_ran_gaussian(rng, sd);
    return f;
}

static void set_type(int i)
{
    ty = i ? GK_FP16 : GK_BF16;
    printf("  -- %s (u = %.2e) --\n", i ? "fp16" : "bf16", unit16());
}

/* got against ref within tol (relative L2); got is freed. */
static void check_rel(const char *what, float *got, const float *ref, size_t n, double tol)
{
    double r = rel_l2(got, ref, n);
    printf("  %-44s rel L2 %.2e (tolerance %.2e)\n", what, r, tol);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(isfinite(got[i]), "%s: element %zu is %g", what, i, got[i]);
    ck_assert_msg(r < tol, "%s: relative error %.3e >= %.3e", what, r, tol);
    free(got);
}

/* Every element of got equal to ref rounded once to 16 bits (+0 and -0 equal); got is freed. */
static void check_rounded(const char *what, float *got, const float *ref, size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!(got[i] == round16(ref[i])) && bad++ == 0)
            first = i;
    printf("  %-44s %zu of %zu elements differ from the reference rounded once\n", what, bad, n);
    ck_assert_msg(bad == 0, "%s: %zu elements differ, first [%zu]: %a, reference %a", what, bad,
                  first, bad ? got[first] : 0.0f, bad ? ref[first] : 0.0f);
    free(got);
}

/* The same bits in two device buffers. */
static void check_same_bits(const char *what, const void *a, const void *b, size_t bytes)
{
    unsigned char *x = malloc(bytes), *y = malloc(bytes);
    gk_download(x, a, bytes);
    gk_download(y, b, bytes);
    printf("  %-44s %s\n", what, memcmp(x, y, bytes) ? "DIFFERENT bits" : "same bits");
    ck_assert_msg(!memcmp(x, y, bytes), "%s: two runs differ", what);
    free(x), free(y);
}

/* ---- token embedding ---------------------------------------------------------------------- */

static void embedding_case(int N, int C, int V)
{
    size_t nw = (size_t)V * C, no = (size_t)N * C;
    int *tok = malloc(N * sizeof *tok);
    for (int i = 0; i < N; i++)
        tok[i] = (int)gsl_rng_uniform_int(rng, (unsigned long)V);
    act16_t *wb;
    float *wte = rand16(nw, 1, &wb), *dout = randf(no, 1), *ref = calloc(nw, 4);
    embedding_backward_ref(ref, dout, tok, N, C);
    int *gtok = dev_copy(tok, N * sizeof *tok);
    act16_t *gw = dev_copy(wb, nw * 2), *gout = gk_alloc(no * 2);
    float *gd = dev_copy(dout, no * 4), *g1 = gk_alloc(nw * 4), *g2 = gk_alloc(nw * 4);
    void *scratch = gk_alloc(lk_embedding_backward_scratch_bytes(N, V));
    gk_memset(gout, 0xff, no * 2), gk_memset(g1, 0, nw * 4), gk_memset(g2, 0, nw * 4);
    lk_embedding_forward(gout, gtok, gw, N, C, NULL);
    lk_embedding_backward(g1, gd, gtok, N, C, V, scratch, NULL);
    lk_embedding_backward(g2, gd, gtok, N, C, V, scratch, NULL);
    gk_sync();
    act16_t *out = malloc(no * 2);
    gk_download(out, gout, no * 2);
    for (int i = 0; i < N; i++)
        ck_assert_msg(!memcmp(out + (size_t)i * C, wb + (size_t)tok[i] * C, (size_t)C * 2),
                      "embedding row %d is not wte's row %d", i, tok[i]);
    printf("  embedding forward (N %d C %d V %d): every row wte's, bit for bit\n", N, C, V);
    char what[96];
    snprintf(what, sizeof what, "embedding dwte (N %d C %d V %d)", N, C, V);
    float *got = download_f(g1, nw);
    size_t bad = 0;
    for (size_t i = 0; i < nw; i++)
        bad += !(got[i] == ref[i]);
    printf("  %-44s %zu of %zu differ from the reference\n", what, bad, nw);
    ck_assert_msg(bad == 0, "%s: %zu elements differ from the reference's sums", what, bad);
    free(got);
    check_same_bits("embedding dwte, two runs", g1, g2, nw * 4);
    /* += onto what is there */
    lk_embedding_backward(g1, gd, gtok, N, C, V, scratch, NULL);
    gk_sync();
    embedding_backward_ref(ref, dout, tok, N, C);
    check_rel("embedding dwte accumulated", download_f(g1, nw), ref, nw, 1e-6);
    gk_free(gtok), gk_free(gw), gk_free(gout), gk_free(gd), gk_free(g1), gk_free(g2);
    gk_free(scratch);
    free(tok), free(wb), free(wte), free(dout), free(ref), free(out);
}

/* Rows of 72 go 8 values at a time, rows of 100 one; a vocabulary of 3 makes long runs of one
 * token. */
START_TEST(embedding_kernels)
{
    set_type(_i);
    embedding_case(200, 72, 37);
    embedding_case(37, 100, 5);
    embedding_case(1000, 64, 3);
}
END_TEST

/* ---- RMSNorm ------------------------------------------------------------------------------ */

static void rmsnorm_case(int N, int C)
{
    size_t n = (size_t)N * C;
    float eps = 1e-5f;
    act16_t *xb, *wb;
    float *x = rand16(n, 1, &xb), *w = rand16(C, 1, &wb), *dout = randf(n, 1);
    float *dx0 = randf(n, 0.1), *dw0 = randf(C, 0.1); /* backward adds to these */
    float *out = malloc(n * 4), *rstd = malloc(N * 4);
    float *dx = malloc(n * 4), *dw = malloc(C * 4);
    memcpy(dx, dx0, n * 4), memcpy(dw, dw0, C * 4);
    rmsnorm_forward_ref(out, rstd, x, w, N, C, eps);
    rmsnorm_backward_ref(dx, dw, dout, x, w, rstd, N, C);
    act16_t *gx = dev_copy(xb, n * 2), *gw = dev_copy(wb, C * 2), *gout = gk_alloc(n * 2);
    float *gr = gk_alloc(N * 4), *gd = dev_copy(dout, n * 4);
    float *gdx = dev_copy(dx0, n * 4), *gdw = dev_copy(dw0, C * 4);
    float *gdx2 = dev_copy(dx0, n * 4), *gdw2 = dev_copy(dw0, C * 4);
    void *scratch = gk_alloc(lk_rmsnorm_backward_scratch_bytes(N, C));
    gk_memset(gout, 0xff, n * 2), gk_memset(gr, 0xff, N * 4);
    lk_rmsnorm_forward(gout, gr, gx, gw, N, C, eps, ty, NULL);
    lk_rmsnorm_backward(gdx, gdw, gd, gx, gw, gr, N, C, scratch, ty, NULL);
    lk_rmsnorm_backward(gdx2, gdw2, gd, gx, gw, gr, N, C, scratch, ty, NULL);
    gk_sync();
    double u = unit16();
    char what[96];
    snprintf(what, sizeof what, "rmsnorm out (N %d C %d), one rounding", N, C);
    check_rel(what, download16(gout, n), out, n, u + 1e-6);
    snprintf(what, sizeof what, "rmsnorm rstd (N %d C %d)", N, C);
    check_rel(what, download_f(gr, N), rstd, N, 1e-5);
    snprintf(what, sizeof what, "rmsnorm dinp += (N %d C %d)", N, C);
    check_rel(what, download_f(gdx, n), dx, n, 1e-5);
    snprintf(what, sizeof what, "rmsnorm dweight += (N %d C %d)", N, C);
    check_rel(what, download_f(gdw, C), dw, C, 1e-5);
    check_same_bits("rmsnorm dinp, two runs", gdx, gdx2, n * 4);
    check_same_bits("rmsnorm dweight, two runs", gdw, gdw2, C * 4);
    gk_free(gx), gk_free(gw), gk_free(gout), gk_free(gr), gk_free(gd), gk_free(gdx);
    gk_free(gdw), gk_free(gdx2), gk_free(gdw2), gk_free(scratch);
    free(x), free(xb), free(w), free(wb), free(dout), free(dx0), free(dw0), free(out);
    free(rstd), free(dx), free(dw);
}

START_TEST(rmsnorm_kernels)
{
    set_type(_i);
    rmsnorm_case(37, 100);  /* one value at a time */
    rmsnorm_case(200, 72);  /* 8 at a time, a partial last pass of the warp */
    rmsnorm_case(300, 264); /* the backward's rows over 19 partial sums, the last partial */
    rmsnorm_case(600, 40);  /* 38 partial sums */
    rmsnorm_case(4, 4096);  /* a block a row, 4 packs a thread (Llama 3.1 8B's width) */
    rmsnorm_case(40, 4096); /* the backward's blocks of 16 rows, the last partial */
    rmsnorm_case(3, 3072);  /* 3 of 4 packs a thread (Llama 3.2 3B's) */
    rmsnorm_case(2, 8200);  /* wider than a block keeps: a warp a row */
    /* the footprint counts the partial sums' scratch the kernel takes */
    ModelConfig c = *model_preset_find("llama-3.1-8b");
    int64_t lane[LANE_BUFFERS];
    arch_block(ARCH_LLAMA)->cuda_lane_buffers(&c, 8, 1024, lane);
    ck_assert_int_eq(lane[LANE_NORM_SCRATCH],
                     (int64_t)lk_rmsnorm_backward_scratch_bytes(8 * 1024, c.d_model));
}
END_TEST

/* ---- rotary embedding --------------------------------------------------------------------- */

static void rope_case(int B, int T, int h, int g, int d, double theta, const RopeScaling *sc)
{
    size_t n = (size_t)B * T * (h + 2 * g) * d;
    RopeTable tab;
    Err e;
    /* a table longer than T: row t is position t, whatever the table's length */
    ck_assert_int_eq(rope_table_init(&tab, T + 3, d, theta, sc, &e), 0);
    size_t nt = (size_t)tab.T * tab.half;
    act16_t *xb, *db;
    float *x = rand16(n, 1, &xb), *dy = rand16(n, 1, &db);
    float *out = malloc(n * 4), *dx = calloc(n, 4);
    rope_forward_ref(out, x, B, T, h, g, d, &tab);
    rope_backward_ref(dx, dy, B, T, h, g, d, &tab);
    float *gcos = dev_copy(tab.cos, nt * 4), *gsin = dev_copy(tab.sin, nt * 4);
    act16_t *gx = dev_copy(xb, n * 2), *gd = dev_copy(db, n * 2), *gout = gk_alloc(n * 2);
    act16_t *gdx = gk_alloc(n * 2), *gdx2 = gk_alloc(n * 2), *gin = dev_copy(db, n * 2);
    gk_memset(gout, 0xff, n * 2), gk_memset(gdx, 0xff, n * 2), gk_memset(gdx2, 0xff, n * 2);
    lk_rope_forward(gout, gx, gcos, gsin, B, T, h, g, d, ty, NULL);
    lk_rope_backward(gdx, gd, gcos, gsin, B, T, h, g, d, ty, NULL);
    lk_rope_backward(gdx2, gd, gcos, gsin, B, T, h, g, d, ty, NULL);
    lk_rope_backward(gin, gin, gcos, gsin, B, T, h, g, d, ty, NULL); /* in place */
    gk_sync();
    char what[96];
    snprintf(what, sizeof what, "rope forward (B %d T %d h %d g %d d %d)", B, T, h, g, d);
    check_rounded(what, download16(gout, n), out, n);
    snprintf(what, sizeof what, "rope backward (B %d T %d h %d g %d d %d)", B, T, h, g, d);
    check_rounded(what, download16(gdx, n), dx, n);
    check_same_bits("rope backward, two runs", gdx, gdx2, n * 2);
    check_same_bits("rope backward in place", gdx, gin, n * 2);
    gk_free(gcos), gk_free(gsin), gk_free(gx), gk_free(gd), gk_free(gout), gk_free(gdx);
    gk_free(gdx2), gk_free(gin);
    free(x), free(xb), free(dy), free(db), free(out), free(dx);
    rope_table_free(&tab);
}

/* Half head sizes 64, 32, 16 and 24 go 8 pairs at a time, 10 one at a time. */
START_TEST(rope_kernels)
{
    set_type(_i);
    RopeScaling llama3 = {.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                          .original_max_seq = 8192};
    rope_case(2, 100, 8, 2, 128, 500000, &llama3);
    rope_case(2, 37, 4, 4, 64, 10000, NULL);
    rope_case(1, 50, 6, 3, 32, 10000, NULL);
    rope_case(2, 30, 2, 1, 20, 10000, NULL);
    rope_case(1, 20, 3, 1, 48, 1000000, NULL);
}
END_TEST

/* ---- SwiGLU -------------------------------------------------------------------------------- */

static void swiglu_case(int N, int F)
{
    size_t n = (size_t)N * F;
    act16_t *gb, *db;
    float *gu = rand16(2 * n, 1.5, &gb), *dy = rand16(n, 1, &db);
    float *out = malloc(n * 4), *dgu = calloc(2 * n, 4);
    swiglu_forward_ref(out, gu, N, F);
    swiglu_backward_ref(dgu, dy, gu, N, F);
    act16_t *ggu = dev_copy(gb, 2 * n * 2), *gd = dev_copy(db, n * 2), *gout = gk_alloc(n * 2);
    act16_t *gdgu = gk_alloc(2 * n * 2), *gdgu2 = gk_alloc(2 * n * 2);
    act16_t *gin = dev_copy(gb, 2 * n * 2);
    gk_memset(gout, 0xff, n * 2), gk_memset(gdgu, 0xff, 2 * n * 2);
    lk_swiglu_forward(gout, ggu, N, F, ty, NULL);
    lk_swiglu_backward(gdgu, gd, ggu, N, F, ty, NULL);
    lk_swiglu_backward(gdgu2, gd, ggu, N, F, ty, NULL);
    lk_swiglu_backward(gin, gd, gin, N, F, ty, NULL); /* in place over gate_up */
    gk_sync();
    double u = unit16();
    char what[96];
    snprintf(what, sizeof what, "swiglu forward (N %d F %d), one rounding", N, F);
    check_rel(what, download16(gout, n), out, n, u + 1e-6);
    snprintf(what, sizeof what, "swiglu backward (N %d F %d), one rounding", N, F);
    check_rel(what, download16(gdgu, 2 * n), dgu, 2 * n, u + 1e-5);
    check_same_bits("swiglu backward, two runs", gdgu, gdgu2, 2 * n * 2);
    check_same_bits("swiglu backward in place", gdgu, gin, 2 * n * 2);
    gk_free(ggu), gk_free(gd), gk_free(gout), gk_free(gdgu), gk_free(gdgu2), gk_free(gin);
    free(gu), free(gb), free(dy), free(db), free(out), free(dgu);
}

START_TEST(swiglu_kernels)
{
    set_type(_i);
    swiglu_case(200, 136); /* 8 at a time */
    swiglu_case(37, 100);  /* one at a time */
    swiglu_case(70000, 8); /* more rows than a grid holds: 8 at a time, grid-strided */
}
END_TEST

/* ---- grouped-query attention ---------------------------------------------------------------- */

/* The row log-sum-exp of the causal scores, from the reference's pre-softmax scores. */
static float *attention_lse_ref(const float *pre, int B, int h, int T)
{
    float *lse = malloc((size_t)B * h * T * 4);
    for (size_t r = 0; r < (size_t)B * h * T; r++) {
        int t = (int)(r % T);
        const float *row = pre + r * T;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j <= t; j++)
            mx = fmax(mx, row[j]);
        for (int j = 0; j <= t; j++)
            sum += exp(row[j] - mx);
        lse[r] = (float)(mx + log(sum));
    }
    return lse;
}

/* Out within 2.5 u and dqkv within 5 u of the fp32 reference (probabilities, dS and the output
 * are rounded to 16 bits on the way: about one u in all); the two backward runs the same bits. */
static void attention_case(int B, int T, int h, int g, int d, bool fused)
{
    ck_assert_msg(flash_attention_supported(h, g, d) == fused,
                  "h %d g %d d %d: expected the %s path", h, g, d, fused ? "fused" : "chunked");
    size_t nq = (size_t)B * T * (h + 2 * g) * d, no = (size_t)B * T * h * d;
    size_t na = (size_t)B * h * T * T, nl = (size_t)B * h * T;
    act16_t *qb, *db;
    float *qkv = rand16(nq, 1, &qb), *dout = rand16(no, 1, &db);
    float *out = calloc(no, 4), *pre = calloc(na, 4), *att = calloc(na, 4);
    attention_gqa_forward_ref(out, pre, att, qkv, B, T, h, g, d);
    float *lse_ref = attention_lse_ref(pre, B, h, T);
    float *dqkv = calloc(nq, 4), *dpre = calloc(na, 4), *datt = calloc(na, 4);
    attention_gqa_backward_ref(dqkv, dpre, datt, dout, qkv, att, B, T, h, g, d);
    act16_t *gq = dev_copy(qb, nq * 2), *gd = dev_copy(db, no * 2);
    act16_t *gout = gk_alloc(no * 2), *gdq = gk_alloc(nq * 2), *gdq2 = gk_alloc(nq * 2);
    float *lse = gk_alloc(nl * 4), *delta = gk_alloc(nl * 4);
    void *ws = gk_alloc(lk_attention_workspace_bytes(B, T, h, g, d)), *blas = gk_blas_create();
    /* poison: every element must be written */
    gk_memset(gout, 0xff, no * 2), gk_memset(lse, 0xff, nl * 4);
    gk_memset(gdq, 0xff, nq * 2), gk_memset(gdq2, 0xff, nq * 2);
    lk_attention_forward(gout, lse, gq, B, T, h, g, d, ws, blas, ty, NULL);
    lk_attention_backward(gdq, delta, gd, gout, gq, lse, B, T, h, g, d, ws, blas, ty, NULL);
    lk_attention_backward(gdq2, delta, gd, gout, gq, lse, B, T, h, g, d, ws, blas, ty, NULL);
    gk_sync();
    double u = unit16();
    const char *path = fused ? "fused" : "chunked";
    char what[112];
    snprintf(what, sizeof what, "attention %s out (B %d T %d h %d g %d d %d)", path, B, T, h, g,
             d);
    check_rel(what, download16(gout, no), out, no, 2.5 * u);
    snprintf(what, sizeof what, "attention %s lse", path);
    check_rel(what, download_f(lse, nl), lse_ref, nl, 1e-5);
    snprintf(what, sizeof what, "attention %s dqkv", path);
    check_rel(what, download16(gdq, nq), dqkv, nq, 5 * u);
    snprintf(what, sizeof what, "attention %s dqkv, two runs", path);
    check_same_bits(what, gdq, gdq2, nq * 2);
    gk_blas_destroy(blas);
    gk_free(ws), gk_free(gq), gk_free(gd), gk_free(gout), gk_free(gdq), gk_free(gdq2);
    gk_free(lse), gk_free(delta);
    free(qkv), free(qb), free(dout), free(db), free(out), free(pre), free(att), free(lse_ref);
    free(dqkv), free(dpre), free(datt);
}

/* The fused kernels' tiles are 64 queries and keys: lengths below one tile, across several with a
 * ragged last one, and exactly two. Head size 48 takes the chunked cuBLAS path (chunks of 256
 * queries). */
START_TEST(attention_kernels)
{
    set_type(_i);
    attention_case(2, 100, 8, 2, 128, true); /* Llama 3's grouping: 4 query heads a kv head */
    attention_case(2, 100, 4, 1, 64, true);  /* multi-query */
    attention_case(1, 130, 6, 3, 32, true);  /* 3 tiles, the last of 2 rows */
    attention_case(1, 520, 4, 2, 64, true);  /* 9 tiles a head, two heads a group */
    attention_case(2, 37, 2, 2, 128, true);  /* multi-head, one partial tile */
    attention_case(2, 128, 4, 4, 64, true);  /* exactly two tiles */
    attention_case(1, 100, 3, 1, 80, true);  /* multi-query, Phi's and GPT-3 2.7B's size */
    attention_case(2, 150, 4, 2, 96, true);  /* 3 tiles, the last of 22 rows */
    attention_case(2, 300, 4, 2, 48, false); /* two query chunks (256 + 44) */
    attention_case(1, 100, 3, 1, 48, false); /* multi-query */
}
END_TEST

int main(void)
{
    CudaDeviceInfo info;
    Err e;
    if (cudadev_probe(&info, &e)) {
        printf("SKIP: %s\n", e.msg);
        return 77;
    }
    rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 2027);
    Suite *s = suite_create("cuda_llama");
    TCase *tk = tcase_create("kernels");
    tcase_set_timeout(tk, 900);
    tcase_add_loop_test(tk, embedding_kernels, 0, 2);
    tcase_add_loop_test(tk, rmsnorm_kernels, 0, 2);
    tcase_add_loop_test(tk, rope_kernels, 0, 2);
    tcase_add_loop_test(tk, swiglu_kernels, 0, 2);
    tcase_add_loop_test(tk, attention_kernels, 0, 2);
    suite_add_tcase(s, tk);
    int rc = tu_run(s);
    gsl_rng_free(rng);
    return rc;
}
