/* device_cpu: the CPU device's ops (device.h), once for every family (device_cpu.h): its
 * buffers made, the edges' tasks on the family's embedding and norm, a block's task passed to
 * the family; host memory as device memory, memcpy as copies, no timers of its own (the lane's
 * clock is exact). */
#include "device_cpu.h"
#include "hostpool.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const CpuDeviceFamily *family(const ModelConfig *c)
{
    return c->arch == ARCH_LLAMA ? &cpu_device_llama : &cpu_device_gpt2;
}

/* The family's CPU lane (arch.h, cpu_lane_bytes): what the footprint counts. */
static void cpu_tensor_bytes(const ModelConfig *c, int B, int T, size_t bytes[ARCH_MAX_TENSORS])
{
    int64_t b[ARCH_MAX_TENSORS], own;
    model_arch(c)->cpu_lane_bytes(c, B, T, b, &own);
    for (int x = 0; x < arch_tensors(model_arch(c)); x++)
        bytes[x] = (size_t)b[x];
}

static size_t cpu_own_bytes(const ModelConfig *c, int B, int T)
{
    int64_t b[ARCH_MAX_TENSORS], own;
    model_arch(c)->cpu_lane_bytes(c, B, T, b, &own);
    return (size_t)own;
}

static void cpu_destroy(Device *d)
{
    CpuDeviceHead *h = (CpuDeviceHead *)d;
    if (!h)
        return;
    if (h->fam->fini)
        h->fam->fini(d);
    free(h->mem);
    free(h);
}

static int cpu_create(Device **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    const CpuDeviceFamily *f = family(c);
    size_t own = cpu_own_bytes(c, B, T) / sizeof(float) -
                 (f->apart_floats ? f->apart_floats(c, B, T) : 0);
    CpuDeviceHead *h = calloc(1, f->size);
    if (!h)
        return err_set(e, -ENOMEM, "out of memory");
    *h = (CpuDeviceHead){.fam = f, .cfg = *c, .B = B, .T = T, .wp = wp};
    Device *d = (Device *)h;
    h->mem = calloc(own, sizeof(float));
    int rc = h->mem ? 0 : err_set(e, -ENOMEM, "out of memory for the compute lane's buffers");
    if (!rc && f->init)
        rc = f->init(d, e);
    if (rc) {
        cpu_destroy(d);
        return rc;
    }
    float *p = cpu_device_carve_shared(h, f->carve(d, h->mem));
    assert((size_t)(p - h->mem) == own);
    (void)p;
    *out = d;
    return 0;
}

/* An edge task's operation other than the loss: the embedding, the final norm (its backward
 * starts the residual's gradient of the last block), the head. */
static int edge_call(CpuDeviceHead *h, const ComputeCall *c)
{
    const CpuDeviceFamily *f = h->fam;
    Device *d = (Device *)h;
    bool bwd = c->task->kind == TASK_BWD;
    switch (c->op) {
    case EDGE_EMBED:
        if (!bwd)
            f->embed_forward(d, c);
        else
            f->embed_backward(d, c, h->dres[1 % 2]);
        return 0;
    case EDGE_NORM: {
        if (!bwd) {
            f->norm_forward(d, c, h->lm.x);
            return 0;
        }
        float *dres = h->dres[(h->cfg.n_layer - 1 + 2) % 2];
        memset(dres, 0, (size_t)h->lm.N * h->lm.C * sizeof(float));
        f->norm_backward(d, c, h->lm.dx, dres);
        return 0;
    }
    case EDGE_HEAD:
        if (!bwd) /* a backward task has nothing left: the forward did it */
            cpu_device_head(h, c, f->lm_head(&h->cfg, c->w),
                            f->lm_head(&h->cfg, c->dw ? c->dw : c->w),
                            (size_t)model_embed_params(&h->cfg));
        return 0;
    default: return -EINVAL;
    }
}

static int cpu_compute(Device *d, const ComputeCall *c, int slot, Err *e)
{
    (void)slot;
    CpuDeviceHead *h = (CpuDeviceHead *)d;
    int layer = c->task->layer, rc = 0;
    if (layer >= 0 && layer < h->cfg.n_layer) {
        rc = h->fam->block(d, c);
    } else if (c->op != EDGE_LOSS) {
        rc = edge_call(h, c);
    } else if (c->task->kind == TASK_BWD) {
        rc = -EINVAL;
    } else {
        double sum = 0;
        for (int i = 0; i < h->lm.N; i++)
            sum += h->lm.losses[i];
        h->loss = h->n_targets ? (float)(sum / h->n_targets) : 0.0f;
    }
    if (rc)
        return err_set(e, rc, "%s: no such operation on the CPU device", c->task->id);
    return 0;
}

/* compute ran the task to its end */
static int cpu_compute_ended(Device *d, int slot, DeviceSpan *span, Err *e)
{
    (void)d, (void)slot, (void)e;
    span->set = false;
    return 1;
}

static int cpu_adam(Device *d, DeviceAdam *a, DeviceSpan *span, Err *e)
{
    (void)e;
    WorkPool *wp = ((CpuDeviceHead *)d)->lm.wp;
    span->set = false;
    /* the CPU lane's own sum and step (pipe_exec.c's run_adam): the same bits */
    a->sq = adam_sum_sq(a->grad, DTYPE_FP32, a->n, wp);
    if (!isfinite(a->sq))
        return 0;
    AdamSlice x = {.master = a->master, .m = a->m, .v = a->v, .grad = a->grad,
                   .grad_type = DTYPE_FP32, .n = a->n};
    adam_update(adam_isa_best(), &a->step, &x, wp);
    memcpy(a->w, a->master, a->n * 4);
    return 0;
}

static float cpu_loss(Device *d)
{
    return ((const CpuDeviceHead *)d)->loss;
}

static void *cpu_alloc(Device *d, size_t bytes, Err *e)
{
    (void)d;
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1)) {
        err_set(e, -ENOMEM, "out of memory for %zu bytes of compute-lane buffers", bytes);
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void cpu_release(Device *d, void *p)
{
    (void)d;
    free(p);
}

static int cpu_copy(Device *d, bool to_device, int n, const DeviceCopy *c, DeviceSpan *span,
                    Err *e)
{
    (void)d, (void)to_device, (void)e;
    span->set = false;
    for (int i = 0; i < n; i++)
        memcpy(c[i].dst, c[i].src, c[i].bytes);
    return 0;
}

static int cpu_compute_empty(Device *d, int slot, Err *e)
{
    (void)d, (void)slot, (void)e;
    return 0;
}

const DeviceOps device_cpu = {
    .name = "cpu", .on_host = true, .archs = 1u << ARCH_GPT2 | 1u << ARCH_LLAMA,
    .weight_type = DTYPE_FP32, .grad_type = DTYPE_FP32,
    .tensor_bytes = cpu_tensor_bytes, .own_bytes = cpu_own_bytes, .create = cpu_create,
    .destroy = cpu_destroy, .alloc = cpu_alloc, .release = cpu_release,
    .compute = cpu_compute, .compute_ended = cpu_compute_ended,
    .compute_empty = cpu_compute_empty, .adam = cpu_adam, .loss = cpu_loss,
    .copy = cpu_copy, .free_bytes = hostpool_system_available,
};
