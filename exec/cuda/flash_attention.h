/* flash_attention: fused causal attention for the CUDA backend (FlashAttention-2's algorithm on
 * mma.sync tensor cores, bf16 or fp16, sm_80 and later). Forward: one block per 64 query rows
 * of one (batch row, head), keys streamed through shared memory in tiles of 64 with an online
 * softmax, so no score matrix is ever written; the row log-sum-exp is kept for backward.
 * Backward: one block per 64 keys, query tiles streamed, P recomputed from the log-sum-exp;
 * dK and dV stay in registers, dQ is accumulated in fp32 in the workspace and rounded once.
 * Memory is linear in T.
 * gpt2_kernels' gk_attention_* call this where it applies (head size 32, 64 or 128 and enough
 * shared memory) and keep the chunked cuBLAS attention otherwise; both are checked against the
 * CPU reference (tests/test_cuda_gpt2.c). Layouts as gpt2_kernels.h: qkv (B,T,3C), out (B,T,C),
 * lse and delta (B,NH,T), natural-log units. */
#ifndef FUYOU_FLASH_ATTENTION_H
#define FUYOU_FLASH_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>

#include "gpt2_kernels.h"

/* Whether the fused kernels run this shape on the current device (head size C/NH in 32, 64,
 * 128; the shared memory they need; 16-byte aligned rows). */
bool flash_attention_supported(int C, int NH);
/* Bytes of device workspace the backward needs: dQ in fp32, (B,T,C). */
size_t flash_attention_workspace_bytes(int B, int T, int C);
void flash_attention_forward(act16_t *out, float *lse, const act16_t *qkv, int B, int T, int C,
                             int NH, GkType t, cudaStream_t_c s);
/* dqkv is overwritten; delta (B,NH,T) = rowsum(dout * out), computed by the caller; ws of
 * flash_attention_workspace_bytes. */
void flash_attention_backward(act16_t *dqkv, const act16_t *dout, const act16_t *qkv,
                              const float *lse, const float *delta, int B, int T, int C, int NH,
                              void *ws, GkType t, cudaStream_t_c s);

#endif
