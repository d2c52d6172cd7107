/* gradcheck_testutil: what the reference ops' suites share (test_gpt2_ops.c, test_llama_ops.c):
 * test buffers freed by the teardown after each test (tu_free_owned as the checked fixture's
 * teardown), random and zeroed vectors from the suite's generator (tu_rng, which the suite
 * seeds), and the finite-difference check of an analytic gradient: central differences with
 * h = 1e-2 on O(1) inputs, |fd - analytic| <= 2e-2 * max(|fd|, |analytic|) + 2e-3.
 * Header-only; tests only. */
#ifndef FUYOU_GRADCHECK_TESTUTIL_H
#define FUYOU_GRADCHECK_TESTUTIL_H

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

enum { TU_MAX_OWNED = 512 };

static gsl_rng *tu_rng;
static void *tu_owned[TU_MAX_OWNED];
static int tu_n_owned;

/* p, freed after the test. */
static inline float *keep(float *p)
{
    ck_assert_int_lt(tu_n_owned, TU_MAX_OWNED);
    ck_assert_ptr_nonnull(p);
    return tu_owned[tu_n_owned++] = p;
}

static inline void tu_free_owned(void)
{
    while (tu_n_owned > 0)
        free(tu_owned[--tu_n_owned]);
}

/* n values drawn from N(0, sd^2). */
static inline float *randv(size_t n, double sd)
{
    float *p = keep(malloc(n * sizeof *p));
    for (size_t i = 0; i < n; i++)
        p[i] = (float)gsl_ran_gaussian(tu_rng, sd);
    return p;
}

static inline float *zeros(size_t n)
{
    return keep(calloc(n, sizeof(float)));
}

static inline double dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

typedef double (*LossFn)(void *ctx);

/* Checks analytic gradient g of L w.r.t. x at up to 24 positions. */
static inline void fd_check(const char *what, float *x, const float *g, size_t n, LossFn loss,
                            void *ctx)
{
    const float h = 1e-2f;
    size_t step = n > 24 ? n / 24 : 1;
    for (size_t i = 0; i < n; i += step) {
        float kept = x[i];
        x[i] = kept + h;
        double up = loss(ctx);
        x[i] = kept - h;
        double down = loss(ctx);
        x[i] = kept;
        double fd = (up - down) / (2.0 * h), an = g[i];
        ck_assert_msg(fabs(fd - an) <= 2e-2 * fmax(fabs(fd), fabs(an)) + 2e-3,
                      "%s[%zu]: finite difference %.6g, analytic %.6g", what, i, fd, an);
    }
}

#endif
