/* swap_ladder: the planner's swap ladder and the exact convex minimisation of the amount on it;
 * see planner.h. The plan search is planner.c. */
#include "planner.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

/* Recompute seconds of one block when the ops in `kept` keep their activations. */
static double recompute_s(const Hardware *hw, const Graph *g, Plan *p, const bool kept[])
{
    for (int i = 0; i < g->arch->n_ops; i++)
        if (i != BLOCK_CKPT_OP)
            plan_set_act(p, 0, i, kept[i] ? ACT_GPU : ACT_RECOMPUTE);
    bool rerun[ARCH_MAX_OPS];
    sched_recompute_set(p, 0, rerun);
    double s = 0;
    for (int i = 0; i < g->arch->n_ops; i++)
        if (rerun[i])
            s += cost_gpu_op_s(hw, graph_block_op(g, 0, i), TASK_RECOMPUTE);
    return s;
}

static double base_room(const Hardware *hw, const Footprint *f, Tier t)
{
    double room = footprint_capacity(hw, t) - footprint_tier_total(f, t);
    return room > 0 ? room : 0;
}

void planner_ladder(const Hardware *hw, const Graph *g, const Plan *p, SwapLadder *l)
{
    memset(l, 0, sizeof *l);
    l->n_layer = g->cfg.n_layer;
    Plan scratch;
    Err e;
    if (plan_copy(&scratch, p, &e))
        return; /* out of memory: an empty ladder (recompute everything) */
    bool kept[ARCH_MAX_OPS] = {false};
    double cost = recompute_s(hw, g, &scratch, kept);
    /* Greedy: each time the op whose kept activation saves the most recompute per byte. */
    for (;;) {
        int best = -1;
        double best_ratio = 0, best_cost = cost;
        for (int i = 0; i < g->arch->n_ops; i++) {
            double bytes = (double)graph_block_op(g, 0, i)->act_bytes;
            if (i == BLOCK_CKPT_OP || kept[i] || bytes == 0)
                continue;
            kept[i] = true;
            double c = recompute_s(hw, g, &scratch, kept);
            kept[i] = false;
            double ratio = (cost - c) / bytes;
            if (ratio > best_ratio) {
                best = i;
                best_ratio = ratio;
                best_cost = c;
            }
        }
        if (best < 0)
            break; /* nothing left that saves anything */
        kept[best] = true;
        SwapStep *st = &l->steps[l->n_steps++];
        *st = (SwapStep){.ops = {best}, .n_ops = 1,
                         .bytes = (double)graph_block_op(g, 0, best)->act_bytes,
                         .saved_s = cost - best_cost};
        cost = best_cost;
        /* Pool with the previous rung while this one saves more per byte (keeps the ladder's
         * savings per byte non-increasing, hence the time convex in the amount). */
        while (l->n_steps >= 2) {
            SwapStep *a = &l->steps[l->n_steps - 2], *b = &l->steps[l->n_steps - 1];
            if (b->saved_s / b->bytes <= a->saved_s / a->bytes)
                break;
            for (int k = 0; k < b->n_ops; k++)
                a->ops[a->n_ops++] = b->ops[k];
            a->bytes += b->bytes;
            a->saved_s += b->saved_s;
            l->n_steps--;
        }
    }
    plan_free(&scratch);

    /* Room beyond the base plan; on the GPU, less the staging of a block's swapped set. */
    Footprint f;
    footprint_compute(&f, g, p);
    double per_block = 0;
    for (int k = 0; k < l->n_steps; k++)
        per_block += l->steps[k].bytes;
    for (int t = 0; t < TIER_COUNT; t++)
        l->room[t] = base_room(hw, &f, t);
    l->room[TIER_GPU] -= p->act_buffers * per_block;
    if (l->room[TIER_GPU] < 0)
        l->room[TIER_GPU] = 0;
}

int planner_units(const SwapLadder *l)
{
    return l->n_steps * l->n_layer;
}

double planner_unit_bytes(const SwapLadder *l, int u)
{
    assert(u >= 0 && u < planner_units(l));
    return l->steps[u / l->n_layer].bytes;
}

double planner_amount(const SwapLadder *l, int n)
{
    double x = 0;
    for (int k = 0; k < l->n_steps && n > 0; k++) {
        int take = n < l->n_layer ? n : l->n_layer;
        x += take * l->steps[k].bytes;
        n -= take;
    }
    return x;
}

int planner_units_for(const SwapLadder *l, double bytes)
{
    int n = 0;
    while (n < planner_units(l) && planner_amount(l, n + 1) <= bytes)
        n++;
    return n;
}

/* The tier unit u lands in: the first with room left, room being what earlier units left. */
static Tier unit_tier(const SwapLadder *l, int u, double room[TIER_COUNT])
{
    double bytes = planner_unit_bytes(l, u);
    Tier t = room[TIER_GPU] >= bytes ? TIER_GPU : room[TIER_CPU] >= bytes ? TIER_CPU : TIER_SSD;
    room[t] -= bytes;
    return t;
}

/* Unit u's activations (its step's ops in its block) kept in place a. */
static void set_unit(Plan *p, const SwapLadder *l, int u, ActPlace a)
{
    const SwapStep *st = &l->steps[u / l->n_layer];
    int block = u % l->n_layer;
    for (int k = 0; k < st->n_ops; k++)
        plan_set_act(p, block, st->ops[k], a);
}

void planner_apply(Plan *p, const SwapLadder *l, int n)
{
    plan_set_inner_act(p, ACT_RECOMPUTE);
    double room[TIER_COUNT];
    memcpy(room, l->room, sizeof room);
    for (int u = 0; u < n && u < planner_units(l); u++)
        set_unit(p, l, u, (ActPlace)unit_tier(l, u, room));
}

/* One configuration's amounts as the search below visits them, hundreds per configuration
 * where nothing fits: its plan walked along the ladder, and its ops priced once for the closed
 * form (ClosedPrices). Each unit's tier is the same whatever the amount (unit_tier's walk from
 * the ladder's room, in order), so moving from one amount to another sets only the units
 * between the two, where planner_apply resets every block and walks every unit before the
 * amount: the same activations, each unit set once per move. */
typedef struct Amounts {
    const Hardware *hw;
    const Graph *g;
    Plan *p;
    const SwapLadder *l;
    ClosedPrices prices;
    Tier *tier;  /* each unit's; NULL (out of memory): planner_apply at every amount */
    int applied; /* the amount p's activations are set to */
    PlannerWork *work;
} Amounts;

static void amounts_init(Amounts *a, const Hardware *hw, const Graph *g, Plan *p,
                         const SwapLadder *l, PlannerWork *work)
{
    *a = (Amounts){.hw = hw, .g = g, .p = p, .l = l, .work = work};
    cost_closed_prices_init(&a->prices, hw, g); /* without prices, the same numbers */
    int units = planner_units(l);
    a->tier = malloc(((size_t)units + 1) * sizeof *a->tier);
    double room[TIER_COUNT];
    memcpy(room, l->room, sizeof room);
    for (int u = 0; a->tier && u < units; u++)
        a->tier[u] = unit_tier(l, u, room);
    planner_apply(p, l, 0);
}

static void amounts_free(Amounts *a)
{
    cost_closed_prices_free(&a->prices);
    free(a->tier);
}

/* Sets the plan's activations as planner_apply(p, l, n) does. */
static void amounts_set(Amounts *a, int n)
{
    int units = planner_units(a->l);
    n = n < units ? n : units;
    if (!a->tier) {
        planner_apply(a->p, a->l, n);
    } else {
        for (int u = a->applied - 1; u >= n; u--)
            set_unit(a->p, a->l, u, ACT_RECOMPUTE);
        for (int u = a->applied; u < n; u++)
            set_unit(a->p, a->l, u, (ActPlace)a->tier[u]);
    }
    a->applied = n;
}

static double closed_at(Amounts *a, int n)
{
    ClosedForm cf;
    amounts_set(a, n);
    cost_closed_form_priced(&a->prices, a->p, &cf);
    a->work->closed_forms++;
    return cf.iter_s;
}

static bool fits_at(Amounts *a, int n)
{
    Footprint f;
    amounts_set(a, n);
    footprint_compute(&f, a->g, a->p);
    a->work->footprints++;
    return footprint_overflow(&f, a->hw) == 0;
}

/* The largest amount below `above` that fits, or -1 when none does, given that `above` does not.
 * Every tier's bytes grow with the amount: a unit only turns its ops from recomputed to kept in
 * the unit's own tier (the same at every amount), so a tensor's home (where its last saver keeps
 * it, footprint.c) goes at most once from none to that tier, and every term of the footprint
 * grows with the tensors kept. The amounts that fit are then [0, k]: bisection finds k in
 * log2(units) footprints, where a walk from `above` down took up to one per unit (a thousand
 * layers make thousands of units, each footprint a pass over the layers). The suite checks the
 * growth along ladders of both block families (test_planner.c, memory_grows_with_amount). */
static int last_fitting(Amounts *am, int above)
{
    if (!fits_at(am, 0))
        return -1;
    int lo = 0, hi = above; /* lo fits, hi does not */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (fits_at(am, mid))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Minimum of the closed form over units [a, b], where it is convex: bisect on the slope. */
static int convex_min(Amounts *am, int a, int b)
{
    while (a < b) {
        int mid = a + (b - a) / 2;
        double f0 = closed_at(am, mid), f1 = closed_at(am, mid + 1);
        if (f1 < f0 - 1e-12 * f0)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

int planner_best_units_work(const Hardware *hw, const Graph *g, Plan *p, const SwapLadder *l,
                            PlannerWork *work)
{
    /* Within a run of units of one ladder step placed in one tier, every unit changes one
     * block the same way: the per-block sum grows linearly and the total-load term is a
     * maximum of lines, so the time is convex there and bisection finds that run's minimum
     * exactly. Across runs (a new step lands on blocks that differ, or a dearer tier) it need
     * not be, so each run is searched and the best kept. */
    Amounts am;
    amounts_init(&am, hw, g, p, l, work);
    int units = planner_units(l), best = 0;
    double best_t = closed_at(&am, 0);
    double room[TIER_COUNT];
    memcpy(room, l->room, sizeof room);
    int start = 0;
    Tier run_tier = units > 0 ? unit_tier(l, 0, room) : TIER_GPU;
    for (int u = 1; u <= units; u++) {
        bool end = u == units;
        Tier t = run_tier;
        if (!end)
            t = unit_tier(l, u, room);
        if (end || t != run_tier || u % l->n_layer == 0) {
            /* run of units [start, u): amounts start .. u */
            int n = convex_min(&am, start, u);
            double f = closed_at(&am, n);
            if (f < best_t - 1e-12 * best_t) {
                best = n;
                best_t = f;
            }
            start = u;
            run_tier = t;
        }
    }
    /* If the optimum does not fit, the most below it that does: memory grows with the amount
     * (last_fitting), so nothing above it fits either. */
    if (!fits_at(&am, best)) {
        int down = last_fitting(&am, best);
        if (down >= 0)
            best = down;
    }
    amounts_set(&am, best);
    amounts_free(&am);
    return best;
}

int planner_best_units(const Hardware *hw, const Graph *g, Plan *p, const SwapLadder *l)
{
    PlannerWork work = {0};
    return planner_best_units_work(hw, g, p, l, &work);
}
