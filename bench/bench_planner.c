/* bench_planner: first how long fuyou-sim's what-if takes (its plan made as fuyou-sim makes it,
 * the simulator scoring the planner's configurations, then the plan predicted), against one
 * simulation of the plan it chose (the baseline, measured in the same run: the ratio is the
 * what-if's cost in simulations), with the planner's work (presets, and 1024-layer models at
 * the limits (docs/fuyou-sim.md)), and the closed form the planner evaluates with its ops priced
 * (ClosedPrices) against cost_closed_form (the reference), over the same plans.
 * Then the swap planner over the grid GPT-3 1.3B..175B x {4090, A100-80G, H200} x
 * batch 1..128 x CPU memory 64..768 GiB (seq 1024). Prints the distribution of the planner's
 * regret (its plan simulated, against the best point of a fine sweep of swap amounts in the same
 * configuration: the baseline, measured in the same run) and of the closed form's error against
 * the simulator at every swept point, and the worst cases. Not a test: nothing here fails. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "plan_make.h"
#include "planner_grid.h"

enum { WHATIF_REPEATS = 5 };

/* fuyou-sim --hw HW --model MODEL --batch BATCH --seq SEQ as its main() runs it, less the
 * report: the median seconds of the whole call and of one prediction of the plan it chose
 * (of repeats), and the planner's work over the micro-batch counts it tried. */
static int whatif(const char *hwname, const ModelConfig *model, int batch, int seq, int repeats,
                  Err *e)
{
    assert(repeats >= 1 && repeats <= WHATIF_REPEATS);
    Hardware hw;
    int rc = hw_load(hwname, NULL, 0, &hw, e);
    if (rc)
        return rc;
    PlanArgs args;
    plan_args_init(&args);
    double t_call[WHATIF_REPEATS], t_sim[WHATIF_REPEATS];
    int configs = 0, sims = 0, tasks = 0, micro = 0;
    PlannerWork work = {0};
    for (int i = 0; i < repeats && !rc; i++) {
        PredictScoreCtx sc = {&hw, 0};
        PlanRequest rq = {.model = model, .batch = batch, .seq = seq,
                          .policy = POLICY_FUYOU, .swap = SWAP_AUTO, .args = &args,
                          .score = predict_score, .score_ctx = &sc, .prog = "bench_planner"};
        Graph g;
        Plan p;
        PlanInfo info;
        Prediction pr;
        double t0 = bench_now();
        rc = plan_make(&rq, &hw, &g, &p, &info, e);
        if (!rc)
            rc = predict_run(&pr, &g, &hw, &p, 3, e);
        t_call[i] = bench_now() - t0;
        if (!rc) {
            configs = info.choice.configs_tried;
            sims = sc.sims;
            tasks = pr.sched.n_tasks;
            micro = p.n_micro;
            work = info.work;
            predict_free(&pr);
            t0 = bench_now();
            rc = predict_run(&pr, &g, &hw, &p, 3, e);
            t_sim[i] = bench_now() - t0;
        }
        if (!rc)
            predict_free(&pr);
        plan_make_free(&info);
        plan_free(&p);
        graph_free(&g);
    }
    if (!rc) {
        double call = bench_median(t_call, repeats);
        double sim = bench_median(t_sim, repeats);
        printf("  %-9s %4d layers, hidden %6d, batch %4d x %4d on %-12s %7.3f s (%d "
               "configurations that fit, M = %d micro-batches, %d simulated); one prediction of "
               "its plan (%d tasks) %6.1f ms: ratio %.1f\n", model->name, model->n_layer,
               model->d_model, batch, seq, hwname, call, configs, micro, sims, tasks, sim * 1e3,
               call / sim);
        printf("    planner's work: %lld swap amounts searched, %lld closed forms, %lld "
               "footprints, %lld plans scored (%.2f M tasks an iteration)\n",
               (long long)work.searches, (long long)work.closed_forms,
               (long long)work.footprints, (long long)work.scores, work.score_tasks / 1e6);
    }
    hw_free(&hw);
    return rc;
}

/* The closed form of GPT-3 175B batch 8 on 4090.ini along its ladder, every amount: with the
 * ops priced against the reference; the median of both sweeps' seconds, and the amounts where
 * the two differ (none: they are the same numbers). */
static int closed_priced(Err *e)
{
    Hardware hw;
    Graph g;
    Plan p;
    int rc = hw_load("4090.ini", NULL, 0, &hw, e);
    if (rc)
        return rc;
    rc = graph_init(&g, model_preset_find("gpt3-175b"), 8, 1024, e);
    if (!rc)
        rc = plan_init(&p, &g, POLICY_FUYOU, e);
    if (rc) {
        graph_free(&g);
        hw_free(&hw);
        return rc;
    }
    footprint_auto_place(&p, &g, &hw, NULL);
    plan_set_inner_act(&p, ACT_RECOMPUTE);
    SwapLadder l;
    planner_ladder(&hw, &g, &p, &l);
    ClosedPrices cp;
    int amounts = planner_units(&l) + 1, differ = 0;
    double *ref_s = malloc((size_t)amounts * sizeof *ref_s);
    rc = ref_s ? cost_closed_prices_init(&cp, &hw, &g) : -ENOMEM;
    double t_ref[WHATIF_REPEATS], t_priced[WHATIF_REPEATS];
    for (int i = 0; i < WHATIF_REPEATS && !rc; i++) {
        ClosedForm cf;
        double t0 = bench_now();
        for (int n = 0; n < amounts; n++) {
            planner_apply(&p, &l, n);
            cost_closed_form(&hw, &g, &p, &cf);
            ref_s[n] = cf.iter_s;
        }
        t_ref[i] = bench_now() - t0;
        t0 = bench_now();
        for (int n = 0; n < amounts; n++) {
            planner_apply(&p, &l, n);
            cost_closed_form_priced(&cp, &p, &cf);
            differ += cf.iter_s != ref_s[n];
        }
        t_priced[i] = bench_now() - t0;
    }
    if (!rc) {
        double ref = bench_median(t_ref, WHATIF_REPEATS);
        double priced = bench_median(t_priced, WHATIF_REPEATS);
        printf("closed form of gpt3-175b batch 8 on 4090.ini at its %d amounts: priced %.2f ms, "
               "reference %.2f ms: ratio %.3f (amounts where the two differ: %d)\n", amounts,
               priced * 1e3, ref * 1e3, priced / ref, differ);
        cost_closed_prices_free(&cp);
    }
    free(ref_s);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
    return rc;
}

static double pct(double *v, int n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i];
}

/* The command line (bench_check_args): no options. */
static const char usage[] = "bench_planner (no options)";
static const char *const options[] = {NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    static const struct { const char *hw, *model; int batch; } calls[] = {
        {"4090.ini", "gpt3-175b", 16}, {"4090.ini", "gpt3-13b", 64}, {"h200.ini", "gpt3-6.7b", 64},
    };
    /* at the limits (docs/fuyou-sim.md) (1024 layers; hidden and heads to 131072): states half on SSD, a
     * shape that fits nowhere, and one that needs 16 micro-batches or more */
    static const struct { const char *hw; int hidden, heads, batch, seq; } limits[] = {
        {"h200.ini", 1024, 16, 8, 64}, {"4090.ini", 131072, 1024, 8, 64},
        {"4090.ini", 1024, 16, 1024, 2048},
    };
    Err e;
    printf("what-if (fuyou-sim's call: the plan made, its configurations simulated, the plan "
           "predicted; median of %d, at the limits of 1):\n", WHATIF_REPEATS);
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
        if (whatif(calls[i].hw, model_preset_find(calls[i].model), calls[i].batch, 1024,
                   WHATIF_REPEATS, &e)) {
            fprintf(stderr, "bench_planner: %s\n", e.msg);
            return 1;
        }
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        ModelConfig m = *model_preset_find("gpt3-13b");
        snprintf(m.name, sizeof m.name, "limits-%zu", i);
        m.n_layer = MODEL_MAX_LAYERS;
        m.d_model = limits[i].hidden;
        m.n_head = limits[i].heads;
        m.d_ff = 4 * limits[i].hidden;
        if (whatif(limits[i].hw, &m, limits[i].batch, limits[i].seq, 1, &e)) {
            fprintf(stderr, "bench_planner: %s\n", e.msg);
            return 1;
        }
    }
    if (closed_priced(&e)) {
        fprintf(stderr, "bench_planner: %s\n", e.msg);
        return 1;
    }
    static const char *models[] = {"gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b",
                                   "gpt3-175b"};
    static const char *hws[] = {"4090.ini", "a100-80g.ini", "h200.ini"};
    static const int batches[] = {1, 4, 16, 64, 128};
    static const double mems[] = {64, 256, 768};
    enum { MAX_POINTS = 101, N = 5 * 3 * 5 * 3 };
    static double regrets[N], errs_all[N * MAX_POINTS], errs_fit[N * MAX_POINTS];
    int n_points = 0, n_fit = 0, n_swept = 0, n_err = 0, n_regret_ok = 0, n_err_ok = 0;
    int n_err_fit = 0, n_err_fit_ok = 0;
    double planner_s = 0, sweep_s = 0, worst_regret = -1, worst_err = -1;
    char worst_regret_at[256] = "", worst_err_at[256] = "";
    static struct { double err; char at[160]; } point_err[N];
    int n_point_err = 0;
    for (size_t mi = 0; mi < 5; mi++)
        for (size_t hi = 0; hi < 3; hi++)
            for (size_t bi = 0; bi < 5; bi++)
                for (size_t ci = 0; ci < 3; ci++) {
                    GridPoint pt = {models[mi], hws[hi], batches[bi], mems[ci]};
                    GridResult r;
                    n_points++;
                    if (grid_eval(&pt, MAX_POINTS, &r, &e)) {
                        fprintf(stderr, "bench_planner: %s\n", e.msg);
                        return 1;
                    }
                    planner_s += r.planner_wall_s;
                    sweep_s += r.sweep_wall_s;
                    n_fit += r.fits;
                    if (!r.swept) {
                        grid_result_free(&r);
                        continue;
                    }
                    char at[128];
                    snprintf(at, sizeof at, "%s %s batch %d cpu %g GiB", pt.model, pt.hw,
                             pt.batch, pt.cpu_mem_GiB);
                    regrets[n_swept] = r.regret;
                    n_regret_ok += r.regret <= 0.02;
                    if (r.regret > worst_regret) {
                        worst_regret = r.regret;
                        snprintf(worst_regret_at, sizeof worst_regret_at, "%s (units %d vs %d of "
                                 "%d)", at, r.chosen_units, r.best_units, r.units);
                    }
                    double point_max = 0;
                    for (int i = 0; i < r.n_errors; i++) {
                        if (r.error_fits[i] && r.errors[i] > point_max)
                            point_max = r.errors[i];
                        errs_all[n_err++] = r.errors[i];
                        n_err_ok += r.errors[i] <= 0.10;
                        if (!r.error_fits[i])
                            continue;
                        errs_fit[n_err_fit++] = r.errors[i];
                        n_err_fit_ok += r.errors[i] <= 0.10;
                        if (r.errors[i] > worst_err) {
                            worst_err = r.errors[i];
                            snprintf(worst_err_at, sizeof worst_err_at, "%s", at);
                        }
                    }
                    point_err[n_point_err].err = point_max;
                    snprintf(point_err[n_point_err++].at, sizeof point_err[0].at, "%s", at);
                    n_swept++;
                    grid_result_free(&r);
                }
    printf("grid: %d points, %d fit (a plan within every tier), %d with activations to plan\n",
           n_points, n_fit, n_swept);
    printf("planner regret (its plan simulated / best of a %d-point sweep - 1):\n", MAX_POINTS);
    printf("  median %.3f%%  p90 %.3f%%  max %.3f%%  within 2%%: %d of %d\n",
           100 * pct(regrets, n_swept, 0.5), 100 * pct(regrets, n_swept, 0.9),
           100 * pct(regrets, n_swept, 1.0), n_regret_ok, n_swept);
    printf("  worst: %s\n", worst_regret_at);
    printf("closed form vs simulator, |closed - sim| / sim, at swept plans that fit:\n");
    printf("  median %.2f%%  p90 %.2f%%  max %.2f%%  within 10%%: %d of %d (%.1f%%)\n",
           100 * pct(errs_fit, n_err_fit, 0.5), 100 * pct(errs_fit, n_err_fit, 0.9),
           100 * pct(errs_fit, n_err_fit, 1.0), n_err_fit_ok, n_err_fit,
           100.0 * n_err_fit_ok / n_err_fit);
    printf("  worst: %s\n", worst_err_at);
    printf("  and at every swept point, over capacity too: median %.2f%%  p90 %.2f%%  max "
           "%.2f%%  within 10%%: %d of %d (%.1f%%)\n", 100 * pct(errs_all, n_err, 0.5),
           100 * pct(errs_all, n_err, 0.9), 100 * pct(errs_all, n_err, 1.0), n_err_ok, n_err,
           100.0 * n_err_ok / n_err);
    printf("  grid points whose worst swept plan that fits is off by more than 10%%:\n");
    for (int i = 0; i < n_point_err; i++)
        if (point_err[i].err > 0.10)
            printf("    %5.2f%%  %s\n", 100 * point_err[i].err, point_err[i].at);
    printf("time: planner %.2f s in all, the sweeps (baseline) %.2f s: ratio %.3f\n", planner_s,
           sweep_s, planner_s / sweep_s);
    return 0;
}
