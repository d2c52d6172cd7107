/* fuzz_model_ini: the model ini (model/model.h, model_load) under libFuzzer.
 *
 * The input is the file. A load either fails with one line naming what is wrong, or gives a
 * model within the limits (model_validate) whose parameter counts are exact and whose
 * parameter layout (layout.h, what the trainer and checkpoints address) covers them. */
#include <errno.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "layout.h"
#include "model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_file(path, sizeof path, "model.ini", data, size);
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
