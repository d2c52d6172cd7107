/* adam_simd: AVX2+FMA+F16C and AVX-512 AdamW; the operation order matches adam_update_ref
 * exactly (see adam.h), so results are identical to it. Compiled for x86-64 with per-function
 * target attributes; the dispatcher only calls what the CPU supports. */
#include "adam_simd.h"

#include <immintrin.h>

/* ---- AVX2 ------------------------------------------------------------------------------- */

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static __m256 load_grad8(const AdamSlice *x, size_t i)
{
    if (x->grad_type == DTYPE_BF16) {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)x->grad + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    return _mm256_loadu_ps((const float *)x->grad + i);
}

/* Round to nearest even to bf16, NaNs made quiet, as adam_f32_to_bf16. */
AVX2 static __m128i to_bf16_8(__m256 p)
{
    __m256i u = _mm256_castps_si256(p);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(
                                                              lsb, _mm256_set1_epi32(0x7fff))),
                                        16);
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(p, p, _CMP_UNORD_Q));
    __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
    return _mm256_castsi256_si128(packed);
}

AVX2 size_t adam_update_avx2(const AdamStep *s, const AdamSlice *x, size_t begin, size_t end)
{
    const __m256 b1 = _mm256_set1_ps(s->beta1), omb1 = _mm256_set1_ps(s->one_minus_beta1);
    const __m256 b2 = _mm256_set1_ps(s->beta2), omb2 = _mm256_set1_ps(s->one_minus_beta2);
    const __m256 eps = _mm256_set1_ps(s->eps), decay = _mm256_set1_ps(s->decay);
    const __m256 nss = _mm256_set1_ps(s->neg_step_size), isb = _mm256_set1_ps(s->inv_sqrt_bc2);
    const __m256 scale = _mm256_set1_ps(s->grad_scale);
    size_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 g = _mm256_mul_ps(load_grad8(x, i), scale);
        __m256 m = _mm256_fmadd_ps(b1, _mm256_loadu_ps(x->m + i), _mm256_mul_ps(omb1, g));
        __m256 v = _mm256_fmadd_ps(b2, _mm256_loadu_ps(x->v + i),
                                   _mm256_mul_ps(_mm256_mul_ps(omb2, g), g));
        __m256 p = _mm256_mul_ps(_mm256_loadu_ps(x->master + i), decay);
        __m256 denom = _mm256_fmadd_ps(_mm256_sqrt_ps(v), isb, eps);
        p = _mm256_fmadd_ps(nss, _mm256_div_ps(m, denom), p);
        _mm256_storeu_ps(x->m + i, m);
        _mm256_storeu_ps(x->v + i, v);
        _mm256_storeu_ps(x->master + i, p);
        if (x->out) {
            __m128i h = x->out_type == DTYPE_BF16
                            ? to_bf16_8(p)
                            : _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_storeu_si128((__m128i *)(x->out + i), h);
        }
    }
    return i;
}

AVX2 size_t adam_narrow_avx2(uint16_t *dst, const float *src, size_t n, bool bf16)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 p = _mm256_loadu_ps(src + i);
        __m128i h = bf16 ? to_bf16_8(p)
                         : _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
    }
    return i;
}

AVX2 size_t adam_widen_avx2(float *dst, const uint16_t *src, size_t n, bool bf16)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        __m256 p = bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                        : _mm256_cvtph_ps(h);
        _mm256_storeu_ps(dst + i, p);
    }
    return i;
}

/* ---- AVX-512 ----------------------------------------------------------------------------- */

#define AVX512 __attribute__((target("avx512f,avx512bw")))

AVX512 static __m512 load_grad16(const AdamSlice *x, size_t i)
{
    if (x->grad_type == DTYPE_BF16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)x->grad + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_loadu_ps((const float *)x->grad + i);
}

AVX512 static __m256i to_bf16_16(__m512 p)
{
    __m512i u = _mm512_castps_si512(p);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    __mmask16 nan = _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q);
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

AVX512 size_t adam_update_avx512(const AdamStep *s, const AdamSlice *x, size_t begin,
                                 size_t end)
{
    const __m512 b1 = _mm512_set1_ps(s->beta1), omb1 = _mm512_set1_ps(s->one_minus_beta1);
    const __m512 b2 = _mm512_set1_ps(s->beta2), omb2 = _mm512_set1_ps(s->one_minus_beta2);
    const __m512 eps = _mm512_set1_ps(s->eps), decay = _mm512_set1_ps(s->decay);
    const __m512 nss = _mm512_set1_ps(s->neg_step_size), isb = _mm512_set1_ps(s->inv_sqrt_bc2);
    const __m512 scale = _mm512_set1_ps(s->grad_scale);
    size_t i = begin;
    for (; i + 16 <= end; i += 16) {
        __m512 g = _mm512_mul_ps(load_grad16(x, i), scale);
        __m512 m = _mm512_fmadd_ps(b1, _mm512_loadu_ps(x->m + i), _mm512_mul_ps(omb1, g));
        __m512 v = _mm512_fmadd_ps(b2, _mm512_loadu_ps(x->v + i),
                                   _mm512_mul_ps(_mm512_mul_ps(omb2, g), g));
        __m512 p = _mm512_mul_ps(_mm512_loadu_ps(x->master + i), decay);
        __m512 denom = _mm512_fmadd_ps(_mm512_sqrt_ps(v), isb, eps);
        p = _mm512_fmadd_ps(nss, _mm512_div_ps(m, denom), p);
        _mm512_storeu_ps(x->m + i, m);
        _mm512_storeu_ps(x->v + i, v);
        _mm512_storeu_ps(x->master + i, p);
        if (x->out) {
            __m256i h = x->out_type == DTYPE_BF16
                            ? to_bf16_16(p)
                            : _mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm256_storeu_si256((__m256i *)(x->out + i), h);
        }
    }
    return i;
}

AVX512 size_t adam_narrow_avx512(uint16_t *dst, const float *src, size_t n, bool bf16)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 p = _mm512_loadu_ps(src + i);
        __m256i h = bf16 ? to_bf16_16(p)
                         : _mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), h);
    }
    return i;
}

AVX512 size_t adam_widen_avx512(float *dst, const uint16_t *src, size_t n, bool bf16)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        __m512 p = bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                        : _mm512_cvtph_ps(h);
        _mm512_storeu_ps(dst + i, p);
    }
    return i;
}
