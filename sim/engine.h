/* engine: the discrete-event simulator that runs a schedule.
 *
 * Each resource is a server: one task at a time, chosen among its ready tasks by (priority,
 * ready time, task index). Its speed is a rate that may depend on which other resources are busy
 * (PCIe directions, SSD reads and writes share bandwidth): tasks are fluid, so when a rate
 * changes the remaining work of the running task is re-timed. Events are ordered by (time,
 * priority, sequence number), so ties are deterministic and runs reproducible. A task may hold
 * its server for a lead time before its work starts (SimModel.lead). The engine knows
 * no hardware: work and rates come from a SimModel (costmodel/ provides the real one; tests
 * provide exact ones). It never includes CUDA or liburing headers. */
#ifndef FUYOU_ENGINE_H
#define FUYOU_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "fuyou_err.h"
#include "schedule.h"

typedef struct SimModel {
    void *ctx;
    /* Work of a task, in its resource's units. */
    double (*work)(void *ctx, const Task *t);
    /* Rate of every resource (work per second) given the task each runs (NULL: idle). */
    void (*rates)(void *ctx, const Task *const running[RES_COUNT], double rate[RES_COUNT]);
    /* Optional (NULL: none): seconds a task holds its server before its work starts (an
     * executor's dispatch), neither busy nor moving work; its start is after them. The server
     * counts as running the task for the rates meanwhile. */
    double (*lead)(void *ctx, const Task *t);
} SimModel;

/* A stretch of time during which no resource changed state (recorded on request, for tests and
 * utilisation plots). */
typedef struct RateSegment {
    double t0, t1;
    bool busy[RES_COUNT];
    double rate[RES_COUNT];
} RateSegment;

typedef struct SimResult {
    int n_tasks;
    double *start, *end;      /* per task, seconds */
    double makespan;
    double busy_s[RES_COUNT]; /* time each resource had a task running */
    int64_t events;           /* completion events processed */
    int64_t stale_events;     /* events superseded by a rate change */
    RateSegment *segments;    /* when asked for */
    int n_segments;
} SimResult;

/* Runs s under m. With record_segments, r->segments holds the rate history. The caller owns r
 * and frees it with sim_result_free (safe after a failure). Returns 0, -EDEADLK if some task can
 * never run (e names one and what it waits for), -ENOMEM. */
int sim_run(const Schedule *s, const SimModel *m, bool record_segments, SimResult *r, Err *e);
void sim_result_free(SimResult *r);

#endif
