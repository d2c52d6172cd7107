/* backend: the operations a training backend provides, so one training loop (trainer.h) runs on
 * the CPU reference and on CUDA alike (fio-style ops table). The implementations are
 * exec/cpu/cpu_backend.h and exec/cuda/cuda_backend.h; exec/run/backends.h finds one by name.
 *
 * Parameters, gradients and the optimizer's m and v are addressed in the flat fp32 layout of
 * gpt2_layout.h, on the host, whatever the backend keeps internally; the optimizer step is
 * asked for slice by slice so the loop can update per sub-group. */
#ifndef FUYOU_BACKEND_H
#define FUYOU_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "adam.h"
#include "data.h"
#include "fuyou_err.h"
#include "model.h"
#include "workpool.h"

typedef struct BackendOps BackendOps;

/* Every backend's state starts with this. */
typedef struct Backend {
    const BackendOps *ops;
    ModelConfig cfg;
    int B, T;
    size_t n_params;
    float loss_scale; /* step's backward starts from loss_scale * d(mean loss): 1 at create */
} Backend;

struct BackendOps {
    const char *name;
    /* A backend for micro-batches of B sequences of T tokens; parameters and optimizer state
     * zeroed. The CPU reference computes in fp32 whatever c->dtype says; CUDA keeps weights
     * and activations in c->dtype, bf16 or fp16 (fp16 needs loss scaling: ARCHITECTURE.md). 0 or
     * -errno with e. */
    int (*create)(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e);
    void (*destroy)(Backend *b);
    /* Copy parameters, m and v out of or into the backend (any pointer may be NULL). */
    int (*read_state)(Backend *b, float *params, float *m, float *v, Err *e);
    int (*write_state)(Backend *b, const float *params, const float *m, const float *v, Err *e);
    int (*read_grads)(Backend *b, float *grads, Err *e);
    /* Replace the gradients (the sum over a step's micro-batches, trainer.h). */
    int (*write_grads)(Backend *b, const float *grads, Err *e);
    /* Forward over inputs (B,T); with targets, *loss is the mean cross-entropy over the targets
     * the loss counts (backend_count_targets: all but DATA_IGNORE's, the masked ones), 0 when
     * there is none. With backward, gradients of loss_scale * loss are then computed from zero:
     * each counted target's loss gradient is loss_scale / (the count), a masked one's 0. */
    int (*step)(Backend *b, const int *inputs, const int *targets, bool backward, float *loss,
                Err *e);
    /* Sum of squared gradients over parameters [begin, end). */
    double (*grad_sq)(Backend *b, size_t begin, size_t end);
    /* AdamW over parameters [begin, end). */
    int (*update)(Backend *b, const AdamStep *s, size_t begin, size_t end, Err *e);
};

/* Checks every backend makes: the model's shape and the batch against max_seq (0 or -EINVAL),
 * and every token inside the vocabulary (targets may be NULL; a target may also be
 * DATA_IGNORE). */
int backend_check_shape(const ModelConfig *c, int B, int T, Err *e);
int backend_check_tokens(const ModelConfig *c, int n, const int *inputs, const int *targets,
                         Err *e);

/* The targets of targets[0..n) that the loss counts: those that are not DATA_IGNORE. Every
 * backend and device divides the summed loss, and scales its gradient, by this count. */
int backend_count_targets(int n, const int *targets);

#endif
