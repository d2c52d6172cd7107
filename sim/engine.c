/* engine: a binary-heap discrete-event simulation of a task DAG on rate-coupled servers; see
 * engine.h. */
#include "engine.h"

#include "heap.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the simulation ---------------------------------------------------------------------- */

typedef struct Server {
    int running;      /* task index, or -1 */
    double remaining; /* work left of the running task */
    double rate;
    double last;      /* time remaining was last brought up to date */
    double work_from; /* when the running task's work starts (after its lead) */
    int version;      /* bumps whenever the pending completion event is superseded */
    Heap ready;
} Server;

typedef struct Sim {
    const Schedule *s;
    const SimModel *m;
    SimResult *r;
    Server srv[RES_COUNT];
    Heap events;
    int64_t seq;
    int *indeg, *succ_first, *succ;
    double now;
    bool record;
    int seg_cap;
    double seg_t0;
    bool seg_busy[RES_COUNT];
    double seg_rate[RES_COUNT];
} Sim;

static int build_successors(Sim *sim)
{
    const Schedule *s = sim->s;
    sim->indeg = calloc((size_t)s->n_tasks + 1, sizeof(int));
    if (!sim->indeg)
        return -ENOMEM;
    for (int t = 0; t < s->n_tasks; t++)
        sim->indeg[t] = s->tasks[t].n_deps;
    return sched_successors(s, &sim->succ_first, &sim->succ);
}

static int make_ready(Sim *sim, int t)
{
    const Task *task = &sim->s->tasks[t];
    return heap_push(&sim->srv[task->res].ready, heap_ready_item(task, t, sim->now));
}

/* Brings every running task's remaining work up to now. */
static void advance(Sim *sim)
{
    for (int r = 0; r < RES_COUNT; r++) {
        Server *v = &sim->srv[r];
        if (v->running >= 0 && sim->now > v->work_from) {
            double from = v->last > v->work_from ? v->last : v->work_from;
            v->remaining -= v->rate * (sim->now - from);
            if (v->remaining < 0)
                v->remaining = 0;
        }
        v->last = sim->now;
    }
}

static int record_segment(Sim *sim)
{
    if (sim->now > sim->seg_t0) {
        SimResult *r = sim->r;
        if (r->n_segments == sim->seg_cap) {
            int cap = sim->seg_cap ? 2 * sim->seg_cap : 256;
            RateSegment *p = realloc(r->segments, (size_t)cap * sizeof *p);
            if (!p)
                return -ENOMEM;
            r->segments = p;
            sim->seg_cap = cap;
        }
        RateSegment *seg = &r->segments[r->n_segments++];
        seg->t0 = sim->seg_t0;
        seg->t1 = sim->now;
        memcpy(seg->busy, sim->seg_busy, sizeof seg->busy);
        memcpy(seg->rate, sim->seg_rate, sizeof seg->rate);
    }
    sim->seg_t0 = sim->now;
    return 0;
}

/* Starts a ready task on every idle server, then re-rates every server and re-times the
 * completions whose rate changed (or that just started). */
static int dispatch(Sim *sim)
{
    bool started[RES_COUNT] = {false}, busy[RES_COUNT];
    const Task *running[RES_COUNT];
    for (int r = 0; r < RES_COUNT; r++) {
        Server *v = &sim->srv[r];
        if (v->running < 0 && v->ready.n > 0) {
            int t = heap_pop(&v->ready).a;
            v->running = t;
            v->remaining = sim->m->work(sim->m->ctx, &sim->s->tasks[t]);
            v->last = sim->now;
            v->work_from = sim->now + (sim->m->lead ? sim->m->lead(sim->m->ctx,
                                                                   &sim->s->tasks[t]) : 0);
            sim->r->start[t] = v->work_from;
            started[r] = true;
        }
        busy[r] = v->running >= 0;
        running[r] = busy[r] ? &sim->s->tasks[v->running] : NULL;
    }
    double rate[RES_COUNT];
    sim->m->rates(sim->m->ctx, running, rate);
    if (sim->record && (memcmp(busy, sim->seg_busy, sizeof busy) ||
                        memcmp(rate, sim->seg_rate, sizeof rate))) {
        if (record_segment(sim))
            return -ENOMEM;
        memcpy(sim->seg_busy, busy, sizeof busy);
        memcpy(sim->seg_rate, rate, sizeof rate);
    }
    for (int r = 0; r < RES_COUNT; r++) {
        Server *v = &sim->srv[r];
        if (v->running < 0 || (!started[r] && rate[r] == v->rate))
            continue;
        assert(rate[r] > 0);
        v->rate = rate[r];
        v->version++;
        double end = (v->work_from > sim->now ? v->work_from : sim->now) + v->remaining / v->rate;
        if (heap_push(&sim->events, (HeapItem){.k1 = end, .k2 = 0, .k3 = sim->seq++, .a = r,
                                               .b = v->version}))
            return -ENOMEM;
    }
    return 0;
}

static int finish_task(Sim *sim, int r)
{
    Server *v = &sim->srv[r];
    int t = v->running;
    v->running = -1;
    sim->r->end[t] = sim->now;
    sim->r->busy_s[r] += sim->now - sim->r->start[t];
    for (int i = sim->succ_first[t]; i < sim->succ_first[t + 1]; i++)
        if (--sim->indeg[sim->succ[i]] == 0 && make_ready(sim, sim->succ[i]))
            return -ENOMEM;
    return 0;
}

/* Names a task that never ran and one of its unfinished dependencies. */
static int report_deadlock(const Sim *sim, Err *e)
{
    const Schedule *s = sim->s;
    int stuck = 0, first = -1;
    for (int t = 0; t < s->n_tasks; t++)
        if (isnan(sim->r->end[t])) {
            stuck++;
            if (first < 0)
                first = t;
        }
    const int *d = sched_deps(s, first);
    int wait = -1;
    for (int i = 0; i < s->tasks[first].n_deps && wait < 0; i++)
        if (isnan(sim->r->end[d[i]]))
            wait = d[i];
    return err_set(e, -EDEADLK, "schedule deadlocked: %d tasks never ran, e.g. %s (iteration %d) "
                   "waiting for %s", stuck, s->tasks[first].id, s->tasks[first].iter,
                   wait >= 0 ? s->tasks[wait].id : "nothing (a resource never freed)");
}

static void sim_free(Sim *sim)
{
    free(sim->indeg);
    free(sim->succ_first);
    free(sim->succ);
    free(sim->events.items);
    for (int r = 0; r < RES_COUNT; r++)
        free(sim->srv[r].ready.items);
}

int sim_run(const Schedule *s, const SimModel *m, bool record_segments, SimResult *r, Err *e)
{
    memset(r, 0, sizeof *r);
    Sim sim = {.s = s, .m = m, .r = r, .record = record_segments};
    for (int k = 0; k < RES_COUNT; k++)
        sim.srv[k].running = -1;
    r->n_tasks = s->n_tasks;
    r->start = malloc(((size_t)s->n_tasks + 1) * sizeof *r->start);
    r->end = malloc(((size_t)s->n_tasks + 1) * sizeof *r->end);
    int rc = !r->start || !r->end ? -ENOMEM : build_successors(&sim);
    for (int t = 0; !rc && t < s->n_tasks; t++) {
        r->start[t] = r->end[t] = NAN;
        if (sim.indeg[t] == 0)
            rc = make_ready(&sim, t);
    }
    if (!rc)
        rc = dispatch(&sim);
    while (!rc && sim.events.n > 0) {
        HeapItem ev = heap_pop(&sim.events);
        if (ev.b != sim.srv[ev.a].version) {
            r->stale_events++;
            continue;
        }
        assert(ev.k1 >= sim.now);
        sim.now = ev.k1;
        advance(&sim);
        r->events++;
        rc = finish_task(&sim, ev.a);
        if (!rc)
            rc = dispatch(&sim);
    }
    if (!rc && sim.record)
        rc = record_segment(&sim);
    r->makespan = sim.now;
    if (!rc) {
        for (int t = 0; t < s->n_tasks; t++)
            if (isnan(r->end[t])) {
                rc = report_deadlock(&sim, e);
                break;
            }
    } else {
        err_set(e, rc, "out of memory simulating %d tasks", s->n_tasks);
    }
    sim_free(&sim);
    if (rc)
        sim_result_free(r);
    return rc;
}

void sim_result_free(SimResult *r)
{
    free(r->start);
    free(r->end);
    free(r->segments);
    r->start = r->end = NULL;
    r->segments = NULL;
}
