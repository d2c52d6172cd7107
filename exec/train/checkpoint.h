/* checkpoint: training checkpoints a Hugging Face user can read, and exact resumption.
 *
 * DIR/step-00000010/ holds model.safetensors (the Hugging Face GPT-2 names and layouts:
 * "transformer.h.N.attn.c_attn.weight" stored (in, out) as Conv1D does), optimizer.safetensors
 * (AdamW m and v in fuyou's flat layout) and state.json (step, loader position, seed, the
 * previous step's gradient norm, the model's shape). A checkpoint is written under a temporary
 * name, synced and renamed, and only then does DIR/latest (itself replaced by rename) name it:
 * a crash never leaves a half-written checkpoint as the latest. Loading a model accepts the
 * names with or without "transformer." (GPT2Model or GPT2LMHeadModel files) and F32, F16 or
 * BF16 data; anything that does not match the model is one clear error. */
#ifndef FUYOU_CHECKPOINT_H
#define FUYOU_CHECKPOINT_H

#include <stdint.h>

#include "gpt2_layout.h"

typedef struct TrainState {
    int64_t step;           /* optimizer steps taken */
    int64_t epoch, index;   /* loader position */
    uint64_t seed;
    double prev_grad_norm;  /* for the clipping policy (trainer.h) */
    double loss_scale;      /* dynamic loss scaling (trainer.h): the scale, 0 if never set */
    int64_t scale_good;     /* steps since the scale last changed or overflowed */
    int64_t skipped;        /* steps whose update an overflow skipped */
} TrainState;

int ckpt_save(const char *dir, const ModelConfig *c, const Gpt2Layout *l, const float *params,
              const float *m, const float *v, const TrainState *s, Err *e);

/* Loads a model file (safetensors) into params (layout l). */
int ckpt_load_model(const char *path, const ModelConfig *c, const Gpt2Layout *l, float *params,
                    Err *e);

/* Loads the checkpoint DIR/latest names: parameters, m, v and the state. */
int ckpt_load(const char *dir, const ModelConfig *c, const Gpt2Layout *l, float *params,
              float *m, float *v, TrainState *s, Err *e);

#endif
