/* bench_llama_kernels: grouped-query attention's fused kernels at Llama 3.1 8B's shapes (32
 * query heads over 8 kv heads of 128, one sequence of 4096 by default), forward and backward, as
 * a ratio against a baseline measured in this run: by default the same kernels with as many kv
 * heads as query heads (multi-head attention: the same FLOPs, four times the k and v bytes);
 * with --baseline chunked, the same shape on the chunked cuBLAS path (flash_attention_enable),
 * e.g. GPT-3 2.7B's heads: --batch 8 --seq 1024 --heads 32 --kv-heads 32 --head-dim 80.
 * TFLOP/s count the causal mask's half of the products: forward two (QK^T, PV), backward five
 * (QK^T, dP, dV, dK, dQ; the kernels recompute QK^T and dP once more for dQ, not counted).
 * Medians of CUDA-event timings. Usage: bench_llama_kernels [--batch B] [--seq T] [--heads h]
 * [--kv-heads g] [--head-dim d] [--reps n] [--baseline mha|chunked] */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gpu.h"
#include "bench_util.h"
#include "flash_attention.h"
#include "llama_kernels.h"

/* One configuration's times; returns 0 or the helper's -errno. */
static int measure(int B, int T, int h, int g, int d, int reps, double ms[2])
{
    int rc = lk_attention_ms(B, T, h, g, d, reps, &ms[0], &ms[1]);
    if (rc) {
        printf("lk_attention_ms: error %d\n", rc);
        return rc;
    }
    double fwd_flops = 2.0 * B * h * (double)T * T * d, bwd_flops = 2.5 * fwd_flops;
    printf("  h %2d g %2d:  forward %8.3f ms %6.1f TFLOP/s   backward %8.3f ms %6.1f TFLOP/s\n",
           h, g, ms[0], fwd_flops / (ms[0] * 1e-3) / 1e12, ms[1],
           bwd_flops / (ms[1] * 1e-3) / 1e12);
    return 0;
}

/* The command line (bench_check_args). */
static const char usage[] = "bench_llama_kernels [--batch B] [--seq T] [--heads H] "
                            "[--kv-heads K] [--head-dim D] [--reps N] [--baseline mha|chunked]";
static const char *const options[] = {"--batch", "--seq", "--heads", "--kv-heads", "--head-dim",
                                      "--reps", "--baseline", NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    bench_gpu_or_skip();
    int B = atoi(bench_arg(argc, argv, "--batch", "1"));
    int T = atoi(bench_arg(argc, argv, "--seq", "4096"));
    int h = atoi(bench_arg(argc, argv, "--heads", "32"));
    int g = atoi(bench_arg(argc, argv, "--kv-heads", "8"));
    int d = atoi(bench_arg(argc, argv, "--head-dim", "128"));
    int reps = atoi(bench_arg(argc, argv, "--reps", "10"));
    const char *baseline = bench_arg(argc, argv, "--baseline", "mha");
    bool chunked = !strcmp(baseline, "chunked");
    if (B < 1 || T < 1 || g < 1 || h % g || d < 2 || reps < 1 ||
        (!chunked && strcmp(baseline, "mha"))) {
        fprintf(stderr, "bench_llama_kernels: --kv-heads must divide --heads, all positive; "
                "--baseline mha or chunked\n");
        return 2;
    }
    bool fused = flash_attention_supported(h, g, d);
    printf("grouped-query attention, bf16, B %d T %d, %d query heads of %d over %d kv heads "
           "(%s):\n", B, T, h, d, g, fused ? "the fused kernels" : "the chunked cuBLAS path");
    double run[2], base[2];
    if (measure(B, T, h, g, d, reps, run))
        return 1;
    if (chunked) {
        if (!fused) {
            fprintf(stderr, "bench_llama_kernels: head size %d has no fused kernels here: "
                    "nothing to compare with the chunked path\n", d);
            return 2;
        }
        flash_attention_enable(false);
        printf("the chunked cuBLAS path, the same shape:\n");
        if (measure(B, T, h, g, d, reps, base))
            return 1;
        printf("  fused / chunked time: forward %.3f, backward %.3f\n", run[0] / base[0],
               run[1] / base[1]);
        return 0;
    }
    if (measure(B, T, h, h, d, reps, base))
        return 1;
    printf("  GQA (g %d) / MHA (g %d) time: forward %.3f, backward %.3f\n", g, h,
           run[0] / base[0], run[1] / base[1]);
    return 0;
}
