/* graph: the layer graph of one GPT-style training step, for one micro-batch.
 *
 * Ops in execution order: the embedding, then each block's ops as its family lists them (arch.h;
 * GPT-2's in gpt2_arch.h, whose builder gives their costs), then the final norm, the LM head and
 * the loss (EdgeOp). Each op carries its GEMM shape, forward and backward FLOPs, parameter count,
 * device-memory traffic for memory-bound kernels, and the activation bytes it must keep for the
 * backward pass. It describes work, not time: durations come from costmodel/.
 *
 * Conventions (so that numbers compare with the literature):
 * - A GEMM of m x k by k x n costs 2mnk forward and 4mnk backward (input and weight gradients);
 *   bias adds and the softmax are counted as memory-bound "other" work.
 * - Attention counts the full s x s score matrix, as Megatron-LM and PaLM's MFU do: 4·b·s²·h
 *   forward, 8·b·s²·h backward. A causal kernel does about half of that; costmodel/ applies it.
 * - Activations assume a fused (flash-style) attention that keeps q, k, v, the output and the
 *   row log-sum-exp, so memory is linear in the sequence length; no dropout. A block then keeps
 *   32·b·s·h bytes in 16-bit (Korthikanti et al. 2022 count 34 with dropout masks) plus LN and
 *   attention statistics. Each saved tensor is counted once, at the op that first keeps it. */
#ifndef FUYOU_GRAPH_H
#define FUYOU_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "fuyou_err.h"
#include "model.h"
#include "op.h"


/* The head runs over chunks of at most GRAPH_HEAD_CHUNK tokens, forward and backward fused per
 * chunk (logits, softmax + cross-entropy, the logits' gradient, then the head's input and weight
 * gradients), so that nothing holds a micro-batch's b x s x V logits; the executors run it so
 * and the footprint counts one chunk. */
enum { GRAPH_HEAD_CHUNK = 4096 };
static inline int64_t graph_head_chunk(int64_t tokens)
{
    return tokens < GRAPH_HEAD_CHUNK ? tokens : GRAPH_HEAD_CHUNK;
}

/* Floats of what every family's CPU lane keeps for the residual stream's gradients and the LM
 * head (exec/pipeline/device_cpu_head.c) for a micro-batch of B x T: two residual gradients,
 * the final norm's output and its gradient (N, C) each, one head chunk's logits and
 * probabilities (graph_head_chunk x vocab), the per-token losses (N) and a chunk's loss
 * gradients. */
static inline int64_t graph_cpu_head_floats(const ModelConfig *c, int64_t B, int64_t T)
{
    int64_t N = B * T, chunk = graph_head_chunk(N);
    return 4 * N * c->d_model + 2 * chunk * c->vocab + N + chunk;
}

/* Limits of one micro-batch (docs/fuyou-sim.md, "Limits"), on top of the model's (model.h): at most
 * GRAPH_MAX_BATCH sequences and GRAPH_MAX_TOKENS tokens, which keep every op's sizes exact in
 * int64, and at most GRAPH_MAX_ACT_BYTES of activations kept when nothing is recomputed (1 PiB),
 * which keeps every total (graph_totals, the footprint) exact too. */
enum { GRAPH_MAX_BATCH = 1 << 20 };
#define GRAPH_MAX_TOKENS ((int64_t)1 << 32)
#define GRAPH_MAX_ACT_BYTES ((int64_t)1 << 50)

/* What a compute lane allocates for one micro-batch (footprint.h): each tensor of a block as the
 * lane keeps it (by the family's tensor names, arch.h), its own working set, and the bytes of
 * one weight and of one gradient element. */
typedef struct LaneSizes {
    int64_t tensor[ARCH_MAX_TENSORS];
    int64_t own;
    int weight_bytes, grad_bytes;
    bool on_host; /* the CPU reference's lane: its "GPU" tier is host memory, named "device" */
} LaneSizes;

typedef struct Graph {
    ModelConfig cfg;
    const BlockArch *arch; /* cfg's block: its ops by name */
    int batch;      /* micro-batch size */
    int seq;        /* sequence length, <= cfg.max_seq */
    int64_t tokens; /* batch * seq */
    Op *ops;        /* the embedding, n_layer blocks of arch->n_ops, the final norm, head, loss */
    int n_ops;
    bool has_lane;  /* planning for an executor's lane: its sizes (else the CUDA lane's) */
    LaneSizes lane;
} Graph;

/* Builds the graph of cfg for a micro-batch of batch sequences of seq tokens. The caller owns g
 * and frees it with graph_free (safe on a failed init). Returns 0, -EINVAL for a bad size or one
 * beyond the limits above (e says which, naming --batch and --seq), -ENOMEM. */
int graph_init(Graph *g, const ModelConfig *cfg, int batch, int seq, Err *e);
void graph_free(Graph *g);

/* Op `op` (a name from the family's list, gpt2_arch.h) of block b. */
const Op *graph_block_op(const Graph *g, int b, int op);
/* The op outside the blocks named e. */
const Op *graph_edge_op(const Graph *g, EdgeOp e);
/* Where those are in g->ops (a schedule task's op, schedule.h). */
int graph_block_op_index(const Graph *g, int b, int op);
int graph_edge_op_index(const Graph *g, EdgeOp e);
/* The op of a block whose backward runs first (the last one of the list with backward work:
 * the residual adds pass their gradient through another op's). */
int graph_first_bwd_op(const Graph *g);
/* A block's first op of kind k (its attention, say), or NULL when it has none. */
const Op *graph_block_op_of_kind(const Graph *g, OpKind k);


typedef struct GraphTotals {
    int64_t params;
    double gemm_flops;   /* forward + backward, all GEMMs including the LM head */
    double attn_flops;   /* forward + backward, score and value products */
    double other_flops;  /* layernorm, GELU, residual, embedding, softmax + cross-entropy */
    double fwd_flops, bwd_flops;
    int64_t block_act_bytes;  /* kept by one block */
    int64_t block_ckpt_bytes; /* one block's input: the checkpoint kept when recomputing */
    int64_t edge_act_bytes;   /* kept outside the blocks: token ids, lnf, the head input's
                               * gradient, targets */
    int64_t act_all_bytes;    /* everything kept, no recomputation */
    int64_t act_ckpt_bytes;   /* block checkpoints + edges: recomputing every block */
    int64_t max_block_params; /* largest layer group: a block, the embedding, or an untied head */
} GraphTotals;

void graph_totals(const Graph *g, GraphTotals *t);

#endif
