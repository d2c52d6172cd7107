/* adam_simd: the AVX2 and AVX-512 AdamW kernels (internal to exec/optim; use adam.h). Each
 * processes whole vectors from begin and returns where it stopped; the caller finishes the tail
 * with the scalar reference. */
#ifndef FUYOU_ADAM_SIMD_H
#define FUYOU_ADAM_SIMD_H

#include "adam.h"

size_t adam_update_avx2(const AdamStep *s, const AdamSlice *x, size_t begin, size_t end);
size_t adam_update_avx512(const AdamStep *s, const AdamSlice *x, size_t begin, size_t end);
/* adam_narrow and adam_widen of 2-byte types (bf16: true, else fp16) over whole vectors: the
 * count done. */
size_t adam_narrow_avx2(uint16_t *dst, const float *src, size_t n, bool bf16);
size_t adam_widen_avx2(float *dst, const uint16_t *src, size_t n, bool bf16);
size_t adam_narrow_avx512(uint16_t *dst, const float *src, size_t n, bool bf16);
size_t adam_widen_avx512(float *dst, const uint16_t *src, size_t n, bool bf16);

#endif
