/* GPU suite for exec/cuda/cuda_device: on a machine with a GPU, the probe finds it and runs a
 * kernel; elsewhere the suite prints SKIP with the runtime's reason and exits 77. Run without
 * fork (CK_FORK=no): a child forked after CUDA initialised cannot use it. */
#include "cuda_device.h"
#include "testutil.h"

static CudaDeviceInfo info;

START_TEST(probe)
{
    ck_assert_int_gt(info.sm_count, 0);
    ck_assert_int_ge(info.cc_major, 5);
    ck_assert_uint_gt(info.mem_bytes, 0);
    ck_assert_uint_le(info.free_bytes, info.mem_bytes);
}
END_TEST

int main(void)
{
    Err e;
    if (cudadev_probe(&info, &e)) {
        printf("SKIP: %s\n", e.msg);
        return 77;
    }
    printf("GPU: %s, sm_%d%d, %d SMs, %.1f GiB\n", info.name, info.cc_major, info.cc_minor,
           info.sm_count, info.mem_bytes / 1073741824.0);
    Suite *s = suite_create("cuda_device");
    TCase *tc = tcase_create("cuda_device");
    tcase_add_test(tc, probe);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
