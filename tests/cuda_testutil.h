/* cuda_testutil: what the CUDA kernel suites (test_cuda_gpt2.c, test_cuda_llama.c) share: the
 * 16-bit format under test, random inputs already on its grid, copies to and from the device,
 * and the relative L2 error their tolerances are stated in. Header-only: each suite that
 * includes it has its own rng and format under test. */
#ifndef FUYOU_CUDA_TESTUTIL_H
#define FUYOU_CUDA_TESTUTIL_H

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "adam.h"
#include "gpt2_kernels.h"

static gsl_rng *rng;
static GkType ty; /* the 16-bit format under test: each kernel test runs for bf16 and fp16 */

static inline uint16_t to16(float f)
{
    return ty == GK_FP16 ? adam_f32_to_f16(f) : adam_f32_to_bf16(f);
}

static inline float from16(uint16_t h)
{
    return ty == GK_FP16 ? adam_f16_to_f32(h) : adam_bf16_to_f32(h);
}

/* f rounded to the 16-bit format under test */
static inline float round16(float f)
{
    return from16(to16(f));
}

/* Random fp32 values already on the 16-bit grid, and their bits. */
static inline float *rand16(size_t n, double sd, act16_t **bits)
{
    float *f = malloc(n * sizeof *f);
    *bits = malloc(n * sizeof **bits);
    for (size_t i = 0; i < n; i++) {
        (*bits)[i] = to16((float)gsl_ran_gaussian(rng, sd));
        f[i] = from16((*bits)[i]);
    }
    return f;
}

static inline void *dev_copy(const void *host, size_t bytes)
{
    void *d = gk_alloc(bytes);
    gk_upload(d, host, bytes);
    return d;
}

/* n 16-bit values at d, as fp32 (malloc'd) */
static inline float *download16(const act16_t *d, size_t n)
{
    act16_t *h = malloc(n * 2);
    float *f = malloc(n * 4);
    gk_download(h, d, n * 2);
    for (size_t i = 0; i < n; i++)
        f[i] = from16(h[i]);
    free(h);
    return f;
}

static inline float *download_f(const float *d, size_t n)
{
    float *f = malloc(n * 4);
    gk_download(f, d, n * 4);
    return f;
}

/* ||got - ref|| / ||ref|| (the absolute norm where ref is all zeros) */
static inline double rel_l2(const float *got, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif
