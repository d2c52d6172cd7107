/* footprint: per-tier memory accounting for a plan; the rules are in footprint.h. */
#include "footprint.h"

#include <assert.h>
#include <string.h>

const char *mem_tag_name(MemTag m)
{
    static const char *names[] = {"weights", "master", "adam_m", "adam_v", "grads",
                                  "activations", "staging"};
    assert(m >= 0 && m < MEM_TAG_COUNT);
    return names[m];
}

double footprint_capacity(const Hardware *hw, Tier t)
{
    return t == TIER_GPU ? hw_gpu_bytes(hw) : t == TIER_CPU ? hw_cpu_bytes(hw) : hw_ssd_bytes(hw);
}

static int64_t max_block_out_bytes(const Graph *g)
{
    int64_t m = 0;
    for (int i = 0; i < GRAPH_OPS_PER_BLOCK; i++) {
        const Op *op = graph_block_op(g, 0, i);
        if (op->out_bytes > m)
            m = op->out_bytes;
    }
    return m;
}

/* Largest optimizer sub-group, in parameters (the tail carries the embedding). */
static double max_subgroup_params(const Graph *g, const Plan *p)
{
    double block = (double)model_block_params(&g->cfg), best = 0;
    for (int s = 0; s < plan_subgroup_count(p); s++) {
        int first, count;
        plan_subgroup_blocks(p, s, &first, &count);
        double n = count * block;
        if (s == plan_subgroup_count(p) - 1)
            n += (double)model_embed_params(&g->cfg);
        if (n > best)
            best = n;
    }
    return best;
}

static void add_activations(Footprint *f, const Graph *g, const Plan *p, const GraphTotals *t)
{
    double fetched_max = 0, ssd_max = 0, recompute_max = 0;
    for (int b = 0; b < g->cfg.n_layer; b++) {
        double at[TIER_COUNT] = {0}, recomputed = 0;
        for (int i = 0; i < GRAPH_OPS_PER_BLOCK; i++) {
            ActPlace a = plan_act(p, b, i);
            double n = (double)graph_block_op(g, b, i)->act_bytes;
            if (a == ACT_RECOMPUTE)
                recomputed += n;
            else
                at[a] += n;
        }
        if (recomputed > recompute_max)
            recompute_max = recomputed;
        for (int tier = 0; tier < TIER_COUNT; tier++)
            f->bytes[MEM_ACTIVATIONS][tier] += at[tier];
        if (at[TIER_CPU] + at[TIER_SSD] > fetched_max)
            fetched_max = at[TIER_CPU] + at[TIER_SSD];
        if (at[TIER_SSD] > ssd_max)
            ssd_max = at[TIER_SSD];
    }
    f->bytes[MEM_ACTIVATIONS][TIER_GPU] += recompute_max + p->act_buffers * fetched_max +
                                           (double)t->edge_act_bytes +
                                           2.0 * (double)max_block_out_bytes(g);
    f->bytes[MEM_STAGING][TIER_CPU] += 2 * ssd_max;
}

void footprint_compute(Footprint *f, const Graph *g, const Plan *p)
{
    memset(f, 0, sizeof *f);
    GraphTotals t;
    graph_totals(g, &t);
    const ModelConfig *c = &g->cfg;
    double P = (double)t.params, wsz = (double)dtype_bytes(c->dtype);
    double block_w = (double)model_block_params(c) * wsz;
    double edge_w = (double)model_embed_params(c) * wsz;

    f->bytes[MEM_WEIGHTS][p->weights] += P * wsz;
    if (p->weights != TIER_GPU)
        f->bytes[MEM_WEIGHTS][TIER_GPU] += p->weight_buffers * block_w + edge_w;
    if (p->weights == TIER_SSD)
        f->bytes[MEM_STAGING][TIER_CPU] += p->pinned_buffers * block_w;

    bool any_ssd = false;
    for (int s = 0; s < plan_subgroup_count(p); s++) {
        int first, count;
        plan_subgroup_blocks(p, s, &first, &count);
        double n = count * (double)model_block_params(c) +
                   (s == plan_subgroup_count(p) - 1 ? (double)model_embed_params(c) : 0);
        Tier t = plan_optim_tier(p, s);
        any_ssd |= t == TIER_SSD;
        f->bytes[MEM_MASTER][t] += 4 * n;
        f->bytes[MEM_ADAM_M][t] += 4 * n;
        f->bytes[MEM_ADAM_V][t] += 4 * n;
    }
    double group = max_subgroup_params(g, p);
    if (any_ssd)
        f->bytes[MEM_STAGING][TIER_CPU] += p->state_buffers * group * 12;

    if (p->optim == TIER_GPU) {
        f->bytes[MEM_GRADS][TIER_GPU] += P * (p->micro_batches > 1 ? 4 : wsz);
    } else {
        double gsz = p->micro_batches > 1 ? 4 : wsz;
        double held = p->policy == POLICY_ZERO_INFINITY || p->micro_batches > 1
                          ? P : p->host_grad_groups * group;
        f->bytes[MEM_GRADS][TIER_GPU] += p->grad_buffers * (block_w > edge_w ? block_w : edge_w);
        f->bytes[MEM_GRADS][TIER_CPU] += (held < P ? held : P) * gsz;
    }
    add_activations(f, g, p, &t);
}

double footprint_tier_total(const Footprint *f, Tier t)
{
    double sum = 0;
    for (int m = 0; m < MEM_TAG_COUNT; m++)
        sum += f->bytes[m][t];
    return sum;
}

unsigned footprint_overflow(const Footprint *f, const Hardware *hw)
{
    unsigned mask = 0;
    for (int t = 0; t < TIER_COUNT; t++)
        if (footprint_tier_total(f, t) > footprint_capacity(hw, t))
            mask |= 1u << t;
    return mask;
}

static unsigned overflow(const Graph *g, const Plan *p, const Hardware *hw)
{
    Footprint f;
    footprint_compute(&f, g, p);
    return footprint_overflow(&f, hw);
}

void footprint_auto_place(Plan *p, const Graph *g, const Hardware *hw)
{
    const unsigned gpu = 1u << TIER_GPU, cpu = 1u << TIER_CPU;
    p->weights = p->optim = TIER_GPU;
    plan_set_all_act(p, ACT_GPU, ACT_GPU);
    if (!overflow(g, p, hw))
        return;
    plan_set_all_act(p, ACT_GPU, ACT_RECOMPUTE);
    if (!overflow(g, p, hw))
        return;
    /* Out of core: states and weights leave the GPU, each to CPU memory while it has room
     * (judged on the CPU tier alone, checkpoints still counted on the GPU), else to SSD. */
    p->weights = p->optim = TIER_CPU;
    if (overflow(g, p, hw) & cpu)
        p->optim = TIER_SSD;
    if (overflow(g, p, hw) & cpu)
        p->weights = TIER_SSD;
    if (!(overflow(g, p, hw) & gpu))
        return;
    plan_set_all_act(p, ACT_CPU, ACT_RECOMPUTE);
    if (!(overflow(g, p, hw) & cpu))
        return;
    plan_set_all_act(p, ACT_SSD, ACT_RECOMPUTE);
}
