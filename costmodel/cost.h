/* cost: task durations and link rates, from the hardware description.
 *
 * The simulator's engine knows nothing of hardware: it asks this module how much work a task is
 * and how fast each resource goes given which resources are busy. Work is seconds for the GPU,
 * parameters for the CPU optimizer and bytes for links. Rates, in these steps (ARCHITECTURE.md,
 * "The resource model"; each term's evidence in MEASUREMENTS.md, "The cost model's terms"):
 *   alone  gpu 1; cpu_adam adam_Gparams_per_s; h2d_GBps, d2h_GBps; the SSDs, all `count`
 *          striped devices: R = count * read_GBps, W = count * write_GBps.
 *   links  PCIe: h2d runs at h2d_bidir_GBps while d2h is busy (and vice versa). SSD: reads and
 *          writes together run at read_bidir_GBps and write_bidir_GBps (times count) where the
 *          ini gives them, else each gets a duplex/2 share, so r/R + w/W = duplex; then the host
 *          path's ceiling H = ssd.host_GBps (when given): r + w <= H, both scaled by H / (r + w)
 *          where above it (alone too).
 *   cores  a resource whose threads share cores with another's runs at that share of its rate
 *          (cost_sum_core_share: the micro-batch sum's threads beside the CPU Adam's).
 *   memory every busy resource but the GPU moves host memory: d bytes per unit of work, 1 for
 *          the links (every byte an SSD or a PCIe copy moves is read from or written to host
 *          memory), COST_ADAM_HOST_BYTES per parameter for cpu_adam. When the busy resources
 *          ask for more than the ceiling D, demand = sum of d * rate > D, each of them is scaled
 *          by D / demand (proportionally: no stream has priority at the memory controller).
 *          D = cpu.mem_GBps, raised to the largest demand of any one configuration whose rates
 *          the ini states (each resource alone, PCIe both ways, the SSDs both ways): those were
 *          measured through the same memory, so none of them is slowed by sharing it.
 * A copy's fixed latency (pcie or ssd latency_us) is added as bytes at the rate its link has
 * alone. A gradient copy of a step with several micro-batches also adds its parameters into the
 * step's sum on the host, on the same lane after the copy: grad_sum_bytes per parameter (model.h)
 * at cpu.mem_GBps * min(1, t / cores), t = plan_grad_sum_threads, added as bytes at the rate the
 * link has alone; in the memory step such a copy asks for what it moves over its time (the
 * copy's and the sum's bytes), not its link's rate, and beside the CPU Adam the sum's threads
 * and the Adam's share the Adam's cores over the sum's part of the copy.
 * GPU op times (op from graph.h, P = bf16_TFLOPS, B = mem_GBps, l = launch_us):
 *   GEMM forward       2mnk / (P * eff(m,n,k)) + io_bytes / B + l
 *   GEMM backward      4mnk / (P * eff(m,n,k)) + io_bytes / B + 2l   (input and weight
 *                      gradients; io_bytes: the memory-bound work the executors run with
 *                      them, graph.c: conversions, fused epilogues, the head's loss)
 *   attention forward  0.5 * F / (P * attn_efficiency(head size)) + l   (causal: half the
 *                      s x s work; attn_efficiency's point of that head size, else the nearest
 *                      in log2, never interpolated: hw_attn_efficiency)
 *   attention backward 0.5 * 1.25 * F_bwd / (P * attn_efficiency(head size)) + l   (the fused
 *                      backward recomputes the scores: 2.5x the forward's products where F_bwd
 *                      counts 2x)
 *   memory-bound ops   io_bytes / B + l    (0 where io_bytes is: its work runs in another's)
 *   and before each GPU task of the schedule (one op in one kind) gpu.task_us of lead, the GPU
 *   held but not busy: the executor's time around it (its lane waits on the previous task's
 *   end event, then dispatches this one; cost_task_lead_s; the closed form adds it)
 *   AdamW on the GPU   28 B/param / B + l   (fp32 master, m, v read and written, 16-bit
 *                      gradient in and weight out)
 *   AdamW on the CPU   params, at adam_Gparams_per_s alone */
#ifndef FUYOU_COST_H
#define FUYOU_COST_H

#include <stdbool.h>

#include "graph.h"
#include "hw.h"
#include "schedule.h"

/* Host memory bytes the CPU Adam task moves per parameter (exec/optim/adam.h, the pipeline's
 * task): the gradient norm reads the 16-bit gradient (2); AdamW reads the fp32 master, m and v
 * (12) and the gradient (2), and writes master, m and v (12) and the 16-bit weight (2). With
 * several micro-batches the gradient is the fp32 sum (34 B); that is not told apart. */
enum { COST_ADAM_HOST_BYTES = 30 };

/* Rates a simulation asked for before: the engine asks cost_task_rates at every event (tens of
 * thousands a run) where the busy resources take a few dozen distinct sets. While no running
 * task is a summing gradient copy the rates depend on which resources are busy alone (64
 * sets), and every copy's work asks its link's rate alone (solo). Each is worked out the first
 * time and kept; the owner zeroes it (a CostModel's hardware must not change while it lives). */
typedef struct CostRateCache {
    bool have[1 << RES_COUNT];
    double rate[1 << RES_COUNT][RES_COUNT]; /* by busy set: bit r for resource r */
    bool have_solo[RES_COUNT];
    double solo[RES_COUNT];
} CostRateCache;

typedef struct CostModel {
    const Hardware *hw;
    const Graph *g;
    CostRateCache *cache; /* NULL: every rate worked out when asked (the same numbers) */
} CostModel;

/* Seconds a graph op takes on the GPU in the given kind (TASK_FWD, TASK_RECOMPUTE, TASK_BWD). */
double cost_gpu_op_s(const Hardware *hw, const Op *op, TaskKind kind);
/* The same with the lead the op's task holds the GPU for before it (cost_task_lead_s): what
 * one op task takes of the GPU's time, for sums over a schedule (closed.h). */
double cost_gpu_task_s(const Hardware *hw, const Op *op, TaskKind kind);
/* The FLOPs an attention op runs at gpu.attn_efficiency (of its head size) of the peak, in that
 * kind: half of its model FLOPs (causal), and a quarter more in backward (the recomputed
 * scores). */
double cost_attention_work(const Op *op, TaskKind kind);

/* Seconds AdamW takes on the GPU over `params` parameters (the formula above). */
double cost_gpu_adam_s(const Hardware *hw, double params);

/* Seconds the host takes to add `params` gradients of grad_bytes each into a float sum (the
 * step's first micro-batch writes it): their bytes (grad_sum_bytes, model.h) at mem_GBps times
 * the sum threads' share of the cores. */
double cost_grad_sum_s(const Hardware *hw, double params, double grad_bytes, bool first);

/* A task's work in its resource's unit (seconds for gpu, parameters for cpu_adam, bytes for
 * links). */
double cost_task_work(const CostModel *m, const Task *t);

/* Every resource's rate (work per second) given which resources are busy: the three steps
 * above, each busy resource moving cost_host_bytes per unit of work. A resource that is not
 * busy gets cost_alone_rate. */
void cost_rates(const CostModel *m, const bool busy[RES_COUNT], double rate[RES_COUNT]);
/* The share of its rate each of the Adam and the micro-batch sum keeps while both run: their
 * threads on the Adam's cores (plan_adam_threads, plan_grad_sum_threads). */
double cost_sum_core_share(const Hardware *hw);

/* The same given the task each resource runs (NULL: idle), what the engine asks: a gradient
 * copy that adds into the step's sum moves host memory at the copy's and the sum's bytes over
 * its time, not at its link's rate (the sum's threads run below it); beside the Adam its sum
 * and the Adam share the Adam's cores (cost_sum_core_share, over the sum's part). */
void cost_task_rates(const CostModel *m, const Task *const running[RES_COUNT],
                     double rate[RES_COUNT]);

/* Resource r's rate alone in work per second, before the SSD host ceiling and host memory
 * (the closed form's "alone seconds" are work over this). */
double cost_alone_rate(const Hardware *hw, Resource r);

/* Host memory bytes resource r moves per unit of its work (0 for the GPU). */
double cost_host_bytes(Resource r);

/* The host memory ceiling D in bytes per second: cpu.mem_GBps, raised to the largest demand of
 * a configuration the ini states rates for (above). */
double cost_host_mem_Bps(const Hardware *hw);

/* Seconds a task holds its resource before its work starts (SimModel.lead): gpu.task_us for a
 * GPU op task, else 0. */
double cost_task_lead_s(const CostModel *m, const Task *t);

/* Seconds a task takes alone on its resource (nothing else busy). */
double cost_task_alone_s(const CostModel *m, const Task *t);

#endif
