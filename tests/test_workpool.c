/* Check suite for exec/cpu/workpool: every item of every job is done exactly once, whatever the
 * thread count, size and alignment; chunk boundaries fall on multiples of align; back-to-back
 * short jobs (where a worker wakes after its job has ended), a pool freed right after its job
 * (a worker may still be asking for another chunk), empty jobs; a pool of one. */
#include <stdatomic.h>

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

int main(void)
{
    Suite *s = suite_create("workpool");
    TCase *tc = tcase_create("workpool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_item_once);
    tcase_add_test(tc, back_to_back_short_jobs);
    tcase_add_test(tc, free_right_after_a_job);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
