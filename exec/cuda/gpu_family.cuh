/* gpu_family: inside gpu_block (gpu_block.h). The block's state, the shared pieces every
 * family's ops are built of (GEMMs and where their gradients go), and the table each family
 * fills (gpu_gpt2.cu, gpu_llama.cu). C++, for exec/cuda's .cu files only. */
#ifndef FUYOU_GPU_FAMILY_CUH
#define FUYOU_GPU_FAMILY_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "arch.h"
#include "gpt2_layout.h"
#include "gpu_block.h"
#include "llama_layout.h"
}

typedef act16_t a16;

/* A run of a block's parameters that kernels sum over tokens: offset and length in the
 * block's layout. */
struct SumRun {
    size_t at, n;
};
enum { GPU_MAX_SUM_RUNS = 6 };

struct GpuFamily;

struct GpuBlock {
    ModelConfig cfg;
    int B, T, N, C, Vp;
    GkType t;
    GpuGrads grads;
    bool whole_forwards;      /* gpu_block_whole_forwards */
    cudaStream_t s;
    cublasHandle_t blas;
    void *lt;                 /* cuBLASLt: the GEMMs with epilogues */
    void *mem;                /* the buffers, one allocation */
    void *buf[LANE_BUFFERS];
    const GpuFamily *fam;
    union {
        Gpt2BlockOffsets gpt2;
        LlamaBlockOffsets llama;
    } bo;
    union {
        Gpt2EdgeOffsets gpt2;
        LlamaEdgeOffsets llama;
    } eo;
    size_t lm_head;           /* the head's matrix in the edges' layout */
    SumRun runs[GPU_MAX_SUM_RUNS]; /* in layout order; the sums buffer holds them back to back */
    int n_runs;
};

struct GpuFamily {
    /* Offsets, sum runs, lm_head; anything the family uploads (0 or -errno with e). */
    int (*init)(GpuBlock *b, Err *e);
    void (*forward)(GpuBlock *b, int op, const a16 *w, a16 *const *t);
    void (*backward)(GpuBlock *b, int op, const a16 *w, a16 *const *t, void *dw);
    void (*embed_forward)(GpuBlock *b, const a16 *w, a16 *out);
    /* += into the edges' fp32 gradients */
    void (*embed_backward)(GpuBlock *b, float *dedges);
    void (*norm_forward)(GpuBlock *b, const a16 *w, const a16 *res);
    /* the residual gradient (zeroed by the caller) += and the norm's weights' into dedges */
    void (*norm_backward)(GpuBlock *b, const a16 *w, const a16 *res, float *dedges);
};

extern const GpuFamily gpu_gpt2, gpu_llama;

template <typename T> static inline T *gpu_buf(const GpuBlock *b, LaneBuffer k)
{
    return (T *)b->buf[k];
}

static inline cudaStream_t_c gpu_stream(const GpuBlock *b)
{
    return (cudaStream_t_c)b->s;
}

/* C (m x n, column-major) = op(A) op(B) + beta C: 16-bit inputs, fp32 compute. */
void gpu_gemm(GpuBlock *b, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
              const a16 *A, int lda, const a16 *B, int ldb, float beta, void *C,
              cudaDataType ctype, int ldc);
/* Where the gradient of the summed parameter at block offset `at` accumulates (fp32): dw's
 * (GPU_GRADS_F32) or the sums buffer's. */
float *gpu_sum_at(const GpuBlock *b, void *dw, size_t at);
/* The backward of out (N, OC) = inp (N, C) @ w (OC, C)^T + bias: dinp (N, C) = dout @ w in
 * dinp_type (dinp NULL: not computed), the matrix's gradient dout^T @ inp at block offset w_at
 * of dw (GpuGrads), and with has_bias the bias's, at bias_at, summed. */
void gpu_matmul_backward(GpuBlock *b, void *dinp, cudaDataType dinp_type, void *dw, size_t w_at,
                         bool has_bias, size_t bias_at, const a16 *dout, const a16 *inp,
                         const a16 *w, int N, int C, int OC);
/* The 16-bit type of the block's tensors, as cuBLAS names it. */
cudaDataType gpu_type(const GpuBlock *b);

#endif
