/* trace: the task -> row mapping, TSV and Chrome/Perfetto JSON writers, and the TSV reader; see
 * trace.h. */
#include "trace.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "tsv.h"

void trace_row_from_task(TraceRow *row, const Task *t, int iter, double start_s, double end_s)
{
    *row = (TraceRow){.iter = iter, .task_id = t->id, .resource = resource_name(t->res),
                      .phase = phase_name(t->phase), .layer = t->layer, .start_s = start_s,
                      .end_s = end_s, .bytes = t->bytes, .flops = t->flops};
}

static int finish(FILE *f, const char *path, Err *e)
{
    if (ferror(f) || fflush(f))
        return err_set(e, -EIO, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

int trace_write_tsv(FILE *f, const char *path, const TraceRow *rows, int n, Err *e)
{
    fprintf(f, "%s\n", TRACE_TSV_HEADER);
    for (int i = 0; i < n; i++) {
        const TraceRow *r = &rows[i];
        fprintf(f, "%d\t%s\t%s\t%s\t%d\t%.9f\t%.9f\t%.0f\t%.0f\n", r->iter, r->task_id,
                r->resource, r->phase, r->layer, r->start_s, r->end_s, r->bytes, r->flops);
    }
    return finish(f, path, e);
}

/* Lanes in the schedule's resource order; other resource names get lanes after them. */
enum { MAX_LANES = 32 };

static int lane_of(const char *res, const char *lanes[], int *n)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(lanes[i], res))
            return i;
    if (*n == MAX_LANES)
        return MAX_LANES - 1;
    lanes[*n] = res;
    return (*n)++;
}

/* Task ids and resource names are plain ASCII without quotes; escape defensively anyway. */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

int trace_write_chrome(FILE *f, const char *path, const TraceRow *rows, int n, Err *e)
{
    const char *lanes[MAX_LANES];
    int n_lanes = RES_COUNT;
    for (int r = 0; r < RES_COUNT; r++)
        lanes[r] = resource_name(r);
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (int i = 0; i < n; i++) {
        const TraceRow *r = &rows[i];
        fprintf(f, "{\"name\": ");
        json_string(f, r->task_id);
        fprintf(f, ", \"cat\": ");
        json_string(f, r->phase);
        fprintf(f, ", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                "\"args\": {\"iter\": %d, \"layer\": %d, \"bytes\": %.0f, \"flops\": %.0f}},\n",
                lane_of(r->resource, lanes, &n_lanes), r->start_s * 1e6,
                (r->end_s - r->start_s) * 1e6, r->iter, r->layer, r->bytes, r->flops);
    }
    for (int i = 0; i < n_lanes; i++) {
        fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                "\"args\": {\"name\": ", i);
        json_string(f, lanes[i]);
        fprintf(f, "}},\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, "
                "\"tid\": %d, \"args\": {\"sort_index\": %d}}%s\n", i, i,
                i + 1 < n_lanes ? "," : "");
    }
    fprintf(f, "]}\n");
    return finish(f, path, e);
}

int trace_write_deps(FILE *f, const char *path, const Schedule *s, Err *e)
{
    fprintf(f, "%s\n", TRACE_DEPS_HEADER);
    for (int t = 0; t < s->n_tasks; t++) {
        const Task *task = &s->tasks[t];
        const int *deps = sched_deps(s, t);
        for (int k = 0; k < task->n_deps; k++)
            fprintf(f, "%d\t%s\t%d\t%s\n", task->iter, task->id, s->tasks[deps[k]].iter,
                    s->tasks[deps[k]].id);
    }
    return finish(f, path, e);
}

/* One file written by one of the writers above: rows as TSV or Chrome JSON, or s's
 * dependencies. */
static int save(const char *path, TraceFormat fmt, const TraceRow *rows, int n,
                const Schedule *s, Err *e)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return err_set(e, -errno, "%s: cannot write: %s", path, strerror(errno));
    int rc = s ? trace_write_deps(f, path, s, e)
           : fmt == TRACE_CHROME ? trace_write_chrome(f, path, rows, n, e)
                                 : trace_write_tsv(f, path, rows, n, e);
    if (fclose(f) && !rc)
        rc = err_set(e, -EIO, "%s: write failed: %s", path, strerror(errno));
    return rc;
}

int trace_save(const char *path, TraceFormat fmt, const TraceRow *rows, int n, Err *e)
{
    return save(path, fmt, rows, n, NULL, e);
}

int trace_save_deps(const char *path, const Schedule *s, Err *e)
{
    return save(path, TRACE_TSV, NULL, 0, s, e);
}

/* ---- reading TSV ---------------------------------------------------------------------------- */

/* What a read collects (its TsvReader's ctx): rows of row_size bytes and their strings, which
 * the caller moves into its table. */
typedef struct Rows {
    void *rows;
    int n;
    size_t row_size, rows_cap;
    char *strings;
    size_t strings_len, strings_cap;
} Rows;

/* Strings go to the end of the table's storage in the order a row names them; the pointers are
 * set once all lines are read, because the storage moves as it grows. */
static int append_string(TsvReader *r, const char *s)
{
    Rows *b = r->ctx;
    size_t len = strlen(s) + 1;
    if (len > b->strings_cap - b->strings_len) {
        size_t cap = b->strings_cap ? b->strings_cap : 4096;
        while (cap - b->strings_len < len)
            cap *= 2;
        char *p = realloc(b->strings, cap);
        if (!p)
            return err_set(r->e, -ENOMEM, "%s:%ld: out of memory", r->path, r->line);
        b->strings = p;
        b->strings_cap = cap;
    }
    memcpy(b->strings + b->strings_len, s, len);
    b->strings_len += len;
    return 0;
}

static int append_row(TsvReader *r, const void *row)
{
    Rows *b = r->ctx;
    if (b->n == INT_MAX)
        return err_set(r->e, -EFBIG, "%s:%ld: more than %d rows", r->path, r->line, INT_MAX);
    if ((size_t)b->n == b->rows_cap) {
        size_t cap = b->rows_cap ? 2 * b->rows_cap : 256;
        void *p = realloc(b->rows, cap * b->row_size);
        if (!p)
            return err_set(r->e, -ENOMEM, "%s:%ld: out of memory", r->path, r->line);
        b->rows = p;
        b->rows_cap = cap;
    }
    memcpy((char *)b->rows + (size_t)b->n * b->row_size, row, b->row_size);
    b->n++;
    return 0;
}

/* The strings of a row in order (task_id, resource, phase, or task_id, dep_id). */
static int append_strings(TsvReader *r, char **f, const int *which, int n)
{
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = append_string(r, f[which[i]]);
    return rc;
}

static int take_trace_row(TsvReader *r, char **f)
{
    TraceRow row = {0};
    if (tsv_parse_int(f[0], &row.iter))
        return tsv_bad_line(r, "iter is not an integer: \"%.40s\"", f[0]);
    if (tsv_parse_int(f[4], &row.layer))
        return tsv_bad_line(r, "layer is not an integer: \"%.40s\"", f[4]);
    static const char *const num_names[] = {"start_s", "end_s", "bytes", "flops"};
    double *num[] = {&row.start_s, &row.end_s, &row.bytes, &row.flops};
    for (int i = 0; i < 4; i++)
        if (tsv_parse_number(f[5 + i], num[i]))
            return tsv_bad_line(r, "%s is not a finite number: \"%.40s\"", num_names[i],
                                f[5 + i]);
    if (row.end_s < row.start_s)
        return tsv_bad_line(r, "end_s %.9f is before start_s %.9f", row.end_s, row.start_s);
    if (row.iter < 0)
        return tsv_bad_line(r, "iter is %d; iterations count from 0", row.iter);
    if (row.start_s < 0 || row.end_s > TRACE_MAX_S)
        return tsv_bad_line(r, "times %g to %g s: a trace's are 0 to %g s", row.start_s,
                            row.end_s, TRACE_MAX_S);
    if (row.bytes < 0 || row.flops < 0)
        return tsv_bad_line(r, "bytes %g, flops %g: neither may be negative", row.bytes,
                            row.flops);
    if (!*f[1])
        return tsv_bad_line(r, "the task id is empty");
    Resource res;
    if (resource_parse(f[2], &res))
        return tsv_bad_line(r, "resource \"%.40s\" is none of the schedule's (gpu, h2d, d2h, "
                            "ssd_read, ssd_write, cpu_adam)", f[2]);
    static const int strings[] = {1, 2, 3};
    int rc = append_strings(r, f, strings, 3);
    return rc ? rc : append_row(r, &row);
}

static int take_dep(TsvReader *r, char **f)
{
    TraceDep dep = {.line = r->line};
    if (tsv_parse_int(f[0], &dep.iter))
        return tsv_bad_line(r, "iter is not an integer: \"%.40s\"", f[0]);
    if (tsv_parse_int(f[2], &dep.dep_iter))
        return tsv_bad_line(r, "dep_iter is not an integer: \"%.40s\"", f[2]);
    if (!*f[1] || !*f[3])
        return tsv_bad_line(r, "a task id is empty");
    if (dep.dep_iter < 0 || dep.dep_iter > dep.iter)
        return tsv_bad_line(r, "dep_iter %d: a task depends on its own iteration (%d) or an "
                            "earlier one", dep.dep_iter, dep.iter);
    if (dep.dep_iter == dep.iter && !strcmp(f[1], f[3]))
        return tsv_bad_line(r, "%.60s depends on itself", f[1]);
    static const int strings[] = {1, 3};
    int rc = append_strings(r, f, strings, 2);
    return rc ? rc : append_row(r, &dep);
}

/* The string at *s, and *s moved past it (the strings of a table's storage, in order). */
static const char *next_string(const char **s)
{
    const char *x = *s;
    *s += strlen(x) + 1;
    return x;
}

static int check_unique(const char *path, const TraceTable *t, Err *e);
static int check_acyclic(const char *path, const TraceDeps *d, Err *e);

int trace_read_tsv(const char *path, TraceTable *t, Err *e)
{
    Rows b = {.row_size = sizeof *t->rows};
    TsvReader r = {.path = path, .e = e, .n_fields = 9, .take = take_trace_row, .ctx = &b};
    int rc = tsv_read(&r, TRACE_TSV_HEADER,
                      "trace TSV: the header must be iter, task_id, resource, phase, layer, "
                      "start_s, end_s, bytes, flops, separated by tabs");
    *t = (TraceTable){.rows = b.rows, .n = b.n, .strings = b.strings};
    if (rc) {
        trace_table_free(t);
        return rc;
    }
    const char *s = t->strings;
    for (int i = 0; i < t->n; i++) {
        t->rows[i].task_id = next_string(&s);
        t->rows[i].resource = next_string(&s);
        t->rows[i].phase = next_string(&s);
    }
    rc = check_unique(path, t, e);
    if (rc)
        trace_table_free(t);
    return rc;
}

void trace_table_free(TraceTable *t)
{
    free(t->rows);
    free(t->strings);
    memset(t, 0, sizeof *t);
}

int trace_read_deps(const char *path, TraceDeps *d, Err *e)
{
    Rows b = {.row_size = sizeof *d->edges};
    TsvReader r = {.path = path, .e = e, .n_fields = 4, .take = take_dep, .ctx = &b};
    int rc = tsv_read(&r, TRACE_DEPS_HEADER,
                      "dependencies TSV (fuyou-sim --deps): the header must be iter, task_id, "
                      "dep_iter, dep_task_id, separated by tabs");
    *d = (TraceDeps){.edges = b.rows, .n = b.n, .strings = b.strings};
    if (rc) {
        trace_deps_free(d);
        return rc;
    }
    const char *s = d->strings;
    for (int i = 0; i < d->n; i++) {
        d->edges[i].task_id = next_string(&s);
        d->edges[i].dep_id = next_string(&s);
    }
    rc = check_acyclic(path, d, e);
    if (rc)
        trace_deps_free(d);
    return rc;
}

void trace_deps_free(TraceDeps *d)
{
    free(d->edges);
    free(d->strings);
    memset(d, 0, sizeof *d);
}

/* ---- the dependencies' graph ---------------------------------------------------------------- */

/* The tasks a dependencies file names: end 2k is edge k's task, end 2k + 1 its dependency. */
static int end_iter(const TraceDeps *d, int end)
{
    const TraceDep *x = &d->edges[end / 2];
    return end % 2 ? x->dep_iter : x->iter;
}

static const char *end_id(const TraceDeps *d, int end)
{
    const TraceDep *x = &d->edges[end / 2];
    return end % 2 ? x->dep_id : x->task_id;
}

static int cmp_end(const void *a, const void *b, void *deps)
{
    const TraceDeps *d = deps;
    int x = *(const int *)a, y = *(const int *)b;
    int xi = end_iter(d, x), yi = end_iter(d, y);
    if (xi != yi)
        return (xi > yi) - (xi < yi);
    return strcmp(end_id(d, x), end_id(d, y));
}

/* The tasks as nodes 0 .. n_nodes - 1, each distinct (iter, task_id) once, and the edges by
 * node both ways (in_first[v] .. in_first[v + 1] index in[] with v's dependencies' edges,
 * out_first / out[] with its dependents'). */
typedef struct DepGraph {
    int n_nodes;
    int *node; /* of each end */
    int *in_first, *in, *out_first, *out;
} DepGraph;

static void deps_graph_free(DepGraph *g)
{
    free(g->node), free(g->in_first), free(g->in), free(g->out_first), free(g->out);
}

/* The edges grouped by the node of their end on side (0: the task, 1: its dependency). */
static int group_edges(const TraceDeps *d, DepGraph *g, int side, int **first, int **list)
{
    *first = calloc((size_t)g->n_nodes + 2, sizeof **first);
    *list = malloc(((size_t)d->n + 1) * sizeof **list);
    if (!*first || !*list)
        return -ENOMEM;
    for (int k = 0; k < d->n; k++)
        (*first)[g->node[2 * k + side] + 2]++;
    for (int v = 0; v < g->n_nodes; v++)
        (*first)[v + 2] += (*first)[v + 1];
    /* (*first)[v + 1] is where node v's edges go; counting them in leaves it at v + 1's start */
    for (int k = 0; k < d->n; k++)
        (*list)[(*first)[g->node[2 * k + side] + 1]++] = k;
    return 0;
}

static int deps_graph_build(const TraceDeps *d, DepGraph *g)
{
    *g = (DepGraph){0};
    size_t n_ends = 2 * (size_t)d->n;
    int *order = malloc((n_ends + 1) * sizeof *order);
    g->node = malloc((n_ends + 1) * sizeof *g->node);
    if (!order || !g->node) {
        free(order);
        return -ENOMEM;
    }
    for (size_t k = 0; k < n_ends; k++)
        order[k] = (int)k;
    qsort_r(order, n_ends, sizeof *order, cmp_end, (void *)d);
    for (size_t k = 0; k < n_ends; k++) {
        if (!k || cmp_end(&order[k - 1], &order[k], (void *)d))
            g->n_nodes++;
        g->node[order[k]] = g->n_nodes - 1;
    }
    free(order);
    int rc = group_edges(d, g, 0, &g->in_first, &g->in);
    return rc ? rc : group_edges(d, g, 1, &g->out_first, &g->out);
}

/* Kahn's algorithm: takes every task whose dependencies are all taken, in waves, without
 * recursion. wait[v] ends as the number of v's dependencies not taken: 0 for a task taken,
 * above 0 for one that waits, through a cycle, on itself or on a task that does. Returns how
 * many were not taken. */
static int kahn(const DepGraph *g, int *wait, int *queue)
{
    int tail = 0;
    for (int v = 0; v < g->n_nodes; v++)
        if (!(wait[v] = g->in_first[v + 1] - g->in_first[v]))
            queue[tail++] = v;
    for (int head = 0; head < tail; head++) {
        int u = queue[head];
        for (int i = g->out_first[u]; i < g->out_first[u + 1]; i++) {
            int v = g->node[2 * g->out[i]];
            if (!--wait[v])
                queue[tail++] = v;
        }
    }
    return g->n_nodes - tail;
}

/* A cycle among the tasks not taken: each waits for one not taken, so walking back from one
 * along such dependencies meets a task twice, which closes a cycle. Returns the edge of the
 * cycle that comes last in the file, the cycle's length in *len and another of its edges in
 * *other. step and via hold n_nodes ints. */
static int find_cycle(const DepGraph *g, const int *wait, int *step, int *via, int *len,
                      int *other)
{
    int v = 0, s = 0;
    while (!wait[v])
        v++;
    for (int u = 0; u < g->n_nodes; u++)
        step[u] = -1;
    while (step[v] < 0) {
        step[v] = s;
        int i = g->in_first[v];
        while (!wait[g->node[2 * g->in[i] + 1]])
            i++;
        via[s++] = g->in[i];
        v = g->node[2 * g->in[i] + 1];
    }
    int last = step[v];
    for (int k = step[v]; k < s; k++)
        last = via[k] > via[last] ? k : last;
    *len = s - step[v];
    *other = via[last > step[v] ? last - 1 : s - 1];
    return via[last];
}

/* A schedule's tasks wait only for tasks before them: the file's dependencies form no cycle. */
static int check_acyclic(const char *path, const TraceDeps *d, Err *e)
{
    if (d->n > INT_MAX / 2)
        return err_set(e, -EFBIG, "%s: more than %d dependencies", path, INT_MAX / 2);
    DepGraph g;
    int rc = deps_graph_build(d, &g);
    int *scratch = rc ? NULL : malloc(4 * ((size_t)g.n_nodes + 1) * sizeof *scratch);
    if (rc || !scratch) {
        deps_graph_free(&g);
        return err_set(e, -ENOMEM, "%s: out of memory checking the dependencies", path);
    }
    int *wait = scratch, *queue = wait + g.n_nodes + 1, *step = queue + g.n_nodes + 1;
    int *via = step + g.n_nodes + 1;
    if (kahn(&g, wait, queue)) {
        int len, other, k = find_cycle(&g, wait, step, via, &len, &other);
        const TraceDep *x = &d->edges[k];
        rc = err_set(e, -EINVAL, "%s:%ld: %.60s (iteration %d) waiting for %.60s closes a cycle "
                     "of %d dependencies (another is line %ld): a task waits only for tasks "
                     "before it", path, x->line, x->task_id, x->iter, x->dep_id, len,
                     d->edges[other].line);
    }
    free(scratch);
    deps_graph_free(&g);
    return rc;
}

int trace_deps_check(const TraceDeps *d, const char *deps_path, const TraceTable *t,
                     const char *trace_path, Err *e)
{
    int last = -1, *idx;
    for (int i = 0; i < t->n; i++)
        last = t->rows[i].iter > last ? t->rows[i].iter : last;
    if (trace_sort_index(t, &idx))
        return err_set(e, -ENOMEM, "%s: out of memory", trace_path);
    int rc = 0;
    for (int k = 0; k < d->n && !rc; k++) {
        const TraceDep *x = &d->edges[k];
        if (x->iter > last) /* a shorter run's trace: checked as far as it goes */
            continue;
        bool task = trace_find(t, idx, x->iter, x->task_id) >= 0;
        if (!task || trace_find(t, idx, x->dep_iter, x->dep_id) < 0)
            rc = err_set(e, -EINVAL, "%s:%ld: %s %.60s of iteration %d is not in %s: are they "
                         "of the same model, plan and iterations?", deps_path, x->line,
                         task ? "the dependency" : "task", task ? x->dep_id : x->task_id,
                         task ? x->dep_iter : x->iter, trace_path);
    }
    free(idx);
    return rc;
}

/* ---- looking tasks up ----------------------------------------------------------------------- */

static int cmp_key(int iter, const char *id, const TraceRow *y)
{
    if (iter != y->iter)
        return (iter > y->iter) - (iter < y->iter);
    return strcmp(id, y->task_id);
}

int trace_row_cmp(const TraceRow *x, const TraceRow *y)
{
    return cmp_key(x->iter, x->task_id, y);
}

static int cmp_row(const void *a, const void *b, void *table)
{
    const TraceTable *t = table;
    const TraceRow *x = &t->rows[*(const int *)a];
    return cmp_key(x->iter, x->task_id, &t->rows[*(const int *)b]);
}

int trace_sort_index(const TraceTable *t, int **idx)
{
    *idx = malloc(((size_t)t->n + 1) * sizeof **idx);
    if (!*idx)
        return -ENOMEM;
    for (int i = 0; i < t->n; i++)
        (*idx)[i] = i;
    qsort_r(*idx, (size_t)t->n, sizeof **idx, cmp_row, (void *)t);
    return 0;
}

/* Each (iter, task_id) once: a task ran once an iteration. */
static int check_unique(const char *path, const TraceTable *t, Err *e)
{
    int *idx;
    if (trace_sort_index(t, &idx))
        return err_set(e, -ENOMEM, "%s: out of memory", path);
    int rc = 0;
    for (int i = 1; i < t->n && !rc; i++) {
        const TraceRow *a = &t->rows[idx[i - 1]], *b = &t->rows[idx[i]];
        if (!trace_row_cmp(a, b))
            rc = err_set(e, -EINVAL, "%s: task %.60s of iteration %d has two rows (rows %d and "
                         "%d after the header)", path, b->task_id, b->iter,
                         (idx[i - 1] < idx[i] ? idx[i - 1] : idx[i]) + 1,
                         (idx[i - 1] < idx[i] ? idx[i] : idx[i - 1]) + 1);
    }
    free(idx);
    return rc;
}

int trace_find(const TraceTable *t, const int *idx, int iter, const char *id)
{
    int lo = 0, hi = t->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = cmp_key(iter, id, &t->rows[idx[mid]]);
        if (!c)
            return idx[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}
