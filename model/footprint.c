/* footprint: per-tier memory accounting for a plan (footprint.h; its terms: ARCHITECTURE.md,
 * "Memory and the plan"). */
#include "footprint.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "layout.h"

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

static double align_up(double n, double a)
{
    return ceil(n / a) * a;
}

/* A host pool allocation: whole 4 KiB pages, at least one. */
static double page(double n)
{
    return align_up(n > 0 ? n : 1, 4096);
}

/* A GPU allocation as the CUDA lane carves its own buffers: 256-byte aligned. */
static double gpu_rnd(double n)
{
    return align_up(n, 256);
}

void footprint_cuda_lane(const Graph *g, LaneSizes *lane)
{
    const ModelConfig *c = &g->cfg;
    int64_t d = (int64_t)dtype_bytes(c->dtype); /* an element of the lane's 16-bit buffers */
    g->arch->lane_tensor_bytes(c, g->batch, g->seq, d, lane->tensor);
    int64_t own[LANE_BUFFERS];
    g->arch->cuda_lane_buffers(c, g->batch, g->seq, own);
    lane->own = 0;
    for (int i = 0; i < LANE_BUFFERS; i++)
        lane->own += lane_round(own[i]);
    lane->weight_bytes = lane->grad_bytes = (int)d;
    lane->on_host = false;
}

void footprint_cpu_lane(const ModelConfig *c, int B, int T, LaneSizes *lane)
{
    *lane = (LaneSizes){.weight_bytes = 4, .grad_bytes = 4, .on_host = true};
    model_arch(c)->cpu_lane_bytes(c, B, T, lane->tensor, &lane->own);
}

/* Where each block tensor lives between forward and backward: home[b][x] is a tier, or -1 when
 * it is recomputed (or never kept). */
static void tensor_homes(const Plan *p, int b, int home[ARCH_MAX_TENSORS])
{
    for (int x = 0; x < arch_tensors(p->arch); x++)
        home[x] = -1;
    for (int i = 0; i < p->arch->n_ops; i++)
        for (const signed char *x = p->arch->ops[i].saves; *x >= 0; x++) {
            ActPlace a = plan_act(p, b, i);
            home[*x] = a == ACT_RECOMPUTE ? -1 : (int)a;
        }
}

static void add_activations(Footprint *f, const ModelConfig *c, const Plan *p,
                            const LaneSizes *lane)
{
    const BlockArch *arch = p->arch;
    int n_tensors = arch_tensors(arch);
    bool swapped[ARCH_MAX_TENSORS] = {false};
    double ckpt_ssd_max = 0, inner_ssd_max = 0;
    for (int b = 0; b < c->n_layer; b++) {
        int home[ARCH_MAX_TENSORS];
        tensor_homes(p, b, home);
        double cpu = 0, inner_ssd = 0;
        for (int x = 0; x < n_tensors; x++) {
            double n = (double)lane->tensor[x];
            if (home[x] == TIER_GPU)
                f->bytes[MEM_ACTIVATIONS][TIER_GPU] += n;
            else if (home[x] == TIER_CPU)
                cpu += gpu_rnd(n);
            else if (home[x] == TIER_SSD && x != arch->input)
                inner_ssd += gpu_rnd(n);
            else if (home[x] == TIER_SSD && n > ckpt_ssd_max)
                ckpt_ssd_max = n;
            if (home[x] == TIER_SSD && x == arch->input)
                f->bytes[MEM_ACTIVATIONS][TIER_SSD] += n;
            swapped[x] |= home[x] == TIER_CPU || home[x] == TIER_SSD;
        }
        if (cpu > 0)
            f->bytes[MEM_ACTIVATIONS][TIER_CPU] += page(cpu);
        f->bytes[MEM_ACTIVATIONS][TIER_SSD] += inner_ssd;
        if (inner_ssd > inner_ssd_max)
            inner_ssd_max = inner_ssd;
    }
    double slot = 0, scratch = 0;
    for (int x = 0; x < n_tensors; x++) {
        scratch += gpu_rnd((double)lane->tensor[x]);
        if (swapped[x])
            slot += gpu_rnd((double)lane->tensor[x]);
    }
    f->bytes[MEM_ACTIVATIONS][TIER_GPU] += p->act_buffers * slot + scratch +
                                           (double)lane->tensor[arch->output] +
                                           (double)lane->own;
    double out = ckpt_ssd_max > inner_ssd_max ? ckpt_ssd_max : inner_ssd_max;
    if (out > 0)
        f->bytes[MEM_STAGING][TIER_CPU] +=
            2 * (page(out) + page(align_up(ckpt_ssd_max, 4096) + inner_ssd_max));
}

/* Bytes per parameter of a sub-group's state slot: fp32 master, m and v; zero-infinity's also
 * the fp32 gradient (DeepSpeed's optimizer swap buffers, buffer_count 4, hold the four). */
static double slot_bytes_per_param(const Plan *p)
{
    return p->policy == POLICY_ZERO_INFINITY ? 16 : 12;
}

double footprint_state_slot_bytes(const ModelConfig *c, const Plan *p, int weight_bytes)
{
    bool any_ssd = false;
    for (int s = 0; s < plan_subgroup_count(p); s++)
        any_ssd |= plan_optim_tier(p, s) == TIER_SSD;
    if (p->optim == TIER_GPU || (!any_ssd && p->weights != TIER_SSD))
        return 0;
    double edge = (double)model_embed_params(c), block = (double)model_block_params(c);
    double wsz = weight_bytes, most = 0;
    for (int s = 0; s < plan_subgroup_count(p); s++) {
        if (plan_optim_tier(p, s) == TIER_GPU)
            continue; /* its states and weights stay on the GPU */
        size_t begin, end;
        layout_subgroup_slice(c, p, s, &begin, &end);
        double n = plan_optim_tier(p, s) == TIER_SSD
                       ? page(slot_bytes_per_param(p) * (double)(end - begin)) : 0;
        if (p->weights == TIER_SSD) {
            int first, count;
            plan_subgroup_blocks(p, s, &first, &count);
            n += count * page(block * wsz) + (begin == 0 ? page(edge * wsz) : 0);
        }
        if (n > most)
            most = n;
    }
    return most;
}

/* zero-infinity's gradients: DeepSpeed's CPU buffer of the whole model's 16-bit gradients
 * (micro-batches add into it), and each sub-group's fp32 gradients with its states: on SSD, or
 * in CPU memory when the states are there (the pinned buffers they pass through are the state
 * slots). */
static void add_zero_grads(Footprint *f, const ModelConfig *c, const Plan *p, double gsz)
{
    double P = (double)model_param_count(c), cpu = 0;
    f->bytes[MEM_GRADS][TIER_CPU] += page(P * gsz);
    for (int s = 0; s < plan_subgroup_count(p); s++) {
        size_t begin, end;
        layout_subgroup_slice(c, p, s, &begin, &end);
        if (plan_optim_tier(p, s) == TIER_SSD)
            f->bytes[MEM_GRADS][TIER_SSD] += 4 * (double)(end - begin);
        else
            cpu += 4 * (double)(end - begin);
    }
    if (cpu > 0)
        f->bytes[MEM_GRADS][TIER_CPU] += page(cpu);
}

double footprint_gpu_stage_bytes(const ModelConfig *c, const Plan *p, int weight_bytes)
{
    double n = (double)layout_gpu_state_params(c, p);
    return n > 0 ? page(fmin(n, FOOTPRINT_GPU_STAGE_PARAMS) * (12 + weight_bytes)) : 0;
}

/* The blocks a ring of n holds: none when the GPU sub-groups keep every block there. */
static int ring_blocks(const Plan *p, int n)
{
    return plan_gpu_group_blocks(p) < p->n_layer ? n : 0;
}

static void add_optimizer(Footprint *f, const ModelConfig *c, const Plan *p,
                          const LaneSizes *lane)
{
    double P = (double)(model_embed_params(c) + c->n_layer * model_block_params(c));
    /* the GPU's sub-groups are a prefix of the layout, the CPU's the range after it */
    double gpu_end = (double)layout_gpu_state_params(c, p), cpu_end = 0, largest_off = 0;
    double largest_streamed = 0;
    for (int s = 0; s < plan_subgroup_count(p); s++) {
        size_t begin, end;
        layout_subgroup_slice(c, p, s, &begin, &end);
        double n = (double)(end - begin);
        Tier t = plan_optim_tier(p, s);
        bool streamed = plan_group_streamed(p, s);
        if (t != TIER_GPU && !streamed && n > largest_off)
            largest_off = n; /* its gradients pass through the CPU */
        if (streamed && n > largest_streamed)
            largest_streamed = n;
        if (t == TIER_CPU) {
            cpu_end = fmax(cpu_end, (double)end);
            continue;
        }
        f->bytes[MEM_MASTER][t] += 4 * n;
        f->bytes[MEM_ADAM_M][t] += 4 * n;
        f->bytes[MEM_ADAM_V][t] += 4 * n;
    }
    if (cpu_end > 0)
        for (int m = MEM_MASTER; m <= MEM_ADAM_V; m++)
            f->bytes[m][TIER_CPU] += page(4 * (cpu_end - gpu_end));
    f->bytes[MEM_STAGING][TIER_CPU] += p->state_buffers *
                                       footprint_state_slot_bytes(c, p, lane->weight_bytes) +
                                       footprint_gpu_stage_bytes(c, p, lane->weight_bytes);

    /* the streamed sub-groups' GPU slots: states and new weights (ARCHITECTURE.md) */
    if (largest_streamed > 0)
        f->bytes[MEM_STAGING][TIER_GPU] += PLAN_STREAM_SLOTS * largest_streamed *
                                           (12 + lane->weight_bytes);
    double gsz = lane->grad_bytes;
    /* each GPU or streamed sub-group's block keeps its own gradients; the rest pass through
     * the ring */
    double block = (double)model_block_params(c), edge = (double)model_embed_params(c);
    int resident = plan_gpu_grad_blocks(p);
    double ring = resident < p->n_layer ? p->grad_buffers : 0;
    f->bytes[MEM_GRADS][TIER_GPU] += ring * block * gsz + resident * block * gsz + edge * gsz;
    if (p->policy == POLICY_ZERO_INFINITY) {
        add_zero_grads(f, c, p, gsz);
    } else if (p->n_micro > 1) {
        f->bytes[MEM_GRADS][TIER_CPU] += page(P * 4);
        f->bytes[MEM_STAGING][TIER_CPU] += page((block > edge ? block : edge) * gsz);
    } else if (largest_off > 0) {
        f->bytes[MEM_GRADS][TIER_CPU] += p->host_grad_groups * page(largest_off * gsz);
    }
}

void footprint_compute_lane(Footprint *f, const ModelConfig *c, const Plan *p,
                            const LaneSizes *lane)
{
    memset(f, 0, sizeof *f);
    double wsz = lane->weight_bytes, block = (double)model_block_params(c);
    double edge = (double)model_embed_params(c), P = edge + c->n_layer * block;

    if (p->weights == TIER_GPU) {
        f->bytes[MEM_WEIGHTS][TIER_GPU] += P * wsz;
    } else {
        /* the GPU sub-groups' blocks and edges stay there; the ring carries the others */
        int resident = plan_gpu_group_blocks(p);
        double home = P - (double)layout_gpu_state_params(c, p);
        f->bytes[MEM_WEIGHTS][TIER_GPU] += ring_blocks(p, p->weight_buffers) * block * wsz +
                                           resident * block * wsz + edge * wsz;
        if (p->weights == TIER_CPU) {
            f->bytes[MEM_WEIGHTS][TIER_CPU] += home > 0 ? page(home * wsz) : 0;
        } else {
            f->bytes[MEM_WEIGHTS][TIER_SSD] += home * wsz;
            f->bytes[MEM_STAGING][TIER_CPU] += p->pinned_buffers * page(block * wsz) +
                                               page(edge * wsz);
        }
        /* DeepSpeed pins a buffer of max_in_cpu 16-bit weights for those it keeps in CPU
         * memory; a sub-group (sub_group_size or more, as many) never fits it, so it stays,
         * unused, beside the weights on SSD */
        if (p->policy == POLICY_ZERO_INFINITY && p->weights == TIER_SSD)
            f->bytes[MEM_WEIGHTS][TIER_CPU] += page(fmin(P, ZI_MAX_IN_CPU_PARAMS) * wsz);
    }
    add_optimizer(f, c, p, lane);
    add_activations(f, c, p, lane);
}

void footprint_compute(Footprint *f, const Graph *g, const Plan *p)
{
    LaneSizes lane;
    if (g->has_lane)
        lane = g->lane;
    else
        footprint_cuda_lane(g, &lane);
    footprint_compute_lane(f, &g->cfg, p, &lane);
}

double footprint_tier_total(const Footprint *f, Tier t)
{
    double sum = 0;
    for (int m = 0; m < MEM_TAG_COUNT; m++)
        sum += f->bytes[m][t];
    return sum;
}

double footprint_short_bytes(const Footprint *f, const Hardware *hw)
{
    double short_bytes = 0;
    for (int t = 0; t < TIER_COUNT; t++) {
        double over = footprint_tier_total(f, t) - footprint_capacity(hw, t);
        short_bytes += over > 0 ? over : 0;
    }
    return short_bytes;
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

/* The largest value in [lo, hi] of p's count (one of its fields) with tier t within capacity,
 * lo fitting, by bisection (t's bytes grow with the count); *count is left at it. */
static int most_fitting(Plan *p, const Graph *g, const Hardware *hw, int *count, int lo,
                        int hi, Tier t)
{
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        *count = mid;
        if (overflow(g, p, hw) & 1u << t)
            hi = mid - 1;
        else
            lo = mid;
    }
    *count = lo;
    return lo;
}

/* With the states on SSD, as many sub-groups as CPU memory still holds keep theirs there (the
 * last in update order first, plan.h): the most that fit. */
static void keep_states_in_cpu(Plan *p, const Graph *g, const Hardware *hw)
{
    p->optim_cpu_groups = 0;
    if (p->optim != TIER_SSD || (overflow(g, p, hw) & 1u << TIER_CPU))
        return;
    most_fitting(p, g, hw, &p->optim_cpu_groups, 0,
                 plan_subgroup_count(p) - p->optim_gpu_groups, TIER_CPU);
}

int footprint_max_gpu_groups(Plan *p, const Graph *g, const Hardware *hw)
{
    int G = plan_subgroup_count(p);
    int keep_gpu = p->optim_gpu_groups, keep_cpu = p->optim_cpu_groups;
    if (p->optim == TIER_GPU || p->policy != POLICY_FUYOU || p->n_micro > 1)
        return 0;
    p->optim_cpu_groups = 0; /* the CPU's share does not change the GPU's bytes */
    /* GPU bytes grow with the count, but for the last step: with every block there, the
     * weight and gradient rings go */
    p->optim_gpu_groups = G;
    int most = overflow(g, p, hw) & 1u << TIER_GPU
                   ? most_fitting(p, g, hw, &p->optim_gpu_groups, 0, G - 1, TIER_GPU)
                   : G;
    p->optim_gpu_groups = keep_gpu, p->optim_cpu_groups = keep_cpu;
    return most;
}

void footprint_set_gpu_groups(Plan *p, const Graph *g, const Hardware *hw, int n)
{
    p->optim_gpu_groups = n;
    keep_states_in_cpu(p, g, hw);
}

/* What a placement starts from: no sub-group counts; fixed, or nothing fixed where NULL. */
static const PlaceFixed *place_start(Plan *p, const PlaceFixed *fixed)
{
    static const PlaceFixed open = {PLACE_OPEN, PLACE_OPEN};
    p->optim_gpu_groups = p->optim_stream_groups = p->optim_cpu_groups = 0;
    return fixed ? fixed : &open;
}

void footprint_auto_place(Plan *p, const Graph *g, const Hardware *hw, const PlaceFixed *fixed)
{
    const PlaceFixed *f = place_start(p, fixed);
    /* everything on the GPU: fuyou's step on one micro-batch (plan_validate), or what the
     * user fixed there */
    bool may_gpu = (f->weights == PLACE_OPEN || f->weights == TIER_GPU) &&
                   (f->optim == PLACE_OPEN || f->optim == TIER_GPU);
    bool must_gpu = f->weights == TIER_GPU || f->optim == TIER_GPU;
    if (must_gpu || (may_gpu && p->policy == POLICY_FUYOU && p->n_micro == 1)) {
        p->weights = p->optim = TIER_GPU;
        plan_set_all_act(p, ACT_GPU, ACT_GPU);
        if (!overflow(g, p, hw))
            return;
        plan_set_all_act(p, ACT_GPU, ACT_RECOMPUTE);
        if (must_gpu || !overflow(g, p, hw))
            return;
    }
    footprint_place_off_gpu(p, g, hw, f);
}

void footprint_place_off_gpu(Plan *p, const Graph *g, const Hardware *hw, const PlaceFixed *fixed)
{
    const unsigned gpu = 1u << TIER_GPU, cpu = 1u << TIER_CPU;
    const PlaceFixed *f = place_start(p, fixed);
    plan_set_all_act(p, ACT_GPU, ACT_RECOMPUTE);
    /* States and weights leave the GPU, each to CPU memory while it has room (judged on the
     * CPU tier alone, checkpoints still counted on the GPU), else to SSD. */
    p->weights = f->weights == PLACE_OPEN ? TIER_CPU : (Tier)f->weights;
    p->optim = f->optim == PLACE_OPEN ? TIER_CPU : (Tier)f->optim;
    if (f->optim == PLACE_OPEN && (overflow(g, p, hw) & cpu))
        p->optim = TIER_SSD;
    if (f->weights == PLACE_OPEN && (overflow(g, p, hw) & cpu))
        p->weights = TIER_SSD;
    if (overflow(g, p, hw) & gpu) {
        plan_set_all_act(p, ACT_CPU, ACT_RECOMPUTE);
        if (overflow(g, p, hw) & cpu)
            plan_set_all_act(p, ACT_SSD, ACT_RECOMPUTE);
    }
    if (f->optim == PLACE_OPEN)
        keep_states_in_cpu(p, g, hw);
}

const char *footprint_advice(Tier t, const Plan *p, const Footprint *f)
{
    bool state_here = p->weights == t || p->optim == t;
    switch (t) {
    case TIER_GPU:
        if (p->optim_gpu_groups > 0)
            return "update fewer sub-groups on the GPU (--optim-gpu-groups), lower --batch or "
                   "--seq, or recompute activations (--swap none)";
        return "lower --batch or --seq, split it into more --micro-batches, or recompute "
               "activations (--swap none)";
    case TIER_CPU:
        if (p->weights != TIER_SSD || p->optim != TIER_SSD)
            return "put weights or optimizer states on SSD (--weights ssd, --optim ssd)";
        if (p->optim_cpu_groups > 0)
            return "keep fewer sub-groups' states in CPU memory (--optim-cpu-groups)";
        return f->bytes[MEM_ACTIVATIONS][TIER_CPU] > 0
                   ? "keep fewer activations in CPU memory (--swap), or use fewer "
                     "--pinned-buffers or --state-buffers"
                   : "use fewer --pinned-buffers or --state-buffers";
    default:
        return state_here ? "add SSD capacity (--set ssd.count=N or ssd.capacity_GB), or keep "
                            "state in CPU memory (--weights cpu, --optim-cpu-groups N)"
                          : "add SSD capacity (--set ssd.count=N or ssd.capacity_GB), or swap "
                            "fewer activations to it (--swap)";
    }
}
