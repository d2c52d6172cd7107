/* device_cuda: the pipeline's compute on the GPU: each schedule task one call of gpu_block.h
 * (the model's ops on the GPU, every family's, the same the CUDA backend runs), bf16 across
 * PCIe, gradients as GPU_GRADS_16 says: a block's weight matrices straight from their GEMMs in
 * bf16 (each one micro-batch's; micro-batches are summed on the host), its biases and norm
 * gains summed in fp32 and converted by its last backward task, the edges' summed in fp32 (the
 * head's chunks and the embedding share a tied matrix) and leaving in bf16 from B.embed. The
 * LM head runs in chunks, forward and backward fused in F.head.lm_head (graph.h); B.head has
 * nothing left to do. Each lane thread has its own stream: compute, and one per copy
 * direction. A copy returns when its work is done; a compute task is issued behind the ones
 * before it on the compute stream and its end queried (pipe_exec.c keeps two in flight, so the
 * GPU does not wait for the host between dependent tasks). CUDA events around each call's work
 * time it (the trace's GPU times). A failure is returned, not fatal, so the dispatcher drains the
 * other lanes and the user gets one line naming the task: one found when a task's work
 * completes (a fault while kernels ran, a copy that failed), and a launch or cuBLAS call the
 * runtime refuses (the launchers' checks record it for this thread instead of exiting,
 * cuda_check.h). */
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
#include "gpu_block.h"
}

typedef act16_t a16;

enum { STREAM_COMPUTE, STREAM_UP, STREAM_DOWN };

struct Device {
    ModelConfig cfg;
    int N;
    GpuBlock *blk;
    cudaStream_t compute, up, down;
    cudaEvent_t began[3], ended[3]; /* per stream, in STREAM_* order: times each call's work */
    cudaEvent_t task_began[DEVICE_SLOTS], task_ended[DEVICE_SLOTS]; /* compute tasks' */
    CopyPace pace[3];               /* the copy streams' (cuda_wait.h) */
    float *losses_host;             /* pinned */
    float *losses_mapped;           /* its device mapping (gpu_block_losses_out) */
    double *sq_scratch;             /* one device double: the AdamW's sum of squares */
    double *sq_host;                /* pinned: the sum, once the stream is done */
    bool loss_pending;              /* the call being issued copies the losses out */
    bool loss_in[DEVICE_SLOTS];     /* a slot's task did: summed once it ended */
    int n_targets;                  /* the micro-batch's targets the loss counts (backend.h) */
    float loss;
};

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

static size_t cuda_own_bytes(const ModelConfig *c, int B, int T)
{
    return gpu_block_own_bytes(c, B, T);
}

static void cuda_destroy(Device *d)
{
    if (!d)
        return;
    gpu_block_destroy(d->blk);
    if (d->losses_host)
        cudaFreeHost(d->losses_host);
    if (d->sq_scratch)
        cudaFree(d->sq_scratch);
    if (d->sq_host)
        cudaFreeHost(d->sq_host);
    for (int i = 0; i < 3; i++) {
        if (d->began[i])
            cudaEventDestroy(d->began[i]);
        if (d->ended[i])
            cudaEventDestroy(d->ended[i]);
    }
    for (int i = 0; i < DEVICE_SLOTS; i++) {
        if (d->task_began[i])
            cudaEventDestroy(d->task_began[i]);
        if (d->task_ended[i])
            cudaEventDestroy(d->task_ended[i]);
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
    d->N = B * T;
    CUDA_CHECK(cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&d->up, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&d->down, cudaStreamNonBlocking));
    for (int i = 0; i < 3; i++) {
        CUDA_CHECK(cudaEventCreate(&d->began[i]));
        CUDA_CHECK(cudaEventCreate(&d->ended[i]));
    }
    for (int i = 0; i < DEVICE_SLOTS; i++) {
        CUDA_CHECK(cudaEventCreate(&d->task_began[i]));
        CUDA_CHECK(cudaEventCreate(&d->task_ended[i]));
    }
    int rc = gpu_block_create(&d->blk, c, B, T, GPU_GRADS_16, (cudaStream_t_c)d->compute, e);
    if (rc) {
        cuda_destroy(d);
        return rc;
    }
    CUDA_CHECK(cudaMallocHost((void **)&d->losses_host, (size_t)d->N * 4));
    CUDA_CHECK(cudaHostGetDevicePointer((void **)&d->losses_mapped, d->losses_host, 0));
    CUDA_CHECK(cudaMalloc((void **)&d->sq_scratch, sizeof(double)));
    CUDA_CHECK(cudaMallocHost((void **)&d->sq_host, sizeof(double)));
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

static void block_call(Device *d, const ComputeCall *c)
{
    a16 *const *t = (a16 *const *)c->t;
    if (c->task->kind == TASK_BWD)
        gpu_block_backward(d->blk, c->op, (const a16 *)c->w, t, c->dw, c->first_bwd);
    else
        gpu_block_forward(d->blk, c->op, (const a16 *)c->w, t);
}

static void edge_call(Device *d, const ComputeCall *c)
{
    const BlockArch *a = model_arch(&d->cfg);
    const a16 *w = (const a16 *)c->w;
    bool bwd = c->task->kind == TASK_BWD;
    int N = d->N, *tokens = gpu_block_tokens(d->blk);
    if (c->op == EDGE_EMBED && !bwd) {
        CUDA_CHECK(cudaMemcpyAsync(tokens, c->inputs, (size_t)N * sizeof(int),
                                   cudaMemcpyHostToDevice, d->compute));
        CUDA_CHECK(cudaMemcpyAsync(tokens + N, c->targets, (size_t)N * sizeof(int),
                                   cudaMemcpyHostToDevice, d->compute));
        gpu_embed_forward(d->blk, w, (a16 *)c->t[a->input]);
    } else if (c->op == EDGE_EMBED) {
        gpu_embed_backward(d->blk, c->dw);
    } else if (c->op == EDGE_NORM && !bwd) {
        gpu_norm_forward(d->blk, w, (const a16 *)c->t[a->output]);
    } else if (c->op == EDGE_NORM) {
        gpu_norm_backward(d->blk, w, (const a16 *)c->t[a->output], c->dw);
    } else if (c->op == EDGE_HEAD && !bwd) {
        /* a backward task has nothing left: the forward did it */
        d->n_targets = backend_count_targets(N, c->targets);
        gpu_head(d->blk, w, c->dw, c->grad_scale, d->n_targets, !c->no_grad);
    } else if (c->op == EDGE_LOSS && !bwd) {
        gpu_block_losses_out(d->blk, d->losses_mapped);
        d->loss_pending = true; /* summed once the task ended (cuda_compute_ended) */
    }
}

static cudaStream_t stream_of(const Device *d, int k)
{
    return k == STREAM_COMPUTE ? d->compute : k == STREAM_UP ? d->up : d->down;
}

/* Records ev on stream s: 0, or -EIO with the runtime's words. */
static int record(cudaEvent_t ev, cudaStream_t s, Err *e)
{
    cudaError_t st = cudaEventRecord(ev, s);
    if (st != cudaSuccess)
        return err_set(e, -EIO, "cudaEventRecord: %s", cudaGetErrorString(st));
    return 0;
}

/* Marks the start of a call's work on stream k. */
static int begin(Device *d, int k, Err *e)
{
    return record(d->began[k], stream_of(d, k), e);
}

/* The work between two events that have completed, seen done at now: its span ending then, and
 * its milliseconds; false (the runtime's error cleared) where the events cannot time it. */
static bool timed(cudaEvent_t began, cudaEvent_t ended, double now, DeviceSpan *span, float *ms)
{
    if (cudaEventElapsedTime(ms, began, ended) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    *span = (DeviceSpan){true, now - *ms * 1e-3, now};
    return true;
}

/* Waits for the call's work on stream k: 0, or -EIO with the runtime's words. The span is the
 * events' duration ending when the wait returned (the call alone on its stream: a GPU
 * sub-group's AdamW runs with no compute task queued, so nothing queued behind the work delays
 * the end that the host sees). The AdamW's wait spins; a copy's, of `bytes` issued at t0_s,
 * sleeps through most of it (cuda_wait.h). */
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
    if (timed(d->began[k], d->ended[k], now, span, &ms) && k != STREAM_COMPUTE)
        copy_pace_seen(&d->pace[k], bytes, ms * 1e-3);
    return 0;
}

static int cuda_compute(Device *d, const ComputeCall *c, int slot, Err *e)
{
    int layer = c->task->layer;
    int rc = record(d->task_began[slot], d->compute, e);
    if (rc)
        return rc;
    /* a launch or cuBLAS failure is kept, not fatal: the dispatcher drains the other lanes */
    CudaFailure failure = {};
    cuda_failure = &failure;
    d->loss_pending = false;
    if (layer >= 0 && layer < d->cfg.n_layer)
        block_call(d, c);
    else
        edge_call(d, c);
    cuda_failure = nullptr;
    d->loss_in[slot] = d->loss_pending;
    if (failure.failed)
        return err_set(e, -EIO, "%s", failure.msg);
    return record(d->task_ended[slot], d->compute, e);
}

/* The compute lane spins on this while the task runs, as a compute wait did (cuda_wait.h). */
static int cuda_compute_ended(Device *d, int slot, DeviceSpan *span, Err *e)
{
    span->set = false;
    cudaError_t st = cudaEventQuery(d->task_ended[slot]);
    if (st == cudaErrorNotReady)
        return 0;
    double now = clock_monotonic_s();
    if (st == cudaSuccess)
        st = cudaGetLastError();
    if (st != cudaSuccess)
        return err_set(e, -EIO, "CUDA kernels: %s", cudaGetErrorString(st));
    float ms;
    timed(d->task_began[slot], d->task_ended[slot], now, span, &ms);
    if (d->loss_in[slot]) {
        double sum = 0;
        for (int i = 0; i < d->N; i++)
            sum += d->losses_host[i];
        d->loss = d->n_targets ? (float)(sum / d->n_targets) : 0.0f;
        d->loss_in[slot] = false;
    }
    return 1;
}

static int cuda_compute_empty(Device *d, int slot, Err *e)
{
    d->loss_in[slot] = false;
    int rc = record(d->task_began[slot], d->compute, e);
    return rc ? rc : record(d->task_ended[slot], d->compute, e);
}

/* A GPU sub-group's AdamW: the bf16 gradients' norm, then the step in place (gk_adamw_g16,
 * adam_update_ref's operations). */
static int cuda_adam(Device *d, DeviceAdam *a, DeviceSpan *span, Err *e)
{
    int rc = begin(d, STREAM_COMPUTE, e);
    if (rc)
        return rc;
    CudaFailure failure = {};
    cuda_failure = &failure;
    cudaStream_t_c s = (cudaStream_t_c)d->compute;
    /* the update and the gradients' sum in one pass (device.h: the pipeline stops on a
     * non-finite sum, it never skips a step) */
    const AdamStep *st = &a->step;
    gk_adamw_sq_g16(a->master, a->m, a->v, (const act16_t *)a->grad, (act16_t *)a->w, a->n,
                    d->sq_scratch, d->sq_host, st->beta1, st->one_minus_beta1, st->beta2,
                    st->one_minus_beta2, st->eps, st->decay, st->neg_step_size,
                    st->inv_sqrt_bc2, st->grad_scale, GK_BF16, s);
    cuda_failure = nullptr;
    rc = finished(d, STREAM_COMPUTE, "the AdamW kernels", 0, 0, span, e);
    a->sq = *d->sq_host;
    if (failure.failed) {
        span->set = false;
        return err_set(e, -EIO, "%s", failure.msg);
    }
    return rc;
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
    "cuda", false, 1u << ARCH_GPT2 | 1u << ARCH_LLAMA, DTYPE_BF16, DTYPE_BF16, cuda_tensor_bytes,
    cuda_own_bytes,
    cuda_create, cuda_destroy, cuda_alloc, cuda_release, cuda_compute, cuda_compute_ended,
    cuda_compute_empty,
    cuda_adam, cuda_loss, cuda_copy, cuda_pin, cuda_unpin, cuda_free_bytes,
};
