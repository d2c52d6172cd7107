/* gpt2_ops: the fp32 CPU forward and backward of every GPT-2 op, the reference the CUDA kernels
 * are checked against. Straightforward loops (after llm.c's train_gpt2.c): clarity and exact
 * reproducibility first; the matmuls split output rows (or weight rows) over a WorkPool with a
 * fixed partition, so results do not depend on timing. Backward functions accumulate (+=) into
 * gradients, which the caller zeroes. Shapes are in the comments: B batch, T time, C channels,
 * NH heads, V vocabulary, N = B * T rows. */
#ifndef FUYOU_GPT2_OPS_H
#define FUYOU_GPT2_OPS_H

#include "workpool.h"

void encoder_forward_ref(float *out /* (B,T,C) */, const int *inp /* (B,T) */,
                         const float *wte /* (V,C) */, const float *wpe /* (maxT,C) */, int B,
                         int T, int C);
void encoder_backward_ref(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                          int T, int C);

void layernorm_forward_ref(float *out /* (N,C) */, float *mean /* (N) */, float *rstd /* (N) */,
                           const float *inp, const float *weight, const float *bias, int N,
                           int C);
void layernorm_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C);

/* out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC, may be NULL). */
void matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias,
                        int N, int C, int OC, WorkPool *wp);
void matmul_backward_ref(float *dinp, float *dweight, float *dbias /* may be NULL */,
                         const float *dout, const float *inp, const float *weight, int N, int C,
                         int OC, WorkPool *wp);

/* ---- Grouped-query causal attention ----
 * Over the rotated qkv (B,T,(h+2g)d): query head j attends with kv head j / (h/g) (Hugging
 * Face's repeat_kv), scores scaled by 1/sqrtf(d), position t reading positions 0..t. out
 * (B,T,h d): head j's d values at j d. preatt and att (B,h,T,T) keep the scaled scores and
 * their softmax for backward (zero above the diagonal), as attention_forward_ref does. */
void attention_gqa_forward_ref(float *out, float *preatt, float *att, const float *qkv, int B,
                               int T, int h, int g, int d);
/* dqkv += through q, k and v (a kv head's gradient summed over its query heads in head order);
 * dpreatt and datt (B,h,T,T) are zeroed scratch. */
void attention_gqa_backward_ref(float *dqkv, float *dpreatt, float *datt, const float *dout,
                                const float *qkv, const float *att, int B, int T, int h, int g,
                                int d);

/* Causal multi-head attention over qkv (B,T,3C) = [q | k | v]: the grouped-query attention
 * with NH kv heads. out (B,T,C); preatt and att (B,NH,T,T) keep the scores and their softmax
 * for backward. */
void attention_forward_ref(float *out, float *preatt, float *att, const float *qkv, int B, int T,
                           int C, int NH);
void attention_backward_ref(float *dqkv, float *dpreatt, float *datt, const float *dout,
                            const float *qkv, const float *att, int B, int T, int C, int NH);

/* GELU, tanh approximation (GPT-2's). */
void gelu_forward_ref(float *out, const float *inp, int n);
void gelu_backward_ref(float *dinp, const float *inp, const float *dout, int n);

void residual_forward_ref(float *out, const float *a, const float *b, int n);
void residual_backward_ref(float *da, float *db, const float *dout, int n);

/* probs (B,T,V) = softmax(logits); losses (B,T) = -log probs[target]. A negative target (a
 * masked one, data.h's DATA_IGNORE) is left out: its loss is 0 and the backward leaves its row
 * of dlogits as it is, so it contributes nothing (PyTorch's ignore_index). */
void softmax_forward_ref(float *probs, const float *logits, int B, int T, int V);
void crossentropy_forward_ref(float *losses, const float *probs, const int *targets, int B,
                              int T, int V);
/* dlogits += (probs - onehot(target)) * dlosses, for the rows whose target is not negative. */
void crossentropy_softmax_backward_ref(float *dlogits, const float *dlosses, const float *probs,
                                       const int *targets, int B, int T, int V);

#endif
