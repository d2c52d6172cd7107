/* workpool: a fixed set of worker threads that run one data-parallel job at a time.
 *
 * The job is a function over item ranges: workpool_run splits [0, n) into one contiguous range
 * per thread (the caller's thread takes the first) and returns when every range is done. For
 * the CPU optimizer and memory-bound loops; not a task scheduler. */
#ifndef FUYOU_WORKPOOL_H
#define FUYOU_WORKPOOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "fuyou_err.h"

typedef void (*WorkFn)(void *ctx, size_t begin, size_t end);

typedef struct WorkPool {
    int n_threads;           /* including the caller */
    pthread_t *threads;      /* n_threads - 1 workers */
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    unsigned generation;     /* bumps once per job */
    int pending;             /* workers still running the current job */
    int started;             /* workers created (for a half-built pool) */
    bool quit;
    WorkFn fn;
    void *ctx;
    size_t n, align;
} WorkPool;

/* Starts n_threads - 1 workers (n_threads <= 0: one per online CPU). 0 or -errno with e. */
int workpool_init(WorkPool *p, int n_threads, Err *e);
/* Stops the workers; safe on a half-built or zeroed pool. */
void workpool_free(WorkPool *p);
/* Runs fn over [0, n) split into per-thread ranges whose boundaries are multiples of align
 * (e.g. a SIMD width), and waits. */
void workpool_run(WorkPool *p, WorkFn fn, void *ctx, size_t n, size_t align);

#endif
