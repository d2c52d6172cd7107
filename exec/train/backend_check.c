/* backend_check: the argument checks every backend makes (backend.h), in one place. */
#include <errno.h>
#include <stdbool.h>

#include "backend.h"

int backend_check_shape(const ModelConfig *c, int B, int T, Err *e)
{
    int rc = model_validate(c, e);
    if (rc)
        return rc;
    if (T > c->max_seq || B < 1 || T < 1)
        return err_set(e, -EINVAL, "batch %d x seq %d: seq must be 1 to max_seq %d", B, T,
                       c->max_seq);
    return 0;
}

static bool outside(const ModelConfig *c, int token)
{
    return token < 0 || token >= c->vocab;
}

int backend_check_tokens(const ModelConfig *c, int n, const int *inputs, const int *targets,
                         Err *e)
{
    for (int i = 0; i < n; i++) {
        if (outside(c, inputs[i]))
            return err_set(e, -EINVAL, "input token %d at position %d is outside the "
                           "vocabulary of %d", inputs[i], i, c->vocab);
        if (targets && targets[i] != DATA_IGNORE && outside(c, targets[i]))
            return err_set(e, -EINVAL, "target token %d at position %d is outside the "
                           "vocabulary of %d", targets[i], i, c->vocab);
    }
    return 0;
}

int backend_count_targets(int n, const int *targets)
{
    int count = 0;
    for (int i = 0; i < n; i++)
        count += targets[i] != DATA_IGNORE;
    return count;
}
