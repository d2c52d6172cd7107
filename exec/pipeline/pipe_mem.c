/* pipe_mem: placement, budgets and buffers of the out-of-core pipeline; see pipe_mem.h. */
#include "pipe_mem.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adam.h"
#include "progress.h"
#include "units.h"

static size_t align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

static size_t page(size_t n)
{
    return align_up(n ? n : 1, 4096);
}

bool pipe_mem_moves_with(const PipeMem *m, int x, Cargo cargo)
{
    return (x == m->arch->input) == (cargo == CARGO_CKPT);
}

/* ---- placement and sizes ------------------------------------------------------------------ */

static int place(PipeMem *m, Err *e)
{
    const Plan *p = m->p;
    const BlockArch *arch = m->arch;
    int L = m->L, X = m->n_tensors;
    m->home = malloc((size_t)L * X);
    m->cpu_off = malloc((size_t)L * X * sizeof(int64_t));
    m->ssd_off = malloc((size_t)L * X * sizeof(int64_t));
    m->cpu_bytes = calloc((size_t)L, sizeof(size_t));
    m->ssd_inner_bytes = calloc((size_t)L, sizeof(size_t));
    m->grp_begin = calloc((size_t)m->G, sizeof(size_t));
    m->grp_end = calloc((size_t)m->G, sizeof(size_t));
    m->ooc_index = calloc((size_t)m->G, sizeof(int));
    if (!m->home || !m->cpu_off || !m->ssd_off || !m->cpu_bytes || !m->ssd_inner_bytes ||
        !m->grp_begin || !m->grp_end || !m->ooc_index)
        return err_set(e, -ENOMEM, "out of memory");
    bool swapped[ARCH_MAX_TENSORS] = {false};
    size_t ckpt_ssd_max = 0, inner_ssd_max = 0;
    for (int b = 0; b < L; b++) {
        signed char *h = &m->home[b * X];
        for (int x = 0; x < X; x++) {
            h[x] = HOME_NONE;
            m->cpu_off[b * X + x] = m->ssd_off[b * X + x] = PIPE_NO_OFFSET;
        }
        for (int i = 0; i < arch->n_ops; i++)
            for (const signed char *x = arch->ops[i].saves; *x >= 0; x++) {
                ActPlace a = plan_act(p, b, i);
                h[*x] = a == ACT_RECOMPUTE ? HOME_NONE : (signed char)a;
            }
        for (int x = 0; x < X; x++) {
            if (h[x] == HOME_CPU) {
                m->cpu_off[b * X + x] = (int64_t)m->cpu_bytes[b];
                m->cpu_bytes[b] += align_up(m->tbytes[x], 256);
            } else if (h[x] == HOME_SSD && x != arch->input) {
                m->ssd_off[b * X + x] = (int64_t)m->ssd_inner_bytes[b];
                m->ssd_inner_bytes[b] += align_up(m->tbytes[x], 256);
            } else if (h[x] == HOME_SSD && m->tbytes[x] > ckpt_ssd_max) {
                ckpt_ssd_max = m->tbytes[x];
            }
            if (h[x] == HOME_CPU || h[x] == HOME_SSD)
                swapped[x] = true;
        }
        if (m->ssd_inner_bytes[b] > inner_ssd_max)
            inner_ssd_max = m->ssd_inner_bytes[b];
    }
    for (int x = 0; x < X; x++) {
        m->slot_off[x] = swapped[x] ? (int64_t)m->slot_bytes : PIPE_NO_OFFSET;
        if (swapped[x])
            m->slot_bytes += align_up(m->tbytes[x], 256);
    }
    m->stage_out_bytes = ckpt_ssd_max > inner_ssd_max ? ckpt_ssd_max : inner_ssd_max;
    m->stage_in_inner = align_up(ckpt_ssd_max, 4096);
    m->stage_in_bytes = m->stage_in_inner + inner_ssd_max;
    /* sub-groups as slices of the flat layout */
    int n_ssd = 0;
    m->gpu_state_params = m->cpu_state_end = layout_gpu_state_params(m->c, p);
    for (int s = 0; s < m->G; s++) {
        layout_subgroup_slice(m->c, p, s, &m->grp_begin[s], &m->grp_end[s]);
        Tier t = plan_optim_tier(p, s);
        m->ooc_index[s] = t == TIER_SSD ? n_ssd++ : -1;
        if (t == TIER_CPU && m->grp_end[s] > m->cpu_state_end)
            m->cpu_state_end = m->grp_end[s];
        size_t n = m->grp_end[s] - m->grp_begin[s];
        bool streamed = plan_group_streamed(p, s);
        if (t != TIER_GPU && !streamed && n > m->max_host_group)
            m->max_host_group = n;
        if (streamed && n > m->stream_slot_params)
            m->stream_slot_params = n;
    }
    m->stream_end = layout_stream_end_params(m->c, p);
    return 0;
}

static size_t update_base(const PipeMem *m, int s)
{
    return m->ooc_index[s] >= 0 ? page(12 * (m->grp_end[s] - m->grp_begin[s])) : 0;
}

static bool states_on_ssd(const PipeMem *m)
{
    for (int s = 0; s < m->G; s++)
        if (m->ooc_index[s] >= 0)
            return true;
    return false;
}

int pipe_mem_update_pieces(const PipeMem *m, int s, size_t *first, size_t *count, size_t *off)
{
    size_t begin = m->grp_begin[s], end = m->grp_end[s], at = update_base(m, s);
    int n = 0;
    if (begin == 0) {
        first[n] = 0, count[n] = m->edge_params, off[n] = at;
        at += page(m->edge_params * m->wsz);
        n++;
    }
    for (size_t b0 = begin ? begin : m->edge_params; b0 < end && n < PIPE_MAX_PIECES;
         b0 += m->block_params, n++) {
        first[n] = b0 - begin, count[n] = m->block_params, off[n] = at;
        at += page(m->block_params * m->wsz);
    }
    assert(at <= m->state_slot_bytes);
    return n;
}

/* Parameters of the largest layer group: a block or the edges. */
static size_t largest_layer(const PipeMem *m)
{
    return m->block_params > m->edge_params ? m->block_params : m->edge_params;
}

void pipe_lane_sizes(const void *device_ops, const ModelConfig *c, int B, int T,
                     LaneSizes *lane)
{
    const DeviceOps *ops = device_ops;
    size_t t[ARCH_MAX_TENSORS];
    ops->tensor_bytes(c, B, T, t);
    *lane = (LaneSizes){.own = (int64_t)ops->own_bytes(c, B, T),
                        .weight_bytes = (int)dtype_bytes(ops->weight_type),
                        .grad_bytes = (int)dtype_bytes(ops->grad_type), .on_host = ops->on_host};
    for (int x = 0; x < arch_tensors(model_arch(c)); x++)
        lane->tensor[x] = (int64_t)t[x];
}

void pipe_mem_planned(const PipeMem *m, Footprint *f)
{
    LaneSizes lane;
    pipe_lane_sizes(m->ops, m->c, m->B, m->T, &lane);
    footprint_compute_lane(f, m->c, m->p, &lane);
}

/* ---- allocation ------------------------------------------------------------------------------ */

static void *dev_alloc(PipeMem *m, size_t bytes, MemTag tag, Err *e)
{
    void *q = m->ops->alloc(m->dev, bytes, e);
    if (q)
        m->dev_bytes[tag] += (double)bytes;
    return q;
}

/* The GPU sub-groups' state, weights and gradients (the edges' among them), each one array. */
static bool alloc_gpu_groups(PipeMem *m, Err *e)
{
    size_t X = m->gpu_state_params;
    bool ok = (m->gpu_w = dev_alloc(m, X * m->wsz, MEM_WEIGHTS, e)) &&
              (m->gpu_g = dev_alloc(m, m->stream_end * m->gsz, MEM_GRADS, e)) &&
              (m->gpu_master = dev_alloc(m, X * 4, MEM_MASTER, e)) &&
              (m->gpu_m = dev_alloc(m, X * 4, MEM_ADAM_M, e)) &&
              (m->gpu_v = dev_alloc(m, X * 4, MEM_ADAM_V, e));
    m->wedge = m->gpu_w, m->gedge = m->gpu_g;
    for (int i = 0; ok && m->stream_slot_params && i < PLAN_STREAM_SLOTS; i++)
        ok = (m->stream_slot[i] = dev_alloc(m, m->stream_slot_params * (12 + m->wsz),
                                            MEM_STAGING, e));
    return ok;
}

static int alloc_device(PipeMem *m, Err *e)
{
    const Plan *p = m->p;
    bool ok = true, ring = plan_gpu_group_blocks(p) < m->L;
    bool grad_ring = plan_gpu_grad_blocks(p) < m->L;
    for (int i = 0; ring && i < p->weight_buffers && ok; i++)
        ok = (m->wbuf[i] = dev_alloc(m, m->block_params * m->wsz, MEM_WEIGHTS, e));
    for (int i = 0; grad_ring && i < p->grad_buffers && ok; i++)
        ok = (m->gbuf[i] = dev_alloc(m, m->block_params * m->gsz, MEM_GRADS, e));
    if (m->gpu_state_params)
        ok = ok && alloc_gpu_groups(m, e);
    else
        ok = ok && (m->wedge = dev_alloc(m, m->edge_params * m->wsz, MEM_WEIGHTS, e)) &&
             (m->gedge = dev_alloc(m, m->edge_params * m->gsz, MEM_GRADS, e));
    for (int i = 0; i < p->act_buffers && ok && m->slot_bytes; i++)
        ok = (m->act_slot[i] = dev_alloc(m, m->slot_bytes, MEM_ACTIVATIONS, e));
    size_t all = 0;
    for (int x = 0; x < m->n_tensors; x++)
        all += align_up(m->tbytes[x], 256);
    ok = ok && (m->scratch = dev_alloc(m, all, MEM_ACTIVATIONS, e)) &&
         (m->final_res = dev_alloc(m, m->tbytes[m->arch->output], MEM_ACTIVATIONS, e));
    m->kept = calloc((size_t)m->L * m->n_tensors, sizeof *m->kept);
    if (ok && !m->kept)
        return err_set(e, -ENOMEM, "out of memory");
    for (int i = 0; i < m->L * m->n_tensors && ok; i++)
        if (m->home[i] == HOME_GPU)
            ok = (m->kept[i] = dev_alloc(m, m->tbytes[i % m->n_tensors], MEM_ACTIVATIONS, e));
    m->dev_bytes[MEM_ACTIVATIONS] += (double)m->ops->own_bytes(m->c, m->B, m->T);
    return ok ? 0 : -ENOMEM;
}

static uint8_t *host_alloc(PipeMem *m, size_t bytes, MemTag tag, Err *e)
{
    return hostpool_alloc(&m->pool, bytes ? bytes : 1, tag, e);
}

static int alloc_host(PipeMem *m, Err *e)
{
    const Plan *p = m->p;
    size_t P = m->edge_params + (size_t)m->L * m->block_params;
    bool ok = true;
    if (p->weights == TIER_CPU) {
        size_t home = P - m->gpu_state_params;
        ok = !home || (m->w_home = host_alloc(m, home * m->wsz, MEM_WEIGHTS, e));
    } else if (p->weights == TIER_SSD) {
        for (int i = 0; i < p->pinned_buffers && ok; i++)
            ok = (m->pinned_w[i] = host_alloc(m, m->block_params * m->wsz, MEM_STAGING, e));
        ok = ok && (m->edge_stage = host_alloc(m, m->edge_params * m->wsz, MEM_STAGING, e));
    }
    size_t X = m->cpu_state_end - m->gpu_state_params;
    if (ok && X) {
        ok = (m->master = (float *)host_alloc(m, X * 4, MEM_MASTER, e)) &&
             (m->m = (float *)host_alloc(m, X * 4, MEM_ADAM_M, e)) &&
             (m->v = (float *)host_alloc(m, X * 4, MEM_ADAM_V, e));
        m->moments_fresh = true;
    }
    size_t stage = (size_t)footprint_gpu_stage_bytes(m->c, p, (int)m->wsz);
    m->gpu_stage_params = m->gpu_state_params < FOOTPRINT_GPU_STAGE_PARAMS
                              ? m->gpu_state_params : FOOTPRINT_GPU_STAGE_PARAMS;
    ok = ok && (!stage || (m->gpu_stage = host_alloc(m, stage, MEM_STAGING, e)));
    /* the footprint's size (one accounting); pipe_mem_update_pieces lays the weights out in it */
    m->state_slot_bytes = (size_t)footprint_state_slot_bytes(m->c, p, (int)m->wsz);
    for (int i = 0; ok && m->state_slot_bytes && i < p->state_buffers; i++)
        ok = (m->state_slot[i] = host_alloc(m, m->state_slot_bytes, MEM_STAGING, e));
    size_t biggest = largest_layer(m);
    if (p->n_micro > 1)
        ok = ok && (m->grad_sum = (float *)host_alloc(m, P * 4, MEM_GRADS, e)) &&
             (m->grad_bounce = host_alloc(m, biggest * m->gsz, MEM_STAGING, e));
    for (int i = 0; ok && p->n_micro == 1 && m->max_host_group && i < p->host_grad_groups; i++)
        ok = (m->host_grads[i] = host_alloc(m, m->max_host_group * m->gsz, MEM_GRADS, e));
    m->act_cpu = calloc((size_t)m->L, sizeof *m->act_cpu);
    if (ok && !m->act_cpu)
        return err_set(e, -ENOMEM, "out of memory");
    for (int b = 0; ok && b < m->L; b++)
        if (m->cpu_bytes[b])
            ok = (m->act_cpu[b] = host_alloc(m, m->cpu_bytes[b], MEM_ACTIVATIONS, e));
    for (int i = 0; ok && m->stage_out_bytes && i < 2; i++)
        ok = (m->stage_out[i] = host_alloc(m, m->stage_out_bytes, MEM_STAGING, e)) &&
             (m->stage_in[i] = host_alloc(m, m->stage_in_bytes, MEM_STAGING, e));
    return ok ? 0 : -ENOMEM;
}

static bool needs_store(const PipeMem *m)
{
    if (m->p->weights == TIER_SSD || states_on_ssd(m))
        return true;
    for (int i = 0; i < m->L * m->n_tensors; i++)
        if (m->home[i] == HOME_SSD)
            return true;
    return false;
}

/* The whole extent t from or to buf, synchronously, its checksums taken (while the write is
 * in flight) or checked: the run's state put in place and read for checkpoints. */
static int sync_io(PipeMem *m, const StoreTensor *t, void *buf, bool write, Err *e)
{
    int id = write ? store_write(&m->st, t, 0, buf, t->bytes, e)
                   : store_read(&m->st, t, 0, buf, t->bytes, e);
    if (id < 0)
        return id;
    if (write)
        pipe_mem_sums_take(m, t, buf);
    int rc = store_wait(&m->st, id, e);
    return rc || write ? rc : pipe_mem_sums_check(m, t, buf, NULL, e);
}

/* ---- the store ------------------------------------------------------------------------------ */

static int open_store(PipeMem *m, const PipeConfig *pc, WorkPool *wp, Err *e)
{
    /* The store's own checksums stay off: it would take them on its one thread, the
     * dispatcher's (MEASUREMENTS.md, "The SSD tier's checksums"); pipe_mem_sums_* do. */
    StoreConfig sc = {.n_dirs = pc->n_ssd_dirs, .create = true};
    for (int i = 0; i < pc->n_ssd_dirs; i++)
        sc.dirs[i] = pc->ssd_dirs[i];
    if (!pc->n_ssd_dirs) {
        const char *tmp = getenv("TMPDIR");
        snprintf(m->tmp_dir, sizeof m->tmp_dir, "%s/fuyou-ssd-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(m->tmp_dir)) {
            int rc = -errno;
            m->tmp_dir[0] = 0;
            return err_set(e, rc, "cannot make a directory for the SSD tier in %s: %s; give "
                           "one with --ssd-dir", tmp && *tmp ? tmp : "/tmp", strerror(-rc));
        }
        sc.dirs[0] = m->tmp_dir;
        sc.n_dirs = 1;
    }
    int rc = store_open(&m->st, &sc, e);
    if (rc == -EINVAL) {
        /* a file system without O_DIRECT (tmpfs): the same I/O through the page cache */
        store_close(&m->st);
        sc.buffered = true;
        rc = store_open(&m->st, &sc, e);
    }
    if (rc)
        return rc;
    m->store_opened = true;
    const Plan *p = m->p;
    int L = m->L;
    m->w_ssd = calloc((size_t)L, sizeof *m->w_ssd);
    m->ckpt_ssd = calloc((size_t)L, sizeof *m->ckpt_ssd);
    m->inner_ssd = calloc((size_t)L, sizeof *m->inner_ssd);
    if (!m->w_ssd || !m->ckpt_ssd || !m->inner_ssd)
        return err_set(e, -ENOMEM, "out of memory");
    if (p->weights == TIER_SSD) {
        /* the GPU sub-groups' weights stay on the GPU */
        for (int b = 0; b < L && !rc; b++)
            if (!plan_block_on_gpu(p, b))
                rc = store_alloc(&m->st, m->block_params * m->wsz, &m->w_ssd[b], e);
        if (!rc && !plan_edges_on_gpu(p))
            rc = store_alloc(&m->st, m->edge_params * m->wsz, &m->w_ssd_edge, e);
        m->ssd_bytes[MEM_WEIGHTS] = (double)((m->edge_params + L * m->block_params -
                                              m->gpu_state_params) * m->wsz);
    }
    if (!rc && states_on_ssd(m)) {
        /* the sub-groups whose states are on SSD, in oa by their ooc_index */
        size_t *n = malloc((size_t)m->G * sizeof *n);
        if (!n)
            return err_set(e, -ENOMEM, "out of memory");
        int k = 0;
        double on_ssd = 0;
        for (int s = 0; s < m->G; s++)
            if (m->ooc_index[s] >= 0) {
                n[k++] = m->grp_end[s] - m->grp_begin[s];
                on_ssd += (double)n[k - 1];
            }
        rc = ooc_adam_init(&m->oa, &m->st, &m->pool, wp, adam_isa_best(), n, k, 0, e);
        free(n);
        m->ssd_bytes[MEM_MASTER] = m->ssd_bytes[MEM_ADAM_M] = m->ssd_bytes[MEM_ADAM_V] =
            4 * on_ssd;
    }
    for (int b = 0; b < L && !rc; b++) {
        if (pipe_mem_home(m, b, m->arch->input) == HOME_SSD) {
            rc = store_alloc(&m->st, m->tbytes[m->arch->input], &m->ckpt_ssd[b], e);
            m->ssd_bytes[MEM_ACTIVATIONS] += (double)m->tbytes[m->arch->input];
        }
        if (!rc && m->ssd_inner_bytes[b]) {
            rc = store_alloc(&m->st, m->ssd_inner_bytes[b], &m->inner_ssd[b], e);
            m->ssd_bytes[MEM_ACTIVATIONS] += (double)m->ssd_inner_bytes[b];
        }
    }
    return rc ? rc : pipe_mem_sums_alloc(m, e);
}

/* The plan's bytes against the budgets and what the machine has, before anything is
 * allocated: *hneed the host memory it needs. 0, -ENOSPC naming the budget and the shortfall,
 * or -EINVAL for a --gpu-mem beyond the device. */
static int check_budgets(PipeMem *m, const PipeConfig *pc, double *hneed, Err *e)
{
    const Plan *p = m->p;
    char need_s[24], have_s[24], more_s[24];
    Footprint need;
    pipe_mem_planned(m, &need);
    double dneed = footprint_tier_total(&need, TIER_GPU);
    *hneed = footprint_tier_total(&need, TIER_CPU);
    size_t dev_free = pc->device->free_bytes ? pc->device->free_bytes() : 0;
    if (pc->gpu_budget && dev_free && pc->gpu_budget > dev_free)
        return err_set(e, -EINVAL, "--gpu-mem %s is more than the device has free (%s); "
                       "lower it", units_bytes(have_s, sizeof have_s, (double)pc->gpu_budget),
                       units_bytes(need_s, sizeof need_s, (double)dev_free));
    if (!pc->gpu_budget && dev_free && dneed > (double)dev_free)
        return err_set(e, -ENOSPC, "this plan needs %s on the device, which has %s free; keep "
                       "fewer activations or buffers there%s",
                       units_bytes(need_s, sizeof need_s, dneed),
                       units_bytes(have_s, sizeof have_s, (double)dev_free),
                       p->optim_gpu_groups ? ", or update fewer sub-groups there "
                                             "(--optim-gpu-groups)" : "");
    if (pc->gpu_budget && dneed > (double)pc->gpu_budget)
        return err_set(e, -ENOSPC, "--gpu-mem %s is too small for this plan: it needs %s (%s "
                       "more); raise it, or keep fewer activations or buffers on the GPU%s",
                       units_bytes(have_s, sizeof have_s, (double)pc->gpu_budget),
                       units_bytes(need_s, sizeof need_s, dneed),
                       units_bytes(more_s, sizeof more_s, dneed - (double)pc->gpu_budget),
                       p->optim_gpu_groups ? ", or update fewer sub-groups there "
                                             "(--optim-gpu-groups)" : "");
    size_t host_free = hostpool_system_available();
    if (pc->cpu_budget && *hneed > (double)pc->cpu_budget)
        return err_set(e, -ENOSPC, "--cpu-mem %s is too small for this plan: it needs %s (%s "
                       "more); raise it, or %s",
                       units_bytes(have_s, sizeof have_s, (double)pc->cpu_budget),
                       units_bytes(need_s, sizeof need_s, *hneed),
                       units_bytes(more_s, sizeof more_s, *hneed - (double)pc->cpu_budget),
                       footprint_advice(TIER_CPU, m->p, &need));
    if (!pc->cpu_budget && host_free && *hneed > (double)host_free)
        return err_set(e, -ENOSPC, "this plan needs %s of host memory (CPU-resident state and "
                       "pinned buffers), and this machine has %s available; %s",
                       units_bytes(need_s, sizeof need_s, *hneed),
                       units_bytes(have_s, sizeof have_s, (double)host_free),
                       footprint_advice(TIER_CPU, m->p, &need));
    return 0;
}

/* A host allocation's pages put in RAM on the pool's threads (hostpool's toucher). */
static void touch_on(void *ctx, void *ptr, size_t bytes)
{
    workpool_run(ctx, hostpool_touch_pages, ptr, bytes / HOSTPOOL_TOUCH_PAGE, 512);
}

int pipe_mem_init(PipeMem *m, const ModelConfig *c, const Plan *p, int B, int T,
                  const PipeConfig *pc, WorkPool *wp, WorkPool *host_wp, Err *e)
{
    memset(m, 0, sizeof *m);
    *m = (PipeMem){.c = c, .arch = model_arch(c), .p = p, .ops = pc->device, .L = c->n_layer,
                   .n_tensors = arch_tensors(model_arch(c)),
                   .G = plan_subgroup_count(p), .B = B, .T = T,
                   .block_params = (size_t)model_block_params(c),
                   .edge_params = (size_t)model_embed_params(c),
                   .wsz = dtype_bytes(pc->device->weight_type),
                   .gsz = dtype_bytes(pc->device->grad_type)};
    const struct { int n; const char *what; } rings[] = {
        {p->weight_buffers, "weight buffers"}, {p->grad_buffers, "gradient buffers"},
        {p->act_buffers, "activation buffers"}, {p->pinned_buffers, "pinned buffers"},
        {p->state_buffers, "state buffers"}, {p->host_grad_groups, "host gradient groups"}};
    for (size_t i = 0; i < sizeof rings / sizeof rings[0]; i++)
        if (rings[i].n > PIPE_MAX_RING)
            return err_set(e, -EINVAL, "the pipeline takes at most %d %s (got %d)",
                           PIPE_MAX_RING, rings[i].what, rings[i].n);
    pc->device->tensor_bytes(c, B, T, m->tbytes);
    int rc = place(m, e);
    if (rc)
        return rc;
    double hneed;
    rc = check_budgets(m, pc, &hneed, e);
    if (rc) {
        m->budget_short = rc == -ENOSPC;
        return rc;
    }
    rc = hostpool_init(&m->pool, pc->cpu_budget ? pc->cpu_budget : (size_t)hneed + (1 << 20),
                       e);
    if (rc)
        return rc;
    if (pc->device->pin)
        hostpool_set_pin(&m->pool, pc->device->pin, pc->device->unpin, NULL);
    if (host_wp)
        hostpool_set_touch(&m->pool, touch_on, host_wp);
    if ((rc = pc->device->create(&m->dev, c, B, T, wp, e)) || (rc = alloc_device(m, e)) ||
        (rc = alloc_host(m, e)))
        return rc;
    return needs_store(m) ? open_store(m, pc, wp, e) : 0;
}

void pipe_mem_free(PipeMem *m)
{
    if (m->dev) {
        bool own_edges = !m->gpu_w; /* else they are the GPU sub-groups' arrays' start */
        void *bufs[] = {own_edges ? m->wedge : NULL, own_edges ? m->gedge : NULL, m->scratch,
                        m->final_res, m->gpu_w, m->gpu_g, m->gpu_master, m->gpu_m, m->gpu_v};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i])
                m->ops->release(m->dev, bufs[i]);
        for (int i = 0; i < PIPE_MAX_RING; i++) {
            void *ring[] = {m->wbuf[i], m->gbuf[i], m->act_slot[i],
                            i < PLAN_STREAM_SLOTS ? m->stream_slot[i] : NULL};
            for (size_t k = 0; k < sizeof ring / sizeof ring[0]; k++)
                if (ring[k])
                    m->ops->release(m->dev, ring[k]);
        }
        for (int i = 0; m->kept && i < m->L * m->n_tensors; i++)
            if (m->kept[i])
                m->ops->release(m->dev, m->kept[i]);
        m->ops->destroy(m->dev);
    }
    if (m->store_opened) {
        store_close(&m->st);
        for (int i = 0; i < m->st.cfg.n_dirs; i++)
            unlink(m->st.paths[i]);
    }
    if (m->tmp_dir[0])
        rmdir(m->tmp_dir);
    hostpool_free(&m->pool);
    free(m->kept), free(m->act_cpu), free(m->w_ssd), free(m->ckpt_ssd), free(m->inner_ssd);
    free(m->home), free(m->cpu_off), free(m->ssd_off), free(m->cpu_bytes);
    free(m->ssd_inner_bytes), free(m->grp_begin), free(m->grp_end), free(m->ooc_index);
    free(m->sums), free(m->sum_set);
    memset(m, 0, sizeof *m);
}

/* ---- locations ------------------------------------------------------------------------------ */

void *pipe_mem_tensor(const PipeMem *m, int b, int x, bool backward, int slot)
{
    /* forward writes a block's output where the next block finds its input */
    if (x == m->arch->output && !backward)
        return b + 1 < m->L ? pipe_mem_tensor(m, b + 1, m->arch->input, false,
                                              sched_fwd_act_slot(m->p, b + 1))
                            : m->final_res;
    int h = pipe_mem_home(m, b, x);
    if (h == HOME_GPU)
        return m->kept[b * m->n_tensors + x];
    if (h == HOME_CPU || h == HOME_SSD)
        return (uint8_t *)m->act_slot[slot] + m->slot_off[x];
    size_t off = 0;
    for (int i = 0; i < x; i++)
        off += align_up(m->tbytes[i], 256);
    return (uint8_t *)m->scratch + off;
}

void *pipe_mem_gpu_weights(const PipeMem *m, int b)
{
    return plan_block_on_gpu(m->p, b) ? m->gpu_w + (m->edge_params + b * m->block_params) *
                                                       m->wsz
                                      : NULL;
}

void *pipe_mem_gpu_grads(const PipeMem *m, int b)
{
    return plan_grads_on_gpu(m->p, b) ? m->gpu_g + (m->edge_params + b * m->block_params) *
                                                       m->gsz
                                      : NULL;
}

uint8_t *pipe_mem_w_home(const PipeMem *m, size_t at)
{
    assert(at >= m->gpu_state_params && m->w_home);
    return m->w_home + (at - m->gpu_state_params) * m->wsz;
}

/* ---- whole state in and out ----------------------------------------------------------------- */

/* src's values as the device's weights into dst, elements [begin, end) (a WorkFn). */
typedef struct ToWeights {
    const PipeMem *m;
    void *dst;
    const float *src;
} ToWeights;

static void to_weights_range(void *ctx, size_t begin, size_t end)
{
    const ToWeights *t = ctx;
    adam_narrow((uint16_t *)t->dst + begin, t->src + begin, end - begin,
                t->m->ops->weight_type);
}

/* n master values src as the device's weights into dst, on wp's threads (NULL: this one). */
static void to_weights(const PipeMem *m, void *dst, const float *src, size_t n, WorkPool *wp)
{
    if (m->wsz == 4) {
        memcpy(dst, src, n * 4);
        return;
    }
    ToWeights t = {m, dst, src};
    if (wp)
        workpool_run(wp, to_weights_range, &t, n, 4096);
    else
        to_weights_range(&t, 0, n);
}

/* The weights of the flat range [b0, b0 + n) from their master values src: into the CPU's
 * home, or each edge or block unit the range holds onto the SSD (a range holds whole units:
 * optimizer sub-groups are blocks, the tail's with the edges). None of it is the GPU's. */
static int put_weights(PipeMem *m, size_t b0, size_t n, const float *src, WorkPool *wp,
                       Err *e)
{
    if (m->p->weights == TIER_CPU) {
        to_weights(m, pipe_mem_w_home(m, b0), src, n, wp);
        return 0;
    }
    int rc = 0;
    if (b0 == 0 && n < m->edge_params)
        return err_set(e, -EINVAL, "internal: a state range of %zu parameters splits the edges",
                       n);
    if (b0 == 0) {
        to_weights(m, m->edge_stage, src, m->edge_params, wp);
        rc = sync_io(m, &m->w_ssd_edge, m->edge_stage, true, e);
    }
    for (int b = 0; b < m->L && !rc; b++) {
        size_t at = m->edge_params + (size_t)b * m->block_params;
        bool inside = at >= b0 && at + m->block_params <= b0 + n;
        if (!inside && at < b0 + n && at + m->block_params > b0)
            return err_set(e, -EINVAL, "internal: a state range splits block %d", b);
        if (!inside)
            continue;
        to_weights(m, m->pinned_w[0], src + (at - b0), m->block_params, wp);
        rc = sync_io(m, &m->w_ssd[b], m->pinned_w[0], true, e);
    }
    return rc;
}

/* The GPU staging (alloc_host): master, m, v and weights of gpu_stage_params parameters. */
static float *gpu_stage_part(const PipeMem *m, int part)
{
    return (float *)m->gpu_stage + (size_t)part * m->gpu_stage_params;
}

/* n <= gpu_stage_params values of the GPU sub-groups' state from b0 on, staged as master, m
 * and v, onto the device with their weights. */
static int stage_to_gpu(PipeMem *m, size_t b0, size_t n, WorkPool *wp, Err *e)
{
    uint8_t *w = (uint8_t *)gpu_stage_part(m, 3);
    to_weights(m, w, gpu_stage_part(m, 0), n, wp);
    DeviceCopy c[4] = {{m->gpu_master + b0, gpu_stage_part(m, 0), n * 4},
                       {m->gpu_m + b0, gpu_stage_part(m, 1), n * 4},
                       {m->gpu_v + b0, gpu_stage_part(m, 2), n * 4},
                       {m->gpu_w + b0 * m->wsz, w, n * m->wsz}};
    DeviceSpan span;
    return m->ops->copy(m->dev, true, 4, c, &span, e);
}

/* One range of the state, [b0, b0 + n): the CPU-resident sub-groups' (b0 gpu_state_params, n
 * to cpu_state_end) or one SSD sub-group's (ssd its index, else -1); params, mo, vo its
 * values (mo, vo NULL: zeros). */
static int put_range(PipeMem *m, size_t b0, size_t n, int ssd, const float *params,
                     const float *mo, const float *vo, WorkPool *wp, Err *e)
{
    int rc = put_weights(m, b0, n, params, wp, e);
    if (rc)
        return rc;
    size_t x = b0 - m->gpu_state_params; /* the range's place in the CPU tier's arrays */
    float *master = ssd < 0 ? m->master + x : (float *)m->state_slot[0];
    float *mm = ssd < 0 ? m->m + x : master + n, *vv = ssd < 0 ? m->v + x : master + 2 * n;
    if (params != master)
        memcpy(master, params, n * 4);
    if (mo != mm) /* the fill's moments are in place already */
        mo ? (void)memcpy(mm, mo, n * 4) : (void)memset(mm, 0, n * 4);
    if (vo != vv)
        vo ? (void)memcpy(vv, vo, n * 4) : (void)memset(vv, 0, n * 4);
    return ssd < 0 ? 0 : sync_io(m, &m->oa.states[ssd], master, true, e);
}

/* The flat arrays pipe_mem_put_state writes from, as a fill (a PipeMemFill). */
typedef struct FlatState {
    const float *params, *mo, *vo;
} FlatState;

static int fill_from_flat(void *user, size_t begin, size_t n, float *params, float *mm,
                          float *vv, Err *e)
{
    (void)e;
    const FlatState *s = user;
    if (params != s->params + begin) /* params may be the master weights themselves */
        memcpy(params, s->params + begin, n * 4);
    if (mm)
        s->mo ? (void)memcpy(mm, s->mo + begin, n * 4) : (void)memset(mm, 0, n * 4);
    if (vv)
        s->vo ? (void)memcpy(vv, s->vo + begin, n * 4) : (void)memset(vv, 0, n * 4);
    return 0;
}

int pipe_mem_put_state(PipeMem *m, const float *params, const float *mo, const float *vo,
                       Err *e)
{
    FlatState s = {params, mo, vo};
    PipeMemFiller f = {.fill = fill_from_flat, .user = &s, .moments = mo || vo};
    return pipe_mem_fill_state(m, &f, e);
}

/* Adam's moments [begin, end) of a ZeroMoments set to zero (a WorkFn). */
typedef struct ZeroMoments {
    float *m, *v;
} ZeroMoments;

static void zero_moments(void *ctx, size_t begin, size_t end)
{
    const ZeroMoments *z = ctx;
    memset(z->m + begin, 0, (end - begin) * 4);
    memset(z->v + begin, 0, (end - begin) * 4);
}

/* The sub-group whose slice begins at parameter at (ssd: one whose states are on the SSD),
 * -1: none. */
static int group_at(const PipeMem *m, size_t at, bool ssd)
{
    for (int s = 0; s < m->G; s++)
        if (m->grp_begin[s] == at && (!ssd || m->ooc_index[s] >= 0))
            return s;
    return -1;
}

/* One range of the fill: f's values of [at, at + n) into params and, when it writes them, m
 * and v (else they stay the zeros put there); the progress told. */
static int fill_range(const PipeMemFiller *f, size_t at, size_t n, float *params, float *mm,
                      float *vv, size_t *done, Err *e)
{
    int rc = f->fill(f->user, at, n, params, f->moments ? mm : NULL, f->moments ? vv : NULL, e);
    *done += n;
    if (f->progress)
        progress_to(f->progress, (double)*done);
    return rc;
}

int pipe_mem_fill_state(PipeMem *m, const PipeMemFiller *f, Err *e)
{
    size_t G0 = m->gpu_state_params, X = m->cpu_state_end - G0, S = m->gpu_stage_params;
    size_t P = m->edge_params + (size_t)m->L * m->block_params, done = 0;
    int rc = 0;
    if (f->grain && f->grain <= S) /* the staging's ranges as the fill is fastest over them */
        S = S / f->grain * f->grain;
    /* the moments start at zero unless the fill gives them: zeroed once where they are
     * staged, each time where the fill writes them */
    if (G0)
        memset(gpu_stage_part(m, 1), 0, 2 * S * 4);
    for (size_t at = 0; at < G0 && !rc; at += S) {
        size_t n = G0 - at < S ? G0 - at : S;
        if (f->moments && at)
            memset(gpu_stage_part(m, 1), 0, n * 4), memset(gpu_stage_part(m, 2), 0, n * 4);
        rc = fill_range(f, at, n, gpu_stage_part(m, 0), gpu_stage_part(m, 1),
                        gpu_stage_part(m, 2), &done, e);
        if (!rc)
            rc = stage_to_gpu(m, at, n, f->wp, e);
    }
    /* the CPU sub-groups in place, one at a time: the progress told as each goes in */
    for (size_t at = G0; at < G0 + X && !rc;) {
        int s = group_at(m, at, false);
        if (s < 0)
            return err_set(e, -EINVAL, "internal: no sub-group starts at parameter %zu", at);
        size_t n = m->grp_end[s] - at, x = at - G0;
        ZeroMoments z = {m->m + x, m->v + x};
        if (!f->moments && !m->moments_fresh) /* else the fill writes them, or they are 0 */
            f->wp ? workpool_run(f->wp, zero_moments, &z, n, 4096) : zero_moments(&z, 0, n);
        rc = fill_range(f, at, n, m->master + x, z.m, z.v, &done, e);
        if (!rc)
            rc = put_range(m, at, n, -1, m->master + x, z.m, z.v, f->wp, e);
        at += n;
    }
    m->moments_fresh = false;
    /* the SSD sub-groups by their place in the layout, front to back */
    for (size_t at = m->cpu_state_end; at < P && !rc;) {
        int s = group_at(m, at, true);
        if (s < 0)
            return err_set(e, -EINVAL, "internal: no SSD sub-group starts at parameter %zu",
                           at);
        size_t n = m->grp_end[s] - at;
        float *buf = (float *)m->state_slot[0];
        memset(buf + n, 0, 2 * n * 4);
        rc = fill_range(f, at, n, buf, buf + n, buf + 2 * n, &done, e);
        if (!rc)
            rc = put_range(m, at, n, m->ooc_index[s], buf, buf + n, buf + 2 * n, f->wp, e);
        at += n;
    }
    return rc;
}

/* Values [begin, begin + take) of part of the GPU sub-groups' state, through the staging;
 * *take at most what it holds. */
static int read_gpu(PipeMem *m, int part, size_t begin, size_t *take, float *dst, Err *e)
{
    if (*take > m->gpu_stage_params)
        *take = m->gpu_stage_params;
    const float *from = part == 0 ? m->gpu_master : part == 1 ? m->gpu_m : m->gpu_v;
    DeviceCopy c = {gpu_stage_part(m, 0), from + begin, *take * 4};
    DeviceSpan span;
    int rc = m->ops->copy(m->dev, false, 1, &c, &span, e);
    if (!rc)
        memcpy(dst, gpu_stage_part(m, 0), *take * 4);
    return rc;
}

int pipe_mem_read(PipeMem *m, int part, size_t begin, size_t n, float *dst, int *cached,
                  Err *e)
{
    size_t G0 = m->gpu_state_params, X = m->cpu_state_end;
    while (n) {
        size_t take;
        if (begin < G0) {
            take = G0 - begin < n ? G0 - begin : n;
            int rc = read_gpu(m, part, begin, &take, dst, e);
            if (rc)
                return rc;
        } else if (begin < X) {
            const float *from = part == 0 ? m->master : part == 1 ? m->m : m->v;
            take = X - begin < n ? X - begin : n;
            memcpy(dst, from + (begin - G0), take * 4);
        } else {
            int s = 0;
            while (s < m->G && !(m->ooc_index[s] >= 0 && begin >= m->grp_begin[s] &&
                                 begin < m->grp_end[s]))
                s++;
            if (s == m->G)
                return err_set(e, -EINVAL, "internal: parameter %zu is in no sub-group", begin);
            float *buf = (float *)m->state_slot[0];
            if (*cached != s) {
                *cached = -1;
                Err e2;
                int rc = sync_io(m, &m->oa.states[m->ooc_index[s]], buf, false, &e2);
                if (rc) {
                    err_set(e, rc, "sub-group %d's optimizer states on the SSD: %s", s, e2.msg);
                    return pipe_mem_ssd_error(rc, e);
                }
                *cached = s;
            }
            size_t b0 = m->grp_begin[s], g = m->grp_end[s] - b0;
            take = m->grp_end[s] - begin < n ? m->grp_end[s] - begin : n;
            memcpy(dst, buf + (size_t)part * g + (begin - b0), take * 4);
        }
        begin += take, dst += take, n -= take;
    }
    return 0;
}

void pipe_mem_measured(const PipeMem *m, Footprint *f)
{
    memset(f, 0, sizeof *f);
    for (int t = 0; t < MEM_TAG_COUNT; t++) {
        f->bytes[t][TIER_GPU] = m->dev_bytes[t];
        f->bytes[t][TIER_CPU] = (double)m->pool.peak_tag[t];
        f->bytes[t][TIER_SSD] = m->ssd_bytes[t];
    }
}
