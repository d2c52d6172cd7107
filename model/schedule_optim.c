/* schedule_optim: the optimizer's part of the task DAG sched_build emits. The tasks of one
 * sub-group's update that both policies use (states read and written, AdamW on the CPU, the new
 * weights on their way home, the pinned state buffer they share), fuyou's update during backward
 * built from them, and the updates on the GPU (its sub-groups', streamed ones'). Not the walk
 * over the run (schedule.c, which calls the updates) or zero-infinity's step after backward
 * (schedule_zero.c, which orders the shared tasks its own way); the builder is schedule_build.h. */
#include <stdbool.h>
#include <stdint.h>

#include "schedule_optim.h"

/* Sub-group s's blocks [first, first + count) and its parameters (the tail's with the edges). */
int64_t sched_group_params(const Builder *b, int s, int *first, int *count)
{
    const ModelConfig *c = &b->g->cfg;
    plan_subgroup_blocks(b->p, s, first, count);
    bool tail = s == b->n_groups - 1;
    return *count * model_block_params(c) + (tail ? model_embed_params(c) : 0);
}

/* Sub-group s's new 16-bit weights (Adam task a) on their way home from pinned state buffer
 * slot: written to SSD; in CPU memory Adam wrote them in place. Returns the
 * task after which they are there. The tail's are what the next forward loads first: written
 * with the weight loads' priority, ahead of its states. */
int sched_emit_new_weights(Builder *b, int s, int first, int64_t params, int a, int slot)
{
    const Plan *p = b->p;
    double bytes = (double)dtype_bytes(b->g->cfg.dtype) * (double)params;
    int upd = a;
    if (p->weights == TIER_SSD) {
        bool tail = s == b->n_groups - 1;
        upd = sched_copy_task(b, RES_SSD_WRITE, PHASE_OPTIMIZER, first, bytes,
                              tail ? PRIO_WEIGHTS : PRIO_OPTIM, "SSDW.g%d.w", s);
        set_move(b, upd, CARGO_UPDATE, TIER_CPU, TIER_SSD, s);
        dep(b, upd, a);
    }
    if (upd != a && upd >= 0)
        b->s->tasks[upd].slot.pinned = slot;
    return upd;
}

/* The pinned state buffer of the k-th update of the run, when sub-group s needs one: its states
 * (optimizer on SSD) and the new weights on their way to SSD or the GPU; else -1. */
int sched_update_slot(const Builder *b, int s, int k)
{
    const Plan *p = b->p;
    Tier t = plan_optim_tier(p, s);
    bool pinned = t == TIER_SSD || (t != TIER_GPU && p->weights != TIER_CPU);
    return pinned ? k % p->state_buffers : -1;
}

/* Sub-group s's fp32 master, m and v (12 B a parameter) read from SSD into pinned state buffer
 * slot, or written back from it. A read comes after the sub-group's last write: the ring of
 * state buffers orders an update after the one state_buffers before it, which is another
 * sub-group's when there are fewer sub-groups than buffers, and the two SSD lanes are apart. */
int sched_emit_states(Builder *b, int s, int first, int64_t params, bool write, int slot)
{
    double bytes = 12.0 * (double)params;
    int t = write ? sched_copy_task(b, RES_SSD_WRITE, PHASE_OPTIMIZER, first, bytes, PRIO_OPTIM,
                                    "SSDW.g%d.state", s)
                  : sched_copy_task(b, RES_SSD_READ, PHASE_OPTIMIZER, first, bytes, PRIO_OPTIM,
                                    "SSDR.g%d.state", s);
    set_move(b, t, CARGO_STATES, write ? TIER_CPU : TIER_SSD, write ? TIER_SSD : TIER_CPU, s);
    if (t >= 0)
        b->s->tasks[t].slot.pinned = slot;
    if (!write)
        dep(b, t, b->state_written[s]);
    else if (t >= 0)
        b->state_written[s] = t;
    return t;
}

/* Sub-group s's AdamW on the CPU, its states in pinned state buffer slot (or -1). */
int sched_emit_adam(Builder *b, int s, int first, int64_t params, int slot)
{
    int a = sched_add_task(b, RES_CPU_ADAM, TASK_ADAM, PHASE_OPTIMIZER, first, -1, 0, "ADAM.g%d",
                           s);
    if (a >= 0) {
        Task *t = &b->s->tasks[a];
        t->params = params;
        t->group = s;
        t->slot.pinned = slot;
    }
    b->adam[s] = a;
    return a;
}

/* Fuyou's update of sub-group s during backward: read states (SSD), Adam on the CPU, write
 * states and new weights; the state buffer ring bounds the updates in flight. */
void sched_emit_update(Builder *b, int s)
{
    const Plan *p = b->p;
    int first, count;
    int64_t params = sched_group_params(b, s, &first, &count);
    bool tail = s == b->n_groups - 1;
    int gate = b->bwd_first;

    int k = b->n_updates++;
    bool on_ssd = plan_optim_tier(p, s) == TIER_SSD;
    int slot = sched_update_slot(b, s, k);
    const int *freed = slot >= 0 && k >= p->state_buffers
                           ? &b->upd_release[2 * (k - p->state_buffers)] : NULL;
    int rd = on_ssd ? sched_emit_states(b, s, first, params, false, slot) : -1;
    dep(b, rd, gate);
    int a = sched_emit_adam(b, s, first, params, slot);
    if (a >= 0)
        b->s->tasks[a].slot.host_grads = s % p->host_grad_groups;
    if (freed) {
        dep(b, rd >= 0 ? rd : a, freed[0]);
        dep(b, rd >= 0 ? rd : a, freed[1]);
    }
    dep(b, a, rd);
    dep(b, a, gate);
    for (int blk = first; blk < first + count; blk++)
        dep(b, a, b->grad_d2h[blk]);
    if (tail)
        dep(b, a, b->embed_grad_d2h);
    int sw = on_ssd ? sched_emit_states(b, s, first, params, true, slot) : -1;
    dep(b, sw, a);
    int upd = sched_emit_new_weights(b, s, first, params, a, slot);
    b->upd_release[2 * k] = sw >= 0 ? sw : a;
    b->upd_release[2 * k + 1] = upd;
    for (int blk = first; blk < first + count; blk++)
        b->upd_block[b->iter * b->L + blk] = upd;
    if (tail)
        b->upd_edge[b->iter] = upd;
}

/* GPU AdamW task a over params parameters, blocks [first, first + count) and, with edges, the
 * edges: in the GPU's program order, their weights new after it. */
static void gpu_adam(Builder *b, int a, int64_t params, int first, int count, bool edges)
{
    b->s->tasks[a].params = params;
    dep(b, a, b->last_gpu);
    b->last_gpu = a;
    for (int blk = first; blk < first + count; blk++)
        b->upd_block[b->iter * b->L + blk] = a;
    if (edges)
        b->upd_edge[b->iter] = a;
}

/* Sub-group s's AdamW on the GPU, its states, weights and gradients there: in the GPU's program
 * order after its blocks' backward. */
void sched_emit_gpu_group_update(Builder *b, int s)
{
    int first, count;
    int64_t params = sched_group_params(b, s, &first, &count);
    int a = sched_add_task(b, RES_GPU, TASK_ADAM, PHASE_OPTIMIZER, first, -1, 0, "ADAM.g%d", s);
    if (a < 0)
        return;
    b->s->tasks[a].group = s;
    b->adam[s] = a;
    gpu_adam(b, a, params, first, count, s == b->n_groups - 1);
}

/* Sub-group s's copy of bytes between CPU memory and its GPU state slot (cargo and direction:
 * H2D the states in, D2H the states or the new weights home). */
static int stream_copy(Builder *b, int s, int first, Resource res, Cargo cargo, double bytes,
                       int slot, const char *what)
{
    int t = sched_copy_task(b, res, PHASE_OPTIMIZER, first, bytes, PRIO_OPTIM, "%s.g%d.%s",
                            res == RES_H2D ? "H2D" : "D2H", s, what);
    bool in = res == RES_H2D;
    set_move(b, t, cargo, in ? TIER_CPU : TIER_GPU, in ? TIER_GPU : TIER_CPU, s);
    if (t >= 0)
        b->s->tasks[t].slot.gpu_state = slot;
    return t;
}

void sched_emit_stream_update(Builder *b, int s)
{
    int first, count;
    int64_t params = sched_group_params(b, s, &first, &count);
    int k = b->n_streams++, slot = k % PLAN_STREAM_SLOTS;
    double states = 12.0 * (double)params;
    /* in once backward began, after the states' last way home and the slot's last user's */
    int in = stream_copy(b, s, first, RES_H2D, CARGO_STATES, states, slot, "state");
    dep(b, in, b->bwd_first);
    dep(b, in, b->state_written[s]);
    if (k >= PLAN_STREAM_SLOTS) {
        dep(b, in, b->stream_release[2 * (k - PLAN_STREAM_SLOTS)]);
        dep(b, in, b->stream_release[2 * (k - PLAN_STREAM_SLOTS) + 1]);
    }
    int a = sched_add_task(b, RES_GPU, TASK_ADAM, PHASE_OPTIMIZER, first, -1, 0, "ADAM.g%d", s);
    if (a < 0)
        return;
    b->s->tasks[a].group = s;
    b->s->tasks[a].slot.gpu_state = slot;
    b->adam[s] = a;
    gpu_adam(b, a, params, first, count, false);
    dep(b, a, in);
    /* the new weights first: the next forward loads them */
    double wbytes = (double)dtype_bytes(b->g->cfg.dtype) * (double)params;
    int w = stream_copy(b, s, first, RES_D2H, CARGO_UPDATE, wbytes, slot, "w");
    dep(b, w, a);
    int out = stream_copy(b, s, first, RES_D2H, CARGO_STATES, states, slot, "state");
    dep(b, out, a);
    b->state_written[s] = out;
    b->stream_release[2 * k] = w;
    b->stream_release[2 * k + 1] = out;
    for (int blk = first; blk < first + count; blk++)
        b->upd_block[b->iter * b->L + blk] = w;
}
