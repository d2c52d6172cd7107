/* eval: held-out loss and perplexity, for --eval-data (trainer.h runs it).
 *
 * The held-out files are read as training data are (data.h: formats, several files, masks) and
 * cut the same way, into sequences of T + 1 at stride T within each file, taken in file order,
 * never shuffled, B at a time (the backend's micro-batch); a last partial batch is padded with
 * rows whose targets are all DATA_IGNORE. The loss is the mean cross-entropy over every target
 * of those sequences that the loss counts (not masked): each batch's mean times its count,
 * summed in double, over the total count; the perplexity is exp(loss). max_batches bounds the
 * batches (the first ones in file order; 0: all), so that a large held-out file is evaluated on
 * the same fixed part every time. Evaluation runs the backend's forward only: it changes
 * neither the weights, the optimizer, the gradients a step uses, nor the training loader, so a
 * run with it trains the same bits as one without. */
#ifndef FUYOU_EVAL_H
#define FUYOU_EVAL_H

#include <stdint.h>

#include "backend.h"
#include "data.h"

typedef struct EvalSet {
    TokenData data;
    Loader ld;
    int *inputs, *targets; /* (B,T) one batch */
    int64_t batches;       /* evaluated each time */
} EvalSet;

typedef struct EvalResult {
    double loss, perplexity;
    int64_t targets, sequences; /* counted targets, and the sequences they are in */
} EvalResult;

/* Loads paths[0..n) (format as --data-format) for a model of vocabulary vocab named model
 * (data_check_model), in batches of B x T, at most max_batches of them (0: all). 0 or -errno
 * with e naming the file; eval_free takes it half-built. */
int eval_init(EvalSet *ev, const char *const *paths, int n, DataFormat format, int vocab,
              const char *model, int B, int T, int64_t max_batches, Err *e);
void eval_free(EvalSet *ev);

/* The held-out loss of be's current weights (be's micro-batches are B x T). 0, or -errno with
 * e: the backend's error, or -EINVAL when the mask leaves no target to count. */
int eval_run(EvalSet *ev, Backend *be, EvalResult *r, Err *e);
/* r's loss and perplexity from sum, the batches' losses each times the targets it counts (r's
 * targets and sequences summed already), as eval_run ends: for an executor that runs the
 * batches itself. 0, or -EINVAL when the mask left no target to count. */
int eval_finish(const EvalSet *ev, double sum, EvalResult *r, Err *e);

#endif
