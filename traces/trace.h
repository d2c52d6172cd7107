/* trace: one schema for predicted and measured timelines (ARCHITECTURE.md, "Traces").
 *
 * Tab-separated, a header line, one task per line:
 *   iter  task_id  resource  phase  layer  start_s  end_s  bytes  flops
 * task_id is the schedule's stable id, so a predicted and a measured trace align task by task.
 * The Chrome/Perfetto export puts each resource in its own lane (Perfetto does not draw
 * overlapping events in one lane). This module formats and reads traces; it neither simulates
 * nor measures. */
#ifndef FUYOU_TRACE_H
#define FUYOU_TRACE_H

#include <stdio.h>

#include "fuyou_err.h"
#include "schedule.h"

typedef struct TraceRow {
    int iter;
    const char *task_id;
    const char *resource; /* gpu, h2d, d2h, ssd_read, ssd_write, cpu_adam, ... */
    const char *phase;    /* forward, backward, optimizer */
    int layer;
    double start_s, end_s;
    double bytes, flops;
} TraceRow;

#define TRACE_TSV_HEADER "iter\ttask_id\tresource\tphase\tlayer\tstart_s\tend_s\tbytes\tflops"

/* Write n rows. Return 0 or -EIO (e names path, which is used for messages only). */
int trace_write_tsv(FILE *f, const char *path, const TraceRow *rows, int n, Err *e);
int trace_write_chrome(FILE *f, const char *path, const TraceRow *rows, int n, Err *e);

typedef enum TraceFormat { TRACE_TSV, TRACE_CHROME } TraceFormat;
/* Writes n rows to the file at path (created or truncated) in fmt. 0; -errno when it cannot be
 * opened, -EIO when writing fails (e names path either way). */
int trace_save(const char *path, TraceFormat fmt, const TraceRow *rows, int n, Err *e);

/* Fills *row for task t run as iteration iter over [start_s, end_s]: the one mapping from a
 * schedule task to a trace row, shared by the simulator and the executor. iter is explicit
 * because the executor runs iteration r from a template task whose t->iter differs. row borrows:
 * task_id points into t->id (valid while t is), resource and phase are static strings. */
void trace_row_from_task(TraceRow *row, const Task *t, int iter, double start_s, double end_s);

/* A trace read back from TSV. The table owns rows and strings; each row's task_id, resource and
 * phase point into strings. */
typedef struct TraceTable {
    TraceRow *rows;
    int n;
    char *strings; /* owned storage for task_id/resource/phase */
} TraceTable;

/* The latest time a trace may hold (about 31 years): a row past it is damaged. */
#define TRACE_MAX_S 1e9

/* Reads the TSV at path into t (the caller's, overwritten; free it with trace_table_free). The
 * header line must equal TRACE_TSV_HEADER; every other line needs exactly 9 tab-separated
 * fields, an iter from 0, an integer layer, a non-empty task id, a resource of the schedule's,
 * times from 0 to TRACE_MAX_S with end_s >= start_s, bytes and flops finite and not negative;
 * each (iter, task_id) once. Lines may be of any length. Returns 0; -EINVAL with e =
 * "PATH:LINE: what is wrong" (a repeated task: "PATH: task ... has two rows"); -errno
 * (-ENOENT for a missing file) with e naming path and the system's message; -ENOMEM. On failure
 * t is left empty. */
int trace_read_tsv(const char *path, TraceTable *t, Err *e);

/* Frees what t owns and zeroes it; safe on a zeroed or failed table, and twice. */
void trace_table_free(TraceTable *t);

/* The (iter, task_id) order: negative, 0 or positive as x comes before, with or after y. */
int trace_row_cmp(const TraceRow *x, const TraceRow *y);
/* Row indices of t in (iter, task_id) order, for trace_find. The caller frees *idx. 0 or
 * -ENOMEM. */
int trace_sort_index(const TraceTable *t, int **idx);
/* The row of task id in iteration iter (idx from trace_sort_index), or -1. */
int trace_find(const TraceTable *t, const int *idx, int iter, const char *id);

/* A schedule's dependencies, beside its traces (fuyou-sim --deps): tab-separated, a header line,
 * one edge per line: task (iter, task_id) waits for (dep_iter, dep_task_id). With them a trace's
 * critical path can be followed (critpath.h); the trace schema itself stays as it is. */
#define TRACE_DEPS_HEADER "iter	task_id	dep_iter	dep_task_id"

typedef struct TraceDep {
    int iter, dep_iter;
    const char *task_id, *dep_id;
    long line; /* its line in the file it was read from, for messages */
} TraceDep;

typedef struct TraceDeps {
    TraceDep *edges;
    int n;
    char *strings; /* owned storage for task_id/dep_id */
} TraceDeps;

/* Writes every dependency of s. 0 or -EIO (e names path). */
int trace_write_deps(FILE *f, const char *path, const Schedule *s, Err *e);
/* The same into the file at path, as trace_save. */
int trace_save_deps(const char *path, const Schedule *s, Err *e);
/* Reads a dependencies TSV as trace_read_tsv reads a trace: the header must equal
 * TRACE_DEPS_HEADER, every other line four fields with integer iterations, the dependency's
 * from 0 to the task's, no task on itself, and no cycle (a task waits only for tasks before it;
 * the error names the row of the cycle that comes last in the file, "PATH:LINE: A (iteration
 * i) waiting for B closes a cycle of N dependencies"; found in linear time, without
 * recursion). Errors name "PATH:LINE". On failure d is left empty. */
int trace_read_deps(const char *path, TraceDeps *d, Err *e);
void trace_deps_free(TraceDeps *d);

/* Whether every dependency of d (read from deps_path) in the iterations t has names tasks of t
 * (read from trace_path), its task and the task it waits for: 0, -EINVAL with e =
 * "DEPS_PATH:LINE: task X of iteration i is not in TRACE_PATH" (or "the dependency X"), or
 * -ENOMEM. Rows of iterations after t's last are not looked at: a shorter run's trace is
 * compared over the iterations it has. */
int trace_deps_check(const TraceDeps *d, const char *deps_path, const TraceTable *t,
                     const char *trace_path, Err *e);

#endif
