/* model: decoder configurations: the shipped presets, model ini files and Hugging Face
 * config.json files, parameter counts.
 *
 * A config is the architecture only, of one of the block families arch.h lists:
 * - GPT-2 (ARCH_GPT2; GPT-2 and GPT-3 shapes): learned position embeddings, pre-LN blocks,
 *   causal multi-head attention, GELU MLP, final LN, LM head optionally tied to the token
 *   embedding; every linear layer and LN has a bias.
 * - Llama (ARCH_LLAMA; Llama 2/3, Qwen2/2.5, Mistral): RMSNorm, rotary position embeddings,
 *   grouped-query attention (kv_heads), SwiGLU MLP, no biases but Qwen2's on q, k and v, the
 *   head tied or not.
 * What the training run does with it (batch, sequence length, placement) belongs to the graph
 * and the plan, not here. */
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

/* The largest sizes fuyou describes (docs/fuyou-sim.md, "Limits"). Within them every size, parameter count
 * and byte count of a model and its graph is exact in int64 arithmetic, far from overflow. */
enum {
    MODEL_MAX_LAYERS = 1024,    /* deeper than any model trained so far; the planner's search
                                   grows as its square */
    MODEL_MAX_HIDDEN = 1 << 17, /* 131072; heads at most as many */
    MODEL_MAX_FFN = 1 << 20,    /* 1048576 */
    MODEL_MAX_VOCAB = 1 << 24,  /* 16777216 */
    MODEL_MAX_SEQ = 1 << 24,    /* max_seq, and so the sequence length */
};

/* Llama 3.1's "llama3" frequency scaling of the rotary embedding (factor 0: none). */
typedef struct RopeScaling {
    double factor, low_freq_factor, high_freq_factor;
    int original_max_seq;       /* original_max_position_embeddings */
} RopeScaling;

typedef struct ModelConfig {
    char name[64];
    Arch arch;    /* the block's family (arch.h) */
    int n_layer;
    int d_model;  /* hidden size h */
    int n_head;
    int n_kv_head; /* grouped-query attention's k/v heads (Llama); 0: n_head (model_kv_heads) */
    int d_ff;     /* MLP width: 4h for GPT-2/3; the SwiGLU's intermediate size for Llama */
    int vocab;
    int max_seq;  /* GPT-2: rows of the position embedding; Llama: the longest sequence */
    bool tied;    /* LM head shares the token embedding; else its own (V, h) matrix */
    bool qkv_bias; /* Llama: q, k and v projections with biases (Qwen2) */
    double rope_theta; /* Llama: the rotary embedding's base; 0: 10000 (model_rope_theta) */
    RopeScaling rope_scaling;
    double norm_eps; /* the norms' epsilon; 0: the family's default (model_norm_eps) */
    DType dtype;  /* dtype of weights and activations during training */
} ModelConfig;

int model_preset_count(void);
const ModelConfig *model_preset_at(int i);
/* Looks a preset up by name (case-insensitive). Returns it or NULL. */
const ModelConfig *model_preset_find(const char *name);

/* Loads a model: a preset name, a path to a model ini ([model] section; see docs/models-and-hardware.md), or a
 * Hugging Face model folder or its config.json (model_hf.h). Returns 0, or a negative errno
 * with e naming the name/file:line or field and what to do. */
int model_load(const char *name_or_path, ModelConfig *out, Err *e);

/* What a loaded config states that fuyou does not compute, where that leaves the model the one
 * it describes (a Hugging Face config's dropout rates: fuyou trains without dropout): one line
 * naming the file, for the caller to print; "" when there is nothing to say. */
typedef struct ModelNotice {
    char msg[512];
} ModelNotice;

/* model_load, and its notice into *notice ("" for a preset or a model ini). */
int model_load_noticed(const char *name_or_path, ModelConfig *out, ModelNotice *notice, Err *e);

/* Checks shape consistency (sizes from 1 to their MODEL_MAX_ limit, heads dividing the hidden
 * size). 0 or -EINVAL. */
int model_validate(const ModelConfig *c, Err *e);

int64_t model_head_dim(const ModelConfig *c);
/* The k/v heads (n_kv_head, or n_head where 0), the rotary base and the norms' epsilon, with
 * the family's defaults where the config leaves them 0 (GPT-2's layernorm 1e-5, Llama's RMSNorm
 * 1e-5; the rotary base 10000). */
int model_kv_heads(const ModelConfig *c);
double model_rope_theta(const ModelConfig *c);
double model_norm_eps(const ModelConfig *c);
/* The block of c's family: its ops and tensors by name. */
static inline const BlockArch *model_arch(const ModelConfig *c)
{
    return arch_block(c->arch);
}
/* Parameters of one transformer block: GPT-2's 2 LNs, qkv, attention projection, fc1, fc2
 * (with biases); Llama's 2 RMSNorm gains, q, k, v (Qwen2: with biases), o, gate, up, down. */
int64_t model_block_params(const ModelConfig *c);
/* Parameters outside the blocks: the token embedding (GPT-2: and the position embedding), the
 * final norm, an untied LM head. */
int64_t model_embed_params(const ModelConfig *c);
int64_t model_param_count(const ModelConfig *c);

/* The GPU executors lay the LM head's logits out in rows of the vocabulary rounded up to
 * MODEL_VOCAB_ALIGN elements, and run its GEMMs over the largest multiple of it and the rest
 * apart: cuBLAS runs an unaligned dimension (GPT-2's 50257) several times slower. */
enum { MODEL_VOCAB_ALIGN = 64 };
int64_t model_padded_vocab(const ModelConfig *c);

#endif
