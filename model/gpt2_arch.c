/* gpt2_arch: GPT-2's block list, its ops' costs in the layer graph and its tensors' sizes; see
 * gpt2_arch.h, and graph.h for the counting conventions. */
#include "gpt2_arch.h"

#include <math.h>
#include <string.h>

#include "graph.h"

_Static_assert((int)GPT2_LN1 == (int)BLOCK_CKPT_OP, "the first op keeps the checkpoint");
_Static_assert((int)GPT2_TENSORS <= (int)ARCH_MAX_TENSORS, "within every family's bound");

#define IN GPT2_IN
static const BlockOpInfo gpt2_ops[GPT2_OPS] = {
    [GPT2_LN1] = {"ln1", OP_LAYERNORM, {IN, -1}, {IN, -1}},
    [GPT2_QKV] = {"qkv", OP_GEMM, {GPT2_LN1, -1}, {GPT2_LN1, -1}},
    [GPT2_ATTN] = {"attn", OP_ATTENTION, {GPT2_QKV, -1}, {GPT2_QKV, GPT2_ATTN, -1}},
    /* its input is attention's output, which attention keeps */
    [GPT2_PROJ] = {"proj", OP_GEMM, {GPT2_ATTN, -1}, {-1}},
    [GPT2_RES1] = {"res1", OP_RESIDUAL, {IN, GPT2_PROJ, -1}, {-1}},
    [GPT2_LN2] = {"ln2", OP_LAYERNORM, {GPT2_RES1, -1}, {GPT2_RES1, -1}},
    [GPT2_FC1] = {"fc1", OP_GEMM, {GPT2_LN2, -1}, {GPT2_LN2, -1}},
    [GPT2_GELU] = {"gelu", OP_GELU, {GPT2_FC1, -1}, {GPT2_FC1, -1}},
    [GPT2_FC2] = {"fc2", OP_GEMM, {GPT2_GELU, -1}, {GPT2_GELU, -1}},
    [GPT2_RES2] = {"res2", OP_RESIDUAL, {GPT2_RES1, GPT2_FC2, -1}, {-1}},
};
#undef IN

/* Block b's ops for a micro-batch of batch x s tokens: each op's FLOPs, the bytes its
 * memory-bound kernels move as the CUDA executors run it, and what it keeps for backward. */
static void gpt2_graph_ops(Op *op, const ModelConfig *c, int b, int64_t batch, int64_t s)
{
    int64_t T = batch * s, h = c->d_model, f = c->d_ff, a = c->n_head;
    int64_t dsz = (int64_t)dtype_bytes(c->dtype);
    op[GPT2_LN1] = op_layernorm(b, T, h, dsz);
    op[GPT2_QKV] = op_gemm(b, T, 3 * h, h, 3 * h * h + 3 * h, T * h * dsz, dsz);
    double attn = 4.0 * (double)batch * (double)s * (double)s * (double)h;
    op[GPT2_ATTN] = (Op){.kind = OP_ATTENTION, .block = b, .head_size = model_head_dim(c),
                         .fwd_flops = attn, .bwd_flops = 2 * attn,
                         .fwd_io_bytes = 4 * T * h * dsz, .bwd_io_bytes = 9 * T * h * dsz,
                         /* q k v, the output, the rows' log-sum-exp */
                         .act_bytes = 3 * T * h * dsz + T * h * dsz + T * a * 4,
                         .out_bytes = T * h * dsz};
    /* its input is attention's kept output */
    op[GPT2_PROJ] = op_gemm(b, T, h, h, h * h + h, 0, dsz);
    /* the executors' backward first turns the residual's fp32 gradient into dsz: 4 + dsz bytes
     * an element beside the GEMMs */
    op[GPT2_PROJ].bwd_io_bytes = T * h * (4 + dsz);
    op[GPT2_RES1] = op_residual(b, T, h, dsz);
    op[GPT2_LN2] = op_layernorm(b, T, h, dsz);
    op[GPT2_FC1] = op_gemm(b, T, f, h, f * h + f, T * h * dsz, dsz);
    /* the GELU's backward runs in fc2's: its GEMM's epilogue reads the GELU's input */
    op[GPT2_GELU] = (Op){.kind = OP_GELU, .block = b, .fwd_flops = 10.0 * T * f,
                         .bwd_flops = 14.0 * T * f, .fwd_io_bytes = 2 * T * f * dsz,
                         .bwd_io_bytes = 0, .act_bytes = T * f * dsz, .out_bytes = T * f * dsz};
    op[GPT2_FC2] = op_gemm(b, T, h, f, h * f + h, T * f * dsz, dsz);
    /* as proj's, and the GELU's input */
    op[GPT2_FC2].bwd_io_bytes = T * h * (4 + dsz) + T * f * dsz;
    op[GPT2_RES2] = op_residual(b, T, h, dsz);
}

/* The token and position embeddings' sum, and the final layernorm. */
static void gpt2_graph_edge_ops(Op *embed, Op *norm, const ModelConfig *c, int64_t T)
{
    int64_t h = c->d_model, dsz = (int64_t)dtype_bytes(c->dtype);
    /* its backward adds the fp32 residual gradient into the fp32 token and position rows (read
     * and written each), then turns the whole table's gradient into dsz */
    int64_t params = (int64_t)c->vocab * h + (int64_t)c->max_seq * h;
    *embed = (Op){.kind = OP_EMBED, .name = "embed", .params = params,
                  .fwd_flops = (double)T * h, .bwd_flops = 2.0 * T * h,
                  .fwd_io_bytes = 3 * T * h * dsz, .bwd_io_bytes = 20 * T * h + (4 + dsz) * params,
                  .act_bytes = T * 4, /* token ids */ .out_bytes = T * h * dsz};
    *norm = op_layernorm(0, T, h, dsz);
    norm->name = "lnf";
}

static void gpt2_lane_tensor_bytes(const ModelConfig *c, int64_t B, int64_t T, int64_t elem,
                                   int64_t bytes[])
{
    int64_t N = B * T, act = N * c->d_model * elem, ff = N * c->d_ff * elem;
    int64_t stats = 2 * N * 4, lse = N * c->n_head * 4;
    const int64_t t[GPT2_TENSORS] = {
        [GPT2_LN1] = act + stats, [GPT2_QKV] = 3 * act, [GPT2_ATTN] = act + lse,
        [GPT2_PROJ] = act, [GPT2_RES1] = act, [GPT2_LN2] = act + stats, [GPT2_FC1] = ff,
        [GPT2_GELU] = ff, [GPT2_FC2] = act, [GPT2_RES2] = act, [GPT2_IN] = act};
    memcpy(bytes, t, sizeof t);
}

/* exec/cuda/gpu_gpt2.cu's buffers (arch.h's LaneBuffer). */
static void gpt2_cuda_lane_buffers(const ModelConfig *c, int64_t B, int64_t T, int64_t bytes[])
{
    int64_t N = B * T, C = c->d_model, F = c->d_ff, H = c->n_head;
    int64_t chunk = graph_head_chunk(N), e = (int64_t)dtype_bytes(c->dtype);
    /* attention: fused (an fp32 N x C workspace) where arch_attention_fused; other shapes are
     * tiled by query chunks of 256 rows (exec/cuda/gpt2_attention.cu) */
    int64_t qc = B * H * 256 * T;
    int64_t att_ws = arch_attention_fused(model_head_dim(c)) ? N * C * 4
                                                        : qc * 6 + N * 2 * C * 4 + 3 * B * H * 8
                                                              + 1024;
    const int64_t b[LANE_BUFFERS] = {
        [LANE_ATT_WS] = att_ws, [LANE_LOGITS] = chunk * model_padded_vocab(c) * e,
        [LANE_NORM_OUT] = N * C * e, [LANE_DRES16] = N * C * e, [LANE_DATT] = N * C * e,
        [LANE_DQKV] = 3 * N * C * e, [LANE_DFF] = N * F * e, [LANE_NORM_STATS] = 2 * N * 4,
        [LANE_LOSSES] = N * 4, [LANE_DRES] = N * C * 4, [LANE_DNORM] = N * C * 4,
        [LANE_DELTA] = N * H * 4, [LANE_SUMS] = (9 * C + F) * 4,
        [LANE_EDGE_GRADS] = model_embed_params(c) * 4, [LANE_TOKENS] = 2 * N * 4};
    memcpy(bytes, b, sizeof b);
}

/* The CPU lane's tensors in fp32, each with its statistics (a layernorm's mean and rstd) or,
 * attention's output, its softmax (B,NH,T,T) beside it; its own buffers: one block's
 * activation gradients, the forward's scratch, the final layernorm's statistics and the
 * head's (device_cpu_gpt2.c carves them in this order). */
static void gpt2_cpu_lane_bytes(const ModelConfig *c, int64_t B, int64_t T, int64_t bytes[],
                                int64_t *own)
{
    int64_t N = B * T, C = c->d_model, NC = N * C, NF = N * c->d_ff;
    int64_t att = B * c->n_head * T * T;
    const int64_t floats[GPT2_TENSORS] = {
        [GPT2_LN1] = NC + 2 * N, [GPT2_QKV] = 3 * NC, [GPT2_ATTN] = NC + att,
        [GPT2_PROJ] = NC, [GPT2_RES1] = NC, [GPT2_LN2] = NC + 2 * N, [GPT2_FC1] = NF,
        [GPT2_GELU] = NF, [GPT2_FC2] = NC, [GPT2_RES2] = NC, [GPT2_IN] = NC};
    for (int i = 0; i < GPT2_TENSORS; i++)
        bytes[i] = floats[i] * 4;
    int64_t grads = 6 * NC + 3 * NC + 2 * att + 2 * NF;
    *own = (grads + att + 2 * N + graph_cpu_head_floats(c, B, T)) * 4;
}

const BlockArch gpt2_arch = {.name = "gpt2", .n_ops = GPT2_OPS, .input = GPT2_IN,
                             .output = GPT2_RES2, .ops = gpt2_ops,
                             .graph_ops = gpt2_graph_ops,
                             .graph_edge_ops = gpt2_graph_edge_ops,
                             .lane_tensor_bytes = gpt2_lane_tensor_bytes,
                             .cuda_lane_buffers = gpt2_cuda_lane_buffers,
                             .cpu_lane_bytes = gpt2_cpu_lane_bytes};
