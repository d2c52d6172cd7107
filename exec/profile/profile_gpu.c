/* profile_gpu: fuyou-profile's GPU measurements (profile_run.h, profile_run_gpu), each a key of
 * the ini with its comment: pinned copies, the host memory the Adam task and copies one way
 * move at once, the executor's time between GPU tasks, the GEMM and attention efficiency curves
 * and the memory-bound kernels.
 * Built with CUDA only. */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "cost.h"
#include "cuda_device.h"
#include "gpt2_kernels.h"
#include "graph.h"
#include "profile_run.h"
/* A load beside the Adam task: pinned copies of `bytes` in the directions `dirs`. */
typedef struct CopyLoad {
    size_t bytes;
    int dirs; /* CUDADEV_H2D, CUDADEV_D2H or both */
} CopyLoad;

static int copies(void *ctx, const ProfileLoadControl *lc, double *GBps, Err *e)
{
    const CopyLoad *cl = ctx;
    return cudadev_copy_until(cl->bytes, cl->dirs, lc->stopped, lc->counting, lc->token, GBps,
                              e);
}

/* The GPU's name and memory; pinned copies alone and both ways at once. */
static int measure_pcie(ProfileRun *p, Err *e)
{
    Hardware *hw = &p->hw;
    int reps = p->reps;
    snprintf(hw->gpu_name, sizeof hw->gpu_name, "%.63s", p->gi.name);
    hw->gpu_mem_GiB = (double)p->gi.mem_bytes / 1073741824.0;
    profile_note(&p->ns, "gpu", "name", "[meas %s] CUDA runtime", p->day);
    profile_note(&p->ns, "gpu", "mem_GiB", "[meas %s] device memory in all", p->day);
    double runs[4 * 8]; /* reps is at most 7 */
    size_t bytes = p->quick ? (size_t)256 << 20 : (size_t)1 << 30;
    int rc = cudadev_copy_bench(bytes, reps, runs, e);
    if (rc)
        return rc;
    double *field[4] = {&hw->h2d_GBps, &hw->d2h_GBps, &hw->h2d_bidir_GBps, &hw->d2h_bidir_GBps};
    const char *keys[4] = {"h2d_GBps", "d2h_GBps", "h2d_bidir_GBps", "d2h_bidir_GBps"};
    for (int k = 0; k < 4; k++) {
        Stat st;
        profile_stat(runs + k * reps, reps, &st);
        *field[k] = st.median;
        profile_note(&p->ns, "pcie", keys[k], "[meas %s] pinned %s copies, %s: median of %d, "
                     "%.1f..%.1f", p->day, p->quick ? "256 MiB" : "1 GiB",
                     k < 2 ? "alone" : "both directions at once", st.n, st.min, st.max);
    }
    return 0;
}

/* Host memory's rate (cpu.mem_GBps, one ceiling the cost model shares among the cores, PCIe and
 * SSD transfers): what the Adam task and pinned copies one way move at once, the mean of the two
 * directions. The pipeline's backward runs the weights' loads and the gradients' stores beside
 * the Adam; copies both ways beside it move more (the note has it), but a ceiling that high lets
 * a one-way copy beside the Adam run unslowed, where the traces have it 25% slower
 * (MEASUREMENTS.md, "The Llama family"). Never below what memcpy moved, when measured. */
static int measure_host_rate(ProfileRun *p, Err *e)
{
    size_t bytes = p->quick ? (size_t)64 << 20 : (size_t)256 << 20;
    CopyLoad loads[3] = {{bytes, CUDADEV_H2D}, {bytes, CUDADEV_D2H},
                         {bytes, CUDADEV_H2D | CUDADEV_D2H}};
    const char *name[3] = {"to the GPU", "from the GPU", "both ways"};
    double adam[3], copy[3], moved[3];
    for (int k = 0; k < 3; k++) {
        Stat st;
        int rc = profile_adam_beside(p->used, p->params, p->reps, copies, &loads[k], &st,
                                     &copy[k], e);
        if (rc)
            return rc;
        adam[k] = st.median;
        moved[k] = adam[k] * COST_ADAM_HOST_BYTES + copy[k];
        fprintf(stderr, "  the Adam task beside pinned copies %s: %.3f G params/s (alone %.3f), "
                "copies %.1f GB/s: %.1f GB/s of host memory at once\n", name[k], adam[k],
                p->adam.median, copy[k], moved[k]);
    }
    double one_way = 0.5 * (moved[0] + moved[1]);
    bool memcpy_more = p->mem.n && p->mem.median > one_way;
    p->hw.cpu_mem_GBps = memcpy_more ? p->mem.median : one_way;
    char memcpy_said[96] = "";
    if (p->mem.n)
        snprintf(memcpy_said, sizeof memcpy_said, "; parallel memcpy moved %.1f (%.1f..%.1f)%s",
                 p->mem.median, p->mem.min, p->mem.max, memcpy_more ? ", the key" : "");
    profile_note(&p->ns, "cpu", "mem_GBps", "[meas %s] host memory the Adam task (%d threads, "
                 "%d B a parameter, alone %.3f G params/s) and pinned copies one way move at "
                 "once, the mean of the two directions: to the GPU %.1f GB/s (the Adam %.3f, "
                 "copies %.1f), from it %.1f (%.3f, %.1f); both ways at once %.1f (%.3f, %.1f)%s",
                 p->day, p->used, COST_ADAM_HOST_BYTES, p->adam.median, moved[0], adam[0],
                 copy[0], moved[1], adam[1], copy[1], moved[2], adam[2], copy[2], memcpy_said);
    return 0;
}

/* The executor's own time around each GPU task: empty tasks through a pipeline lane, alone (the
 * key) and beside the Adam task (the note: what its threads add). */
static int measure_task_us(ProfileRun *p, Err *e)
{
    Stat gap, adam_gpu;
    double gap_mean, unused;
    int tasks = p->quick ? 2000 : 20000;
    DispatchLoad dl = {.ops = &device_cuda};
    int rc = profile_dispatch(&device_cuda, tasks, &gap, &gap_mean, e);
    if (!rc)
        rc = profile_adam_beside(p->used, p->params, p->reps, profile_dispatch_load, &dl,
                                 &adam_gpu, &unused, e);
    if (rc)
        return rc;
    p->hw.gpu_task_us = gap_mean;
    fprintf(stderr, "  between GPU tasks: mean %.1f us, median %.1f (%.1f..%.1f, %d); beside "
            "the Adam task: mean %.1f, median %.1f, greatest %.0f (%d)\n", gap_mean,
            gap.median, gap.min, gap.max, gap.n, dl.mean_us, dl.gap_us.median,
            dl.gap_us.max, dl.gap_us.n);
    profile_note(&p->ns, "gpu", "task_us", "[meas %s] the executor's own time between GPU tasks: "
                 "%d empty compute tasks (issued, timed by CUDA events and waited for as a "
                 "compute task is) through a pipeline lane, waited for as the dispatcher waits; "
                 "the mean gap from one's end to the next's start (median %.1f, %.1f..%.1f us). "
                 "Beside the Adam task (%d threads, niced as the pipeline's): mean %.1f, median "
                 "%.1f, greatest %.0f us over %d gaps. A lower bound: the pipeline's dispatcher "
                 "adds its bookkeeping (its traces on the H200 machine: 12-18 us mean)", p->day,
                 tasks, gap.median, gap.min, gap.max, p->used, dl.mean_us, dl.gap_us.median,
                 dl.gap_us.max, dl.gap_us.n);
    return 0;
}

/* Seconds each GEMM shape and each attention shape runs back to back before it is timed: a
 * training iteration's GEMMs settle within about 0.25 s of load to clocks 13% below a burst's
 * (MEASUREMENTS.md, "The issue-38 table on an H200"), and the curves predict training. */
static const double SUSTAIN_S = 0.3;

/* The GEMM efficiency curve: squares from 256 to 8192 and the presets' own shapes (8 x 1024
 * tokens; with --quick up to 1.3B parameters), against the base's peak. */
static int measure_gemm(ProfileRun *p, Err *e)
{
    enum { SQUARES = 6, MAX_SHAPES = 96 };
    Hardware *hw = &p->hw;
    int runs = p->quick ? 5 : 20;
    GemmShape shapes[SQUARES + MAX_SHAPES];
    int n_shapes = 0;
    for (int d = 256; d <= 8192; d *= 2)
        shapes[n_shapes++] = (GemmShape){d, d, d};
    n_shapes += profile_gemm_shapes(p->quick ? 1400000000 : 14000000000, 8 * 1024,
                                    shapes + n_shapes, MAX_SHAPES);
    double size[SQUARES + MAX_SHAPES], eff[SQUARES + MAX_SHAPES];
    for (int i = 0; i < n_shapes; i++) {
        const GemmShape *g = &shapes[i];
        double tf = gk_gemm_tflops(g->m, g->k, g->n, runs, SUSTAIN_S);
        if (tf < 0)
            return err_set(e, -ENOMEM, "GEMM %d x %d x %d: no host memory for its timings",
                           g->m, g->n, g->k);
        size[i] = 3.0 / (1.0 / g->m + 1.0 / g->n + 1.0 / g->k);
        eff[i] = tf / hw->gpu_bf16_TFLOPS;
        fprintf(stderr, "  GEMM %d x %d x %d: %.1f TFLOP/s\n", g->m, g->n, g->k, tf);
    }
    profile_gemm_curve(size, eff, n_shapes, &hw->gemm);
    char curve[HW_CURVE_MAX * 24] = "";
    for (int i = 0; i < hw->gemm.n; i++)
        err_append(curve, sizeof curve, "%s%.0f %.0f", i ? ", " : "", hw->gemm.dim[i],
                   hw->gemm.eff[i] * hw->gpu_bf16_TFLOPS);
    profile_note(&p->ns, "gpu", "gemm_efficiency", "[meas %s] cuBLAS bf16, %d shapes (squares 256 "
                 "to 8192 and the presets' GEMMs at 8 x 1024 tokens), median of %d runs each "
                 "after %.1f s of it back to back (training's clocks); per octave of size (the "
                 "harmonic mean of m, n, k) the median: %s TFLOP/s", p->day, n_shapes, runs,
                 SUSTAIN_S, curve);
    return 0;
}

/* The attention kernels' work as the cost model charges it (cost_attention_work, forward and
 * backward) for preset c at 8 x 1024 tokens; false when c is not measured (too large, too
 * short a max_seq, or its graph not built). */
static bool attention_work(const ModelConfig *c, bool quick, double *work)
{
    Graph g = {0};
    Err e;
    if (model_param_count(c) > (quick ? 1400000000 : 14000000000) || c->max_seq < 1024)
        return false;
    bool built = graph_init(&g, c, 8, 1024, &e) == 0;
    if (built) {
        const Op *op = graph_block_op_of_kind(&g, OP_ATTENTION);
        *work = cost_attention_work(op, TASK_FWD) + cost_attention_work(op, TASK_BWD);
    }
    graph_free(&g);
    return built;
}

/* The attention's efficiency: its kernels, forward and backward, at the presets' shapes
 * (8 x 1024 tokens), the work the cost model charges over the time at the peak; per head size
 * (which picks the kernels) the median over its shapes. */
static void measure_attention(ProfileRun *p)
{
    enum { MAX_ATT = 16 };
    int runs = p->quick ? 5 : 20;
    double aeff[MAX_ATT];
    int seen_c[MAX_ATT], seen_h[MAX_ATT], head_size[MAX_ATT], n_att = 0;
    char att[MAX_ATT * 24] = "";
    for (int i = 0; i < model_preset_count() && n_att < MAX_ATT; i++) {
        const ModelConfig *c = model_preset_at(i);
        bool dup = false;
        for (int j = 0; j < n_att; j++)
            dup |= seen_c[j] == c->d_model && seen_h[j] == c->n_head;
        double work, f_ms, b_ms;
        if (dup || !attention_work(c, p->quick, &work) ||
            gk_attention_ms(8, 1024, c->d_model, c->n_head, runs, SUSTAIN_S, &f_ms, &b_ms))
            continue;
        seen_c[n_att] = c->d_model, seen_h[n_att] = c->n_head;
        head_size[n_att] = c->d_model / c->n_head;
        aeff[n_att] = work / ((f_ms + b_ms) * 1e-3 * p->hw.gpu_bf16_TFLOPS * 1e12);
        fprintf(stderr, "  attention %d x %d heads (%s): forward %.3f ms, backward %.3f ms, "
                "efficiency %.3f\n", c->n_head, head_size[n_att], c->name, f_ms, b_ms,
                aeff[n_att]);
        err_append(att, sizeof att, "%s%d/%d %.2f", n_att ? ", " : "", c->n_head,
                   head_size[n_att], aeff[n_att]);
        n_att++;
    }
    if (!n_att)
        return;
    profile_attn_curve(head_size, aeff, n_att, &p->hw.attn);
    profile_note(&p->ns, "gpu", "attn_efficiency", "[meas %s] the attention kernels, forward and "
                 "backward, at 8 x 1024 tokens, median of %d runs each after %.1f s of them back "
                 "to back; per heads/head size: %s; per head size the median", p->day, runs,
                 SUSTAIN_S, att);
}

/* Memory-bound kernels (layernorms, residuals, conversions, the AdamW): the residual add from 1 K
 * to 256 M elements, fitted to bytes / mem_GBps + launch_us as the cost model times them, the
 * rate from the sizes of MEM_BEYOND_L2 times the L2 cache and more (what the large tasks move,
 * which the cache does not hold), the launch from the small ones; the datasheet's bandwidth is
 * more than such kernels reach. */
enum { MEM_BEYOND_L2 = 4 };

static int measure_mem_kernels(ProfileRun *p, Err *e)
{
    static const int log2_n[] = {10, 12, 14, 16, 18, 20, 22, 24, 26, 27, 28};
    enum { MEM_POINTS = sizeof log2_n / sizeof log2_n[0] };
    int runs = p->quick ? 5 : 20;
    double bytes[MEM_POINTS], sec[MEM_POINTS];
    double l2 = (double)(p->gi.l2_bytes ? p->gi.l2_bytes : 64 << 20), beyond = MEM_BEYOND_L2 * l2;
    int big = 0;
    for (int i = 0; i < MEM_POINTS; i++) {
        size_t n = (size_t)1 << log2_n[i];
        bytes[i] = 6.0 * (double)n;
        double ms = gk_residual_ms(n, runs);
        if (ms < 0)
            return err_set(e, -ENOMEM, "residual add over %zu elements: no host memory for its "
                           "timings", n);
        sec[i] = ms * 1e-3;
        big += bytes[i] >= beyond;
        fprintf(stderr, "  residual add over %zu elements: %.1f us, %.0f GB/s\n", n,
                sec[i] * 1e6, bytes[i] / sec[i] / 1e9);
    }
    double GBps, launch_us;
    if (profile_mem_fit(bytes, sec, MEM_POINTS, beyond, &GBps, &launch_us))
        return 0;
    p->hw.gpu_mem_GBps = GBps;
    p->hw.gpu_launch_us = launch_us;
    profile_note(&p->ns, "gpu", "mem_GBps", "[meas %s] the residual add (6 B an element), 1 K to "
                 "256 M elements, median of %d runs each, fitted to bytes / mem_GBps + "
                 "launch_us: the rate through the %d sizes of %d x the L2 (%.0f MB) and more, "
                 "%.0f GB/s at 256 M", p->day, runs, big, MEM_BEYOND_L2, l2 / 1e6,
                 bytes[MEM_POINTS - 1] / sec[MEM_POINTS - 1] / 1e9);
    profile_note(&p->ns, "gpu", "launch_us", "[meas %s] the smaller sizes' intercept under that "
                 "rate (by relative error): a kernel's time beyond its bytes, launch included; "
                 "%.1f us at 1 K", p->day, sec[0] * 1e6);
    return 0;
}

int profile_run_gpu(ProfileRun *p, Err *e)
{
    int rc = measure_pcie(p, e);
    if (rc)
        return rc;
    if (!p->adam.n) { /* --gpu-only: the Adam alone, for the host memory's rate */
        rc = profile_adam(p->used, p->params, p->reps, &p->adam, e);
        if (rc)
            return rc;
    }
    if ((rc = measure_host_rate(p, e)) || (rc = measure_task_us(p, e)) ||
        (rc = measure_gemm(p, e)))
        return rc;
    measure_attention(p); /* a shape it cannot time is left out of the curve */
    return measure_mem_kernels(p, e);
}
