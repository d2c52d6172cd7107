/* gpt2_kernels: the CUDA kernels of the GPT-2 step, with C launchers on device pointers, checked
 * against exec/cpu/gpt2_ops (the references) by tests/test_cuda_gpt2.c. Activations are bf16
 * (bf16_t here, __nv_bfloat16 on the device), statistics, losses and parameter gradients fp32;
 * all arithmetic accumulates in fp32. Attention is fused (flash_attention.h) for head sizes 32,
 * 64 and 128 and works in query chunks on cuBLAS otherwise; neither keeps a T x T buffer (the
 * row log-sum-exp is kept for backward), so its memory grows linearly with T. Every
 * launcher runs on `stream` and checks the launch. */
#ifndef FUYOU_GPT2_KERNELS_H
#define FUYOU_GPT2_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef uint16_t bf16_t;
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
/* fp32 <-> bf16 (round to nearest even) on the device */
void gk_f32_to_bf16(bf16_t *out, const float *in, size_t n, cudaStream_t_c s);
void gk_bf16_to_f32(float *out, const bf16_t *in, size_t n, cudaStream_t_c s);

void gk_encoder_forward(bf16_t *out, const int *inp, const bf16_t *wte, const bf16_t *wpe,
                        int B, int T, int C, cudaStream_t_c s);
void gk_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                         int T, int C, cudaStream_t_c s);
void gk_layernorm_forward(bf16_t *out, float *mean, float *rstd, const bf16_t *inp,
                          const bf16_t *weight, const bf16_t *bias, int N, int C,
                          cudaStream_t_c s);
/* dinp += (fp32), dweight += and dbias += (fp32); dout fp32 */
void gk_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                           const bf16_t *inp, const bf16_t *weight, const float *mean,
                           const float *rstd, int N, int C, cudaStream_t_c s);
void gk_add_bias(bf16_t *out, const bf16_t *bias, int N, int OC, cudaStream_t_c s);
/* dbias += column sums of dout (N, OC) */
void gk_bias_backward(float *dbias, const bf16_t *dout, int N, int OC, cudaStream_t_c s);
void gk_gelu_forward(bf16_t *out, const bf16_t *inp, size_t n, cudaStream_t_c s);
/* pre (N, OC) += bias, then out = gelu(pre): the bias add and GELU in one pass */
void gk_bias_gelu_forward(bf16_t *pre, bf16_t *out, const bf16_t *bias, int N, int OC,
                          cudaStream_t_c s);
/* dinp = gelu'(inp) * dout (overwrites) */
void gk_gelu_backward(bf16_t *dinp, const bf16_t *inp, const bf16_t *dout, size_t n,
                      cudaStream_t_c s);
void gk_residual_forward(bf16_t *out, const bf16_t *a, const bf16_t *b, size_t n,
                         cudaStream_t_c s);
/* Causal attention: out (B,T,C) from qkv (B,T,3C); lse (B,NH,T) kept for backward. ws is of
 * gk_attention_workspace_bytes, linear in T; blas is a cublasHandle_t (the chunked path's). */
size_t gk_attention_workspace_bytes(int B, int T, int C, int NH);
void gk_attention_forward(bf16_t *out, float *lse, const bf16_t *qkv, int B, int T, int C,
                          int NH, void *ws, void *blas, cudaStream_t_c s);
/* dqkv (overwritten) from dout; delta (B,NH,T) is scratch. */
void gk_attention_backward(bf16_t *dqkv, float *delta, const bf16_t *dout, const bf16_t *out,
                           const bf16_t *qkv, const float *lse, int B, int T, int C, int NH,
                           void *ws, void *blas, cudaStream_t_c s);
/* Per row of logits (N rows of ld >= V values, the first V real): losses = logsumexp - the
 * target's logit; with backward, the row becomes d(mean loss)/d(logits) = (softmax - onehot) /
 * N, and 0 in the padding columns V..ld-1. */
void gk_softmax_crossentropy(float *losses, bf16_t *logits, const int *targets, int N, int V,
                             int ld, int backward, cudaStream_t_c s);
/* dst (rows, C) += src (rows, C), fp32 */
void gk_add_f32(float *dst, const float *src, size_t n, cudaStream_t_c s);
/* dst rows 0..rows-1 of width C = src rows (bf16 copy), for the padded LM head */
void gk_copy_bf16(bf16_t *dst, const bf16_t *src, size_t n, cudaStream_t_c s);
/* AdamW as adam_update_ref (same IEEE operations), writing the bf16 weights too. */
void gk_adamw(float *master, float *m, float *v, const float *grad, bf16_t *out, size_t n,
              float beta1, float one_minus_beta1, float beta2, float one_minus_beta2,
              float eps, float decay, float neg_step_size, float inv_sqrt_bc2,
              float grad_scale, cudaStream_t_c s);
/* Sum of squares of x[0..n) in double, through scratch (one device double the caller keeps);
 * waits for the stream. */
double gk_sum_sq(const float *x, size_t n, double *scratch, cudaStream_t_c s);

/* For benchmarks: x[0..n) = hashed values uniform in [-0.5, 0.5), a function of (i, seed). */
void gk_fill_random(bf16_t *x, size_t n, unsigned seed);
/* For benchmarks: TFLOP/s of the bf16 GEMM out (N, OC) = inp (N, C) @ w (OC, C)^T as the
 * backend calls it (cublasGemmEx, fp32 compute, default algorithm), median of reps timed with
 * CUDA events on random data. */
double gk_gemm_tflops(int N, int C, int OC, int reps);

#endif
