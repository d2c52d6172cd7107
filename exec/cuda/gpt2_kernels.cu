/* gpt2_kernels: CUDA kernels of the GPT-2 training step; see gpt2_kernels.h. Written for
 * clarity and exactness first: warp-per-row reductions, fp32 accumulation, a flash-style causal
 * attention with one warp per query (forward, dQ) or key (dK, dV) row and shared-memory tiles. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "cuda_check.h"

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

static unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 32u ? 65535u * 32u : b);
}

/* ---- memory helpers ---------------------------------------------------------------------- */

extern "C" void *gk_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}

extern "C" void gk_free(void *p)
{
    if (p)
        CUDA_CHECK(cudaFree(p));
}

extern "C" void gk_upload(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

extern "C" void gk_download(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

extern "C" void gk_memset(void *dst, int value, size_t bytes)
{
    CUDA_CHECK(cudaMemset(dst, value, bytes));
}

extern "C" void gk_sync(void)
{
    CUDA_CHECK(cudaDeviceSynchronize());
}

__global__ void f32_to_bf16_kernel(bf16 *out, const float *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void bf16_to_f32_kernel(float *out, const bf16 *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __bfloat162float(in[i]);
}

extern "C" void gk_f32_to_bf16(bf16_t *out, const float *in, size_t n, cudaStream_t_c s)
{
    f32_to_bf16_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>((bf16 *)out, in, n);
    LAUNCHED(f32_to_bf16_kernel);
}

extern "C" void gk_bf16_to_f32(float *out, const bf16_t *in, size_t n, cudaStream_t_c s)
{
    bf16_to_f32_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>(out, (const bf16 *)in, n);
    LAUNCHED(bf16_to_f32_kernel);
}

/* ---- encoder ----------------------------------------------------------------------------- */

__global__ void encoder_forward_kernel(bf16 *out, const int *inp, const bf16 *wte,
                                       const bf16 *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C, c = i % C, t = bt % T;
        out[i] = __float2bfloat16_rn(ld(wte + (size_t)inp[bt] * C + c) + ld(wpe + t * C + c));
    }
}

__global__ void encoder_backward_kernel(float *dwte, float *dwpe, const float *dout,
                                        const int *inp, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C, c = i % C, t = bt % T;
        atomicAdd(dwte + (size_t)inp[bt] * C + c, dout[i]);
        atomicAdd(dwpe + t * C + c, dout[i]);
    }
}

extern "C" void gk_encoder_forward(bf16_t *out, const int *inp, const bf16_t *wte,
                                   const bf16_t *wpe, int B, int T, int C, cudaStream_t_c s)
{
    encoder_forward_kernel<<<blocks_for((size_t)B * T * C, 256), 256, 0, S(s)>>>(
        (bf16 *)out, inp, (const bf16 *)wte, (const bf16 *)wpe, B, T, C);
    LAUNCHED(encoder_forward_kernel);
}

extern "C" void gk_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
                                    int B, int T, int C, cudaStream_t_c s)
{
    encoder_backward_kernel<<<blocks_for((size_t)B * T * C, 256), 256, 0, S(s)>>>(
        dwte, dwpe, dout, inp, B, T, C);
    LAUNCHED(encoder_backward_kernel);
}

/* ---- layernorm: one warp per row ---------------------------------------------------------- */

__global__ void layernorm_forward_kernel(bf16 *out, float *mean, float *rstd, const bf16 *inp,
                                         const bf16 *w, const bf16 *b, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const bf16 *x = inp + (size_t)row * C;
    float sum = 0;
    for (int i = lane; i < C; i += 32)
        sum += ld(x + i);
    float m = warp_sum(sum) / C;
    float var = 0;
    for (int i = lane; i < C; i += 32) {
        float d = ld(x + i) - m;
        var += d * d;
    }
    float s = rsqrtf(warp_sum(var) / C + 1e-5f);
    bf16 *o = out + (size_t)row * C;
    for (int i = lane; i < C; i += 32)
        o[i] = __float2bfloat16_rn((ld(x + i) - m) * s * ld(w + i) + ld(b + i));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

/* One warp per row; a block's rows accumulate their weight and bias gradients in shared
 * memory first (when C fits), so the global atomics drop by the rows per block. */
enum { LN_ROWS_PER_BLOCK = 64, LN_SMEM_C = 4096 };

__global__ void layernorm_backward_kernel(float *dinp, float *dw, float *db, const float *dout,
                                          const bf16 *inp, const bf16 *w, const float *mean,
                                          const float *rstd, int N, int C)
{
    extern __shared__ float acc[]; /* dw[C], db[C] when C <= LN_SMEM_C */
    bool local = C <= LN_SMEM_C;
    if (local)
        for (int i = threadIdx.x; i < 2 * C; i += blockDim.x)
            acc[i] = 0;
    __syncthreads();
    int warps = blockDim.x / 32, lane = threadIdx.x % 32;
    int first = blockIdx.x * LN_ROWS_PER_BLOCK;
    for (int row = first + threadIdx.x / 32; row < min(N, first + LN_ROWS_PER_BLOCK);
         row += warps) {
        const float *d = dout + (size_t)row * C;
        const bf16 *x = inp + (size_t)row * C;
        float m = mean[row], s = rstd[row];
        float a = 0, b = 0;
        for (int i = lane; i < C; i += 32) {
            float norm = (ld(x + i) - m) * s, dnorm = ld(w + i) * d[i];
            a += dnorm;
            b += dnorm * norm;
        }
        a = warp_sum(a) / C;
        b = warp_sum(b) / C;
        float *dx = dinp + (size_t)row * C;
        for (int i = lane; i < C; i += 32) {
            float norm = (ld(x + i) - m) * s, g = d[i], dnorm = ld(w + i) * g;
            if (local) {
                atomicAdd(&acc[C + i], g);
                atomicAdd(&acc[i], norm * g);
            } else {
                atomicAdd(db + i, g);
                atomicAdd(dw + i, norm * g);
            }
            dx[i] += (dnorm - a - norm * b) * s;
        }
    }
    __syncthreads();
    if (local)
        for (int i = threadIdx.x; i < C; i += blockDim.x) {
            atomicAdd(dw + i, acc[i]);
            atomicAdd(db + i, acc[C + i]);
        }
}

extern "C" void gk_layernorm_forward(bf16_t *out, float *mean, float *rstd, const bf16_t *inp,
                                     const bf16_t *weight, const bf16_t *bias, int N, int C,
                                     cudaStream_t_c s)
{
    layernorm_forward_kernel<<<(N + 7) / 8, 256, 0, S(s)>>>(
        (bf16 *)out, mean, rstd, (const bf16 *)inp, (const bf16 *)weight, (const bf16 *)bias,
        N, C);
    LAUNCHED(layernorm_forward_kernel);
}

extern "C" void gk_layernorm_backward(float *dinp, float *dweight, float *dbias,
                                      const float *dout, const bf16_t *inp,
                                      const bf16_t *weight, const float *mean,
                                      const float *rstd, int N, int C, cudaStream_t_c s)
{
    size_t smem = C <= LN_SMEM_C ? 2 * (size_t)C * sizeof(float) : 0;
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(layernorm_backward_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    layernorm_backward_kernel<<<(N + LN_ROWS_PER_BLOCK - 1) / LN_ROWS_PER_BLOCK, 256, smem,
                                S(s)>>>(dinp, dweight, dbias, dout, (const bf16 *)inp,
                                        (const bf16 *)weight, mean, rstd, N, C);
    LAUNCHED(layernorm_backward_kernel);
}

/* ---- bias, gelu, residual ------------------------------------------------------------------ */

__global__ void add_bias_kernel(bf16 *out, const bf16 *bias, size_t n, int OC)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(ld(out + i) + ld(bias + i % OC));
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

#define GELU_SCALE 0.7978845608028654f

__global__ void gelu_forward_kernel(bf16 *out, const bf16 *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = ld(inp + i), cube = 0.044715f * x * x * x;
        out[i] = __float2bfloat16_rn(0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube))));
    }
}

__global__ void gelu_backward_kernel(bf16 *dinp, const bf16 *inp, const bf16 *dout, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = ld(inp + i), cube = 0.044715f * x * x * x;
        float th = tanhf(GELU_SCALE * (x + cube)), sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) +
                      x * 0.5f * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = __float2bfloat16_rn(local * ld(dout + i));
    }
}

__global__ void residual_forward_kernel(bf16 *out, const bf16 *a, const bf16 *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(ld(a + i) + ld(b + i));
}

extern "C" void gk_add_bias(bf16_t *out, const bf16_t *bias, int N, int OC, cudaStream_t_c s)
{
    size_t n = (size_t)N * OC;
    add_bias_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>((bf16 *)out, (const bf16 *)bias, n, OC);
    LAUNCHED(add_bias_kernel);
}

extern "C" void gk_bias_backward(float *dbias, const bf16_t *dout, int N, int OC,
                                 cudaStream_t_c s)
{
    dim3 grid((OC + 31) / 32, (N + 255) / 256);
    bias_backward_kernel<<<grid, 256, 0, S(s)>>>(dbias, (const bf16 *)dout, N, OC);
    LAUNCHED(bias_backward_kernel);
}

extern "C" void gk_gelu_forward(bf16_t *out, const bf16_t *inp, size_t n, cudaStream_t_c s)
{
    gelu_forward_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>((bf16 *)out, (const bf16 *)inp, n);
    LAUNCHED(gelu_forward_kernel);
}

extern "C" void gk_gelu_backward(bf16_t *dinp, const bf16_t *inp, const bf16_t *dout, size_t n,
                                 cudaStream_t_c s)
{
    gelu_backward_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>(
        (bf16 *)dinp, (const bf16 *)inp, (const bf16 *)dout, n);
    LAUNCHED(gelu_backward_kernel);
}

extern "C" void gk_residual_forward(bf16_t *out, const bf16_t *a, const bf16_t *b, size_t n,
                                    cudaStream_t_c s)
{
    residual_forward_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>(
        (bf16 *)out, (const bf16 *)a, (const bf16 *)b, n);
    LAUNCHED(residual_forward_kernel);
}

/* ---- attention ----------------------------------------------------------------------------
 * A block is 8 warps, one row each (queries, or keys for dK/dV), of one (batch, head); tiles of
 * 32 rows of the other side are staged in shared memory as fp32. A lane holds elements lane,
 * lane + 32, ... of a head vector (head size up to 128). */

enum { ATT_WARPS = 8, ATT_TILE = 32, HS_MAX = 128, PER_LANE = HS_MAX / 32 };

__device__ __forceinline__ float lane_dot(const float *a, const float *row, int hs, int lane)
{
    float s = 0;
#pragma unroll
    for (int k = 0; k < PER_LANE; k++) {
        int i = lane + 32 * k;
        if (i < hs)
            s += a[k] * row[i];
    }
    return warp_sum(s);
}

__global__ void attention_forward_kernel(bf16 *out, float *lse, const bf16 *qkv, int B, int T,
                                         int C, int NH)
{
    __shared__ float Ks[ATT_TILE][HS_MAX], Vs[ATT_TILE][HS_MAX];
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, hs = C / NH;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t = blockIdx.x * ATT_WARPS + warp;
    int t_last = min(T - 1, (int)blockIdx.x * ATT_WARPS + ATT_WARPS - 1);
    float scale = rsqrtf((float)hs);
    const bf16 *base = qkv + (size_t)b * T * 3 * C;
    float q[PER_LANE], acc[PER_LANE];
#pragma unroll
    for (int k = 0; k < PER_LANE; k++) {
        int i = lane + 32 * k;
        q[k] = t < T && i < hs ? ld(base + (size_t)t * 3 * C + h * hs + i) * scale : 0.0f;
        acc[k] = 0;
    }
    float m = -INFINITY, l = 0;
    for (int ts = 0; ts <= t_last; ts += ATT_TILE) {
        for (int e = threadIdx.x; e < ATT_TILE * hs; e += blockDim.x) {
            int j = e / hs, i = e % hs, t2 = ts + j;
            Ks[j][i] = t2 < T ? ld(base + (size_t)t2 * 3 * C + C + h * hs + i) : 0.0f;
            Vs[j][i] = t2 < T ? ld(base + (size_t)t2 * 3 * C + 2 * C + h * hs + i) : 0.0f;
        }
        __syncthreads();
        if (t < T)
            for (int j = 0; j < ATT_TILE && ts + j <= t; j++) {
                float s = lane_dot(q, Ks[j], hs, lane);
                float m_new = fmaxf(m, s), corr = __expf(m - m_new), p = __expf(s - m_new);
                l = l * corr + p;
#pragma unroll
                for (int k = 0; k < PER_LANE; k++) {
                    int i = lane + 32 * k;
                    acc[k] = acc[k] * corr + (i < hs ? p * Vs[j][i] : 0.0f);
                }
                m = m_new;
            }
        __syncthreads();
    }
    if (t >= T)
        return;
#pragma unroll
    for (int k = 0; k < PER_LANE; k++) {
        int i = lane + 32 * k;
        if (i < hs)
            out[((size_t)b * T + t) * C + h * hs + i] = __float2bfloat16_rn(acc[k] / l);
    }
    if (lane == 0)
        lse[((size_t)b * NH + h) * T + t] = m + logf(l);
}

/* delta = rowsum(dout * out), per (b, h, t): one warp per row. */
__global__ void attention_delta_kernel(float *delta, const bf16 *dout, const bf16 *out, int B,
                                       int T, int C, int NH)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= B * NH * T)
        return;
    int hs = C / NH, t = row % T, bh = row / T, b = bh / NH, h = bh % NH;
    size_t off = ((size_t)b * T + t) * C + h * hs;
    float s = 0;
    for (int i = lane; i < hs; i += 32)
        s += ld(dout + off + i) * ld(out + off + i);
    s = warp_sum(s);
    if (lane == 0)
        delta[row] = s;
}

__global__ void attention_dq_kernel(bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                                    const float *lse, const float *delta, int B, int T, int C,
                                    int NH)
{
    __shared__ float Ks[ATT_TILE][HS_MAX], Vs[ATT_TILE][HS_MAX];
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, hs = C / NH;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t = blockIdx.x * ATT_WARPS + warp;
    int t_last = min(T - 1, (int)blockIdx.x * ATT_WARPS + ATT_WARPS - 1);
    float scale = rsqrtf((float)hs);
    const bf16 *base = qkv + (size_t)b * T * 3 * C;
    float q[PER_LANE], dO[PER_LANE], dq[PER_LANE];
#pragma unroll
    for (int k = 0; k < PER_LANE; k++) {
        int i = lane + 32 * k;
        bool ok = t < T && i < hs;
        q[k] = ok ? ld(base + (size_t)t * 3 * C + h * hs + i) * scale : 0.0f;
        dO[k] = ok ? ld(dout + ((size_t)b * T + t) * C + h * hs + i) : 0.0f;
        dq[k] = 0;
    }
    float L = t < T ? lse[(size_t)bh * T + t] : 0, D = t < T ? delta[(size_t)bh * T + t] : 0;
    for (int ts = 0; ts <= t_last; ts += ATT_TILE) {
        for (int e = threadIdx.x; e < ATT_TILE * hs; e += blockDim.x) {
            int j = e / hs, i = e % hs, t2 = ts + j;
            Ks[j][i] = t2 < T ? ld(base + (size_t)t2 * 3 * C + C + h * hs + i) : 0.0f;
            Vs[j][i] = t2 < T ? ld(base + (size_t)t2 * 3 * C + 2 * C + h * hs + i) : 0.0f;
        }
        __syncthreads();
        if (t < T)
            for (int j = 0; j < ATT_TILE && ts + j <= t; j++) {
                float p = __expf(lane_dot(q, Ks[j], hs, lane) - L);
                float ds = p * (lane_dot(dO, Vs[j], hs, lane) - D);
#pragma unroll
                for (int k = 0; k < PER_LANE; k++) {
                    int i = lane + 32 * k;
                    dq[k] += i < hs ? ds * Ks[j][i] : 0.0f;
                }
            }
        __syncthreads();
    }
    if (t >= T)
        return;
#pragma unroll
    for (int k = 0; k < PER_LANE; k++) {
        int i = lane + 32 * k;
        if (i < hs)
            dqkv[((size_t)b * T + t) * 3 * C + h * hs + i] = __float2bfloat16_rn(dq[k] * scale);
    }
}

__global__ void attention_dkv_kernel(bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                                     const float *lse, const float *delta, int B, int T, int C,
                                     int NH)
{
    __shared__ float Qs[ATT_TILE][HS_MAX], dOs[ATT_TILE][HS_MAX], Ls[ATT_TILE], Ds[ATT_TILE];
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, hs = C / NH;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t2 = blockIdx.x * ATT_WARPS + warp; /* this warp's key row */
    int t_first = blockIdx.x * ATT_WARPS;
    float scale = rsqrtf((float)hs);
    const bf16 *base = qkv + (size_t)b * T * 3 * C;
    float k_[PER_LANE], v_[PER_LANE], dk[PER_LANE], dv[PER_LANE];
#pragma unroll
    for (int k = 0; k < PER_LANE; k++) {
        int i = lane + 32 * k;
        bool ok = t2 < T && i < hs;
        k_[k] = ok ? ld(base + (size_t)t2 * 3 * C + C + h * hs + i) : 0.0f;
        v_[k] = ok ? ld(base + (size_t)t2 * 3 * C + 2 * C + h * hs + i) : 0.0f;
        dk[k] = dv[k] = 0;
    }
    for (int ts = t_first; ts < T; ts += ATT_TILE) {
        for (int e = threadIdx.x; e < ATT_TILE * hs; e += blockDim.x) {
            int j = e / hs, i = e % hs, t = ts + j;
            Qs[j][i] = t < T ? ld(base + (size_t)t * 3 * C + h * hs + i) * scale : 0.0f;
            dOs[j][i] = t < T ? ld(dout + ((size_t)b * T + t) * C + h * hs + i) : 0.0f;
        }
        for (int j = threadIdx.x; j < ATT_TILE; j += blockDim.x) {
            int t = ts + j;
            Ls[j] = t < T ? lse[(size_t)bh * T + t] : 0;
            Ds[j] = t < T ? delta[(size_t)bh * T + t] : 0;
        }
        __syncthreads();
        if (t2 < T)
            for (int j = 0; j < ATT_TILE && ts + j < T; j++) {
                if (ts + j < t2)
                    continue; /* causal: query t sees keys t2 <= t */
                float p = __expf(lane_dot(k_, Qs[j], hs, lane) - Ls[j]);
                float ds = p * (lane_dot(v_, dOs[j], hs, lane) - Ds[j]);
#pragma unroll
                for (int k = 0; k < PER_LANE; k++) {
                    int i = lane + 32 * k;
                    if (i < hs) {
                        dv[k] += p * dOs[j][i];
                        dk[k] += ds * Qs[j][i]; /* Qs holds scale * q */
                    }
                }
            }
        __syncthreads();
    }
    if (t2 >= T)
        return;
#pragma unroll
    for (int k = 0; k < PER_LANE; k++) {
        int i = lane + 32 * k;
        if (i < hs) {
            size_t row = ((size_t)b * T + t2) * 3 * C;
            dqkv[row + C + h * hs + i] = __float2bfloat16_rn(dk[k]);
            dqkv[row + 2 * C + h * hs + i] = __float2bfloat16_rn(dv[k]);
        }
    }
}

extern "C" void gk_attention_forward(bf16_t *out, float *lse, const bf16_t *qkv, int B, int T,
                                     int C, int NH, cudaStream_t_c s)
{
    dim3 grid((T + ATT_WARPS - 1) / ATT_WARPS, B * NH);
    attention_forward_kernel<<<grid, ATT_WARPS * 32, 0, S(s)>>>((bf16 *)out, lse,
                                                                 (const bf16 *)qkv, B, T, C, NH);
    LAUNCHED(attention_forward_kernel);
}

extern "C" void gk_attention_backward(bf16_t *dqkv, float *delta, const bf16_t *dout,
                                      const bf16_t *out, const bf16_t *qkv, const float *lse,
                                      int B, int T, int C, int NH, cudaStream_t_c s)
{
    int rows = B * NH * T;
    attention_delta_kernel<<<(rows + 7) / 8, 256, 0, S(s)>>>(delta, (const bf16 *)dout,
                                                             (const bf16 *)out, B, T, C, NH);
    LAUNCHED(attention_delta_kernel);
    dim3 grid((T + ATT_WARPS - 1) / ATT_WARPS, B * NH);
    attention_dq_kernel<<<grid, ATT_WARPS * 32, 0, S(s)>>>(
        (bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv, lse, delta, B, T, C, NH);
    LAUNCHED(attention_dq_kernel);
    attention_dkv_kernel<<<grid, ATT_WARPS * 32, 0, S(s)>>>(
        (bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv, lse, delta, B, T, C, NH);
    LAUNCHED(attention_dkv_kernel);
}

/* ---- fused softmax + cross-entropy: one block per row ------------------------------------- */

__device__ float block_reduce(float v, bool is_max)
{
    __shared__ float part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n = blockDim.x / 32;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads(); /* part[] may still be read by a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    v = lane < n ? part[lane] : (is_max ? -INFINITY : 0.0f);
    return is_max ? warp_max(v) : warp_sum(v);
}

__global__ void softmax_crossentropy_kernel(float *losses, bf16 *logits, const int *targets,
                                            int N, int V, int backward)
{
    int row = blockIdx.x;
    bf16 *x = logits + (size_t)row * V;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        mx = fmaxf(mx, ld(x + i));
    mx = block_reduce(mx, true);
    float sum = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        sum += __expf(ld(x + i) - mx);
    sum = block_reduce(sum, false);
    int target = targets[row];
    if (threadIdx.x == 0)
        losses[row] = logf(sum) + mx - ld(x + target);
    __syncthreads(); /* everyone has read x[target] before it is overwritten */
    if (!backward)
        return;
    float inv = 1.0f / sum, invN = 1.0f / N;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float p = __expf(ld(x + i) - mx) * inv;
        x[i] = __float2bfloat16_rn((p - (i == target ? 1.0f : 0.0f)) * invN);
    }
}

extern "C" void gk_softmax_crossentropy(float *losses, bf16_t *logits, const int *targets, int N,
                                        int V, int backward, cudaStream_t_c s)
{
    softmax_crossentropy_kernel<<<N, 512, 0, S(s)>>>(losses, (bf16 *)logits, targets, N, V,
                                                     backward);
    LAUNCHED(softmax_crossentropy_kernel);
}

/* ---- AdamW and the gradient norm ---------------------------------------------------------- */

__global__ void adamw_kernel(float *master, float *m, float *v, const float *grad, bf16 *out,
                             size_t n, float b1, float omb1, float b2, float omb2, float eps,
                             float decay, float nss, float isb, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        /* exactly adam_update_ref's operations (exec/optim/adam.c) */
        float g = grad[i] * scale;
        float mi = fmaf(b1, m[i], omb1 * g);
        float vi = fmaf(b2, v[i], (omb2 * g) * g);
        float p = master[i] * decay;
        float denom = fmaf(sqrtf(vi), isb, eps);
        p = fmaf(nss, mi / denom, p);
        m[i] = mi;
        v[i] = vi;
        master[i] = p;
        out[i] = __float2bfloat16_rn(p);
    }
}

extern "C" void gk_adamw(float *master, float *m, float *v, const float *grad, bf16_t *out,
                         size_t n, float beta1, float one_minus_beta1, float beta2,
                         float one_minus_beta2, float eps, float decay, float neg_step_size,
                         float inv_sqrt_bc2, float grad_scale, cudaStream_t_c s)
{
    adamw_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>(
        master, m, v, grad, (bf16 *)out, n, beta1, one_minus_beta1, beta2, one_minus_beta2, eps,
        decay, neg_step_size, inv_sqrt_bc2, grad_scale);
    LAUNCHED(adamw_kernel);
}

__global__ void sum_sq_kernel(double *out, const float *x, size_t n)
{
    double s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += (double)x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0)
        atomicAdd(out, s);
}

extern "C" double gk_sum_sq(const float *x, size_t n, cudaStream_t_c s)
{
    double *d = (double *)gk_alloc(sizeof(double)), h = 0;
    CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(double), S(s)));
    unsigned blocks = blocks_for(n, 256);
    sum_sq_kernel<<<blocks < 1024 ? blocks : 1024, 256, 0, S(s)>>>(d, x, n);
    LAUNCHED(sum_sq_kernel);
    CUDA_CHECK(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, S(s)));
    CUDA_CHECK(cudaStreamSynchronize(S(s)));
    gk_free(d);
    return h;
}

/* ---- benchmark helper ---------------------------------------------------------------------- */

__global__ void fill_random_kernel(bf16 *x, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 13;
        h *= 0x5bd1e995u;
        x[i] = __float2bfloat16_rn(((h >> 8) & 0xffff) / 65536.0f - 0.5f);
    }
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

extern "C" double gk_gemm_tflops(int N, int C, int OC, int reps)
{
    bf16 *a = (bf16 *)gk_alloc((size_t)N * C * 2), *w = (bf16 *)gk_alloc((size_t)OC * C * 2);
    bf16 *o = (bf16 *)gk_alloc((size_t)N * OC * 2);
    fill_random_kernel<<<1024, 256>>>(a, (size_t)N * C, 1);
    fill_random_kernel<<<1024, 256>>>(w, (size_t)OC * C, 2);
    LAUNCHED(fill_random_kernel);
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    float alpha = 1, beta = 0, *ms = (float *)malloc((size_t)reps * sizeof(float));
    for (int r = -3; r < reps; r++) {
        CUDA_CHECK(cudaEventRecord(e0));
        CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &alpha, w, CUDA_R_16BF,
                                  C, a, CUDA_R_16BF, C, &beta, o, CUDA_R_16BF, OC,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUDA_CHECK(cudaEventRecord(e1));
        CUDA_CHECK(cudaEventSynchronize(e1));
        if (r >= 0)
            CUDA_CHECK(cudaEventElapsedTime(&ms[r], e0, e1));
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_float);
    double t = ms[reps / 2] * 1e-3;
    free(ms);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cublasDestroy(h);
    gk_free(a), gk_free(w), gk_free(o);
    return 2.0 * N * C * (double)OC / t / 1e12;
}
