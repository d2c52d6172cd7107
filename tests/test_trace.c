/* Check suite for traces/trace: the TSV schema byte for byte, the Chrome export's lanes, the
 * task -> row mapping, the TSV reader (round trip and its one-line errors), the dependencies
 * file, and critpath's path on a trace whose path is known. */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdbool.h>

#include "testutil.h"
#include "compare.h"
#include "critpath.h"
#include "trace.h"

static const TraceRow rows[] = {
    {0, "F.b0.qkv", "gpu", "forward", 0, 0.5, 1.25, 0, 6e12},
    {1, "SSDR.g3.state", "ssd_read", "optimizer", 9, 2, 3.000000001, 123456789, 0},
    {0, "X.custom", "nic", "forward", -1, 0, 1e-6, 1, 0},
};

static char *write_to_string(bool chrome)
{
    static char buf[8192];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    Err e;
    int rc = chrome ? trace_write_chrome(f, "mem", rows, 3, &e)
                    : trace_write_tsv(f, "mem", rows, 3, &e);
    ck_assert_int_eq(rc, 0);
    fclose(f);
    return buf;
}

START_TEST(tsv)
{
    ck_assert_str_eq(write_to_string(false),
                     "iter\ttask_id\tresource\tphase\tlayer\tstart_s\tend_s\tbytes\tflops\n"
                     "0\tF.b0.qkv\tgpu\tforward\t0\t0.500000000\t1.250000000\t0\t6000000000000\n"
                     "1\tSSDR.g3.state\tssd_read\toptimizer\t9\t2.000000000\t3.000000001\t"
                     "123456789\t0\n"
                     "0\tX.custom\tnic\tforward\t-1\t0.000000000\t0.000001000\t1\t0\n");
}
END_TEST

START_TEST(chrome)
{
    const char *s = write_to_string(true);
    tu_assert_contains(s, "\"name\": \"F.b0.qkv\", \"cat\": \"forward\", \"ph\": \"X\", "
                          "\"pid\": 1, \"tid\": 0, \"ts\": 500000.000, \"dur\": 750000.000");
    tu_assert_contains(s, "\"tid\": 3, \"ts\": 2000000.000"); /* ssd_read is lane 3 */
    /* an unknown resource gets a lane of its own after the known ones, named */
    tu_assert_contains(s, "\"tid\": 6, \"ts\": 0.000");
    tu_assert_contains(s, "\"tid\": 6, \"args\": {\"name\": \"nic\"}");
    tu_assert_contains(s, "\"args\": {\"name\": \"cpu_adam\"}");
    ck_assert_ptr_nonnull(strstr(s, "]}\n"));
}
END_TEST

START_TEST(row_from_task)
{
    Task t = {.id = "B.b3.fc1", .res = RES_SSD_READ, .kind = TASK_BWD, .phase = PHASE_BACKWARD,
              .iter = 0, .layer = 3, .op = 7, .bytes = 4096, .flops = 2.5e9};
    TraceRow r;
    trace_row_from_task(&r, &t, 5, 1.5, 2.25);
    ck_assert_int_eq(r.iter, 5); /* the iteration passed, not the template's t.iter */
    ck_assert_str_eq(r.task_id, "B.b3.fc1");
    ck_assert_ptr_eq(r.task_id, t.id);
    ck_assert_str_eq(r.resource, "ssd_read");
    ck_assert_str_eq(r.phase, "backward");
    ck_assert_int_eq(r.layer, 3);
    ck_assert_double_eq(r.start_s, 1.5);
    ck_assert_double_eq(r.end_s, 2.25);
    ck_assert_double_eq(r.bytes, 4096);
    ck_assert_double_eq(r.flops, 2.5e9);

    t = (Task){.id = "ADAM.g0", .res = RES_CPU_ADAM, .phase = PHASE_OPTIMIZER, .layer = -1};
    trace_row_from_task(&r, &t, 0, 0, 0);
    ck_assert_str_eq(r.resource, "cpu_adam");
    ck_assert_str_eq(r.phase, "optimizer");
    ck_assert_int_eq(r.layer, -1);
}
END_TEST

START_TEST(read_round_trip)
{
    char path[64];
    tu_temp_file(path, sizeof path, ".tsv", "");
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    Err e = {{0}};
    /* the first two: the third's resource is none of the schedule's, which a reader refuses */
    ck_assert_int_eq(trace_write_tsv(f, path, rows, 2, &e), 0);
    ck_assert_int_eq(fclose(f), 0);

    TraceTable t;
    int rc = trace_read_tsv(path, &t, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_int_eq(t.n, 2);
    for (int i = 0; i < 2; i++) {
        const TraceRow *a = &rows[i], *b = &t.rows[i];
        ck_assert_int_eq(b->iter, a->iter);
        ck_assert_str_eq(b->task_id, a->task_id);
        ck_assert_str_eq(b->resource, a->resource);
        ck_assert_str_eq(b->phase, a->phase);
        ck_assert_int_eq(b->layer, a->layer);
        /* %.9f and %.0f print these exactly: strtod gives back the same doubles */
        ck_assert_double_eq(b->start_s, a->start_s);
        ck_assert_double_eq(b->end_s, a->end_s);
        ck_assert_double_eq(b->bytes, a->bytes);
        ck_assert_double_eq(b->flops, a->flops);
    }
    trace_table_free(&t);
    ck_assert_ptr_null(t.rows);
    ck_assert_int_eq(t.n, 0);
    trace_table_free(&t); /* twice is safe */
    unlink(path);
}
END_TEST

/* More than getline's first buffer and any fixed line buffer: the reader has no line limit. */
START_TEST(read_long_line)
{
    enum { ID_LEN = 20000 };
    static char id[ID_LEN + 1], text[ID_LEN + 256];
    memset(id, 'x', ID_LEN);
    snprintf(text, sizeof text, TRACE_TSV_HEADER "\n3\t%s\tgpu\tforward\t1\t0\t1\t0\t0\n", id);
    char path[64];
    tu_temp_file(path, sizeof path, ".tsv", text);
    TraceTable t;
    Err e = {{0}};
    int rc = trace_read_tsv(path, &t, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_int_eq(t.n, 1);
    ck_assert_int_eq(t.rows[0].iter, 3);
    ck_assert_str_eq(t.rows[0].task_id, id);
    ck_assert_str_eq(t.rows[0].resource, "gpu");
    trace_table_free(&t);
    unlink(path);
}
END_TEST

START_TEST(read_header_only)
{
    char path[64];
    tu_temp_file(path, sizeof path, ".tsv", TRACE_TSV_HEADER "\n");
    TraceTable t;
    Err e = {{0}};
    ck_assert_int_eq(trace_read_tsv(path, &t, &e), 0);
    ck_assert_int_eq(t.n, 0);
    trace_table_free(&t);
    unlink(path);
}
END_TEST

/* Reads text, expects -EINVAL with "PATH:LINE: what" in the message and an empty table. */
static void expect_bad(const char *text, int line, const char *what)
{
    char path[64], where[128];
    tu_temp_file(path, sizeof path, ".tsv", text);
    TraceTable t;
    Err e = {{0}};
    ck_assert_int_eq(trace_read_tsv(path, &t, &e), -EINVAL);
    snprintf(where, sizeof where, "%s:%d: ", path, line);
    tu_assert_contains(e.msg, where);
    tu_assert_contains(e.msg, what);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    ck_assert_ptr_null(t.rows);
    ck_assert_ptr_null(t.strings);
    ck_assert_int_eq(t.n, 0);
    trace_table_free(&t);
    unlink(path);
}

#define GOOD_ROW "0\tF.b0.qkv\tgpu\tforward\t0\t0.5\t1.25\t0\t6e12\n"

START_TEST(read_errors)
{
    expect_bad("iter\ttask_id\tresource\n" GOOD_ROW, 1, "not a trace TSV");
    expect_bad("", 1, "empty file");
    expect_bad(TRACE_TSV_HEADER "\n" GOOD_ROW "0\tF.b0.qkv\tgpu\tforward\t0\t0.5\t1.25\n", 3,
               "expected 9 tab-separated fields, got 7");
    expect_bad(TRACE_TSV_HEADER "\n" GOOD_ROW GOOD_ROW "0\tF\tgpu\tforward\t0\t0\t1\t0\t0\textra\n",
               4, "expected 9 tab-separated fields, got 10");
    expect_bad(TRACE_TSV_HEADER "\n0\tF.b0.qkv\tgpu\tforward\t0\tsoon\t1.25\t0\t0\n", 2,
               "start_s is not a finite number: \"soon\"");
    expect_bad(TRACE_TSV_HEADER "\n" GOOD_ROW "0\tF\tgpu\tforward\t0\t0\t1\t0\tinf\n", 3,
               "flops is not a finite number");
    expect_bad(TRACE_TSV_HEADER "\n" GOOD_ROW "0\tF\tgpu\tforward\t0\t0\t1\t12abc\t0\n", 3,
               "bytes is not a finite number");
    expect_bad(TRACE_TSV_HEADER "\n1.5\tF\tgpu\tforward\t0\t0\t1\t0\t0\n", 2,
               "iter is not an integer");
    expect_bad(TRACE_TSV_HEADER "\n1\tF\tgpu\tforward\t\t0\t1\t0\t0\n", 2,
               "layer is not an integer");
    expect_bad(TRACE_TSV_HEADER "\n" GOOD_ROW "1\tF\tgpu\tforward\t0\t2\t1\t0\t0\n", 3,
               "end_s 1.000000000 is before start_s 2.000000000");
    /* what fuyou-trace took and then compared into nonsense */
    expect_bad(TRACE_TSV_HEADER "\n" GOOD_ROW "1\tF\tgpu\tforward\t0\t0\t1e300\t0\t0\n", 3,
               "times 0 to 1e+300 s: a trace's are 0 to 1e+09 s");
    expect_bad(TRACE_TSV_HEADER "\n" GOOD_ROW "1\tF\tgpu\tforward\t0\t-2\t1\t0\t0\n", 3,
               "times -2 to 1 s");
    expect_bad(TRACE_TSV_HEADER "\n-1\tF\tgpu\tforward\t0\t0\t1\t0\t0\n", 2,
               "iter is -1; iterations count from 0");
    expect_bad(TRACE_TSV_HEADER "\n" GOOD_ROW "1\tF\tnic\tforward\t0\t0\t1\t0\t0\n", 3,
               "resource \"nic\" is none of the schedule's");
    expect_bad(TRACE_TSV_HEADER "\n1\tF\tgpu\tforward\t0\t0\t1\t-5\t0\n", 2,
               "bytes -5, flops 0: neither may be negative");
    expect_bad(TRACE_TSV_HEADER "\n1\t\tgpu\tforward\t0\t0\t1\t0\t0\n", 2,
               "the task id is empty");
    /* a task twice in one iteration (the same id in another is another task) */
    char path[64];
    tu_temp_file(path, sizeof path, ".tsv",
                 TRACE_TSV_HEADER "\n" GOOD_ROW "1\tF.b0.qkv\tgpu\tforward\t0\t0\t1\t0\t0\n"
                 GOOD_ROW);
    TraceTable t;
    Err e = {{0}};
    ck_assert_int_eq(trace_read_tsv(path, &t, &e), -EINVAL);
    tu_assert_contains(e.msg, "task F.b0.qkv of iteration 0 has two rows (rows 1 and 3");
    ck_assert_ptr_null(t.rows);
    unlink(path);
}
END_TEST

START_TEST(read_missing_file)
{
    const char *path = "/tmp/fuyou-test-no-such-dir/t.tsv";
    TraceTable t;
    Err e = {{0}};
    ck_assert_int_eq(trace_read_tsv(path, &t, &e), -ENOENT);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, strerror(ENOENT));
    trace_table_free(&t);
}
END_TEST

/* compare: two small traces whose figures are known */
static TraceRow pred_rows[6], meas_rows[6];

static TraceTable table(TraceRow *r, int n)
{
    return (TraceTable){.rows = r, .n = n};
}

START_TEST(compare_known)
{
    /* predicted: per iteration a gpu task [i, i + 1] and an h2d task [i, i + 0.5] */
    int np = 0, nm = 0;
    for (int i = 0; i < 3; i++) {
        pred_rows[np++] = (TraceRow){i, "F.b0.qkv", "gpu", "forward", 0, i, i + 1.0, 0, 1};
        pred_rows[np++] = (TraceRow){i, "H2D.b0.w", "h2d", "forward", 0, i, i + 0.5, 1, 0};
    }
    /* measured: the gpu tasks 20% longer and the iterations 1.2 s apart; iteration 2's H2D
     * missing, an extra task in iteration 1 */
    for (int i = 0; i < 3; i++) {
        meas_rows[nm++] = (TraceRow){i, "F.b0.qkv", "gpu", "forward", 0, 1.2 * i, 1.2 * i + 1.2,
                                     0, 1};
        if (i < 2)
            meas_rows[nm++] = (TraceRow){i, "H2D.b0.w", "h2d", "forward", 0, 1.2 * i,
                                         1.2 * i + 0.5, 1, 0};
    }
    meas_rows[nm++] = (TraceRow){1, "D2H.b0.grad", "d2h", "backward", 0, 1.5, 1.6, 1, 0};
    TraceTable p = table(pred_rows, np), m = table(meas_rows, nm);
    TraceCompare c;
    Err e;
    ck_assert_int_eq(trace_compare(&p, &m, &c, &e), 0);
    ck_assert_int_eq(c.iters, 3);
    ck_assert_int_eq(c.steady_from, 1);
    ck_assert_int_eq(c.matched, 5);
    ck_assert_int_eq(c.only_pred, 1);
    ck_assert_int_eq(c.only_meas, 1);
    tu_assert_contains(c.example_only_pred, "H2D.b0.w (iteration 2)");
    tu_assert_contains(c.example_only_meas, "D2H.b0.grad (iteration 1)");
    ck_assert_double_eq_tol(c.pred_iter_s, 1.0, 1e-12);
    ck_assert_double_eq_tol(c.meas_iter_s, 1.2, 1e-12);
    ck_assert_double_eq_tol(c.iter_error, 0.2, 1e-12);
    ck_assert_double_eq_tol(c.pred_busy_s[RES_GPU], 1.0, 1e-12);
    ck_assert_double_eq_tol(c.meas_busy_s[RES_GPU], 1.2, 1e-12);
    ck_assert_double_eq_tol(c.meas_busy_s[RES_H2D], 0.25, 1e-12); /* 0.5 over two iterations */
    ck_assert_int_eq(c.meas_bottleneck, RES_GPU);
    /* steady matched tasks: two gpu (+20%) and one h2d (0%) */
    ck_assert_int_eq(c.timed, 3);
    ck_assert_double_eq_tol(c.dur_err_median, 0.2, 1e-9);
    ck_assert_double_eq_tol(c.dur_err_p90, 0.2, 1e-9);
    ck_assert_int_eq(c.n_worst, 3);
    ck_assert_str_eq(c.worst[0].id, "F.b0.qkv");
    /* nothing in common */
    TraceRow other = {5, "X", "gpu", "forward", 0, 0, 1, 0, 0};
    TraceTable o = table(&other, 1);
    ck_assert_int_eq(trace_compare(&p, &o, &c, &e), -EINVAL);
    tu_assert_contains(e.msg, "share no task");
}
END_TEST

/* The dependencies file: written from a schedule, read back edge for edge; its errors */
START_TEST(deps_round_trip)
{
    Task tasks[3] = {{.id = "H2D.b0.w", .res = RES_H2D, .iter = 0},
                     {.id = "F.b0.qkv", .res = RES_GPU, .iter = 0, .dep_first = 0, .n_deps = 1},
                     {.id = "H2D.b0.w", .res = RES_H2D, .iter = 1, .dep_first = 1, .n_deps = 2}};
    int deps[3] = {0, 1, 0};
    Schedule s = {.tasks = tasks, .n_tasks = 3, .deps = deps, .n_deps = 3, .iters = 2};
    char path[64];
    tu_temp_file(path, sizeof path, ".tsv", "");
    FILE *f = fopen(path, "w");
    Err e;
    ck_assert_int_eq(trace_write_deps(f, path, &s, &e), 0);
    fclose(f);
    TraceDeps d;
    ck_assert_int_eq(trace_read_deps(path, &d, &e), 0);
    ck_assert_int_eq(d.n, 3);
    ck_assert_int_eq(d.edges[0].iter, 0);
    ck_assert_str_eq(d.edges[0].task_id, "F.b0.qkv");
    ck_assert_str_eq(d.edges[0].dep_id, "H2D.b0.w");
    ck_assert_int_eq(d.edges[2].iter, 1);
    ck_assert_str_eq(d.edges[2].task_id, "H2D.b0.w");
    ck_assert_int_eq(d.edges[2].dep_iter, 0);
    ck_assert_str_eq(d.edges[2].dep_id, "H2D.b0.w");
    trace_deps_free(&d);
    trace_deps_free(&d); /* twice is safe */
    unlink(path);

    static const struct { const char *text; int line; const char *what; } bad[] = {
        {"iter\ttask_id\n", 1, "not a dependencies TSV"},
        {"", 1, "empty file"},
        {TRACE_DEPS_HEADER "\n0\tA\t0\n", 2, "expected 4 tab-separated fields, got 3"},
        {TRACE_DEPS_HEADER "\n0\tA\t0\tB\n0\tA\tx\tB\n", 3, "dep_iter is not an integer"},
        {TRACE_DEPS_HEADER "\n0\t\t0\tB\n", 2, "a task id is empty"},
        {TRACE_DEPS_HEADER "\n1\tA\t1\tA\n", 2, "A depends on itself"},
        {TRACE_DEPS_HEADER "\n1\tA\t2\tB\n", 2, "dep_iter 2: a task depends on its own"},
        {TRACE_DEPS_HEADER "\n0\tA\t-1\tB\n", 2, "dep_iter -1"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char where[128];
        tu_temp_file(path, sizeof path, ".tsv", bad[k].text);
        ck_assert_int_eq(trace_read_deps(path, &d, &e), -EINVAL);
        snprintf(where, sizeof where, "%s:%d: ", path, bad[k].line);
        tu_assert_contains(e.msg, where);
        tu_assert_contains(e.msg, bad[k].what);
        ck_assert_ptr_null(d.edges);
        ck_assert_int_eq(d.n, 0);
        unlink(path);
    }
    ck_assert_int_eq(trace_read_deps("/nonexistent/deps.tsv", &d, &e), -ENOENT);
    /* a FIFO named as a trace is refused before it is opened (opening would wait for a
     * writer), and so is a directory */
    char dir[] = "/tmp/fuyou-trace-XXXXXX", fifo[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/pred.tsv", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(trace_read_deps(fifo, &d, &e), -EINVAL);
    tu_assert_contains(e.msg, "is a FIFO");
    TraceTable t;
    ck_assert_int_eq(trace_read_tsv(fifo, &t, &e), -EINVAL);
    ck_assert_int_eq(trace_read_tsv(dir, &t, &e), -EISDIR);
    unlink(fifo);
    rmdir(dir);
}
END_TEST

/* A dependencies file must be a DAG: the row that closes a cycle is named (the last of the
 * cycle's rows in the file), however long the cycle; a long chain is read without recursion */
START_TEST(deps_cycles)
{
    static const struct { const char *rows; int line; const char *what; } bad[] = {
        {"0\tA\t0\tB\n0\tB\t0\tA\n", 3, "B (iteration 0) waiting for A closes a cycle of 2 "
         "dependencies"},
        /* A before the cycle, E after it, another iteration's A apart */
        {"1\tA\t0\tA\n1\tB\t1\tA\n1\tC\t1\tB\n1\tD\t1\tC\n1\tB\t1\tD\n1\tE\t1\tD\n", 6,
         "B (iteration 1) waiting for D closes a cycle of 3 dependencies"},
    };
    char path[64], where[192];
    TraceDeps d;
    Err e = {{0}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[512];
        snprintf(text, sizeof text, TRACE_DEPS_HEADER "\n%s", bad[k].rows);
        tu_temp_file(path, sizeof path, ".tsv", text);
        ck_assert_int_eq(trace_read_deps(path, &d, &e), -EINVAL);
        snprintf(where, sizeof where, "%s:%d: ", path, bad[k].line);
        tu_assert_contains(e.msg, where);
        tu_assert_contains(e.msg, bad[k].what);
        ck_assert_ptr_null(d.edges);
        unlink(path);
    }
    /* 200000 tasks in a chain (a recursive search would need as many frames), then the same
     * with its first task waiting for its last */
    enum { CHAIN = 200000 };
    for (int closed = 0; closed < 2; closed++) {
        tu_temp_file(path, sizeof path, ".tsv", TRACE_DEPS_HEADER "\n");
        FILE *f = fopen(path, "a");
        ck_assert_ptr_nonnull(f);
        for (int i = 1; i < CHAIN; i++)
            fprintf(f, "0\tT%d\t0\tT%d\n", i, i - 1);
        if (closed)
            fprintf(f, "0\tT0\t0\tT%d\n", CHAIN - 1);
        ck_assert_int_eq(fclose(f), 0);
        int rc = trace_read_deps(path, &d, &e);
        if (closed) {
            ck_assert_int_eq(rc, -EINVAL);
            snprintf(where, sizeof where, "%s:%d: T0 (iteration 0) waiting for T%d closes a "
                     "cycle of %d dependencies", path, CHAIN + 1, CHAIN - 1, CHAIN);
            tu_assert_contains(e.msg, where);
        } else {
            ck_assert_msg(rc == 0, "%s", e.msg);
            ck_assert_int_eq(d.n, CHAIN - 1);
            trace_deps_free(&d);
        }
        unlink(path);
    }
}
END_TEST

/* Every dependency's two tasks are in the trace, in the iterations it has: the first row that
 * names one it lacks is refused with its line */
START_TEST(deps_check_trace)
{
    TraceRow r[] = {{0, "A", "h2d", "forward", 0, 0, 1, 8, 0},
                    {0, "B", "gpu", "forward", 0, 1, 2, 0, 8},
                    {1, "A", "h2d", "forward", 0, 2, 3, 8, 0}};
    TraceTable t = {.rows = r, .n = 3};
    TraceDep ok[] = {{0, 0, "B", "A", 2}, {1, 0, "A", "B", 3}, {2, 1, "X", "A", 4}};
    TraceDeps d = {.edges = ok, .n = 3};
    Err e;
    /* iteration 2 is after the trace's last: a shorter run's trace */
    ck_assert_int_eq(trace_deps_check(&d, "d.tsv", &t, "t.tsv", &e), 0);
    static const struct { TraceDep dep; const char *says; } bad[] = {
        {{0, 0, "C", "A", 7}, "d.tsv:7: task C of iteration 0 is not in t.tsv"},
        {{1, 1, "A", "B", 9}, "d.tsv:9: the dependency B of iteration 1 is not in t.tsv"},
        {{1, 0, "A", "a", 5}, "d.tsv:5: the dependency a of iteration 0"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        TraceDep two[] = {ok[0], bad[k].dep};
        d = (TraceDeps){.edges = two, .n = 2};
        ck_assert_int_eq(trace_deps_check(&d, "d.tsv", &t, "t.tsv", &e), -EINVAL);
        tu_assert_contains(e.msg, bad[k].says);
    }
}
END_TEST

/* critpath: two iterations of A (h2d), B and C (gpu, C after A), D (cpu_adam, after C), the
 * second iteration's A after the first's D; each iteration starts 10 s after the one before.
 * Iteration 1's path: D <- C (0.2 s waiting) <- B (the lane binds C: B ends after A; 0.5 s
 * waiting) <- the previous iteration's end (B's lane binder, the first C, ended before it; 1 s
 * waiting): gpu 2 + 2.5, cpu_adam 3.8, waiting 1.7, which add up to the iteration's 10 s. */
START_TEST(critical_path_known)
{
    TraceRow r[8];
    int n = 0;
    for (int i = 0; i < 2; i++) {
        double b = 10.0 * i;
        r[n++] = (TraceRow){i, "A", "h2d", "forward", 0, b + 0, b + 2, 1, 0};
        r[n++] = (TraceRow){i, "B", "gpu", "forward", 0, b + 1, b + 3, 0, 1};
        r[n++] = (TraceRow){i, "C", "gpu", "backward", 0, b + 3.5, b + 6, 0, 1};
        r[n++] = (TraceRow){i, "D", "cpu_adam", "optimizer", 0, b + 6.2, b + 10, 0, 0};
    }
    TraceDep e_[] = {{0, 0, "C", "A", 2},       {0, 0, "D", "C", 3}, {1, 1, "C", "A", 4},
                     {1, 1, "D", "C", 5},       {1, 0, "A", "D", 6},
                     {1, 0, "A", "nowhere", 7}};
    TraceTable t = {.rows = r, .n = n};
    TraceDeps d = {.edges = e_, .n = 6};
    CritPath cp;
    Err e;
    ck_assert_int_eq(trace_critical_path(&t, &d, 1, 2, &cp, &e), 0);
    ck_assert_int_eq(cp.iters, 1);
    ck_assert_int_eq(cp.unresolved, 1);
    ck_assert_double_eq_tol(cp.res_s[RES_GPU], 4.5, 1e-12);
    ck_assert_double_eq_tol(cp.res_s[RES_CPU_ADAM], 3.8, 1e-12);
    ck_assert_double_eq_tol(cp.res_s[RES_H2D], 0, 1e-12);
    ck_assert_double_eq_tol(cp.wait_s, 1.7, 1e-12);
    ck_assert_int_eq(cp.iter_shown, 1);
    ck_assert_int_eq(cp.n_runs, 2);
    ck_assert_int_eq(cp.n_runs_total, 2);
    ck_assert_int_eq(cp.runs[0].res, RES_GPU);
    ck_assert_int_eq(cp.runs[0].tasks, 2);
    ck_assert_str_eq(cp.runs[0].first, "B");
    ck_assert_str_eq(cp.runs[0].last, "C");
    ck_assert_double_eq_tol(cp.runs[0].wait_s, 1.5, 1e-12);
    ck_assert_int_eq(cp.runs[1].res, RES_CPU_ADAM);
    ck_assert_double_eq_tol(cp.runs[1].busy_s, 3.8, 1e-12);
    /* iteration 0, from its first start (A's, at 0): the same path, B binds to nothing and
     * its 1 s after that start is waiting */
    ck_assert_int_eq(trace_critical_path(&t, &d, 0, 1, &cp, &e), 0);
    ck_assert_double_eq_tol(cp.res_s[RES_GPU], 4.5, 1e-12);
    ck_assert_double_eq_tol(cp.wait_s, 1.7, 1e-12);
    /* an iteration the trace lacks */
    ck_assert_int_eq(trace_critical_path(&t, &d, 1, 3, &cp, &e), -EINVAL);
    tu_assert_contains(e.msg, "iteration 2 has no task");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_test(tc, tsv);
    tcase_add_test(tc, chrome);
    tcase_add_test(tc, row_from_task);
    tcase_add_test(tc, read_round_trip);
    tcase_add_test(tc, read_long_line);
    tcase_add_test(tc, read_header_only);
    tcase_add_test(tc, read_errors);
    tcase_add_test(tc, read_missing_file);
    tcase_add_test(tc, compare_known);
    tcase_add_test(tc, deps_round_trip);
    tcase_add_test(tc, deps_cycles);
    tcase_add_test(tc, deps_check_trace);
    tcase_add_test(tc, critical_path_known);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
