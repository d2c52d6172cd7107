/* predict: one what-if prediction: build the schedule of a plan, simulate it with the cost model,
 * and derive the figures fuyou-sim reports (iteration time, TFLOPS, tokens/s, per-resource busy
 * time and the bottleneck, memory per tier), plus the predicted trace. */
#ifndef FUYOU_PREDICT_H
#define FUYOU_PREDICT_H

#include <stdio.h>

#include "engine.h"
#include "footprint.h"
#include "graph.h"
#include "hw.h"
#include "plan.h"
#include "schedule.h"

typedef struct Prediction {
    Schedule sched;
    SimResult res;
    int iters;
    double first_iter_s;     /* iteration 0, starting cold */
    double iter_s;           /* steady state: mean of iterations 1..N-1 (iteration 0 if N = 1) */
    double tokens;           /* per iteration */
    double model_flops;      /* 6 * P * tokens per iteration */
    double hw_flops;         /* GPU FLOPs per iteration, recomputation and attention included */
    double busy_s[RES_COUNT];/* per steady-state iteration */
    Resource bottleneck;     /* the busiest resource */
    Footprint mem;
    unsigned overflow;       /* tiers over capacity (bit per Tier) */
    double sim_wall_s;       /* how long building and simulating took */
} Prediction;

/* Predicts iters iterations of p. The caller owns pr and frees it with predict_free (safe after
 * a failure). Returns 0 or a negative errno with e filled. */
int predict_run(Prediction *pr, const Graph *g, const Hardware *hw, const Plan *p, int iters,
                Err *e);
void predict_free(Prediction *pr);

/* Writes the predicted timeline: TSV (chrome false) or Chrome/Perfetto JSON. 0 or -errno. */
int predict_write_trace(const Prediction *pr, const char *path, bool chrome, Err *e);

/* A PlanScoreFn (planner.h) that simulates two iterations and gives the steady-state time. */
typedef struct PredictScoreCtx {
    const Hardware *hw;
    int sims; /* counts the simulations run */
} PredictScoreCtx;
int predict_score(void *ctx, const Graph *g, const Plan *p, double *iter_s, Err *e);

/* The report fuyou-sim prints; for a plan over capacity, to_fit (NULL: nothing) after the
 * tiers short: what would make it fit (plan_advice_line). */
void predict_report(FILE *out, const Prediction *pr, const Graph *g, const Hardware *hw,
                    const Plan *p, const char *to_fit);

#endif
