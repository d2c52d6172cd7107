/* fuzz_state: a checkpoint's state.json (exec/train/checkpoint.h, read by ckpt_load) under
 * libFuzzer.
 *
 * At start a checkpoint of the micro model (fuzz_util.h) is saved as step 4; each input
 * replaces its state.json, and the checkpoint is resumed. The resume either fails with one line
 * naming state.json, or gives a state within the ranges checkpoint.h promises (what the trainer
 * indexes and counts with, the data's fingerprint absent or whole) and the saved weights and
 * AdamW moments; a loader then moved to its position either refuses it in one line or hands out
 * batches from there (under UBSan: no overflow however large the numbers). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "fuzz_util.h"

static ModelConfig micro;
static ModelLayout layout;
static float *saved, *params, *m, *v;
static char ckpt_dir[512];
static TokenData tokens; /* 600 bytes of text: 37 sequences of 16 */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    micro = fuzz_micro_model();
    if (layout_init(&layout, &micro))
        fuzz_die("layout_init", "");
    size_t P = layout.total;
    saved = malloc(3 * P * sizeof *saved);
    params = malloc(3 * P * sizeof *params);
    if (!saved || !params)
        fuzz_die("malloc", "");
    m = params + P, v = params + 2 * P;
    for (size_t i = 0; i < 3 * P; i++)
        saved[i] = (float)i * 1e-3f - 1.0f;
    fuzz_path(ckpt_dir, sizeof ckpt_dir, "ckpt");
    char text[600], tpath[512];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)('a' + i % 26);
    fuzz_file(tpath, sizeof tpath, "tokens.txt", text, sizeof text);
    Err te;
    if (data_load(&tokens, tpath, DATA_AUTO, &te))
        fuzz_die("data_load", tpath);
    TrainState s = {.step = 4, .epoch = 1, .index = 3, .seed = 5, .prev_grad_norm = 0.5,
                    .data = {.files = 2, .tokens = 1000, .crc32c = 0xdeadbeef}};
    Err e;
    if (ckpt_save(ckpt_dir, &micro, &layout, saved, saved + P, saved + 2 * P, &s, &e)) {
        fprintf(stderr, "fuzz_state: %s\n", e.msg);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_file(path, sizeof path, "ckpt/step-00000004/state.json", data, size);
    TrainState s;
    Err e = {""};
    int rc = ckpt_load(ckpt_dir, &micro, &layout, params, m, v, &s, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL);
        fuzz_check_message(e.msg);
        fuzz_check(strstr(e.msg, "state.json") != NULL);
        return 0;
    }
    fuzz_check(s.step >= 0 && s.step <= CKPT_STEP_MAX);
    fuzz_check(s.skipped >= 0 && s.skipped <= s.step);
    fuzz_check(s.scale_good >= 0 && s.scale_good <= s.step);
    fuzz_check(s.epoch >= 0 && s.index >= 0);
    fuzz_check(isfinite(s.prev_grad_norm) && s.prev_grad_norm >= 0);
    fuzz_check(s.loss_scale == 0 || (s.loss_scale >= 1.0 / 65536 && s.loss_scale <= FLT_MAX));
    fuzz_check((s.data.files == 0 && s.data.tokens == 0 && s.data.crc32c == 0) ||
               (s.data.files >= 1 && s.data.files <= DATA_MAX_FILES && s.data.tokens >= 1));
    fuzz_check(!memcmp(params, saved, 3 * layout.total * sizeof *params));
    Loader ld;
    fuzz_check(loader_init(&ld, &tokens, 2, 16, s.seed, &e) == 0);
    rc = loader_seek(&ld, s.epoch, s.index, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL);
        fuzz_check_message(e.msg);
    } else {
        int in[32], tg[32];
        for (int k = 0; k < 40; k++)
            loader_next(&ld, in, tg);
        fuzz_check(ld.epoch > s.epoch && ld.epoch <= s.epoch + 3);
    }
    loader_free(&ld);
    return 0;
}
