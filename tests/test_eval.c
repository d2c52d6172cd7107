/* Check suite for exec/train/eval and the trainer's --eval-data: the held-out loss is the mean
 * over every counted target whatever the batch (a padded last batch changes nothing), bounded
 * by --eval-batches, masked targets left out (all masked: one error); a run with evaluation
 * trains the same bits as one without, logs eval_loss and eval_ppl where due and nan elsewhere,
 * and a resumed log must have the header its options write. */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>

#include "eval.h"
#include "cpu_backend.h"
#include "gpt2_layout.h"
#include "trainer.h"
#include "testutil.h"

static const char *text = "/usr/share/common-licenses/GPL-3";

/* The held-out part: 2000 bytes of the text (249 sequences of 8 + 1). */
static void held_out(char *path, size_t n)
{
    FILE *in = fopen(text, "rb");
    char buf[2000];
    ck_assert_uint_eq(fread(buf, 1, sizeof buf, in), sizeof buf);
    fclose(in);
    snprintf(path, n, "/tmp/fuyou-eval-XXXXXX.txt");
    int fd = mkstemps(path, 4);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
    close(fd);
}

/* A CPU backend of gpt2-tiny for batches of B x 8, its weights GPT-2's initialisation. */
static Backend *tiny_backend(int B)
{
    const ModelConfig *c = model_preset_find("gpt2-tiny");
    ModelLayout l;
    ck_assert_int_eq(layout_init(&l, c), 0);
    float *p = calloc(l.total, sizeof *p);
    trainer_init_params(c, &l, p, 3, NULL);
    Backend *b;
    Err e;
    ck_assert_int_eq(backend_cpu.create(&b, c, B, 8, NULL, &e), 0);
    ck_assert_int_eq(b->ops->write_state(b, p, NULL, NULL, &e), 0);
    free(p);
    layout_free(&l);
    return b;
}

static EvalResult eval_at(const char *path, int B, int64_t max_batches)
{
    EvalSet ev;
    Err e;
    const char *paths[1] = {path};
    ck_assert_msg(eval_init(&ev, paths, 1, DATA_AUTO, 256, "gpt2-tiny", B, 8, max_batches,
                            &e) == 0, "%s", e.msg);
    Backend *b = tiny_backend(B);
    EvalResult r;
    ck_assert_msg(eval_run(&ev, b, &r, &e) == 0, "%s", e.msg);
    b->ops->destroy(b);
    eval_free(&ev);
    return r;
}

/* Batches of 1 and of 4 (the last of 63 padded with 3 ignored rows) give the same mean; the
 * first batches only, with --eval-batches */
START_TEST(mean_over_every_target)
{
    char path[64];
    held_out(path, sizeof path);
    EvalResult one = eval_at(path, 1, 0), four = eval_at(path, 4, 0);
    ck_assert_int_eq(one.sequences, 249);
    ck_assert_int_eq(four.sequences, 249);
    ck_assert_int_eq(one.targets, 249 * 8);
    ck_assert_int_eq(four.targets, 249 * 8);
    printf("held-out loss %.6f (batches of 1) %.6f (of 4), perplexity %.3f\n", one.loss,
           four.loss, one.perplexity);
    ck_assert_double_lt(fabs(one.loss - four.loss), 1e-5 * one.loss);
    ck_assert_double_eq_tol(one.perplexity, exp(one.loss), 1e-9 * one.perplexity);
    /* an untrained byte model is near ln 256 */
    ck_assert_double_lt(fabs(one.loss - log(256.0)), 0.5);
    EvalResult part = eval_at(path, 4, 10);
    ck_assert_int_eq(part.sequences, 40);
    EvalResult first40 = eval_at(path, 40, 1);
    ck_assert_double_lt(fabs(part.loss - first40.loss), 1e-5 * part.loss);
    unlink(path);
}
END_TEST

/* A mask leaves its targets out of the held-out loss; a mask of zeros is one error */
START_TEST(masked_held_out)
{
    char path[64], mask[96];
    held_out(path, sizeof path);
    data_mask_path(path, mask, sizeof mask);
    uint8_t m[2000];
    for (int i = 0; i < 2000; i++)
        m[i] = i % 2;
    FILE *f = fopen(mask, "wb");
    fwrite(m, 1, sizeof m, f);
    fclose(f);
    EvalResult half = eval_at(path, 4, 0);
    ck_assert_int_eq(half.targets, 249 * 4);
    memset(m, 0, sizeof m);
    f = fopen(mask, "wb");
    fwrite(m, 1, sizeof m, f);
    fclose(f);
    EvalSet ev;
    Err e;
    const char *paths[1] = {path};
    ck_assert_int_eq(eval_init(&ev, paths, 1, DATA_AUTO, 256, "gpt2-tiny", 4, 8, 0, &e), 0);
    Backend *b = tiny_backend(4);
    EvalResult r;
    ck_assert_int_eq(eval_run(&ev, b, &r, &e), -EINVAL);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, "every one is masked");
    b->ops->destroy(b);
    eval_free(&ev);
    /* text held out for a model whose vocabulary is not bytes */
    ck_assert_int_eq(eval_init(&ev, paths, 1, DATA_AUTO, 50257, "gpt2-124m", 4, 8, 0, &e),
                     -EINVAL);
    tu_assert_contains(e.msg, "tools/prepare_data.py");
    eval_free(&ev);
    unlink(mask);
    unlink(path);
}
END_TEST

static TrainOptions opts(int64_t steps)
{
    TrainOptions o = {.backend = &backend_cpu, .data_paths = {text}, .n_data = 1,
                      .seqs_per_step = 4, .seq = tu_sized(32, 16), .steps = steps, .lr = 2e-3f,
                      .min_lr_ratio = 0.1f, .weight_decay = 0.1f, .beta1 = 0.9f,
                      .beta2 = 0.95f, .eps = 1e-8f, .clip = 1.0f, .warmup = 2, .seed = 7,
                      .subgroup_blocks = 1, .tail_blocks = 1, .threads = 2};
    o.model = *model_preset_find("gpt2-tiny");
    return o;
}

/* With --eval-data every 3 steps (and after the last): the same training losses, the held-out
 * loss in the log's rows 3, 6 and 7 and nan in the others, the result's last; a resume whose
 * log was written without evaluation is refused */
START_TEST(trainer_evaluates)
{
    char held[64], log_file[] = "/tmp/fuyou-evlog-XXXXXX";
    held_out(held, sizeof held);
    close(mkstemp(log_file));
    TrainOptions o = opts(7);
    TrainResult plain, with;
    Err e;
    ck_assert_msg(trainer_run(&o, &plain, &e) == 0, "%s", e.msg);
    o.eval_paths[0] = held;
    o.n_eval = 1;
    o.eval_every = 3;
    o.eval_batches = 8;
    o.log_path = log_file;
    ck_assert_msg(trainer_run(&o, &with, &e) == 0, "%s", e.msg);
    for (int i = 0; i < 7; i++)
        ck_assert_msg(with.losses[i] == plain.losses[i], "step %d", i + 1);
    ck_assert_int_eq(with.eval_step, 7);
    ck_assert_double_lt(with.eval_loss, log(256.0));
    ck_assert_int_eq(plain.eval_step, 0);
    FILE *f = fopen(log_file, "r");
    char line[256];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_str_eq(line, "step\tloss\tlr\tgrad_norm\ttokens_per_s\tloss_scale\teval_loss\t"
                           "eval_ppl\n");
    for (int step = 1; step <= 7; step++) {
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        const char *tab = strrchr(line, '\t');
        double ppl = strtod(tab + 1, NULL);
        bool due = step % 3 == 0 || step == 7;
        ck_assert_msg(due ? isfinite(ppl) && ppl > 1 : isnan(ppl), "row %d: %s", step, line);
        if (step == 7)
            ck_assert_double_eq_tol(ppl, with.eval_perplexity, 1e-3 * ppl);
    }
    fclose(f);
    free(plain.losses), free(with.losses);
    /* a log without the eval columns, resumed with them */
    char dir[] = "/tmp/fuyou-evck-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    o = opts(2);
    o.save_dir = dir;
    o.log_path = log_file;
    ck_assert_msg(trainer_run(&o, &plain, &e) == 0, "%s", e.msg);
    free(plain.losses);
    o = opts(3);
    o.resume_dir = dir;
    o.log_path = log_file;
    o.eval_paths[0] = held;
    o.n_eval = 1;
    ck_assert_int_eq(trainer_run(&o, &with, &e), -EINVAL);
    tu_assert_contains(e.msg, "not the header this run writes");
    tu_assert_contains(e.msg, "without --eval-data");
    free(with.losses);
    tu_rm_tree(dir);
    unlink(log_file);
    unlink(held);
}
END_TEST

int main(void)
{
    if (!tu_can_read(text, "the default training text, from base-files"))
        return 77;
    Suite *s = suite_create("eval");
    TCase *tc = tcase_create("eval");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mean_over_every_target);
    tcase_add_test(tc, masked_held_out);
    tcase_add_test(tc, trainer_evaluates);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
