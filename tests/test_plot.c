/* Check suite for plots/plot: the gnuplot scripts (terminal by extension, columns of the trace
 * and sweep schemas, what they draw by what the inputs hold, titles), bad outputs, the tables
 * read before gnuplot is given them (each kind's errors, stopping at the first bad line), and,
 * where gnuplot is installed (CI installs it), real PNGs of the golden trace and of each kind. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <spawn.h>
#include <sys/wait.h>

#include "plot.h"
#include "schedule.h"
#include "testutil.h"

extern char **environ;

/* The script for r with inputs that hold d. */
static char *script_for(const PlotRequest *r, const PlotData *d, int *rc)
{
    static char buf[8192];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    Err e;
    *rc = plot_write_script(f, r, d, &e);
    fclose(f);
    return buf;
}

/* ... with inputs whose rows are on every lane, every sweep point fitting */
static char *script(const PlotRequest *r, int *rc)
{
    return script_for(r, &(PlotData){.lanes = 0x3f}, rc);
}

START_TEST(scripts)
{
    int rc;
    PlotRequest t = {.kind = PLOT_TIMELINE, .input = "a.tsv", .output = "o.svg", .iter = 2};
    const char *s = script(&t, &rc);
    ck_assert_int_eq(rc, 0);
    tu_assert_contains(s, "set terminal svg");
    tu_assert_contains(s, "keep(i) = 2 < 0 || i == 2");
    tu_assert_contains(s, "lane(strcol(3))");  /* resource column */
    /* a lane per resource of the schedule, from the top */
    tu_assert_contains(s, "s eq 'gpu' ? 6 : s eq 'h2d' ? 5");
    tu_assert_contains(s, "'cpu_adam' 1)\nset yrange [0.4:6.6]");
    tu_assert_contains(s, "phase(strcol(4))"); /* phase column */
    tu_assert_contains(s, "'a.tsv' skip 1");
    PlotRequest w = {.kind = PLOT_SWEEP, .input = "it's.tsv", .output = "o.png"};
    s = script(&w, &rc);
    ck_assert_int_eq(rc, 0);
    tu_assert_contains(s, "pngcairo");
    tu_assert_contains(s, "'it''s.tsv'"); /* quotes doubled */
    tu_assert_contains(s, "($1 / 2**30):($6 == 1 ? $4"); /* sim_time_s 4 where fits, 6, is 1 */
    PlotRequest c = {.kind = PLOT_COMPARE, .input = "j.tsv", .output = "o.png", .iter = 1};
    s = script(&c, &rc);
    ck_assert_int_eq(rc, 0);
    /* predicted start and end, then measured, each from its own first task drawn */
    tu_assert_contains(s, "stats 'j.tsv' skip 1 using (keep($1) ? $4 : NaN) nooutput\np0 = ");
    tu_assert_contains(s, "stats 'j.tsv' skip 1 using (keep($1) ? $6 : NaN) nooutput\nm0 = ");
    tu_assert_contains(s, "($4 + $5) / 2 - p0");
    tu_assert_contains(s, "($6 + $7) / 2 - m0");
    tu_assert_contains(s, "title 'measured'");
    PlotRequest sc = {.kind = PLOT_SCATTER, .input = "j.tsv", .output = "o.pdf", .iter = -1};
    s = script(&sc, &rc);
    ck_assert_int_eq(rc, 0);
    tu_assert_contains(s, "set logscale xy");
    tu_assert_contains(s, "x with lines lw 2 title 'y = x'");
    /* measured runs over the sweep: swap_bytes and seconds */
    PlotRequest wm = {.kind = PLOT_SWEEP, .input = "s.tsv", .measured = "m.tsv",
                      .output = "o.png"};
    s = script(&wm, &rc);
    ck_assert_int_eq(rc, 0);
    tu_assert_contains(s, "'m.tsv' skip 1 using ($1 / 2**30):2 with points");
    ck_assert_ptr_null(strstr(script(&w, &rc), "'measured'"));
    /* TFLOPS against batch: batch is column 2, predicted 3, measured 4, the model 1 */
    PlotRequest b = {.kind = PLOT_BATCH, .input = "b.tsv", .output = "o.png"};
    s = script(&b, &rc);
    ck_assert_int_eq(rc, 0);
    tu_assert_contains(s, "using 2:3 with points pt 6 ps 1.5 title 'predicted'");
    tu_assert_contains(s, "using 2:4 with points pt 7 ps 1 title 'measured'");
    tu_assert_contains(s, "using 2:3:1 with labels");
    PlotRequest bad = {.kind = PLOT_SWEEP, .input = "x", .output = "o.jpg"};
    script(&bad, &rc);
    ck_assert_int_eq(rc, -EINVAL);
}
END_TEST

/* No user text reaches gnuplot as code: a line break would end the string literal and start a
 * command, so control characters are refused in every text, naming which; quotes, backquotes
 * and @ stay inside the literal (gnuplot substitutes neither in single quotes). */
START_TEST(hostile_text_stays_text)
{
    static const struct { const char *title, *output, *input, *measured, *names; } cases[] = {
        {"a\nsystem \"touch PWNED\"", "o.png", "a.tsv", NULL, "--title"},
        {"a\rb", "o.png", "a.tsv", NULL, "--title"},
        {"a\x7f", "o.png", "a.tsv", NULL, "--title"},
        {NULL, "o\n.png", "a.tsv", NULL, "-o"},
        {NULL, "o.png", "a\n!touch PWNED\n.tsv", NULL, "the input"},
        {NULL, "o.png", "a.tsv", "m\t.tsv", "--measured"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        PlotRequest r = {.kind = cases[i].measured ? PLOT_SWEEP : PLOT_TIMELINE,
                         .input = cases[i].input, .measured = cases[i].measured,
                         .output = cases[i].output, .title = cases[i].title, .iter = -1};
        char buf[256];
        FILE *f = fmemopen(buf, sizeof buf, "w");
        Err e;
        ck_assert_int_eq(plot_write_script(f, &r, &(PlotData){0}, &e), -EINVAL);
        fclose(f);
        tu_assert_contains(e.msg, cases[i].names);
        tu_assert_contains(e.msg, "control character");
    }
    int rc;
    PlotRequest q = {.kind = PLOT_TIMELINE, .input = "a.tsv", .output = "o.png", .iter = -1,
                     .title = "it's `touch PWNED` @x"};
    const char *s = script(&q, &rc);
    ck_assert_int_eq(rc, 0);
    tu_assert_contains(s, "set title 'it''s `touch PWNED` @x'\n");
}
END_TEST

/* What the script draws follows what the inputs hold: the lanes with rows only (there was an
 * always-empty "other" lane), the sweep's points that do not fit as a series of their own
 * (they were drawn as the others); and a title naming the kind and the input unless --title
 * gives one (there was none) */
START_TEST(scripts_draw_what_inputs_hold)
{
    int rc;
    PlotRequest t = {.kind = PLOT_TIMELINE, .input = "a.tsv", .output = "o.png", .iter = 2};
    const char *s = script_for(&t, &(PlotData){.lanes = 1u << RES_GPU | 1u << RES_H2D}, &rc);
    ck_assert_int_eq(rc, 0);
    tu_assert_contains(s, "lane(s) = s eq 'gpu' ? 2 : s eq 'h2d' ? 1 : NaN\n");
    tu_assert_contains(s, "set ytics ('gpu' 2, 'h2d' 1)\nset yrange [0.4:2.6]\n");
    ck_assert_ptr_null(strstr(s, "other"));
    ck_assert_ptr_null(strstr(s, "d2h"));
    tu_assert_contains(s, "set title 'timeline: a.tsv, iteration 2'\n");
    PlotRequest c = {.kind = PLOT_COMPARE, .input = "j.tsv", .output = "o.png", .iter = -1};
    s = script_for(&c, &(PlotData){.lanes = 1u << RES_CPU_ADAM}, &rc);
    tu_assert_contains(s, "set ytics ('cpu_adam' 1)\n");
    tu_assert_contains(s, "set title 'predicted and measured timelines: j.tsv'\n");
    PlotRequest w = {.kind = PLOT_SWEEP, .input = "it's.tsv", .output = "o.png", .iter = 3};
    s = script_for(&w, &(PlotData){.infeasible = true}, &rc);
    ck_assert_int_eq(rc, 0);
    tu_assert_contains(s, "($1 / 2**30):($6 == 1 ? $4 : NaN) with linespoints pt 7 ps 0.4 "
                          "title 'simulated'");
    tu_assert_contains(s, "($1 / 2**30):($6 == 0 ? $4 : NaN) with points pt 2 ps 0.8 "
                          "title 'infeasible (over capacity)'");
    tu_assert_contains(s, "set title 'swap sweep: it''s.tsv'\n"); /* no iteration in a sweep */
    s = script_for(&w, &(PlotData){0}, &rc);
    ck_assert_ptr_null(strstr(s, "infeasible"));
    w.measured = "m.tsv";
    s = script_for(&w, &(PlotData){0}, &rc);
    tu_assert_contains(s, "set title 'swap sweep: it''s.tsv, runs m.tsv'\n");
    PlotRequest sc = {.kind = PLOT_SCATTER, .input = "j.tsv", .output = "o.pdf", .iter = 0};
    s = script_for(&sc, &(PlotData){0}, &rc);
    tu_assert_contains(s, "set title 'task durations, measured against predicted: j.tsv, "
                          "iteration 0'\n");
    PlotRequest b = {.kind = PLOT_BATCH, .input = "b.tsv", .output = "o.png", .iter = -1};
    s = script_for(&b, &(PlotData){0}, &rc);
    tu_assert_contains(s, "set title 'model TFLOPS against batch size: b.tsv'\n");
    b.title = "mine";
    s = script_for(&b, &(PlotData){0}, &rc);
    tu_assert_contains(s, "set title 'mine'\n");
    ck_assert_ptr_null(strstr(s, "TFLOPS against"));
}
END_TEST

/* plot_read_inputs on text as the input of kind (at iteration iter): its return, e and d */
static int read_text(PlotKind kind, int iter, const char *text, PlotData *d, Err *e, char *path)
{
    tu_temp_file(path, 64, ".tsv", text);
    int rc = plot_read_inputs(&(PlotRequest){.kind = kind, .input = path, .output = "o.png",
                                             .iter = iter}, d, e);
    unlink(path);
    return rc;
}

#define TRACE_HEAD "iter\ttask_id\tresource\tphase\tlayer\tstart_s\tend_s\tbytes\tflops\n"
#define JOINED_HEAD "iter\ttask_id\tresource\tpred_start_s\tpred_end_s\tmeas_start_s\tmeas_end_s\n"

/* Every table of every kind is read before gnuplot is given it: what it holds for the script,
 * or one line naming the file, the line and what is wrong */
START_TEST(read_inputs)
{
    PlotData d;
    Err e;
    char path[64], where[128];
    const char *trace = TRACE_HEAD "0\tA\th2d\tforward\t0\t0\t1\t8\t0\n"
                        "0\tB\tgpu\tforward\t0\t1\t2\t0\t8\n"
                        "1\tC\tcpu_adam\toptimizer\t0\t2\t3\t0\t0\n";
    ck_assert_int_eq(read_text(PLOT_TIMELINE, 0, trace, &d, &e, path), 0);
    ck_assert_uint_eq(d.lanes, 1u << RES_GPU | 1u << RES_H2D);
    ck_assert_int_eq(read_text(PLOT_TIMELINE, -1, trace, &d, &e, path), 0);
    ck_assert_uint_eq(d.lanes, 1u << RES_GPU | 1u << RES_H2D | 1u << RES_CPU_ADAM);
    ck_assert_int_eq(read_text(PLOT_TIMELINE, 5, trace, &d, &e, path), -EINVAL);
    snprintf(where, sizeof where, "--iter 5: %s has no rows of iteration 5 (it has iterations "
             "0 to 1)", path);
    ck_assert_str_eq(e.msg, where);
    ck_assert_int_eq(read_text(PLOT_COMPARE, 1, JOINED_HEAD "0\tA\tgpu\t0\t1\t0\t1.5\n"
                               "1\tB\td2h\t1\t2\t\t\n", &d, &e, path), 0);
    ck_assert_uint_eq(d.lanes, 1u << RES_D2H);
    ck_assert_int_eq(read_text(PLOT_SWEEP, -1, PLOT_SWEEP_HEADER "\n0\t0\t1\t1\tgpu\t1\t1\n"
                               "1\t1\t1\t1\tgpu\t0\t0\n", &d, &e, path), 0);
    ck_assert(d.infeasible);
    ck_assert_int_eq(read_text(PLOT_SWEEP, -1, PLOT_SWEEP_HEADER "\n0\t0\t1\t1\tgpu\t1\t1\n",
                               &d, &e, path), 0);
    ck_assert(!d.infeasible);
    ck_assert_int_eq(read_text(PLOT_BATCH, -1, PLOT_BATCH_HEADER "\nm\t8\t1.5\tNaN\n", &d, &e,
                               path), 0);
    static const struct { PlotKind kind; const char *text; int line; const char *what; } bad[] = {
        {PLOT_SWEEP, TRACE_HEAD, 1, "not a swap sweep table (fuyou-sim --swap sweep --sweep-out): "
         "the header must be swap_bytes, units, closed_form_s, sim_time_s, bottleneck, fits, "
         "planner, separated by tabs"},
        {PLOT_TIMELINE, PLOT_SWEEP_HEADER "\n", 1, "not a trace TSV: the header must be iter"},
        {PLOT_COMPARE, PLOT_BATCH_HEADER "\n", 1, "not a joined table (fuyou-trace compare "
         "--tsv): the header must be iter, task_id, resource, pred_start_s"},
        {PLOT_BATCH, JOINED_HEAD, 1, "not a batch table (tools/regress.sh's batch.tsv)"},
        {PLOT_SWEEP, PLOT_SWEEP_HEADER "\n0\t0\t1\t1\tgpu\t2\t0\n", 2,
         "fits is \"2\", expected 0 or 1"},
        {PLOT_SWEEP, PLOT_SWEEP_HEADER "\n-1\t0\t1\t1\tgpu\t1\t0\n", 2,
         "swap_bytes is -1; it must be 0 or more"},
        {PLOT_SWEEP, PLOT_SWEEP_HEADER "\n0\t0.5\t1\t1\tgpu\t1\t0\n", 2,
         "units is not a whole number from 0: \"0.5\""},
        {PLOT_SWEEP, PLOT_SWEEP_HEADER "\n0\t0\t1\t1\tnic\t1\t0\n", 2,
         "bottleneck \"nic\" is none of the schedule's resources"},
        {PLOT_SWEEP, PLOT_SWEEP_HEADER "\n0\t0\t1\t1\tgpu\t1\n", 2,
         "expected 7 tab-separated fields, got 6"},
        {PLOT_COMPARE, JOINED_HEAD "0\tA\tgpu\t0\t\t0\t1\n", 2,
         "the predicted start and end: both or neither"},
        {PLOT_COMPARE, JOINED_HEAD "0\tA\tgpu\t0\t1\t2\t1\n", 2,
         "the measured end 1.000000000 is before its start 2.000000000"},
        {PLOT_COMPARE, JOINED_HEAD "0\tA\tgpu\t\t\t\t\n", 2, "no times"},
        {PLOT_COMPARE, JOINED_HEAD "0\t\tgpu\t0\t1\t0\t1\n", 2, "task_id is empty"},
        {PLOT_SCATTER, JOINED_HEAD "0\tA\tgpu\t0\t1\t0\t1e10\n", 2,
         "meas_end_s is 1e+10 s: a trace's times are 0 to 1e+09 s"},
        {PLOT_SCATTER, JOINED_HEAD "x\tA\tgpu\t0\t1\t0\t1\n", 2,
         "iter is not a whole number from 0"},
        {PLOT_BATCH, PLOT_BATCH_HEADER "\nm\t0\t1\t1\n", 2, "batch is 0; it must be above 0"},
        {PLOT_BATCH, PLOT_BATCH_HEADER "\nm\t8\tNaN\t1\n", 2,
         "predicted_tflops is not a finite number: \"NaN\""},
        {PLOT_BATCH, PLOT_BATCH_HEADER "\nm\t8\t1\tinf\n", 2,
         "measured_tflops is not a finite number: \"inf\""},
        {PLOT_TIMELINE, TRACE_HEAD "0\tA\tgpu\tforward\t0\t0\tNaN\t0\t0\n", 2,
         "end_s is not a finite number"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ck_assert_int_eq(read_text(bad[k].kind, -1, bad[k].text, &d, &e, path), -EINVAL);
        snprintf(where, sizeof where, "%s:%d: ", path, bad[k].line);
        ck_assert_msg(!strncmp(e.msg, where, strlen(where)), "%zu: %s", k, e.msg);
        tu_assert_contains(e.msg, bad[k].what);
        ck_assert_ptr_null(strchr(e.msg, '\n'));
    }
    /* nothing to draw: no rows; for the scatter, no task with both durations */
    ck_assert_int_eq(read_text(PLOT_BATCH, -1, PLOT_BATCH_HEADER "\n", &d, &e, path), -EINVAL);
    snprintf(where, sizeof where, "%s: no rows to draw", path);
    ck_assert_str_eq(e.msg, where);
    ck_assert_int_eq(read_text(PLOT_SCATTER, -1, JOINED_HEAD "0\tA\tgpu\t0\t1\t\t\n"
                               "0\tB\tgpu\t1\t1\t1\t2\n", &d, &e, path), -EINVAL);
    tu_assert_contains(e.msg, "no task with both durations above 0 to draw");
    /* files: missing, a directory; both inputs regular files before either is read */
    PlotRequest r = {.kind = PLOT_SWEEP, .input = "/nonexistent/s.tsv", .output = "o.png"};
    ck_assert_int_eq(plot_read_inputs(&r, &d, &e), -ENOENT);
    tu_assert_contains(e.msg, "/nonexistent/s.tsv");
    r.input = "/tmp";
    ck_assert_int_eq(plot_read_inputs(&r, &d, &e), -EISDIR);
    r.input = getenv("GOLDEN_TRACE"), r.measured = "/dev/zero";
    ck_assert_int_eq(plot_read_inputs(&r, &d, &e), -EINVAL);
    tu_assert_contains(e.msg, "/dev/zero: is a character device");
    /* measured runs, after the sweep */
    char sweep[64];
    tu_temp_file(sweep, sizeof sweep, ".tsv", PLOT_SWEEP_HEADER "\n0\t0\t1\t1\tgpu\t1\t1\n");
    tu_temp_file(path, sizeof path, ".tsv", PLOT_MEASURED_HEADER "\n0\t1.5\n1\t-2\n");
    r = (PlotRequest){.kind = PLOT_SWEEP, .input = sweep, .measured = path, .output = "o.png"};
    ck_assert_int_eq(plot_read_inputs(&r, &d, &e), -EINVAL);
    snprintf(where, sizeof where, "%s:3: measured_s is -2; it must be 0 or more", path);
    ck_assert_str_eq(e.msg, where);
    unlink(path);
    unlink(sweep);
}
END_TEST

/* Bytes this process has read (/proc/self/io's rchar), or -1 where the kernel does not say. */
static long long bytes_read(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    long long n = -1;
    if (f && fscanf(f, "rchar: %lld", &n) != 1)
        n = -1;
    if (f)
        fclose(f);
    return n;
}

/* The first bad line stops the read: 100 MB of garbage, or of rows after a bad one, are not
 * read to their end (counted in the bytes this process read) */
START_TEST(read_stops_at_first_bad_line)
{
    static const struct { const char *head; int line; const char *what; } files[] = {
        {"\x7f" "ELF\x02\x01\x01", 1, "not a trace TSV"},
        {TRACE_HEAD "0\tA\tgpu\tforward\t0\t0\t1\t0\t0\ngarbage\n", 3,
         "expected 9 tab-separated fields, got 1"},
    };
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        char path[64], where[96];
        tu_temp_file(path, sizeof path, ".bin", files[k].head);
        ck_assert_int_eq(truncate(path, 100 << 20), 0); /* a hole: 100 MB that read as zeros */
        PlotData d;
        Err e;
        long long before = bytes_read();
        ck_assert_int_eq(plot_read_inputs(&(PlotRequest){.kind = PLOT_TIMELINE, .input = path,
                                                         .output = "o.png", .iter = -1},
                                          &d, &e), -EINVAL);
        long long after = bytes_read();
        snprintf(where, sizeof where, "%s:%d: %s", path, files[k].line, files[k].what);
        tu_assert_contains(e.msg, where);
        if (before < 0 || after < 0)
            printf("read_stops_at_first_bad_line: /proc/self/io has no rchar here; the bytes "
                   "read are not checked\n");
        else
            ck_assert_msg(after - before < (1 << 20), "read %lld bytes", after - before);
        unlink(path);
    }
}
END_TEST

/* Reads r's inputs, renders r (its output a .png) and checks gnuplot wrote a PNG; removes it
 * and its script. */
static void renders_png(const PlotRequest *r)
{
    Err e;
    PlotData d;
    int rc = plot_read_inputs(r, &d, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    rc = plot_render(r, &d, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    FILE *f = fopen(r->output, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char magic[8] = {0};
    ck_assert_int_eq(fread(magic, 1, 8, f), 8);
    fclose(f);
    ck_assert_int_eq(memcmp(magic, "\x89PNG\r\n\x1a\n", 8), 0);
    unlink(r->output);
    char gp[80];
    snprintf(gp, sizeof gp, "%s.gp", r->output);
    unlink(gp);
}

START_TEST(render_png)
{
    const char *golden = getenv("GOLDEN_TRACE");
    ck_assert_ptr_nonnull(golden);
    char out[64] = "/tmp/fuyou-plot-XXXXXX.png";
    int fd = mkstemps(out, 4);
    ck_assert_int_ge(fd, 0);
    close(fd);
    renders_png(&(PlotRequest){.kind = PLOT_TIMELINE, .input = golden, .output = out, .iter = 1});
    /* a batch table as tools/regress.sh writes it, a NaN where a run was not measured */
    char tsv[64];
    tu_temp_file(tsv, sizeof tsv, ".tsv",
                 "model\tbatch\tpredicted_tflops\tmeasured_tflops\n"
                 "gpt3-2.7b\t8\t95.8\t101.2\ngpt3-2.7b\t32\t331.4\t304.7\n"
                 "gpt3-1.3b\t16\t120.0\tNaN\n");
    renders_png(&(PlotRequest){.kind = PLOT_BATCH, .input = tsv, .output = out});
    unlink(tsv);
    /* a joined table (fuyou-trace compare --tsv): each trace from its own first task */
    tu_temp_file(tsv, sizeof tsv, ".tsv",
                 "iter\ttask_id\tresource\tpred_start_s\tpred_end_s\tmeas_start_s\tmeas_end_s\n"
                 "1\tF.b0.qkv\tgpu\t0.5\t0.6\t0.9\t1.05\n"
                 "1\tH2D.b1.w\th2d\t0.5\t0.7\t0.9\t1.2\n");
    renders_png(&(PlotRequest){.kind = PLOT_COMPARE, .input = tsv, .output = out, .iter = 1});
    unlink(tsv);
    /* a sweep with a point that does not fit, drawn apart */
    tu_temp_file(tsv, sizeof tsv, ".tsv", PLOT_SWEEP_HEADER "\n0\t0\t1.5\t1.6\tgpu\t1\t0\n"
                 "1073741824\t4\t1.2\t1.3\tgpu\t1\t1\n2147483648\t8\t1.1\t1.15\tssd_read\t0\t0\n");
    renders_png(&(PlotRequest){.kind = PLOT_SWEEP, .input = tsv, .output = out});
    unlink(tsv);
    Err e;
    /* hostile titles through gnuplot itself: nothing runs; a newline is refused before it */
    char pwned[] = "/tmp/fuyou-plot-PWNED";
    unlink(pwned);
    char title[160];
    snprintf(title, sizeof title, "it's `touch %s` @x system('touch %s')", pwned, pwned);
    renders_png(&(PlotRequest){.kind = PLOT_TIMELINE, .input = golden, .output = out,
                               .iter = 1, .title = title});
    snprintf(title, sizeof title, "a'\nsystem 'touch %s'\n'", pwned);
    ck_assert_int_eq(plot_render(&(PlotRequest){.kind = PLOT_TIMELINE, .input = golden,
                                                .output = out, .iter = 1, .title = title},
                                 &(PlotData){0}, &e),
                     -EINVAL);
    ck_assert_int_ne(access(pwned, F_OK), 0);
    char gp[80];
    snprintf(gp, sizeof gp, "%s.gp", out);
    ck_assert_int_ne(access(gp, F_OK), 0); /* no script left behind */
    unlink(out);
}
END_TEST

static bool have_gnuplot(void)
{
    char *argv[] = {"gnuplot", "--version", NULL};
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    int err = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int st;
    return !err && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void)
{
    Suite *s = suite_create("plot");
    TCase *tc = tcase_create("plot");
    tcase_add_test(tc, scripts);
    tcase_add_test(tc, hostile_text_stays_text);
    tcase_add_test(tc, scripts_draw_what_inputs_hold);
    tcase_add_test(tc, read_inputs);
    tcase_add_test(tc, read_stops_at_first_bad_line);
    if (have_gnuplot())
        tcase_add_test(tc, render_png);
    else
        printf("render_png not run: gnuplot is not installed here (apt-get install "
               "gnuplot-nox)\n");
    suite_add_tcase(s, tc);
    return tu_run(s);
}
