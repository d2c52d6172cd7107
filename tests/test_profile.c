/* Check suite for exec/profile: the summary statistics, and the CPU, memory and store
 * measurements on small sizes (positive, finite, in their ranges). */
#include <errno.h>
#include <math.h>

#include "profile.h"
#include "testutil.h"

START_TEST(stat_summary)
{
    double x[] = {5, 1, 4, 2, 3};
    Stat s;
    profile_stat(x, 5, &s);
    ck_assert_double_eq(s.median, 3);
    ck_assert_double_eq(s.min, 1);
    ck_assert_double_eq(s.max, 5);
    ck_assert_int_eq(s.n, 5);
    double y[] = {4, 1, 2, 3};
    profile_stat(y, 4, &s);
    ck_assert_double_eq(s.median, 2.5);
}
END_TEST

START_TEST(cpu_and_memory)
{
    Stat a, m;
    Err e;
    ck_assert_msg(profile_adam(1, 1 << 18, 2, &a, &e) == 0, "%s", e.msg);
    ck_assert(isfinite(a.median) && a.median > 0 && a.min <= a.median && a.median <= a.max);
    ck_assert_msg(profile_memory(2, 1 << 22, 2, &m, &e) == 0, "%s", e.msg);
    ck_assert(isfinite(m.median) && m.median > 0);
    ck_assert_int_eq(profile_adam(1, 1024, 0, &a, &e), -EINVAL);
}
END_TEST

START_TEST(store)
{
    char dir[] = "/tmp/fuyou-prof-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *dirs[] = {dir};
    SsdProfile p;
    Err e;
    ck_assert_msg(profile_ssd(dirs, 1, (size_t)16 << 20, 2, &p, &e) == 0, "%s", e.msg);
    ck_assert(p.read_GBps.median > 0 && p.write_GBps.median > 0);
    ck_assert(p.duplex_read_GBps.median > 0 && p.duplex_write_GBps.median > 0);
    ck_assert(p.free_GB > 0);
    const char *missing[] = {"/nonexistent/fuyou"};
    ck_assert_int_lt(profile_ssd(missing, 1, 1 << 20, 1, &p, &e), 0);
    tu_assert_contains(e.msg, "/nonexistent/fuyou");
    tu_rm_tree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("profile");
    TCase *tc = tcase_create("profile");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, stat_summary);
    tcase_add_test(tc, cpu_and_memory);
    tcase_add_test(tc, store);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
