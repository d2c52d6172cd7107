/* lane: a worker thread that runs one job at a time for the dispatcher (pipeline.h).
 *
 * The dispatcher posts a job when the lane is idle and polls for its end without blocking; the
 * lane records when the job ran on the monotonic clock (clock.h) and what it returned. The
 * compute, copy and optimizer lanes are thread lanes; the SSD lanes are the store's ring,
 * driven by the dispatcher itself. Not a queue: one job in flight.
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

typedef int (*LaneFn)(void *ctx, void *job, Err *e);

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

typedef struct Lane {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started, quit, posted;
    atomic_uint pending;        /* 1 once posted, readable without the mutex (the idle thread
                                   spins on it) */
    atomic_bool done;
    LaneFn fn;
    LaneBell *bell;
    void *ctx, *job;
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
/* Finishes the job in flight, if any, and stops the thread; safe on a zeroed lane. */
void lane_free(Lane *l);
/* Runs fn(ctx, job, e) on the lane's thread (the lane must be idle). */
void lane_post(Lane *l, void *job);
/* True once the posted job has ended: then rc, err, start_s and end_s describe it and the
 * lane is idle again. */
bool lane_poll(Lane *l);

#endif
