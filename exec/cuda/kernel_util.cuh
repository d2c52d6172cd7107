/* kernel_util: small device helpers shared by the .cu files of exec/cuda (not a public header:
 * C code sees gpt2_kernels.h only). The two 16-bit float formats as one template parameter T
 * (bf16 or f16) with their conversions, GK_DISPATCH from the C API's GkType to T, warp
 * reductions, grid sizing, and the 8-wide packs (16 bytes) that the memory-bound kernels move
 * per thread. */
#ifndef FUYOU_KERNEL_UTIL_CUH
#define FUYOU_KERNEL_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>

extern "C" {
#include "gpt2_kernels.h"
}

typedef __nv_bfloat16 bf16;
typedef __half f16;

static inline cudaStream_t S(cudaStream_t_c s)
{
    return (cudaStream_t)s;
}

/* Runs the statements with T16 the device type of the C API's GkType t. */
#define GK_DISPATCH(t, ...)                                                                   \
    do {                                                                                      \
        if ((t) == GK_FP16) {                                                                 \
            typedef f16 T16;                                                                  \
            __VA_ARGS__;                                                                      \
        } else if ((t) == GK_BF16) {                                                          \
            typedef bf16 T16;                                                                 \
            __VA_ARGS__;                                                                      \
        } else {                                                                              \
            fprintf(stderr, "%s:%d: unknown GkType %d\n", __FILE__, __LINE__, (int)(t));      \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

/* float <-> T, round to nearest even */
__device__ __forceinline__ float to_f(bf16 x)
{
    return __bfloat162float(x);
}
__device__ __forceinline__ float to_f(f16 x)
{
    return __half2float(x);
}
template <typename T> __device__ __forceinline__ T from_f(float f);
template <> __device__ __forceinline__ bf16 from_f<bf16>(float f)
{
    return __float2bfloat16_rn(f);
}
template <> __device__ __forceinline__ f16 from_f<f16>(float f)
{
    return __float2half_rn(f);
}

template <typename T> __device__ __forceinline__ float ld(const T *p)
{
    return to_f(*p);
}

/* The cuBLAS data type of a GkType, and of T */
static inline cudaDataType gk_cuda_type(GkType t)
{
    return t == GK_FP16 ? CUDA_R_16F : CUDA_R_16BF;
}

template <typename T> static inline cudaDataType cuda_type();
template <> inline cudaDataType cuda_type<bf16>()
{
    return CUDA_R_16BF;
}
template <> inline cudaDataType cuda_type<f16>()
{
    return CUDA_R_16F;
}

/* Two values of T in 32 bits (the lower index in the low half), and back. */
template <typename T> struct Pair2;
template <> struct Pair2<bf16> {
    typedef __nv_bfloat162 type;
};
template <> struct Pair2<f16> {
    typedef __half2 type;
};
__device__ __forceinline__ float2 to_f2(__nv_bfloat162 p)
{
    return __bfloat1622float2(p);
}
__device__ __forceinline__ float2 to_f2(__half2 p)
{
    return __half22float2(p);
}
template <typename T> __device__ __forceinline__ typename Pair2<T>::type from_f2(float a, float b);
template <> __device__ __forceinline__ __nv_bfloat162 from_f2<bf16>(float a, float b)
{
    return __floats2bfloat162_rn(a, b);
}
template <> __device__ __forceinline__ __half2 from_f2<f16>(float a, float b)
{
    return __floats2half2_rn(a, b);
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

/* Eight values of T, one 16-byte load or store. */
template <typename T> struct __align__(16) Pack8 {
    typename Pair2<T>::type h[4];
};

/* W (1 or 8) consecutive values as floats, from and to T or fp32 memory (W = 8 needs 16-byte
 * alignment: see vec8_ok). */
template <int W, typename T> __device__ __forceinline__ void load(const T *p, float f[W])
{
    if constexpr (W == 8) {
        Pack8<T> v = *(const Pack8<T> *)p;
        for (int k = 0; k < 4; k++) {
            float2 t = to_f2(v.h[k]);
            f[2 * k] = t.x;
            f[2 * k + 1] = t.y;
        }
    } else {
        f[0] = to_f(*p);
    }
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

template <int W, typename T> __device__ __forceinline__ void store(T *p, const float f[W])
{
    if constexpr (W == 8) {
        Pack8<T> v;
        for (int k = 0; k < 4; k++)
            v.h[k] = from_f2<T>(f[2 * k], f[2 * k + 1]);
        *(Pack8<T> *)p = v;
    } else {
        *p = from_f<T>(f[0]);
    }
}

/* Rows normalised by one block each (RMSNorm, LayerNorm forward): the block's threads take
 * the row's 8-element packs by turn, each keeping at most ROW_PACKS_MAX of them in registers,
 * so the row is read from memory once. ROW_THREADS threads a block. */
enum { ROW_THREADS = 128, ROW_PACKS_MAX = 8 };

/* The packs each thread keeps for rows of C elements (C / 8 packs), rounded up to a power of two
 * (the kernels' instantiations), or 0 when a row does not fit ROW_PACKS_MAX a thread. */
static inline int row_packs(int C)
{
    int need = (C / 8 + ROW_THREADS - 1) / ROW_THREADS, p = 1;
    while (p < need)
        p *= 2;
    return p <= ROW_PACKS_MAX ? p : 0;
}

/* v summed over the block's threads (ROW_THREADS of them); every thread gets the sum. */
__device__ __forceinline__ float row_sum(float v)
{
    __shared__ float part[ROW_THREADS / 32];
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0;
    for (int w = 0; w < ROW_THREADS / 32; w++)
        s += part[w];
    __syncthreads(); /* part is read by all before a next sum writes it */
    return s;
}

/* Two sums over the block's threads (ROW_THREADS of them) at once, one pass of barriers;
 * every thread gets both. */
__device__ __forceinline__ float2 row_sum2(float a, float b)
{
    __shared__ float2 part[ROW_THREADS / 32];
    a = warp_sum(a), b = warp_sum(b);
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = make_float2(a, b);
    __syncthreads();
    float2 s = make_float2(0, 0);
    for (int w = 0; w < ROW_THREADS / 32; w++)
        s.x += part[w].x, s.y += part[w].y;
    __syncthreads(); /* part is read by all before a next sum writes it */
    return s;
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
