/* hf_save: a model written as transformers' save_pretrained writes it, so that AutoConfig and
 * AutoModelForCausalLM read the folder, and so do model_load (model.h) and hf_load
 * (hf_folder.h).
 *
 * config.json for the family (GPT2Config; LlamaConfig, or Qwen2Config for q/k/v biases),
 * model.safetensors or, above a shard size, model-0000K-of-0000N.safetensors and
 * model.safetensors.index.json, cut as huggingface_hub cuts them (tensors in layout order, a new
 * shard when the next tensor would take this one past the limit, a tensor larger than the limit
 * alone in its shard; each tensor whole in one shard), and the tokenizer files copied from the
 * folder the model came from.
 *
 * The weights are stored in the dtype asked (the model's own: bf16 for a bf16 model, rounded
 * to nearest even from the fp32 master weights), and config.json's torch_dtype says it; the
 * fp32 master weights a resumed run needs go in a file of their own (hf_save_tensors,
 * checkpoint.h). */
#ifndef FUYOU_HF_SAVE_H
#define FUYOU_HF_SAVE_H

#include <stdint.h>

#include "fuyou_err.h"
#include "layout.h"
#include "model.h"

/* transformers' default max_shard_size, "5GB" (10^9 bytes a GB, as it counts) */
#define HF_MAX_SHARD_BYTES ((uint64_t)5000000000)

/* Writes config.json for c at path, synced: GPT2Config for GPT-2; LlamaConfig (Qwen2Config when
 * c has q/k/v biases) for Llama: hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, vocab_size, max_position_embeddings, rms_norm_eps,
 * rope_theta, rope_scaling (llama3's fields when set, else null), tie_word_embeddings,
 * hidden_act silu, attention_bias and mlp_bias false; torch_dtype dtype's, as the weights are;
 * reals with as many digits as read back exactly. The bos/eos/pad token ids of the config.json
 * at source (NULL, or unreadable: none) are carried over, being the tokenizer's, which c does
 * not know; without them GPT-2's vocabulary gets <|endoftext|>, any other null. 0 or -errno. */
int hf_write_config(const char *path, const ModelConfig *c, DType dtype, const char *source,
                    Err *e);

/* Hugging Face's names of d: torch_dtype's ("bfloat16") and safetensors' ("BF16"). */
const char *hf_torch_dtype(DType d);
const char *hf_st_dtype(DType d);

/* Writes params (layout l, caller-owned) into the folder dir as safetensors of dtype with the
 * Hugging Face names: model.safetensors when the model's bytes fit max_shard_bytes (0:
 * HF_MAX_SHARD_BYTES), else the shards and their index. Every file synced (the folder is the
 * caller's to sync), every tensor with its CRC-32C (safetensors.h). 0 or -errno with e. */
int hf_save_weights(const char *dir, const ModelLayout *l, const float *params, DType dtype,
                    uint64_t max_shard_bytes, Err *e);

/* Where a save reads a model's state from, range by range, so that an out-of-core run writes
 * its checkpoint without a whole-model array: get(user, part, begin, n, dst) puts values
 * [begin, begin + n) of the layout's flat master weights (HF_PART_PARAMS) or Adam moments
 * (HF_PART_M, HF_PART_V) into dst; 0 or -errno with e. Saves ask in layout order. */
typedef enum HfPart { HF_PART_PARAMS, HF_PART_M, HF_PART_V } HfPart;
typedef struct HfSource {
    int (*get)(void *user, HfPart part, size_t begin, size_t n, float *dst, Err *e);
    void *user;
} HfSource;

/* The flat arrays' source (m, v NULL when only the weights are asked for). */
typedef struct HfFlat {
    const float *part[3];
} HfFlat;
HfSource hf_source_flat(HfFlat *f);

/* hf_save_weights from src, in chunks of HF_SAVE_CHUNK values (a GPT-2 Conv1D weight, stored
 * transposed, whole). */
#define HF_SAVE_CHUNK ((size_t)1 << 24)
int hf_save_weights_from(const char *dir, const ModelLayout *l, const HfSource *src,
                         DType dtype, uint64_t max_shard_bytes, Err *e);
/* Every tensor of l from src into the one fp32 safetensors file at path, with the Hugging Face
 * names (hf_load reads it as one .safetensors file). 0 or -errno with e. */
int hf_save_tensors(const char *path, const ModelLayout *l, const HfSource *src, Err *e);

/* How many files hf_save_weights writes l's tensors into under max_shard_bytes (0: default). */
int hf_shard_count(const ModelLayout *l, DType dtype, uint64_t max_shard_bytes);

/* Copies the tokenizer files (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
 * tokenizer.model, vocab.json, merges.txt, generation_config.json) that the folder from holds
 * into the folder to, each synced; those it lacks are skipped. 0 or -errno naming the file. */
int hf_copy_tokenizer(const char *from, const char *to, Err *e);

/* Writes text to a new file at path and syncs it. 0 or -errno with e naming the file. */
int hf_write_text(const char *path, const char *text, Err *e);
/* Writes root (a json_t, consumed; NULL when building it failed: -ENOMEM) to path as JSON
 * indented in its keys' order, synced; reals with `digits` significant digits. */
struct json_t;
int hf_write_json(const char *path, struct json_t *root, int digits, Err *e);

#endif
