/* plan: the decisions a training run makes on top of the model and the hardware.
 *
 * Micro-batch size and count (gradient accumulation), sequence length, the policy (Fuyou or
 * ZeRO-Infinity), where weights and optimizer states live, what happens to each activation a
 * block keeps for backward (keep on the GPU, swap to CPU, swap to SSD, recompute), optimizer
 * sub-groups, prefetch depth and buffer counts. A plan is data: the schedule (sched.h) turns it
 * into tasks, footprint.h into bytes per tier, costmodel/ chooses it. */
#ifndef FUYOU_PLAN_H
#define FUYOU_PLAN_H

#include <stdbool.h>

#include "fuyou_err.h"
#include "graph.h"

typedef enum Tier { TIER_GPU, TIER_CPU, TIER_SSD, TIER_COUNT } Tier;

typedef enum Policy { POLICY_FUYOU, POLICY_ZERO_INFINITY } Policy;

/* What happens to the activation an op keeps for backward. A block's BLOCK_CKPT_OP keeps the
 * block input, the checkpoint (arch.h): it is never recomputed. */
typedef enum ActPlace { ACT_GPU, ACT_CPU, ACT_SSD, ACT_RECOMPUTE } ActPlace;

/* The largest count a plan holds (micro-batches, sub-group and tail blocks, prefetch depth + 1,
 * every buffer count): far beyond any use, and far from overflowing the int arithmetic on them. */
enum { PLAN_MAX_COUNT = 1 << 20 };

typedef struct Plan {
    Policy policy;
    int seqs_per_micro;  /* sequences per micro-batch */
    int n_micro;         /* micro-batches per iteration (gradient accumulation); the step's
                            sequences are seqs_per_micro * n_micro */
    int seq;
    int n_layer;
    const BlockArch *arch; /* the model's block: the ops act places (arch.h) */
    Tier weights;        /* home of the 16-bit weights */
    Tier optim;          /* home of fp32 master, Adam m and v */
    ActPlace *act;       /* [n_layer][arch->n_ops]: each op's kept activation */
    int subgroup_blocks; /* optimizer sub-group size in blocks */
    int tail_blocks;     /* blocks in the tail sub-group, with the embedding: updated last */
    int prefetch_depth;  /* weight loads are issued this many layer groups ahead of compute */
    int weight_buffers;  /* GPU buffers of one block's weights (>= prefetch_depth + 1) */
    int pinned_buffers;  /* pinned CPU buffers of one block's weights, for SSD weights */
    int act_buffers;     /* GPU buffers for a block's activations prefetched in backward */
    int grad_buffers;    /* GPU buffers of one block's gradients */
    int state_buffers;   /* pinned CPU buffers of one sub-group's optimizer states */
    int host_grad_groups; /* sub-groups of gradients the CPU holds before their update */
    int optim_gpu_groups; /* with optim off the GPU: the last this many sub-groups in update
                             order (the tail first) keep their states, and their blocks'
                             16-bit weights and gradients, on the GPU, and are updated there */
    int optim_cpu_groups; /* with optim on SSD: this many sub-groups before those (in update
                             order) keep their states in CPU memory */
    int optim_stream_groups; /* of the sub-groups whose states are in CPU memory, the last this
                                many in update order (just before the GPU's) are updated on the
                                GPU: states over PCIe into a GPU slot and back, gradients kept
                                on the GPU (plan_group_streamed) */
    int64_t copy_chunk_bytes; /* a PCIe copy above this moves in chunks of about this size (at
                                 most SCHED_COPY_CHUNKS, schedule.h), so that a more urgent
                                 copy can go between them; 0: whole */
} Plan;

/* GPU slots a streamed sub-group's states and new weights pass through (optim_stream_groups):
 * one fills over H2D while the other's go home over D2H. */
enum { PLAN_STREAM_SLOTS = 2 };

/* Sub-groups of gradients the CPU holds before their update, by default (host_grad_groups). */
enum { PLAN_HOST_GRAD_GROUPS = 4 };

/* The default chunk of a PCIe copy: 256 MiB, about 10 ms on a 4090's PCIe 4.0 link. */
#define PLAN_COPY_CHUNK_BYTES ((int64_t)256 << 20)

/* The tiers a placement keeps as the user gave them (--weights, --optim): each a Tier, or
 * PLACE_OPEN where the placement chooses (footprint_auto_place). */
enum { PLACE_OPEN = -1 };
typedef struct PlaceFixed {
    int weights, optim;
} PlaceFixed;

const char *tier_name(Tier t);
int tier_parse(const char *s, Tier *out); /* "gpu", "cpu", "ssd": 0 or -EINVAL */
const char *policy_name(Policy p);
int policy_parse(const char *s, Policy *out); /* "fuyou", "zero-infinity" */
const char *act_place_name(ActPlace a);      /* "gpu", "cpu", "ssd", "recompute" */

/* A default plan for g: the policy's placement with every tier on SSD away from the GPU, block
 * checkpoints in CPU memory and everything else recomputed, 1-block sub-groups, prefetch 1,
 * 2 weight buffers, 4 pinned buffers, 2 activation and gradient buffers, 3 state buffers
 * (zero-infinity's DeepSpeed defaults come from plan_zero_infinity_config, below).
 * The caller owns p and frees it with plan_free (safe on failure). 0 or -ENOMEM. */
int plan_init(Plan *p, const Graph *g, Policy policy, Err *e);
void plan_free(Plan *p);
/* Deep copy; dst is overwritten (free it first if it held one). 0 or -ENOMEM. */
int plan_copy(Plan *dst, const Plan *src, Err *e);

ActPlace plan_act(const Plan *p, int block, int op);
void plan_set_act(Plan *p, int block, int op, ActPlace a);
/* Sets every block's checkpoint to ckpt and every other kept activation to inner. */
void plan_set_all_act(Plan *p, ActPlace ckpt, ActPlace inner);
/* Sets every block's intra-block activations (all but the checkpoint) to inner. */
void plan_set_inner_act(Plan *p, ActPlace inner);

/* Adds to kept[t] the bytes of the intra-block activations (all but the checkpoints) that p
 * keeps on tier t, from g's ops; the recomputed ones count nowhere. */
void plan_inner_kept_bytes(const Plan *p, const Graph *g, double kept[TIER_COUNT]);

/* One paragraph naming every decision of p, for reports: policy, tiers, activation bytes by
 * decision, sub-groups, prefetch and buffers; the GPU tier named "device" where g's lane is
 * the host's (LaneSizes.on_host). Writes into buf and returns it. */
char *plan_summary(const Plan *p, const Graph *g, char *buf, size_t n);

/* Checks counts (each within its least value and PLAN_MAX_COUNT) and combinations (e.g. a
 * recomputed checkpoint, buffers below prefetch depth), and that the plan is one the executor
 * runs: the weights and the optimizer states on the GPU together or neither (a GPU sub-group
 * keeps both there), and with either, fuyou's step on one micro-batch. 0 or -EINVAL with e
 * naming the field. */
int plan_validate(const Plan *p, Err *e);

/* Optimizer sub-groups, in update order: group 0 holds the last blocks, the last group (the
 * tail) the first tail_blocks blocks with the embedding and head parameters (which stay on the
 * GPU for the whole iteration and are updated together). */
int plan_subgroup_count(const Plan *p);
/* Blocks [first, first + count) of sub-group g. */
void plan_subgroup_blocks(const Plan *p, int g, int *first, int *count);
int plan_subgroup_of_block(const Plan *p, int block);
/* The sub-groups updated on the GPU, their states, weights and gradients there: every one
 * with the optimizer on the GPU (the weights there too: plan_validate), else the last
 * optim_gpu_groups. Everything on the GPU is the plan whose every sub-group is a GPU one:
 * the schedule, the footprint and the executor treat the two alike. */
int plan_gpu_groups(const Plan *p);
/* Where sub-group g's fp32 master weights and Adam states live: p->optim, except the last
 * optim_gpu_groups sub-groups' (the GPU) and, when p->optim is SSD, the optim_cpu_groups
 * before them (CPU memory). The last sub-groups are the lowest slices of the parameter layout,
 * so the GPU's states are one prefix of it and the CPU's the range after it. */
Tier plan_optim_tier(const Plan *p, int g);
/* Whether block b's 16-bit weights live on the GPU for the whole run (the weights there, or
 * its sub-group one of the optim_gpu_groups): no load, no release, updated in place. */
bool plan_block_on_gpu(const Plan *p, int block);
/* The same for the edges (embedding, final norm, head): the tail sub-group's. */
bool plan_edges_on_gpu(const Plan *p);
/* Whether sub-group g is streamed: its states in CPU memory, its AdamW on the GPU
 * (optim_stream_groups). */
bool plan_group_streamed(const Plan *p, int g);
/* Whether block b's gradients stay on the GPU until its update there (a GPU sub-group's or a
 * streamed one's): no gradient copy, no gradient ring. */
bool plan_grads_on_gpu(const Plan *p, int block);
/* Blocks whose gradients stay on the GPU (plan_grads_on_gpu): the first this many. */
int plan_gpu_grad_blocks(const Plan *p);
/* Sets optim_stream_groups to n and, with n > 0, host_grad_groups to every sub-group the CPU
 * updates (at least PLAN_HOST_GRAD_GROUPS): backward then never waits for the CPU's updates
 * (its gradients go to the CPU while the GPU streams the others), PLAN_HOST_GRAD_GROUPS
 * without. */
void plan_set_stream_groups(Plan *p, int n);
/* Blocks the GPU sub-groups keep there, weights and gradients (the first this many); 0 without
 * optim_gpu_groups. The others pass through the weight and gradient rings. */
int plan_gpu_group_blocks(const Plan *p);

/* zero-infinity: DeepSpeed's ZeRO-Infinity as it runs by default (ZeRO stage 3 with offload_param
 * and offload_optimizer on nvme; ARCHITECTURE.md, "ZeRO-Infinity as DeepSpeed runs it", cites the
 * sources). Its buffer pools, and its sizes in parameters: */
enum {
    ZI_PARAM_BUFFERS = 5, /* offload_param.buffer_count: pinned 16-bit parameter swap buffers */
    ZI_OPTIM_BUFFERS = 4, /* offload_optimizer.buffer_count: pinned fp32 buffers of one sub-group
                             each; the step's master, m, v and gradient, backward's gradients */
};
#define ZI_SUB_GROUP_PARAMS 1e9     /* zero_optimization.sub_group_size */
#define ZI_PARAM_BUFFER_PARAMS 1e8  /* offload_param.buffer_size (each tensor must fit one) */
#define ZI_MAX_IN_CPU_PARAMS 1e9    /* offload_param.max_in_cpu: a pinned 16-bit flat buffer */
#define ZI_MAX_LIVE_PARAMS 1e9      /* stage3_max_live_parameters, stage3_max_reuse_distance */

/* Sets p to the zero-infinity policy with DeepSpeed's defaults for model c (placement,
 * sub-groups, prefetch, buffers; the micro-batches stay), in the plan's whole blocks (the
 * nearest it expresses; DeepSpeed works per tensor):
 * - weights on SSD (in CPU memory when the model fits max_in_cpu), optimizer states on SSD,
 *   block checkpoints in CPU memory, everything else recomputed;
 * - sub-groups of sub_group_size parameters: the nearest whole number of blocks (at least one),
 *   the tail (the embedding and the first blocks) likewise; one sub-group when the model fits;
 * - weight buffers: the blocks within max_live_parameters (at least one), prefetch depth 1
 *   when there are two or more, else 0;
 * - pinned buffers: the blocks nearest the parameter swapper's buffer_count buffers of
 *   buffer_size, raised to the largest tensor (DeepSpeed refuses a tensor that does not fit);
 * - one gradient buffer: DeepSpeed's gradient hook copies the gradients out before it returns,
 *   so the next block's backward is launched after them; one state buffer (the step swaps one
 *   sub-group at a time). Block counts are at most the model's layers. */
void plan_zero_infinity_config(Plan *p, const ModelConfig *c);

/* Threads the executor adds micro-batch gradients with on the host (memory-bound: a few are
 * enough, and the optimizer's threads are busy in the last micro-batch); the cost model
 * charges the sum at the DRAM bandwidth these threads get (cost.h). */
int plan_grad_sum_threads(int cores);

/* Threads the executor runs the CPU Adam with on `cores` online CPUs: with a GPU, two fewer,
 * the dispatcher's and the compute lane's, which would otherwise wait for the scheduler between
 * kernels (MEASUREMENTS.md, "Two cores left beside the Adam"); on the host's cores alone, all
 * of them. fuyou-profile times the Adam at this count; the cost model shares these cores
 * with the sum's threads (cost.h). */
int plan_adam_threads(int cores, bool gpu);

#endif
