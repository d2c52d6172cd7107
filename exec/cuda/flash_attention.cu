/* flash_attention: fused causal attention on mma.sync tensor cores; see flash_attention.h.
 *
 * Fragment layouts are those of mma.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"):
 * with g = lane / 4 and t = lane % 4, an accumulator tile holds rows g and g + 8, columns 2t and
 * 2t + 1. Two neighbouring accumulator tiles of 16 x 8, rounded to 16 bits, are exactly the A
 * operand of the next product over those 16 columns, so probabilities never leave registers.
 * Tiles live in shared memory with rows padded by 8 elements (16 bytes), which makes the eight
 * row addresses of every ldmatrix fall in distinct bank groups. Scores are kept in log2 units
 * (scale * log2(e) folded in) so the exponentials are exp2. In the kernels nh and nkv count the
 * query and kv heads (flash_attention.h's h and g) and group = nh / nkv. */
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "cuda_check.h"
#include "kernel_util.cuh"

extern "C" {
#include "arch.h"
#include "flash_attention.h"
}

enum { FA_TILE = 64, FA_THREADS = 128, FA_PAD = 8 };
#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

/* ---- tensor-core and copy primitives ------------------------------------------------------ */

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, asynchronously; zeros when !valid (src is not read then). */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

/* Wait until at most n groups are pending. */
template <int n> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(n));
}

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* c += a (16x16, row) * b (16x8, col), 16-bit A in, fp32 accumulate */
template <typename A>
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0,
                                         uint32_t b1)
{
    if constexpr (std::is_same_v<A, f16>)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <typename A> __device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    typename Pair2<A>::type v = from_f2<A>(lo, hi);
    return *(uint32_t *)&v;
}

/* The A operand over accumulator tiles n and n + 1 (16 rows x 16 columns). */
template <typename A>
__device__ __forceinline__ void acc_to_a(uint32_t a[4], const float lo[4], const float hi[4])
{
    a[0] = pack2<A>(lo[0], lo[1]);
    a[1] = pack2<A>(lo[2], lo[3]);
    a[2] = pack2<A>(hi[0], hi[1]);
    a[3] = pack2<A>(hi[2], hi[3]);
}

/* ldmatrix lane addresses for a 16 x 16 block at (r0, c0) of a row-major tile with ld:
 * - a_row: A operand stored [m][k];
 * - b_nk:  B operand stored [n][k] (two n-tiles of 8, one k-step);
 * - b_kn:  B stored [k][n] (two n-tiles, with .trans). */
template <typename A>
__device__ __forceinline__ const A *a_row(const A *s, int ld, int r0, int c0, int lane)
{
    return s + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + c0 + (lane >> 4) * 8;
}
template <typename A>
__device__ __forceinline__ const A *b_nk(const A *s, int ld, int n0, int k0, int lane)
{
    return s + (n0 + (lane & 7) + (lane >> 4) * 8) * ld + k0 + ((lane >> 3) & 1) * 8;
}
template <typename A>
__device__ __forceinline__ const A *b_kn(const A *s, int ld, int k0, int n0, int lane)
{
    return s + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0 + (lane >> 4) * 8;
}

/* Rows row0 .. row0 + 63 of a (T x D) slice with row stride ld into a padded tile; rows past T
 * are zeros. All threads of the block take part; the copies are asynchronous. */
template <int D, typename A>
__device__ __forceinline__ void load_tile(A *tile, const A *src, int row0, int T, int ld)
{
    constexpr int chunks = D / 8;
    for (int i = threadIdx.x; i < FA_TILE * chunks; i += FA_THREADS) {
        int r = i / chunks, c = (i % chunks) * 8;
        bool ok = row0 + r < T;
        cp_async16(tile + r * (D + FA_PAD) + c, ok ? src + (size_t)(row0 + r) * ld + c : src,
                   ok);
    }
}

/* (lo, hi) reduced over the four lanes of a quad (the lanes that share a row). */
__device__ __forceinline__ float quad_max(float v)
{
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* Where one (batch row, head) of a fused qkv row starts: q heads at j d, k heads at (nh + kv) d,
 * v heads at (nh + nkv + kv) d, rows (nh + 2 nkv) d apart. */
struct QkvRows {
    int rs; /* row stride of qkv and dqkv */
    int os; /* row stride of out and dout: nh d */
    size_t b0; /* batch row b's first element in qkv */
};

template <int D> __device__ __forceinline__ QkvRows qkv_rows(int b, int T, int nh, int nkv)
{
    QkvRows r;
    r.rs = (nh + 2 * nkv) * D;
    r.os = nh * D;
    r.b0 = (size_t)b * T * r.rs;
    return r;
}

/* ---- forward ------------------------------------------------------------------------------
 * Block: 64 query rows of one (b, query head j), four warps of 16 rows, reading kv head
 * j / group. Key tiles 0 .. qb are double buffered: tile j + 1 loads while tile j is used. The
 * heaviest query tiles (most keys) are scheduled first. */
template <typename A, int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_fwd_kernel(A *out, float *lse, const A *qkv, int T, int nh, int nkv, float scale_log2)
{
    constexpr int LD = D + FA_PAD, TS = FA_TILE * LD;
    extern __shared__ __align__(16) unsigned char smem[];
    A *sQ = (A *)smem, *sK = sQ + TS, *sV = sK + 2 * TS;
    int qb = gridDim.x - 1 - blockIdx.x, bh = blockIdx.y, b = bh / nh, j = bh % nh;
    int kv = j / (nh / nkv);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    QkvRows r = qkv_rows<D>(b, T, nh, nkv);
    const A *qbase = qkv + r.b0 + j * D, *kbase = qkv + r.b0 + (nh + kv) * D;
    const A *vbase = qkv + r.b0 + (nh + nkv + kv) * D;

    load_tile<D>(sQ, qbase, qb * FA_TILE, T, r.rs);
    load_tile<D>(sK, kbase, 0, T, r.rs);
    load_tile<D>(sV, vbase, 0, T, r.rs);
    cp_async_commit();

    uint32_t qf[D / 16][4];
    float o[D / 8][4];
    for (int n = 0; n < D / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    int row0 = qb * FA_TILE + warp * 16 + g; /* this thread's rows: row0 and row0 + 8 */

    for (int kb = 0; kb <= qb; kb++) {
        int buf = kb & 1;
        if (kb < qb) {
            load_tile<D>(sK + (buf ^ 1) * TS, kbase, (kb + 1) * FA_TILE, T, r.rs);
            load_tile<D>(sV + (buf ^ 1) * TS, vbase, (kb + 1) * FA_TILE, T, r.rs);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (kb == 0)
            for (int kk = 0; kk < D / 16; kk++)
                ldsm_x4(qf[kk], a_row(sQ, LD, warp * 16, kk * 16, lane));
        const A *k = sK + buf * TS, *v = sV + buf * TS;

        /* S = Q K^T for this warp's 16 rows x 64 keys */
        float s[FA_TILE / 8][4];
        for (int n = 0; n < FA_TILE / 8; n++)
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        for (int kk = 0; kk < D / 16; kk++)
            for (int p = 0; p < FA_TILE / 16; p++) {
                uint32_t rr[4];
                ldsm_x4(rr, b_nk(k, LD, p * 16, kk * 16, lane));
                mma16816<A>(s[2 * p], qf[kk], rr[0], rr[1]);
                mma16816<A>(s[2 * p + 1], qf[kk], rr[2], rr[3]);
            }

        /* scale, causal mask (diagonal tile only: earlier tiles are wholly visible), online
         * softmax. Every row sees key 0 in tile 0, so the running max is finite from then on. */
        float mx0 = m0, mx1 = m1;
        for (int n = 0; n < FA_TILE / 8; n++)
            for (int e = 0; e < 4; e++) {
                int key = kb * FA_TILE + n * 8 + 2 * t + (e & 1), row = row0 + (e >> 1) * 8;
                float x = s[n][e] * scale_log2;
                if (kb == qb && key > row)
                    x = -INFINITY;
                s[n][e] = x;
                if (e < 2)
                    mx0 = fmaxf(mx0, x);
                else
                    mx1 = fmaxf(mx1, x);
            }
        mx0 = quad_max(mx0);
        mx1 = quad_max(mx1);
        float a0 = exp2f(m0 - mx0), a1 = exp2f(m1 - mx1);
        m0 = mx0;
        m1 = mx1;
        float sum0 = 0.0f, sum1 = 0.0f;
        for (int n = 0; n < FA_TILE / 8; n++) {
            s[n][0] = exp2f(s[n][0] - m0);
            s[n][1] = exp2f(s[n][1] - m0);
            s[n][2] = exp2f(s[n][2] - m1);
            s[n][3] = exp2f(s[n][3] - m1);
            sum0 += s[n][0] + s[n][1];
            sum1 += s[n][2] + s[n][3];
        }
        l0 = l0 * a0 + sum0; /* per-thread partial sums: the quad's share one rescaling */
        l1 = l1 * a1 + sum1;
        for (int n = 0; n < D / 8; n++) {
            o[n][0] *= a0, o[n][1] *= a0;
            o[n][2] *= a1, o[n][3] *= a1;
        }

        /* O += P V */
        for (int kk = 0; kk < FA_TILE / 16; kk++) {
            uint32_t a[4];
            acc_to_a<A>(a, s[2 * kk], s[2 * kk + 1]);
            for (int p = 0; p < D / 16; p++) {
                uint32_t rr[4];
                ldsm_x4_t(rr, b_kn(v, LD, kk * 16, p * 16, lane));
                mma16816<A>(o[2 * p], a, rr[0], rr[1]);
                mma16816<A>(o[2 * p + 1], a, rr[2], rr[3]);
            }
        }
        __syncthreads(); /* the next iteration's copies overwrite the other buffer */
    }

    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
    for (int half = 0; half < 2; half++) {
        int row = row0 + half * 8;
        if (row >= T)
            continue;
        float inv = half ? inv1 : inv0;
        A *dst = out + ((size_t)b * T + row) * r.os + j * D + 2 * t;
        for (int n = 0; n < D / 8; n++)
            *(typename Pair2<A>::type *)(dst + n * 8) =
                from_f2<A>(o[n][2 * half] * inv, o[n][2 * half + 1] * inv);
        if (t == 0)
            lse[(size_t)bh * T + row] = ((half ? m1 : m0) + log2f(half ? l1 : l0)) * FA_LN2;
    }
}

/* ---- backward: dK and dV ------------------------------------------------------------------
 * Block: 64 keys of one (b, kv head), four warps of 16 keys. It walks the group's query heads
 * in order and, for each, query tiles kb .. last, double buffered with their log-sum-exp and
 * delta: one sequence of iterations, so the sum over the group's heads is in registers and in
 * a fixed order. Per query tile each warp forms its 16 keys x 64 queries of S^T = K Q^T and
 * dP^T = V dO^T, then P^T, dS^T = P^T (dP^T - delta), and accumulates dV += P^T dO and
 * dK += dS^T Q. */

/* Query tile qb of query head j into one buffer: Q and dO rows (asynchronous copies), the
 * log-sum-exp in log2 units (+inf past T, so P = 0 there) and delta. */
template <int D, typename A>
__device__ __forceinline__ void load_query_tile(A *sQ, A *sdO, float *sL, float *sDelta,
                                                const A *qkv, const A *dout, const float *lse,
                                                const float *delta, int b, int j, int qb,
                                                int T, int nh, const QkvRows &r)
{
    load_tile<D>(sQ, qkv + r.b0 + j * D, qb * FA_TILE, T, r.rs);
    load_tile<D>(sdO, dout + (size_t)b * T * r.os + j * D, qb * FA_TILE, T, r.os);
    const float *l = lse + ((size_t)b * nh + j) * T, *dl = delta + ((size_t)b * nh + j) * T;
    for (int i = threadIdx.x; i < FA_TILE; i += FA_THREADS) {
        int q = qb * FA_TILE + i;
        sL[i] = q < T ? l[q] * FA_LOG2E : INFINITY;
        sDelta[i] = q < T ? dl[q] : 0.0f;
    }
}

template <typename A, int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_bwd_dkv_kernel(A *dqkv, const A *dout, const A *qkv, const float *lse,
                         const float *delta, int T, int nh, int nkv, float scale_log2,
                         float scale)
{
    constexpr int LD = D + FA_PAD, TS = FA_TILE * LD;
    extern __shared__ __align__(16) unsigned char smem[];
    A *sK = (A *)smem, *sV = sK + TS, *sQ = sV + TS, *sdO = sQ + 2 * TS;
    float *sL = (float *)(sdO + 2 * TS); /* [2][64] */
    float *sDelta = sL + 2 * FA_TILE;    /* [2][64] */
    /* blockIdx.y is the key tile: every (b, kv head)'s longest block is scheduled first */
    int nb = gridDim.y, kb = blockIdx.y, b = blockIdx.x / nkv, kv = blockIdx.x % nkv;
    int group = nh / nkv, per_head = nb - kb, n_it = group * per_head;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    QkvRows r = qkv_rows<D>(b, T, nh, nkv);

    load_tile<D>(sK, qkv + r.b0 + (nh + kv) * D, kb * FA_TILE, T, r.rs);
    load_tile<D>(sV, qkv + r.b0 + (nh + nkv + kv) * D, kb * FA_TILE, T, r.rs);
    load_query_tile<D>(sQ, sdO, sL, sDelta, qkv, dout, lse, delta, b, kv * group, kb, T, nh, r);
    cp_async_commit();

    float dk[D / 8][4], dv[D / 8][4];
    for (int n = 0; n < D / 8; n++)
        for (int e = 0; e < 4; e++)
            dk[n][e] = dv[n][e] = 0.0f;
    int key0 = kb * FA_TILE + warp * 16 + g; /* this thread's keys: key0 and key0 + 8 */

    for (int it = 0; it < n_it; it++) {
        int buf = it & 1, qb = kb + it % per_head;
        if (it + 1 < n_it) /* the next iteration's tile into the other buffer */
            load_query_tile<D>(sQ + (buf ^ 1) * TS, sdO + (buf ^ 1) * TS,
                               sL + (buf ^ 1) * FA_TILE, sDelta + (buf ^ 1) * FA_TILE, qkv,
                               dout, lse, delta, b, kv * group + (it + 1) / per_head,
                               kb + (it + 1) % per_head, T, nh, r);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const A *q = sQ + buf * TS, *dO = sdO + buf * TS;
        const float *L = sL + buf * FA_TILE, *Dl = sDelta + buf * FA_TILE;

        float st[FA_TILE / 8][4], dpt[FA_TILE / 8][4];
        for (int n = 0; n < FA_TILE / 8; n++)
            for (int e = 0; e < 4; e++)
                st[n][e] = dpt[n][e] = 0.0f;
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t ka[4], va[4];
            ldsm_x4(ka, a_row(sK, LD, warp * 16, kk * 16, lane));
            ldsm_x4(va, a_row(sV, LD, warp * 16, kk * 16, lane));
            for (int p = 0; p < FA_TILE / 16; p++) {
                uint32_t rr[4];
                ldsm_x4(rr, b_nk(q, LD, p * 16, kk * 16, lane));
                mma16816<A>(st[2 * p], ka, rr[0], rr[1]);
                mma16816<A>(st[2 * p + 1], ka, rr[2], rr[3]);
                ldsm_x4(rr, b_nk(dO, LD, p * 16, kk * 16, lane));
                mma16816<A>(dpt[2 * p], va, rr[0], rr[1]);
                mma16816<A>(dpt[2 * p + 1], va, rr[2], rr[3]);
            }
        }
        /* P^T and dS^T */
        for (int n = 0; n < FA_TILE / 8; n++)
            for (int e = 0; e < 4; e++) {
                int qi = n * 8 + 2 * t + (e & 1), key = key0 + (e >> 1) * 8;
                float p = exp2f(st[n][e] * scale_log2 - L[qi]);
                if (qb == kb && key > qb * FA_TILE + qi)
                    p = 0.0f;
                st[n][e] = p;
                dpt[n][e] = p * (dpt[n][e] - Dl[qi]);
            }
        /* dV += P^T dO, dK += dS^T Q (k = queries) */
        for (int kk = 0; kk < FA_TILE / 16; kk++) {
            uint32_t pa[4], sa[4];
            acc_to_a<A>(pa, st[2 * kk], st[2 * kk + 1]);
            acc_to_a<A>(sa, dpt[2 * kk], dpt[2 * kk + 1]);
            for (int p = 0; p < D / 16; p++) {
                uint32_t rr[4];
                ldsm_x4_t(rr, b_kn(dO, LD, kk * 16, p * 16, lane));
                mma16816<A>(dv[2 * p], pa, rr[0], rr[1]);
                mma16816<A>(dv[2 * p + 1], pa, rr[2], rr[3]);
                ldsm_x4_t(rr, b_kn(q, LD, kk * 16, p * 16, lane));
                mma16816<A>(dk[2 * p], sa, rr[0], rr[1]);
                mma16816<A>(dk[2 * p + 1], sa, rr[2], rr[3]);
            }
        }
        __syncthreads(); /* the next iteration's loads overwrite this buffer's pair */
    }

    for (int half = 0; half < 2; half++) {
        int key = key0 + half * 8;
        if (key >= T)
            continue;
        A *dst = dqkv + r.b0 + (size_t)key * r.rs + 2 * t;
        A *dk_row = dst + (nh + kv) * D, *dv_row = dst + (nh + nkv + kv) * D;
        for (int n = 0; n < D / 8; n++) {
            *(typename Pair2<A>::type *)(dk_row + n * 8) =
                from_f2<A>(dk[n][2 * half] * scale, dk[n][2 * half + 1] * scale);
            *(typename Pair2<A>::type *)(dv_row + n * 8) =
                from_f2<A>(dv[n][2 * half], dv[n][2 * half + 1]);
        }
    }
}

/* ---- backward: dQ -------------------------------------------------------------------------
 * Block: 64 query rows of one (b, query head j), four warps of 16 rows, the forward's shape.
 * Key tiles 0 .. qb of kv head j / group are double buffered; per tile each warp recomputes
 * S = Q K^T and dP = dO V^T for its rows, forms dS = P (dP - delta) and accumulates dQ += dS K
 * in registers, rounded once at the end. Heaviest query tiles first. */
template <typename A, int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_bwd_dq_kernel(A *dqkv, const A *dout, const A *qkv, const float *lse,
                        const float *delta, int T, int nh, int nkv, float scale_log2,
                        float scale)
{
    constexpr int LD = D + FA_PAD, TS = FA_TILE * LD;
    extern __shared__ __align__(16) unsigned char smem[];
    A *sQ = (A *)smem, *sdO = sQ + TS, *sK = sdO + TS, *sV = sK + 2 * TS;
    int nb = gridDim.y, qb = nb - 1 - blockIdx.y, b = blockIdx.x / nh, j = blockIdx.x % nh;
    int kv = j / (nh / nkv);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    QkvRows r = qkv_rows<D>(b, T, nh, nkv);
    const A *kbase = qkv + r.b0 + (nh + kv) * D, *vbase = qkv + r.b0 + (nh + nkv + kv) * D;

    load_tile<D>(sQ, qkv + r.b0 + j * D, qb * FA_TILE, T, r.rs);
    load_tile<D>(sdO, dout + (size_t)b * T * r.os + j * D, qb * FA_TILE, T, r.os);
    load_tile<D>(sK, kbase, 0, T, r.rs);
    load_tile<D>(sV, vbase, 0, T, r.rs);
    cp_async_commit();

    int row0 = qb * FA_TILE + warp * 16 + g; /* this thread's rows: row0 and row0 + 8 */
    const float *l = lse + ((size_t)b * nh + j) * T, *dl = delta + ((size_t)b * nh + j) * T;
    /* rows past T: lse +inf makes P, and so dS, zero */
    float L0 = row0 < T ? l[row0] * FA_LOG2E : INFINITY;
    float L1 = row0 + 8 < T ? l[row0 + 8] * FA_LOG2E : INFINITY;
    float D0 = row0 < T ? dl[row0] : 0.0f, D1 = row0 + 8 < T ? dl[row0 + 8] : 0.0f;
    float dq[D / 8][4];
    for (int n = 0; n < D / 8; n++)
        dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

    for (int kb = 0; kb <= qb; kb++) {
        int buf = kb & 1;
        if (kb < qb) {
            load_tile<D>(sK + (buf ^ 1) * TS, kbase, (kb + 1) * FA_TILE, T, r.rs);
            load_tile<D>(sV + (buf ^ 1) * TS, vbase, (kb + 1) * FA_TILE, T, r.rs);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const A *k = sK + buf * TS, *v = sV + buf * TS;

        /* S = Q K^T and dP = dO V^T for this warp's 16 rows x 64 keys */
        float s[FA_TILE / 8][4], dp[FA_TILE / 8][4];
        for (int n = 0; n < FA_TILE / 8; n++)
            for (int e = 0; e < 4; e++)
                s[n][e] = dp[n][e] = 0.0f;
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t qa[4], da[4];
            ldsm_x4(qa, a_row(sQ, LD, warp * 16, kk * 16, lane));
            ldsm_x4(da, a_row(sdO, LD, warp * 16, kk * 16, lane));
            for (int p = 0; p < FA_TILE / 16; p++) {
                uint32_t rr[4];
                ldsm_x4(rr, b_nk(k, LD, p * 16, kk * 16, lane));
                mma16816<A>(s[2 * p], qa, rr[0], rr[1]);
                mma16816<A>(s[2 * p + 1], qa, rr[2], rr[3]);
                ldsm_x4(rr, b_nk(v, LD, p * 16, kk * 16, lane));
                mma16816<A>(dp[2 * p], da, rr[0], rr[1]);
                mma16816<A>(dp[2 * p + 1], da, rr[2], rr[3]);
            }
        }
        /* dS = P (dP - delta), the causal mask on the diagonal tile */
        for (int n = 0; n < FA_TILE / 8; n++)
            for (int e = 0; e < 4; e++) {
                int key = kb * FA_TILE + n * 8 + 2 * t + (e & 1), row = row0 + (e >> 1) * 8;
                float p = exp2f(s[n][e] * scale_log2 - (e < 2 ? L0 : L1));
                if (kb == qb && key > row)
                    p = 0.0f;
                s[n][e] = p * (dp[n][e] - (e < 2 ? D0 : D1));
            }
        /* dQ += dS K (k = keys) */
        for (int kk = 0; kk < FA_TILE / 16; kk++) {
            uint32_t a[4];
            acc_to_a<A>(a, s[2 * kk], s[2 * kk + 1]);
            for (int p = 0; p < D / 16; p++) {
                uint32_t rr[4];
                ldsm_x4_t(rr, b_kn(k, LD, kk * 16, p * 16, lane));
                mma16816<A>(dq[2 * p], a, rr[0], rr[1]);
                mma16816<A>(dq[2 * p + 1], a, rr[2], rr[3]);
            }
        }
        __syncthreads(); /* the next iteration's copies overwrite the other buffer */
    }

    for (int half = 0; half < 2; half++) {
        int row = row0 + half * 8;
        if (row >= T)
            continue;
        A *dst = dqkv + r.b0 + (size_t)row * r.rs + j * D + 2 * t;
        for (int n = 0; n < D / 8; n++)
            *(typename Pair2<A>::type *)(dst + n * 8) =
                from_f2<A>(dq[n][2 * half] * scale, dq[n][2 * half + 1] * scale);
    }
}

/* ---- launchers ---------------------------------------------------------------------------- */

template <int D> static size_t tile_bytes()
{
    return (size_t)FA_TILE * (D + FA_PAD) * sizeof(uint16_t);
}

/* forward: Q and two buffers each of K and V; backward dQ: Q, dO and two of K and V; backward
 * dK dV: K, V, two of Q and dO, and two tiles' log-sum-exp and delta */
template <int D> static size_t fwd_smem_bytes()
{
    return 5 * tile_bytes<D>();
}

template <int D> static size_t dq_smem_bytes()
{
    return 6 * tile_bytes<D>();
}

template <int D> static size_t dkv_smem_bytes()
{
    return 6 * tile_bytes<D>() + 4 * FA_TILE * sizeof(float);
}

static int optin_smem_bytes(void)
{
    static int bytes = -1;
    if (bytes < 0) {
        int dev = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    }
    return bytes;
}

/* Calls f<D>(args) for head size d, one of arch_attention_fused's: the one switch from a
 * head size to the kernels' template. */
#define FA_HEAD_SIZES(d, f, ...)                                                               \
    do {                                                                                       \
        switch (d) {                                                                           \
        case 32: f<32>(__VA_ARGS__); break;                                                    \
        case 64: f<64>(__VA_ARGS__); break;                                                    \
        case 80: f<80>(__VA_ARGS__); break;                                                    \
        case 96: f<96>(__VA_ARGS__); break;                                                    \
        case 128: f<128>(__VA_ARGS__); break;                                                  \
        default: check_shape(1, 1, d);                                                         \
        }                                                                                      \
    } while (0)

static bool enabled = true;

extern "C" void flash_attention_enable(bool on)
{
    enabled = on;
}

/* Whether the kernels have h query heads over g kv heads of d values. */
static bool shape_ok(int h, int g, int d)
{
    return arch_attention_fused(d) && g > 0 && h >= g && h % g == 0;
}

/* A bug in the caller: the entry points ask flash_attention_supported first. */
static void check_shape(int h, int g, int d)
{
    if (!shape_ok(h, g, d)) {
        fprintf(stderr, "%s:%d: flash attention has no shape h %d, g %d, head size %d\n",
                __FILE__, __LINE__, h, g, d);
        abort();
    }
}

template <int D> static void smem_of(size_t *bytes)
{
    *bytes = dkv_smem_bytes<D>();
}

extern "C" bool flash_attention_supported(int h, int g, int d)
{
    if (!enabled || !shape_ok(h, g, d))
        return false;
    size_t smem = 0;
    FA_HEAD_SIZES(d, smem_of, &smem);
    static int major = -1;
    if (major < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            return false;
    }
    return major >= 8 && smem <= (size_t)optin_smem_bytes();
}

/* The kernel's dynamic shared memory limit raised to what it uses, once per kernel. */
template <typename K> static void allow_smem(K kernel, size_t bytes, bool *done)
{
    if (!*done) {
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
        *done = true;
    }
}

template <int D, typename A>
static void forward_d(A *out, float *lse, const A *qkv, int B, int T, int h, int g,
                      cudaStream_t s)
{
    size_t smem = fwd_smem_bytes<D>();
    static bool attr_set = false;
    allow_smem(flash_fwd_kernel<A, D>, smem, &attr_set);
    dim3 grid((T + FA_TILE - 1) / FA_TILE, B * h);
    float scale_log2 = FA_LOG2E / sqrtf((float)D);
    flash_fwd_kernel<A, D><<<grid, FA_THREADS, smem, s>>>(out, lse, qkv, T, h, g, scale_log2);
    LAUNCHED(flash_fwd_kernel);
}

template <int D, typename A>
static void backward_d(A *dqkv, const A *dout, const A *qkv, const float *lse,
                       const float *delta, int B, int T, int h, int g, cudaStream_t s)
{
    size_t kv_smem = dkv_smem_bytes<D>(), q_smem = dq_smem_bytes<D>();
    static bool kv_attr = false, q_attr = false;
    allow_smem(flash_bwd_dkv_kernel<A, D>, kv_smem, &kv_attr);
    allow_smem(flash_bwd_dq_kernel<A, D>, q_smem, &q_attr);
    int nb = (T + FA_TILE - 1) / FA_TILE;
    float scale = 1.0f / sqrtf((float)D);
    flash_bwd_dkv_kernel<A, D><<<dim3(B * g, nb), FA_THREADS, kv_smem, s>>>(
        dqkv, dout, qkv, lse, delta, T, h, g, scale * FA_LOG2E, scale);
    LAUNCHED(flash_bwd_dkv_kernel);
    flash_bwd_dq_kernel<A, D><<<dim3(B * h, nb), FA_THREADS, q_smem, s>>>(
        dqkv, dout, qkv, lse, delta, T, h, g, scale * FA_LOG2E, scale);
    LAUNCHED(flash_bwd_dq_kernel);
}

/* The tiles are copied in 16-byte pieces: every row of every operand must start 16-aligned. */
static void check_aligned(const void *p, const char *what)
{
    if ((uintptr_t)p % 16) {
        fprintf(stderr, "%s:%d: flash attention: %s is not 16-byte aligned\n", __FILE__,
                __LINE__, what);
        abort();
    }
}

template <typename A>
static void forward_t(A *out, float *lse, const A *qkv, int B, int T, int h, int g, int d,
                      cudaStream_t s)
{
    FA_HEAD_SIZES(d, forward_d, out, lse, qkv, B, T, h, g, s);
}

template <typename A>
static void backward_t(A *dqkv, const A *dout, const A *qkv, const float *lse,
                       const float *delta, int B, int T, int h, int g, int d, cudaStream_t s)
{
    FA_HEAD_SIZES(d, backward_d, dqkv, dout, qkv, lse, delta, B, T, h, g, s);
}

extern "C" void flash_attention_forward(act16_t *out, float *lse, const act16_t *qkv, int B,
                                        int T, int h, int g, int d, GkType t, cudaStream_t_c s)
{
    check_shape(h, g, d);
    check_aligned(qkv, "qkv");
    GK_DISPATCH(t, forward_t<T16>((T16 *)out, lse, (const T16 *)qkv, B, T, h, g, d, S(s)));
}

extern "C" void flash_attention_backward(act16_t *dqkv, const act16_t *dout, const act16_t *qkv,
                                         const float *lse, const float *delta, int B, int T,
                                         int h, int g, int d, GkType t, cudaStream_t_c s)
{
    check_shape(h, g, d);
    check_aligned(qkv, "qkv");
    check_aligned(dout, "dout");
    GK_DISPATCH(t, backward_t<T16>((T16 *)dqkv, (const T16 *)dout, (const T16 *)qkv, lse, delta,
                                   B, T, h, g, d, S(s)));
}
