/* sweep: the closed form and the simulator over swap amounts of one plan (fuyou-sim --swap
 * sweep, the planner checks and benchmark). Each point applies the first n units of the ladder,
 * evaluates the closed form, simulates two iterations and notes whether the plan fits. */
#ifndef FUYOU_SWEEP_H
#define FUYOU_SWEEP_H

#include "planner.h"
#include "predict.h"

typedef struct SweepPoint {
    int units;
    double bytes;
    double closed_s;
    double sim_s;        /* steady state over two simulated iterations */
    Resource bottleneck; /* the simulation's */
    bool fits;
} SweepPoint;

typedef struct Sweep {
    SweepPoint *pts;
    int n;
    int best; /* index of the fastest simulated point that fits, or -1 */
} Sweep;

/* Sweeps units 0..planner_units(l), every step-th so that at most max_points are taken (both
 * ends and every unit in must_include are always among them), in increasing order. p's
 * activations are left as the ladder's first unit count in must_include[0] (or 0). The caller
 * owns s (sweep_free, safe after a failure). 0 or a negative errno with e filled. */
int sweep_run(const Graph *g, const Hardware *hw, Plan *p, const SwapLadder *l, int max_points,
              const int *must_include, int n_must, Sweep *s, Err *e);
void sweep_free(Sweep *s);
/* The point with these units, or NULL. */
const SweepPoint *sweep_find(const Sweep *s, int units);

#endif
