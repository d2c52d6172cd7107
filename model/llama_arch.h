/* llama_arch: the Llama block by name (arch.h): RMSNorm, grouped-query attention with rotary
 * position embeddings, SwiGLU MLP, no biases (Qwen2: q, k and v biases). Llama 2 and 3, Qwen2 and
 * Qwen2.5, Mistral share it.
 *
 * Its ops in execution order; op X's output is tensor X, and LLAMA_IN is the block input (the
 * checkpoint, kept by LLAMA_NORM1). With h query heads and g kv heads of d each:
 * - LLAMA_QKV: one GEMM to (N, (h + 2g) d): q's h heads, then k's g, then v's g, each head's d
 *   values contiguous (the weight is q_proj, k_proj and v_proj stacked, as Hugging Face stores
 *   them (out, in));
 * - LLAMA_ROPE: q and k rotated by their positions (rotate-half pairs (i, i + d/2), as Hugging
 *   Face's apply_rotary_pos_emb), v passed through: its output is the rotated qkv;
 * - LLAMA_ATTN: causal attention, query head j reading kv head j / (h / g);
 * - LLAMA_GATE_UP: one GEMM to (N, 2F): gate, then up (gate_proj and up_proj stacked);
 * - LLAMA_SWIGLU: silu(gate) * up, (N, F);
 * - the residual adds pass their gradient through: down's backward carries res2's, norm2's
 *   res1's. */
#ifndef FUYOU_LLAMA_ARCH_H
#define FUYOU_LLAMA_ARCH_H

#include "arch.h"

typedef enum LlamaOp {
    LLAMA_NORM1,   /* RMSNorm of the block input */
    LLAMA_QKV,     /* (N, (h + 2g) d), q/k/v biases where the family has them */
    LLAMA_ROPE,    /* rotary embedding of q and k */
    LLAMA_ATTN,    /* grouped-query causal attention: its output, the rows' log-sum-exp */
    LLAMA_O,       /* o_proj: (N, h d) -> (N, C) */
    LLAMA_RES1,    /* input + o_proj */
    LLAMA_NORM2,
    LLAMA_GATE_UP, /* (N, 2F) */
    LLAMA_SWIGLU,  /* (N, F) */
    LLAMA_DOWN,    /* down_proj: back to (N, C) */
    LLAMA_RES2,    /* res1 + down: the block's output */
    LLAMA_OPS,
    LLAMA_IN = LLAMA_OPS, /* the block input, as a tensor */
    LLAMA_TENSORS
} LlamaOp;

extern const BlockArch llama_arch;

#endif
