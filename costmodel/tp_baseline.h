/* tp_baseline: the multi-GPU baseline that fuyou-sim --cost holds fuyou against: Megatron-LM
 * tensor parallelism over N GPUs of one node (a DGX-like machine), all training state in GPU
 * memory. A simple closed model of one iteration, not a simulation (docs/fuyou-sim.md, "What a run
 * costs"); its assumptions, all of them:
 *   compute    every op of the micro-batch's graph (graph.h) runs on each GPU at 1/N of its
 *              work: qkv, fc1 and the LM head split by output columns, proj and fc2 by input
 *              rows, attention by heads, the GELU and the loss by columns, the layernorms,
 *              residual adds and the embedding by tokens (sequence parallelism, Korthikanti et
 *              al. 2022). Each share is timed as fuyou's own ops are (cost_gpu_op_s on the
 *              baseline's ini: its GEMM efficiency curve at the split shape, its attention
 *              efficiency, a launch per kernel), forward and backward, nothing recomputed.
 *   all-reduce per block, 2 in forward and 2 in backward, each of the micro-batch's b·s·h
 *              activations in the model's dtype (sequence parallelism's all-gather plus
 *              reduce-scatter move the same bytes); ring all-reduce: each GPU sends and
 *              receives 2(N-1)/N of them at [gpu] nvlink_GBps, no latency. The embedding's and
 *              the loss's small collectives are left out.
 *   overlap    none: compute and all-reduces run one after another, micro-batch after
 *              micro-batch, then AdamW on the GPU over P/N parameters (cost_gpu_adam_s).
 *   memory     per GPU: TP_STATE_BYTES_PER_PARAM (16) per parameter (16-bit weights and
 *              gradients, fp32 master, m and v) and one micro-batch's activations, none
 *              recomputed, both divided by N; it fits when that is at most the GPU's memory
 *              after gpu_reserved_GiB.
 * No pipeline or data parallelism, no second node. Pure functions of their arguments. */
#ifndef FUYOU_TP_BASELINE_H
#define FUYOU_TP_BASELINE_H

#include <stdbool.h>

#include "graph.h"
#include "hw.h"

enum {
    TP_STATE_BYTES_PER_PARAM = 16, /* 2 + 2 + 4 + 4 + 4: weight, gradient, master, m, v */
    TP_ALLREDUCES_PER_BLOCK = 4,   /* after attention and MLP, forward and backward */
    TP_MAX_GPUS = 1024,            /* the --tp-gpus limit */
};

typedef struct TpBaseline {
    int gpus;
    bool even;             /* gpus divides the heads and the ffn width, as Megatron-LM needs */
    double state_bytes;    /* per GPU */
    double act_bytes;      /* per GPU: one micro-batch's activations, none recomputed */
    double capacity_bytes; /* per GPU: its memory after the reserve */
    bool fits;             /* state_bytes + act_bytes <= capacity_bytes */
    double min_gpus;       /* the fewest GPUs whose memory would hold state and activations */
    double compute_s;      /* per iteration: every op's share, forward and backward */
    double allreduce_s;    /* per iteration */
    double adam_s;         /* per iteration */
    double iter_s;         /* their sum */
    double tokens;         /* per iteration: the micro-batch's tokens x n_micro */
    double model_flops;    /* per iteration: 6 P tokens, as fuyou-sim's model TFLOPS */
} TpBaseline;

/* One GPU's share of op under tensor parallelism over gpus GPUs (the split above): work and
 * bytes divided by gpus, rounded up where whole. */
Op tp_baseline_shard(const Op *op, int gpus);

/* Seconds one ring all-reduce of `bytes` takes over gpus GPUs: 2(gpus-1)/gpus x bytes at
 * hw's nvlink_GBps (which must be given when gpus > 1); 0 for one GPU. */
double tp_baseline_allreduce_s(const Hardware *hw, int gpus, double bytes);

/* The baseline's iteration of n_micro micro-batches of g on gpus GPUs of hw (1 to
 * TP_MAX_GPUS), into out: times, memory and whether it fits. The times are filled in whether
 * or not it fits or divides evenly; the caller says which it reports. */
void tp_baseline_predict(const Graph *g, int n_micro, const Hardware *hw, int gpus,
                         TpBaseline *out);

#endif
