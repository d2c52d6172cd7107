/* schedule_info: what a built schedule says, read from it (see schedule.h): resource and
 * phase names, successor lists and lookups by id. It only reads what schedule.c builds. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

const char *resource_name(Resource r)
{
    static const char *names[] = {"gpu", "h2d", "d2h", "ssd_read", "ssd_write", "cpu_adam"};
    assert(r >= 0 && r < RES_COUNT);
    return names[r];
}

int resource_parse(const char *s, Resource *out)
{
    for (int r = 0; r < RES_COUNT; r++)
        if (!strcmp(s, resource_name(r)))
            return *out = r, 0;
    return -EINVAL;
}

const char *phase_name(Phase p)
{
    static const char *names[] = {"forward", "backward", "optimizer"};
    return names[p];
}

int phase_parse(const char *s, Phase *out)
{
    for (int p = 0; p <= PHASE_OPTIMIZER; p++)
        if (!strcmp(s, phase_name(p)))
            return *out = p, 0;
    return -EINVAL;
}

int sched_successors(const Schedule *s, int **first_out, int **succ_out)
{
    int n = s->n_tasks;
    int *first = calloc((size_t)n + 1, sizeof(int)), *fill = calloc((size_t)n + 1, sizeof(int));
    int *succ = malloc(((size_t)s->n_deps + 1) * sizeof(int));
    *first_out = first;
    *succ_out = succ;
    if (!first || !fill || !succ) {
        free(fill);
        return -ENOMEM;
    }
    for (int t = 0; t < n; t++) {
        const int *d = sched_deps(s, t);
        for (int i = 0; i < s->tasks[t].n_deps; i++)
            first[d[i] + 1]++;
    }
    for (int t = 0; t < n; t++)
        first[t + 1] += first[t];
    for (int t = 0; t < n; t++) {
        const int *d = sched_deps(s, t);
        for (int i = 0; i < s->tasks[t].n_deps; i++)
            succ[first[d[i]] + fill[d[i]]++] = t;
    }
    free(fill);
    return 0;
}

int sched_find(const Schedule *s, int iter, const char *id)
{
    for (int i = 0; i < s->n_tasks; i++)
        if (s->tasks[i].iter == iter && !strcmp(s->tasks[i].id, id))
            return i;
    return -1;
}
