/* Check suite for plots/plot: the gnuplot scripts (terminal by extension, columns of the trace
 * and sweep schemas), bad outputs, and, where gnuplot is installed (CI installs it), a real PNG
 * of the golden trace. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <spawn.h>
#include <sys/wait.h>

#include "plot.h"
#include "testutil.h"

extern char **environ;

static char *script(const PlotRequest *r, int *rc)
{
    static char buf[8192];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    Err e;
    *rc = plot_write_script(f, r, &e);
    fclose(f);
    return buf;
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
    /* a lane per resource of the schedule, from the top, then the rest */
    tu_assert_contains(s, "s eq 'gpu' ? 6 : s eq 'h2d' ? 5");
    tu_assert_contains(s, "'cpu_adam' 1, 'other' 0)");
    tu_assert_contains(s, "phase(strcol(4))"); /* phase column */
    tu_assert_contains(s, "'a.tsv' skip 1");
    PlotRequest w = {.kind = PLOT_SWEEP, .input = "it's.tsv", .output = "o.png"};
    s = script(&w, &rc);
    ck_assert_int_eq(rc, 0);
    tu_assert_contains(s, "pngcairo");
    tu_assert_contains(s, "'it''s.tsv'"); /* quotes doubled */
    tu_assert_contains(s, "($1 / 2**30):4"); /* sim_time_s is column 4 */
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
        ck_assert_int_eq(plot_write_script(f, &r, &e), -EINVAL);
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

/* Renders r (its output a .png) and checks gnuplot wrote a PNG; removes it and its script. */
static void renders_png(const PlotRequest *r)
{
    Err e;
    int rc = plot_render(r, &e);
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
    /* a joined table (fuyou-trace compare --tsv): each trace from its own first task; which
     * iterations it has (fuyou-plot refuses an --iter in no row: gnuplot would fail on it) */
    tu_temp_file(tsv, sizeof tsv, ".tsv",
                 "iter\ttask_id\tresource\tpred_start_s\tpred_end_s\tmeas_start_s\tmeas_end_s\n"
                 "1\tF.b0.qkv\tgpu\t0.5\t0.6\t0.9\t1.05\n"
                 "1\tH2D.b1.w\th2d\t0.5\t0.7\t0.9\t1.2\n");
    int lo, hi;
    Err e;
    ck_assert_int_eq(plot_find_iter(tsv, 1, &lo, &hi, &e), 1);
    ck_assert_int_eq(plot_find_iter(tsv, 2, &lo, &hi, &e), 0);
    ck_assert_int_eq(lo, 1);
    ck_assert_int_eq(hi, 1);
    ck_assert_int_lt(plot_find_iter("/nonexistent/j.tsv", 1, &lo, &hi, &e), 0);
    tu_assert_contains(e.msg, "/nonexistent/j.tsv");
    ck_assert_int_eq(plot_find_iter("/tmp", 1, &lo, &hi, &e), -EISDIR);
    renders_png(&(PlotRequest){.kind = PLOT_COMPARE, .input = tsv, .output = out, .iter = 1});
    unlink(tsv);
    /* hostile titles through gnuplot itself: nothing runs; a newline is refused before it */
    char pwned[] = "/tmp/fuyou-plot-PWNED";
    unlink(pwned);
    char title[160];
    snprintf(title, sizeof title, "it's `touch %s` @x system('touch %s')", pwned, pwned);
    renders_png(&(PlotRequest){.kind = PLOT_TIMELINE, .input = golden, .output = out,
                               .iter = 1, .title = title});
    snprintf(title, sizeof title, "a'\nsystem 'touch %s'\n'", pwned);
    ck_assert_int_eq(plot_render(&(PlotRequest){.kind = PLOT_TIMELINE, .input = golden,
                                                .output = out, .iter = 1, .title = title}, &e),
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
    if (have_gnuplot())
        tcase_add_test(tc, render_png);
    else
        printf("render_png not run: gnuplot is not installed here (apt-get install "
               "gnuplot-nox)\n");
    suite_add_tcase(s, tc);
    return tu_run(s);
}
