/* kernel_util: small device helpers shared by the .cu files of exec/cuda (not a public header:
 * C code sees gpt2_kernels.h only). Warp reductions, bf16 loads, grid sizing, and the 8-wide
 * bf16 packs (16 bytes) that the memory-bound kernels move per thread. */
#ifndef FUYOU_KERNEL_UTIL_CUH
#define FUYOU_KERNEL_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "gpt2_kernels.h"
}

typedef __nv_bfloat16 bf16;

static inline cudaStream_t S(cudaStream_t_c s)
{
    return (cudaStream_t)s;
}

__device__ __forceinline__ float ld(const bf16 *p)
{
    return __bfloat162float(*p);
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Blocks for a grid-stride loop over n items: one item per thread, capped. */
static inline unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 32u ? 65535u * 32u : b);
}

/* Eight bf16 values, one 16-byte load or store. */
struct __align__(16) Bf8 {
    __nv_bfloat162 h[4];
};

__device__ __forceinline__ void bf8_unpack(const Bf8 &p, float f[8])
{
    for (int k = 0; k < 4; k++) {
        float2 t = __bfloat1622float2(p.h[k]);
        f[2 * k] = t.x;
        f[2 * k + 1] = t.y;
    }
}

__device__ __forceinline__ Bf8 bf8_pack(const float f[8])
{
    Bf8 p;
    for (int k = 0; k < 4; k++)
        p.h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
    return p;
}

/* W (1 or 8) consecutive values as floats, from and to bf16 or fp32 memory (W = 8 needs
 * 16-byte alignment: see vec8_ok). */
template <int W> __device__ __forceinline__ void load(const bf16 *p, float f[W])
{
    if constexpr (W == 8)
        bf8_unpack(*(const Bf8 *)p, f);
    else
        f[0] = ld(p);
}

template <int W> __device__ __forceinline__ void load(const float *p, float f[W])
{
    if constexpr (W == 8) {
        float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
        f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
        f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
    } else {
        f[0] = *p;
    }
}

template <int W> __device__ __forceinline__ void store(float *p, const float f[W])
{
    if constexpr (W == 8) {
        ((float4 *)p)[0] = make_float4(f[0], f[1], f[2], f[3]);
        ((float4 *)p)[1] = make_float4(f[4], f[5], f[6], f[7]);
    } else {
        *p = f[0];
    }
}

template <int W> __device__ __forceinline__ void store(bf16 *p, const float f[W])
{
    if constexpr (W == 8)
        *(Bf8 *)p = bf8_pack(f);
    else
        *p = __float2bfloat16_rn(f[0]);
}

/* Whether n elements at these pointers can go 8 at a time: n a multiple of 8, every pointer
 * 16-byte aligned, n / 8 within a 32-bit index. */
static inline bool vec8_ok(size_t n, const void *a, const void *b = 0, const void *c = 0,
                           const void *d = 0)
{
    uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d;
    return n % 8 == 0 && bits % 16 == 0 && n / 8 <= 0xffffffffu;
}

#endif
