/* plan_args: the plan options both command lines take (fuyou-sim predicts a plan, fuyou-run
 * runs it), so a plan fuyou-sim predicted can be run exactly: --weights, --optim,
 * --checkpoints, --act, --micro-batches, --subgroup, --tail, --prefetch, the buffer counts and
 * --optim-cpu-groups, --optim-gpu-groups and --optim-stream-groups.
 * Taking them (options.h parses and checks them) and applying them over a plan. */
#ifndef FUYOU_PLAN_ARGS_H
#define FUYOU_PLAN_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "plan.h"

/* The count options, in this order. */
enum PlanCount { PC_MICRO, PC_SUBGROUP, PC_TAIL, PC_PREFETCH, PC_WBUF, PC_PBUF, PC_ABUF,
                 PC_GBUF, PC_SBUF, PC_OCPU, PC_OGPU, PC_OSTREAM, PC_N };

typedef struct PlanArgs {
    const char *weights, *optim, *checkpoints, *act;
    int count[PC_N]; /* -1: not given */
} PlanArgs;

void plan_args_init(PlanArgs *a);
/* Takes plan option k (OPT_WEIGHTS + k in options.h, checked there): a tier's value, or a
 * count's number (num; --micro-batches auto, a word, leaves it open). */
void plan_args_take(PlanArgs *a, int k, const char *value, double num);
bool plan_args_given(const PlanArgs *a);

/* Sets what a names over p (a prefetch depth beyond the weight buffers raises them unless
 * they were given). A tier given binds what goes with it unless a count says otherwise:
 * --weights or --optim off the GPU keeps no sub-group on the GPU, streamed or not (a GPU
 * sub-group's weights and states are there); --optim keeps none of the others' states in CPU
 * memory (ssd means every sub-group's on the SSD); the weights and the states on the GPU go
 * together (--weights gpu alone puts the states there, --optim gpu the weights). 0 or -EINVAL,
 * printed. */
int plan_args_apply(const PlanArgs *a, Plan *p, const char *prog);
/* The tiers a fixes (PLACE_OPEN where it gives none; a tier that does not parse is open: apply
 * reports it). */
void plan_args_fixed(const PlanArgs *a, PlaceFixed *out);

#endif
