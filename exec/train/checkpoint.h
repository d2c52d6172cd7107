/* checkpoint: training checkpoints a Hugging Face user can read, and exact resumption.
 *
 * DIR/step-00000010/ is a Hugging Face model folder (hf_save.h: config.json, the weights in the
 * model's own dtype, the tokenizer files) that from_pretrained loads, and beside it the training
 * state needed only to resume: master.safetensors (fp32 master weights, absent when the weights
 * are fp32), optimizer.safetensors (AdamW m and v) and state.json (step, loader position, seed,
 * model, data fingerprint, hyperparameters). A checkpoint is written under a temporary name,
 * synced and renamed before DIR/latest names it; keep_last removes older ones after. Resuming
 * reads what latest names, else the newest step that loads completely (said on stderr). A run
 * holds its save directory (dirlock.h). Every damaged or mismatched file is one error naming
 * the file and the tensor or key. The whole contract: ARCHITECTURE.md, "Checkpoints". */
#ifndef FUYOU_CHECKPOINT_H
#define FUYOU_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data.h"
#include "hf_save.h"
#include "layout.h"
#include "workpool.h"

typedef struct TrainState {
    int64_t step;           /* optimizer steps taken */
    int64_t epoch, index;   /* loader position */
    uint64_t seed;
    double prev_grad_norm;  /* for the clipping policy (ARCHITECTURE.md) */
    double loss_scale;      /* dynamic loss scaling (ARCHITECTURE.md): the scale, 0 if never set */
    int64_t scale_good;     /* steps since the scale last changed or overflowed */
    int64_t skipped;        /* steps whose update an overflow skipped */
    DataPrint data;         /* the training data's fingerprint (data.h); 0 files: not recorded */
    int64_t sched_steps;    /* the --steps the learning rate was scheduled over (0: not
                               recorded, an older checkpoint) */
} TrainState;

/* The hyperparameters a run trains with, recorded in state.json ("hyperparameters") so that
 * a resumed run goes on with those its command line does not give (run_args.c). */
typedef struct TrainHparams {
    bool set;               /* false: not recorded (a checkpoint from before them) */
    double lr, min_lr_ratio, weight_decay, beta1, beta2, eps, clip;
    int64_t warmup, batch, seq;
} TrainHparams;

/* What a checkpoint directory's latest step records of the run that wrote it: its
 * hyperparameters (hp->set false when it has none) and the --steps its schedule ran over (0:
 * not recorded), read from DIR/latest's state.json. A directory with no readable latest has
 * neither: 0 all the same (the resume itself reports what is wrong). */
int ckpt_read_hparams(const char *dir, TrainHparams *hp, int64_t *sched_steps);

/* The most steps a checkpoint may record: AdamW counts its steps in an int. */
#define CKPT_STEP_MAX ((int64_t)INT32_MAX - 1)

/* How a checkpoint is written beyond what ckpt_save's arguments say. */
typedef struct CkptSaveOptions {
    uint64_t max_shard_bytes;   /* weights above it go in shards; 0: HF_MAX_SHARD_BYTES (5 GB) */
    DType weights_dtype;        /* of the Hugging Face weights (0: fp32, which are the master
                                   weights then: no master.safetensors) */
    bool weights_only;          /* no training state: a final export, not resumed */
    int keep_last;              /* step directories kept, the newest (0: all) */
    const TrainHparams *hp;     /* recorded in state.json; NULL: none */
    FILE *progress;             /* a save that takes long says how far it is (progress.h);
                                   NULL: nothing */
    const char *tokenizer_from; /* where the model came from (--init-from's path, or a --resume
                                   directory: its latest step), whose tokenizer files and
                                   config token ids the checkpoint carries; NULL: none */
} CkptSaveOptions;

/* Writes the checkpoint of step s->step into dir (created if needed) and points dir/latest at
 * it; o NULL: the defaults. 0 or -errno with e. */
int ckpt_save_with(const char *dir, const ModelConfig *c, const ModelLayout *l,
                   const float *params, const float *m, const float *v, const TrainState *s,
                   const CkptSaveOptions *o, Err *e);
/* ckpt_save_with reading the state from src range by range (hf_save.h), as an out-of-core
 * run holds it: never a whole-model array. */
int ckpt_save_from(const char *dir, const ModelConfig *c, const ModelLayout *l,
                   const HfSource *src, const TrainState *s, const CkptSaveOptions *o, Err *e);
/* ckpt_save_with with the defaults. */
int ckpt_save(const char *dir, const ModelConfig *c, const ModelLayout *l, const float *params,
              const float *m, const float *v, const TrainState *s, Err *e);

/* Loads a model's weights into params (layout l, l->total values) from path: a Hugging Face
 * folder, its index or one .safetensors file (hf_load with the flat sink). 0 or -errno with e. */
int ckpt_load_model(const char *path, const ModelConfig *c, const ModelLayout *l, float *params,
                    Err *e);

/* Loads the checkpoint DIR/latest names (or the newest complete one, above): parameters, m, v
 * and the state. */
int ckpt_load(const char *dir, const ModelConfig *c, const ModelLayout *l, float *params,
              float *m, float *v, TrainState *s, Err *e);

/* ckpt_load with the model and the optimizer put by load(user, step_dir, e) (0 or -errno with
 * e; a step it fails on is skipped as a broken one is, and load is called again on an older
 * one): for an out-of-core run, which reads a step range by range into its tiers through a
 * CkptReader. A failure may come after part of the state is put (a tensor's checksum is
 * checked at its end), so load must put every value of the state: the older step's load then
 * rewrites all that the broken one left (checking a step whole before loading it would read
 * every resumed checkpoint twice). The state is *s only once a step has loaded. */
typedef int (*CkptStepLoad)(void *user, const char *step_dir, Err *e);
int ckpt_load_with(const char *dir, const ModelConfig *c, CkptStepLoad load, void *user,
                   TrainState *s, Err *e);

/* A checkpoint's step directory read in ranges of the layout, front to back, each starting
 * where the one before ended: the weights of [begin, begin + n) into params (params[0] is
 * begin's), Adam's m and v into m and v; each tensor's checksum checked when its last value
 * is read. ckpt_reader_close(r) after, either way. 0 or -errno naming the file. */
typedef struct CkptReader CkptReader;
int ckpt_reader_open(CkptReader **r, const char *step_dir, const ModelConfig *c,
                     const ModelLayout *l, Err *e);
int ckpt_reader_read(CkptReader *r, size_t begin, size_t n, float *params, float *m, float *v,
                     Err *e);
/* What it reads from here on widened to fp32 on wp's threads (hf_reader_set_pool). */
void ckpt_reader_set_pool(CkptReader *r, WorkPool *wp);
void ckpt_reader_close(CkptReader *r);

/* Before a fresh run (no resume) saves into dir: 0 when dir holds no checkpoint (no latest, no
 * step directory; a missing dir holds none); else -EEXIST with one line saying what to do, or
 * with overwrite, removes them (0 or -errno). Other files in dir are left alone. */
int ckpt_prepare_fresh(const char *dir, bool overwrite, Err *e);

#endif
