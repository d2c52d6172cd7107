/* gpt2_attention: causal attention's entry points, GPT-2's (gpt2_kernels.h: multi-head, h == g
 * == NH heads of C / NH) and grouped-query attention's (llama_kernels.h: h query heads sharing
 * g kv heads), one implementation: the fused kernels of flash_attention.cu where they apply,
 * else query chunks whose products run on cuBLAS; and the delta = rowsum(dout * out) that both
 * backward paths need. */
#include <cublas_v2.h>
#include <math.h>

#include "cuda_check.h"
#include "kernel_util.cuh"

extern "C" {
#include "flash_attention.h"
#include "llama_kernels.h"
}

/* ---- the chunked path ---------------------------------------------------------------------
 * Where flash_attention_supported (arch_attention_fused's head sizes on sm_80+) the fused
 * kernels run; other shapes take this path, tiled by query chunks of ATT_QC rows: for each
 * chunk the scores
 * against the keys it may see (causal: keys 0 .. q0 + qn - 1) are one batched tensor-core GEMM
 * over every (batch, query head), each reading its kv head, then a row softmax, then P @ V, so
 * memory is O(ATT_QC x T) per head: linear in T, never T x T. Backward recomputes P from the
 * saved log-sum-exp chunk by chunk; dK and dV accumulate in fp32 per query head across chunks,
 * and at the end each kv head sums its group's, in head order, rounded to 16 bits once. Every
 * sum runs in a fixed order: the result is the same bits on every run. */

enum { ATT_QC = 256 };

/* An attention shape: h query heads, g kv heads of d values, qkv rows of (h + 2g) d. */
typedef struct AttShape {
    int B, T, h, g, d;
} AttShape;

static int row_stride(AttShape a)
{
    return (a.h + 2 * a.g) * a.d;
}

typedef struct AttWs {
    float *S;      /* [B][h][qn][kn] scores, then dP */
    void *P;       /* [B][h][qn][kn] probabilities, then dS (16-bit) */
    float *dkv;    /* [B][T][2][h][d] fp32 dK | dV accumulators, per query head */
    void **ptrs;   /* 3 x B*h matrix pointers for the batched GEMMs */
} AttWs;

static size_t round256(size_t n)
{
    return (n + 255) / 256 * 256;
}

static size_t chunked_ws_bytes(AttShape a)
{
    size_t chunk = (size_t)a.B * a.h * ATT_QC * a.T;
    size_t dkv = (size_t)a.B * a.T * 2 * a.h * a.d * 4;
    return chunk * 4 + chunk * 2 + dkv + 3 * (size_t)a.B * a.h * 8 + 4 * 256;
}

static AttWs carve_ws(void *ws, AttShape a)
{
    size_t chunk = (size_t)a.B * a.h * ATT_QC * a.T;
    char *p = (char *)ws;
    AttWs w;
    w.S = (float *)p;
    p += round256(chunk * 4);
    w.P = p;
    p += round256(chunk * 2);
    w.dkv = (float *)p;
    p += round256((size_t)a.B * a.T * 2 * a.h * a.d * 4);
    w.ptrs = (void **)p;
    return w;
}

/* One operand of the batched GEMMs: matrix (b, query head j) at base + b * per_b + (j / div) *
 * per_h elements, leading dimension ld; div is the group size for k and v (each query head
 * reads its kv head), 1 otherwise. */
typedef struct BhMat {
    const void *base;
    int ld;
    long long per_b, per_h;
    int div;
} BhMat;

/* Matrix pointers of every (batch row, query head), byte strides. */
__global__ void att_ptrs_kernel(void **ptrs, int n, const char *a, long long a_b, long long a_h,
                                int a_div, const char *b, long long b_b, long long b_h,
                                int b_div, char *c, long long c_b, long long c_h, int NH)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    int bb = k / NH, h = k % NH;
    ptrs[k] = (void *)(a + bb * a_b + (h / a_div) * a_h);
    ptrs[n + k] = (void *)(b + bb * b_b + (h / b_div) * b_h);
    ptrs[2 * n + k] = (void *)(c + bb * c_b + h * c_h);
}

/* One batched GEMM over every (batch row, query head): C = alpha op(A) op(B) + beta C, 16-bit
 * inputs of abtype, fp32 compute, output of ctype (c.div must be 1: no two products write one
 * matrix). */
static void bh_gemm(cublasHandle_t h, cudaStream_t s, void **ptrs, int B, int NH,
                    cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                    cudaDataType abtype, BhMat a, BhMat b, float beta, BhMat c,
                    cudaDataType ctype)
{
    int count = B * NH;
    long long cs = ctype == CUDA_R_32F ? 4 : 2;
    att_ptrs_kernel<<<(count + 127) / 128, 128, 0, s>>>(
        ptrs, count, (const char *)a.base, 2 * a.per_b, 2 * a.per_h, a.div,
        (const char *)b.base, 2 * b.per_b, 2 * b.per_h, b.div, (char *)c.base, cs * c.per_b,
        cs * c.per_h, NH);
    LAUNCHED(att_ptrs_kernel);
    CUBLAS_CHECK(cublasGemmBatchedEx(h, ta, tb, m, n, k, &alpha, (const void *const *)ptrs,
                                     abtype, a.ld, (const void *const *)(ptrs + count),
                                     abtype, b.ld, &beta, ptrs + 2 * count, ctype, c.ld,
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

/* delta = rowsum(dout * out), per (b, query head j, t), over out's rows of h d: one warp per
 * row. */
template <typename A>
__global__ void attention_delta_kernel(float *delta, const A *dout, const A *out, int B,
                                       int T, int h, int d)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= B * h * T)
        return;
    int t = row % T, bh = row / T, b = bh / h, j = bh % h;
    size_t off = ((size_t)b * T + t) * h * d + (size_t)j * d;
    float s = 0;
    for (int i = lane; i < d; i += 32)
        s += ld(dout + off + i) * ld(out + off + i);
    s = warp_sum(s);
    if (lane == 0)
        delta[row] = s;
}

/* dqkv's K and V parts from the per-query-head fp32 accumulators [B][T][2][h][d]: each kv
 * head's value is its group's sum, first head first. */
template <typename A>
__global__ void store_dkv_kernel(A *dqkv, const float *dkv, int B, int T, int h, int g, int d)
{
    int gd = g * d, hd = h * d, group = h / g;
    size_t rs = (size_t)(h + 2 * g) * d, n = (size_t)B * T * 2 * gd;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t bt = e / (2 * gd);
        int c = (int)(e % (2 * gd)), part = c / gd, kv = c % gd / d, i = c % d;
        const float *src = dkv + bt * 2 * hd + (size_t)part * hd + (size_t)kv * group * d + i;
        float sum = src[0];
        for (int r = 1; r < group; r++)
            sum += src[(size_t)r * d];
        dqkv[bt * rs + hd + c] = from_f<A>(sum);
    }
}

/* The chunked path's forward for 16-bit type A. */
template <typename A>
static void chunked_forward(A *out, float *lse, const A *qkv, AttShape a, void *ws,
                            cublasHandle_t h, cudaStream_t s)
{
    cudaDataType at = cuda_type<A>();
    AttWs w = carve_ws(ws, a);
    int B = a.B, T = a.T, NH = a.h, d = a.d, rs = row_stride(a), os = a.h * a.d;
    int group = a.h / a.g;
    long long bTr = (long long)T * rs, bTo = (long long)T * os;
    const A *K = qkv + (size_t)a.h * d, *V = qkv + (size_t)(a.h + a.g) * d;
    float scale = 1.0f / sqrtf((float)d);
    for (int q0 = 0; q0 < T; q0 += ATT_QC) {
        int qn = min(ATT_QC, T - q0), kn = q0 + qn;
        long long per = (long long)qn * kn;
        BhMat S = {w.S, kn, NH * per, per, 1}, P = {w.P, kn, NH * per, per, 1};
        /* S^T (kn x qn) = K (kn x d) Q^T: scores, row-major [qn][kn] per head */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, kn, qn, d, scale, at,
                BhMat{K, rs, bTr, d, group}, BhMat{qkv + (size_t)q0 * rs, rs, bTr, d, 1}, 0.0f,
                S, CUDA_R_32F);
        int rows = B * NH * qn;
        chunk_softmax_kernel<A><<<(rows + 7) / 8, 256, 0, s>>>((A *)w.P, w.S, lse, B, NH, T, q0,
                                                               qn, kn, 0);
        LAUNCHED(chunk_softmax_kernel);
        /* O^T (d x qn) = V^T (d x kn) P^T */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_N, d, qn, kn, 1.0f, at,
                BhMat{V, rs, bTr, d, group}, P, 0.0f,
                BhMat{out + (size_t)q0 * os, os, bTo, d, 1}, at);
    }
}

/* The chunked path's backward for 16-bit type A (delta already computed). */
template <typename A>
static void chunked_backward(A *dqkv, const float *delta, const A *dout, const A *qkv,
                             const float *lse, AttShape a, void *ws, cublasHandle_t h,
                             cudaStream_t s)
{
    cudaDataType at = cuda_type<A>();
    AttWs w = carve_ws(ws, a);
    int B = a.B, T = a.T, NH = a.h, d = a.d, rs = row_stride(a), os = a.h * a.d;
    int group = a.h / a.g, hd = a.h * a.d;
    long long bTr = (long long)T * rs, bTo = (long long)T * os, bT2 = (long long)T * 2 * hd;
    const A *K = qkv + (size_t)a.h * d, *V = qkv + (size_t)(a.h + a.g) * d;
    float scale = 1.0f / sqrtf((float)d);
    CUDA_CHECK(cudaMemsetAsync(w.dkv, 0, (size_t)B * T * 2 * hd * 4, s));
    BhMat dK = {w.dkv, 2 * hd, bT2, d, 1}, dV = {w.dkv + hd, 2 * hd, bT2, d, 1};
    for (int q0 = 0; q0 < T; q0 += ATT_QC) {
        int qn = min(ATT_QC, T - q0), kn = q0 + qn;
        long long per = (long long)qn * kn;
        BhMat S = {w.S, kn, NH * per, per, 1}, P = {w.P, kn, NH * per, per, 1};
        BhMat Qc = {qkv + (size_t)q0 * rs, rs, bTr, d, 1};
        BhMat dO = {dout + (size_t)q0 * os, os, bTo, d, 1};
        BhMat Kh = {K, rs, bTr, d, group}, Vh = {V, rs, bTr, d, group};
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, kn, qn, d, scale, at, Kh, Qc,
                0.0f, S, CUDA_R_32F);
        int rows = B * NH * qn;
        chunk_softmax_kernel<A><<<(rows + 7) / 8, 256, 0, s>>>((A *)w.P, w.S, (float *)lse, B,
                                                               NH, T, q0, qn, kn, 1);
        LAUNCHED(chunk_softmax_kernel);
        /* dV^T (d x kn) += dO^T (d x qn) P */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_T, d, kn, qn, 1.0f, at, dO, P, 1.0f,
                dV, CUDA_R_32F);
        /* dP^T (kn x qn) = V dO^T, into S */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_T, CUBLAS_OP_N, kn, qn, d, 1.0f, at, Vh, dO, 0.0f,
                S, CUDA_R_32F);
        size_t n = (size_t)rows * kn;
        chunk_dscores_kernel<A><<<blocks_for(n, 256), 256, 0, s>>>((A *)w.P, w.S, delta, B, NH,
                                                                   T, q0, qn, kn);
        LAUNCHED(chunk_dscores_kernel);
        /* dQ^T (d x qn) = scale K^T dS^T: complete for this chunk */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_N, d, qn, kn, scale, at, Kh, P, 0.0f,
                BhMat{dqkv + (size_t)q0 * rs, rs, bTr, d, 1}, at);
        /* dK^T (d x kn) += scale Q^T dS */
        bh_gemm(h, s, w.ptrs, B, NH, CUBLAS_OP_N, CUBLAS_OP_T, d, kn, qn, scale, at, Qc, P, 1.0f,
                dK, CUDA_R_32F);
    }
    size_t n = (size_t)B * T * 2 * a.g * d;
    store_dkv_kernel<A><<<blocks_for(n, 256), 256, 0, s>>>(dqkv, w.dkv, B, T, a.h, a.g, d);
    LAUNCHED(store_dkv_kernel);
}

/* ---- entry points ------------------------------------------------------------------------- */

/* A shape the launchers cannot run is a bug in the caller. */
static void check_att_shape(AttShape a)
{
    if (a.B <= 0 || a.T <= 0 || a.d <= 0 || a.g <= 0 || a.h < a.g || a.h % a.g) {
        fprintf(stderr, "%s:%d: attention: no shape B %d T %d with %d query heads over %d kv "
                "heads of %d (kv heads must divide query heads)\n", __FILE__, __LINE__, a.B,
                a.T, a.h, a.g, a.d);
        abort();
    }
}

extern "C" size_t lk_attention_workspace_bytes(int B, int T, int h, int g, int d)
{
    if (flash_attention_supported(h, g, d))
        return 0;
    return chunked_ws_bytes(AttShape{B, T, h, g, d});
}

extern "C" void lk_attention_forward(act16_t *out, float *lse, const act16_t *qkv, int B, int T,
                                     int h, int g, int d, void *ws, void *blas, GkType t,
                                     cudaStream_t_c s)
{
    AttShape a = {B, T, h, g, d};
    check_att_shape(a);
    if (flash_attention_supported(h, g, d)) {
        flash_attention_forward(out, lse, qkv, B, T, h, g, d, t, s);
        return;
    }
    cublasHandle_t hb = (cublasHandle_t)blas;
    CUBLAS_CHECK(cublasSetStream(hb, S(s)));
    GK_DISPATCH(t, chunked_forward<T16>((T16 *)out, lse, (const T16 *)qkv, a, ws, hb, S(s)));
}

extern "C" void lk_attention_backward(act16_t *dqkv, float *delta, const act16_t *dout,
                                      const act16_t *out, const act16_t *qkv, const float *lse,
                                      int B, int T, int h, int g, int d, void *ws, void *blas,
                                      GkType t, cudaStream_t_c s)
{
    AttShape a = {B, T, h, g, d};
    check_att_shape(a);
    int rows = B * h * T;
    GK_DISPATCH(t, attention_delta_kernel<T16><<<(rows + 7) / 8, 256, 0, S(s)>>>(
                       delta, (const T16 *)dout, (const T16 *)out, B, T, h, d));
    LAUNCHED(attention_delta_kernel);
    if (flash_attention_supported(h, g, d)) {
        flash_attention_backward(dqkv, dout, qkv, lse, delta, B, T, h, g, d, t, s);
        return;
    }
    cublasHandle_t hb = (cublasHandle_t)blas;
    CUBLAS_CHECK(cublasSetStream(hb, S(s)));
    GK_DISPATCH(t, chunked_backward<T16>((T16 *)dqkv, delta, (const T16 *)dout,
                                         (const T16 *)qkv, lse, a, ws, hb, S(s)));
}

/* GPT-2's attention: multi-head, NH query and kv heads of C / NH. */

/* The fused path's (B,T,C) fp32 bytes are the size GPT-2's lanes plan with (model/gpt2_arch.c,
 * the footprint) and allocate; its kernels no longer read them. */
extern "C" size_t gk_attention_workspace_bytes(int B, int T, int C, int NH)
{
    if (flash_attention_supported(NH, NH, C / NH))
        return (size_t)B * T * C * sizeof(float);
    return lk_attention_workspace_bytes(B, T, NH, NH, C / NH);
}

extern "C" void gk_attention_forward(act16_t *out, float *lse, const act16_t *qkv, int B, int T,
                                     int C, int NH, void *ws, void *blas, GkType t,
                                     cudaStream_t_c s)
{
    lk_attention_forward(out, lse, qkv, B, T, NH, NH, C / NH, ws, blas, t, s);
}

extern "C" void gk_attention_backward(act16_t *dqkv, float *delta, const act16_t *dout,
                                      const act16_t *out, const act16_t *qkv, const float *lse,
                                      int B, int T, int C, int NH, void *ws, void *blas,
                                      GkType t, cudaStream_t_c s)
{
    lk_attention_backward(dqkv, delta, dout, out, qkv, lse, B, T, NH, NH, C / NH, ws, blas, t,
                          s);
}
