/* llama_kernels: CUDA kernels of the Llama block's own ops; see llama_kernels.h. The token
 * embedding, RMSNorm, the rotary embedding and SwiGLU, and the attention's benchmark helper
 * (its kernels are flash_attention.cu's and gpt2_attention.cu's). Memory-bound kernels move 8
 * 16-bit values (16 bytes) per access where sizes and pointers allow (W = 8) and one otherwise
 * (W = 1); the tests run both. */
#include <cub/device/device_radix_sort.cuh>
#include <errno.h>
#include <math.h>

#include "arch.h"
#include "cuda_check.h"
#include "kernel_timing.cuh"
#include "kernel_util.cuh"

extern "C" {
#include "llama_kernels.h"
}

/* Grid-stride loop over n groups of W elements: i is the group's index. */
#define FOR_EACH(i, n)                                                                        \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                    \
         i += (size_t)gridDim.x * blockDim.x)

static size_t round256(size_t n)
{
    return (n + 255) / 256 * 256;
}

/* W 16-bit values copied as they are. */
template <int W> __device__ __forceinline__ void copy16(uint16_t *dst, const uint16_t *src)
{
    if constexpr (W == 8)
        *(uint4 *)dst = *(const uint4 *)src;
    else
        *dst = *src;
}

/* ---- token embedding ---------------------------------------------------------------------- */

template <int W>
__global__ void embedding_forward_kernel(uint16_t *out, const int *tokens, const uint16_t *wte,
                                         int N, int C)
{
    int per_row = C / W;
    FOR_EACH(i, (size_t)N * per_row) {
        size_t row = i / per_row, c = (i % per_row) * W;
        copy16<W>(out + row * C + c, wte + (size_t)tokens[row] * C + c);
    }
}

extern "C" void lk_embedding_forward(act16_t *out, const int *tokens, const act16_t *wte, int N,
                                     int C, cudaStream_t_c s)
{
    size_t n = (size_t)N * C;
    if (vec8_ok((size_t)C, out, wte))
        embedding_forward_kernel<8><<<blocks_for(n / 8, 256), 256, 0, S(s)>>>(out, tokens, wte,
                                                                              N, C);
    else
        embedding_forward_kernel<1><<<blocks_for(n, 256), 256, 0, S(s)>>>(out, tokens, wte, N,
                                                                          C);
    LAUNCHED(embedding_forward_kernel);
}

/* The bits a token id of a vocabulary of V needs (the sort looks at no others). */
static int token_bits(int V)
{
    int b = 1;
    while (b < 31 && (1u << b) < (unsigned)V)
        b++;
    return b;
}

static size_t sort_temp_bytes(int N, int V)
{
    size_t bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const unsigned *)nullptr,
                                               (unsigned *)nullptr, (const int *)nullptr,
                                               (int *)nullptr, N, 0, token_bits(V)));
    return bytes;
}

/* The scratch's parts: sorted tokens, positions 0..N-1, positions in token order, the sort's
 * temporary storage. */
typedef struct EmbedScratch {
    unsigned *keys;
    int *pos, *sorted;
    void *temp;
    size_t temp_bytes;
} EmbedScratch;

static EmbedScratch carve_embed(void *scratch, int N, int V)
{
    char *p = (char *)scratch;
    size_t part = round256((size_t)N * 4);
    EmbedScratch e = {(unsigned *)p, (int *)(p + part), (int *)(p + 2 * part), p + 3 * part,
                      sort_temp_bytes(N, V)};
    return e;
}

extern "C" size_t lk_embedding_backward_scratch_bytes(int N, int V)
{
    return 3 * round256((size_t)N * 4) + sort_temp_bytes(N, V);
}

__global__ void iota_kernel(int *pos, int N)
{
    FOR_EACH(i, (size_t)N)
        pos[i] = (int)i;
}

/* Block x: sorted position k, the first of its token's run or nothing to do; block y: 256
 * columns. The block finds where the run ends (sorted: the token's entries in each window of
 * 256 are a prefix of it), then each thread sums its column over the run in position order (the
 * sort is stable), eight rows' loads in flight at a time, and adds the sum once. */
__global__ void embedding_backward_kernel(float *dwte, const float *dout, const unsigned *keys,
                                          const int *sorted, int N, int C)
{
    int k = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    unsigned tok = keys[k];
    if (k > 0 && keys[k - 1] == tok)
        return; /* the whole block: not the first of its run */
    int end = k + 1;
    for (;; end += blockDim.x) {
        int r = end + threadIdx.x;
        int same = __syncthreads_count(r < N && keys[r] == tok);
        if (same < (int)blockDim.x) {
            end += same;
            break;
        }
    }
    if (c >= C)
        return;
    float sum = 0.0f;
    int r = k;
    for (; r + 8 <= end; r += 8) {
        float v[8];
        for (int i = 0; i < 8; i++)
            v[i] = dout[(size_t)sorted[r + i] * C + c];
        for (int i = 0; i < 8; i++)
            sum += v[i];
    }
    for (; r < end; r++)
        sum += dout[(size_t)sorted[r] * C + c];
    dwte[(size_t)tok * C + c] += sum;
}

extern "C" void lk_embedding_backward(float *dwte, const float *dout, const int *tokens, int N,
                                      int C, int V, void *scratch, cudaStream_t_c s)
{
    if (N <= 0 || C <= 0)
        return;
    EmbedScratch e = carve_embed(scratch, N, V);
    iota_kernel<<<blocks_for((size_t)N, 256), 256, 0, S(s)>>>(e.pos, N);
    LAUNCHED(iota_kernel);
    /* token ids are non-negative: as unsigned keys they sort in the same order */
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(e.temp, e.temp_bytes, (const unsigned *)tokens,
                                               e.keys, e.pos, e.sorted, N, 0, token_bits(V),
                                               S(s)));
    dim3 grid((unsigned)N, (unsigned)((C + 255) / 256));
    embedding_backward_kernel<<<grid, 256, 0, S(s)>>>(dwte, dout, e.keys, e.sorted, N, C);
    LAUNCHED(embedding_backward_kernel);
}

/* ---- RMSNorm: one warp per row ------------------------------------------------------------ */

template <typename A, int W>
__global__ void rmsnorm_forward_kernel(A *out, float *rstd, const A *inp, const A *w, int N,
                                       int C, float eps)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const A *x = inp + (size_t)row * C;
    float ss = 0;
    for (int i = lane * W; i < C; i += 32 * W) {
        float v[W];
        load<W>(x + i, v);
        for (int k = 0; k < W; k++)
            ss += v[k] * v[k];
    }
    float s = 1.0f / sqrtf(warp_sum(ss) / C + eps);
    A *o = out + (size_t)row * C;
    for (int i = lane * W; i < C; i += 32 * W) {
        float v[W], wv[W];
        load<W>(x + i, v);
        load<W>(w + i, wv);
        for (int k = 0; k < W; k++)
            v[k] = (v[k] * s) * wv[k];
        store<W>(o + i, v);
    }
    if (lane == 0)
        rstd[row] = s;
}

/* The same, one block a row (ROW_THREADS threads), the row kept in registers: P packs of 8 a
 * thread, read once. */
template <typename A, int P>
__global__ void rmsnorm_forward_row_kernel(A *out, float *rstd, const A *inp, const A *w, int C,
                                           float eps)
{
    const A *x = inp + (size_t)blockIdx.x * C;
    int packs = C / 8;
    float v[P][8], ss = 0;
    for (int k = 0; k < P; k++) {
        int q = threadIdx.x + k * ROW_THREADS;
        if (q < packs) {
            load<8>(x + 8 * q, v[k]);
            for (int j = 0; j < 8; j++)
                ss += v[k][j] * v[k][j];
        }
    }
    float s = 1.0f / sqrtf(row_sum(ss) / C + eps);
    A *o = out + (size_t)blockIdx.x * C;
    for (int k = 0; k < P; k++) {
        int q = threadIdx.x + k * ROW_THREADS;
        if (q < packs) {
            float wv[8];
            load<8>(w + 8 * q, wv);
            for (int j = 0; j < 8; j++)
                v[k][j] = (v[k][j] * s) * wv[j];
            store<8>(o + 8 * q, v[k]);
        }
    }
    if (threadIdx.x == 0)
        rstd[blockIdx.x] = s;
}

#define ROW_KERNEL(kernel, P, ...)                                                            \
    kernel<T16, P><<<N, ROW_THREADS, 0, S(s)>>>(__VA_ARGS__)

extern "C" void lk_rmsnorm_forward(act16_t *out, float *rstd, const act16_t *inp,
                                   const act16_t *weight, int N, int C, float eps, GkType t,
                                   cudaStream_t_c s)
{
    bool vec = vec8_ok((size_t)C, out, inp, weight);
    int P = vec ? row_packs(C) : 0;
    GK_DISPATCH(t, {
        T16 *o = (T16 *)out;
        const T16 *x = (const T16 *)inp, *w = (const T16 *)weight;
        switch (P) {
        case 1: ROW_KERNEL(rmsnorm_forward_row_kernel, 1, o, rstd, x, w, C, eps); break;
        case 2: ROW_KERNEL(rmsnorm_forward_row_kernel, 2, o, rstd, x, w, C, eps); break;
        case 4: ROW_KERNEL(rmsnorm_forward_row_kernel, 4, o, rstd, x, w, C, eps); break;
        case 8: ROW_KERNEL(rmsnorm_forward_row_kernel, 8, o, rstd, x, w, C, eps); break;
        default: /* rows too wide to keep, or unaligned: a warp a row */
            if (vec)
                rmsnorm_forward_kernel<T16, 8><<<(N + 7) / 8, 256, 0, S(s)>>>(o, rstd, x, w, N,
                                                                              C, eps);
            else
                rmsnorm_forward_kernel<T16, 1><<<(N + 7) / 8, 256, 0, S(s)>>>(o, rstd, x, w, N,
                                                                              C, eps);
        }
    });
    LAUNCHED(rmsnorm_forward_kernel);
}

/* dinp += rstd * (dnorm - norm * mean(dnorm * norm)), norm = x * rstd, dnorm = w * dout: a
 * warp a row (rows too wide for the row kernel below, or unaligned). */
template <typename A, int W>
__global__ void rmsnorm_backward_kernel(float *dinp, const float *dout, const A *inp,
                                        const A *w, const float *rstd, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float *d = dout + (size_t)row * C;
    const A *x = inp + (size_t)row * C;
    float s = rstd[row], m = 0;
    for (int i = lane * W; i < C; i += 32 * W) {
        float xv[W], wv[W], dv[W];
        load<W>(x + i, xv), load<W>(w + i, wv), load<W>(d + i, dv);
        for (int k = 0; k < W; k++)
            m += wv[k] * dv[k] * (xv[k] * s);
    }
    m = warp_sum(m) / C;
    float *dx = dinp + (size_t)row * C;
    for (int i = lane * W; i < C; i += 32 * W) {
        float xv[W], wv[W], dv[W], dxv[W];
        load<W>(x + i, xv), load<W>(w + i, wv), load<W>(d + i, dv), load<W>(dx + i, dxv);
        for (int k = 0; k < W; k++)
            dxv[k] += (wv[k] * dv[k] - (xv[k] * s) * m) * s;
        store<W>(dx + i, dxv);
    }
}

/* The backward a block per RMS_PART_ROWS rows (ROW_THREADS threads, P packs of 8 a thread, as the
 * forward's row kernel): each row's input, output gradient and dinp read once and dinp written
 * once, the weight gradient of the block's rows summed in shared memory (a thread its own
 * columns, the rows in order) and written as one partial sum. */
template <typename A, int P>
__global__ void rmsnorm_backward_row_kernel(float *dinp, float *part, const float *dout,
                                            const A *inp, const A *w, const float *rstd, int N,
                                            int C)
{
    extern __shared__ float dw[]; /* C: this block's rows' weight gradient */
    int packs = C / 8, row0 = blockIdx.x * RMS_PART_ROWS, rows = min(RMS_PART_ROWS, N - row0);
    for (int k = 0; k < P; k++) {
        int q = threadIdx.x + k * ROW_THREADS;
        if (q < packs)
            for (int j = 0; j < 8; j++)
                dw[8 * q + j] = 0;
    }
    for (int r = row0; r < row0 + rows; r++) {
        const A *x = inp + (size_t)r * C;
        const float *d = dout + (size_t)r * C;
        float *dx = dinp + (size_t)r * C;
        float xv[P][8], dv[P][8], dxv[P][8], s = rstd[r], m = 0;
        for (int k = 0; k < P; k++) {
            int q = threadIdx.x + k * ROW_THREADS;
            if (q < packs) {
                float wv[8];
                load<8>(x + 8 * q, xv[k]), load<8>(d + 8 * q, dv[k]);
                load<8>(dx + 8 * q, dxv[k]), load<8>(w + 8 * q, wv);
                for (int j = 0; j < 8; j++)
                    m += wv[j] * dv[k][j] * (xv[k][j] * s);
            }
        }
        m = row_sum(m) / C;
        for (int k = 0; k < P; k++) {
            int q = threadIdx.x + k * ROW_THREADS;
            if (q < packs) {
                float wv[8];
                load<8>(w + 8 * q, wv);
                for (int j = 0; j < 8; j++) {
                    float norm = xv[k][j] * s;
                    dxv[k][j] += (wv[j] * dv[k][j] - norm * m) * s;
                    dw[8 * q + j] += norm * dv[k][j];
                }
                store<8>(dx + 8 * q, dxv[k]);
            }
        }
    }
    for (int k = 0; k < P; k++) {
        int q = threadIdx.x + k * ROW_THREADS;
        if (q < packs)
            store<8>(part + (size_t)blockIdx.x * C + 8 * q, dw + 8 * q);
    }
}

/* part[blockIdx.y][c] = sum over the block's RMS_PART_ROWS rows of dout * norm, a column a thread
 * (the warp path's weight gradient). */
template <typename A>
__global__ void rmsnorm_weight_part_kernel(float *part, const float *dout, const A *inp,
                                           const float *rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, row0 = blockIdx.y * RMS_PART_ROWS;
    if (c >= C)
        return;
    float sum = 0;
    for (int r = row0; r < min(N, row0 + RMS_PART_ROWS); r++) {
        size_t at = (size_t)r * C + c;
        sum += (ld(inp + at) * rstd[r]) * dout[at];
    }
    part[(size_t)blockIdx.y * C + c] = sum;
}

/* dweight[c] += the partial sums of column c, first block of rows first. */
__global__ void rmsnorm_weight_sum_kernel(float *dweight, const float *part, int blocks, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float total = 0;
    for (int b = 0; b < blocks; b++)
        total += part[(size_t)b * C + c];
    dweight[c] += total;
}

extern "C" size_t lk_rmsnorm_backward_scratch_bytes(int N, int C)
{
    return (size_t)((N + RMS_PART_ROWS - 1) / RMS_PART_ROWS) * C * sizeof(float);
}

#define RMS_BACKWARD_ROWS(P)                                                                  \
    rmsnorm_backward_row_kernel<T16, P><<<blocks, ROW_THREADS, C * sizeof(float), S(s)>>>(    \
        dinp, part, dout, x, w, rstd, N, C);                                                  \
    LAUNCHED(rmsnorm_backward_row_kernel)

extern "C" void lk_rmsnorm_backward(float *dinp, float *dweight, const float *dout,
                                    const act16_t *inp, const act16_t *weight,
                                    const float *rstd, int N, int C, void *scratch, GkType t,
                                    cudaStream_t_c s)
{
    if (N <= 0 || C <= 0)
        return;
    bool vec = vec8_ok((size_t)C, dinp, dout, inp) && vec8_ok(8, weight);
    int blocks = (N + RMS_PART_ROWS - 1) / RMS_PART_ROWS, P = vec ? row_packs(C) : 0;
    float *part = (float *)scratch;
    GK_DISPATCH(t, {
        const T16 *x = (const T16 *)inp, *w = (const T16 *)weight;
        switch (P) {
        case 1: RMS_BACKWARD_ROWS(1); break;
        case 2: RMS_BACKWARD_ROWS(2); break;
        case 4: RMS_BACKWARD_ROWS(4); break;
        case 8: RMS_BACKWARD_ROWS(8); break;
        default: /* rows too wide to keep, or unaligned: a warp a row, then the partial sums */
            if (vec)
                rmsnorm_backward_kernel<T16, 8><<<(N + 7) / 8, 256, 0, S(s)>>>(dinp, dout, x, w,
                                                                               rstd, N, C);
            else
                rmsnorm_backward_kernel<T16, 1><<<(N + 7) / 8, 256, 0, S(s)>>>(dinp, dout, x, w,
                                                                               rstd, N, C);
            LAUNCHED(rmsnorm_backward_kernel);
            dim3 grid((C + 255) / 256, blocks);
            rmsnorm_weight_part_kernel<T16><<<grid, 256, 0, S(s)>>>(part, dout, x, rstd, N, C);
            LAUNCHED(rmsnorm_weight_part_kernel);
        }
    });
    rmsnorm_weight_sum_kernel<<<(C + 255) / 256, 256, 0, S(s)>>>(dweight, part, blocks, C);
    LAUNCHED(rmsnorm_weight_sum_kernel);
}

/* ---- rotary position embedding ------------------------------------------------------------
 * One thread per W pairs (i, i + d/2) of one head of one token. Forward rotates by +angle,
 * backward by -angle; each product and each sum rounded on its own (__fmul_rn, __fadd_rn,
 * __fsub_rn are never contracted into a fused multiply-add), the reference's operations. v's
 * heads are copied, or left alone when the output is the input. */
template <typename A, int W, bool FORWARD>
__global__ void rope_kernel(A *out, const A *in, const float *cos_t, const float *sin_t,
                            int B, int T, int h, int g, int d, bool copy_v)
{
    int half = d / 2, chunks = half / W, heads = h + 2 * g;
    FOR_EACH(it, (size_t)B * T * heads * chunks) {
        int i0 = (int)(it % chunks) * W;
        size_t rest = it / chunks, bt = rest / heads;
        int j = (int)(rest % heads), t = (int)(bt % T);
        size_t at = (bt * heads + j) * d + i0;
        if (j >= h + g) {
            if (copy_v) {
                copy16<W>((uint16_t *)out + at, (const uint16_t *)in + at);
                copy16<W>((uint16_t *)out + at + half, (const uint16_t *)in + at + half);
            }
            continue;
        }
        float x1[W], x2[W], c[W], sn[W], o1[W], o2[W];
        load<W>(in + at, x1);
        load<W>(in + at + half, x2);
        load<W>(cos_t + (size_t)t * half + i0, c);
        load<W>(sin_t + (size_t)t * half + i0, sn);
        for (int k = 0; k < W; k++) {
            if (FORWARD) {
                o1[k] = __fsub_rn(__fmul_rn(x1[k], c[k]), __fmul_rn(x2[k], sn[k]));
                o2[k] = __fadd_rn(__fmul_rn(x2[k], c[k]), __fmul_rn(x1[k], sn[k]));
            } else {
                o1[k] = __fadd_rn(__fmul_rn(x1[k], c[k]), __fmul_rn(x2[k], sn[k]));
                o2[k] = __fsub_rn(__fmul_rn(x2[k], c[k]), __fmul_rn(x1[k], sn[k]));
            }
        }
        store<W>(out + at, o1);
        store<W>(out + at + half, o2);
    }
}

template <bool FORWARD>
static void rope(act16_t *out, const act16_t *in, const float *cos_t, const float *sin_t,
                 int B, int T, int h, int g, int d, GkType t, cudaStream_t s)
{
    if (d <= 0 || d % 2) {
        fprintf(stderr, "%s:%d: rope: head size %d is not even\n", __FILE__, __LINE__, d);
        abort();
    }
    int half = d / 2;
    bool vec = half % 8 == 0 && vec8_ok(8, out, in, cos_t, sin_t);
    size_t pairs = (size_t)B * T * (h + 2 * g) * half;
    bool copy_v = out != in;
    GK_DISPATCH(t, {
        T16 *o = (T16 *)out;
        const T16 *x = (const T16 *)in;
        if (vec)
            rope_kernel<T16, 8, FORWARD><<<blocks_for(pairs / 8, 256), 256, 0, s>>>(
                o, x, cos_t, sin_t, B, T, h, g, d, copy_v);
        else
            rope_kernel<T16, 1, FORWARD><<<blocks_for(pairs, 256), 256, 0, s>>>(
                o, x, cos_t, sin_t, B, T, h, g, d, copy_v);
    });
    LAUNCHED(rope_kernel);
}

extern "C" void lk_rope_forward(act16_t *out, const act16_t *qkv, const float *cos_t,
                                const float *sin_t, int B, int T, int h, int g, int d,
                                GkType t, cudaStream_t_c s)
{
    rope<true>(out, qkv, cos_t, sin_t, B, T, h, g, d, t, S(s));
}

extern "C" void lk_rope_backward(act16_t *dqkv, const act16_t *dout, const float *cos_t,
                                 const float *sin_t, int B, int T, int h, int g, int d,
                                 GkType t, cudaStream_t_c s)
{
    rope<false>(dqkv, dout, cos_t, sin_t, B, T, h, g, d, t, S(s));
}

/* ---- SwiGLU --------------------------------------------------------------------------------
 * One thread per W columns of a row: gate at [row][c], up at [row][F + c]. silu(x) =
 * x / (1 + exp(-x)), silu'(x) = sigmoid(x) (1 + x (1 - sigmoid(x))), as llama_ops.c. A thread
 * reads its gate and up before it writes, so the backward may overwrite gate_up. */
template <typename A, int W>
__global__ void swiglu_forward_kernel(A *out, const A *gate_up, int N, int F)
{
    int chunks = F / W;
    FOR_EACH(it, (size_t)N * chunks) {
        size_t row = it / chunks, c = (it % chunks) * W;
        float x[W], u[W];
        load<W>(gate_up + row * 2 * F + c, x);
        load<W>(gate_up + row * 2 * F + F + c, u);
        for (int k = 0; k < W; k++)
            x[k] = x[k] / (1.0f + expf(-x[k])) * u[k];
        store<W>(out + row * F + c, x);
    }
}

template <typename A, int W>
__global__ void swiglu_backward_kernel(A *dgate_up, const A *dout, const A *gate_up, int N,
                                       int F)
{
    int chunks = F / W;
    FOR_EACH(it, (size_t)N * chunks) {
        size_t row = it / chunks, c = (it % chunks) * W;
        float x[W], u[W], dy[W];
        load<W>(gate_up + row * 2 * F + c, x);
        load<W>(gate_up + row * 2 * F + F + c, u);
        load<W>(dout + row * F + c, dy);
        for (int k = 0; k < W; k++) {
            float e = expf(-x[k]), sig = 1.0f / (1.0f + e), silu = x[k] / (1.0f + e);
            float dgate = dy[k] * u[k] * (sig * (1.0f + x[k] * (1.0f - sig)));
            u[k] = dy[k] * silu; /* dup */
            x[k] = dgate;
        }
        store<W>(dgate_up + row * 2 * F + c, x);
        store<W>(dgate_up + row * 2 * F + F + c, u);
    }
}

/* The same 8 at a time, a row per grid row: no division per pack. The backward may run in
 * place (dgate_up the gate_up it reads): each thread reads its packs before it writes them. */
template <typename A>
__global__ void swiglu_forward_rows_kernel(A *out, const A *gate_up, int F)
{
    size_t row = blockIdx.y, c = 8 * ((size_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= (size_t)F)
        return;
    float x[8], u[8];
    load<8>(gate_up + row * 2 * F + c, x);
    load<8>(gate_up + row * 2 * F + F + c, u);
    for (int k = 0; k < 8; k++)
        x[k] = x[k] / (1.0f + expf(-x[k])) * u[k];
    store<8>(out + row * F + c, x);
}

template <typename A>
__global__ void swiglu_backward_rows_kernel(A *dgate_up, const A *dout, const A *gate_up, int F)
{
    size_t row = blockIdx.y, c = 8 * ((size_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= (size_t)F)
        return;
    float x[8], u[8], dy[8];
    load<8>(gate_up + row * 2 * F + c, x);
    load<8>(gate_up + row * 2 * F + F + c, u);
    load<8>(dout + row * F + c, dy);
    for (int k = 0; k < 8; k++) {
        float e = expf(-x[k]), sig = 1.0f / (1.0f + e), silu = x[k] / (1.0f + e);
        float dgate = dy[k] * u[k] * (sig * (1.0f + x[k] * (1.0f - sig)));
        u[k] = dy[k] * silu; /* dup */
        x[k] = dgate;
    }
    store<8>(dgate_up + row * 2 * F + c, x);
    store<8>(dgate_up + row * 2 * F + F + c, u);
}

/* A grid of rows (at most 65535 a launch in y) and F / 8 packs across. */
static bool swiglu_rows_ok(int N)
{
    return N > 0 && N <= 65535;
}

extern "C" void lk_swiglu_forward(act16_t *out, const act16_t *gate_up, int N, int F, GkType t,
                                  cudaStream_t_c s)
{
    size_t n = (size_t)N * F;
    bool vec = vec8_ok((size_t)F, out, gate_up);
    GK_DISPATCH(t, {
        if (vec && swiglu_rows_ok(N))
            swiglu_forward_rows_kernel<T16><<<dim3((F / 8 + 255) / 256, N), 256, 0, S(s)>>>(
                (T16 *)out, (const T16 *)gate_up, F);
        else if (vec)
            swiglu_forward_kernel<T16, 8><<<blocks_for(n / 8, 256), 256, 0, S(s)>>>(
                (T16 *)out, (const T16 *)gate_up, N, F);
        else
            swiglu_forward_kernel<T16, 1><<<blocks_for(n, 256), 256, 0, S(s)>>>(
                (T16 *)out, (const T16 *)gate_up, N, F);
    });
    LAUNCHED(swiglu_forward_kernel);
}

extern "C" void lk_swiglu_backward(act16_t *dgate_up, const act16_t *dout,
                                   const act16_t *gate_up, int N, int F, GkType t,
                                   cudaStream_t_c s)
{
    size_t n = (size_t)N * F;
    bool vec = vec8_ok((size_t)F, dgate_up, dout, gate_up);
    GK_DISPATCH(t, {
        if (vec && swiglu_rows_ok(N))
            swiglu_backward_rows_kernel<T16><<<dim3((F / 8 + 255) / 256, N), 256, 0, S(s)>>>(
                (T16 *)dgate_up, (const T16 *)dout, (const T16 *)gate_up, F);
        else if (vec)
            swiglu_backward_kernel<T16, 8><<<blocks_for(n / 8, 256), 256, 0, S(s)>>>(
                (T16 *)dgate_up, (const T16 *)dout, (const T16 *)gate_up, N, F);
        else
            swiglu_backward_kernel<T16, 1><<<blocks_for(n, 256), 256, 0, S(s)>>>(
                (T16 *)dgate_up, (const T16 *)dout, (const T16 *)gate_up, N, F);
    });
    LAUNCHED(swiglu_backward_kernel);
}

/* ---- benchmark helper ---------------------------------------------------------------------- */

extern "C" int lk_attention_ms(int B, int T, int h, int g, int d, int reps, double *fwd_ms,
                               double *bwd_ms)
{
    size_t N = (size_t)B * T, nq = N * (h + 2 * g) * d, no = N * h * d;
    size_t nl = (size_t)B * h * T;
    act16_t *qkv = (act16_t *)gk_alloc(nq * 2), *out = (act16_t *)gk_alloc(no * 2);
    act16_t *dout = (act16_t *)gk_alloc(no * 2), *dqkv = (act16_t *)gk_alloc(nq * 2);
    float *lse = (float *)gk_alloc(nl * 4), *delta = (float *)gk_alloc(nl * 4);
    void *ws = gk_alloc(lk_attention_workspace_bytes(B, T, h, g, d));
    gk_fill_random((bf16_t *)qkv, nq, 3);
    gk_fill_random((bf16_t *)dout, no, 4);
    cublasHandle_t blas;
    CUBLAS_CHECK(cublasCreate(&blas));
    int rc = time_pair_ms(
        [&] { lk_attention_forward(out, lse, qkv, B, T, h, g, d, ws, blas, GK_BF16, nullptr); },
        [&] {
            lk_attention_backward(dqkv, delta, dout, out, qkv, lse, B, T, h, g, d, ws, blas,
                                  GK_BF16, nullptr);
        },
        2, reps, fwd_ms, bwd_ms);
    cublasDestroy(blas);
    void *all[] = {qkv, out, dout, dqkv, lse, delta, ws};
    for (void *p : all)
        gk_free(p);
    return rc;
}
