/* Check suite for model/units: the whole-number parser both command lines and the ini files use,
 * byte amounts, and the report formatting. */
#include <errno.h>
#include <stdint.h>

#include "testutil.h"
#include "units.h"

START_TEST(parse_int)
{
    static const struct { const char *s; int64_t v; } good[] = {
        {"0", 0}, {"7", 7}, {"+12", 12}, {"-3", -3}, {"1048576", 1048576}, {"1e6", 1000000},
        {"2.5e3", 2500}, {"1E3", 1000}, {"9007199254740992", 9007199254740992LL},
        {"9223372036854775807", INT64_MAX},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t v = -42;
        ck_assert_msg(units_parse_int(good[i].s, INT64_MIN, INT64_MAX, &v) == 0, "%s", good[i].s);
        ck_assert_int_eq(v, good[i].v);
    }
    /* not whole numbers: -EINVAL, and the output untouched */
    static const char *bad[] = {"", " ", "2.5", "1e-1", "0x10", "inf", "nan", "1e400", "12abc",
                                "abc", " 5", "5 ", "--5", "1.", ".5e1x", "5e", "e5", "-",
                                "1e-400", "1-2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = -42;
        ck_assert_msg(units_parse_int(bad[i], INT64_MIN, INT64_MAX, &v) == -EINVAL, "'%s'",
                      bad[i]);
        ck_assert_int_eq(v, -42);
    }
    /* whole but outside the range: -ERANGE */
    int64_t v = -42;
    ck_assert_int_eq(units_parse_int("0", 1, 10, &v), -ERANGE);
    ck_assert_int_eq(units_parse_int("11", 1, 10, &v), -ERANGE);
    ck_assert_int_eq(units_parse_int("2147483648", 0, 2147483647, &v), -ERANGE);
    ck_assert_int_eq(units_parse_int("1e12", 1, 1000000000, &v), -ERANGE);
    /* whole, but beyond int64 */
    ck_assert_int_eq(units_parse_int("9223372036854775808", INT64_MIN, INT64_MAX, &v), -ERANGE);
    ck_assert_int_eq(units_parse_int("1e19", INT64_MIN, INT64_MAX, &v), -ERANGE);
    ck_assert_int_eq(v, -42);
    ck_assert_int_eq(units_parse_int("10", 1, 10, &v), 0);
    ck_assert_int_eq(v, 10);
}
END_TEST

START_TEST(parse_bytes)
{
    double b;
    ck_assert_int_eq(units_parse_bytes("12G", &b), 0);
    ck_assert_double_eq(b, 12e9);
    ck_assert_int_eq(units_parse_bytes("1.5GiB", &b), 0);
    ck_assert_double_eq(b, 1.5 * 0x1p30);
    ck_assert_int_eq(units_parse_bytes("4096", &b), 0);
    ck_assert_double_eq(b, 4096);
    ck_assert_int_eq(units_parse_bytes("lots", &b), -EINVAL);
    ck_assert_int_eq(units_parse_bytes("-1G", &b), -EINVAL);
}
END_TEST

START_TEST(formatting)
{
    char buf[32];
    ck_assert_str_eq(units_bytes(buf, sizeof buf, 0x1p30 * 4), "4.00 GiB");
    ck_assert_str_eq(units_bytes(buf, sizeof buf, 512), "512 B");
    ck_assert_str_eq(units_flops(buf, sizeof buf, 8.58e15), "8.58 PFLOP");
    ck_assert_str_eq(units_count(buf, sizeof buf, 124.4e6), "124.40 M");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("units");
    TCase *tc = tcase_create("units");
    tcase_add_test(tc, parse_int);
    tcase_add_test(tc, parse_bytes);
    tcase_add_test(tc, formatting);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
