/* cpu_backend: what the fp32 CPU reference backends share (gpt2_cpu.c, llama_cpu.c): the flat
 * parameters, gradients and AdamW's m and v, one allocation for the activations and one for
 * their gradients, the micro-batch's tokens, and the ops that touch only those (state in and
 * out, gradients in and out, their norm, AdamW). Each family's backend starts with this struct
 * and carves its activations from act_mem and dact_mem. Internal to exec/cpu. */
#ifndef FUYOU_CPU_BACKEND_H
#define FUYOU_CPU_BACKEND_H

#include "adam.h"
#include "backend.h"

typedef struct CpuBackend {
    Backend base;
    WorkPool *wp;
    AdamIsa isa;
    float *params, *grads, *m, *v; /* the flat layout (layout.h), fp32 */
    float *act_mem, *dact_mem;     /* act_floats each */
    size_t act_floats;
    int *targets, *inputs;         /* (B,T) */
} CpuBackend;

/* Fills b (the start of a family's backend, zeroed) for c with ops and the activations' n_acts
 * parts of act_size[i] floats, carved in order from act_mem into acts[i] and from dact_mem
 * into dacts[i] (their gradients). 0 or -ENOMEM with e; cpu_backend_release frees what it
 * allocated either way (not b itself). */
int cpu_backend_init(CpuBackend *b, const BackendOps *ops, const ModelConfig *c, int B, int T,
                     WorkPool *wp, const size_t *act_size, int n_acts, float **acts,
                     float **dacts, Err *e);
void cpu_backend_release(CpuBackend *b);

/* BackendOps members every CPU backend uses as they are (backend.h). */
int cpu_backend_read_state(Backend *b, float *params, float *m, float *v, Err *e);
int cpu_backend_write_state(Backend *b, const float *params, const float *m, const float *v,
                            Err *e);
int cpu_backend_read_grads(Backend *b, float *grads, Err *e);
int cpu_backend_write_grads(Backend *b, const float *grads, Err *e);
double cpu_backend_grad_sq(Backend *b, size_t begin, size_t end);
int cpu_backend_update(Backend *b, const AdamStep *s, size_t begin, size_t end, Err *e);

/* A family's half of a step: forward over the micro-batch's tokens (its logits' softmax into
 * probs), backward from the targets (gradients from zero, of loss_scale times the mean loss). */
typedef struct CpuFamilyStep {
    void (*forward)(CpuBackend *b, const int *inputs);
    /* the gradient of loss_scale * the mean loss over the counted targets (backend.h): dloss
     * for each counted target's loss */
    void (*backward)(CpuBackend *b, const int *inputs, const int *targets, float dloss);
    float *probs, *losses; /* (N,V) the forward's softmax, (N) the per-token losses */
} CpuFamilyStep;

/* BackendOps.step for either family: the tokens checked, forward, with targets the losses and
 * their mean over the counted targets (summed in double in token order; 0 when every target is
 * DATA_IGNORE) into *loss, with backward the gradients. */
int cpu_backend_step(CpuBackend *b, const CpuFamilyStep *f, const int *inputs,
                     const int *targets, bool do_backward, float *loss, Err *e);

#endif
