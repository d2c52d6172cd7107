/* trainer: the shared training loop; see trainer.h, the policies in ARCHITECTURE.md. */
#include "trainer.h"

#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "checkpoint.h"
#include "eval.h"
#include "gpt2_layout.h"
#include "plan.h"

int trainer_n_micro(const TrainOptions *o)
{
    return o->n_micro > 1 ? o->n_micro : 1;
}

int trainer_seqs_per_micro(const TrainOptions *o)
{
    return o->seqs_per_step / trainer_n_micro(o);
}

float trainer_lr(const TrainOptions *o, int64_t step)
{
    if (o->warmup > 0 && step <= o->warmup)
        return o->lr * (float)step / (float)o->warmup;
    double span = (double)(o->steps - o->warmup);
    double progress = span > 0 ? (double)(step - o->warmup) / span : 1.0;
    if (progress > 1)
        progress = 1;
    double min_lr = o->lr * o->min_lr_ratio;
    return (float)(min_lr + 0.5 * (o->lr - min_lr) * (1 + cos(M_PI * progress)));
}

/* Chunks of the flat parameter array, each drawn from its own seeded generator, so the values
 * do not depend on how many threads draw them, nor on which range of the array is asked for. */
enum { INIT_CHUNK = 1 << 20 };

typedef struct InitJob {
    const ModelConfig *c;
    const ModelLayout *l;
    float *out;          /* the values of [begin, end) */
    size_t begin, end;
    uint64_t seed;
} InitJob;

/* How tensor t starts: a norm's gain at 1 (GPT-2's ln_*, Llama's *layernorm and model.norm), a
 * bias at 0, the rest drawn from N(0, sd), the projections back into the residual stream
 * (GPT-2's c_proj, Llama's o_proj and down_proj) scaled down with depth. Returns sd, or 0 with
 * *value the constant. */
static double init_sd(const ModelConfig *c, const ParamTensor *t, float *value)
{
    const char *n = t->name;
    size_t len = strlen(n);
    bool bias = len > 5 && !strcmp(n + len - 5, ".bias");
    bool ln = strstr(n, "ln_") || strstr(n, "layernorm") || strstr(n, "norm.weight");
    bool proj = strstr(n, "c_proj.weight") || strstr(n, "o_proj.weight") ||
                strstr(n, "down_proj.weight");
    *value = ln && !bias ? 1.0f : 0.0f;
    return ln || bias ? 0 : proj ? 0.02 / sqrt(2.0 * c->n_layer) : 0.02;
}

/* The tensor holding element i (the layout's tensors lie end to end from 0). */
static int tensor_at(const ModelLayout *l, size_t i)
{
    int lo = 0, hi = l->n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (l->t[mid].offset <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Chunk k's values that fall in [j->begin, j->end): its generator draws every drawn element
 * of the chunk in order from the chunk's start, so a range that starts inside it draws the
 * ones before the range too. */
static void init_chunk(const InitJob *j, size_t k, gsl_rng *r)
{
    const ModelLayout *l = j->l;
    size_t c0 = k * INIT_CHUNK, c1 = c0 + INIT_CHUNK < l->total ? c0 + INIT_CHUNK : l->total;
    size_t lo = c0 > j->begin ? c0 : j->begin, hi = c1 < j->end ? c1 : j->end;
    gsl_rng_set(r, (unsigned long)(j->seed * 1000003u + k));
    for (int t = tensor_at(l, c0); t < l->n && l->t[t].offset < hi; t++) {
        size_t t0 = l->t[t].offset > c0 ? l->t[t].offset : c0;
        size_t t1 = l->t[t].offset + l->t[t].numel < hi ? l->t[t].offset + l->t[t].numel : hi;
        float value;
        double sd = init_sd(j->c, &l->t[t], &value);
        for (size_t i = t0; i < t1; i++) {
            float x = sd > 0 ? (float)gsl_ran_gaussian_ziggurat(r, sd) : value;
            if (i >= lo)
                j->out[i - j->begin] = x;
        }
    }
}

static void init_chunks(void *ctx, size_t begin, size_t end)
{
    const InitJob *j = ctx;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t k = begin; k < end; k++)
        init_chunk(j, j->begin / INIT_CHUNK + k, r);
    gsl_rng_free(r);
}

void trainer_init_range(const ModelConfig *c, const ModelLayout *l, uint64_t seed, size_t begin,
                        size_t n, float *out, WorkPool *wp)
{
    if (!n)
        return;
    InitJob j = {c, l, out, begin, begin + n, seed};
    size_t chunks = (begin + n - 1) / INIT_CHUNK - begin / INIT_CHUNK + 1;
    if (wp)
        workpool_run(wp, init_chunks, &j, chunks, 1);
    else
        init_chunks(&j, 0, chunks);
}

size_t trainer_init_grain(const WorkPool *wp)
{
    return (size_t)INIT_CHUNK * (wp && wp->started ? (size_t)wp->started + 1 : 1);
}

void trainer_init_params(const ModelConfig *c, const ModelLayout *l, float *p, uint64_t seed,
                         WorkPool *wp)
{
    trainer_init_range(c, l, seed, 0, l->total, p, wp);
}

typedef struct Slice {
    size_t begin, end;
} Slice;

/* The optimizer's sub-groups in update order, as parameter slices (gpt2_layout.h). */
static int subgroup_slices(const TrainOptions *o, Slice *out)
{
    const ModelConfig *c = &o->model;
    Plan p = {.n_layer = c->n_layer, .subgroup_blocks = o->subgroup_blocks,
              .tail_blocks = o->tail_blocks};
    int n = plan_subgroup_count(&p);
    for (int s = 0; s < n; s++)
        layout_subgroup_slice(c, &p, s, &out[s].begin, &out[s].end);
    return n;
}

int trainer_load_data(const TrainOptions *o, TokenData *data, Err *e)
{
    int rc = data_load_list(data, o->data_paths, o->n_data, o->data_format, e);
    return rc ? rc : data_check_model(data, o->model.vocab, o->model.name, e);
}

/* The log's header: the eval columns only with --eval-data. */
static const char *log_header(const TrainOptions *o)
{
    return o->n_eval ? "step\tloss\tlr\tgrad_norm\ttokens_per_s\tloss_scale\teval_loss\teval_ppl\n"
                     : "step\tloss\tlr\tgrad_norm\ttokens_per_s\tloss_scale\n";
}

/* A failed write of the log as one line: the file and the reason (err 0: EIO). */
static int log_error(const TrainOptions *o, int err, Err *e)
{
    err = err ? err : EIO;
    return err_set(e, -err, "%s: cannot write the log: %s", o->log_path, strerror(err));
}

/* A resumed run's log, a regular file open for update at its start: keeps the header and the
 * rows of steps up to step, cuts the file after them and leaves f there to append. *header:
 * whether the file still needs its header (it was empty, or the kill cut the header short). */
static int log_keep_rows(const TrainOptions *o, FILE *f, int64_t step, bool *header, Err *e)
{
    const char *path = o->log_path;
    char line[256];
    off_t keep = 0;
    long long last = 0;
    *header = true;
    for (int n = 1; fgets(line, sizeof line, f); n++) {
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n') {
            if (feof(f))
                break; /* a row (or the header) the kill cut short: dropped */
            return err_set(e, -EINVAL, "%s:%d: not a fuyou log (a line too long, or a NUL "
                           "byte); name another --log", path, n);
        }
        long long s;
        if (n == 1 && strcmp(line, log_header(o)))
            return err_set(e, -EINVAL, "%s:1: not the header this run writes (not a fuyou log, "
                           "or one written %s --eval-data); name another --log or remove the "
                           "file", path, o->n_eval ? "without" : "with");
        if (n > 1 && (sscanf(line, "%lld\t", &s) != 1 || s <= last))
            return err_set(e, -EINVAL, "%s:%d: not a row of a fuyou log (rows start with "
                           "increasing step numbers); name another --log", path, n);
        if (n > 1 && s > step)
            break; /* steps after the checkpoint: they run again */
        if (n > 1)
            last = s;
        *header = false;
        keep = ftello(f);
    }
    if (ferror(f))
        return err_set(e, -EIO, "%s: cannot read the log: %s", path, strerror(errno));
    /* the seek also ends reading, so the rows that follow may be written */
    if (fseeko(f, keep, SEEK_SET) || ftruncate(fileno(f), keep))
        return log_error(o, errno, e);
    if (!*header && last < step && o->progress)
        fprintf(o->progress, "note: %s has rows up to step %lld; steps %lld..%lld are not in "
                "it\n", path, last, last + 1, (long long)step);
    return 0;
}

int trainer_clear_old_checkpoints(const TrainOptions *o, bool *done, Err *e)
{
    if (*done || !o->overwrite)
        return 0;
    *done = true;
    return ckpt_prepare_fresh(o->save_dir, true, e);
}

int trainer_open_log(const TrainOptions *o, int64_t resumed_step, FILE **log, Err *e)
{
    *log = NULL;
    if (!o->log_path)
        return 0;
    FILE *f = NULL;
    bool header = true;
    int rc = 0;
    if (o->resume_dir && !(f = fopen(o->log_path, "r+")) && errno != ENOENT)
        return err_set(e, -errno, "%s: cannot open the log: %s", o->log_path, strerror(errno));
    struct stat sb;
    if (f && !fstat(fileno(f), &sb) && S_ISREG(sb.st_mode))
        rc = log_keep_rows(o, f, resumed_step, &header, e);
    if (!rc && !f && !(f = fopen(o->log_path, "w")))
        rc = err_set(e, -errno, "%s: cannot write: %s", o->log_path, strerror(errno));
    if (!rc && header && (fputs(log_header(o), f) == EOF || fflush(f)))
        rc = log_error(o, errno, e);
    if (rc) {
        if (f)
            fclose(f);
        return rc;
    }
    *log = f;
    return 0;
}

int trainer_log_row(const TrainOptions *o, FILE *log, int64_t step, float loss, float lr,
                    double grad_norm, double tokens_per_s, double loss_scale, double eval_loss,
                    Err *e)
{
    if (!log)
        return 0;
    /* Through to the file now: a kill loses no finished step's row. Before a checkpoint (which
     * is synced to disk) the row is synced too, so not even a crash of the machine leaves a
     * checkpointed step without its row; a special file (pipe, terminal) cannot be synced. */
    bool ckpt = trainer_save_due(o, step);
    char eval[64] = "";
    if (o->n_eval && isnan(eval_loss))
        snprintf(eval, sizeof eval, "\tnan\tnan");
    else if (o->n_eval)
        snprintf(eval, sizeof eval, "\t%.6f\t%.6g", eval_loss, exp(eval_loss));
    if (fprintf(log, "%lld\t%.6f\t%.6g\t%.6f\t%.1f\t%g%s\n", (long long)step, loss, lr,
                grad_norm, tokens_per_s, loss_scale, eval) < 0 || fflush(log) ||
        (ckpt && fsync(fileno(log)) && errno != EINVAL))
        return log_error(o, errno, e);
    return 0;
}

int trainer_close_log(const TrainOptions *o, FILE *log, int rc, Err *e)
{
    if (log && fclose(log) && !rc)
        return log_error(o, errno, e);
    return rc;
}

void trainer_progress(const TrainOptions *o, int64_t step, int64_t first, float loss, double tps,
                      double elapsed, bool last)
{
    if (!o->progress)
        return;
    double eta = step > first ? elapsed / (double)(step - first) * (double)(o->steps - step) : 0;
    bool tty = isatty(fileno(o->progress));
    int64_t every = o->steps / 20 > 0 ? o->steps / 20 : 1;
    if (!tty && !last && step != first + 1 && step % every)
        return;
    /* whole seconds in 64 bits: a billion steps' ETA overflows an int's */
    long long secs = eta < 9e18 ? (long long)eta : (long long)9e18;
    fprintf(o->progress, "%sstep %lld/%lld | loss %.4f | %.0f tok/s | ETA %lldm%02llds%s",
            tty ? "\r\033[K" : "", (long long)step, (long long)o->steps, loss, tps, secs / 60,
            secs % 60, tty && !last ? "" : "\n");
    fflush(o->progress);
}

bool trainer_save_due(const TrainOptions *o, int64_t step)
{
    return o->save_dir && (step == o->steps || (o->save_every > 0 && step % o->save_every == 0) ||
                           trainer_stop_signal(o));
}

int trainer_stop_signal(const TrainOptions *o)
{
    return o->stop ? (int)*o->stop : 0;
}

static const char *signal_label(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

void trainer_stop_notice(const TrainOptions *o, int64_t step)
{
    if (o->progress && step < o->steps)
        fprintf(o->progress, "\n%s: finishing step %lld%s; a second one stops at once\n",
                signal_label(trainer_stop_signal(o)), (long long)step,
                o->save_dir ? ", then saving it" : "");
}

int trainer_stopped(const TrainOptions *o, int64_t step, bool saved, Err *e)
{
    int sig = trainer_stop_signal(o);
    /* a signal after the step's save was decided: one step more, which saves */
    if (!sig || step >= o->steps || (o->save_dir && !saved))
        return 0;
    const char *name = signal_label(sig);
    if (!o->save_dir)
        return err_set(e, -EINTR, "stopped by %s after step %lld of %lld; nothing saved (no "
                       "--save)", name, (long long)step, (long long)o->steps);
    return err_set(e, -EINTR, "stopped by %s after step %lld of %lld, saved in %s; continue with "
                   "--resume %s", name, (long long)step, (long long)o->steps, o->save_dir,
                   o->save_dir);
}

bool trainer_eval_due(const TrainOptions *o, int64_t step)
{
    return o->n_eval && (step == o->steps || (o->eval_every > 0 && step % o->eval_every == 0));
}

void trainer_result_add(TrainResult *r, int64_t step, float loss)
{
    if (r->n_losses == 0)
        r->first_loss = loss;
    r->losses[r->n_losses++] = loss;
    r->last_loss = loss;
    r->last_step = step;
}

/* A resumed checkpoint's data (was) against this run's (now): 0, or -EINVAL with e. */
static int check_same_data(const TrainOptions *o, const TrainState *st, const DataPrint *now,
                           Err *e)
{
    const DataPrint *was = &st->data;
    if (!was->files || (was->files == now->files && was->tokens == now->tokens &&
                        was->crc32c == now->crc32c))
        return 0;
    return err_set(e, -EINVAL, "--resume %s: its checkpoint (step %lld) was trained on %lld data "
                   "files of %lld tokens (fingerprint %08x), this run's --data is %lld files of "
                   "%lld tokens (%08x); resume with the same files in the same order, or start "
                   "a new run from its weights with --init-from", o->resume_dir,
                   (long long)st->step, (long long)was->files, (long long)was->tokens,
                   was->crc32c, (long long)now->files, (long long)now->tokens, now->crc32c);
}

int trainer_load_start(const TrainOptions *o, const TokenData *data, const ModelLayout *l,
                       float *params, float *m, float *v, WorkPool *wp, TrainState *st, Err *e)
{
    const ModelConfig *c = &o->model;
    int rc = 0;
    if (o->resume_dir)
        rc = ckpt_load(o->resume_dir, c, l, params, m, v, st, e);
    else if (o->init_from)
        rc = ckpt_load_model(o->init_from, c, l, params, e);
    else
        trainer_init_params(c, l, params, o->seed, wp);
    return rc ? rc : trainer_check_start(o, data, st, e);
}

int trainer_seek(const TrainOptions *o, Loader *ld, const TrainState *st, Err *e)
{
    Err why;
    int rc = loader_seek(ld, st->epoch, st->index, &why);
    return rc ? err_set(e, rc, "--resume %s (step %lld): %s", o->resume_dir,
                        (long long)st->step, why.msg) : 0;
}

/* A resumed run whose --steps is not the one its checkpoint's learning rate was scheduled
 * over goes on with the schedule for the new --steps (the cosine stretched or squeezed from
 * the step on, as an uninterrupted run of that length would have it): said on the progress
 * stream, with the rate of the next step both ways. */
static void note_schedule_change(const TrainOptions *o, const TrainState *st)
{
    if (!o->resume_dir || !st->sched_steps || st->sched_steps == o->steps || !o->progress)
        return;
    TrainOptions old = *o;
    old.steps = st->sched_steps;
    int64_t next = st->step + 1;
    fprintf(o->progress, "note: %s's learning rate was scheduled over %lld steps; --steps "
            "%lld schedules it over %lld: step %lld's is %.3g (%.3g under the old schedule)\n",
            o->resume_dir, (long long)st->sched_steps, (long long)o->steps,
            (long long)o->steps, (long long)next, trainer_lr(o, next), trainer_lr(&old, next));
}

int trainer_check_start(const TrainOptions *o, const TokenData *data, TrainState *st, Err *e)
{
    int rc = 0;
    if (o->steps > 0 && st->step >= o->steps) /* 0: evaluate only */
        rc = err_set(e, -EINVAL, "%s is at step %lld already; ask for more --steps",
                     o->resume_dir, (long long)st->step);
    if (!rc)
        rc = check_same_data(o, st, &data->print, e);
    if (!rc)
        note_schedule_change(o, st);
    st->data = data->print;
    st->sched_steps = o->steps;
    return rc;
}

/* What one trainer_run holds; run_free takes it half-built. */
typedef struct TrainRun {
    const TrainOptions *o;
    TokenData data;
    EvalSet ev;              /* --eval-data (ev.batches 0 without it) */
    WorkPool wp;
    Backend *be;
    ModelLayout l;
    Loader ld;
    float *params, *m, *v;   /* (P) the state as checkpoints hold it */
    float *acc, *part;       /* (P) a step's gradient sum and one micro-batch's (M > 1) */
    int *inputs, *targets;   /* (B, T) one micro-batch */
    Slice *slices;           /* the sub-groups, in update order */
    int M, B, n_groups;      /* micro-batches per step, their sequences; sub-groups */
    FILE *log;
    TrainState st;
    bool dynamic;            /* the loss scale changes (ARCHITECTURE.md) */
    int64_t window;          /* steps without overflow before it doubles */
    bool cleared;            /* --overwrite: the old checkpoints, before the first save */
    int64_t saved_step;      /* the step last saved (0: none yet) */
    double t_start;
} TrainRun;

/* One step as it runs: its number, when it began, the loss scale it ran at, its loss and its
 * gradients' squared norm (scaled) and norm (unscaled). */
typedef struct Step {
    int64_t n;
    double t0_s, scale, sq, norm;
    float loss;
} Step;

/* The options trainer_run cannot train: 0 or -EINVAL with e. */
static int check_options(const TrainOptions *o, Err *e)
{
    const ModelConfig *c = &o->model;
    /* sub-groups that do not cover the model would leave parameters never updated */
    if (o->steps < 1 || o->steps > TRAIN_MAX_STEPS)
        return err_set(e, -EINVAL, "--steps %lld: a run reaches step 1 to %d",
                       (long long)o->steps, TRAIN_MAX_STEPS);
    if (o->subgroup_blocks < 1 || o->tail_blocks < 1 || o->tail_blocks > c->n_layer)
        return err_set(e, -EINVAL, "--tail %d and --subgroup %d: the tail needs 1 to %d blocks "
                       "(%s's) and sub-groups at least 1", o->tail_blocks, o->subgroup_blocks,
                       c->n_layer, c->name);
    if (o->seqs_per_step % trainer_n_micro(o))
        return err_set(e, -EINVAL, "--micro-batches %d does not divide --batch %d (the "
                       "sequences of a step); give a divisor of it", trainer_n_micro(o),
                       o->seqs_per_step);
    return 0;
}

/* t's arrays and r->losses. 0 or -ENOMEM with e. */
static int run_alloc(TrainRun *t, TrainResult *r, Err *e)
{
    const TrainOptions *o = t->o;
    size_t P = t->l.total, N = (size_t)t->B * o->seq;
    t->params = calloc(P, sizeof *t->params);
    t->m = calloc(P, sizeof *t->m);
    t->v = calloc(P, sizeof *t->v);
    t->inputs = calloc(N, sizeof *t->inputs);
    t->targets = calloc(N, sizeof *t->targets);
    t->slices = calloc((size_t)o->model.n_layer + 2, sizeof *t->slices);
    if (t->M > 1) {
        t->acc = malloc(P * sizeof *t->acc);
        t->part = malloc(P * sizeof *t->part);
    }
    r->losses = calloc((size_t)(o->steps > 0 ? o->steps : 1), sizeof *r->losses);
    if (!t->params || !t->m || !t->v || !t->inputs || !t->targets || !t->slices || !r->losses)
        return err_set(e, -ENOMEM, "out of memory for %zu parameters", P);
    if (t->M > 1 && (!t->acc || !t->part))
        return err_set(e, -ENOMEM, "out of memory for %zu parameters' gradients", P);
    return 0;
}

/* The data, the threads, the backend and the arrays. 0 or -errno with e. */
static int run_init(TrainRun *t, TrainResult *r, Err *e)
{
    const TrainOptions *o = t->o;
    int rc;
    if ((rc = check_options(o, e)) || (rc = trainer_load_data(o, &t->data, e)) ||
        (o->n_eval && (rc = eval_init(&t->ev, o->eval_paths, o->n_eval, o->data_format,
                                      o->model.vocab, o->model.name, t->B, o->seq,
                                      o->eval_batches, e))) ||
        (rc = workpool_init(&t->wp, o->threads, e)) ||
        (rc = o->backend->create(&t->be, &o->model, t->B, o->seq, &t->wp, e)))
        return rc;
    if (layout_init(&t->l, &o->model))
        return err_set(e, -ENOMEM, "out of memory");
    return run_alloc(t, r, e);
}

/* Where the run starts: the state on the backend, the loader at its place, the log open. */
static int run_start(TrainRun *t, Err *e)
{
    const TrainOptions *o = t->o;
    int rc;
    if ((rc = trainer_load_start(o, &t->data, &t->l, t->params, t->m, t->v, &t->wp, &t->st,
                                 e)) ||
        (rc = t->be->ops->write_state(t->be, t->params, t->m, t->v, e)) ||
        (rc = loader_init(&t->ld, &t->data, t->B, o->seq, t->st.seed, e)) ||
        (o->resume_dir && (rc = trainer_seek(o, &t->ld, &t->st, e))) ||
        (rc = trainer_open_log(o, t->st.step, &t->log, e)))
        return rc;
    t->n_groups = subgroup_slices(o, t->slices);
    return 0;
}

/* The loss scale: from the checkpoint when it has one, else from the options. */
static void run_scale_init(TrainRun *t)
{
    const TrainOptions *o = t->o;
    double scale0 = o->loss_scale > 0 ? o->loss_scale
                    : o->model.dtype == DTYPE_FP16 ? 65536.0 : 1.0;
    if (t->st.loss_scale <= 0)
        t->st.loss_scale = scale0;
    t->dynamic = scale0 != 1.0 || t->st.loss_scale != 1.0;
    t->window = o->loss_scale_window > 0 ? o->loss_scale_window : 1000;
}

static void run_free(TrainRun *t)
{
    free(t->slices), free(t->inputs), free(t->targets), free(t->params), free(t->m), free(t->v);
    free(t->acc), free(t->part);
    loader_free(&t->ld);
    layout_free(&t->l);
    if (t->be)
        t->be->ops->destroy(t->be);
    workpool_free(&t->wp);
    eval_free(&t->ev);
    data_free(&t->data);
}

/* One step of M micro-batches (ARCHITECTURE.md): the gradients' sum in acc (part is scratch), then
 * written back to the backend; the loss, the micro-batches' mean. */
static int accumulate(TrainRun *t, double S, float *loss, Err *e)
{
    Backend *be = t->be;
    if (!be->ops->write_grads)
        return err_set(e, -EINVAL, "the %s backend cannot accumulate micro-batches",
                       be->ops->name);
    size_t P = be->n_params;
    memset(t->acc, 0, P * sizeof *t->acc);
    double sum = 0;
    be->loss_scale = (float)(S / t->M);
    for (int k = 0; k < t->M; k++) {
        float l = 0;
        loader_next(&t->ld, t->inputs, t->targets);
        int rc = be->ops->step(be, t->inputs, t->targets, true, &l, e);
        if (!rc)
            rc = be->ops->read_grads(be, t->part, e);
        if (rc)
            return rc;
        for (size_t i = 0; i < P; i++)
            t->acc[i] += t->part[i];
        sum += l;
    }
    *loss = (float)(sum / t->M);
    return be->ops->write_grads(be, t->acc, e);
}

/* Forward and backward of step s, its loss and its gradients' norms over the sub-groups;
 * unscaled gradients that are not finite are an error. */
static int step_grads(TrainRun *t, Step *s, Err *e)
{
    Backend *be = t->be;
    int rc;
    if (t->M == 1) {
        loader_next(&t->ld, t->inputs, t->targets);
        be->loss_scale = (float)s->scale;
        rc = be->ops->step(be, t->inputs, t->targets, true, &s->loss, e);
    } else {
        rc = accumulate(t, s->scale, &s->loss, e);
    }
    if (rc)
        return rc;
    for (int g = 0; g < t->n_groups; g++)
        s->sq += be->ops->grad_sq(be, t->slices[g].begin, t->slices[g].end);
    s->norm = sqrt(s->sq) / s->scale;
    if (!isfinite(s->sq) && !t->dynamic)
        return err_set(e, -EDOM, "step %lld: the gradients are not finite; lower --lr, check "
                       "the data, or with fp16 use loss scaling (--loss-scale)",
                       (long long)s->n);
    return 0;
}

/* Step s's gradients overflowed at its loss scale: no update, the scale halved. */
static int step_skip(TrainRun *t, TrainResult *r, const Step *s, Err *e)
{
    double S = s->scale;
    int rc = 0;
    if (S / 2 < 1.0 / 65536)
        rc = err_set(e, -EDOM, "step %lld: the gradients overflow even at loss scale %g; lower "
                     "--lr or check the data", (long long)s->n, S);
    t->st.loss_scale = S / 2;
    t->st.scale_good = 0;
    t->st.skipped++;
    r->skipped++;
    if (t->o->progress)
        fprintf(t->o->progress, "step %lld: gradients overflow at loss scale %g: update "
                "skipped, scale %g\n", (long long)s->n, S, t->st.loss_scale);
    return rc;
}

/* Step s's AdamW, sub-group by sub-group, clipped by the previous step's norm; the dynamic
 * scale doubles after a window without overflow. */
static int step_update(TrainRun *t, const Step *s, Err *e)
{
    const TrainOptions *o = t->o;
    TrainState *st = &t->st;
    float clip = o->clip > 0 && st->prev_grad_norm > o->clip
                     ? (float)(o->clip / st->prev_grad_norm) : 1.0f;
    AdamConfig acfg = {.lr = trainer_lr(o, s->n), .beta1 = o->beta1, .beta2 = o->beta2,
                       .eps = o->eps, .weight_decay = o->weight_decay};
    AdamStep as;
    adam_step_init(&as, &acfg, (int)(s->n - st->skipped), clip / (float)s->scale);
    int rc = 0;
    for (int g = 0; g < t->n_groups && !rc; g++)
        rc = t->be->ops->update(t->be, &as, t->slices[g].begin, t->slices[g].end, e);
    st->prev_grad_norm = s->norm;
    if (t->dynamic && ++st->scale_good >= t->window) {
        st->loss_scale = s->scale * 2;
        st->scale_good = 0;
    }
    return rc;
}

void trainer_hparams(const TrainOptions *o, TrainHparams *hp)
{
    *hp = (TrainHparams){.set = true, .lr = o->lr, .min_lr_ratio = o->min_lr_ratio,
                         .weight_decay = o->weight_decay, .beta1 = o->beta1, .beta2 = o->beta2,
                         .eps = o->eps, .clip = o->clip, .warmup = o->warmup,
                         .batch = o->seqs_per_step, .seq = o->seq};
}

CkptSaveOptions trainer_save_options(const TrainOptions *o, TrainHparams *hp)
{
    trainer_hparams(o, hp);
    /* the tokenizer files of the folder the weights came from go along */
    return (CkptSaveOptions){.tokenizer_from = o->init_from ? o->init_from : o->resume_dir,
                             .weights_dtype = o->save_dtype,
                             .weights_only = o->save_weights_only,
                             .keep_last = o->save_total_limit, .hp = hp,
                             .progress = o->progress};
}

/* The state as checkpoints hold it, written to o->save_dir. */
static int run_save(TrainRun *t, Err *e)
{
    const TrainOptions *o = t->o;
    TrainHparams hp;
    CkptSaveOptions so = trainer_save_options(o, &hp);
    int rc = t->be->ops->read_state(t->be, t->params, t->m, t->v, e);
    if (!rc)
        rc = trainer_clear_old_checkpoints(o, &t->cleared, e);
    if (!rc)
        rc = ckpt_save_with(o->save_dir, &o->model, &t->l, t->params, t->m, t->v, &t->st, &so,
                            e);
    return rc;
}

/* The evaluation after step's update, when one is due: into *eval_loss (NaN when none ran), r
 * and the progress stream. */
static int step_eval(TrainRun *t, TrainResult *r, int64_t step, double *eval_loss, Err *e)
{
    const TrainOptions *o = t->o;
    *eval_loss = NAN;
    if (!trainer_eval_due(o, step))
        return 0;
    EvalResult er;
    int rc = eval_run(&t->ev, t->be, &er, e);
    if (rc)
        return rc;
    *eval_loss = er.loss;
    trainer_eval_done(o, step, &er, r);
    return 0;
}

void trainer_eval_done(const TrainOptions *o, int64_t step, const EvalResult *er,
                       TrainResult *r)
{
    r->eval_step = step;
    r->eval_loss = er->loss;
    r->eval_perplexity = er->perplexity;
    if (o->progress)
        fprintf(o->progress, "%seval after step %lld: loss %.4f, perplexity %.3f (%lld targets "
                "of %lld sequences)\n", isatty(fileno(o->progress)) ? "\r\033[K" : "",
                (long long)step, er->loss, er->perplexity, (long long)er->targets,
                (long long)er->sequences);
}

/* After step s's update (rc: its error, if any): the evaluation when one is due, the result,
 * the log's row, the progress line and a checkpoint when one is due. */
static int step_finish(TrainRun *t, TrainResult *r, const Step *s, int rc, Err *e)
{
    const TrainOptions *o = t->o;
    t->st.step = s->n;
    t->st.epoch = t->ld.epoch;
    t->st.index = t->ld.index;
    double tps = (double)o->seqs_per_step * o->seq / (clock_monotonic_s() - s->t0_s);
    if (!isfinite(s->loss) && !rc)
        rc = err_set(e, -EDOM, "step %lld: the loss is %f; lower --lr or check the data",
                     (long long)s->n, s->loss);
    double eval_loss = NAN; /* after the step's time is taken: tokens/s is training's */
    if (!rc)
        rc = step_eval(t, r, s->n, &eval_loss, e);
    trainer_result_add(r, s->n, s->loss);
    /* the row before the checkpoint: a kill between the two leaves a row the resumed run
     * replaces, never a checkpointed step without its row (a non-finite loss is logged
     * too, its error kept) */
    Err log_e;
    int log_rc = trainer_log_row(o, t->log, s->n, s->loss, trainer_lr(o, s->n), s->norm, tps,
                                 s->scale, eval_loss, rc ? &log_e : e);
    if (!rc)
        rc = log_rc;
    trainer_progress(o, s->n, r->first_step - 1, s->loss, tps, clock_monotonic_s() - t->t_start,
                     s->n == o->steps);
    if (!rc && trainer_save_due(o, s->n) && !(rc = run_save(t, e)))
        t->saved_step = s->n;
    return rc;
}

/* Step n, whole. */
static int run_step(TrainRun *t, TrainResult *r, int64_t n, Err *e)
{
    Step s = {.n = n, .t0_s = clock_monotonic_s(), .scale = t->st.loss_scale};
    int rc = step_grads(t, &s, e);
    if (rc)
        return rc;
    rc = isfinite(s.sq) ? step_update(t, &s, e) : step_skip(t, r, &s, e);
    return step_finish(t, r, &s, rc, e);
}

int trainer_run(const TrainOptions *o, TrainResult *r, Err *e)
{
    memset(r, 0, sizeof *r);
    TrainRun t = {.o = o, .M = trainer_n_micro(o), .B = trainer_seqs_per_micro(o),
                  .st = {.seed = o->seed}};
    int rc = run_init(&t, r, e);
    if (!rc)
        rc = run_start(&t, e);
    run_scale_init(&t);
    r->first_step = t.st.step + 1;
    t.t_start = clock_monotonic_s();
    for (int64_t step = t.st.step + 1; !rc && step <= o->steps; step++)
        if (!(rc = run_step(&t, r, step, e)))
            rc = trainer_stopped(o, step, t.saved_step == step, e);
    r->loss_scale = t.st.loss_scale;
    double elapsed = clock_monotonic_s() - t.t_start;
    r->tokens_per_s = elapsed > 0 ? (double)r->n_losses * o->seqs_per_step * o->seq / elapsed
                                  : 0;
    rc = trainer_close_log(o, t.log, rc, e);
    run_free(&t);
    return rc;
}
