/* plan_make: one plan from the command line's options for both programs; see plan_make.h. */
#include "plan_make.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "units.h"

int plan_swap_parse(const char *s, const char *prog, SwapMode *mode, double *bytes)
{
    static const struct { const char *name; SwapMode mode; } modes[] = {
        {"auto", SWAP_AUTO}, {"none", SWAP_NONE}, {"all", SWAP_ALL}, {"sweep", SWAP_SWEEP},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(s, modes[i].name))
            return *mode = modes[i].mode, 0;
    if (units_parse_bytes(s, bytes) == 0)
        return *mode = SWAP_BYTES, 0;
    fprintf(stderr, "%s: --swap expects auto, none, all, sweep or an amount such as 12GiB, "
            "got '%s'\n", prog, s);
    return -EINVAL;
}

int plan_make(const PlanRequest *rq, const Graph *g, const Hardware *hw, Plan *p,
              PlanInfo *info, Err *e)
{
    memset(info, 0, sizeof *info);
    SwapMode swap = rq->swap;
    /* a sweep without options sweeps the planner's configuration (its sub-groups, prefetch and
     * buffers), so its planner mark and fits column describe the plan --swap auto runs */
    bool sweep_planned = swap == SWAP_SWEEP && rq->policy == POLICY_FUYOU;
    if ((swap == SWAP_AUTO || sweep_planned) && !plan_args_given(rq->args)) {
        int rc = planner_choose(hw, g, rq->policy, rq->score, rq->score_ctx, &info->choice, e);
        if (rc)
            return rc;
        info->planned = true;
        info->units = info->choice.units;
        rc = plan_copy(p, &info->choice.plan, e);
        if (rc || swap != SWAP_SWEEP || !info->choice.units_total)
            return rc;
        /* the ladder the planner walked: from the configuration with its activations back to
         * recomputed, the chosen amount applied again */
        plan_set_inner_act(p, ACT_RECOMPUTE);
        planner_ladder(hw, g, p, &info->ladder);
        info->have_ladder = true;
        planner_apply(p, &info->ladder, info->units);
        return 0;
    }
    int rc = plan_init(p, g, rq->policy, e);
    if (rc)
        return rc;
    if (rq->policy == POLICY_FUYOU) {
        footprint_auto_place(p, g, hw);
    } else {
        p->weights = p->optim = TIER_SSD;
        plan_set_all_act(p, ACT_CPU, ACT_RECOMPUTE);
        p->state_buffers = 2; /* read g+1 while Adam g: pipelined one ahead */
    }
    /* The swap modes start from everything recomputed past the checkpoints; auto keeps the
     * placement's own choice where everything fits on the GPU, and zero-infinity its policy. */
    bool all_gpu = plan_act(p, 0, 1) == ACT_GPU;
    bool keep_placed = swap == SWAP_AUTO && (all_gpu || rq->policy == POLICY_ZERO_INFINITY);
    if (!keep_placed)
        plan_set_inner_act(p, ACT_RECOMPUTE);
    rc = plan_args_apply(rq->args, p, rq->prog);
    if (rc)
        return rc;
    if (!rq->args->act && swap != SWAP_NONE && !keep_placed) {
        planner_ladder(hw, g, p, &info->ladder);
        info->have_ladder = true;
        int n = swap == SWAP_ALL ? planner_units(&info->ladder)
                : swap == SWAP_BYTES ? planner_units_for(&info->ladder, rq->swap_bytes)
                                     : planner_best_units(hw, g, p, &info->ladder);
        planner_apply(p, &info->ladder, n);
        info->units = n;
    }
    return plan_validate(p, e);
}

void plan_make_free(PlanInfo *info)
{
    if (info->planned)
        plan_free(&info->choice.plan);
    info->planned = false;
}
