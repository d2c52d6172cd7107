/* fuyou-trace: traces after the fact. `compare` holds a predicted trace (fuyou-sim --trace)
 * against a measured one (fuyou-run --offload --trace) task by task; `export` turns a TSV trace
 * into Chrome/Perfetto JSON. Exit codes: 0 success, 1 an error above --max-error or a runtime
 * failure, 2 usage or input error. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "config.h"

static void usage(FILE *out)
{
    fprintf(out,
"usage: fuyou-trace compare PRED.tsv MEAS.tsv [--deps FILE] [--max-error X] [--tsv FILE]\n"
"       fuyou-trace export --chrome IN.tsv -o OUT.json\n"
"\n"
"compare   joins a predicted and a measured trace (the traces/ schema) on (iter, task_id) and\n"
"          reports the steady-state iteration time and its error, each phase's span and each\n"
"          resource's busy time per iteration, the distribution of per-task duration errors\n"
"          with the largest differences, the bottleneck of each, and the tasks present in one\n"
"          trace only\n"
"  --deps FILE     the schedule's dependencies (fuyou-sim --deps FILE, same model, plan and\n"
"                  iterations): also follow each trace's critical path, per resource (what\n"
"                  set the iteration's time) and as its longest runs of tasks; a row that\n"
"                  closes a cycle or names a task a trace lacks (in its iterations) is an\n"
"                  input error\n"
"  --max-error X   exit 1 when |iteration error| is above X (a fraction: 0.05 is 5%%)\n"
"  --tsv FILE      also write the joined table (iter task_id resource pred_start_s pred_end_s\n"
"                  meas_start_s meas_end_s)\n"
"export    writes a TSV trace as Chrome/Perfetto JSON, one lane per resource\n"
"  -h, --help, -V, --version\n"
"\n"
"Exit status: 0 success, 1 error above --max-error or a runtime failure, 2 usage or input "
"error.\n");
}

static int read_trace(const char *path, TraceTable *t)
{
    Err e;
    int rc = trace_read_tsv(path, t, &e);
    if (rc)
        fprintf(stderr, "fuyou-trace: %s\n", e.msg);
    return rc;
}

/* The dependencies at path, each row's tasks in both traces (a cycle or a task they lack is
 * refused): 0 or -errno with e. */
static int read_deps(const char *path, const char *const traces[2], const TraceTable *pred,
                     const TraceTable *meas, TraceDeps *d, Err *e)
{
    int rc = trace_read_deps(path, d, e);
    if (!rc)
        rc = trace_deps_check(d, path, pred, traces[0], e);
    return rc ? rc : trace_deps_check(d, path, meas, traces[1], e);
}

static int compare(int argc, char **argv)
{
    const char *paths[2] = {NULL, NULL}, *tsv = NULL, *deps_path = NULL;
    double max_error = -1;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--max-error") || !strcmp(argv[i], "--tsv") ||
            !strcmp(argv[i], "--deps")) {
            if (i + 1 == argc) {
                fprintf(stderr, "fuyou-trace: %s needs a value\n", argv[i]);
                return 2;
            }
            const char *opt = argv[i++];
            if (!strcmp(opt, "--tsv")) {
                tsv = argv[i];
                continue;
            }
            if (!strcmp(opt, "--deps")) {
                deps_path = argv[i];
                continue;
            }
            char *end;
            errno = 0;
            max_error = strtod(argv[i], &end);
            if (end == argv[i] || *end || errno || !(max_error >= 0) || isinf(max_error)) {
                fprintf(stderr, "fuyou-trace: --max-error expects a fraction >= 0 such as "
                        "0.05, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "fuyou-trace: unknown option '%s'; see fuyou-trace --help\n",
                    argv[i]);
            return 2;
        } else if (n < 2) {
            paths[n++] = argv[i];
        } else {
            fprintf(stderr, "fuyou-trace: compare takes two traces, got a third: '%s'\n",
                    argv[i]);
            return 2;
        }
    }
    if (n < 2) {
        fprintf(stderr, "fuyou-trace: compare needs PRED.tsv and MEAS.tsv; see --help\n");
        return 2;
    }
    TraceTable pred = {0}, meas = {0};
    TraceDeps deps = {0};
    int status = 2;
    Err e;
    if (read_trace(paths[0], &pred) || read_trace(paths[1], &meas))
        goto out;
    int rc = deps_path ? read_deps(deps_path, paths, &pred, &meas, &deps, &e) : 0;
    if (rc) {
        fprintf(stderr, "fuyou-trace: %s\n", e.msg);
        status = rc == -ENOMEM ? 1 : 2;
        goto out;
    }
    TraceCompare c;
    rc = trace_compare(&pred, &meas, &c, &e);
    if (!rc && deps_path)
        rc = trace_compare_paths(&pred, &meas, &deps, &c, &e);
    if (rc) {
        fprintf(stderr, "fuyou-trace: %s vs %s: %s\n", paths[0], paths[1], e.msg);
        status = rc == -ENOMEM ? 1 : 2;
        goto out;
    }
    printf("predicted %s, measured %s\n", paths[0], paths[1]);
    trace_compare_print(stdout, &c);
    status = 0;
    if (tsv) {
        FILE *f = fopen(tsv, "w");
        if (!f || trace_write_joined(f, tsv, &pred, &meas, &e)) {
            fprintf(stderr, "fuyou-trace: %s: %s\n", tsv, f ? e.msg : strerror(errno));
            status = f ? 1 : 2;
        }
        if (f && fclose(f) && !status) {
            fprintf(stderr, "fuyou-trace: %s: write failed\n", tsv);
            status = 1;
        }
    }
    if (!status && max_error >= 0 && fabs(c.iter_error) > max_error) {
        fprintf(stderr, "fuyou-trace: iteration error %+.1f%% is above --max-error %.1f%%\n",
                100 * c.iter_error, 100 * max_error);
        status = 1;
    }
out:
    trace_table_free(&pred);
    trace_table_free(&meas);
    trace_deps_free(&deps);
    return status;
}

static int export_chrome(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--chrome") && i + 1 < argc)
            in = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "fuyou-trace: export takes --chrome IN.tsv -o OUT.json, got '%s'\n",
                    argv[i]);
            return 2;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "fuyou-trace: export needs --chrome IN.tsv and -o OUT.json\n");
        return 2;
    }
    TraceTable t = {0};
    if (read_trace(in, &t))
        return 2;
    if (!t.n) { /* an empty timeline would open as an empty view, as if exported */
        fprintf(stderr, "fuyou-trace: %s has no task rows (its header alone); nothing to "
                "export\n", in);
        trace_table_free(&t);
        return 2;
    }
    Err e;
    int rc = trace_save(out, TRACE_CHROME, t.rows, t.n, &e);
    if (rc)
        fprintf(stderr, "fuyou-trace: %s\n", e.msg);
    trace_table_free(&t);
    return !rc ? 0 : rc == -EIO ? 1 : 2; /* a file that cannot be opened is the caller's */
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
        printf("fuyou-trace %s\n", FUYOU_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "compare"))
        return compare(argc - 2, argv + 2);
    if (!strcmp(argv[1], "export"))
        return export_chrome(argc - 2, argv + 2);
    fprintf(stderr, "fuyou-trace: unknown command '%s' (compare, export); see fuyou-trace "
            "--help\n", argv[1]);
    return 2;
}
