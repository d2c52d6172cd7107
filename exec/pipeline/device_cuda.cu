/* device_cuda: the pipeline's compute on the GPU, with the CUDA backend's kernels
 * (gpt2_kernels.h: bf16 activations and weights, fp32 statistics, cuBLAS / cuBLASLt GEMMs with
 * bias and GELU epilogues, fused flash attention). Each schedule task is one op of the layer
 * graph; B.fc2 runs the GELU's backward in its GEMM's epilogue, so B.gelu has nothing left to
 * do. A block's weight matrices get their gradients straight from their GEMMs, in bf16 in the
 * gradient buffer (each is one GEMM's output per micro-batch; micro-batches are summed on the
 * host); its biases and layernorm gains, summed over tokens by kernels, accumulate in a small
 * fp32 buffer that the block's last backward task (B.ln1) converts. The edges' gradients
 * accumulate in fp32 (the head's chunks and the embedding share the tied matrix) and leave in
 * bf16 from B.embed. The residual stream's
 * gradient is one fp32 buffer the blocks update in place, as in the in-memory backend. The LM
 * head runs in chunks of graph_head_chunk tokens, forward and backward fused per chunk in
 * F.head.lm_head (graph.h), so the logits buffer holds one chunk's; B.head.lm_head has nothing
 * left to do. Each lane thread has its own stream: compute, and one per copy direction; a call
 * returns when its work on that stream is done, timed by CUDA events around it (the trace's GPU
 * times). A failure is returned, not fatal, so the dispatcher drains the other lanes and the
 * user gets one line naming the task: one found when a task's work completes (a fault while
 * kernels ran, a copy that failed), and a launch or cuBLAS call the runtime refuses (the
 * launchers' checks record it for this thread instead of exiting, cuda_check.h). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cuda_wait.h"

extern "C" {
#include "backend.h"
#include "clock.h"
#include "device.h"
#include "gpt2_arch.h"
#include "gpt2_kernels.h"
#include "gpt2_layout.h"
}

typedef act16_t a16;

enum { STREAM_COMPUTE, STREAM_UP, STREAM_DOWN };

/* A block's parameters that kernels sum over tokens (biases, layernorm gains and biases), as
 * runs of the block layout, in layout order; the small fp32 buffer holds them back to back. */
enum { SMALL_RUNS = 6 };
typedef struct SmallRun {
    size_t at, n; /* offset in the block layout, elements */
} SmallRun;

static size_t small_runs(const ModelConfig *c, SmallRun r[SMALL_RUNS])
{
    Gpt2BlockOffsets o;
    gpt2_block_offsets(c, &o);
    size_t C = (size_t)c->d_model, F = (size_t)c->d_ff;
    const SmallRun all[SMALL_RUNS] = {{o.ln1w, 2 * C}, {o.qkvb, 3 * C}, {o.projb, C},
                                      {o.ln2w, 2 * C}, {o.fcb, F}, {o.fcprojb, C}};
    size_t n = 0;
    for (int i = 0; i < SMALL_RUNS; i++)
        n += (r[i] = all[i]).n;
    return n;
}

struct Device {
    ModelConfig cfg;
    int B, T, C, F, NH, V, Vp, N;
    GkType t;
    cudaStream_t compute, up, down;
    cudaEvent_t began[3], ended[3]; /* per stream, in STREAM_* order: times each call's work */
    CopyPace pace[3];               /* the copy streams' (cuda_wait.h) */
    cublasHandle_t blas;
    void *lt;
    Gpt2BlockOffsets bo;
    Gpt2EdgeOffsets eo;
    /* own memory */
    void *att_ws;
    a16 *logits;                /* (chunk, Vp): a chunk's logits, then their gradient; rows
                                   padded to Vp so that they stay 16-byte aligned */
    a16 *lnf, *dres_bf, *dc, *dqkv, *df2;
    float *lnf_mean, *lnf_rstd, *losses, *dres, *dln, *delta, *edge_acc;
    float *small;               /* a block's bias and layernorm gradients, runs[] back to back */
    SmallRun runs[SMALL_RUNS];  /* where they sit in the block layout (small_runs) */
    size_t n_small;
    int *tokens;                /* inputs then targets, (B,T) each */
    float *losses_host;         /* pinned */
    bool loss_pending;
    int n_targets;              /* the micro-batch's targets the loss counts (backend.h) */
    float loss;
};

static size_t rnd(size_t n)
{
    return (n + 255) / 256 * 256;
}

/* The block's tensors in bf16 with their statistics: the sizes the simulator predicts with
 * (footprint_cuda_lane), from the family's one table. */
static void cuda_tensor_bytes(const ModelConfig *c, int B, int T,
                              size_t bytes[ARCH_MAX_TENSORS])
{
    const BlockArch *a = model_arch(c);
    int64_t b[ARCH_MAX_TENSORS];
    a->lane_tensor_bytes(c, B, T, 2, b);
    for (int x = 0; x < arch_tensors(a); x++)
        bytes[x] = (size_t)b[x];
}

/* What the device allocates for itself: its sizes in one table. */
enum { O_WS, O_LOGITS, O_LNF, O_DRESBF, O_DC, O_DQKV, O_DF2, O_LNFSTAT, O_LOSSES,
       O_DRES, O_DLN, O_DELTA, O_SMALL, O_EDGEACC, O_TOKENS, O_COUNT };

static void own_sizes(const ModelConfig *c, int B, int T, size_t s[O_COUNT])
{
    size_t N = (size_t)B * T, C = (size_t)c->d_model, F = (size_t)c->d_ff;
    size_t Vp = (size_t)model_padded_vocab(c);
    s[O_WS] = gk_attention_workspace_bytes(B, T, c->d_model, c->n_head);
    s[O_LOGITS] = (size_t)graph_head_chunk((int64_t)N) * Vp * 2;
    s[O_LNF] = s[O_DRESBF] = s[O_DC] = N * C * 2;
    s[O_DQKV] = 3 * N * C * 2;
    s[O_DF2] = N * F * 2;
    s[O_LNFSTAT] = 2 * N * 4;
    s[O_LOSSES] = N * 4;
    s[O_DRES] = s[O_DLN] = N * C * 4;
    s[O_DELTA] = (size_t)B * c->n_head * T * 4;
    SmallRun runs[SMALL_RUNS];
    s[O_SMALL] = small_runs(c, runs) * 4;
    s[O_EDGEACC] = (size_t)model_embed_params(c) * 4;
    s[O_TOKENS] = 2 * N * sizeof(int);
}

static size_t cuda_own_bytes(const ModelConfig *c, int B, int T)
{
    size_t s[O_COUNT], n = 0;
    own_sizes(c, B, T, s);
    for (int i = 0; i < O_COUNT; i++)
        n += rnd(s[i]);
    return n;
}

static void cuda_destroy(Device *d)
{
    if (!d)
        return;
    void *own[] = {d->att_ws, d->logits, d->lnf, d->dres_bf, d->dc, d->dqkv, d->df2,
                   d->lnf_mean, d->losses, d->dres, d->dln, d->delta, d->small, d->edge_acc,
                   d->tokens};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (own[i])
            cudaFree(own[i]);
    if (d->losses_host)
        cudaFreeHost(d->losses_host);
    if (d->blas)
        cublasDestroy(d->blas);
    gk_lt_destroy(d->lt);
    for (int i = 0; i < 3; i++) {
        if (d->began[i])
            cudaEventDestroy(d->began[i]);
        if (d->ended[i])
            cudaEventDestroy(d->ended[i]);
    }
    cudaStream_t st[] = {d->compute, d->up, d->down};
    for (int i = 0; i < 3; i++)
        if (st[i])
            cudaStreamDestroy(st[i]);
    free(d);
}

static int cuda_create(Device **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    (void)wp;
    *out = NULL;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
        return err_set(e, -ENODEV, "no CUDA device: use --backend cpu");
    if (c->dtype != DTYPE_BF16)
        return err_set(e, -EINVAL, "the out-of-core pipeline on the GPU trains in bf16, not %s",
                       dtype_name(c->dtype));
    Device *d = (Device *)calloc(1, sizeof *d);
    if (!d)
        return err_set(e, -ENOMEM, "out of memory");
    d->cfg = *c;
    d->B = B, d->T = T, d->C = c->d_model, d->F = c->d_ff, d->NH = c->n_head;
    d->V = c->vocab, d->Vp = (int)model_padded_vocab(c), d->N = B * T;
    d->t = GK_BF16;
    gpt2_block_offsets(c, &d->bo);
    gpt2_edge_offsets(c, &d->eo);
    d->n_small = small_runs(c, d->runs);
    CUDA_CHECK(cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&d->up, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&d->down, cudaStreamNonBlocking));
    for (int i = 0; i < 3; i++) {
        CUDA_CHECK(cudaEventCreate(&d->began[i]));
        CUDA_CHECK(cudaEventCreate(&d->ended[i]));
    }
    CUBLAS_CHECK(cublasCreate(&d->blas));
    CUBLAS_CHECK(cublasSetStream(d->blas, d->compute));
    d->lt = gk_lt_create();
    size_t s[O_COUNT];
    own_sizes(c, B, T, s);
    void **dst[O_COUNT] = {
        &d->att_ws, (void **)&d->logits, (void **)&d->lnf,
        (void **)&d->dres_bf, (void **)&d->dc, (void **)&d->dqkv, (void **)&d->df2,
        (void **)&d->lnf_mean, (void **)&d->losses, (void **)&d->dres, (void **)&d->dln,
        (void **)&d->delta, (void **)&d->small, (void **)&d->edge_acc,
        (void **)&d->tokens};
    for (int i = 0; i < O_COUNT; i++)
        if (cudaMalloc(dst[i], rnd(s[i])) != cudaSuccess) {
            cuda_destroy(d);
            return err_set(e, -ENOMEM, "the GPU has no room for the compute lane's %zu bytes "
                           "of buffers; lower --batch or --seq", cuda_own_bytes(c, B, T));
        }
    d->lnf_rstd = d->lnf_mean + d->N;
    CUDA_CHECK(cudaMallocHost((void **)&d->losses_host, (size_t)d->N * 4));
    *out = d;
    return 0;
}

static void *cuda_alloc(Device *d, size_t bytes, Err *e)
{
    (void)d;
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) {
        cudaGetLastError();
        err_set(e, -ENOMEM, "the GPU refused %zu bytes of buffers", bytes);
        return NULL;
    }
    return p;
}

static void cuda_release(Device *d, void *p)
{
    (void)d;
    cudaFree(p);
}

#define W(base, field) ((const a16 *)(base) + d->bo.field)

/* Where the small buffer keeps the gradient of the block parameter at layout offset `at`. */
static float *small_at(const Device *d, size_t at)
{
    const SmallRun *r = d->runs;
    size_t base = 0;
    for (int i = 0; i < SMALL_RUNS; i++) {
        if (at >= r[i].at && at < r[i].at + r[i].n)
            return d->small + base + (at - r[i].at);
        base += r[i].n;
    }
    return NULL; /* not a summed parameter: a caller's mistake */
}

#define DS(field) small_at(d, d->bo.field)           /* its fp32 sum in the small buffer */
#define DW(base, field) ((a16 *)(base) + d->bo.field) /* its bf16 slot in a gradient buffer */

static void gemm_nn(Device *d, int m, int n, int k, const a16 *a, int lda, const a16 *b, int ldb,
                    float beta, void *c, cudaDataType ctype, int ldc, cublasOperation_t ta,
                    cublasOperation_t tb)
{
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(d->blas, ta, tb, m, n, k, &alpha, a, CUDA_R_16BF, lda, b,
                              CUDA_R_16BF, ldb, &beta, c, ctype, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

/* dinp (N, C) = dout (N, OC) @ w; dw (OC, C) = dout^T @ inp, in bf16; dbias += colsum(dout).
 * A NULL dinp or dw is not computed. */
static void matmul_backward(Device *d, void *dinp, cudaDataType dinp_type, a16 *dw,
                            float *dbias, const a16 *dout, const a16 *inp, const a16 *w, int N,
                            int C, int OC)
{
    if (dinp)
        gemm_nn(d, C, N, OC, w, C, dout, OC, 0.0f, dinp, dinp_type, C, CUBLAS_OP_N,
                CUBLAS_OP_N);
    if (dw)
        gemm_nn(d, C, OC, N, inp, C, dout, OC, 0.0f, dw, CUDA_R_16BF, C, CUBLAS_OP_N,
                CUBLAS_OP_T);
    if (dbias)
        gk_bias_backward(dbias, dout, N, OC, d->t, (cudaStream_t_c)d->compute);
}

static void block_forward(Device *d, const ComputeCall *c, int op)
{
    cudaStream_t_c s = (cudaStream_t_c)d->compute;
    int N = d->N, C = d->C, F = d->F;
    size_t NC = (size_t)N * C;
    a16 **t = (a16 **)c->t;
    const a16 *w = (const a16 *)c->w;
    /* a layernorm output's fp32 mean and rstd follow it, attention's log-sum-exp its output */
    float *st1 = t[GPT2_LN1] ? (float *)(t[GPT2_LN1] + NC) : NULL;
    float *st2 = t[GPT2_LN2] ? (float *)(t[GPT2_LN2] + NC) : NULL;
    switch (op) {
    case GPT2_LN1:
        gk_layernorm_forward(t[GPT2_LN1], st1, st1 + N, t[GPT2_IN], W(w, ln1w), W(w, ln1b), N, C,
                             d->t, s);
        break;
    case GPT2_QKV:
        gk_matmul_forward(t[GPT2_QKV], NULL, t[GPT2_LN1], W(w, qkvw), W(w, qkvb), N, C, 3 * C,
                          d->lt, d->t, s);
        break;
    case GPT2_ATTN:
        gk_attention_forward(t[GPT2_ATTN], (float *)(t[GPT2_ATTN] + NC), t[GPT2_QKV], d->B, d->T,
                             C, d->NH, d->att_ws, d->blas, d->t, s);
        break;
    case GPT2_PROJ:
        gk_matmul_forward(t[GPT2_PROJ], NULL, t[GPT2_ATTN], W(w, projw), W(w, projb), N, C, C,
                          d->lt, d->t, s);
        break;
    case GPT2_RES1:
        gk_residual_forward(t[GPT2_RES1], t[GPT2_IN], t[GPT2_PROJ], NC, d->t, s);
        break;
    case GPT2_LN2:
        gk_layernorm_forward(t[GPT2_LN2], st2, st2 + N, t[GPT2_RES1], W(w, ln2w), W(w, ln2b), N,
                             C, d->t, s);
        break;
    case GPT2_FC1:
        gk_matmul_forward(t[GPT2_FC1], NULL, t[GPT2_LN2], W(w, fcw), W(w, fcb), N, C, F, d->lt,
                          d->t, s);
        break;
    case GPT2_GELU: gk_gelu_forward(t[GPT2_GELU], t[GPT2_FC1], (size_t)N * F, d->t, s); break;
    case GPT2_FC2:
        gk_matmul_forward(t[GPT2_FC2], NULL, t[GPT2_GELU], W(w, fcprojw), W(w, fcprojb), N, F, C,
                          d->lt, d->t, s);
        break;
    case GPT2_RES2:
        gk_residual_forward(t[GPT2_RES2], t[GPT2_RES1], t[GPT2_FC2], NC, d->t, s);
        break;
    }
}

static void block_backward(Device *d, const ComputeCall *c, int op)
{
    cudaStream_t_c s = (cudaStream_t_c)d->compute;
    int N = d->N, C = d->C, F = d->F;
    size_t NC = (size_t)N * C;
    a16 **t = (a16 **)c->t;
    const a16 *w = (const a16 *)c->w;
    a16 *g = (a16 *)c->dw;
    if (c->first_bwd)
        CUDA_CHECK(cudaMemsetAsync(d->small, 0, d->n_small * 4, d->compute));
    switch (op) {
    case GPT2_FC2: /* through fcproj and the GELU in one GEMM: d(fch) from the residual's */
        gk_from_f32(d->dres_bf, d->dres, NC, d->t, s);
        gk_matmul_backward_gelu(d->df2, d->dres_bf, W(w, fcprojw), t[GPT2_FC1], N, F, C, d->lt,
                                d->t, s);
        matmul_backward(d, NULL, CUDA_R_32F, DW(g, fcprojw), DS(fcprojb), d->dres_bf,
                        t[GPT2_GELU], NULL, N, F, C);
        break;
    case GPT2_GELU: break; /* done in fc2's epilogue */
    case GPT2_FC1:
        matmul_backward(d, d->dln, CUDA_R_32F, DW(g, fcw), DS(fcb), d->df2, t[GPT2_LN2],
                        W(w, fcw), N, C, F);
        break;
    case GPT2_LN2: {
        float *st = (float *)(t[GPT2_LN2] + NC);
        gk_layernorm_backward(d->dres, DS(ln2w), DS(ln2b), d->dln, t[GPT2_RES1], W(w, ln2w), st,
                              st + N, N, C, d->t, s);
        break;
    }
    case GPT2_PROJ:
        gk_from_f32(d->dres_bf, d->dres, NC, d->t, s);
        matmul_backward(d, d->dc, CUDA_R_16BF, DW(g, projw), DS(projb), d->dres_bf,
                        t[GPT2_ATTN], W(w, projw), N, C, C);
        break;
    case GPT2_ATTN:
        gk_attention_backward(d->dqkv, d->delta, d->dc, t[GPT2_ATTN], t[GPT2_QKV],
                              (float *)(t[GPT2_ATTN] + NC), d->B, d->T, C, d->NH, d->att_ws,
                              d->blas, d->t, s);
        break;
    case GPT2_QKV:
        matmul_backward(d, d->dln, CUDA_R_32F, DW(g, qkvw), DS(qkvb), d->dqkv, t[GPT2_LN1],
                        W(w, qkvw), N, C, 3 * C);
        break;
    case GPT2_LN1: {
        float *st = (float *)(t[GPT2_LN1] + NC);
        gk_layernorm_backward(d->dres, DS(ln1w), DS(ln1b), d->dln, t[GPT2_IN], W(w, ln1w), st,
                              st + N, N, C, d->t, s);
        /* the summed ones join the GEMMs' in the gradient buffer, in bf16 */
        const float *from = d->small;
        for (int i = 0; i < SMALL_RUNS; i++) {
            gk_from_f32(g + d->runs[i].at, from, d->runs[i].n, d->t, s);
            from += d->runs[i].n;
        }
        break;
    }
    }
}

/* The head over the n tokens from row r, forward and backward fused, with the head's weights
 * (V, C) where the edges' buffer has them: the chunk's logits (V of each padded row; the loss
 * kernel reads no further and zeroes the rest of the gradient), their losses and, in place,
 * their gradient, then the head's input gradient (its rows of dln) and weight gradient (added
 * into the edges' fp32 sum). Each GEMM runs over the vocabulary's largest multiple of
 * MODEL_VOCAB_ALIGN rows, then the few left (model.h): cuBLAS runs a dimension of 50257 at an
 * eighth of the speed of 50240 (97 against about 700 TFLOP/s on the H200, fuyou-profile). */
static void head_chunk(Device *d, const a16 *wlm, float grad_scale, int r, int n)
{
    cudaStream_t_c s = (cudaStream_t_c)d->compute;
    int C = d->C, V = d->V, Vp = d->Vp;
    int aligned = V / MODEL_VOCAB_ALIGN * MODEL_VOCAB_ALIGN;
    int part[2] = {aligned, V - aligned}, at[2] = {0, aligned};
    const a16 *x = d->lnf + (size_t)r * C;
    for (int i = 0; i < 2; i++)
        if (part[i])
            gemm_nn(d, part[i], n, C, wlm + (size_t)at[i] * C, C, x, C, 0.0f,
                    d->logits + at[i], CUDA_R_16BF, Vp, CUBLAS_OP_T, CUBLAS_OP_N);
    /* the kernel takes the mean over the n rows it is given; the loss is the mean over the
     * micro-batch's counted targets (backend.h) */
    float scale = d->n_targets ? (float)((double)grad_scale * n / d->n_targets) : 0.0f;
    gk_softmax_crossentropy(d->losses + r, d->logits, d->tokens + d->N + r, n, V, Vp, 1, scale,
                            d->t, s);
    float *dlm = d->edge_acc + d->eo.lm_head;
    for (int i = 0; i < 2; i++) {
        if (!part[i])
            continue;
        gemm_nn(d, C, n, part[i], wlm + (size_t)at[i] * C, C, d->logits + at[i], Vp,
                i && part[0] ? 1.0f : 0.0f, d->dln + (size_t)r * C, CUDA_R_32F, C, CUBLAS_OP_N,
                CUBLAS_OP_N);
        gemm_nn(d, C, part[i], n, x, C, d->logits + at[i], Vp, 1.0f, dlm + (size_t)at[i] * C,
                CUDA_R_32F, C, CUBLAS_OP_N, CUBLAS_OP_T);
    }
}

/* F.head.lm_head: the micro-batch's head, chunk by chunk. The edges' fp32 gradients start here
 * (zeroed), the head's weight gradient first. */
static void head_forward(Device *d, const ComputeCall *c)
{
    int N = d->N, chunk = (int)graph_head_chunk(N);
    CUDA_CHECK(cudaMemsetAsync(d->edge_acc, 0, (size_t)model_embed_params(&d->cfg) * 4,
                               d->compute));
    const a16 *wlm = (const a16 *)c->w + d->eo.lm_head;
    d->n_targets = backend_count_targets(N, c->targets);
    for (int r = 0; r < N; r += chunk)
        head_chunk(d, wlm, c->grad_scale, r, N - r < chunk ? N - r : chunk);
}

static void edge_call(Device *d, const ComputeCall *c)
{
    cudaStream_t_c s = (cudaStream_t_c)d->compute;
    int N = d->N, C = d->C;
    const a16 *w = (const a16 *)c->w;
    const Gpt2EdgeOffsets *o = &d->eo;
    bool bwd = c->task->kind == TASK_BWD;
    int *inputs = d->tokens, *targets = d->tokens + N;
    if (c->op == EDGE_EMBED) {
        if (!bwd) {
            CUDA_CHECK(cudaMemcpyAsync(d->tokens, c->inputs, (size_t)N * sizeof(int),
                                       cudaMemcpyHostToDevice, d->compute));
            CUDA_CHECK(cudaMemcpyAsync(targets, c->targets, (size_t)N * sizeof(int),
                                       cudaMemcpyHostToDevice, d->compute));
            gk_encoder_forward((a16 *)c->t[GPT2_IN], inputs, w + o->wte, w + o->wpe,
                               d->B, d->T, C, d->t, s);
        } else {
            gk_encoder_backward(d->edge_acc + o->wte, d->edge_acc + o->wpe, d->dres, inputs,
                                d->B, d->T, C, s);
            gk_from_f32((a16 *)c->dw, d->edge_acc, (size_t)model_embed_params(&d->cfg), d->t,
                        s);
        }
        return;
    }
    const a16 *res = (const a16 *)c->t[GPT2_RES2];
    if (c->op == EDGE_NORM && !bwd) {
        gk_layernorm_forward(d->lnf, d->lnf_mean, d->lnf_rstd, res, w + o->lnfw, w + o->lnfb, N,
                             C, d->t, s);
    } else if (c->op == EDGE_NORM) {
        CUDA_CHECK(cudaMemsetAsync(d->dres, 0, (size_t)N * C * 4, d->compute));
        gk_layernorm_backward(d->dres, d->edge_acc + o->lnfw, d->edge_acc + o->lnfb, d->dln, res,
                              w + o->lnfw, d->lnf_mean, d->lnf_rstd, N, C, d->t, s);
    } else if (c->op == EDGE_HEAD && !bwd) {
        head_forward(d, c); /* a backward task has nothing left: the forward did it */
    } else if (c->op == EDGE_LOSS && !bwd) {
        CUDA_CHECK(cudaMemcpyAsync(d->losses_host, d->losses, (size_t)N * 4,
                                   cudaMemcpyDeviceToHost, d->compute));
        d->loss_pending = true; /* summed once the stream is done (cuda_compute) */
    }
}

static cudaStream_t stream_of(const Device *d, int k)
{
    return k == STREAM_COMPUTE ? d->compute : k == STREAM_UP ? d->up : d->down;
}

/* Marks the start of a call's work on stream k. */
static int begin(Device *d, int k, Err *e)
{
    cudaError_t st = cudaEventRecord(d->began[k], stream_of(d, k));
    if (st != cudaSuccess)
        return err_set(e, -EIO, "cudaEventRecord: %s", cudaGetErrorString(st));
    return 0;
}

/* Waits for the call's work on stream k: 0, or -EIO with the runtime's words. The span is the
 * events' duration ending when the wait returned (one call in flight per stream, so nothing
 * queued behind the work delays the end that the host sees). A compute task's wait spins; a
 * copy's, of `bytes` issued at t0_s, sleeps through most of it (cuda_wait.h). */
static int finished(Device *d, int k, const char *what, double t0_s, size_t bytes,
                    DeviceSpan *span, Err *e)
{
    span->set = false;
    cudaError_t st = cudaEventRecord(d->ended[k], stream_of(d, k));
    if (st == cudaSuccess)
        st = k == STREAM_COMPUTE ? cudaEventSynchronize(d->ended[k])
                                 : cuda_wait_paced(&d->pace[k], d->ended[k], t0_s, bytes);
    double now = clock_monotonic_s();
    if (st == cudaSuccess)
        st = cudaGetLastError();
    if (st != cudaSuccess)
        return err_set(e, -EIO, "%s: %s", what, cudaGetErrorString(st));
    float ms = 0;
    if (cudaEventElapsedTime(&ms, d->began[k], d->ended[k]) == cudaSuccess) {
        *span = (DeviceSpan){true, now - ms * 1e-3, now};
        if (k != STREAM_COMPUTE)
            copy_pace_seen(&d->pace[k], bytes, ms * 1e-3);
    } else {
        cudaGetLastError();
    }
    return 0;
}

static int cuda_compute(Device *d, const ComputeCall *c, DeviceSpan *span, Err *e)
{
    int layer = c->task->layer;
    int rc = begin(d, STREAM_COMPUTE, e);
    if (rc)
        return rc;
    /* a launch or cuBLAS failure is kept, not fatal: the dispatcher drains the other lanes */
    CudaFailure failure = {};
    cuda_failure = &failure;
    if (layer >= 0 && layer < d->cfg.n_layer)
        (c->task->kind == TASK_BWD ? block_backward : block_forward)(d, c, c->op);
    else
        edge_call(d, c);
    cuda_failure = nullptr;
    rc = finished(d, STREAM_COMPUTE, "CUDA kernels", 0, 0, span, e);
    if (failure.failed) {
        span->set = false;
        return err_set(e, -EIO, "%s", failure.msg);
    }
    if (!rc && d->loss_pending) {
        double sum = 0;
        for (int i = 0; i < d->N; i++)
            sum += d->losses_host[i];
        d->loss = d->n_targets ? (float)(sum / d->n_targets) : 0.0f;
    }
    d->loss_pending = false;
    return rc;
}

static int cuda_compute_empty(Device *d, DeviceSpan *span, Err *e)
{
    int rc = begin(d, STREAM_COMPUTE, e);
    return rc ? rc : finished(d, STREAM_COMPUTE, "an empty task", 0, 0, span, e);
}

static float cuda_loss(Device *d)
{
    return d->loss;
}

static int cuda_copy(Device *d, bool to_device, int n, const DeviceCopy *c, DeviceSpan *span,
                     Err *e)
{
    int k = to_device ? STREAM_UP : STREAM_DOWN;
    double t0 = clock_monotonic_s();
    int rc = begin(d, k, e);
    size_t bytes = 0; /* issued */
    for (int i = 0; i < n && !rc; i++) {
        cudaError_t st = cudaMemcpyAsync(c[i].dst, c[i].src, c[i].bytes,
                                         to_device ? cudaMemcpyHostToDevice
                                                   : cudaMemcpyDeviceToHost, stream_of(d, k));
        if (st != cudaSuccess)
            rc = err_set(e, -EIO, "cudaMemcpyAsync of %zu bytes: %s", c[i].bytes,
                         cudaGetErrorString(st));
        else
            bytes += c[i].bytes;
    }
    /* wait even after a refused copy: the ones before it may still be running */
    DeviceSpan done;
    Err e2;
    int rc2 = finished(d, k, "the copy", t0, bytes, &done, &e2);
    if (rc)
        return rc;
    if (rc2)
        *e = e2;
    *span = done;
    return rc2;
}

static int cuda_pin(void *ctx, void *ptr, size_t bytes, Err *e)
{
    (void)ctx;
    cudaError_t st = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
    if (st != cudaSuccess) {
        cudaGetLastError();
        return err_set(e, -ENOMEM, "cannot page-lock %zu bytes of host memory for the GPU: %s",
                       bytes, cudaGetErrorString(st));
    }
    return 0;
}

static void cuda_unpin(void *ctx, void *ptr)
{
    (void)ctx;
    cudaHostUnregister(ptr);
}

static size_t cuda_free_bytes(void)
{
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return f;
}

extern "C" const DeviceOps device_cuda = {
    "cuda", false, 1u << ARCH_GPT2, DTYPE_BF16, DTYPE_BF16, cuda_tensor_bytes, cuda_own_bytes,
    cuda_create, cuda_destroy, cuda_alloc, cuda_release, cuda_compute, cuda_compute_empty,
    cuda_loss, cuda_copy, cuda_pin, cuda_unpin, cuda_free_bytes,
};
