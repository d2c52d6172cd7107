/* gpu_family: the pieces every family's ops are built of (gpu_family.cuh): GEMMs in the
 * block's 16-bit type and where a parameter's gradient goes. */
#include "cuda_check.h"
#include "gpu_family.cuh"
#include "kernel_util.cuh"

cudaDataType gpu_type(const GpuBlock *b)
{
    return gk_cuda_type(b->t);
}

void gpu_gemm(GpuBlock *b, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
              const a16 *A, int lda, const a16 *B, int ldb, float beta, void *C,
              cudaDataType ctype, int ldc)
{
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(b->blas, ta, tb, m, n, k, &alpha, A, gpu_type(b), lda, B,
                              gpu_type(b), ldb, &beta, C, ctype, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

float *gpu_sum_at(const GpuBlock *b, void *dw, size_t at)
{
    if (b->grads == GPU_GRADS_F32)
        return (float *)dw + at;
    size_t base = 0;
    for (int i = 0; i < b->n_runs; i++) {
        const SumRun *r = &b->runs[i];
        if (at >= r->at && at < r->at + r->n)
            return gpu_buf<float>(b, LANE_SUMS) + base + (at - r->at);
        base += r->n;
    }
    return NULL; /* not a summed parameter: the family's mistake */
}

void gpu_matmul_backward(GpuBlock *b, void *dinp, cudaDataType dinp_type, void *dw, size_t w_at,
                         bool has_bias, size_t bias_at, const a16 *dout, const a16 *inp,
                         const a16 *w, int N, int C, int OC)
{
    if (dinp)
        gpu_gemm(b, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, w, C, dout, OC, 0.0f, dinp, dinp_type,
                 C);
    if (b->grads == GPU_GRADS_F32)
        gpu_gemm(b, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, 1.0f,
                 (float *)dw + w_at, CUDA_R_32F, C);
    else
        gpu_gemm(b, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, 0.0f,
                 (a16 *)dw + w_at, gpu_type(b), C);
    if (has_bias)
        gk_bias_backward(gpu_sum_at(b, dw, bias_at), dout, N, OC, b->t, gpu_stream(b));
}
