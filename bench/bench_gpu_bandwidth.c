/* bench_gpu_bandwidth: the memory-bound kernels of a training step against a device-to-device
 * copy of the bytes each must move, measured in the same run: a kernel that only streams
 * memory can at best move its bytes as fast as the copy does, so the ratio (copy time over the
 * kernel's) is the share of that it reaches.
 *   AdamW with the gradients' norm (gk_adamw_sq_g16, the pipeline's update of a sub-group on
 *   the GPU), M parameters: 28 bytes each (the fp32 master, m and v and the bf16 gradient
 *   read, the three and the bf16 weight written).
 *   RMSNorm's backward (lk_rmsnorm_backward), Llama 3.1 8B's rows at batch 8 x 1024, and
 *   LayerNorm's (gk_layernorm_backward), GPT-3 2.7B's: 14 bytes an element (the bf16 input and
 *   fp32 output gradient read, the fp32 input gradient read and written); the weight's (and
 *   bias's) gradient sums are not counted.
 * Host clock around synchronised launches, median of 7.
 * Usage: bench_gpu_bandwidth [--mparams M] (default 1024) [--rows N] (8192) [--width C] (4096)
 *                            [--ln-width C] (2560) */
#include <stdlib.h>

#include "bench_gpu.h"
#include "bench_util.h"
#include "gpt2_kernels.h"
#include "llama_kernels.h"

enum { RUNS = 7 };

static double median_s(void (*call)(void *), void *arg)
{
    double t[RUNS];
    for (int r = -1; r < RUNS; r++) {
        gk_sync();
        double t0 = bench_now();
        call(arg);
        gk_sync();
        if (r >= 0)
            t[r] = bench_now() - t0;
    }
    return bench_median(t, RUNS);
}

typedef struct Copy {
    act16_t *src, *dst;
    size_t n; /* 16-bit elements */
} Copy;

static void copy(void *arg)
{
    Copy *c = arg;
    gk_copy16(c->dst, c->src, c->n, NULL);
}

/* The copy of `bytes` (each way), timed, and the line comparing a kernel's time with it. */
static void against_copy(const char *what, double kernel_s, double bytes)
{
    Copy c = {.n = (size_t)(bytes / 2)};
    c.src = gk_alloc(c.n * 2), c.dst = gk_alloc(c.n * 2);
    gk_memset(c.src, 1, c.n * 2);
    double copy_s = median_s(copy, &c);
    gk_free(c.src), gk_free(c.dst);
    printf("%s: %.3f ms (%.0f GB/s); a copy of the same bytes %.3f ms (%.0f GB/s); "
           "ratio %.3f\n",
           what, 1e3 * kernel_s, 2 * bytes / kernel_s / 1e9, 1e3 * copy_s,
           2 * bytes / copy_s / 1e9, copy_s / kernel_s);
}

typedef struct Adam {
    size_t n;
    float *master, *m, *v;
    act16_t *grad, *out;
    double *sq_dev, sq_host;
} Adam;

static void adamw(void *arg)
{
    Adam *a = arg;
    /* lr 3e-4, betas 0.9 / 0.95, decay 0.1, step 10: the scalars adam.h's AdamStep holds */
    gk_adamw_sq_g16(a->master, a->m, a->v, a->grad, a->out, a->n, a->sq_dev, &a->sq_host,
                    0.9f, 0.1f, 0.95f, 0.05f, 1e-8f, 1 - 3e-5f, -4.6e-4f, 1.25f, 1.0f, GK_BF16,
                    NULL);
}

static void bench_adamw(size_t n)
{
    Adam a = {.n = n};
    a.master = gk_alloc(n * 4), a.m = gk_alloc(n * 4), a.v = gk_alloc(n * 4);
    a.grad = gk_alloc(n * 2), a.out = gk_alloc(n * 2), a.sq_dev = gk_alloc(sizeof(double));
    /* random values: the update's arithmetic on real numbers, v kept non-negative */
    gk_fill_random((bf16_t *)a.master, n * 2, 1), gk_fill_random((bf16_t *)a.m, n * 2, 2);
    gk_memset(a.v, 0, n * 4), gk_fill_random(a.grad, n, 3);
    double s = median_s(adamw, &a);
    gk_free(a.master), gk_free(a.m), gk_free(a.v), gk_free(a.grad), gk_free(a.out);
    gk_free(a.sq_dev);
    char what[64];
    snprintf(what, sizeof what, "AdamW + norm, %zu M params", n >> 20);
    against_copy(what, s, 14.0 * (double)n);
}

typedef struct Norm {
    int N, C;
    float *dinp, *dweight, *dbias, *dout, *mean, *rstd;
    act16_t *inp, *weight;
    void *scratch;
} Norm;

static void rmsnorm_backward(void *arg)
{
    Norm *b = arg;
    lk_rmsnorm_backward(b->dinp, b->dweight, b->dout, b->inp, b->weight, b->rstd, b->N, b->C,
                        b->scratch, GK_BF16, NULL);
}

static void layernorm_backward(void *arg)
{
    Norm *b = arg;
    gk_layernorm_backward(b->dinp, b->dweight, b->dbias, b->dout, b->inp, b->weight, b->mean,
                          b->rstd, b->N, b->C, GK_BF16, NULL);
}

/* A norm's backward over N rows of C (random inputs and statistics), against the copy. */
static void bench_norm(const char *name, void (*backward)(void *), int N, int C)
{
    size_t n = (size_t)N * C;
    Norm b = {.N = N, .C = C};
    b.dinp = gk_alloc(n * 4), b.dout = gk_alloc(n * 4), b.inp = gk_alloc(n * 2);
    b.dweight = gk_alloc((size_t)C * 4), b.dbias = gk_alloc((size_t)C * 4);
    b.weight = gk_alloc((size_t)C * 2);
    b.mean = gk_alloc((size_t)N * 4), b.rstd = gk_alloc((size_t)N * 4);
    b.scratch = gk_alloc(lk_rmsnorm_backward_scratch_bytes(N, C));
    gk_fill_random((bf16_t *)b.dout, n * 2, 4), gk_fill_random(b.inp, n, 5);
    gk_fill_random(b.weight, C, 6), gk_fill_random((bf16_t *)b.rstd, (size_t)N * 2, 7);
    gk_fill_random((bf16_t *)b.mean, (size_t)N * 2, 8);
    gk_memset(b.dinp, 0, n * 4), gk_memset(b.dweight, 0, (size_t)C * 4);
    gk_memset(b.dbias, 0, (size_t)C * 4);
    double s = median_s(backward, &b);
    gk_free(b.dinp), gk_free(b.dout), gk_free(b.inp), gk_free(b.dweight), gk_free(b.dbias);
    gk_free(b.weight), gk_free(b.mean), gk_free(b.rstd), gk_free(b.scratch);
    char what[64];
    snprintf(what, sizeof what, "%s backward, %d x %d", name, N, C);
    against_copy(what, s, 7.0 * (double)n);
}

/* The command line (bench_check_args). */
static const char usage[] = "bench_gpu_bandwidth [--mparams M] [--rows N] [--width C] "
                            "[--ln-width C]";
static const char *const options[] = {"--mparams", "--rows", "--width", "--ln-width", NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    bench_gpu_or_skip();
    long mparams = atol(bench_arg(argc, argv, "--mparams", "1024"));
    int N = atoi(bench_arg(argc, argv, "--rows", "8192"));
    int C = atoi(bench_arg(argc, argv, "--width", "4096"));
    int ln_C = atoi(bench_arg(argc, argv, "--ln-width", "2560"));
    if (mparams <= 0 || N <= 0 || C <= 0 || ln_C <= 0) {
        fprintf(stderr, "bench_gpu_bandwidth: --mparams, --rows, --width and --ln-width must "
                        "be positive\n");
        return 2;
    }
    bench_adamw((size_t)mparams << 20);
    bench_norm("RMSNorm", rmsnorm_backward, N, C);
    bench_norm("LayerNorm", layernorm_backward, N, ln_C);
    return 0;
}
