/* fuyou-run: the real trainer: in memory on the CPU reference backend (fp32) or the CUDA backend
 * (bf16 or fp16 with dynamic loss scaling), or with --offload out of core, by running the
 * schedule's task DAG on the pipeline (exec/pipeline/pipeline.h) under memory budgets. The
 * command line is run_args.h's; this file runs what it says.
 * Exit codes: 0 success, 1 runtime failure, 2 usage or input error, 130 / 143 stopped by
 * SIGINT / SIGTERM (after the step in flight, saved with --save). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "gpt2_cpu.h"
#include "hw.h"
#include "pipeline.h"
#include "plan_args.h"
#include "plan_make.h"
#include "predict.h"
#include "run_args.h"
#include "trainer.h"

static int exit_status(int rc);

/* A run must not move another run's latest back or replace its steps: the --save directory is
 * held in *lock for the run (ckpt_lock_dir: another run in it is refused), and a fresh one
 * holds no other run's checkpoints (with --overwrite they are removed before the first save,
 * trainer_clear_old_checkpoints). Checked once, before either trainer starts. 0, or the exit
 * status. */
static int check_save_dir(const RunArgs *a, CkptLock *lock)
{
    const TrainOptions *o = &a->train;
    Err e;
    int ck = o->save_dir ? ckpt_lock_dir(o->save_dir, lock, &e) : 0;
    if (!ck && a->fresh_save) {
        ck = ckpt_prepare_fresh(o->save_dir, false, &e);
        if (ck == -EEXIST && o->overwrite)
            ck = 0;
    }
    if (ck) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return exit_status(ck);
    }
    return 0;
}

/* What the banner says the data are: the first --data, and how many more. */
static const char *data_label(const TrainOptions *o, char *buf, size_t n)
{
    if (o->n_data == 1)
        return o->data_paths[0];
    snprintf(buf, n, "%s and %d more --data", o->data_paths[0], o->n_data - 1);
    return buf;
}

/* The signal that asks the run to stop (SIGINT, SIGTERM): the trainers finish the step in
 * flight, save it with --save and end (trainer.h, TrainOptions.stop). A second one ends the
 * process at once, as it would have without the handler. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    if (stop_signal) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_signal = sig;
}

static void catch_stop_signals(TrainOptions *o)
{
    struct sigaction sa = {.sa_handler = on_stop_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    o->stop = &stop_signal;
}

/* The exit status of a run that failed with rc: 2 for what the user gave (a bad value, a path
 * that is missing, a file where a directory goes or the reverse, one that cannot be written,
 * checkpoints or another run in the way), 128 + the signal for a run a signal stopped (the
 * shell's status for it), 1 for the rest (a disk that fills during the run among them). */
static int exit_status(int rc)
{
    switch (-rc) {
    case EINTR:
        return stop_signal ? 128 + stop_signal : 1;
    case EINVAL: case ENOENT: case ENOTDIR: case EISDIR: case EACCES: case EROFS: case EEXIST:
    case EBUSY:
        return 2;
    default:
        return 1;
    }
}

/* In memory: trainer_run. The exit status. */
static int run_in_memory(const RunArgs *a)
{
    const TrainOptions *o = &a->train;
    int micro = trainer_n_micro(o);
    char label[4200];
    printf("fuyou-run: %s (%lld parameters) on %s, batch %d x %d", o->model.name,
           (long long)model_param_count(&o->model), data_label(o, label, sizeof label),
           o->seqs_per_step, o->seq);
    if (micro > 1)
        printf(" (%d micro-batches of %d)", micro, trainer_seqs_per_micro(o));
    printf(", %s backend (%s)\n", o->backend->name,
           o->backend == &backend_cpu ? "fp32" : dtype_name(o->model.dtype));
    TrainResult r;
    Err e;
    int rc = trainer_run(o, &r, &e);
    free(r.losses);
    if (rc) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return exit_status(rc);
    }
    printf("fuyou-run: steps %lld..%lld, loss %.4f -> %.4f, %.0f tokens/s", (long long)r.first_step,
           (long long)r.last_step, r.first_loss, r.last_loss, r.tokens_per_s);
    if (r.loss_scale != 1.0 || r.skipped)
        printf(", loss scale %g, %lld updates skipped on overflow", r.loss_scale,
               (long long)r.skipped);
    if (r.eval_step)
        printf(", held-out loss %.4f (perplexity %.3f)", r.eval_loss, r.eval_perplexity);
    printf("\n");
    return 0;
}

/* The hardware ini with the budgets as its capacities: a budget is what the plan may use, with
 * nothing reserved. */
static int load_hw(const RunArgs *a, Hardware *hw, Err *e)
{
    char sets[PLAN_BUDGET_SETS][PLAN_BUDGET_SET_LEN];
    const char *set[PLAN_BUDGET_SETS];
    PlanBudget budget = {(double)a->pipe.gpu_budget, (double)a->pipe.cpu_budget};
    int n_sets = plan_budget_sets(&budget, sets);
    for (int i = 0; i < n_sets; i++)
        set[i] = sets[i];
    return hw_load(a->hw_name, set, n_sets, hw, e);
}

/* --swap, as a run takes it: 0, or -EINVAL (printed). */
static int parse_swap(const RunArgs *a, SwapMode *swap, double *swap_bytes)
{
    if (plan_swap_parse(a->swap, "fuyou-run", swap, swap_bytes))
        return -EINVAL;
    if (*swap == SWAP_SWEEP) {
        fprintf(stderr, "fuyou-run: --swap sweep is fuyou-sim's (it predicts every amount); "
                "run one amount\n");
        return -EINVAL;
    }
    if (a->plan.act && *swap != SWAP_AUTO) {
        fprintf(stderr, "fuyou-run: --act and --swap both decide the activations; give one\n");
        return -EINVAL;
    }
    return 0;
}

/* The pipeline keeps weights and optimizer states off the device: where the plan put them on
 * it without being asked to, they go to CPU memory. What moved ("the weights", ...), or NULL;
 * said after the run, or beside a refusal of the plan (the budget the move strains). */
static const char *keep_off_gpu(const PlanArgs *pa, Plan *p)
{
    bool w_gpu = p->weights == TIER_GPU && !pa->weights;
    bool s_gpu = p->optim == TIER_GPU && !pa->optim;
    if (w_gpu)
        p->weights = TIER_CPU;
    if (s_gpu)
        p->optim = TIER_CPU;
    return w_gpu && s_gpu ? "the weights and optimizer states"
           : w_gpu      ? "the weights"
           : s_gpu      ? "the optimizer states"
                        : NULL;
}

/* The plan fuyou-sim makes from the same options (plan_make.h), on the lane of the device the
 * run uses, into g and p; *moved as keep_off_gpu says. 0 or -errno (with e, or printed). */
static int make_plan(const RunArgs *a, const Hardware *hw, Graph *g, Plan *p,
                     const char **moved, Err *e)
{
    const TrainOptions *o = &a->train;
    SwapMode swap = SWAP_AUTO;
    double swap_bytes = 0;
    if (parse_swap(a, &swap, &swap_bytes))
        return -EINVAL;
    ModelConfig gc = o->model;
    gc.dtype = a->pipe.device->weight_type; /* the graph's bytes are what the device moves */
    PredictScoreCtx sc = {hw, 0};
    PlanRequest rq = {.model = &gc, .batch = o->seqs_per_step, .seq = o->seq,
                      .policy = POLICY_FUYOU, .swap = swap, .swap_bytes = swap_bytes,
                      .args = &a->plan, .score = predict_score, .score_ctx = &sc,
                      .prog = "fuyou-run", .lane_sizes = pipe_lane_sizes,
                      .lane_ctx = a->pipe.device};
    PlanInfo info;
    int made = plan_make(&rq, hw, g, p, &info, e);
    bool frugal = info.planned && info.choice.overflow;
    plan_make_free(&info);
    if (made)
        return made;
    if (frugal)
        printf("fuyou-run: the planner found no configuration that fits %s; the most "
               "frugal one follows\n", a->hw_name);
    *moved = keep_off_gpu(&a->plan, p);
    return plan_validate(p, e);
}

/* pipe_train under the plan p (of graph g), with moved what keep_off_gpu moved off the GPU.
 * The exit status. */
static int train_offload(const RunArgs *a, const Graph *g, const Plan *p, const char *moved,
                         Err *e)
{
    const TrainOptions *o = &a->train;
    char summary[512], label[4200];
    printf("fuyou-run: %s (%lld parameters) on %s, batch %d x %d, out of core on the %s "
           "device\nplan: %s\n", o->model.name, (long long)model_param_count(&o->model),
           data_label(o, label, sizeof label), o->seqs_per_step, o->seq, a->pipe.device->name,
           plan_summary(p, g, summary, sizeof summary));
    if (a->pipe.device->on_host)
        printf("fuyou-run: the cpu device plans on its own fp32 buffers; fuyou-sim predicts the "
               "CUDA lane (bf16, as --backend cuda runs it), so its plan for these options can "
               "differ\n");
    TrainResult r;
    PipeReport rep;
    int rc = pipe_train(o, p, &a->pipe, &r, &rep, e);
    free(r.losses);
    if (rc && rep.host_short && moved)
        fprintf(stderr, "fuyou-run: %s fit in GPU memory, but --offload keeps them in CPU "
                "memory; training without --offload keeps them on the GPU\n", moved);
    if (rc)
        return rc == -ENOSPC ? 2 : exit_status(rc);
    printf("fuyou-run: steps %lld..%lld, loss %.4f -> %.4f, %.0f tokens/s\n",
           (long long)r.first_step, (long long)r.last_step, r.first_loss, r.last_loss,
           r.tokens_per_s);
    pipe_report_print(stdout, &rep);
    if (moved)
        printf("fuyou-run: everything fits on the GPU, so training without --offload is "
               "faster; --offload kept %s in CPU memory\n", moved);
    return 0;
}

/* --offload: the plan for the budgets, then the pipeline. The exit status. */
static int run_offload(RunArgs *a)
{
    a->pipe.device = device_find(a->train.backend->name);
    if (!a->pipe.device) {
        fprintf(stderr, "fuyou-run: --offload has no %s device in this build\n",
                a->train.backend->name);
        return 2;
    }
    Err e = {""};
    Hardware hw;
    Graph g = {0};
    Plan p = {0};
    if (load_hw(a, &hw, &e)) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return 2;
    }
    const char *moved = NULL;
    int status = make_plan(a, &hw, &g, &p, &moved, &e) ? 2 : train_offload(a, &g, &p, moved, &e);
    if (status && e.msg[0])
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
    return status;
}

int main(int argc, char **argv)
{
    RunArgs a;
    int rc = run_args_parse(&a, argc, argv);
    if (rc)
        return rc > 0 ? 0 : 2;
    CkptLock lock = {0};
    rc = check_save_dir(&a, &lock);
    if (!rc) {
        catch_stop_signals(&a.train);
        rc = a.offload ? run_offload(&a) : run_in_memory(&a);
    }
    ckpt_unlock(&lock);
    return rc;
}
