/* plan_make: one plan from the command line's options for both programs; see plan_make.h. */
#include "plan_make.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuyou_err.h"
#include "hw.h"
#include "units.h"

const char *plan_swap_name(SwapMode m)
{
    static const char *names[] = {
        [SWAP_AUTO] = "auto", [SWAP_NONE] = "none", [SWAP_ALL] = "all",
        [SWAP_BYTES] = "fixed amount", [SWAP_SWEEP] = "sweep",
    };
    return names[m];
}

int plan_swap_parse(const char *s, const char *prog, SwapMode *mode, double *bytes)
{
    for (SwapMode m = SWAP_AUTO; m <= SWAP_SWEEP; m++)
        if (m != SWAP_BYTES && !strcmp(s, plan_swap_name(m)))
            return *mode = m, 0;
    if (units_parse_bytes(s, bytes) == 0) {
        if (*bytes <= HW_MAX_MEM_GIB * 0x1p30)
            return *mode = SWAP_BYTES, 0;
        fprintf(stderr, "%s: --swap is %s; an amount kept is at most %.0f GiB (1 PiB), or all\n",
                prog, s, (double)HW_MAX_MEM_GIB);
        return -EINVAL;
    }
    fprintf(stderr, "%s: --swap expects auto, none, all, sweep or an amount such as 12GiB, "
            "got '%s'\n", prog, s);
    return -EINVAL;
}

/* The options' own errors, once, before a search applies them over each configuration. */
static int check_args(const PlanRequest *rq, const Graph *g, Err *e)
{
    Plan check;
    int rc = plan_init(&check, g, rq->policy, e);
    if (!rc)
        rc = plan_args_apply(rq->args, &check, rq->prog);
    plan_free(&check);
    return rc;
}

/* Fuyou's plan for graph g (one micro-batch) and M micro-batches of it: the planner's, over
 * what the options and --swap leave open; for a sweep, the ladder its configuration is swept
 * on, the chosen amount applied again. */
static int plan_fuyou(const PlanRequest *rq, const Graph *g, int M, const Hardware *hw, Plan *p,
                      PlanInfo *info, Err *e)
{
    bool given = plan_args_given(rq->args);
    int rc = given ? check_args(rq, g, e) : 0;
    if (rc)
        return rc;
    PlannerOptions o = {.args = given ? rq->args : NULL, .swap = rq->swap,
                        .swap_bytes = rq->swap_bytes, .score = rq->score,
                        .score_ctx = rq->score_ctx, .progress = rq->progress,
                        .progress_ctx = rq->progress_ctx};
    rc = planner_choose_with(hw, g, M, rq->policy, &o, &info->choice, e);
    if (rc)
        return rc;
    info->planned = true;
    info->units = info->choice.units;
    rc = plan_copy(p, &info->choice.plan, e);
    if (!rc && given)
        rc = plan_validate(p, e); /* the options' own combinations */
    if (rc || rq->swap != SWAP_SWEEP || !info->choice.units_total)
        return rc;
    plan_set_inner_act(p, ACT_RECOMPUTE);
    planner_ladder(hw, g, p, &info->ladder);
    info->have_ladder = true;
    planner_apply(p, &info->ladder, info->units);
    return 0;
}

/* The plan for graph g (one micro-batch) and M micro-batches of it: fuyou's planned, or
 * zero-infinity's DeepSpeed defaults with the options over them. */
static int plan_for(const PlanRequest *rq, const Graph *g, int M, const Hardware *hw, Plan *p,
                    PlanInfo *info, Err *e)
{
    memset(info, 0, sizeof *info);
    if (rq->policy == POLICY_FUYOU)
        return plan_fuyou(rq, g, M, hw, p, info, e);
    SwapMode swap = rq->swap;
    int rc = plan_init(p, g, rq->policy, e);
    if (rc)
        return rc;
    p->n_micro = M;
    plan_zero_infinity_config(p, &g->cfg);
    /* The swap modes start from everything recomputed past the checkpoints; auto keeps the
     * policy's own choice. */
    if (swap != SWAP_AUTO)
        plan_set_inner_act(p, ACT_RECOMPUTE);
    rc = plan_args_apply(rq->args, p, rq->prog);
    if (rc)
        return rc;
    if (!rq->args->act && swap != SWAP_NONE && swap != SWAP_AUTO) {
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

/* The bytes plan p needs beyond the tiers' capacities, over all tiers: 0 when it fits. */
static double plan_short_bytes(const Graph *g, const Hardware *hw, const Plan *p)
{
    Footprint f;
    footprint_compute(&f, g, p);
    return footprint_short_bytes(&f, hw);
}

/* Plan p's time per iteration: the planner's score where it planned, else the closed form's. */
static double plan_time_s(const Graph *g, const Hardware *hw, const Plan *p,
                          const PlanInfo *info)
{
    if (info->planned)
        return info->choice.score_s;
    ClosedForm cf;
    cost_closed_form(hw, g, p, &cf);
    return cf.iter_s;
}

static void work_add(PlannerWork *sum, const PlannerWork *w)
{
    sum->searches += w->searches;
    sum->closed_forms += w->closed_forms;
    sum->footprints += w->footprints;
    sum->scores += w->scores;
    sum->score_tasks += w->score_tasks;
}

/* One candidate: a micro-batch count with its graph, plan and how it was made. */
typedef struct Candidate {
    int M;
    Graph g;
    Plan p;
    PlanInfo info;
    double short_bytes; /* beyond capacity: 0 when it fits */
    double iter_s;
} Candidate;

static void candidate_free(Candidate *c)
{
    plan_make_free(&c->info);
    plan_free(&c->p);
    graph_free(&c->g);
}

/* The micro-batch counts to try, fewest first: the one given (one with sub-groups or the
 * states on the GPU given), or every divisor of the batch up to PLAN_AUTO_MICRO_MAX. */
static int micro_counts(const PlanRequest *rq, int *out, int max)
{
    int given = rq->args->count[PC_MICRO], n = 0;
    PlaceFixed fixed;
    plan_args_fixed(rq->args, &fixed);
    if (given > 0 || rq->args->count[PC_OGPU] > 0 || rq->args->count[PC_OSTREAM] > 0 ||
        fixed.optim == TIER_GPU) {
        out[0] = given > 0 ? given : 1; /* sub-groups updated on the GPU take one, and so
                                           does everything there (plan_validate) */
        return 1;
    }
    for (int M = 1; M <= rq->batch && M <= PLAN_AUTO_MICRO_MAX && n < max; M++)
        if (rq->batch % M == 0)
            out[n++] = M;
    return n;
}

int plan_make(const PlanRequest *rq, const Hardware *hw, Graph *g, Plan *p, PlanInfo *info,
              Err *e)
{
    /* on failure the outputs are empty, safe to free */
    memset(info, 0, sizeof *info);
    memset(g, 0, sizeof *g);
    memset(p, 0, sizeof *p);
    int given = rq->args->count[PC_MICRO];
    if (given > 0 && rq->batch % given) {
        fprintf(stderr, "%s: --micro-batches %d does not divide --batch %d (the sequences of "
                "an iteration); give a divisor of it, or auto\n", rq->prog, given, rq->batch);
        return -EINVAL;
    }
    int counts[PLAN_AUTO_MICRO_MAX], n = micro_counts(rq, counts, PLAN_AUTO_MICRO_MAX);
    Candidate best = {0}, c;
    bool have = false;
    int rc = 0;
    PlannerWork work = {0};
    for (int i = 0; i < n; i++) {
        c = (Candidate){.M = counts[i]};
        rc = graph_init(&c.g, rq->model, rq->batch / c.M, rq->seq, e);
        if (rc == -EINVAL && given <= 0 && i + 1 < n) {
            /* a micro-batch beyond the graph's limits: more of smaller ones may do; the last
             * count's error stands if none does */
            candidate_free(&c);
            e->msg[0] = '\0';
            rc = 0;
            continue;
        }
        if (!rc && rq->lane_sizes) {
            rq->lane_sizes(rq->lane_ctx, rq->model, c.g.batch, c.g.seq, &c.g.lane);
            c.g.has_lane = true;
        }
        if (!rc)
            rc = plan_for(rq, &c.g, c.M, hw, &c.p, &c.info, e);
        if (rc) {
            candidate_free(&c);
            break;
        }
        work_add(&work, &c.info.choice.work);
        c.short_bytes = plan_short_bytes(&c.g, hw, &c.p);
        c.iter_s = plan_time_s(&c.g, hw, &c.p, &c.info);
        /* the first that fits, then more micro-batches while they are faster; while none
         * fits, the one short of the fewest bytes (more micro-batches shrink the GPU's
         * activations but add the host's fp32 gradient sum) */
        bool fits = c.short_bytes == 0, best_fits = have && best.short_bytes == 0;
        bool better = !have || (fits && (!best_fits || c.iter_s < best.iter_s)) ||
                      (!fits && !best_fits && c.short_bytes < best.short_bytes);
        bool stop = best_fits && (!fits || !better);
        if (better) {
            if (have)
                candidate_free(&best);
            best = c;
            have = true;
        } else {
            candidate_free(&c);
        }
        if (stop)
            break;
    }
    if (rc) {
        if (have)
            candidate_free(&best);
        return rc;
    }
    *g = best.g;
    *p = best.p;
    *info = best.info;
    info->work = work;
    return 0;
}

void plan_make_free(PlanInfo *info)
{
    if (info->planned)
        plan_free(&info->choice.plan);
    info->planned = false;
}

bool plan_make_fits(const Graph *g, const Hardware *hw, const Plan *p)
{
    return plan_short_bytes(g, hw, p) == 0;
}

