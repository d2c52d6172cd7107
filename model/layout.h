/* layout: where each parameter tensor lives in one flat fp32 buffer, with its Hugging Face name
 * and shape, for either block family. Part of the shared description: the schedule's
 * sub-groups are slices of this layout, and every backend (the CPU reference, CUDA, the
 * out-of-core pipeline) and the checkpoints address parameters through it.
 *
 * The layout is block-major: the edge parameters first, then each block's tensors
 * contiguously. So an optimizer sub-group of blocks is one contiguous slice, the tail sub-group
 * (the first blocks and the edges) is the slice starting at 0, and block b starts at
 * model_embed_params + b * model_block_params (model.h). Linear weights are stored (out, in).
 * - GPT-2: transformer.wte, wpe, ln_f (weight, bias), an untied lm_head, then per block ln_1,
 *   attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj (weights and biases); Hugging Face's
 *   GPT-2 Conv1D stores its linear weights (in, out), and the conv1d flag says to transpose on
 *   load and save.
 * - Llama: model.embed_tokens, model.norm, an untied lm_head, then per block input_layernorm,
 *   self_attn.q_proj, k_proj, v_proj (Qwen2: each with its bias after the three weights), o_proj,
 *   post_attention_layernorm, mlp.gate_proj, up_proj, down_proj. q, k and v are stacked as the
 *   fused qkv GEMM reads them (llama_arch.h), and gate and up likewise; Hugging Face stores
 *   them (out, in) too, with q and k in the rotate-half order our rotary embedding uses, so
 *   nothing is transposed or permuted. */
#ifndef FUYOU_LAYOUT_H
#define FUYOU_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

enum { LAYOUT_NAME_MAX = 64 };

typedef struct ParamTensor {
    char name[LAYOUT_NAME_MAX]; /* "transformer.h.3.attn.c_attn.weight" */
    size_t offset, numel;
    int rows, cols;             /* ours: (rows, cols); 1-D tensors have rows 1 */
    bool conv1d;                /* Hugging Face stores it (cols, rows) */
} ParamTensor;

typedef struct ModelLayout {
    ParamTensor *t;
    int n;
    size_t total;
} ModelLayout;

/* Fills l for c; the caller frees it with layout_free. 0 or -ENOMEM. */
int layout_init(ModelLayout *l, const ModelConfig *c);
void layout_free(ModelLayout *l);
/* The tensor with this Hugging Face name (GPT-2's with or without the "transformer." prefix),
 * or NULL. */
const ParamTensor *layout_find(const ModelLayout *l, const char *name);

/* Optimizer sub-group g of plan p (plan.h) as the slice [begin, end) of the flat layout: blocks
 * are contiguous, and the tail's slice starts at 0 with the edge parameters. */
struct Plan;
void layout_subgroup_slice(const ModelConfig *c, const struct Plan *p, int g, size_t *begin,
                           size_t *end);
/* The prefix [0, this) of the layout whose optimizer states live on the GPU with their
 * sub-groups (plan_optim_tier): the slices of the last plan_gpu_groups sub-groups, the whole
 * layout with the optimizer on the GPU; 0 with none. */
size_t layout_gpu_state_params(const ModelConfig *c, const struct Plan *p);
/* The end of the streamed sub-groups' range [layout_gpu_state_params, this) (plan.h,
 * optim_stream_groups: the CPU-memory sub-groups just past the GPU prefix); the GPU keeps the
 * gradients of [0, this). layout_gpu_state_params without streamed sub-groups. */
size_t layout_stream_end_params(const ModelConfig *c, const struct Plan *p);

#endif
