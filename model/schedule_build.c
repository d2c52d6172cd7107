/* schedule_build: the builder's helpers that add tasks; see schedule_build.h. */
#include "schedule_build.h"

#include <stdarg.h>
#include <stdio.h>

/* Adds a task; returns its index, or -1 when out of memory (sticky: b->oom, checked at the end;
 * every helper ignores a -1 task). */
int sched_add_task(Builder *b, Resource res, TaskKind kind, Phase ph, int layer, int op,
                   int priority, const char *fmt, ...)
{
    Schedule *s = b->s;
    if (grow((void **)&s->tasks, &b->task_cap, s->n_tasks + 1, sizeof *s->tasks)) {
        b->oom = true;
        return -1;
    }
    Task *t = &s->tasks[s->n_tasks];
    *t = (Task){.res = res, .kind = kind, .phase = ph, .iter = b->iter, .layer = layer,
                .op = op, .priority = priority, .micro = b->micro, .group = -1,
                .slot = {-1, -1, -1, -1, -1, -1}};
    int n = snprintf(t->id, sizeof t->id, "%s", b->prefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->id + n, sizeof t->id - (size_t)n, fmt, ap);
    va_end(ap);
    return s->n_tasks++;
}

int sched_copy_task(Builder *b, Resource res, Phase ph, int layer, double bytes, int priority,
                    const char *fmt, ...)
{
    char id[SCHED_ID_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(id, sizeof id, fmt, ap);
    va_end(ap);
    int t = sched_add_task(b, res, TASK_COPY, ph, layer, -1, priority, "%s", id);
    if (t >= 0)
        b->s->tasks[t].bytes = bytes;
    return t;
}
