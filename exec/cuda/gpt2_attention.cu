/* gpt2_attention: causal attention's entry points (gpt2_kernels.h): the fused kernels of
 * flash_attention.cu where they apply, else query chunks whose products run on cuBLAS; the
 * delta = rowsum(dout * out) that both backward paths need. */
#include <cublas_v2.h>
#include <math.h>

#include "cuda_check.h"
#include "kernel_util.cuh"

extern "C" {
#include "flash_attention.h"
}

/* ---- attention ----------------------------------------------------------------------------
 * Where flash_attention_supported (head sizes 32, 64, 128 on sm_80+), the fused kernels of
 * flash_attention.cu run; other shapes take this path, tiled by query chunks of ATT_QC rows:
 * for each chunk the scores against the keys it may see (causal: keys 0 .. q0 + qn - 1) are
 * one batched tensor-core GEMM over every (batch, head),
 * then a row softmax, then P @ V, so memory is O(ATT_QC x T) per head: linear in T, never T x T.
 * Backward recomputes P from the saved log-sum-exp chunk by chunk; dK and dV accumulate in fp32
 * across chunks and are rounded to 16 bits once at the end. */

enum { ATT_QC = 256 };

typedef struct AttWs {
    float *S;      /* [B][NH][qn][kn] scores, then dP */
    void *P;       /* [B][NH][qn][kn] probabilities, then dS (16-bit) */
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
    w.P = p;
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

/* One batched GEMM over every (batch row, head): C = alpha op(A) op(B) + beta C, 16-bit inputs
 * of abtype, fp32 compute, output of ctype. Strides are in elements: per batch row, per head. */
static void bh_gemm(cublasHandle_t h, cudaStream_t s, void **ptrs, int B, int NH,
                    cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                    cudaDataType abtype, const void *a, int lda, long long a_b, long long a_h,
                    const void *b, int ldb, long long b_b, long long b_h, float beta, void *c,
                    cudaDataType ctype, int ldc, long long c_b, long long c_h)
{
    int count = B * NH;
    long long cs = ctype == CUDA_R_32F ? 4 : 2;
    att_ptrs_kernel<<<(count + 127) / 128, 128, 0, s>>>(
        ptrs, count, (const char *)a, 2 * a_b, 2 * a_h, (const char *)b, 2 * b_b, 2 * b_h,
        (char *)c, cs * c_b, cs * c_h, NH);
    LAUNCHED(att_ptrs_kernel);
    CUBLAS_CHECK(cublasGemmBatchedEx(h, ta, tb, m, n, k, &alpha, (const void *const *)ptrs,
                                     abtype, lda, (const void *const *)(ptrs + count),
                                     abtype, ldb, &beta, ptrs + 2 * count, ctype, ldc,
                                     count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* Row softmax of a chunk's scores with the causal mask; writes P (16-bit) and, in forward, the
 * log-sum-exp; in backward (lse given) recomputes P = exp(S - lse). One warp per row. */
template <typename A>
__global__ void chunk_softmax_kernel(A *P, const float *S, float *lse, int B, int NH, int T,
                                     int q0, int qn, int kn, int backward)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= B * NH * qn)
        return;
    int i = row % qn, bh = row / qn, t = q0 + i;
    const float *s = S + (size_t)row * kn;
    A *p = P + (size_t)row * kn;
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
        p[j] = from_f<A>(j <= t ? __expf(s[j] - L) : 0.0f);
}

/* dS = P * (dP - delta) for the chunk (zero above the diagonal), in place over P. */
template <typename A>
__global__ void chunk_dscores_kernel(A *P, const float *dP, const float *delta, int B, int NH,
                                     int T, int q0, int qn, int kn)
{
    size_t n = (size_t)B * NH * qn * kn;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t row = e / kn;
        int j = (int)(e % kn), i = (int)(row % qn), bh = (int)(row / qn), t = q0 + i;
        float p = ld(P + e);
        P[e] = from_f<A>(j <= t ? p * (dP[e] - delta[(size_t)bh * T + t]) : 0.0f);
    }
}

/* delta = rowsum(dout * out), per (b, h, t): one warp per row. */
template <typename A>
__global__ void attention_delta_kernel(float *delta, const A *dout, const A *out, int B,
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
template <typename A>
__global__ void store_dkv_kernel(A *dqkv, const float *dkv, int B, int T, int C)
{
    size_t n = (size_t)B * T * 2 * C;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t bt = e / (2 * C), c = e % (2 * C);
        dqkv[bt * 3 * C + C + c] = from_f<A>(dkv[e]);
    }
}

/* The chunked path's forward for 16-bit type A. */
template <typename A>
static void chunked_forward(A *out, float *lse, const A *qkv, int B, int T, int C, int NH,
                            void *ws, cublasHandle_t h, cudaStream_t s)
{
    cudaDataType at = cuda_type<A>();
    AttWs w = carve_ws(ws, B, T, C, NH);
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int q0 = 0; q0 < T; q0 += ATT_QC) {
        int qn = min(ATT_QC, T - q0), kn = q0 + qn;
        long long per = (long long)qn * kn, bT3 = (long long)T * C3;
        /* S^T (kn x qn) = K (kn x hs) Q^T: scores, row-major [qn][kn] per head */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, kn, qn, hs, scale, at, qkv + C,
                C3, bT3, hs, qkv + (size_t)q0 * C3, C3, bT3, hs, 0.0f, w.S, CUDA_R_32F, kn,
                NH * per, per);
        int rows = B * NH * qn;
        chunk_softmax_kernel<A><<<(rows + 7) / 8, 256, 0, s>>>((A *)w.P, w.S, lse, B, NH, T, q0,
                                                               qn, kn, 0);
        LAUNCHED(chunk_softmax_kernel);
        /* O^T (hs x qn) = V^T (hs x kn) P^T */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_N, hs, qn, kn, 1.0f, at, qkv + 2 * C,
                C3, bT3, hs, w.P, kn, NH * per, per, 0.0f, out + (size_t)q0 * C, at, C,
                (long long)T * C, hs);
    }
}

extern "C" void gk_attention_forward(act16_t *out, float *lse, const act16_t *qkv, int B, int T,
                                     int C, int NH, void *ws, void *blas, GkType t,
                                     cudaStream_t_c s)
{
    if (flash_attention_supported(C, NH)) {
        flash_attention_forward(out, lse, qkv, B, T, C, NH, t, s);
        return;
    }
    cublasHandle_t h = (cublasHandle_t)blas;
    CUBLAS_CHECK(cublasSetStream(h, S(s)));
    GK_DISPATCH(t, chunked_forward<T16>((T16 *)out, lse, (const T16 *)qkv, B, T, C, NH, ws, h,
                                        S(s)));
}

/* The chunked path's backward for 16-bit type A (delta already computed). */
template <typename A>
static void chunked_backward(A *dqkv, const float *delta, const A *dout, const A *qkv,
                             const float *lse, int B, int T, int C, int NH, void *ws,
                             cublasHandle_t h, cudaStream_t s)
{
    cudaDataType at = cuda_type<A>();
    AttWs w = carve_ws(ws, B, T, C, NH);
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    CUDA_CHECK(cudaMemsetAsync(w.dkv, 0, (size_t)B * T * 2 * C * 4, s));
    for (int q0 = 0; q0 < T; q0 += ATT_QC) {
        int qn = min(ATT_QC, T - q0), kn = q0 + qn;
        long long per = (long long)qn * kn, bT3 = (long long)T * C3, bTC = (long long)T * C;
        long long bT2 = (long long)T * 2 * C, bP = NH * per;
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, kn, qn, hs, scale, at, qkv + C,
                C3, bT3, hs, qkv + (size_t)q0 * C3, C3, bT3, hs, 0.0f, w.S, CUDA_R_32F, kn, bP,
                per);
        int rows = B * NH * qn;
        chunk_softmax_kernel<A><<<(rows + 7) / 8, 256, 0, s>>>((A *)w.P, w.S, (float *)lse, B,
                                                               NH, T, q0, qn, kn, 1);
        LAUNCHED(chunk_softmax_kernel);
        const A *dO = dout + (size_t)q0 * C;
        /* dV^T (hs x kn) += dO^T (hs x qn) P */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_T, hs, kn, qn, 1.0f, at, dO, C, bTC,
                hs, w.P, kn, bP, per, 1.0f, w.dkv + C, CUDA_R_32F, 2 * C, bT2, hs);
        /* dP^T (kn x qn) = V dO^T, into S */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, kn, qn, hs, 1.0f, at, qkv + 2 * C,
                C3, bT3, hs, dO, C, bTC, hs, 0.0f, w.S, CUDA_R_32F, kn, bP, per);
        size_t n = (size_t)rows * kn;
        chunk_dscores_kernel<A><<<blocks_for(n, 256), 256, 0, s>>>((A *)w.P, w.S, delta, B, NH,
                                                                   T, q0, qn, kn);
        LAUNCHED(chunk_dscores_kernel);
        /* dQ^T (hs x qn) = scale K^T dS^T: complete for this chunk */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_N, hs, qn, kn, scale, at, qkv + C,
                C3, bT3, hs, w.P, kn, bP, per, 0.0f, dqkv + (size_t)q0 * C3, at, C3, bT3, hs);
        /* dK^T (hs x kn) += scale Q^T dS */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_T, hs, kn, qn, scale, at,
                qkv + (size_t)q0 * C3, C3, bT3, hs, w.P, kn, bP, per, 1.0f, w.dkv, CUDA_R_32F,
                2 * C, bT2, hs);
    }
    store_dkv_kernel<A><<<blocks_for((size_t)B * T * 2 * C, 256), 256, 0, s>>>(dqkv, w.dkv, B,
                                                                               T, C);
    LAUNCHED(store_dkv_kernel);
}

extern "C" void gk_attention_backward(act16_t *dqkv, float *delta, const act16_t *dout,
                                      const act16_t *out, const act16_t *qkv, const float *lse,
                                      int B, int T, int C, int NH, void *ws, void *blas,
                                      GkType t, cudaStream_t_c s)
{
    int rows = B * NH * T;
    GK_DISPATCH(t, attention_delta_kernel<T16><<<(rows + 7) / 8, 256, 0, S(s)>>>(
                       delta, (const T16 *)dout, (const T16 *)out, B, T, C, NH));
    LAUNCHED(attention_delta_kernel);
    if (flash_attention_supported(C, NH)) {
        flash_attention_backward(dqkv, dout, qkv, lse, delta, B, T, C, NH, ws, t, s);
        return;
    }
    cublasHandle_t h = (cublasHandle_t)blas;
    CUBLAS_CHECK(cublasSetStream(h, S(s)));
    GK_DISPATCH(t, chunked_backward<T16>((T16 *)dqkv, delta, (const T16 *)dout,
                                         (const T16 *)qkv, lse, B, T, C, NH, ws, h, S(s)));
}
