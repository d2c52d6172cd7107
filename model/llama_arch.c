/* llama_arch: the Llama block's list, its ops' costs in the layer graph and its tensors' sizes;
 * see llama_arch.h, and graph.h for the counting conventions. With h query heads and g kv heads
 * of d each: q is h d wide, k and v g d each. */
#include "llama_arch.h"

#include <math.h>
#include <string.h>

#include "graph.h"

_Static_assert((int)LLAMA_NORM1 == (int)BLOCK_CKPT_OP, "the first op keeps the checkpoint");
_Static_assert((int)LLAMA_TENSORS <= (int)ARCH_MAX_TENSORS, "within every family's bound");

#define IN LLAMA_IN
static const BlockOpInfo llama_ops[LLAMA_OPS] = {
    [LLAMA_NORM1] = {"norm1", OP_RMSNORM, {IN, -1}, {IN, -1}},
    [LLAMA_QKV] = {"qkv", OP_GEMM, {LLAMA_NORM1, -1}, {LLAMA_NORM1, -1}},
    /* a rotation: its backward needs no tensor, only the positions */
    [LLAMA_ROPE] = {"rope", OP_ROPE, {LLAMA_QKV, -1}, {-1}},
    [LLAMA_ATTN] = {"attn", OP_ATTENTION, {LLAMA_ROPE, -1}, {LLAMA_ROPE, LLAMA_ATTN, -1}},
    /* its input is attention's output, which attention keeps */
    [LLAMA_O] = {"o", OP_GEMM, {LLAMA_ATTN, -1}, {-1}},
    [LLAMA_RES1] = {"res1", OP_RESIDUAL, {IN, LLAMA_O, -1}, {-1}},
    [LLAMA_NORM2] = {"norm2", OP_RMSNORM, {LLAMA_RES1, -1}, {LLAMA_RES1, -1}},
    [LLAMA_GATE_UP] = {"gate_up", OP_GEMM, {LLAMA_NORM2, -1}, {LLAMA_NORM2, -1}},
    [LLAMA_SWIGLU] = {"swiglu", OP_SWIGLU, {LLAMA_GATE_UP, -1}, {LLAMA_GATE_UP, -1}},
    [LLAMA_DOWN] = {"down", OP_GEMM, {LLAMA_SWIGLU, -1}, {LLAMA_SWIGLU, -1}},
    [LLAMA_RES2] = {"res2", OP_RESIDUAL, {LLAMA_RES1, LLAMA_DOWN, -1}, {-1}},
};
#undef IN

/* Block b's ops for a micro-batch of batch x s tokens: each op's FLOPs, the bytes its
 * memory-bound kernels move, and what it keeps for backward. */
static void llama_graph_ops(Op *op, const ModelConfig *c, int b, int64_t batch, int64_t s)
{
    int64_t T = batch * s, C = c->d_model, F = c->d_ff, h = c->n_head, g = model_kv_heads(c);
    int64_t d = model_head_dim(c), q = h * d, qkv = (h + 2 * g) * d;
    int64_t dsz = (int64_t)dtype_bytes(c->dtype);
    op[LLAMA_NORM1] = op_rmsnorm(b, T, C, dsz);
    op[LLAMA_QKV] = op_gemm(b, T, qkv, C, qkv * C + (c->qkv_bias ? qkv : 0), T * C * dsz, dsz);
    /* each rotated pair: two products and a sum per element of q and k, the table read once */
    op[LLAMA_ROPE] = (Op){.kind = OP_ROPE, .block = b, .fwd_flops = 3.0 * T * (h + g) * d,
                          .bwd_flops = 3.0 * T * (h + g) * d,
                          .fwd_io_bytes = 2 * T * qkv * dsz, .bwd_io_bytes = 2 * T * qkv * dsz,
                          .out_bytes = T * qkv * dsz};
    /* as GPT-2's, over the query heads (the k/v heads are shared, not fewer products); it reads
     * q, k, v and writes the output forward, and backward reads them, the output and its
     * gradient and writes q, k and v's */
    double attn = 4.0 * (double)batch * (double)s * (double)s * (double)q;
    op[LLAMA_ATTN] = (Op){.kind = OP_ATTENTION, .block = b, .head_size = d, .fwd_flops = attn,
                          .bwd_flops = 2 * attn, .fwd_io_bytes = T * (qkv + q) * dsz,
                          .bwd_io_bytes = T * (2 * qkv + 3 * q) * dsz,
                          /* the rotated q k v, the output, the rows' log-sum-exp */
                          .act_bytes = T * qkv * dsz + T * q * dsz + T * h * 4,
                          .out_bytes = T * q * dsz};
    op[LLAMA_O] = op_gemm(b, T, C, q, C * q, 0, dsz);
    /* the backward first turns the residual's fp32 gradient into dsz, as GPT-2's proj does */
    op[LLAMA_O].bwd_io_bytes = T * C * (4 + dsz);
    op[LLAMA_RES1] = op_residual(b, T, C, dsz);
    op[LLAMA_NORM2] = op_rmsnorm(b, T, C, dsz);
    op[LLAMA_GATE_UP] = op_gemm(b, T, 2 * F, C, 2 * F * C, T * C * dsz, dsz);
    /* silu(gate) * up: ~5 FLOPs an element forward, ~8 backward; forward reads gate and up and
     * writes the product, backward reads them and the product's gradient, writes theirs */
    op[LLAMA_SWIGLU] = (Op){.kind = OP_SWIGLU, .block = b, .fwd_flops = 5.0 * T * F,
                            .bwd_flops = 8.0 * T * F, .fwd_io_bytes = 3 * T * F * dsz,
                            .bwd_io_bytes = 5 * T * F * dsz, .act_bytes = 2 * T * F * dsz,
                            .out_bytes = T * F * dsz};
    op[LLAMA_DOWN] = op_gemm(b, T, C, F, C * F, T * F * dsz, dsz);
    op[LLAMA_DOWN].bwd_io_bytes = T * C * (4 + dsz); /* as o's */
    op[LLAMA_RES2] = op_residual(b, T, C, dsz);
}

/* The token embedding (no positions: the blocks rotate q and k) and the final RMSNorm. */
static void llama_graph_edge_ops(Op *embed, Op *norm, const ModelConfig *c, int64_t T)
{
    int64_t C = c->d_model, dsz = (int64_t)dtype_bytes(c->dtype);
    int64_t params = (int64_t)c->vocab * C;
    /* forward gathers the rows; backward adds the fp32 residual gradient into the fp32 rows
     * (read and written), then turns the table's gradient into dsz */
    *embed = (Op){.kind = OP_EMBED, .name = "embed", .params = params, .fwd_flops = 0,
                  .bwd_flops = (double)T * C, .fwd_io_bytes = 2 * T * C * dsz,
                  .bwd_io_bytes = 12 * T * C + (4 + dsz) * params, .act_bytes = T * 4,
                  .out_bytes = T * C * dsz};
    *norm = op_rmsnorm(0, T, C, dsz);
    norm->name = "norm";
}

static void llama_lane_tensor_bytes(const ModelConfig *c, int64_t B, int64_t T, int64_t elem,
                                    int64_t bytes[])
{
    int64_t N = B * T, h = c->n_head, d = model_head_dim(c);
    int64_t act = N * c->d_model * elem, qkv = N * (h + 2 * model_kv_heads(c)) * d * elem;
    int64_t rstd = N * 4, lse = N * h * 4, ff = N * c->d_ff * elem;
    const int64_t t[LLAMA_TENSORS] = {
        [LLAMA_NORM1] = act + rstd, [LLAMA_QKV] = qkv, [LLAMA_ROPE] = qkv,
        [LLAMA_ATTN] = N * h * d * elem + lse, [LLAMA_O] = act, [LLAMA_RES1] = act,
        [LLAMA_NORM2] = act + rstd, [LLAMA_GATE_UP] = 2 * ff, [LLAMA_SWIGLU] = ff,
        [LLAMA_DOWN] = act, [LLAMA_RES2] = act, [LLAMA_IN] = act};
    memcpy(bytes, t, sizeof t);
}

/* exec/cuda/gpu_llama.cu's buffers (arch.h's LaneBuffer): GPT-2's with grouped-query
 * attention's widths, SwiGLU's two gradients, the rotary table; norms and no biases (Qwen2:
 * the qkv bias) among the sums. */
static void llama_cuda_lane_buffers(const ModelConfig *c, int64_t B, int64_t T, int64_t bytes[])
{
    int64_t N = B * T, C = c->d_model, F = c->d_ff, h = c->n_head, d = model_head_dim(c);
    int64_t qkv = (h + 2 * model_kv_heads(c)) * d;
    int64_t chunk = graph_head_chunk(N), e = (int64_t)dtype_bytes(c->dtype);
    /* attention: fused where arch_attention_fused (no workspace); other shapes are tiled by
     * query chunks of 256 rows with fp32 dK and dV per query head (exec/cuda/gpt2_attention.cu,
     * lk_attention_workspace_bytes) */
    int64_t att_ws = arch_attention_fused(d)
                         ? 0 : B * h * 256 * T * 6 + N * 2 * h * d * 4 + 3 * B * h * 8 + 1024;
    const int64_t b[LANE_BUFFERS] = {
        [LANE_ATT_WS] = att_ws, [LANE_LOGITS] = chunk * model_padded_vocab(c) * e,
        [LANE_NORM_OUT] = N * C * e, [LANE_DRES16] = N * C * e, [LANE_DATT] = N * h * d * e,
        [LANE_DQKV] = N * qkv * e, [LANE_DFF] = 2 * N * F * e, [LANE_DFF_OUT] = N * F * e,
        [LANE_NORM_STATS] = N * 4, [LANE_LOSSES] = N * 4, [LANE_DRES] = N * C * 4,
        [LANE_DNORM] = N * C * 4, [LANE_DELTA] = N * h * 4,
        [LANE_SUMS] = (2 * C + (c->qkv_bias ? qkv : 0)) * 4,
        [LANE_EDGE_GRADS] = model_embed_params(c) * 4, [LANE_TOKENS] = 2 * N * 4,
        [LANE_ROPE] = T * d * 4,
        [LANE_NORM_SCRATCH] = (N + RMS_PART_ROWS - 1) / RMS_PART_ROWS * C * 4};
    memcpy(bytes, b, sizeof b);
}

/* The CPU lane's tensors in fp32, each norm's output with its rstd and attention's output
 * with its softmax (B,h,T,T) beside it; its own buffers: one block's activation gradients,
 * the forward's scratch, the final norm's rstd, the head's, and the rotary table (T positions
 * of d/2 cosines and sines; device_cpu_llama.c carves them in this order). */
static void llama_cpu_lane_bytes(const ModelConfig *c, int64_t B, int64_t T, int64_t bytes[],
                                 int64_t *own)
{
    int64_t N = B * T, NC = N * c->d_model, d = model_head_dim(c);
    int64_t h = c->n_head, qkv = N * (h + 2 * model_kv_heads(c)) * d, q = N * h * d;
    int64_t NF = N * c->d_ff, att = B * h * T * T;
    const int64_t floats[LLAMA_TENSORS] = {
        [LLAMA_NORM1] = NC + N, [LLAMA_QKV] = qkv, [LLAMA_ROPE] = qkv, [LLAMA_ATTN] = q + att,
        [LLAMA_O] = NC, [LLAMA_RES1] = NC, [LLAMA_NORM2] = NC + N, [LLAMA_GATE_UP] = 2 * NF,
        [LLAMA_SWIGLU] = NF, [LLAMA_DOWN] = NC, [LLAMA_RES2] = NC, [LLAMA_IN] = NC};
    for (int i = 0; i < LLAMA_TENSORS; i++)
        bytes[i] = floats[i] * 4;
    int64_t grads = 5 * NC + 2 * qkv + q + 2 * att + 3 * NF;
    *own = (grads + att + N + graph_cpu_head_floats(c, B, T)) * 4 + T * d * 4;
}

const BlockArch llama_arch = {.name = "llama", .n_ops = LLAMA_OPS, .input = LLAMA_IN,
                              .output = LLAMA_RES2, .ops = llama_ops,
                              .graph_ops = llama_graph_ops,
                              .graph_edge_ops = llama_graph_edge_ops,
                              .lane_tensor_bytes = llama_lane_tensor_bytes,
                              .cuda_lane_buffers = llama_cuda_lane_buffers,
                              .cpu_lane_bytes = llama_cpu_lane_bytes};
