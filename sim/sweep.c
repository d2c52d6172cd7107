/* sweep: closed form and simulation over swap amounts; see sweep.h. */
#include "sweep.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool wanted(int n, int units, int step, const int *must, int n_must)
{
    if (n == 0 || n == units || n % step == 0)
        return true;
    for (int i = 0; i < n_must; i++)
        if (must[i] == n)
            return true;
    return false;
}

int sweep_run(const Graph *g, const Hardware *hw, Plan *p, const SwapLadder *l, int max_points,
              const int *must_include, int n_must, Sweep *s, Err *e)
{
    memset(s, 0, sizeof *s);
    s->best = -1;
    int units = planner_units(l);
    int step = max_points > 1 && units + 1 > max_points ? (units + max_points - 2) /
                                                              (max_points - 1) : 1;
    s->pts = calloc((size_t)units + 1, sizeof *s->pts);
    if (!s->pts)
        return err_set(e, -ENOMEM, "out of memory for a sweep of %d points", units + 1);
    int rc = 0;
    for (int n = 0; n <= units && !rc; n++) {
        if (!wanted(n, units, step, must_include, n_must))
            continue;
        SweepPoint *pt = &s->pts[s->n++];
        planner_apply(p, l, n);
        ClosedForm cf;
        cost_closed_form(hw, g, p, &cf);
        Prediction pr;
        rc = predict_run(&pr, g, hw, p, 2, e);
        if (rc)
            break;
        *pt = (SweepPoint){.units = n, .bytes = planner_amount(l, n), .closed_s = cf.iter_s,
                           .sim_s = pr.iter_s, .bottleneck = pr.bottleneck,
                           .fits = pr.overflow == 0};
        predict_free(&pr);
        if (pt->fits && (s->best < 0 || pt->sim_s < s->pts[s->best].sim_s))
            s->best = s->n - 1;
    }
    planner_apply(p, l, n_must > 0 ? must_include[0] : 0);
    if (rc)
        sweep_free(s);
    return rc;
}

void sweep_free(Sweep *s)
{
    free(s->pts);
    s->pts = NULL;
    s->n = 0;
}

const SweepPoint *sweep_find(const Sweep *s, int units)
{
    for (int i = 0; i < s->n; i++)
        if (s->pts[i].units == units)
            return &s->pts[i];
    return NULL;
}
