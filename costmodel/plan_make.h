/* plan_make: the plan both command lines run from the same options (fuyou-sim predicts it,
 * fuyou-run --offload performs it), so a run performs exactly the plan fuyou-sim predicted.
 *
 * --batch is the sequences of an iteration (an optimizer step), split into --micro-batches M
 * of batch / M each (M divides the batch; gradients accumulate). With M auto (not given), the
 * fewest micro-batches whose plan fits, then more while the plan gets faster (at most
 * PLAN_AUTO_MICRO_MAX); when none fits, the most frugal tried. For each count: fuyou without
 * plan options and with --swap auto, the automatic planner's whole plan (planner.h); otherwise
 * the policy's placement (fuyou: by capacity, footprint.h; zero-infinity: DeepSpeed's
 * defaults, plan_zero_infinity_config, whose activations --swap auto keeps), the options over
 * it, and the intra-block activations the swap mode asks for on the planner's ladder: none
 * recomputes them, all keeps every one, an amount keeps that many bytes in the ladder's order,
 * auto the amount the closed form finds best. For a sweep (sim/sweep.h walks the ladder), the
 * plan and the ladder it is swept on: without options, the planner's configuration and its
 * ladder. */
#ifndef FUYOU_PLAN_MAKE_H
#define FUYOU_PLAN_MAKE_H

#include "plan_args.h"
#include "planner.h"

/* The most micro-batches the automatic count tries. */
enum { PLAN_AUTO_MICRO_MAX = 64 };

typedef struct PlanRequest {
    const ModelConfig *model;
    int batch, seq;             /* sequences per iteration, tokens per sequence */
    Policy policy;
    SwapMode swap;
    double swap_bytes;          /* SWAP_BYTES */
    const PlanArgs *args;       /* the plan options given (none: plan_args_init's) */
    PlanScoreFn score;          /* how the planner rates a whole plan (NULL: the closed form) */
    void *score_ctx;
    const char *prog;           /* names the program in the options' error lines */
    /* the lane's sizes for micro-batches of B x T (fuyou-run --offload: its device's), which
     * the footprint plans with; NULL: the CUDA lane's (footprint_cuda_lane) */
    void (*lane_sizes)(const void *ctx, const ModelConfig *c, int B, int T, LaneSizes *out);
    const void *lane_ctx;
    PlanProgressFn progress;    /* told how far each planner search is (NULL: nothing) */
    void *progress_ctx;
} PlanRequest;

/* What plan_make decided, for reports and the sweep. */
typedef struct PlanInfo {
    bool planned;       /* planner_choose made the whole plan: choice holds it */
    PlanChoice choice;
    SwapLadder ladder;  /* whenever the swap amount was taken on a ladder */
    bool have_ladder;
    int units;          /* ladder units kept */
    PlannerWork work;   /* the planner's, over every micro-batch count tried */
} PlanInfo;

/* Parses --swap: auto, none, all, sweep or an amount (units_parse_bytes, at most
 * HW_MAX_MEM_GIB). 0, or -EINVAL with one line on stderr naming prog and the value. */
int plan_swap_parse(const char *s, const char *prog, SwapMode *mode, double *bytes);
/* The mode's name as --swap spells it ("fixed amount" for SWAP_BYTES), for reports. */
const char *plan_swap_name(SwapMode m);

/* Makes the plan for rq into p (plan_free it), the graph of its micro-batch into g (graph_free
 * it), and says how in info (plan_make_free it). 0, or a negative errno: -EINVAL for options
 * that contradict each other or the model (printed on stderr, prefixed with rq->prog) or a
 * micro-batch beyond the graph's limits (e), others with e; then g, p and info are empty (safe
 * to free). */
int plan_make(const PlanRequest *rq, const Hardware *hw, Graph *g, Plan *p, PlanInfo *info,
              Err *e);
void plan_make_free(PlanInfo *info);

/* Whether plan p (of graph g) fits every tier of hw. */
bool plan_make_fits(const Graph *g, const Hardware *hw, const Plan *p);


#endif
