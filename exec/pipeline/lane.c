/* lane: one worker thread, one job at a time; see lane.h. */
#include "lane.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "clock.h"

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins while *word reads `while_equal`, at most max_s: a lane waiting for a post (its pending
 * flag) and the dispatcher waiting for a bell (its ring count) alike. */
static void spin_while(const atomic_uint *word, unsigned while_equal, double max_s)
{
    if (max_s <= 0)
        return;
    double until = clock_monotonic_s() + max_s;
    for (unsigned i = 1; atomic_load_explicit(word, memory_order_acquire) == while_equal; i++) {
        cpu_relax();
        if (!(i & 63) && clock_monotonic_s() > until)
            return;
    }
}

static void jitter(Lane *l)
{
    unsigned x = l->jitter_rng;
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    l->jitter_rng = x;
    long us = (long)(x % (l->jitter_us + 1));
    struct timespec ts = {us / 1000000, us % 1000000 * 1000};
    nanosleep(&ts, NULL);
}

/* Job k (counted from 0) has ended as l->ends says: published, and the bell rung. */
static void job_ended(Lane *l, unsigned k)
{
    pthread_mutex_lock(&l->mu);
    atomic_store_explicit(&l->ended, k + 1, memory_order_release);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (l->bell) {
        pthread_mutex_lock(&l->bell->mu);
        atomic_fetch_add_explicit(&l->bell->rings, 1, memory_order_release);
        pthread_cond_broadcast(&l->bell->cv);
        pthread_mutex_unlock(&l->bell->mu);
    }
}

/* Runs (or issues) the next job posted. */
static void issue_next(Lane *l)
{
    unsigned k = l->issued;
    LaneEnd *x = &l->ends[k % LANE_DEPTH];
    if (l->jitter_us)
        jitter(l);
    Err e = {""};
    x->start_s = clock_monotonic_s();
    /* nothing queued behind a job that failed: what follows it may need what it did */
    const LaneEnd *before = &l->ends[(k - 1) % LANE_DEPTH];
    x->rc = l->query && k > 0 && before->rc
                ? err_set(&e, -ECANCELED, "not issued: the job before it failed")
                : l->fn(l->ctx, l->jobs[k % LANE_DEPTH], &e);
    x->err = e;
    l->issued = k + 1;
    if (!l->query || x->rc) { /* a queue lane's failed issue ends when it is the oldest */
        x->end_s = clock_monotonic_s();
        if (!l->query)
            job_ended(l, k);
    }
}

/* A queue lane's oldest job in flight: whether it has ended (then published). */
static bool oldest_ended(Lane *l, unsigned k)
{
    LaneEnd *x = &l->ends[k % LANE_DEPTH];
    if (!x->rc) {
        Err e = {""};
        int q = l->query(l->ctx, l->jobs[k % LANE_DEPTH], &e);
        if (!q)
            return false;
        x->end_s = clock_monotonic_s();
        if (q < 0)
            x->rc = q, x->err = e;
    }
    job_ended(l, k);
    return true;
}

static void *lane_main(void *arg)
{
    Lane *l = arg;
    for (;;) {
        unsigned posted = atomic_load_explicit(&l->posted, memory_order_acquire);
        unsigned ended = atomic_load_explicit(&l->ended, memory_order_relaxed);
        /* an end first: the dispatcher releases what waits on it while the next job runs */
        if (ended < l->issued && oldest_ended(l, ended))
            continue;
        if (posted > l->issued) {
            issue_next(l);
            continue;
        }
        if (ended < l->issued) { /* the device is at work: spin, as a compute wait does */
            cpu_relax();
            continue;
        }
        spin_while(&l->posted, posted, l->spin_s);
        pthread_mutex_lock(&l->mu);
        while (atomic_load_explicit(&l->posted, memory_order_acquire) == l->issued && !l->quit)
            pthread_cond_wait(&l->cv, &l->mu);
        bool quit = l->quit && atomic_load_explicit(&l->posted, memory_order_acquire) ==
                                   l->issued;
        pthread_mutex_unlock(&l->mu);
        if (quit)
            break;
    }
    return NULL;
}

void lane_bell_init(LaneBell *b)
{
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    atomic_init(&b->rings, 0);
    b->spin_s = LANE_SPIN_S;
}

void lane_bell_set_spin(LaneBell *b, double spin_s)
{
    b->spin_s = spin_s;
}

void lane_bell_free(LaneBell *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

void lane_bell_wait(LaneBell *b, unsigned *seen, double timeout_s)
{
    spin_while(&b->rings, *seen, b->spin_s);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)(timeout_s * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&b->mu);
    while (atomic_load_explicit(&b->rings, memory_order_relaxed) == *seen)
        if (pthread_cond_timedwait(&b->cv, &b->mu, &ts))
            break;
    *seen = atomic_load_explicit(&b->rings, memory_order_relaxed);
    pthread_mutex_unlock(&b->mu);
}

void lane_bell_spin(LaneBell *b, unsigned *seen, double max_s)
{
    spin_while(&b->rings, *seen, max_s);
    *seen = atomic_load_explicit(&b->rings, memory_order_acquire);
}

int lane_init(Lane *l, LaneFn fn, void *ctx, LaneBell *bell, Err *e)
{
    memset(l, 0, sizeof *l);
    atomic_init(&l->posted, 0);
    atomic_init(&l->ended, 0);
    l->fn = fn;
    l->ctx = ctx;
    l->bell = bell;
    l->spin_s = LANE_SPIN_S;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    int rc = pthread_create(&l->thread, NULL, lane_main, l);
    if (rc)
        return err_set(e, -rc, "cannot start a pipeline thread: %s", strerror(rc));
    l->started = true;
    return 0;
}

void lane_set_jitter(Lane *l, unsigned max_us, unsigned seed)
{
    pthread_mutex_lock(&l->mu);
    l->jitter_us = max_us;
    l->jitter_rng = seed | 1;
    pthread_mutex_unlock(&l->mu);
}

void lane_set_spin(Lane *l, double spin_s)
{
    pthread_mutex_lock(&l->mu);
    l->spin_s = spin_s;
    pthread_mutex_unlock(&l->mu);
}

void lane_set_queue(Lane *l, LaneQueryFn query)
{
    pthread_mutex_lock(&l->mu);
    l->query = query;
    pthread_mutex_unlock(&l->mu);
}

void lane_free(Lane *l)
{
    if (!l->started)
        return;
    pthread_mutex_lock(&l->mu);
    while (atomic_load_explicit(&l->ended, memory_order_acquire) !=
           atomic_load_explicit(&l->posted, memory_order_relaxed))
        pthread_cond_wait(&l->cv, &l->mu);
    l->quit = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    l->started = false;
}

void lane_post(Lane *l, void *job)
{
    unsigned k = atomic_load_explicit(&l->posted, memory_order_relaxed);
    assert(k - l->polled < lane_depth(l));
    l->jobs[k % LANE_DEPTH] = job;
    pthread_mutex_lock(&l->mu);
    atomic_store_explicit(&l->posted, k + 1, memory_order_release);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

unsigned lane_depth(const Lane *l)
{
    return l->query ? LANE_DEPTH : 1;
}

unsigned lane_in_flight(const Lane *l)
{
    return atomic_load_explicit(&l->posted, memory_order_relaxed) - l->polled;
}

bool lane_poll(Lane *l)
{
    if (atomic_load_explicit(&l->ended, memory_order_acquire) == l->polled)
        return false;
    const LaneEnd *x = &l->ends[l->polled % LANE_DEPTH];
    l->job = l->jobs[l->polled % LANE_DEPTH];
    l->rc = x->rc;
    l->err = x->err;
    l->start_s = x->start_s;
    l->end_s = x->end_s;
    l->polled++;
    return true;
}
