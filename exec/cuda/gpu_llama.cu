/* gpu_llama: the Llama family's block and edges on the GPU (gpu_block.h), on llama_kernels.h
 * (RMSNorm, rotary embedding from the uploaded table, grouped-query flash attention, SwiGLU,
 * the embedding) and gpt2_kernels.h's GEMMs (cuBLASLt, Qwen2's q/k/v bias in the epilogue)
 * and residual add. In backward, RoPE's runs in place on the q/k/v gradient that attention's
 * wrote, and SwiGLU's reads the down GEMM's input gradient; a GEMM's input gradient is fp32
 * where it feeds an RMSNorm's backward, 16-bit where it feeds another op. */
#include <errno.h>
#include <stdlib.h>

#include "cuda_check.h"
#include "gpu_family.cuh"

extern "C" {
#include "graph.h"
#include "llama_arch.h"
#include "llama_kernels.h"
#include "llama_ops.h"
}

struct LlamaShape {
    int B, T, N, C, F, h, g, d, qkv;
    float eps;
};

static LlamaShape shape(const GpuBlock *b)
{
    const ModelConfig *c = &b->cfg;
    int h = c->n_head, g = model_kv_heads(c), d = (int)model_head_dim(c);
    return {b->B, b->T, b->N, b->C, c->d_ff, h, g, d, (h + 2 * g) * d,
            (float)model_norm_eps(c)};
}

/* The rotary table of positions 0..T-1, computed on the host as the CPU reference's. */
static int upload_rope(GpuBlock *b, Err *e)
{
    const ModelConfig *c = &b->cfg;
    LlamaShape s = shape(b);
    RopeTable tab;
    int rc = rope_table_init(&tab, b->T, s.d, model_rope_theta(c),
                             c->rope_scaling.factor > 0 ? &c->rope_scaling : NULL, e);
    if (!rc) {
        size_t n = (size_t)b->T * (s.d / 2);
        float *dst = gpu_buf<float>(b, LANE_ROPE);
        CUDA_CHECK(cudaMemcpy(dst, tab.cos, n * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dst + n, tab.sin, n * 4, cudaMemcpyHostToDevice));
    }
    rope_table_free(&tab);
    return rc;
}

static int llama_init(GpuBlock *b, Err *e)
{
    const ModelConfig *c = &b->cfg;
    llama_block_offsets(c, &b->bo.llama);
    llama_edge_offsets(c, &b->eo.llama);
    b->lm_head = b->eo.llama.lm_head;
    const LlamaBlockOffsets *o = &b->bo.llama;
    LlamaShape s = shape(b);
    b->n_runs = 0;
    b->runs[b->n_runs++] = {o->norm1_w, (size_t)s.C};
    if (c->qkv_bias)
        b->runs[b->n_runs++] = {o->qkv_b, (size_t)s.qkv};
    b->runs[b->n_runs++] = {o->norm2_w, (size_t)s.C};
    /* the embedding's backward sorts its tokens in the head's logits, idle by then */
    size_t sort = lk_embedding_backward_scratch_bytes(b->N, c->vocab);
    size_t logits = (size_t)graph_head_chunk(b->N) * b->Vp * 2;
    if (sort > logits)
        return err_set(e, -EINVAL, "the embedding's backward needs %zu bytes to sort %d tokens, "
                       "more than the head's %zu bytes of logits it borrows", sort, b->N,
                       logits);
    return upload_rope(b, e);
}

static const float *rope_cos(const GpuBlock *b)
{
    return gpu_buf<float>(b, LANE_ROPE);
}

static const float *rope_sin(const GpuBlock *b)
{
    return gpu_buf<float>(b, LANE_ROPE) + (size_t)b->T * (shape(b).d / 2);
}

#define W(field) (w + b->bo.llama.field)
#define AT(field) (b->bo.llama.field)

static void llama_forward(GpuBlock *b, int op, const a16 *w, a16 *const *t)
{
    cudaStream_t_c st = gpu_stream(b);
    LlamaShape s = shape(b);
    size_t NC = (size_t)s.N * s.C;
    /* a norm's output carries its fp32 rstd, attention's its log-sum-exp */
    float *lse = t[LLAMA_ATTN] ? (float *)(t[LLAMA_ATTN] + (size_t)s.N * s.h * s.d) : NULL;
    switch (op) {
    case LLAMA_NORM1:
        lk_rmsnorm_forward(t[LLAMA_NORM1], (float *)(t[LLAMA_NORM1] + NC), t[LLAMA_IN],
                           W(norm1_w), s.N, s.C, s.eps, b->t, st);
        break;
    case LLAMA_QKV:
        gk_matmul_forward(t[LLAMA_QKV], NULL, t[LLAMA_NORM1], W(qkv_w),
                          b->cfg.qkv_bias ? W(qkv_b) : NULL, s.N, s.C, s.qkv, b->lt, b->t, st);
        break;
    case LLAMA_ROPE:
        lk_rope_forward(t[LLAMA_ROPE], t[LLAMA_QKV], rope_cos(b), rope_sin(b), s.B, s.T, s.h,
                        s.g, s.d, b->t, st);
        break;
    case LLAMA_ATTN:
        lk_attention_forward(t[LLAMA_ATTN], lse, t[LLAMA_ROPE], s.B, s.T, s.h, s.g, s.d,
                             b->buf[LANE_ATT_WS], b->blas, b->t, st);
        break;
    case LLAMA_O:
        gk_matmul_forward(t[LLAMA_O], NULL, t[LLAMA_ATTN], W(o_w), NULL, s.N, s.h * s.d, s.C,
                          b->lt, b->t, st);
        break;
    case LLAMA_RES1:
        gk_residual_forward(t[LLAMA_RES1], t[LLAMA_IN], t[LLAMA_O], NC, b->t, st);
        break;
    case LLAMA_NORM2:
        lk_rmsnorm_forward(t[LLAMA_NORM2], (float *)(t[LLAMA_NORM2] + NC), t[LLAMA_RES1],
                           W(norm2_w), s.N, s.C, s.eps, b->t, st);
        break;
    case LLAMA_GATE_UP:
        gk_matmul_forward(t[LLAMA_GATE_UP], NULL, t[LLAMA_NORM2], W(gate_up_w), NULL, s.N, s.C,
                          2 * s.F, b->lt, b->t, st);
        break;
    case LLAMA_SWIGLU:
        lk_swiglu_forward(t[LLAMA_SWIGLU], t[LLAMA_GATE_UP], s.N, s.F, b->t, st);
        break;
    case LLAMA_DOWN:
        gk_matmul_forward(t[LLAMA_DOWN], NULL, t[LLAMA_SWIGLU], W(down_w), NULL, s.N, s.F, s.C,
                          b->lt, b->t, st);
        break;
    case LLAMA_RES2:
        gk_residual_forward(t[LLAMA_RES2], t[LLAMA_RES1], t[LLAMA_DOWN], NC, b->t, st);
        break;
    }
}

/* A norm's backward: the residual gradient += through it, its weight's gradient summed. */
static void norm_backward(GpuBlock *b, float *dweight, const a16 *inp, const a16 *weight,
                          const float *rstd)
{
    LlamaShape s = shape(b);
    lk_rmsnorm_backward(gpu_buf<float>(b, LANE_DRES), dweight, gpu_buf<float>(b, LANE_DNORM),
                        inp, weight, rstd, s.N, s.C, b->buf[LANE_NORM_SCRATCH], b->t,
                        gpu_stream(b));
}

static void llama_backward(GpuBlock *b, int op, const a16 *w, a16 *const *t, void *dw)
{
    cudaStream_t_c st = gpu_stream(b);
    LlamaShape s = shape(b);
    size_t NC = (size_t)s.N * s.C;
    float *dres = gpu_buf<float>(b, LANE_DRES), *dnorm = gpu_buf<float>(b, LANE_DNORM);
    a16 *dres16 = gpu_buf<a16>(b, LANE_DRES16), *dattn = gpu_buf<a16>(b, LANE_DATT);
    a16 *dqkv = gpu_buf<a16>(b, LANE_DQKV), *dgate_up = gpu_buf<a16>(b, LANE_DFF);
    a16 *dswiglu = gpu_buf<a16>(b, LANE_DFF_OUT);
    float *lse = t[LLAMA_ATTN] ? (float *)(t[LLAMA_ATTN] + (size_t)s.N * s.h * s.d) : NULL;
    switch (op) {
    case LLAMA_DOWN: /* the residual's gradient is down's output gradient */
        gk_from_f32(dres16, dres, NC, b->t, st);
        gpu_matmul_backward(b, dswiglu, gpu_type(b), dw, AT(down_w), false, 0, dres16,
                            t[LLAMA_SWIGLU], W(down_w), s.N, s.F, s.C);
        break;
    case LLAMA_SWIGLU:
        lk_swiglu_backward(dgate_up, dswiglu, t[LLAMA_GATE_UP], s.N, s.F, b->t, st);
        break;
    case LLAMA_GATE_UP:
        gpu_matmul_backward(b, dnorm, CUDA_R_32F, dw, AT(gate_up_w), false, 0, dgate_up,
                            t[LLAMA_NORM2], W(gate_up_w), s.N, s.C, 2 * s.F);
        break;
    case LLAMA_NORM2:
        norm_backward(b, gpu_sum_at(b, dw, AT(norm2_w)), t[LLAMA_RES1], W(norm2_w),
                      (const float *)(t[LLAMA_NORM2] + NC));
        break;
    case LLAMA_O:
        gk_from_f32(dres16, dres, NC, b->t, st);
        gpu_matmul_backward(b, dattn, gpu_type(b), dw, AT(o_w), false, 0, dres16, t[LLAMA_ATTN],
                            W(o_w), s.N, s.h * s.d, s.C);
        break;
    case LLAMA_ATTN:
        lk_attention_backward(dqkv, gpu_buf<float>(b, LANE_DELTA), dattn, t[LLAMA_ATTN],
                              t[LLAMA_ROPE], lse, s.B, s.T, s.h, s.g, s.d, b->buf[LANE_ATT_WS],
                              b->blas, b->t, st);
        break;
    case LLAMA_ROPE: /* in place: the rotated q/k/v's gradient becomes qkv's */
        lk_rope_backward(dqkv, dqkv, rope_cos(b), rope_sin(b), s.B, s.T, s.h, s.g, s.d, b->t,
                         st);
        break;
    case LLAMA_QKV:
        gpu_matmul_backward(b, dnorm, CUDA_R_32F, dw, AT(qkv_w), b->cfg.qkv_bias, AT(qkv_b),
                            dqkv, t[LLAMA_NORM1], W(qkv_w), s.N, s.C, s.qkv);
        break;
    case LLAMA_NORM1:
        norm_backward(b, gpu_sum_at(b, dw, AT(norm1_w)), t[LLAMA_IN], W(norm1_w),
                      (const float *)(t[LLAMA_NORM1] + NC));
        break;
    }
}

#undef W
#define W(field) (w + b->eo.llama.field)

static void llama_embed_forward(GpuBlock *b, const a16 *w, a16 *out)
{
    lk_embedding_forward(out, gpu_buf<int>(b, LANE_TOKENS), W(embed), b->N, b->C, gpu_stream(b));
}

static void llama_embed_backward(GpuBlock *b, float *dedges)
{
    lk_embedding_backward(dedges + b->eo.llama.embed, gpu_buf<float>(b, LANE_DRES),
                          gpu_buf<int>(b, LANE_TOKENS), b->N, b->C, b->cfg.vocab,
                          b->buf[LANE_LOGITS], gpu_stream(b));
}

static void llama_norm_forward(GpuBlock *b, const a16 *w, const a16 *res)
{
    lk_rmsnorm_forward(gpu_buf<a16>(b, LANE_NORM_OUT), gpu_buf<float>(b, LANE_NORM_STATS), res,
                       W(norm), b->N, b->C, shape(b).eps, b->t, gpu_stream(b));
}

static void llama_norm_backward(GpuBlock *b, const a16 *w, const a16 *res, float *dedges)
{
    norm_backward(b, dedges + b->eo.llama.norm, res, W(norm),
                  gpu_buf<float>(b, LANE_NORM_STATS));
}

const GpuFamily gpu_llama = {llama_init, llama_forward, llama_backward, llama_embed_forward,
                             llama_embed_backward, llama_norm_forward, llama_norm_backward};
