/* bench_adam: CPU AdamW parameters per second for each implementation and thread count, against
 * a memory-copy loop measured in the same run and converted to the bytes Adam must move (28 per
 * parameter: fp32 master, m, v read and written, bf16 gradient in, bf16 weight out); then the
 * micro-batch gradient sum (grad_sum_add, bf16 into fp32) against its scalar reference.
 * Usage: bench_adam [--mparams N] [--threads T] */
#include <immintrin.h>
#include <unistd.h>

#include "adam.h"
#include "bench_util.h"
#include "grad_sum.h"

enum { REPEATS = 7, ADAM_BYTES = 28 };

typedef struct Copy {
    uint8_t *dst;
    const uint8_t *src;
} Copy;

/* A plain vector copy loop: ordinary loads and stores, as Adam does (libc's memcpy may take
 * other paths, such as rep movsb, whose speed says nothing about Adam's). */
__attribute__((target("avx2"))) static void copy_avx2(uint8_t *dst, const uint8_t *src,
                                                      size_t n)
{
    for (size_t i = 0; i + 128 <= n; i += 128)
        for (int k = 0; k < 4; k++)
            _mm256_storeu_si256((__m256i *)(dst + i) + k,
                                _mm256_loadu_si256((const __m256i *)(src + i) + k));
}

static void copy_range(void *ctx, size_t b, size_t e)
{
    Copy *c = ctx;
    if (__builtin_cpu_supports("avx2")) {
        copy_avx2(c->dst + b, c->src + b, e - b);
    } else {
        for (size_t i = b; i + 8 <= e; i += 8) {
            uint64_t w;
            memcpy(&w, c->src + i, 8);
            memcpy(c->dst + i, &w, 8);
        }
    }
}

static double copy_gbps(WorkPool *wp, uint8_t *dst, const uint8_t *src, size_t bytes)
{
    double t[REPEATS];
    Copy c = {dst, src};
    for (int r = 0; r < REPEATS; r++) {
        double t0 = bench_now();
        workpool_run(wp, copy_range, &c, bytes, 4096);
        t[r] = bench_now() - t0;
    }
    return 2.0 * bytes / bench_median(t, REPEATS) / 1e9; /* bytes read + written */
}

typedef struct SumJob {
    float *sum;
    const uint16_t *g;
    bool ref, first;
} SumJob;

static void sum_range(void *ctx, size_t b, size_t e)
{
    SumJob *j = ctx;
    (j->ref ? grad_sum_add_ref : grad_sum_add)(j->sum, j->g, DTYPE_BF16, b, e, j->first);
}

/* Median seconds of one pass of j over n gradients. */
static double sum_pass_s(WorkPool *wp, SumJob *j, size_t n)
{
    double t[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        double t0 = bench_now();
        workpool_run(wp, sum_range, j, n, 64);
        t[r] = bench_now() - t0;
    }
    return bench_median(t, REPEATS);
}

/* The pipeline's sum of micro-batch gradients on one thread and on its four (plan.h): a later
 * micro-batch's add, the vector path against the scalar reference; and the step's first
 * micro-batch's (which writes the sum) against the later one's, time per gradient. */
static void sum_bench(float *sum, const uint16_t *g, size_t n)
{
    double bytes = (double)n * (double)grad_sum_bytes(2, false);
    printf("\ngradient sum over %.0f M bf16 gradients (%zu B each)\n%7s %14s %14s %8s %14s "
           "%8s\n", n / 1e6, grad_sum_bytes(2, false), "threads", "GB/s", "scalar GB/s",
           "ratio", "first ns/grad", "ratio");
    int threads[] = {1, 4};
    for (int ti = 0; ti < 2; ti++) {
        WorkPool wp;
        Err e;
        if (workpool_init(&wp, threads[ti], &e)) {
            fprintf(stderr, "bench_adam: %s\n", e.msg);
            return;
        }
        SumJob vec = {sum, g, false, false}, ref = {sum, g, true, false},
               first = {sum, g, false, true};
        double later_s = sum_pass_s(&wp, &vec, n), ref_s = sum_pass_s(&wp, &ref, n),
               first_s = sum_pass_s(&wp, &first, n);
        printf("%7d %14.1f %14.1f %8.2f %14.3f %8.2f\n", threads[ti], bytes / later_s / 1e9,
               bytes / ref_s / 1e9, ref_s / later_s, first_s / n * 1e9, later_s / first_s);
        workpool_free(&wp);
    }
    printf("ratio = grad_sum_add against grad_sum_add_ref (the scalar loop -O2 leaves); second "
           "ratio = a later micro-batch's add against the first's, time a gradient\n");
}

/* The command line (bench_check_args). */
static const char usage[] = "bench_adam [--mparams M] [--threads N]";
static const char *const options[] = {"--mparams", "--threads", NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    size_t n = (size_t)(atof(bench_arg(argc, argv, "--mparams", "64")) * 1e6);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int max_threads = atoi(bench_arg(argc, argv, "--threads", "0"));
    if (max_threads <= 0)
        max_threads = (int)online;
    float *master = aligned_alloc(64, n * 4), *m = aligned_alloc(64, n * 4),
          *v = aligned_alloc(64, n * 4);
    uint16_t *g = aligned_alloc(64, n * 2), *out = aligned_alloc(64, n * 2);
    size_t copy_bytes = n * ADAM_BYTES / 2;
    uint8_t *src = aligned_alloc(4096, copy_bytes), *dst = aligned_alloc(4096, copy_bytes);
    if (!master || !m || !v || !g || !out || !src || !dst) {
        fprintf(stderr, "bench_adam: out of memory for %zu parameters\n", n);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        master[i] = (float)(i % 1000) * 1e-4f;
        m[i] = 1e-4f;
        v[i] = 1e-8f;
        g[i] = adam_f32_to_bf16((float)((i * 7) % 100) * 1e-4f);
    }
    memset(src, 1, copy_bytes);
    memset(dst, 2, copy_bytes);
    AdamConfig cfg = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.1f};
    AdamStep s;
    adam_step_init(&s, &cfg, 10, 1.0f);
    AdamSlice x = {.master = master, .m = m, .v = v, .grad = g, .grad_type = DTYPE_BF16,
                   .out = out, .out_type = DTYPE_BF16, .n = n};
    printf("AdamW over %.0f M parameters (bf16 grads in, bf16 weights out, %d B/param)\n",
           n / 1e6, ADAM_BYTES);
    printf("%-8s %7s %14s %16s %14s %8s\n", "isa", "threads", "G params/s", "Adam GB/s",
           "copy GB/s", "ratio");
    int threads[] = {1, max_threads};
    for (int ti = 0; ti < 2; ti++) {
        if (ti == 1 && max_threads == 1)
            break;
        WorkPool wp;
        Err e;
        if (workpool_init(&wp, threads[ti], &e)) {
            fprintf(stderr, "bench_adam: %s\n", e.msg);
            return 1;
        }
        double copy = copy_gbps(&wp, dst, src, copy_bytes);
        for (int isa = 0; isa < ADAM_ISA_COUNT; isa++) {
            if (!adam_isa_supported(isa))
                continue;
            double t[REPEATS];
            for (int r = 0; r < REPEATS; r++) {
                double t0 = bench_now();
                adam_update(isa, &s, &x, &wp);
                t[r] = bench_now() - t0;
            }
            double pps = n / bench_median(t, REPEATS);
            printf("%-8s %7d %14.3f %16.1f %14.1f %8.3f\n", adam_isa_name(isa), threads[ti],
                   pps / 1e9, pps * ADAM_BYTES / 1e9, copy, pps * ADAM_BYTES / 1e9 / copy);
        }
        workpool_free(&wp);
    }
    printf("ratio = Adam params/s against the copy loop's bandwidth over %d B/param (goal >= "
           "0.8 with all threads)\n", ADAM_BYTES);
    sum_bench(m, g, n);
    return 0;
}
