/* gpu_gpt2: GPT-2's block and edges on the GPU (gpu_block.h), on gpt2_kernels.h: layernorms
 * with fp32 mean and rstd, cuBLASLt GEMMs with their bias in the epilogue, fused flash
 * attention, GELU. B.fc2 runs the GELU's backward in its GEMM's epilogue, so B.gelu has
 * nothing left to do. A GEMM's input gradient is 16-bit where it feeds another GEMM or
 * attention, fp32 where it feeds a layernorm's backward (whose weight gradient sums it over
 * every token: one rounding fewer on the longest path). */
#include "cuda_check.h"
#include "gpu_family.cuh"

extern "C" {
#include "gpt2_arch.h"
}

/* The block's parameters that kernels sum over tokens, as runs of the block layout. */
static int gpt2_init(GpuBlock *b, Err *e)
{
    (void)e;
    const ModelConfig *c = &b->cfg;
    gpt2_block_offsets(c, &b->bo.gpt2);
    gpt2_edge_offsets(c, &b->eo.gpt2);
    b->lm_head = b->eo.gpt2.lm_head;
    const Gpt2BlockOffsets *o = &b->bo.gpt2;
    size_t C = (size_t)c->d_model, F = (size_t)c->d_ff;
    const SumRun runs[] = {{o->ln1w, 2 * C}, {o->qkvb, 3 * C}, {o->projb, C},
                           {o->ln2w, 2 * C}, {o->fcb, F},      {o->fcprojb, C}};
    b->n_runs = (int)(sizeof runs / sizeof runs[0]);
    for (int i = 0; i < b->n_runs; i++)
        b->runs[i] = runs[i];
    return 0;
}

#define W(field) (w + b->bo.gpt2.field)
#define AT(field) (b->bo.gpt2.field)

static void gpt2_forward(GpuBlock *b, int op, const a16 *w, a16 *const *t)
{
    cudaStream_t_c s = gpu_stream(b);
    int N = b->N, C = b->C, F = b->cfg.d_ff;
    size_t NC = (size_t)N * C;
    /* a layernorm output's fp32 mean and rstd follow it, attention's log-sum-exp its output */
    float *st1 = t[GPT2_LN1] ? (float *)(t[GPT2_LN1] + NC) : NULL;
    float *st2 = t[GPT2_LN2] ? (float *)(t[GPT2_LN2] + NC) : NULL;
    switch (op) {
    case GPT2_LN1:
        gk_layernorm_forward(t[GPT2_LN1], st1, st1 + N, t[GPT2_IN], W(ln1w), W(ln1b), N, C,
                             b->t, s);
        break;
    case GPT2_QKV:
        gk_matmul_forward(t[GPT2_QKV], NULL, t[GPT2_LN1], W(qkvw), W(qkvb), N, C, 3 * C, b->lt,
                          b->t, s);
        break;
    case GPT2_ATTN:
        gk_attention_forward(t[GPT2_ATTN], (float *)(t[GPT2_ATTN] + NC), t[GPT2_QKV], b->B, b->T,
                             C, b->cfg.n_head, b->buf[LANE_ATT_WS], b->blas, b->t, s);
        break;
    case GPT2_PROJ:
        gk_matmul_forward(t[GPT2_PROJ], NULL, t[GPT2_ATTN], W(projw), W(projb), N, C, C, b->lt,
                          b->t, s);
        break;
    case GPT2_RES1: gk_residual_forward(t[GPT2_RES1], t[GPT2_IN], t[GPT2_PROJ], NC, b->t, s); break;
    case GPT2_LN2:
        gk_layernorm_forward(t[GPT2_LN2], st2, st2 + N, t[GPT2_RES1], W(ln2w), W(ln2b), N, C,
                             b->t, s);
        break;
    case GPT2_FC1:
        if (b->whole_forwards) /* fc's output, and its GELU, from the GEMM's epilogue */
            gk_matmul_forward(t[GPT2_GELU], t[GPT2_FC1], t[GPT2_LN2], W(fcw), W(fcb), N, C, F,
                              b->lt, b->t, s);
        else
            gk_matmul_forward(t[GPT2_FC1], NULL, t[GPT2_LN2], W(fcw), W(fcb), N, C, F, b->lt,
                              b->t, s);
        break;
    case GPT2_GELU:
        if (!b->whole_forwards)
            gk_gelu_forward(t[GPT2_GELU], t[GPT2_FC1], (size_t)N * F, b->t, s);
        break;
    case GPT2_FC2:
        gk_matmul_forward(t[GPT2_FC2], NULL, t[GPT2_GELU], W(fcprojw), W(fcprojb), N, F, C, b->lt,
                          b->t, s);
        break;
    case GPT2_RES2:
        gk_residual_forward(t[GPT2_RES2], t[GPT2_RES1], t[GPT2_FC2], NC, b->t, s);
        break;
    }
}

static void gpt2_backward(GpuBlock *b, int op, const a16 *w, a16 *const *t, void *dw)
{
    cudaStream_t_c s = gpu_stream(b);
    int N = b->N, C = b->C, F = b->cfg.d_ff;
    size_t NC = (size_t)N * C;
    float *dres = gpu_buf<float>(b, LANE_DRES), *dln = gpu_buf<float>(b, LANE_DNORM);
    a16 *dres16 = gpu_buf<a16>(b, LANE_DRES16), *dc = gpu_buf<a16>(b, LANE_DATT);
    a16 *dqkv = gpu_buf<a16>(b, LANE_DQKV), *dfc = gpu_buf<a16>(b, LANE_DFF);
    switch (op) {
    case GPT2_FC2: /* through fcproj and the GELU in one GEMM: d(fch) from the residual's */
        gk_from_f32(dres16, dres, NC, b->t, s);
        gk_matmul_backward_gelu(dfc, dres16, W(fcprojw), t[GPT2_FC1], N, F, C, b->lt, b->t, s);
        gpu_matmul_backward(b, NULL, CUDA_R_32F, dw, AT(fcprojw), true, AT(fcprojb), dres16,
                            t[GPT2_GELU], NULL, N, F, C);
        break;
    case GPT2_GELU: break; /* done in fc2's epilogue */
    case GPT2_FC1:
        gpu_matmul_backward(b, dln, CUDA_R_32F, dw, AT(fcw), true, AT(fcb), dfc, t[GPT2_LN2],
                            W(fcw), N, C, F);
        break;
    case GPT2_LN2: {
        float *st = (float *)(t[GPT2_LN2] + NC);
        gk_layernorm_backward(dres, gpu_sum_at(b, dw, AT(ln2w)), gpu_sum_at(b, dw, AT(ln2b)), dln,
                              t[GPT2_RES1], W(ln2w), st, st + N, N, C, b->t, s);
        break;
    }
    case GPT2_PROJ:
        gk_from_f32(dres16, dres, NC, b->t, s);
        gpu_matmul_backward(b, dc, gpu_type(b), dw, AT(projw), true, AT(projb), dres16,
                            t[GPT2_ATTN], W(projw), N, C, C);
        break;
    case GPT2_ATTN:
        gk_attention_backward(dqkv, gpu_buf<float>(b, LANE_DELTA), dc, t[GPT2_ATTN], t[GPT2_QKV],
                              (float *)(t[GPT2_ATTN] + NC), b->B, b->T, C, b->cfg.n_head,
                              b->buf[LANE_ATT_WS], b->blas, b->t, s);
        break;
    case GPT2_QKV:
        gpu_matmul_backward(b, dln, CUDA_R_32F, dw, AT(qkvw), true, AT(qkvb), dqkv, t[GPT2_LN1],
                            W(qkvw), N, C, 3 * C);
        break;
    case GPT2_LN1: {
        float *st = (float *)(t[GPT2_LN1] + NC);
        gk_layernorm_backward(dres, gpu_sum_at(b, dw, AT(ln1w)), gpu_sum_at(b, dw, AT(ln1b)), dln,
                              t[GPT2_IN], W(ln1w), st, st + N, N, C, b->t, s);
        break;
    }
    }
}

#undef W
#define W(field) (w + b->eo.gpt2.field)

static void gpt2_embed_forward(GpuBlock *b, const a16 *w, a16 *out)
{
    gk_encoder_forward(out, gpu_buf<int>(b, LANE_TOKENS), W(wte), W(wpe), b->B, b->T, b->C, b->t,
                       gpu_stream(b));
}

static void gpt2_embed_backward(GpuBlock *b, float *dedges)
{
    const Gpt2EdgeOffsets *o = &b->eo.gpt2;
    gk_encoder_backward(dedges + o->wte, dedges + o->wpe, gpu_buf<float>(b, LANE_DRES),
                        gpu_buf<int>(b, LANE_TOKENS), b->B, b->T, b->C, gpu_stream(b));
}

static void gpt2_norm_forward(GpuBlock *b, const a16 *w, const a16 *res)
{
    float *mean = gpu_buf<float>(b, LANE_NORM_STATS);
    gk_layernorm_forward(gpu_buf<a16>(b, LANE_NORM_OUT), mean, mean + b->N, res, W(lnfw),
                         W(lnfb), b->N, b->C, b->t, gpu_stream(b));
}

static void gpt2_norm_backward(GpuBlock *b, const a16 *w, const a16 *res, float *dedges)
{
    const Gpt2EdgeOffsets *o = &b->eo.gpt2;
    float *mean = gpu_buf<float>(b, LANE_NORM_STATS);
    gk_layernorm_backward(gpu_buf<float>(b, LANE_DRES), dedges + o->lnfw, dedges + o->lnfb,
                          gpu_buf<float>(b, LANE_DNORM), res, W(lnfw), mean, mean + b->N, b->N,
                          b->C, b->t, gpu_stream(b));
}

const GpuFamily gpu_gpt2 = {gpt2_init, gpt2_forward, gpt2_backward, gpt2_embed_forward,
                            gpt2_embed_backward, gpt2_norm_forward, gpt2_norm_backward};
