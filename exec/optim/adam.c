/* adam: the scalar reference, dispatch and threading; the SIMD kernels are in adam_simd.c. */
#include "adam.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adam_simd.h"

void adam_step_init(AdamStep *s, const AdamConfig *c, int step, float grad_scale)
{
    assert(step >= 1);
    double bc1 = 1 - pow(c->beta1, step), bc2 = 1 - pow(c->beta2, step);
    *s = (AdamStep){.beta1 = c->beta1, .one_minus_beta1 = 1 - c->beta1, .beta2 = c->beta2,
                    .one_minus_beta2 = 1 - c->beta2, .eps = c->eps,
                    .decay = 1 - c->lr * c->weight_decay, .neg_step_size = (float)(-c->lr / bc1),
                    .inv_sqrt_bc2 = (float)(1 / sqrt(bc2)), .grad_scale = grad_scale};
}

const char *adam_isa_name(AdamIsa isa)
{
    static const char *names[] = {"scalar", "avx2", "avx512"};
    return names[isa];
}

bool adam_isa_supported(AdamIsa isa)
{
    switch (isa) {
    case ADAM_ISA_SCALAR: return true;
    case ADAM_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case ADAM_ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    default: return false;
    }
}

AdamIsa adam_isa_best(void)
{
    for (int isa = ADAM_ISA_COUNT - 1; isa > ADAM_ISA_SCALAR; isa--)
        if (adam_isa_supported(isa))
            return isa;
    return ADAM_ISA_SCALAR;
}

uint16_t adam_f32_to_f16(float f)
{
    _Float16 h = (_Float16)f; /* IEEE round to nearest even */
    uint16_t u;
    memcpy(&u, &h, sizeof u);
    return u;
}

float adam_f16_to_f32(uint16_t h)
{
    _Float16 x;
    memcpy(&x, &h, sizeof x);
    return (float)x;
}

void adam_narrow(void *dst, const float *src, size_t n, DType type)
{
    if (type == DTYPE_FP32) {
        memcpy(dst, src, 4 * n);
        return;
    }
    bool bf16 = type == DTYPE_BF16;
    uint16_t *d = dst;
    AdamIsa isa = adam_isa_best();
    size_t i = isa == ADAM_ISA_AVX512 ? adam_narrow_avx512(d, src, n, bf16)
               : isa == ADAM_ISA_AVX2 ? adam_narrow_avx2(d, src, n, bf16)
                                      : 0;
    for (; i < n; i++) {
        uint16_t h = bf16 ? adam_f32_to_bf16(src[i]) : adam_f32_to_f16(src[i]);
        memcpy(d + i, &h, 2);
    }
}

void adam_widen(float *dst, const void *src, size_t n, DType type)
{
    if (type == DTYPE_FP32) {
        memcpy(dst, src, 4 * n);
        return;
    }
    bool bf16 = type == DTYPE_BF16;
    const uint16_t *s = src;
    AdamIsa isa = adam_isa_best();
    size_t i = isa == ADAM_ISA_AVX512 ? adam_widen_avx512(dst, s, n, bf16)
               : isa == ADAM_ISA_AVX2 ? adam_widen_avx2(dst, s, n, bf16)
                                      : 0;
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, s + i, 2);
        dst[i] = bf16 ? adam_bf16_to_f32(h) : adam_f16_to_f32(h);
    }
}

void adam_update_ref(const AdamStep *s, const AdamSlice *x, size_t begin, size_t end)
{
    const float *gf = x->grad;
    const uint16_t *gb = x->grad;
    for (size_t i = begin; i < end; i++) {
        float g = (x->grad_type == DTYPE_BF16 ? adam_bf16_to_f32(gb[i]) : gf[i]) * s->grad_scale;
        float m = fmaf(s->beta1, x->m[i], s->one_minus_beta1 * g);
        float v = fmaf(s->beta2, x->v[i], (s->one_minus_beta2 * g) * g);
        float p = x->master[i] * s->decay;
        float denom = fmaf(sqrtf(v), s->inv_sqrt_bc2, s->eps);
        p = fmaf(s->neg_step_size, m / denom, p);
        x->m[i] = m;
        x->v[i] = v;
        x->master[i] = p;
        if (x->out)
            x->out[i] = x->out_type == DTYPE_BF16 ? adam_f32_to_bf16(p) : adam_f32_to_f16(p);
    }
}

void adam_update_range(AdamIsa isa, const AdamStep *s, const AdamSlice *x, size_t begin,
                       size_t end)
{
    assert(adam_isa_supported(isa));
    size_t done = begin;
    if (isa == ADAM_ISA_AVX512)
        done = adam_update_avx512(s, x, begin, end);
    else if (isa == ADAM_ISA_AVX2)
        done = adam_update_avx2(s, x, begin, end);
    adam_update_ref(s, x, done, end); /* the tail the vectors left */
}

typedef struct Job {
    AdamIsa isa;
    const AdamStep *s;
    const AdamSlice *x;
} Job;

static void run_job(void *ctx, size_t begin, size_t end)
{
    const Job *j = ctx;
    adam_update_range(j->isa, j->s, j->x, begin, end);
}

void adam_update(AdamIsa isa, const AdamStep *s, const AdamSlice *x, WorkPool *pool)
{
    Job j = {isa, s, x};
    if (!pool || x->n < 4096)
        run_job(&j, 0, x->n);
    else
        workpool_run(pool, run_job, &j, x->n, 64); /* whole cache lines per thread */
}

typedef struct SumSq {
    const void *grad;
    DType type;
    size_t n;
    double *chunk; /* chunk k's sum goes to chunk[k - base] */
    size_t base;
} SumSq;

static void sum_sq_chunks(void *ctx, size_t begin, size_t end)
{
    const SumSq *j = ctx;
    for (size_t k = begin; k < end; k++) {
        size_t lo = k * ADAM_SQ_CHUNK, hi = lo + ADAM_SQ_CHUNK < j->n ? lo + ADAM_SQ_CHUNK : j->n;
        double s = 0;
        if (j->type == DTYPE_BF16) {
            const uint16_t *g = j->grad;
            for (size_t i = lo; i < hi; i++) {
                uint32_t bits = (uint32_t)g[i] << 16;
                float x;
                memcpy(&x, &bits, sizeof x);
                s += (double)x * x;
            }
        } else {
            const float *g = j->grad;
            for (size_t i = lo; i < hi; i++)
                s += (double)g[i] * g[i];
        }
        j->chunk[k - j->base] = s;
    }
}

double adam_sum_sq(const void *grad, DType type, size_t n, WorkPool *pool)
{
    size_t chunks = (n + ADAM_SQ_CHUNK - 1) / ADAM_SQ_CHUNK;
    double *chunk = chunks > 1 && pool ? malloc(chunks * sizeof *chunk) : NULL;
    double s = 0;
    if (chunk) {
        SumSq j = {grad, type, n, chunk, 0};
        workpool_run(pool, sum_sq_chunks, &j, chunks, 1);
        for (size_t k = 0; k < chunks; k++)
            s += chunk[k];
        free(chunk);
        return s;
    }
    /* one thread (or no memory for the partial sums): the same chunks, in order */
    double one;
    SumSq j = {grad, type, n, &one, 0};
    for (size_t k = 0; k < chunks; k++) {
        j.base = k;
        sum_sq_chunks(&j, k, k + 1);
        s += one;
    }
    return s;
}
