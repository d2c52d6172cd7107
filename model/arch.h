/* arch: the block architectures fuyou describes, each one named list of a block's ops.
 *
 * A family (GPT-2's block in gpt2_arch.h) names its ops in an enum, in execution order, and
 * describes each here: its name, its kind, the tensors it reads and the ones it keeps for
 * backward. The graph, the schedule, the footprint, the planner, both compute devices and the
 * pipeline index a block's ops and tensors by these names, or walk the list; none knows an
 * op's position in one family's list. A second family adds its own enum and table; it does not
 * offset into another's.
 *
 * Tensors of a block: op i's output is tensor i; tensor n_ops is the block's input (the
 * checkpoint), BlockArch.input. The first op of every family (BLOCK_CKPT_OP) is the norm that
 * reads the block input and keeps it: the checkpoint, never recomputed. The ops outside the
 * blocks (the embedding before them, the final norm, head and loss after) have names of their
 * own (EdgeOp), numbered apart from every family's block ops. */
#ifndef FUYOU_ARCH_H
#define FUYOU_ARCH_H

#include <stdbool.h>
#include <stdint.h>

typedef enum OpKind {
    OP_EMBED,
    OP_LAYERNORM,
    OP_GEMM,
    OP_ATTENTION,
    OP_RESIDUAL,
    OP_GELU,
    OP_LOSS,
    OP_RMSNORM,
    OP_ROPE,
    OP_SWIGLU,
} OpKind;

/* The most ops and tensors one block of any family has (array bounds), the most inputs and
 * kept tensors of one op (each list -1 terminated within it). */
enum { ARCH_MAX_OPS = 15, ARCH_MAX_TENSORS = ARCH_MAX_OPS + 1, ARCH_MAX_REFS = 4 };

/* The op of every family's list that keeps the block input: the first. */
enum { BLOCK_CKPT_OP = 0 };

/* The ops outside the blocks, in every family. */
typedef enum EdgeOp {
    EDGE_EMBED = ARCH_MAX_TENSORS, /* tokens (and positions) to the first block's input */
    EDGE_NORM,                     /* the final norm, over the last block's output */
    EDGE_HEAD,                     /* the LM head: logits, fused with the loss's gradient */
    EDGE_LOSS,                     /* the per-token losses' mean */
} EdgeOp;

typedef struct BlockOpInfo {
    const char *name;                   /* "fc1": the task ids' ("F.b3.fc1") */
    OpKind kind;
    signed char inputs[ARCH_MAX_REFS];  /* tensors it reads, -1 terminated */
    signed char saves[ARCH_MAX_REFS];   /* tensors it keeps for backward (its act_bytes) */
} BlockOpInfo;

struct Op;
struct ModelConfig;

typedef struct BlockArch {
    const char *name;        /* "gpt2" */
    int n_ops;               /* ops of a block; op i's output is tensor i */
    int input;               /* the block input's tensor: n_ops */
    int output;              /* the op whose output is the block's, the next block's input */
    const BlockOpInfo *ops;  /* n_ops, in execution order */
    /* The layer graph's ops of block `block` (graph.h) for a micro-batch of batch sequences of
     * seq tokens, into ops[0 .. n_ops). */
    void (*graph_ops)(struct Op *ops, const struct ModelConfig *c, int block, int64_t batch,
                      int64_t seq);
    /* The embedding's and the final norm's ops (graph.h) for T tokens. */
    void (*graph_edge_ops)(struct Op *embed, struct Op *norm, const struct ModelConfig *c,
                           int64_t T);
    /* Bytes of each block tensor (n_ops + 1) for a micro-batch of B x T on a lane whose
     * activations take elem bytes an element: the tensor, and what its backward needs beside
     * it (a norm's fp32 statistics, attention's rows' log-sum-exp). */
    void (*lane_tensor_bytes)(const struct ModelConfig *c, int64_t B, int64_t T, int64_t elem,
                              int64_t bytes[]);
    /* What a 16-bit CUDA lane allocates for itself for a micro-batch of B x T, buffer by
     * buffer (LaneBuffer): the CUDA device carves these, the footprint sums them
     * (footprint.h). */
    void (*cuda_lane_buffers)(const struct ModelConfig *c, int64_t B, int64_t T,
                              int64_t bytes[]);
    /* The fp32 CPU reference lane (exec/pipeline/device_cpu.h) for a micro-batch of B x T:
     * each block tensor as it keeps it, with what backward needs beside it, into bytes[]
     * (n_ops + 1), and what it allocates for itself (*own: one block's activation gradients,
     * its scratch, graph_cpu_head_floats and the family's tables), in bytes. The CPU device
     * carves its buffers to these sizes; the footprint sums them (footprint_cpu_lane). */
    void (*cpu_lane_bytes)(const struct ModelConfig *c, int64_t B, int64_t T, int64_t bytes[],
                           int64_t *own);
} BlockArch;

/* The buffers a 16-bit CUDA lane (exec/cuda/gpu_block.h) holds besides the block tensors, by
 * role; a family without one sizes it 0. N = B * T tokens, C channels. */
typedef enum LaneBuffer {
    LANE_ATT_WS,     /* attention's workspace */
    LANE_LOGITS,     /* one head chunk's logits (then their gradient), rows padded */
    LANE_NORM_OUT,   /* the final norm's output (N,C) */
    LANE_DRES16,     /* the residual stream's gradient in 16 bits, a GEMM's input */
    LANE_DATT,       /* attention output's gradient */
    LANE_DQKV,       /* the q/k/v GEMM output's gradient */
    LANE_DFF,        /* the MLP's first GEMM output's gradient: fc (F) or gate_up (2F) */
    LANE_DFF_OUT,    /* the gated product's gradient (F): Llama's SwiGLU */
    LANE_NORM_STATS, /* the final norm's fp32 statistics */
    LANE_LOSSES,     /* per-token losses, fp32 */
    LANE_DRES,       /* the residual stream's gradient, fp32 */
    LANE_DNORM,      /* a norm's input gradient from the GEMM after it, fp32 */
    LANE_DELTA,      /* attention's backward row sums, fp32 */
    LANE_SUMS,       /* a block's gradients summed over tokens (biases, norm gains), fp32 */
    LANE_EDGE_GRADS, /* the edges' gradients, fp32 */
    LANE_TOKENS,     /* token ids, then targets */
    LANE_ROPE,       /* the rotary table: cos, then sin, (T, d/2) each, fp32 */
    LANE_NORM_SCRATCH, /* an RMSNorm's weight gradient in partial sums, fp32 */
    LANE_BUFFERS
} LaneBuffer;

/* The rows one partial sum of an RMSNorm's weight gradient covers: the lane's
 * LANE_NORM_SCRATCH holds a partial a RMS_PART_ROWS rows (lk_rmsnorm_backward). */
enum { RMS_PART_ROWS = 16 };

/* A GPU allocation as the CUDA lane carves its buffers: 256-byte aligned. */
static inline int64_t lane_round(int64_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

/* Whether the fused attention kernels (exec/cuda/flash_attention.cu) take heads of d values:
 * the one list the lanes' workspace sizes (cuda_lane_buffers) and the kernels' dispatch read.
 * Other head sizes run the chunked path, which needs a workspace of its own. */
static inline bool arch_attention_fused(int64_t d)
{
    return d == 32 || d == 64 || d == 80 || d == 96 || d == 128;
}

typedef enum Arch { ARCH_GPT2, ARCH_LLAMA, ARCH_COUNT } Arch;

/* The description of architecture a (a static table). */
const BlockArch *arch_block(Arch a);
const char *arch_name(Arch a);

/* A block's tensors: n_ops outputs and the input. */
static inline int arch_tensors(const BlockArch *a)
{
    return a->n_ops + 1;
}

/* Whether a block's op has backward work: all but the residual adds, whose pass-through the
 * residual stream's gradient carries (the graph gives them no backward cost). */
static inline bool arch_op_has_backward(const BlockArch *a, int op)
{
    return a->ops[op].kind != OP_RESIDUAL;
}

/* Which ops of a block backward must run again when kept[i] says whether op i's kept tensors
 * are kept (else recomputed): rerun[i] for op i. Follows the dataflow from each tensor a kept
 * op does not keep back to tensors that are kept, or the block input. */
void arch_recompute_set(const BlockArch *a, const bool kept[], bool rerun[]);

#endif
