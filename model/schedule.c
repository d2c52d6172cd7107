/* schedule (sched_*): building the task DAG of the fuyou and zero-infinity policies; see
 * schedule.h. Here: the walk over the run (weights, activations, gradients' first copy) and
 * finishing. The optimizer's tasks (states, Adam, new weights; fuyou's update, the GPU's)
 * are in schedule_optim.c; the zero-infinity policy's gradients and optimizer step in
 * schedule_zero.c; the builder the three files use is in schedule_build.h (.c).
 *
 * The builder walks the run in GPU program order: per iteration and micro-batch, the forward
 * "uses" of blocks 0..L-1, then the backward uses L-1..0, with the embedding before and the head
 * between. Loads for use u+d (d = prefetch depth) are emitted while use u is emitted. References
 * to tasks that may not exist yet (the end of a later use, last iteration's weight update, a
 * forward swap-out) are recorded as deferred edges and resolved once everything is emitted. */
#include "schedule.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule_build.h"
#include "schedule_optim.h"
#include "schedule_zero.h"
#include "units.h"

/* ---- the walk's helpers -------------------------------------------------------------------- */

/* Task ids of micro-batch m start "m<m>." when there are several, nothing otherwise. */
static void set_prefix(Builder *b, int m)
{
    if (b->M > 1)
        snprintf(b->prefix, sizeof b->prefix, "m%d.", m);
    else
        b->prefix[0] = 0;
}

static void defer(Builder *b, int task, RefKind kind, int a, int c)
{
    if (task < 0)
        return;
    if (grow((void **)&b->defs, &b->defs_cap, b->n_defs + 1, sizeof *b->defs)) {
        b->oom = true;
        return;
    }
    b->defs[b->n_defs++] = (Deferred){task, kind, a, c};
}

/* A GPU task in program order: g->ops[op_index]. */
static int gpu_task(Builder *b, TaskKind kind, Phase ph, int op_index)
{
    const Op *op = &b->g->ops[op_index];
    const Graph *g = b->g;
    int layer = op->block;
    double flops = kind == TASK_BWD ? op->bwd_flops : op->fwd_flops;
    char where[16];
    if (layer < 0)
        snprintf(where, sizeof where, "embed");
    else if (layer >= g->cfg.n_layer)
        snprintf(where, sizeof where, "head.%s", op->name);
    else
        snprintf(where, sizeof where, "b%d.%s", layer, op->name);
    const char *tag = kind == TASK_FWD ? "F" : kind == TASK_RECOMPUTE ? "R" : "B";
    int t = sched_add_task(b, RES_GPU, kind, ph, layer, op_index, 0, "%s.%s", tag, where);
    if (t < 0)
        return t;
    b->s->tasks[t].flops = flops;
    dep(b, t, b->last_gpu);
    b->last_gpu = t;
    return t;
}

/* ---- uses and buffer pools -------------------------------------------------------------- */

static int use_index(const Builder *b, int iter, int micro, bool bwd, int block)
{
    int base = (iter * b->M + micro) * 2 * b->L;
    return base + (bwd ? b->L + (b->L - 1 - block) : block);
}

static void use_decode(const Builder *b, int u, int *iter, int *micro, bool *bwd, int *block)
{
    int per = 2 * b->L, k = u / per, r = u % per;
    *iter = k / b->M;
    *micro = k % b->M;
    *bwd = r >= b->L;
    *block = *bwd ? b->L - 1 - (r - b->L) : r;
}

/* Blocks whose forward weights stay in their GPU buffer until their backward. */
static int resident_blocks(const Builder *b)
{
    return b->p->weight_buffers < b->L ? b->p->weight_buffers : b->L;
}

/* Whether use u loads its block's weights, or releases their buffer once it ends: a block
 * resident from its forward to its backward does both once; forward passes alone load and
 * release each forward use's. */
static bool use_loads_weights(const Builder *b, bool bwd, int block)
{
    if (plan_block_on_gpu(b->p, block) || (bwd && b->forward_only))
        return false;
    return !bwd || b->forward_only || block < b->L - resident_blocks(b);
}

static bool use_releases_weights(const Builder *b, bool bwd, int block)
{
    if (plan_block_on_gpu(b->p, block) || (bwd && b->forward_only))
        return false;
    return bwd || b->forward_only || block < b->L - resident_blocks(b);
}

/* Bytes of block activations at each tier (checkpoint: BLOCK_CKPT_OP's; inner: the rest). */
static void act_bytes(const Builder *b, int block, double ckpt[TIER_COUNT],
                      double inner[TIER_COUNT])
{
    for (int t = 0; t < TIER_COUNT; t++)
        ckpt[t] = inner[t] = 0;
    for (int i = 0; i < b->g->arch->n_ops; i++) {
        ActPlace a = plan_act(b->p, block, i);
        if (a == ACT_RECOMPUTE)
            continue;
        double n = (double)graph_block_op(b->g, block, i)->act_bytes;
        if (i == BLOCK_CKPT_OP)
            ckpt[a] += n;
        else
            inner[a] += n;
    }
}

static bool use_fetches_acts(const Builder *b, bool bwd, int block)
{
    if (!bwd || b->forward_only)
        return false;
    double c[TIER_COUNT], in[TIER_COUNT];
    act_bytes(b, block, c, in);
    return c[TIER_CPU] + c[TIER_SSD] + in[TIER_CPU] + in[TIER_SSD] > 0;
}

static int prepare_uses(Builder *b)
{
    int n = b->n_uses;
    int **views[] = {&b->use_last, &b->swap_out[PART_CKPT], &b->swap_out[PART_INNER],
                     &b->w_acq, &b->w_rel, &b->w_acq_of_use, &b->w_h2d, &b->a_acq,
                     &b->fetch_h2d[PART_CKPT], &b->fetch_h2d[PART_INNER], &b->act_d2h,
                     &b->ckpt_d2h, &b->load_h2d, &b->w_buf, &b->a_slot,
                     &b->fetch_k_h2d[PART_CKPT], &b->fetch_k_h2d[PART_INNER]};
    size_t n_views = sizeof views / sizeof views[0];
    b->per_use = malloc(n_views * (size_t)n * sizeof(int));
    int *hold = malloc((size_t)b->L * sizeof(int)), *rel_buf = malloc((size_t)n * sizeof(int));
    if (!b->per_use || !hold || !rel_buf) {
        free(hold);
        free(rel_buf);
        return -ENOMEM;
    }
    for (size_t k = 0; k < n_views; k++)
        *views[k] = b->per_use + k * (size_t)n;
    /* The GPU weight buffer of every use: acquisition j takes the buffer that release
     * j - weight_buffers freed (what the loads' dependencies say); a resident block's backward
     * finds its weights where its forward loaded them. */
    for (int u = 0; u < n; u++) {
        int it, m, blk;
        bool bwd;
        use_decode(b, u, &it, &m, &bwd, &blk);
        b->use_last[u] = b->swap_out[PART_CKPT][u] = b->swap_out[PART_INNER][u] = -1;
        b->w_acq_of_use[u] = -1;
        b->fetch_h2d[PART_CKPT][u] = b->fetch_h2d[PART_INNER][u] = -1;
        b->act_d2h[u] = b->load_h2d[u] = -1;
        b->ckpt_d2h[u] = b->w_buf[u] = b->a_slot[u] = -1;
        b->fetch_k_h2d[PART_CKPT][u] = b->fetch_k_h2d[PART_INNER][u] = -1;
        if (use_loads_weights(b, bwd, blk)) {
            int j = b->n_w_acq;
            b->w_acq_of_use[u] = j;
            b->w_acq[b->n_w_acq++] = u;
            int wb = b->p->weight_buffers;
            assert(j < wb || j - wb < b->n_w_rel);
            hold[blk] = j < wb ? j : rel_buf[j - wb];
        }
        if (!plan_block_on_gpu(b->p, blk))
            b->w_buf[u] = hold[blk];
        if (use_releases_weights(b, bwd, blk)) {
            rel_buf[b->n_w_rel] = hold[blk];
            b->w_rel[b->n_w_rel++] = u;
        }
    }
    free(hold);
    free(rel_buf);
    return 0;
}

/* The last forward block whose out-slot is slot (blocks use slot blk mod act_buffers), or -1
 * when no block does (fewer blocks than slots). */
static int last_fwd_user(const Builder *b, int slot)
{
    int A = b->p->act_buffers, last = b->L - 1;
    return slot > last ? -1 : last - (last - slot) % A;
}

/* Emits the weight load (and for backward, the activation fetch) of use u. */
static void emit_loads(Builder *b, int u)
{
    const Plan *p = b->p;
    int it, m, blk;
    bool bwd;
    use_decode(b, u, &it, &m, &bwd, &blk);
    /* Loads belong to the iteration and micro-batch of the use they serve. */
    int save_iter = b->iter;
    char save_prefix[sizeof b->prefix];
    memcpy(save_prefix, b->prefix, sizeof save_prefix);
    b->iter = it;
    set_prefix(b, m);
    Phase ph = bwd ? PHASE_BACKWARD : PHASE_FORWARD;
    const char *sfx = bwd ? ".bwd" : "";
    int gate = u - p->prefetch_depth - 1; /* loads start once use u - d is under way */

    int j = b->w_acq_of_use[u];
    if (j >= 0) {
        double bytes = (double)model_block_params(&b->g->cfg) *
                       (double)dtype_bytes(b->g->cfg.dtype);
        int ssdr = -1, pinned = p->weights == TIER_SSD ? j % p->pinned_buffers : -1;
        if (p->weights == TIER_SSD) {
            ssdr = sched_copy_task(b, RES_SSD_READ, ph, blk, bytes, PRIO_WEIGHTS, "SSDR.b%d.w%s",
                                   blk, sfx);
            set_move(b, ssdr, CARGO_WEIGHTS, TIER_SSD, TIER_CPU, -1);
            if (ssdr >= 0)
                b->s->tasks[ssdr].slot.pinned = pinned;
            if (j >= p->pinned_buffers)
                dep(b, ssdr, b->w_h2d[j - p->pinned_buffers]);
            if (gate >= 0)
                defer(b, ssdr, REF_USE_END, gate, 0);
        }
        int h2d = sched_copy_task(b, RES_H2D, ph, blk, bytes, PRIO_WEIGHTS, "H2D.b%d.w%s", blk,
                                  sfx);
        set_move(b, h2d, CARGO_WEIGHTS, p->weights, TIER_GPU, -1);
        if (h2d >= 0) {
            b->s->tasks[h2d].slot.pinned = pinned;
            b->s->tasks[h2d].slot.gpu_weights = b->w_buf[u];
        }
        dep(b, h2d, ssdr);
        if (j >= p->weight_buffers)
            defer(b, h2d, REF_USE_END, b->w_rel[j - p->weight_buffers], 0);
        if (gate >= 0)
            defer(b, h2d, REF_USE_END, gate, 0);
        if (it > 0)
            defer(b, ssdr >= 0 ? ssdr : h2d, REF_BLOCK_UPDATE, it - 1, blk);
        b->w_h2d[j] = h2d;
        b->load_h2d[u] = h2d;
    }

    if (use_fetches_acts(b, bwd, blk)) {
        double c[TIER_COUNT], in[TIER_COUNT];
        act_bytes(b, blk, c, in);
        int fu = use_index(b, it, m, false, blk);
        int k = b->n_a_acq;
        b->a_acq[b->n_a_acq++] = u;
        b->a_slot[u] = k;
        for (int part = PART_CKPT; part < N_ACT_PARTS; part++) {
            double *tier = part == PART_CKPT ? c : in;
            const char *what = part_name(part);
            if (tier[TIER_CPU] + tier[TIER_SSD] == 0)
                continue;
            int ssdr = -1;
            if (tier[TIER_SSD] > 0) {
                ssdr = sched_copy_task(b, RES_SSD_READ, ph, blk, tier[TIER_SSD], PRIO_ACT_IN,
                                       "SSDR.b%d.%s", blk, what);
                set_move(b, ssdr, part_cargo(part), TIER_SSD, TIER_CPU, -1);
                if (ssdr >= 0)
                    b->s->tasks[ssdr].slot.pinned = k % 2;
                /* two pinned in-slots: wait until fetch k - 2 has gone up */
                if (k >= 2) {
                    dep(b, ssdr, b->fetch_k_h2d[PART_CKPT][k - 2]);
                    dep(b, ssdr, b->fetch_k_h2d[PART_INNER][k - 2]);
                }
                defer(b, ssdr, REF_SWAP_OUT, fu, part);
                if (gate >= 0)
                    defer(b, ssdr, REF_USE_END, gate, 0);
            }
            int h2d = sched_copy_task(b, RES_H2D, ph, blk, tier[TIER_CPU] + tier[TIER_SSD],
                                      PRIO_ACT_IN, "H2D.b%d.%s", blk, what);
            set_move(b, h2d, part_cargo(part), TIER_CPU, TIER_GPU, -1);
            if (h2d >= 0) {
                b->s->tasks[h2d].slot.gpu_acts = k % p->act_buffers;
                b->s->tasks[h2d].slot.pinned = tier[TIER_SSD] > 0 ? k % 2 : -1;
            }
            b->fetch_k_h2d[part][k] = h2d;
            dep(b, h2d, ssdr);
            defer(b, h2d, REF_SWAP_OUT, fu, part);
            /* one ring for both ways: the slot's last forward user in this micro-batch has
             * computed into it (after the slot's earlier users drained) and drained it */
            int user = last_fwd_user(b, k % p->act_buffers);
            if (user >= 0) {
                int fu_last = use_index(b, it, m, false, user);
                defer(b, h2d, REF_USE_END, fu_last, 0);
                defer(b, h2d, REF_SWAP_OUT, fu_last, PART_CKPT);
                defer(b, h2d, REF_SWAP_OUT, fu_last, PART_INNER);
            }
            if (k >= p->act_buffers)
                defer(b, h2d, REF_USE_END, b->a_acq[k - p->act_buffers], 0);
            if (gate >= 0)
                defer(b, h2d, REF_USE_END, gate, 0);
            b->fetch_h2d[part][u] = h2d;
        }
    }
    b->iter = save_iter;
    memcpy(b->prefix, save_prefix, sizeof save_prefix);
}

/* Emits loads up to use u + d. */
static void emit_loads_ahead(Builder *b, int u)
{
    int last = u + b->p->prefetch_depth;
    if (last >= b->n_uses)
        last = b->n_uses - 1;
    while (b->next_load_use <= last)
        emit_loads(b, b->next_load_use++);
}

/* ---- forward and backward of one block -------------------------------------------------- */

static double block_weight_bytes(const Builder *b)
{
    return (double)model_block_params(&b->g->cfg) * (double)dtype_bytes(b->g->cfg.dtype);
}

/* The forward ops of block blk (use u). */
static void emit_forward_ops(Builder *b, int u, int blk)
{
    const Plan *p = b->p;
    int A = p->act_buffers;
    for (int i = 0; i < b->g->arch->n_ops; i++) {
        int t = gpu_task(b, TASK_FWD, PHASE_FORWARD, graph_block_op_index(b->g, blk, i));
        if (t >= 0) {
            b->s->tasks[t].slot.gpu_weights = b->w_buf[u];
            b->s->tasks[t].slot.gpu_acts = sched_fwd_act_slot(p, blk);
        }
        if (i > 0)
            continue; /* what follows gates the block's first op */
        dep(b, t, b->load_h2d[u]);
        if (plan_block_on_gpu(p, blk) && b->iter > 0)
            defer(b, t, REF_BLOCK_UPDATE, b->iter - 1, blk);
        /* The out-slots of activations on their way to the CPU (act_buffers blocks): this
         * block's slot must have been drained by block blk - A's copies, and the slot its
         * output (the next block's checkpoint) goes to by block blk + 1 - A's. */
        if (blk >= A)
            dep(b, t, b->act_d2h[u - A]);
        if (blk + 1 >= A)
            dep(b, t, b->ckpt_d2h[u + 1 - A]);
    }
}

static void emit_forward_block(Builder *b, int u, int blk)
{
    const Plan *p = b->p;
    emit_loads_ahead(b, u);
    double c[TIER_COUNT], in[TIER_COUNT];
    act_bytes(b, blk, c, in);

    /* The checkpoint (this block's input) is ready once the previous GPU task ends. */
    int slot = sched_fwd_act_slot(p, blk);
    for (int part = PART_CKPT; part < N_ACT_PARTS; part++) {
        /* The checkpoint (this block's input) is ready once the previous GPU task ends, the
         * inner activations once this block's forward has: emitted before and after it. */
        double *tier = part == PART_CKPT ? c : in;
        if (part == PART_INNER)
            emit_forward_ops(b, u, blk);
        if (tier[TIER_CPU] + tier[TIER_SSD] == 0 || b->forward_only)
            continue; /* nothing leaves the GPU (forward passes alone: nothing reads it back) */
        int d2h = sched_copy_task(b, RES_D2H, PHASE_FORWARD, blk, tier[TIER_CPU] + tier[TIER_SSD],
                                  PRIO_ACT_OUT, "D2H.b%d.%s", blk, part_name(part));
        set_move(b, d2h, part_cargo(part), TIER_GPU, TIER_CPU, -1);
        dep(b, d2h, b->last_gpu);
        (part == PART_CKPT ? b->ckpt_d2h : b->act_d2h)[u] = b->swap_out[part][u] = d2h;
        if (d2h >= 0)
            b->s->tasks[d2h].slot.gpu_acts = slot;
        if (tier[TIER_SSD] > 0) {
            /* Two pinned CPU buffers stage SSD-bound activations. */
            int ring = b->n_act_ssdw++ % 2;
            if (b->n_act_ssdw > 2)
                dep(b, d2h, b->act_ssdw[ring]);
            int w = sched_copy_task(b, RES_SSD_WRITE, PHASE_FORWARD, blk, tier[TIER_SSD],
                                    PRIO_ACT_OUT, "SSDW.b%d.%s", blk, part_name(part));
            set_move(b, w, part_cargo(part), TIER_CPU, TIER_SSD, -1);
            dep(b, w, d2h);
            if (d2h >= 0)
                b->s->tasks[d2h].slot.pinned = ring;
            if (w >= 0)
                b->s->tasks[w].slot.pinned = ring;
            b->act_ssdw[ring] = w;
            b->swap_out[part][u] = w;
        }
    }
    b->use_last[u] = b->last_gpu;
}

static void emit_backward_block(Builder *b, int u, int blk, bool last_micro)
{
    const Plan *p = b->p;
    emit_loads_ahead(b, u);
    bool rerun[ARCH_MAX_OPS];
    sched_recompute_set(p, blk, rerun);
    int n_ops = b->g->arch->n_ops, first = -1;
    int s = plan_subgroup_of_block(p, blk), gfirst, gcount;
    plan_subgroup_blocks(p, s, &gfirst, &gcount);
    bool tail = s == b->n_groups - 1;
    /* a sub-group updated on the GPU keeps its gradients there, each block's its own */
    bool grads_stay = plan_grads_on_gpu(p, blk);
    TaskSlots slots = {.gpu_weights = b->w_buf[u], .gpu_grads = b->n_bwd_d2h % p->grad_buffers,
                       .gpu_acts = b->a_slot[u] >= 0 ? b->a_slot[u] % p->act_buffers : -1,
                       .pinned = -1, .host_grads = -1, .gpu_state = -1};
    if (grads_stay)
        slots.gpu_grads = -1;
    for (int i = 0; i < n_ops; i++)
        if (rerun[i]) {
            int t = gpu_task(b, TASK_RECOMPUTE, PHASE_BACKWARD,
                             graph_block_op_index(b->g, blk, i));
            if (t >= 0)
                b->s->tasks[t].slot = slots;
            if (first < 0)
                first = t;
        }
    for (int i = n_ops - 1; i >= 0; i--) {
        const Op *op = graph_block_op(b->g, blk, i);
        if (op->bwd_flops == 0 && op->bwd_io_bytes == 0)
            continue; /* a residual passes its gradient through */
        int t = gpu_task(b, TASK_BWD, PHASE_BACKWARD, graph_block_op_index(b->g, blk, i));
        if (t >= 0)
            b->s->tasks[t].slot = slots;
        if (first < 0)
            first = t;
    }
    dep(b, first, b->load_h2d[u]);
    dep(b, first, b->fetch_h2d[PART_CKPT][u]);
    dep(b, first, b->fetch_h2d[PART_INNER][u]);
    if (!grads_stay && b->n_bwd_d2h >= p->grad_buffers)
        dep(b, first, b->bwd_d2h_seq[b->n_bwd_d2h - p->grad_buffers]);
    b->use_last[u] = b->last_gpu;

    if (grads_stay) { /* gradients stay where the optimizer runs */
        if (last_micro && blk == gfirst && !tail) {
            if (plan_group_streamed(p, s))
                sched_emit_stream_update(b, s);
            else
                sched_emit_gpu_group_update(b, s);
        }
        return;
    }
    int d2h = sched_copy_task(b, RES_D2H, PHASE_BACKWARD, blk, block_weight_bytes(b), PRIO_GRAD,
                              "D2H.b%d.grad", blk);
    dep(b, d2h, b->last_gpu);
    set_move(b, d2h, CARGO_GRADS, TIER_GPU, TIER_CPU, s);
    bool fuyou = p->policy == POLICY_FUYOU;
    if (d2h >= 0) {
        b->s->tasks[d2h].slot.gpu_grads = slots.gpu_grads;
        /* zero-infinity's CPU buffer holds the whole model's gradients, and DeepSpeed adds
         * micro-batches on the GPU (sched_emit_zero_grad) */
        b->s->tasks[d2h].slot.host_grads = fuyou ? s % p->host_grad_groups : -1;
        if (p->n_micro > 1 && fuyou)
            b->s->tasks[d2h].params = model_block_params(&b->g->cfg);
    }
    /* Fuyou bounds the gradients waiting on the CPU to host_grad_groups sub-groups: every block
     * of sub-group s writes its buffer, which the update of s - host_grad_groups reads */
    if (p->policy == POLICY_FUYOU && p->n_micro == 1 && s >= p->host_grad_groups)
        dep(b, d2h, b->adam[s - p->host_grad_groups]);
    /* micro-batches add their gradients on the CPU, one after the other */
    if (b->micro > 0)
        dep(b, d2h, b->grad_d2h[blk]);
    b->grad_d2h[blk] = d2h;
    /* the GPU gradient buffer is free once the gradient's last copy has read it */
    b->bwd_d2h_seq[b->n_bwd_d2h++] =
        fuyou ? d2h : sched_emit_zero_grad(b, d2h, blk, s, model_block_params(&b->g->cfg),
                                           slots.gpu_grads);
    if (last_micro && blk == gfirst && !tail && fuyou)
        sched_emit_update(b, s);
    else if (last_micro && blk == gfirst && !tail)
        sched_emit_zero_grad_write(b, s);
}

/* ---- one micro-batch ------------------------------------------------------------------------ */

static void emit_micro_batch(Builder *b, int m)
{
    const Plan *p = b->p;
    const Graph *g = b->g;
    bool last_micro = m == b->M - 1;
    b->micro = m;
    set_prefix(b, m);
    if (b->iter == 0 && m == 0)
        emit_loads_ahead(b, 0);

    int tail = b->n_groups - 1;
    bool tail_on_gpu = plan_optim_tier(p, tail) == TIER_GPU;
    /* Embedding and head parameters stay on the GPU for the whole iteration. */
    int edge_h2d = -1;
    bool edges_stay = plan_edges_on_gpu(p);
    if (m == 0 && !edges_stay) {
        double bytes = (double)model_embed_params(&g->cfg) * (double)dtype_bytes(g->cfg.dtype);
        int rd = -1;
        if (p->weights == TIER_SSD)
            rd = sched_copy_task(b, RES_SSD_READ, PHASE_FORWARD, -1, bytes, PRIO_WEIGHTS,
                                 "SSDR.embed.w");
        edge_h2d = sched_copy_task(b, RES_H2D, PHASE_FORWARD, -1, bytes, PRIO_WEIGHTS,
                                   "H2D.embed.w");
        /* the edges' weights have one GPU buffer and, from SSD, one pinned buffer of their own */
        set_move(b, rd, CARGO_WEIGHTS, TIER_SSD, TIER_CPU, -1);
        set_move(b, edge_h2d, CARGO_WEIGHTS, p->weights, TIER_GPU, -1);
        dep(b, edge_h2d, rd);
        if (b->iter > 0)
            defer(b, rd >= 0 ? rd : edge_h2d, REF_EDGE_UPDATE, b->iter - 1, 0);
    }
    int t = gpu_task(b, TASK_FWD, PHASE_FORWARD, graph_edge_op_index(g, EDGE_EMBED));
    dep(b, t, edge_h2d);
    if (edges_stay && b->iter > 0 && m == 0)
        defer(b, t, REF_EDGE_UPDATE, b->iter - 1, 0);

    for (int blk = 0; blk < b->L; blk++)
        emit_forward_block(b, use_index(b, b->iter, m, false, blk), blk);
    static const EdgeOp head_ops[] = {EDGE_NORM, EDGE_HEAD, EDGE_LOSS};
    enum { N_HEAD_OPS = sizeof head_ops / sizeof head_ops[0] };
    for (int i = 0; i < N_HEAD_OPS; i++) {
        int head = gpu_task(b, TASK_FWD, PHASE_FORWARD, graph_edge_op_index(g, head_ops[i]));
        /* the fused head starts the edges' gradients: the last micro-batch's must be on their
         * way to the CPU first */
        if (head_ops[i] == EDGE_HEAD && m > 0 && !tail_on_gpu)
            dep(b, head, b->embed_grad_done);
    }
    if (b->forward_only)
        return;
    for (int i = N_HEAD_OPS - 1; i >= 0; i--) {
        const Op *op = graph_edge_op(g, head_ops[i]);
        if (op->bwd_flops == 0 && op->bwd_io_bytes == 0)
            continue; /* the fused loss wrote its gradient in forward */
        int bt = gpu_task(b, TASK_BWD, PHASE_BACKWARD, graph_edge_op_index(g, head_ops[i]));
        if (last_micro && b->bwd_first < 0)
            b->bwd_first = bt;
    }
    for (int blk = b->L - 1; blk >= 0; blk--)
        emit_backward_block(b, use_index(b, b->iter, m, true, blk), blk, last_micro);
    gpu_task(b, TASK_BWD, PHASE_BACKWARD, graph_edge_op_index(g, EDGE_EMBED));
    if (last_micro)
        b->bwd_last = b->last_gpu;
    if (tail_on_gpu) { /* the GPU optimizer needs no gradient copies */
        if (last_micro)
            sched_emit_gpu_group_update(b, tail);
        return;
    }
    double edge_bytes = (double)model_embed_params(&g->cfg) * (double)dtype_bytes(g->cfg.dtype);
    int prev_edge = m > 0 ? b->embed_grad_d2h : -1;
    b->embed_grad_d2h = sched_copy_task(b, RES_D2H, PHASE_BACKWARD, -1, edge_bytes, PRIO_GRAD,
                                        "D2H.embed.grad");
    dep(b, b->embed_grad_d2h, b->last_gpu);
    dep(b, b->embed_grad_d2h, prev_edge);
    set_move(b, b->embed_grad_d2h, CARGO_GRADS, TIER_GPU, TIER_CPU, tail);
    bool fuyou = p->policy == POLICY_FUYOU;
    if (b->embed_grad_d2h >= 0) {
        b->s->tasks[b->embed_grad_d2h].slot.host_grads = fuyou ? tail % p->host_grad_groups : -1;
        if (p->n_micro > 1 && fuyou)
            b->s->tasks[b->embed_grad_d2h].params = model_embed_params(&b->g->cfg);
    }
    /* like the tail's blocks, its buffer must have been read by the update before */
    if (fuyou && p->n_micro == 1 && tail >= p->host_grad_groups)
        dep(b, b->embed_grad_d2h, b->adam[tail - p->host_grad_groups]);
    b->embed_grad_done = fuyou ? b->embed_grad_d2h
                               : sched_emit_zero_grad(b, b->embed_grad_d2h, -1, tail,
                                                      model_embed_params(&b->g->cfg), -1);
    if (fuyou && last_micro)
        sched_emit_update(b, b->n_groups - 1);
    else if (last_micro)
        sched_emit_zero_grad_write(b, tail);
}

/* ---- finishing ------------------------------------------------------------------------------ */

static int resolve(const Builder *b, const Deferred *d)
{
    switch (d->kind) {
    case REF_USE_END:
        return d->a < b->n_uses ? b->use_last[d->a] : -1;
    case REF_BLOCK_UPDATE:
        return b->upd_block[d->a * b->L + d->b];
    case REF_EDGE_UPDATE:
        return b->upd_edge[d->a];
    case REF_SWAP_OUT:
        return b->swap_out[d->b][d->a];
    }
    return -1;
}

static int cmp_edge(const void *x, const void *y)
{
    const Edge *a = x, *b = y;
    return a->to != b->to ? (a->to > b->to) - (a->to < b->to)
                          : (a->from > b->from) - (a->from < b->from);
}

/* Chunks of PCIe copy t under p: 1, or as many as make chunks of copy_chunk_bytes, at most
 * SCHED_COPY_CHUNKS (and 1 where a chunk's id would not fit). */
static int chunks_of(const Plan *p, const Task *t)
{
    if (t->kind != TASK_COPY || (t->res != RES_H2D && t->res != RES_D2H) ||
        p->copy_chunk_bytes <= 0 || t->bytes <= (double)p->copy_chunk_bytes)
        return 1;
    double k = ceil(t->bytes / (double)p->copy_chunk_bytes);
    return strlen(t->id) + 4 <= SCHED_ID_MAX ? (int)fmin(k, SCHED_COPY_CHUNKS) : 1;
}

/* Cuts every large PCIe copy into a chain of chunks, in place in the task order: chunk k waits
 * for chunk k - 1, the first for what the copy waited for, and what waited for the copy waits
 * for its last chunk. Between two chunks the link takes the most urgent ready copy. */
static int chunk_copies(Builder *b)
{
    Schedule *s = b->s;
    int extra = 0;
    for (int t = 0; t < s->n_tasks; t++)
        extra += chunks_of(b->p, &s->tasks[t]) - 1;
    if (!extra)
        return 0;
    int n = s->n_tasks + extra;
    Task *tasks = malloc((size_t)n * sizeof *tasks);
    int *first = malloc(((size_t)s->n_tasks + 1) * sizeof *first);
    if (!tasks || !first) {
        free(tasks);
        free(first);
        return -ENOMEM;
    }
    int at = 0;
    for (int t = 0; t < s->n_tasks; t++) {
        const Task *x = &s->tasks[t];
        int k = chunks_of(b->p, x);
        first[t] = at;
        for (int c = 0; c < k; c++) {
            Task *y = &tasks[at++];
            *y = *x;
            if (k == 1)
                break;
            /* "<id>.c<digit>" (chunks_of checked the room) */
            static_assert(SCHED_COPY_CHUNKS <= 10, "one digit per chunk");
            size_t len = strlen(x->id);
            memcpy(y->id + len, (char[]){'.', 'c', (char)('0' + c), 0}, 4);
            y->chunk = c;
            y->n_chunks = k;
            y->bytes = x->bytes / k;
            /* the host's sum after a gradient copy, split as its bytes are */
            y->params = x->params / k + (c == k - 1 ? x->params % k : 0);
        }
    }
    first[s->n_tasks] = at;
    for (int i = 0; i < b->n_edges; i++) {
        Edge *e = &b->edges[i];
        e->from = first[e->from + 1] - 1; /* the copy's last chunk */
        e->to = first[e->to];
    }
    int old = s->n_tasks;
    free(s->tasks);
    s->tasks = tasks;
    s->n_tasks = b->task_cap = n;
    for (int t = 0; t < old; t++)
        for (int c = first[t] + 1; c < first[t + 1]; c++)
            dep(b, c, c - 1);
    free(first);
    return b->oom ? -ENOMEM : 0;
}

/* Resolves deferred references, cuts large copies into chunks and lays the dependencies out per
 * task, without duplicates. */
static int finish(Builder *b)
{
    for (int i = 0; i < b->n_defs; i++)
        dep(b, b->defs[i].task, resolve(b, &b->defs[i]));
    if (b->oom || chunk_copies(b))
        return -ENOMEM;
    Schedule *s = b->s;
    qsort(b->edges, (size_t)b->n_edges, sizeof *b->edges, cmp_edge);
    s->deps = malloc(((size_t)b->n_edges + 1) * sizeof *s->deps);
    if (!s->deps)
        return -ENOMEM;
    for (int t = 0; t < s->n_tasks; t++)
        s->tasks[t].dep_first = s->tasks[t].n_deps = 0;
    int prev_to = -1, prev_from = -1;
    for (int i = 0; i < b->n_edges; i++) {
        Edge e = b->edges[i];
        assert(e.from != e.to);
        if (e.to == prev_to && e.from == prev_from)
            continue;
        Task *t = &s->tasks[e.to];
        if (e.to != prev_to)
            t->dep_first = s->n_deps;
        t->n_deps++;
        s->deps[s->n_deps++] = e.from;
        prev_to = e.to;
        prev_from = e.from;
    }
    return 0;
}

static void builder_free(Builder *b)
{
    free(b->edges);
    free(b->defs);
    free(b->per_use);
    free(b->upd_release);
    free(b->stream_release);
    free(b->upd_block);
    free(b->upd_edge);
    free(b->grad_d2h);
    free(b->grad32);
    free(b->grad_ssdw);
    free(b->bwd_d2h_seq);
    free(b->adam);
    free(b->state_written);
}

static int fill_minus_one(int **p, size_t n)
{
    *p = malloc((n ? n : 1) * sizeof **p);
    if (!*p)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        (*p)[i] = -1;
    return 0;
}

/* sched_build, or with forward_only sched_build_forward. */
static int build(Schedule *s, const Graph *g, const Plan *p, int iters, bool forward_only,
                 Err *e)
{
    memset(s, 0, sizeof *s);
    int rc = plan_validate(p, e);
    if (rc)
        return rc;
    if (p->n_layer != g->cfg.n_layer || p->seqs_per_micro != g->batch || p->seq != g->seq)
        return err_set(e, -EINVAL, "plan (%d blocks, micro-batch %d, seq %d) does not match the "
                       "graph (%d, %d, %d)", p->n_layer, p->seqs_per_micro, p->seq,
                       g->cfg.n_layer, g->batch, g->seq);
    if (iters < 1)
        return err_set(e, -EINVAL, "iterations must be at least 1 (got %d)", iters);
    double need = sched_estimate_bytes(g->arch, p->n_layer, p->n_micro, iters);
    if (need > SCHED_MAX_BYTES) {
        char b1[24], b2[24];
        return err_set(e, -EINVAL, "%d iteration%s of %d micro-batch%s of %d blocks would need "
                       "about %s to schedule and simulate; the limit is %s: fewer iterations, "
                       "micro-batches or layers", iters, iters == 1 ? "" : "s", p->n_micro,
                       p->n_micro == 1 ? "" : "es", p->n_layer,
                       units_bytes(b1, sizeof b1, need), units_bytes(b2, sizeof b2,
                                                                     SCHED_MAX_BYTES));
    }
    Builder b = {.g = g, .p = p, .s = s, .L = g->cfg.n_layer,
                 .M = forward_only ? 1 : p->n_micro, .forward_only = forward_only,
                 .last_gpu = -1, .bwd_first = -1, .bwd_last = -1, .embed_grad_d2h = -1,
                 .embed_grad_done = -1, .embed_grad32 = -1};
    s->iters = iters;
    s->n_layer = b.L;
    b.n_uses = iters * b.M * 2 * b.L;
    b.n_groups = plan_subgroup_count(p);
    size_t L = (size_t)b.L, G = (size_t)b.n_groups;
    rc = prepare_uses(&b);
    if (!rc)
        rc = fill_minus_one(&b.upd_block, (size_t)iters * L) ||
             fill_minus_one(&b.upd_edge, (size_t)iters) || fill_minus_one(&b.grad_d2h, L) ||
             fill_minus_one(&b.grad32, L) || fill_minus_one(&b.grad_ssdw, G) ||
             fill_minus_one(&b.bwd_d2h_seq, (size_t)b.n_uses) || fill_minus_one(&b.adam, G) ||
             fill_minus_one(&b.state_written, G) ||
             fill_minus_one(&b.upd_release, 2 * (size_t)iters * G) ||
             fill_minus_one(&b.stream_release, 2 * (size_t)iters * G)
                 ? -ENOMEM : 0;
    for (int it = 0; !rc && it < iters; it++) {
        b.iter = it;
        b.bwd_first = b.bwd_last = -1;
        for (size_t i = 0; i < G; i++)
            b.adam[i] = b.grad_ssdw[i] = -1;
        for (int m = 0; m < b.M; m++)
            emit_micro_batch(&b, m);
        snprintf(b.prefix, sizeof b.prefix, "%s", "");
        if (p->policy == POLICY_ZERO_INFINITY && !forward_only)
            sched_emit_zero_step(&b);
    }
    if (!rc)
        rc = finish(&b);
    builder_free(&b);
    if (rc) {
        sched_free(s);
        return err_set(e, rc, "out of memory building the schedule");
    }
    return 0;
}

int sched_build(Schedule *s, const Graph *g, const Plan *p, int iters, Err *e)
{
    return build(s, g, p, iters, false, e);
}

int sched_build_forward(Schedule *s, const Graph *g, const Plan *p, int passes, Err *e)
{
    return build(s, g, p, passes, true, e);
}

void sched_free(Schedule *s)
{
    free(s->tasks);
    free(s->deps);
    s->tasks = NULL;
    s->deps = NULL;
    s->n_tasks = s->n_deps = 0;
}

/* ---- recomputation and the size bound ---------------------------------------------------- */

int sched_fwd_act_slot(const Plan *p, int block)
{
    return block % p->act_buffers;
}

void sched_recompute_set(const Plan *p, int block, bool rerun[])
{
    bool kept[ARCH_MAX_OPS];
    for (int i = 0; i < p->arch->n_ops; i++)
        kept[i] = plan_act(p, block, i) != ACT_RECOMPUTE;
    arch_recompute_set(p->arch, kept, rerun);
}

/* The most tasks one block's use per micro-batch emits (forward, recompute and backward: at
 * most three per op; weight loads and activation swaps both ways and the gradient copy: 10),
 * those of the embedding and head per micro-batch, and of one sub-group's update per iteration
 * (state reads and writes, Adam, the new weights' copies), each PCIe copy among them (at most 8,
 * 8 and 2) counted as its most chunks; tests/test_sched.c holds every plan below it. */
enum { PCIE_EXTRA = SCHED_COPY_CHUNKS - 1 };
enum { TASKS_PER_BLOCK_COPIES = 10 + 8 * PCIE_EXTRA, TASKS_PER_EDGE = 24 + 8 * PCIE_EXTRA,
       TASKS_PER_GROUP = 8 + 2 * PCIE_EXTRA, TASKS_PER_ITER = 8 };

double sched_estimate_tasks(const BlockArch *a, int n_layer, int n_micro, int iters)
{
    /* doubles: the product of unchecked counts must not overflow before it is compared */
    double L = n_layer, groups = n_layer + 1.0; /* sub-groups of one block, and the tail */
    double per_block = 3.0 * a->n_ops + TASKS_PER_BLOCK_COPIES;
    double per_micro = per_block * L + TASKS_PER_EDGE;
    return (double)iters * ((double)n_micro * per_micro + TASKS_PER_GROUP * groups +
                            TASKS_PER_ITER);
}

double sched_estimate_bytes(const BlockArch *a, int n_layer, int n_micro, int iters)
{
    return sched_estimate_tasks(a, n_layer, n_micro, iters) * SCHED_BYTES_PER_TASK;
}
