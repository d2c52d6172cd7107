/* footprint: bytes of training state per memory tier (GPU, CPU, SSD) for a placement.
 *
 * The table has one row per allocation tag (weights, master, adam_m, adam_v, grads, activations,
 * staging) and one column per tier; the executor tags its allocations the same way, so predicted
 * and measured memory compare row by row. Accounting rules, per micro-batch step:
 * - 16-bit weights: all at their home tier. Away from the GPU, the GPU holds the computing layer
 *   group plus prefetch_groups more (a group is a block, the embedding, or an untied head; sized
 *   as the largest); from SSD, staging_buffers pinned CPU buffers of one group each.
 * - fp32 master, Adam m and v: 4 B/param each at the optimizer tier. From SSD, the CPU holds three
 *   sub-groups of states (read ahead, updating, writing back): pinned staging.
 * - Gradients: with the optimizer on the GPU, a full 16-bit gradient there. Otherwise two layer
 *   groups on the GPU (one being produced, one copying out) and two sub-groups on the CPU.
 * - Activations: ACT_ALL keeps everything on the GPU. ACT_CHECKPOINT keeps block inputs at the
 *   checkpoint tier and, on the GPU, one block's full activations for recomputation, the edges
 *   (token ids, logits) and, when checkpoints live elsewhere, two checkpoint prefetch buffers
 *   (pinned CPU staging for two more when they live on SSD).
 * - Both modes add two activation-gradient buffers of the largest op output on the GPU.
 * Finer decisions (per-activation swap, recompute) are the plan's, in the schedule. */
#ifndef FUYOU_FOOTPRINT_H
#define FUYOU_FOOTPRINT_H

#include <stdint.h>

#include "graph.h"
#include "hw.h"

typedef enum Tier { TIER_GPU, TIER_CPU, TIER_SSD, TIER_COUNT } Tier;

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

typedef enum ActKeep { ACT_ALL, ACT_CHECKPOINT } ActKeep;

typedef struct Placement {
    Tier weights;        /* home of the 16-bit weights */
    Tier optim;          /* home of fp32 master, m, v */
    Tier checkpoints;    /* home of block-boundary activations */
    ActKeep act;
    int prefetch_groups; /* layer groups of weights on the GPU beyond the computing one */
    int staging_buffers; /* pinned CPU buffers of one layer group each, for SSD weights */
    int subgroup_blocks; /* optimizer sub-group size in blocks */
} Placement;

typedef struct Footprint {
    double bytes[MEM_TAG_COUNT][TIER_COUNT];
} Footprint;

const char *tier_name(Tier t);
/* "gpu", "cpu", "ssd": 0 or -EINVAL. */
int tier_parse(const char *s, Tier *out);
const char *mem_tag_name(MemTag m);

/* The Fuyou placement with every tier decided by capacity: all on the GPU when everything fits;
 * otherwise optimizer states in CPU memory if they fit there, else on SSD; weights in CPU memory
 * if they fit beside that, else SSD; block checkpoints on the GPU if they fit, else CPU, else
 * SSD. Prefetch 1 group, 2 staging buffers, 1-block sub-groups. */
void footprint_auto_placement(Placement *p, const Graph *g, const Hardware *hw);

void footprint_compute(Footprint *f, const Graph *g, const Placement *p);
double footprint_tier_total(const Footprint *f, Tier t);
/* Capacity of a tier in bytes (after the ini's reserves). */
double footprint_capacity(const Hardware *hw, Tier t);

#endif
