/* plan: defaults, validation and the sub-group layout; see plan.h. */
#include "plan.h"

#include "units.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

const char *policy_name(Policy p)
{
    return p == POLICY_FUYOU ? "fuyou" : "zero-infinity";
}

int policy_parse(const char *s, Policy *out)
{
    if (!strcasecmp(s, "fuyou"))
        return *out = POLICY_FUYOU, 0;
    if (!strcasecmp(s, "zero-infinity") || !strcasecmp(s, "zero_infinity"))
        return *out = POLICY_ZERO_INFINITY, 0;
    return -EINVAL;
}

const char *act_place_name(ActPlace a)
{
    static const char *names[] = {"gpu", "cpu", "ssd", "recompute"};
    return names[a];
}

int plan_init(Plan *p, const Graph *g, Policy policy, Err *e)
{
    *p = (Plan){.policy = policy, .seqs_per_micro = g->batch, .n_micro = 1, .seq = g->seq,
                .n_layer = g->cfg.n_layer, .arch = g->arch, .weights = TIER_SSD, .optim = TIER_SSD,
                .subgroup_blocks = 1, .tail_blocks = 1, .prefetch_depth = 1,
                .weight_buffers = 2, .pinned_buffers = 4, .act_buffers = 2, .grad_buffers = 2,
                .state_buffers = 3, .host_grad_groups = PLAN_HOST_GRAD_GROUPS,
                .copy_chunk_bytes = PLAN_COPY_CHUNK_BYTES};
    p->act = malloc((size_t)p->n_layer * (size_t)p->arch->n_ops * sizeof *p->act);
    if (!p->act)
        return err_set(e, -ENOMEM, "out of memory for a plan of %d blocks", p->n_layer);
    plan_set_all_act(p, ACT_CPU, ACT_RECOMPUTE);
    return 0;
}

void plan_free(Plan *p)
{
    free(p->act);
    p->act = NULL;
}

int plan_copy(Plan *dst, const Plan *src, Err *e)
{
    *dst = *src;
    size_t n = (size_t)src->n_layer * (size_t)src->arch->n_ops * sizeof *src->act;
    dst->act = malloc(n);
    if (!dst->act)
        return err_set(e, -ENOMEM, "out of memory copying a plan");
    memcpy(dst->act, src->act, n);
    return 0;
}

ActPlace plan_act(const Plan *p, int block, int op)
{
    assert(block >= 0 && block < p->n_layer && op >= 0 && op < p->arch->n_ops);
    return p->act[block * p->arch->n_ops + op];
}

void plan_set_act(Plan *p, int block, int op, ActPlace a)
{
    assert(block >= 0 && block < p->n_layer && op >= 0 && op < p->arch->n_ops);
    assert(op != BLOCK_CKPT_OP || a != ACT_RECOMPUTE);
    p->act[block * p->arch->n_ops + op] = a;
}

void plan_set_all_act(Plan *p, ActPlace ckpt, ActPlace inner)
{
    for (int b = 0; b < p->n_layer; b++)
        plan_set_act(p, b, BLOCK_CKPT_OP, ckpt);
    plan_set_inner_act(p, inner);
}

void plan_set_inner_act(Plan *p, ActPlace inner)
{
    for (int b = 0; b < p->n_layer; b++)
        for (int i = 0; i < p->arch->n_ops; i++)
            if (i != BLOCK_CKPT_OP)
                plan_set_act(p, b, i, inner);
}

/* optim_stream_groups: sub-groups in CPU memory, other than the tail, of fuyou's step on one
 * micro-batch, whose new weights go home to CPU memory. */
static int validate_streamed(const Plan *p, Err *e)
{
    int n = p->optim_stream_groups, G = plan_subgroup_count(p);
    if (!n)
        return 0;
    if (n < 0 || n > G)
        return err_set(e, -EINVAL, "plan: %d sub-groups streamed to the GPU, of %d", n, G);
    if (p->policy != POLICY_FUYOU || p->n_micro > 1 || p->optim == TIER_GPU)
        return err_set(e, -EINVAL, "plan: streaming sub-groups to the GPU's AdamW takes fuyou's "
                       "step on one micro-batch with the optimizer off the GPU "
                       "(optim-stream-groups 0)");
    if (p->weights != TIER_CPU)
        return err_set(e, -EINVAL, "plan: streamed sub-groups send their new weights to CPU "
                       "memory: they need the weights there (weights cpu)");
    if (!p->optim_gpu_groups)
        return err_set(e, -EINVAL, "plan: the tail sub-group (with the edges) is not streamed: "
                       "keep it on the GPU (optim-gpu-groups at least 1)");
    int in_cpu = p->optim == TIER_SSD ? p->optim_cpu_groups : G - p->optim_gpu_groups;
    if (n > in_cpu)
        return err_set(e, -EINVAL, "plan: %d sub-groups streamed to the GPU, but %d have their "
                       "states in CPU memory", n, in_cpu);
    return 0;
}

int plan_validate(const Plan *p, Err *e)
{
    enum { MAX = PLAN_MAX_COUNT };
    const struct { const char *name; int v, min, max; } counts[] = {
        {"micro-batch", p->seqs_per_micro, 1, INT_MAX}, {"micro-batches", p->n_micro, 1, MAX},
        {"sequence length", p->seq, 1, INT_MAX}, {"sub-group blocks", p->subgroup_blocks, 1, MAX},
        {"tail blocks", p->tail_blocks, 1, MAX}, {"prefetch depth", p->prefetch_depth, 0, MAX - 1},
        {"weight buffers", p->weight_buffers, 1, MAX},
        {"pinned buffers", p->pinned_buffers, 1, MAX},
        {"activation buffers", p->act_buffers, 1, MAX},
        {"gradient buffers", p->grad_buffers, 1, MAX}, {"state buffers", p->state_buffers, 1, MAX},
        {"host gradient groups", p->host_grad_groups, 1, MAX},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (counts[i].v < counts[i].min)
            return err_set(e, -EINVAL, "plan: %s must be at least %d (got %d)", counts[i].name,
                           counts[i].min, counts[i].v);
        if (counts[i].v > counts[i].max)
            return err_set(e, -EINVAL, "plan: %s must be %d to %d (got %d)", counts[i].name,
                           counts[i].min, counts[i].max, counts[i].v);
    }
    if (p->weight_buffers < p->prefetch_depth + 1)
        return err_set(e, -EINVAL, "plan: %d weight buffers cannot hold a prefetch depth of %d "
                       "(needs depth + 1)", p->weight_buffers, p->prefetch_depth);
    if (p->copy_chunk_bytes < 0)
        return err_set(e, -EINVAL, "copy chunk must be at least 0 bytes (got %lld)",
                       (long long)p->copy_chunk_bytes);
    if (p->optim_cpu_groups < 0 || p->optim_cpu_groups > plan_subgroup_count(p))
        return err_set(e, -EINVAL, "plan: %d sub-groups' states in CPU memory, of %d",
                       p->optim_cpu_groups, plan_subgroup_count(p));
    if (p->optim_cpu_groups && p->optim != TIER_SSD)
        return err_set(e, -EINVAL, "plan: keeping some sub-groups' states in CPU memory needs "
                       "the rest on SSD (optim ssd)");
    if (p->optim_gpu_groups < 0 || p->optim_gpu_groups > plan_subgroup_count(p))
        return err_set(e, -EINVAL, "plan: %d sub-groups' states on the GPU, of %d",
                       p->optim_gpu_groups, plan_subgroup_count(p));
    if (p->optim_gpu_groups && p->optim == TIER_GPU)
        return err_set(e, -EINVAL, "plan: with the optimizer on the GPU every sub-group is "
                       "there already (optim-gpu-groups 0)");
    if ((p->weights == TIER_GPU) != (p->optim == TIER_GPU))
        return err_set(e, -EINVAL, "plan: weights on %s with the optimizer states on %s: the "
                       "weights on the GPU are updated there, with the states (weights gpu and "
                       "optim gpu together; optim-gpu-groups N keeps the last N sub-groups' "
                       "weights and states there)", tier_name(p->weights), tier_name(p->optim));
    if (p->optim == TIER_GPU && p->policy != POLICY_FUYOU)
        return err_set(e, -EINVAL, "plan: %s keeps the optimizer states off the GPU "
                       "(DeepSpeed's offload_optimizer)", policy_name(p->policy));
    if (p->optim == TIER_GPU && p->n_micro > 1)
        return err_set(e, -EINVAL, "plan: with everything on the GPU, one micro-batch (got %d): "
                       "its sub-groups are updated during backward, so their gradients are not "
                       "summed across micro-batches", p->n_micro);
    if (p->optim_gpu_groups + p->optim_cpu_groups > plan_subgroup_count(p))
        return err_set(e, -EINVAL, "plan: %d sub-groups on the GPU and %d in CPU memory, of %d",
                       p->optim_gpu_groups, p->optim_cpu_groups, plan_subgroup_count(p));
    if (p->optim_gpu_groups && p->policy != POLICY_FUYOU)
        return err_set(e, -EINVAL, "plan: sub-groups updated on the GPU are fuyou's; %s runs "
                       "its step on the CPU", policy_name(p->policy));
    if (p->optim_gpu_groups && p->n_micro > 1)
        return err_set(e, -EINVAL, "plan: sub-groups updated on the GPU take one micro-batch "
                       "(got %d): their gradients are not summed across micro-batches",
                       p->n_micro);
    int rc = validate_streamed(p, e);
    if (rc)
        return rc;
    if (p->tail_blocks > p->n_layer)
        return err_set(e, -EINVAL, "plan: tail of %d blocks exceeds the model's %d",
                       p->tail_blocks, p->n_layer);
    if (p->subgroup_blocks > p->n_layer)
        return err_set(e, -EINVAL, "plan: sub-groups of %d blocks exceed the model's %d",
                       p->subgroup_blocks, p->n_layer);
    for (int b = 0; b < p->n_layer; b++)
        if (plan_act(p, b, BLOCK_CKPT_OP) == ACT_RECOMPUTE)
            return err_set(e, -EINVAL, "plan: block %d's checkpoint cannot be recomputed", b);
    return 0;
}

/* Blocks [tail_blocks, n_layer) form groups of subgroup_blocks counted from the end (the last
 * group before the tail may be short); blocks [0, tail_blocks) are the tail. */
int plan_subgroup_count(const Plan *p)
{
    int rest = p->n_layer - p->tail_blocks;
    return (rest + p->subgroup_blocks - 1) / p->subgroup_blocks + 1;
}

void plan_subgroup_blocks(const Plan *p, int g, int *first, int *count)
{
    int n = plan_subgroup_count(p);
    assert(g >= 0 && g < n);
    if (g == n - 1) {
        *first = 0;
        *count = p->tail_blocks;
        return;
    }
    int end = p->n_layer - g * p->subgroup_blocks;
    int start = end - p->subgroup_blocks;
    if (start < p->tail_blocks)
        start = p->tail_blocks;
    *first = start;
    *count = end - start;
}

int plan_gpu_groups(const Plan *p)
{
    return p->optim == TIER_GPU ? plan_subgroup_count(p) : p->optim_gpu_groups;
}

Tier plan_optim_tier(const Plan *p, int g)
{
    int G = plan_subgroup_count(p);
    if (g >= G - p->optim_gpu_groups)
        return TIER_GPU;
    if (p->optim == TIER_SSD && g >= G - p->optim_gpu_groups - p->optim_cpu_groups)
        return TIER_CPU;
    return p->optim;
}

bool plan_block_on_gpu(const Plan *p, int block)
{
    return plan_optim_tier(p, plan_subgroup_of_block(p, block)) == TIER_GPU;
}

bool plan_edges_on_gpu(const Plan *p)
{
    return plan_gpu_groups(p) > 0;
}

bool plan_group_streamed(const Plan *p, int g)
{
    int end = plan_subgroup_count(p) - p->optim_gpu_groups;
    return p->optim_stream_groups > 0 && g < end && g >= end - p->optim_stream_groups;
}

bool plan_grads_on_gpu(const Plan *p, int block)
{
    int g = plan_subgroup_of_block(p, block);
    return plan_optim_tier(p, g) == TIER_GPU || plan_group_streamed(p, g);
}

int plan_gpu_grad_blocks(const Plan *p)
{
    int n = 0;
    while (n < p->n_layer && plan_grads_on_gpu(p, n))
        n++;
    return n;
}

void plan_set_stream_groups(Plan *p, int n)
{
    p->optim_stream_groups = n;
    int cpu = plan_subgroup_count(p) - p->optim_gpu_groups - n;
    p->host_grad_groups = n > 0 && cpu > PLAN_HOST_GRAD_GROUPS ? cpu : PLAN_HOST_GRAD_GROUPS;
}

int plan_gpu_group_blocks(const Plan *p)
{
    int n = 0;
    while (plan_gpu_groups(p) && n < p->n_layer &&
           plan_optim_tier(p, plan_subgroup_of_block(p, n)) == TIER_GPU)
        n++;
    return n;
}

int plan_subgroup_of_block(const Plan *p, int block)
{
    assert(block >= 0 && block < p->n_layer);
    if (block < p->tail_blocks)
        return plan_subgroup_count(p) - 1;
    return (p->n_layer - 1 - block) / p->subgroup_blocks;
}

void plan_inner_kept_bytes(const Plan *p, const Graph *g, double kept[TIER_COUNT])
{
    for (int b = 0; b < p->n_layer; b++)
        for (int i = 0; i < p->arch->n_ops; i++) {
            ActPlace a = plan_act(p, b, i);
            if (i != BLOCK_CKPT_OP && a != ACT_RECOMPUTE)
                kept[a] += (double)graph_block_op(g, b, i)->act_bytes;
        }
}

char *plan_summary(const Plan *p, const Graph *g, char *buf, size_t n)
{
    const char *gpu = g->has_lane && g->lane.on_host ? "device" : tier_name(TIER_GPU);
    double bytes[4] = {0};
    for (int b = 0; b < p->n_layer; b++)
        for (int i = 0; i < p->arch->n_ops; i++)
            bytes[plan_act(p, b, i)] += (double)graph_block_op(g, b, i)->act_bytes;
    char kb[4][24], cpu_groups[256] = "";
    for (int a = 0; a < 4; a++)
        units_bytes(kb[a], sizeof kb[a], bytes[a]);
    int ng = p->optim_gpu_groups, nc = p->optim_cpu_groups, ns = p->optim_stream_groups;
    int at = 0;
    if (ng)
        at = snprintf(cpu_groups, sizeof cpu_groups, " (the last %d sub-group%s on %s with "
                      "the weights, updated there%s", ng, ng == 1 ? "'s" : "s'", gpu,
                      nc || ns ? "; " : ")");
    if (nc)
        at += snprintf(cpu_groups + at, sizeof cpu_groups - (size_t)at, "%s%d sub-group%s in "
                       "cpu memory%s", ng ? "the " : " (the last ", nc, nc == 1 ? "'s" : "s'",
                       ns ? "; " : ")");
    if (ns)
        snprintf(cpu_groups + at, sizeof cpu_groups - (size_t)at, "of those in cpu memory, "
                 "the last %d streamed to %s and updated there)", ns, gpu);
    /* zero-infinity's step is DeepSpeed's (plan.h), whatever the plan's numbers */
    const char *how = p->policy == POLICY_ZERO_INFINITY
                          ? " (DeepSpeed's defaults: its step after backward, one sub-group at "
                            "a time)" : "";
    char tiers[96];
    if (p->optim == TIER_GPU)
        snprintf(tiers, sizeof tiers, "weights and optimizer states on %s, updated there", gpu);
    else
        snprintf(tiers, sizeof tiers, "weights on %s, optimizer states on %s",
                 p->weights == TIER_GPU ? gpu : tier_name(p->weights), tier_name(p->optim));
    snprintf(buf, n,
             "policy %s%s; %s%s; activations with the block "
             "checkpoints: on %s %s, swapped to cpu %s, to ssd %s, recomputed %s; sub-groups of %d block%s (tail %d + "
             "embedding); prefetch depth %d; buffers: weights %d, pinned %d, activations %d, "
             "gradients %d, states %d; %d micro-batch%s of %d x %d tokens",
             policy_name(p->policy), how, tiers, cpu_groups, gpu,
             kb[ACT_GPU],
             kb[ACT_CPU], kb[ACT_SSD], kb[ACT_RECOMPUTE], p->subgroup_blocks,
             p->subgroup_blocks == 1 ? "" : "s", p->tail_blocks, p->prefetch_depth,
             p->weight_buffers, p->pinned_buffers, p->act_buffers, p->grad_buffers,
             p->state_buffers, p->n_micro, p->n_micro == 1 ? "" : "es",
             p->seqs_per_micro, p->seq);
    return buf;
}

/* The nearest whole number of blocks of block_params to params, within [lo, hi]. */
static int blocks_near(double params, double block_params, int lo, int hi)
{
    double n = round(params / block_params);
    return n < lo ? lo : n > hi ? hi : (int)n;
}

/* Parameters of c's largest tensor: the token embedding (and an untied head), the position
 * embedding, fc1 and fc2, or qkv. */
static double largest_tensor(const ModelConfig *c)
{
    double C = c->d_model, t[] = {(double)c->vocab * C, (double)c->max_seq * C,
                                  (double)c->d_ff * C, 3 * C * C};
    double most = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        most = t[i] > most ? t[i] : most;
    return most;
}

void plan_zero_infinity_config(Plan *p, const ModelConfig *c)
{
    double block = (double)model_block_params(c), edge = (double)model_embed_params(c);
    double P = (double)model_param_count(c);
    int L = p->n_layer;
    p->policy = POLICY_ZERO_INFINITY;
    p->copy_chunk_bytes = 0; /* its copies are its own (per tensor), not the plan's chunks */
    p->weights = P <= ZI_MAX_IN_CPU_PARAMS ? TIER_CPU : TIER_SSD;
    p->optim = TIER_SSD;
    p->optim_cpu_groups = p->optim_gpu_groups = p->optim_stream_groups = 0;
    plan_set_all_act(p, ACT_CPU, ACT_RECOMPUTE);
    /* DeepSpeed closes a sub-group at the first tensor that takes it to sub_group_size, from
     * the embedding on; a model within it is one sub-group */
    p->subgroup_blocks = blocks_near(ZI_SUB_GROUP_PARAMS, block, 1, L);
    p->tail_blocks = P <= ZI_SUB_GROUP_PARAMS
                         ? L : blocks_near(ZI_SUB_GROUP_PARAMS - edge, block, 1, L);
    p->weight_buffers = blocks_near(ZI_MAX_LIVE_PARAMS, block, 1, L);
    p->prefetch_depth = p->weight_buffers >= 2 ? 1 : 0;
    double buffer = fmax(ZI_PARAM_BUFFER_PARAMS, largest_tensor(c));
    p->pinned_buffers = blocks_near(ZI_PARAM_BUFFERS * buffer, block, 1, L);
    /* DeepSpeed's gradient hook copies a gradient out (to pageable memory and back, then into
     * the swapper's pinned buffers) before it returns, on the thread that launches backward */
    p->grad_buffers = 1;
    p->state_buffers = 1;
}

int plan_grad_sum_threads(int cores)
{
    return cores >= 8 ? 4 : 1;
}

int plan_adam_threads(int cores, bool gpu)
{
    return gpu && cores > 3 ? cores - 2 : cores;
}
