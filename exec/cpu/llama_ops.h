/* llama_ops: the fp32 CPU forward and backward of the ops the Llama block (llama_arch.h) has and
 * GPT-2's has not: RMSNorm, rotary position embedding, grouped-query causal attention, SwiGLU.
 * The reference the CUDA kernels and the out-of-core pipeline are checked against, in
 * gpt2_ops.h's style: straightforward loops, every reduction in a fixed order (results are
 * reproducible bit for bit), backward functions accumulate (+=) into gradients the caller
 * zeroes. The matmuls and residual adds are gpt2_ops.h's, not repeated here.
 *
 * Shapes in the comments: B batch, T time, C channels, N = B * T rows, h query heads and g kv
 * heads (g divides h) of d values each, F the MLP width. A fused qkv row holds (h + 2g) d
 * values: q's h heads, then k's g, then v's g, each head's d values contiguous. With g == h that
 * is GPT-2's [q | k | v] of C = h d each; the grouped-query attention is gpt2_ops.h's
 * (attention_gqa_*_ref), GPT-2's being the case g == h. */
#ifndef FUYOU_LLAMA_OPS_H
#define FUYOU_LLAMA_OPS_H

#include "fuyou_err.h"
#include "gpt2_ops.h"
#include "model.h"

/* ---- The token embedding, without positions (the blocks rotate q and k instead) ----
 * out (N,C) = the rows of wte (V,C) the N tokens name; backward adds each row of dout into its
 * token's row of dwte, in token order. */
void embedding_forward_ref(float *out, const int *tokens, const float *wte, int N, int C);
void embedding_backward_ref(float *dwte, const float *dout, const int *tokens, int N, int C);

/* ---- RMSNorm (Hugging Face's LlamaRMSNorm, in fp32) ----
 * out = (inp * rstd) * weight with rstd = 1 / sqrtf(mean(inp^2) + eps): the weight applied after
 * normalising, the mean of squares summed in float in index order. */
void rmsnorm_forward_ref(float *out /* (N,C) */, float *rstd /* (N) */, const float *inp,
                         const float *weight /* (C) */, int N, int C, float eps);
/* dinp += and dweight += from dout, with the rstd the forward kept. */
void rmsnorm_backward_ref(float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, const float *rstd, int N, int C);

/* ---- Rotary position embedding ----
 * Hugging Face modeling_llama's convention (rotate_half): within each q and k head, pair
 * (i, i + d/2) for i < d/2 is rotated by the angle pos * inv_freq[i]:
 *   out[i]       = x[i] * cos - x[i + d/2] * sin
 *   out[i + d/2] = x[i + d/2] * cos + x[i] * sin
 * both products rounded, then their sum (no fused multiply-add: -std=c17 keeps GCC from
 * contracting; a GPU kernel that matches bit for bit must not fuse them either). Positions are
 * 0..T-1 within each sequence. Not the interleaved pairs (2i, 2i + 1) of Meta's original code. */

/* rope_scaling of a Llama 3.1 config with rope_type "llama3": model.h's RopeScaling (factor,
 * low_freq_factor, high_freq_factor and original_max_seq, Hugging Face's
 * original_max_position_embeddings). */

/* inv_freq (d/2) of head size d (even) and base theta: inv_freq[i] = 1 / theta^(2i / d), then,
 * with scaling (NULL: none), transformers' _compute_llama3_parameters: with wavelen =
 * 2 pi / inv_freq, low_freq_wavelen = orig / low_freq_factor and high_freq_wavelen = orig /
 * high_freq_factor,
 *   wavelen > low_freq_wavelen                      -> inv_freq / factor
 *   high_freq_wavelen <= wavelen <= low_freq_wavelen -> (1 - s) inv_freq / factor + s inv_freq,
 *                               s = (orig / wavelen - low_freq_factor)
 *                                   / (high_freq_factor - low_freq_factor)
 *   wavelen < high_freq_wavelen                     -> inv_freq unchanged.
 * Its attention_factor is 1 (cos and sin are not scaled). Computed in double; transformers
 * evaluates the same formula in float32 tensors, within a few float ulps of this. The other
 * rope_types (linear, dynamic, yarn, longrope) are not reproduced. */
void rope_inv_freq(double *inv_freq, int d, double theta, const RopeScaling *scaling);

/* cos and sin of T positions by d/2 frequencies, (T, d/2) each, row t = position t. A table is
 * rope_table_init's, or the caller's own arrays (filled by rope_table_fill, placed wherever the
 * caller likes) in a struct it does not pass to rope_table_free. */
typedef struct RopeTable {
    int T;      /* positions, 0..T-1 */
    int half;   /* d / 2 */
    float *cos; /* (T, d/2) */
    float *sin; /* (T, d/2) */
} RopeTable;

/* Writes cos[t][i] = cos(t * inv_freq[i]) and sin likewise, the angle and both functions in
 * double, each rounded once to float. Hugging Face forms inv_freq and the angle in float32,
 * which at position p is off by up to about p * 6e-8 radians: its tables differ from these by
 * that, not by convention. A GPU kernel reads this table rather than recomputing it, to agree
 * bit for bit. */
void rope_table_fill(float *cos /* (T, d/2) */, float *sin /* (T, d/2) */, int T, int d,
                     double theta, const RopeScaling *scaling);
/* Allocates and fills t for positions 0..T-1. Returns 0, or -ENOMEM with e saying so (t is
 * then safe to rope_table_free). */
int rope_table_init(RopeTable *t, int T, int d, double theta, const RopeScaling *scaling,
                    Err *e);
/* Frees rope_table_init's arrays; accepts a zeroed or half-built table. */
void rope_table_free(RopeTable *t);

/* out (B,T,(h+2g)d) = qkv with its q and k heads rotated by position (tab->T >= T, tab->half ==
 * d/2), v copied. out and qkv do not overlap. */
void rope_forward_ref(float *out, const float *qkv, int B, int T, int h, int g, int d,
                      const RopeTable *tab);
/* dqkv += the rotation's transpose (the rotation by -angle) applied to dout; v's gradient
 * passes through. */
void rope_backward_ref(float *dqkv, const float *dout, int B, int T, int h, int g, int d,
                       const RopeTable *tab);

/* ---- SwiGLU ----
 * gate_up (N,2F) holds gate then up in each row (gate_proj and up_proj stacked); out (N,F) =
 * silu(gate) * up, silu(x) = x / (1 + expf(-x)). */
void swiglu_forward_ref(float *out, const float *gate_up, int N, int F);
/* dgate_up (N,2F) += from dout (N,F). */
void swiglu_backward_ref(float *dgate_up, const float *dout, const float *gate_up, int N, int F);

#endif
