/* plan_args: the plan options both command lines take (fuyou-sim predicts a plan, fuyou-run
 * --offload runs it), so a plan fuyou-sim predicted can be run exactly: --weights, --optim,
 * --checkpoints, --act, --micro-batches, --subgroup, --tail, --prefetch, the buffer counts and
 * --optim-cpu-groups.
 * Parsing and applying them over a plan; errors are one line on stderr naming the option. */
#ifndef FUYOU_PLAN_ARGS_H
#define FUYOU_PLAN_ARGS_H

#include <stdbool.h>

#include "plan.h"

/* The count options, in this order. */
enum PlanCount { PC_MICRO, PC_SUBGROUP, PC_TAIL, PC_PREFETCH, PC_WBUF, PC_PBUF, PC_ABUF,
                 PC_GBUF, PC_SBUF, PC_OCPU, PC_N };

/* The least value of each count option (the prefetch depth and CPU-resident sub-groups may be
 * 0). */
int plan_args_min(int count);

typedef struct PlanArgs {
    const char *weights, *optim, *checkpoints, *act;
    int count[PC_N]; /* -1: not given */
} PlanArgs;

/* Option names without "--": the four placements, then the counts in PlanCount order. */
extern const char *const plan_args_names[4 + PC_N];

void plan_args_init(PlanArgs *a);
/* Takes option `name` (without "--") with its value: 1 if it is a plan option, 0 if not,
 * -EINVAL for a bad value (printed, prefixed with prog). */
int plan_args_take(PlanArgs *a, const char *name, const char *value, const char *prog);
/* A whole number >= min for option opt (for the counts); 0 or -EINVAL, printed. */
int plan_args_count(const char *prog, const char *opt, const char *s, int min, int *out);
bool plan_args_given(const PlanArgs *a);
/* Sets what a names over p (a prefetch depth beyond the weight buffers raises them unless
 * they were given). 0 or -EINVAL, printed. */
int plan_args_apply(const PlanArgs *a, Plan *p, const char *prog);

#endif
