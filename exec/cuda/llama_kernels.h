/* llama_kernels: the CUDA kernels of the Llama block's own ops (model/llama_arch.h), C
 * launchers on device pointers beside gpt2_kernels.h's, whose types, memory helpers, GEMMs
 * and residual add the block reuses. Each is checked against its CPU reference in
 * exec/cpu/llama_ops.h, which fixes the layouts and the exact semantics, by
 * tests/test_cuda_llama.c. Activations and weights are 16-bit (act16_t of a GkType: bf16 or
 * fp16), statistics and parameter gradients fp32, all arithmetic in fp32. Activation gradients
 * inside the block are 16-bit and overwritten (=), as gk_attention_backward's dqkv; those of the
 * residual stream (RMSNorm's dinp) and the parameters' are fp32 and accumulated (+=). Every
 * backward gives the same bits on every run: its sums run in a fixed order, never through
 * floating-point atomics. Shapes: N rows (B * T tokens), C channels, h query heads sharing g kv
 * heads (g divides h) of d values, fused qkv rows of (h + 2g) d (q's heads, then k's, then
 * v's), F the MLP width. Every launcher runs on stream s and checks the launch. */
#ifndef FUYOU_LLAMA_KERNELS_H
#define FUYOU_LLAMA_KERNELS_H

#include <stddef.h>

#include "gpt2_kernels.h"

/* ---- grouped-query causal attention ----
 * Query head j reads kv head j / (h/g), scores scaled by 1/sqrt(d); out (B,T,h d), lse (B,h,T)
 * kept for backward. The fused kernels (flash_attention.h) run head sizes 32, 64 and 128 with
 * any g dividing h; every other head size takes query chunks on cuBLAS (blas, a
 * cublasHandle_t), grouped-query too. Neither keeps a T x T buffer. Defined in
 * gpt2_attention.cu beside GPT-2's entry points, which are the case g == h. */

/* Bytes of ws the two launchers need: 0 where the fused kernels run, else linear in T. */
size_t lk_attention_workspace_bytes(int B, int T, int h, int g, int d);
void lk_attention_forward(act16_t *out, float *lse, const act16_t *qkv, int B, int T, int h,
                          int g, int d, void *ws, void *blas, GkType t, cudaStream_t_c s);
/* dqkv (B,T,(h+2g)d) = (overwritten, every element) the gradient through q, k and v from dout
 * (B,T,h d); a kv head's is its group's sum. delta (B,h,T) is scratch. */
void lk_attention_backward(act16_t *dqkv, float *delta, const act16_t *dout, const act16_t *out,
                           const act16_t *qkv, const float *lse, int B, int T, int h, int g,
                           int d, void *ws, void *blas, GkType t, cudaStream_t_c s);

#endif
