/* Check suite for exec/cpu/workpool: every item of every job is done exactly once, whatever the
 * thread count, size and alignment; chunk boundaries fall on multiples of align; back-to-back
 * short jobs (where a worker wakes after its job has ended), a pool freed right after its job
 * (a worker may still be asking for another chunk), empty jobs; a pool of one; a background
 * pool's workers run at its nice increment, its caller as it was. */
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "testutil.h"
#include "workpool.h"

typedef struct Count {
    atomic_int *hits;
    size_t align, n;
    atomic_int bad;
} Count;

static void count(void *ctx, size_t b, size_t e)
{
    Count *c = ctx;
    if (b % c->align || (e % c->align && e != c->n) || b >= e || e > c->n)
        atomic_fetch_add(&c->bad, 1);
    for (size_t i = b; i < e; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

static void check_job(WorkPool *wp, size_t n, size_t align)
{
    atomic_int *hits = calloc(n ? n : 1, sizeof *hits);
    Count c = {.hits = hits, .align = align ? align : 1, .n = n};
    atomic_init(&c.bad, 0);
    workpool_run(wp, count, &c, n, align);
    ck_assert_int_eq(atomic_load(&c.bad), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(atomic_load(&hits[i]) == 1, "item %zu of %zu done %d times", i, n,
                      atomic_load(&hits[i]));
    free(hits);
}

START_TEST(every_item_once)
{
    int threads[] = {1, 2, 3, 8, 17};
    size_t sizes[] = {0, 1, 7, 64, 65, 1000, 4096 + 3, 100000};
    size_t aligns[] = {0, 1, 64, 4096};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        WorkPool wp;
        Err e;
        ck_assert_int_eq(workpool_init(&wp, threads[t], &e), 0);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++)
                check_job(&wp, sizes[s], aligns[a]);
        workpool_free(&wp);
    }
}
END_TEST

typedef struct Sum {
    atomic_long total;
} Sum;

static void add_items(void *ctx, size_t b, size_t e)
{
    Sum *s = ctx;
    long x = 0;
    for (size_t i = b; i < e; i++)
        x += (long)i + 1;
    atomic_fetch_add(&s->total, x);
}

/* Thousands of jobs too short for every worker to wake in time: a late worker must not run a
 * chunk of a job that has returned (its context is gone: here, a fresh Sum each time). */
START_TEST(back_to_back_short_jobs)
{
    WorkPool wp;
    Err e;
    ck_assert_int_eq(workpool_init(&wp, 8, &e), 0);
    for (int k = 0; k < 5000; k++) {
        size_t n = (size_t)(k % 97) + 1;
        Sum s;
        atomic_init(&s.total, 0);
        workpool_run(&wp, add_items, &s, n, 1);
        ck_assert_int_eq(atomic_load(&s.total), (long)(n * (n + 1) / 2));
    }
    workpool_free(&wp);
}
END_TEST

START_TEST(free_right_after_a_job)
{
    for (int k = 0; k < 500; k++) {
        WorkPool wp;
        Err e;
        ck_assert_int_eq(workpool_init(&wp, 4, &e), 0);
        Sum s;
        atomic_init(&s.total, 0);
        workpool_run(&wp, add_items, &s, 64, 1);
        workpool_free(&wp);
        ck_assert_int_eq(atomic_load(&s.total), 64 * 65 / 2);
    }
}
END_TEST

/* per chunk: the thread that ran it and that thread's nice value */
typedef struct Seen {
    atomic_int n;
    long tid[64];
    int nice[64];
} Seen;

static void note_thread(void *ctx, size_t b, size_t e)
{
    (void)b, (void)e;
    Seen *s = ctx;
    long tid = syscall(SYS_gettid);
    int k = atomic_fetch_add(&s->n, 1);
    if (k < 64) {
        s->tid[k] = tid;
        s->nice[k] = getpriority(PRIO_PROCESS, (id_t)tid);
    }
    usleep(2000); /* long enough that the workers, not the caller alone, take chunks */
}

START_TEST(background_pool_nice)
{
    long me = syscall(SYS_gettid);
    int base = getpriority(PRIO_PROCESS, (id_t)me), want = base + 3 > 19 ? 19 : base + 3;
    WorkPool wp;
    Err e;
    ck_assert_int_eq(workpool_init_nice(&wp, 4, 3, &e), 0);
    Seen s = {0};
    atomic_init(&s.n, 0);
    workpool_run(&wp, note_thread, &s, 32, 1);
    workpool_free(&wp);
    int n = atomic_load(&s.n), by_workers = 0;
    ck_assert_int_eq(n, 32);
    for (int k = 0; k < n; k++) {
        ck_assert_int_eq(s.nice[k], s.tid[k] == me ? base : want);
        by_workers += s.tid[k] != me;
    }
    ck_assert_int_gt(by_workers, 0);
    ck_assert_int_eq(getpriority(PRIO_PROCESS, (id_t)me), base);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("workpool");
    TCase *tc = tcase_create("workpool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_item_once);
    tcase_add_test(tc, back_to_back_short_jobs);
    tcase_add_test(tc, free_right_after_a_job);
    tcase_add_test(tc, background_pool_nice);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
