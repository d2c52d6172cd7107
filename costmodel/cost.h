/* cost: task durations and link rates, from the hardware description.
 *
 * The simulator's engine knows nothing of hardware: it asks this module how much work a task is
 * and how fast each resource goes given which resources are busy. Work is seconds for the GPU,
 * parameters for the CPU optimizer and bytes for links. Rates come in steps: each resource
 * alone, the links' couplings (PCIe both ways, SSD reads beside writes, the host path's
 * ceiling), the cores a gradient sum shares with the Adam, and the host memory ceiling that
 * scales every busy resource but the GPU in proportion. GPU op times come from the op's flops
 * and memory-bound bytes at the ini's rates, each GPU task with its gpu.task_us lead.
 * The formulas: ARCHITECTURE.md, "The resource model" and "Rates and op times"; each term's
 * evidence: MEASUREMENTS.md, "The cost model's terms". */
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
