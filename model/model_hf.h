/* model_hf: a model from a Hugging Face config.json (model_type llama, mistral, qwen2 or gpt2),
 * as transformers writes it; model_load reads one for a folder or a .json path (model.h). */
#ifndef FUYOU_MODEL_HF_H
#define FUYOU_MODEL_HF_H

#include "fuyou_err.h"
#include "model.h"

/* Reads the config at path into *out: 0, or -errno with e naming the file, the field and its
 * value. Every field that changes what the model computes is honoured or refused (-EINVAL):
 * another model_type, activation, norm epsilon or attention scaling than the block computes,
 * biases on o or the MLP, a head size other than hidden / heads, a partial rotary embedding, a
 * rope_scaling other than llama3's. Dropout rates above 0 load (fuyou trains without dropout)
 * and are named in *notice when notice is not NULL ("" when there are none). */
int model_load_hf(const char *path, ModelConfig *out, ModelNotice *notice, Err *e);

#endif
