/* fuzz_trace: the trace and dependency TSV readers (traces/trace.h: trace_read_tsv,
 * trace_read_deps), which read files users hand fuyou-trace, under libFuzzer.
 *
 * The input is the file, given to both readers (its header picks at most one). A read either
 * fails with one line naming what is wrong and leaves its table empty, or gives rows whose
 * times are finite and ordered and whose strings are there; the (iter, task_id) index finds
 * every row's task again, and a trace written back reads back with the same rows. Dependencies
 * read are checked (trace_deps_check) against a trace of every task they name, which passes,
 * and of all but the first row's dependency, which fails at the first row; the first row
 * reversed beside them closes a cycle, which a read refuses. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "trace.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static void check_failure(int rc, const Err *e)
{
    fuzz_check(rc == -EINVAL || rc == -ENOMEM);
    fuzz_check_message(e->msg);
}

static void check_trace(const char *path)
{
    TraceTable t;
    Err e = {""};
    int rc = trace_read_tsv(path, &t, &e);
    if (rc) {
        check_failure(rc, &e);
        fuzz_check(t.rows == NULL && t.n == 0 && t.strings == NULL);
        return;
    }
    int *idx = NULL;
    fuzz_check(t.n >= 0 && trace_sort_index(&t, &idx) == 0);
    for (int i = 0; i < t.n; i++) {
        const TraceRow *r = &t.rows[i];
        fuzz_check(r->task_id && r->resource && r->phase);
        fuzz_check(isfinite(r->start_s) && isfinite(r->end_s) && r->end_s >= r->start_s);
        fuzz_check(isfinite(r->bytes) && isfinite(r->flops));
        int k = trace_find(&t, idx, r->iter, r->task_id);
        fuzz_check(k >= 0 && k < t.n && t.rows[k].iter == r->iter &&
                   !strcmp(t.rows[k].task_id, r->task_id));
    }
    free(idx);
    /* written back and read again: the same tasks, in the same order */
    char back[512];
    fuzz_path(back, sizeof back, "back.tsv");
    TraceTable u;
    fuzz_check(trace_save(back, TRACE_TSV, t.rows, t.n, &e) == 0);
    fuzz_check(trace_read_tsv(back, &u, &e) == 0 && u.n == t.n);
    for (int i = 0; i < t.n; i++)
        fuzz_check(u.rows[i].iter == t.rows[i].iter && u.rows[i].layer == t.rows[i].layer &&
                   !strcmp(u.rows[i].task_id, t.rows[i].task_id) &&
                   !strcmp(u.rows[i].resource, t.rows[i].resource) &&
                   !strcmp(u.rows[i].phase, t.rows[i].phase));
    trace_table_free(&u);
    char chrome[512]; /* and as JSON for Perfetto: every string escaped as it comes */
    fuzz_path(chrome, sizeof chrome, "back.json");
    fuzz_check(trace_save(chrome, TRACE_CHROME, t.rows, t.n, &e) == 0);
    trace_table_free(&t);
    trace_table_free(&t); /* safe twice */
}

/* A trace of the tasks d names (all of them, or all but the first row's dependency) */
static void check_deps_against_trace(const char *path, const TraceDeps *d)
{
    TraceRow *rows = malloc(2 * (size_t)d->n * sizeof *rows);
    fuzz_check(rows != NULL);
    const TraceDep *first = &d->edges[0];
    for (int skip = 0; skip < 2; skip++) {
        int n = 0;
        for (int k = 0; k < d->n; k++) {
            const TraceDep *x = &d->edges[k];
            for (int side = 0; side < 2; side++) {
                int iter = side ? x->dep_iter : x->iter;
                const char *id = side ? x->dep_id : x->task_id;
                if (!skip || iter != first->dep_iter || strcmp(id, first->dep_id))
                    rows[n++] = (TraceRow){iter, id, "gpu", "forward", 0, 0, 0, 0, 0};
            }
        }
        TraceTable t = {.rows = rows, .n = n};
        Err e = {""};
        int rc = trace_deps_check(d, path, &t, "t.tsv", &e);
        if (!skip) {
            fuzz_check(rc == 0);
            continue;
        }
        char where[600];
        snprintf(where, sizeof where, "%s:%ld: ", path, first->line);
        fuzz_check(rc == -EINVAL && !strncmp(e.msg, where, strlen(where)));
        fuzz_check_message(e.msg);
    }
    free(rows);
}

/* d's rows and the first one reversed, in a file: a read refuses the cycle they make */
static void check_reversed_closes_cycle(const TraceDeps *d)
{
    const TraceDep *first = &d->edges[0];
    if (first->iter != first->dep_iter)
        return; /* reversed, its dependency would be in a later iteration */
    char path[512];
    FILE *f = fopen(fuzz_path(path, sizeof path, "cycle.tsv"), "w");
    if (!f)
        fuzz_die("fopen", path);
    fprintf(f, "%s\n", TRACE_DEPS_HEADER);
    for (int k = 0; k < d->n; k++)
        fprintf(f, "%d\t%s\t%d\t%s\n", d->edges[k].iter, d->edges[k].task_id,
                d->edges[k].dep_iter, d->edges[k].dep_id);
    fprintf(f, "%d\t%s\t%d\t%s\n", first->dep_iter, first->dep_id, first->iter, first->task_id);
    if (fclose(f))
        fuzz_die("fclose", path);
    TraceDeps c;
    Err e = {""};
    fuzz_check(trace_read_deps(path, &c, &e) == -EINVAL && strstr(e.msg, "closes a cycle"));
    fuzz_check(c.edges == NULL && c.n == 0);
}

static void check_deps(const char *path)
{
    TraceDeps d;
    Err e = {""};
    int rc = trace_read_deps(path, &d, &e);
    if (rc) {
        check_failure(rc, &e);
        fuzz_check(d.edges == NULL && d.n == 0 && d.strings == NULL);
        return;
    }
    fuzz_check(d.n >= 0);
    for (int i = 0; i < d.n; i++)
        fuzz_check(d.edges[i].task_id && d.edges[i].dep_id && d.edges[i].line > 1);
    if (d.n) {
        check_deps_against_trace(path, &d);
        check_reversed_closes_cycle(&d);
    }
    trace_deps_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_file(path, sizeof path, "in.tsv", data, size);
    check_trace(path);
    check_deps(path);
    return 0;
}
