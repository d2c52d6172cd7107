/* plan_args: the plan options of both command lines; see plan_args.h. */
#include "plan_args.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hw.h"
#include "units.h"

const char *const plan_args_names[4 + PC_N] = {
    "weights", "optim", "checkpoints", "act", "micro-batches", "subgroup", "tail", "prefetch",
    "weight-buffers", "pinned-buffers", "act-buffers", "grad-buffers", "state-buffers",
    "optim-cpu-groups", "optim-gpu-groups", "optim-stream-groups"};

int plan_args_min(int count)
{
    return count == PC_PREFETCH || count == PC_OCPU || count == PC_OGPU ||
                   count == PC_OSTREAM ? 0 : 1;
}

void plan_args_init(PlanArgs *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < PC_N; i++)
        a->count[i] = -1;
}

int plan_args_max(int count)
{
    /* weight buffers default to the depth + 1, which stays within PLAN_MAX_COUNT */
    return count == PC_PREFETCH ? PLAN_MAX_COUNT - 1 : PLAN_MAX_COUNT;
}

int plan_args_int(const char *prog, const char *opt, const char *s, int64_t lo, int64_t hi,
                  int64_t *out)
{
    if (units_parse_int(s, lo, hi, out)) {
        fprintf(stderr, "%s: %s expects a whole number from %lld to %lld, got '%s'\n", prog, opt,
                (long long)lo, (long long)hi, s);
        return -EINVAL;
    }
    return 0;
}

int plan_args_count(const char *prog, const char *opt, const char *s, int min, int max,
                    int *out)
{
    int64_t v;
    if (plan_args_int(prog, opt, s, min, max, &v))
        return -EINVAL;
    *out = (int)v;
    return 0;
}

int plan_args_take(PlanArgs *a, const char *name, const char *value, const char *prog)
{
    const char **place[4] = {&a->weights, &a->optim, &a->checkpoints, &a->act};
    for (int i = 0; i < 4 + PC_N; i++) {
        if (strcmp(name, plan_args_names[i]))
            continue;
        if (i < 4) {
            *place[i] = value;
            return 1;
        }
        char opt[32];
        snprintf(opt, sizeof opt, "--%s", name);
        int c = i - 4;
        if (c == PC_MICRO && !strcmp(value, "auto")) {
            a->count[c] = -1; /* plan_make.h: the fewest that fit */
            return 1;
        }
        return plan_args_count(prog, opt, value, plan_args_min(c), plan_args_max(c),
                               &a->count[c]) ? -EINVAL : 1;
    }
    return 0;
}

bool plan_args_given(const PlanArgs *pa)
{
    for (int i = 0; i < PC_N; i++)
        if (i != PC_MICRO && pa->count[i] >= 0)
            return true;
    return pa->weights || pa->optim || pa->checkpoints || pa->act;
}

static int parse_tier(const char *prog, const char *opt, const char *s, Tier *out)
{
    if (tier_parse(s, out)) {
        fprintf(stderr, "%s: %s expects gpu, cpu or ssd, got '%s'\n", prog, opt, s);
        return -EINVAL;
    }
    return 0;
}

void plan_args_fixed(const PlanArgs *pa, PlaceFixed *out)
{
    Tier t;
    out->weights = pa->weights && !tier_parse(pa->weights, &t) ? (int)t : PLACE_OPEN;
    out->optim = pa->optim && !tier_parse(pa->optim, &t) ? (int)t : PLACE_OPEN;
    /* the weights and the states on the GPU go together (plan_validate) */
    if (out->weights == TIER_GPU && out->optim == PLACE_OPEN)
        out->optim = TIER_GPU;
    if (out->optim == TIER_GPU && out->weights == PLACE_OPEN)
        out->weights = TIER_GPU;
}

int plan_args_apply(const PlanArgs *pa, Plan *p, const char *prog)
{
    Tier given; /* spelling checked here; plan_args_fixed says what binds */
    if ((pa->weights && parse_tier(prog, "--weights", pa->weights, &given)) ||
        (pa->optim && parse_tier(prog, "--optim", pa->optim, &given)))
        return -EINVAL;
    PlaceFixed fixed;
    plan_args_fixed(pa, &fixed);
    if (fixed.weights != PLACE_OPEN)
        p->weights = (Tier)fixed.weights;
    if (fixed.optim != PLACE_OPEN)
        p->optim = (Tier)fixed.optim;
    /* a tier given is where every sub-group's weights or states are, unless a count says
     * otherwise: none on the GPU or streamed to it, and the states none in CPU memory */
    bool tier_given = pa->weights || pa->optim;
    if (tier_given && pa->count[PC_OGPU] < 0)
        p->optim_gpu_groups = 0;
    if (tier_given && pa->count[PC_OSTREAM] < 0)
        plan_set_stream_groups(p, 0);
    if (pa->optim && pa->count[PC_OCPU] < 0)
        p->optim_cpu_groups = 0;
    if (pa->checkpoints) {
        Tier t;
        if (parse_tier(prog, "--checkpoints", pa->checkpoints, &t))
            return -EINVAL;
        for (int b = 0; b < p->n_layer; b++)
            plan_set_act(p, b, BLOCK_CKPT_OP, (ActPlace)t);
    }
    if (pa->act) {
        Tier t;
        ActPlace inner;
        if (!strcmp(pa->act, "recompute"))
            inner = ACT_RECOMPUTE;
        else if (!tier_parse(pa->act, &t))
            inner = (ActPlace)t;
        else {
            fprintf(stderr, "%s: --act expects recompute, gpu, cpu or ssd, got '%s'\n", prog,
                    pa->act);
            return -EINVAL;
        }
        plan_set_inner_act(p, inner);
    }
    int *const fields[PC_N] = {
        [PC_MICRO] = &p->n_micro, [PC_SUBGROUP] = &p->subgroup_blocks,
        [PC_TAIL] = &p->tail_blocks, [PC_PREFETCH] = &p->prefetch_depth,
        [PC_WBUF] = &p->weight_buffers, [PC_PBUF] = &p->pinned_buffers,
        [PC_ABUF] = &p->act_buffers, [PC_GBUF] = &p->grad_buffers,
        [PC_SBUF] = &p->state_buffers, [PC_OCPU] = &p->optim_cpu_groups,
        [PC_OGPU] = &p->optim_gpu_groups, [PC_OSTREAM] = &p->optim_stream_groups,
    };
    for (int i = 0; i < PC_N; i++)
        if (pa->count[i] >= 0)
            *fields[i] = pa->count[i];
    if (pa->count[PC_OSTREAM] >= 0 || pa->count[PC_OGPU] >= 0)
        plan_set_stream_groups(p, p->optim_stream_groups); /* the CPU's gradient buffers */
    if (pa->count[PC_PREFETCH] >= 0 && pa->count[PC_WBUF] < 0 &&
        p->weight_buffers < p->prefetch_depth + 1)
        p->weight_buffers = p->prefetch_depth + 1;
    return 0;
}

int plan_budget_parse(const char *prog, const char *opt, const char *value, double *bytes)
{
    if (units_parse_bytes(value, bytes) || *bytes < 1) {
        fprintf(stderr, "%s: %s expects a size such as 24GiB, got '%s'\n", prog, opt, value);
        return -EINVAL;
    }
    size_t len = strlen(value);
    if (len && isdigit((unsigned char)value[len - 1]) && *bytes < 0x1p20) {
        /* "--gpu-mem 24" meant 24GiB, not 24 bytes */
        fprintf(stderr, "%s: %s %s is %s bytes; give a unit: %sGiB (or %sGB, %sMiB)\n", prog,
                opt, value, value, value, value, value);
        return -EINVAL;
    }
    if (*bytes > HW_MAX_MEM_GIB * 0x1p30) {
        fprintf(stderr, "%s: %s is %s; a memory budget is at most %.0f GiB (1 PiB)\n", prog, opt,
                value, (double)HW_MAX_MEM_GIB);
        return -EINVAL;
    }
    return 0;
}

int plan_budget_sets(const PlanBudget *b, char sets[PLAN_BUDGET_SETS][PLAN_BUDGET_SET_LEN])
{
    int n = 0;
    if (b->gpu_bytes > 0) {
        snprintf(sets[n++], PLAN_BUDGET_SET_LEN, "gpu.mem_GiB=%.9g", b->gpu_bytes / 0x1p30);
        snprintf(sets[n++], PLAN_BUDGET_SET_LEN, "memory.gpu_reserved_GiB=0");
    }
    if (b->cpu_bytes > 0) {
        snprintf(sets[n++], PLAN_BUDGET_SET_LEN, "memory.cpu_mem_GiB=%.9g",
                 b->cpu_bytes / 0x1p30);
        snprintf(sets[n++], PLAN_BUDGET_SET_LEN, "memory.cpu_reserved_GiB=0");
    }
    return n;
}
