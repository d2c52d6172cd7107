/* Check suite for exec/profile: the summary statistics, the CPU, memory and store measurements
 * on small sizes (positive, finite, in their ranges), the [ssd] keys derived from the store's
 * numbers, and the executor's time between tasks on the CPU reference and a fake device. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "graph.h"
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
    /* Adam while the store streams: both moved something, and the store's files are gone */
    Stat a;
    double io = 0;
    ck_assert_msg(profile_adam_under_io(1, 1 << 18, 2, dirs, 1, (size_t)8 << 20, &a, &io, &e) ==
                  0, "%s", e.msg);
    ck_assert(a.median > 0 && a.n == 2 && io > 0);
    ck_assert_int_lt(profile_adam_under_io(1, 1 << 18, 2, missing, 1, 1 << 20, &a, &io, &e), 0);
    tu_assert_contains(e.msg, "/nonexistent/fuyou");
    ck_assert_int_eq(profile_adam_under_io(1, 1 << 18, 0, dirs, 1, 1 << 20, &a, &io, &e),
                     -EINVAL);
    tu_rm_tree(dir);
}
END_TEST

/* A store profile with these medians, GB/s. */
static SsdProfile ssd_medians(double read, double write, double read2, double write2)
{
    SsdProfile p = {0};
    p.read_GBps.median = read;
    p.write_GBps.median = write;
    p.duplex_read_GBps.median = read2;
    p.duplex_write_GBps.median = write2;
    return p;
}

/* The [ssd] keys: per device what all moved over the count; duplex from together over alone,
 * within [1, 2]; host_GBps only with several directories that fall short of the first alone
 * times their count (by more than PROFILE_HOST_BOUND allows), as the most they moved. */
START_TEST(ssd_keys)
{
    Hardware hw = {.ssd_host_GBps = 7}; /* a base's ceiling does not describe these stripes */
    SsdProfile one = ssd_medians(2, 1, 1.5, 0.5);
    double ratio = profile_ssd_keys(&one, NULL, 1, &hw);
    ck_assert_int_eq(hw.ssd_count, 1);
    ck_assert_double_eq(hw.ssd_read_GBps, 2);
    ck_assert_double_eq(hw.ssd_write_GBps, 1);
    ck_assert_double_eq(hw.ssd_duplex, 1.25); /* 1.5/2 + 0.5/1 */
    ck_assert_double_eq(hw.ssd_read_bidir_GBps, 1.5); /* the rates together themselves */
    ck_assert_double_eq(hw.ssd_write_bidir_GBps, 0.5);
    ck_assert_double_eq(hw.ssd_host_GBps, 0);
    ck_assert_double_eq(ratio, 1);
    /* four stripes that scale: 8 + 4 of 4 x 2 (the most one moved, read + write together) */
    SsdProfile all = ssd_medians(8, 4, 6, 2);
    ratio = profile_ssd_keys(&all, &one, 4, &hw);
    ck_assert_int_eq(hw.ssd_count, 4);
    ck_assert_double_eq(hw.ssd_read_GBps, 2);
    ck_assert_double_eq(hw.ssd_write_GBps, 1);
    ck_assert_double_eq(hw.ssd_duplex, 1.25);
    ck_assert_double_eq(ratio, 1);
    ck_assert_double_eq(hw.ssd_host_GBps, 0);
    /* four stripes held to 5 GB/s in all, reads and writes: the host path */
    all = ssd_medians(5, 4, 2.5, 2.5);
    ratio = profile_ssd_keys(&all, &one, 4, &hw);
    ck_assert_double_eq(hw.ssd_read_GBps, 1.25);
    ck_assert_double_eq(hw.ssd_duplex, 1.125); /* 2.5/5 + 2.5/4 */
    ck_assert_double_eq(hw.ssd_read_bidir_GBps, 2.5 / 4); /* per directory */
    ck_assert_double_eq(ratio, 5.0 / 8);
    ck_assert_double_eq(hw.ssd_host_GBps, 5);
    /* within the noise allowed: no ceiling; and the duplex clamped to its range */
    all = ssd_medians(7.5, 4, 0.1, 0.1);
    ratio = profile_ssd_keys(&all, &one, 4, &hw);
    ck_assert_double_ge(ratio, PROFILE_HOST_BOUND);
    ck_assert_double_eq(hw.ssd_host_GBps, 0);
    ck_assert_double_eq(hw.ssd_duplex, 1);
    all = ssd_medians(8, 4, 8, 4);
    profile_ssd_keys(&all, &one, 4, &hw);
    ck_assert_double_eq(hw.ssd_duplex, 2);
}
END_TEST

/* The GEMM shapes the curve is measured on are the presets' own, each once */
START_TEST(gemm_shapes)
{
    GemmShape sh[128];
    int n = profile_gemm_shapes(200000000, 8192, sh, 128); /* presets up to 200 M parameters */
    ck_assert_int_gt(n, 0);
    bool qkv = false, head = false;
    for (int i = 0; i < n; i++) {
        /* tokens; the head runs on chunks of them (graph.h), over the presets' vocabularies
         * (the executors' aligned part of them) */
        bool is_head = sh[i].m == GRAPH_HEAD_CHUNK && (sh[i].n == 50240 || sh[i].n == 256);
        ck_assert_msg(sh[i].m == 8192 || is_head, "%d x %d x %d", sh[i].m, sh[i].n, sh[i].k);
        for (int j = 0; j < i; j++)
            ck_assert(sh[j].m != sh[i].m || sh[j].n != sh[i].n || sh[j].k != sh[i].k);
        qkv |= sh[i].n == 3 * 768 && sh[i].k == 768;       /* GPT-2 124M's attention input */
        head |= sh[i].n == 50240 && sh[i].k == 768;        /* and its LM head */
    }
    ck_assert(qkv);
    ck_assert(head);
    ck_assert_int_eq(profile_gemm_shapes(200000000, 8192, sh, 2), 2); /* at most max */
    ck_assert_int_eq(profile_gemm_shapes(1000, 8192, sh, 128), 0);    /* no preset that small */
}
END_TEST

/* The curve: one point per octave of size that has measurements, their medians */
START_TEST(gemm_curve)
{
    const double size[] = {256, 300, 700, 520, 4000, 5000, 6000, 300};
    const double eff[] = {0.01, 0.03, 0.2, 0.1, 0.7, 0.8, 0.75, 0.02};
    HwCurve c;
    ck_assert_int_eq(profile_gemm_curve(size, eff, 8, &c), 0);
    /* octaves [256, 512): 256 300 300; [512, 1024): 520 700; [4096, 8192): 5000 6000; and
     * [2048, 4096): 4000 */
    ck_assert_int_eq(c.n, 4);
    ck_assert_double_eq(c.dim[0], 300);
    ck_assert_double_eq(c.eff[0], 0.02);
    ck_assert_double_eq(c.dim[1], 610);
    ck_assert_double_eq_tol(c.eff[1], 0.15, 1e-12);
    ck_assert_double_eq(c.dim[2], 4000);
    ck_assert_double_eq(c.dim[3], 5500);
    ck_assert_double_eq_tol(c.eff[3], 0.775, 1e-12);
    for (int i = 1; i < c.n; i++)
        ck_assert_double_gt(c.dim[i], c.dim[i - 1]);
    ck_assert_int_eq(profile_gemm_curve(size, eff, 0, &c), -EINVAL);
}
END_TEST

/* The attention's curve: each head size once, increasing, at the median of its shapes (the
 * H200's measurements of 2026-11-30, in the order the presets give them) */
START_TEST(attn_curve)
{
    const int head_size[] = {64, 64, 64, 64, 96, 128, 80, 128, 128};
    const double eff[] = {0.09, 0.11, 0.12, 0.13, 0.05, 0.14, 0.05, 0.15, 0.16};
    HwCurve c;
    ck_assert_int_eq(profile_attn_curve(head_size, eff, 9, &c), 0);
    ck_assert_int_eq(c.n, 4);
    const double dim[] = {64, 80, 96, 128}, med[] = {0.115, 0.05, 0.05, 0.15};
    for (int i = 0; i < 4; i++) {
        ck_assert_double_eq(c.dim[i], dim[i]);
        ck_assert_double_eq_tol(c.eff[i], med[i], 1e-12);
    }
    ck_assert_int_eq(profile_attn_curve(head_size + 6, eff + 6, 1, &c), 0);
    ck_assert_int_eq(c.n, 1);
    ck_assert_double_eq(c.dim[0], 80);
    ck_assert_int_eq(profile_attn_curve(head_size, eff, 0, &c), -EINVAL);
}
END_TEST

/* A load that spins until told to stop, counting the spins while told to count (the Adam's
 * timed runs) and reporting 1.5 GB/s; one that fails at once */
static int spin_load(void *ctx, const ProfileLoadControl *lc, double *GBps, Err *e)
{
    (void)e;
    long *spins = ctx;
    while (!lc->stopped(lc->token))
        spins[lc->counting(lc->token)]++;
    *GBps = 1.5;
    return 0;
}

static int failing_load(void *ctx, const ProfileLoadControl *lc, double *GBps, Err *e)
{
    (void)ctx, (void)lc, (void)GBps;
    return err_set(e, -EIO, "the load failed");
}

/* The Adam task beside a load: its rate, the load's report, the load stopped when Adam is done
 * (else this never returns); the load's failure is the result */
START_TEST(adam_beside)
{
    long spins[2] = {0, 0}; /* outside, inside the timed runs */
    Stat s;
    double GBps = 0;
    Err e;
    ck_assert_int_eq(profile_adam_beside(2, 1 << 22, 3, spin_load, spins, &s, &GBps, &e), 0);
    /* the timed runs (tens of ms) waited for the load to start, and it counted during them */
    ck_assert_int_gt(spins[1], 0);
    ck_assert_int_eq(s.n, 3);
    ck_assert_double_gt(s.median, 0);
    ck_assert_double_eq(GBps, 1.5);
    ck_assert_int_eq(profile_adam_beside(2, 1 << 20, 1, failing_load, NULL, &s, &GBps, &e),
                     -EIO);
    tu_assert_contains(e.msg, "the load failed");
    ck_assert_int_eq(profile_adam_beside(2, 1 << 20, 0, spin_load, spins, &s, &GBps, &e),
                     -EINVAL);
}
END_TEST

/* A device for profile_dispatch: empty tasks that take 1 ms on the lane, the last half of it
 * on the device's own clock when it has one (timed). Its span is taken when a task is issued
 * and handed back when the lane asks whether it ended, as a device's events would be read:
 * a probe that timed by the lane's clock instead would see gaps near 0, not 0.5 ms. */
static bool fake_timed;
static int fake_create(Device **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    (void)c, (void)B, (void)T, (void)wp, (void)e;
    *out = (Device *)&fake_timed; /* any non-NULL pointer: nothing is kept */
    return 0;
}
static void fake_destroy(Device *d) { (void)d; }
static DeviceSpan fake_span[DEVICE_SLOTS];
static int fake_compute_empty(Device *d, int slot, Err *e)
{
    (void)d, (void)e;
    struct timespec ms = {0, 1000000};
    double t0 = clock_monotonic_s();
    nanosleep(&ms, NULL);
    double t1 = clock_monotonic_s();
    fake_span[slot] = (DeviceSpan){fake_timed, t0 + (t1 - t0) / 2, t1};
    return 0;
}
static int fake_compute_ended(Device *d, int slot, DeviceSpan *span, Err *e)
{
    (void)d, (void)e;
    *span = fake_span[slot];
    return 1;
}
static const DeviceOps fake_device = {
    .name = "fake", .weight_type = DTYPE_FP32, .grad_type = DTYPE_FP32, .create = fake_create,
    .destroy = fake_destroy, .compute_empty = fake_compute_empty,
    .compute_ended = fake_compute_ended,
};

/* The executor's time between tasks: the CPU reference's empty tasks (no timers: the lane's clock)
 * and a device's 1 ms tasks timed by the lane give positive gaps; where the device times only
 * the second half of each task, the first half is the executor's and counts in every gap (at
 * least 0.5 ms by construction, whatever the machine's load). Beside the Adam task, the gaps
 * while it ran. No bound on how short a gap is: that is the machine's scheduling. */
START_TEST(dispatch)
{
    Stat s;
    double mean;
    Err e;
    ck_assert_int_eq(profile_dispatch(&device_cpu, 200, &s, &mean, &e), 0);
    ck_assert_int_eq(s.n, 199);
    ck_assert_double_gt(s.min, 0);
    ck_assert(s.min <= s.median && s.median <= s.max && s.min <= mean && mean <= s.max);
    fake_timed = false;
    ck_assert_int_eq(profile_dispatch(&fake_device, 20, &s, &mean, &e), 0);
    ck_assert_int_eq(s.n, 19);
    ck_assert_double_gt(s.min, 0);
    fake_timed = true;
    ck_assert_int_eq(profile_dispatch(&fake_device, 20, &s, &mean, &e), 0);
    ck_assert_double_ge(s.min, 450);
    ck_assert_int_eq(profile_dispatch(&device_cpu, 1, &s, &mean, &e), -EINVAL);
    DispatchLoad dl = {.ops = &device_cpu};
    double GBps = 1;
    ck_assert_int_eq(profile_adam_beside(2, 1 << 22, 3, profile_dispatch_load, &dl, &s, &GBps,
                                         &e), 0);
    ck_assert_int_ge(dl.gap_us.n, 2);
    ck_assert_double_gt(dl.gap_us.min, 0);
    ck_assert_double_eq(GBps, 0);
}
END_TEST

/* The memory-bound line: points on t = bytes / B + l give B and l back; noise of a few percent
 * moves neither far. Sizes the cache holds run twice as fast: B comes from the ones beyond it
 * alone, l from the small ones (a fit of all by relative error gives 3486 GB/s here). */
START_TEST(mem_fit)
{
    double bytes[10], t[10], GBps, launch_us, beyond = 200e6;
    for (int i = 0; i < 10; i++) {
        bytes[i] = 6144.0 * (1 << (2 * i)); /* 6 KiB to 1.5 GiB */
        t[i] = bytes[i] / 3000e9 + 4e-6;
    }
    ck_assert_int_eq(profile_mem_fit(bytes, t, 10, beyond, &GBps, &launch_us), 0);
    ck_assert_double_eq_tol(GBps, 3000, 1e-6);
    ck_assert_double_eq_tol(launch_us, 4, 1e-9);
    for (int i = 0; i < 10; i++) /* a cache of 50 MB: what fits runs at twice the rate */
        t[i] = bytes[i] / (bytes[i] <= 50e6 ? 6000e9 : 3000e9) + 4e-6;
    ck_assert_int_eq(profile_mem_fit(bytes, t, 10, beyond, &GBps, &launch_us), 0);
    ck_assert_double_eq_tol(GBps, 3000, 1e-6);
    ck_assert_double_eq_tol(launch_us, 4, 0.5);
    for (int i = 0; i < 10; i++)
        t[i] *= i % 2 ? 1.03 : 0.97;
    ck_assert_int_eq(profile_mem_fit(bytes, t, 10, beyond, &GBps, &launch_us), 0);
    ck_assert_double_eq_tol(GBps, 3000, 300);
    ck_assert_double_eq_tol(launch_us, 4, 0.5);
    /* a slope that is not positive, too few points beyond the cache, a time that is not */
    double flat[3] = {1e-5, 1e-5, 0.9e-5}, big3[3] = {3e8, 6e8, 1.2e9};
    ck_assert_int_eq(profile_mem_fit(big3, flat, 3, beyond, &GBps, &launch_us), -EINVAL);
    ck_assert_int_eq(profile_mem_fit(bytes, t, 9, beyond, &GBps, &launch_us), -EINVAL);
    t[3] = 0;
    ck_assert_int_eq(profile_mem_fit(bytes, t, 10, beyond, &GBps, &launch_us), -EINVAL);
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
    tcase_add_test(tc, ssd_keys);
    tcase_add_test(tc, gemm_shapes);
    tcase_add_test(tc, gemm_curve);
    tcase_add_test(tc, attn_curve);
    tcase_add_test(tc, mem_fit);
    tcase_add_test(tc, adam_beside);
    tcase_add_test(tc, dispatch);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
