/* bench_planner: the swap planner over the grid GPT-3 1.3B..175B x {4090, A100-80G, H200} x
 * batch 1..128 x CPU memory 64..768 GiB (seq 1024). Prints the distribution of the planner's
 * regret (its plan simulated, against the best point of a fine sweep of swap amounts in the same
 * configuration: the baseline, measured in the same run) and of the closed form's error against
 * the simulator at every swept point, and the worst cases. Not a test: nothing here fails. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "planner_grid.h"

static double pct(double *v, int n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i];
}

int main(void)
{
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
                    Err e;
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
