/* pipeline: the training loop of the out-of-core executor; see pipeline.h. The dispatcher and
 * the lanes' jobs are pipe_exec's, the placement and buffers pipe_mem's. */
#include "pipeline.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "clock.h"
#include "pipe_exec.h"
#include "units.h"

/* ---- training ---------------------------------------------------------------------------------- */

static int check_plan(const TrainOptions *o, const Plan *p, const PipeConfig *pc, Err *e)
{
    if (p->weights == TIER_GPU || p->optim == TIER_GPU)
        return err_set(e, -EINVAL, "the out-of-core pipeline keeps weights and optimizer states "
                       "off the GPU (the plan has weights on %s, states on %s): use --weights "
                       "and --optim cpu or ssd, or train without --offload",
                       tier_name(p->weights), tier_name(p->optim));
    if (p->n_layer != o->model.n_layer || p->seq != o->seq ||
        (int64_t)p->micro_batches * p->micro_batch != o->seqs_per_step)
        return err_set(e, -EINVAL, "plan (%d blocks, %d micro-batches of %d x %d) does not "
                       "match the run (%d, a step of %d x %d)", p->n_layer, p->micro_batches,
                       p->micro_batch, p->seq, o->model.n_layer, o->seqs_per_step, o->seq);
    if (o->model.dtype == DTYPE_FP16 && pc->device->weight_type != DTYPE_FP32)
        return err_set(e, -EINVAL, "fp16 needs loss scaling, which the out-of-core pipeline "
                       "does not do yet (an overflow seen in one sub-group after others were "
                       "updated has no per-sub-group policy); use bf16");
    return 0;
}

static void pipe_free(Pipe *pp)
{
    for (int i = 0; i < N_THREAD_LANES; i++)
        lane_free(&pp->lanes[i]);
    lane_bell_free(&pp->bell);
    pipe_mem_free(&pp->mem);
    workpool_free(&pp->wp_adam);
    workpool_free(&pp->wp_compute);
    workpool_free(&pp->wp_sum);
    gpt2_layout_free(&pp->layout);
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

static int alloc_arrays(size_t P, float **params, float **m, float **v)
{
    *params = calloc(P, sizeof **params);
    *m = calloc(P, sizeof **m);
    *v = calloc(P, sizeof **v);
    return *params && *m && *v ? 0 : -ENOMEM;
}

/* One segment: iterations [iter0, iter0 + n) of this run, one DAG. */
static int run_segment(Pipe *pp, const Graph *g, const Plan *p, Loader *ld, int n, Err *e)
{
    size_t N = (size_t)p->micro_batch * pp->o->seq;
    for (int i = 0; i < n * pp->M; i++)
        loader_next(ld, pp->inputs + i * N, pp->targets + i * N);
    memset(pp->sq_count, 0, (size_t)n * sizeof *pp->sq_count);
    sched_free(&pp->s);
    pp->g = g;
    int rc = sched_build(&pp->s, g, p, n, e);
    return rc ? rc : pipe_run_dag(pp, e);
}

int pipe_train(const TrainOptions *o, const Plan *plan, const PipeConfig *pc, TrainResult *r,
               PipeReport *rep, Err *e)
{
    memset(r, 0, sizeof *r);
    const ModelConfig *c = &o->model;
    int seg = pc->segment_iters > 0 ? pc->segment_iters : 8;
    Pipe pp = {.o = o, .isa = adam_isa_best(), .M = plan->micro_batches};
    TokenData data = {0};
    Loader ld = {0};
    Graph g = {0};
    float *params = NULL, *m = NULL, *v = NULL;
    FILE *log = NULL;
    bool cleared = false; /* --overwrite: the old checkpoints, before the first save */
    lane_bell_init(&pp.bell);
    int rc = check_plan(o, plan, pc, e);
    if (!rc)
        rc = trainer_load_data(o, &data, e);
    ModelConfig gc = *c;
    gc.dtype = pc->device->weight_type; /* the graph's bytes are what the device moves */
    if (!rc)
        rc = graph_init(&g, &gc, plan->micro_batch, o->seq, e);
    if (!rc && gpt2_layout_init(&pp.layout, c))
        rc = err_set(e, -ENOMEM, "out of memory");
    /* The compute and optimizer lanes each have a worker pool (a pool runs one job at a time).
     * On a GPU the compute lane needs no CPU threads, and the optimizer's pool leaves two cores
     * to the dispatcher and the lane threads (plan_adam_threads). */
    bool on_gpu = !pc->device->on_host;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int adam_threads = o->threads ? o->threads : plan_adam_threads((int)cores, on_gpu);
    if (!rc)
        rc = workpool_init_nice(&pp.wp_adam, adam_threads, pc->optim_nice, e);
    if (!rc)
        rc = workpool_init(&pp.wp_compute, on_gpu ? 1 : o->threads, e);
    if (!rc) /* micro-batch gradient sums (the cost model charges them for these threads) */
        rc = workpool_init_nice(&pp.wp_sum, plan->micro_batches > 1
                                                ? plan_grad_sum_threads((int)cores)
                                                : 1, pc->optim_nice, e);
    if (!rc)
        rc = pipe_mem_init(&pp.mem, c, plan, plan->micro_batch, o->seq, pc, &pp.wp_compute, e);
    size_t P = pp.layout.total, N = (size_t)plan->micro_batch * o->seq;
    if (!rc) {
        pp.inputs = calloc((size_t)seg * pp.M * N, sizeof(int));
        pp.targets = calloc((size_t)seg * pp.M * N, sizeof(int));
        pp.sq = calloc((size_t)seg * pp.mem.G, sizeof(double));
        pp.sq_count = calloc((size_t)seg, sizeof(int));
        pp.losses = calloc((size_t)seg * pp.M, sizeof(float));
        pp.norms = calloc((size_t)seg, sizeof(double));
        r->losses = calloc((size_t)(o->steps > 0 ? o->steps : 1), sizeof *r->losses);
        if (!pp.inputs || !pp.targets || !pp.sq || !pp.sq_count ||
            !pp.losses || !pp.norms || !r->losses)
            rc = err_set(e, -ENOMEM, "out of memory for %zu parameters", P);
    }
    /* Whole-model fp32 arrays only where a file is read or written: a fresh run with the states
     * in CPU memory initialises the master weights where they live (GPT-3 6.7B's 27 GB each). */
    TrainState st = {.seed = o->seed};
    bool in_place = !o->resume_dir && !o->init_from && plan->optim == TIER_CPU;
    if (!rc && (!in_place || o->save_dir) && alloc_arrays(P, &params, &m, &v))
        rc = err_set(e, -ENOMEM, "out of memory for %zu parameters", P);
    if (!rc && o->resume_dir)
        rc = ckpt_load(o->resume_dir, c, &pp.layout, params, m, v, &st, e);
    else if (!rc && o->init_from)
        rc = ckpt_load_model(o->init_from, c, &pp.layout, params, e);
    else if (!rc)
        trainer_init_params(c, &pp.layout, in_place ? pp.mem.master : params, o->seed,
                            &pp.wp_adam);
    if (!rc && st.step >= o->steps)
        rc = err_set(e, -EINVAL, "%s is at step %lld already; ask for more --steps",
                     o->resume_dir, (long long)st.step);
    if (!rc && st.skipped)
        rc = err_set(e, -EINVAL, "%s skipped updates on loss-scale overflow; the out-of-core "
                     "pipeline does not scale losses: resume it without --offload",
                     o->resume_dir);
    if (!rc)
        rc = pipe_mem_put_state(&pp.mem, in_place ? pp.mem.master : params,
                                o->resume_dir ? m : NULL,
                                o->resume_dir ? v : NULL, e);
    if (!o->save_dir) { /* the state lives where the plan says now; the arrays go */
        free(params), free(m), free(v);
        params = m = v = NULL;
    }
    if (!rc)
        rc = loader_init(&ld, &data, plan->micro_batch, o->seq, st.seed, e);
    if (!rc && o->resume_dir)
        loader_seek(&ld, st.epoch, st.index);
    if (!rc)
        rc = trainer_open_log(o, st.step, &log, e);
    for (int i = 0; i < N_THREAD_LANES && !rc; i++)
        rc = lane_init(&pp.lanes[i], pipe_lane_fns[i], &pp, &pp.bell, e);
    pp.step0 = st.step;
    pp.prev_norm = st.prev_grad_norm;
    r->first_step = st.step + 1;
    pp.t0 = clock_monotonic_s();
    double steady = 0;
    int n_steady = 0;
    for (int64_t step = st.step + 1; !rc && step <= o->steps;) {
        /* a segment ends where a checkpoint is due, so it is written at rest */
        int64_t left = o->steps - step + 1, n = left < seg ? left : seg;
        if (o->save_dir && o->save_every > 0) {
            int64_t to_save = o->save_every - (step - 1) % o->save_every;
            if (to_save < n)
                n = to_save;
        }
        pp.iter0 = (int)(step - 1 - pp.step0);
        int rows0 = pp.n_rows;
        double t_seg = clock_monotonic_s();
        rc = run_segment(&pp, &g, plan, &ld, (int)n, e);
        if (rc)
            break;
        double dt = (clock_monotonic_s() - t_seg) / (double)n;
        /* the steady state: the gaps between this segment's iterations' last task ends */
        double *it_end = calloc((size_t)n, sizeof(double));
        if (it_end) {
            for (int k = rows0; k < pp.n_rows; k++) {
                int i = pp.rows[k].iter - pp.iter0;
                if (pp.rows[k].end_s > it_end[i])
                    it_end[i] = pp.rows[k].end_s;
            }
            for (int k = 1; k < (int)n; k++) {
                steady += it_end[k] - it_end[k - 1];
                n_steady++;
            }
        }
        free(it_end);
        for (int i = 0; i < (int)n; i++, step++) {
            /* the micro-batches' mean, as the in-memory trainer takes it */
            double lsum = 0;
            for (int k = 0; k < pp.M; k++)
                lsum += pp.losses[i * pp.M + k];
            float loss = pp.M == 1 ? pp.losses[i] : (float)(lsum / pp.M);
            if (!isfinite(loss)) {
                rc = err_set(e, -EDOM, "step %lld: the loss is %f; lower --lr or check the data",
                             (long long)step, loss);
                break;
            }
            if (r->n_losses == 0)
                r->first_loss = loss;
            r->losses[r->n_losses++] = loss;
            r->last_loss = loss;
            r->last_step = step;
            double tps = (double)pp.M * N / dt;
            rc = trainer_log_row(o, log, step, loss, trainer_lr(o, step), pp.norms[i], tps,
                                 1.0, e);
            if (rc)
                break;
            trainer_progress(o, step, r->first_step - 1, loss, tps,
                             clock_monotonic_s() - pp.t0, step == o->steps);
        }
        if (rc)
            break;
        st.step = step - 1;
        st.epoch = ld.epoch;
        st.index = ld.index;
        st.prev_grad_norm = pp.prev_norm = pp.norms[n - 1];
        bool save = o->save_dir && (st.step == o->steps ||
                                    (o->save_every > 0 && st.step % o->save_every == 0));
        if (save) {
            rc = pipe_mem_get_state(&pp.mem, params, m, v, e);
            if (!rc)
                rc = trainer_clear_old_checkpoints(o, &cleared, e);
            if (!rc)
                rc = ckpt_save(o->save_dir, c, &pp.layout, params, m, v, &st, e);
        }
    }
    double elapsed = clock_monotonic_s() - pp.t0;
    r->tokens_per_s = elapsed > 0 ? (double)r->n_losses * pp.M * (double)N / elapsed : 0;
    r->loss_scale = 1;
    if (!rc) {
        rc = write_traces(&pp, pc, e);
    } else if (e && pp.n_rows && (pc->trace_path || pc->chrome_path)) {
        /* what ran before the failure, for its diagnosis; the failure stays the error */
        Err e2;
        size_t len = strlen(e->msg);
        if (!write_traces(&pp, pc, &e2) && len < sizeof e->msg)
            snprintf(e->msg + len, sizeof e->msg - len, " (the trace holds the %d tasks that "
                     "ran: %s)", pp.n_rows, pc->trace_path ? pc->trace_path : pc->chrome_path);
    }
    if (rep)
        memset(rep, 0, sizeof *rep);
    if (rep && g.ops) {
        pipe_mem_measured(&pp.mem, &rep->measured);
        /* the simulator models the CUDA lane; the CPU reference lane is held to the same
         * accounting on its own sizes */
        if (pc->device->on_host)
            pipe_mem_planned(&pp.mem, &rep->predicted);
        else
            footprint_compute(&rep->predicted, &g, plan);
        memcpy(rep->busy_s, pp.busy, sizeof pp.busy);
        rep->elapsed_s = elapsed;
        rep->iterations = r->n_losses;
        rep->steady_iter_s = n_steady ? steady / n_steady : 0;
    }
    rc = trainer_close_log(o, log, rc, e);
    free(params), free(m), free(v);
    loader_free(&ld);
    data_free(&data);
    graph_free(&g);
    pipe_free(&pp);
    return rc;
}

void pipe_report_print(FILE *out, const PipeReport *rep)
{
    static const char *tier[TIER_COUNT] = {"gpu", "cpu", "ssd"};
    fprintf(out, "memory (measured peak / predicted by the footprint):\n%-12s", "");
    for (int t = 0; t < TIER_COUNT; t++)
        fprintf(out, " %25s", tier[t]);
    fprintf(out, "\n");
    for (int k = 0; k < MEM_TAG_COUNT; k++) {
        fprintf(out, "%-12s", mem_tag_name(k));
        for (int t = 0; t < TIER_COUNT; t++) {
            char a[24], b[24], cell[64];
            snprintf(cell, sizeof cell, "%s / %s",
                     units_bytes(a, sizeof a, rep->measured.bytes[k][t]),
                     units_bytes(b, sizeof b, rep->predicted.bytes[k][t]));
            fprintf(out, " %25s", cell);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "lanes busy over %d iterations in %.3f s (steady iteration %.4f s):",
            rep->iterations, rep->elapsed_s, rep->steady_iter_s);
    for (int r = 0; r < RES_COUNT; r++)
        fprintf(out, " %s %.3f s", resource_name(r), rep->busy_s[r]);
    fprintf(out, "\n");
}
