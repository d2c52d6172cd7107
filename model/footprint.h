/* footprint: bytes of training state per memory tier (GPU, CPU, SSD) for a plan.
 *
 * The table has one row per allocation tag (weights, master, adam_m, adam_v, grads, activations,
 * staging) and one column per tier; the executor tags its allocations the same way, so predicted
 * and measured memory compare row by row. The accounting, for one iteration's peak:
 * - 16-bit weights: all at their home tier. Away from the GPU, the GPU holds weight_buffers
 *   blocks plus the embedding (and an untied head), resident; from SSD, pinned_buffers pinned CPU
 *   buffers of one block each.
 * - fp32 master, Adam m and v: 4 B/param each at the optimizer tier; from SSD, state_buffers
 *   pinned CPU buffers of the largest sub-group's states.
 * - Gradients: with the optimizer on the GPU, a full 16-bit gradient there. Otherwise
 *   grad_buffers blocks on the GPU, and on the CPU host_grad_groups sub-groups (Fuyou), or the
 *   whole model (ZeRO-Infinity, which updates after backward), in fp32 when micro-batches
 *   accumulate.
 * - Activations: each kept activation at the tier its plan decision names; on the GPU also the
 *   largest block's recomputed activations (rebuilt in backward), act_buffers blocks of swapped
 *   activations (on their way out in forward, prefetched in backward), the edges (token ids,
 *   logits), and two activation-gradient buffers of the largest op output; pinned CPU staging
 *   of two blocks' SSD-bound activations. */
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

void footprint_compute(Footprint *f, const Graph *g, const Plan *p);
double footprint_tier_total(const Footprint *f, Tier t);
/* Capacity of a tier in bytes (after the ini's reserves). */
double footprint_capacity(const Hardware *hw, Tier t);
/* Tiers over capacity as a bit mask (1 << tier); 0 when the plan fits. */
unsigned footprint_overflow(const Footprint *f, const Hardware *hw);

/* Places p's state by capacity, keeping its buffer counts: everything on the GPU when it fits
 * (all activations kept, else block checkpoints there with recomputation); otherwise optimizer
 * states in CPU memory if they fit there, else on SSD; weights in CPU memory if they fit beside
 * that, else SSD; checkpoints on the GPU if they fit, else CPU, else SSD; other activations
 * recomputed. If nothing fits, the most frugal placement stays and footprint_overflow says
 * which tier is short. */
void footprint_auto_place(Plan *p, const Graph *g, const Hardware *hw);

#endif
