/* predict: schedule + cost model + engine, and the report; see predict.h. */
#include "predict.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cost.h"
#include "trace.h"
#include "units.h"

static double work_cb(void *ctx, const Task *t)
{
    return cost_task_work(ctx, t);
}

static void rates_cb(void *ctx, const Task *const running[RES_COUNT], double rate[RES_COUNT])
{
    cost_task_rates(ctx, running, rate);
}

static double lead_cb(void *ctx, const Task *t)
{
    return cost_task_lead_s(ctx, t);
}

static void derive(Prediction *pr, const Graph *g, const Plan *p)
{
    const Schedule *s = &pr->sched;
    double *iter_end = calloc((size_t)pr->iters, sizeof *iter_end);
    double busy_total[RES_COUNT] = {0}, hw_total = 0;
    int steady_from = pr->iters > 1 ? 1 : 0;
    for (int t = 0; iter_end && t < s->n_tasks; t++) {
        const Task *task = &s->tasks[t];
        if (pr->res.end[t] > iter_end[task->iter])
            iter_end[task->iter] = pr->res.end[t];
        if (task->iter < steady_from)
            continue;
        busy_total[task->res] += pr->res.end[t] - pr->res.start[t];
        if (task->res == RES_GPU && task->kind != TASK_ADAM)
            hw_total += task->flops;
    }
    int n_steady = pr->iters - steady_from;
    pr->first_iter_s = iter_end ? iter_end[0] : NAN;
    pr->iter_s = !iter_end ? NAN : pr->iters > 1
                     ? (iter_end[pr->iters - 1] - iter_end[0]) / (pr->iters - 1) : iter_end[0];
    free(iter_end);
    pr->tokens = (double)p->seqs_per_micro * p->seq * p->n_micro;
    GraphTotals gt;
    graph_totals(g, &gt);
    pr->model_flops = 6.0 * (double)gt.params * pr->tokens;
    pr->hw_flops = hw_total / n_steady;
    pr->bottleneck = RES_GPU;
    for (int r = 0; r < RES_COUNT; r++) {
        pr->busy_s[r] = busy_total[r] / n_steady;
        if (pr->busy_s[r] > pr->busy_s[pr->bottleneck])
            pr->bottleneck = r;
    }
}

int predict_run(Prediction *pr, const Graph *g, const Hardware *hw, const Plan *p, int iters,
                Err *e)
{
    memset(pr, 0, sizeof *pr);
    pr->iters = iters;
    double t0 = clock_monotonic_s();
    int rc = sched_build(&pr->sched, g, p, iters, e);
    if (rc)
        return rc;
    CostRateCache cache = {0};
    CostModel cm = {.hw = hw, .g = g, .cache = &cache};
    SimModel m = {&cm, work_cb, rates_cb, lead_cb};
    rc = sim_run(&pr->sched, &m, false, &pr->res, e);
    if (rc) {
        predict_free(pr);
        return rc;
    }
    pr->sim_wall_s = clock_monotonic_s() - t0;
    derive(pr, g, p);
    footprint_compute(&pr->mem, g, p);
    pr->overflow = footprint_overflow(&pr->mem, hw);
    return 0;
}

int predict_score(void *ctx, const Graph *g, const Plan *p, double *iter_s, Err *e)
{
    PredictScoreCtx *sc = ctx;
    Prediction pr;
    int rc = predict_run(&pr, g, sc->hw, p, 2, e);
    if (rc)
        return rc;
    sc->sims++;
    *iter_s = pr.iter_s;
    predict_free(&pr);
    return 0;
}

void predict_free(Prediction *pr)
{
    sched_free(&pr->sched);
    sim_result_free(&pr->res);
}

int predict_write_trace(const Prediction *pr, const char *path, bool chrome, Err *e)
{
    const Schedule *s = &pr->sched;
    TraceRow *rows = malloc(((size_t)s->n_tasks + 1) * sizeof *rows);
    if (!rows)
        return err_set(e, -ENOMEM, "out of memory for a trace of %d tasks", s->n_tasks);
    for (int t = 0; t < s->n_tasks; t++)
        trace_row_from_task(&rows[t], &s->tasks[t], s->tasks[t].iter, pr->res.start[t],
                            pr->res.end[t]);
    int rc = trace_save(path, chrome ? TRACE_CHROME : TRACE_TSV, rows, s->n_tasks, e);
    free(rows);
    return rc;
}

void predict_report(FILE *out, const Prediction *pr, const Graph *g, const Hardware *hw,
                    const Plan *p, const char *to_fit)
{
    char b1[32], b2[32], summary[640];
    fprintf(out, "%s on %s (%s, %s)\n", g->cfg.name, hw->source, hw->gpu_name, hw->ssd_name);
    fprintf(out, "plan: %s\n\n", plan_summary(p, g, summary, sizeof summary));
    if (pr->overflow) {
        /* no time for a plan that cannot run: its shortfall, below, is the answer */
        fprintf(out, "iteration      none: the plan does not fit (below)\n");
    } else {
        fprintf(out, "iteration      %.3f s", pr->iter_s);
        if (pr->iters > 1)
            fprintf(out, " (steady state over %d iterations; the first, cold, %.3f s)",
                    pr->iters, pr->first_iter_s);
        fprintf(out, "\nthroughput     %.0f tokens/s\n", pr->tokens / pr->iter_s);
        fprintf(out, "TFLOPS         %.1f model (6·P·tokens = %s per iteration), %.1f hardware "
                "(%s with attention and recomputation)\n", pr->model_flops / pr->iter_s / 1e12,
                units_flops(b1, sizeof b1, pr->model_flops), pr->hw_flops / pr->iter_s / 1e12,
                units_flops(b2, sizeof b2, pr->hw_flops));
        /* what bounds the iteration: a resource busy nearly all of it, or the waits between
         * dependent tasks (then no resource is marked) */
        bool saturated = pr->busy_s[pr->bottleneck] >= 0.9 * pr->iter_s;
        fprintf(out, "\nresource     busy s/iter   busy %%\n");
        for (int r = 0; r < RES_COUNT; r++)
            fprintf(out, "  %-10s %11.3f %7.1f%%%s\n", resource_name(r), pr->busy_s[r],
                    100 * pr->busy_s[r] / pr->iter_s,
                    saturated && r == (int)pr->bottleneck ? "  <- bound" : "");
        if (saturated)
            fprintf(out, "bound by       %s (busy %.0f%% of the iteration)\n",
                    resource_name(pr->bottleneck),
                    100 * pr->busy_s[pr->bottleneck] / pr->iter_s);
        else
            fprintf(out, "bound by       waits between dependent tasks (loads that cannot be "
                    "prefetched, updates the next forward needs): the busiest resource, %s, "
                    "is busy %.0f%%, the GPU idles %.3f s an iteration\n",
                    resource_name(pr->bottleneck), 100 * pr->busy_s[pr->bottleneck] / pr->iter_s,
                    pr->iter_s - pr->busy_s[RES_GPU]);
    }
    fprintf(out, "\nmemory peak    ");
    for (int t = 0; t < TIER_COUNT; t++)
        fprintf(out, "%s%s %s of %s", t ? ", " : "", tier_name(t),
                units_bytes(b1, sizeof b1, footprint_tier_total(&pr->mem, t)),
                units_bytes(b2, sizeof b2, footprint_capacity(hw, t)));
    fprintf(out, "\n");
    for (int t = 0; t < TIER_COUNT; t++)
        if (pr->overflow & (1u << t))
            fprintf(out, "over capacity: %s needs %s more than its %s\n", tier_name(t),
                    units_bytes(b1, sizeof b1, footprint_tier_total(&pr->mem, t) -
                                                   footprint_capacity(hw, t)),
                    units_bytes(b2, sizeof b2, footprint_capacity(hw, t)));
    if (pr->overflow && to_fit)
        fprintf(out, "to fit:        %s\n", to_fit);
    fprintf(out, "simulated %d tasks, %lld events in %.1f ms\n", pr->sched.n_tasks,
            (long long)pr->res.events, pr->sim_wall_s * 1e3);
}
