/* critpath: a trace's critical path through its schedule's dependencies; see critpath.h. */
#include "critpath.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What binds each row: its dependencies' rows (pred[first[r] .. first[r + 1])) and the row that
 * ran before it on its resource (lane[r], -1 for none). */
typedef struct Binders {
    int *first, *pred, *lane;
    int *res; /* Resource of each row, -1 for a name outside the known ones */
} Binders;

static void binders_free(Binders *b)
{
    free(b->first), free(b->pred), free(b->lane), free(b->res);
}

static int cmp_lane(const void *a, const void *b, void *table)
{
    const TraceTable *t = table;
    const TraceRow *x = &t->rows[*(const int *)a], *y = &t->rows[*(const int *)b];
    int c = strcmp(x->resource, y->resource);
    if (c)
        return c;
    if (x->start_s != y->start_s)
        return (x->start_s > y->start_s) - (x->start_s < y->start_s);
    return (x->end_s > y->end_s) - (x->end_s < y->end_s);
}

static int binders_build(const TraceTable *t, const TraceDeps *d, Binders *b, int *unresolved)
{
    int n = t->n, *idx = NULL, *at = NULL;
    *b = (Binders){0};
    b->first = calloc((size_t)n + 1, sizeof *b->first);
    b->lane = malloc(((size_t)n + 1) * sizeof *b->lane);
    b->res = malloc(((size_t)n + 1) * sizeof *b->res);
    int *edge_row = malloc(2 * ((size_t)d->n + 1) * sizeof *edge_row);
    if (!b->first || !b->lane || !b->res || !edge_row || trace_sort_index(t, &idx))
        goto nomem;
    *unresolved = 0;
    for (int k = 0; k < d->n; k++) {
        const TraceDep *dep = &d->edges[k];
        int r = trace_find(t, idx, dep->iter, dep->task_id);
        int p = trace_find(t, idx, dep->dep_iter, dep->dep_id);
        edge_row[2 * k] = r, edge_row[2 * k + 1] = p;
        if (r < 0 || p < 0)
            ++*unresolved;
        else
            b->first[r + 1]++;
    }
    for (int r = 0; r < n; r++)
        b->first[r + 1] += b->first[r];
    b->pred = malloc(((size_t)b->first[n] + 1) * sizeof *b->pred);
    at = malloc(((size_t)n + 1) * sizeof *at);
    if (!b->pred || !at)
        goto nomem;
    memcpy(at, b->first, (size_t)n * sizeof *at);
    for (int k = 0; k < d->n; k++)
        if (edge_row[2 * k] >= 0 && edge_row[2 * k + 1] >= 0)
            b->pred[at[edge_row[2 * k]]++] = edge_row[2 * k + 1];
    /* lanes: each resource's rows by start; a row's lane binder is the earlier row that ended
     * last */
    for (int r = 0; r < n; r++) {
        Resource res;
        b->res[r] = resource_parse(t->rows[r].resource, &res) ? -1 : (int)res;
        idx[r] = r;
    }
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_lane, (void *)t);
    for (int k = 0, latest = -1; k < n; k++) {
        int r = idx[k];
        if (k > 0 && strcmp(t->rows[idx[k - 1]].resource, t->rows[r].resource))
            latest = -1;
        b->lane[r] = latest;
        if (latest < 0 || t->rows[r].end_s > t->rows[latest].end_s)
            latest = r;
    }
    free(idx), free(at), free(edge_row);
    return 0;
nomem:
    free(idx), free(at), free(edge_row);
    binders_free(b);
    return -ENOMEM;
}

/* The binder of row r: the latest-ending of its dependencies and lane binder that ended before
 * r did (so the walk always goes back in time, whatever a measured trace's clocks say), or -1. */
static int binder(const TraceTable *t, const Binders *b, int r)
{
    int best = -1;
    double end = t->rows[r].end_s;
    for (int k = b->first[r]; k <= b->first[r + 1]; k++) {
        int p = k < b->first[r + 1] ? b->pred[k] : b->lane[r];
        if (p >= 0 && t->rows[p].end_s < end &&
            (best < 0 || t->rows[p].end_s > t->rows[best].end_s))
            best = p;
    }
    return best;
}

/* One step of the shown iteration's path (collected backwards). */
typedef struct Step {
    int row;
    double busy_s, wait_s;
} Step;

/* Merges the steps (backwards) into runs per resource, in path order, and keeps the
 * CRIT_RUNS longest. */
static int keep_runs(const TraceTable *t, const Binders *b, const Step *steps, int n_steps,
                     CritPath *cp)
{
    CritRun *all = malloc(((size_t)n_steps + 1) * sizeof *all);
    if (!all)
        return -ENOMEM;
    int n = 0;
    for (int k = n_steps - 1; k >= 0; k--) {
        const Step *s = &steps[k];
        const TraceRow *row = &t->rows[s->row];
        int res = b->res[s->row];
        if (!n || (int)all[n - 1].res != res) {
            all[n] = (CritRun){.res = (Resource)(res < 0 ? RES_COUNT : res)};
            snprintf(all[n].first, sizeof all[n].first, "%s", row->task_id);
            n++;
        }
        CritRun *run = &all[n - 1];
        run->tasks++;
        run->busy_s += s->busy_s;
        run->wait_s += s->wait_s;
        snprintf(run->last, sizeof run->last, "%s", row->task_id);
    }
    cp->n_runs_total = n;
    /* the CRIT_RUNS longest, in path order: drop the shortest until they fit */
    while (n > CRIT_RUNS) {
        int shortest = 0;
        for (int k = 1; k < n; k++)
            if (all[k].busy_s + all[k].wait_s < all[shortest].busy_s + all[shortest].wait_s)
                shortest = k;
        memmove(&all[shortest], &all[shortest + 1], (size_t)(n - shortest - 1) * sizeof *all);
        n--;
    }
    memcpy(cp->runs, all, (size_t)n * sizeof *all);
    cp->n_runs = n;
    free(all);
    return 0;
}

int trace_critical_path(const TraceTable *t, const TraceDeps *d, int from, int n, CritPath *cp,
                        Err *e)
{
    memset(cp, 0, sizeof *cp);
    if (from < 0 || from >= n)
        return err_set(e, -EINVAL, "no iteration to follow (iterations %d to %d)", from, n - 1);
    double *ends = malloc((size_t)n * sizeof *ends), start0 = INFINITY;
    int *last = malloc((size_t)n * sizeof *last);
    Step *steps = malloc(((size_t)t->n + 1) * sizeof *steps);
    Binders b = {0};
    int rc = !ends || !last || !steps ? -ENOMEM : binders_build(t, d, &b, &cp->unresolved);
    if (rc) {
        free(ends), free(last), free(steps);
        return err_set(e, rc, "out of memory following the critical path");
    }
    for (int i = 0; i < n; i++)
        ends[i] = -INFINITY, last[i] = -1;
    for (int r = 0; r < t->n; r++) {
        const TraceRow *row = &t->rows[r];
        if (row->iter < 0 || row->iter >= n)
            continue;
        if (row->end_s > ends[row->iter])
            ends[row->iter] = row->end_s, last[row->iter] = r;
        if (row->iter == 0 && row->start_s < start0)
            start0 = row->start_s;
    }
    for (int i = from ? from - 1 : 0; i < n && !rc; i++)
        if (last[i] < 0)
            rc = err_set(e, -EINVAL, "iteration %d has no task in the trace", i);
    for (int i = from; i < n && !rc; i++) {
        double lo = i ? ends[i - 1] : start0;
        int n_steps = 0;
        for (int cur = last[i]; cur >= 0;) {
            const TraceRow *row = &t->rows[cur];
            int p = binder(t, &b, cur);
            double from_s = p >= 0 && t->rows[p].end_s > lo ? t->rows[p].end_s : lo;
            double start = row->start_s > from_s ? row->start_s : from_s;
            Step s = {cur, row->end_s - start, start - from_s};
            if (b.res[cur] >= 0)
                cp->res_s[b.res[cur]] += s.busy_s;
            cp->wait_s += s.wait_s;
            steps[n_steps++] = s;
            cur = p >= 0 && t->rows[p].end_s > lo ? p : -1;
        }
        cp->iters++;
        if (i == n - 1) {
            cp->iter_shown = i;
            rc = keep_runs(t, &b, steps, n_steps, cp) ? err_set(e, -ENOMEM, "out of memory")
                                                      : 0;
        }
    }
    for (int r = 0; r < RES_COUNT && cp->iters; r++)
        cp->res_s[r] /= cp->iters;
    if (cp->iters)
        cp->wait_s /= cp->iters;
    free(ends), free(last), free(steps);
    binders_free(&b);
    return rc;
}
