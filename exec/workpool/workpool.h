/* workpool: a fixed set of worker threads that run one data-parallel job at a time.
 *
 * The job is a function over item ranges: workpool_run cuts [0, n) into chunks (about eight per
 * thread, boundaries multiples of align) that the caller's thread and the workers claim until
 * none is left, and returns when every chunk is done. Claiming, not one fixed range per thread,
 * so a worker that wakes late does not hold the job up: the threads that are running do the
 * rest (MEASUREMENTS.md, "Workers claim chunks"). A worker that wakes after the last chunk was
 * claimed finds nothing and never touches the job.
 * The function must compute the same for any split of the range (the callers' are elementwise,
 * or reduce fixed chunks of items in order). For the CPU optimizer and memory-bound loops; not
 * a task scheduler. */
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
    unsigned generation;     /* bumps once per job (under mu) */
    int started;             /* workers created (for a half-built pool) */
    bool quit;
    /* the job: set under mu before the generation bumps */
    WorkFn fn;
    void *ctx;
    size_t n, align, chunks, chunk_units;
    struct WorkClaims *claims; /* the chunks' counters (workpool.c; C11 atomics, which the
                                  CUDA sources that include this header do not have) */
    bool waiting;            /* the caller sleeps on done (under mu) */
    int nice;                /* the workers' nice increment (workpool_init_nice) */
} WorkPool;

/* Starts n_threads - 1 workers (n_threads <= 0: one per online CPU). 0 or -errno with e. */
int workpool_init(WorkPool *p, int n_threads, Err *e);
/* The same with the workers' nice value raised by nice (0..19; the caller's thread, which
 * takes chunks too, stays as it is): a background pool, which threads at the normal level
 * (the pipeline's lanes) preempt when they wake. Raising the value cannot fail for lack of
 * privilege; where it fails anyway the workers run as they are. */
int workpool_init_nice(WorkPool *p, int n_threads, int nice, Err *e);
/* Stops the workers; safe on a half-built or zeroed pool. */
void workpool_free(WorkPool *p);
/* Runs fn over [0, n) in chunks whose boundaries are multiples of align (e.g. a SIMD width or
 * a cache line), and waits. */
void workpool_run(WorkPool *p, WorkFn fn, void *ctx, size_t n, size_t align);

#endif
