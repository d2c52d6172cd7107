/* bench_cuda: the CUDA backend training models with all state on the GPU (default GPT-2 124M
 * and 1.5B at seq 1024): tokens/s and MFU (model FLOPs 6·P + 12·L·(h d)·T per token, PaLM's
 * convention, P without an untied input embedding, which is a lookup; over the H200's 989.4
 * bf16 TFLOP/s), and each GEMM shape's TFLOP/s against the cuBLAS peak measured in the same
 * run (an 8192^3 GEMM). bench/torch_gpt2.py trains the same GPT-2 models, batch and dtype in
 * PyTorch for the comparison. Usage: bench_cuda [--steps N] [--batch B] [--seq T]
 * [--models a,b] (presets or model inis) [--dtype bf16|fp16] */
#include <stdlib.h>
#include <string.h>

#include "bench_gpu.h"
#include "bench_util.h"
#include "cuda_backend.h"
#include "gpt2_kernels.h"

static const double peak_TFLOPS = 989.4; /* H200 dense bf16, datasheet */

static void run(const char *name, DType dtype, int B, int T, int steps)
{
    ModelConfig c_, *c = &c_;
    Backend *be;
    Err e;
    if (model_load(name, c, &e)) {
        printf("%-10s %s\n", name, e.msg);
        return;
    }
    c->dtype = dtype;
    if (backend_cuda.create(&be, c, B, T, NULL, &e)) {
        printf("%-10s %s\n", c->name, e.msg);
        return;
    }
    size_t P = be->n_params, N = (size_t)B * T;
    float *p = malloc(P * 4);
    for (size_t i = 0; i < P; i++)
        p[i] = ((float)((i * 2654435761u) % 2001) - 1000.0f) * 2e-5f;
    be->ops->write_state(be, p, NULL, NULL, &e);
    int *inp = malloc(N * sizeof(int)), *tgt = malloc(N * sizeof(int));
    for (size_t i = 0; i < N; i++)
        inp[i] = (int)((i * 7919) % (size_t)c->vocab),
        tgt[i] = (int)((i * 104729) % (size_t)c->vocab);
    AdamConfig acfg = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                       .weight_decay = 0.1f};
    double t[64];
    float loss = 0;
    for (int s = -2; s < steps; s++) {
        double t0 = bench_now();
        if (be->ops->step(be, inp, tgt, true, &loss, &e)) {
            printf("%-10s %s\n", name, e.msg);
            return;
        }
        AdamStep as;
        adam_step_init(&as, &acfg, s + 3, 1.0f);
        be->ops->update(be, &as, 0, P, &e);
        be->ops->grad_sq(be, 0, 1); /* synchronises */
        if (s >= 0)
            t[s] = bench_now() - t0;
    }
    double dt = bench_median(t, steps), tps = N / dt;
    double lookup = c->tied ? 0 : (double)c->vocab * c->d_model; /* the input embedding's */
    double hd = (double)c->n_head * model_head_dim(c);
    double flops_tok = 6.0 * ((double)P - lookup) + 12.0 * c->n_layer * hd * (double)T;
    printf("%-10s %s B %2d T %4d  %8.3f s/step %10.0f tokens/s  MFU %5.1f%%  (loss %.3f)\n",
           c->name, dtype_name(dtype), B, T, dt, tps,
           100 * tps * flops_tok / (peak_TFLOPS * 1e12), loss);
    int C = c->d_model, F = c->d_ff, V = (int)model_padded_vocab(c);
    int qkv = (int)((c->n_head + 2 * model_kv_heads(c)) * model_head_dim(c));
    bool llama = c->arch == ARCH_LLAMA;
    struct { const char *what; int C, OC; } shapes[] = {
        {"qkv", C, qkv}, {"attn proj", (int)hd, C},
        {llama ? "gate_up" : "fc", C, (llama ? 2 : 1) * F},
        {llama ? "down" : "fc proj", F, C}, {"lm head", C, V}, {"(unpadded)", C, c->vocab},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        printf("    GEMM %-10s %5zu x %5d x %5d  %7.1f TFLOP/s\n", shapes[k].what, N,
               shapes[k].OC, shapes[k].C, gk_gemm_tflops((int)N, shapes[k].C, shapes[k].OC, 10, 0));
    be->ops->destroy(be);
    free(p), free(inp), free(tgt);
}

/* The command line (bench_check_args). */
static const char usage[] = "bench_cuda [--steps N] [--batch B] [--seq T] [--models M,M...] "
                            "[--dtype bf16|fp16]";
static const char *const options[] = {"--steps", "--batch", "--seq", "--models", "--dtype", NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    bench_gpu_or_skip();
    int steps = atoi(bench_arg(argc, argv, "--steps", "5"));
    int B = atoi(bench_arg(argc, argv, "--batch", "8"));
    int T = atoi(bench_arg(argc, argv, "--seq", "1024"));
    char models[256];
    snprintf(models, sizeof models, "%s", bench_arg(argc, argv, "--models", "gpt2-124m,gpt2-1.5b"));
    if (steps > 64)
        steps = 64;
    DType dtype;
    if (dtype_parse(bench_arg(argc, argv, "--dtype", "bf16"), &dtype) || dtype == DTYPE_FP32) {
        fprintf(stderr, "bench_cuda: --dtype expects bf16 or fp16\n");
        return 2;
    }
    double peak = gk_gemm_tflops(8192, 8192, 8192, 10, 0);
    printf("cuBLAS bf16 peak in this run: %.1f TFLOP/s (8192^3); datasheet %.1f\n", peak,
           peak_TFLOPS);
    for (char *m = strtok(models, ","); m; m = strtok(NULL, ","))
        run(m, dtype, B, T, steps);
    return 0;
}
