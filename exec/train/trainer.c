/* trainer: the shared training loop; the policies are in trainer.h. */
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
 * do not depend on how many threads draw them. */
enum { INIT_CHUNK = 1 << 20 };

typedef struct InitJob {
    const ModelConfig *c;
    const Gpt2Layout *l;
    float *p;
    uint64_t seed;
} InitJob;

static void init_chunks(void *ctx, size_t begin, size_t end)
{
    const InitJob *j = ctx;
    double resid = 0.02 / sqrt(2.0 * j->c->n_layer);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    int t = 0;
    for (size_t k = begin; k < end; k++) {
        gsl_rng_set(r, (unsigned long)(j->seed * 1000003u + k));
        size_t lo = k * INIT_CHUNK, hi = lo + INIT_CHUNK < j->l->total ? lo + INIT_CHUNK
                                                                      : j->l->total;
        for (size_t i = lo; i < hi; i++) {
            while (j->l->t[t].offset + j->l->t[t].numel <= i)
                t++;
            const char *n = j->l->t[t].name;
            size_t len = strlen(n);
            bool bias = len > 5 && !strcmp(n + len - 5, ".bias");
            bool ln = strstr(n, "ln_") != NULL;
            bool proj = strstr(n, "c_proj.weight") != NULL;
            if (ln || bias) {
                j->p[i] = ln && !bias ? 1.0f : 0.0f;
                continue;
            }
            j->p[i] = (float)gsl_ran_gaussian_ziggurat(r, proj ? resid : 0.02);
        }
        t = 0;
    }
    gsl_rng_free(r);
}

void trainer_init_params(const ModelConfig *c, const Gpt2Layout *l, float *p, uint64_t seed,
                         WorkPool *wp)
{
    InitJob j = {c, l, p, seed};
    size_t chunks = (l->total + INIT_CHUNK - 1) / INIT_CHUNK;
    if (wp)
        workpool_run(wp, init_chunks, &j, chunks, 1);
    else
        init_chunks(&j, 0, chunks);
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
        gpt2_subgroup_slice(c, &p, s, &out[s].begin, &out[s].end);
    return n;
}

int trainer_load_data(const TrainOptions *o, TokenData *data, Err *e)
{
    int rc = data_load(data, o->data_path, o->data_format, e);
    if (!rc && data->max_token >= o->model.vocab)
        rc = err_set(e, -EINVAL, "%s: token %d is outside %s's vocabulary of %d; pick a model "
                     "with a larger vocabulary or other data", o->data_path, data->max_token,
                     o->model.name, o->model.vocab);
    return rc;
}

static const char log_header[] = "step\tloss\tlr\tgrad_norm\ttokens_per_s\tloss_scale\n";

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
        if (n == 1 && strcmp(line, log_header))
            return err_set(e, -EINVAL, "%s:1: not a fuyou log (the first line is not its "
                           "header); name another --log or remove the file", path);
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
    if (!rc && header && (fputs(log_header, f) == EOF || fflush(f)))
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
                    double grad_norm, double tokens_per_s, double loss_scale, Err *e)
{
    if (!log)
        return 0;
    /* Through to the file now: a kill loses no finished step's row. Before a checkpoint (which
     * is synced to disk) the row is synced too, so not even a crash of the machine leaves a
     * checkpointed step without its row; a special file (pipe, terminal) cannot be synced. */
    bool ckpt = o->save_dir && (step == o->steps || (o->save_every > 0 &&
                                                     step % o->save_every == 0));
    if (fprintf(log, "%lld\t%.6f\t%.6g\t%.6f\t%.1f\t%g\n", (long long)step, loss, lr,
                grad_norm, tokens_per_s, loss_scale) < 0 || fflush(log) ||
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
    fprintf(o->progress, "%sstep %lld/%lld | loss %.4f | %.0f tok/s | ETA %dm%02ds%s",
            tty ? "\r\033[K" : "", (long long)step, (long long)o->steps, loss, tps,
            (int)(eta / 60), (int)eta % 60, tty && !last ? "" : "\n");
    fflush(o->progress);
}

/* One step of M micro-batches (trainer.h): the gradients' sum in acc (part is scratch), then
 * written back to the backend; the loss, the micro-batches' mean. */
static int accumulate(Backend *be, Loader *ld, int M, double S, int *inputs, int *targets,
                      float *acc, float *part, float *loss, Err *e)
{
    if (!be->ops->write_grads)
        return err_set(e, -EINVAL, "the %s backend cannot accumulate micro-batches",
                       be->ops->name);
    size_t P = be->n_params;
    memset(acc, 0, P * sizeof *acc);
    double sum = 0;
    be->loss_scale = (float)(S / M);
    for (int k = 0; k < M; k++) {
        float l = 0;
        loader_next(ld, inputs, targets);
        int rc = be->ops->step(be, inputs, targets, true, &l, e);
        if (!rc)
            rc = be->ops->read_grads(be, part, e);
        if (rc)
            return rc;
        for (size_t i = 0; i < P; i++)
            acc[i] += part[i];
        sum += l;
    }
    *loss = (float)(sum / M);
    return be->ops->write_grads(be, acc, e);
}

int trainer_run(const TrainOptions *o, TrainResult *r, Err *e)
{
    memset(r, 0, sizeof *r);
    const ModelConfig *c = &o->model;
    TokenData data = {0};
    WorkPool wp = {0};
    Backend *be = NULL;
    Gpt2Layout l = {0};
    Loader ld = {0};
    float *params = NULL, *m = NULL, *v = NULL, *acc = NULL, *part = NULL;
    int *inputs = NULL, *targets = NULL;
    int M = trainer_n_micro(o), B = trainer_seqs_per_micro(o);
    FILE *log = NULL;
    Slice *slices = NULL;
    int rc = 0;
    /* sub-groups that do not cover the model would leave parameters never updated */
    if (o->steps < 1 || o->steps > TRAIN_MAX_STEPS)
        rc = err_set(e, -EINVAL, "--steps %lld: a run reaches step 1 to %d", (long long)o->steps,
                     TRAIN_MAX_STEPS);
    else if (o->subgroup_blocks < 1 || o->tail_blocks < 1 || o->tail_blocks > c->n_layer)
        rc = err_set(e, -EINVAL, "--tail %d and --subgroup %d: the tail needs 1 to %d blocks "
                     "(%s's) and sub-groups at least 1", o->tail_blocks, o->subgroup_blocks,
                     c->n_layer, c->name);
    else if (o->seqs_per_step % M)
        rc = err_set(e, -EINVAL, "--micro-batches %d does not divide --batch %d (the sequences "
                     "of a step); give a divisor of it", M, o->seqs_per_step);
    if (!rc)
        rc = trainer_load_data(o, &data, e);
    if (!rc)
        rc = workpool_init(&wp, o->threads, e);
    if (!rc)
        rc = o->backend->create(&be, c, B, o->seq, &wp, e);
    if (!rc && gpt2_layout_init(&l, c))
        rc = err_set(e, -ENOMEM, "out of memory");
    size_t P = l.total;
    if (!rc) {
        params = calloc(P, sizeof *params);
        m = calloc(P, sizeof *m);
        v = calloc(P, sizeof *v);
        inputs = calloc((size_t)B * o->seq, sizeof *inputs);
        targets = calloc((size_t)B * o->seq, sizeof *targets);
        slices = calloc((size_t)c->n_layer + 2, sizeof *slices);
        if (M > 1) {
            acc = malloc(P * sizeof *acc);
            part = malloc(P * sizeof *part);
            if (!acc || !part)
                rc = err_set(e, -ENOMEM, "out of memory for %zu parameters' gradients", P);
        }
        r->losses = calloc((size_t)(o->steps > 0 ? o->steps : 1), sizeof *r->losses);
        if (!params || !m || !v || !inputs || !targets || !slices || !r->losses)
            rc = err_set(e, -ENOMEM, "out of memory for %zu parameters", P);
    }
    TrainState st = {.seed = o->seed};
    if (!rc && o->resume_dir)
        rc = ckpt_load(o->resume_dir, c, &l, params, m, v, &st, e);
    else if (!rc && o->init_from)
        rc = ckpt_load_model(o->init_from, c, &l, params, e);
    else if (!rc)
        trainer_init_params(c, &l, params, o->seed, &wp);
    if (!rc && st.step >= o->steps)
        rc = err_set(e, -EINVAL, "%s is at step %lld already; ask for more --steps", o->resume_dir,
                     (long long)st.step);
    if (!rc)
        rc = be->ops->write_state(be, params, m, v, e);
    if (!rc)
        rc = loader_init(&ld, &data, B, o->seq, st.seed, e);
    if (!rc && o->resume_dir)
        loader_seek(&ld, st.epoch, st.index);
    if (!rc)
        rc = trainer_open_log(o, st.step, &log, e);
    int n_groups = rc ? 0 : subgroup_slices(o, slices);
    /* the loss scale: from the checkpoint when it has one, else from the options */
    double scale0 = o->loss_scale > 0 ? o->loss_scale : c->dtype == DTYPE_FP16 ? 65536.0 : 1.0;
    if (st.loss_scale <= 0)
        st.loss_scale = scale0;
    bool dynamic = scale0 != 1.0 || st.loss_scale != 1.0;
    int64_t window = o->loss_scale_window > 0 ? o->loss_scale_window : 1000;
    bool cleared = false; /* --overwrite: the old checkpoints, before the first save */
    AdamConfig acfg = {.lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                       .weight_decay = o->weight_decay};
    r->first_step = st.step + 1;
    double t_start = clock_monotonic_s(), tokens = 0;
    for (int64_t step = st.step + 1; !rc && step <= o->steps; step++) {
        double t0 = clock_monotonic_s();
        float loss = 0;
        if (M == 1) {
            loader_next(&ld, inputs, targets);
            be->loss_scale = (float)st.loss_scale;
            rc = be->ops->step(be, inputs, targets, true, &loss, e);
        } else {
            rc = accumulate(be, &ld, M, st.loss_scale, inputs, targets, acc, part, &loss, e);
        }
        if (rc)
            break;
        double sq = 0;
        for (int s = 0; s < n_groups; s++)
            sq += be->ops->grad_sq(be, slices[s].begin, slices[s].end);
        double S = st.loss_scale, norm = sqrt(sq) / S;
        acfg.lr = trainer_lr(o, step);
        if (!isfinite(sq)) {
            if (!dynamic) {
                rc = err_set(e, -EDOM, "step %lld: the gradients are not finite; lower --lr, "
                             "check the data, or with fp16 use loss scaling (--loss-scale)",
                             (long long)step);
                break;
            }
            /* overflow: skip this update, halve the scale */
            if (S / 2 < 1.0 / 65536)
                rc = err_set(e, -EDOM, "step %lld: the gradients overflow even at loss scale "
                             "%g; lower --lr or check the data", (long long)step, S);
            st.loss_scale = S / 2;
            st.scale_good = 0;
            st.skipped++;
            r->skipped++;
            if (o->progress)
                fprintf(o->progress, "step %lld: gradients overflow at loss scale %g: update "
                        "skipped, scale %g\n", (long long)step, S, st.loss_scale);
        } else {
            float clip = o->clip > 0 && st.prev_grad_norm > o->clip
                             ? (float)(o->clip / st.prev_grad_norm) : 1.0f;
            AdamStep as;
            adam_step_init(&as, &acfg, (int)(step - st.skipped), clip / (float)S);
            for (int s = 0; s < n_groups && !rc; s++)
                rc = be->ops->update(be, &as, slices[s].begin, slices[s].end, e);
            st.prev_grad_norm = norm;
            if (dynamic && ++st.scale_good >= window) {
                st.loss_scale = S * 2;
                st.scale_good = 0;
            }
        }
        st.step = step;
        st.epoch = ld.epoch;
        st.index = ld.index;
        double dt = clock_monotonic_s() - t0, tps = (double)o->seqs_per_step * o->seq / dt;
        tokens += (double)o->seqs_per_step * o->seq;
        if (!isfinite(loss) && !rc)
            rc = err_set(e, -EDOM, "step %lld: the loss is %f; lower --lr or check the data",
                         (long long)step, loss);
        if (r->n_losses == 0)
            r->first_loss = loss;
        r->losses[r->n_losses++] = loss;
        r->last_loss = loss;
        r->last_step = step;
        /* the row before the checkpoint: a kill between the two leaves a row the resumed run
         * replaces, never a checkpointed step without its row (a non-finite loss is logged
         * too, its error kept) */
        Err log_e;
        int log_rc = trainer_log_row(o, log, step, loss, acfg.lr, norm, tps, S, rc ? &log_e : e);
        if (!rc)
            rc = log_rc;
        trainer_progress(o, step, r->first_step - 1, loss, tps, clock_monotonic_s() - t_start,
                         step == o->steps);
        bool save = o->save_dir && (step == o->steps || (o->save_every > 0 &&
                                                         step % o->save_every == 0));
        if (!rc && save) {
            rc = be->ops->read_state(be, params, m, v, e);
            if (!rc)
                rc = trainer_clear_old_checkpoints(o, &cleared, e);
            if (!rc)
                rc = ckpt_save(o->save_dir, c, &l, params, m, v, &st, e);
        }
    }
    r->loss_scale = st.loss_scale;
    double elapsed = clock_monotonic_s() - t_start;
    r->tokens_per_s = elapsed > 0 ? tokens / elapsed : 0;
    rc = trainer_close_log(o, log, rc, e);
    free(slices), free(inputs), free(targets), free(params), free(m), free(v);
    free(acc), free(part);
    loader_free(&ld);
    gpt2_layout_free(&l);
    if (be)
        be->ops->destroy(be);
    workpool_free(&wp);
    data_free(&data);
    return rc;
}
