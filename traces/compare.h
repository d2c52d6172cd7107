/* compare: a predicted trace against a measured one (both in the trace.h schema), task by task.
 *
 * Tasks are joined on (iter, task_id). Over the iterations both traces have, the steady state
 * (iterations after the first, or the first alone when there is one) gives the iteration time
 * (the mean gap between consecutive iterations' last task ends), each resource's busy time and
 * each phase's span per iteration, and the distribution of per-task duration errors; tasks found
 * in one trace only are counted. The bottleneck of each is its busiest resource. With the
 * schedule's dependencies, the critical path of each, per resource and as its longest runs. */
#ifndef FUYOU_COMPARE_H
#define FUYOU_COMPARE_H

#include <stdbool.h>
#include <stdio.h>

#include "critpath.h"
#include "schedule.h"
#include "trace.h"

enum { COMPARE_WORST = 10, COMPARE_PHASES = 3 };

typedef struct CompareTask {
    int iter;
    char id[SCHED_ID_MAX];
    Resource res;
    double pred_s, meas_s; /* durations */
} CompareTask;

typedef struct TraceCompare {
    int iters;                    /* iterations both traces have */
    int steady_from;              /* the first iteration counted (0 or 1) */
    int matched, only_pred, only_meas;
    char example_only_pred[SCHED_ID_MAX + 16], example_only_meas[SCHED_ID_MAX + 16];
    double pred_iter_s, meas_iter_s;
    double iter_error;            /* meas / pred - 1 */
    double pred_busy_s[RES_COUNT], meas_busy_s[RES_COUNT]; /* per steady iteration */
    double pred_phase_s[COMPARE_PHASES], meas_phase_s[COMPARE_PHASES]; /* Phase order */
    int timed;                    /* matched steady tasks predicted to take over 1 us */
    double dur_err_median, dur_err_p90; /* of |meas / pred - 1| over those */
    CompareTask worst[COMPARE_WORST];   /* by |meas - pred|, largest first */
    int n_worst;
    Resource pred_bottleneck, meas_bottleneck;
    bool has_paths;               /* trace_compare_paths filled the two below */
    CritPath pred_path, meas_path;
} TraceCompare;

/* Compares pred with meas into c. 0, -EINVAL when they share no iteration or task (e says
 * which), -ENOMEM. */
int trace_compare(const TraceTable *pred, const TraceTable *meas, TraceCompare *c, Err *e);

/* Follows both traces' critical paths over c's steady iterations with the schedule's
 * dependencies d (after trace_compare). 0 or as trace_critical_path. */
int trace_compare_paths(const TraceTable *pred, const TraceTable *meas, const TraceDeps *d,
                        TraceCompare *c, Err *e);

/* The report fuyou-trace compare prints. */
void trace_compare_print(FILE *out, const TraceCompare *c);

/* The joined table's header (fuyou-plot compare and scatter read the table). */
#define TRACE_JOINED_HEADER                                                                      \
    "iter\ttask_id\tresource\tpred_start_s\tpred_end_s\tmeas_start_s\tmeas_end_s"

/* The joined table: iter task_id resource pred_start_s pred_end_s meas_start_s meas_end_s
 * (empty fields where a trace lacks the task). 0 or -EIO (e names path). */
int trace_write_joined(FILE *f, const char *path, const TraceTable *pred,
                       const TraceTable *meas, Err *e);

#endif
