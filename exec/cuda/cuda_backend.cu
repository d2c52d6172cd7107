/* gpt2_cuda: the CUDA training backend; see gpt2_cuda.h. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "kernel_util.cuh"

extern "C" {
#include "gpt2_cuda.h"
#include "gpt2_kernels.h"
#include "gpt2_layout.h"
}

typedef act16_t a16; /* a 16-bit float of the backend's GkType */

enum {
    A_ENCODED, A_LN1, A_LN1_MEAN, A_LN1_RSTD, A_QKV, A_ATTY, A_LSE, A_ATTPROJ, A_RESIDUAL2,
    A_LN2, A_LN2_MEAN, A_LN2_RSTD, A_FCH, A_FCH_GELU, A_FCPROJ, A_RESIDUAL3, A_LNF,
    A_LNF_MEAN, A_LNF_RSTD, A_LOGITS, A_LOSSES,
    /* backward scratch */
    G_DRESIDUAL, G_DRES_BF, G_DC, G_DLN, G_DQKV, G_DF2, G_DELTA, A_COUNT
};

/* Element sizes: fp32 statistics and fp32 residual gradient, 16-bit otherwise. */
static size_t elem(int a)
{
    switch (a) {
    case A_LN1_MEAN: case A_LN1_RSTD: case A_LN2_MEAN: case A_LN2_RSTD: case A_LSE:
    case A_LNF_MEAN: case A_LNF_RSTD: case A_LOSSES: case G_DRESIDUAL: case G_DLN:
    case G_DELTA:
        return 4;
    default:
        return 2;
    }
}

struct Gpt2Cuda {
    Backend base;
    cublasHandle_t blas;
    void *lt;                       /* cuBLASLt: the GEMMs with fused epilogues */
    cudaStream_t compute, h2d, d2h; /* one stream per role, as the pipeline will use them */
    cudaEvent_t computed, uploaded; /* compute's work so far done; the batch on the device */
    float *master, *grads, *m, *v; /* (P) fp32 */
    GkType t;                      /* the 16-bit format of params and activations */
    a16 *params;                   /* (P) 16-bit, what the kernels read */
    void *act_mem;
    char *act[A_COUNT];
    size_t count[A_COUNT];         /* elements, all layers */
    void *att_ws;                  /* attention workspace (gpt2_kernels.h) */
    int Vp;                        /* vocabulary padded to 64: aligned LM-head GEMMs */
    a16 *lm_pad;                  /* (Vp, C) the LM head's weights, zero rows past V */
    float *dlm_pad;                /* (Vp, C) its gradient before it joins the flat one */
    int *inputs, *targets;         /* (B,T) on the device */
    int n_targets;                 /* of the step's targets, those the loss counts */
    double *sq_scratch;            /* one double: gk_sum_sq's accumulator */
    float *losses_host;
};

static void sizes(const ModelConfig *c, int B, int T, size_t n[A_COUNT])
{
    size_t L = (size_t)c->n_layer, N = (size_t)B * T, C = (size_t)c->d_model;
    size_t F = (size_t)c->d_ff, V = (size_t)model_padded_vocab(c), NH = (size_t)c->n_head;
    n[A_ENCODED] = n[A_LNF] = N * C;
    n[A_LN1] = n[A_ATTY] = n[A_ATTPROJ] = n[A_RESIDUAL2] = n[A_LN2] = n[A_FCPROJ] =
        n[A_RESIDUAL3] = L * N * C;
    n[A_LN1_MEAN] = n[A_LN1_RSTD] = n[A_LN2_MEAN] = n[A_LN2_RSTD] = L * N;
    n[A_QKV] = L * N * 3 * C;
    n[A_LSE] = L * B * NH * T;
    n[A_FCH] = n[A_FCH_GELU] = L * N * F;
    n[A_LNF_MEAN] = n[A_LNF_RSTD] = n[A_LOSSES] = N;
    n[A_LOGITS] = N * V;
    n[G_DRESIDUAL] = n[G_DRES_BF] = n[G_DC] = n[G_DLN] = N * C;
    n[G_DQKV] = N * 3 * C;
    n[G_DF2] = N * F;
    n[G_DELTA] = B * NH * T;
}

template <typename T> static T *A(Gpt2Cuda *g, int which, int l = 0)
{
    size_t per = g->count[which] / ((which >= A_LN1 && which <= A_RESIDUAL3)
                                        ? (size_t)g->base.cfg.n_layer : 1);
    return (T *)(g->act[which] + (size_t)l * per * elem(which));
}

static void cuda_destroy(Backend *b)
{
    Gpt2Cuda *g = (Gpt2Cuda *)b;
    if (!g)
        return;
    gk_free(g->master), gk_free(g->grads), gk_free(g->m), gk_free(g->v), gk_free(g->params);
    gk_free(g->act_mem), gk_free(g->inputs), gk_free(g->targets), gk_free(g->att_ws);
    gk_free(g->lm_pad), gk_free(g->dlm_pad), gk_free(g->sq_scratch);
    if (g->blas)
        cublasDestroy(g->blas);
    gk_lt_destroy(g->lt);
    if (g->compute)
        cudaStreamDestroy(g->compute);
    if (g->h2d)
        cudaStreamDestroy(g->h2d);
    if (g->d2h)
        cudaStreamDestroy(g->d2h);
    if (g->computed)
        cudaEventDestroy(g->computed);
    if (g->uploaded)
        cudaEventDestroy(g->uploaded);
    free(g->losses_host);
    free(g);
}

static int cuda_create(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    (void)wp;
    *out = NULL;
    int rc = backend_check_shape(c, B, T, e);
    if (!rc)
        rc = backend_check_gpt2(c, "the cuda backend", e);
    if (rc)
        return rc;
    if (c->dtype != DTYPE_BF16 && c->dtype != DTYPE_FP16)
        return err_set(e, -EINVAL, "the cuda backend keeps weights and activations in bf16 or "
                       "fp16, not %s: use --dtype bf16 or fp16 (or --backend cpu, the fp32 "
                       "reference)", dtype_name(c->dtype));
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
        return err_set(e, -ENODEV, "no CUDA device: use --backend cpu");
    Gpt2Cuda *g = (Gpt2Cuda *)calloc(1, sizeof *g);
    if (!g)
        return err_set(e, -ENOMEM, "out of memory");
    size_t P = (size_t)model_param_count(c);
    g->base.ops = &backend_cuda;
    g->base.cfg = *c;
    g->base.B = B;
    g->base.T = T;
    g->base.n_params = P;
    g->base.loss_scale = 1.0f;
    g->t = c->dtype == DTYPE_FP16 ? GK_FP16 : GK_BF16;
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->h2d, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->d2h, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&g->computed, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g->uploaded, cudaEventDisableTiming));
    CUBLAS_CHECK(cublasCreate(&g->blas));
    CUBLAS_CHECK(cublasSetStream(g->blas, g->compute));
    g->lt = gk_lt_create();
    sizes(c, B, T, g->count);
    size_t total = 0;
    for (int a = 0; a < A_COUNT; a++)
        total += (g->count[a] * elem(a) + 255) / 256 * 256;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    size_t ws = gk_attention_workspace_bytes(B, T, c->d_model, c->n_head);
    g->Vp = (int)model_padded_vocab(c);
    size_t pad = (size_t)g->Vp * c->d_model * (2 + 4);
    size_t need = total + ws + pad + P * (4 * 4 + 2);
    if (need > free_b) {
        free(g);
        return err_set(e, -ENOMEM, "%s at batch %d x %d needs %.1f GiB on the GPU, %.1f GiB "
                       "are free; lower --batch or --seq", c->name, B, T, need / 1073741824.0,
                       free_b / 1073741824.0);
    }
    g->master = (float *)gk_alloc(P * 4);
    g->grads = (float *)gk_alloc(P * 4);
    g->m = (float *)gk_alloc(P * 4);
    g->v = (float *)gk_alloc(P * 4);
    g->params = (a16 *)gk_alloc(P * 2);
    g->act_mem = gk_alloc(total);
    g->att_ws = gk_alloc(ws);
    g->lm_pad = (a16 *)gk_alloc((size_t)g->Vp * c->d_model * 2);
    g->dlm_pad = (float *)gk_alloc((size_t)g->Vp * c->d_model * 4);
    gk_memset(g->lm_pad, 0, (size_t)g->Vp * c->d_model * 2);
    char *p = (char *)g->act_mem;
    for (int a = 0; a < A_COUNT; a++) {
        g->act[a] = p;
        p += (g->count[a] * elem(a) + 255) / 256 * 256;
    }
    g->inputs = (int *)gk_alloc((size_t)B * T * sizeof(int));
    g->targets = (int *)gk_alloc((size_t)B * T * sizeof(int));
    g->sq_scratch = (double *)gk_alloc(sizeof(double));
    g->losses_host = (float *)malloc((size_t)B * T * sizeof(float));
    gk_memset(g->master, 0, P * 4), gk_memset(g->m, 0, P * 4), gk_memset(g->v, 0, P * 4);
    gk_memset(g->params, 0, P * 2);
    *out = &g->base;
    return 0;
}

static void refresh_lm_pad(Gpt2Cuda *g);

static int cuda_read_state(Backend *b, float *params, float *m, float *v, Err *e)
{
    (void)e;
    Gpt2Cuda *g = (Gpt2Cuda *)b;
    size_t n = b->n_params * 4;
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    if (params)
        gk_download(params, g->master, n);
    if (m)
        gk_download(m, g->m, n);
    if (v)
        gk_download(v, g->v, n);
    return 0;
}

static int cuda_write_state(Backend *b, const float *params, const float *m, const float *v,
                            Err *e)
{
    (void)e;
    Gpt2Cuda *g = (Gpt2Cuda *)b;
    size_t n = b->n_params * 4;
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    if (params) {
        gk_upload(g->master, params, n);
        gk_from_f32((act16_t *)g->params, g->master, b->n_params, g->t, g->compute);
        refresh_lm_pad(g);
    }
    if (m)
        gk_upload(g->m, m, n);
    if (v)
        gk_upload(g->v, v, n);
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    return 0;
}

static int cuda_read_grads(Backend *b, float *grads, Err *e)
{
    (void)e;
    Gpt2Cuda *g = (Gpt2Cuda *)b;
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    gk_download(grads, g->grads, b->n_params * 4);
    return 0;
}

static int cuda_write_grads(Backend *b, const float *grads, Err *e)
{
    (void)e;
    Gpt2Cuda *g = (Gpt2Cuda *)b;
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    gk_upload(g->grads, grads, b->n_params * 4);
    return 0;
}

/* C (m x n, column-major) = op(A) (m x k) op(B) (k x n) + beta C, 16-bit inputs, fp32
 * compute. */
static void gemm(Gpt2Cuda *g, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                 const a16 *a, int lda, const a16 *b, int ldb, float beta, void *c,
                 cudaDataType ctype, int ldc)
{
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(g->blas, ta, tb, m, n, k, &alpha, a, gk_cuda_type(g->t), lda, b,
                              gk_cuda_type(g->t), ldb, &beta, c, ctype, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

/* out (N, OC) = inp (N, C) @ w (OC, C)^T + bias, and with pre: pre = that, out = gelu(pre);
 * the bias and GELU in cuBLASLt's epilogue (gk_matmul_forward). */
static void matmul_forward(Gpt2Cuda *g, a16 *out, a16 *pre, const a16 *inp, const a16 *w,
                           const a16 *bias, int N, int C, int OC)
{
    gk_matmul_forward(out, pre, inp, w, bias, N, C, OC, g->lt, g->t, g->compute);
}

/* dw (OC, C) += dout^T @ inp; dbias += colsum(dout) (dbias may be NULL). */
static void matmul_backward_weights(Gpt2Cuda *g, float *dw, float *dbias, const a16 *dout,
                                    const a16 *inp, int N, int C, int OC)
{
    gemm(g, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, 1.0f, dw, CUDA_R_32F, C);
    if (dbias)
        gk_bias_backward(dbias, (const act16_t *)dout, N, OC, g->t, g->compute);
}

/* dinp (N, C) = dout (N, OC) @ w, then the weights' gradients. dinp is 16-bit when it feeds
 * another GEMM or attention, fp32 when it feeds a layernorm's backward (whose weight gradient
 * sums it over every token: one rounding fewer on the longest path). */
static void matmul_backward(Gpt2Cuda *g, void *dinp, cudaDataType dinp_type, float *dw,
                            float *dbias, const a16 *dout, const a16 *inp, const a16 *w, int N,
                            int C, int OC)
{
    gemm(g, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, w, C, dout, OC, 0.0f, dinp, dinp_type, C);
    matmul_backward_weights(g, dw, dbias, dout, inp, N, C, OC);
}

#define BF(p) ((act16_t *)(p))
#define CBF(p) ((const act16_t *)(p))

/* The tensor at view v of the master weights, in another buffer of the same layout (the 16-bit
 * weights, the fp32 gradients). */
template <typename T> static T *at(const Gpt2Cuda *g, T *base, const float *v)
{
    return base + (v - g->master);
}

/* The padded LM head's first V rows follow the weights (after an upload or an update). */
static void refresh_lm_pad(Gpt2Cuda *g)
{
    const ModelConfig *c = &g->base.cfg;
    Gpt2EdgeView ev;
    gpt2_view_edges(c, g->master, &ev);
    gk_copy16((act16_t *)g->lm_pad, (const act16_t *)at(g, g->params, ev.lm_head),
                 (size_t)c->vocab * c->d_model, g->compute);
}

static void forward(Gpt2Cuda *g, bool backward)
{
    const ModelConfig *c = &g->base.cfg;
    int B = g->base.B, T = g->base.T, C = c->d_model, F = c->d_ff, NH = c->n_head;
    int L = c->n_layer, V = c->vocab, N = B * T;
    cudaStream_t s = g->compute;
    Gpt2EdgeView ev;
    gpt2_view_edges(c, g->master, &ev);
    gk_encoder_forward(BF(A<a16>(g, A_ENCODED)), g->inputs, CBF(at(g, g->params, ev.wte)),
                       CBF(at(g, g->params, ev.wpe)), B, T, C, g->t, s);
    a16 *residual = A<a16>(g, A_ENCODED);
    for (int l = 0; l < L; l++) {
        Gpt2BlockView w;
        gpt2_view_block(c, g->master, l, &w);
        a16 *P = g->params;
        a16 *ln1 = A<a16>(g, A_LN1, l), *qkv = A<a16>(g, A_QKV, l);
        a16 *atty = A<a16>(g, A_ATTY, l), *attproj = A<a16>(g, A_ATTPROJ, l);
        a16 *res2 = A<a16>(g, A_RESIDUAL2, l), *ln2 = A<a16>(g, A_LN2, l);
        a16 *fch = A<a16>(g, A_FCH, l), *fchg = A<a16>(g, A_FCH_GELU, l);
        a16 *fcproj = A<a16>(g, A_FCPROJ, l), *res3 = A<a16>(g, A_RESIDUAL3, l);
        gk_layernorm_forward(BF(ln1), A<float>(g, A_LN1_MEAN, l), A<float>(g, A_LN1_RSTD, l),
                             CBF(residual), CBF(at(g, P, w.ln1w)), CBF(at(g, P, w.ln1b)), N, C,
                             g->t, s);
        matmul_forward(g, qkv, NULL, ln1, at(g, P, w.qkvw), at(g, P, w.qkvb), N, C, 3 * C);
        gk_attention_forward(BF(atty), A<float>(g, A_LSE, l), CBF(qkv), B, T, C, NH, g->att_ws,
                             g->blas, g->t, s);
        matmul_forward(g, attproj, NULL, atty, at(g, P, w.projw), at(g, P, w.projb), N, C, C);
        gk_residual_forward(BF(res2), CBF(residual), CBF(attproj), (size_t)N * C, g->t, s);
        gk_layernorm_forward(BF(ln2), A<float>(g, A_LN2_MEAN, l), A<float>(g, A_LN2_RSTD, l),
                             CBF(res2), CBF(at(g, P, w.ln2w)), CBF(at(g, P, w.ln2b)), N, C,
                             g->t, s);
        matmul_forward(g, fchg, fch, ln2, at(g, P, w.fcw), at(g, P, w.fcb), N, C, F);
        matmul_forward(g, fcproj, NULL, fchg, at(g, P, w.fcprojw), at(g, P, w.fcprojb), N, F,
                       C);
        gk_residual_forward(BF(res3), CBF(res2), CBF(fcproj), (size_t)N * C, g->t, s);
        residual = res3;
    }
    gk_layernorm_forward(BF(A<a16>(g, A_LNF)), A<float>(g, A_LNF_MEAN),
                         A<float>(g, A_LNF_RSTD), CBF(residual),
                         CBF(at(g, g->params, ev.lnfw)), CBF(at(g, g->params, ev.lnfb)), N, C, g->t,
                         s);
    /* the LM head (no bias) on cuBLAS directly */
    gemm(g, CUBLAS_OP_T, CUBLAS_OP_N, g->Vp, N, C, g->lm_pad, C, A<a16>(g, A_LNF), C, 0.0f,
         A<a16>(g, A_LOGITS), gk_cuda_type(g->t), g->Vp);
    /* the kernel divides by N; the mean is over the counted targets (backend.h) */
    float scale = g->n_targets ? (float)((double)g->base.loss_scale * N / g->n_targets) : 0.0f;
    gk_softmax_crossentropy(A<float>(g, A_LOSSES), BF(A<a16>(g, A_LOGITS)), g->targets, N, V,
                            g->Vp, backward, scale, g->t, s);
}

static void backward(Gpt2Cuda *g)
{
    const ModelConfig *c = &g->base.cfg;
    int B = g->base.B, T = g->base.T, C = c->d_model, F = c->d_ff, NH = c->n_head;
    int L = c->n_layer, V = c->vocab, N = B * T;
    cudaStream_t s = g->compute;
    size_t NC = (size_t)N * C;
    CUDA_CHECK(cudaMemsetAsync(g->grads, 0, g->base.n_params * 4, s));
    Gpt2EdgeView ev;
    gpt2_view_edges(c, g->master, &ev);
    float *dres = A<float>(g, G_DRESIDUAL);
    a16 *dres_bf = A<a16>(g, G_DRES_BF), *dc = A<a16>(g, G_DC), *dqkv = A<a16>(g, G_DQKV);
    a16 *df2 = A<a16>(g, G_DF2);
    /* logits hold d loss / d logits now */
    float *dln = A<float>(g, G_DLN);
    CUDA_CHECK(cudaMemsetAsync(g->dlm_pad, 0, (size_t)g->Vp * C * 4, s));
    matmul_backward(g, dln, CUDA_R_32F, g->dlm_pad, NULL, A<a16>(g, A_LOGITS),
                    A<a16>(g, A_LNF), g->lm_pad, N, C, g->Vp);
    gk_add_f32(at(g, g->grads, ev.lm_head), g->dlm_pad, (size_t)V * C, s);
    CUDA_CHECK(cudaMemsetAsync(dres, 0, NC * 4, s));
    a16 *last = L > 0 ? A<a16>(g, A_RESIDUAL3, L - 1) : A<a16>(g, A_ENCODED);
    gk_layernorm_backward(dres, at(g, g->grads, ev.lnfw), at(g, g->grads, ev.lnfb), dln,
                          CBF(last), CBF(at(g, g->params, ev.lnfw)), A<float>(g, A_LNF_MEAN),
                          A<float>(g, A_LNF_RSTD), N, C, g->t, s);
    for (int l = L - 1; l >= 0; l--) {
        Gpt2BlockView w;
        gpt2_view_block(c, g->master, l, &w);
        a16 *P = g->params;
        float *G = g->grads;
        a16 *res_in = l == 0 ? A<a16>(g, A_ENCODED) : A<a16>(g, A_RESIDUAL3, l - 1);
        /* through the MLP: the residual's gradient is fcproj's output gradient */
        gk_from_f32(BF(dres_bf), dres, NC, g->t, s);
        /* fc's output gradient: through fcproj and the GELU in one GEMM */
        gk_matmul_backward_gelu(BF(df2), CBF(dres_bf), CBF(at(g, P, w.fcprojw)),
                                CBF(A<a16>(g, A_FCH, l)), N, F, C, g->lt, g->t, s);
        matmul_backward_weights(g, at(g, G, w.fcprojw), at(g, G, w.fcprojb), dres_bf,
                                A<a16>(g, A_FCH_GELU, l), N, F, C);
        matmul_backward(g, dln, CUDA_R_32F, at(g, G, w.fcw), at(g, G, w.fcb), df2,
                        A<a16>(g, A_LN2, l), at(g, P, w.fcw), N, C, F);
        gk_layernorm_backward(dres, at(g, G, w.ln2w), at(g, G, w.ln2b), dln,
                              CBF(A<a16>(g, A_RESIDUAL2, l)), CBF(at(g, P, w.ln2w)),
                              A<float>(g, A_LN2_MEAN, l), A<float>(g, A_LN2_RSTD, l), N, C,
                              g->t, s);
        /* through attention */
        gk_from_f32(BF(dres_bf), dres, NC, g->t, s);
        matmul_backward(g, dc, gk_cuda_type(g->t), at(g, G, w.projw), at(g, G, w.projb),
                        dres_bf, A<a16>(g, A_ATTY, l), at(g, P, w.projw), N, C, C);
        gk_attention_backward(BF(dqkv), A<float>(g, G_DELTA), CBF(dc), CBF(A<a16>(g, A_ATTY, l)),
                              CBF(A<a16>(g, A_QKV, l)), A<float>(g, A_LSE, l), B, T, C, NH,
                              g->att_ws, g->blas, g->t, s);
        matmul_backward(g, dln, CUDA_R_32F, at(g, G, w.qkvw), at(g, G, w.qkvb), dqkv,
                        A<a16>(g, A_LN1, l), at(g, P, w.qkvw), N, C, 3 * C);
        gk_layernorm_backward(dres, at(g, G, w.ln1w), at(g, G, w.ln1b), dln, CBF(res_in),
                              CBF(at(g, P, w.ln1w)), A<float>(g, A_LN1_MEAN, l),
                              A<float>(g, A_LN1_RSTD, l), N, C, g->t, s);
    }
    gk_encoder_backward(at(g, g->grads, ev.wte), at(g, g->grads, ev.wpe), dres, g->inputs, B, T,
                        C, s);
}

static int cuda_step(Backend *b, const int *inputs, const int *targets, bool do_backward,
                     float *loss, Err *e)
{
    Gpt2Cuda *g = (Gpt2Cuda *)b;
    const ModelConfig *c = &b->cfg;
    int N = b->B * b->T;
    int rc = backend_check_tokens(c, N, inputs, targets, e);
    if (rc)
        return rc;
    if (do_backward && !targets)
        return err_set(e, -EINVAL, "backward needs targets");
    g->n_targets = targets ? backend_count_targets(N, targets) : N;
    /* The batch goes up on the h2d stream, the losses come down on d2h; compute waits for the
     * upload, the download for compute. The previous step's work on these buffers is over:
     * every step ends by waiting for its download, which waits for all of compute. */
    CUDA_CHECK(cudaMemcpyAsync(g->inputs, inputs, (size_t)N * sizeof(int),
                               cudaMemcpyHostToDevice, g->h2d));
    if (targets)
        CUDA_CHECK(cudaMemcpyAsync(g->targets, targets, (size_t)N * sizeof(int),
                                   cudaMemcpyHostToDevice, g->h2d));
    else
        CUDA_CHECK(cudaMemsetAsync(g->targets, 0, (size_t)N * sizeof(int), g->h2d));
    CUDA_CHECK(cudaEventRecord(g->uploaded, g->h2d));
    CUDA_CHECK(cudaStreamWaitEvent(g->compute, g->uploaded, 0));
    forward(g, do_backward);
    if (do_backward)
        backward(g);
    CUDA_CHECK(cudaEventRecord(g->computed, g->compute));
    CUDA_CHECK(cudaStreamWaitEvent(g->d2h, g->computed, 0));
    CUDA_CHECK(cudaMemcpyAsync(g->losses_host, A<float>(g, A_LOSSES), (size_t)N * 4,
                               cudaMemcpyDeviceToHost, g->d2h));
    CUDA_CHECK(cudaStreamSynchronize(g->d2h));
    if (targets && loss) {
        double sum = 0;
        for (int i = 0; i < N; i++)
            sum += g->losses_host[i];
        *loss = g->n_targets ? (float)(sum / g->n_targets) : 0.0f;
    }
    return 0;
}

static double cuda_grad_sq(Backend *b, size_t begin, size_t end)
{
    Gpt2Cuda *g = (Gpt2Cuda *)b;
    return gk_sum_sq(g->grads + begin, end - begin, g->sq_scratch, g->compute);
}

static int cuda_update(Backend *b, const AdamStep *s, size_t begin, size_t end, Err *e)
{
    (void)e;
    Gpt2Cuda *g = (Gpt2Cuda *)b;
    gk_adamw(g->master + begin, g->m + begin, g->v + begin, g->grads + begin,
             (act16_t *)(g->params + begin), end - begin, s->beta1, s->one_minus_beta1, s->beta2,
             s->one_minus_beta2, s->eps, s->decay, s->neg_step_size, s->inv_sqrt_bc2,
             s->grad_scale, g->t, g->compute);
    Gpt2EdgeView ev;
    gpt2_view_edges(&b->cfg, g->master, &ev);
    size_t lm = (size_t)(ev.lm_head - g->master);
    size_t lm_end = lm + (size_t)b->cfg.vocab * b->cfg.d_model;
    if (begin < lm_end && end > lm)
        refresh_lm_pad(g);
    return 0;
}

extern "C" const BackendOps backend_cuda = {
    "cuda", cuda_create, cuda_destroy, cuda_read_state, cuda_write_state, cuda_read_grads,
    cuda_write_grads, cuda_step, cuda_grad_sq, cuda_update,
};
