/* gpt2_arch: GPT-2's block by name (arch.h): pre-LN, multi-head attention, GELU MLP, biases.
 *
 * Its ops in execution order; op X's output is tensor X, and GPT2_IN is the block input (the
 * checkpoint, kept by GPT2_LN1). The residual adds pass their gradient through: fc2's backward
 * carries res2's, ln2's res1's. gpt2_arch describes the list (arch.h), the ops' costs in the
 * layer graph (graph.h) and the tensors' sizes on a lane. */
#ifndef FUYOU_GPT2_ARCH_H
#define FUYOU_GPT2_ARCH_H

#include "arch.h"

typedef enum Gpt2Op {
    GPT2_LN1,  /* layernorm of the block input */
    GPT2_QKV,  /* q, k, v in one GEMM, with bias: (N, 3C) */
    GPT2_ATTN, /* causal attention: its output, and the rows' log-sum-exp */
    GPT2_PROJ, /* attention's output projection */
    GPT2_RES1, /* input + projection */
    GPT2_LN2,
    GPT2_FC1,  /* (N, F) */
    GPT2_GELU,
    GPT2_FC2,  /* back to (N, C) */
    GPT2_RES2, /* res1 + fc2: the block's output */
    GPT2_OPS,
    GPT2_IN = GPT2_OPS, /* the block input, as a tensor */
    GPT2_TENSORS
} Gpt2Op;

extern const BlockArch gpt2_arch;

#endif
