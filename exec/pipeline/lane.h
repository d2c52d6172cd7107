/* lane: a worker thread that runs jobs for the dispatcher (pipeline.h).
 *
 * The dispatcher posts a job and polls for its end without blocking; the lane records when the
 * job ran on the monotonic clock (clock.h) and what it returned. The compute, copy and
 * optimizer lanes are thread lanes; the SSD lanes are the store's ring, driven by the
 * dispatcher itself. A plain lane runs one job at a time, to completion. A queue lane
 * (lane_set_queue) takes up to LANE_DEPTH jobs: its function issues a job to a device queue (a
 * CUDA stream) and returns, a query function says when it has ended, and the jobs end in the
 * order posted: the compute lane queues a GPU task behind the one before it (stream order), so
 * the GPU does not wait for the host between dependent tasks.
 *
 * Waiting spins for a short while (LANE_SPIN_S) before it sleeps, on both sides: a GPU task
 * lasts tens of microseconds to milliseconds, and two condition-variable wake-ups per task
 * (lane, then dispatcher) would add about as much again to every one of them. Where the work
 * runs on the host's cores (the CPU device), a spin takes a core from it: lane_set_spin and
 * lane_bell_set_spin turn it off. */
#ifndef FUYOU_LANE_H
#define FUYOU_LANE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "fuyou_err.h"

#define LANE_SPIN_S 50e-6
enum { LANE_DEPTH = 2 };

/* Runs a job (a plain lane), or issues it (a queue lane): 0 or -errno with e. */
typedef int (*LaneFn)(void *ctx, void *job, Err *e);
/* A queue lane's: whether the job issued has ended (1), not yet (0), or failed (-errno with
 * e). Called on the lane's thread for the oldest job in flight. */
typedef int (*LaneQueryFn)(void *ctx, void *job, Err *e);

/* What the lanes ring when a job ends, so the dispatcher sleeps until there is something to do
 * instead of polling on a timer. */
typedef struct LaneBell {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint rings;
    double spin_s;              /* lane_bell_wait's spin before it sleeps: LANE_SPIN_S */
} LaneBell;

void lane_bell_init(LaneBell *b);
void lane_bell_set_spin(LaneBell *b, double spin_s);
void lane_bell_free(LaneBell *b);
/* Waits until the bell has rung since *seen (then updates it) or timeout_s has passed. */
void lane_bell_wait(LaneBell *b, unsigned *seen, double timeout_s);
/* The same without ever sleeping: spins until the bell rings or max_s has passed (then *seen
 * is the count as it stands). For a waiter whose wake-up would cost more than the core it
 * holds: the dispatcher while a GPU task runs (pipe_exec.c). */
void lane_bell_spin(LaneBell *b, unsigned *seen, double max_s);

/* What a job did: its result and when it ran. */
typedef struct LaneEnd {
    int rc;
    Err err;
    double start_s, end_s;
} LaneEnd;

typedef struct Lane {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started, quit;
    LaneFn fn;
    LaneQueryFn query;          /* NULL: a plain lane */
    LaneBell *bell;
    void *ctx;
    void *jobs[LANE_DEPTH];     /* by count posted, modulo LANE_DEPTH */
    LaneEnd ends[LANE_DEPTH];
    /* counts: posted (the dispatcher), issued and ended (the thread), polled (the dispatcher);
     * the atomics are read without the mutex (the idle thread spins on posted) */
    atomic_uint posted, ended;
    unsigned issued, polled;
    void *job;                  /* lane_poll's job, and what it did */
    int rc;
    Err err;
    double start_s, end_s;
    double spin_s;              /* the idle thread's spin before it sleeps: LANE_SPIN_S */
    unsigned jitter_us, jitter_rng; /* lane_set_jitter's */
} Lane;

/* Starts the thread; bell (may be NULL) rings at the end of every job. 0 or -errno with e. */
int lane_init(Lane *l, LaneFn fn, void *ctx, LaneBell *bell, Err *e);
/* For tests: before each job the lane waits a random 0 to max_us microseconds (a xorshift
 * sequence from seed), so that what the dispatcher's dependencies do not order happens in
 * another order from run to run. Call while the lane is idle. */
void lane_set_jitter(Lane *l, unsigned max_us, unsigned seed);
/* How long the idle thread spins for a post before it sleeps (call while the lane is idle). */
void lane_set_spin(Lane *l, double spin_s);
/* Makes the lane a queue lane (call while it is idle): fn issues, query says the end. */
void lane_set_queue(Lane *l, LaneQueryFn query);
/* Finishes the jobs in flight, if any, and stops the thread; safe on a zeroed lane. */
void lane_free(Lane *l);
/* Jobs in flight at most: 1, or LANE_DEPTH for a queue lane. */
unsigned lane_depth(const Lane *l);
/* Runs (or issues) fn(ctx, job, e) on the lane's thread; at most lane_depth jobs posted and not
 * yet polled. */
void lane_post(Lane *l, void *job);
/* Jobs posted and not yet polled. */
unsigned lane_in_flight(const Lane *l);
/* True once the oldest job posted and not yet polled has ended: then job is it, and rc, err,
 * start_s and end_s describe it. A job issued behind another starts (start_s) when it was issued. */
bool lane_poll(Lane *l);

#endif
