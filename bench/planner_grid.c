/* planner_grid: one grid point of the planner check; see planner_grid.h. */
#include "planner_grid.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

int grid_eval(const GridPoint *pt, int max_points, GridResult *r, Err *e)
{
    memset(r, 0, sizeof *r);
    char set[64];
    snprintf(set, sizeof set, "memory.cpu_mem_GiB=%g", pt->cpu_mem_GiB);
    const char *sets[] = {set};
    Hardware hw;
    int rc = hw_load(pt->hw, sets, 1, &hw, e);
    if (rc)
        return rc;
    Graph g;
    rc = graph_init(&g, model_preset_find(pt->model), pt->batch, 1024, e);
    if (rc) {
        hw_free(&hw);
        return rc;
    }
    PlanChoice c;
    PredictScoreCtx sc = {&hw, 0};
    double t0 = clock_monotonic_s();
    rc = planner_choose(&hw, &g, 1, POLICY_FUYOU, NULL, predict_score, &sc, &c, e);
    r->planner_wall_s = clock_monotonic_s() - t0;
    if (rc)
        goto out;
    r->fits = c.overflow == 0;
    r->chosen_s = c.score_s;
    if (!r->fits || c.units_total == 0)
        goto out_plan;
    /* The same configuration with every intra-block activation recomputed is the ladder's
     * base; sweep it. */
    Plan base;
    rc = plan_copy(&base, &c.plan, e);
    if (rc)
        goto out_plan;
    SwapLadder l;
    planner_apply(&base, &(SwapLadder){.n_layer = base.n_layer}, 0);
    planner_ladder(&hw, &g, &base, &l);
    Sweep sw;
    t0 = clock_monotonic_s();
    rc = sweep_run(&g, &hw, &base, &l, max_points, &c.units, 1, &sw, e);
    r->sweep_wall_s = clock_monotonic_s() - t0;
    plan_free(&base);
    if (rc)
        goto out_plan;
    r->swept = true;
    r->units = planner_units(&l);
    r->chosen_units = c.units;
    r->errors = malloc((size_t)sw.n * sizeof *r->errors);
    r->error_fits = malloc((size_t)sw.n * sizeof *r->error_fits);
    for (int i = 0; r->errors && r->error_fits && i < sw.n; i++) {
        r->error_fits[r->n_errors] = sw.pts[i].fits;
        r->errors[r->n_errors++] = fabs(sw.pts[i].closed_s - sw.pts[i].sim_s) / sw.pts[i].sim_s;
    }
    const SweepPoint *mine = sweep_find(&sw, c.units);
    if (sw.best >= 0 && mine) {
        r->best_s = sw.pts[sw.best].sim_s;
        r->best_units = sw.pts[sw.best].units;
        r->regret = mine->sim_s / r->best_s - 1;
    }
    sweep_free(&sw);
out_plan:
    plan_free(&c.plan);
out:
    graph_free(&g);
    hw_free(&hw);
    return rc;
}

void grid_result_free(GridResult *r)
{
    free(r->errors);
    free(r->error_fits);
    r->errors = NULL;
    r->error_fits = NULL;
}
