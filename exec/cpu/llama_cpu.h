/* llama_cpu: the fp32 CPU reference backend of the Llama family. backend_cpu (gpt2_cpu.h)
 * creates it for a Llama model, so "cpu" trains either family. */
#ifndef FUYOU_LLAMA_CPU_H
#define FUYOU_LLAMA_CPU_H

#include "backend.h"

/* A backend for a Llama model c and micro-batches of B x T (backend.h's create). */
int llama_cpu_create(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e);

#endif
