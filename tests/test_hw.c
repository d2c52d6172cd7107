/* Check suite for model/hw: presets, overrides, the GEMM efficiency curve, and every bad-input
 * case giving one line with file:line (or the --set argument) and the problem. */
#include <errno.h>
#include <math.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "hw.h"
#include "testutil.h"

/* A complete, valid ini; tests derive bad ones from it by substitution. */
static const char *good_ini =
    "[gpu]\n"                                   /* 1 */
    "name = test gpu\n"                         /* 2 */
    "mem_GiB = 24\n"                            /* 3 */
    "bf16_TFLOPS = 100\n"                       /* 4 */
    "fp32_TFLOPS = 50\n"                        /* 5 */
    "mem_GBps = 1000\n"                         /* 6 */
    "launch_us = 4\n"                           /* 7 */
    "attn_efficiency = 0.5\n"                   /* 8 */
    "gemm_efficiency = 512:0.4 1024:0.6 4096:0.9\n" /* 9 */
    "[pcie]\n"                                  /* 10 */
    "h2d_GBps = 25 ; measured\n"                /* 11 */
    "d2h_GBps = 24\n"                           /* 12 */
    "latency_us = 10\n"                         /* 13 */
    "[cpu]\n"                                   /* 14 */
    "cores = 8\n"                               /* 15 */
    "mem_GBps = 100\n"                          /* 16 */
    "adam_Gparams_per_s = 2\n"                  /* 17 */
    "[ssd]\n"                                   /* 18 */
    "count = 2\n"                               /* 19 */
    "read_GBps = 6\n"                           /* 20 */
    "write_GBps = 3\n"                          /* 21 */
    "duplex_factor = 1\n"                       /* 22 */
    "latency_us = 80\n"                         /* 23 */
    "capacity_GB = 1000\n"                      /* 24 */
    "[memory]\n"                                /* 25 */
    "cpu_mem_GiB = 256\n";                      /* 26 */

/* good_ini with the first occurrence of from replaced by to. */
static char *edit(const char *from, const char *to)
{
    static char buf[4096];
    const char *p = strstr(good_ini, from);
    ck_assert_ptr_nonnull(p);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good_ini), good_ini, to, p + strlen(from));
    return buf;
}

static int load_text(const char *text, const char *const *sets, int n, Hardware *hw, Err *e,
                     char *path, size_t pathlen)
{
    tu_temp_file(path, pathlen, ".ini", text);
    int rc = hw_load(path, sets, n, hw, e);
    unlink(path);
    return rc;
}

/* Loads text; expects -EINVAL with "path<where>" and what in one line. */
static void expect_bad(const char *text, const char *where, const char *what)
{
    char path[64], want[96];
    Hardware hw;
    Err e;
    int rc = load_text(text, NULL, 0, &hw, &e, path, sizeof path);
    ck_assert_msg(rc == -EINVAL, "rc %d for %s", rc, what);
    snprintf(want, sizeof want, "%s%s", path, where);
    tu_assert_contains(e.msg, want);
    tu_assert_contains(e.msg, what);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    hw_free(&hw);
}

START_TEST(good_file)
{
    char path[64];
    Hardware hw;
    Err e;
    ck_assert_msg(load_text(good_ini, NULL, 0, &hw, &e, path, sizeof path) == 0, "%s", e.msg);
    ck_assert_str_eq(hw.gpu_name, "test gpu");
    ck_assert_double_eq(hw.h2d_GBps, 25);
    ck_assert_double_eq(hw.h2d_bidir_GBps, 25); /* defaults to one direction */
    ck_assert_int_eq(hw.ssd_count, 2);
    ck_assert_double_eq(hw_ssd_bytes(&hw), 2e12);
    ck_assert_double_eq(hw_cpu_bytes(&hw), 256 * 0x1p30);
    hw_free(&hw);
}
END_TEST

/* Where a value came from: the comment lines right above the key in its section, `#` and `;`
 * alike, joined, then its inline comment; read as inih reads the file (a UTF-8 byte order mark,
 * text after a section's `]`, `key: value`); none for a key without one, one in another
 * section, a key only named in a comment, or after a blank line, a lone `#`; a preset's own; a
 * file that is not there, a directory */
START_TEST(comments)
{
    const char *text = "\xEF\xBB\xBF# the file\n[gpu]\n# measured\n;   twice\nname = g\n\n"
                       "mem_GiB = 24\n#\nlaunch_us = 4\n"
                       "[cpu] ; the host\n# the cores\n\ncores = 8\n; mem_GBps = 5 in a comment\n\n"
                       "# how fast\nadam_Gparams_per_s: 2 ; per second\n"
                       "[ssd]\n; the disk\nname = s\n";
    char path[64], out[64];
    tu_temp_file(path, sizeof path, ".ini", text);
    ck_assert_int_eq(hw_comment(path, "gpu", "name", out, sizeof out), 1);
    ck_assert_str_eq(out, "measured twice");
    ck_assert_int_eq(hw_comment(path, "ssd", "name", out, sizeof out), 1);
    ck_assert_str_eq(out, "the disk");
    ck_assert_int_eq(hw_comment(path, "cpu", "adam_Gparams_per_s", out, sizeof out), 1);
    ck_assert_str_eq(out, "how fast per second");
    ck_assert_int_eq(hw_comment(path, "gpu", "mem_GiB", out, sizeof out), 0);
    ck_assert_int_eq(hw_comment(path, "gpu", "launch_us", out, sizeof out), 0);
    ck_assert_int_eq(hw_comment(path, "cpu", "cores", out, sizeof out), 0);
    ck_assert_int_eq(hw_comment(path, "cpu", "mem_GBps", out, sizeof out), 0);
    ck_assert_int_eq(hw_comment(path, "cpu", "name", out, sizeof out), 0);
    ck_assert_int_eq(hw_comment(path, "pcie", "name", out, sizeof out), 0);
    char small[8];
    ck_assert_int_eq(hw_comment(path, "gpu", "name", small, sizeof small), 1);
    ck_assert_str_eq(small, "measure");
    Hardware hw; /* the ini reader reads the same file as these lines say */
    Err e;
    ck_assert_int_eq(hw_load(path, NULL, 0, &hw, &e), -EINVAL); /* incomplete, but read */
    tu_assert_contains(e.msg, "lacks required key");
    unlink(path);
    ck_assert_int_eq(hw_comment(path, "gpu", "name", out, sizeof out), -ENOENT);
    ck_assert_int_eq(hw_comment("/tmp", "gpu", "name", out, sizeof out), -EISDIR);
    char big[512];
    ck_assert_int_eq(hw_comment("h200", "gpu", "task_us", big, sizeof big), 1);
    tu_assert_contains(big, "gaps between dependent GPU tasks in the pipeline's traces");
    ck_assert_int_eq(hw_comment("h200", "gpu", "bf16_TFLOPS", big, sizeof big), 1);
    /* the text read once, then key after key: the same comments (a preset owns nothing) */
    const char *desc;
    char *owned, again[512];
    ck_assert_int_eq(hw_description_text("h200", &desc, &owned), 0);
    ck_assert_ptr_null(owned);
    ck_assert_int_eq(hw_comment_in(desc, "gpu", "bf16_TFLOPS", again, sizeof again), 1);
    ck_assert_str_eq(again, big);
    ck_assert_int_eq(hw_comment_in(desc, "gpu", "no_such_key", again, sizeof again), 0);
    ck_assert_int_eq(hw_description_text("/tmp", &desc, &owned), -EISDIR);
    ck_assert_ptr_null(desc);
}
END_TEST

START_TEST(presets_load)
{
    for (int i = 0; hw_preset_name(i); i++) {
        Hardware hw;
        Err e;
        ck_assert_msg(hw_load(hw_preset_name(i), NULL, 0, &hw, &e) == 0, "%s", e.msg);
        ck_assert_double_gt(hw.gpu_bf16_TFLOPS, 0);
        hw_free(&hw);
    }
    Hardware hw;
    Err e;
    ck_assert_int_eq(hw_load("4090", NULL, 0, &hw, &e), 0); /* .ini may be left out */
    ck_assert_int_eq(hw.ssd_count, 12);
    ck_assert_double_eq(hw.gpu_bf16_TFLOPS, 165.2);
    hw_free(&hw);
    ck_assert_int_eq(hw_load("h200.ini", NULL, 0, &hw, &e), 0);
    ck_assert_double_eq(hw.d2h_bidir_GBps, 50.9);
    ck_assert_double_eq(hw.gpu_task_us, 15); /* optional, given */
    hw_free(&hw);
    ck_assert_int_eq(hw_load("4090.ini", NULL, 0, &hw, &e), 0);
    ck_assert_double_eq(hw.gpu_task_us, 0); /* optional, absent */
    hw_free(&hw);
}
END_TEST

START_TEST(unknown_preset)
{
    Hardware hw;
    Err e;
    ck_assert_int_eq(hw_load("3090.ini", NULL, 0, &hw, &e), -ENOENT);
    tu_assert_contains(e.msg, "unknown hardware '3090.ini'");
    tu_assert_contains(e.msg, "4090.ini");
    ck_assert_int_eq(hw_load("/no/such/dir/x.ini", NULL, 0, &hw, &e), -ENOENT);
    tu_assert_contains(e.msg, "/no/such/dir/x.ini: cannot read");
    ck_assert_int_eq(hw_load("/tmp", NULL, 0, &hw, &e), -EISDIR);
    tu_assert_contains(e.msg, "/tmp: is a directory");
}
END_TEST

START_TEST(overrides)
{
    const char *sets[] = {"ssd.count=3", " pcie.h2d_GBps = 12.5 ", "pcie.h2d_bidir_GBps=10"};
    Hardware hw;
    Err e;
    ck_assert_msg(hw_load("4090.ini", sets, 3, &hw, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(hw.ssd_count, 3);
    ck_assert_double_eq(hw.h2d_GBps, 12.5);
    hw_free(&hw);
    /* overrides are validated together with the file: bidir above one-direction is refused */
    ck_assert_int_eq(hw_load("4090.ini", sets + 1, 1, &hw, &e), -EINVAL);
    tu_assert_contains(e.msg, "a copy both ways at once is not faster");
    /* an override can supply a key the file lacks */
    char path[64];
    const char *fill[] = {"memory.cpu_mem_GiB=64"};
    ck_assert_int_eq(load_text(edit("cpu_mem_GiB = 256\n", ""), fill, 1, &hw, &e, path,
                               sizeof path), 0);
    ck_assert_double_eq(hw.cpu_mem_GiB, 64);
    hw_free(&hw);
}
END_TEST

START_TEST(bad_overrides)
{
    static const struct { const char *set, *what; } cases[] = {
        {"ssd.count", "expected section.key=value"},
        {"count=3", "expected section.key=value"},
        {"sdd.count=3", "unknown section [sdd]"},
        {"ssd.cuont=3", "unknown key 'cuont' in [ssd]"},
        {"cpu.adam_io_GBps=1500", "key 'adam_io_GBps' in [cpu] is retired"},
        {"pcie.d2h_adam_GBps=50", "delete its line"},
        {"ssd.count=0", "whole number from 1 to 1024"},
        {"pcie.h2d_GBps=-1", "from 0.001 to 10000"},
        {"pcie.h2d_GBps=fast", "expected a number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Hardware hw;
        Err e;
        const char *sets[] = {cases[i].set};
        ck_assert_int_eq(hw_load("4090.ini", sets, 1, &hw, &e), -EINVAL);
        char want[64];
        snprintf(want, sizeof want, "--set %s", cases[i].set);
        tu_assert_contains(e.msg, want);
        tu_assert_contains(e.msg, cases[i].what);
    }
}
END_TEST

START_TEST(bad_files)
{
    expect_bad(edit("[pcie]", "[pcei]"), ":10:", "unknown section [pcei]");
    expect_bad(edit("[memory]\n", "[memory]\n[extra]\n"), ":26:", "unknown section [extra]");
    expect_bad(edit("mem_GBps = 100\n", "mem_gbps = 100\n"), ":16:", "unknown key 'mem_gbps' in [cpu]");
    /* an older profile's key the cost model retired: its file and line, and what to do */
    expect_bad(edit("mem_GBps = 100\n", "mem_GBps = 100\nsum_first_GBps = 55.2\n"), ":17:",
               "key 'sum_first_GBps' in [cpu] is retired: the cost model no longer reads it");
    expect_bad(edit("cores = 8\n", ""), ":", "[cpu] lacks required key 'cores'");
    expect_bad(edit("read_GBps = 6", "read_GBps = six"), ":20:", "expected a number");
    expect_bad(edit("read_GBps = 6", "read_GBps = 6 GB/s"), ":20:", "expected a number");
    expect_bad(edit("read_GBps = 6", "read_GBps = -6"), ":20:", "from 0.001 to 10000");
    expect_bad(edit("h2d_GBps = 25", "h2d_GBps = 0"), ":11:", "from 0.001 to 10000");
    expect_bad(edit("mem_GiB = 24", "mem_GiB = 0"), ":3:", "greater than 0 and at most 1048576");
    expect_bad(edit("attn_efficiency = 0.5", "attn_efficiency = 1.5"), ":8:", "from 0.001 to 1");
    expect_bad(edit("duplex_factor = 1", "duplex_factor = 3"), ":22:", "between 1");
    /* the SSD's rates together: both or neither, neither above its rate alone */
    expect_bad(edit("duplex_factor = 1\n", "duplex_factor = 1\nread_bidir_GBps = 3\n"), ":",
               "read_bidir_GBps and write_bidir_GBps come together");
    expect_bad(edit("duplex_factor = 1\n", "duplex_factor = 1\nread_bidir_GBps = 7\n"
                    "write_bidir_GBps = 1\n"), ":", "a direction is not faster while the other");
    expect_bad(edit("count = 2", "count = 2.5"), ":19:", "whole number");
    expect_bad(edit("d2h_GBps = 24\n", "d2h_GBps = 24\nd2h_GBps = 20\n"), ":13:",
               "given twice (first on line 12)");
    expect_bad(edit("4096:0.9", "256:0.9"), ":9:", "dims must increase");
    expect_bad(edit("4096:0.9", "4096:"), ":9:", "dim:efficiency pairs");
    expect_bad(edit("4096:0.9", "4096:2"), ":9:", "0.0001 <= efficiency");
    expect_bad(edit("latency_us = 10\n", "latency_us = 10\nh2d_bidir_GBps = 30\n"), ":",
               "a copy both ways at once is not faster");
    expect_bad(edit("[cpu]\n", "[cpu\n"), ":14:", "syntax error");
    expect_bad(edit("cores = 8\n", "cores\n"), ":15:", "syntax error");
}
END_TEST

START_TEST(long_line)
{
    char text[4096], pad[300];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    snprintf(text, sizeof text, "[gpu]\nname = %s\n", pad);
    expect_bad(text, ":2:", "line longer than");
}
END_TEST

START_TEST(gemm_curve)
{
    char path[64];
    Hardware hw;
    Err e;
    ck_assert_int_eq(load_text(good_ini, NULL, 0, &hw, &e, path, sizeof path), 0);
    /* at the points, exactly; beyond the ends, clamped */
    ck_assert_double_eq_tol(hw_gemm_efficiency(&hw, 1024, 1024, 1024), 0.6, 1e-12);
    ck_assert_double_eq_tol(hw_gemm_efficiency(&hw, 512, 512, 512), 0.4, 1e-12);
    ck_assert_double_eq(hw_gemm_efficiency(&hw, 64, 64, 64), 0.4);
    ck_assert_double_eq(hw_gemm_efficiency(&hw, 1 << 16, 1 << 16, 1 << 16), 0.9);
    /* monotone between points (Steffen does not overshoot) */
    double prev = 0;
    for (int n = 512; n <= 4096; n += 64) {
        double eff = hw_gemm_efficiency(&hw, n, n, n);
        ck_assert_double_ge(eff, prev - 1e-12);
        ck_assert_double_le(eff, 0.9 + 1e-12);
        prev = eff;
    }
    /* a skinny GEMM is as slow as its small side suggests: 3/(1/m+1/n+1/k) */
    double skinny = hw_gemm_efficiency(&hw, 65536, 65536, 384);
    ck_assert_double_eq_tol(skinny, hw_gemm_efficiency(&hw, 3.0 / (2.0 / 65536 + 1.0 / 384) + 0.5,
                                                       3.0 / (2.0 / 65536 + 1.0 / 384) + 0.5,
                                                       3.0 / (2.0 / 65536 + 1.0 / 384) + 0.5),
                            1e-3);
    hw_free(&hw);
}
END_TEST

static const char *note_cores(void *ctx, const char *section, const char *key)
{
    (void)ctx;
    /* as long as fuyou-profile's notes get (a GEMM curve's), which once made a line the reader
     * refused */
    static const char *longer =
        "[meas] cuBLAS bf16 squares, median of 20, over bf16_TFLOPS: 256 2, 512 17, 1024 117, "
        "2048 437, 4096 706, 8192 749 TFLOP/s, and then some more words so that the note is "
        "longer than any line the ini reader takes: 200 characters";
    if (!strcmp(section, "gpu") && !strcmp(key, "gemm_efficiency"))
        return longer;
    return !strcmp(section, "cpu") && !strcmp(key, "cores") ? "[meas] counted" : NULL;
}

/* hw_write writes what hw_load reads back, every preset (with the optional keys no preset
 * has set, as fuyou-profile writes them) */
START_TEST(write_round_trips)
{
    const char *sets[] = {"ssd.host_GBps=11.5", "gpu.task_us=9.25", "cpu.sum_GBps=47.5"};
    for (int i = 0; hw_preset_name(i); i++) {
        Hardware a, b;
        Err e;
        ck_assert_int_eq(hw_load(hw_preset_name(i), sets, 3, &a, &e), 0);
        char path[] = "/tmp/fuyou-hw-XXXXXX.ini";
        int fd = mkstemps(path, 4);
        ck_assert_int_ge(fd, 0);
        FILE *f = fdopen(fd, "w");
        ck_assert_int_eq(hw_write(f, &a, note_cores, NULL), 0);
        fclose(f);
        ck_assert_msg(hw_load(path, NULL, 0, &b, &e) == 0, "%s: %s", hw_preset_name(i), e.msg);
        ck_assert_double_eq_tol(b.gpu_bf16_TFLOPS, a.gpu_bf16_TFLOPS, 1e-5 * a.gpu_bf16_TFLOPS);
        ck_assert_double_eq_tol(b.adam_Gparams_per_s, a.adam_Gparams_per_s, 1e-6);
        ck_assert_double_eq_tol(b.ssd_duplex, a.ssd_duplex, 1e-9);
        ck_assert_double_eq_tol(b.h2d_bidir_GBps, a.h2d_bidir_GBps, 1e-5);
        ck_assert_double_eq(b.gpu_nvlink_GBps, a.gpu_nvlink_GBps);
        /* the optional keys of the H200's measurements (0 where a preset has none) */
        ck_assert_double_eq_tol(b.gpu_task_us, 9.25, 1e-9);
        ck_assert_double_eq_tol(b.ssd_host_GBps, 11.5, 1e-9);
        ck_assert_double_eq_tol(b.cpu_sum_GBps, 47.5, 1e-9);
        ck_assert_double_eq(b.ssd_read_bidir_GBps, a.ssd_read_bidir_GBps);
        ck_assert_double_eq(b.ssd_write_bidir_GBps, a.ssd_write_bidir_GBps);
        ck_assert_double_eq(b.price_gpu_usd, a.price_gpu_usd);
        ck_assert_double_eq(b.price_ssd_usd, a.price_ssd_usd);
        ck_assert_double_eq(b.price_host_usd, a.price_host_usd);
        ck_assert_int_eq(b.cpu_cores, a.cpu_cores);
        ck_assert_int_eq(b.gemm.n, a.gemm.n);
        for (int k = 0; k < a.gemm.n; k++)
            ck_assert_double_eq_tol(b.gemm.eff[k], a.gemm.eff[k], 1e-4);
        ck_assert_int_eq(b.attn.n, a.attn.n);
        for (int k = 0; k < a.attn.n; k++) {
            ck_assert_double_eq(b.attn.dim[k], a.attn.dim[k]);
            ck_assert_double_eq(b.attn.eff[k], a.attn.eff[k]);
        }
        ck_assert_str_eq(b.gpu_name, a.gpu_name);
        char text[8192];
        f = fopen(path, "r");
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
        tu_assert_contains(text, "; [meas] counted");
        for (char *line = text, *end; *line; line = end + 1) {
            end = strchr(line, '\n');
            ck_assert_ptr_nonnull(end);
            ck_assert_int_le(end - line, 100);
        }
        unlink(path);
        hw_free(&a);
        hw_free(&b);
    }
}
END_TEST

/* Every numeric key has a plausible range: values that are finite but absurd (a latency of
 * 1e305 us aborted the simulator; 1e-300 TFLOPS printed 300-digit times) are refused, naming
 * the key and its range; the ends of each range are accepted. */
START_TEST(key_ranges)
{
    static const struct { const char *set, *key, *range; } bad[] = {
        {"pcie.latency_us=1e305", "latency_us", "from 0 to 10000"},
        {"gpu.bf16_TFLOPS=1e-300", "bf16_TFLOPS", "from 0.001 to 100000"},
        {"gpu.launch_us=1e300", "launch_us", "from 0 to 10000"},
        {"gpu.fp32_TFLOPS=1e6", "fp32_TFLOPS", "from 0.001 to 100000"},
        {"gpu.mem_GBps=1e-9", "mem_GBps", "from 0.001 to 1000000"},
        {"gpu.mem_GiB=1e300", "mem_GiB", "at most 1048576"},
        {"gpu.attn_efficiency=1e-300", "attn_efficiency", "from 0.001 to 1"},
        {"pcie.h2d_GBps=1e300", "h2d_GBps", "from 0.001 to 10000"},
        {"pcie.d2h_bidir_GBps=1e-300", "d2h_bidir_GBps", "from 0.001 to 10000"},
        {"cpu.cores=100000", "cores", "from 1 to 65536"},
        {"cpu.mem_GBps=1e300", "mem_GBps", "from 0.001 to 100000"},
        {"cpu.adam_Gparams_per_s=1e-300", "adam_Gparams_per_s", "from 0.0001 to 10000"},
        {"ssd.count=1000000", "count", "from 1 to 1024"},
        {"ssd.read_GBps=1e-300", "read_GBps", "from 0.001 to 10000"},
        {"ssd.write_GBps=1e300", "write_GBps", "from 0.001 to 10000"},
        {"ssd.host_GBps=0", "host_GBps", "from 0.001 to 10000"},
        {"ssd.host_GBps=1e5", "host_GBps", "from 0.001 to 10000"},
        {"ssd.latency_us=1e300", "latency_us", "from 0 to 100000"},
        {"ssd.capacity_GB=1e300", "capacity_GB", "at most 10000000"},
        {"memory.cpu_mem_GiB=1e300", "cpu_mem_GiB", "at most 1048576"},
        {"memory.cpu_reserved_GiB=1e300", "cpu_reserved_GiB", "from 0 to 1048576"},
        {"gpu.gemm_efficiency=1024:1e-300", "gemm_efficiency", "0.0001 <= efficiency"},
        {"gpu.gemm_efficiency=1e300:0.5", "gemm_efficiency", "dim <= 1e+09"},
        {"gpu.attn_efficiency=64:1e-300", "attn_efficiency", "0.001 <= efficiency <= 1"},
        {"gpu.attn_efficiency=64:1.2", "attn_efficiency", "0.001 <= efficiency <= 1"},
        {"gpu.attn_efficiency=262144:0.5", "attn_efficiency", "1 <= head_size <= 131072"},
        {"gpu.nvlink_GBps=0", "nvlink_GBps", "from 0.001 to 10000"},
        {"gpu.nvlink_GBps=1e5", "nvlink_GBps", "from 0.001 to 10000"},
        {"price.gpu_usd=0", "gpu_usd", "greater than 0 and at most 100000000"},
        {"price.ssd_usd=-300", "ssd_usd", "greater than 0 and at most 100000000"},
        {"price.host_usd=1e9", "host_usd", "greater than 0 and at most 100000000"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Hardware hw;
        Err e;
        const char *sets[] = {bad[i].set};
        ck_assert_msg(hw_load("4090.ini", sets, 1, &hw, &e) == -EINVAL, "%s accepted",
                      bad[i].set);
        tu_assert_contains(e.msg, bad[i].set);
        tu_assert_contains(e.msg, bad[i].key);
        tu_assert_contains(e.msg, bad[i].range);
        ck_assert_ptr_null(strchr(e.msg, '\n'));
    }
    const char *ends[] = {"pcie.latency_us=10000", "gpu.bf16_TFLOPS=0.001", "gpu.launch_us=0",
                          "ssd.count=1024", "cpu.cores=65536", "gpu.attn_efficiency=1",
                          "memory.gpu_reserved_GiB=0", "gpu.mem_GiB=1048576",
                          "ssd.host_GBps=0.001", "gpu.nvlink_GBps=10000", "price.gpu_usd=1e8",
                          "price.ssd_usd=0.01", "gpu.attn_efficiency=1:0.001 131072:1"};
    Hardware hw;
    Err e;
    ck_assert_msg(hw_load("4090.ini", ends, sizeof ends / sizeof ends[0], &hw, &e) == 0, "%s",
                  e.msg);
    hw_free(&hw);
}
END_TEST

/* Writes n bytes to a new temporary file; its path in buf. */
static void temp_bytes(char *buf, size_t len, const char *bytes, size_t n)
{
    snprintf(buf, len, "/tmp/fuyou-test-XXXXXX.ini");
    int fd = mkstemps(buf, 4);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, bytes, n), (ssize_t)n);
    close(fd);
}

/* A NUL byte inside a value used to cut it short silently (`cores = 5\0 2` read as 5) */
START_TEST(nul_byte)
{
    static const char text[] = "[gpu]\nname = x\n[cpu]\ncores = 5\0 2\nmem_GBps = 100\n";
    char path[64], want[96];
    temp_bytes(path, sizeof path, text, sizeof text - 1);
    Hardware hw;
    Err e;
    int rc = hw_load(path, NULL, 0, &hw, &e);
    unlink(path);
    ck_assert_int_eq(rc, -EINVAL);
    snprintf(want, sizeof want, "%s:4: ", path);
    tu_assert_contains(e.msg, want);
    tu_assert_contains(e.msg, "NUL byte");
    ck_assert_ptr_null(strchr(e.msg, '\n'));
}
END_TEST

/* Whatever is not a regular file is refused before it is opened for reading: /dev/zero once
 * grew memory without bound, and a FIFO blocks in open until a writer comes. */
START_TEST(not_regular_files)
{
    Hardware hw;
    Err e;
    ck_assert_int_eq(hw_load("/dev/zero", NULL, 0, &hw, &e), -EINVAL);
    tu_assert_contains(e.msg, "/dev/zero: is a character device, not a regular file");
    char dir[] = "/tmp/fuyou-fifo-XXXXXX", fifo[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/hw.ini", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(10); /* an open that blocks fails the test instead of hanging it */
    int rc = hw_load(fifo, NULL, 0, &hw, &e);
    alarm(0);
    unlink(fifo);
    rmdir(dir);
    ck_assert_int_eq(rc, -EINVAL);
    tu_assert_contains(e.msg, "hw.ini: is a FIFO");
}
END_TEST

/* A regular file with one endless line (a sparse file of 8 GiB of zero bytes) is refused at
 * its first line without reading the line whole: under a 1 GiB address-space limit the old
 * reader ran out of memory and reported a missing key instead. */
START_TEST(endless_line)
{
    char path[] = "/tmp/fuyou-test-XXXXXX.ini";
    int fd = mkstemps(path, 4);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)8 << 30), 0);
    close(fd);
#if !defined(__SANITIZE_ADDRESS__)
    struct rlimit lim = {(rlim_t)1 << 30, (rlim_t)1 << 30};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0); /* this forked test's process only */
#endif
    Hardware hw;
    Err e;
    int rc = hw_load(path, NULL, 0, &hw, &e);
    unlink(path);
    ck_assert_int_eq(rc, -EINVAL);
    char want[64];
    snprintf(want, sizeof want, "%s:1: ", path);
    tu_assert_contains(e.msg, want);
}
END_TEST

/* Found writing fuzz_hw (tests/fuzz/corpus/hw/regress-gemm-dims-too-close): two GEMM dims
 * that differ but have the same log2, where the curve is interpolated, made GSL's error
 * handler abort the process; now one line naming the dims, as a file and as --set. */
START_TEST(gemm_dims_too_close)
{
    expect_bad(edit("512:0.4 1024:0.6", "4.8261724457000019:0.4 4.8261724457000028:0.6"), ":9:",
               "too close to interpolate");
    Hardware hw;
    Err e;
    const char *sets[] = {"gpu.gemm_efficiency=100:0.2 4.8261724457000019:0.4 "
                          "4.8261724457000028:0.6"};
    ck_assert_int_eq(hw_load("4090.ini", sets, 1, &hw, &e), -EINVAL);
    tu_assert_contains(e.msg, "dims must increase");
    sets[0] = "gpu.gemm_efficiency=4.8261724457000019:0.4 4.8261724457000028:0.6 100:0.7";
    ck_assert_int_eq(hw_load("4090.ini", sets, 1, &hw, &e), -EINVAL);
    tu_assert_contains(e.msg, "4.8261724457000019 and 4.8261724457000028 are too close");
    /* a step of a few ulps still interpolates */
    sets[0] = "gpu.gemm_efficiency=4.8261724457000019:0.4 4.82617244570001:0.6 100:0.7";
    ck_assert_msg(hw_load("4090.ini", sets, 1, &hw, &e) == 0, "%s", e.msg);
    ck_assert_double_eq_tol(hw_gemm_efficiency(&hw, 50, 50, 50), 0.7, 0.1);
    hw_free(&hw);
}
END_TEST

/* Found by fuzz_hw's round-trip check (tests/fuzz/corpus/hw/regress-write-rounds-*):
 * hw_write's six digits made a reserve equal to its memory, or two GEMM dims equal, so what it
 * wrote did not load; such values are now written with the digits that keep them apart, the
 * rest as before. */
START_TEST(write_keeps_strict_checks)
{
    const char *sets[] = {"gpu.mem_GiB=80.0000001", "memory.gpu_reserved_GiB=79.9999999",
                          "gpu.gemm_efficiency=1000:0.5 1000.0000001:0.6 4096:0.9",
                          "memory.cpu_mem_GiB=64.00000004", "memory.cpu_reserved_GiB=64"};
    Hardware a, b;
    Err e;
    ck_assert_msg(hw_load("4090.ini", sets, 5, &a, &e) == 0, "%s", e.msg);
    char path[] = "/tmp/fuyou-hw-XXXXXX.ini";
    int fd = mkstemps(path, 4);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_int_eq(hw_write(f, &a, NULL, NULL), 0);
    fclose(f);
    ck_assert_msg(hw_load(path, NULL, 0, &b, &e) == 0, "%s", e.msg);
    ck_assert_double_eq(b.gpu_mem_GiB, a.gpu_mem_GiB);
    ck_assert_double_eq(b.gpu_reserved_GiB, a.gpu_reserved_GiB);
    ck_assert_double_eq(b.cpu_mem_GiB, a.cpu_mem_GiB);
    ck_assert_double_eq(b.gemm.dim[1], a.gemm.dim[1]);
    /* the others keep six digits */
    char text[8192];
    f = fopen(path, "r");
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    tu_assert_contains(text, "gemm_efficiency = 1000:0.5 1000.0000001:0.6 4096:0.9\n");
    tu_assert_contains(text, "bf16_TFLOPS = 165.2\n");
    unlink(path);
    hw_free(&a);
    hw_free(&b);
}
END_TEST

/* Found by fuzz_hw's round-trip check (tests/fuzz/corpus/hw/regress-name-comment,
 * regress-eff-digits): a name beginning with ';' loaded from `name =;x` but was written as
 * `name = ;x`, a comment; efficiencies were written with four digits; a curve too long for one
 * ini line was written and did not load. */
START_TEST(write_names_digits_and_long_curves)
{
    Hardware a, b;
    Err e;
    const char *names[] = {"gpu.name=;NVIDIA", "cpu.name=Xeon ;2 sockets", "ssd.name=a\x01b",
                           "gpu.name=tab\tin"};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(hw_load("4090.ini", &names[i], 1, &a, &e), -EINVAL);
        tu_assert_contains(e.msg, "a name is printable text");
    }
    char path[64];
    ck_assert_int_eq(load_text("[gpu]\nname =;NVIDIA\n", NULL, 0, &a, &e, path, sizeof path),
                     -EINVAL);
    tu_assert_contains(e.msg, ":2: name ';NVIDIA'");

    const char *sets[] = {"gpu.gemm_efficiency=1000:0.123456 4096:0.654321",
                          "cpu.name=Xeon; 2 sockets"};
    ck_assert_msg(hw_load("4090.ini", sets, 2, &a, &e) == 0, "%s", e.msg);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_int_eq(hw_write(f, &a, NULL, NULL), 0);
    fclose(f);
    tu_temp_file(path, sizeof path, ".ini", text);
    free(text);
    ck_assert_msg(hw_load(path, NULL, 0, &b, &e) == 0, "%s", e.msg);
    unlink(path);
    ck_assert_str_eq(b.cpu_name, "Xeon; 2 sockets");
    ck_assert_double_eq(b.gemm.eff[0], 0.123456);
    ck_assert_double_eq(b.gemm.eff[1], 0.654321);
    hw_free(&a);
    hw_free(&b);

    /* ten points eleven digits apart: more than an ini line holds, and hw_write says so */
    char curve[256] = "gpu.gemm_efficiency=";
    for (int i = 0; i < 10; i++)
        snprintf(curve + strlen(curve), sizeof curve - strlen(curve), "%s%.11g:0.%d12345",
                 i ? " " : "", 1000 + 1e-7 * i, i % 9 + 1);
    sets[0] = curve;
    ck_assert_msg(hw_load("4090.ini", sets, 1, &a, &e) == 0, "%s", e.msg);
    f = fopen("/dev/null", "w");
    ck_assert_int_eq(hw_write(f, &a, NULL, NULL), -E2BIG);
    fclose(f);
    hw_free(&a);
}
END_TEST

/* hw_write's text of hw, in a malloc'd string the caller frees. */
static char *written(const Hardware *hw)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_int_eq(hw_write(f, hw, NULL, NULL), 0);
    fclose(f);
    return text;
}

/* [ssd] host_GBps is optional: absent it is 0 (no ceiling) and hw_write leaves it out; given,
 * in a file or by --set, it is read in [ssd] and written back to the same value. */
START_TEST(ssd_host_key)
{
    Hardware a, b;
    Err e;
    char path[64];
    ck_assert_int_eq(hw_load("4090.ini", NULL, 0, &a, &e), 0);
    ck_assert_double_eq(a.ssd_host_GBps, 0);
    char *text = written(&a);
    ck_assert_ptr_null(strstr(text, "host_GBps"));
    free(text);
    hw_free(&a);
    ck_assert_msg(load_text(edit("duplex_factor = 1\n", "duplex_factor = 1\nhost_GBps = 9.5\n"),
                            NULL, 0, &a, &e, path, sizeof path) == 0, "%s", e.msg);
    ck_assert_double_eq(a.ssd_host_GBps, 9.5);
    hw_free(&a);
    const char *sets[] = {"ssd.host_GBps=23.4567891"};
    ck_assert_msg(hw_load("4090.ini", sets, 1, &a, &e) == 0, "%s", e.msg);
    text = written(&a);
    tu_assert_contains(text, "duplex_factor = 1\nhost_GBps = 23.4568\n");
    tu_temp_file(path, sizeof path, ".ini", text);
    free(text);
    ck_assert_msg(hw_load(path, NULL, 0, &b, &e) == 0, "%s", e.msg);
    unlink(path);
    ck_assert_double_eq(b.ssd_host_GBps, 23.4568);
    hw_free(&a);
    hw_free(&b);
    /* it belongs to [ssd]: elsewhere it is an unknown key */
    ck_assert_int_eq(load_text(edit("[memory]\n", "[memory]\nhost_GBps = 9\n"), NULL, 0, &a,
                               &e, path, sizeof path), -EINVAL);
    tu_assert_contains(e.msg, "unknown key 'host_GBps' in [memory]");
}
END_TEST

/* [price] (gpu_usd, ssd_usd, host_usd) and [gpu] nvlink_GBps are optional: absent they are 0
 * and hw_write leaves them out, [price]'s header too; given, in a file or by --set, they are
 * read and written back to the same values, and a bad one names its file:line. */
START_TEST(price_and_nvlink_keys)
{
    Hardware a, b;
    Err e;
    char path[64];
    ck_assert_int_eq(hw_load("h200.ini", NULL, 0, &a, &e), 0);
    ck_assert_double_eq(a.gpu_nvlink_GBps, 0);
    ck_assert_double_eq(a.price_gpu_usd + a.price_ssd_usd + a.price_host_usd, 0);
    char *text = written(&a);
    ck_assert_ptr_null(strstr(text, "[price]"));
    ck_assert_ptr_null(strstr(text, "nvlink_GBps"));
    free(text);
    hw_free(&a);
    /* the presets give only what a source gives */
    ck_assert_int_eq(hw_load("4090.ini", NULL, 0, &a, &e), 0);
    ck_assert_double_eq(a.price_gpu_usd, 1599);
    ck_assert_double_eq(a.price_ssd_usd, 0);
    hw_free(&a);
    ck_assert_int_eq(hw_load("a100-80g.ini", NULL, 0, &a, &e), 0);
    ck_assert_double_eq(a.gpu_nvlink_GBps, 300);
    ck_assert_double_eq(a.price_gpu_usd, 0);
    hw_free(&a);

    ck_assert_msg(load_text(edit("cpu_mem_GiB = 256\n", "cpu_mem_GiB = 256\n[price]\n"
                                 "gpu_usd = 1599.99\nssd_usd = 312\n"), NULL, 0, &a, &e, path,
                            sizeof path) == 0, "%s", e.msg);
    ck_assert_double_eq(a.price_gpu_usd, 1599.99);
    ck_assert_double_eq(a.price_ssd_usd, 312);
    ck_assert_double_eq(a.price_host_usd, 0);
    hw_free(&a);
    const char *sets[] = {"price.host_usd=12345.6", "gpu.nvlink_GBps=450", "price.ssd_usd=99"};
    ck_assert_msg(hw_load("4090.ini", sets, 3, &a, &e) == 0, "%s", e.msg);
    text = written(&a);
    tu_assert_contains(text, "gemm_efficiency = 256:0.15 512:0.4 1024:0.65 2048:0.85 4096:0.95 "
                             "8192:1\nnvlink_GBps = 450\n");
    tu_assert_contains(text, "\n\n[price]\ngpu_usd = 1599\nssd_usd = 99\nhost_usd = 12345.6\n");
    tu_temp_file(path, sizeof path, ".ini", text);
    free(text);
    ck_assert_msg(hw_load(path, NULL, 0, &b, &e) == 0, "%s", e.msg);
    unlink(path);
    ck_assert_double_eq(b.price_host_usd, 12345.6);
    ck_assert_double_eq(b.price_ssd_usd, 99);
    ck_assert_double_eq(b.gpu_nvlink_GBps, 450);
    hw_free(&a);
    hw_free(&b);

    expect_bad(edit("cpu_mem_GiB = 256\n", "cpu_mem_GiB = 256\n[price]\ngpu_usd = free\n"),
               ":28:", "gpu_usd: expected a number");
    expect_bad(edit("cpu_mem_GiB = 256\n", "cpu_mem_GiB = 256\n[price]\nssd_usd = 0\n"), ":28:",
               "ssd_usd must be greater than 0");
    expect_bad(edit("cpu_mem_GiB = 256\n", "cpu_mem_GiB = 256\n[price]\ngpu_price = 9\n"),
               ":28:", "unknown key 'gpu_price' in [price]; the keys there are gpu_usd, ssd_usd, "
               "host_usd");
    expect_bad(edit("launch_us = 4\n", "launch_us = 4\nnvlink_GBps = -1\n"), ":8:",
               "nvlink_GBps must be from 0.001 to 10000");
}
END_TEST

/* attn_efficiency as head_size:efficiency pairs: a head size takes its own point, else the
 * nearest in log2 (the smaller on a tie), never a value between two; one number is every head
 * size's. */
START_TEST(attn_by_head_size)
{
    char path[64];
    Hardware hw;
    Err e;
    ck_assert_msg(load_text(edit("attn_efficiency = 0.5", "attn_efficiency = 32:0.3, 64:0.1 "
                                 "80 : 0.05 256:0.2"), NULL, 0, &hw, &e, path, sizeof path) == 0,
                  "%s", e.msg);
    ck_assert_int_eq(hw.attn.n, 4);
    static const struct { int head_size; double eff; } at[] = {
        {32, 0.3}, {64, 0.1}, {80, 0.05}, {256, 0.2}, /* the points */
        {1, 0.3}, {16, 0.3}, {1024, 0.2},            /* beyond the ends */
        {40, 0.3}, {48, 0.1}, {45, 0.3}, /* 32 and 64: 45^2 < 2048 < 46^2; 48 is nearer 64 */
        {71, 0.1}, {72, 0.05}, {73, 0.05}, /* 64 and 80: 71^2 < 5120 < 72^2 */
        {96, 0.05}, {128, 0.05}, {160, 0.2}, /* 80 and 256: 143^2 < 20480 < 144^2 */
        {143, 0.05}, {144, 0.2},
    };
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        ck_assert_msg(hw_attn_efficiency(&hw, at[i].head_size) == at[i].eff,
                      "head size %d: %g, not %g", at[i].head_size,
                      hw_attn_efficiency(&hw, at[i].head_size), at[i].eff);
    hw_free(&hw);
    /* a tie in log2 takes the smaller head size: 64 between 32 and 128 */
    const char *sets[] = {"gpu.attn_efficiency=32:0.3 128:0.1"};
    ck_assert_msg(hw_load("4090.ini", sets, 1, &hw, &e) == 0, "%s", e.msg);
    ck_assert_double_eq(hw_attn_efficiency(&hw, 64), 0.3);
    ck_assert_double_eq(hw_attn_efficiency(&hw, 65), 0.1);
    hw_free(&hw);
    /* one point, or one number, is every head size's */
    sets[0] = "gpu.attn_efficiency=80:0.07";
    ck_assert_msg(hw_load("4090.ini", sets, 1, &hw, &e) == 0, "%s", e.msg);
    ck_assert_double_eq(hw_attn_efficiency(&hw, 1), 0.07);
    ck_assert_double_eq(hw_attn_efficiency(&hw, 4096), 0.07);
    hw_free(&hw);
    ck_assert_msg(load_text(good_ini, NULL, 0, &hw, &e, path, sizeof path) == 0, "%s", e.msg);
    ck_assert_int_eq(hw.attn.n, 1);
    for (int h = 1; h <= 4096; h *= 4)
        ck_assert_double_eq(hw_attn_efficiency(&hw, h), 0.5);
    hw_free(&hw);
    /* the H200 preset: every head size on the fused kernels, 64 the least efficient */
    ck_assert_int_eq(hw_load("h200", NULL, 0, &hw, &e), 0);
    ck_assert_double_eq(hw_attn_efficiency(&hw, 64), 0.10);
    ck_assert_double_eq(hw_attn_efficiency(&hw, 80), 0.136);
    ck_assert_double_eq(hw_attn_efficiency(&hw, 96), 0.134);
    ck_assert_double_eq(hw_attn_efficiency(&hw, 128), 0.146);
    hw_free(&hw);
}
END_TEST

/* A bad attn_efficiency is one line naming the key, and file:line or the --set argument; the
 * GEMM curve's messages name their key too. */
START_TEST(attn_bad)
{
    static const struct { const char *value, *what; } bad[] = {
        {"64:0.1 32:0.2", "attn_efficiency: head sizes must increase (32 after 64)"},
        {"64:0.1 64:0.2", "attn_efficiency: head sizes must increase"},
        {"64.5:0.1", "attn_efficiency: point 1's head size 64.5 is not a whole number"},
        {"64:0.1 1e-3:0.1", "attn_efficiency: point 2 (0.001:0.1) needs 1 <= head_size <= 131072"},
        {"64:1.5", "attn_efficiency: point 1 (64:1.5) needs 1 <= head_size <= 131072 and 0.001 "
                   "<= efficiency <= 1"},
        {"64:0.0001", "0.001 <= efficiency <= 1"},
        {"64:", "attn_efficiency: expected head_size:efficiency pairs such as '64:0.12 128:0.15'"},
        {"64:0.1 128", "attn_efficiency: expected head_size:efficiency pairs"},
        {"fast", "attn_efficiency: expected one efficiency, or head_size:efficiency pairs"},
        {"0.1 0.2", "attn_efficiency: expected one efficiency"},
        {"0", "attn_efficiency must be from 0.001 to 1 (got 0)"},
        {"1:0.1 2:0.1 3:0.1 4:0.1 5:0.1 6:0.1 7:0.1 8:0.1 9:0.1 10:0.1 11:0.1 12:0.1 13:0.1 "
         "14:0.1 15:0.1 16:0.1 17:0.1", "attn_efficiency: at most 16 points"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char line[256];
        snprintf(line, sizeof line, "attn_efficiency = %s", bad[i].value);
        expect_bad(edit("attn_efficiency = 0.5", line), ":8:", bad[i].what);
        Hardware hw;
        Err e;
        snprintf(line, sizeof line, "gpu.attn_efficiency=%s", bad[i].value);
        const char *sets[] = {line};
        ck_assert_int_eq(hw_load("4090.ini", sets, 1, &hw, &e), -EINVAL);
        tu_assert_contains(e.msg, line);
        tu_assert_contains(e.msg, bad[i].what);
        ck_assert_ptr_null(strstr(e.msg, "gemm"));
    }
    expect_bad(edit("4096:0.9", "256:0.9"), ":9:", "gemm_efficiency: dims must increase");
    expect_bad(edit("4096:0.9", "4096:"), ":9:", "gemm_efficiency: expected dim:efficiency");
    expect_bad(edit("4096:0.9", "4096:2"), ":9:", "gemm_efficiency: point 3 (4096:2) needs 1 <= "
               "dim <= 1e+09 and 0.0001 <= efficiency <= 1.2");
    /* a GEMM curve is pairs: one number is not one */
    expect_bad(edit("512:0.4 1024:0.6 4096:0.9", "0.5"), ":9:", "gemm_efficiency: expected dim");
}
END_TEST

/* hw_write writes attn_efficiency as it was given, one number or pairs, and reads it back to the
 * same points. */
START_TEST(attn_write_round_trips)
{
    static const struct { const char *set, *line; } cases[] = {
        {NULL, "\nattn_efficiency = 0.55\n"}, /* 4090.ini as shipped */
        {"gpu.attn_efficiency=0.123456", "\nattn_efficiency = 0.123456\n"},
        {"gpu.attn_efficiency=128:0.15", "\nattn_efficiency = 128:0.15\n"},
        {"gpu.attn_efficiency= 64:0.115, 80:0.05 96 : 0.05 128:0.15 ",
         "\nattn_efficiency = 64:0.115 80:0.05 96:0.05 128:0.15\n"},
        {"gpu.attn_efficiency=1:0.001 131072:1", "\nattn_efficiency = 1:0.001 131072:1\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Hardware a, b;
        Err e;
        ck_assert_msg(hw_load("4090.ini", &cases[i].set, cases[i].set ? 1 : 0, &a, &e) == 0,
                      "%s", e.msg);
        char *text = written(&a), path[64];
        tu_assert_contains(text, cases[i].line);
        tu_temp_file(path, sizeof path, ".ini", text);
        ck_assert_msg(hw_load(path, NULL, 0, &b, &e) == 0, "%s", e.msg);
        unlink(path);
        ck_assert_int_eq(b.attn.n, a.attn.n);
        for (int k = 0; k < a.attn.n; k++) {
            ck_assert_double_eq(b.attn.dim[k], a.attn.dim[k]);
            ck_assert_double_eq(b.attn.eff[k], a.attn.eff[k]);
        }
        /* and writes the same again */
        char *again = written(&b);
        ck_assert_str_eq(again, text);
        free(again);
        free(text);
        hw_free(&a);
        hw_free(&b);
    }
    /* the H200 preset's pairs, as in the file */
    Hardware hw;
    Err e;
    ck_assert_int_eq(hw_load("h200.ini", NULL, 0, &hw, &e), 0);
    char *text = written(&hw);
    tu_assert_contains(text, "\nattn_efficiency = 64:0.1 80:0.136 96:0.134 128:0.146\n");
    free(text);
    hw_free(&hw);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hw");
    TCase *tc = tcase_create("hw");
    tcase_add_test(tc, good_file);
    tcase_add_test(tc, presets_load);
    tcase_add_test(tc, unknown_preset);
    tcase_add_test(tc, overrides);
    tcase_add_test(tc, bad_overrides);
    tcase_add_test(tc, bad_files);
    tcase_add_test(tc, long_line);
    tcase_add_test(tc, gemm_curve);
    tcase_add_test(tc, write_round_trips);
    tcase_add_test(tc, key_ranges);
    tcase_add_test(tc, nul_byte);
    tcase_add_test(tc, not_regular_files);
    tcase_add_test(tc, endless_line);
    tcase_add_test(tc, gemm_dims_too_close);
    tcase_add_test(tc, write_keeps_strict_checks);
    tcase_add_test(tc, write_names_digits_and_long_curves);
    tcase_add_test(tc, ssd_host_key);
    tcase_add_test(tc, price_and_nvlink_keys);
    tcase_add_test(tc, attn_by_head_size);
    tcase_add_test(tc, attn_bad);
    tcase_add_test(tc, attn_write_round_trips);
    tcase_add_test(tc, comments);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
