/* pipeline: the training loop of the out-of-core executor; see pipeline.h. The dispatcher and
 * the lanes' jobs are pipe_exec's, the placement and buffers pipe_mem's. */
#include "pipeline.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "checkpoint.h"
#include "eval.h"
#include "clock.h"
#include "hf_folder.h"
#include "pipe_exec.h"
#include "units.h"

/* ---- training ---------------------------------------------------------------------------------- */

static int check_plan(const TrainOptions *o, const Plan *p, const PipeConfig *pc, Err *e)
{
    if (!(pc->device->archs & 1u << o->model.arch))
        return err_set(e, -EINVAL, "model %s has the %s block, which the pipeline's %s device "
                       "does not compute yet: use --backend cpu (the fp32 reference), or plan "
                       "it with fuyou-sim", o->model.name, arch_name(o->model.arch),
                       pc->device->name);
    if (p->n_layer != o->model.n_layer || p->seq != o->seq ||
        (int64_t)p->n_micro * p->seqs_per_micro != o->seqs_per_step)
        return err_set(e, -EINVAL, "plan (%d blocks, %d micro-batches of %d x %d) does not "
                       "match the run (%d, a step of %d x %d)", p->n_layer, p->n_micro,
                       p->seqs_per_micro, p->seq, o->model.n_layer, o->seqs_per_step, o->seq);
    if (o->model.dtype == DTYPE_FP16 && pc->device->weight_type != DTYPE_FP32)
        return err_set(e, -EINVAL, "fp16 needs loss scaling, which the out-of-core pipeline "
                       "does not do yet (an overflow seen in one sub-group after others were "
                       "updated has no per-sub-group policy); use bf16");
    return 0;
}

/* What one pipe_train holds around the executor's Pipe; run_free takes it half-built. */
typedef struct PipeRun {
    Pipe pp;
    const Plan *plan;
    const PipeConfig *pc;
    TokenData data;
    Loader ld;
    Graph g;                 /* one micro-batch, in the device's weight type */
    FILE *log;
    TrainState st;
    int seg;                 /* iterations per segment, at most */
    bool cleared;            /* --overwrite: the old checkpoints, before the first save */
    double steady_s;         /* the gaps between iterations' ends within segments, summed */
    int n_steady;
    /* the segment being run: its first step, where the loader stands after each of its
     * iterations, and when the last of them ended (or the segment began) */
    TrainResult *r;
    int64_t seg_step;
    int64_t (*pos)[2];
    double last_end;
    int64_t saved_step;      /* the step last saved (0: none yet) */
    EvalSet ev;              /* --eval-data (ev.batches 0 without it) */
    double own_rss;          /* the peak resident set before the plan's buffers */
    /* an evaluated step's row and progress line wait for its evaluation (record_step) */
    bool row_waits;
    float wait_loss;
    double wait_tps;
} PipeRun;

static void run_free(PipeRun *pr)
{
    Pipe *pp = &pr->pp;
    free(pr->pos);
    eval_free(&pr->ev);
    loader_free(&pr->ld);
    data_free(&pr->data);
    graph_free(&pr->g);
    for (int i = 0; i < N_THREAD_LANES; i++)
        lane_free(&pp->lanes[i]);
    lane_bell_free(&pp->bell);
    pipe_mem_free(&pp->mem);
    workpool_free(&pp->wp_adam);
    workpool_free(&pp->wp_compute);
    workpool_free(&pp->wp_sum);
    workpool_free(&pp->wp_check);
    layout_free(&pp->layout);
    sched_free(&pp->s);
    free(pp->inputs), free(pp->targets), free(pp->sq), free(pp->sq_count), free(pp->losses);
    free(pp->norms), free(pp->rows), free(pp->ids);
}

static int write_traces(Pipe *pp, const PipeConfig *pc, Err *e)
{
    pipe_trace_fix_ids(pp);
    int rc = 0;
    if (pc->trace_path)
        rc = trace_save(pc->trace_path, TRACE_TSV, pp->rows, pp->n_rows, e);
    if (!rc && pc->chrome_path)
        rc = trace_save(pc->chrome_path, TRACE_CHROME, pp->rows, pp->n_rows, e);
    return rc;
}

/* The traces at the end (rc: the run's error, if any): what ran before a failure too, for its
 * diagnosis, the failure staying the error. */
static int finish_traces(PipeRun *pr, int rc, Err *e)
{
    Pipe *pp = &pr->pp;
    const PipeConfig *pc = pr->pc;
    if (!rc)
        return write_traces(pp, pc, e);
    if (e && pp->n_rows && (pc->trace_path || pc->chrome_path)) {
        Err e2;
        size_t len = strlen(e->msg);
        if (!write_traces(pp, pc, &e2) && len < sizeof e->msg)
            snprintf(e->msg + len, sizeof e->msg - len, " (the trace holds the %d tasks that "
                     "ran: %s)", pp->n_rows, pc->trace_path ? pc->trace_path : pc->chrome_path);
    }
    return rc;
}

/* The compute and optimizer lanes each have a worker pool (a pool runs one job at a time).
 * On a GPU the compute lane needs no CPU threads, and the optimizer's pool leaves two cores
 * to the dispatcher and the lane threads (plan_adam_threads). */
static int init_pools(PipeRun *pr, Err *e)
{
    Pipe *pp = &pr->pp;
    const TrainOptions *o = pp->o;
    bool on_gpu = !pr->pc->device->on_host;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int adam_threads = o->threads ? o->threads : plan_adam_threads((int)cores, on_gpu);
    int rc = workpool_init_nice(&pp->wp_adam, adam_threads, pr->pc->optim_nice, e);
    if (!rc)
        rc = workpool_init(&pp->wp_compute, on_gpu ? 1 : o->threads, e);
    if (!rc) /* micro-batch gradient sums (the cost model charges them for these threads) */
        rc = workpool_init_nice(&pp->wp_sum, pr->plan->n_micro > 1
                                                 ? plan_grad_sum_threads((int)cores)
                                                 : 1, pr->pc->optim_nice, e);
    return rc;
}

static int iteration_ended(void *user, int i, Err *e);

/* A segment's inputs, targets, norms, losses and loader positions, r->losses, and the hook
 * that records each step as it ends. 0 or -ENOMEM with e. */
static int alloc_segment(PipeRun *pr, TrainResult *r, Err *e)
{
    Pipe *pp = &pr->pp;
    size_t N = (size_t)pr->plan->seqs_per_micro * pp->o->seq, seg = (size_t)pr->seg;
    pp->inputs = calloc(seg * pp->M * N, sizeof(int));
    pp->targets = calloc(seg * pp->M * N, sizeof(int));
    pp->sq = calloc(seg * (size_t)plan_subgroup_count(pr->plan), sizeof(double));
    pp->sq_count = calloc(seg, sizeof(int));
    pp->losses = calloc(seg * pp->M, sizeof(float));
    pp->norms = calloc(seg, sizeof(double));
    pr->pos = calloc(seg, sizeof *pr->pos);
    r->losses = calloc((size_t)(pp->o->steps > 0 ? pp->o->steps : 1), sizeof *r->losses);
    pr->r = r;
    pp->iter_done = iteration_ended;
    pp->iter_user = pr;
    if (!pp->inputs || !pp->targets || !pp->sq || !pp->sq_count ||
        !pp->losses || !pp->norms || !pr->pos || !r->losses)
        return err_set(e, -ENOMEM, "out of memory for %zu parameters", pp->layout.total);
    return 0;
}

/* The most this process has held in memory so far (its peak resident set), in bytes. */
static double peak_rss_bytes(void)
{
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) ? 0 : (double)u.ru_maxrss * 1024;
}

/* The plan checked, the data, the graph, the threads, the evaluation's data, a segment's
 * arrays and the placement's buffers (pipe_mem), the last. 0 or -errno with e. */
static int run_init(PipeRun *pr, TrainResult *r, Err *e)
{
    Pipe *pp = &pr->pp;
    const TrainOptions *o = pp->o;
    const Plan *plan = pr->plan;
    int rc;
    if ((rc = check_plan(o, plan, pr->pc, e)) || (rc = trainer_load_data(o, &pr->data, e)))
        return rc;
    ModelConfig gc = o->model;
    gc.dtype = pr->pc->device->weight_type; /* the graph's bytes are what the device moves */
    if ((rc = graph_init(&pr->g, &gc, plan->seqs_per_micro, o->seq, e)))
        return rc;
    pr->pp.g = &pr->g; /* the DAGs' ops, training's and evaluation's */
    if (layout_init(&pp->layout, &o->model))
        return err_set(e, -ENOMEM, "out of memory");
    if ((rc = init_pools(pr, e)))
        return rc;
    if (o->n_eval && /* in the plan's micro-batches: the buffers are theirs */
        (rc = eval_init(&pr->ev, o->eval_paths, o->n_eval, o->data_format, o->model.vocab,
                        o->model.name, plan->seqs_per_micro, o->seq, o->eval_batches, e)))
        return rc;
    if ((rc = alloc_segment(pr, r, e)))
        return rc;
    pr->own_rss = peak_rss_bytes(); /* the program's own: all but the plan's buffers */
    rc = pipe_mem_init(&pp->mem, &o->model, plan, plan->seqs_per_micro, o->seq, pr->pc,
                       &pp->wp_compute, &pp->wp_adam, e);
    /* a read from the SSD tier is checked on a quarter of the cores (at most
     * PIPE_CHECK_THREADS), at the lanes' priority: its successors wait for the check */
    long quarter = sysconf(_SC_NPROCESSORS_ONLN) / 4;
    if (!rc && pp->mem.store_opened)
        rc = workpool_init(&pp->wp_check, quarter < 1 ? 1 : quarter > PIPE_CHECK_THREADS
                                                                ? PIPE_CHECK_THREADS
                                                                : (int)quarter, e);
    return rc;
}

/* Fills the tiers with fill (moments: it gives Adam's m and v), saying how far it is when it
 * takes long: what it is doing in what. */
static int fill_tiers(PipeRun *pr, PipeMemFill fill, void *user, bool moments, size_t grain,
                      const char *what, Err *e)
{
    Pipe *pp = &pr->pp;
    Progress pg;
    progress_begin(&pg, pp->o->progress, what, (double)pp->layout.total, "parameters");
    PipeMemFiller f = {.fill = fill, .user = user, .moments = moments, .wp = &pp->wp_adam,
                       .progress = &pg, .grain = grain};
    int rc = pipe_mem_fill_state(&pp->mem, &f, e);
    if (!rc)
        progress_end(&pg);
    return rc;
}

static int fill_from_folder(void *user, size_t begin, size_t n, float *params, float *m,
                            float *v, Err *e)
{
    (void)m, (void)v; /* the moments start at zero */
    /* the tiers' ranges are their buffers', not the tensors': values, tensors cut */
    return hf_reader_read_values(user, begin, n, params, e);
}

/* --init-from: the folder checked whole, then read straight into the tiers, one optimizer
 * sub-group's range at a time (the CPU-resident ones' at once, into their master weights):
 * no whole-model array, so a 70B folder loads within the host budget. */
static int start_from_folder(PipeRun *pr, Err *e)
{
    Pipe *pp = &pr->pp;
    const TrainOptions *o = pp->o;
    HfReader *r;
    int rc = hf_reader_open(&r, o->init_from, &o->model, &pp->layout, e);
    if (!rc) {
        hf_reader_set_pool(r, &pp->wp_adam); /* the fp32 masters' pages touched in parallel */
        rc = fill_tiers(pr, fill_from_folder, r, false, 0, "loading the weights", e);
    }
    hf_reader_close(r);
    pr->st.data = pr->data.print; /* as trainer_check_start sets them on the other paths */
    pr->st.sched_steps = o->steps;
    return rc;
}

static int fill_from_checkpoint(void *user, size_t begin, size_t n, float *params, float *m,
                                float *v, Err *e)
{
    return ckpt_reader_read(user, begin, n, params, m, v, e);
}

/* One step directory of --resume read range by range into the tiers (ckpt_load_with's). */
static int load_step_into_tiers(void *user, const char *step_dir, Err *e)
{
    PipeRun *pr = user;
    Pipe *pp = &pr->pp;
    CkptReader *r;
    int rc = ckpt_reader_open(&r, step_dir, &pp->o->model, &pp->layout, e);
    if (!rc) {
        ckpt_reader_set_pool(r, &pp->wp_adam); /* as start_from_folder's */
        rc = fill_tiers(pr, fill_from_checkpoint, r, true, 0, "loading the checkpoint", e);
    }
    ckpt_reader_close(r);
    return rc;
}

/* --resume: the checkpoint (latest's, or the newest complete one) read range by range into the
 * tiers, as --init-from's folder is. */
static int start_from_checkpoint(PipeRun *pr, Err *e)
{
    Pipe *pp = &pr->pp;
    const TrainOptions *o = pp->o;
    int rc = ckpt_load_with(o->resume_dir, &o->model, load_step_into_tiers, pr, &pr->st, e);
    if (!rc && pr->st.skipped)
        rc = err_set(e, -EINVAL, "%s skipped updates on loss-scale overflow; the executor does "
                     "not scale losses", o->resume_dir);
    return rc ? rc : trainer_check_start(o, &pr->data, &pr->st, e);
}

/* A fresh run's initial weights (trainer_init_range), drawn range by range as they go in. */
static int fill_fresh(void *user, size_t begin, size_t n, float *params, float *m, float *v,
                      Err *e)
{
    (void)m, (void)v, (void)e; /* the moments start at zero */
    const PipeRun *pr = user;
    const TrainOptions *o = pr->pp.o;
    trainer_init_range(&o->model, &pr->pp.layout, o->seed, begin, n, params,
                       (WorkPool *)&pr->pp.wp_adam);
    return 0;
}

/* The starting state put where the plan keeps it, range by range, with no whole-model array:
 * --resume and --init-from read their files into the tiers, a fresh run draws its initial
 * weights into them. */
static int put_start_state(PipeRun *pr, Err *e)
{
    Pipe *pp = &pr->pp;
    const TrainOptions *o = pp->o;
    if (o->resume_dir)
        return start_from_checkpoint(pr, e);
    if (o->init_from)
        return start_from_folder(pr, e);
    int rc = trainer_check_start(o, &pr->data, &pr->st, e);
    return rc ? rc : fill_tiers(pr, fill_fresh, pr, false, trainer_init_grain(&pp->wp_adam),
                               "initialising the weights", e);
}

/* Where the run starts: the state in place, the loader at its place, the log open, the lanes
 * started. */
static int run_start(PipeRun *pr, Err *e)
{
    Pipe *pp = &pr->pp;
    const TrainOptions *o = pp->o;
    int rc;
    if ((rc = put_start_state(pr, e)) ||
        (rc = loader_init(&pr->ld, &pr->data, pr->plan->seqs_per_micro, o->seq, pr->st.seed,
                          e)) ||
        (o->resume_dir && (rc = trainer_seek(o, &pr->ld, &pr->st, e))) ||
        (rc = trainer_open_log(o, pr->st.step, &pr->log, e)))
        return rc;
    /* the CPU device computes on the cores a spinning thread would take */
    double spin = pp->mem.ops->on_host ? 0 : LANE_SPIN_S;
    lane_bell_set_spin(&pp->bell, spin);
    for (int i = 0; i < N_THREAD_LANES; i++) {
        if ((rc = lane_init(&pp->lanes[i], pipe_lane_fns[i], pp, &pp->bell, e)))
            return rc;
        lane_set_spin(&pp->lanes[i], spin);
        if (i == LANE_GPU)
            lane_set_queue(&pp->lanes[i], pipe_compute_ended);
        if (pr->pc->jitter_us)
            lane_set_jitter(&pp->lanes[i], pr->pc->jitter_us, 0x9e3779b9u * (unsigned)(i + 1));
    }
    return 0;
}

/* The iterations of the segment that starts at step: at most pr->seg, ending where a
 * checkpoint is due, so it is written at rest. */
static int segment_len(const PipeRun *pr, int64_t step)
{
    const TrainOptions *o = pr->pp.o;
    int64_t left = o->steps - step + 1, n = left < pr->seg ? left : pr->seg;
    if (o->save_dir && o->save_every > 0) {
        int64_t to_save = o->save_every - (step - 1) % o->save_every;
        if (to_save < n)
            n = to_save;
    }
    for (int64_t k = 1; o->n_eval && k < n; k++)
        if (trainer_eval_due(o, step + k - 1))
            n = k; /* an evaluation runs at rest, after its step */
    return (int)n;
}

/* One segment: iterations [iter0, iter0 + n) of this run, one DAG (ended early, at
 * pp->stop_iter, when a stop is asked). */
static int run_segment(PipeRun *pr, int n, Err *e)
{
    Pipe *pp = &pr->pp;
    size_t N = (size_t)pr->plan->seqs_per_micro * pp->o->seq;
    for (int i = 0; i < n * pp->M; i++) {
        loader_next(&pr->ld, pp->inputs + i * N, pp->targets + i * N);
        if (i % pp->M == pp->M - 1) {
            pr->pos[i / pp->M][0] = pr->ld.epoch;
            pr->pos[i / pp->M][1] = pr->ld.index;
        }
    }
    memset(pp->sq_count, 0, (size_t)n * sizeof *pp->sq_count);
    pr->last_end = clock_monotonic_s();
    sched_free(&pp->s);
    int rc = sched_build(&pp->s, &pr->g, pr->plan, n, e);
    return rc ? rc : pipe_run_dag(pp, e);
}

/* The steady state: the gaps between the last task ends of the segment's n iterations (its
 * trace rows from rows0 on). */
static void add_steady(PipeRun *pr, int rows0, int n)
{
    Pipe *pp = &pr->pp;
    double *it_end = calloc((size_t)n, sizeof(double));
    if (!it_end)
        return;
    for (int k = rows0; k < pp->n_rows; k++) {
        int i = pp->rows[k].iter - pp->iter0;
        if (i < n && pp->rows[k].end_s > it_end[i])
            it_end[i] = pp->rows[k].end_s;
    }
    for (int k = 1; k < n; k++) {
        pr->steady_s += it_end[k] - it_end[k - 1];
        pr->n_steady++;
    }
    free(it_end);
}

/* Step's row in the log (eval_loss NaN: not evaluated) and its progress line. */
static int log_step(PipeRun *pr, int64_t step, float loss, double tps, double eval_loss, Err *e)
{
    Pipe *pp = &pr->pp;
    const TrainOptions *o = pp->o;
    int i = (int)(step - pr->seg_step);
    int rc = trainer_log_row(o, pr->log, step, loss, trainer_lr(o, step), pp->norms[i], tps, 1.0,
                             eval_loss, e);
    if (!rc)
        trainer_progress(o, step, pr->r->first_step - 1, loss, tps,
                         clock_monotonic_s() - pp->t0, step == o->steps);
    return rc;
}

/* Segment iteration i's step, which took dt seconds since the one before it ended: its loss
 * (the micro-batches' mean, as the in-memory trainer takes it) into r, the log and the
 * progress line. */
static int record_step(PipeRun *pr, int i, double dt, Err *e)
{
    Pipe *pp = &pr->pp;
    const TrainOptions *o = pp->o;
    int64_t step = pr->seg_step + i;
    double tps = (double)o->seqs_per_step * o->seq / dt, lsum = 0;
    for (int k = 0; k < pp->M; k++)
        lsum += pp->losses[i * pp->M + k];
    float loss = pp->M == 1 ? pp->losses[i] : (float)(lsum / pp->M);
    if (!isfinite(loss))
        return err_set(e, -EDOM, "step %lld: the loss is %f; lower --lr or check the data",
                       (long long)step, loss);
    trainer_result_add(pr->r, step, loss);
    if (trainer_eval_due(o, step)) { /* the row waits for its evaluation (end_segment) */
        pr->row_waits = true;
        pr->wait_loss = loss;
        pr->wait_tps = tps;
        return 0;
    }
    return log_step(pr, step, loss, tps, NAN, e);
}

/* The dispatcher's hook: segment iteration i ended, its step recorded as it ends (the log
 * gets a row per step, not per segment). Iterations end in order: every task of one has a
 * successor in the next. */
static int iteration_ended(void *user, int i, Err *e)
{
    PipeRun *pr = user;
    double now = clock_monotonic_s(), dt = now - pr->last_end;
    pr->last_end = now;
    return record_step(pr, i, dt, e);
}

/* A stopped segment ran iterations up to last: the trace and the lanes' busy time keep theirs
 * only (a later one's tasks in flight at the stop ended, the rest never ran). */
static void drop_rows_after(Pipe *pp, int rows0, int last)
{
    int kept = rows0;
    for (int k = rows0; k < pp->n_rows; k++) {
        if (pp->rows[k].iter - pp->iter0 > last) {
            Resource r;
            if (!resource_parse(pp->rows[k].resource, &r))
                pp->busy[r] -= pp->rows[k].end_s - pp->rows[k].start_s;
            continue;
        }
        pp->rows[kept] = pp->rows[k];
        memcpy(pp->ids[kept++], pp->ids[k], SCHED_ID_MAX);
    }
    pp->n_rows = kept;
}

/* A checkpoint's source: the state read from its tiers, range by range (pipe_mem_read). */
typedef struct StateRead {
    PipeMem *mem;
    int cached;
} StateRead;

static int read_state(void *user, HfPart part, size_t begin, size_t n, float *dst, Err *e)
{
    StateRead *sr = user;
    return pipe_mem_read(sr->mem, (int)part, begin, n, dst, &sr->cached, e);
}

/* The held-out loss of the weights at rest: the evaluation's batches as forward passes
 * (sched_build_forward) on the training plan's buffers, in DAGs of at most a segment's
 * micro-batches (its arrays hold them), each batch's loss weighted by the targets it counts,
 * summed in order as eval_run sums them (a batch that counts none adds nothing). 0 or -errno
 * with e. */
static int run_eval(PipeRun *pr, EvalResult *er, Err *e)
{
    Pipe *pp = &pr->pp;
    const Loader *l = &pr->ev.ld;
    size_t N = (size_t)l->B * l->T;
    int per_dag = pr->seg * pp->M, M = pp->M, rc = 0;
    int *counted = malloc((size_t)per_dag * sizeof *counted);
    if (!counted)
        return err_set(e, -ENOMEM, "out of memory for the evaluation");
    int (*hook)(void *, int, Err *) = pp->iter_done;
    pp->M = 1, pp->iter_done = NULL, pp->quiet = true;
    double sum = 0;
    *er = (EvalResult){0};
    Progress pg;
    progress_begin(&pg, pp->o->progress, "evaluating", (double)pr->ev.batches, "batches");
    for (int64_t k0 = 0; !rc && k0 < pr->ev.batches; k0 += per_dag) {
        int n = pr->ev.batches - k0 < per_dag ? (int)(pr->ev.batches - k0) : per_dag;
        for (int i = 0; i < n; i++) {
            er->sequences += loader_fill(l, (size_t)(k0 + i) * (size_t)l->B, pp->inputs + i * N,
                                         pp->targets + i * N);
            counted[i] = backend_count_targets((int)N, pp->targets + i * N);
        }
        sched_free(&pp->s);
        rc = sched_build_forward(&pp->s, &pr->g, pr->plan, n, e);
        if (!rc)
            rc = pipe_run_dag(pp, e);
        for (int i = 0; !rc && i < n; i++) {
            sum += counted[i] ? (double)pp->losses[i] * counted[i] : 0;
            er->targets += counted[i];
        }
        progress_to(&pg, (double)(k0 + n));
    }
    pp->M = M, pp->iter_done = hook, pp->quiet = false;
    free(counted);
    if (!rc)
        progress_end(&pg);
    return rc ? rc : eval_finish(&pr->ev, sum, er, e);
}

/* After a segment of n iterations that ended at step: the evaluation when one is due (and the
 * row and progress line of the step, which waited for it), the state a checkpoint records, and
 * the checkpoint when one is due. */
static int end_segment(PipeRun *pr, int64_t step, int n, Err *e)
{
    Pipe *pp = &pr->pp;
    const TrainOptions *o = pp->o;
    TrainState *st = &pr->st;
    st->step = step;
    st->epoch = pr->pos[n - 1][0];
    st->index = pr->pos[n - 1][1];
    st->prev_grad_norm = pp->prev_norm = pp->norms[n - 1];
    if (pr->row_waits) {
        EvalResult er;
        int rc = run_eval(pr, &er, e);
        if (!rc)
            trainer_eval_done(o, step, &er, pr->r);
        pr->row_waits = false;
        Err log_e;
        int log_rc = log_step(pr, step, pr->wait_loss, pr->wait_tps, rc ? NAN : er.loss,
                              rc ? &log_e : e);
        if (rc || log_rc)
            return rc ? rc : log_rc;
    }
    if (!trainer_save_due(o, step))
        return 0;
    TrainHparams hp;
    CkptSaveOptions so = trainer_save_options(o, &hp);
    int rc = trainer_clear_old_checkpoints(o, &pr->cleared, e);
    StateRead sr = {.mem = &pp->mem, .cached = -1};
    HfSource src = {.get = read_state, .user = &sr};
    if (!rc)
        rc = ckpt_save_from(o->save_dir, &o->model, &pp->layout, &src, st, &so, e);
    if (!rc)
        pr->saved_step = step;
    return rc;
}

/* Steps [step, step + n): one segment; when a stop was asked in it, the steps up to the one
 * it ended with, saved, and -EINTR (trainer_stopped). */
static int train_segment(PipeRun *pr, int64_t step, int n, Err *e)
{
    Pipe *pp = &pr->pp;
    pp->iter0 = (int)(step - 1 - pp->step0);
    pr->seg_step = step;
    int rows0 = pp->n_rows;
    int rc = run_segment(pr, n, e);
    if (rc)
        return pipe_mem_ssd_error(rc, e);
    if (pp->stop_iter >= 0) {
        n = pp->stop_iter + 1;
        drop_rows_after(pp, rows0, pp->stop_iter);
    }
    add_steady(pr, rows0, n);
    rc = end_segment(pr, step + n - 1, n, e);
    return rc ? rc : trainer_stopped(pp->o, step + n - 1, pr->saved_step == step + n - 1, e);
}

/* What the run used, beside what the plan predicted (rep NULL: nothing). */
static void fill_report(const PipeRun *pr, const TrainResult *r, double elapsed,
                        PipeReport *rep)
{
    if (!rep)
        return;
    memset(rep, 0, sizeof *rep);
    rep->budget_short = pr->pp.mem.budget_short;
    if (!pr->g.ops)
        return;
    const Pipe *pp = &pr->pp;
    pipe_mem_measured(&pp->mem, &rep->measured);
    /* the simulator models the CUDA lane; the CPU reference lane is held to the same
     * accounting on its own sizes */
    if (pr->pc->device->on_host)
        pipe_mem_planned(&pp->mem, &rep->predicted);
    else
        footprint_compute(&rep->predicted, &pr->g, pr->plan);
    memcpy(rep->busy_s, pp->busy, sizeof pp->busy);
    rep->device = pr->pc->device->on_host ? pr->pc->device->name : "gpu";
    rep->budget[TIER_GPU] = (double)pr->pc->gpu_budget;
    rep->budget[TIER_CPU] = (double)pr->pc->cpu_budget;
    rep->elapsed_s = elapsed;
    /* what this process held: its own, then the plan's buffers where they are host memory */
    rep->host_own_bytes = pr->own_rss;
    rep->host_plan_bytes = footprint_tier_total(&rep->measured, TIER_CPU) +
                           (pr->pc->device->on_host ? footprint_tier_total(&rep->measured,
                                                                           TIER_GPU) : 0);
    rep->host_peak_bytes = peak_rss_bytes();
    rep->ssd_file_bytes = pp->mem.store_opened ? (double)pp->mem.st.next_base : 0;
    rep->iterations = r->n_losses;
    rep->steady_iter_s = pr->n_steady ? pr->steady_s / pr->n_steady : 0;
}

int pipe_train(const TrainOptions *o, const Plan *plan, const PipeConfig *pc, TrainResult *r,
               PipeReport *rep, Err *e)
{
    memset(r, 0, sizeof *r);
    PipeRun pr = {.pp = {.o = o, .isa = adam_isa_best(), .M = plan->n_micro},
                  .plan = plan, .pc = pc, .st = {.seed = o->seed},
                  .seg = pc->segment_iters > 0 ? pc->segment_iters : 8};
    Pipe *pp = &pr.pp;
    lane_bell_init(&pp->bell);
    int rc = run_init(&pr, r, e);
    if (!rc)
        rc = run_start(&pr, e);
    pp->step0 = pr.st.step;
    pp->prev_norm = pr.st.prev_grad_norm;
    r->first_step = pr.st.step + 1;
    pp->t0 = clock_monotonic_s();
    if (!rc && o->steps == 0) { /* evaluate only: the weights as they were loaded */
        EvalResult er;
        rc = run_eval(&pr, &er, e);
        if (!rc)
            trainer_eval_done(o, pr.st.step, &er, r);
    }
    for (int64_t step = pr.st.step + 1; !rc && step <= o->steps;) {
        int n = segment_len(&pr, step);
        rc = train_segment(&pr, step, n, e);
        step += n;
    }
    double elapsed = clock_monotonic_s() - pp->t0;
    r->tokens_per_s = elapsed > 0 ? (double)r->n_losses * o->seqs_per_step * o->seq / elapsed
                                  : 0;
    r->loss_scale = 1;
    rc = finish_traces(&pr, rc, e);
    fill_report(&pr, r, elapsed, rep);
    rc = trainer_close_log(o, pr.log, rc, e);
    run_free(&pr);
    return rc;
}

/* One row of the memory report: a label and, per tier, measured / predicted bytes. */
static void report_row(FILE *out, const char *label, const double *measured,
                       const double *predicted)
{
    fprintf(out, "%-12s", label);
    for (int t = 0; t < TIER_COUNT; t++) {
        char a[24], b[24], cell[64];
        snprintf(cell, sizeof cell, "%s / %s", units_bytes(a, sizeof a, measured[t]),
                 units_bytes(b, sizeof b, predicted[t]));
        fprintf(out, " %25s", cell);
    }
    fprintf(out, "\n");
}

void pipe_report_print(FILE *out, const PipeReport *rep)
{
    /* on another backend (the cpu one) the device tier and compute lane are named "device" */
    bool on_gpu = !rep->device || !strcmp(rep->device, "gpu");
    char device[32];
    snprintf(device, sizeof device, on_gpu ? "gpu" : "device (%s)", rep->device);
    const char *tier[TIER_COUNT] = {device, "cpu", "ssd"};
    fprintf(out, "memory (measured peak / predicted by the footprint):\n%-12s", "");
    for (int t = 0; t < TIER_COUNT; t++)
        fprintf(out, " %25s", tier[t]);
    fprintf(out, "\n");
    for (int k = 0; k < MEM_TAG_COUNT; k++)
        report_row(out, mem_tag_name(k), rep->measured.bytes[k], rep->predicted.bytes[k]);
    double measured[TIER_COUNT], predicted[TIER_COUNT];
    for (int t = 0; t < TIER_COUNT; t++) {
        measured[t] = footprint_tier_total(&rep->measured, (Tier)t);
        predicted[t] = footprint_tier_total(&rep->predicted, (Tier)t);
    }
    report_row(out, "total", measured, predicted);
    fprintf(out, "%-12s", "budget");
    for (int t = 0; t < TIER_COUNT; t++) {
        char b[24];
        fprintf(out, " %25s", rep->budget[t] > 0 ? units_bytes(b, sizeof b, rep->budget[t])
                              : t == TIER_SSD ? "the disk's free space" : "none given");
    }
    fprintf(out, "\n");
    char b0[24], b1[24], b2[24], b3[24];
    fprintf(out, "host memory: peak resident %s = the program's own %s (before the plan's "
            "buffers) + %s more; the plan's host memory (%s) is %s\n",
            units_bytes(b0, sizeof b0, rep->host_peak_bytes),
            units_bytes(b1, sizeof b1, rep->host_own_bytes),
            units_bytes(b2, sizeof b2, rep->host_peak_bytes - rep->host_own_bytes),
            on_gpu ? "its cpu tier" : "its device and cpu tiers",
            units_bytes(b3, sizeof b3, rep->host_plan_bytes));
    if (rep->ssd_file_bytes > 0)
        fprintf(out, "ssd files: %s reserved on disk for the ssd tier's %s (each tensor rounded "
                "up to the store's chunk)\n", units_bytes(b0, sizeof b0,
                                                               rep->ssd_file_bytes),
                units_bytes(b1, sizeof b1, footprint_tier_total(&rep->measured, TIER_SSD)));
    fprintf(out, "lanes busy over %d iterations in %.3f s (steady iteration %.4f s):",
            rep->iterations, rep->elapsed_s, rep->steady_iter_s);
    for (int r = 0; r < RES_COUNT; r++)
        fprintf(out, " %s %.3f s", r == RES_GPU && !on_gpu ? "device" : resource_name(r),
                rep->busy_s[r]);
    fprintf(out, "\n");
}
