/* Check suite for exec/optim/adam: the scalar reference against a double-precision AdamW written
 * from the formula, and every SIMD implementation the CPU supports against the reference on
 * random data (sizes that are not multiples of the vector width, bf16 and fp32 gradients, bf16
 * and fp16 outputs, special values): bf16 outputs identical, fp32 within 1e-6 relative. */
#include <gsl/gsl_rng.h>
#include <gsl/gsl_randist.h>
#include <math.h>

#include "adam.h"
#include "grad_sum.h"
#include "testutil.h"

typedef struct Data {
    size_t n;
    float *master, *m, *v, *gf;
    uint16_t *gb, *out;
} Data;

static void data_init(Data *d, size_t n, gsl_rng *r)
{
    d->n = n;
    d->master = malloc(n * sizeof(float));
    d->m = malloc(n * sizeof(float));
    d->v = malloc(n * sizeof(float));
    d->gf = malloc(n * sizeof(float));
    d->gb = malloc(n * sizeof(uint16_t));
    d->out = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) {
        d->master[i] = (float)gsl_ran_gaussian(r, 0.05);
        d->m[i] = (float)gsl_ran_gaussian(r, 1e-3);
        d->v[i] = (float)fabs(gsl_ran_gaussian(r, 1e-6));
        d->gf[i] = (float)gsl_ran_gaussian(r, 1e-2);
        d->gb[i] = adam_f32_to_bf16(d->gf[i]);
    }
    /* special values: zeros, a denormal, large, and a NaN gradient */
    if (n > 8) {
        d->gf[0] = 0, d->m[0] = 0, d->v[0] = 0;
        d->gf[1] = 1e-40f;
        d->gf[2] = 3e4f;
        d->gf[3] = NAN;
        d->gb[3] = 0x7fc0;
        d->master[4] = 0;
    }
}

static void data_copy(Data *dst, const Data *src)
{
    size_t n = src->n;
    memcpy(dst->master, src->master, n * sizeof(float));
    memcpy(dst->m, src->m, n * sizeof(float));
    memcpy(dst->v, src->v, n * sizeof(float));
    memcpy(dst->gf, src->gf, n * sizeof(float));
    memcpy(dst->gb, src->gb, n * sizeof(uint16_t));
    memset(dst->out, 0xff, n * sizeof(uint16_t)); /* poison: every element must be written */
}

static void data_free(Data *d)
{
    free(d->master), free(d->m), free(d->v), free(d->gf), free(d->gb), free(d->out);
}

static AdamSlice slice(Data *d, DType grad, DType out)
{
    return (AdamSlice){.master = d->master, .m = d->m, .v = d->v,
                       .grad = grad == DTYPE_BF16 ? (const void *)d->gb : d->gf,
                       .grad_type = grad, .out = d->out, .out_type = out, .n = d->n};
}

static const AdamConfig cfg = {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                               .weight_decay = 0.1f};

static bool close_rel(float a, float b, float rel)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabsf(a - b) <= rel * fabsf(b) + 1e-30f;
}

/* The reference against AdamW computed in double from the textbook formula. */
START_TEST(reference_is_adamw)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 1);
    Data d;
    data_init(&d, 1000, r);
    double *p = malloc(d.n * sizeof *p), *m = malloc(d.n * sizeof *m), *v = malloc(d.n * sizeof *v);
    for (size_t i = 0; i < d.n; i++)
        p[i] = d.master[i], m[i] = d.m[i], v[i] = d.v[i];
    for (int step = 1; step <= 5; step++) {
        AdamStep s;
        adam_step_init(&s, &cfg, step, 0.5f);
        AdamSlice x = slice(&d, DTYPE_FP32, DTYPE_BF16);
        adam_update_ref(&s, &x, 0, d.n);
        for (size_t i = 0; i < d.n; i++) {
            double g = (double)d.gf[i] * 0.5;
            m[i] = 0.9 * m[i] + 0.1 * g;
            v[i] = 0.95 * v[i] + 0.05 * g * g;
            double mh = m[i] / (1 - pow(0.9, step)), vh = v[i] / (1 - pow(0.95, step));
            p[i] = p[i] * (1 - 3e-4 * 0.1) - 3e-4 * mh / (sqrt(vh) + 1e-8);
        }
    }
    for (size_t i = 5; i < d.n; i++) /* skip the special values */
        ck_assert_msg(fabs(d.master[i] - p[i]) <= 1e-5 * fabs(p[i]) + 1e-9,
                      "%zu: %.9g vs %.9g", i, d.master[i], p[i]);
    ck_assert(isnan(d.master[3])); /* a NaN gradient poisons its own parameter only */
    ck_assert(!isnan(d.master[2]));
    free(p), free(m), free(v);
    data_free(&d);
    gsl_rng_free(r);
}
END_TEST

static void compare_isa(AdamIsa isa, size_t n, DType grad, DType out, gsl_rng *r)
{
    Data ref, got;
    data_init(&ref, n, r);
    data_init(&got, n, r);
    data_copy(&got, &ref);
    memset(ref.out, 0xff, n * sizeof(uint16_t));
    AdamStep s;
    adam_step_init(&s, &cfg, 7, 0.8f);
    AdamSlice xr = slice(&ref, grad, out), xg = slice(&got, grad, out);
    adam_update_ref(&s, &xr, 0, n);
    adam_update_range(isa, &s, &xg, 0, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(close_rel(got.master[i], ref.master[i], 1e-6f), "%s master[%zu]",
                      adam_isa_name(isa), i);
        ck_assert_msg(close_rel(got.m[i], ref.m[i], 1e-6f), "%s m[%zu]", adam_isa_name(isa), i);
        ck_assert_msg(close_rel(got.v[i], ref.v[i], 1e-6f), "%s v[%zu]", adam_isa_name(isa), i);
        ck_assert_msg(got.out[i] == ref.out[i], "%s out[%zu] %04x vs %04x (%s)",
                      adam_isa_name(isa), i, got.out[i], ref.out[i], dtype_name(out));
    }
    data_free(&ref);
    data_free(&got);
}

START_TEST(simd_matches_reference)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 2);
    static const size_t sizes[] = {1, 7, 15, 16, 17, 33, 1000, 65537};
    int tested = 0;
    for (int isa = ADAM_ISA_AVX2; isa < ADAM_ISA_COUNT; isa++) {
        if (!adam_isa_supported(isa)) {
            printf("%s: not supported by this CPU, not tested here\n", adam_isa_name(isa));
            continue;
        }
        tested++;
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            compare_isa(isa, sizes[k], DTYPE_FP32, DTYPE_BF16, r);
            compare_isa(isa, sizes[k], DTYPE_BF16, DTYPE_BF16, r);
            compare_isa(isa, sizes[k], DTYPE_BF16, DTYPE_FP16, r);
        }
    }
    printf("SIMD implementations compared with the reference: %d\n", tested);
    gsl_rng_free(r);
}
END_TEST

START_TEST(threads_match_reference)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 3);
    WorkPool pool;
    Err e;
    ck_assert_int_eq(workpool_init(&pool, 4, &e), 0);
    Data ref, got;
    size_t n = 1000003;
    data_init(&ref, n, r);
    data_init(&got, n, r);
    data_copy(&got, &ref);
    AdamStep s;
    adam_step_init(&s, &cfg, 1, 1.0f);
    AdamSlice xr = slice(&ref, DTYPE_BF16, DTYPE_BF16), xg = slice(&got, DTYPE_BF16, DTYPE_BF16);
    adam_update_ref(&s, &xr, 0, n);
    adam_update(adam_isa_best(), &s, &xg, &pool);
    ck_assert_int_eq(memcmp(got.out, ref.out, n * sizeof(uint16_t)), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert(close_rel(got.master[i], ref.master[i], 1e-6f));
    data_free(&ref);
    data_free(&got);
    workpool_free(&pool);
    gsl_rng_free(r);
}
END_TEST

START_TEST(bf16_rounding)
{
    ck_assert_uint_eq(adam_f32_to_bf16(1.0f), 0x3f80);
    /* halfway cases round to even */
    float up, down;
    uint32_t u = 0x3f808000u; /* 1.00390625: exactly between 0x3f80 and 0x3f81 */
    memcpy(&down, &u, 4);
    ck_assert_uint_eq(adam_f32_to_bf16(down), 0x3f80);
    u = 0x3f818000u;
    memcpy(&up, &u, 4);
    ck_assert_uint_eq(adam_f32_to_bf16(up), 0x3f82);
    ck_assert_uint_eq(adam_f32_to_bf16(INFINITY), 0x7f80);
    ck_assert_uint_eq(adam_f32_to_bf16(NAN) & 0x7fc0, 0x7fc0);
    ck_assert(adam_bf16_to_f32(0xbf80) == -1.0f);
}
END_TEST

/* adam_narrow and adam_widen (the CPU's widest vectors, the scalar tail) give what the scalar
 * functions give each value, bit for bit: ties, NaNs with any payload, infinities, subnormals,
 * values past fp16's range; at odd lengths and from unaligned addresses. */
START_TEST(bulk_conversions_match_scalar)
{
    enum { N = 1000 };
    uint32_t bits[N + 1];
    for (size_t i = 0; i < N + 1; i++)
        bits[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i << 7);
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7f800000u, 0xff800000u,
                                       0x7f800001u, 0xffc12345u, 0x00000001u, 0x80400000u,
                                       0x477ff000u, 0x47800000u, 0x33000000u, 0x0u};
    memcpy(bits, special, sizeof special);
    float src[N + 1];
    memcpy(src, bits, sizeof src);
    static const DType types[] = {DTYPE_BF16, DTYPE_FP16};
    for (size_t t = 0; t < 2; t++) {
        for (size_t n = 0; n <= N; n += n < 40 ? 1 : 97) {
            uint8_t raw[2 * N + 3];
            adam_narrow(raw + 1, src + 1, n, types[t]); /* unaligned destination */
            for (size_t i = 0; i < n; i++) {
                uint16_t h, want = types[t] == DTYPE_BF16 ? adam_f32_to_bf16(src[1 + i])
                                                          : adam_f32_to_f16(src[1 + i]);
                memcpy(&h, raw + 1 + 2 * i, 2);
                ck_assert_msg(h == want, "type %zu n %zu value %zu: %04x, want %04x", t, n, i,
                              h, want);
            }
            float back[N];
            adam_widen(back, raw + 1, n, types[t]); /* unaligned source */
            for (size_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, raw + 1 + 2 * i, 2);
                float want = types[t] == DTYPE_BF16 ? adam_bf16_to_f32(h) : adam_f16_to_f32(h);
                ck_assert_msg(!memcmp(&back[i], &want, 4), "type %zu n %zu value %zu", t, n, i);
            }
        }
    }
}
END_TEST

START_TEST(sum_sq_does_not_depend_on_threads)
{
    size_t n = 3 * ADAM_SQ_CHUNK + 123;
    float *g = malloc(n * sizeof *g);
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        g[i] = (float)((double)((i * 2654435761u) % 1000) / 977.0 - 0.5);
        h[i] = adam_f32_to_bf16(g[i]);
    }
    WorkPool wp;
    Err e;
    ck_assert_int_eq(workpool_init(&wp, 3, &e), 0);
    double one = adam_sum_sq(g, DTYPE_FP32, n, NULL), many = adam_sum_sq(g, DTYPE_FP32, n, &wp);
    ck_assert_msg(one == many, "%.17g vs %.17g", one, many);
    /* the chunks' sums, in order */
    double want = 0;
    for (size_t k = 0; k < n; k += ADAM_SQ_CHUNK) {
        double c = 0;
        for (size_t i = k; i < n && i < k + ADAM_SQ_CHUNK; i++)
            c += (double)g[i] * g[i];
        want += c;
    }
    ck_assert(one == want);
    double b16 = adam_sum_sq(h, DTYPE_BF16, n, &wp), b16_want = 0;
    for (size_t k = 0; k < n; k += ADAM_SQ_CHUNK) {
        double c = 0;
        for (size_t i = k; i < n && i < k + ADAM_SQ_CHUNK; i++)
            c += (double)adam_bf16_to_f32(h[i]) * adam_bf16_to_f32(h[i]);
        b16_want += c;
    }
    ck_assert(b16 == b16_want);
    ck_assert(adam_sum_sq(g, DTYPE_FP32, 0, &wp) == 0);
    workpool_free(&wp);
    free(g), free(h);
}
END_TEST

/* The micro-batch gradient sum: the vector path's bits are the scalar reference's (fp32 and bf16
 * gradients, ranges that start at every offset from the 32-byte boundary the first micro-batch's
 * streaming stores need and end off the vector width or before reaching it, -0, infinities),
 * and the first micro-batch's write is adding into a zeroed sum (0 + -0 is +0). */
START_TEST(grad_sum_matches_reference)
{
    size_t n = 1000;
    float *gf = malloc(n * sizeof *gf), *fast = malloc(n * sizeof *fast);
    float *ref = malloc(n * sizeof *ref), *zeroed = malloc(n * sizeof *zeroed);
    uint16_t *gb = malloc(n * sizeof *gb);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t i = 0; i < n; i++) {
        gf[i] = i % 97 == 5 ? -0.0f : i == 333 ? INFINITY : (float)gsl_ran_gaussian(r, 1e-3);
        gb[i] = adam_f32_to_bf16(gf[i]);
    }
    const void *grads[2] = {gf, gb};
    DType types[2] = {DTYPE_FP32, DTYPE_BF16};
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < 20; c++) {
            bool first = c % 2;
            for (size_t i = 0; i < n; i++)
                fast[i] = ref[i] = (float)gsl_ran_gaussian(r, 1e-2);
            memcpy(zeroed, ref, n * sizeof *ref);
            size_t b = (size_t)c / 2, e = c < 18 ? n - 5 : b + 3;
            grad_sum_add(fast, grads[k], types[k], b, e, first);
            grad_sum_add_ref(ref, grads[k], types[k], b, e, first);
            ck_assert_mem_eq(fast, ref, n * sizeof *ref);
            if (first) {
                memset(zeroed + b, 0, (e - b) * sizeof *zeroed);
                for (size_t i = b; i < e; i++)
                    zeroed[i] += types[k] == DTYPE_FP32 ? gf[i] : adam_bf16_to_f32(gb[i]);
                ck_assert_mem_eq(fast, zeroed, n * sizeof *ref);
                ck_assert(b > 5 || !signbit(fast[5])); /* -0 summed into 0 */
            }
        }
    gsl_rng_free(r);
    free(gf), free(fast), free(ref), free(zeroed), free(gb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("adam");
    TCase *tc = tcase_create("adam");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, reference_is_adamw);
    tcase_add_test(tc, simd_matches_reference);
    tcase_add_test(tc, threads_match_reference);
    tcase_add_test(tc, bf16_rounding);
    tcase_add_test(tc, bulk_conversions_match_scalar);
    tcase_add_test(tc, sum_sq_does_not_depend_on_threads);
    tcase_add_test(tc, grad_sum_matches_reference);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
