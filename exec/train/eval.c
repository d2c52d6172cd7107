/* eval: the held-out loss; see eval.h. */
#include "eval.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int eval_init(EvalSet *ev, const char *const *paths, int n, DataFormat format, int vocab,
              const char *model, int B, int T, int64_t max_batches, Err *e)
{
    memset(ev, 0, sizeof *ev);
    int rc = data_load_list(&ev->data, paths, n, format, e);
    if (!rc)
        rc = data_check_model(&ev->data, vocab, model, e);
    if (!rc)
        rc = loader_init_in_order(&ev->ld, &ev->data, B, T, e);
    if (rc)
        return rc;
    ev->batches = (int64_t)((ev->ld.n_seq + (size_t)B - 1) / (size_t)B);
    if (max_batches > 0 && max_batches < ev->batches)
        ev->batches = max_batches;
    ev->inputs = malloc((size_t)B * T * sizeof *ev->inputs);
    ev->targets = malloc((size_t)B * T * sizeof *ev->targets);
    if (!ev->inputs || !ev->targets)
        return err_set(e, -ENOMEM, "out of memory for the evaluation's batch");
    return 0;
}

void eval_free(EvalSet *ev)
{
    free(ev->inputs), free(ev->targets);
    ev->inputs = ev->targets = NULL;
    loader_free(&ev->ld);
    data_free(&ev->data);
}

int eval_run(EvalSet *ev, Backend *be, EvalResult *r, Err *e)
{
    const Loader *l = &ev->ld;
    int N = l->B * l->T;
    double sum = 0;
    *r = (EvalResult){0};
    for (int64_t k = 0; k < ev->batches; k++) {
        r->sequences += loader_fill(l, (size_t)k * (size_t)l->B, ev->inputs, ev->targets);
        int counted = backend_count_targets(N, ev->targets);
        if (!counted)
            continue;
        float loss = 0;
        int rc = be->ops->step(be, ev->inputs, ev->targets, false, &loss, e);
        if (rc)
            return rc;
        sum += (double)loss * counted;
        r->targets += counted;
    }
    return eval_finish(ev, sum, r, e);
}

int eval_finish(const EvalSet *ev, double sum, EvalResult *r, Err *e)
{
    if (!r->targets)
        return err_set(e, -EINVAL, "%s: the evaluation's %lld sequences have no target the loss "
                       "counts (every one is masked); give --eval-data other files",
                       ev->data.files[0].path, (long long)r->sequences);
    r->loss = sum / (double)r->targets;
    r->perplexity = exp(r->loss);
    return 0;
}
