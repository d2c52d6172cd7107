/* plan_make: the plan both command lines run from the same options (fuyou-sim predicts it,
 * fuyou-run --offload performs it), so a run performs exactly the plan fuyou-sim predicted.
 *
 * Without plan options and with --swap auto, the automatic planner's whole plan (planner.h);
 * otherwise the policy's placement by capacity (footprint.h), the options over it, and the
 * intra-block activations the swap mode asks for on the planner's ladder: none recomputes them,
 * all keeps every one, an amount keeps that many bytes in the ladder's order, auto the amount
 * the closed form finds best. For a sweep (sim/sweep.h walks the ladder), the plan and the
 * ladder it is swept on: without options, the planner's configuration and its ladder. */
#ifndef FUYOU_PLAN_MAKE_H
#define FUYOU_PLAN_MAKE_H

#include "plan_args.h"
#include "planner.h"

typedef enum SwapMode { SWAP_AUTO, SWAP_NONE, SWAP_ALL, SWAP_BYTES, SWAP_SWEEP } SwapMode;

typedef struct PlanRequest {
    Policy policy;
    SwapMode swap;
    double swap_bytes;          /* SWAP_BYTES */
    const PlanArgs *args;       /* the plan options given (none: plan_args_init's) */
    PlanScoreFn score;          /* how the planner rates a whole plan (NULL: the closed form) */
    void *score_ctx;
    const char *prog;           /* names the program in the options' error lines */
} PlanRequest;

/* What plan_make decided, for reports and the sweep. */
typedef struct PlanInfo {
    bool planned;       /* planner_choose made the whole plan: choice holds it */
    PlanChoice choice;
    SwapLadder ladder;  /* whenever the swap amount was taken on a ladder */
    bool have_ladder;
    int units;          /* ladder units kept */
} PlanInfo;

/* Parses --swap: auto, none, all, sweep or an amount (units_parse_bytes). 0, or -EINVAL with
 * one line on stderr naming prog and the value. */
int plan_swap_parse(const char *s, const char *prog, SwapMode *mode, double *bytes);

/* Makes the plan for rq into p (plan_free it) and says how in info (plan_make_free it). 0, or a
 * negative errno: -EINVAL for options that contradict each other or the model (printed on
 * stderr, prefixed with rq->prog), others with e. */
int plan_make(const PlanRequest *rq, const Graph *g, const Hardware *hw, Plan *p,
              PlanInfo *info, Err *e);
void plan_make_free(PlanInfo *info);

#endif
