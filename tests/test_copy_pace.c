/* Check suite for exec/cuda/copy_pace (plain C, header only): when a copy's waiter wakes. */
#include "copy_pace.h"
#include "testutil.h"

/* A copy's waiter wakes at 0.6 of the copy's time at the fastest rate seen, less 100 us: not
 * before a rate is known, not for a small copy (its latency would read as a slow rate, and it
 * teaches none), never before the issue */
START_TEST(copy_pace)
{
    CopyPace p = {0};
    size_t big = (size_t)64 << 20, small = (size_t)1 << 20;
    ck_assert_double_eq(copy_pace_wake_s(&p, 5.0, big), 5.0);
    copy_pace_seen(&p, small, 1e-3); /* 1 GB/s from a small copy: ignored */
    ck_assert_double_eq(p.bytes_per_s, 0);
    copy_pace_seen(&p, big, (double)big / 50e9);
    ck_assert_double_eq_tol(p.bytes_per_s, 50e9, 1);
    copy_pace_seen(&p, big, (double)big / 40e9); /* slower: the fastest stays */
    ck_assert_double_eq_tol(p.bytes_per_s, 50e9, 1);
    double at50 = (double)big / 50e9;
    ck_assert_double_eq_tol(copy_pace_wake_s(&p, 5.0, big), 5.0 + 0.6 * at50 - 100e-6, 1e-12);
    /* a copy at 0.67 of the rate learned still ends after the wake-up */
    ck_assert(5.0 + at50 / 0.67 > copy_pace_wake_s(&p, 5.0, big));
    ck_assert_double_eq(copy_pace_wake_s(&p, 5.0, small), 5.0);
    ck_assert_double_eq(copy_pace_wake_s(&p, 5.0, COPY_PACE_MIN_BYTES), 5.0); /* 50 us < 100 */
    copy_pace_seen(&p, big, 0); /* no time: nothing learned */
    ck_assert_double_eq_tol(p.bytes_per_s, 50e9, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("copy_pace");
    TCase *tc = tcase_create("copy_pace");
    tcase_add_test(tc, copy_pace);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
