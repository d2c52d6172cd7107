/* critpath: the critical path of a trace, followed through the schedule's dependencies.
 *
 * A task's start waits for the latest of its dependencies (trace_read_deps) and of the task that
 * ran before it on its resource; that one binds it. From the task that ends an iteration last,
 * following the binding task back to the previous iteration's end gives the path that set the
 * iteration's time. Each step covers [binding end, task end]: the task's own run on its
 * resource, and before it the wait between the binding task's end and the task's start (an
 * executor's dispatch and synchronisation; the simulator's lead time). So per iteration the path's
 * resource times and its wait add up to the iteration time (iteration 0 from its first start).
 * Edges whose tasks a trace lacks are skipped and counted. */
#ifndef FUYOU_CRITPATH_H
#define FUYOU_CRITPATH_H

#include "fuyou_err.h"
#include "schedule.h"
#include "trace.h"

enum { CRIT_RUNS = 10 };

/* Consecutive tasks of the path on one resource. */
typedef struct CritRun {
    Resource res;
    int tasks;
    double busy_s, wait_s; /* the tasks' time on the resource; the waits before them */
    char first[SCHED_ID_MAX], last[SCHED_ID_MAX];
} CritRun;

typedef struct CritPath {
    int iters;                 /* iterations followed */
    double res_s[RES_COUNT];   /* per iteration: time on the path on each resource */
    double wait_s;             /* per iteration: time on the path between a task and its binder */
    int unresolved;            /* edges with a task the trace lacks */
    int iter_shown;            /* the last iteration followed: its runs below */
    CritRun runs[CRIT_RUNS];   /* its longest runs (busy + wait), in path order */
    int n_runs, n_runs_total;
} CritPath;

/* Follows t's critical path over iterations [from, n) (each from the previous one's last end;
 * iteration 0 from its first start) with the dependencies d. 0, -EINVAL when an iteration has
 * no task in t, -ENOMEM. */
int trace_critical_path(const TraceTable *t, const TraceDeps *d, int from, int n, CritPath *cp,
                        Err *e);

#endif
