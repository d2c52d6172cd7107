/* model: GPT-style decoder configurations: the shipped presets, model ini files, parameter counts.
 *
 * A config is the architecture only (GPT-2 style: learned position embeddings, pre-LN blocks,
 * causal multi-head attention, GELU MLP, final LN, LM head optionally tied to the token embedding;
 * every linear layer and LN has a bias). What the training run does with it (batch, sequence
 * length, placement) belongs to the graph and the plan, not here. */
#ifndef FUYOU_MODEL_H
#define FUYOU_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "fuyou_err.h"

typedef enum DType { DTYPE_FP32, DTYPE_BF16, DTYPE_FP16 } DType;

size_t dtype_bytes(DType t);
/* Host memory bytes one element of the micro-batch gradient sum moves (the out-of-core
 * pipeline's add after each gradient copy, and the cost model's charge for it): the gradient
 * read (grad_bytes), the fp32 sum written, and read first unless it is the step's first
 * micro-batch, which writes the sum without reading it. */
size_t grad_sum_bytes(size_t grad_bytes, bool first);
const char *dtype_name(DType t);
/* "fp32", "bf16", "fp16" (also "float32", "bfloat16", "float16"); 0 or -EINVAL. */
int dtype_parse(const char *s, DType *out);

/* The largest sizes fuyou describes (README, "Limits"). Within them every size, parameter count
 * and byte count of a model and its graph is exact in int64 arithmetic, far from overflow. */
enum {
    MODEL_MAX_LAYERS = 1024,    /* deeper than any model trained so far; the planner's search
                                   grows as its square */
    MODEL_MAX_HIDDEN = 1 << 17, /* 131072; heads at most as many */
    MODEL_MAX_FFN = 1 << 20,    /* 1048576 */
    MODEL_MAX_VOCAB = 1 << 24,  /* 16777216 */
    MODEL_MAX_SEQ = 1 << 24,    /* max_seq, and so the sequence length */
};

typedef struct ModelConfig {
    char name[64];
    Arch arch;    /* the block's family (arch.h); GPT-2's for every preset so far */
    int n_layer;
    int d_model;  /* hidden size h */
    int n_head;
    int d_ff;     /* MLP width, 4h for GPT-2/3 */
    int vocab;
    int max_seq;  /* rows of the position embedding */
    bool tied;    /* LM head shares the token embedding (GPT-2/3); else its own (V, h) matrix */
    DType dtype;  /* dtype of weights and activations during training */
} ModelConfig;

int model_preset_count(void);
const ModelConfig *model_preset_at(int i);
/* Looks a preset up by name (case-insensitive). Returns it or NULL. */
const ModelConfig *model_preset_find(const char *name);

/* Loads a model: a preset name, or a path to a model ini ([model] section; see README.md).
 * Returns 0, or a negative errno with e naming the name/file:line and what to do. */
int model_load(const char *name_or_path, ModelConfig *out, Err *e);

/* Checks shape consistency (sizes from 1 to their MODEL_MAX_ limit, heads dividing the hidden
 * size). 0 or -EINVAL. */
int model_validate(const ModelConfig *c, Err *e);

int64_t model_head_dim(const ModelConfig *c);
/* The block of c's family: its ops and tensors by name. */
static inline const BlockArch *model_arch(const ModelConfig *c)
{
    return arch_block(c->arch);
}
/* Parameters of one transformer block: 2 LNs, qkv, attention projection, fc1, fc2 (with biases). */
int64_t model_block_params(const ModelConfig *c);
/* Parameters outside the blocks: token and position embeddings, final LN, untied LM head. */
int64_t model_embed_params(const ModelConfig *c);
int64_t model_param_count(const ModelConfig *c);

/* The GPU executors lay the LM head's logits out in rows of the vocabulary rounded up to
 * MODEL_VOCAB_ALIGN elements, and run its GEMMs over the largest multiple of it and the rest
 * apart: cuBLAS runs an unaligned dimension (GPT-2's 50257) several times slower. */
enum { MODEL_VOCAB_ALIGN = 64 };
int64_t model_padded_vocab(const ModelConfig *c);

#endif
