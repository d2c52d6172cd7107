/* gpt2_cpu: the fp32 CPU reference backend (an ops table of exec/train/backend.h): GPT-2's
 * forward and backward on the reference ops (gpt2_ops.h), block by block (gpt2_block.h), and
 * AdamW with exec/optim/adam, whatever the model's dtype says. Its create makes the Llama
 * family's (llama_cpu.h) for a Llama model: "cpu" trains both. */
#ifndef FUYOU_GPT2_CPU_H
#define FUYOU_GPT2_CPU_H

#include "backend.h"

extern const BackendOps backend_cpu;

#endif
