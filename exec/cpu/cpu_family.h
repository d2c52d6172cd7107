/* cpu_family: inside the CPU reference backend (cpu_backend.h). Its state, which every family's
 * backend starts with (the flat parameters, gradients and AdamW's m and v, the activations and
 * their gradients carved from one allocation each by the family's size table, the micro-batch's
 * tokens), and the table each block family fills (gpt2_cpu.c, llama_cpu.c) with what differs
 * by family: its activations, embedding, blocks and final norm. The head, the loss, the order
 * of a step and AdamW are cpu_backend.c's, once. Internal to exec/cpu. */
#ifndef FUYOU_CPU_FAMILY_H
#define FUYOU_CPU_FAMILY_H

#include "adam.h"
#include "backend.h"

enum { CPU_MAX_ACTS = 32 };

typedef struct CpuFamily CpuFamily;

typedef struct CpuBackend {
    Backend base;
    const CpuFamily *fam;
    WorkPool *wp;
    AdamIsa isa;
    float *params, *grads, *m, *v; /* the flat layout (layout.h), fp32 */
    float *act_mem, *dact_mem;     /* act_floats each */
    size_t act_floats;
    float *acts[CPU_MAX_ACTS], *dacts[CPU_MAX_ACTS]; /* the family's activations, gradients */
    size_t act_size[CPU_MAX_ACTS]; /* floats; a per-block one holds n_layer slices */
    int *targets, *inputs;         /* (B,T) */
} CpuBackend;

struct CpuFamily {
    size_t size; /* bytes of the family's backend, which starts with a CpuBackend */
    int n_acts;  /* at most CPU_MAX_ACTS */
    void (*act_sizes)(const ModelConfig *c, int B, int T, size_t *s);
    /* The activations every family has: the embedding's output (N,C), the blocks' outputs
     * (per block), the final norm's output (N,C), the logits and their softmax (N,V), the
     * per-token losses (N). */
    int embed, out, normf, logits, probs, losses;
    /* The family's own state (its dims, RoPE's table): 0 or -errno with e; fini frees it,
     * also after an init that failed. NULL: none. */
    int (*init)(CpuBackend *b, Err *e);
    void (*fini)(CpuBackend *b);
    /* The head's matrix in a flat layout (the parameters' or the gradients'). */
    float *(*lm_head)(const ModelConfig *c, float *flat);
    void (*embed_forward)(CpuBackend *b, const int *inputs);
    void (*embed_backward)(CpuBackend *b, const int *inputs); /* into grads */
    void (*block_forward)(CpuBackend *b, int l);
    void (*block_backward)(CpuBackend *b, int l); /* from the gradient of its output on */
    /* The final norm of `in` (the last block's output) into acts[normf]; backward: the
     * gradient of in into din (zeroed) and the norm's weights' into grads. */
    void (*norm_forward)(CpuBackend *b, const float *in);
    void (*norm_backward)(CpuBackend *b, float *din, const float *in);
};

extern const CpuFamily cpu_gpt2, cpu_llama;

/* Block l's slice of per-block activation `which` of t (b->acts or b->dacts). */
static inline float *cpu_block_slice(const CpuBackend *b, float *const *t, int which, int l)
{
    return t[which] + (size_t)l * (b->act_size[which] / (size_t)b->base.cfg.n_layer);
}

/* Block l's input in t: the embedding's output for the first block, else the block before's
 * output. */
static inline float *cpu_block_in(const CpuBackend *b, float *const *t, int l)
{
    return l == 0 ? t[b->fam->embed] : cpu_block_slice(b, t, b->fam->out, l - 1);
}

#endif
