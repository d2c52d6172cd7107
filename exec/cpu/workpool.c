/* workpool: persistent worker threads with a generation counter; see workpool.h. */
#include "workpool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct Worker {
    WorkPool *pool;
    int index; /* 1..n_threads-1; the caller is 0 */
} Worker;

static void range_of(const WorkPool *p, int index, size_t *begin, size_t *end)
{
    size_t units = (p->n + p->align - 1) / p->align;
    size_t per = units / (size_t)p->n_threads, extra = units % (size_t)p->n_threads;
    size_t i = (size_t)index;
    size_t b = i * per + (i < extra ? i : extra);
    size_t e = b + per + (i < extra);
    *begin = b * p->align < p->n ? b * p->align : p->n;
    *end = e * p->align < p->n ? e * p->align : p->n;
}

static void *worker_main(void *arg)
{
    Worker self = *(Worker *)arg;
    free(arg);
    WorkPool *p = self.pool;
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
        pthread_mutex_unlock(&p->mu);
        size_t b, e;
        range_of(p, self.index, &b, &e);
        if (b < e)
            p->fn(p->ctx, b, e);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

int workpool_init(WorkPool *p, int n_threads, Err *e)
{
    memset(p, 0, sizeof *p);
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads)
        return err_set(e, -ENOMEM, "out of memory for %d worker threads", n_threads);
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
    if (!p->threads)
        return;
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

void workpool_run(WorkPool *p, WorkFn fn, void *ctx, size_t n, size_t align)
{
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->align = align ? align : 1;
    p->pending = p->started;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    size_t b, e;
    range_of(p, 0, &b, &e);
    if (b < e)
        fn(ctx, b, e);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
