/* pipe_exec: the dispatcher and the lanes' jobs; see pipe_exec.h. */
#include "pipe_exec.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adam.h"
#include "clock.h"
#include "grad_sum.h"
#include "trainer.h"

/* ---- lane jobs -------------------------------------------------------------------------- */

/* A sub-group's gradients summed to a value that is not finite: the step (run iteration
 * iter's) stops with this error, whichever device updates it. */
static int not_finite(const Pipe *pp, int iter, int group, Err *e)
{
    return err_set(e, -EDOM, "step %lld: the gradients of sub-group %d are not finite; lower "
                   "--lr or check the data", (long long)(pp->step0 + 1 + iter), group);
}

/* The compute lane's (a queue lane, lane.h): a compute task issued behind the ones before it,
 * or a GPU sub-group's AdamW run to its end (alone on the lane). */
static int run_compute(void *ctx, void *job, Err *e)
{
    Pipe *pp = ctx;
    if (job != &pp->gpu_adam) {
        const ComputeCall *c = job;
        return pp->mem.ops->compute(pp->mem.dev, c, (int)(c - pp->calls), e);
    }
    int rc = pp->mem.ops->adam(pp->mem.dev, &pp->gpu_adam, &pp->gpu_adam_span, e);
    if (!rc && !isfinite(pp->gpu_adam.sq))
        return not_finite(pp, pp->gpu_adam_iter, pp->gpu_adam_group, e);
    return rc;
}

static int compute_ended(void *ctx, void *job, Err *e)
{
    Pipe *pp = ctx;
    if (job == &pp->gpu_adam)
        return 1;
    int slot = (int)((ComputeCall *)job - pp->calls);
    return pp->mem.ops->compute_ended(pp->mem.dev, slot, &pp->call_span[slot], e);
}

/* sum += bounce over [begin, end), a piece of a gradient copy's host sum (grad_sum.h). */
static void add_range(void *ctx, size_t begin, size_t end)
{
    const CopyJob *j = ctx;
    grad_sum_add(j->sum, j->bounce, j->bounce_type, begin, end, j->first);
}

static int run_copy(void *ctx, void *job, Err *e)
{
    Pipe *pp = ctx;
    CopyJob *j = job;
    int rc = pp->mem.ops->copy(pp->mem.dev, j->to_device, j->n, j->c, &j->span, e);
    if (rc)
        return rc;
    if (j->sum) {
        workpool_run(&pp->wp_sum, add_range, j, j->n_add, 64);
        j->span.end_s = clock_monotonic_s(); /* the sum is the task's too */
    }
    return 0;
}

static int run_adam(void *ctx, void *job, Err *e)
{
    Pipe *pp = ctx;
    AdamJob *j = job;
    const PipeMem *m = &pp->mem;
    /* the same sum as the in-memory backends' (adam_sum_sq), so the norms agree bit for bit */
    DType gtype = m->grad_sum ? DTYPE_FP32 : m->ops->grad_type;
    double sq = adam_sum_sq(j->grad, gtype, j->n, &pp->wp_adam);
    j->sq = sq;
    if (!isfinite(sq))
        return not_finite(pp, j->iter, j->group, e);
    /* elementwise: the pieces compute exactly what one pass over the slice would */
    bool narrow = m->wsz == 2;
    for (int k = 0; k < j->n_out; k++) {
        size_t f = j->first[k];
        AdamSlice x = {.master = j->master + f, .m = j->m + f, .v = j->v + f,
                       .grad = (const uint8_t *)j->grad + f * dtype_bytes(gtype),
                       .grad_type = gtype,
                       .out = narrow ? (uint16_t *)j->out[k] : NULL,
                       .out_type = m->ops->weight_type, .n = j->count[k]};
        adam_update(pp->isa, &j->step, &x, &pp->wp_adam);
        if (!narrow)
            memcpy(j->out[k], j->master + f, j->count[k] * 4);
    }
    return 0;
}

/* The checksums of an SSD task's extents: taken as a write goes out (the buffer stays as it is
 * until the task ends), checked once a read is in (nothing reads the buffer before the check
 * ends: the task's successors wait for it). */
static int run_sums(void *ctx, void *job, Err *e)
{
    Pipe *pp = ctx;
    const SumsJob *j = job;
    for (int i = 0; i < j->n; i++) {
        if (j->write) {
            pipe_mem_sums_take(&pp->mem, j->t[i], j->buf[i]);
            continue;
        }
        int rc = pipe_mem_sums_check(&pp->mem, j->t[i], j->buf[i], &pp->wp_check, e);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- what each task does ------------------------------------------------------------------ */

static void add_copy(CopyJob *j, void *dst, const void *src, size_t bytes)
{
    j->c[j->n].dst = dst;
    j->c[j->n].src = src;
    j->c[j->n].bytes = bytes;
    j->n++;
}

/* Host bytes of block b's tensor x off the device: its CPU home, or an SSD staging slot. */
static uint8_t *act_host(const PipeMem *m, int b, int x, bool in, int pinned)
{
    int h = pipe_mem_home(m, b, x);
    if (h == HOME_CPU)
        return m->act_cpu[b] + m->cpu_off[b * m->n_tensors + x];
    if (x == m->arch->input)
        return (in ? m->stage_in : m->stage_out)[pinned];
    return (in ? m->stage_in[pinned] + m->stage_in_inner : m->stage_out[pinned]) +
           m->ssd_off[b * m->n_tensors + x];
}

/* Keeps of job j the bytes of chunk k of n (Task.chunk): a share of the copies laid end to end,
 * cut at 4 KiB boundaries (whole elements of any type), and of the sum after a gradient copy,
 * the elements that share brings. */
static void cut_chunk(CopyJob *j, int k, int n)
{
    size_t total = 0;
    for (int i = 0; i < j->n; i++)
        total += j->c[i].bytes;
    size_t begin = total / n * k / 4096 * 4096,
           end = k == n - 1 ? total : total / n * (k + 1) / 4096 * 4096;
    int kept = 0;
    size_t at = 0;
    for (int i = 0; i < j->n; i++) {
        DeviceCopy c = j->c[i];
        size_t lo = begin > at ? begin - at : 0, hi = end - at < c.bytes ? end - at : c.bytes;
        at += c.bytes;
        if (end <= at - c.bytes || lo >= hi)
            continue;
        j->c[kept++] = (DeviceCopy){(uint8_t *)c.dst + lo, (const uint8_t *)c.src + lo, hi - lo};
    }
    j->n = kept;
    if (j->sum) { /* one copy, into the bounce buffer */
        size_t esz = dtype_bytes(j->bounce_type);
        j->bounce = (const uint8_t *)j->bounce + begin;
        j->sum += begin / esz;
        j->n_add = (end - begin) / esz;
    }
}

/* A streamed sub-group's GPU state slot: master, m, v and the new weights, each n long. */
static uint8_t *stream_part(const PipeMem *m, const Task *t, int part, size_t n)
{
    return m->stream_slot[t->slot.gpu_state] + (size_t)part * n * 4;
}

/* A streamed sub-group's states into its GPU slot or home, or its new weights home. */
static void stream_copy(const PipeMem *m, const Task *t, CopyJob *j)
{
    size_t begin = m->grp_begin[t->group], n = m->grp_end[t->group] - begin;
    if (t->cargo == CARGO_UPDATE) {
        add_copy(j, pipe_mem_w_home(m, begin), stream_part(m, t, 3, n), n * m->wsz);
        return;
    }
    size_t at = begin - m->gpu_state_params;
    float *home[3] = {m->master + at, m->m + at, m->v + at};
    for (int k = 0; k < 3; k++) {
        if (j->to_device)
            add_copy(j, stream_part(m, t, k, n), home[k], n * 4);
        else
            add_copy(j, home[k], stream_part(m, t, k, n), n * 4);
    }
}

static void prepare_copy(Pipe *pp, const Task *t, CopyJob *j)
{
    const PipeMem *m = &pp->mem;
    int b = t->layer;
    *j = (CopyJob){.to_device = t->res == RES_H2D};
    if (t->cargo == CARGO_WEIGHTS) {
        bool edge = b < 0;
        size_t n = (edge ? m->edge_params : m->block_params) * m->wsz;
        const uint8_t *src = m->p->weights == TIER_CPU
                                 ? pipe_mem_w_home(m, edge ? 0 : m->edge_params +
                                                                     b * m->block_params)
                                 : edge ? m->edge_stage : m->pinned_w[t->slot.pinned];
        add_copy(j, edge ? m->wedge : m->wbuf[t->slot.gpu_weights], src, n);
    } else if (t->cargo == CARGO_CKPT || t->cargo == CARGO_ACTS) {
        bool in = t->res == RES_H2D;
        for (int x = 0; x < m->n_tensors; x++) {
            int h = pipe_mem_home(m, b, x);
            if (!pipe_mem_moves_with(m, x, t->cargo) || (h != HOME_CPU && h != HOME_SSD))
                continue;
            uint8_t *host = act_host(m, b, x, in, t->slot.pinned);
            uint8_t *dev = (uint8_t *)m->act_slot[t->slot.gpu_acts] +
                           m->slot_off[x];
            if (in)
                add_copy(j, dev, host, m->tbytes[x]);
            else
                add_copy(j, host, dev, m->tbytes[x]);
        }
    } else if (t->cargo == CARGO_STATES || t->cargo == CARGO_UPDATE) {
        stream_copy(m, t, j);
    } else if (t->cargo == CARGO_GRADS) {
        const void *src = b < 0 ? m->gedge : m->gbuf[t->slot.gpu_grads];
        size_t n = b < 0 ? m->edge_params : m->block_params;
        size_t at = b < 0 ? 0 : m->edge_params + b * m->block_params;
        if (m->grad_sum) {
            /* micro-batches: through the bounce buffer into the step's sum */
            add_copy(j, m->grad_bounce, src, n * m->gsz);
            j->sum = m->grad_sum + at;
            j->bounce = m->grad_bounce;
            j->n_add = n;
            j->first = t->micro == 0;
            j->bounce_type = m->ops->grad_type;
        } else {
            add_copy(j, m->host_grads[t->slot.host_grads] + (at - m->grp_begin[t->group]) *
                            m->gsz, src, n * m->gsz);
        }
    }
    if (t->n_chunks > 1)
        cut_chunk(j, t->chunk, t->n_chunks);
}

static int io(Pipe *pp, IoJob *j, bool write, const StoreTensor *t, uint64_t off, void *buf,
              size_t len, Err *e)
{
    if (!len)
        return 0;
    assert(off == 0 && len == t->bytes); /* whole extents: their checksums cover them */
    int id = write ? store_write(&pp->mem.st, t, off, buf, len, e)
                   : store_read(&pp->mem.st, t, off, buf, len, e);
    if (id < 0)
        return id;
    j->sums.t[j->n] = t;
    j->sums.buf[j->n] = buf;
    j->req[j->n++] = id;
    j->sums.n = j->n;
    return 0;
}

static int issue_io(Pipe *pp, const Task *t, IoJob *j, Err *e)
{
    PipeMem *m = &pp->mem;
    bool w = t->res == RES_SSD_WRITE;
    int b = t->layer, rc = 0;
    j->n = 0;
    j->sums = (SumsJob){.write = w};
    switch (t->cargo) {
    case CARGO_WEIGHTS:
        return b < 0 ? io(pp, j, w, &m->w_ssd_edge, 0, m->edge_stage, m->edge_params * m->wsz, e)
                     : io(pp, j, w, &m->w_ssd[b], 0, m->pinned_w[t->slot.pinned],
                          m->block_params * m->wsz, e);
    case CARGO_CKPT:
        return io(pp, j, w, &m->ckpt_ssd[b], 0,
                  (w ? m->stage_out : m->stage_in)[t->slot.pinned],
                  m->tbytes[m->arch->input], e);
    case CARGO_ACTS:
        return io(pp, j, w, &m->inner_ssd[b], 0,
                  w ? m->stage_out[t->slot.pinned] : m->stage_in[t->slot.pinned] +
                                                         m->stage_in_inner,
                  m->ssd_inner_bytes[b], e);
    case CARGO_STATES: {
        float *buf = (float *)m->state_slot[t->slot.pinned];
        int g = m->ooc_index[t->group];
        int id = w ? ooc_adam_write_start(&m->oa, g, buf, e) : ooc_adam_read_start(&m->oa, g, buf, e);
        if (id < 0)
            return id;
        j->sums = (SumsJob){.write = w, .n = 1, .t = {&m->oa.states[g]}, .buf = {buf}};
        j->req[j->n++] = id;
        return 0;
    }
    case CARGO_UPDATE: {
        /* the group's new weights, block by block (and the edges for the tail) */
        size_t first[PIPE_MAX_PIECES], count[PIPE_MAX_PIECES], off[PIPE_MAX_PIECES];
        size_t begin = m->grp_begin[t->group];
        int n = pipe_mem_update_pieces(m, t->group, first, count, off);
        if (n > MAX_IO)
            return err_set(e, -EINVAL, "%s: sub-groups of at most %d blocks on SSD", t->id,
                           MAX_IO - 1);
        for (int k = 0; k < n && !rc; k++) {
            size_t at = begin + first[k];
            const StoreTensor *dst = at < m->edge_params
                                         ? &m->w_ssd_edge
                                         : &m->w_ssd[(at - m->edge_params) / m->block_params];
            rc = io(pp, j, true, dst, 0, m->state_slot[t->slot.pinned] + off[k],
                    count[k] * m->wsz, e);
        }
        return rc;
    }
    default:
        return err_set(e, -EINVAL, "%s: nothing to move", t->id);
    }
}

static void prepare_compute(Pipe *pp, int ti, ComputeCall *c)
{
    const PipeMem *m = &pp->mem;
    const Task *t = &pp->s.tasks[ti];
    int b = t->layer, L = m->L, si = t->iter;
    size_t N = (size_t)m->B * m->T;
    size_t k = (size_t)si * pp->M + t->micro;
    *c = (ComputeCall){.task = t, .inputs = pp->inputs + k * N, .targets = pp->targets + k * N,
                       .grad_scale = (float)(1.0 / pp->M), .no_grad = pp->quiet};
    const BlockArch *arch = m->arch;
    c->op = pp->g->ops[t->op].id;
    if (b < 0 || b >= L) {
        c->w = m->wedge;
        c->dw = m->gedge;
        c->first_bwd = c->op == EDGE_HEAD && t->kind == TASK_BWD;
        if (b < 0)
            c->t[arch->input] = pipe_mem_tensor(m, 0, arch->input, false,
                                                sched_fwd_act_slot(m->p, 0));
        else
            c->t[arch->output] = m->final_res;
        return;
    }
    /* a GPU sub-group's block keeps its weights and gradients; the others' pass the rings */
    c->w = t->slot.gpu_weights >= 0 ? m->wbuf[t->slot.gpu_weights] : pipe_mem_gpu_weights(m, b);
    bool bwd = t->kind != TASK_FWD;
    if (t->kind == TASK_BWD) {
        c->dw = t->slot.gpu_grads >= 0 ? m->gbuf[t->slot.gpu_grads] : pipe_mem_gpu_grads(m, b);
        c->first_bwd = c->op == graph_first_bwd_op(pp->g);
    }
    /* backward reads no block's output: the next block's backward took its gradient */
    for (int x = 0; x < m->n_tensors; x++)
        c->t[x] = bwd && x == arch->output ? NULL
                                           : pipe_mem_tensor(m, b, x, bwd, t->slot.gpu_acts);
}

/* Task t's AdamW step: its learning rate, and the previous step's norm clipping this one
 * (ARCHITECTURE.md; that step's sub-groups are all done). */
static void adam_step_of(const Pipe *pp, const Task *t, AdamStep *out)
{
    const TrainOptions *o = pp->o;
    int si = t->iter;
    double prev = si == 0 ? pp->prev_norm : pp->norms[si - 1];
    float clip = o->clip > 0 && prev > o->clip ? (float)(o->clip / prev) : 1.0f;
    int64_t step = pp->step0 + 1 + pp->iter0 + si;
    AdamConfig acfg = {.lr = trainer_lr(o, step), .beta1 = o->beta1, .beta2 = o->beta2,
                       .eps = o->eps, .weight_decay = o->weight_decay};
    adam_step_init(out, &acfg, (int)step, clip);
}

/* A GPU sub-group's AdamW (plan_optim_tier): its states, gradients and weights on the device;
 * a streamed one's states and new weights in its GPU state slot. */
static void prepare_gpu_adam(Pipe *pp, const Task *t)
{
    const PipeMem *m = &pp->mem;
    size_t begin = m->grp_begin[t->group];
    size_t n = m->grp_end[t->group] - begin;
    DeviceAdam *a = &pp->gpu_adam;
    if (t->slot.gpu_state >= 0) /* streamed: states and new weights in its slot */
        *a = (DeviceAdam){.master = (float *)stream_part(m, t, 0, n),
                          .m = (float *)stream_part(m, t, 1, n),
                          .v = (float *)stream_part(m, t, 2, n),
                          .grad = m->gpu_g + begin * m->gsz, .w = stream_part(m, t, 3, n),
                          .n = n};
    else
        *a = (DeviceAdam){.master = m->gpu_master + begin, .m = m->gpu_m + begin,
                          .v = m->gpu_v + begin, .grad = m->gpu_g + begin * m->gsz,
                          .w = m->gpu_w + begin * m->wsz, .n = n};
    adam_step_of(pp, t, &a->step);
    pp->gpu_adam_group = t->group;
    pp->gpu_adam_iter = pp->iter0 + t->iter;
}

static void prepare_adam(Pipe *pp, const Task *t, AdamJob *j)
{
    const PipeMem *m = &pp->mem;
    int s = t->group;
    size_t begin = m->grp_begin[s], n = m->grp_end[s] - begin;
    *j = (AdamJob){.group = s, .iter = pp->iter0 + t->iter, .n = n,
                   .grad = m->grad_sum ? (const void *)(m->grad_sum + begin)
                                       : m->host_grads[t->slot.host_grads]};
    adam_step_of(pp, t, &j->step);
    if (m->ooc_index[s] < 0) {
        size_t at = begin - m->gpu_state_params;
        j->master = m->master + at;
        j->m = m->m + at;
        j->v = m->v + at;
    } else {
        float *buf = (float *)m->state_slot[t->slot.pinned];
        j->master = buf, j->m = buf + n, j->v = buf + 2 * n;
    }
    if (m->p->weights == TIER_CPU) {
        j->n_out = 1;
        j->first[0] = 0, j->count[0] = n, j->out[0] = pipe_mem_w_home(m, begin);
        return;
    }
    size_t off[PIPE_MAX_PIECES];
    j->n_out = pipe_mem_update_pieces(m, s, j->first, j->count, off);
    for (int k = 0; k < j->n_out; k++)
        j->out[k] = m->state_slot[t->slot.pinned] + off[k];
}

/* ---- the dispatcher -------------------------------------------------------------------------- */

static int thread_lane(Resource r)
{
    return r == RES_GPU ? LANE_GPU : r == RES_H2D ? LANE_H2D : r == RES_D2H ? LANE_D2H
                                                                          : LANE_ADAM;
}

static bool is_io(Resource r)
{
    return r == RES_SSD_READ || r == RES_SSD_WRITE;
}

/* The write checksums' lane, one job at a time: the job it ran marked taken, then the oldest
 * write in flight whose checksums wait posted. */
static void post_write_sums(Pipe *pp)
{
    IoQueue *q = &pp->io[1];
    Lane *l = &pp->lanes[LANE_SUMS_WRITE];
    for (unsigned k = q->ended; k != q->issued; k++) {
        IoJob *j = &q->job[k % IO_DEPTH];
        if (j->sums_state == SUMS_ON_LANE && lane_poll(l))
            j->sums_state = SUMS_TAKEN; /* taking them cannot fail */
        if (j->sums_state == SUMS_ON_LANE)
            return;
        if (j->sums_state == SUMS_WAITING && !j->sums.n) {
            j->sums_state = SUMS_TAKEN;
        } else if (j->sums_state == SUMS_WAITING) {
            lane_post(l, &j->sums);
            j->sums_state = SUMS_ON_LANE;
            return;
        }
    }
}

static int start_task(Pipe *pp, int ti, Err *e)
{
    const Task *t = &pp->s.tasks[ti];
    switch (t->res) {
    case RES_GPU:
        if (t->kind == TASK_ADAM) {
            prepare_gpu_adam(pp, t);
            lane_post(&pp->lanes[LANE_GPU], &pp->gpu_adam);
            return 0;
        }
        {
            /* slots in turn: the call two before this one has ended (at most two in flight) */
            ComputeCall *c = &pp->calls[pp->calls_posted++ % DEVICE_SLOTS];
            prepare_compute(pp, ti, c);
            lane_post(&pp->lanes[LANE_GPU], c);
        }
        return 0;
    case RES_H2D:
    case RES_D2H: {
        CopyJob *j = &pp->copy[t->res == RES_D2H];
        prepare_copy(pp, t, j);
        lane_post(&pp->lanes[thread_lane(t->res)], j);
        return 0;
    }
    case RES_CPU_ADAM:
        prepare_adam(pp, t, &pp->adam);
        lane_post(&pp->lanes[LANE_ADAM], &pp->adam);
        return 0;
    case RES_SSD_READ:
    case RES_SSD_WRITE: {
        IoQueue *q = &pp->io[t->res == RES_SSD_WRITE];
        IoJob *j = &q->job[q->issued % IO_DEPTH];
        Err e2 = {""};
        j->issued_s = clock_monotonic_s();
        int rc = issue_io(pp, t, j, &e2);
        if (rc)
            return err_set(e, rc, "%s: %s", t->id, e2.msg);
        q->issued++;
        /* a write's checksums while its bytes go out (poll_io waits for both) */
        if (j->sums.write) {
            j->sums_state = SUMS_WAITING;
            post_write_sums(pp);
        }
        return 0;
    }
    default:
        return err_set(e, -EINVAL, "%s: no lane for resource %s", t->id, resource_name(t->res));
    }
}

/* Whether the oldest SSD task of direction r has ended; then its times (on the SSD after the
 * task before it: the trace has one task at a time on a resource) and result. A write ends
 * with its checksums taken; a read's go to their lane once the read before it is checked. */
static bool poll_io(Pipe *pp, Resource r, double *t0, double *t1, int *rc, Err *e)
{
    IoQueue *q = &pp->io[r == RES_SSD_WRITE];
    IoJob *j = &q->job[q->ended % IO_DEPTH];
    for (int i = 0; i < j->n; i++)
        if (!store_done(&pp->mem.st, j->req[i]))
            return false;
    if (r == RES_SSD_WRITE) {
        post_write_sums(pp);
        if (j->sums_state != SUMS_TAKEN)
            return false;
    } else if (pp->checking >= 0) {
        return false;
    }
    *rc = 0;
    for (int i = 0; i < j->n; i++) {
        Err e2;
        int r2 = store_wait(&pp->mem.st, j->req[i], &e2);
        if (r2 && !*rc) {
            *rc = r2;
            *e = e2;
        }
    }
    *t0 = j->issued_s > q->last_end ? j->issued_s : q->last_end;
    *t1 = q->last_end = clock_monotonic_s();
    q->ended++;
    return true;
}

/* The SSD read that ended last. */
static const IoJob *read_ended_last(const Pipe *pp)
{
    const IoQueue *q = &pp->io[0];
    return &q->job[(q->ended - 1) % IO_DEPTH];
}

/* Whether the task on resource r has ended; then its times and result. */
static bool poll_task(Pipe *pp, Resource r, double *t0, double *t1, int *rc, Err *e)
{
    if (is_io(r))
        return poll_io(pp, r, t0, t1, rc, e);
    Lane *l = &pp->lanes[thread_lane(r)];
    if (!lane_poll(l))
        return false;
    *t0 = l->start_s;
    *t1 = l->end_s;
    /* the device's own timing where it has one */
    const DeviceSpan *sp = r == RES_H2D || r == RES_D2H ? &pp->copy[r == RES_D2H].span : NULL;
    if (r == RES_GPU)
        sp = l->job == &pp->gpu_adam ? &pp->gpu_adam_span
                                     : &pp->call_span[(ComputeCall *)l->job - pp->calls];
    if (sp && !l->rc)
        device_span_within(sp, t0, t1);
    if (r == RES_GPU)
        device_span_after(&pp->gpu_end, t0, t1);
    *rc = l->rc;
    if (l->rc)
        *e = l->err;
    return true;
}

static int record(Pipe *pp, int ti, double t0, double t1)
{
    if (pp->quiet)
        return 0;
    if (pp->n_rows == pp->cap_rows) {
        int cap = pp->cap_rows ? 2 * pp->cap_rows : 4096;
        TraceRow *r = realloc(pp->rows, (size_t)cap * sizeof *r);
        if (r)
            pp->rows = r;
        char(*ids)[SCHED_ID_MAX] = realloc(pp->ids, (size_t)cap * sizeof *ids);
        if (ids)
            pp->ids = ids;
        if (!r || !ids)
            return -ENOMEM;
        pp->cap_rows = cap;
    }
    const Task *t = &pp->s.tasks[ti];
    memcpy(pp->ids[pp->n_rows], t->id, SCHED_ID_MAX);
    trace_row_from_task(&pp->rows[pp->n_rows++], t, pp->iter0 + t->iter, t0 - pp->t0,
                        t1 - pp->t0);
    pp->busy[t->res] += t1 - t0;
    return 0;
}

/* Whether task t is a compute task that may queue behind another on the device's stream:
 * every one but a GPU sub-group's AdamW, which runs alone. */
static bool on_stream(const Task *t)
{
    return t->res == RES_GPU && t->kind != TASK_ADAM;
}

/* Task nx to its ready queue, once. 0 or -ENOMEM. */
static int release(Pipe *pp, int nx, double now)
{
    if (pp->released[nx])
        return 0;
    pp->released[nx] = true;
    return heap_push(&pp->ready[pp->s.tasks[nx].res], heap_ready_item(&pp->s.tasks[nx], nx, now));
}

/* A task ended: its results, then its successors. */
static int finish_task(Pipe *pp, int ti, double now)
{
    const Task *t = &pp->s.tasks[ti];
    int si = t->iter, G = pp->mem.G;
    if (t->res == RES_GPU && t->kind == TASK_FWD && pp->g->ops[t->op].id == EDGE_LOSS)
        pp->losses[si * pp->M + t->micro] = pp->mem.ops->loss(pp->mem.dev);
    if (t->kind == TASK_ADAM) {
        pp->sq[si * G + t->group] = t->res == RES_GPU ? pp->gpu_adam.sq : pp->adam.sq;
        if (++pp->sq_count[si] == G) {
            /* every sub-group is in: the norm, summed in update order as the trainer does */
            double sum = 0;
            for (int s = 0; s < G; s++)
                sum += pp->sq[si * G + s];
            pp->norms[si] = sqrt(sum);
        }
    }
    bool streamed = on_stream(t);
    for (int k = pp->succ_first[ti]; k < pp->succ_first[ti + 1]; k++) {
        int nx = pp->succ[k];
        pp->waiting[nx]--;
        if (streamed && on_stream(&pp->s.tasks[nx]))
            pp->on_stream[nx]--;
        if (!pp->waiting[nx] && release(pp, nx, now))
            return -ENOMEM;
    }
    return 0;
}

/* Compute task ti was issued: a compute task that waits for nothing else now may queue behind
 * it. 0 or -ENOMEM. */
static int issued_on_stream(Pipe *pp, int ti, double now)
{
    for (int k = pp->succ_first[ti]; k < pp->succ_first[ti + 1]; k++) {
        int nx = pp->succ[k];
        if (on_stream(&pp->s.tasks[nx]) && ++pp->on_stream[nx] == pp->waiting[nx] &&
            release(pp, nx, now))
            return -ENOMEM;
    }
    return 0;
}

/* Nothing to start or finish: wait until a lane ends a job, or briefly while SSD requests are
 * in flight (the store is polled, not rung); while the device computes or copies, as
 * device_wait_bell says. */
static void idle_wait(Pipe *pp)
{
    bool io = pp->running[RES_SSD_READ] >= 0 || pp->running[RES_SSD_WRITE] >= 0;
    if (pp->running[RES_GPU] >= 0 || pp->running[RES_H2D] >= 0 || pp->running[RES_D2H] >= 0)
        device_wait_bell(pp->mem.ops, &pp->bell, &pp->rings_seen, io ? 20e-6 : 10e-3);
    else
        lane_bell_wait(&pp->bell, &pp->rings_seen, io ? 20e-6 : 10e-3);
}

/* Task ti ended on [t0, t1] with trc (e2 its error), its successors ready at now: recorded and
 * released (its iteration's hook called when it was the last), or the run's first error. 0 or
 * -errno with e. */
static int end_task(Pipe *pp, int ti, int trc, const Err *e2, double t0, double t1, double now,
                    int rc, Err *e)
{
    const Task *t = &pp->s.tasks[ti];
    if (rc)
        return rc;
    if (trc)
        return err_set(e, trc, "%s (iteration %d): %s", t->id, pp->iter0 + t->iter, e2->msg);
    if (record(pp, ti, t0, t1) || finish_task(pp, ti, now))
        return err_set(e, -ENOMEM, "out of memory for the measured trace");
    if (!--pp->iter_left[t->iter] && pp->iter_done) /* the iteration's last task */
        return pp->iter_done(pp->iter_user, t->iter, e);
    return 0;
}

/* The read being checked, if its check has ended: the task ends then, its trace row its time on
 * the SSD. Whether it ended; *rc as end_task. */
static bool poll_check(Pipe *pp, int *rc, Err *e)
{
    Lane *l = &pp->lanes[LANE_SUMS_READ];
    if (pp->checking < 0 || !lane_poll(l))
        return false;
    int ti = pp->checking;
    pp->checking = -1;
    *rc = end_task(pp, ti, l->rc, &l->err, pp->check_t0, pp->check_t1, l->end_s, *rc, e);
    return true;
}

/* A stop was asked: the iteration to end with. The first not yet ended, or a later one whose
 * optimizer update has begun: every state change of an iteration follows its updates, so
 * none of a later one has happened. */
static int stop_iteration(const Pipe *pp, int adam_iter)
{
    int i = 0;
    while (i < pp->s.iters - 1 && !pp->iter_left[i])
        i++;
    return adam_iter > i ? adam_iter : i;
}

/* Whether the DAG is done: every task ended, or, after a failure, none in flight, or, once a
 * stop was asked, the iteration it ends with ended and none in flight. */
static bool dag_done(const Pipe *pp, int rc, int done, int in_flight)
{
    if (rc)
        return in_flight == 0;
    if (pp->stop_iter >= 0)
        return !pp->iter_left[pp->stop_iter] && in_flight == 0;
    return done == pp->s.n_tasks;
}

/* Sets the waits and the ready heaps of the segment's DAG, and each iteration's count of
 * tasks. 0 or -ENOMEM. */
static int dag_init(Pipe *pp)
{
    const Schedule *s = &pp->s;
    int rc = sched_successors(s, &pp->succ_first, &pp->succ);
    pp->waiting = malloc(((size_t)s->n_tasks + 1) * sizeof(int));
    pp->on_stream = calloc((size_t)s->n_tasks + 1, sizeof(int));
    pp->released = calloc((size_t)s->n_tasks + 1, sizeof(bool));
    pp->iter_left = calloc((size_t)s->iters, sizeof(int));
    if (rc || !pp->waiting || !pp->on_stream || !pp->released || !pp->iter_left)
        return -ENOMEM;
    double now = clock_monotonic_s();
    for (int t = 0; t < s->n_tasks && !rc; t++) {
        pp->iter_left[s->tasks[t].iter]++;
        pp->waiting[t] = s->tasks[t].n_deps;
        if (!pp->waiting[t])
            rc = release(pp, t, now);
    }
    for (int r = 0; r < RES_COUNT; r++)
        pp->running[r] = pp->behind[r] = -1;
    pp->gpu_end = 0;
    pp->stop_iter = -1;
    pp->checking = -1;
    return rc;
}

/* Whether resource r's lane takes its best ready task now: when it is idle, or one behind the
 * one it runs: for the compute lane a compute task behind a compute task (stream order), for
 * an SSD lane any (IoQueue). */
static bool lane_free_for(const Pipe *pp, int r)
{
    if (!pp->ready[r].n)
        return false;
    if (pp->running[r] < 0)
        return true;
    if (pp->behind[r] >= 0)
        return false;
    if (r == RES_GPU)
        return on_stream(&pp->s.tasks[pp->running[r]]) &&
               on_stream(&pp->s.tasks[heap_top(&pp->ready[r]).a]);
    return is_io(r);
}

/* Runs the segment's DAG to its end. On a failure, stops releasing tasks, lets the ones in
 * flight finish, and returns the first error, naming its task. */
int pipe_run_dag(Pipe *pp, Err *e)
{
    const Schedule *s = &pp->s;
    int rc = dag_init(pp) ? err_set(e, -ENOMEM, "out of memory for the pipeline's DAG") : 0;
    int done = 0, in_flight = 0, adam_iter = -1;
    while (!dag_done(pp, rc, done, in_flight)) {
        bool progress = false;
        if (!rc && pp->stop_iter < 0 && !pp->quiet && trainer_stop_signal(pp->o)) {
            pp->stop_iter = stop_iteration(pp, adam_iter);
            trainer_stop_notice(pp->o, pp->step0 + pp->iter0 + pp->stop_iter + 1);
        }
        for (int r = 0; r < RES_COUNT && !rc; r++) {
            if (!lane_free_for(pp, r))
                continue;
            int ti = heap_pop(&pp->ready[r]).a;
            if (pp->stop_iter >= 0 && s->tasks[ti].iter > pp->stop_iter) {
                progress = true; /* never started: the run ends before its iteration */
                continue;
            }
            if (s->tasks[ti].kind == TASK_ADAM && s->tasks[ti].iter > adam_iter)
                adam_iter = s->tasks[ti].iter;
            rc = start_task(pp, ti, e);
            if (!rc && on_stream(&s->tasks[ti]) && issued_on_stream(pp, ti, clock_monotonic_s()))
                rc = err_set(e, -ENOMEM, "out of memory for the pipeline's DAG");
            if (!rc) {
                *(pp->running[r] < 0 ? &pp->running[r] : &pp->behind[r]) = ti;
                in_flight++;
                progress = true;
            }
        }
        if (pp->mem.store_opened) {
            Err e2;
            int r2 = store_poll(&pp->mem.st, &e2);
            if (r2 && !rc) {
                rc = r2;
                *e = e2;
            }
        }
        for (int r = 0; r < RES_COUNT; r++) {
            int ti = pp->running[r], trc;
            double t0, t1;
            Err e2 = {""};
            if (ti < 0 || !poll_task(pp, r, &t0, &t1, &trc, &e2))
                continue;
            pp->running[r] = pp->behind[r];
            pp->behind[r] = -1;
            progress = true;
            if (r == RES_SSD_READ && !trc && read_ended_last(pp)->sums.n) {
                /* in: checked on its lane while the SSD takes the next reads; its successors
                 * wait for the check (poll_check) */
                pp->checking = ti, pp->check_t0 = t0, pp->check_t1 = t1;
                pp->check = read_ended_last(pp)->sums;
                lane_post(&pp->lanes[LANE_SUMS_READ], &pp->check);
                continue;
            }
            in_flight--;
            done++;
            rc = end_task(pp, ti, trc, &e2, t0, t1, t1, rc, e);
        }
        if (poll_check(pp, &rc, e)) {
            in_flight--;
            done++;
            progress = true;
        }
        if (!progress)
            idle_wait(pp);
    }
    for (int r = 0; r < RES_COUNT; r++)
        heap_free(&pp->ready[r]);
    free(pp->succ_first), free(pp->succ), free(pp->waiting), free(pp->iter_left);
    free(pp->on_stream), free(pp->released);
    pp->succ_first = pp->succ = pp->waiting = pp->iter_left = pp->on_stream = NULL;
    pp->released = NULL;
    return rc;
}

_Static_assert((int)DEVICE_SLOTS >= (int)LANE_DEPTH, "a slot for every compute task in flight");
const LaneQueryFn pipe_compute_ended = compute_ended;

const LaneFn pipe_lane_fns[N_THREAD_LANES] = {
    [LANE_GPU] = run_compute, [LANE_H2D] = run_copy, [LANE_D2H] = run_copy,
    [LANE_ADAM] = run_adam, [LANE_SUMS_READ] = run_sums, [LANE_SUMS_WRITE] = run_sums};

void pipe_trace_fix_ids(Pipe *pp)
{
    for (int k = 0; k < pp->n_rows; k++)
        pp->rows[k].task_id = pp->ids[k];
}
