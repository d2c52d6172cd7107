/* adam: the CPU AdamW step over fp32 master weights and Adam m, v, in one pass.
 *
 * Gradients come in fp32 or bf16; the pass can also write the new weights in bf16 or fp16 (for
 * the GPU). Three implementations: the scalar reference, AVX2+FMA+F16C and AVX-512 (F, BW),
 * chosen at run time from the CPU's features, multithreaded over a WorkPool. They perform the
 * same IEEE operations in the same order (fused multiply-adds included, correctly rounded sqrt
 * and division, round-to-nearest-even narrowing), so their results are identical; the tests
 * hold them to bf16 outputs identical and fp32 within 1e-6 relative.
 *
 * The update, as PyTorch's AdamW (decoupled weight decay, bias correction), for step t >= 1:
 *   g = grad * grad_scale
 *   m = fma(beta1, m, (1 - beta1) * g)          v = fma(beta2, v, ((1 - beta2) * g) * g)
 *   p = p * (1 - lr * weight_decay)
 *   p = fma(-lr / (1 - beta1^t), m / fma(sqrt(v), 1 / sqrt(1 - beta2^t), eps), p)
 * grad_scale carries gradient clipping (and any loss-scale unscaling) into the same pass. */
#ifndef FUYOU_ADAM_H
#define FUYOU_ADAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model.h"
#include "workpool.h"

typedef struct AdamConfig {
    float lr, beta1, beta2, eps, weight_decay;
} AdamConfig;

/* The per-step scalars, computed once (adam_step_init) and shared by every element. */
typedef struct AdamStep {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
    float decay;          /* 1 - lr * weight_decay */
    float neg_step_size;  /* -lr / (1 - beta1^t) */
    float inv_sqrt_bc2;   /* 1 / sqrt(1 - beta2^t) */
    float grad_scale;
} AdamStep;

/* One contiguous stretch of parameters. */
typedef struct AdamSlice {
    float *master, *m, *v;
    const void *grad;   /* fp32 or bf16 (uint16_t) */
    DType grad_type;    /* DTYPE_FP32 or DTYPE_BF16 */
    uint16_t *out;      /* new weights in out_type, or NULL */
    DType out_type;     /* DTYPE_BF16 or DTYPE_FP16 */
    size_t n;
} AdamSlice;

typedef enum AdamIsa { ADAM_ISA_SCALAR, ADAM_ISA_AVX2, ADAM_ISA_AVX512, ADAM_ISA_COUNT } AdamIsa;

void adam_step_init(AdamStep *s, const AdamConfig *c, int step, float grad_scale);

const char *adam_isa_name(AdamIsa isa);
bool adam_isa_supported(AdamIsa isa);
/* The fastest implementation this CPU supports. */
AdamIsa adam_isa_best(void);

/* The scalar reference over elements [begin, end) of x. */
void adam_update_ref(const AdamStep *s, const AdamSlice *x, size_t begin, size_t end);
/* One implementation over [begin, end) (isa must be supported). */
void adam_update_range(AdamIsa isa, const AdamStep *s, const AdamSlice *x, size_t begin,
                       size_t end);
/* The whole slice with isa, split over the pool's threads (pool may be NULL: this thread). */
void adam_update(AdamIsa isa, const AdamStep *s, const AdamSlice *x, WorkPool *pool);

/* Sum of squares of grad[0..n) (fp32 or bf16) in double: fixed chunks of ADAM_SQ_CHUNK values,
 * each summed in order, then the chunks' sums in order, so the value is the same on any number
 * of threads (pool may be NULL). For gradient norms. */
enum { ADAM_SQ_CHUNK = 1 << 16 };
double adam_sum_sq(const void *grad, DType type, size_t n, WorkPool *pool);

/* Round-to-nearest-even narrowing, as every implementation does it, and widening back. */
static inline uint16_t adam_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u); /* NaN stays NaN, quiet */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float adam_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
uint16_t adam_f32_to_f16(float f);
float adam_f16_to_f32(uint16_t h);
/* n values at once, as the functions above convert each, with the widest vectors the CPU has:
 * fp32 to type (DTYPE_BF16 or DTYPE_FP16; DTYPE_FP32 copies) and back. src and dst may be
 * unaligned; they must not overlap. For checkpoints and the weights' copies. */
void adam_narrow(void *dst, const float *src, size_t n, DType type);
void adam_widen(float *dst, const void *src, size_t n, DType type);

#endif
