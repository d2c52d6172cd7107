/* plan_args: the plan options of both command lines; see plan_args.h. */
#include "plan_args.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "options.h"

_Static_assert(OPT_OPTIM_STREAM_GROUPS - OPT_WEIGHTS == 4 + PC_N - 1 &&
               OPT_MICRO_BATCHES - OPT_WEIGHTS == 4 + PC_MICRO,
               "options.h lists the plan options in plan_args.h's order");

void plan_args_init(PlanArgs *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < PC_N; i++)
        a->count[i] = -1;
}

void plan_args_take(PlanArgs *a, int k, const char *value, double num)
{
    const char **place[4] = {&a->weights, &a->optim, &a->checkpoints, &a->act};
    if (k < 4)
        *place[k] = value;
    else /* a word (--micro-batches auto) is negative: open, plan_make.h's fewest that fit */
        a->count[k - 4] = num < 0 ? -1 : (int)num;
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
