/* gpt2_kernels: CUDA kernels of the GPT-2 training step; see gpt2_kernels.h. Written for
 * clarity and exactness first: warp-per-row reductions, fp32 accumulation; attention by query
 * chunks, its products on cuBLAS (tensor cores). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "cuda_check.h"

extern "C" {
#include "flash_attention.h"
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

extern "C" void *gk_blas_create(void)
{
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    return h;
}

extern "C" void gk_blas_destroy(void *blas)
{
    if (blas)
        cublasDestroy((cublasHandle_t)blas);
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
 * Where flash_attention_supported (head sizes 32, 64, 128 on sm_80+), the fused kernels of
 * flash_attention.cu run; other shapes take this path, tiled by query chunks of ATT_QC rows: for each chunk the scores against the keys it may see
 * (causal: keys 0 .. q0 + qn - 1) are one batched tensor-core GEMM over every (batch, head),
 * then a row softmax, then P @ V, so memory is O(ATT_QC x T) per head: linear in T, never T x T.
 * Backward recomputes P from the saved log-sum-exp chunk by chunk; dK and dV accumulate in fp32
 * across chunks and are rounded to bf16 once at the end. */

enum { ATT_QC = 256 };

typedef struct AttWs {
    float *S;      /* [B][NH][qn][kn] scores, then dP */
    bf16 *P;       /* [B][NH][qn][kn] probabilities, then dS */
    float *dkv;    /* [B][T][2C] fp32 dK | dV accumulators */
    void **ptrs;   /* 3 x B*NH matrix pointers for the batched GEMMs */
} AttWs;

extern "C" size_t gk_attention_workspace_bytes(int B, int T, int C, int NH)
{
    if (flash_attention_supported(C, NH))
        return flash_attention_workspace_bytes(B, T, C);
    size_t chunk = (size_t)B * NH * ATT_QC * T;
    return chunk * 4 + chunk * 2 + (size_t)B * T * 2 * C * 4 + 3 * (size_t)B * NH * 8 + 4 * 256;
}

static AttWs carve_ws(void *ws, int B, int T, int C, int NH)
{
    size_t chunk = (size_t)B * NH * ATT_QC * T;
    char *p = (char *)ws;
    AttWs w;
    w.S = (float *)p;
    p += (chunk * 4 + 255) / 256 * 256;
    w.P = (bf16 *)p;
    p += (chunk * 2 + 255) / 256 * 256;
    w.dkv = (float *)p;
    p += ((size_t)B * T * 2 * C * 4 + 255) / 256 * 256;
    w.ptrs = (void **)p;
    return w;
}

/* Matrix pointers of every (batch row, head): base + b * per_b + h * per_h, in bytes. */
__global__ void att_ptrs_kernel(void **ptrs, int n, const char *a, long long a_b, long long a_h,
                                const char *b, long long b_b, long long b_h, char *c,
                                long long c_b, long long c_h, int NH)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    int bb = k / NH, h = k % NH;
    ptrs[k] = (void *)(a + bb * a_b + h * a_h);
    ptrs[n + k] = (void *)(b + bb * b_b + h * b_h);
    ptrs[2 * n + k] = (void *)(c + bb * c_b + h * c_h);
}

/* One batched GEMM over every (batch row, head): C = alpha op(A) op(B) + beta C, bf16 inputs,
 * fp32 compute, output of ctype. Strides are in elements: per batch row, per head. */
static void bh_gemm(cublasHandle_t h, cudaStream_t s, void **ptrs, int B, int NH,
                    cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                    const bf16 *a, int lda, long long a_b, long long a_h, const bf16 *b, int ldb,
                    long long b_b, long long b_h, float beta, void *c, cudaDataType ctype,
                    int ldc, long long c_b, long long c_h)
{
    int count = B * NH;
    long long cs = ctype == CUDA_R_32F ? 4 : 2;
    att_ptrs_kernel<<<(count + 127) / 128, 128, 0, s>>>(
        ptrs, count, (const char *)a, 2 * a_b, 2 * a_h, (const char *)b, 2 * b_b, 2 * b_h,
        (char *)c, cs * c_b, cs * c_h, NH);
    LAUNCHED(att_ptrs_kernel);
    CUBLAS_CHECK(cublasGemmBatchedEx(h, ta, tb, m, n, k, &alpha, (const void *const *)ptrs,
                                     CUDA_R_16BF, lda, (const void *const *)(ptrs + count),
                                     CUDA_R_16BF, ldb, &beta, ptrs + 2 * count, ctype, ldc,
                                     count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* Row softmax of a chunk's scores with the causal mask; writes P (bf16) and, in forward, the
 * log-sum-exp; in backward (lse given) recomputes P = exp(S - lse). One warp per row. */
__global__ void chunk_softmax_kernel(bf16 *P, const float *S, float *lse, int B, int NH, int T,
                                     int q0, int qn, int kn, int backward)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= B * NH * qn)
        return;
    int i = row % qn, bh = row / qn, t = q0 + i;
    const float *s = S + (size_t)row * kn;
    bf16 *p = P + (size_t)row * kn;
    float *l = lse + (size_t)bh * T + t;
    float L;
    if (backward) {
        L = *l;
    } else {
        float mx = -INFINITY;
        for (int j = lane; j <= t; j += 32)
            mx = fmaxf(mx, s[j]);
        mx = warp_max(mx);
        float sum = 0;
        for (int j = lane; j <= t; j += 32)
            sum += __expf(s[j] - mx);
        sum = warp_sum(sum);
        L = mx + logf(sum);
        if (lane == 0)
            *l = L;
    }
    for (int j = lane; j < kn; j += 32)
        p[j] = __float2bfloat16_rn(j <= t ? __expf(s[j] - L) : 0.0f);
}

/* dS = P * (dP - delta) for the chunk (zero above the diagonal), in place over P. */
__global__ void chunk_dscores_kernel(bf16 *P, const float *dP, const float *delta, int B, int NH,
                                     int T, int q0, int qn, int kn)
{
    size_t n = (size_t)B * NH * qn * kn;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t row = e / kn;
        int j = (int)(e % kn), i = (int)(row % qn), bh = (int)(row / qn), t = q0 + i;
        float p = ld(P + e);
        P[e] = __float2bfloat16_rn(j <= t ? p * (dP[e] - delta[(size_t)bh * T + t]) : 0.0f);
    }
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

/* dqkv's K and V parts from the fp32 accumulators [B][T][2C]. */
__global__ void store_dkv_kernel(bf16 *dqkv, const float *dkv, int B, int T, int C)
{
    size_t n = (size_t)B * T * 2 * C;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t bt = e / (2 * C), c = e % (2 * C);
        dqkv[bt * 3 * C + C + c] = __float2bfloat16_rn(dkv[e]);
    }
}

extern "C" void gk_attention_forward(bf16_t *out_, float *lse, const bf16_t *qkv_, int B, int T,
                                     int C, int NH, void *ws, void *blas, cudaStream_t_c s)
{
    cublasHandle_t h = (cublasHandle_t)blas;
    CUBLAS_CHECK(cublasSetStream(h, S(s)));
    if (flash_attention_supported(C, NH)) {
        flash_attention_forward(out_, lse, qkv_, B, T, C, NH, s);
        return;
    }
    const bf16 *qkv = (const bf16 *)qkv_;
    bf16 *out = (bf16 *)out_;
    AttWs w = carve_ws(ws, B, T, C, NH);
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int q0 = 0; q0 < T; q0 += ATT_QC) {
        int qn = min(ATT_QC, T - q0), kn = q0 + qn;
        long long per = (long long)qn * kn, bT3 = (long long)T * C3;
        /* S^T (kn x qn) = K (kn x hs) Q^T: scores, row-major [qn][kn] per head */
        bh_gemm(h, S(s), w.ptrs, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, kn, qn, hs, scale, qkv + C, C3,
                bT3, hs, qkv + (size_t)q0 * C3, C3, bT3, hs, 0.0f, w.S, CUDA_R_32F, kn,
                NH * per, per);
        int rows = B * NH * qn;
        chunk_softmax_kernel<<<(rows + 7) / 8, 256, 0, S(s)>>>(w.P, w.S, lse, B, NH, T, q0, qn,
                                                              kn, 0);
        LAUNCHED(chunk_softmax_kernel);
        /* O^T (hs x qn) = V^T (hs x kn) P^T */
        bh_gemm(h, S(s), w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_N, hs, qn, kn, 1.0f, qkv + 2 * C,
                C3, bT3, hs, w.P, kn, NH * per, per, 0.0f, out + (size_t)q0 * C, CUDA_R_16BF, C,
                (long long)T * C, hs);
    }
}

extern "C" void gk_attention_backward(bf16_t *dqkv_, float *delta, const bf16_t *dout_,
                                      const bf16_t *out_, const bf16_t *qkv_, const float *lse,
                                      int B, int T, int C, int NH, void *ws, void *blas,
                                      cudaStream_t_c s)
{
    cublasHandle_t h = (cublasHandle_t)blas;
    CUBLAS_CHECK(cublasSetStream(h, S(s)));
    const bf16 *qkv = (const bf16 *)qkv_, *dout = (const bf16 *)dout_;
    bf16 *dqkv = (bf16 *)dqkv_;
    AttWs w = carve_ws(ws, B, T, C, NH);
    int hs = C / NH, C3 = 3 * C, rows_all = B * NH * T;
    float scale = 1.0f / sqrtf((float)hs);
    attention_delta_kernel<<<(rows_all + 7) / 8, 256, 0, S(s)>>>(
        delta, dout, (const bf16 *)out_, B, T, C, NH);
    LAUNCHED(attention_delta_kernel);
    if (flash_attention_supported(C, NH)) {
        flash_attention_backward(dqkv_, dout_, qkv_, lse, delta, B, T, C, NH, ws, s);
        return;
    }
    CUDA_CHECK(cudaMemsetAsync(w.dkv, 0, (size_t)B * T * 2 * C * 4, S(s)));
    for (int q0 = 0; q0 < T; q0 += ATT_QC) {
        int qn = min(ATT_QC, T - q0), kn = q0 + qn;
        long long per = (long long)qn * kn, bT3 = (long long)T * C3, bTC = (long long)T * C;
        long long bT2 = (long long)T * 2 * C, bP = NH * per;
        bh_gemm(h, S(s), w.ptrs, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, kn, qn, hs, scale, qkv + C, C3,
                bT3, hs, qkv + (size_t)q0 * C3, C3, bT3, hs, 0.0f, w.S, CUDA_R_32F, kn, bP, per);
        int rows = B * NH * qn;
        chunk_softmax_kernel<<<(rows + 7) / 8, 256, 0, S(s)>>>(w.P, w.S, (float *)lse, B, NH, T,
                                                              q0, qn, kn, 1);
        LAUNCHED(chunk_softmax_kernel);
        const bf16 *dO = dout + (size_t)q0 * C;
        /* dV^T (hs x kn) += dO^T (hs x qn) P */
        bh_gemm(h, S(s), w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_T, hs, kn, qn, 1.0f, dO, C, bTC,
                hs, w.P, kn, bP, per, 1.0f, w.dkv + C, CUDA_R_32F, 2 * C, bT2, hs);
        /* dP^T (kn x qn) = V dO^T, into S */
        bh_gemm(h, S(s), w.ptrs, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, kn, qn, hs, 1.0f, qkv + 2 * C,
                C3, bT3, hs, dO, C, bTC, hs, 0.0f, w.S, CUDA_R_32F, kn, bP, per);
        size_t n = (size_t)rows * kn;
        chunk_dscores_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>(w.P, w.S, delta, B, NH, T,
                                                                   q0, qn, kn);
        LAUNCHED(chunk_dscores_kernel);
        /* dQ^T (hs x qn) = scale K^T dS^T: complete for this chunk */
        bh_gemm(h, S(s), w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_N, hs, qn, kn, scale, qkv + C, C3,
                bT3, hs, w.P, kn, bP, per, 0.0f, dqkv + (size_t)q0 * C3, CUDA_R_16BF, C3, bT3,
                hs);
        /* dK^T (hs x kn) += scale Q^T dS */
        bh_gemm(h, S(s), w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_T, hs, kn, qn, scale,
                qkv + (size_t)q0 * C3, C3, bT3, hs, w.P, kn, bP, per, 1.0f, w.dkv, CUDA_R_32F,
                2 * C, bT2, hs);
    }
    store_dkv_kernel<<<blocks_for((size_t)B * T * 2 * C, 256), 256, 0, S(s)>>>(dqkv, w.dkv, B, T,
                                                                               C);
    LAUNCHED(store_dkv_kernel);
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
                                            int N, int V, int row_ld, int backward)
{
    int row = blockIdx.x;
    bf16 *x = logits + (size_t)row * row_ld;
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
    for (int i = threadIdx.x; i < row_ld; i += blockDim.x) {
        float p = i < V ? __expf(ld(x + i) - mx) * inv : 0.0f;
        x[i] = __float2bfloat16_rn(i < V ? (p - (i == target ? 1.0f : 0.0f)) * invN : 0.0f);
    }
}

extern "C" void gk_softmax_crossentropy(float *losses, bf16_t *logits, const int *targets, int N,
                                        int V, int ld, int backward, cudaStream_t_c s)
{
    softmax_crossentropy_kernel<<<N, 512, 0, S(s)>>>(losses, (bf16 *)logits, targets, N, V, ld,
                                                     backward);
    LAUNCHED(softmax_crossentropy_kernel);
}

__global__ void add_f32_kernel(float *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

extern "C" void gk_add_f32(float *dst, const float *src, size_t n, cudaStream_t_c s)
{
    add_f32_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>(dst, src, n);
    LAUNCHED(add_f32_kernel);
}

extern "C" void gk_copy_bf16(bf16_t *dst, const bf16_t *src, size_t n, cudaStream_t_c s)
{
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n * 2, cudaMemcpyDeviceToDevice, S(s)));
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

extern "C" double gk_sum_sq(const float *x, size_t n, double *scratch, cudaStream_t_c s)
{
    double *d = scratch, h = 0;
    CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(double), S(s)));
    unsigned blocks = blocks_for(n, 256);
    sum_sq_kernel<<<blocks < 1024 ? blocks : 1024, 256, 0, S(s)>>>(d, x, n);
    LAUNCHED(sum_sq_kernel);
    CUDA_CHECK(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, S(s)));
    CUDA_CHECK(cudaStreamSynchronize(S(s)));
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

extern "C" void gk_fill_random(bf16_t *x, size_t n, unsigned seed)
{
    fill_random_kernel<<<1024, 256>>>((bf16 *)x, n, seed);
    LAUNCHED(fill_random_kernel);
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
    gk_fill_random((bf16_t *)a, (size_t)N * C, 1);
    gk_fill_random((bf16_t *)w, (size_t)OC * C, 2);
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
