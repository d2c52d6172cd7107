/* Check suite for fuyou-plot's and fuyou-trace's command lines on hostile input: special
 * files that would hang gnuplot, dependency files with cycles or missing tasks, tables of the
 * wrong kind, NaN or garbage (one line, exit 2, no gnuplot), and the figures' scripts. Runs the
 * built binaries (FUYOU_PLOT, FUYOU_TRACE, FUYOU_SIM in the environment). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"

static char out[1 << 16];

/* fuyou-plot's inputs are regular files: gnuplot would read /dev/zero without end and wait on
 * a FIFO's writer (both hung before); a hostile title is refused, not run */
START_TEST(plot_refuses_what_would_hang)
{
    char out[4096], args[768], dir[] = "/tmp/fuyou-plot-fifo-XXXXXX", fifo[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/in.tsv", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *golden = getenv("GOLDEN_TRACE");
    const struct { const char *kind, *input, *measured, *says; } cases[] = {
        {"timeline", "/dev/zero", NULL, "/dev/zero: is a character device"},
        {"timeline", fifo, NULL, "is a FIFO (named pipe), not a regular file"},
        {"sweep", golden, "/dev/zero", "/dev/zero: is a character device"},
        {"timeline", "/tmp", NULL, "/tmp"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(args, sizeof args, "%s %s -o /tmp/fuyou-never.png%s%s", cases[i].kind,
                 cases[i].input, cases[i].measured ? " --measured " : "",
                 cases[i].measured ? cases[i].measured : "");
        ck_assert_msg(tu_run_bin("FUYOU_PLOT", args, out, sizeof out) == 2, "%s: %s", args, out);
        tu_assert_contains(out, cases[i].says);
    }
    snprintf(args, sizeof args, "timeline %s -o /tmp/fuyou-never.png --title \"$(printf "
             "'a\\nsystem \\\"touch /tmp/fuyou-PWNED\\\"')\"", golden);
    unlink("/tmp/fuyou-PWNED");
    ck_assert_msg(tu_run_bin("FUYOU_PLOT", args, out, sizeof out) == 2, "%s", out);
    tu_assert_contains(out, "--title: control character 0x0a");
    ck_assert_int_ne(access("/tmp/fuyou-PWNED", F_OK), 0);
    unlink(fifo);
    rmdir(dir);
}
END_TEST

/* ---- fuyou-trace's dependencies and fuyou-plot's inputs and figures ---------------------- */

/* Exactly one line of output, naming where and what: a refusal, not a dump of messages. */
static void assert_one_line(const char *out, const char *where, const char *what)
{
    tu_assert_contains(out, where);
    tu_assert_contains(out, what);
    const char *nl = strchr(out, '\n');
    ck_assert_msg(nl && !nl[1], "expected one line, got \"%s\"", out);
}

#define TRACE_HEAD "iter\ttask_id\tresource\tphase\tlayer\tstart_s\tend_s\tbytes\tflops\n"
#define DEPS_HEAD "iter\ttask_id\tdep_iter\tdep_task_id\n"

/* fuyou-trace compare --deps: a dependency naming a task the traces lack, or closing a cycle,
 * is refused with the row's file:line, status 2 (both were taken: the path skipped the one
 * and followed the other) */
START_TEST(trace_deps_refused)
{
    char dir[] = "/tmp/fuyou-deps-XXXXXX", trace[64], deps[64], args[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(trace, sizeof trace, "%s/t.tsv", dir);
    snprintf(deps, sizeof deps, "%s/d.tsv", dir);
    FILE *f = fopen(trace, "w");
    fputs(TRACE_HEAD "0\tA\th2d\tforward\t0\t0\t1\t8\t0\n0\tB\tgpu\tforward\t0\t1\t2\t0\t8\n"
          "0\tC\tgpu\tforward\t0\t2\t3\t0\t8\n", f);
    fclose(f);
    static const struct { const char *rows, *where, *what; } cases[] = {
        {"0\tB\t0\tA\n0\tC\t0\tB\n", NULL, NULL},
        {"0\tB\t0\tA\n0\tC\t0\tZ\n", ":3: ", "Z of iteration 0 is not in"},
        {"0\tQ\t0\tA\n", ":2: ", "Q of iteration 0 is not in"},
        {"0\tB\t0\tA\n0\tC\t0\tB\n0\tB\t0\tC\n", ":4: ", "cycle"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        f = fopen(deps, "w");
        fprintf(f, DEPS_HEAD "%s", cases[i].rows);
        fclose(f);
        snprintf(args, sizeof args, "compare %s %s --deps %s", trace, trace, deps);
        int rc = tu_run_bin("FUYOU_TRACE", args, out, sizeof out);
        if (!cases[i].where) {
            ck_assert_msg(rc == 0, "%s", out);
            tu_assert_contains(out, "critical path");
            continue;
        }
        ck_assert_msg(rc == 2, "case %zu: %s", i, out);
        char where[96];
        snprintf(where, sizeof where, "fuyou-trace: %s%s", deps, cases[i].where);
        assert_one_line(out, where, cases[i].what);
    }
    tu_rm_tree(dir);
}
END_TEST

#define SWEEP_HEAD "swap_bytes\tunits\tclosed_form_s\tsim_time_s\tbottleneck\tfits\tplanner\n"
#define JOINED_HEAD "iter\ttask_id\tresource\tpred_start_s\tpred_end_s\tmeas_start_s\tmeas_end_s\n"
#define BATCH_HEAD "model\tbatch\tpredicted_tflops\tmeasured_tflops\n"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* fuyou-plot reads every table it draws before gnuplot does: a file of the wrong kind, a NaN, a
 * missing column, binary garbage (100 MB of it, refused at its first line) are one line naming
 * file:line and what was expected, status 2, and gnuplot does not run (they drew a figure or
 * printed hundreds of gnuplot's lines) */
START_TEST(plot_refuses_bad_tables)
{
    char dir[] = "/tmp/fuyou-plot-in-XXXXXX", p[8][80], args[1024], png[96], gp[112];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *names[8] = {"sweep.tsv", "nan.tsv", "short.tsv", "sweepnan.tsv", "joined.tsv",
                            "garbage.bin", "batch.tsv", "meas.tsv"};
    for (int i = 0; i < 8; i++)
        snprintf(p[i], sizeof p[i], "%s/%s", dir, names[i]);
    write_file(p[0], SWEEP_HEAD "0\t0\t1.5\t1.6\tgpu\t1\t0\n1073741824\t4\t1.2\t1.3\tgpu\t1\t1\n");
    write_file(p[1], TRACE_HEAD "0\tA\tgpu\tforward\t0\t0\t1\t0\t8\n"
                     "0\tB\tgpu\tforward\t0\tnan\t2\t0\t8\n");
    write_file(p[2], TRACE_HEAD "0\tA\tgpu\tforward\t0\t0\t1\t0\n");
    write_file(p[3], SWEEP_HEAD "0\t0\t1.5\t1.6\tgpu\t1\t0\n1\t4\t1.2\tnan\tgpu\t1\t1\n");
    write_file(p[4], JOINED_HEAD "0\tA\tgpu\t0\t1\tNaN\t1.2\n");
    write_file(p[6], BATCH_HEAD "gpt3-2.7b\t8\t95.8\t101.2\ngpt3-2.7b\tx\t1\t1\n");
    write_file(p[7], "swap_bytes\tmeasured_s\n0\t1.7\n1073741824\t-inf\n");
    /* 100 MB of garbage: an ELF header and a hole that reads as zeros */
    int fd = open(p[5], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "\x7f" "ELF\x02\x01\x01", 7), 7);
    ck_assert_int_eq(ftruncate(fd, 100 << 20), 0);
    close(fd);
    const char *golden = getenv("GOLDEN_TRACE");
    const struct { const char *kind, *input, *measured, *where, *what; } cases[] = {
        {"timeline", p[0], NULL, ":1: ", "not a trace"},
        {"sweep", golden, NULL, ":1: ", "not a swap sweep table"},
        {"timeline", p[1], NULL, ":3: ", "start_s is not a finite number"},
        {"timeline", p[2], NULL, ":2: ", "expected 9 tab-separated fields, got 8"},
        {"sweep", p[3], NULL, ":3: ", "sim_time_s is not a finite number"},
        {"compare", p[0], NULL, ":1: ", "not a joined table"},
        {"scatter", p[4], NULL, ":2: ", "meas_start_s is not a finite number"},
        {"timeline", p[5], NULL, ":1: ", "not a trace"},
        {"batch", p[5], NULL, ":1: ", "not a batch table"},
        {"batch", p[6], NULL, ":3: ", "batch is not a finite number"},
        {"batch", golden, NULL, ":1: ", "not a batch table"},
        {"sweep", p[0], golden, ":1: ", "not a table of measured runs"},
        {"sweep", p[0], p[7], ":3: ", "measured_s is not a finite number"},
    };
    snprintf(png, sizeof png, "%s/out.png", dir);
    snprintf(gp, sizeof gp, "%s.gp", png);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(args, sizeof args, "%s %s -o %s%s%s", cases[i].kind, cases[i].input, png,
                 cases[i].measured ? " --measured " : "",
                 cases[i].measured ? cases[i].measured : "");
        int rc = tu_run_bin("FUYOU_PLOT", args, out, sizeof out);
        ck_assert_msg(rc == 2, "%s: status %d: %.300s", args, rc, out);
        char where[160];
        snprintf(where, sizeof where, "fuyou-plot: %s%s",
                 cases[i].measured ? cases[i].measured : cases[i].input, cases[i].where);
        assert_one_line(out, where, cases[i].what);
        ck_assert_msg(access(png, F_OK) && access(gp, F_OK), "%s: gnuplot ran", args);
    }
    tu_rm_tree(dir);
}
END_TEST

/* The script fuyou-plot wrote for args (its output dir/out.png, the script out.png.gp) in
 * script; status 0. */
static void plot_script(const char *dir, const char *args, char *script, size_t n)
{
    char cmd[1024], png[96], gp[112];
    snprintf(png, sizeof png, "%s/out.png", dir);
    snprintf(gp, sizeof gp, "%s.gp", png);
    snprintf(cmd, sizeof cmd, "%s -o %s", args, png);
    ck_assert_msg(tu_run_bin("FUYOU_PLOT", cmd, out, sizeof out) == 0, "%s: %s", cmd, out);
    FILE *f = fopen(gp, "r");
    ck_assert_ptr_nonnull(f);
    size_t len = fread(script, 1, n - 1, f);
    script[len] = '\0';
    fclose(f);
    ck_assert_int_eq(access(png, F_OK), 0);
    unlink(png);
    unlink(gp);
}

/* The figures: infeasible sweep points apart from the feasible ones, a timeline's lanes only
 * those with tasks (an always-empty "other" lane was drawn), a default title naming the kind
 * and the input, which --title replaces */
START_TEST(plot_figures)
{
    char dir[] = "/tmp/fuyou-plot-fig-XXXXXX", sweep[64], trace[64], joined[64], batch[64];
    char args[512], want[256];
    static char s[16384];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sweep, sizeof sweep, "%s/sweep.tsv", dir);
    snprintf(trace, sizeof trace, "%s/trace.tsv", dir);
    snprintf(joined, sizeof joined, "%s/joined.tsv", dir);
    snprintf(batch, sizeof batch, "%s/batch.tsv", dir);
    write_file(sweep, SWEEP_HEAD "0\t0\t1.5\t1.6\tgpu\t1\t0\n1073741824\t4\t1.2\t1.3\tgpu\t1\t1\n"
                      "2147483648\t8\t1.1\t1.15\tgpu\t0\t0\n");
    write_file(trace, TRACE_HEAD "0\tA\th2d\tforward\t0\t0\t1\t8\t0\n"
                      "0\tB\tgpu\tforward\t0\t1\t2\t0\t8\n"
                      "1\tC\tcpu_adam\toptimizer\t0\t2\t3\t0\t8\n");
    write_file(joined, JOINED_HEAD "0\tA\th2d\t0\t1\t0\t1.1\n0\tB\tgpu\t1\t2\t1.1\t2.3\n"
                       "1\tC\tgpu\t2\t3\t\t\n");
    write_file(batch, BATCH_HEAD "gpt3-2.7b\t8\t95.8\t101.2\ngpt3-1.3b\t16\t120.0\tNaN\n");

    snprintf(args, sizeof args, "sweep %s", sweep);
    plot_script(dir, args, s, sizeof s);
    tu_assert_contains(s, "title 'infeasible");
    tu_assert_contains(s, "$6 == 0");
    snprintf(want, sizeof want, "set title 'swap sweep: %s'", sweep);
    tu_assert_contains(s, want);

    /* iteration 0 has tasks on gpu and h2d only: two lanes, gpu on top */
    snprintf(args, sizeof args, "timeline %s --iter 0", trace);
    plot_script(dir, args, s, sizeof s);
    ck_assert_ptr_null(strstr(s, "'other'"));
    ck_assert_ptr_null(strstr(s, "'cpu_adam'"));
    tu_assert_contains(s, "set ytics ('gpu' 2, 'h2d' 1)");
    snprintf(want, sizeof want, "set title 'timeline: %s, iteration 0'", trace);
    tu_assert_contains(s, want);
    snprintf(args, sizeof args, "timeline %s", trace);
    plot_script(dir, args, s, sizeof s);
    tu_assert_contains(s, "set ytics ('gpu' 3, 'h2d' 2, 'cpu_adam' 1)");
    snprintf(args, sizeof args, "timeline %s --title \"it's mine\"", trace);
    plot_script(dir, args, s, sizeof s);
    tu_assert_contains(s, "set title 'it''s mine'\n");
    ck_assert_ptr_null(strstr(s, "set title 'timeline"));

    snprintf(args, sizeof args, "compare %s", joined);
    plot_script(dir, args, s, sizeof s);
    ck_assert_ptr_null(strstr(s, "'other'"));
    tu_assert_contains(s, "set ytics ('gpu' 2, 'h2d' 1)");
    snprintf(want, sizeof want, "set title 'predicted and measured timelines: %s'", joined);
    tu_assert_contains(s, want);
    snprintf(args, sizeof args, "scatter %s --iter 0", joined);
    plot_script(dir, args, s, sizeof s);
    snprintf(want, sizeof want, "set title 'task durations, measured against predicted: %s, "
             "iteration 0'", joined);
    tu_assert_contains(s, want);
    snprintf(args, sizeof args, "batch %s", batch);
    plot_script(dir, args, s, sizeof s);
    snprintf(want, sizeof want, "set title 'model TFLOPS against batch size: %s'", batch);
    tu_assert_contains(s, want);
    /* fuyou-sim's own sweep table is one fuyou-plot draws */
    snprintf(args, sizeof args, "--hw 4090.ini --model gpt3-1.3b --batch 8 --weights cpu "
             "--optim ssd --swap sweep --sweep-out %s", sweep);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "sweep %s", sweep);
    plot_script(dir, args, s, sizeof s);
    tu_rm_tree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_plot");
    TCase *tc = tcase_create("plot_trace");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, plot_refuses_what_would_hang);
    tcase_add_test(tc, trace_deps_refused);
    tcase_add_test(tc, plot_refuses_bad_tables);
    tcase_add_test(tc, plot_figures);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
