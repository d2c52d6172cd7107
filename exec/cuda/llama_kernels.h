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

/* ---- token embedding (no positions) ---- */

/* out (N,C) = the rows of wte (V,C) that tokens (N, each in [0, V)) name: a copy of 16-bit
 * values, whichever their format. */
void lk_embedding_forward(act16_t *out, const int *tokens, const act16_t *wte, int N, int C,
                          cudaStream_t_c s);
/* Bytes of scratch lk_embedding_backward needs for N tokens of a vocabulary of V (a device
 * must be current: the sort's own temporary storage is asked of it). */
size_t lk_embedding_backward_scratch_bytes(int N, int V);
/* dwte (V,C) += dout (N,C) by token: the positions are sorted by token (a stable radix sort),
 * then each token's rows are summed in position order and added to its row of dwte once. From
 * a zeroed dwte that is embedding_backward_ref's sum, operation for operation. */
void lk_embedding_backward(float *dwte, const float *dout, const int *tokens, int N, int C,
                           int V, void *scratch, cudaStream_t_c s);

/* ---- RMSNorm ---- */

/* out (N,C) = (inp * rstd) * weight, rstd (N) = 1 / sqrtf(mean(inp^2) + eps): a warp per row,
 * the squares summed in fp32 (in another order than the reference's). */
void lk_rmsnorm_forward(act16_t *out, float *rstd, const act16_t *inp, const act16_t *weight,
                        int N, int C, float eps, GkType t, cudaStream_t_c s);
/* Bytes of scratch lk_rmsnorm_backward needs: the weight gradient's partial column sums,
 * ceil(N / 256) x C floats. */
size_t lk_rmsnorm_backward_scratch_bytes(int N, int C);
/* dinp (N,C) += and dweight (C) += (fp32) from dout (N,C, fp32) with the forward's rstd. The
 * weight gradient is summed over blocks of 256 rows into scratch, then over the blocks in
 * order. */
void lk_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const act16_t *inp,
                         const act16_t *weight, const float *rstd, int N, int C, void *scratch,
                         GkType t, cudaStream_t_c s);

/* ---- rotary position embedding (rotate_half, llama_ops.h) ---- */

/* out (B,T,(h+2g)d) = qkv with its q and k heads rotated by position, v copied; cos_t and
 * sin_t are the fp32 tables of rope_table_fill (rows of d/2, row t = position t, at least T rows),
 * read, not recomputed. Each product and sum is rounded as the reference rounds it (no fused
 * multiply-add), so in fp32 the two would agree bit for bit: out is the reference's result
 * rounded once to 16 bits. out and qkv do not overlap. d is even. */
void lk_rope_forward(act16_t *out, const act16_t *qkv, const float *cos_t,
                     const float *sin_t, int B, int T, int h, int g, int d, GkType t,
                     cudaStream_t_c s);
/* dqkv = (overwritten) the rotation by -angle applied to dout's q and k heads, v's passed
 * through: rope_backward_ref's sums, rounded once. dqkv may be dout (in place). */
void lk_rope_backward(act16_t *dqkv, const act16_t *dout, const float *cos_t,
                      const float *sin_t, int B, int T, int h, int g, int d, GkType t,
                      cudaStream_t_c s);

/* ---- SwiGLU ---- */

/* out (N,F) = silu(gate) * up, from gate_up (N,2F) holding gate then up in each row: one
 * pass. */
void lk_swiglu_forward(act16_t *out, const act16_t *gate_up, int N, int F, GkType t,
                       cudaStream_t_c s);
/* dgate_up (N,2F) = (overwritten) the gradients of gate and up from dout (N,F), one pass.
 * dgate_up may be gate_up (in place: gate_up is not needed after this backward). */
void lk_swiglu_backward(act16_t *dgate_up, const act16_t *dout, const act16_t *gate_up, int N,
                        int F, GkType t, cudaStream_t_c s);

/* ---- grouped-query causal attention ----
 * Query head j reads kv head j / (h/g), scores scaled by 1/sqrt(d); out (B,T,h d), lse (B,h,T)
 * kept for backward. The fused kernels (flash_attention.h) run arch_attention_fused's head
 * sizes with any g dividing h; every other head size takes query chunks on cuBLAS (blas, a
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

/* For benchmarks: milliseconds of the attention's forward and of its backward (the launchers
 * above, bf16) over (B, T) tokens of h query heads and g kv heads of d, medians of reps timed
 * with CUDA events on random data. 0, or -ENOMEM without host memory (device memory as
 * gk_alloc). */
int lk_attention_ms(int B, int T, int h, int g, int d, int reps, double *fwd_ms,
                    double *bwd_ms);

#endif
