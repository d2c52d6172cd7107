/* trainer: the training loop every backend shares, and the pieces of it the out-of-core
 * pipeline runs too (the learning rate, the initialisation, the log, the checkpoints' due
 * steps), so the two train the same bits. Per step: a batch from the loader, forward and
 * backward, the gradient norm over the optimizer's sub-groups, then AdamW sub-group by
 * sub-group in the schedule's order. The numerics (warmup and cosine decay, clipping by the
 * previous step's norm, loss scaling, micro-batches, evaluation, loss masks, resuming):
 * ARCHITECTURE.md, "The training loop's numerics". */
#ifndef FUYOU_TRAINER_H
#define FUYOU_TRAINER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "data.h"

typedef struct TrainOptions {
    ModelConfig model;
    const BackendOps *backend;
    const char *data_paths[DATA_MAX_ARGS]; /* --data, concatenated in this order (data.h) */
    int n_data;
    DataFormat data_format;
    const char *eval_paths[DATA_MAX_ARGS]; /* --eval-data: held-out files (eval.h), or none */
    int n_eval;
    int eval_every;          /* steps between evaluations, and one after the last (0: only it) */
    int64_t eval_batches;    /* batches an evaluation reads at most (0: all its sequences) */
    int seqs_per_step;       /* sequences per optimizer step, all its micro-batches together */
    int seq;                 /* tokens per sequence */
    int n_micro;             /* micro-batches per step, gradients accumulated; it divides
                                seqs_per_step (0: trainer_run 1; pipe_train reads the plan's) */
    int64_t steps;
    float lr, min_lr_ratio, weight_decay, beta1, beta2, eps, clip;
    int warmup;
    uint64_t seed;
    int subgroup_blocks, tail_blocks;
    const char *save_dir;    /* NULL: no checkpoints */
    int save_every;          /* steps between checkpoints (and one at the end) */
    DType save_dtype;        /* of the checkpoints' Hugging Face weights (checkpoint.h) */
    bool save_weights_only;  /* checkpoints without the training state (not resumable) */
    int save_total_limit;    /* step directories kept, the newest (0: all) */
    bool overwrite;          /* save_dir's checkpoints (another run's: the command line
                                allows it only then) are removed just before the first save,
                                not before (a run that fails first leaves them) */
    const char *resume_dir;  /* NULL: start from scratch */
    const char *init_from;   /* weights to start from (ckpt_load_model: a Hugging Face folder,
                                its index or one .safetensors file), or NULL */
    const char *log_path;    /* TSV: step loss lr grad_norm tokens/s scale */
    int threads;
    float loss_scale;        /* the initial loss scale; 0: 65536 for fp16, else 1 (off) */
    int loss_scale_window;   /* steps without overflow before the scale doubles (0: 1000) */
    FILE *progress;          /* where progress goes (NULL: nowhere) */
    /* when *stop turns nonzero (a signal's number, set by a handler), the run ends after the
     * step in flight, with a checkpoint of it when save_dir is given; NULL: never */
    const volatile sig_atomic_t *stop;
} TrainOptions;

typedef struct TrainResult {
    int64_t first_step, last_step;
    float first_loss, last_loss;
    double tokens_per_s;     /* over the steps run */
    int64_t skipped;         /* steps whose update a loss-scale overflow skipped, this run */
    double loss_scale;       /* at the end */
    float *losses;           /* per step run (caller frees), for tests */
    int n_losses;
    int64_t eval_step;       /* the step after which the last evaluation ran (0: none) */
    double eval_loss, eval_perplexity; /* its held-out loss and exp(loss) */
} TrainResult;

/* GPT-2's initialisation of params (layout l): N(0, 0.02) weights, residual projections scaled
 * by 1/sqrt(2L), zero biases, unit LayerNorm gains; seeded, drawn in fixed chunks of the flat
 * array each with its own generator, so the values do not depend on wp (NULL: this thread). */
struct ModelLayout;
void trainer_init_params(const ModelConfig *c, const struct ModelLayout *l, float *params,
                         uint64_t seed, WorkPool *wp);
/* Values [begin, begin + n) of that initialisation into out, the same bits as the whole
 * array's (each chunk's generator starts at the chunk: a range drawn alone draws the chunk's
 * earlier values too), with no whole-model array. */
void trainer_init_range(const ModelConfig *c, const struct ModelLayout *l, uint64_t seed,
                        size_t begin, size_t n, float *out, WorkPool *wp);
/* The range trainer_init_range draws fastest on wp (NULL: this thread): one chunk for each of
 * its threads. A range of a multiple of it, starting at one, keeps every thread busy to its
 * end; a range of 16 chunks on 14 threads keeps 2 of them busy for its second half. */
size_t trainer_init_grain(const WorkPool *wp);

/* The most steps a run may ask for: AdamW counts its steps in an int, and the loop keeps
 * each step's loss (TrainResult). */
#define TRAIN_MAX_STEPS 1000000000

/* The hyperparameters o trains with, as checkpoints record them; and the options a checkpoint
 * of o's run is saved with (hp, filled, is what they point at). */
struct TrainHparams;
struct CkptSaveOptions;
void trainer_hparams(const TrainOptions *o, struct TrainHparams *hp);
struct CkptSaveOptions trainer_save_options(const TrainOptions *o, struct TrainHparams *hp);

/* Before each save: with o->overwrite, removes save_dir's earlier checkpoints the first time
 * (*done then true). 0 or -errno with e. */
int trainer_clear_old_checkpoints(const TrainOptions *o, bool *done, Err *e);

/* Pieces of the loop that the out-of-core pipeline (exec/pipeline) shares: the data, checked
 * against the model (data_check_model: a text file only for a vocabulary of bytes, every token
 * inside the vocabulary; 0 or -errno with e); the progress line (every step on a terminal,
 * about 20 lines otherwise).
 * The --log file, so that it survives a kill: each row is flushed when its step ends, before
 * that step's checkpoint is written. A fresh run creates the file with its header. A run
 * resumed from resumed_step keeps the header and the rows of steps up to resumed_step, drops
 * what follows them (rows of steps the checkpoint does not have, a half-written row), and
 * appends, so a killed and resumed run's log equals an uninterrupted run's (tokens_per_s
 * aside); a missing or empty file gets the header. A file that is not regular (a pipe, a
 * terminal) is written as it is. The columns are step, loss, lr, grad_norm, tokens_per_s,
 * loss_scale, and with --eval-data (o->n_eval) two more, eval_loss and eval_ppl: the held-out
 * loss and perplexity in the rows of the steps evaluated after, nan in the others; a resumed
 * run's log must have the header its options write. trainer_open_log: 0, or -errno with e
 * naming the file (and its line when it is not a fuyou log); *log stays NULL without
 * o->log_path. trainer_log_row: one row (eval_loss NaN: not evaluated), written through; 0 or
 * -errno with e naming the file and the reason, at the first failed write (NULL log: nothing).
 * trainer_close_log closes log (NULL: nothing) and returns rc when it is an error already, else
 * 0 or -errno with e. */
int trainer_load_data(const TrainOptions *o, TokenData *data, Err *e);
int trainer_open_log(const TrainOptions *o, int64_t resumed_step, FILE **log, Err *e);
int trainer_log_row(const TrainOptions *o, FILE *log, int64_t step, float loss, float lr,
                    double grad_norm, double tokens_per_s, double loss_scale, double eval_loss,
                    Err *e);
int trainer_close_log(const TrainOptions *o, FILE *log, int rc, Err *e);
void trainer_progress(const TrainOptions *o, int64_t step, int64_t first, float loss,
                      double tokens_per_s, double elapsed_s, bool last);

/* The micro-batches of a step trainer_run trains (n_micro, 0 read as 1), and the sequences of
 * each (seqs_per_step / that count). */
int trainer_n_micro(const TrainOptions *o);
int trainer_seqs_per_micro(const TrainOptions *o);

/* Whether step ends with a checkpoint: with o->save_dir, every o->save_every steps, at the
 * last, and once a stop was asked (o->stop). */
bool trainer_save_due(const TrainOptions *o, int64_t step);

/* The signal that asked the run to stop (*o->stop), or 0. */
int trainer_stop_signal(const TrainOptions *o);
/* Says on the progress stream that the run stops after step, which it finishes (and saves). */
void trainer_stop_notice(const TrainOptions *o, int64_t step);
/* After step (saved: its checkpoint was written): 0 to go on, or -EINTR with e saying which
 * signal stopped the run, after which step and where it was saved, when a stop was asked
 * before the last step. With save_dir, a step not saved goes on (the signal came after its
 * save was decided: the next step saves and stops). */
int trainer_stopped(const TrainOptions *o, int64_t step, bool saved, Err *e);

/* Whether an evaluation follows step's update: with --eval-data, every o->eval_every steps and
 * after the last. */
bool trainer_eval_due(const TrainOptions *o, int64_t step);
/* An evaluation after step ended with er: into r's last evaluation and onto the progress
 * stream. */
struct EvalResult;
void trainer_eval_done(const TrainOptions *o, int64_t step, const struct EvalResult *er,
                       TrainResult *r);

/* Appends step's loss to r (r->losses has room for every step of the run). */
void trainer_result_add(TrainResult *r, int64_t step, float loss);

/* Where a run starts, the same for both trainers: o->resume_dir's checkpoint (params, m, v and
 * *st), else o->init_from's weights (params), else GPT-2's initialisation of params (seeded by
 * o->seed, drawn on wp); *st as the caller set it for a fresh run otherwise, st->data set to
 * data's fingerprint for the checkpoints to come. A checkpoint at o->steps or beyond is
 * refused, and so is one of other training data (its fingerprint, data.h: other files, or the
 * same in another order; a checkpoint without one resumes unchecked). 0 or -errno with e. */
struct TrainState;
int trainer_load_start(const TrainOptions *o, const TokenData *data,
                       const struct ModelLayout *l, float *params, float *m, float *v,
                       WorkPool *wp, struct TrainState *st, Err *e);

/* trainer_load_start's checks of a start state *st (its step below o->steps, its data
 * fingerprint data's), st->data then set to data's: for a loader that put the state
 * elsewhere (the pipeline's tiers). 0 or -errno with e. */
int trainer_check_start(const TrainOptions *o, const TokenData *data, struct TrainState *st,
                        Err *e);

/* A resumed run's loader moved to the checkpoint's position st (loader_seek), its refusal
 * naming --resume's directory and step. 0 or -EINVAL with e. */
int trainer_seek(const TrainOptions *o, Loader *ld, const struct TrainState *st, Err *e);

/* The learning rate at step (1-based). */
float trainer_lr(const TrainOptions *o, int64_t step);

/* Runs training. 0 or -errno with e; r gets what happened (free r->losses). */
int trainer_run(const TrainOptions *o, TrainResult *r, Err *e);

#endif
