/* fuzz_hw: the hardware ini (model/hw.h, hw_load) under libFuzzer.
 *
 * The input up to its first NUL byte is the ini file; what follows is `section.key=value`
 * overrides, one per line or NUL-separated (as --set gives them), at most 8. A load either
 * fails with one line naming what is wrong, or gives hardware whose numbers the cost model can
 * use, and that hw_write writes as an ini which loads again to the same values (hw.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "hw.h"

enum { MAX_OVERRIDES = 8 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

/* a and b agree to the 6 significant digits hw_write keeps */
static int close_to(double a, double b)
{
    return fabs(a - b) <= 1e-5 * fabs(a) + 1e-300;
}

/* hw_write's text of hw loads again, to the same values. */
static void check_round_trip(const Hardware *hw)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        fuzz_die("open_memstream", "");
    int wrc = hw_write(f, hw, NULL, NULL);
    fclose(f);
    /* a curve of many points with long numbers does not fit an ini line: hw_write says so
     * rather than write what the reader refuses */
    fuzz_check(wrc == 0 || (wrc == -E2BIG && (hw->gemm.n > 4 || hw->attn.n > 4)));
    if (wrc) {
        free(text);
        return;
    }
    char path[512];
    fuzz_file(path, sizeof path, "written.ini", text, len);
    free(text);
    Hardware b;
    Err e;
    int rc = hw_load(path, NULL, 0, &b, &e);
    if (rc)
        fprintf(stderr, "fuzz_hw: hw_write's output does not load: %s\n", e.msg);
    fuzz_check(rc == 0);
    fuzz_check(!strcmp(b.gpu_name, hw->gpu_name) && !strcmp(b.cpu_name, hw->cpu_name) &&
               !strcmp(b.ssd_name, hw->ssd_name));
    fuzz_check(b.cpu_cores == hw->cpu_cores && b.ssd_count == hw->ssd_count);
    fuzz_check(close_to(b.gpu_mem_GiB, hw->gpu_mem_GiB));
    fuzz_check(close_to(b.gpu_bf16_TFLOPS, hw->gpu_bf16_TFLOPS));
    fuzz_check(close_to(b.h2d_bidir_GBps, hw->h2d_bidir_GBps));
    fuzz_check(close_to(b.ssd_duplex, hw->ssd_duplex));
    fuzz_check(close_to(b.ssd_host_GBps, hw->ssd_host_GBps));
    fuzz_check(close_to(b.gpu_reserved_GiB, hw->gpu_reserved_GiB));
    fuzz_check(close_to(b.gpu_nvlink_GBps, hw->gpu_nvlink_GBps));
    fuzz_check(close_to(b.price_gpu_usd, hw->price_gpu_usd) &&
               close_to(b.price_ssd_usd, hw->price_ssd_usd) &&
               close_to(b.price_host_usd, hw->price_host_usd));
    fuzz_check(b.gemm.n == hw->gemm.n);
    for (int i = 0; i < b.gemm.n; i++)
        fuzz_check(close_to(b.gemm.dim[i], hw->gemm.dim[i]) &&
                   close_to(b.gemm.eff[i], hw->gemm.eff[i]));
    /* one number stays one number (dim 0), pairs stay pairs: whole head sizes, exactly */
    fuzz_check(b.attn.n == hw->attn.n);
    for (int i = 0; i < b.attn.n; i++)
        fuzz_check(b.attn.dim[i] == hw->attn.dim[i] && close_to(b.attn.eff[i], hw->attn.eff[i]));
    hw_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t file_len = nul ? (size_t)(nul - data) : size;
    char path[512];
    fuzz_file(path, sizeof path, "hw.ini", data, file_len);

    /* the overrides: the rest, split at NUL bytes and newlines */
    size_t rest = nul ? size - file_len - 1 : 0;
    char *buf = malloc(rest + 1);
    if (!buf)
        fuzz_die("malloc", "");
    if (rest)
        memcpy(buf, nul + 1, rest);
    buf[rest] = '\0';
    const char *overrides[MAX_OVERRIDES];
    int n = 0;
    for (size_t i = 0, start = 0; i <= rest && n < MAX_OVERRIDES; i++)
        if (i == rest || buf[i] == '\0' || buf[i] == '\n') {
            buf[i] = '\0';
            if (i > start)
                overrides[n++] = buf + start;
            start = i + 1;
        }

    Hardware hw;
    Err e = {""};
    int rc = hw_load(path, overrides, n, &hw, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL || rc == -ENOMEM);
        fuzz_check_message(e.msg);
    } else {
        /* what the cost model divides by and sizes with */
        fuzz_check(hw_gpu_bytes(&hw) > 0 && hw_cpu_bytes(&hw) > 0 && hw_ssd_bytes(&hw) > 0);
        fuzz_check(hw.h2d_bidir_GBps > 0 && hw.h2d_bidir_GBps <= hw.h2d_GBps);
        fuzz_check(hw.d2h_bidir_GBps > 0 && hw.d2h_bidir_GBps <= hw.d2h_GBps);
        /* optional keys: 0 (absent) or in their ranges, what --cost divides by and adds */
        fuzz_check(hw.gpu_nvlink_GBps == 0 || (hw.gpu_nvlink_GBps >= 1e-3 &&
                                               hw.gpu_nvlink_GBps <= 1e4));
        const double prices[] = {hw.price_gpu_usd, hw.price_ssd_usd, hw.price_host_usd};
        for (int i = 0; i < 3; i++)
            fuzz_check(prices[i] >= 0 && prices[i] <= 1e8);
        for (int64_t m = 1; m <= (INT64_C(1) << 40); m *= 64) {
            double eff = hw_gemm_efficiency(&hw, m, m, 2 * m + 1);
            fuzz_check(isfinite(eff) && eff > 0);
        }
        for (int i = 0; i < hw.gemm.n; i++) { /* at each point, and between it and the next */
            int64_t m = (int64_t)hw.gemm.dim[i];
            double at = hw_gemm_efficiency(&hw, m, m, m), next = hw_gemm_efficiency(&hw, m + 1,
                                                                                    m + 1, m);
            fuzz_check(isfinite(at) && at > 0 && isfinite(next) && next > 0);
        }
        for (int64_t h = 1; h <= (INT64_C(1) << 17); h *= 2) /* the head sizes models have */
            for (int64_t d = -1; d <= 1; d++) {
                double eff = hw_attn_efficiency(&hw, h + d > 0 ? h + d : 1);
                fuzz_check(eff >= 1e-3 && eff <= 1);
            }
        check_round_trip(&hw);
        hw_free(&hw);
    }
    free(buf);
    return 0;
}
