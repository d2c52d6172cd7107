/* adam_simd: the AVX2 and AVX-512 AdamW kernels (internal to exec/optim; use adam.h). Each
 * processes whole vectors from begin and returns where it stopped; the caller finishes the tail
 * with the scalar reference. */
#ifndef FUYOU_ADAM_SIMD_H
#define FUYOU_ADAM_SIMD_H

#include "adam.h"

size_t adam_update_avx2(const AdamStep *s, const AdamSlice *x, size_t begin, size_t end);
size_t adam_update_avx512(const AdamStep *s, const AdamSlice *x, size_t begin, size_t end);

#endif
