/* trace: one schema for predicted and measured timelines (DESIGN.md, "Traces").
 *
 * Tab-separated, a header line, one task per line:
 *   iter  task_id  resource  phase  layer  start_s  end_s  bytes  flops
 * task_id is the schedule's stable id, so a predicted and a measured trace align task by task.
 * The Chrome/Perfetto export puts each resource in its own lane (Perfetto does not draw
 * overlapping events in one lane). This module formats; it neither simulates nor measures. */
#ifndef FUYOU_TRACE_H
#define FUYOU_TRACE_H

#include <stdio.h>

#include "fuyou_err.h"

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

#endif
