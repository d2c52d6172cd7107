/* plan_advice: the changes and capacities that make a plan fit, each planned again; see
 * plan_advice.h. */
#include "plan_advice.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuyou_err.h"
#include "hw.h"
#include "options.h"
#include "units.h"

/* How often the capacities are raised to what the plan made on them still lacks. */
enum { CAPACITY_ROUNDS = 8 };

/* One edit of a request: an option given left out, one set, --swap none, fuyou's policy. */
typedef enum EditKind { EDIT_LEAVE, EDIT_SET, EDIT_SWAP_NONE, EDIT_POLICY_FUYOU } EditKind;
/* Options by index: options.h's plan options' (the four tiers, then the counts), then --swap. */
enum { K_SWAP = 4 + PC_N };

typedef struct Edit {
    EditKind kind;
    int k;          /* the option, EDIT_LEAVE and EDIT_SET */
    char value[16]; /* EDIT_SET: a tier's name or a count in digits */
} Edit;

enum { TRIAL_MAX_EDITS = 24 };

/* A request to plan again: rq with its edits, its arguments its own (rq.args points into the
 * trial: build it where it stays). */
typedef struct Trial {
    Edit edit[TRIAL_MAX_EDITS];
    int n_edit;
    bool extreme;     /* an all-at-once set: the most frugal of some tiers */
    bool micro_auto;  /* --micro-batches left to the search: named by the count it picks */
    PlanRequest rq;
    PlanArgs args;
    char change[320]; /* as the command line spells the edits */
} Trial;

/* Plan option k's name (the four tiers, then the counts), without "--". */
static const char *plan_option(int k)
{
    return opt_specs[OPT_WEIGHTS + k].name;
}

static const char **tier_arg(PlanArgs *a, int k)
{
    const char **tiers[4] = {&a->weights, &a->optim, &a->checkpoints, &a->act};
    return tiers[k];
}

/* Option k of rq as given, spelled into name: whether it was given. */
static bool given(const PlanRequest *rq, int k, char *name, size_t n)
{
    if (k == K_SWAP) {
        char b[24];
        if (rq->swap == SWAP_AUTO || rq->swap == SWAP_SWEEP)
            return false;
        snprintf(name, n, "--swap %s", rq->swap == SWAP_BYTES ?
                 units_bytes(b, sizeof b, rq->swap_bytes) : plan_swap_name(rq->swap));
        return true;
    }
    if (k < 4) {
        const char *v = *tier_arg((PlanArgs *)rq->args, k);
        if (v)
            snprintf(name, n, "--%s %s", plan_option(k), v);
        return v != NULL;
    }
    int c = rq->args->count[k - 4];
    if (c >= 0)
        snprintf(name, n, "--%s %d", plan_option(k), c);
    return c >= 0;
}

/* Makes t's request: base with t's edits, quiet (no score, no progress: the closed form
 * decides), and names them in t->change. */
static void trial_build(Trial *t, const PlanRequest *base)
{
    t->rq = *base;
    t->args = *base->args;
    t->rq.args = &t->args;
    t->rq.score = NULL, t->rq.score_ctx = NULL;
    t->rq.progress = NULL, t->rq.progress_ctx = NULL;
    if (t->rq.swap == SWAP_SWEEP)
        t->rq.swap = SWAP_AUTO; /* the sweep's plan is auto's */
    t->change[0] = '\0';
    t->micro_auto = false;
    char left[160] = "";
    for (int i = 0; i < t->n_edit; i++) {
        const Edit *d = &t->edit[i];
        char name[96];
        switch (d->kind) {
        case EDIT_LEAVE:
            if (d->k == 4 + PC_MICRO) { /* named by the count the search picks */
                t->micro_auto = t->args.count[PC_MICRO] > 0;
                t->args.count[PC_MICRO] = -1;
                break;
            }
            if (!given(&t->rq, d->k, name, sizeof name))
                break;
            err_append(left, sizeof left, " %s", name);
            if (d->k == K_SWAP)
                t->rq.swap = SWAP_AUTO;
            else if (d->k < 4)
                *tier_arg(&t->args, d->k) = NULL;
            else
                t->args.count[d->k - 4] = -1;
            break;
        case EDIT_SET:
            if (d->k < 4)
                *tier_arg(&t->args, d->k) = d->value;
            else
                t->args.count[d->k - 4] = atoi(d->value);
            err_append(t->change, sizeof t->change, " --%s %s", plan_option(d->k),
                       d->value);
            break;
        case EDIT_SWAP_NONE:
            t->rq.swap = SWAP_NONE;
            t->args.act = NULL; /* --act and --swap both decide the activations */
            err_append(t->change, sizeof t->change, " --swap none");
            break;
        case EDIT_POLICY_FUYOU:
            t->rq.policy = POLICY_FUYOU;
            err_append(t->change, sizeof t->change, " --policy fuyou");
            break;
        }
    }
    char sets[320];
    snprintf(sets, sizeof sets, "%s", t->change);
    snprintf(t->change, sizeof t->change, "%s%s%s", left[0] ? "without" : "", left,
             left[0] && sets[0] ? "," : "");
    err_append(t->change, sizeof t->change, "%s", left[0] || !sets[0] ? sets : sets + 1);
}

static void trial_edit(Trial *t, EditKind kind, int k, const char *value)
{
    assert(t->n_edit < TRIAL_MAX_EDITS);
    Edit *d = &t->edit[t->n_edit++];
    *d = (Edit){.kind = kind, .k = k};
    snprintf(d->value, sizeof d->value, "%s", value ? value : "");
}

static int index_of(const char *option)
{
    for (int k = 0; k < 4 + PC_N; k++)
        if (!strcmp(plan_option(k), option))
            return k;
    assert(!"an option plan_args names");
    return -1;
}

/* The plan t asks for on hw: its shortfall into *short_bytes, its micro-batches into *n_micro,
 * and its footprint into f (NULL: not wanted). 0, -EINVAL where plan_make refuses the
 * combination, or plan_make's other errors. */
static int trial_plan(const Trial *t, const Hardware *hw, double *short_bytes, int *n_micro,
                      Footprint *f, Err *e)
{
    Graph g;
    Plan p;
    PlanInfo info;
    int rc = plan_make(&t->rq, hw, &g, &p, &info, e);
    if (!rc) {
        Footprint mine;
        footprint_compute(f ? f : &mine, &g, &p);
        *short_bytes = footprint_short_bytes(f ? f : &mine, hw);
        *n_micro = p.n_micro;
    }
    plan_make_free(&info);
    plan_free(&p);
    graph_free(&g);
    return rc;
}

/* The changes to try for plan p of rq, into t (at most max), their requests built. */
static int trials(const PlanRequest *rq, const Plan *p, Trial *t, int max)
{
    int n = 0, n_given = 0;
    char name[96];
    /* each option given, left out: the search takes over what it fixed */
    for (int k = 0; k <= K_SWAP && n < max; k++) {
        if (!given(rq, k, name, sizeof name))
            continue;
        t[n] = (Trial){0};
        trial_edit(&t[n++], EDIT_LEAVE, k, NULL);
        n_given++;
    }
    if (n_given > 1 && n < max) { /* and all of them */
        t[n] = (Trial){0};
        for (int k = 0; k <= K_SWAP; k++)
            if (given(rq, k, name, sizeof name))
                trial_edit(&t[n], EDIT_LEAVE, k, NULL);
        n++;
    }
    if (n < max && rq->swap != SWAP_NONE) {
        t[n] = (Trial){0};
        trial_edit(&t[n++], EDIT_SWAP_NONE, 0, NULL);
    }
    /* weights, states and checkpoints each on a tier off the GPU they are not on */
    Tier now[3] = {p->weights, p->optim, (Tier)plan_act(p, 0, BLOCK_CKPT_OP)};
    for (int k = 0; k < 3; k++)
        for (Tier to = TIER_CPU; to <= TIER_SSD && n < max; to++) {
            if (now[k] == to)
                continue;
            t[n] = (Trial){0};
            trial_edit(&t[n++], EDIT_SET, k, tier_name(to));
        }
    /* the counts that hold memory, at their least */
    const struct { int count, now; const char *least; } counts[] = {
        {PC_OCPU, p->optim_cpu_groups, "0"}, {PC_OGPU, p->optim_gpu_groups, "0"},
        {PC_OSTREAM, p->optim_stream_groups, "0"}, {PC_SUBGROUP, p->subgroup_blocks, "1"},
        {PC_TAIL, p->tail_blocks, "1"}, {PC_PREFETCH, p->prefetch_depth, "0"},
        {PC_WBUF, p->weight_buffers, "1"}, {PC_PBUF, p->pinned_buffers, "1"},
        {PC_ABUF, p->act_buffers, "1"}, {PC_GBUF, p->grad_buffers, "1"},
        {PC_SBUF, p->state_buffers, "1"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0] && n < max; i++) {
        if (counts[i].now <= atoi(counts[i].least))
            continue;
        t[n] = (Trial){0};
        if (counts[i].count == PC_WBUF && p->prefetch_depth > 0) /* buffers >= depth + 1 */
            trial_edit(&t[n], EDIT_SET, 4 + PC_PREFETCH, "0");
        trial_edit(&t[n++], EDIT_SET, 4 + counts[i].count, counts[i].least);
    }
    if (n < max && rq->policy == POLICY_ZERO_INFINITY) {
        t[n] = (Trial){0};
        trial_edit(&t[n++], EDIT_POLICY_FUYOU, 0, NULL);
    }
    /* all at once: the least of GPU and CPU memory (everything on the SSD that can be, every
     * buffer one, the micro-batches searched, then the most of them: the least activations
     * on the GPU), and the least of the SSD (everything in CPU memory) */
    if (n + 3 <= max) {
        static const char *frugal[][2] = {
            {"weights", "ssd"}, {"optim", "ssd"}, {"checkpoints", "ssd"},
            {"optim-cpu-groups", "0"}, {"optim-gpu-groups", "0"},
            {"optim-stream-groups", "0"}, {"subgroup", "1"}, {"tail", "1"}, {"prefetch", "0"},
            {"weight-buffers", "1"}, {"pinned-buffers", "1"}, {"act-buffers", "1"},
            {"grad-buffers", "1"}, {"state-buffers", "1"},
        };
        t[n] = (Trial){.extreme = true};
        trial_edit(&t[n], EDIT_LEAVE, 4 + PC_MICRO, NULL);
        for (size_t i = 0; i < sizeof frugal / sizeof frugal[0]; i++)
            trial_edit(&t[n], EDIT_SET, index_of(frugal[i][0]), frugal[i][1]);
        trial_edit(&t[n], EDIT_SWAP_NONE, 0, NULL);
        n++;
        int most = 1;
        for (int m = 1; m <= rq->batch && m <= PLAN_AUTO_MICRO_MAX; m++)
            most = rq->batch % m ? most : m;
        if (most > 1) {
            t[n] = t[n - 1];
            snprintf(t[n].edit[0].value, sizeof t[n].edit[0].value, "%d", most);
            t[n].edit[0].kind = EDIT_SET;
            n++;
        }
        t[n] = (Trial){.extreme = true};
        trial_edit(&t[n], EDIT_SET, index_of("weights"), "cpu");
        trial_edit(&t[n], EDIT_SET, index_of("optim"), "cpu");
        trial_edit(&t[n], EDIT_SET, index_of("checkpoints"), "cpu");
        trial_edit(&t[n], EDIT_SWAP_NONE, 0, NULL);
        n++;
    }
    for (int i = 0; i < n; i++)
        trial_build(&t[i], rq);
    return n;
}

/* Leaves out of trial t, which fits, each edit without which it still fits: the fewest
 * changes, each needed. t is rebuilt. 0 or plan_make's error. */
static int trial_minimize(Trial *t, const PlanRequest *rq, const Hardware *hw, Err *e)
{
    for (int i = t->n_edit - 1; i >= 0 && t->n_edit > 1; i--) {
        Trial less = *t;
        memmove(&less.edit[i], &less.edit[i + 1], (size_t)(less.n_edit - i - 1) *
                sizeof less.edit[0]);
        less.n_edit--;
        trial_build(&less, rq);
        double short_bytes;
        int n_micro, rc = trial_plan(&less, hw, &short_bytes, &n_micro, NULL, e);
        if (rc == -EINVAL) /* a contradiction without it: it is needed */
            e->msg[0] = '\0', rc = 0, short_bytes = 1;
        if (rc)
            return rc;
        if (short_bytes == 0) {
            *t = less;
            t->rq.args = &t->args; /* into t, not the copy */
        }
    }
    return 0;
}

/* `bytes` of tier t rounded up to what a user types: whole GiB of memory (MiB below a GiB);
 * whole GB of SSD below 1 TB, else hundredths of a TB. The option that gives it into opt;
 * returns the bytes that option gives. */
static double round_capacity(Tier t, double bytes, char *opt, size_t n)
{
    double v;
    if (t == TIER_SSD) {
        bool tb = bytes >= 1e12;
        v = tb ? ceil(bytes / 1e10 - 1e-9) / 100 : ceil(bytes / 1e9 - 1e-9);
        snprintf(opt, n, "--ssd-capacity %.*f%s", tb ? 2 : 0, v, tb ? "TB" : "GB");
        units_parse_bytes(strchr(opt, ' ') + 1, &v); /* what the option gives */
        return v;
    }
    double unit = bytes >= 0x1p30 ? 0x1p30 : 0x1p20; /* MiB below a GiB: a budget's */
    v = ceil(bytes / unit - 1e-9);
    snprintf(opt, n, "--%s %.0f%s", t == TIER_GPU ? "gpu-mem" : "cpu-mem", v,
             unit == 0x1p30 ? "GiB" : "MiB");
    return v * unit;
}

/* hw with tier t's capacity `bytes`, as fuyou-sim's option for it gives it (the memory tiers
 * with nothing reserved, hw_set_budgets). */
static void set_capacity(Hardware *hw, Tier t, double bytes)
{
    if (t != TIER_SSD)
        hw_set_budgets(hw, t == TIER_GPU ? bytes : 0, t == TIER_CPU ? bytes : 0);
    else if (bytes <= HW_MAX_SSD_GB * 1e9)
        hw_set_ssd_bytes(hw, bytes);
    else
        hw->ssd_capacity_GB = bytes / 1e9 / hw->ssd_count; /* beyond any ini: said as it is */
}

/* The capacities rq's plans fit, from need (bytes per tier a plan of it needs): the tiers
 * short raised to it, rq planned again there, and raised again where that plan is still
 * short, CAPACITY_ROUNDS times at most. Each round raises a tier short again by twice the
 * last raise beyond its shortfall: the planner fills the room it is given (states kept in
 * CPU memory, activations kept where there is room), so a tier raised by its shortfall alone
 * can stay short round after round. *found says whether one fit; the capacity is one that
 * fits, checked, not the least. */
static int capacity_from(const Trial *rq, const Hardware *hw, const double need_in[TIER_COUNT],
                         PlanCapacity *out, bool *found, Err *e)
{
    Hardware h = *hw; /* the rates and curves shared, read only */
    double need[TIER_COUNT], extra[TIER_COUNT] = {0};
    memcpy(need, need_in, sizeof need);
    memset(out, 0, sizeof *out);
    *found = false;
    for (int round = 0; round < CAPACITY_ROUNDS; round++) {
        for (int t = 0; t < TIER_COUNT; t++) {
            char opt[64];
            if (need[t] > footprint_capacity(&h, (Tier)t)) {
                set_capacity(&h, (Tier)t, round_capacity((Tier)t, need[t], opt, sizeof opt));
                out->raised[t] = true;
            }
        }
        Footprint f;
        double short_bytes;
        int n_micro, rc = trial_plan(rq, &h, &short_bytes, &n_micro, &f, e);
        if (rc)
            return rc == -EINVAL ? (e->msg[0] = '\0', 0) : rc;
        for (int t = 0; t < TIER_COUNT; t++)
            out->bytes[t] = footprint_capacity(&h, (Tier)t);
        if (short_bytes == 0) {
            *found = true;
            return 0;
        }
        for (int t = 0; t < TIER_COUNT; t++) {
            double total = footprint_tier_total(&f, (Tier)t), have = out->bytes[t];
            if (total <= have)
                continue;
            if (out->raised[t])
                extra[t] = 2 * extra[t] + (total - have);
            need[t] = total + extra[t];
        }
    }
    return 0;
}

static int raised_count(const PlanCapacity *c)
{
    return c->raised[TIER_GPU] + c->raised[TIER_CPU] + c->raised[TIER_SSD];
}

static double raised_bytes(const PlanCapacity *c)
{
    double sum = 0;
    for (int t = 0; t < TIER_COUNT; t++)
        sum += c->raised[t] ? c->bytes[t] : 0;
    return sum;
}

/* Fewest tiers raised first, then the fewest bytes. */
static int by_tiers_then_bytes(const void *x, const void *y)
{
    const PlanCapacity *a = x, *b = y;
    if (raised_count(a) != raised_count(b))
        return raised_count(a) - raised_count(b);
    return (raised_bytes(a) > raised_bytes(b)) - (raised_bytes(a) < raised_bytes(b));
}

/* Whether capacity c asks for at least what k does on every tier k raises (k is enough). */
static bool dominated(const PlanCapacity *c, const PlanCapacity *k)
{
    for (int t = 0; t < TIER_COUNT; t++)
        if (k->raised[t] && (!c->raised[t] || c->bytes[t] < k->bytes[t]))
            return false;
    return true;
}

/* Keeps in a, of the n capacities found, those no other kept one makes needless, in
 * by_tiers_then_bytes' order, at most PLAN_ADVICE_MAX_CAPACITIES. */
static void keep_capacities(PlanAdvice *a, PlanCapacity *c, int n)
{
    qsort(c, (size_t)n, sizeof *c, by_tiers_then_bytes);
    for (int i = 0; i < n && a->n_capacity < PLAN_ADVICE_MAX_CAPACITIES; i++) {
        bool needless = false;
        for (int j = 0; j < a->n_capacity; j++)
            needless |= dominated(&c[i], &a->capacity[j]);
        if (!needless)
            a->capacity[a->n_capacity++] = c[i];
    }
}

/* The bytes per tier footprint f needs beyond hw's capacities' (0 where it fits). */
static void tier_needs(const Footprint *f, const Hardware *hw, double need[TIER_COUNT])
{
    for (int t = 0; t < TIER_COUNT; t++) {
        double total = footprint_tier_total(f, (Tier)t);
        need[t] = total > footprint_capacity(hw, (Tier)t) ? total : 0;
    }
}

static int by_fit_then_short(const void *x, const void *y)
{
    const PlanFix *a = x, *b = y;
    if ((a->short_bytes == 0) != (b->short_bytes == 0))
        return a->short_bytes == 0 ? -1 : 1;
    if (a->short_bytes == 0 || a->short_bytes == b->short_bytes)
        return 0;
    return a->short_bytes < b->short_bytes ? -1 : 1;
}

/* Whether t only leaves out options given (one change to a user: "without ..."). */
static bool given_left_only(const Trial *t)
{
    for (int i = 0; i < t->n_edit; i++)
        if (t->edit[i].kind != EDIT_LEAVE)
            return false;
    return true;
}

/* What planning a trial gave. */
typedef struct TrialResult {
    bool planned;       /* plan_make took it */
    double short_bytes;
    int n_micro;
    bool used;          /* taken into the greedy set */
} TrialResult;

/* Whether edits x and y cannot go together: the same option, both about the activations
 * (--swap, --act), or the same policy twice. */
static bool edits_clash(const Edit *x, const Edit *y)
{
    bool xo = x->kind == EDIT_LEAVE || x->kind == EDIT_SET;
    bool yo = y->kind == EDIT_LEAVE || y->kind == EDIT_SET;
    bool xa = x->kind == EDIT_SWAP_NONE || (xo && (x->k == K_SWAP || x->k == 3));
    bool ya = y->kind == EDIT_SWAP_NONE || (yo && (y->k == K_SWAP || y->k == 3));
    return (xo && yo && x->k == y->k) || (xa && ya) || (x->kind == y->kind &&
                                                        x->kind == EDIT_POLICY_FUYOU);
}

/* acc with trial add's edits after its own, into out; false where they clash or are too
 * many. */
static bool trial_join(const Trial *acc, const Trial *add, Trial *out)
{
    if (acc->n_edit + add->n_edit > TRIAL_MAX_EDITS)
        return false;
    for (int i = 0; i < acc->n_edit; i++)
        for (int j = 0; j < add->n_edit; j++)
            if (edits_clash(&acc->edit[i], &add->edit[j]))
                return false;
    *out = *acc;
    memcpy(&out->edit[out->n_edit], add->edit, (size_t)add->n_edit * sizeof add->edit[0]);
    out->n_edit += add->n_edit;
    return true;
}

/* The changes that helped alone (r: short of fewer bytes than start_short), taken together
 * greedily: each round adds the one that, with those taken, leaves the least short, while
 * that is less than before and until it fits. Into out (built on rq), its result into *res,
 * how many changes it took into *taken. 0 or plan_make's error. */
static int trial_greedy(const Trial *t, TrialResult *r, int n, double start_short,
                        const PlanRequest *rq, const Hardware *hw, Trial *out,
                        TrialResult *res, int *taken, Err *e)
{
    *out = (Trial){0};
    *taken = 0;
    *res = (TrialResult){.short_bytes = start_short};
    while (res->short_bytes > 0) {
        int best = -1;
        TrialResult best_res = *res;
        for (int j = 0; j < n; j++) {
            Trial c;
            if (!r[j].planned || t[j].extreme || r[j].used || r[j].short_bytes >= start_short ||
                !trial_join(out, &t[j], &c))
                continue;
            trial_build(&c, rq);
            TrialResult cr = {.planned = true};
            int rc = trial_plan(&c, hw, &cr.short_bytes, &cr.n_micro, NULL, e);
            if (rc == -EINVAL) {
                e->msg[0] = '\0';
                continue;
            }
            if (rc)
                return rc;
            if (cr.short_bytes < best_res.short_bytes)
                best = j, best_res = cr;
        }
        if (best < 0)
            break;
        Trial joined;
        trial_join(out, &t[best], &joined);
        *out = joined;
        r[best].used = true;
        *res = best_res;
        ++*taken;
    }
    trial_build(out, rq);
    return 0;
}

int plan_advice_make(const PlanRequest *rq, const Hardware *hw, const Graph *g, const Plan *p,
                     PlanAdvice *a, Err *e)
{
    memset(a, 0, sizeof *a);
    Footprint f;
    footprint_compute(&f, g, p);
    a->short_bytes = footprint_short_bytes(&f, hw);
    if (a->short_bytes == 0)
        return 0;
    enum { MAX_TRIALS = 48 };
    Trial *t = malloc((MAX_TRIALS + 1) * sizeof *t);
    TrialResult *r = calloc(MAX_TRIALS + 1, sizeof *r);
    if (!t || !r) {
        free(t), free(r);
        return err_set(e, -ENOMEM, "plan advice: out of memory");
    }
    int n = trials(rq, p, t, MAX_TRIALS), rc = 0;
    double needs[5][TIER_COUNT]; /* where the capacities start: the plan's, the sets' */
    int n_needs = 0;
    tier_needs(&f, hw, needs[n_needs++]);
    bool small_fits = false; /* a change that is no all-at-once set fits */
    for (int i = 0; i < n && !rc; i++) {
        Footprint tf;
        rc = trial_plan(&t[i], hw, &r[i].short_bytes, &r[i].n_micro, &tf, e);
        if (rc == -EINVAL) { /* options that contradict each other: not a change to offer */
            e->msg[0] = '\0';
            rc = 0;
            continue;
        }
        if (rc)
            break;
        r[i].planned = true;
        a->tried++;
        small_fits |= !t[i].extreme && r[i].short_bytes == 0;
        if (t[i].extreme && r[i].short_bytes > 0 && n_needs < 5)
            tier_needs(&tf, hw, needs[n_needs++]);
    }
    if (!rc && !small_fits) { /* those that helped, together */
        int taken;
        rc = trial_greedy(t, r, n, a->short_bytes, rq, hw, &t[n], &r[n], &taken, e);
        if (!rc && taken > 1) {
            a->tried++;
            small_fits = r[n].short_bytes == 0;
            if (!small_fits && n_needs < 5) {
                Footprint tf;
                rc = trial_plan(&t[n], hw, &r[n].short_bytes, &r[n].n_micro, &tf, e);
                if (!rc)
                    tier_needs(&tf, hw, needs[n_needs++]);
            }
            n++;
        }
    }
    for (int i = 0; i < n && !rc; i++) {
        if (!r[i].planned || r[i].short_bytes >= a->short_bytes ||
            a->n_fixes == PLAN_ADVICE_MAX_FIXES)
            continue;
        if (t[i].extreme && (r[i].short_bytes > 0 || small_fits))
            continue; /* an all-at-once set only where it fits and nothing smaller does */
        if (t[i].n_edit > 1 && r[i].short_bytes == 0 && !given_left_only(&t[i])) {
            rc = trial_minimize(&t[i], rq, hw, e);
            if (!rc) /* the count the fewest changes pick */
                rc = trial_plan(&t[i], hw, &r[i].short_bytes, &r[i].n_micro, NULL, e);
            if (rc)
                break;
        }
        PlanFix *fix = &a->fixes[a->n_fixes++];
        /* "without --swap all, --micro-batches 8": the count picked is not left out */
        snprintf(fix->change, sizeof fix->change, "%s%s", t[i].change,
                 !t[i].micro_auto || !t[i].change[0] ? ""
                 : !strncmp(t[i].change, "without", 7) ? ", " : " ");
        if (t[i].micro_auto)
            err_append(fix->change, sizeof fix->change, "--micro-batches %d", r[i].n_micro);
        fix->short_bytes = r[i].short_bytes;
        fix->combined = t[i].n_edit > 1 && !given_left_only(&t[i]);
        a->fits |= r[i].short_bytes == 0;
    }
    free(r);
    /* stable: those that fit keep the order tried */
    for (int i = 1; i < a->n_fixes; i++)
        for (int j = i; j > 0 && by_fit_then_short(&a->fixes[j - 1], &a->fixes[j]) > 0; j--) {
            PlanFix tmp = a->fixes[j];
            a->fixes[j] = a->fixes[j - 1];
            a->fixes[j - 1] = tmp;
        }
    if (!rc && !a->fits) {
        Trial as_given = {0};
        trial_build(&as_given, rq);
        PlanCapacity found_caps[5];
        int n_found = 0;
        for (int i = 0; i < n_needs && !rc; i++) {
            bool found;
            rc = capacity_from(&as_given, hw, needs[i], &found_caps[n_found], &found, e);
            n_found += !rc && found;
        }
        keep_capacities(a, found_caps, n_found);
    }
    free(t);
    return rc;
}

/* Bytes of tier t as the line says them: GiB for memory, decimal GB or TB for the SSD (as
 * [ssd] capacity_GB and --ssd-capacity count it). */
static char *tier_bytes(char *buf, size_t n, Tier t, double bytes)
{
    if (t != TIER_SSD && bytes >= 0x1p30 && bytes == floor(bytes / 0x1p30) * 0x1p30)
        snprintf(buf, n, "%.0f GiB", bytes / 0x1p30); /* as round_capacity gives it */
    else if (t != TIER_SSD && bytes < 0x1p30 && bytes == floor(bytes / 0x1p20) * 0x1p20)
        snprintf(buf, n, "%.0f MiB", bytes / 0x1p20);
    else if (t != TIER_SSD)
        units_bytes(buf, n, bytes);
    if (t != TIER_SSD)
        return buf;
    if (bytes >= 1e12)
        snprintf(buf, n, "%.2f TB", bytes / 1e12);
    else
        snprintf(buf, n, "%.0f GB", bytes / 1e9);
    return buf;
}

static const char *tier_words(Tier t, const Graph *g)
{
    if (t == TIER_GPU)
        return g->has_lane && g->lane.on_host ? "device memory" : "GPU memory";
    return t == TIER_CPU ? "CPU memory" : "SSD";
}

char *plan_advice_line(const PlanAdvice *a, const PlanRequest *rq, const Hardware *hw,
                       const Graph *g, char *buf, size_t n)
{
    buf[0] = '\0';
    if (a->short_bytes == 0)
        return snprintf(buf, n, "it fits"), buf;
    int shown = 0;
    for (int i = 0; i < a->n_fixes && shown < 3; i++) {
        const PlanFix *f = &a->fixes[i];
        if (a->fits && f->short_bytes > 0)
            break;

        char b0[24], b1[24];
        err_append(buf, n, "%s%s%s ", shown ? "; " : "", f->combined ? "all of " : "",
                   f->change);
        if (f->short_bytes == 0)
            err_append(buf, n, "fits");
        else
            err_append(buf, n, "leaves %s short (%s less)",
                       units_bytes(b0, sizeof b0, f->short_bytes),
                       units_bytes(b1, sizeof b1, a->short_bytes - f->short_bytes));
        shown++;
    }
    if (shown)
        err_append(buf, n, " (each planned again)");
    if (a->fits)
        return buf;
    err_append(buf, n, "%snothing fuyou can change fits %s at --batch %d --seq %d on %s (%d "
               "changes planned)", shown ? "; " : "", rq->model->name, rq->batch, rq->seq,
               hw->source, a->tried);
    for (int i = 0; i < a->n_capacity; i++) {
        const PlanCapacity *c = &a->capacity[i];
        char opts[192] = "";
        err_append(buf, n, i ? "; or with " : ": it fits with ");
        bool first = true;
        for (int t = 0; t < TIER_COUNT; t++) {
            if (!c->raised[t])
                continue;
            char b0[24], b1[24], opt[64];
            round_capacity((Tier)t, c->bytes[t], opt, sizeof opt);
            err_append(buf, n, "%s%s of %s (here %s)", first ? "" : " and ",
                       tier_bytes(b0, sizeof b0, (Tier)t, c->bytes[t]), tier_words((Tier)t, g),
                       tier_bytes(b1, sizeof b1, (Tier)t, footprint_capacity(hw, (Tier)t)));
            err_append(opts, sizeof opts, " %s", opt);
            first = false;
        }
        if (rq->prog && !strcmp(rq->prog, "fuyou-sim")) /* a what-if; a run has its machine */
            err_append(buf, n, ": fuyou-sim%s", opts);
    }
    if (!a->n_capacity)
        err_append(buf, n, "; no capacity within %d rounds of raising the short tiers fits it",
                   CAPACITY_ROUNDS);
    return buf;
}

char *plan_advice_why_short(const PlanRequest *rq, const Hardware *hw, const Graph *g,
                            const Plan *p, char *buf, size_t n)
{
    Footprint f;
    footprint_compute(&f, g, p);
    buf[0] = '\0';
    for (int t = 0; t < TIER_COUNT; t++) {
        double need = footprint_tier_total(&f, (Tier)t), have = footprint_capacity(hw, (Tier)t);
        if (need <= have)
            continue;
        char b0[24], b1[24], b2[24];
        err_append(buf, n, "%s%s needs %s of its %s (%s short)", buf[0] ? ", " : "",
                   tier_name((Tier)t), units_bytes(b0, sizeof b0, need),
                   units_bytes(b1, sizeof b1, have), units_bytes(b2, sizeof b2, need - have));
    }
    if (!buf[0])
        return snprintf(buf, n, "it fits"), buf;
    PlanAdvice a;
    Err e = {""};
    if (plan_advice_make(rq, hw, g, p, &a, &e)) {
        err_append(buf, n, "; no advice: %s", e.msg);
        return buf;
    }
    err_append(buf, n, "; ");
    size_t len = strlen(buf);
    if (len + 1 < n) /* the advice after the shortfall, in the same buffer */
        plan_advice_line(&a, rq, hw, g, buf + len, n - len);
    return buf;
}
