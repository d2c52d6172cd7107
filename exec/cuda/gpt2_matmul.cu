/* gpt2_matmul: the linear layers' GEMMs whose bias add, GELU or GELU backward can run in
 * cuBLASLt's epilogue (gpt2_kernels.h: gk_matmul_forward, gk_matmul_backward_gelu). Where
 * cuBLASLt offers no algorithm for a shape (or the GELU buffer's leading dimension is not a
 * multiple of 8, as it requires), a plain cuBLAS GEMM and the separate kernels of
 * gpt2_pointwise.cu do the same work; tests/test_cuda_gpt2.c checks both against the CPU.
 * FUYOU_CUBLASLT=0 in the environment forces the separate path (to measure what fusing
 * gains, or to step around a cuBLASLt problem). */
#include <cublasLt.h>
#include <cublas_v2.h>

#include <string.h>

#include "cuda_check.h"
#include "kernel_util.cuh"

/* cuBLASLt's choice for one GEMM shape (found false: it has none, take the fallback). Every
 * pointer is 16-byte aligned here, so the shape decides the choice. */
typedef struct LtChoice {
    bool ta, bias, aux, found;
    int m, n, k;
    cudaDataType t;
    cublasLtEpilogue_t epi;
    cublasLtMatmulAlgo_t algo;
} LtChoice;

enum { LT_CHOICES = 64 };

typedef struct GkLt {
    cublasLtHandle_t lt;
    cublasHandle_t blas; /* the fallback's */
    void *ws;
    size_t ws_bytes;
    LtChoice choice[LT_CHOICES]; /* asked once per shape: the heuristic is not free per call */
    int n_choices;
} GkLt;

enum { LT_WORKSPACE_BYTES = 32 << 20 }; /* what cuBLAS recommends for Hopper */

extern "C" void *gk_lt_create(void)
{
    GkLt *k = (GkLt *)calloc(1, sizeof *k);
    if (!k) {
        fprintf(stderr, "%s:%d: out of memory\n", __FILE__, __LINE__);
        exit(1);
    }
    CUBLAS_CHECK(cublasLtCreate(&k->lt));
    CUBLAS_CHECK(cublasCreate(&k->blas));
    k->ws_bytes = LT_WORKSPACE_BYTES;
    CUDA_CHECK(cudaMalloc(&k->ws, k->ws_bytes));
    return k;
}

extern "C" void gk_lt_destroy(void *p)
{
    GkLt *k = (GkLt *)p;
    if (!k)
        return;
    cublasLtDestroy(k->lt);
    cublasDestroy(k->blas);
    cudaFree(k->ws);
    free(k);
}

/* D (m x n, column-major, ld m) = op(A) op(B) with epilogue epi on Lt; false when cuBLASLt has
 * no algorithm for it (nothing was launched then). A is (k x m) transposed when ta, B (k x n). */
static bool lt_gemm(GkLt *k, cudaStream_t s, bool ta, int m, int n, int kk, cudaDataType t,
                    const void *A, const void *B, void *D, cublasLtEpilogue_t epi,
                    const void *bias, const void *aux)
{
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                                sizeof opa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                                sizeof opb));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                sizeof epi));
    if (bias) {
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t,
                                                    sizeof t));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                    sizeof bias));
    }
    if (aux) {
        int64_t aux_ld = m;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                    &aux, sizeof aux));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                    &aux_ld, sizeof aux_ld));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &t, sizeof t));
    }
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, t, ta ? kk : m, ta ? m : kk, ta ? kk : m));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, t, kk, n, kk));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, t, m, n, m));
    LtChoice key = {.ta = ta, .bias = bias != NULL, .aux = aux != NULL, .found = false,
                    .m = m, .n = n, .k = kk, .t = t, .epi = epi, .algo = {}};
    LtChoice *c = NULL;
    for (int i = 0; i < k->n_choices && !c; i++) {
        LtChoice *x = &k->choice[i];
        if (x->ta == ta && x->bias == key.bias && x->aux == key.aux && x->m == m &&
            x->n == n && x->k == kk && x->t == t && x->epi == epi)
            c = x;
    }
    if (!c) {
        cublasLtMatmulPreference_t pref;
        CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &k->ws_bytes, sizeof k->ws_bytes));
        cublasLtMatmulHeuristicResult_t h;
        int found = 0;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(k->lt, op, la, lb, ld, ld, pref, 1,
                                                           &h, &found);
        cublasLtMatmulPreferenceDestroy(pref);
        key.found = st == CUBLAS_STATUS_SUCCESS && found > 0;
        if (key.found)
            key.algo = h.algo;
        /* a full table only means asking again next time */
        c = k->n_choices < LT_CHOICES ? &k->choice[k->n_choices++] : &key;
        *c = key;
    }
    bool ok = c->found;
    if (ok) {
        const float alpha = 1.0f, beta = 0.0f;
        CUBLAS_CHECK(cublasLtMatmul(k->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld,
                                    &c->algo, k->ws, k->ws_bytes, s));
    }
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    return ok;
}

static void plain_gemm(GkLt *k, cudaStream_t s, bool ta, int m, int n, int kk, cudaDataType t,
                       const void *A, const void *B, void *D)
{
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasSetStream(k->blas, s));
    CUBLAS_CHECK(cublasGemmEx(k->blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, m, n, kk,
                              &alpha, A, t, ta ? kk : m, B, t, kk, &beta, D, t, m,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static bool lt_enabled(void)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("FUYOU_CUBLASLT");
        on = !(v && !strcmp(v, "0"));
    }
    return on;
}

static bool aligned16(const void *a, const void *b, const void *c, const void *d, const void *e)
{
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | (uintptr_t)e) % 16) == 0;
}

extern "C" int gk_matmul_forward(act16_t *out, act16_t *pre, const act16_t *inp,
                                 const act16_t *w, const act16_t *bias, int N, int C, int OC,
                                 void *lt, GkType t, cudaStream_t_c s)
{
    GkLt *k = (GkLt *)lt;
    cudaDataType ct = gk_cuda_type(t);
    /* column-major: out^T (OC x N) = w (C x OC)^T inp^T (C x N) */
    bool fused = false;
    if (lt_enabled() && aligned16(out, pre, inp, w, bias) && OC % 8 == 0 && C % 8 == 0) {
        if (pre)
            fused = lt_gemm(k, S(s), true, OC, N, C, ct, w, inp, out,
                            bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX,
                            bias, pre);
        else
            fused = lt_gemm(k, S(s), true, OC, N, C, ct, w, inp, out,
                            bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, bias,
                            NULL);
    }
    if (fused)
        return 1;
    if (pre) {
        plain_gemm(k, S(s), true, OC, N, C, ct, w, inp, pre);
        if (bias) {
            gk_bias_gelu_forward(pre, out, bias, N, OC, t, s);
        } else {
            gk_gelu_forward(out, pre, (size_t)N * OC, t, s);
        }
    } else {
        plain_gemm(k, S(s), true, OC, N, C, ct, w, inp, out);
        if (bias)
            gk_add_bias(out, bias, N, OC, t, s);
    }
    return 0;
}

extern "C" int gk_matmul_backward_gelu(act16_t *dinp, const act16_t *dout, const act16_t *w,
                                       const act16_t *pre, int N, int C, int OC, void *lt,
                                       GkType t, cudaStream_t_c s)
{
    GkLt *k = (GkLt *)lt;
    cudaDataType ct = gk_cuda_type(t);
    /* column-major: dinp^T (C x N) = w (C x OC) dout^T (OC x N), times gelu'(pre^T) */
    if (lt_enabled() && aligned16(dinp, dout, w, pre, NULL) && OC % 8 == 0 && C % 8 == 0 &&
        lt_gemm(k, S(s), false, C, N, OC, ct, w, dout, dinp, CUBLASLT_EPILOGUE_DGELU, NULL, pre))
        return 1;
    plain_gemm(k, S(s), false, C, N, OC, ct, w, dout, dinp);
    gk_gelu_backward(dinp, pre, dinp, (size_t)N * C, t, s);
    return 0;
}
