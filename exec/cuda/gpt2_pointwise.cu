/* gpt2_pointwise: the memory-bound elementwise kernels of the GPT-2 step (casts, bias add and
 * its gradient, GELU, bias + GELU fused, residual add); see gpt2_kernels.h. Each kernel is
 * written once over a width W: W = 8 moves 16 bytes per thread per access (what saturates HBM),
 * W = 1 serves sizes or pointers that do not allow it. The launchers choose; tests run both. */
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

template <int W> __global__ void f32_to_bf16_kernel(bf16 *out, const float *in, size_t n)
{
    FOR_EACH_GROUP(i, n) {
        float f[W];
        load<W>(in + i, f);
        store<W>(out + i, f);
    }
}

__global__ void bf16_to_f32_kernel(float *out, const bf16 *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __bfloat162float(in[i]);
}

extern "C" void gk_f32_to_bf16(bf16_t *out, const float *in, size_t n, cudaStream_t_c s)
{
    if (vec8_ok(n, out, in))
        f32_to_bf16_kernel<8><<<groups_blocks<8>(n), 256, 0, S(s)>>>((bf16 *)out, in, n);
    else
        f32_to_bf16_kernel<1><<<groups_blocks<1>(n), 256, 0, S(s)>>>((bf16 *)out, in, n);
    LAUNCHED(f32_to_bf16_kernel);
}

extern "C" void gk_bf16_to_f32(float *out, const bf16_t *in, size_t n, cudaStream_t_c s)
{
    bf16_to_f32_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>(out, (const bf16 *)in, n);
    LAUNCHED(bf16_to_f32_kernel);
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

template <int W> __global__ void gelu_forward_kernel(bf16 *out, const bf16 *inp, size_t n)
{
    FOR_EACH_GROUP(i, n) {
        float x[W];
        load<W>(inp + i, x);
        for (int k = 0; k < W; k++)
            x[k] = gelu(x[k]);
        store<W>(out + i, x);
    }
}

template <int W>
__global__ void gelu_backward_kernel(bf16 *dinp, const bf16 *inp, const bf16 *dout, size_t n)
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

extern "C" void gk_gelu_forward(bf16_t *out, const bf16_t *inp, size_t n, cudaStream_t_c s)
{
    if (vec8_ok(n, out, inp))
        gelu_forward_kernel<8><<<groups_blocks<8>(n), 256, 0, S(s)>>>((bf16 *)out,
                                                                      (const bf16 *)inp, n);
    else
        gelu_forward_kernel<1><<<groups_blocks<1>(n), 256, 0, S(s)>>>((bf16 *)out,
                                                                      (const bf16 *)inp, n);
    LAUNCHED(gelu_forward_kernel);
}

extern "C" void gk_gelu_backward(bf16_t *dinp, const bf16_t *inp, const bf16_t *dout, size_t n,
                                 cudaStream_t_c s)
{
    if (vec8_ok(n, dinp, inp, dout))
        gelu_backward_kernel<8><<<groups_blocks<8>(n), 256, 0, S(s)>>>(
            (bf16 *)dinp, (const bf16 *)inp, (const bf16 *)dout, n);
    else
        gelu_backward_kernel<1><<<groups_blocks<1>(n), 256, 0, S(s)>>>(
            (bf16 *)dinp, (const bf16 *)inp, (const bf16 *)dout, n);
    LAUNCHED(gelu_backward_kernel);
}

/* ---- bias ----------------------------------------------------------------------------------
 * A thread owns W columns and walks rows blockIdx.y, + gridDim.y, ...: the bias is loaded once
 * and no index is divided. With gelu_out, the biased values are kept in out (the GELU backward
 * reads them) and their GELU written to gelu_out: one pass instead of two. */

template <int W>
__global__ void add_bias_kernel(bf16 *out, bf16 *gelu_out, const bf16 *bias, int N, int OC)
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

static void add_bias(bf16 *out, bf16 *gelu_out, const bf16 *bias, int N, int OC, cudaStream_t s)
{
    bool vec = vec8_ok((size_t)OC, out, gelu_out, bias);
    int cols = vec ? OC / 8 : OC;
    dim3 grid((cols + 127) / 128, N < 2048 ? N : 2048);
    if (vec)
        add_bias_kernel<8><<<grid, 128, 0, s>>>(out, gelu_out, bias, N, OC);
    else
        add_bias_kernel<1><<<grid, 128, 0, s>>>(out, gelu_out, bias, N, OC);
    LAUNCHED(add_bias_kernel);
}

extern "C" void gk_add_bias(bf16_t *out, const bf16_t *bias, int N, int OC, cudaStream_t_c s)
{
    add_bias((bf16 *)out, NULL, (const bf16 *)bias, N, OC, S(s));
}

extern "C" void gk_bias_gelu_forward(bf16_t *pre, bf16_t *out, const bf16_t *bias, int N, int OC,
                                     cudaStream_t_c s)
{
    add_bias((bf16 *)pre, (bf16 *)out, (const bf16 *)bias, N, OC, S(s));
}

/* Column sums: a block takes 32 columns (one per lane) and 256 rows (32 per warp), reduces
 * across its warps in shared memory and adds one partial per column. */
__global__ void bias_backward_kernel(float *dbias, const bf16 *dout, int N, int OC)
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

extern "C" void gk_bias_backward(float *dbias, const bf16_t *dout, int N, int OC,
                                 cudaStream_t_c s)
{
    dim3 grid((OC + 31) / 32, (N + 255) / 256);
    bias_backward_kernel<<<grid, 256, 0, S(s)>>>(dbias, (const bf16 *)dout, N, OC);
    LAUNCHED(bias_backward_kernel);
}

/* ---- residual ------------------------------------------------------------------------------ */

template <int W>
__global__ void residual_forward_kernel(bf16 *out, const bf16 *a, const bf16 *b, size_t n)
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

extern "C" void gk_residual_forward(bf16_t *out, const bf16_t *a, const bf16_t *b, size_t n,
                                    cudaStream_t_c s)
{
    if (vec8_ok(n, out, a, b))
        residual_forward_kernel<8><<<groups_blocks<8>(n), 256, 0, S(s)>>>(
            (bf16 *)out, (const bf16 *)a, (const bf16 *)b, n);
    else
        residual_forward_kernel<1><<<groups_blocks<1>(n), 256, 0, S(s)>>>(
            (bf16 *)out, (const bf16 *)a, (const bf16 *)b, n);
    LAUNCHED(residual_forward_kernel);
}
