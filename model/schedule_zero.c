/* schedule_zero (sched_emit_zero_*): the zero-infinity policy's part of the task DAG, as
 * DeepSpeed runs it by default (ARCHITECTURE.md, "ZeRO-Infinity as DeepSpeed runs it"): each
 * block's gradients from their 16-bit copy to the CPU on (back to the GPU, out in fp32, to SSD
 * per sub-group) and the optimizer step after backward, one sub-group at a time. Not the walk
 * over the run or the weight and activation movement both policies share (schedule.c), nor the
 * optimizer tasks themselves (states, Adam, new weights: schedule_optim.c); all with the
 * builder of schedule_build.h; sched_build calls in here. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "schedule_optim.h"
#include "schedule_zero.h"

/* The rest of a gradient's way after its 16-bit copy d2h to the CPU buffer (block layer, or -1
 * the edges, of sub-group s; gpu_slot its GPU buffer): back to the GPU, as DeepSpeed's
 * partition_grads reads its CPU buffer back before converting (with micro-batches it reads the
 * sum back and copies it out again: the same bytes); then, in the last micro-batch, out in fp32
 * to a pinned buffer of the sub-group's (states on SSD) or to its fp32 gradient in CPU memory.
 * Returns the last copy: the GPU buffer is free after it. */
int sched_emit_zero_grad(Builder *b, int d2h, int layer, int s, int64_t params, int gpu_slot)
{
    char where[16];
    if (layer < 0)
        snprintf(where, sizeof where, "embed");
    else
        snprintf(where, sizeof where, "b%d", layer);
    double n = (double)params;
    int h2d = sched_copy_task(b, RES_H2D, PHASE_BACKWARD, layer,
                              n * (double)dtype_bytes(b->g->cfg.dtype), PRIO_GRAD, "H2D.%s.grad",
                              where);
    set_move(b, h2d, CARGO_GRADS, TIER_CPU, TIER_GPU, s);
    if (h2d >= 0)
        b->s->tasks[h2d].slot.gpu_grads = gpu_slot;
    dep(b, h2d, d2h);
    if (b->micro < b->M - 1)
        return h2d;
    bool ssd = plan_optim_tier(b->p, s) == TIER_SSD;
    int out = sched_copy_task(b, RES_D2H, PHASE_BACKWARD, layer, 4 * n, PRIO_GRAD, "D2H.%s.grad32",
                              where);
    set_move(b, out, CARGO_FP32_GRADS, TIER_GPU, TIER_CPU, s);
    if (out >= 0) {
        b->s->tasks[out].slot.gpu_grads = gpu_slot;
        b->s->tasks[out].slot.host_grads = ssd ? s % ZI_OPTIM_BUFFERS : -1;
    }
    dep(b, out, h2d);
    /* DeepSpeed's gradient swapper fills its ZI_OPTIM_BUFFERS buffers in turn and, out of free
     * ones, waits for all its writes: sub-groups 4k .. 4k + 3 wait for those of 4k - 4 .. 4k - 1 */
    int batch = s / ZI_OPTIM_BUFFERS * ZI_OPTIM_BUFFERS;
    for (int q = batch - ZI_OPTIM_BUFFERS; ssd && q < batch; q++)
        if (q >= 0)
            dep(b, out, b->grad_ssdw[q]);
    if (layer < 0)
        b->embed_grad32 = out;
    else
        b->grad32[layer] = out;
    return out;
}

/* Sub-group s's fp32 gradients, complete in their pinned buffer, written to SSD (states on SSD;
 * DeepSpeed writes a buffer once the next gradient does not fit it). */
void sched_emit_zero_grad_write(Builder *b, int s)
{
    if (plan_optim_tier(b->p, s) != TIER_SSD)
        return;
    int first, count;
    int64_t params = sched_group_params(b, s, &first, &count);
    int w = sched_copy_task(b, RES_SSD_WRITE, PHASE_BACKWARD, first, 4.0 * (double)params,
                            PRIO_GRAD, "SSDW.g%d.grad", s);
    set_move(b, w, CARGO_FP32_GRADS, TIER_CPU, TIER_SSD, s);
    if (w >= 0)
        b->s->tasks[w].slot.host_grads = s % ZI_OPTIM_BUFFERS;
    for (int blk = first; blk < first + count; blk++)
        dep(b, w, b->grad32[blk]);
    if (s == b->n_groups - 1)
        dep(b, w, b->embed_grad32);
    b->grad_ssdw[s] = w;
}

/* Sub-group s's update in zero-infinity's step, after task prev, as DeepSpeed's optimizer
 * swapper runs it without pipelining: read the states, then the fp32 gradients (each waited
 * for); Adam; write the new weights, then the states (each waited for). Sets *head to its first
 * task and returns its last. */
static int emit_zero_update(Builder *b, int s, int prev, int *head)
{
    const Plan *p = b->p;
    int first, count;
    int64_t params = sched_group_params(b, s, &first, &count);
    bool on_ssd = plan_optim_tier(p, s) == TIER_SSD;
    int slot = sched_update_slot(b, s, b->n_updates++);
    int rd = -1, gr = -1;
    if (on_ssd) {
        rd = sched_emit_states(b, s, first, params, false, slot);
        dep(b, rd, prev);
        gr = sched_copy_task(b, RES_SSD_READ, PHASE_OPTIMIZER, first, 4.0 * (double)params,
                             PRIO_OPTIM, "SSDR.g%d.grad", s);
        set_move(b, gr, CARGO_FP32_GRADS, TIER_SSD, TIER_CPU, s);
        if (gr >= 0)
            b->s->tasks[gr].slot.pinned = slot;
        dep(b, gr, rd);
    }
    int a = sched_emit_adam(b, s, first, params, slot);
    dep(b, a, prev);
    dep(b, a, gr);
    /* states in CPU memory: the fp32 gradients are there too, from the last micro-batch */
    for (int blk = first; !on_ssd && blk < first + count; blk++)
        dep(b, a, b->grad32[blk]);
    if (!on_ssd && s == b->n_groups - 1)
        dep(b, a, b->embed_grad32);
    int upd = sched_emit_new_weights(b, s, first, params, a, slot);
    int sw = on_ssd ? sched_emit_states(b, s, first, params, true, slot) : -1;
    dep(b, sw, upd);
    *head = rd >= 0 ? rd : a;
    return sw >= 0 ? sw : upd;
}

/* zero-infinity's step, after backward: DeepSpeed first waits for the gradient writes, then
 * updates the sub-groups in its order (from the embedding's, our tail, on) one after the other.
 * step() returns after the last, so the next iteration's loads wait for it. */
void sched_emit_zero_step(Builder *b)
{
    int prev = b->bwd_last;
    for (int s = b->n_groups - 1; s >= 0; s--) {
        int head;
        int last = emit_zero_update(b, s, prev, &head);
        for (int q = 0; s == b->n_groups - 1 && q < b->n_groups; q++)
            dep(b, head, b->grad_ssdw[q]);
        prev = last;
    }
    for (int blk = 0; blk < b->L; blk++)
        b->upd_block[b->iter * b->L + blk] = prev;
    b->upd_edge[b->iter] = prev;
}
