/* Check suite for model/sched's buffer rings: no task overwrites a buffer another still reads
 * (every pool, several plans, copies whole and in chunks), and every task names the buffers it
 * uses. The rest of the schedule's structure is test_sched.c's. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "sched_testutil.h"

/* reach[t * n + u]: t waits (transitively) for u. */
static unsigned char *reachability(const Schedule *s)
{
    int n = s->n_tasks;
    unsigned char *r = calloc((size_t)n * n, 1);
    int *order = malloc((size_t)n * sizeof(int)), *indeg = calloc((size_t)n, sizeof(int));
    int *first, *succ;
    ck_assert_int_eq(sched_successors(s, &first, &succ), 0);
    int head = 0, tail = 0;
    for (int t = 0; t < n; t++)
        if (!(indeg[t] = s->tasks[t].n_deps))
            order[tail++] = t;
    while (head < tail) {
        int t = order[head++];
        for (int k = first[t]; k < first[t + 1]; k++)
            if (--indeg[succ[k]] == 0)
                order[tail++] = succ[k];
    }
    ck_assert_int_eq(tail, n);
    for (int i = 0; i < n; i++) {
        int t = order[i];
        for (int k = 0; k < s->tasks[t].n_deps; k++) {
            int d = sched_deps(s, t)[k];
            r[(size_t)t * n + d] = 1;
            for (int u = 0; u < n; u++)
                r[(size_t)t * n + u] |= r[(size_t)d * n + u];
        }
    }
    free(order), free(indeg), free(first), free(succ);
    return r;
}

/* One buffer pool: which tasks fill a buffer (writers) and read it (readers), the buffer, and
 * whether a writer fills it for this reader (same block or sub-group, iteration, part). */
typedef struct Pool {
    const char *name;
    bool (*writer)(const Task *t);
    bool (*reader)(const Task *t);
    int (*slot)(const Task *t);
    bool (*intended)(const Task *w, const Task *r);
} Pool;

static bool is_gpu(const Task *t)
{
    return t->res == RES_GPU && t->layer >= 0 && t->layer < p.n_layer;
}
static bool w_weights(const Task *t)
{
    return t->res == RES_H2D && t->cargo == CARGO_WEIGHTS && t->layer >= 0;
}
static int s_weights(const Task *t) { return t->slot.gpu_weights; }
static bool same_block(const Task *w, const Task *r)
{
    return w->layer == r->layer && w->iter == r->iter;
}
static bool w_fetch(const Task *t)
{
    return t->res == RES_H2D && (t->cargo == CARGO_CKPT || t->cargo == CARGO_ACTS);
}
static bool r_fetch(const Task *t) { return is_gpu(t) && t->kind != TASK_FWD; }
static int s_fetch(const Task *t) { return t->slot.gpu_acts; }
/* zero-infinity's gradient comes back to its GPU buffer before its fp32 copy leaves it */
static bool w_grads(const Task *t)
{
    return (is_gpu(t) && t->kind == TASK_BWD) ||
           (t->res == RES_H2D && t->cargo == CARGO_GRADS && t->layer >= 0);
}
static bool r_grads(const Task *t)
{
    return t->res == RES_D2H && (t->cargo == CARGO_GRADS || t->cargo == CARGO_FP32_GRADS) &&
           t->layer >= 0;
}
static int s_grads(const Task *t) { return t->slot.gpu_grads; }
static bool w_host_grads(const Task *t) { return t->res == RES_D2H && t->cargo == CARGO_GRADS; }
static bool r_host_grads(const Task *t) { return t->res == RES_CPU_ADAM; }
static int s_host_grads(const Task *t) { return t->slot.host_grads; }
static bool same_group(const Task *w, const Task *r)
{
    return w->group == r->group && w->iter == r->iter;
}
/* zero-infinity's fp32 gradients on their way to SSD */
static bool w_staging(const Task *t) { return t->res == RES_D2H && t->cargo == CARGO_FP32_GRADS; }
static bool r_staging(const Task *t)
{
    return t->res == RES_SSD_WRITE && t->cargo == CARGO_FP32_GRADS;
}
/* states, and zero-infinity's fp32 gradients read back with them */
static bool w_states(const Task *t)
{
    return (t->res == RES_SSD_READ &&
            (t->cargo == CARGO_STATES || t->cargo == CARGO_FP32_GRADS)) ||
           t->res == RES_CPU_ADAM;
}
static bool r_states(const Task *t)
{
    return t->res == RES_CPU_ADAM || (t->res == RES_SSD_WRITE && t->group >= 0);
}
static int s_pinned(const Task *t) { return t->slot.pinned; }
static bool w_pinned_w(const Task *t)
{
    return t->res == RES_SSD_READ && t->cargo == CARGO_WEIGHTS && t->layer >= 0;
}
static bool r_pinned_w(const Task *t) { return w_weights(t) && t->from == TIER_SSD; }
static bool same_load(const Task *w, const Task *r)
{
    return same_block(w, r) && w->phase == r->phase;
}

static bool is_act(const Task *t) { return t->cargo == CARGO_CKPT || t->cargo == CARGO_ACTS; }
static bool w_stage_in(const Task *t) { return t->res == RES_SSD_READ && is_act(t); }
static bool r_stage_in(const Task *t) { return t->res == RES_H2D && is_act(t); }
static bool w_stage_out(const Task *t) { return t->res == RES_D2H && is_act(t); }
static bool r_stage_out(const Task *t) { return t->res == RES_SSD_WRITE && is_act(t); }
static bool same_part(const Task *w, const Task *r)
{
    return same_block(w, r) && w->cargo == r->cargo;
}
/* The forward out-slots: a block's swapped tensors, written by its forward and drained by its
 * D2H .act; its input (the checkpoint), written by the block before (res2) and drained by D2H
 * .ckpt. */
static bool w_out_inner(const Task *t) { return is_gpu(t) && t->kind == TASK_FWD; }
static bool r_out_inner(const Task *t) { return t->res == RES_D2H && t->cargo == CARGO_ACTS; }
static bool w_out_ckpt(const Task *t)
{
    if (t->res != RES_GPU || t->kind != TASK_FWD)
        return false;
    return t->layer == -1 || (is_gpu(t) && t->layer + 1 < p.n_layer &&
                              g.ops[t->op].id == g.arch->output);
}
static bool r_out_ckpt(const Task *t) { return t->res == RES_D2H && t->cargo == CARGO_CKPT; }
static int s_out_ckpt(const Task *t)
{
    return sched_fwd_act_slot(&p, t->res == RES_GPU ? t->layer + 1 : t->layer);
}
static bool next_block(const Task *w, const Task *r)
{
    return w->layer + 1 == r->layer && w->iter == r->iter;
}
/* One ring serves both ways (ARCHITECTURE.md): backward's fetches write the slots forward computes
 * into and drains, and forward's compute the slots backward's fetches fill. */
static bool w_ring_inner(const Task *t) { return w_out_inner(t) || w_fetch(t); }
static bool w_ring_ckpt(const Task *t) { return w_out_ckpt(t) || w_fetch(t); }
static int s_ring_ckpt(const Task *t) { return w_fetch(t) ? s_fetch(t) : s_out_ckpt(t); }
static bool fwd_same_block(const Task *w, const Task *r) { return is_gpu(w) && same_block(w, r); }
static bool fwd_next_block(const Task *w, const Task *r)
{
    return w->res == RES_GPU && next_block(w, r);
}
static bool fetch_same_block(const Task *w, const Task *r)
{
    return w_fetch(w) && same_block(w, r);
}

/* a streamed sub-group's GPU state slot: its states come in, its AdamW updates them and
 * writes the new weights, and both go home (ARCHITECTURE.md) */
static bool w_stream(const Task *t)
{
    return t->slot.gpu_state >= 0 && (t->res == RES_H2D || t->kind == TASK_ADAM);
}
static bool r_stream(const Task *t)
{
    return t->slot.gpu_state >= 0 && (t->res == RES_D2H || t->kind == TASK_ADAM);
}
static int s_stream(const Task *t) { return t->slot.gpu_state; }

static const Pool pools[] = {
    {"pinned activation in-slots", w_stage_in, r_stage_in, s_pinned, same_block},
    {"pinned activation out-slots", w_stage_out, r_stage_out, s_pinned, same_part},
    {"GPU activation ring, forward's drains", w_ring_inner, r_out_inner, s_fetch, fwd_same_block},
    {"GPU activation ring, checkpoints", w_ring_ckpt, r_out_ckpt, s_ring_ckpt, fwd_next_block},
    {"GPU weight buffers", w_weights, is_gpu, s_weights, same_block},
    {"GPU activation ring, backward's reads", w_ring_inner, r_fetch, s_fetch,
     fetch_same_block},
    {"GPU gradient buffers", w_grads, r_grads, s_grads, same_block},
    {"CPU gradient buffers", w_host_grads, r_host_grads, s_host_grads, same_group},
    {"pinned gradient staging", w_staging, r_staging, s_host_grads, same_group},
    {"pinned state buffers", w_states, r_states, s_pinned, same_group},
    {"pinned weight buffers", w_pinned_w, r_pinned_w, s_pinned, same_load},
    {"GPU state slots", w_stream, r_stream, s_stream, same_group},
};

/* Every reader's data was written by an intended writer before it, and every other writer of
 * its buffer either came before that one or waits for the reader. */
static int check_pool(const Schedule *s, const unsigned char *r, const Pool *pl)
{
    int n = s->n_tasks, pairs = 0, nw = 0;
    /* the pool's writers with their buffers, and a reader's intended ones among them */
    int *wt = malloc((size_t)n * sizeof(int)), *ws = malloc((size_t)n * sizeof(int));
    int *fed = malloc((size_t)n * sizeof(int));
    ck_assert(wt && ws && fed);
    for (int t = 0; t < n; t++)
        if (pl->writer(&s->tasks[t]) && (ws[nw] = pl->slot(&s->tasks[t])) >= 0)
            wt[nw++] = t;
    for (int rd = 0; rd < n; rd++) {
        const Task *R = &s->tasks[rd];
        int slot = pl->reader(R) ? pl->slot(R) : -1, n_fed = 0;
        if (slot < 0)
            continue;
        for (int k = 0; k < nw; k++)
            if (ws[k] == slot && wt[k] != rd && pl->intended(&s->tasks[wt[k]], R))
                fed[n_fed++] = wt[k];
        for (int k = 0; k < nw; k++) {
            int w = wt[k];
            const Task *W = &s->tasks[w];
            if (ws[k] != slot || w == rd || pl->intended(W, R))
                continue;
            bool before = false;
            for (int f = 0; f < n_fed && !before; f++)
                before = r[(size_t)rd * n + fed[f]] && r[(size_t)fed[f] * n + w];
            /* a reader that writes the buffer first itself (Adam's new weights, with the states
             * in CPU memory) needs only the other writers done before it */
            if (!n_fed && pl->writer(R) && r[(size_t)rd * n + w])
                before = true;
            bool after = r[(size_t)w * n + rd];
            ck_assert_msg(before || after, "%s: %s (iteration %d) may overwrite buffer %d while "
                          "%s (iteration %d) reads it", pl->name, W->id, W->iter, slot, R->id,
                          R->iter);
            pairs++;
        }
    }
    free(wt), free(ws), free(fed);
    return pairs;
}

START_TEST(buffer_rings_are_safe)
{
    /* sub: sub-group blocks on the ten-block model (0: the tiny one, sub-groups of ring) */
    /* gpu: sub-groups updated on the GPU (their blocks out of the weight and gradient rings) */
    static const struct {
        Policy pol;
        Tier w, o;
        ActPlace ckpt, inner;
        int ring, sub, gpu;
    } cases[] = {
        {POLICY_FUYOU, TIER_SSD, TIER_SSD, ACT_CPU, ACT_RECOMPUTE, 2, 0, 0},
        {POLICY_FUYOU, TIER_SSD, TIER_SSD, ACT_SSD, ACT_SSD, 1, 0, 0},
        {POLICY_FUYOU, TIER_CPU, TIER_SSD, ACT_CPU, ACT_CPU, 1, 0, 0},
        {POLICY_FUYOU, TIER_SSD, TIER_CPU, ACT_GPU, ACT_SSD, 3, 0, 0},
        /* sub-groups of several blocks, more than host_grad_groups of them: each block's
         * gradients wait for the update that read its CPU buffer before */
        {POLICY_FUYOU, TIER_CPU, TIER_CPU, ACT_CPU, ACT_RECOMPUTE, 2, 2, 0},
        {POLICY_FUYOU, TIER_CPU, TIER_SSD, ACT_CPU, ACT_RECOMPUTE, 1, 3, 0},
        {POLICY_FUYOU, TIER_SSD, TIER_SSD, ACT_CPU, ACT_SSD, 1, 1, 4},
        {POLICY_FUYOU, TIER_CPU, TIER_CPU, ACT_CPU, ACT_RECOMPUTE, 2, 2, 2},
        {POLICY_ZERO_INFINITY, TIER_SSD, TIER_SSD, ACT_CPU, ACT_RECOMPUTE, 1, 0, 0},
        {POLICY_ZERO_INFINITY, TIER_SSD, TIER_SSD, ACT_SSD, ACT_CPU, 2, 0, 0},
        {POLICY_ZERO_INFINITY, TIER_CPU, TIER_CPU, ACT_CPU, ACT_RECOMPUTE, 1, 0, 0},
        /* everything on the GPU: every sub-group a GPU one, activations through the ring */
        {POLICY_FUYOU, TIER_GPU, TIER_GPU, ACT_GPU, ACT_CPU, 2, 0, 0},
    };
    Err e;
    /* each case with copies whole, and the first four with every PCIe copy in its most chunks
     * (reachability is quadratic in the tasks) */
    for (size_t cc = 0; cc < 2 * sizeof cases / sizeof cases[0]; cc++) {
        size_t c = cc / 2;
        if (cc % 2 && c >= 4)
            continue;
        /* zero-infinity on ten blocks of one-block sub-groups: its gradient buffers wrap */
        bool zi = cases[c].pol == POLICY_ZERO_INFINITY, ten = zi || cases[c].sub;
        setup_model(ten ? &deep : &tiny, cases[c].pol);
        p.weights = cases[c].w;
        p.optim = cases[c].o;
        plan_set_all_act(&p, cases[c].ckpt, cases[c].inner);
        int k = cases[c].ring;
        p.prefetch_depth = k - 1;
        p.weight_buffers = p.pinned_buffers = p.act_buffers = p.grad_buffers = k;
        p.state_buffers = p.host_grad_groups = k;
        p.subgroup_blocks = zi ? 1 : cases[c].sub ? cases[c].sub : k;
        p.copy_chunk_bytes = cc % 2;
        p.optim_gpu_groups = cases[c].gpu;
        ck_assert_int_eq(plan_validate(&p, &e), 0);
        Schedule s;
        ck_assert_int_eq(sched_build(&s, &g, &p, zi ? 2 : 3, &e), 0);
        unsigned char *r = reachability(&s);
        int pairs = 0;
        for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
            pairs += check_pool(&s, r, &pools[i]);
        ck_assert_int_gt(pairs, 0);
        free(r);
        sched_free(&s);
        /* and its forward passes alone (an evaluation's, on the same buffers) */
        if (!zi) {
            ck_assert_int_eq(sched_build_forward(&s, &g, &p, 3, &e), 0);
            r = reachability(&s);
            for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
                check_pool(&s, r, &pools[i]);
            free(r);
            sched_free(&s);
        }
        teardown();
    }
}
END_TEST

/* The task of iteration iter named id, or, cut in chunks, its first chunk (last: its last
 * chunk), or -1. */
static int task_named(const Schedule *s, int iter, const char *id, bool last)
{
    int found = -1;
    size_t n = strlen(id);
    for (int t = 0; t < s->n_tasks; t++) {
        const Task *x = &s->tasks[t];
        bool chunk = !strncmp(x->id, id, n) && !strncmp(x->id + n, ".c", 2);
        if (x->iter == iter && (!strcmp(x->id, id) || chunk) && (found < 0 || last))
            found = t;
    }
    return found;
}

/* Streamed sub-groups (optim_stream_groups): every ring safe, the GPU state slots among them;
 * their gradients never leave the GPU; each update's states come in after the last update's
 * went home, and the next forward loads the weights after the new ones went home. Over
 * sub-groups of one and two blocks, states in CPU memory or split with SSD, copies whole and
 * in chunks. */
START_TEST(streamed_groups_are_ordered)
{
    static const struct { Tier o; int sub, gpu, cpu, stream; } cases[] = {
        {TIER_CPU, 1, 2, 0, 5}, {TIER_CPU, 2, 1, 0, 2}, {TIER_SSD, 1, 1, 4, 3},
        {TIER_CPU, 1, 1, 0, 8},
    };
    Err e;
    for (size_t cc = 0; cc < 2 * sizeof cases / sizeof cases[0]; cc++) {
        size_t c = cc / 2;
        setup_model(&deep, POLICY_FUYOU);
        p.weights = TIER_CPU;
        p.optim = cases[c].o;
        plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
        p.subgroup_blocks = cases[c].sub;
        p.tail_blocks = 1;
        p.copy_chunk_bytes = cc % 2;
        p.optim_gpu_groups = cases[c].gpu;
        p.optim_cpu_groups = cases[c].cpu;
        plan_set_stream_groups(&p, cases[c].stream);
        ck_assert_msg(plan_validate(&p, &e) == 0, "case %zu: %s", c, e.msg);
        Schedule s;
        ck_assert_int_eq(sched_build(&s, &g, &p, 3, &e), 0);
        unsigned char *r = reachability(&s);
        for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
            check_pool(&s, r, &pools[i]);
        int n = s.n_tasks, streamed = 0;
        char id[SCHED_ID_MAX];
        for (int grp = 0; grp < plan_subgroup_count(&p); grp++) {
            if (!plan_group_streamed(&p, grp))
                continue;
            streamed++;
            int first, count;
            plan_subgroup_blocks(&p, grp, &first, &count);
            for (int it = 0; it < 3; it++) {
                snprintf(id, sizeof id, "ADAM.g%d", grp);
                int a = task_named(&s, it, id, false);
                ck_assert_msg(a >= 0 && s.tasks[a].res == RES_GPU, "%s", id);
                snprintf(id, sizeof id, "H2D.g%d.state", grp);
                int in = task_named(&s, it, id, false);
                snprintf(id, sizeof id, "D2H.g%d.w", grp);
                int w = task_named(&s, it, id, true);
                ck_assert_msg(in >= 0 && w >= 0 && r[(size_t)a * n + in], "case %zu: %s", c, id);
                for (int blk = first; blk < first + count; blk++) {
                    snprintf(id, sizeof id, "D2H.b%d.grad", blk);
                    ck_assert_msg(task_named(&s, it, id, false) < 0, "case %zu: %s", c, id);
                    snprintf(id, sizeof id, "H2D.b%d.w", blk);
                    int load = task_named(&s, it + 1, id, false);
                    if (it < 2)
                        ck_assert_msg(load >= 0 && r[(size_t)load * n + w], "case %zu: %s "
                                      "(iteration %d) before the new weights", c, id, it + 1);
                }
                if (it == 0)
                    continue;
                for (int t = 0; t < n; t++) /* the last update's states home first */
                    if (s.tasks[t].iter == it - 1 && s.tasks[t].res == RES_D2H &&
                        s.tasks[t].cargo == CARGO_STATES && s.tasks[t].group == grp)
                        ck_assert_msg(r[(size_t)in * n + t], "case %zu: %s before %s", c,
                                      s.tasks[in].id, s.tasks[t].id);
            }
        }
        ck_assert_int_eq(streamed, cases[c].stream);
        free(r);
        sched_free(&s);
        teardown();
    }
}
END_TEST

/* Does SSD task t touch the extent of block (or -1, the edges') weights `layer`, or of
 * sub-group `group`'s states? */
static bool touches(const Task *t, bool states, int id, int groups)
{
    if (t->res != RES_SSD_READ && t->res != RES_SSD_WRITE)
        return false;
    if (states)
        return t->cargo == CARGO_STATES && t->group == id;
    if (t->cargo == CARGO_WEIGHTS)
        return t->layer == id;
    if (t->cargo != CARGO_UPDATE)
        return false;
    int first, count;
    plan_subgroup_blocks(&p, t->group, &first, &count);
    return id < 0 ? t->group == groups - 1 : id >= first && id < first + count;
}

/* Every SSD extent a schedule writes (a block's weights, a sub-group's states) is ordered
 * against every other access to it, across iterations too: the two SSD lanes run apart, so a
 * read the DAG does not order after a write may read the old bytes. The case that broke: fewer
 * sub-groups than state buffers, whose ring then orders a sub-group's next read after another
 * sub-group's write. */
START_TEST(ssd_extents_are_ordered)
{
    static const struct { Policy pol; int sub, ring; bool deep; } cases[] = {
        {POLICY_FUYOU, 2, 3, false},  /* 2 sub-groups, 3 state buffers */
        {POLICY_FUYOU, 1, 3, false},
        {POLICY_FUYOU, 1, 2, true},
        {POLICY_FUYOU, 4, 2, true},
        {POLICY_ZERO_INFINITY, 2, 3, false},
        {POLICY_ZERO_INFINITY, 1, 1, true},
    };
    Err e;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        setup_model(cases[c].deep ? &deep : &tiny, cases[c].pol);
        p.weights = p.optim = TIER_SSD;
        plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
        p.subgroup_blocks = cases[c].sub;
        p.tail_blocks = 1;
        p.state_buffers = cases[c].ring;
        Schedule s;
        ck_assert_msg(sched_build(&s, &g, &p, 3, &e) == 0, "%s", e.msg);
        unsigned char *r = reachability(&s);
        int n = s.n_tasks, groups = plan_subgroup_count(&p), pairs = 0;
        for (int kind = 0; kind < 2; kind++)
            for (int id = kind ? 0 : -1; id < (kind ? groups : p.n_layer); id++)
                for (int a = 0; a < n; a++)
                    for (int b = a + 1; b < n; b++) {
                        const Task *A = &s.tasks[a], *B = &s.tasks[b];
                        if ((A->res == RES_SSD_READ && B->res == RES_SSD_READ) ||
                            !touches(A, kind, id, groups) || !touches(B, kind, id, groups))
                            continue;
                        ck_assert_msg(r[(size_t)a * n + b] || r[(size_t)b * n + a],
                                      "case %zu: %s (iteration %d) and %s (iteration %d) both "
                                      "touch %s %d, unordered", c, A->id, A->iter, B->id,
                                      B->iter, kind ? "the states of sub-group" : "the weights "
                                      "of block", id);
                        pairs++;
                    }
        ck_assert_int_gt(pairs, 0);
        free(r);
        sched_free(&s);
        teardown();
    }
}
END_TEST

/* Every copy says what it moves; every block task, which weight buffer it reads; every update,
 * its pinned buffer and (fuyou) its CPU gradient buffer; zero-infinity's fp32 gradients, their
 * pinned buffer on the way to SSD. */
START_TEST(tasks_name_their_buffers)
{
    Err e;
    for (int policy = 0; policy < 2; policy++) {
        setup(policy);
        p.weights = p.optim = TIER_SSD;
        plan_set_all_act(&p, ACT_SSD, ACT_CPU);
        Schedule s;
        ck_assert_int_eq(sched_build(&s, &g, &p, 2, &e), 0);
        for (int i = 0; i < s.n_tasks; i++) {
            const Task *t = &s.tasks[i];
            if (t->kind == TASK_COPY)
                ck_assert_msg(t->cargo != CARGO_NONE && t->from != t->to, "%s", t->id);
            if (is_gpu(t))
                ck_assert_msg(t->slot.gpu_weights >= 0 &&
                                  t->slot.gpu_weights < p.weight_buffers, "%s", t->id);
            if (t->res == RES_CPU_ADAM)
                ck_assert_msg(t->group >= 0 && t->slot.pinned >= 0 &&
                                  (t->slot.host_grads >= 0) == (policy == POLICY_FUYOU),
                              "%s", t->id);
            if (t->cargo == CARGO_FP32_GRADS && t->to != TIER_CPU)
                ck_assert_msg(t->slot.host_grads >= 0 && t->slot.host_grads < ZI_OPTIM_BUFFERS,
                              "%s", t->id);
        }
        sched_free(&s);
        teardown();
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched_rings");
    TCase *tc = tcase_create("sched_rings");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, buffer_rings_are_safe);
    tcase_add_test(tc, tasks_name_their_buffers);
    tcase_add_test(tc, ssd_extents_are_ordered);
    tcase_add_test(tc, streamed_groups_are_ordered);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
