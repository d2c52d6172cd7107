/* footprint: bytes of training state per memory tier (GPU, CPU, SSD) for a plan.
 *
 * One accounting for both backends: the table is what the out-of-core executor allocates for
 * the plan, term by term (exec/pipeline/pipe_mem.c checks its budgets with
 * footprint_compute_lane first), and what the simulator predicts with on the CUDA lane's sizes
 * (footprint_cuda_lane). One row per allocation tag, one column per tier; the executor tags its
 * allocations the same way, so predicted and measured memory compare cell by cell. The terms,
 * tier by tier: ARCHITECTURE.md, "Memory and the plan". */
#ifndef FUYOU_FOOTPRINT_H
#define FUYOU_FOOTPRINT_H

#include <stdint.h>

#include "graph.h"
#include "hw.h"
#include "plan.h"

typedef enum MemTag {
    MEM_WEIGHTS,
    MEM_MASTER,
    MEM_ADAM_M,
    MEM_ADAM_V,
    MEM_GRADS,
    MEM_ACTIVATIONS,
    MEM_STAGING,
    MEM_TAG_COUNT
} MemTag;

typedef struct Footprint {
    double bytes[MEM_TAG_COUNT][TIER_COUNT];
} Footprint;

const char *mem_tag_name(MemTag m);

/* The CUDA lane's sizes for g's micro-batch (tensors in the model's dtype, bf16 on the lane
 * fuyou-run has; flash attention where the head size allows it; the head on one chunk of
 * logits), as exec/pipeline/device_cuda.cu allocates them: what the simulator predicts with. */
void footprint_cuda_lane(const Graph *g, LaneSizes *lane);
/* The CPU reference lane's sizes for micro-batches of B x T of c (fp32 tensors and buffers,
 * arch.h's cpu_lane_bytes), as exec/pipeline/device_cpu.c allocates them: what fuyou-sim
 * --device cpu predicts with. */
void footprint_cpu_lane(const ModelConfig *c, int B, int T, LaneSizes *lane);

/* Bytes of one pinned state slot of plan p (ARCHITECTURE.md's state buffers): the largest
 * sub-group's states read from SSD, then its new weights on their way to SSD, each block (and
 * the tail's edges) on its own 4 KiB pages; 0 when the plan uses none. The executor sizes its
 * slots with it and lays the weights out the same way (pipe_mem_update_pieces). */
double footprint_state_slot_bytes(const ModelConfig *c, const Plan *p, int weight_bytes);

/* Bytes of the host staging the GPU sub-groups' state passes through on its way in and out
 * (the start, checkpoints): FOOTPRINT_GPU_STAGE_PARAMS parameters' master, m, v and weights at
 * a time (fewer if the GPU holds fewer); 0 with no sub-group there. */
enum { FOOTPRINT_GPU_STAGE_PARAMS = 16 << 20 };
double footprint_gpu_stage_bytes(const ModelConfig *c, const Plan *p, int weight_bytes);

/* The table for plan p on a lane of these sizes, and on g's lane (graph.h: the executor's
 * where one was given, else the CUDA lane's). */
void footprint_compute_lane(Footprint *f, const ModelConfig *c, const Plan *p,
                            const LaneSizes *lane);
void footprint_compute(Footprint *f, const Graph *g, const Plan *p);
double footprint_tier_total(const Footprint *f, Tier t);
/* Capacity of a tier in bytes (after the ini's reserves). */
double footprint_capacity(const Hardware *hw, Tier t);
/* The bytes over capacity, summed over the tiers: 0 when the plan fits. */
double footprint_short_bytes(const Footprint *f, const Hardware *hw);
/* Tiers over capacity as a bit mask (1 << tier); 0 when the plan fits. */
unsigned footprint_overflow(const Footprint *f, const Hardware *hw);
/* What frees tier t of plan p, whose footprint f is over t's capacity, in the options of both
 * programs: the batch for the GPU, state on the SSD for CPU memory (or, with it there,
 * activations and buffers), capacity or state kept in CPU memory for the SSD. One clause. */
const char *footprint_advice(Tier t, const Plan *p, const Footprint *f);

/* Places p's state by capacity, keeping its buffer counts: everything on the GPU when it fits
 * (all activations kept, else block checkpoints there with recomputation; fuyou on one
 * micro-batch, as plan_validate allows); otherwise optimizer
 * states in CPU memory if they fit there, else on SSD; weights in CPU memory if they fit beside
 * that, else SSD; checkpoints on the GPU if they fit, else CPU, else SSD; other activations
 * recomputed; with the states on SSD, as many sub-groups' states as CPU memory still holds
 * there (optim_cpu_groups); none updated on the GPU (optim_gpu_groups 0: the planner weighs
 * that against activations, footprint_max_gpu_groups). If nothing fits, the most frugal
 * placement stays and footprint_overflow says which tier is short. The tiers fixed (NULL:
 * none) stay as given, the rest placed around them; with the states' tier fixed, none of them
 * in CPU memory (optim_cpu_groups 0: the user's tier holds every sub-group's). */
void footprint_auto_place(Plan *p, const Graph *g, const Hardware *hw, const PlaceFixed *fixed);
/* footprint_auto_place's placement off the GPU, taken even where everything would fit there:
 * the states and weights (those not fixed) in CPU memory, else on SSD, and the rest as above.
 * The planner weighs it against everything on the GPU where that needs recomputation: the
 * memory some sub-groups' states leave may be worth more to activations. */
void footprint_place_off_gpu(Plan *p, const Graph *g, const Hardware *hw, const PlaceFixed *fixed);
/* The most sub-groups plan p can update on the GPU (optim_gpu_groups) within the GPU's
 * capacity, the rest of p as it is; 0 where the plan can have none (plan_validate's rules:
 * fuyou, one micro-batch, the optimizer off the GPU). p is the same on return. */
int footprint_max_gpu_groups(Plan *p, const Graph *g, const Hardware *hw);
/* Sets p's GPU sub-groups to n and, with its states on SSD, keeps as many of the sub-groups
 * before them in CPU memory as it holds (optim_cpu_groups, as footprint_auto_place does). */
void footprint_set_gpu_groups(Plan *p, const Graph *g, const Hardware *hw, int n);

#endif
