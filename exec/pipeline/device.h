/* device: the compute side of the out-of-core pipeline (the schedule's "gpu" resource), behind
 * one small ops table, so the same executor runs on the CPU fp32 reference (device_cpu.c, which
 * makes the whole out-of-core path testable without a GPU) and on a GPU.
 *
 * The executor (pipeline.h) owns where every block tensor and weight buffer lives and passes
 * them in a ComputeCall per schedule task; the device owns what never leaves it: activation
 * gradients, the residual stream's gradient, the edge activations (final layernorm, logits,
 * losses) and its scratch. The LM head runs in chunks of graph_head_chunk tokens (graph.h), its
 * forward and backward fused per chunk in the lm_head's forward task, which also starts the
 * edges' gradients: a device holds one chunk's logits, and an lm_head backward task, if a
 * schedule issues one, does nothing. Block tensors are indexed by the family's tensor names
 * (arch.h: each op's output, and the block input); each carries what backward needs of it (a
 * layernorm output its mean and rstd, attention's output its softmax or log-sum-exp). */
#ifndef FUYOU_DEVICE_H
#define FUYOU_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "adam.h"
#include "config.h"
#include "fuyou_err.h"
#include "model.h"
#include "schedule.h"
#include "workpool.h"

typedef struct Device Device;

/* Compute tasks issued and not yet ended at most (the compute lane's depth, lane.h). */
enum { DEVICE_SLOTS = 2 };

/* One compute task, with every buffer it touches. */
typedef struct ComputeCall {
    const Task *task;          /* kind (forward, recompute, backward), layer, graph op */
    int op;                    /* the op's name (Op.id): the family's block op, or an EdgeOp */
    void *w;                   /* the block's (or the edges') weights */
    void *dw;                  /* their gradients (backward) */
    void *t[ARCH_MAX_TENSORS]; /* the block's tensors where this task finds or puts them, by
                                  name (arch.h); for the embedding t[input] is block 0's input,
                                  for the head t[output] the last block's output */
    bool first_bwd;            /* the block's (or the edges') first backward task: zero dw */
    const int *inputs, *targets; /* host memory: the micro-batch's tokens (embed, head) */
    float grad_scale;          /* the loss's gradient is grad_scale * d(mean loss): 1 / M */
    bool no_grad;              /* forward passes alone (an evaluation's): the head computes
                                  its loss and no gradient, and touches no dw */
} ComputeCall;

/* When a call's work ran on the device, where the device times it itself (CUDA events): the
 * duration is the device's, placed so that it ends when the calling thread saw it end (on the
 * monotonic clock, clock.h), which leaves out the host's time to issue the work. set is false
 * where the device has no timer of its own (the CPU reference: the lane's clock is exact). */
typedef struct DeviceSpan {
    bool set;
    double start_s, end_s;
} DeviceSpan;

/* A task's times as the trace records them: the lane's interval [*t0, *t1] narrowed to the
 * device's span where it has one, kept inside the lane's interval so that every task still
 * starts after its dependencies ended. */
void device_span_within(const DeviceSpan *span, double *t0, double *t1);
/* The same for a task queued behind another on the device (stream order): it starts no
 * earlier than *prev_end, where the one before it ended, and ends no earlier than it starts;
 * *prev_end becomes its end. */
void device_span_after(double *prev_end, double *t0, double *t1);

/* An AdamW step over n parameters in device memory, in place: the step of the fp32 master
 * weights and Adam's m and v, and the new weights (w, in the ops' weight_type), with the same
 * IEEE operations as adam_update_ref (adam.h), and the sum of squares of the gradients (grad,
 * in the ops' grad_type) into sq. A non-finite sum stops the run (the pipeline never skips a
 * step), so a device may update before it has the sum: the CPU reference sums first and
 * steps only on a finite sum, CUDA does both in one pass. */
typedef struct DeviceAdam {
    AdamStep step;
    float *master, *m, *v;
    const void *grad;
    void *w;
    size_t n;
    double sq; /* out */
} DeviceAdam;

/* One host <-> device copy. */
typedef struct DeviceCopy {
    void *dst;
    const void *src;
    size_t bytes;
} DeviceCopy;

typedef struct DeviceOps {
    const char *name;
    bool on_host;                 /* computes with the host's cores (the CPU reference) */
    unsigned archs;               /* the block families it runs: bit 1 << Arch each */
    DType weight_type, grad_type; /* of weights and gradients as they move */
    /* Bytes of each block tensor for micro-batches of B x T, and of what the device itself
     * allocates (counted against the GPU budget). */
    void (*tensor_bytes)(const ModelConfig *c, int B, int T, size_t bytes[ARCH_MAX_TENSORS]);
    size_t (*own_bytes)(const ModelConfig *c, int B, int T);
    int (*create)(Device **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e);
    void (*destroy)(Device *d);
    /* Device memory for the executor's buffers; NULL with e. */
    void *(*alloc)(Device *d, size_t bytes, Err *e);
    void (*release)(Device *d, void *p);
    /* Issues one compute task behind the ones issued before it (stream order) and returns;
     * slot (below DEVICE_SLOTS) names it until compute_ended has said it ended. The CPU
     * reference runs it here, to completion. Both are called on the compute lane's thread. */
    int (*compute)(Device *d, const ComputeCall *c, int slot, Err *e);
    /* Whether slot's task has ended (1: span says when it ran), not yet (0), or failed
     * (-errno with e). */
    int (*compute_ended)(Device *d, int slot, DeviceSpan *span, Err *e);
    /* Issues an empty compute task in slot, as compute issues one with none of its work, for
     * compute_ended: what the lane and the device cost a task beyond it (fuyou-profile's
     * task_us). */
    int (*compute_empty)(Device *d, int slot, Err *e);
    /* Runs an AdamW step (DeviceAdam) to completion on the compute lane's thread; span as
     * compute's. The sum of squares is the CPU's (adam_sum_sq) on the CPU device, bit for bit,
     * and within rounding of it on a GPU. */
    int (*adam)(Device *d, DeviceAdam *a, DeviceSpan *span, Err *e);
    /* The mean loss of the last F.head.loss. */
    float (*loss)(Device *d);
    /* Runs n copies between host and device memory, in order, to completion (called on a copy
     * lane's thread; to_device says the direction); span (not NULL) says when they ran. */
    int (*copy)(Device *d, bool to_device, int n, const DeviceCopy *c, DeviceSpan *span, Err *e);
    /* Page-locks host memory for DMA (the host pool's hook, hostpool.h; NULL: not needed). */
    int (*pin)(void *ctx, void *ptr, size_t bytes, Err *e);
    void (*unpin)(void *ctx, void *ptr);
    /* Device memory free now, before anything is allocated (0: unknown). */
    size_t (*free_bytes)(void);
} DeviceOps;

extern const DeviceOps device_cpu;
#if FUYOU_HAVE_CUDA
extern const DeviceOps device_cuda;
#endif

/* The device of a backend name ("cpu", "cuda" when built with it), or NULL. */
const DeviceOps *device_find(const char *name);

/* How a dispatcher waits on its lanes' bell while device ops runs a task of its, a compute task
 * or a copy (at most timeout_s): spinning, except where the device is the host's cores (the CPU
 * reference). A sleeping dispatcher's wake-up delays the next dependent task by about as long
 * as a short GPU task takes (MEASUREMENTS.md, "The dispatcher spins"); the core it holds is one
 * of the two the pipeline leaves beside the Adam (plan_adam_threads), and the copy lanes
 * themselves mostly sleep (cuda_wait.h). The pipeline's dispatcher and fuyou-profile's task
 * probe both wait so. */
struct LaneBell;
void device_wait_bell(const DeviceOps *ops, struct LaneBell *b, unsigned *seen,
                      double timeout_s);

#endif
