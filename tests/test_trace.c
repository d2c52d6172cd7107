/* Check suite for traces/trace: the TSV schema byte for byte, and the Chrome export's lanes. */
#include <stdbool.h>

#include "testutil.h"
#include "trace.h"

static const TraceRow rows[] = {
    {0, "F.b0.qkv", "gpu", "forward", 0, 0.5, 1.25, 0, 6e12},
    {1, "SSDR.g3.state", "ssd_read", "optimizer", 9, 2, 3.000000001, 123456789, 0},
    {0, "X.custom", "nic", "forward", -1, 0, 1e-6, 1, 0},
};

static char *write_to_string(bool chrome)
{
    static char buf[8192];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    Err e;
    int rc = chrome ? trace_write_chrome(f, "mem", rows, 3, &e)
                    : trace_write_tsv(f, "mem", rows, 3, &e);
    ck_assert_int_eq(rc, 0);
    fclose(f);
    return buf;
}

START_TEST(tsv)
{
    ck_assert_str_eq(write_to_string(false),
                     "iter\ttask_id\tresource\tphase\tlayer\tstart_s\tend_s\tbytes\tflops\n"
                     "0\tF.b0.qkv\tgpu\tforward\t0\t0.500000000\t1.250000000\t0\t6000000000000\n"
                     "1\tSSDR.g3.state\tssd_read\toptimizer\t9\t2.000000000\t3.000000001\t"
                     "123456789\t0\n"
                     "0\tX.custom\tnic\tforward\t-1\t0.000000000\t0.000001000\t1\t0\n");
}
END_TEST

START_TEST(chrome)
{
    const char *s = write_to_string(true);
    tu_assert_contains(s, "\"name\": \"F.b0.qkv\", \"cat\": \"forward\", \"ph\": \"X\", "
                          "\"pid\": 1, \"tid\": 0, \"ts\": 500000.000, \"dur\": 750000.000");
    tu_assert_contains(s, "\"tid\": 3, \"ts\": 2000000.000"); /* ssd_read is lane 3 */
    /* an unknown resource gets a lane of its own after the known ones, named */
    tu_assert_contains(s, "\"tid\": 6, \"ts\": 0.000");
    tu_assert_contains(s, "\"tid\": 6, \"args\": {\"name\": \"nic\"}");
    tu_assert_contains(s, "\"args\": {\"name\": \"cpu_adam\"}");
    ck_assert_ptr_nonnull(strstr(s, "]}\n"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_test(tc, tsv);
    tcase_add_test(tc, chrome);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
