/* planner_grid: checks the swap planner over a grid of model x hardware x batch x CPU memory.
 * At each point the planner's plan is simulated and compared with a fine sweep of swap amounts
 * in the same configuration (regret), and the closed form with the simulator at every swept
 * point (error). Shared by the benchmark (the full grid) and the test (a corner of it). */
#ifndef FUYOU_PLANNER_GRID_H
#define FUYOU_PLANNER_GRID_H

#include "sweep.h"

typedef struct GridPoint {
    const char *model, *hw;
    int batch;
    double cpu_mem_GiB;
} GridPoint;

typedef struct GridResult {
    bool fits;        /* the planner found a plan that fits */
    bool swept;       /* a ladder existed (not everything on the GPU) */
    double regret;    /* planner's simulated time over the best swept point, minus 1 */
    double chosen_s, best_s;
    int chosen_units, best_units, units;
    double *errors;   /* |closed - sim| / sim at each swept point */
    bool *error_fits; /* whether that point's plan fits */
    int n_errors;
    double planner_wall_s, sweep_wall_s;
} GridResult;

/* Evaluates one point with a sweep of at most max_points. The caller frees r with
 * grid_result_free. */
int grid_eval(const GridPoint *pt, int max_points, GridResult *r, Err *e);
void grid_result_free(GridResult *r);

#endif
