/* cost: task durations and link rates, from the hardware description.
 *
 * The simulator's engine knows nothing of hardware: it asks this module how much work a task is
 * and how fast each resource goes given which resources are busy. Work is seconds for the GPU
 * and the CPU optimizer (their rate is 1) and bytes for links, whose rates couple:
 *   PCIe   h2d runs at h2d_GBps alone and at h2d_bidir_GBps while d2h is busy (and vice versa).
 *   SSD    reads and writes of all `count` striped devices: R = count * read_GBps,
 *          W = count * write_GBps; together each gets a duplex/2 share, so r/R + w/W = duplex.
 * A copy's fixed latency (pcie or ssd latency_us) is added as bytes at the one-direction rate.
 * A gradient copy of a step with several micro-batches also adds its parameters into the step's
 * sum on the host, on the same lane after the copy: (grad bytes + 8) per parameter (gradient
 * and sum read, sum written) at cpu.mem_GBps * min(1, t / cores), t = plan_grad_sum_threads,
 * added as bytes at the one-direction rate.
 * GPU op times (op from graph.h, P = bf16_TFLOPS, B = mem_GBps, l = launch_us):
 *   GEMM forward       2mnk / (P * eff(m,n,k)) + l
 *   GEMM backward      4mnk / (P * eff(m,n,k)) + 2l     (input and weight gradients)
 *   attention forward  0.5 * F / (P * attn_efficiency) + l      (causal: half the s x s work)
 *   attention backward 0.5 * 1.25 * F_bwd / (P * attn_efficiency) + l   (the fused backward
 *                      recomputes the scores: 2.5x the forward's products where F_bwd counts 2x)
 *   memory-bound ops   io_bytes / B + l
 *   AdamW on the GPU   28 B/param / B + l   (fp32 master, m, v read and written, 16-bit
 *                      gradient in and weight out)
 *   AdamW on the CPU   params / adam_Gparams_per_s */
#ifndef FUYOU_COST_H
#define FUYOU_COST_H

#include <stdbool.h>

#include "graph.h"
#include "hw.h"
#include "schedule.h"

typedef struct CostModel {
    const Hardware *hw;
    const Graph *g;
} CostModel;

/* Seconds a graph op takes on the GPU in the given kind (TASK_FWD, TASK_RECOMPUTE, TASK_BWD). */
double cost_gpu_op_s(const Hardware *hw, const Op *op, TaskKind kind);

/* Seconds the host takes to add `params` gradients of grad_bytes each into a float sum. */
double cost_grad_sum_s(const Hardware *hw, double params, double grad_bytes);

/* A task's work in its resource's unit (seconds for gpu and cpu_adam, bytes for links). */
double cost_task_work(const CostModel *m, const Task *t);

/* Every resource's rate (work per second) given which resources are busy. */
void cost_rates(const CostModel *m, const bool busy[RES_COUNT], double rate[RES_COUNT]);

/* Seconds a task takes alone on its resource (nothing else busy). */
double cost_task_alone_s(const CostModel *m, const Task *t);

#endif
