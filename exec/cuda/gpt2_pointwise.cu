/* gpt2_pointwise: the memory-bound elementwise kernels of the GPT-2 step (casts, bias add and
 * its gradient, GELU, bias + GELU fused, residual add); see gpt2_kernels.h. Each kernel is
 * written once over its 16-bit type T (bf16, f16) and a width W: W = 8 moves 16 bytes per
 * thread per access (what saturates HBM), W = 1 serves sizes or pointers that do not allow it.
 * The launchers choose; tests run both. */
#include <math.h>

#include "cuda_check.h"
#include "kernel_util.cuh"

/* Grid-stride loop over n elements, W at a time: i is the first element of each group. */
#define FOR_EACH_GROUP(i, n)                                                                  \
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * W; i < (n);              \
         i += (size_t)gridDim.x * blockDim.x * W)

template <int W> static unsigned groups_blocks(size_t n)
{
    return blocks_for(n / W, 256);
}

/* ---- casts ------------------------------------------------------------------------------- */

template <typename T, int W> __global__ void from_f32_kernel(T *out, const float *in, size_t n)
{
    FOR_EACH_GROUP(i, n) {
        float f[W];
        load<W>(in + i, f);
        store<W>(out + i, f);
    }
}

template <typename T> __global__ void to_f32_kernel(float *out, const T *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = to_f(in[i]);
}

/* Launches kernel<T16, 8> when vec, else kernel<T16, 1>, over n elements in groups. */
#define LAUNCH_W(kernel, vec, n, s, ...)                                                      \
    do {                                                                                      \
        if (vec)                                                                              \
            kernel<T16, 8><<<groups_blocks<8>(n), 256, 0, s>>>(__VA_ARGS__);                  \
        else                                                                                  \
            kernel<T16, 1><<<groups_blocks<1>(n), 256, 0, s>>>(__VA_ARGS__);                  \
        LAUNCHED(kernel);                                                                     \
    } while (0)

extern "C" void gk_from_f32(act16_t *out, const float *in, size_t n, GkType t, cudaStream_t_c s)
{
    GK_DISPATCH(t, LAUNCH_W(from_f32_kernel, vec8_ok(n, out, in), n, S(s), (T16 *)out, in, n));
}

extern "C" void gk_to_f32(float *out, const act16_t *in, size_t n, GkType t, cudaStream_t_c s)
{
    GK_DISPATCH(t, to_f32_kernel<T16><<<blocks_for(n, 256), 256, 0, S(s)>>>(
                       out, (const T16 *)in, n));
    LAUNCHED(to_f32_kernel);
}

/* ---- GELU (tanh form, as GPT-2) ------------------------------------------------------------ */

#define GELU_SCALE 0.7978845608028654f

__device__ __forceinline__ float gelu(float x)
{
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
}

__device__ __forceinline__ float gelu_grad(float x)
{
    float cube = 0.044715f * x * x * x;
    float th = tanhf(GELU_SCALE * (x + cube)), sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + x * 0.5f * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}

template <typename T, int W> __global__ void gelu_forward_kernel(T *out, const T *inp, size_t n)
{
    FOR_EACH_GROUP(i, n) {
        float x[W];
        load<W>(inp + i, x);
        for (int k = 0; k < W; k++)
            x[k] = gelu(x[k]);
        store<W>(out + i, x);
    }
}

template <typename T, int W>
__global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, size_t n)
{
    FOR_EACH_GROUP(i, n) {
        float x[W], d[W];
        load<W>(inp + i, x);
        load<W>(dout + i, d);
        for (int k = 0; k < W; k++)
            x[k] = gelu_grad(x[k]) * d[k];
        store<W>(dinp + i, x);
    }
}

extern "C" void gk_gelu_forward(act16_t *out, const act16_t *inp, size_t n, GkType t,
                                cudaStream_t_c s)
{
    GK_DISPATCH(t, LAUNCH_W(gelu_forward_kernel, vec8_ok(n, out, inp), n, S(s), (T16 *)out,
                            (const T16 *)inp, n));
}

extern "C" void gk_gelu_backward(act16_t *dinp, const act16_t *inp, const act16_t *dout,
                                 size_t n, GkType t, cudaStream_t_c s)
{
    GK_DISPATCH(t, LAUNCH_W(gelu_backward_kernel, vec8_ok(n, dinp, inp, dout), n, S(s),
                            (T16 *)dinp, (const T16 *)inp, (const T16 *)dout, n));
}

/* ---- bias ----------------------------------------------------------------------------------
 * A thread owns W columns and walks rows blockIdx.y, + gridDim.y, ...: the bias is loaded once
 * and no index is divided. With gelu_out, the biased values are kept in out (the GELU backward
 * reads them) and their GELU written to gelu_out: one pass instead of two. */

template <typename T, int W>
__global__ void add_bias_kernel(T *out, T *gelu_out, const T *bias, int N, int OC)
{
    int c = (blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (c >= OC)
        return;
    float b[W];
    load<W>(bias + c, b);
    for (int r = blockIdx.y; r < N; r += gridDim.y) {
        size_t at = (size_t)r * OC + c;
        float x[W];
        load<W>(out + at, x);
        for (int k = 0; k < W; k++)
            x[k] += b[k];
        store<W>(out + at, x);
        if (gelu_out) {
            for (int k = 0; k < W; k++)
                x[k] = gelu(x[k]);
            store<W>(gelu_out + at, x);
        }
    }
}

template <typename T>
static void add_bias(T *out, T *gelu_out, const T *bias, int N, int OC, cudaStream_t s)
{
    bool vec = vec8_ok((size_t)OC, out, gelu_out, bias);
    int cols = vec ? OC / 8 : OC;
    dim3 grid((cols + 127) / 128, N < 2048 ? N : 2048);
    if (vec)
        add_bias_kernel<T, 8><<<grid, 128, 0, s>>>(out, gelu_out, bias, N, OC);
    else
        add_bias_kernel<T, 1><<<grid, 128, 0, s>>>(out, gelu_out, bias, N, OC);
    LAUNCHED(add_bias_kernel);
}

extern "C" void gk_add_bias(act16_t *out, const act16_t *bias, int N, int OC, GkType t,
                            cudaStream_t_c s)
{
    GK_DISPATCH(t, add_bias<T16>((T16 *)out, (T16 *)NULL, (const T16 *)bias, N, OC, S(s)));
}

extern "C" void gk_bias_gelu_forward(act16_t *pre, act16_t *out, const act16_t *bias, int N,
                                     int OC, GkType t, cudaStream_t_c s)
{
    GK_DISPATCH(t, add_bias<T16>((T16 *)pre, (T16 *)out, (const T16 *)bias, N, OC, S(s)));
}

/* Column sums: a block takes 32 columns (one per lane) and 256 rows (32 per warp), reduces
 * across its warps in shared memory and adds one partial per column. */
template <typename T>
__global__ void bias_backward_kernel(float *dbias, const T *dout, int N, int OC)
{
    __shared__ float part[8][32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int oc = blockIdx.x * 32 + lane, row0 = blockIdx.y * 256 + warp * 32;
    float s = 0;
    if (oc < OC)
        for (int r = row0; r < min(N, row0 + 32); r++)
            s += ld(dout + (size_t)r * OC + oc);
    part[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && oc < OC) {
        float t = 0;
        for (int k = 0; k < 8; k++)
            t += part[k][lane];
        atomicAdd(dbias + oc, t);
    }
}

extern "C" void gk_bias_backward(float *dbias, const act16_t *dout, int N, int OC, GkType t,
                                 cudaStream_t_c s)
{
    dim3 grid((OC + 31) / 32, (N + 255) / 256);
    GK_DISPATCH(t, bias_backward_kernel<T16><<<grid, 256, 0, S(s)>>>(dbias, (const T16 *)dout,
                                                                       N, OC));
    LAUNCHED(bias_backward_kernel);
}

/* ---- residual ------------------------------------------------------------------------------ */

template <typename T, int W>
__global__ void residual_forward_kernel(T *out, const T *a, const T *b, size_t n)
{
    FOR_EACH_GROUP(i, n) {
        float x[W], y[W];
        load<W>(a + i, x);
        load<W>(b + i, y);
        for (int k = 0; k < W; k++)
            x[k] += y[k];
        store<W>(out + i, x);
    }
}

extern "C" void gk_residual_forward(act16_t *out, const act16_t *a, const act16_t *b,
                                    size_t n, GkType t, cudaStream_t_c s)
{
    GK_DISPATCH(t, LAUNCH_W(residual_forward_kernel, vec8_ok(n, out, a, b), n, S(s), (T16 *)out,
                            (const T16 *)a, (const T16 *)b, n));
}
