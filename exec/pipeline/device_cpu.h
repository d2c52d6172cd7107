/* device_cpu: the pipeline's compute on the fp32 CPU reference, for either block family,
 * written once over a table the families' halves fill (device_cpu_gpt2.c, device_cpu_llama.c):
 * the head every family's struct Device starts with, and what differs by family (its buffers,
 * its blocks' ops, its embedding and final norm). "Device" memory is host memory and copies
 * are memcpy (device_cpu.c): the executor still moves every tensor the schedule moves, so
 * placement, swapping, recomputation and the out-of-core optimizer are exercised exactly, and
 * the results are bit-identical to the in-memory CPU backend's. Internal to the pipeline. */
#ifndef FUYOU_DEVICE_CPU_H
#define FUYOU_DEVICE_CPU_H

#include "device.h"

/* The LM head's buffers, every family's: the final norm's output x and its gradient dx (N,C),
 * one chunk's logits and softmax (chunk,V), the per-token losses (N) and a chunk's dlosses. */
typedef struct CpuHead {
    float *x, *dx, *logits, *probs, *losses, *dlosses;
    int C, V, N;
    WorkPool *wp;
} CpuHead;

typedef struct CpuDeviceFamily CpuDeviceFamily;

/* The first member of every family's struct Device, which create fills. */
typedef struct CpuDeviceHead {
    const CpuDeviceFamily *fam;
    ModelConfig cfg;
    int B, T;
    WorkPool *wp;
    float *mem;               /* the family's buffers and these below, one allocation */
    size_t block_params;
    CpuHead lm;
    float *dres[2];           /* the residual stream's gradient (N,C), ping-pong over blocks */
    float *act_grads;         /* a block's activation gradients, act_grad_floats of them */
    size_t act_grad_floats;
    int n_targets;            /* the micro-batch's targets the loss counts (backend.h) */
    float loss;               /* the last micro-batch's mean loss over them */
} CpuDeviceHead;

/* A family's half, written over the call's tensors by the family's names. create (device_cpu.c,
 * every family's) allocates size bytes, the buffers the family's BlockArch sizes
 * (cpu_lane_bytes, what the footprint counts, less apart_floats: what init allocates on its
 * own, such as RoPE's table), calls init, and has carve take the family's buffers from p on
 * (its activation gradients first, head.act_grads) before the shared ones. block computes a
 * block task's operation (-EINVAL for one it does not have); the edges' are the rest. */
struct CpuDeviceFamily {
    size_t size; /* of the family's struct Device, which starts with a CpuDeviceHead */
    size_t (*apart_floats)(const ModelConfig *c, int B, int T);
    int (*init)(Device *d, Err *e); /* 0 or -errno with e; NULL: nothing to make */
    void (*fini)(Device *d);        /* frees what init made, also after a failure */
    float *(*carve)(Device *d, float *p);
    int (*block)(Device *d, const ComputeCall *c);
    void (*embed_forward)(Device *d, const ComputeCall *c);
    void (*embed_backward)(Device *d, const ComputeCall *c, float *dres); /* into c->dw */
    /* The final norm of the last block's output (c->t) into x; backward: from dx, the
     * residual's gradient into dres (zeroed) and the norm's weights' into c->dw. */
    void (*norm_forward)(Device *d, const ComputeCall *c, float *x);
    void (*norm_backward)(Device *d, const ComputeCall *c, const float *dx, float *dres);
    float *(*lm_head)(const ModelConfig *c, float *edges); /* the head's matrix in the edges */
};

extern const CpuDeviceFamily cpu_device_gpt2, cpu_device_llama;

/* What every family's device holds for micro-batches of h's B x T, the residual gradients
 * and the head's buffers (graph_cpu_head_floats of them): cpu_device_carve_shared takes them
 * from p on, fills h but for the activation gradients (the family's) and returns where they
 * end. */
float *cpu_device_carve_shared(CpuDeviceHead *h, float *p);

/* A backward block task's residual gradients: block b reads dout and writes din, the two
 * dres buffers by turn. A micro-batch's first backward task of a block zeroes what gradients
 * accumulate into, as the in-memory backends do: the activation gradients, din and the
 * block's weight gradients (at c->dw). */
void cpu_device_block_grads(const CpuDeviceHead *h, const ComputeCall *c, float **dout,
                            float **din);

/* F.head.lm_head: the micro-batch's head chunk by chunk (graph_head_chunk), forward and backward
 * fused: each chunk's logits, their softmax and cross-entropy (losses), the logits' gradient,
 * then the head's input gradient (rows of dx) and weight gradient (added into dlm_head). The
 * loss is the mean over the counted targets (a masked one's row gets no gradient). The
 * edges' gradients (edge_params floats at c->dw) start here, zeroed, so with a tied matrix the
 * head's weight gradient comes before the embedding's, as in the in-memory backends. Every op
 * it calls works row by row or sums over rows in row order: the chunks give the bits of one
 * pass over the micro-batch. */
void cpu_device_head(CpuDeviceHead *h, const ComputeCall *c, const float *lm_head,
                     float *dlm_head, size_t edge_params);

#endif
