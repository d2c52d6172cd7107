/* bench_kernels: time of each CUDA kernel of the GPT-2 step at one layer's shapes (GPT-2 124M,
 * batch 8, seq 1024 by default), to see where a step goes. Host clock around synchronised
 * launches, median of 5. Usage: bench_kernels [--batch B] [--seq T] [--model NAME]
 * [--dtype bf16|fp16] */
#include <stdlib.h>
#include <string.h>

#include "bench_gpu.h"
#include "bench_util.h"
#include "gpt2_kernels.h"
#include "model.h"

#define TIME(label, call)                                                                     \
    do {                                                                                      \
        double t_[5];                                                                         \
        for (int r_ = -1; r_ < 5; r_++) {                                                     \
            gk_sync();                                                                        \
            double t0_ = bench_now();                                                         \
            call;                                                                             \
            gk_sync();                                                                        \
            if (r_ >= 0)                                                                      \
                t_[r_] = bench_now() - t0_;                                                   \
        }                                                                                     \
        last_s = bench_median(t_, 5);                                                         \
        printf("  %-28s %9.3f ms\n", label, 1e3 * last_s);                                     \
    } while (0)

static double last_s; /* the median of the last TIME */

/* The command line (bench_check_args). */
static const char usage[] = "bench_kernels [--batch B] [--seq T] [--model NAME] "
                            "[--dtype bf16|fp16]";
static const char *const options[] = {"--batch", "--seq", "--model", "--dtype", NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    bench_gpu_or_skip();
    int B = atoi(bench_arg(argc, argv, "--batch", "8")), T = atoi(bench_arg(argc, argv, "--seq",
                                                                             "1024"));
    const ModelConfig *c = model_preset_find(bench_arg(argc, argv, "--model", "gpt2-124m"));
    GkType t = strcmp(bench_arg(argc, argv, "--dtype", "bf16"), "fp16") ? GK_BF16 : GK_FP16;
    int C = c->d_model, NH = c->n_head, F = c->d_ff, V = c->vocab, N = B * T;
    bf16_t *x = gk_alloc((size_t)N * F * 2), *y = gk_alloc((size_t)N * F * 2);
    bf16_t *qkv = gk_alloc((size_t)N * 3 * C * 2), *att = gk_alloc((size_t)N * C * 2);
    bf16_t *dqkv = gk_alloc((size_t)N * 3 * C * 2), *w = gk_alloc((size_t)F * 2);
    bf16_t *logits = gk_alloc((size_t)N * V * 2);
    float *f32 = gk_alloc((size_t)N * F * 4), *st = gk_alloc((size_t)N * 4 * 4);
    float *lse = gk_alloc((size_t)B * NH * T * 4), *delta = gk_alloc((size_t)B * NH * T * 4);
    float *dw = gk_alloc((size_t)F * 4 * 2), *losses = gk_alloc((size_t)N * 4);
    int *tok = gk_alloc((size_t)N * 4);
    /* random data: zeros run faster than real inputs on tensor cores and hide nothing */
    gk_fill_random(x, (size_t)N * F, 1), gk_fill_random(y, (size_t)N * F, 2);
    gk_fill_random(qkv, (size_t)N * 3 * C, 3), gk_fill_random(att, (size_t)N * C, 4);
    gk_fill_random(w, (size_t)F, 5), gk_fill_random(logits, (size_t)N * V, 6);
    gk_fill_random((bf16_t *)f32, (size_t)N * F * 2, 7);
    gk_fill_random((bf16_t *)st, (size_t)N * 8, 8);
    gk_memset(tok, 0, (size_t)N * 4);
    printf("%s (%s), one layer at B %d T %d (N %d, C %d, F %d, V %d):\n", c->name,
           t == GK_FP16 ? "fp16" : "bf16", B, T, N, C, F, V);
    void *ws = gk_alloc(gk_attention_workspace_bytes(B, T, C, NH)), *blas = gk_blas_create();
    /* attention's useful FLOPs under the causal mask: half of the T x T products; forward has
     * two of them (QK^T, PV), backward five (QK^T again, dP, dV, dK, dQ) */
    double att_flops = 2.0 * B * NH * (double)T * T * (C / NH);
    TIME("attention forward", gk_attention_forward(att, lse, qkv, B, T, C, NH, ws, blas, t, NULL));
    printf("  %-28s %9.1f TFLOP/s\n", "", att_flops / last_s / 1e12);
    TIME("attention backward", gk_attention_backward(dqkv, delta, att, att, qkv, lse, B, T, C,
                                                     NH, ws, blas, t, NULL));
    printf("  %-28s %9.1f TFLOP/s\n", "", 2.5 * att_flops / last_s / 1e12);
    TIME("layernorm forward", gk_layernorm_forward(att, st, st + N, x, w, w, N, C, t, NULL));
    TIME("layernorm backward", gk_layernorm_backward(f32, dw, dw + F, f32, x, w, st, st + N, N,
                                                     C, t, NULL));
    TIME("gelu forward (N x F)", gk_gelu_forward(y, x, (size_t)N * F, t, NULL));
    TIME("gelu backward (N x F)", gk_gelu_backward(y, x, y, (size_t)N * F, t, NULL));
    TIME("bias backward (N x F)", gk_bias_backward(dw, x, N, F, t, NULL));
    TIME("add bias (N x F)", gk_add_bias(y, w, N, F, t, NULL));
    TIME("residual (N x C)", gk_residual_forward(att, att, att, (size_t)N * C, t, NULL));
    TIME("f32 -> 16-bit (N x C)", gk_from_f32(att, f32, (size_t)N * C, t, NULL));
    TIME("softmax + cross-entropy (once)", gk_softmax_crossentropy(losses, logits, tok, N, V, V, 1,
                                                                  1.0f, t, NULL));
    TIME("encoder backward (once)", gk_encoder_backward(f32, f32, f32, tok, B, T, C, NULL));
    return 0;
}
