/* workpool: persistent worker threads claiming chunks of one job at a time; see workpool.h. */
#include "workpool.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { CHUNKS_PER_THREAD = 8 };

/* The next chunk to claim, the job's generation in the top bits (a late worker's claim fails
 * once the job has changed), and the chunks done. */
struct WorkClaims {
    _Atomic uint64_t next;
    atomic_size_t finished;
};

typedef struct Worker {
    WorkPool *pool;
    int index; /* 1..n_threads-1; the caller is 0 */
} Worker;

/* One job as a thread saw it when it woke (under the mutex, with its generation). */
typedef struct Job {
    unsigned generation;
    WorkFn fn;
    void *ctx;
    size_t n, align, chunks, chunk_units;
} Job;

static uint64_t next_word(unsigned generation, size_t chunk)
{
    return (uint64_t)generation << 32 | (uint64_t)chunk;
}

/* The next chunk of job j, or false once they are all claimed or the pool has moved on to
 * another job (a worker that woke late: it must not touch j's context any more). */
static bool claim(WorkPool *p, const Job *j, size_t *chunk)
{
    uint64_t w = atomic_load(&p->claims->next);
    for (;;) {
        if ((unsigned)(w >> 32) != j->generation || (w & 0xffffffffu) >= j->chunks)
            return false;
        if (atomic_compare_exchange_weak(&p->claims->next, &w, w + 1)) {
            *chunk = (size_t)(w & 0xffffffffu);
            return true;
        }
    }
}

static void run_chunks(WorkPool *p, const Job *j)
{
    size_t c;
    while (claim(p, j, &c)) {
        size_t b = c * j->chunk_units * j->align, e = b + j->chunk_units * j->align;
        j->fn(j->ctx, b, e < j->n ? e : j->n);
        if (atomic_fetch_add(&p->claims->finished, 1) + 1 == j->chunks) {
            pthread_mutex_lock(&p->mu);
            if (p->waiting)
                pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

/* Raises the calling thread's nice value by nice (Linux: nice is per thread). 0 or -errno. */
static int thread_nice(int nice)
{
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int now = getpriority(PRIO_PROCESS, tid);
    if (now == -1 && errno)
        return -errno;
    int to = now + nice > 19 ? 19 : now + nice;
    return setpriority(PRIO_PROCESS, tid, to) ? -errno : 0;
}

static void *worker_main(void *arg)
{
    Worker self = *(Worker *)arg;
    free(arg);
    WorkPool *p = self.pool;
    if (p->nice)
        thread_nice(p->nice);
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->start, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->generation;
        Job j = {seen, p->fn, p->ctx, p->n, p->align, p->chunks, p->chunk_units};
        pthread_mutex_unlock(&p->mu);
        run_chunks(p, &j);
    }
}

int workpool_init(WorkPool *p, int n_threads, Err *e)
{
    return workpool_init_nice(p, n_threads, 0, e);
}

int workpool_init_nice(WorkPool *p, int n_threads, int nice, Err *e)
{
    memset(p, 0, sizeof *p);
    p->nice = nice;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->claims = calloc(1, sizeof *p->claims);
    if (!p->threads || !p->claims) {
        workpool_free(p);
        return err_set(e, -ENOMEM, "out of memory for %d worker threads", n_threads);
    }
    for (int i = 1; i < n_threads; i++) {
        Worker *w = malloc(sizeof *w);
        if (!w) {
            workpool_free(p);
            return err_set(e, -ENOMEM, "out of memory starting worker threads");
        }
        *w = (Worker){p, i};
        int rc = pthread_create(&p->threads[i - 1], NULL, worker_main, w);
        if (rc) {
            free(w);
            workpool_free(p);
            return err_set(e, -rc, "pthread_create: %s", strerror(rc));
        }
        p->started++;
    }
    return 0;
}

void workpool_free(WorkPool *p)
{
    if (p->threads) {
        pthread_mutex_lock(&p->mu);
        p->quit = true;
        pthread_cond_broadcast(&p->start);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->started; i++)
            pthread_join(p->threads[i], NULL);
        free(p->threads);
        p->threads = NULL;
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->start);
        pthread_cond_destroy(&p->done);
    }
    /* after the joins: a worker that did the last chunk may still be asking for another */
    free(p->claims);
    p->claims = NULL;
}

void workpool_run(WorkPool *p, WorkFn fn, void *ctx, size_t n, size_t align)
{
    if (n == 0)
        return;
    if (p->started == 0) {
        fn(ctx, 0, n);
        return;
    }
    align = align ? align : 1;
    size_t units = (n + align - 1) / align;
    size_t want = (size_t)(p->started + 1) * CHUNKS_PER_THREAD;
    size_t chunk_units = (units + want - 1) / want;
    pthread_mutex_lock(&p->mu);
    Job j = {p->generation + 1, fn, ctx, n, align, (units + chunk_units - 1) / chunk_units,
             chunk_units};
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->align = align;
    p->chunks = j.chunks;
    p->chunk_units = chunk_units;
    atomic_store(&p->claims->finished, 0);
    atomic_store(&p->claims->next, next_word(j.generation, 0));
    p->generation = j.generation;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, &j);
    if (atomic_load(&p->claims->finished) == j.chunks)
        return;
    pthread_mutex_lock(&p->mu);
    p->waiting = true;
    while (atomic_load(&p->claims->finished) < j.chunks)
        pthread_cond_wait(&p->done, &p->mu);
    p->waiting = false;
    pthread_mutex_unlock(&p->mu);
}
