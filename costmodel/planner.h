/* planner: the automatic activation-swap planner (Fuyou's fourth component).
 *
 * Which intra-block activations to keep (on the GPU while it has room, else swapped to CPU
 * memory, else to SSD) instead of recomputing them. Candidates come in order of recompute time
 * saved per byte kept: a greedy walk over one block's kept tensors (the saving of a tensor
 * depends on which others are kept, see sched_recompute_set), with adjacent steps pooled where a
 * later step saves more per byte than an earlier one, so the ladder's savings per byte never
 * increase. Taking the ladder step by step, each step block by block, the amount is the units
 * kept. Within a run of units of one step in one tier every unit changes one block alike, so the
 * closed form (closed.h) is convex there and bisection on the slope finds the run's minimum
 * exactly; the planner searches every run and keeps the best (a few dozen runs, not a scan of
 * amounts). It also picks the optimizer sub-group size and the
 * prefetch depth and buffer counts that fit the GPU and pinned-CPU budgets, by simulating each
 * candidate configuration (those the closed form rates fastest where all of them would be too
 * many tasks: PLANNER_SCORE_TASKS), and says which tier is short when nothing fits. */
#ifndef FUYOU_PLANNER_H
#define FUYOU_PLANNER_H

#include "closed.h"
#include "footprint.h"
#include "plan.h"
#include "plan_args.h"

/* One rung: ops of a block whose kept activations are taken together. */
typedef struct SwapStep {
    int ops[ARCH_MAX_OPS];
    int n_ops;
    double bytes;   /* per block */
    double saved_s; /* recompute seconds saved per block */
} SwapStep;

typedef struct SwapLadder {
    SwapStep steps[ARCH_MAX_OPS];
    int n_steps;
    int n_layer;
    double room[TIER_COUNT]; /* bytes each tier can take beyond the base plan */
} SwapLadder;

/* The ladder for base plan p (whose checkpoints and tiers are decided; its other activations
 * are recomputed). */
void planner_ladder(const Hardware *hw, const Graph *g, const Plan *p, SwapLadder *l);

/* Units on the ladder: one step of one block each, n_steps * n_layer. */
int planner_units(const SwapLadder *l);
double planner_unit_bytes(const SwapLadder *l, int u);
/* The bytes kept by the first n units. */
double planner_amount(const SwapLadder *l, int n);
/* Units whose bytes add up to at most `bytes`. */
int planner_units_for(const SwapLadder *l, double bytes);

/* Sets p's intra-block activations: the first n units kept, each in the first tier with room
 * (GPU, CPU, SSD), the rest recomputed. */
void planner_apply(Plan *p, const SwapLadder *l, int n);

/* The n in [0, units] minimising the closed-form time of p with planner_apply(p, l, n): exact,
 * by convexity within each run of one step in one tier; if that amount overflows a memory
 * tier, the largest smaller amount that fits, if any (every tier's bytes grow with the amount,
 * so no larger one fits). p's activations are left as that n sets them. */
int planner_best_units(const Hardware *hw, const Graph *g, Plan *p, const SwapLadder *l);

/* The work a search did, for tests and reports that bound it (no clock: the same on every
 * machine). */
typedef struct PlannerWork {
    int64_t searches;     /* configurations whose swap amount was searched on the ladder */
    int64_t closed_forms; /* closed-form evaluations */
    int64_t footprints;   /* footprints computed */
    int64_t scores;       /* plans scored (simulated, with the simulator's score) ... */
    double score_tasks;   /* ... and their schedules' tasks an iteration (sched_estimate_tasks) */
} PlannerWork;

/* planner_best_units, its work added to *work (the plan search counts it). */
int planner_best_units_work(const Hardware *hw, const Graph *g, Plan *p, const SwapLadder *l,
                            PlannerWork *work);

typedef struct PlanChoice {
    Plan plan;
    int units;                /* ladder units kept ... */
    int units_total;          /* ... of this many */
    double kept[TIER_COUNT];  /* bytes kept on the GPU, swapped to CPU, to SSD */
    ClosedForm cf;
    double score_s;           /* what score said of the chosen plan */
    Resource bind_below;      /* backward's binding resource at the chosen amount ... */
    Resource bind_above;      /* ... and one unit more */
    int configs_tried;        /* configurations that fit ... */
    int configs_scored;       /* ... of which score rated these (all but where
                                 PLANNER_SCORE_TASKS cut them) */
    int gpu_counts_tried;     /* GPU sub-group counts simulated around each sub-group size's
                                 best off the GPU after (refine_gpu_counts in planner.c) */
    int streams_tried;        /* the best with sub-groups streamed to the GPU's AdamW, this
                                 many counts simulated after (plan_group_streamed) */
    unsigned overflow;        /* tiers short when nothing fits (the most frugal plan's) */
    Footprint mem;
    PlannerWork work;
} PlanChoice;

/* Scores a whole plan for graph g (one micro-batch) in seconds per iteration (the simulator
 * provides one: costmodel/ does not depend on sim/). Returns a negative errno on failure, with
 * e filled. */
typedef int (*PlanScoreFn)(void *ctx, const Graph *g, const Plan *p, double *iter_s, Err *e);

/* The most tasks an iteration (sched_estimate_tasks), summed over the configurations it
 * scores, that one search has score simulate. Where the configurations that fit would take
 * more (a thousand layers in dozens of micro-batches: a minute of simulation each search), it
 * scores those the closed form rates fastest, as many as fit, at least one; below it (every
 * preset at the batches the suite and the benchmarks plan), all of them. */
#define PLANNER_SCORE_TASKS 4e6

/* How far a search is, for a progress line: of the distinct configurations, the swap amounts
 * to search and searched, then the plans to score and scored. */
typedef struct PlanProgress {
    int n_micro;
    int to_search, searched;
    int to_score, scored;
} PlanProgress;
typedef void (*PlanProgressFn)(void *ctx, const PlanProgress *at);

/* What --swap asks of the intra-block activations: auto the amount the planner finds best,
 * none recomputes them, all keeps every one, an amount keeps that many bytes in the ladder's
 * order; sweep predicts every amount (sim/sweep.h; the planner plans it as auto). */
typedef enum SwapMode { SWAP_AUTO, SWAP_NONE, SWAP_ALL, SWAP_BYTES, SWAP_SWEEP } SwapMode;

/* What the user gave and how the planner reports and scores, for planner_choose_with. */
typedef struct PlannerOptions {
    const PlanArgs *args;    /* the plan options given (NULL: none) */
    SwapMode swap;           /* the activations, a constraint as args are */
    double swap_bytes;       /* SWAP_BYTES */
    PlanScoreFn score;       /* NULL: the closed form */
    void *score_ctx;
    PlanProgressFn progress; /* NULL: nothing */
    void *progress_ctx;
} PlannerOptions;

/* Chooses a whole plan for the policy and n_micro micro-batches of g: placement by
 * capacity, then for each sub-group size and buffer configuration that fits, the best swap
 * amount; the configuration that score rates fastest wins (the closed form when score is NULL;
 * of those the closed form rates fastest where PLANNER_SCORE_TASKS bounds the simulations).
 * zero-infinity's plan is DeepSpeed's defaults whatever is tried (plan_zero_infinity_config:
 * placement, activations, sub-groups, buffers). The caller owns c->plan (plan_free). Returns 0
 * (check c->overflow: nonzero means nothing fits and c holds the most frugal plan), or a
 * negative errno. The number of
 * micro-batches is plan_make's search (plan_make.h). args (NULL: none) are plan options the
 * user gave: each configuration tried has them applied over it (each distinct one scored
 * once), and a given --act leaves the activations as it says; the caller has checked them
 * (plan_args_apply prints nothing here). */
int planner_choose(const Hardware *hw, const Graph *g, int n_micro, Policy policy,
                   const PlanArgs *args, PlanScoreFn score, void *score_ctx, PlanChoice *c,
                   Err *e);
/* planner_choose with every option: the plan options and --swap are constraints, so the
 * search covers only what they leave open (a tier given keeps every sub-group's weights or
 * states there unless a count says otherwise, plan_args_apply; with --swap other than auto
 * each configuration keeps the amount asked, and one short of memory there does not fit);
 * progress is called after each swap amount searched and each plan scored. */
int planner_choose_with(const Hardware *hw, const Graph *g, int n_micro, Policy policy,
                        const PlannerOptions *o, PlanChoice *c, Err *e);

#endif
