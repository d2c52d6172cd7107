/* Check suite for fine-tuning a model a user holds with fuyou-run (its weights, checkpoints,
 * evaluation and hyperparameters): the tiny sharded bf16 Llama fixture (hf_testutil.h) as
 * --model, and gpt2-tiny for the checkpoint options. Runs the built fuyou-run (FUYOU_RUN). */
#include <jansson.h>
#include <sys/stat.h>

#include "adam.h"
#include "hf_testutil.h"
#include "safetensors.h"

static char out[1 << 16];

/* The bytes of the GPL text folded into the fixture's 64 tokens, as headerless uint16 (nanoGPT's
 * .bin), in a new temporary file whose path goes in buf (the test unlinks it). */
static const char *fixture_tokens(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/fuyou-ft-XXXXXX.bin");
    int fd = mkstemps(buf, 4);
    ck_assert_int_ge(fd, 0);
    FILE *in = fopen("/usr/share/common-licenses/GPL-3", "rb"), *o = fdopen(fd, "wb");
    ck_assert(in && o);
    for (int ch, k = 0; (ch = getc(in)) != EOF && k < 20000; k++) {
        unsigned char tok[2] = {(unsigned char)(ch % 64), 0};
        ck_assert_uint_eq(fwrite(tok, 1, 2, o), 2);
    }
    fclose(in);
    ck_assert_int_eq(fclose(o), 0);
    return buf;
}

static bool exists(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* The dtype of the first tensor of the safetensors file at path. */
static void first_dtype(const char *path, char *dtype, size_t n)
{
    StFile st;
    Err e;
    ck_assert_msg(st_open(&st, path, &e) == 0, "%s", e.msg);
    snprintf(dtype, n, "%s", st.t[0].dtype);
    st_close(&st);
}

/* --model DIR loads DIR's weights (the first line says so) with a fine-tune's defaults; its
 * checkpoint is a bf16 Hugging Face folder (the fixture's dtype) whose every weight is the
 * fp32 master weight beside it rounded to bf16, and state.json records the hyperparameters */
START_TEST(model_folder_fine_tunes)
{
    char tok[64], dir[] = "/tmp/fuyou-ft-save-XXXXXX", args[4096], step[128], path[256];
    fixture_tokens(tok, sizeof tok);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(args, sizeof args, "--model %s --data %s --steps 2 --batch 2 --threads 1 --save %s",
             hf_fixture(), tok, dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "from the weights in ");
    tu_assert_contains(out, "batch 2 x 64"); /* the fixture's 64 positions, under 1024 */
    tu_assert_contains(out, "lr 1e-05 (warmup 1 steps");
    tu_assert_contains(out, "bf16 weights and the training state");
    snprintf(step, sizeof step, "%s/step-00000002", dir);
    ck_assert(exists(step, "master.safetensors") && exists(step, "optimizer.safetensors"));
    char dtype[8];
    snprintf(path, sizeof path, "%s/model.safetensors", step);
    first_dtype(path, dtype, sizeof dtype);
    ck_assert_str_eq(dtype, "BF16");
    snprintf(path, sizeof path, "%s/master.safetensors", step);
    first_dtype(path, dtype, sizeof dtype);
    ck_assert_str_eq(dtype, "F32");
    ModelConfig c;
    ModelLayout l;
    float *fixture = hf_fixture_params(&c, &l), *master, *weights;
    Err e;
    ck_assert_msg(hf_load_flat(path, &c, &l, &master, &e) == 0, "%s", e.msg);
    ck_assert_msg(hf_load_flat(step, &c, &l, &weights, &e) == 0, "%s", e.msg);
    size_t moved = 0;
    for (size_t i = 0; i < l.total; i++) {
        uint32_t bits = (uint32_t)adam_f32_to_bf16(master[i]) << 16;
        float rounded;
        memcpy(&rounded, &bits, sizeof rounded);
        ck_assert_msg(weights[i] == rounded, "value %zu: %g, master %g", i, weights[i],
                      master[i]);
        moved += master[i] != fixture[i];
    }
    ck_assert_uint_gt(moved, l.total / 2); /* trained from the fixture's weights */
    snprintf(path, sizeof path, "%s/config.json", step);
    json_t *cfg = hf_read_json(path);
    ck_assert_str_eq(json_string_value(json_object_get(cfg, "torch_dtype")), "bfloat16");
    json_decref(cfg);
    snprintf(path, sizeof path, "%s/state.json", step);
    json_t *st = hf_read_json(path);
    json_t *hp = json_object_get(st, "hyperparameters");
    ck_assert_double_eq_tol(json_real_value(json_object_get(hp, "lr")), 1e-5, 1e-12);
    ck_assert_int_eq(json_integer_value(json_object_get(hp, "seq")), 64);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "model"), "arch")),
                     "llama");
    json_decref(st);
    free(master), free(weights), free(fixture);
    layout_free(&l);
    tu_rm_tree(dir);
    unlink(tok);
}
END_TEST

/* A folder with a config.json and no weights is refused unless random weights are asked for;
 * --from-scratch says so on the first line, and cannot go with another source of weights */
START_TEST(folder_without_weights)
{
    char tok[64], dir[] = "/tmp/fuyou-ft-cfg-XXXXXX", args[4096], cmd[4096];
    fixture_tokens(tok, sizeof tok);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "cp '%s/config.json' '%s/'", hf_fixture(), dir);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
    snprintf(args, sizeof args, "--model %s --data %s --steps 1 --batch 2", dir, tok);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "the folder has a config.json and no weights");
    tu_assert_contains(out, "--from-scratch");
    snprintf(args, sizeof args, "--model %s --data %s --steps 1 --batch 2 --from-scratch", dir,
             tok);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "from random weights (seed 1337)");
    tu_assert_contains(out, "lr 0.003"); /* from scratch: the pretraining defaults */
    snprintf(args, sizeof args, "--model %s --data %s --from-scratch --init-from %s", dir, tok,
             hf_fixture());
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "--from-scratch and --init-from both say where the weights come");
    tu_rm_tree(dir);
    unlink(tok);
}
END_TEST

/* --save-total-limit keeps the newest step folders; --save-weights-only writes the weights
 * alone, and resuming from it says why it cannot */
START_TEST(save_limit_and_weights_only)
{
    char dir[] = "/tmp/fuyou-ft-keep-XXXXXX", args[512], step[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(args, sizeof args, "--steps 5 --batch 2 --seq 16 --threads 1 --save %s "
             "--save-every 1 --save-total-limit 2", dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(step, sizeof step, "%s/step-00000003", dir);
    ck_assert(!exists(dir, "step-00000003") && exists(dir, "step-00000004") &&
              exists(dir, "step-00000005"));
    tu_rm_tree(dir);
    ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/fuyou-ft-keep-XXXXXX")));
    snprintf(args, sizeof args, "--steps 2 --batch 2 --seq 16 --threads 1 --save %s "
             "--save-weights-only", dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "bf16 weights alone (not resumable)");
    snprintf(step, sizeof step, "%s/step-00000002", dir);
    ck_assert(exists(step, "model.safetensors") && exists(step, "config.json"));
    ck_assert(!exists(step, "master.safetensors") && !exists(step, "optimizer.safetensors"));
    snprintf(args, sizeof args, "--steps 4 --batch 2 --seq 16 --resume %s", dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "saved with --save-weights-only");
    tu_assert_not_contains(out, "skipping");
    tu_rm_tree(dir);
}
END_TEST

/* A resumed run goes on with the hyperparameters and --steps its checkpoint recorded, unless
 * given again; a checkpoint of another family is refused as such, not as damage */
START_TEST(resume_keeps_what_ran)
{
    char dir[] = "/tmp/fuyou-ft-res-XXXXXX", args[512], ini[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(args, sizeof args, "--steps 2 --batch 2 --seq 16 --lr 0.001 --warmup 3 --threads 1 "
             "--save %s", dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(args, sizeof args, "--resume %s --steps 3", dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "batch 2 x 16");
    tu_assert_contains(out, "lr 0.001 (warmup 3 steps");
    snprintf(args, sizeof args, "--resume %s --steps 4 --lr 0.002", dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "lr 0.002 (warmup 3 steps");
    /* a Llama of gpt2-tiny's every shape */
    tu_temp_file(ini, sizeof ini, ".ini", "[model]\nname = llama-as-tiny\narch = llama\n"
                 "layers = 4\nhidden = 128\nheads = 4\nffn = 512\nvocab = 256\nmax_seq = 256\n"
                 "tied = true\n");
    snprintf(args, sizeof args, "--model %s --resume %s --steps 5", ini, dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "the checkpoint is of a gpt2 model; this run's llama-as-tiny is llama");
    tu_assert_not_contains(out, "skipping");
    unlink(ini);
    tu_rm_tree(dir);
}
END_TEST

/* --steps 0 evaluates the weights without training, in memory and out of core alike (the same
 * loss); it needs held-out data and weights */
START_TEST(evaluate_only)
{
    char tok[64], args[4096], loss[2][64];
    fixture_tokens(tok, sizeof tok);
    const char *plans[2] = {"", "--weights ssd --optim ssd --act ssd"};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "--model %s --data %s --eval-data %s --steps 0 --batch 2 "
                 "--eval-batches 3 --threads 1 %s", hf_fixture(), tok, tok, plans[k]);
        ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
        const char *at = strstr(out, "evaluated the weights of step 0, no training: held-out "
                                     "loss ");
        ck_assert_msg(at != NULL, "%s", out);
        snprintf(loss[k], sizeof loss[k], "%.20s", at + strlen("evaluated the weights of step "
                                                               "0, no training: held-out loss "));
    }
    ck_assert_str_eq(loss[0], loss[1]);
    snprintf(args, sizeof args, "--model %s --data %s --steps 0", hf_fixture(), tok);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "--steps 0 evaluates without training: it needs --eval-data");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--steps 0 --eval-data "
                                "/usr/share/common-licenses/GPL-3", out, sizeof out), 2);
    tu_assert_contains(out, "and weights (--model DIR, --init-from or --resume)");
    unlink(tok);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_finetune");
    TCase *tc = tcase_create("finetune");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, model_folder_fine_tunes);
    tcase_add_test(tc, folder_without_weights);
    tcase_add_test(tc, save_limit_and_weights_only);
    tcase_add_test(tc, resume_keeps_what_ran);
    tcase_add_test(tc, evaluate_only);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
