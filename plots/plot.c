/* plot: the tables read and checked, the gnuplot scripts written and run; see plot.h. */
#include "plot.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compare.h"
#include "regfile.h"
#include "schedule.h"
#include "trace.h"
#include "tsv.h"

extern char **environ;

static const char *terminal(const char *out)
{
    const char *dot = strrchr(out, '.');
    if (!dot)
        return NULL;
    if (!strcmp(dot, ".png"))
        return "pngcairo size 1600,600 noenhanced";
    if (!strcmp(dot, ".svg"))
        return "svg size 1600,600 noenhanced";
    if (!strcmp(dot, ".pdf"))
        return "pdfcairo size 16cm,6cm noenhanced";
    return NULL;
}

/* The inside of a gnuplot string literal in single quotes: a quote doubled. */
static void literal_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
}

/* gnuplot string literal: single quotes, doubled inside. */
static void quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    literal_text(f, s);
    fputc('\'', f);
}

/* One data series: the quoted file, its header line skipped, then `using` and the rest. */
static void series(FILE *f, const char *path, const char *rest)
{
    quoted(f, path);
    fprintf(f, " skip 1 using %s", rest);
}

/* The lanes of a timeline: the resources in used (0: all), from the top in the schedule's
 * order (gpu, h2d, d2h, ssd_read, ssd_write, cpu_adam); a row of another resource is not
 * drawn. */
static void lanes(FILE *f, unsigned used)
{
    int n = 0;
    used = used ? used : (1u << RES_COUNT) - 1;
    for (int r = 0; r < RES_COUNT; r++)
        n += used >> r & 1;
    fprintf(f, "lane(s) = ");
    for (int r = 0, at = n; r < RES_COUNT; r++)
        if (used >> r & 1)
            fprintf(f, "s eq '%s' ? %d : ", resource_name(r), at--);
    fprintf(f, "NaN\nset ytics (");
    for (int r = 0, at = n; r < RES_COUNT; r++)
        if (used >> r & 1)
            fprintf(f, "%s'%s' %d", at < n ? ", " : "", resource_name(r), at), at--;
    fprintf(f, ")\nset yrange [0.4:%.1f]\nset xlabel 'seconds'\n"
               "set style fill solid 0.8 noborder\n", n + 0.6);
}

/* The title: --title, else the kind, the input (and the runs over a sweep) and the iteration. */
static void title(FILE *f, const PlotRequest *r)
{
    static const char *const kinds[] = {
        [PLOT_TIMELINE] = "timeline", [PLOT_SWEEP] = "swap sweep",
        [PLOT_COMPARE] = "predicted and measured timelines",
        [PLOT_SCATTER] = "task durations, measured against predicted",
        [PLOT_BATCH] = "model TFLOPS against batch size",
    };
    fprintf(f, "set title ");
    if (r->title) {
        quoted(f, r->title);
        fputc('\n', f);
        return;
    }
    fprintf(f, "'%s: ", kinds[r->kind]);
    literal_text(f, r->input);
    if (r->measured && r->kind == PLOT_SWEEP) {
        fprintf(f, ", runs ");
        literal_text(f, r->measured);
    }
    if (r->iter >= 0 && r->kind != PLOT_SWEEP && r->kind != PLOT_BATCH)
        fprintf(f, ", iteration %d", r->iter);
    fprintf(f, "'\n");
}

/* Text for a gnuplot string literal: a single-quoted one takes every byte literally (no
 * escapes, no backquote substitution) but a line break ends the command, so a newline in a
 * title would start a command of the title's choosing. Control characters are refused. */
static int check_text(const char *what, const char *s, Err *e)
{
    for (const char *c = s; c && *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return err_set(e, -EINVAL, "%s: control character 0x%02x at byte %td: not allowed "
                           "in a figure's text or file names", what, (unsigned char)*c, c - s);
    return 0;
}

int plot_write_script(FILE *f, const PlotRequest *r, const PlotData *d, Err *e)
{
    int rc = check_text("--title", r->title, e);
    if (!rc)
        rc = check_text("-o", r->output, e);
    if (!rc)
        rc = check_text("the input", r->input, e);
    if (!rc)
        rc = check_text("--measured", r->measured, e);
    if (rc)
        return rc;
    const char *term = terminal(r->output);
    if (!term)
        return err_set(e, -EINVAL, "%s: the output must end in .png, .svg or .pdf", r->output);
    fprintf(f, "set terminal %s\nset output ", term);
    quoted(f, r->output);
    fprintf(f, "\nset datafile separator '\\t'\nset key outside right top\nset grid\n");
    title(f, r);
    fprintf(f, "keep(i) = %d < 0 || i == %d\n", r->iter, r->iter);
    if (r->kind == PLOT_TIMELINE || r->kind == PLOT_COMPARE)
        lanes(f, d->lanes);
    if (r->kind == PLOT_TIMELINE) {
        fprintf(f, "phase(s) = s eq 'forward' ? 1 : s eq 'backward' ? 2 : 3\n"
                   "plot for [p=1:3] ");
        series(f, r->input, "(keep($1) ? ($6 + $7) / 2 : NaN):(keep($1) && "
                            "phase(strcol(4)) == p ? lane(strcol(3)) : NaN):"
                            "(($7 - $6) / 2):(0.35) with boxxyerror "
                            "title word('forward backward optimizer', p)\n");
    } else if (r->kind == PLOT_COMPARE) {
        /* Joined table: 1 iter, 3 resource, 4-5 predicted start/end, 6-7 measured start/end.
         * Each lane has the predicted row above the measured one; each trace is drawn from its
         * own first task drawn (a measured iteration starts later than the predicted one
         * after slower iterations before it; fuyou-plot checks the table has rows of the
         * iteration asked for, plot_find_iter). */
        fprintf(f, "stats ");
        series(f, r->input, "(keep($1) ? $4 : NaN) nooutput\np0 = STATS_min\nstats ");
        series(f, r->input, "(keep($1) ? $6 : NaN) nooutput\nm0 = STATS_min\n");
        fprintf(f, "set xlabel 'seconds from the first task drawn (each trace its own)'\n"
                   "plot ");
        series(f, r->input, "(keep($1) ? ($4 + $5) / 2 - p0 : NaN):(lane(strcol(3)) + 0.2):"
                            "(($5 - $4) / 2):(0.17) with boxxyerror title 'predicted', ");
        series(f, r->input, "(keep($1) ? ($6 + $7) / 2 - m0 : NaN):(lane(strcol(3)) - 0.2):"
                            "(($7 - $6) / 2):(0.17) with boxxyerror title 'measured'\n");
    } else if (r->kind == PLOT_SCATTER) {
        fprintf(f, "set logscale xy\nset xlabel 'predicted task duration (s)'\n"
                   "set ylabel 'measured task duration (s)'\nset size ratio -1\nplot ");
        series(f, r->input, "(keep($1) && $5 > $4 ? $5 - $4 : NaN):($7 > $6 ? $7 - $6 : "
                            "NaN) with points pt 7 ps 0.5 title 'tasks', x with lines lw 2 "
                            "title 'y = x'\n");
    } else if (r->kind == PLOT_BATCH) {
        fprintf(f, "set xlabel 'batch (sequences)'\nset ylabel 'model TFLOPS'\n"
                   "set logscale x 2\nset yrange [0:*]\n"
                   "set offsets graph 0.05, graph 0.05, 0, 0\nplot ");
        series(f, r->input, "2:3 with points pt 6 ps 1.5 title 'predicted', ");
        series(f, r->input, "2:4 with points pt 7 ps 1 title 'measured', ");
        series(f, r->input, "2:3:1 with labels offset 0,1 font ',8' notitle\n");
    } else {
        fprintf(f, "set xlabel 'activations kept instead of recomputed (GiB)'\n"
                   "set ylabel 'seconds per iteration'\nplot ");
        /* column 6, fits: the points that do not fit drawn apart, as a series only where
         * there are some (gnuplot warns of a series without points) */
        series(f, r->input, "($1 / 2**30):3 with lines lw 2 title 'closed form', ");
        series(f, r->input, "($1 / 2**30):($6 == 1 ? $4 : NaN) with linespoints pt 7 ps 0.4 "
                            "title 'simulated', ");
        if (d->infeasible)
            series(f, r->input, "($1 / 2**30):($6 == 0 ? $4 : NaN) with points pt 2 ps 0.8 "
                                "title 'infeasible (over capacity)', ");
        series(f, r->input, "($1 / 2**30):($7 == 1 ? $4 : NaN) with points pt 9 ps 2.5 "
                            "title 'planner'");
        if (r->measured) {
            fprintf(f, ", ");
            series(f, r->measured, "($1 / 2**30):2 with points pt 5 ps 1.2 title 'measured'");
        }
        fputc('\n', f);
    }
    return ferror(f) ? err_set(e, -EIO, "cannot write the gnuplot script") : 0;
}

/* ---- reading the tables ---------------------------------------------------------------------- */

/* What a column of a table must hold. */
typedef enum Col {
    COL_TEXT,       /* anything but nothing */
    COL_ITER,       /* an iteration: a whole number from 0 */
    COL_COUNT,      /* a whole number from 0 */
    COL_FLAG,       /* 0 or 1 */
    COL_RES,        /* a resource of the schedule's */
    COL_NUM,        /* a finite number, not negative */
    COL_POS,        /* a finite number above 0 */
    COL_NUM_OR_NAN, /* a COL_NUM, or NaN where there is none */
    COL_TIME,       /* a trace's time (0 to TRACE_MAX_S), or empty where a trace lacks the task */
} Col;

typedef struct Reading Reading;

/* A table fuyou-plot draws: its kind (for "not a WHAT"), header, columns, and what its rows
 * add to the figure beyond their columns (NULL: nothing). */
typedef struct Table {
    const char *what, *header;
    int n;
    Col col[8];
    int (*row)(TsvReader *r, const double *v);
} Table;

/* One table being read: the request, what it finds for the script, and the rows it counts. */
struct Reading {
    const PlotRequest *req;
    const Table *table;
    PlotData *d;
    long rows, kept, drawn; /* rows; of the iteration asked for (if one is); drawn of those */
    int lo, hi;             /* the least and greatest iteration (hi -1: none) */
};

/* A row of iteration iter on resource res, drawn (if of the iteration asked for) or not. */
static void row_at(Reading *g, int iter, Resource res, bool drawn)
{
    g->lo = iter < g->lo ? iter : g->lo;
    g->hi = iter > g->hi ? iter : g->hi;
    if (g->req->iter < 0 || iter == g->req->iter) {
        g->kept++;
        g->drawn += drawn;
        g->d->lanes |= 1u << res;
    }
}

/* The name of column c of a header, in name (n bytes). */
static const char *column_name(const char *header, int c, char *name, size_t n)
{
    for (; c > 0 && header; c--)
        header = strchr(header, '\t') ? strchr(header, '\t') + 1 : NULL;
    size_t len = header ? strcspn(header, "\t") : 0;
    snprintf(name, n, "%.*s", (int)len, header ? header : "");
    return name;
}

/* Field s of column c as its column wants it, its value in *v (NaN for none). */
static int take_field(TsvReader *r, int c, const char *s, double *v)
{
    const Table *t = ((Reading *)r->ctx)->table;
    char name[32];
    column_name(t->header, c, name, sizeof name);
    int i;
    Resource res;
    switch (t->col[c]) {
    case COL_TEXT:
        *v = 0;
        return *s ? 0 : tsv_bad_line(r, "%s is empty", name);
    case COL_ITER:
    case COL_COUNT:
        if (tsv_parse_int(s, &i) || i < 0)
            return tsv_bad_line(r, "%s is not a whole number from 0: \"%.40s\"", name, s);
        *v = i;
        return 0;
    case COL_FLAG:
        *v = *s - '0';
        return !strcmp(s, "0") || !strcmp(s, "1")
                   ? 0 : tsv_bad_line(r, "%s is \"%.40s\", expected 0 or 1", name, s);
    case COL_RES:
        if (resource_parse(s, &res))
            return tsv_bad_line(r, "%s \"%.40s\" is none of the schedule's resources (gpu, h2d, "
                                "d2h, ssd_read, ssd_write, cpu_adam)", name, s);
        *v = res;
        return 0;
    case COL_TIME:
    case COL_NUM_OR_NAN:
        *v = NAN;
        if (t->col[c] == COL_TIME ? !*s : !strcasecmp(s, "nan"))
            return 0;
        break;
    case COL_NUM:
    case COL_POS:
        break;
    }
    if (tsv_parse_number(s, v))
        return tsv_bad_line(r, "%s is not a finite number: \"%.40s\"", name, s);
    if (t->col[c] == COL_POS ? !(*v > 0) : *v < 0)
        return tsv_bad_line(r, "%s is %g; it must be %s", name, *v,
                            t->col[c] == COL_POS ? "above 0" : "0 or more");
    if (t->col[c] == COL_TIME && *v > TRACE_MAX_S)
        return tsv_bad_line(r, "%s is %g s: a trace's times are 0 to %g s", name, *v,
                            TRACE_MAX_S);
    return 0;
}

static int take_row(TsvReader *r, char **f)
{
    Reading *g = r->ctx;
    double v[8];
    for (int c = 0; c < g->table->n; c++) {
        int rc = take_field(r, c, f[c], &v[c]);
        if (rc)
            return rc;
    }
    g->rows++;
    return g->table->row ? g->table->row(r, v) : 0;
}

/* A joined row: each trace's start and end both there or neither, in order, one trace's at
 * least. */
static int joined_row(TsvReader *r, const double *v)
{
    static const char *const names[2] = {"predicted", "measured"};
    for (int k = 0; k < 2; k++) {
        double start = v[3 + 2 * k], end = v[4 + 2 * k];
        if (isnan(start) != isnan(end))
            return tsv_bad_line(r, "the %s start and end: both or neither (a task the %s "
                                "trace lacks)", names[k], names[k]);
        if (end < start)
            return tsv_bad_line(r, "the %s end %.9f is before its start %.9f", names[k], end,
                                start);
    }
    if (isnan(v[3]) && isnan(v[5]))
        return tsv_bad_line(r, "no times: a row has the predicted or the measured ones");
    /* the scatter draws a task with both durations above 0 (its axes are logarithmic) */
    Reading *g = r->ctx;
    row_at(g, (int)v[0], (Resource)v[2],
           g->req->kind != PLOT_SCATTER || (v[4] > v[3] && v[6] > v[5]));
    return 0;
}

/* A sweep's point that does not fit (fits 0) */
static int sweep_row(TsvReader *r, const double *v)
{
    Reading *g = r->ctx;
    g->d->infeasible |= v[5] == 0;
    return 0;
}

static const Table joined_table = {
    "joined table (fuyou-trace compare --tsv)", TRACE_JOINED_HEADER, 7,
    {COL_ITER, COL_TEXT, COL_RES, COL_TIME, COL_TIME, COL_TIME, COL_TIME}, joined_row};
static const Table sweep_table = {
    "swap sweep table (fuyou-sim --swap sweep --sweep-out)", PLOT_SWEEP_HEADER, 7,
    {COL_NUM, COL_COUNT, COL_NUM, COL_NUM, COL_RES, COL_FLAG, COL_FLAG}, sweep_row};
static const Table measured_table = {
    "table of measured runs", PLOT_MEASURED_HEADER, 2, {COL_NUM, COL_NUM}, NULL};
static const Table batch_table = {
    "batch table (tools/regress.sh's batch.tsv)", PLOT_BATCH_HEADER, 4,
    {COL_TEXT, COL_POS, COL_NUM, COL_NUM_OR_NAN}, NULL};

/* Reads path as table t into g. */
static int read_table(const char *path, const Table *t, Reading *g, Err *e)
{
    char what[320];
    size_t n = (size_t)snprintf(what, sizeof what, "%s: the header must be ", t->what);
    for (const char *h = t->header; *h && n + 3 < sizeof what; h++) {
        if (*h == '\t')
            what[n++] = ',', what[n++] = ' ';
        else
            what[n++] = *h;
    }
    snprintf(what + n, sizeof what - n, ", separated by tabs");
    g->table = t;
    TsvReader r = {.path = path, .e = e, .n_fields = t->n, .take = take_row, .ctx = g};
    return tsv_read(&r, t->header, what);
}

/* Reads the trace at path into g: trace_read_tsv's checks. */
static int read_trace(const char *path, Reading *g, Err *e)
{
    TraceTable t;
    int rc = trace_read_tsv(path, &t, e);
    for (int i = 0; i < t.n; i++) {
        Resource res;
        resource_parse(t.rows[i].resource, &res); /* the reader took the schedule's only */
        row_at(g, t.rows[i].iter, res, true);
    }
    g->rows = t.n;
    trace_table_free(&t);
    return rc;
}

/* Reads the input or --measured file of r as its kind, into d; whether it has rows to draw. */
static int read_input(const PlotRequest *r, bool measured, PlotData *d, Err *e)
{
    Reading g = {.req = r, .d = d, .lo = INT_MAX, .hi = -1};
    const char *path = measured ? r->measured : r->input;
    int rc = measured ? read_table(path, &measured_table, &g, e)
           : r->kind == PLOT_TIMELINE ? read_trace(path, &g, e)
           : r->kind == PLOT_SWEEP ? read_table(path, &sweep_table, &g, e)
           : r->kind == PLOT_BATCH ? read_table(path, &batch_table, &g, e)
                                   : read_table(path, &joined_table, &g, e);
    if (measured || r->kind == PLOT_SWEEP || r->kind == PLOT_BATCH)
        g.kept = g.drawn = g.rows; /* tables without iterations */
    if (rc || g.drawn)
        return rc;
    if (!g.rows)
        return err_set(e, -EINVAL, "%s: no rows to draw", path);
    if (!g.kept)
        return err_set(e, -EINVAL, "--iter %d: %s has no rows of iteration %d (it has "
                       "iterations %d to %d)", r->iter, path, r->iter, g.lo, g.hi);
    return err_set(e, -EINVAL, "%s: no task with both durations above 0 to draw", path);
}

int plot_read_inputs(const PlotRequest *r, PlotData *d, Err *e)
{
    *d = (PlotData){0};
    /* each a regular file before either is read: gnuplot would wait on a FIFO, read a device
     * without end */
    int rc = regfile_check(r->input, e);
    if (!rc && r->measured)
        rc = regfile_check(r->measured, e);
    if (!rc)
        rc = read_input(r, false, d, e);
    if (!rc && r->measured)
        rc = read_input(r, true, d, e);
    return rc;
}

int plot_render(const PlotRequest *r, const PlotData *d, Err *e)
{
    char script[4200];
    snprintf(script, sizeof script, "%s.gp", r->output);
    FILE *f = fopen(script, "w");
    if (!f)
        return err_set(e, -errno, "%s: cannot write: %s", script, strerror(errno));
    int rc = plot_write_script(f, r, d, e);
    if (fclose(f) && !rc)
        rc = err_set(e, -EIO, "%s: write failed", script);
    if (rc) {
        unlink(script);
        return rc;
    }
    char *argv[] = {"gnuplot", script, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
    if (err)
        return err_set(e, -ENOENT, "gnuplot is not installed (apt-get install gnuplot-nox); "
                       "the script is in %s", script);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return err_set(e, -EIO, "gnuplot did not finish; the script is in %s", script);
    if (WEXITSTATUS(status) == 127)
        return err_set(e, -ENOENT, "gnuplot is not installed (apt-get install gnuplot-nox); "
                       "the script is in %s", script);
    if (WEXITSTATUS(status))
        return err_set(e, -EIO, "gnuplot failed on %s (exit %d); see its message above", script,
                       WEXITSTATUS(status));
    return 0;
}
