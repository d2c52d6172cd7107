/* gpt2_kernels: the CUDA kernels of the GPT-2 step, with C launchers on device pointers, checked
 * against exec/cpu/gpt2_ops (the references) by tests/test_cuda_gpt2.c. Weights and activations
 * are 16-bit floats (act16_t here), bf16 or fp16 as each launcher's GkType says; statistics,
 * losses and parameter gradients are fp32; all arithmetic accumulates in fp32. Attention is
 * fused (flash_attention.h) for arch_attention_fused's head sizes (model/arch.h) and works in
 * query chunks on cuBLAS otherwise; neither keeps a T x T buffer (the row log-sum-exp is kept
 * for backward), so its memory grows linearly with T. Every launcher runs on `stream` and checks
 * the launch. */
#ifndef FUYOU_GPT2_KERNELS_H
#define FUYOU_GPT2_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The 16-bit float format of a tensor: bfloat16 (8-bit exponent, the default) or IEEE fp16
 * (5-bit exponent: needs loss scaling in training). */
typedef enum GkType { GK_BF16, GK_FP16 } GkType;
typedef uint16_t act16_t;                   /* a 16-bit float's bits, of some GkType */
typedef uint16_t bf16_t;                    /* the bits of a bf16 */
typedef struct CUstream_st *cudaStream_t_c; /* cudaStream_t without the CUDA headers */

/* device memory helpers for C code (tests, the backend); they exit on CUDA errors */
void *gk_alloc(size_t bytes);
void gk_free(void *p);
void gk_upload(void *dst, const void *src, size_t bytes);
void gk_download(void *dst, const void *src, size_t bytes);
void gk_memset(void *dst, int value, size_t bytes);
/* a cuBLAS handle (cublasHandle_t) for the launchers that take one */
void *gk_blas_create(void);
void gk_blas_destroy(void *blas);
void gk_sync(void);
/* fp32 <-> 16-bit of type t (round to nearest even) on the device */
void gk_from_f32(act16_t *out, const float *in, size_t n, GkType t, cudaStream_t_c s);
void gk_to_f32(float *out, const act16_t *in, size_t n, GkType t, cudaStream_t_c s);

void gk_encoder_forward(act16_t *out, const int *inp, const act16_t *wte, const act16_t *wpe,
                        int B, int T, int C, GkType t, cudaStream_t_c s);
void gk_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                         int T, int C, cudaStream_t_c s);
void gk_layernorm_forward(act16_t *out, float *mean, float *rstd, const act16_t *inp,
                          const act16_t *weight, const act16_t *bias, int N, int C,
                          GkType t, cudaStream_t_c s);
/* dinp += (fp32), dweight += and dbias += (fp32); dout fp32 */
void gk_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                           const act16_t *inp, const act16_t *weight, const float *mean,
                           const float *rstd, int N, int C, GkType t, cudaStream_t_c s);
void gk_add_bias(act16_t *out, const act16_t *bias, int N, int OC, GkType t,
                 cudaStream_t_c s);
/* dbias += column sums of dout (N, OC) */
void gk_bias_backward(float *dbias, const act16_t *dout, int N, int OC, GkType t,
                      cudaStream_t_c s);
void gk_gelu_forward(act16_t *out, const act16_t *inp, size_t n, GkType t, cudaStream_t_c s);
/* pre (N, OC) += bias, then out = gelu(pre): the bias add and GELU in one pass */
void gk_bias_gelu_forward(act16_t *pre, act16_t *out, const act16_t *bias, int N, int OC,
                          GkType t, cudaStream_t_c s);
/* dinp = gelu'(inp) * dout (overwrites) */
void gk_gelu_backward(act16_t *dinp, const act16_t *inp, const act16_t *dout, size_t n,
                      GkType t, cudaStream_t_c s);
void gk_residual_forward(act16_t *out, const act16_t *a, const act16_t *b, size_t n,
                         GkType t, cudaStream_t_c s);
/* A cuBLASLt context (handle, workspace, a cuBLAS handle for the fallback) for the two GEMMs
 * below; one per backend or test. */
void *gk_lt_create(void);
void gk_lt_destroy(void *lt);
/* out (N, OC) = inp (N, C) @ w (OC, C)^T (+ bias unless NULL). With pre not NULL, pre gets that
 * and out its GELU. The bias add and GELU run in cuBLASLt's epilogue where it has one for the
 * shape (returns 1), else after a plain GEMM in the kernels above (returns 0). */
int gk_matmul_forward(act16_t *out, act16_t *pre, const act16_t *inp, const act16_t *w,
                      const act16_t *bias, int N, int C, int OC, void *lt, GkType t,
                      cudaStream_t_c s);
/* dinp (N, C) = (dout (N, OC) @ w (OC, C)) * gelu'(pre (N, C)): the GELU's backward in the
 * GEMM's epilogue (returns 1), else after it (returns 0). */
int gk_matmul_backward_gelu(act16_t *dinp, const act16_t *dout, const act16_t *w,
                            const act16_t *pre, int N, int C, int OC, void *lt, GkType t,
                            cudaStream_t_c s);
/* Causal attention: out (B,T,C) from qkv (B,T,3C); lse (B,NH,T) kept for backward: the
 * multi-head case of llama_kernels.h's lk_attention_* (h = g = NH heads of C / NH). ws is of
 * gk_attention_workspace_bytes, linear in T: the chunked path's or, where the fused kernels run
 * (they take none), the fp32 (B,T,C) that GPT-2's lanes and their footprint count. blas is a
 * cublasHandle_t (the chunked path's). */
size_t gk_attention_workspace_bytes(int B, int T, int C, int NH);
void gk_attention_forward(act16_t *out, float *lse, const act16_t *qkv, int B, int T, int C,
                          int NH, void *ws, void *blas, GkType t, cudaStream_t_c s);
/* dqkv (overwritten) from dout; delta (B,NH,T) is scratch. The same bits on every run. */
void gk_attention_backward(act16_t *dqkv, float *delta, const act16_t *dout, const act16_t *out,
                           const act16_t *qkv, const float *lse, int B, int T, int C, int NH,
                           void *ws, void *blas, GkType t, cudaStream_t_c s);
/* Per row of logits (N rows of ld >= V values, the first V real): losses = logsumexp - the
 * target's logit; with backward, the row becomes d(loss_scale * mean loss)/d(logits) =
 * loss_scale * (softmax - onehot) / N, and 0 in the padding columns V..ld-1. A row whose
 * target is negative (masked, data.h's DATA_IGNORE) has loss 0 and, with backward, a zero row;
 * a caller that takes the mean over the counted rows only passes loss_scale * N / counted. */
void gk_softmax_crossentropy(float *losses, act16_t *logits, const int *targets, int N, int V,
                             int ld, int backward, float loss_scale, GkType t,
                             cudaStream_t_c s);
/* dst (rows, C) += src (rows, C), fp32 */
void gk_add_f32(float *dst, const float *src, size_t n, cudaStream_t_c s);
/* dst[0..n) = src[0..n), 16-bit values (the padded LM head's copy of the weights) */
void gk_copy16(act16_t *dst, const act16_t *src, size_t n, cudaStream_t_c s);
/* AdamW as adam_update_ref (same IEEE operations), writing the 16-bit weights (out) too. */
void gk_adamw(float *master, float *m, float *v, const float *grad, act16_t *out, size_t n,
              float beta1, float one_minus_beta1, float beta2, float one_minus_beta2,
              float eps, float decay, float neg_step_size, float inv_sqrt_bc2,
              float grad_scale, GkType t, cudaStream_t_c s);
/* The same with 16-bit gradients of type t (the pipeline's, which move in the weights' type). */
void gk_adamw_g16(float *master, float *m, float *v, const act16_t *grad, act16_t *out,
                  size_t n, float beta1, float one_minus_beta1, float beta2,
                  float one_minus_beta2, float eps, float decay, float neg_step_size,
                  float inv_sqrt_bc2, float grad_scale, GkType t, cudaStream_t_c s);
/* gk_adamw_g16 and the gradients' sum of squares in one pass, enqueued only: the sum (in
 * double, within rounding of adam_sum_sq) goes through sq_dev (one device double) to *sq_host
 * (pinned), there once the stream is done. The update happens whatever the sum is: a caller
 * whose policy skips a step on a non-finite gradient sums first (gk_sum_sq16). */
void gk_adamw_sq_g16(float *master, float *m, float *v, const act16_t *grad, act16_t *out,
                     size_t n, double *sq_dev, double *sq_host, float beta1,
                     float one_minus_beta1, float beta2, float one_minus_beta2, float eps,
                     float decay, float neg_step_size, float inv_sqrt_bc2, float grad_scale,
                     GkType t, cudaStream_t_c s);
/* Sum of squares of x[0..n) in double, through scratch (one device double the caller keeps);
 * waits for the stream. The order of the additions varies (atomics): within rounding of
 * adam_sum_sq, not bit for bit. */
double gk_sum_sq(const float *x, size_t n, double *scratch, cudaStream_t_c s);
/* The same of 16-bit values of type t. */
double gk_sum_sq16(const act16_t *x, size_t n, double *scratch, GkType t, cudaStream_t_c s);

/* For benchmarks: x[0..n) = hashed values uniform in [-0.5, 0.5), a function of (i, seed). */
void gk_fill_random(bf16_t *x, size_t n, unsigned seed);
/* For benchmarks: TFLOP/s of the bf16 GEMM out (N, OC) = inp (N, C) @ w (OC, C)^T as the
 * backend calls it (cublasGemmEx, fp32 compute, default algorithm; out's rows padded to 64
 * elements, as the LM head's logits are), median of reps timed with CUDA events on random
 * data, after sustain_s seconds of it back to back (0: none): the clocks a GPU settles to
 * under training's sustained load are lower than a burst of a few runs sees. -1 without host
 * memory for the samples. */
double gk_gemm_tflops(int N, int C, int OC, int reps, double sustain_s);
/* For benchmarks: milliseconds of the attention's forward and of its backward (the launchers
 * above, bf16) over (B, T) tokens of C channels in NH heads, medians of reps timed with CUDA
 * events on random data, after sustain_s seconds of the two back to back (0: none). 0, or
 * -ENOMEM without host memory (device memory as gk_alloc). */
int gk_attention_ms(int B, int T, int C, int NH, int reps, double sustain_s, double *fwd_ms,
                    double *bwd_ms);
/* For benchmarks: milliseconds of the residual add (gk_residual_forward, bf16: 6 bytes an
 * element read and written) over n elements, median of reps timed with CUDA events; -1
 * without host memory for the samples. */
double gk_residual_ms(size_t n, int reps);

#endif
