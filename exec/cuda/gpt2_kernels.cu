/* gpt2_kernels: CUDA kernels of the GPT-2 training step; see gpt2_kernels.h. Memory helpers,
 * encoder, layernorm, softmax + cross-entropy, AdamW and the gradient norm; the elementwise
 * kernels are in gpt2_pointwise.cu, attention in gpt2_attention.cu and flash_attention.cu.
 * Warp-per-row reductions, fp32 accumulation. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>

#include "cuda_check.h"
#include "kernel_timing.cuh"
#include "kernel_util.cuh"

/* ---- memory helpers ---------------------------------------------------------------------- */

extern "C" void *gk_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}

extern "C" void gk_free(void *p)
{
    if (p)
        CUDA_CHECK(cudaFree(p));
}

extern "C" void gk_upload(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

extern "C" void gk_download(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

extern "C" void gk_memset(void *dst, int value, size_t bytes)
{
    CUDA_CHECK(cudaMemset(dst, value, bytes));
}

extern "C" void *gk_blas_create(void)
{
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    return h;
}

extern "C" void gk_blas_destroy(void *blas)
{
    if (blas)
        cublasDestroy((cublasHandle_t)blas);
}

extern "C" void gk_sync(void)
{
    CUDA_CHECK(cudaDeviceSynchronize());
}

/* ---- encoder ----------------------------------------------------------------------------- */

template <typename A>
__global__ void encoder_forward_kernel(A *out, const int *inp, const A *wte, const A *wpe,
                                       int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C, c = i % C, t = bt % T;
        out[i] = from_f<A>(ld(wte + (size_t)inp[bt] * C + c) + ld(wpe + t * C + c));
    }
}

__global__ void encoder_backward_kernel(float *dwte, float *dwpe, const float *dout,
                                        const int *inp, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C, c = i % C, t = bt % T;
        atomicAdd(dwte + (size_t)inp[bt] * C + c, dout[i]);
        atomicAdd(dwpe + t * C + c, dout[i]);
    }
}

extern "C" void gk_encoder_forward(act16_t *out, const int *inp, const act16_t *wte,
                                   const act16_t *wpe, int B, int T, int C, GkType t,
                                   cudaStream_t_c s)
{
    GK_DISPATCH(t, encoder_forward_kernel<T16><<<blocks_for((size_t)B * T * C, 256), 256, 0,
                                                  S(s)>>>((T16 *)out, inp, (const T16 *)wte,
                                                          (const T16 *)wpe, B, T, C));
    LAUNCHED(encoder_forward_kernel);
}

extern "C" void gk_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
                                    int B, int T, int C, cudaStream_t_c s)
{
    encoder_backward_kernel<<<blocks_for((size_t)B * T * C, 256), 256, 0, S(s)>>>(
        dwte, dwpe, dout, inp, B, T, C);
    LAUNCHED(encoder_backward_kernel);
}

/* ---- layernorm: one warp per row ---------------------------------------------------------- */

template <typename T>
__global__ void layernorm_forward_kernel(T *out, float *mean, float *rstd, const T *inp,
                                         const T *w, const T *b, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const T *x = inp + (size_t)row * C;
    float sum = 0;
    for (int i = lane; i < C; i += 32)
        sum += ld(x + i);
    float m = warp_sum(sum) / C;
    float var = 0;
    for (int i = lane; i < C; i += 32) {
        float d = ld(x + i) - m;
        var += d * d;
    }
    float s = rsqrtf(warp_sum(var) / C + 1e-5f);
    T *o = out + (size_t)row * C;
    for (int i = lane; i < C; i += 32)
        o[i] = from_f<T>((ld(x + i) - m) * s * ld(w + i) + ld(b + i));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

/* dinp += d(loss)/d(inp): one warp per row, each lane W consecutive columns at a time. */
template <typename T, int W>
__global__ void layernorm_backward_kernel(float *dinp, const float *dout, const T *inp,
                                          const T *w, const float *mean, const float *rstd,
                                          int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float *d = dout + (size_t)row * C;
    const T *x = inp + (size_t)row * C;
    float m = mean[row], s = rstd[row];
    float a = 0, b = 0;
    for (int i = lane * W; i < C; i += 32 * W) {
        float xv[W], wv[W], dv[W];
        load<W>(x + i, xv), load<W>(w + i, wv), load<W>(d + i, dv);
        for (int k = 0; k < W; k++) {
            float norm = (xv[k] - m) * s, dnorm = wv[k] * dv[k];
            a += dnorm;
            b += dnorm * norm;
        }
    }
    a = warp_sum(a) / C;
    b = warp_sum(b) / C;
    float *dx = dinp + (size_t)row * C;
    for (int i = lane * W; i < C; i += 32 * W) {
        float xv[W], wv[W], dv[W], dxv[W];
        load<W>(x + i, xv), load<W>(w + i, wv), load<W>(d + i, dv), load<W>(dx + i, dxv);
        for (int k = 0; k < W; k++) {
            float norm = (xv[k] - m) * s;
            dxv[k] += (wv[k] * dv[k] - a - norm * b) * s;
        }
        store<W>(dx + i, dxv);
    }
}

/* dweight += column sums of dout * norm, dbias += column sums of dout. A block takes 32
 * columns (one per lane) and 256 rows (32 per warp), reduces across its warps in shared memory
 * and adds one partial per column: no atomics inside a block. */
template <typename T>
__global__ void layernorm_param_grad_kernel(float *dw, float *db, const float *dout,
                                            const T *inp, const float *mean, const float *rstd,
                                            int N, int C)
{
    __shared__ float part[2][8][32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int c = blockIdx.x * 32 + lane, row0 = blockIdx.y * 256 + warp * 32;
    float sw = 0, sb = 0;
    if (c < C)
        for (int r = row0; r < min(N, row0 + 32); r++) {
            float g = dout[(size_t)r * C + c];
            sw += g * (ld(inp + (size_t)r * C + c) - mean[r]) * rstd[r];
            sb += g;
        }
    part[0][warp][lane] = sw;
    part[1][warp][lane] = sb;
    __syncthreads();
    if (warp == 0 && c < C) {
        sw = sb = 0;
        for (int k = 0; k < 8; k++)
            sw += part[0][k][lane], sb += part[1][k][lane];
        atomicAdd(dw + c, sw);
        atomicAdd(db + c, sb);
    }
}

/* The same, one block a row (ROW_THREADS threads), the row kept in registers (P packs of 8 a
 * thread) and read once: the mean, then the variance around it, as the warp kernel takes
 * them. */
template <typename T, int P>
__global__ void layernorm_forward_row_kernel(T *out, float *mean, float *rstd, const T *inp,
                                             const T *w, const T *b, int C)
{
    const T *x = inp + (size_t)blockIdx.x * C;
    int packs = C / 8;
    float v[P][8], sum = 0;
    for (int k = 0; k < P; k++) {
        int q = threadIdx.x + k * ROW_THREADS;
        if (q < packs) {
            load<8>(x + 8 * q, v[k]);
            for (int j = 0; j < 8; j++)
                sum += v[k][j];
        }
    }
    float m = row_sum(sum) / C, var = 0;
    for (int k = 0; k < P; k++)
        if (threadIdx.x + k * ROW_THREADS < packs)
            for (int j = 0; j < 8; j++)
                var += (v[k][j] - m) * (v[k][j] - m);
    float s = rsqrtf(row_sum(var) / C + 1e-5f);
    T *o = out + (size_t)blockIdx.x * C;
    for (int k = 0; k < P; k++) {
        int q = threadIdx.x + k * ROW_THREADS;
        if (q < packs) {
            float wv[8], bv[8];
            load<8>(w + 8 * q, wv);
            load<8>(b + 8 * q, bv);
            for (int j = 0; j < 8; j++)
                v[k][j] = (v[k][j] - m) * s * wv[j] + bv[j];
            store<8>(o + 8 * q, v[k]);
        }
    }
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = m;
        rstd[blockIdx.x] = s;
    }
}

#define LN_ROW(P)                                                                             \
    layernorm_forward_row_kernel<T16, P><<<N, ROW_THREADS, 0, S(s)>>>(o, mean, rstd, x, w, b, C)

extern "C" void gk_layernorm_forward(act16_t *out, float *mean, float *rstd, const act16_t *inp,
                                     const act16_t *weight, const act16_t *bias, int N, int C,
                                     GkType t, cudaStream_t_c s)
{
    int P = vec8_ok((size_t)C, out, inp, weight, bias) ? row_packs(C) : 0;
    GK_DISPATCH(t, {
        T16 *o = (T16 *)out;
        const T16 *x = (const T16 *)inp, *w = (const T16 *)weight, *b = (const T16 *)bias;
        switch (P) {
        case 1: LN_ROW(1); break;
        case 2: LN_ROW(2); break;
        case 4: LN_ROW(4); break;
        case 8: LN_ROW(8); break;
        default: /* rows too wide to keep, or unaligned: a warp a row */
            layernorm_forward_kernel<T16><<<(N + 7) / 8, 256, 0, S(s)>>>(o, mean, rstd, x, w, b,
                                                                         N, C);
        }
    });
    LAUNCHED(layernorm_forward_kernel);
}

enum { LN_PART_ROWS = 16 }; /* rows a block of the backward's row kernel */

/* The backward a block per LN_PART_ROWS rows (ROW_THREADS threads, P packs of 8 a thread, as
 * the forward's row kernel): each row's input, output gradient and dinp read once and dinp
 * written once; the block's rows' weight and bias gradients summed in shared memory (a thread
 * its own columns) and added once a block (the warp path's layernorm_param_grad_kernel adds
 * once per 256 rows: atomics, in either order). */
template <typename T, int P>
__global__ void layernorm_backward_row_kernel(float *dinp, float *dweight, float *dbias,
                                              const float *dout, const T *inp, const T *w,
                                              const float *mean, const float *rstd, int N,
                                              int C)
{
    extern __shared__ float sums[]; /* the weight's gradient (C), then the bias's (C) */
    int packs = C / 8, row0 = blockIdx.x * LN_PART_ROWS, rows = min(LN_PART_ROWS, N - row0);
    for (int k = 0; k < P; k++) {
        int q = threadIdx.x + k * ROW_THREADS;
        if (q < packs)
            for (int j = 0; j < 8; j++)
                sums[8 * q + j] = sums[C + 8 * q + j] = 0;
    }
    for (int r = row0; r < row0 + rows; r++) {
        const T *x = inp + (size_t)r * C;
        const float *d = dout + (size_t)r * C;
        float *dx = dinp + (size_t)r * C;
        float xv[P][8], dv[P][8], dxv[P][8], m = mean[r], s = rstd[r], a = 0, b = 0;
        for (int k = 0; k < P; k++) {
            int q = threadIdx.x + k * ROW_THREADS;
            if (q < packs) {
                float wv[8];
                load<8>(x + 8 * q, xv[k]), load<8>(d + 8 * q, dv[k]);
                load<8>(dx + 8 * q, dxv[k]), load<8>(w + 8 * q, wv);
                for (int j = 0; j < 8; j++) {
                    float norm = (xv[k][j] - m) * s, dnorm = wv[j] * dv[k][j];
                    a += dnorm;
                    b += dnorm * norm;
                }
            }
        }
        float2 ab = row_sum2(a, b);
        a = ab.x / C, b = ab.y / C;
        for (int k = 0; k < P; k++) {
            int q = threadIdx.x + k * ROW_THREADS;
            if (q < packs) {
                float wv[8];
                load<8>(w + 8 * q, wv);
                for (int j = 0; j < 8; j++) {
                    float norm = (xv[k][j] - m) * s;
                    dxv[k][j] += (wv[j] * dv[k][j] - a - norm * b) * s;
                    sums[8 * q + j] += dv[k][j] * norm;
                    sums[C + 8 * q + j] += dv[k][j];
                }
                store<8>(dx + 8 * q, dxv[k]);
            }
        }
    }
    for (int k = 0; k < P; k++) {
        int q = threadIdx.x + k * ROW_THREADS;
        if (q < packs)
            for (int j = 0; j < 8; j++) {
                atomicAdd(dweight + 8 * q + j, sums[8 * q + j]);
                atomicAdd(dbias + 8 * q + j, sums[C + 8 * q + j]);
            }
    }
}

#define LN_BACKWARD_ROWS(P)                                                                   \
    layernorm_backward_row_kernel<T16, P><<<(N + LN_PART_ROWS - 1) / LN_PART_ROWS,           \
                                            ROW_THREADS, shared, S(s)>>>(                     \
        dinp, dweight, dbias, dout, x, w, mean, rstd, N, C);                                  \
    LAUNCHED(layernorm_backward_row_kernel)

extern "C" void gk_layernorm_backward(float *dinp, float *dweight, float *dbias,
                                      const float *dout, const act16_t *inp,
                                      const act16_t *weight, const float *mean,
                                      const float *rstd, int N, int C, GkType t,
                                      cudaStream_t_c s)
{
    /* 8 at a time when every row starts 16-byte aligned in all three tensors; the row kernel
     * where a thread keeps its packs and the two sums fit the default 48 KiB of shared memory
     * beside row_sum2's few bytes */
    bool vec = vec8_ok((size_t)C, dinp, dout, inp) && vec8_ok(8, weight);
    size_t shared = 2 * (size_t)C * sizeof(float);
    int P = vec && shared + 1024 <= 48 * 1024 ? row_packs(C) : 0;
    GK_DISPATCH(t, {
        const T16 *x = (const T16 *)inp, *w = (const T16 *)weight;
        switch (P) {
        case 1: LN_BACKWARD_ROWS(1); break;
        case 2: LN_BACKWARD_ROWS(2); break;
        case 4: LN_BACKWARD_ROWS(4); break;
        case 8: LN_BACKWARD_ROWS(8); break;
        default: /* a warp a row, then the weight's and bias's sums */
            if (vec)
                layernorm_backward_kernel<T16, 8><<<(N + 7) / 8, 256, 0, S(s)>>>(
                    dinp, dout, x, w, mean, rstd, N, C);
            else
                layernorm_backward_kernel<T16, 1><<<(N + 7) / 8, 256, 0, S(s)>>>(
                    dinp, dout, x, w, mean, rstd, N, C);
            LAUNCHED(layernorm_backward_kernel);
            dim3 grid((C + 31) / 32, (N + 255) / 256);
            layernorm_param_grad_kernel<T16><<<grid, 256, 0, S(s)>>>(dweight, dbias, dout, x,
                                                                     mean, rstd, N, C);
            LAUNCHED(layernorm_param_grad_kernel);
        }
    });
}

/* ---- fused softmax + cross-entropy: one block per row ------------------------------------- */

__device__ float block_reduce(float v, bool is_max)
{
    __shared__ float part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n = blockDim.x / 32;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads(); /* part[] may still be read by a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    v = lane < n ? part[lane] : (is_max ? -INFINITY : 0.0f);
    return is_max ? warp_max(v) : warp_sum(v);
}

/* The sum over the block in double, every thread gets it. */
__device__ double block_sum_f64(double v)
{
    __shared__ double part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); /* part[] may still be read by a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    v = lane < n ? part[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The loss as the CPU reference takes it (gpt2_ops.c, softmax_forward_ref): the exponentials
 * (expf, not the approximate __expf) summed in double, so at GPT-2's vocabulary the loss stays
 * within about an ulp of a float64 reference; a float sum there comes out short by several
 * 1e-6 of the loss. The gradient, rounded to 16 bits, takes __expf. */
template <typename T>
__global__ void softmax_crossentropy_kernel(float *losses, T *logits, const int *targets, int N,
                                            int V, int row_ld, int backward, float loss_scale)
{
    int row = blockIdx.x;
    T *x = logits + (size_t)row * row_ld;
    int target = targets[row];
    if (target < 0) { /* a masked target: no loss, no gradient (the whole block returns) */
        if (threadIdx.x == 0)
            losses[row] = 0.0f;
        for (int i = threadIdx.x; backward && i < row_ld; i += blockDim.x)
            x[i] = from_f<T>(0.0f);
        return;
    }
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        mx = fmaxf(mx, ld(x + i));
    mx = block_reduce(mx, true);
    double sum = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        sum += expf(ld(x + i) - mx);
    sum = block_sum_f64(sum);
    if (threadIdx.x == 0)
        losses[row] = (float)(log(sum) + (double)mx - (double)ld(x + target));
    __syncthreads(); /* everyone has read x[target] before it is overwritten */
    if (!backward)
        return;
    float inv = (float)(1.0 / sum), scale = loss_scale / N;
    for (int i = threadIdx.x; i < row_ld; i += blockDim.x) {
        float p = i < V ? __expf(ld(x + i) - mx) * inv : 0.0f;
        x[i] = from_f<T>(i < V ? (p - (i == target ? 1.0f : 0.0f)) * scale : 0.0f);
    }
}

extern "C" void gk_softmax_crossentropy(float *losses, act16_t *logits, const int *targets,
                                        int N, int V, int ld, int backward, float loss_scale,
                                        GkType t, cudaStream_t_c s)
{
    GK_DISPATCH(t, softmax_crossentropy_kernel<T16><<<N, 512, 0, S(s)>>>(
                       losses, (T16 *)logits, targets, N, V, ld, backward, loss_scale));
    LAUNCHED(softmax_crossentropy_kernel);
}

__global__ void add_f32_kernel(float *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

extern "C" void gk_add_f32(float *dst, const float *src, size_t n, cudaStream_t_c s)
{
    add_f32_kernel<<<blocks_for(n, 256), 256, 0, S(s)>>>(dst, src, n);
    LAUNCHED(add_f32_kernel);
}

extern "C" void gk_copy16(act16_t *dst, const act16_t *src, size_t n, cudaStream_t_c s)
{
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n * 2, cudaMemcpyDeviceToDevice, S(s)));
}

/* ---- AdamW and the gradient norm ---------------------------------------------------------- */

/* A gradient's value: fp32 as it is, a 16-bit one widened (exactly). */
__device__ __forceinline__ float grad_value(float g)
{
    return g;
}

template <typename G> __device__ __forceinline__ float grad_value(G g)
{
    return to_f(g);
}

/* The step's scalars (adam.h's AdamStep, as the kernels take them). */
struct AdamArgs {
    float b1, omb1, b2, omb2, eps, decay, nss, isb, scale;
};

/* One element's AdamW from its gradient g (as stored, widened): m, v and the master weight p
 * in place, exactly adam_update_ref's operations (exec/optim/adam.c). */
__device__ __forceinline__ void adamw_element(float g, float &m, float &v, float &p,
                                              const AdamArgs &a)
{
    float gs = g * a.scale;
    m = fmaf(a.b1, m, a.omb1 * gs);
    v = fmaf(a.b2, v, (a.omb2 * gs) * gs);
    float q = p * a.decay;
    float denom = fmaf(sqrtf(v), a.isb, a.eps);
    p = fmaf(a.nss, m / denom, q);
}

template <typename G, typename T>
__global__ void adamw_kernel(float *master, float *m, float *v, const G *grad, T *out,
                             size_t n, float b1, float omb1, float b2, float omb2, float eps,
                             float decay, float nss, float isb, float scale)
{
    AdamArgs a = {b1, omb1, b2, omb2, eps, decay, nss, isb, scale};
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float mi = m[i], vi = v[i], p = master[i];
        adamw_element(grad_value(grad[i]), mi, vi, p, a);
        m[i] = mi;
        v[i] = vi;
        master[i] = p;
        out[i] = from_f<T>(p);
    }
}

extern "C" void gk_adamw(float *master, float *m, float *v, const float *grad, act16_t *out,
                         size_t n, float beta1, float one_minus_beta1, float beta2,
                         float one_minus_beta2, float eps, float decay, float neg_step_size,
                         float inv_sqrt_bc2, float grad_scale, GkType t, cudaStream_t_c s)
{
    GK_DISPATCH(t, adamw_kernel<float, T16><<<blocks_for(n, 256), 256, 0, S(s)>>>(
                       master, m, v, grad, (T16 *)out, n, beta1, one_minus_beta1, beta2,
                       one_minus_beta2, eps, decay, neg_step_size, inv_sqrt_bc2, grad_scale));
    LAUNCHED(adamw_kernel);
}

extern "C" void gk_adamw_g16(float *master, float *m, float *v, const act16_t *grad,
                             act16_t *out, size_t n, float beta1, float one_minus_beta1,
                             float beta2, float one_minus_beta2, float eps, float decay,
                             float neg_step_size, float inv_sqrt_bc2, float grad_scale, GkType t,
                             cudaStream_t_c s)
{
    GK_DISPATCH(t, adamw_kernel<T16, T16><<<blocks_for(n, 256), 256, 0, S(s)>>>(
                       master, m, v, (const T16 *)grad, (T16 *)out, n, beta1, one_minus_beta1,
                       beta2, one_minus_beta2, eps, decay, neg_step_size, inv_sqrt_bc2,
                       grad_scale));
    LAUNCHED(adamw_kernel);
}

template <typename G> __global__ void sum_sq_kernel(double *out, const G *x, size_t n)
{
    double s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double g = grad_value(x[i]);
        s += g * g;
    }
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0)
        atomicAdd(out, s);
}

/* The sum into the one device double, then to the host once the stream is done. */
template <typename G> static double sum_sq(const G *x, size_t n, double *scratch, cudaStream_t s)
{
    double *d = scratch, h = 0;
    CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(double), s));
    unsigned blocks = blocks_for(n, 256);
    sum_sq_kernel<G><<<blocks < 1024 ? blocks : 1024, 256, 0, s>>>(d, x, n);
    LAUNCHED(sum_sq_kernel);
    CUDA_CHECK(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return h;
}

extern "C" double gk_sum_sq(const float *x, size_t n, double *scratch, cudaStream_t_c s)
{
    return sum_sq(x, n, scratch, S(s));
}

extern "C" double gk_sum_sq16(const act16_t *x, size_t n, double *scratch, GkType t,
                              cudaStream_t_c s)
{
    double h = 0;
    GK_DISPATCH(t, h = sum_sq((const T16 *)x, n, scratch, S(s)));
    return h;
}

/* AdamW over 16-bit gradients and the gradients' sum of squares in one pass (the pipeline's
 * GPU update): each thread 8 elements (16-byte loads and stores), a block for every 256 packs
 * so the whole array's loads are issued by resident blocks as they come (a few blocks looping
 * over it reached 0.80-0.92 of a device copy of the same bytes, a pack a thread 0.98:
 * MEASUREMENTS.md), the elements past the last 8 by block 0's first threads; the sum in double
 * per thread, then per block, one atomic add a block. Each element's operations are
 * adamw_kernel's. */
template <typename T>
__global__ void adamw_sq_kernel(float *__restrict__ master, float *__restrict__ m,
                                float *__restrict__ v, const T *__restrict__ grad,
                                T *__restrict__ out, size_t n, double *sq, float b1, float omb1,
                                float b2, float omb2, float eps, float decay, float nss,
                                float isb, float scale)
{
    AdamArgs a = {b1, omb1, b2, omb2, eps, decay, nss, isb, scale};
    double s = 0;
    size_t n8 = n / 8;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8;
         i += (size_t)gridDim.x * blockDim.x) {
        float g[8], mm[8], vv[8], pp[8];
        load<8>(grad + 8 * i, g);
        load<8>(m + 8 * i, mm);
        load<8>(v + 8 * i, vv);
        load<8>(master + 8 * i, pp);
        for (int k = 0; k < 8; k++) {
            s += (double)g[k] * g[k];
            adamw_element(g[k], mm[k], vv[k], pp[k], a);
        }
        store<8>(m + 8 * i, mm);
        store<8>(v + 8 * i, vv);
        store<8>(master + 8 * i, pp);
        store<8>(out + 8 * i, pp);
    }
    size_t t = 8 * n8 + threadIdx.x;
    if (blockIdx.x == 0 && t < n) {
        float g = to_f(grad[t]), mi = m[t], vi = v[t], p = master[t];
        s += (double)g * g;
        adamw_element(g, mi, vi, p, a);
        m[t] = mi;
        v[t] = vi;
        master[t] = p;
        out[t] = from_f<T>(p);
    }
    __shared__ double part[32];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0)
        part[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double b = 0;
        for (int w = 0; w < (int)blockDim.x / 32; w++)
            b += part[w];
        atomicAdd(sq, b);
    }
}

extern "C" void gk_adamw_sq_g16(float *master, float *m, float *v, const act16_t *grad,
                                act16_t *out, size_t n, double *sq_dev, double *sq_host,
                                float beta1, float one_minus_beta1, float beta2,
                                float one_minus_beta2, float eps, float decay,
                                float neg_step_size, float inv_sqrt_bc2, float grad_scale,
                                GkType t, cudaStream_t_c s)
{
    CUDA_CHECK(cudaMemsetAsync(sq_dev, 0, sizeof(double), S(s)));
    if (vec8_ok(8, master, m, v) && vec8_ok(8, grad, out) && n / 8 <= 0xffffffffu) {
        size_t packs = n / 8;
        unsigned grid = packs ? blocks_for(packs, 256) : 1;
        GK_DISPATCH(t, adamw_sq_kernel<T16><<<grid, 256, 0, S(s)>>>(
                           master, m, v, (const T16 *)grad, (T16 *)out, n, sq_dev, beta1,
                           one_minus_beta1, beta2, one_minus_beta2, eps, decay, neg_step_size,
                           inv_sqrt_bc2, grad_scale));
        LAUNCHED(adamw_sq_kernel);
    } else { /* unaligned: the sum, then the update, element by element */
        unsigned blocks = blocks_for(n, 256);
        GK_DISPATCH(t, {
            sum_sq_kernel<T16><<<blocks < 1024 ? blocks : 1024, 256, 0, S(s)>>>(
                sq_dev, (const T16 *)grad, n);
            LAUNCHED(sum_sq_kernel);
            adamw_kernel<T16, T16><<<blocks, 256, 0, S(s)>>>(
                master, m, v, (const T16 *)grad, (T16 *)out, n, beta1, one_minus_beta1,
                beta2, one_minus_beta2, eps, decay, neg_step_size, inv_sqrt_bc2, grad_scale);
        });
        LAUNCHED(adamw_kernel);
    }
    CUDA_CHECK(cudaMemcpyAsync(sq_host, sq_dev, sizeof(double), cudaMemcpyDeviceToHost, S(s)));
}

/* ---- benchmark helper ---------------------------------------------------------------------- */

__global__ void fill_random_kernel(bf16 *x, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 13;
        h *= 0x5bd1e995u;
        x[i] = __float2bfloat16_rn(((h >> 8) & 0xffff) / 65536.0f - 0.5f);
    }
}

extern "C" void gk_fill_random(bf16_t *x, size_t n, unsigned seed)
{
    fill_random_kernel<<<1024, 256>>>((bf16 *)x, n, seed);
    LAUNCHED(fill_random_kernel);
}

extern "C" int gk_attention_ms(int B, int T, int C, int NH, int reps, double sustain_s,
                               double *fwd_ms, double *bwd_ms)
{
    size_t N = (size_t)B * T;
    bf16 *qkv = (bf16 *)gk_alloc(3 * N * C * 2), *out = (bf16 *)gk_alloc(N * C * 2);
    bf16 *dout = (bf16 *)gk_alloc(N * C * 2), *dqkv = (bf16 *)gk_alloc(3 * N * C * 2);
    float *lse = (float *)gk_alloc((size_t)B * NH * T * 4);
    float *delta = (float *)gk_alloc((size_t)B * NH * T * 4);
    void *ws = gk_alloc(gk_attention_workspace_bytes(B, T, C, NH));
    gk_fill_random((bf16_t *)qkv, 3 * N * C, 3);
    gk_fill_random((bf16_t *)dout, N * C, 4);
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    auto forward = [&] {
        gk_attention_forward((act16_t *)out, lse, (const act16_t *)qkv, B, T, C, NH, ws, h,
                             GK_BF16, nullptr);
    };
    auto backward = [&] {
        gk_attention_backward((act16_t *)dqkv, delta, (const act16_t *)dout,
                              (const act16_t *)out, (const act16_t *)qkv, lse, B, T, C, NH, ws,
                              h, GK_BF16, nullptr);
    };
    sustain([&] { forward(), backward(); }, sustain_s);
    int rc = time_pair_ms(forward, backward, 2, reps, fwd_ms, bwd_ms);
    cublasDestroy(h);
    void *all[] = {qkv, out, dout, dqkv, lse, delta, ws};
    for (void *p : all)
        gk_free(p);
    return rc;
}

extern "C" double gk_residual_ms(size_t n, int reps)
{
    bf16 *a = (bf16 *)gk_alloc(n * 2), *b = (bf16 *)gk_alloc(n * 2), *o = (bf16 *)gk_alloc(n * 2);
    gk_fill_random((bf16_t *)a, n, 5);
    gk_fill_random((bf16_t *)b, n, 6);
    double t = time_ms(
        [&] {
            gk_residual_forward((act16_t *)o, (const act16_t *)a, (const act16_t *)b, n,
                                GK_BF16, nullptr);
        },
        3, reps);
    gk_free(a), gk_free(b), gk_free(o);
    return t;
}

extern "C" double gk_gemm_tflops(int N, int C, int OC, int reps, double sustain_s)
{
    bf16 *a = (bf16 *)gk_alloc((size_t)N * C * 2), *w = (bf16 *)gk_alloc((size_t)OC * C * 2);
    int ldo = (OC + 63) / 64 * 64; /* output rows padded as the executors pad the logits' */
    bf16 *o = (bf16 *)gk_alloc((size_t)N * ldo * 2);
    gk_fill_random((bf16_t *)a, (size_t)N * C, 1);
    gk_fill_random((bf16_t *)w, (size_t)OC * C, 2);
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    float alpha = 1, beta = 0;
    auto gemm = [&] {
        CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &alpha, w, CUDA_R_16BF,
                                  C, a, CUDA_R_16BF, C, &beta, o, CUDA_R_16BF, ldo,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    sustain(gemm, sustain_s);
    double ms = time_ms(gemm, 3, reps);
    cublasDestroy(h);
    gk_free(a), gk_free(w), gk_free(o);
    return ms > 0 ? 2.0 * N * C * (double)OC / (ms * 1e-3) / 1e12 : -1;
}
