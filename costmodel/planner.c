/* planner: the plan search (configurations, their placement, scoring and refinement); the swap
 * ladder it takes each amount on is swap_ladder.c. See planner.h. */
#include "planner.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

/* Buffer configurations tried, most generous first: prefetch depth, weight, gradient and
 * activation buffers. The last one is the most frugal the schedule allows. */
static const struct { int prefetch, weights, grads, acts; } buffer_configs[] = {
    {2, 3, 2, 2}, {1, 2, 2, 2}, {1, 2, 1, 1}, {0, 1, 1, 1},
};
static const int subgroup_sizes[] = {1, 2, 4};

/* Where sub-group size `blocks` is in subgroup_sizes; 0 for another (--subgroup's, which every
 * configuration then has). */
static int size_index(int blocks)
{
    for (int k = 0; k < (int)(sizeof subgroup_sizes / sizeof subgroup_sizes[0]); k++)
        if (subgroup_sizes[k] == blocks)
            return k;
    return 0;
}

/* The knobs a configuration sets, to try each distinct one once when options fix some. */
typedef struct Knobs {
    int v[15];
} Knobs;

static Knobs knobs_of(const Plan *p)
{
    return (Knobs){{p->prefetch_depth, p->weight_buffers, p->grad_buffers, p->act_buffers,
                    p->subgroup_blocks, p->tail_blocks, p->pinned_buffers, p->state_buffers,
                    p->host_grad_groups, p->optim_cpu_groups, p->weights, p->optim,
                    plan_act(p, 0, BLOCK_CKPT_OP), p->optim_gpu_groups,
                    p->optim_stream_groups}};
}

/* The most configurations one search tries: buffer sets x sub-group sizes x state buffer counts
 * x (everything on the GPU, and off it: the sub-groups updated on the GPU, GPU_SPLITS counts, x
 * the states kept in CPU memory or not), then for each sub-group size the GPU sub-group counts
 * around its fastest (GPU_REFINE_MAX: a grid of GPU_GRID, then two counts a halving of its step,
 * a thousand blocks' counts within it). */
enum { GPU_SPLITS = 3, GPU_GRID = 8, GPU_REFINE_MAX = 3 * GPU_GRID,
       CONFIGS_MAX = 4 * 3 * 2 * (1 + GPU_SPLITS * 2) + 3 * GPU_REFINE_MAX };
_Static_assert(sizeof buffer_configs / sizeof buffer_configs[0] == 4 &&
               sizeof subgroup_sizes / sizeof subgroup_sizes[0] == 3, "CONFIGS_MAX counts them");

/* A distinct configuration: its plan, every intra-block activation recomputed until its swap
 * amount is searched (with a ladder), then at that amount. */
typedef struct Config {
    Plan plan;
    SwapLadder ladder;
    bool has_ladder;
    int units;
    double short_bytes; /* beyond the tiers' capacities, at the plan's amount: 0 when it fits */
    Footprint mem;      /* once searched */
    double closed_s;    /* the closed form of one that fits, which ranks it where not all can
                           be simulated */
    bool scored;
} Config;

/* Where the search stands. */
typedef struct Search {
    Config *cfgs; /* CONFIGS_MAX of them, in the order tried */
    int n_cfgs, n_fit;
    Knobs tried[CONFIGS_MAX];
    int n_tried;
    PlanProgress at;
    PlanProgressFn progress;
    void *progress_ctx;
    bool streams;   /* the chosen plan is tried with streamed sub-groups (no option fixed them
                       or the tiers) */
    /* what the options fix */
    const PlanArgs *args;
    Policy policy;
    PlaceFixed fixed;
    bool tiers_given; /* --weights or --optim */
    bool fixed_gpu;   /* --optim-gpu-groups was given */
    bool fixed_split; /* --optim-cpu-groups was given */
    bool fixed_act;   /* --act was given */
    bool gpu_counts;  /* the GPU sub-group counts are the planner's to refine: no option fixes
                         them, the tiers or the other counts */
    SwapMode swap;    /* the activations asked for (planner.h) */
    double swap_bytes;
    int invalid;      /* configurations the options make invalid ... */
    Err first_invalid; /* ... and the first one's error */
} Search;

static void tell(Search *st)
{
    if (st->progress)
        st->progress(st->progress_ctx, &st->at);
}

/* The units a configuration keeps on ladder l before its search: the amount --swap asked for
 * (all, or the units within its bytes), 0 where the search takes it (auto). */
static int asked_units(const Search *st, const SwapLadder *l)
{
    return st->swap == SWAP_ALL     ? planner_units(l)
           : st->swap == SWAP_BYTES ? planner_units_for(l, st->swap_bytes)
                                    : 0;
}

/* Whether the swap amount is the planner's to search (--swap auto; a sweep plans as auto). */
static bool amount_searched(const Search *st)
{
    return st->swap == SWAP_AUTO || st->swap == SWAP_SWEEP;
}

/* Records configuration p (its placement and buffers set; its activations recomputed past the
 * checkpoints where ladder, the swap amount to be taken on the ladder, or at the amount asked)
 * unless an identical one was. 0 or a negative errno. */
static int add_config(const Hardware *hw, const Graph *g, const Plan *p, bool ladder, Search *st,
                      PlanChoice *c, Err *e)
{
    Knobs k = knobs_of(p);
    for (int i = 0; i < st->n_tried; i++)
        if (!memcmp(&st->tried[i], &k, sizeof k))
            return 0;
    if (st->n_tried < (int)(sizeof st->tried / sizeof st->tried[0]))
        st->tried[st->n_tried++] = k;
    assert(st->n_cfgs < CONFIGS_MAX); /* each distinct configuration once */
    Config *cf = &st->cfgs[st->n_cfgs];
    memset(cf, 0, sizeof *cf);
    int rc = plan_copy(&cf->plan, p, e);
    if (rc)
        return rc;
    st->n_cfgs++;
    cf->has_ladder = ladder;
    if (ladder) {
        planner_ladder(hw, g, &cf->plan, &cf->ladder);
        cf->units = asked_units(st, &cf->ladder);
        planner_apply(&cf->plan, &cf->ladder, cf->units);
    }
    footprint_compute(&cf->mem, g, &cf->plan);
    c->work.footprints++;
    cf->short_bytes = footprint_short_bytes(&cf->mem, hw);
    st->n_fit += cf->short_bytes == 0;
    return 0;
}

/* Takes cf's swap amount on its ladder, and its footprint and shortfall there. */
static void search_config(const Hardware *hw, const Graph *g, Config *cf, Search *st,
                          PlannerWork *work)
{
    if (cf->has_ladder && amount_searched(st)) {
        work->searches++;
        cf->units = planner_best_units_work(hw, g, &cf->plan, &cf->ladder, work);
        footprint_compute(&cf->mem, g, &cf->plan);
        work->footprints++;
        cf->short_bytes = footprint_short_bytes(&cf->mem, hw);
    }
    st->at.searched++;
    tell(st);
}

/* Marks the configurations that fit to score: all where their schedules' tasks fit
 * PLANNER_SCORE_TASKS (the closed form's score costs nothing), else as many as fit it, at least
 * one, those the closed form rates fastest (the earlier on a tie). Returns how many. */
static int mark_scored(const Graph *g, int n_micro, bool simulated, Search *st)
{
    double tasks = sched_estimate_tasks(g->arch, g->cfg.n_layer, n_micro, 1);
    int n = st->n_fit, k = n;
    if (simulated && n * tasks > PLANNER_SCORE_TASKS)
        k = PLANNER_SCORE_TASKS / tasks >= 1 ? (int)(PLANNER_SCORE_TASKS / tasks) : 1;
    for (int i = 0; i < st->n_cfgs; i++) {
        Config *a = &st->cfgs[i];
        int faster = 0; /* of those that fit, ranked before a */
        for (int j = 0; j < st->n_cfgs && a->short_bytes == 0; j++) {
            const Config *b = &st->cfgs[j];
            faster += b->short_bytes == 0 &&
                      (b->closed_s < a->closed_s || (b->closed_s == a->closed_s && j < i));
        }
        a->scored = a->short_bytes == 0 && faster < k;
    }
    return k;
}

/* Keeps configuration cf in c: its plan (moved), amount and memory, its closed form, and what
 * binds backward at its amount and one unit more. */
static void keep(const Hardware *hw, const Graph *g, Config *cf, PlanChoice *c)
{
    c->plan = cf->plan;
    memset(&cf->plan, 0, sizeof cf->plan);
    c->units = cf->units;
    c->units_total = cf->has_ladder ? planner_units(&cf->ladder) : 0;
    c->mem = cf->mem;
    Plan *p = &c->plan;
    cost_closed_form(hw, g, p, &c->cf);
    c->bind_below = c->bind_above = c->cf.binding[CF_BACKWARD];
    if (cf->has_ladder && cf->units < planner_units(&cf->ladder)) {
        ClosedForm above;
        planner_apply(p, &cf->ladder, cf->units + 1);
        cost_closed_form(hw, g, p, &above);
        c->bind_above = above.binding[CF_BACKWARD];
        planner_apply(p, &cf->ladder, cf->units);
    }
}

/* The chosen configuration's swap amount, simulated one unit lower while that is faster (at
 * most REFINE_UNITS, within PLANNER_SCORE_TASKS): the closed form places the amount where
 * PCIe's two directions start to contend a few units late (with sub-groups updated on the GPU,
 * the blocks that load weights also send activations out), and every amount below fits. *s is
 * the score at cf's amount. */
enum { REFINE_UNITS = 8 };
static int refine_units(const Graph *g, int n_micro, PlanScoreFn score, void *ctx, Config *cf,
                        double *s, PlanChoice *c, Err *e)
{
    double tasks = sched_estimate_tasks(g->arch, g->cfg.n_layer, n_micro, 1);
    for (int k = 0; score && cf->has_ladder && k < REFINE_UNITS && cf->units > 0 &&
                    c->work.score_tasks + tasks <= PLANNER_SCORE_TASKS;
         k++) {
        double t;
        planner_apply(&cf->plan, &cf->ladder, cf->units - 1);
        c->work.scores++;
        c->work.score_tasks += tasks;
        int rc = score(ctx, g, &cf->plan, &t, e);
        if (rc)
            return rc;
        if (t >= *s) {
            planner_apply(&cf->plan, &cf->ladder, cf->units);
            break;
        }
        cf->units--, *s = t;
    }
    footprint_compute(&cf->mem, g, &cf->plan);
    return 0;
}

/* Whether plan p may stream sub-groups to the GPU's AdamW (plan.h): fuyou on one micro-batch,
 * weights in CPU memory, the states off the GPU, some sub-groups updated there. */
static bool may_stream(const Plan *p)
{
    return p->policy == POLICY_FUYOU && p->n_micro == 1 && p->weights == TIER_CPU &&
           p->optim != TIER_GPU && p->optim_gpu_groups > 0;
}

/* Plan q with n sub-groups streamed and, unless fixed_gpu, as many GPU sub-groups as still fit
 * beside their slots and gradients (at least one; those that leave keep their states in CPU
 * memory): whether it fits every tier and is valid. */
static bool fit_streams(const Hardware *hw, const Graph *g, Plan *q, int n, bool fixed_gpu,
                        PlannerWork *work)
{
    for (;;) {
        plan_set_stream_groups(q, n);
        Footprint f;
        footprint_compute(&f, g, q);
        work->footprints++;
        unsigned over = footprint_overflow(&f, hw);
        if (!over)
            return plan_validate(q, NULL) == 0;
        if (over != 1u << TIER_GPU || fixed_gpu || q->optim_gpu_groups <= 1)
            return false;
        q->optim_gpu_groups--; /* its states to CPU memory, beside the others there */
        if (q->optim == TIER_SSD)
            q->optim_cpu_groups++;
    }
}

/* The chosen configuration cf (score *s) with a quarter, half, three quarters and all of its
 * CPU-memory sub-groups streamed to the GPU's AdamW (fit_streams), each simulated, within
 * PLANNER_SCORE_TASKS: the fastest is kept in cf. */
enum { STREAM_TRIES = 4 };
static int try_streams(const Hardware *hw, const Graph *g, int n_micro, PlanScoreFn score,
                       void *ctx, const Search *st, Config *cf, double *s, PlanChoice *c,
                       Err *e)
{
    if (!score || !st->streams || !may_stream(&cf->plan))
        return 0;
    double tasks = sched_estimate_tasks(g->arch, g->cfg.n_layer, n_micro, 1);
    /* the counts are shares of the chosen plan's CPU-memory sub-groups, each tried from it */
    Plan chosen;
    int rc = plan_copy(&chosen, &cf->plan, e);
    if (rc)
        return rc;
    int G = plan_subgroup_count(&chosen), tried = -1;
    int in_cpu = chosen.optim == TIER_SSD ? chosen.optim_cpu_groups
                                          : G - chosen.optim_gpu_groups;
    for (int k = 1; k <= STREAM_TRIES && c->work.score_tasks + tasks <= PLANNER_SCORE_TASKS;
         k++) {
        int n = (in_cpu * k + STREAM_TRIES - 1) / STREAM_TRIES;
        if (n <= 0 || n == tried)
            continue;
        tried = n;
        Plan q;
        if ((rc = plan_copy(&q, &chosen, e)))
            break;
        double t = INFINITY;
        if (fit_streams(hw, g, &q, n, st->fixed_gpu, &c->work)) {
            c->work.scores++;
            c->work.score_tasks += tasks;
            c->streams_tried++;
            rc = score(ctx, g, &q, &t, e);
        }
        if (!rc && t < *s) {
            plan_free(&cf->plan);
            cf->plan = q, *s = t;
            footprint_compute(&cf->mem, g, &cf->plan);
        } else {
            plan_free(&q);
        }
        if (rc)
            break;
    }
    plan_free(&chosen);
    return rc;
}

/* Whether plan p may update sub-groups on the GPU with the optimizer off it (plan_validate's
 * rules: fuyou, one micro-batch). */
static bool may_gpu_groups(const Plan *p)
{
    return p->policy == POLICY_FUYOU && p->n_micro == 1 && p->optim != TIER_GPU;
}

/* Configuration `from` with n sub-groups updated on the GPU, its swap amount searched anew,
 * scored if it fits and is new: *best and *best_s move to it where it is faster. */
static int try_gpu_count(const Hardware *hw, const Graph *g, int n_micro, PlanScoreFn score,
                         void *ctx, Search *st, int from, int n, int *best, double *best_s,
                         PlanChoice *c, Err *e)
{
    double tasks = sched_estimate_tasks(g->arch, g->cfg.n_layer, n_micro, 1);
    if (st->n_cfgs >= CONFIGS_MAX || c->work.score_tasks + tasks > PLANNER_SCORE_TASKS)
        return 0;
    const Config *base = &st->cfgs[from];
    Plan q;
    int rc = plan_copy(&q, &base->plan, e);
    if (rc)
        return rc;
    if (base->has_ladder) /* recomputed past the checkpoints, as add_config takes a plan */
        planner_apply(&q, &base->ladder, 0);
    footprint_set_gpu_groups(&q, g, hw, n);
    int added = st->n_cfgs;
    rc = add_config(hw, g, &q, base->has_ladder, st, c, e);
    plan_free(&q);
    if (rc || st->n_cfgs == added) /* an error, or a count tried already */
        return rc;
    Config *cf = &st->cfgs[added];
    if (cf->short_bytes > 0)
        return 0;
    search_config(hw, g, cf, st, &c->work);
    if (cf->short_bytes > 0)
        return 0;
    double t;
    c->gpu_counts_tried++;
    c->work.scores++;
    c->work.score_tasks += tasks;
    if ((rc = score(ctx, g, &cf->plan, &t, e)))
        return rc;
    if (t < *best_s)
        *best = added, *best_s = t;
    return 0;
}

/* The GPU sub-group counts around configuration *at's (gpu_splits tried none, half and the
 * most): a grid of GPU_GRID steps up to the most that fit, then half the step either side of
 * the fastest until the step is one, each count simulated (GPU memory traded between states
 * and activations is not monotone in time: a count whose CPU updates finish after the next
 * forward needs them can lose to both neighbours). *at and *s move to the fastest. */
static int refine_gpu_counts(const Hardware *hw, const Graph *g, int n_micro, PlanScoreFn score,
                             void *ctx, Search *st, int *at, double *s, PlanChoice *c, Err *e)
{
    if (!score || !st->gpu_counts || !may_gpu_groups(&st->cfgs[*at].plan))
        return 0;
    int from = *at, most = footprint_max_gpu_groups(&st->cfgs[from].plan, g, hw);
    int step = most / GPU_GRID > 1 ? most / GPU_GRID : 1, rc = 0;
    for (int k = 1; k <= GPU_GRID && !rc; k++) /* most * k / GPU_GRID, the same count once */
        rc = try_gpu_count(hw, g, n_micro, score, ctx, st, from, most * k / GPU_GRID, at, s, c,
                           e);
    for (step /= 2; step >= 1 && !rc; step /= 2) {
        int mid = st->cfgs[*at].plan.optim_gpu_groups;
        if (mid - step >= 0)
            rc = try_gpu_count(hw, g, n_micro, score, ctx, st, from, mid - step, at, s, c, e);
        if (!rc && mid + step <= most)
            rc = try_gpu_count(hw, g, n_micro, score, ctx, st, from, mid + step, at, s, c, e);
    }
    return rc;
}

/* The configurations that fit: each one's swap amount searched (it fits there too: the most
 * that fits, last_fitting), the marked ones scored in the order tried, the first of the
 * fastest kept in c; then the GPU sub-group counts around the fastest off the GPU
 * (refine_gpu_counts), the swap amount and the streamed sub-groups around the fastest of all.
 * 0 or a negative errno. */
static int choose_fitting(const Hardware *hw, const Graph *g, int n_micro, PlanScoreFn score,
                          void *ctx, Search *st, PlanChoice *c, Err *e)
{
    st->at.to_search = st->n_fit;
    for (int i = 0; i < st->n_cfgs; i++) {
        Config *cf = &st->cfgs[i];
        if (cf->short_bytes > 0)
            continue;
        search_config(hw, g, cf, st, &c->work);
        assert(cf->short_bytes == 0);
        ClosedForm closed;
        cost_closed_form(hw, g, &cf->plan, &closed);
        c->work.closed_forms++;
        cf->closed_s = closed.iter_s;
        c->configs_tried++;
    }
    st->at.to_score = mark_scored(g, n_micro, score != NULL, st);
    tell(st);
    enum { SIZES = sizeof subgroup_sizes / sizeof subgroup_sizes[0] };
    int best = -1, best_off[SIZES]; /* the fastest, and of those off the GPU each size's */
    double best_s = INFINITY, off_s[SIZES];
    for (int k = 0; k < SIZES; k++)
        best_off[k] = -1, off_s[k] = INFINITY;
    int scored = st->n_cfgs; /* the refinement adds more */
    for (int i = 0; i < scored; i++) {
        Config *cf = &st->cfgs[i];
        if (!cf->scored)
            continue;
        double s = cf->closed_s;
        if (score) {
            c->work.scores++;
            c->work.score_tasks += sched_estimate_tasks(g->arch, g->cfg.n_layer, n_micro, 1);
            int rc = score(ctx, g, &cf->plan, &s, e);
            if (rc)
                return rc;
        }
        c->configs_scored++;
        st->at.scored++;
        tell(st);
        if (best < 0 || s < best_s) {
            best = i;
            best_s = s;
        }
        int k = size_index(cf->plan.subgroup_blocks);
        if (may_gpu_groups(&cf->plan) && (best_off[k] < 0 || s < off_s[k]))
            best_off[k] = i, off_s[k] = s;
    }
    int rc = 0;
    for (int k = 0; k < SIZES && !rc; k++) {
        if (best_off[k] < 0)
            continue;
        rc = refine_gpu_counts(hw, g, n_micro, score, ctx, st, &best_off[k], &off_s[k], c, e);
        if (!rc && off_s[k] < best_s)
            best = best_off[k], best_s = off_s[k];
    }
    if (!rc)
        rc = amount_searched(st)
                 ? refine_units(g, n_micro, score, ctx, &st->cfgs[best], &best_s, c, e) : 0;
    if (!rc)
        rc = try_streams(hw, g, n_micro, score, ctx, st, &st->cfgs[best], &best_s, c, e);
    if (rc)
        return rc;
    keep(hw, g, &st->cfgs[best], c);
    c->score_s = best_s;
    return 0;
}

/* Where nothing fits: the first configuration (in the order tried) short of the fewest bytes at
 * its swap amount, kept in c with what is short. Every tier needs the least with all recomputed
 * (last_fitting), so a configuration short of more there than the best so far is short of more
 * at every amount: searched from the least short there up, the rest need no search (dozens of
 * micro-batch counts plan every configuration where nothing fits). */
static void choose_frugal(const Hardware *hw, const Graph *g, Search *st, PlanChoice *c)
{
    int order[CONFIGS_MAX], n = st->n_cfgs;
    for (int i = 0; i < n; i++) { /* by shortfall with everything recomputed, stable */
        int j = i;
        for (; j > 0 && st->cfgs[order[j - 1]].short_bytes > st->cfgs[i].short_bytes; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    st->at.to_search = n;
    int best = -1;
    for (int k = 0; k < n; k++) {
        Config *cf = &st->cfgs[order[k]];
        if (best >= 0 && cf->short_bytes > st->cfgs[best].short_bytes)
            break;
        search_config(hw, g, cf, st, &c->work);
        if (best < 0 || cf->short_bytes < st->cfgs[best].short_bytes ||
            (cf->short_bytes == st->cfgs[best].short_bytes && order[k] < best))
            best = order[k];
    }
    Config *cf = &st->cfgs[best];
    c->plan = cf->plan;
    memset(&cf->plan, 0, sizeof cf->plan);
    c->mem = cf->mem;
    c->overflow = footprint_overflow(&c->mem, hw);
    cost_closed_form(hw, g, &c->plan, &c->cf);
}

/* The GPU sub-group counts a configuration is tried with (GPU_SPLITS at most, distinct): the
 * given one; none where a tier given keeps them off the GPU (plan_args_apply); else none, the
 * most that fit on the GPU (footprint_max_gpu_groups) and half as many, since the GPU memory
 * they take may be worth more to swapped activations. */
static int gpu_splits(Plan *p, const Graph *g, const Hardware *hw, bool fixed, bool tiers_given,
                      int *out)
{
    if (fixed || tiers_given) {
        out[0] = p->optim_gpu_groups;
        return 1;
    }
    int most = footprint_max_gpu_groups(p, g, hw), n = 0;
    int want[GPU_SPLITS] = {0, most, most / 2};
    for (int i = 0; i < GPU_SPLITS; i++) {
        bool seen = false;
        for (int j = 0; j < n; j++)
            seen |= out[j] == want[i];
        if (!seen)
            out[n++] = want[i];
    }
    return n;
}

int planner_choose(const Hardware *hw, const Graph *g, int n_micro, Policy policy,
                   const PlanArgs *args, PlanScoreFn score, void *score_ctx, PlanChoice *c,
                   Err *e)
{
    PlannerOptions o = {.args = args, .score = score, .score_ctx = score_ctx};
    return planner_choose_with(hw, g, n_micro, policy, &o, c, e);
}

/* The configuration's activations as --swap or --act fix them, before any amount: whether its
 * swap amount is then taken on the ladder (every intra-block activation recomputed past the
 * checkpoints; none where --act or --swap none fixed them, or where the placement keeps every
 * one on the GPU and --swap asks for all or the best). */
static bool fix_activations(Plan *p, const Search *st)
{
    if (st->policy != POLICY_FUYOU || st->fixed_act)
        return false;
    if (st->swap == SWAP_NONE) {
        plan_set_inner_act(p, ACT_RECOMPUTE);
        return false;
    }
    return st->swap == SWAP_BYTES || plan_act(p, 0, 1) != ACT_GPU;
}

/* A configuration the options make invalid (--optim-cpu-groups beyond its sub-groups) is
 * skipped; if every one is, that is the error: the first's, whose sub-groups are the most (of
 * one block). */
static void skip_invalid(Search *st, const Err *e)
{
    if (!st->invalid++)
        st->first_invalid = *e;
}

/* Records plan p's configurations as placed (its buffers, sub-groups and tiers set): the
 * options over it, at each GPU sub-group count (gpu_splits), and with the states on SSD and
 * room for some in CPU memory also with none there. 0 or a negative errno. */
static int add_placement(const Hardware *hw, const Graph *g, Plan *p, Search *st, PlanChoice *c,
                         Err *e)
{
    const PlanArgs *args = st->args;
    /* what the options fix, over the configuration (checked by the caller, so this prints
     * nothing) */
    if (args && plan_args_apply(args, p, "planner"))
        return err_set(e, -EINVAL, "plan options do not apply");
    if (p->state_buffers < 3 && p->optim != TIER_SSD && p->weights == TIER_CPU)
        return 0; /* no state or weight streams through these buffers */
    /* streamed sub-groups go beside GPU ones: a count given is set per GPU split */
    int pinned_streams = p->optim_stream_groups;
    plan_set_stream_groups(p, 0);
    if (args && plan_validate(p, e)) {
        skip_invalid(st, e);
        return 0;
    }
    bool ladder = fix_activations(p, st);
    int splits[GPU_SPLITS], rc = 0;
    int n_splits = gpu_splits(p, g, hw, st->fixed_gpu, st->tiers_given, splits);
    for (int k = 0; k < n_splits && !rc; k++) {
        /* and the CPU's share of the states before them, where the states' tier is the
         * placement's */
        if (splits[k] && st->fixed.optim == PLACE_OPEN)
            footprint_set_gpu_groups(p, g, hw, splits[k]);
        else
            p->optim_gpu_groups = splits[k];
        if (st->fixed_split)
            p->optim_cpu_groups = args->count[PC_OCPU];
        /* a count of streamed sub-groups given: their slots take the room of GPU sub-groups
         * where both do not fit */
        if (pinned_streams && p->optim_gpu_groups)
            fit_streams(hw, g, p, pinned_streams, st->fixed_gpu, &c->work);
        else
            plan_set_stream_groups(p, pinned_streams);
        if (plan_validate(p, e)) {
            skip_invalid(st, e);
            continue;
        }
        /* states on SSD with room for some in CPU memory: that room may be worth more to
         * swapped activations; both are scored */
        bool both = st->policy == POLICY_FUYOU && p->optim == TIER_SSD &&
                    p->optim_cpu_groups > 0 && !st->fixed_split;
        rc = add_config(hw, g, p, ladder, st, c, e);
        if (!rc && both) {
            p->optim_cpu_groups = 0;
            rc = add_config(hw, g, p, ladder, st, c, e);
        }
    }
    return rc;
}

int planner_choose_with(const Hardware *hw, const Graph *g, int n_micro, Policy policy,
                        const PlannerOptions *o, PlanChoice *c, Err *e)
{
    memset(c, 0, sizeof *c);
    const PlanArgs *args = o->args;
    Plan p;
    int rc = plan_init(&p, g, policy, e);
    if (rc)
        return rc;
    p.n_micro = n_micro;
    PlaceFixed fixed = {PLACE_OPEN, PLACE_OPEN};
    if (args)
        plan_args_fixed(args, &fixed);
    bool tiers_given = fixed.weights != PLACE_OPEN || fixed.optim != PLACE_OPEN;
    bool fixed_streams = args && args->count[PC_OSTREAM] >= 0;
    Search st = {.cfgs = calloc(CONFIGS_MAX, sizeof *st.cfgs), .progress = o->progress,
                 .progress_ctx = o->progress_ctx, .at = {.n_micro = n_micro},
                 .streams = !fixed_streams && !tiers_given, .args = args, .policy = policy,
                 .fixed = fixed, .tiers_given = tiers_given,
                 .fixed_gpu = args && args->count[PC_OGPU] >= 0,
                 .fixed_split = args && args->count[PC_OCPU] >= 0,
                 .fixed_act = args && args->act, .swap = o->swap, .swap_bytes = o->swap_bytes};
    st.gpu_counts = !st.fixed_gpu && !st.fixed_split && !fixed_streams && !tiers_given;
    if (!st.cfgs) {
        plan_free(&p);
        return err_set(e, -ENOMEM, "out of memory for the planner's %d configurations",
                       CONFIGS_MAX);
    }
    for (size_t bi = 0; bi < sizeof buffer_configs / sizeof buffer_configs[0] && !rc; bi++) {
        for (size_t si = 0; si < sizeof subgroup_sizes / sizeof subgroup_sizes[0] && !rc; si++) {
            p.prefetch_depth = buffer_configs[bi].prefetch;
            p.weight_buffers = buffer_configs[bi].weights;
            p.grad_buffers = buffer_configs[bi].grads;
            p.act_buffers = buffer_configs[bi].acts;
            p.subgroup_blocks = subgroup_sizes[si];
            if (p.subgroup_blocks > g->cfg.n_layer)
                continue;
            /* three state buffers overlap a sub-group's read, update and write; two hold
             * less pinned memory where the states stream from SSD (fewer overlap) */
            for (int sb = 3; sb >= 2 && !rc; sb--) {
                p.state_buffers = sb;
                if (policy != POLICY_FUYOU) {
                    /* DeepSpeed's defaults, whatever the loop tries (plan.h) */
                    plan_zero_infinity_config(&p, &g->cfg);
                    rc = add_placement(hw, g, &p, &st, c, e);
                    continue;
                }
                footprint_auto_place(&p, g, hw, &st.fixed);
                /* everything on the GPU, the tiers left open: also off it where that needs
                 * recomputation (the states' memory may be worth more to activations), and
                 * only off it where a GPU sub-group count is given (a count of sub-groups
                 * updated on the GPU puts the optimizer off it) */
                bool all_gpu = p.weights == TIER_GPU && !st.tiers_given;
                bool recomputed = plan_act(&p, 0, 1) != ACT_GPU;
                if (!all_gpu || !st.fixed_gpu)
                    rc = add_placement(hw, g, &p, &st, c, e);
                if (!rc && all_gpu && (recomputed || st.fixed_gpu)) {
                    footprint_place_off_gpu(&p, g, hw, &st.fixed);
                    rc = add_placement(hw, g, &p, &st, c, e);
                }
            }
        }
    }
    if (!rc && !st.n_cfgs) {
        rc = -EINVAL; /* every configuration the options allow is invalid: the first says why */
        *e = st.first_invalid;
    }
    if (!rc && st.n_fit)
        rc = choose_fitting(hw, g, n_micro, o->score, o->score_ctx, &st, c, e);
    else if (!rc)
        choose_frugal(hw, g, &st, c);
    if (!rc)
        plan_inner_kept_bytes(&c->plan, g, c->kept);
    else
        plan_free(&c->plan);
    for (int i = 0; i < st.n_cfgs; i++)
        plan_free(&st.cfgs[i].plan);
    free(st.cfgs);
    plan_free(&p);
    return rc;
}
