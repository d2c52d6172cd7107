/* model_hf: a model from a Hugging Face config.json (model_type llama, mistral, qwen2 or gpt2),
 * as transformers writes it; model_load reads one for a folder or a .json path (model.h). */
#ifndef FUYOU_MODEL_HF_H
#define FUYOU_MODEL_HF_H

#include "fuyou_err.h"
#include "model.h"

/* Reads the config at path into *out: 0, or -errno with e naming the file and the field (-EINVAL
 * for a config fuyou's blocks do not compute: another model_type, biases on o or the MLP, a
 * head size other than hidden / heads, a rope_scaling other than llama3's). */
int model_load_hf(const char *path, ModelConfig *out, Err *e);

#endif
