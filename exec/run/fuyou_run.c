/* fuyou-run: the real trainer. It plans as fuyou-sim does for the same options (plan_make.h:
 * the same function), and runs that plan, everything on the device where it fits, else out of
 * core, by running the schedule's task DAG on the pipeline (exec/pipeline/pipeline.h) under
 * memory budgets, on the CPU reference device (fp32) or on CUDA (bf16). The command line is
 * run_args.h's; this file runs what it says.
 * Exit codes: 0 success, 1 runtime failure, 2 usage or input error, 130 / 143 stopped by
 * SIGINT / SIGTERM (after the step in flight, saved with --save). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "dirlock.h"
#include "hw.h"
#include "pipeline.h"
#include "plan_advice.h"
#include "plan_args.h"
#include "plan_make.h"
#include "predict.h"
#include "run_args.h"
#include "trainer.h"
#include "units.h"

static int exit_status(int rc);

/* Whether two paths name the same existing directory. */
static bool same_dir(const char *a, const char *b)
{
    struct stat x, y;
    return !stat(a, &x) && !stat(b, &y) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The directories a run writes into are its alone: the --save directory and every --ssd-dir
 * are held in locks[] for the run (dirlock.h: another run in one is refused, before either
 * has done any work), and a fresh --save holds no other run's checkpoints (with --overwrite
 * they are removed before the first save, trainer_clear_old_checkpoints). 0, or the exit
 * status. */
static int hold_dirs(const RunArgs *a, DirLock locks[1 + STORE_MAX_DEVICES])
{
    const TrainOptions *o = &a->train;
    const PipeConfig *pc = &a->pipe;
    Err e;
    int rc = o->save_dir ? dirlock_take(o->save_dir, "--save", &locks[0], &e) : 0;
    for (int i = 0; !rc && i < pc->n_ssd_dirs; i++) {
        bool held = o->save_dir && same_dir(o->save_dir, pc->ssd_dirs[i]);
        for (int k = 0; k < i; k++)
            held = held || same_dir(pc->ssd_dirs[k], pc->ssd_dirs[i]);
        if (!held) /* a directory given twice is the store's to refuse */
            rc = dirlock_take(pc->ssd_dirs[i], "--ssd-dir", &locks[1 + i], &e);
    }
    if (!rc && a->fresh_save) {
        rc = ckpt_prepare_fresh(o->save_dir, false, &e);
        if (rc == -EEXIST && o->overwrite)
            rc = 0;
    }
    if (rc) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return exit_status(rc);
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

/* Where the weights come from, as the first line says it, into buf. */
static const char *weights_source(const TrainOptions *o, char *buf, size_t n)
{
    if (o->resume_dir)
        snprintf(buf, n, "resumed from %s", o->resume_dir);
    else if (o->init_from)
        snprintf(buf, n, "from the weights in %s", o->init_from);
    else
        snprintf(buf, n, "from random weights (seed %llu)", (unsigned long long)o->seed);
    return buf;
}

/* Every hyperparameter the run trains with, once, as its checkpoints record them. */
static void print_hparams(const TrainOptions *o)
{
    if (o->steps == 0)
        return;
    printf("hyperparameters: %lld steps, lr %g (warmup %d steps, cosine to %g x), AdamW betas "
           "%g %g eps %g, weight decay %g, clip %g, seed %llu\n", (long long)o->steps, o->lr,
           o->warmup, o->min_lr_ratio, o->beta1, o->beta2, o->eps, o->weight_decay, o->clip,
           (unsigned long long)o->seed);
    if (o->save_dir)
        printf("checkpoints: %s, %s weights%s\n", o->save_dir, dtype_name(o->save_dtype),
               o->save_weights_only ? " alone (not resumable)" : " and the training state");
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
    case EBUSY: case ENODEV:
        return 2;
    default:
        return 1;
    }
}

/* The hardware ini with the budgets as its capacities (a budget is what the plan may use,
 * with nothing reserved), and the device as it is: one with less free than the ini's capacity
 * (no --gpu-mem), such as the cpu device, whose memory is the host's, is planned for what it
 * has free, said on the console. 0 or -errno with e. */
static int load_hw(const RunArgs *a, Hardware *hw, Err *e)
{
    double cpu_budget = (double)a->pipe.cpu_budget;
    int rc = hw_load(a->hw_name, NULL, 0, hw, e);
    if (rc)
        return rc;
    hw_set_budgets(hw, (double)a->pipe.gpu_budget, cpu_budget);
    const DeviceOps *dev = a->pipe.device;
    if (a->pipe.gpu_budget || !dev->free_bytes)
        return 0;
    double dev_free = (double)dev->free_bytes();
    if (dev->on_host && dev_free > 0) /* the host pool takes its budget from the same memory */
        dev_free = dev_free > cpu_budget ? dev_free - cpu_budget : 1;
    double ini = footprint_capacity(hw, TIER_GPU);
    if (dev_free <= 0 || dev_free >= ini)
        return 0;
    hw_set_budgets(hw, dev_free, 0);
    char b0[24], b1[24];
    printf("fuyou-run: the %s device has %s free, less than %s's %s: planned for what it has "
           "(fuyou-sim --hw %s --gpu-mem %.0f%s predicts this plan)\n", dev->name,
           units_bytes(b0, sizeof b0, dev_free), a->hw_name, units_bytes(b1, sizeof b1, ini),
           a->hw_name, dev_free, dev->on_host ? " --device cpu" : "");
    return 0;
}

/* The plan fuyou-sim makes from the same options (plan_make.h), on the lane of the device the
 * run uses, into g and p; one that does not fit the budgets is refused, saying why. 0 or
 * -errno (with e, or printed). */
static int make_plan(const RunArgs *a, const Hardware *hw, Graph *g, Plan *p, Err *e)
{
    const TrainOptions *o = &a->train;
    ModelConfig gc = o->model;
    gc.dtype = a->pipe.device->weight_type; /* the graph's bytes are what the device moves */
    PredictScoreCtx sc = {hw, 0};
    PlanRequest rq = {.model = &gc, .batch = o->seqs_per_step, .seq = o->seq,
                      .policy = POLICY_FUYOU, .swap = a->swap, .swap_bytes = a->swap_bytes,
                      .args = &a->plan, .score = predict_score, .score_ctx = &sc,
                      .prog = "fuyou-run", .lane_sizes = pipe_lane_sizes,
                      .lane_ctx = a->pipe.device};
    PlanInfo info;
    int rc = plan_make(&rq, hw, g, p, &info, e);
    plan_make_free(&info);
    if (!rc && !plan_make_fits(g, hw, p)) {
        char why[1024];
        rc = err_set(e, -ENOSPC, "no plan fits %s%s: %s", a->hw_name,
                     a->pipe.gpu_budget || a->pipe.cpu_budget ? " under the budgets given" : "",
                     plan_advice_why_short(&rq, hw, g, p, why, sizeof why));
    }
    return rc;
}

/* pipe_train under the plan p (of graph g). The exit status. */
static int train(const RunArgs *a, const Graph *g, const Plan *p, Err *e)
{
    const TrainOptions *o = &a->train;
    const DeviceOps *dev = a->pipe.device;
    char summary[640], label[4200], from[4400];
    printf("fuyou-run: %s (%lld parameters) %s, on %s, batch %d x %d, on the %s device (%s)\n"
           "plan: %s\n", o->model.name, (long long)model_param_count(&o->model),
           weights_source(o, from, sizeof from), data_label(o, label, sizeof label),
           o->seqs_per_step, o->seq, dev->name, dev->on_host ? "fp32" : dtype_name(o->model.dtype),
           plan_summary(p, g, summary, sizeof summary));
    print_hparams(o);
    TrainResult r;
    PipeReport rep;
    int rc = pipe_train(o, p, &a->pipe, &r, &rep, e);
    free(r.losses);
    if (rc) /* a plan the budgets refuse is the user's to change: 2, as a usage error */
        return rep.budget_short ? 2 : exit_status(rc);
    if (o->steps == 0)
        printf("fuyou-run: evaluated the weights of step %lld, no training: held-out loss %.4f "
               "(perplexity %.3f)\n", (long long)r.first_step - 1, r.eval_loss,
               r.eval_perplexity);
    else
        printf("fuyou-run: steps %lld..%lld, loss %.4f -> %.4f, %.0f tokens/s",
               (long long)r.first_step, (long long)r.last_step, r.first_loss, r.last_loss,
               r.tokens_per_s);
    if (o->steps && r.eval_step)
        printf(", held-out loss %.4f (perplexity %.3f)", r.eval_loss, r.eval_perplexity);
    if (o->steps)
        printf("\n");
    pipe_report_print(stdout, &rep);
    return 0;
}

/* The plan for the options and the budgets, then the executor. The exit status. */
static int run(RunArgs *a)
{
    a->pipe.device = device_find(a->train.backend->name);
    if (!a->pipe.device) {
        fprintf(stderr, "fuyou-run: this build has no %s device\n", a->train.backend->name);
        return 2;
    }
    if (!a->pipe.device->on_host && a->pipe.device->free_bytes &&
        !a->pipe.device->free_bytes()) { /* before any planning or loading */
        fprintf(stderr, "fuyou-run: no %s device can be used here; train on --backend cpu\n",
                a->pipe.device->name);
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
    int rc = make_plan(a, &hw, &g, &p, &e);
    int status = rc ? (rc == -ENOMEM ? 1 : 2) : train(a, &g, &p, &e);
    if (status && e.msg[0])
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
    return status;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* its lines in order with stderr's */
    RunArgs a;
    int rc = run_args_parse(&a, argc, argv);
    if (rc)
        return rc > 0 ? 0 : 2;
    DirLock locks[1 + STORE_MAX_DEVICES] = {0};
    rc = hold_dirs(&a, locks);
    if (!rc) {
        catch_stop_signals(&a.train);
        rc = run(&a);
    }
    for (int i = 0; i < 1 + STORE_MAX_DEVICES; i++)
        dirlock_release(&locks[i]);
    return rc;
}
