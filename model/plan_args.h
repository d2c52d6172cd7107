/* plan_args: the plan options both command lines take (fuyou-sim predicts a plan, fuyou-run
 * --offload runs it), so a plan fuyou-sim predicted can be run exactly: --weights, --optim,
 * --checkpoints, --act, --micro-batches, --subgroup, --tail, --prefetch, the buffer counts and
 * --optim-cpu-groups, --optim-gpu-groups and --optim-stream-groups.
 * Parsing and applying them over a plan; errors are one line on stderr naming the option. */
#ifndef FUYOU_PLAN_ARGS_H
#define FUYOU_PLAN_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "plan.h"

/* The count options, in this order. */
enum PlanCount { PC_MICRO, PC_SUBGROUP, PC_TAIL, PC_PREFETCH, PC_WBUF, PC_PBUF, PC_ABUF,
                 PC_GBUF, PC_SBUF, PC_OCPU, PC_OGPU, PC_OSTREAM, PC_N };

/* The least and the largest value of each count option (the prefetch depth and the CPU-, GPU-
 * resident and streamed sub-groups may be 0; every count is at most PLAN_MAX_COUNT, the
 * prefetch depth one less). */
int plan_args_min(int count);
int plan_args_max(int count);

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
/* The whole-number options of both command lines (counts, sizes, steps): s parsed by
 * units_parse_int within [lo, hi]; 0, or -EINVAL with one line printed on stderr,
 * "prog: opt expects a whole number from lo to hi, got 's'", the same in both programs. */
int plan_args_int(const char *prog, const char *opt, const char *s, int64_t lo, int64_t hi,
                  int64_t *out);
/* The same into an int, for the counts (hi at most INT_MAX). */
int plan_args_count(const char *prog, const char *opt, const char *s, int min, int max,
                    int *out);
bool plan_args_given(const PlanArgs *a);

/* --gpu-mem and --cpu-mem, the budgets both command lines take: the capacity a plan may use,
 * with nothing reserved (a run's budget is what it may hold). */
typedef struct PlanBudget {
    double gpu_bytes, cpu_bytes; /* 0: not given */
} PlanBudget;
enum { PLAN_BUDGET_SETS = 4, PLAN_BUDGET_SET_LEN = 64 };
/* Parses value as a size (e.g. 24GiB) into *bytes, 1 byte to HW_MAX_MEM_GIB: 0, or
 * -EINVAL with one line on stderr ("prog: opt expects a size such as 24GiB, got 's'", or the
 * bound), the same in both programs. */
int plan_budget_parse(const char *prog, const char *opt, const char *value, double *bytes);
/* The hardware overrides (hw_load's --set form) that give the ini those budgets: gpu.mem_GiB
 * and memory.gpu_reserved_GiB=0, the same for the CPU; how many were written into sets. */
int plan_budget_sets(const PlanBudget *b, char sets[PLAN_BUDGET_SETS][PLAN_BUDGET_SET_LEN]);
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
