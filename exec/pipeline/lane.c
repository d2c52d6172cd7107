/* lane: one worker thread, one job at a time; see lane.h. */
#include "lane.h"

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

static void *lane_main(void *arg)
{
    Lane *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (!l->posted && !l->quit) {
            pthread_mutex_unlock(&l->mu);
            spin_while(&l->pending, 0, l->spin_s);
            pthread_mutex_lock(&l->mu);
        }
        while (!l->posted && !l->quit)
            pthread_cond_wait(&l->cv, &l->mu);
        if (!l->posted)
            break;
        void *job = l->job;
        atomic_store_explicit(&l->pending, 0, memory_order_relaxed);
        bool shake = l->jitter_us > 0;
        pthread_mutex_unlock(&l->mu);
        if (shake)
            jitter(l);
        Err e = {""};
        double t0 = clock_monotonic_s();
        int rc = l->fn(l->ctx, job, &e);
        double t1 = clock_monotonic_s();
        pthread_mutex_lock(&l->mu);
        l->rc = rc;
        l->err = e;
        l->start_s = t0;
        l->end_s = t1;
        l->posted = false;
        atomic_store_explicit(&l->done, true, memory_order_release);
        pthread_cond_broadcast(&l->cv);
        if (l->bell) {
            pthread_mutex_lock(&l->bell->mu);
            atomic_fetch_add_explicit(&l->bell->rings, 1, memory_order_release);
            pthread_cond_broadcast(&l->bell->cv);
            pthread_mutex_unlock(&l->bell->mu);
        }
    }
    pthread_mutex_unlock(&l->mu);
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
    atomic_init(&l->pending, 0);
    atomic_init(&l->done, false);
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

void lane_free(Lane *l)
{
    if (!l->started)
        return;
    pthread_mutex_lock(&l->mu);
    while (l->posted)
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
    pthread_mutex_lock(&l->mu);
    l->job = job;
    l->posted = true;
    atomic_store_explicit(&l->done, false, memory_order_relaxed);
    atomic_store_explicit(&l->pending, 1, memory_order_release);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

bool lane_poll(Lane *l)
{
    if (!atomic_load_explicit(&l->done, memory_order_acquire))
        return false;
    atomic_store_explicit(&l->done, false, memory_order_relaxed);
    /* the worker wrote rc, err and the times before `done`, under the mutex */
    pthread_mutex_lock(&l->mu);
    pthread_mutex_unlock(&l->mu);
    return true;
}
