/* footprint: per-tier memory accounting for a placement; the rules are in footprint.h. */
#include "footprint.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

const char *tier_name(Tier t)
{
    static const char *names[] = {"gpu", "cpu", "ssd"};
    assert(t >= 0 && t < TIER_COUNT);
    return names[t];
}

int tier_parse(const char *s, Tier *out)
{
    for (int t = 0; t < TIER_COUNT; t++)
        if (!strcasecmp(s, tier_name(t)))
            return *out = t, 0;
    return -EINVAL;
}

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

static int64_t max_out_bytes(const Graph *g)
{
    int64_t m = 0;
    for (int i = 0; i < GRAPH_OPS_PER_BLOCK; i++) {
        const Op *op = graph_block_op(g, 0, i);
        if (op->out_bytes > m)
            m = op->out_bytes;
    }
    return m;
}

void footprint_compute(Footprint *f, const Graph *g, const Placement *p)
{
    memset(f, 0, sizeof *f);
    GraphTotals t;
    graph_totals(g, &t);
    double P = (double)t.params, wsz = (double)dtype_bytes(g->cfg.dtype);
    double group_w = (double)t.max_block_params * wsz;
    double subgroup = (double)p->subgroup_blocks * (double)t.max_block_params;

    f->bytes[MEM_WEIGHTS][p->weights] += P * wsz;
    if (p->weights != TIER_GPU)
        f->bytes[MEM_WEIGHTS][TIER_GPU] += (1 + p->prefetch_groups) * group_w;
    if (p->weights == TIER_SSD)
        f->bytes[MEM_STAGING][TIER_CPU] += p->staging_buffers * group_w;

    f->bytes[MEM_MASTER][p->optim] += 4 * P;
    f->bytes[MEM_ADAM_M][p->optim] += 4 * P;
    f->bytes[MEM_ADAM_V][p->optim] += 4 * P;
    if (p->optim == TIER_SSD)
        f->bytes[MEM_STAGING][TIER_CPU] += 3 * subgroup * 12;

    if (p->optim == TIER_GPU) {
        f->bytes[MEM_GRADS][TIER_GPU] += P * wsz;
    } else {
        f->bytes[MEM_GRADS][TIER_GPU] += 2 * group_w;
        f->bytes[MEM_GRADS][TIER_CPU] += 2 * subgroup * wsz;
    }

    double work = 2.0 * (double)max_out_bytes(g);
    f->bytes[MEM_ACTIVATIONS][TIER_GPU] += work;
    if (p->act == ACT_ALL) {
        f->bytes[MEM_ACTIVATIONS][TIER_GPU] += (double)t.act_all_bytes;
        return;
    }
    double ckpt = (double)t.block_ckpt_bytes;
    f->bytes[MEM_ACTIVATIONS][p->checkpoints] += g->cfg.n_layer * ckpt;
    f->bytes[MEM_ACTIVATIONS][TIER_GPU] += (double)(t.block_act_bytes + t.edge_act_bytes);
    if (p->checkpoints != TIER_GPU)
        f->bytes[MEM_ACTIVATIONS][TIER_GPU] += 2 * ckpt;
    if (p->checkpoints == TIER_SSD)
        f->bytes[MEM_STAGING][TIER_CPU] += 2 * ckpt;
}

double footprint_tier_total(const Footprint *f, Tier t)
{
    double sum = 0;
    for (int m = 0; m < MEM_TAG_COUNT; m++)
        sum += f->bytes[m][t];
    return sum;
}

static bool tier_fits(const Graph *g, const Placement *p, const Hardware *hw, Tier t)
{
    Footprint f;
    footprint_compute(&f, g, p);
    return footprint_tier_total(&f, t) <= footprint_capacity(hw, t);
}

static bool fits(const Graph *g, const Placement *p, const Hardware *hw)
{
    return tier_fits(g, p, hw, TIER_GPU) && tier_fits(g, p, hw, TIER_CPU) &&
           tier_fits(g, p, hw, TIER_SSD);
}

void footprint_auto_placement(Placement *p, const Graph *g, const Hardware *hw)
{
    *p = (Placement){.weights = TIER_GPU, .optim = TIER_GPU, .checkpoints = TIER_GPU,
                     .act = ACT_ALL, .prefetch_groups = 1, .staging_buffers = 2,
                     .subgroup_blocks = 1};
    if (fits(g, p, hw))
        return;
    p->act = ACT_CHECKPOINT;
    if (fits(g, p, hw))
        return;
    /* Out of core: states and weights leave the GPU, each to CPU memory while it has room
     * (judged on the CPU tier alone, checkpoints still counted on the GPU), else to SSD. */
    p->weights = TIER_CPU;
    p->optim = TIER_CPU;
    if (!tier_fits(g, p, hw, TIER_CPU))
        p->optim = TIER_SSD;
    if (!tier_fits(g, p, hw, TIER_CPU))
        p->weights = TIER_SSD;
    /* Checkpoints: the GPU if it has room, else CPU memory, else SSD. If nothing fits, the last
     * choice stays and the caller reports which tier overflows. */
    if (tier_fits(g, p, hw, TIER_GPU))
        return;
    p->checkpoints = TIER_CPU;
    if (tier_fits(g, p, hw, TIER_CPU))
        return;
    p->checkpoints = TIER_SSD;
}
