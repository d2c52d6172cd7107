/* compare: predicted against measured traces; see compare.h. */
#include "compare.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int max_iter(const TraceTable *t)
{
    int m = -1;
    for (int i = 0; i < t->n; i++)
        if (t->rows[i].iter > m)
            m = t->rows[i].iter;
    return m;
}

/* Per-iteration figures of one trace over iterations [0, n): last end, first start, busy time
 * per resource and span per phase (accumulated over iterations >= from). */
static void figures(const TraceTable *t, int n, int from, double *iter_s,
                    double busy[RES_COUNT], double phase[COMPARE_PHASES], double *ends,
                    double *starts, double *pmin, double *pmax)
{
    for (int i = 0; i < n; i++) {
        ends[i] = -INFINITY;
        starts[i] = INFINITY;
        for (int p = 0; p < COMPARE_PHASES; p++)
            pmin[i * COMPARE_PHASES + p] = INFINITY, pmax[i * COMPARE_PHASES + p] = -INFINITY;
    }
    for (int k = 0; k < t->n; k++) {
        const TraceRow *r = &t->rows[k];
        if (r->iter < 0 || r->iter >= n)
            continue;
        if (r->end_s > ends[r->iter])
            ends[r->iter] = r->end_s;
        if (r->start_s < starts[r->iter])
            starts[r->iter] = r->start_s;
        Resource res;
        if (r->iter >= from && !resource_parse(r->resource, &res))
            busy[res] += r->end_s - r->start_s;
        Phase ph;
        if (!phase_parse(r->phase, &ph)) {
            double *lo = &pmin[r->iter * COMPARE_PHASES + ph];
            double *hi = &pmax[r->iter * COMPARE_PHASES + ph];
            if (r->start_s < *lo)
                *lo = r->start_s;
            if (r->end_s > *hi)
                *hi = r->end_s;
        }
    }
    int counted = n - from;
    *iter_s = n == 1 ? ends[0] - starts[0] : (ends[n - 1] - ends[0]) / (n - 1);
    for (int r = 0; r < RES_COUNT; r++)
        busy[r] /= counted;
    for (int p = 0; p < COMPARE_PHASES; p++) {
        double sum = 0;
        for (int i = from; i < n; i++)
            if (pmax[i * COMPARE_PHASES + p] > pmin[i * COMPARE_PHASES + p])
                sum += pmax[i * COMPARE_PHASES + p] - pmin[i * COMPARE_PHASES + p];
        phase[p] = sum / counted;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static Resource busiest(const double busy[RES_COUNT])
{
    Resource b = 0;
    for (int r = 1; r < RES_COUNT; r++)
        if (busy[r] > busy[b])
            b = r;
    return b;
}

static void keep_worst(TraceCompare *c, const TraceRow *p, const TraceRow *m)
{
    double pd = p->end_s - p->start_s, md = m->end_s - m->start_s, err = fabs(md - pd);
    int at = c->n_worst;
    while (at > 0 && fabs(c->worst[at - 1].meas_s - c->worst[at - 1].pred_s) < err)
        at--;
    if (at >= COMPARE_WORST)
        return;
    int last = c->n_worst < COMPARE_WORST ? c->n_worst : COMPARE_WORST - 1;
    memmove(&c->worst[at + 1], &c->worst[at], (size_t)(last - at) * sizeof c->worst[0]);
    CompareTask *w = &c->worst[at];
    *w = (CompareTask){.iter = p->iter, .pred_s = pd, .meas_s = md};
    snprintf(w->id, sizeof w->id, "%s", p->task_id);
    if (resource_parse(p->resource, &w->res))
        w->res = RES_GPU;
    if (c->n_worst < COMPARE_WORST)
        c->n_worst++;
}

int trace_compare(const TraceTable *pred, const TraceTable *meas, TraceCompare *c, Err *e)
{
    memset(c, 0, sizeof *c);
    int n = max_iter(pred) < max_iter(meas) ? max_iter(pred) + 1 : max_iter(meas) + 1;
    if (n < 1)
        return err_set(e, -EINVAL, "the traces share no iteration (predicted has %d, measured "
                       "%d)", max_iter(pred) + 1, max_iter(meas) + 1);
    c->iters = n;
    c->steady_from = n > 1 ? 1 : 0;
    int *sp = NULL, *sm = NULL;
    double *scratch = malloc((size_t)n * (4 + 4 * COMPARE_PHASES) * sizeof(double));
    double *errs = malloc(((size_t)pred->n + 1) * sizeof(double));
    int rc = !scratch || !errs || trace_sort_index(pred, &sp) || trace_sort_index(meas, &sm)
                 ? -ENOMEM
                 : 0;
    if (rc) {
        free(scratch), free(errs), free(sp), free(sm);
        return err_set(e, rc, "out of memory comparing traces");
    }
    double *ends = scratch, *starts = ends + n, *pmin = starts + n;
    double *pmax = pmin + (size_t)n * COMPARE_PHASES;
    figures(pred, n, c->steady_from, &c->pred_iter_s, c->pred_busy_s, c->pred_phase_s, ends,
            starts, pmin, pmax);
    figures(meas, n, c->steady_from, &c->meas_iter_s, c->meas_busy_s, c->meas_phase_s, ends,
            starts, pmin, pmax);
    c->iter_error = c->pred_iter_s > 0 ? c->meas_iter_s / c->pred_iter_s - 1 : 0;
    c->pred_bottleneck = busiest(c->pred_busy_s);
    c->meas_bottleneck = busiest(c->meas_busy_s);
    /* merge the two sorted lists */
    int i = 0, j = 0;
    while (i < pred->n || j < meas->n) {
        const TraceRow *p = i < pred->n ? &pred->rows[sp[i]] : NULL;
        const TraceRow *m = j < meas->n ? &meas->rows[sm[j]] : NULL;
        int cmp = !p ? 1 : !m ? -1 : trace_row_cmp(p, m);
        if (cmp < 0 || cmp > 0) {
            const TraceRow *x = cmp < 0 ? p : m;
            if (x->iter < n) {
                int *count = cmp < 0 ? &c->only_pred : &c->only_meas;
                char *ex = cmp < 0 ? c->example_only_pred : c->example_only_meas;
                if (!(*count)++)
                    snprintf(ex, sizeof c->example_only_pred, "%s (iteration %d)", x->task_id,
                             x->iter);
            }
            cmp < 0 ? i++ : j++;
            continue;
        }
        c->matched++;
        double pd = p->end_s - p->start_s, md = m->end_s - m->start_s;
        if (p->iter >= c->steady_from) {
            if (pd > 1e-6)
                errs[c->timed++] = fabs(md / pd - 1);
            keep_worst(c, p, m);
        }
        i++, j++;
    }
    if (c->timed) {
        qsort(errs, (size_t)c->timed, sizeof *errs, cmp_double);
        c->dur_err_median = errs[(c->timed - 1) / 2];
        c->dur_err_p90 = errs[(int)ceil(0.9 * c->timed) - 1];
    }
    free(scratch), free(errs), free(sp), free(sm);
    if (!c->matched)
        return err_set(e, -EINVAL, "the traces share no task: are they of the same model and "
                       "plan?");
    return 0;
}

int trace_compare_paths(const TraceTable *pred, const TraceTable *meas, const TraceDeps *d,
                        TraceCompare *c, Err *e)
{
    int rc = trace_critical_path(pred, d, c->steady_from, c->iters, &c->pred_path, e);
    if (!rc)
        rc = trace_critical_path(meas, d, c->steady_from, c->iters, &c->meas_path, e);
    c->has_paths = !rc;
    return rc;
}

static const char *res_label(Resource r)
{
    return r < RES_COUNT ? resource_name(r) : "other";
}

static void print_runs(FILE *out, const char *which, const CritPath *p)
{
    fprintf(out, "%s path of iteration %d: %d runs%s\n", which, p->iter_shown, p->n_runs_total,
            p->n_runs < p->n_runs_total ? ", the longest in order" : "");
    for (int k = 0; k < p->n_runs; k++) {
        const CritRun *r = &p->runs[k];
        fprintf(out, "  %-9s %8.4f s + %.4f s waiting, %d task%s: %s%s%s\n", res_label(r->res),
                r->busy_s, r->wait_s, r->tasks, r->tasks == 1 ? "" : "s", r->first,
                r->tasks > 1 ? " .. " : "", r->tasks > 1 ? r->last : "");
    }
}

static void print_paths(FILE *out, const TraceCompare *c)
{
    const CritPath *p = &c->pred_path, *m = &c->meas_path;
    fprintf(out, "critical path, per iteration:\n  %-10s %12s %12s\n", "on path", "predicted s",
            "measured s");
    for (int r = 0; r < RES_COUNT; r++)
        if (p->res_s[r] > 0 || m->res_s[r] > 0)
            fprintf(out, "  %-10s %12.4f %12.4f\n", resource_name(r), p->res_s[r], m->res_s[r]);
    fprintf(out, "  %-10s %12.4f %12.4f\n", "waiting", p->wait_s, m->wait_s);
    if (p->unresolved || m->unresolved)
        fprintf(out, "  dependencies not in the trace: %d predicted, %d measured\n",
                p->unresolved, m->unresolved);
    print_runs(out, "predicted", p);
    print_runs(out, "measured", m);
}

void trace_compare_print(FILE *out, const TraceCompare *c)
{
    static const char *phases[COMPARE_PHASES] = {"forward", "backward", "optimizer"};
    fprintf(out, "iterations compared: %d (steady state from iteration %d)\n", c->iters,
            c->steady_from);
    fprintf(out, "tasks: %d matched, %d only predicted%s%s%s, %d only measured%s%s%s\n",
            c->matched, c->only_pred, c->only_pred ? " (e.g. " : "", c->example_only_pred,
            c->only_pred ? ")" : "", c->only_meas, c->only_meas ? " (e.g. " : "",
            c->example_only_meas, c->only_meas ? ")" : "");
    fprintf(out, "iteration: predicted %.4f s, measured %.4f s, error %+.1f%%\n", c->pred_iter_s,
            c->meas_iter_s, 100 * c->iter_error);
    fprintf(out, "%-10s %12s %12s %8s\n", "phase", "predicted s", "measured s", "error");
    for (int p = 0; p < COMPARE_PHASES; p++)
        if (c->pred_phase_s[p] > 0 || c->meas_phase_s[p] > 0)
            fprintf(out, "%-10s %12.4f %12.4f %+7.1f%%\n", phases[p], c->pred_phase_s[p],
                    c->meas_phase_s[p], c->pred_phase_s[p] > 0
                                            ? 100 * (c->meas_phase_s[p] / c->pred_phase_s[p] - 1)
                                            : 0);
    fprintf(out, "%-10s %12s %12s %8s   (busy per iteration)\n", "resource", "predicted s",
            "measured s", "error");
    for (int r = 0; r < RES_COUNT; r++)
        if (c->pred_busy_s[r] > 0 || c->meas_busy_s[r] > 0)
            fprintf(out, "%-10s %12.4f %12.4f %+7.1f%%\n", resource_name(r), c->pred_busy_s[r],
                    c->meas_busy_s[r], c->pred_busy_s[r] > 0
                                           ? 100 * (c->meas_busy_s[r] / c->pred_busy_s[r] - 1)
                                           : 0);
    fprintf(out, "bottleneck: predicted %s, measured %s\n", resource_name(c->pred_bottleneck),
            resource_name(c->meas_bottleneck));
    fprintf(out, "task durations (%d timed): |error| median %.1f%%, p90 %.1f%%\n", c->timed,
            100 * c->dur_err_median, 100 * c->dur_err_p90);
    if (c->has_paths)
        print_paths(out, c);
    if (c->n_worst)
        fprintf(out, "largest differences:\n");
    for (int k = 0; k < c->n_worst; k++) {
        const CompareTask *w = &c->worst[k];
        fprintf(out, "  %-24s iter %d %-9s predicted %.6f s, measured %.6f s\n", w->id, w->iter,
                resource_name(w->res), w->pred_s, w->meas_s);
    }
}

int trace_write_joined(FILE *f, const char *path, const TraceTable *pred,
                       const TraceTable *meas, Err *e)
{
    int *sp = NULL, *sm = NULL;
    if (trace_sort_index(pred, &sp) || trace_sort_index(meas, &sm)) {
        free(sp), free(sm);
        return err_set(e, -ENOMEM, "out of memory joining traces");
    }
    fprintf(f, "%s\n", TRACE_JOINED_HEADER);
    int i = 0, j = 0;
    while (i < pred->n || j < meas->n) {
        const TraceRow *p = i < pred->n ? &pred->rows[sp[i]] : NULL;
        const TraceRow *m = j < meas->n ? &meas->rows[sm[j]] : NULL;
        int cmp = !p ? 1 : !m ? -1 : trace_row_cmp(p, m);
        const TraceRow *x = cmp <= 0 ? p : m;
        fprintf(f, "%d\t%s\t%s\t", x->iter, x->task_id, x->resource);
        if (cmp <= 0)
            fprintf(f, "%.9f\t%.9f\t", p->start_s, p->end_s);
        else
            fprintf(f, "\t\t");
        if (cmp >= 0)
            fprintf(f, "%.9f\t%.9f\n", m->start_s, m->end_s);
        else
            fprintf(f, "\t\n");
        if (cmp <= 0)
            i++;
        if (cmp >= 0)
            j++;
    }
    free(sp), free(sm);
    if (ferror(f) || fflush(f))
        return err_set(e, -EIO, "%s: write failed: %s", path, strerror(errno));
    return 0;
}
