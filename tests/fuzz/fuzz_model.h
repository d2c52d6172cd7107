/* fuzz_model: what the model targets check (fuzz_model_ini.c, fuzz_hf_config.c). The input is
 * a model file named name: a load either fails with one line naming what is wrong, or gives a
 * model within the limits (model_validate) whose parameter counts are exact and whose
 * parameter layout (layout.h, what the trainer and checkpoints address) covers them. */
#ifndef FUYOU_FUZZ_MODEL_H
#define FUYOU_FUZZ_MODEL_H

#include <errno.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "layout.h"
#include "model.h"

static inline int fuzz_model_file(const char *name, const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_file(path, sizeof path, name, data, size);
    ModelConfig c;
    Err e = {""};
    int rc = model_load(path, &c, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL || rc == -ENOMEM);
        fuzz_check_message(e.msg);
        return 0;
    }
    Err why;
    fuzz_check(model_validate(&c, &why) == 0);
    fuzz_check(c.name[0] != '\0');
    int64_t P = model_param_count(&c);
    fuzz_check(P > 0 && P == c.n_layer * model_block_params(&c) + model_embed_params(&c));
    ModelLayout l;
    fuzz_check(layout_init(&l, &c) == 0);
    fuzz_check((int64_t)l.total == P);
    size_t sum = 0;
    for (int i = 0; i < l.n; i++) {
        fuzz_check(l.t[i].offset == sum);
        fuzz_check(l.t[i].numel == (size_t)l.t[i].rows * (size_t)l.t[i].cols);
        sum += l.t[i].numel;
    }
    fuzz_check(sum == l.total);
    layout_free(&l);
    return 0;
}

#endif
