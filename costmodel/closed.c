/* closed: the closed-form iteration time; the equations are in closed.h. */
#include "closed.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "layout.h"
#include "schedule.h"

const char *cf_phase_name(CfPhase p)
{
    static const char *names[] = {"forward", "backward", "tail"};
    return names[p];
}

/* Both PCIe directions from the same start: h and d alone seconds. */
static double pcie_s(const Hardware *hw, double h, double d)
{
    double rho_h = hw->h2d_bidir_GBps / hw->h2d_GBps, rho_d = hw->d2h_bidir_GBps / hw->d2h_GBps;
    double pcie_h = d + h * (1 - rho_d) / rho_h, pcie_d = h + d * (1 - rho_h) / rho_d;
    return pcie_h > pcie_d ? pcie_h : pcie_d;
}

/* Both SSD directions from the same start: r and w alone seconds. Together at the measured
 * rates (the one that finishes first, then the other alone) or the duplex share, then the host
 * path's ceiling over the bytes of both. */
static double ssd_s(const Hardware *hw, double r, double w)
{
    double t;
    if (hw->ssd_read_bidir_GBps > 0) {
        double ra = cost_alone_rate(hw, RES_SSD_READ), wa = cost_alone_rate(hw, RES_SSD_WRITE);
        double rb = hw->ssd_count * hw->ssd_read_bidir_GBps * 1e9;
        double wb = hw->ssd_count * hw->ssd_write_bidir_GBps * 1e9;
        double rbytes = r * ra, wbytes = w * wa, tr = rbytes / rb, tw = wbytes / wb;
        t = tr < tw ? tr + (wbytes - tr * wb) / wa : tw + (rbytes - tw * rb) / ra;
    } else {
        double c = 2 / hw->ssd_duplex - 1, ssd_r = r + c * w, ssd_w = w + c * r;
        t = ssd_r > ssd_w ? ssd_r : ssd_w;
    }
    if (hw->ssd_host_GBps > 0) {
        double bytes = r * cost_alone_rate(hw, RES_SSD_READ) +
                       w * cost_alone_rate(hw, RES_SSD_WRITE);
        double host = bytes / (hw->ssd_host_GBps * 1e9);
        t = host > t ? host : t;
    }
    return t;
}

/* The phase's host memory bytes over the ceiling mem_Bps (cost_host_mem_Bps); heaviest gets the
 * resource that moves the most of them. */
static double host_mem_s(const Hardware *hw, double mem_Bps, const double load_s[RES_COUNT],
                         Resource *heaviest)
{
    double total = 0, most = 0;
    *heaviest = RES_CPU_ADAM;
    for (int r = 0; r < RES_COUNT; r++) {
        double bytes = load_s[r] * cost_alone_rate(hw, r) * cost_host_bytes(r);
        total += bytes;
        if (bytes > most) {
            most = bytes;
            *heaviest = r;
        }
    }
    return total / mem_Bps;
}

/* cost_phase_s with the host memory ceiling given. */
static double phase_s(const Hardware *hw, double mem_Bps, const double load_s[RES_COUNT],
                      Resource *binding)
{
    double h = load_s[RES_H2D], d = load_s[RES_D2H];
    double r = load_s[RES_SSD_READ], w = load_s[RES_SSD_WRITE];
    Resource mem_r;
    double mem = host_mem_s(hw, mem_Bps, load_s, &mem_r);
    struct { double t; Resource r; } terms[] = {
        {load_s[RES_GPU], RES_GPU}, {load_s[RES_CPU_ADAM], RES_CPU_ADAM},
        {pcie_s(hw, h, d), h >= d ? RES_H2D : RES_D2H},
        {ssd_s(hw, r, w), r >= w ? RES_SSD_READ : RES_SSD_WRITE},
        {mem, mem_r},
    };
    int best = 0;
    for (int i = 1; i < (int)(sizeof terms / sizeof terms[0]); i++)
        if (terms[i].t > terms[best].t)
            best = i;
    if (binding)
        *binding = terms[best].r;
    return terms[best].t;
}

double cost_phase_s(const Hardware *hw, const double load_s[RES_COUNT], Resource *binding)
{
    return phase_s(hw, cost_host_mem_Bps(hw), load_s, binding);
}

/* What one evaluation reads of the hardware again and again: the host memory ceiling, worked
 * out once (cost_host_mem_Bps runs the rate model over eight configurations, and the phase
 * formula runs three times a block), and where a search priced them (ClosedPrices) the op
 * tasks' seconds and which blocks are alike; NULL: each op priced as it comes, each block and
 * phase worked out on its own (the reference the priced evaluation is tested against). */
typedef struct Eval {
    const Hardware *hw;
    const Graph *g;
    double mem_Bps;
    const double *task_s;
    const bool *alike;
} Eval;

/* The slots of ClosedPrices.task_s: one per kind of op task. */
enum { PRICED_KINDS = 3 };
_Static_assert(TASK_FWD == 0 && TASK_RECOMPUTE == 1 && TASK_BWD == 2,
               "ClosedPrices.task_s is indexed by the op tasks' kinds");

/* Seconds op's task of that kind takes of the GPU (cost_gpu_task_s). */
static double task_s(const Eval *ev, const Op *op, TaskKind kind)
{
    if (!ev->task_s)
        return cost_gpu_task_s(ev->hw, op, kind);
    return ev->task_s[(op - ev->g->ops) * PRICED_KINDS + kind];
}

/* Alone seconds of bytes on a link, its per-copy latency left out (the simulator charges it per
 * task; here it would only add a per-block constant). */
static double link_s(const Hardware *hw, Resource r, double bytes)
{
    return bytes / cost_alone_rate(hw, r);
}

/* Seconds of alone seconds t on link r when the copy runs by itself (stalls, the fill, chains):
 * t, but at the SSDs' host path ceiling when that is below the devices' rate. */
static double solo_s(const Hardware *hw, Resource r, double t)
{
    return r == RES_SSD_READ ? ssd_s(hw, t, 0) : r == RES_SSD_WRITE ? ssd_s(hw, 0, t) : t;
}

static double adam_s(const Hardware *hw, double params)
{
    return params / cost_alone_rate(hw, RES_CPU_ADAM);
}

/* Accumulates per-block phase times: their sum, and for each resource the time it bound; and
 * the last block's loads, time and binding: blocks alike ask the phase formula the same, and
 * the formula is a function of the loads alone, so the same bits give the same answer (used
 * where the evaluation is priced). */
typedef struct BlockSum {
    double total;
    double bound[RES_COUNT];
    bool has_last;
    double last_load[RES_COUNT], last_t;
    Resource last_r;
} BlockSum;

static void block_add(const Eval *ev, BlockSum *s, const double load[RES_COUNT])
{
    bool again = ev->alike && s->has_last && !memcmp(load, s->last_load, sizeof s->last_load);
    if (!again) {
        s->last_t = phase_s(ev->hw, ev->mem_Bps, load, &s->last_r);
        memcpy(s->last_load, load, sizeof s->last_load);
        s->has_last = true;
    }
    s->total += s->last_t;
    s->bound[s->last_r] += s->last_t;
}

static Resource block_binding(const BlockSum *s)
{
    int best = 0;
    for (int r = 1; r < RES_COUNT; r++)
        if (s->bound[r] > s->bound[best])
            best = r;
    return (Resource)best;
}

/* The 16-bit gradient copies of params parameters (w bytes each) in every micro-batch's
 * backward: to the CPU, where fuyou adds micro-batches; zero-infinity's back to the GPU too
 * (DeepSpeed adds them there). */
static void grad_loads(const Hardware *hw, const Plan *p, double params, double w,
                       double B[RES_COUNT])
{
    if (p->policy == POLICY_ZERO_INFINITY) {
        B[RES_D2H] += link_s(hw, RES_D2H, params * w);
        B[RES_H2D] += link_s(hw, RES_H2D, params * w);
        return;
    }
    /* the step's first micro-batch writes the sum, the others add into it: per micro-batch,
     * the mean */
    int M = p->n_micro;
    double sum_s = M > 1 ? (cost_grad_sum_s(hw, params, w, true) +
                            (M - 1) * cost_grad_sum_s(hw, params, w, false)) / M
                         : 0;
    B[RES_D2H] += link_s(hw, RES_D2H, params * w) + sum_s;
}

/* Seconds of zero-infinity's 16-bit copies of params gradients that the next block's backward
 * waits for beyond the inbound copies it waits for anyway (inbound_s, at prefetch depth 0):
 * with one gradient buffer (DeepSpeed's hook copies them before it returns) the way out, as far
 * as it outlasts those (it runs beside them, the other way), then the way back; else at depth
 * 0 the way back, which holds the link the next block's load then waits for. */
static double zero_grad_stall_s(const Hardware *hw, const Plan *p, double params, double w,
                                double inbound_s)
{
    if (p->policy != POLICY_ZERO_INFINITY)
        return 0;
    double out = link_s(hw, RES_D2H, params * w), back = link_s(hw, RES_H2D, params * w);
    if (p->grad_buffers == 1)
        return (out > inbound_s ? out - inbound_s : 0) + back;
    return p->prefetch_depth == 0 ? back : 0;
}

/* zero-infinity's last micro-batch: params fp32 gradients out to the CPU, and on to SSD during
 * backward where their sub-group's states are on SSD and it is not the tail (whose write the
 * step waits for: TAIL). Returns the seconds the next block's backward waits for them (one
 * gradient buffer), added to the GPU's line. */
static double zero_grad32_loads(const Hardware *hw, const Plan *p, double params, int group,
                                double B[RES_COUNT])
{
    if (p->policy != POLICY_ZERO_INFINITY)
        return 0;
    double out = link_s(hw, RES_D2H, 4 * params), stall = p->grad_buffers == 1 ? out : 0;
    B[RES_D2H] += out;
    B[RES_GPU] += stall;
    if (plan_optim_tier(p, group) == TIER_SSD && group < plan_subgroup_count(p) - 1)
        B[RES_SSD_WRITE] += link_s(hw, RES_SSD_WRITE, 4 * params);
    return stall;
}

/* Whether block b's weights are loaded again in backward: all but the last ones resident across
 * the turn. */
static bool block_reloads(const Plan *p, int b)
{
    int L = p->n_layer, resident = p->weight_buffers < L ? p->weight_buffers : L;
    return b < L - resident;
}

/* The forward and backward loads of block b that move with it through the pipeline. What it
 * reads of the block: its ops' task seconds, act_bytes and whether they run a backward
 * (ClosedPrices.alike compares these), the block's activations and block_reloads. */
static void block_loads(const Eval *ev, const Plan *p, int b, double F[RES_COUNT],
                        double B[RES_COUNT], double stall[2])
{
    const Hardware *hw = ev->hw;
    const Graph *g = ev->g;
    const ModelConfig *c = &g->cfg;
    double w = (double)dtype_bytes(c->dtype), block_w = (double)model_block_params(c) * w;
    memset(F, 0, RES_COUNT * sizeof *F);
    memset(B, 0, RES_COUNT * sizeof *B);
    bool rerun[ARCH_MAX_OPS];
    sched_recompute_set(p, b, rerun);
    double swapped[TIER_COUNT] = {0};
    for (int i = 0; i < g->arch->n_ops; i++) {
        const Op *op = graph_block_op(g, b, i);
        F[RES_GPU] += task_s(ev, op, TASK_FWD);
        if (op->bwd_flops > 0 || op->bwd_io_bytes > 0)
            B[RES_GPU] += task_s(ev, op, TASK_BWD);
        if (rerun[i])
            B[RES_GPU] += task_s(ev, op, TASK_RECOMPUTE);
        ActPlace a = plan_act(p, b, i);
        if (a == ACT_CPU || a == ACT_SSD)
            swapped[a] += (double)op->act_bytes;
    }
    double moved = swapped[TIER_CPU] + swapped[TIER_SSD];
    bool reload = block_reloads(p, b);
    double in_f[RES_COUNT] = {0}, in_b[RES_COUNT] = {0}; /* inbound copies */
    bool resident = plan_block_on_gpu(p, b); /* its weights and gradients stay on the GPU */
    if (!resident) {
        in_f[RES_H2D] += link_s(hw, RES_H2D, block_w);
        in_b[RES_H2D] += reload ? link_s(hw, RES_H2D, block_w) : 0;
    }
    if (p->weights == TIER_SSD && !resident) {
        in_f[RES_SSD_READ] += link_s(hw, RES_SSD_READ, block_w);
        in_b[RES_SSD_READ] += reload ? link_s(hw, RES_SSD_READ, block_w) : 0;
    }
    in_b[RES_H2D] += link_s(hw, RES_H2D, moved);
    in_b[RES_SSD_READ] += link_s(hw, RES_SSD_READ, swapped[TIER_SSD]);
    for (int r = 0; r < RES_COUNT; r++) {
        F[r] += in_f[r];
        B[r] += in_b[r];
    }
    /* Copies that a block's compute must wait for stall the GPU: with prefetch depth 0 its
     * inbound copies (they start when the previous block's compute ends); with one activation
     * buffer the previous block's activations leaving in forward (at the same time as the
     * inbound weights, in the other direction) and its own arriving in backward. */
    double out_stall = p->act_buffers == 1 ? link_s(hw, RES_D2H, moved) : 0;
    double in_stall_f = p->prefetch_depth == 0 ? in_f[RES_H2D] : 0;
    double ssd_stall_f = p->prefetch_depth == 0 ? in_f[RES_SSD_READ] : 0;
    double ssd_act_b = link_s(hw, RES_SSD_READ, swapped[TIER_SSD]);
    stall[0] = solo_s(hw, RES_SSD_READ, ssd_stall_f) + pcie_s(hw, in_stall_f, out_stall);
    stall[1] = p->prefetch_depth == 0 ? in_b[RES_H2D] + solo_s(hw, RES_SSD_READ,
                                                               in_b[RES_SSD_READ])
               : p->act_buffers == 1 ? link_s(hw, RES_H2D, moved) +
                                           solo_s(hw, RES_SSD_READ, ssd_act_b)
                                     : 0;
    stall[1] += zero_grad_stall_s(hw, p, (double)model_block_params(c), w, stall[1]);
    F[RES_GPU] += stall[0];
    B[RES_GPU] += stall[1];
    F[RES_D2H] += link_s(hw, RES_D2H, moved);
    F[RES_SSD_WRITE] += link_s(hw, RES_SSD_WRITE, swapped[TIER_SSD]);
    if (plan_optim_tier(p, plan_subgroup_of_block(p, b)) != TIER_GPU)
        grad_loads(hw, p, (double)model_block_params(c), w, B);
}

/* Whether block b's loads are block b - 1's: everything block_loads reads of the two alike. In a
 * GPT the blocks' ops are alike and a plan's activations take a few distinct rows (the ladder's
 * amount splits the blocks in two), so most blocks are their predecessor's again. */
static bool like_previous(const Eval *ev, const Plan *p, int b)
{
    int n = p->arch->n_ops;
    const ActPlace *row = &p->act[b * n];
    return ev->alike && b > 0 && ev->alike[b] && block_reloads(p, b) == block_reloads(p, b - 1) &&
           plan_block_on_gpu(p, b) == plan_block_on_gpu(p, b - 1) &&
           !memcmp(row, row - n, (size_t)n * sizeof *row);
}

/* The phases' loads as closed_form gathers them, besides cf->load_s (per phase and resource,
 * summed over the blocks and the edges): per block, forward's (fsum), the last micro-batch's
 * backward (bsum) and the other micro-batches' (osum, and other: their sum per resource), which
 * differ by zero-infinity's fp32 gradients. */
typedef struct Loads {
    BlockSum fsum, bsum, osum;
    double other[RES_COUNT];
} Loads;

/* One unit's loads (a block, or the edges together) into every sum: forward f, the last
 * micro-batch's backward last, the other micro-batches' backward others. */
static void loads_add(const Eval *ev, ClosedForm *cf, Loads *ld, const double f[RES_COUNT],
                      const double last[RES_COUNT], const double others[RES_COUNT])
{
    block_add(ev, &ld->fsum, f);
    block_add(ev, &ld->bsum, last);
    block_add(ev, &ld->osum, others);
    for (int r = 0; r < RES_COUNT; r++) {
        cf->load_s[CF_FORWARD][r] += f[r];
        cf->load_s[CF_BACKWARD][r] += last[r];
        ld->other[r] += others[r];
    }
}

/* The blocks, summed both ways: per block (the pipeline moves block by block, so a block's
 * heavy copy cannot hide behind another block's compute) and in total. */
static void sum_blocks(const Eval *ev, const Plan *p, ClosedForm *cf, Loads *ld)
{
    const ModelConfig *c = &ev->g->cfg;
    double block_params = (double)model_block_params(c);
    double fb[RES_COUNT] = {0}, bb[RES_COUNT] = {0}, stall[2] = {0};
    for (int b = 0; b < c->n_layer; b++) {
        double lb[RES_COUNT];
        if (!like_previous(ev, p, b)) /* else the previous block's loads are this one's */
            block_loads(ev, p, b, fb, bb, stall);
        memcpy(lb, bb, sizeof lb);
        cf->stall_s[CF_FORWARD] += stall[0];
        cf->stall_s[CF_BACKWARD] +=
            stall[1] + zero_grad32_loads(ev->hw, p, block_params, plan_subgroup_of_block(p, b), lb);
        loads_add(ev, cf, ld, fb, lb, bb);
    }
}

/* The edges: embedding, final LN, LM head and loss, and their weights once an iteration. */
static void sum_edges(const Eval *ev, const Plan *p, ClosedForm *cf, Loads *ld)
{
    const Hardware *hw = ev->hw;
    const Graph *g = ev->g;
    const ModelConfig *c = &g->cfg;
    double w = (double)dtype_bytes(c->dtype), edge_params = (double)model_embed_params(c);
    int L = c->n_layer, M = p->n_micro, tail = plan_subgroup_count(p) - 1;
    double fe[RES_COUNT] = {0}, be[RES_COUNT] = {0};
    for (int i = 0; i < g->n_ops; i++) {
        const Op *op = &g->ops[i];
        if (op->block >= 0 && op->block < L)
            continue;
        fe[RES_GPU] += task_s(ev, op, TASK_FWD);
        if (op->bwd_flops > 0 || op->bwd_io_bytes > 0)
            be[RES_GPU] += task_s(ev, op, TASK_BWD);
    }
    if (!plan_edges_on_gpu(p)) {
        fe[RES_H2D] += link_s(hw, RES_H2D, edge_params * w / M);
        if (p->weights == TIER_SSD)
            fe[RES_SSD_READ] += link_s(hw, RES_SSD_READ, edge_params * w / M);
    }
    if (plan_optim_tier(p, tail) != TIER_GPU)
        grad_loads(hw, p, edge_params, w, be);
    /* zero-infinity: the next micro-batch's head, and the step, wait for the edges' gradients */
    double edge_stall = zero_grad_stall_s(hw, p, edge_params, w, 0);
    be[RES_GPU] += edge_stall;
    double le[RES_COUNT];
    memcpy(le, be, sizeof le);
    cf->stall_s[CF_BACKWARD] += edge_stall + zero_grad32_loads(hw, p, edge_params, tail, le);
    loads_add(ev, cf, ld, fe, le, be);
}

/* The optimizer's loads: in backward (fuyou's sub-groups before the tail) and in the tail.
 * Returns the tail's time where it is a chain of one resource after another, else 0. */
static double optimizer_loads(const Eval *ev, const Plan *p, ClosedForm *cf)
{
    const Hardware *hw = ev->hw;
    const ModelConfig *c = &ev->g->cfg;
    double *B = cf->load_s[CF_BACKWARD], *T = cf->load_s[CF_TAIL];
    double block_params = (double)model_block_params(c), P = (double)model_param_count(c);
    double edge_params = (double)model_embed_params(c);
    int n_groups = plan_subgroup_count(p), tfirst, tcount;
    plan_subgroup_blocks(p, n_groups - 1, &tfirst, &tcount);
    double tail_params = tcount * block_params + edge_params;
    double new_w = p->weights == TIER_SSD ? (double)dtype_bytes(c->dtype) : 0;
    /* states read and written over SSD: those of sub-groups whose states live there */
    double ssd_state_params = 0, ssd_tail_params = 0;
    for (int s = 0; s < n_groups; s++) {
        int first, count;
        plan_subgroup_blocks(p, s, &first, &count);
        double n = count * block_params + (s == n_groups - 1 ? edge_params : 0);
        if (plan_optim_tier(p, s) == TIER_SSD) {
            ssd_state_params += n;
            if (s == n_groups - 1)
                ssd_tail_params = n;
        }
    }
    if (p->policy != POLICY_FUYOU) {
        /* zero-infinity's step, nothing overlapped (DeepSpeed's non-pipelined swapper): after
         * the tail's fp32 gradients are written, per sub-group its states and gradients read,
         * Adam, its new weights and states written, one after the other */
        T[RES_CPU_ADAM] += adam_s(hw, P);
        T[RES_SSD_READ] += link_s(hw, RES_SSD_READ, 16 * ssd_state_params);
        T[RES_SSD_WRITE] += link_s(hw, RES_SSD_WRITE, 4 * ssd_tail_params +
                                                          12 * ssd_state_params + new_w * P);
        return T[RES_CPU_ADAM] + solo_s(hw, RES_SSD_READ, T[RES_SSD_READ]) +
               solo_s(hw, RES_SSD_WRITE, T[RES_SSD_WRITE]);
    }
    /* the last sub-groups may be updated on the GPU, the tail first among them: their AdamW in
     * the GPU's line, the tail's after backward; the rest's on the CPU during backward */
    bool tail_gpu = plan_optim_tier(p, n_groups - 1) == TIER_GPU;
    double on_gpu = tail_gpu ? (double)layout_gpu_state_params(c, p) - tail_params : 0;
    double po = P - tail_params - on_gpu;
    if (on_gpu > 0)
        B[RES_GPU] += cost_gpu_adam_s(hw, on_gpu);
    B[RES_CPU_ADAM] += adam_s(hw, po);
    B[RES_SSD_READ] += link_s(hw, RES_SSD_READ, 12 * (ssd_state_params - ssd_tail_params));
    B[RES_SSD_WRITE] += link_s(hw, RES_SSD_WRITE,
                               12 * (ssd_state_params - ssd_tail_params) + new_w * po);
    if (tail_gpu) {
        T[RES_GPU] += cost_gpu_adam_s(hw, tail_params);
        return 0;
    }
    /* The tail is a chain: Adam, then the new weights out (to SSD) before the next forward can
     * load them. */
    T[RES_CPU_ADAM] += adam_s(hw, tail_params);
    T[RES_SSD_WRITE] += link_s(hw, RES_SSD_WRITE, new_w * tail_params);
    return T[RES_CPU_ADAM] + solo_s(hw, RES_SSD_WRITE, T[RES_SSD_WRITE]);
}

/* A phase's time: its loads' phase formula, or its blocks' sum where that is longer (a block's
 * copy cannot hide behind another block's compute). */
static double phase_or_blocks_s(const Eval *ev, const double load[RES_COUNT],
                                const BlockSum *blocks, Resource *binding)
{
    Resource r;
    double total = phase_s(ev->hw, ev->mem_Bps, load, &r);
    if (blocks->total > total) {
        r = block_binding(blocks);
        total = blocks->total;
    }
    if (binding)
        *binding = r;
    return total;
}

/* The first forward's loads: block 0's weights and the edges', where they do not stay. */
static double fill_s(const Hardware *hw, const Graph *g, const Plan *p)
{
    const ModelConfig *c = &g->cfg;
    double w = (double)dtype_bytes(c->dtype);
    double first_w = (plan_block_on_gpu(p, 0) ? 0 : (double)model_block_params(c) * w) +
                     (plan_edges_on_gpu(p) ? 0 : (double)model_embed_params(c) * w);
    if (first_w <= 0)
        return 0;
    return link_s(hw, RES_H2D, first_w) +
           (p->weights == TIER_SSD ? solo_s(hw, RES_SSD_READ, link_s(hw, RES_SSD_READ, first_w))
                                   : 0);
}

static void closed_form(const Eval *ev, const Plan *p, ClosedForm *cf)
{
    memset(cf, 0, sizeof *cf);
    Loads ld = {0};
    sum_blocks(ev, p, cf, &ld);
    sum_edges(ev, p, cf, &ld);
    double tail_chain = optimizer_loads(ev, p, cf);

    cf->phase_s[CF_FORWARD] = phase_or_blocks_s(ev, cf->load_s[CF_FORWARD], &ld.fsum,
                                                &cf->binding[CF_FORWARD]);
    cf->phase_s[CF_BACKWARD] = phase_or_blocks_s(ev, cf->load_s[CF_BACKWARD], &ld.bsum,
                                                 &cf->binding[CF_BACKWARD]);
    cf->phase_s[CF_TAIL] = phase_s(ev->hw, ev->mem_Bps, cf->load_s[CF_TAIL],
                                   &cf->binding[CF_TAIL]);
    if (tail_chain > 0)
        cf->phase_s[CF_TAIL] = tail_chain;
    cf->fill_s = fill_s(ev->hw, ev->g, p);
    double other = phase_or_blocks_s(ev, ld.other, &ld.osum, NULL);
    int M = p->n_micro;
    cf->iter_s = M * cf->phase_s[CF_FORWARD] + (M - 1) * other + cf->phase_s[CF_BACKWARD] +
                 cf->phase_s[CF_TAIL] + cf->fill_s;
}

void cost_closed_form(const Hardware *hw, const Graph *g, const Plan *p, ClosedForm *cf)
{
    Eval ev = {hw, g, cost_host_mem_Bps(hw), NULL, NULL};
    closed_form(&ev, p, cf);
}

/* Whether op a is priced and kept as op b: what block_loads reads of an op. */
static bool op_alike(const ClosedPrices *cp, const Op *a, const Op *b)
{
    const double *ta = &cp->task_s[(a - cp->g->ops) * PRICED_KINDS];
    const double *tb = &cp->task_s[(b - cp->g->ops) * PRICED_KINDS];
    bool bwd_a = a->bwd_flops > 0 || a->bwd_io_bytes > 0;
    bool bwd_b = b->bwd_flops > 0 || b->bwd_io_bytes > 0;
    return !memcmp(ta, tb, PRICED_KINDS * sizeof *ta) && bwd_a == bwd_b &&
           a->act_bytes == b->act_bytes;
}

int cost_closed_prices_init(ClosedPrices *cp, const Hardware *hw, const Graph *g)
{
    int L = g->cfg.n_layer;
    cp->hw = hw;
    cp->g = g;
    cp->task_s = malloc(((size_t)g->n_ops * PRICED_KINDS + 1) * sizeof *cp->task_s);
    cp->alike = calloc((size_t)L + 1, sizeof *cp->alike);
    if (!cp->task_s || !cp->alike) {
        cost_closed_prices_free(cp);
        return -ENOMEM;
    }
    for (int i = 0; i < g->n_ops; i++)
        for (int k = 0; k < PRICED_KINDS; k++)
            cp->task_s[i * PRICED_KINDS + k] = cost_gpu_task_s(hw, &g->ops[i], (TaskKind)k);
    for (int b = 1; b < L; b++) {
        cp->alike[b] = true;
        for (int i = 0; i < g->arch->n_ops; i++)
            cp->alike[b] &= op_alike(cp, graph_block_op(g, b, i), graph_block_op(g, b - 1, i));
    }
    return 0;
}

void cost_closed_prices_free(ClosedPrices *cp)
{
    free(cp->task_s);
    free(cp->alike);
    cp->task_s = NULL;
    cp->alike = NULL;
}

void cost_closed_form_priced(const ClosedPrices *cp, const Plan *p, ClosedForm *cf)
{
    Eval ev = {cp->hw, cp->g, cost_host_mem_Bps(cp->hw), cp->task_s, cp->alike};
    closed_form(&ev, p, cf);
}
