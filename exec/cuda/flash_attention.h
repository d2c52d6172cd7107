/* flash_attention: fused causal attention for the CUDA backend (FlashAttention-2's algorithm on
 * mma.sync tensor cores, bf16 or fp16, sm_80 and later), grouped-query: h query heads share g
 * kv heads (g divides h), query head j reading kv head j / (h/g); g == h is multi-head
 * attention (GPT-2's). Forward: one block per 64 query rows of one (batch row, query head),
 * keys streamed through shared memory in tiles of 64 with an online softmax, so no score matrix
 * is ever written; the row log-sum-exp is kept for backward. Backward, two kernels that
 * recompute P from the log-sum-exp and add in a fixed order, so the result is the same bits on
 * every run: one block per (batch row, kv head, 64 keys) loops over the group's query heads
 * and their query tiles with dK and dV in registers; one block per (batch row, query head, 64
 * queries) loops over the key tiles with dQ in registers. Memory is linear in T and no
 * workspace is needed.
 * The attention entry points (gpt2_kernels.h's gk_attention_*, llama_kernels.h's
 * lk_attention_*) call this where it applies and keep the chunked cuBLAS attention otherwise;
 * both are checked against the CPU references (tests/test_cuda_gpt2.c, test_cuda_llama.c).
 * Layouts: qkv and dqkv (B,T,(h+2g)d), each row q's h heads, then k's g, then v's g, d values
 * each; out and dout (B,T,h d); lse and delta (B,h,T), natural-log units. */
#ifndef FUYOU_FLASH_ATTENTION_H
#define FUYOU_FLASH_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>

#include "gpt2_kernels.h"

/* Whether the fused kernels run this shape on the current device: a head size d of
 * arch_attention_fused's (model/arch.h), g > 0 dividing h, a device of compute capability 8 or
 * more with the shared memory they need, and the kernels enabled. */
bool flash_attention_supported(int h, int g, int d);
/* With on false, flash_attention_supported answers false from then on, so the attention entry
 * points take the chunked path: a benchmark's baseline (bench_llama_kernels --baseline
 * chunked). On by default; call it before any attention runs, never beside one. */
void flash_attention_enable(bool on);
/* out and lse from qkv; qkv and out 16-byte aligned. */
void flash_attention_forward(act16_t *out, float *lse, const act16_t *qkv, int B, int T, int h,
                             int g, int d, GkType t, cudaStream_t_c s);
/* dqkv (all of it) is overwritten; delta (B,h,T) = rowsum(dout * out), computed by the
 * caller. */
void flash_attention_backward(act16_t *dqkv, const act16_t *dout, const act16_t *qkv,
                              const float *lse, const float *delta, int B, int T, int h, int g,
                              int d, GkType t, cudaStream_t_c s);

#endif
