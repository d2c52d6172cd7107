/* cost: task work and resource rates; the formulas are in cost.h. */
#include "cost.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "plan.h"

enum { ADAM_GPU_BYTES_PER_PARAM = 28 };

double cost_gpu_op_s(const Hardware *hw, const Op *op, TaskKind kind)
{
    double peak = hw->gpu_bf16_TFLOPS * 1e12, launch = hw->gpu_launch_us * 1e-6;
    double mem = hw->gpu_mem_GBps * 1e9;
    bool bwd = kind == TASK_BWD;
    switch (op->kind) {
    case OP_GEMM: {
        double eff = hw_gemm_efficiency(hw, op->m, op->n, op->k);
        return (bwd ? op->bwd_flops : op->fwd_flops) / (peak * eff) +
               (double)(bwd ? op->bwd_io_bytes : op->fwd_io_bytes) / mem +
               (bwd ? 2 : 1) * launch;
    }
    case OP_ATTENTION:
        return cost_attention_work(op, kind) / (peak * hw_attn_efficiency(hw, op->head_size)) +
               launch;
    default: {
        /* an op whose work runs inside another's kernels (the GELU's backward in fc2's) moves
         * nothing and launches nothing of its own */
        double io = (double)(bwd ? op->bwd_io_bytes : op->fwd_io_bytes);
        return io > 0 ? io / mem + launch : 0;
    }
    }
}

double cost_attention_work(const Op *op, TaskKind kind)
{
    return kind == TASK_BWD ? 0.5 * 1.25 * op->bwd_flops : 0.5 * op->fwd_flops;
}

double cost_gpu_adam_s(const Hardware *hw, double params)
{
    return params * ADAM_GPU_BYTES_PER_PARAM / (hw->gpu_mem_GBps * 1e9) +
           hw->gpu_launch_us * 1e-6;
}

double cost_grad_sum_s(const Hardware *hw, double params, double grad_bytes, bool first)
{
    double share = (double)plan_grad_sum_threads(hw->cpu_cores) / hw->cpu_cores;
    double GBps = hw->cpu_sum_GBps > 0 ? hw->cpu_sum_GBps
                                       : hw->cpu_mem_GBps * (share < 1 ? share : 1);
    return params * (double)grad_sum_bytes((size_t)grad_bytes, first) / (GBps * 1e9);
}

/* Latency of one copy on a link, in seconds. */
static double link_latency_s(const Hardware *hw, Resource r)
{
    return (r == RES_H2D || r == RES_D2H ? hw->pcie_latency_us : hw->ssd_latency_us) * 1e-6;
}

double cost_alone_rate(const Hardware *hw, Resource r)
{
    switch (r) {
    case RES_H2D: return hw->h2d_GBps * 1e9;
    case RES_D2H: return hw->d2h_GBps * 1e9;
    case RES_SSD_READ: return hw->ssd_count * hw->ssd_read_GBps * 1e9;
    case RES_SSD_WRITE: return hw->ssd_count * hw->ssd_write_GBps * 1e9;
    case RES_CPU_ADAM: return hw->adam_Gparams_per_s * 1e9;
    default: return 1;
    }
}

double cost_host_bytes(Resource r)
{
    return r == RES_GPU ? 0 : r == RES_CPU_ADAM ? COST_ADAM_HOST_BYTES : 1;
}

/* The first two steps of cost.h: rates alone, then the PCIe and SSD coupling and the SSDs' host
 * path ceiling, for the busy resources (idle ones keep their rates alone). */
static void link_rates(const Hardware *hw, const bool busy[RES_COUNT], double rate[RES_COUNT])
{
    for (int r = 0; r < RES_COUNT; r++)
        rate[r] = cost_alone_rate(hw, r);
    if (busy[RES_H2D] && busy[RES_D2H]) {
        rate[RES_H2D] = hw->h2d_bidir_GBps * 1e9;
        rate[RES_D2H] = hw->d2h_bidir_GBps * 1e9;
    }
    bool rd = busy[RES_SSD_READ], wr = busy[RES_SSD_WRITE];
    if (rd && wr && hw->ssd_read_bidir_GBps > 0) { /* measured together */
        rate[RES_SSD_READ] = hw->ssd_count * hw->ssd_read_bidir_GBps * 1e9;
        rate[RES_SSD_WRITE] = hw->ssd_count * hw->ssd_write_bidir_GBps * 1e9;
    } else if (rd && wr) {
        double share = hw->ssd_duplex / 2; /* in [0.5, 1] */
        rate[RES_SSD_READ] *= share;
        rate[RES_SSD_WRITE] *= share;
    }
    double moved = (rd ? rate[RES_SSD_READ] : 0) + (wr ? rate[RES_SSD_WRITE] : 0);
    double host = hw->ssd_host_GBps * 1e9;
    if (host > 0 && moved > host) {
        rate[RES_SSD_READ] *= rd ? host / moved : 1;
        rate[RES_SSD_WRITE] *= wr ? host / moved : 1;
    }
}

/* Host memory bytes per second the busy resources ask for at these rates, each moving host[r]
 * bytes per unit of its work (0 where idle). */
static double host_demand(const double host[RES_COUNT], const double rate[RES_COUNT])
{
    double sum = 0;
    for (int r = 0; r < RES_COUNT; r++)
        sum += rate[r] * host[r];
    return sum;
}

static void resource_host_bytes(const bool busy[RES_COUNT], double host[RES_COUNT])
{
    for (int r = 0; r < RES_COUNT; r++)
        host[r] = busy[r] ? cost_host_bytes(r) : 0;
}

double cost_host_mem_Bps(const Hardware *hw)
{
    /* the configurations the ini states rates for: each resource alone, and the two couplings */
    double ceiling = hw->cpu_mem_GBps * 1e9;
    for (int k = 0; k < RES_COUNT + 2; k++) {
        bool busy[RES_COUNT] = {false};
        if (k < RES_COUNT)
            busy[k] = true;
        else if (k == RES_COUNT)
            busy[RES_H2D] = busy[RES_D2H] = true;
        else
            busy[RES_SSD_READ] = busy[RES_SSD_WRITE] = true;
        double rate[RES_COUNT], host[RES_COUNT];
        link_rates(hw, busy, rate);
        resource_host_bytes(busy, host);
        double demand = host_demand(host, rate);
        if (demand > ceiling)
            ceiling = demand;
    }
    return ceiling;
}

/* Resource r's rate with nothing else busy, every ceiling applied. */
static double solo_rate(const CostModel *m, Resource r)
{
    CostRateCache *cache = m->cache;
    if (cache && cache->have_solo[r])
        return cache->solo[r];
    bool busy[RES_COUNT] = {false};
    double rate[RES_COUNT];
    busy[r] = true;
    cost_rates(m, busy, rate);
    if (cache) {
        cache->solo[r] = rate[r];
        cache->have_solo[r] = true;
    }
    return rate[r];
}

double cost_task_work(const CostModel *m, const Task *t)
{
    const Hardware *hw = m->hw;
    switch (t->kind) {
    case TASK_FWD:
    case TASK_RECOMPUTE:
    case TASK_BWD:
        assert(t->op >= 0 && t->op < m->g->n_ops);
        return cost_gpu_op_s(hw, &m->g->ops[t->op], t->kind);
    case TASK_ADAM:
        return t->res == RES_GPU ? cost_gpu_adam_s(hw, (double)t->params) : (double)t->params;
    case TASK_COPY: {
        double extra_s = link_latency_s(hw, t->res);
        if (t->params > 0) /* a micro-batch's gradients, added into the step's sum */
            extra_s += cost_grad_sum_s(hw, (double)t->params, t->bytes / (double)t->params,
                                       t->micro == 0);
        return t->bytes + extra_s * solo_rate(m, t->res);
    }
    }
    return 0;
}

/* cost_rates with each busy resource moving host[r] bytes of host memory per unit of work, its
 * rate first multiplied by cores[r] (the share of the cores its threads get; NULL: all 1). */
static void rates_moving(const CostModel *m, const bool busy[RES_COUNT],
                         const double host[RES_COUNT], const double *cores,
                         double rate[RES_COUNT])
{
    const Hardware *hw = m->hw;
    link_rates(hw, busy, rate);
    for (int r = 0; cores && r < RES_COUNT; r++)
        rate[r] *= cores[r];
    /* host memory, shared in proportion to demand; the ceiling is only worked out when the
     * demand passes mem_GBps, which it can only raise */
    double demand = host_demand(host, rate);
    double ceiling = demand <= hw->cpu_mem_GBps * 1e9 ? demand : cost_host_mem_Bps(hw);
    if (demand > ceiling)
        for (int r = 0; r < RES_COUNT; r++)
            if (host[r] > 0)
                rate[r] *= ceiling / demand;
}

void cost_rates(const CostModel *m, const bool busy[RES_COUNT], double rate[RES_COUNT])
{
    double host[RES_COUNT];
    resource_host_bytes(busy, host);
    rates_moving(m, busy, host, NULL, rate);
}

double cost_sum_core_share(const Hardware *hw)
{
    int a = plan_adam_threads(hw->cpu_cores, true), s = plan_grad_sum_threads(hw->cpu_cores);
    return (double)a / (a + s);
}

/* A gradient copy that also adds into the step's sum (several micro-batches). */
static bool summing_copy(const Task *t)
{
    return t->kind == TASK_COPY && t->params > 0;
}

/* cost_task_rates, worked out. */
static void task_rates(const CostModel *m, const Task *const running[RES_COUNT],
                       double rate[RES_COUNT])
{
    bool busy[RES_COUNT];
    double host[RES_COUNT];
    for (int r = 0; r < RES_COUNT; r++)
        busy[r] = running[r] != NULL;
    resource_host_bytes(busy, host);
    double cores[RES_COUNT];
    for (int r = 0; r < RES_COUNT; r++)
        cores[r] = 1;
    for (int r = 0; r < RES_COUNT; r++) {
        const Task *t = running[r];
        if (!busy[r] || !summing_copy(t))
            continue;
        /* a gradient copy that adds into the step's sum, whose seconds count as bytes at the
         * link's rate: its host memory is the copy's bytes and the sum's (gradient read, sum
         * read unless first, sum written) over its work */
        double work = cost_task_work(m, t);
        double sum_bytes = (double)grad_sum_bytes((size_t)(t->bytes / (double)t->params),
                                                  t->micro == 0);
        host[r] = ((double)t->bytes + sum_bytes * (double)t->params) / work;
        if (busy[RES_CPU_ADAM]) {
            /* the sum's threads and the Adam's share the Adam's cores while the sum runs, after
             * the copy on the same lane: the copy's sum, f of its work, at the share of its
             * rate; the Adam at it over the sum's part of the copy's time, q */
            double share = cost_sum_core_share(m->hw);
            double sum = cost_grad_sum_s(m->hw, (double)t->params, t->bytes / (double)t->params,
                                         t->micro == 0) * solo_rate(m, t->res);
            double f = sum / work, slow = 1 - f + f / share;
            double q = f / share / slow;
            cores[r] = 1 / slow;
            cores[RES_CPU_ADAM] = 1 - q * (1 - share);
        }
    }
    rates_moving(m, busy, host, cores, rate);
}

void cost_task_rates(const CostModel *m, const Task *const running[RES_COUNT],
                     double rate[RES_COUNT])
{
    unsigned set = 0;
    bool summing = false;
    for (int r = 0; r < RES_COUNT; r++)
        if (running[r]) {
            set |= 1u << r;
            summing |= summing_copy(running[r]);
        }
    CostRateCache *cache = m->cache;
    if (!cache || summing) { /* a summing copy's rates depend on the copy */
        task_rates(m, running, rate);
        return;
    }
    if (!cache->have[set]) {
        task_rates(m, running, cache->rate[set]);
        cache->have[set] = true;
    }
    memcpy(rate, cache->rate[set], sizeof cache->rate[set]);
}

double cost_task_alone_s(const CostModel *m, const Task *t)
{
    return cost_task_work(m, t) / solo_rate(m, t->res);
}

/* The executor's own time before each GPU op task (gpu.task_us). */
static double gpu_lead_s(const Hardware *hw)
{
    return hw->gpu_task_us * 1e-6;
}

double cost_gpu_task_s(const Hardware *hw, const Op *op, TaskKind kind)
{
    return cost_gpu_op_s(hw, op, kind) + gpu_lead_s(hw);
}

double cost_task_lead_s(const CostModel *m, const Task *t)
{
    bool op = t->kind == TASK_FWD || t->kind == TASK_RECOMPUTE || t->kind == TASK_BWD;
    return t->res == RES_GPU && op ? gpu_lead_s(m->hw) : 0;
}
