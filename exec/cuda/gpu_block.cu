/* gpu_block: what every family's GPU ops share; see gpu_block.h. Creation and the buffers,
 * the dispatch to the family (gpu_family.cuh), where gradients go, and the LM head, which is
 * every family's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "gpu_family.cuh"
#include "kernel_util.cuh"

extern "C" {
#include "graph.h"
#include "llama_kernels.h"
}

static const GpuFamily *family(const ModelConfig *c)
{
    return c->arch == ARCH_LLAMA ? &gpu_llama : &gpu_gpt2;
}

/* The lanes' buffers as the family sizes them (the footprint's), the attention's workspace at
 * least what the kernels need on this device: more where the device lacks the fused kernels'
 * shared memory (an sm_89 card at head size 128), so the chunked path runs there too. */
static void buffer_bytes(const ModelConfig *c, int B, int T, int64_t bytes[LANE_BUFFERS])
{
    model_arch(c)->cuda_lane_buffers(c, B, T, bytes);
    /* the kernels' own workspace (GPT-2's multi-head is g == h; its fused path's fp32 buffer
     * is already the lane's) */
    size_t ws = lk_attention_workspace_bytes(B, T, c->n_head, model_kv_heads(c),
                                             (int)model_head_dim(c));
    if ((int64_t)ws > bytes[LANE_ATT_WS])
        bytes[LANE_ATT_WS] = (int64_t)ws;
}

extern "C" size_t gpu_block_own_bytes(const ModelConfig *c, int B, int T)
{
    int64_t bytes[LANE_BUFFERS], n = 0;
    buffer_bytes(c, B, T, bytes);
    for (int i = 0; i < LANE_BUFFERS; i++)
        n += lane_round(bytes[i]);
    return (size_t)n;
}

extern "C" void gpu_block_destroy(GpuBlock *b)
{
    if (!b)
        return;
    if (b->mem)
        cudaFree(b->mem);
    if (b->blas)
        cublasDestroy(b->blas);
    gk_lt_destroy(b->lt);
    free(b);
}

/* The buffers, carved from one allocation in LaneBuffer order. */
static int carve(GpuBlock *b, Err *e)
{
    size_t total = gpu_block_own_bytes(&b->cfg, b->B, b->T);
    if (cudaMalloc(&b->mem, total ? total : 256) != cudaSuccess) {
        cudaGetLastError();
        b->mem = NULL;
        return err_set(e, -ENOMEM, "the GPU has no room for the compute's %.2f GiB of own "
                       "buffers (activation gradients, one chunk of logits, workspace); lower "
                       "--batch or --seq", total / 1073741824.0);
    }
    int64_t bytes[LANE_BUFFERS];
    buffer_bytes(&b->cfg, b->B, b->T, bytes);
    char *p = (char *)b->mem;
    for (int i = 0; i < LANE_BUFFERS; i++) {
        b->buf[i] = bytes[i] ? p : NULL;
        p += lane_round(bytes[i]);
    }
    return 0;
}

extern "C" int gpu_block_create(GpuBlock **out, const ModelConfig *c, int B, int T,
                                GpuGrads grads, cudaStream_t_c s, Err *e)
{
    *out = NULL;
    if (c->dtype != DTYPE_BF16 && c->dtype != DTYPE_FP16)
        return err_set(e, -EINVAL, "the GPU computes in bf16 or fp16, not %s",
                       dtype_name(c->dtype));
    GpuBlock *b = (GpuBlock *)calloc(1, sizeof *b);
    if (!b)
        return err_set(e, -ENOMEM, "out of memory");
    b->cfg = *c;
    b->B = B, b->T = T, b->N = B * T, b->C = c->d_model;
    b->Vp = (int)model_padded_vocab(c);
    b->t = c->dtype == DTYPE_FP16 ? GK_FP16 : GK_BF16;
    b->grads = grads;
    b->s = (cudaStream_t)s;
    b->fam = family(c);
    int rc = carve(b, e);
    if (!rc) {
        CUBLAS_CHECK(cublasCreate(&b->blas));
        CUBLAS_CHECK(cublasSetStream(b->blas, b->s));
        b->lt = gk_lt_create();
        rc = b->fam->init(b, e);
    }
    if (rc) {
        gpu_block_destroy(b);
        return rc;
    }
    *out = b;
    return 0;
}

extern "C" void gpu_block_whole_forwards(GpuBlock *b)
{
    b->whole_forwards = true;
}

extern "C" int *gpu_block_tokens(GpuBlock *b)
{
    return gpu_buf<int>(b, LANE_TOKENS);
}

extern "C" const float *gpu_block_losses(const GpuBlock *b)
{
    return gpu_buf<float>(b, LANE_LOSSES);
}

static __global__ void losses_out_kernel(float *host, const float *losses, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        host[i] = losses[i];
}

extern "C" void gpu_block_losses_out(GpuBlock *b, float *mapped)
{
    losses_out_kernel<<<blocks_for((size_t)b->N, 256), 256, 0, b->s>>>(mapped,
                                                                     gpu_block_losses(b), b->N);
    CUDA_CHECK(cudaGetLastError());
}

/* ---- edges ----------------------------------------------------------------------------- */

/* The edges' fp32 gradients: dw itself, or the block's own sum (GPU_GRADS_16). */
static float *edge_grads(const GpuBlock *b, void *dw)
{
    return b->grads == GPU_GRADS_F32 ? (float *)dw : gpu_buf<float>(b, LANE_EDGE_GRADS);
}

/* ---- blocks --------------------------------------------------------------------------------- */

extern "C" void gpu_block_forward(GpuBlock *b, int op, const act16_t *w, act16_t *const t[])
{
    b->fam->forward(b, op, w, t);
}

/* GPU_GRADS_16: the sums start at a block's first backward op and leave at its last. */
extern "C" void gpu_block_backward(GpuBlock *b, int op, const act16_t *w, act16_t *const t[],
                                   void *dw, bool first)
{
    bool sums = b->grads == GPU_GRADS_16 && b->n_runs > 0;
    if (sums && first) {
        size_t n = 0;
        for (int i = 0; i < b->n_runs; i++)
            n += b->runs[i].n;
        CUDA_CHECK(cudaMemsetAsync(b->buf[LANE_SUMS], 0, n * 4, b->s));
    }
    b->fam->backward(b, op, w, t, dw);
    if (sums && op == BLOCK_CKPT_OP) {
        const float *from = gpu_buf<float>(b, LANE_SUMS);
        for (int i = 0; i < b->n_runs; i++) {
            gk_from_f32((a16 *)dw + b->runs[i].at, from, b->runs[i].n, b->t, gpu_stream(b));
            from += b->runs[i].n;
        }
    }
}

/* ---- edges ---------------------------------------------------------------------------------- */

extern "C" void gpu_embed_forward(GpuBlock *b, const act16_t *w, act16_t *out)
{
    b->fam->embed_forward(b, w, out);
}

extern "C" void gpu_embed_backward(GpuBlock *b, void *dw)
{
    float *dedges = edge_grads(b, dw);
    b->fam->embed_backward(b, dedges);
    if (b->grads == GPU_GRADS_16)
        gk_from_f32((a16 *)dw, dedges, (size_t)model_embed_params(&b->cfg), b->t,
                    gpu_stream(b));
}

extern "C" void gpu_norm_forward(GpuBlock *b, const act16_t *w, const act16_t *res)
{
    b->fam->norm_forward(b, w, res);
}

extern "C" void gpu_norm_backward(GpuBlock *b, const act16_t *w, const act16_t *res, void *dw)
{
    CUDA_CHECK(cudaMemsetAsync(b->buf[LANE_DRES], 0, (size_t)b->N * b->C * 4, b->s));
    b->fam->norm_backward(b, w, res, edge_grads(b, dw));
}

/* The head over the n tokens from row r: the chunk's logits (V of each padded row; the loss
 * kernel reads no further and zeroes the rest of the gradient), their losses and, with
 * backward, in place their gradient, then the head's input gradient (its rows of the norm's
 * input gradient) and weight gradient (+= into dlm). Each GEMM runs over the vocabulary's
 * largest multiple of MODEL_VOCAB_ALIGN rows, then the few left (model.h): cuBLAS runs a
 * dimension of 50257 at an eighth of the speed of 50240 (MEASUREMENTS.md). */
static void head_chunk(GpuBlock *b, const a16 *wlm, float *dlm, float grad_scale, int n_targets,
                       bool backward, int r, int n)
{
    int C = b->C, V = b->cfg.vocab, Vp = b->Vp;
    int aligned = V / MODEL_VOCAB_ALIGN * MODEL_VOCAB_ALIGN;
    int part[2] = {aligned, V - aligned}, at[2] = {0, aligned};
    const a16 *x = gpu_buf<a16>(b, LANE_NORM_OUT) + (size_t)r * C;
    a16 *logits = gpu_buf<a16>(b, LANE_LOGITS);
    for (int i = 0; i < 2; i++)
        if (part[i])
            gpu_gemm(b, CUBLAS_OP_T, CUBLAS_OP_N, part[i], n, C, wlm + (size_t)at[i] * C, C, x,
                     C, 0.0f, logits + at[i], gpu_type(b), Vp);
    /* the kernel takes the mean over the n rows it is given; the loss is the mean over the
     * counted targets */
    float scale = n_targets ? (float)((double)grad_scale * n / n_targets) : 0.0f;
    const int *targets = gpu_block_tokens(b) + b->N + r;
    gk_softmax_crossentropy(gpu_buf<float>(b, LANE_LOSSES) + r, logits, targets, n, V, Vp,
                            backward, scale, b->t, gpu_stream(b));
    if (!backward)
        return;
    float *dx = gpu_buf<float>(b, LANE_DNORM) + (size_t)r * C;
    for (int i = 0; i < 2; i++) {
        if (!part[i])
            continue;
        gpu_gemm(b, CUBLAS_OP_N, CUBLAS_OP_N, C, n, part[i], wlm + (size_t)at[i] * C, C,
                 logits + at[i], Vp, i && part[0] ? 1.0f : 0.0f, dx, CUDA_R_32F, C);
        gpu_gemm(b, CUBLAS_OP_N, CUBLAS_OP_T, C, part[i], n, x, C, logits + at[i], Vp, 1.0f,
                 dlm + (size_t)at[i] * C, CUDA_R_32F, C);
    }
}

extern "C" void gpu_head(GpuBlock *b, const act16_t *w, void *dw, float grad_scale,
                         int n_targets, bool backward)
{
    float *dedges = backward ? edge_grads(b, dw) : NULL;
    if (backward && b->grads == GPU_GRADS_16)
        CUDA_CHECK(cudaMemsetAsync(dedges, 0, (size_t)model_embed_params(&b->cfg) * 4, b->s));
    int N = b->N, chunk = (int)graph_head_chunk(N);
    for (int r = 0; r < N; r += chunk)
        head_chunk(b, w + b->lm_head, dedges ? dedges + b->lm_head : NULL, grad_scale,
                   n_targets, backward, r, N - r < chunk ? N - r : chunk);
}
