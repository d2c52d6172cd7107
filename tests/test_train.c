/* Check suite for exec/train: the loss falls on the default data, resuming gives exactly the
 * losses of an uninterrupted run, sub-group AdamW equals one whole-model step, safetensors
 * checkpoints round-trip with the Hugging Face names and layouts, every bad checkpoint gives one
 * clear error, the --log file (rows written as steps end, equal to an uninterrupted run's after
 * kills and resumes, a write error stops the run), and dynamic loss scaling: exact at a
 * power-of-two scale, and its skip / halve / double policy against a scripted backend; the
 * initialisation of any range equals the whole array's, and the element-by-element reference's.
 * The data formats and the loader are test_data's. */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "checkpoint.h"
#include "cpu_backend.h"
#include "layout.h"
#include "safetensors.h"
#include "trainer.h"
#include "testutil.h"

static const char *text = "/usr/share/common-licenses/GPL-3";

static TrainOptions opts(int64_t steps)
{
    TrainOptions o = {.backend = &backend_cpu, .data_paths = {text},
                      .n_data = 1, .seqs_per_step = 4,
                      .seq = tu_sized(32, 16), .steps = steps, .lr = 2e-3f, .min_lr_ratio = 0.1f,
                      .weight_decay = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .clip = 1.0f, .warmup = 5, .seed = 7, .subgroup_blocks = 1,
                      .tail_blocks = 1, .threads = 2};
    o.model = *model_preset_find("gpt2-tiny");
    return o;
}

START_TEST(loss_falls)
{
    TrainOptions o = opts(40);
    o.seq = 32; /* what the fall below is measured on, in every build */
    TrainResult r;
    Err e;
    ck_assert_msg(trainer_run(&o, &r, &e) == 0, "%s", e.msg);
    double tail = 0;
    for (int i = 35; i < 40; i++)
        tail += r.losses[i] / 5;
    printf("loss %.3f -> %.3f (last five %.3f), %.0f tokens/s\n", r.first_loss, r.last_loss,
           tail, r.tokens_per_s);
    ck_assert_double_gt(r.first_loss, 5.0); /* ~ln 256 at initialisation */
    ck_assert_double_lt(tail, r.first_loss - 1.5);
    free(r.losses);
}
END_TEST

/* Two micro-batches of two sequences are one batch of four, up to the order of the sums */
/* The initialisation as it was first written, element by element: the reference the
 * per-tensor, per-range initialisation (trainer_init_range) is held to, bit for bit. */
static void init_reference(const ModelConfig *c, const ModelLayout *l, float *p, uint64_t seed)
{
    enum { CHUNK = 1 << 20 };
    double resid = 0.02 / sqrt(2.0 * c->n_layer);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t k = 0; k * CHUNK < l->total; k++) {
        gsl_rng_set(r, (unsigned long)(seed * 1000003u + k));
        size_t lo = k * CHUNK, hi = lo + CHUNK < l->total ? lo + CHUNK : l->total;
        int t = 0;
        for (size_t i = lo; i < hi; i++) {
            while (l->t[t].offset + l->t[t].numel <= i)
                t++;
            const char *n = l->t[t].name;
            size_t len = strlen(n);
            bool bias = len > 5 && !strcmp(n + len - 5, ".bias");
            bool ln = strstr(n, "ln_") || strstr(n, "layernorm") || strstr(n, "norm.weight");
            bool proj = strstr(n, "c_proj.weight") || strstr(n, "o_proj.weight") ||
                        strstr(n, "down_proj.weight");
            if (ln || bias)
                p[i] = ln && !bias ? 1.0f : 0.0f;
            else
                p[i] = (float)gsl_ran_gaussian_ziggurat(r, proj ? resid : 0.02);
        }
    }
    gsl_rng_free(r);
}

/* Any range of the initialisation, drawn alone (a fresh run's state put in place sub-group by
 * sub-group, with no whole-model array), is that range of the whole array, which is the
 * reference's; both families, ranges across the generators' chunks and tensors */
START_TEST(init_ranges_are_the_whole)
{
    ModelConfig models[] = {*model_preset_find("gpt2-tiny"), *model_preset_find("llama-tiny")};
    models[0].vocab = models[1].vocab = 9000; /* several chunks of 1 Mi parameters */
    models[0].d_model = models[1].d_model = 256;
    models[0].d_ff = models[1].d_ff = 1024;
    WorkPool wp;
    Err e;
    ck_assert_int_eq(workpool_init(&wp, 3, &e), 0);
    for (int m = 0; m < 2; m++) {
        ModelLayout l;
        ck_assert_int_eq(layout_init(&l, &models[m]), 0);
        ck_assert_uint_gt(l.total, 2u << 20);
        float *ref = malloc(l.total * 4), *whole = malloc(l.total * 4), *part = malloc(l.total * 4);
        init_reference(&models[m], &l, ref, 11);
        trainer_init_params(&models[m], &l, whole, 11, &wp);
        ck_assert_int_eq(memcmp(ref, whole, l.total * 4), 0);
        const size_t cuts[][2] = {{0, 1}, {5, 100}, {(1 << 20) - 3, 7}, {(1 << 20) + 17, 1 << 20},
                                  {l.total - 9, 9}, {12345, l.total - 12345}};
        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
            size_t b = cuts[k][0], n = cuts[k][1];
            trainer_init_range(&models[m], &l, 11, b, n, part, k % 2 ? &wp : NULL);
            ck_assert_msg(!memcmp(part, ref + b, n * 4), "%s: [%zu, +%zu)", models[m].name, b, n);
        }
        free(ref), free(whole), free(part);
        layout_free(&l);
    }
    /* the range drawn fastest: a generator's chunk for each thread */
    ck_assert_uint_eq(trainer_init_grain(NULL), 1 << 20);
    ck_assert_uint_eq(trainer_init_grain(&wp), 3 << 20);
    workpool_free(&wp);
}
END_TEST

START_TEST(micro_batches_accumulate)
{
    TrainOptions o = opts(3);
    TrainResult one, two;
    Err e;
    ck_assert_msg(trainer_run(&o, &one, &e) == 0, "%s", e.msg);
    o.n_micro = 2;
    ck_assert_msg(trainer_run(&o, &two, &e) == 0, "%s", e.msg);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabs(two.losses[i] - one.losses[i]) <= 1e-5 * one.losses[i],
                      "step %d: %.9g vs %.9g", i + 1, two.losses[i], one.losses[i]);
    free(one.losses), free(two.losses);
}
END_TEST

/* A tail longer than the model would update nothing: refused */
START_TEST(tail_beyond_the_model)
{
    TrainOptions o = opts(2);
    o.tail_blocks = o.model.n_layer + 1;
    TrainResult r;
    Err e;
    ck_assert_int_eq(trainer_run(&o, &r, &e), -EINVAL);
    tu_assert_contains(e.msg, "--tail");
    free(r.losses);
}
END_TEST

START_TEST(resume_is_exact)
{
    char dir_a[] = "/tmp/fuyou-ckA-XXXXXX", dir_b[] = "/tmp/fuyou-ckB-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir_a));
    ck_assert_ptr_nonnull(mkdtemp(dir_b));
    Err e;
    TrainResult full, first, rest;
    TrainOptions o = opts(8);
    o.save_dir = dir_a;
    o.save_every = 4;
    o.subgroup_blocks = 2;
    ck_assert_msg(trainer_run(&o, &full, &e) == 0, "%s", e.msg);
    o = opts(4);
    o.save_dir = dir_b;
    o.subgroup_blocks = 2;
    ck_assert_msg(trainer_run(&o, &first, &e) == 0, "%s", e.msg);
    o = opts(8);
    o.resume_dir = dir_b;
    o.subgroup_blocks = 2;
    ck_assert_msg(trainer_run(&o, &rest, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rest.first_step, 5);
    ck_assert_int_eq(rest.n_losses, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(first.losses[i] == full.losses[i], "step %d", i + 1);
        ck_assert_msg(rest.losses[i] == full.losses[4 + i], "step %d: %.9g vs %.9g", i + 5,
                      rest.losses[i], full.losses[4 + i]);
    }
    free(full.losses), free(first.losses), free(rest.losses);
    /* asking for no more steps than the checkpoint has is an error */
    o = opts(4);
    o.resume_dir = dir_b;
    ck_assert_int_eq(trainer_run(&o, &rest, &e), -EINVAL);
    tu_assert_contains(e.msg, "step 4 already");
    free(rest.losses);
    tu_rm_tree(dir_a);
    tu_rm_tree(dir_b);
}
END_TEST

/* A stop asked during step 3 (as SIGTERM's handler asks it) ends the run after that step with
 * its checkpoint and -EINTR; the resume from it is the uninterrupted run, bit for bit; without
 * --save nothing is written, and a stop during the last step is a run that ended */
START_TEST(stop_saves_the_step)
{
    char dir[] = "/tmp/fuyou-stop-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    Err e;
    TrainResult full, first, rest;
    TrainOptions o = opts(6);
    ck_assert_msg(trainer_run(&o, &full, &e) == 0, "%s", e.msg);
    volatile sig_atomic_t flag = 0;
    TuStopAt at = {"step 3/6", &flag, SIGTERM};
    o.progress = tu_stop_at(&at);
    o.stop = &flag;
    o.save_dir = dir;
    ck_assert_int_eq(trainer_run(&o, &first, &e), -EINTR);
    tu_assert_contains(e.msg, "stopped by SIGTERM after step 3 of 6, saved in ");
    tu_assert_contains(e.msg, "continue with --resume");
    ck_assert_int_eq(first.n_losses, 3);
    char path[256];
    snprintf(path, sizeof path, "%s/step-00000003/model.safetensors", dir);
    ck_assert_int_eq(access(path, F_OK), 0);
    flag = 0;
    o.save_dir = NULL;
    o.resume_dir = dir;
    ck_assert_msg(trainer_run(&o, &rest, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rest.first_step, 4);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(first.losses[i] == full.losses[i], "step %d", i + 1);
        ck_assert_msg(rest.losses[i] == full.losses[3 + i], "step %d", i + 4);
    }
    free(first.losses), free(rest.losses);
    o.resume_dir = NULL;
    flag = 0;
    ck_assert_int_eq(trainer_run(&o, &first, &e), -EINTR);
    tu_assert_contains(e.msg, "after step 3 of 6; nothing saved (no --save)");
    free(first.losses);
    flag = 0;
    at.when = "step 6/6";
    ck_assert_msg(trainer_run(&o, &first, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(first.n_losses, 6);
    fclose(o.progress);
    free(full.losses), free(first.losses);
    tu_rm_tree(dir);
}
END_TEST

/* A resume with more --steps than the checkpoint's run was scheduled over says so, with the
 * next step's learning rate under both schedules; the same --steps says nothing */
START_TEST(resume_says_the_schedule_changed)
{
    char dir[] = "/tmp/fuyou-sched-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    Err e;
    TrainResult r;
    TrainOptions o = opts(6);
    o.save_dir = dir;
    o.save_every = 3;
    ck_assert_msg(trainer_run(&o, &r, &e) == 0, "%s", e.msg);
    free(r.losses);
    char *text = NULL;
    size_t len = 0;
    o = opts(12);
    o.resume_dir = dir;
    o.progress = open_memstream(&text, &len);
    ck_assert_msg(trainer_run(&o, &r, &e) == 0, "%s", e.msg);
    fclose(o.progress);
    tu_assert_contains(text, "learning rate was scheduled over 6 steps; --steps 12 schedules it "
                             "over 12: step 7's is ");
    free(text), free(r.losses);
    char path[64]; /* step 3 the newest: resumed with its run's --steps */
    snprintf(path, sizeof path, "%s/step-00000006", dir);
    tu_rm_tree(path);
    snprintf(path, sizeof path, "%s/latest", dir);
    ck_assert_int_eq(unlink(path), 0);
    o = opts(6);
    o.resume_dir = dir;
    o.progress = open_memstream(&text, &len);
    ck_assert_msg(trainer_run(&o, &r, &e) == 0, "%s", e.msg);
    fclose(o.progress);
    ck_assert_msg(!strstr(text, "scheduled over"), "%s", text);
    free(text), free(r.losses);
    tu_rm_tree(dir);
}
END_TEST

/* A resume on other data is refused by the fingerprint in state.json: another file beside the
 * same one, or the same two in another order; the same two in their order resume */
START_TEST(resume_checks_the_data)
{
    char dir[] = "/tmp/fuyou-ckD-XXXXXX", other[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    tu_temp_file(other, sizeof other, ".txt", "It was the best of times, it was the worst of "
                 "times, it was the age of wisdom, it was the age of foolishness.\n");
    Err e;
    TrainResult r;
    TrainOptions o = opts(2);
    o.data_paths[1] = other;
    o.n_data = 2;
    o.save_dir = dir;
    ck_assert_msg(trainer_run(&o, &r, &e) == 0, "%s", e.msg);
    free(r.losses);
    char state[256];
    snprintf(state, sizeof state, "%s/step-00000002/state.json", dir);
    FILE *f = fopen(state, "r");
    char json[4096] = "";
    ck_assert_uint_gt(fread(json, 1, sizeof json - 1, f), 0);
    fclose(f);
    tu_assert_contains(json, "\"data\": {");
    tu_assert_contains(json, "\"files\": 2");
    const char *orders[2][2] = {{text, text}, {other, text}};
    for (int k = 0; k < 2; k++) {
        o = opts(3);
        o.resume_dir = dir;
        o.data_paths[0] = orders[k][0], o.data_paths[1] = orders[k][1];
        o.n_data = 2;
        ck_assert_int_eq(trainer_run(&o, &r, &e), -EINVAL);
        tu_assert_contains(e.msg, "--resume ");
        tu_assert_contains(e.msg, "was trained on 2 data files");
        tu_assert_contains(e.msg, "same files in the same order");
        free(r.losses);
    }
    o = opts(3);
    o.resume_dir = dir;
    o.data_paths[1] = other;
    o.n_data = 2;
    ck_assert_msg(trainer_run(&o, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.first_step, 3);
    free(r.losses);
    unlink(other);
    tu_rm_tree(dir);
}
END_TEST

START_TEST(subgroups_equal_whole_step)
{
    ModelConfig c = *model_preset_find("gpt2-tiny");
    Err e;
    Backend *a, *b;
    ck_assert_int_eq(backend_cpu.create(&a, &c, 2, 16, NULL, &e), 0);
    ck_assert_int_eq(backend_cpu.create(&b, &c, 2, 16, NULL, &e), 0);
    size_t P = a->n_params;
    float *p = malloc(P * 4), *pa = malloc(P * 4), *pb = malloc(P * 4);
    for (size_t i = 0; i < P; i++)
        p[i] = (float)((i * 2654435761u) % 1000) * 1e-4f - 0.05f;
    int inp[32], tgt[32];
    for (int i = 0; i < 32; i++)
        inp[i] = (i * 13) % 256, tgt[i] = (i * 29 + 5) % 256;
    a->ops->write_state(a, p, NULL, NULL, &e);
    b->ops->write_state(b, p, NULL, NULL, &e);
    float loss;
    a->ops->step(a, inp, tgt, true, &loss, &e);
    b->ops->step(b, inp, tgt, true, &loss, &e);
    AdamConfig cfg = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.1f};
    AdamStep s;
    adam_step_init(&s, &cfg, 1, 0.7f);
    a->ops->update(a, &s, 0, P, &e);
    /* the trainer's slices for sub-groups of 2 blocks, tail 1: blocks 2-3, 1, then 0 + edges */
    size_t edge = (size_t)model_embed_params(&c), blk = (size_t)model_block_params(&c);
    b->ops->update(b, &s, edge + 2 * blk, edge + 4 * blk, &e);
    b->ops->update(b, &s, edge + blk, edge + 2 * blk, &e);
    b->ops->update(b, &s, 0, edge + blk, &e);
    a->ops->read_state(a, pa, NULL, NULL, &e);
    b->ops->read_state(b, pb, NULL, NULL, &e);
    ck_assert_int_eq(memcmp(pa, pb, P * 4), 0);
    ck_assert(memcmp(pa, p, P * 4) != 0);
    a->ops->destroy(a), b->ops->destroy(b);
    free(p), free(pa), free(pb);
}
END_TEST

/* A power-of-two loss scale changes no number in fp32: every gradient is S times the unscaled
 * one exactly, and the trainer divides it out exactly. */
START_TEST(loss_scale_is_exact)
{
    TrainOptions o = opts(6);
    TrainResult plain, scaled;
    Err e;
    ck_assert_msg(trainer_run(&o, &plain, &e) == 0, "%s", e.msg);
    o.loss_scale = 1024.0f;
    o.loss_scale_window = 2;
    ck_assert_msg(trainer_run(&o, &scaled, &e) == 0, "%s", e.msg);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(plain.losses[i] == scaled.losses[i], "step %d: %.9g vs %.9g", i + 1,
                      plain.losses[i], scaled.losses[i]);
    ck_assert_int_eq(scaled.skipped, 0);
    ck_assert_double_eq(scaled.loss_scale, 1024.0 * 8); /* doubled after steps 2, 4, 6 */
    free(plain.losses), free(scaled.losses);
}
END_TEST

/* A backend whose gradients overflow whenever the loss scale exceeds overflow_above, recording
 * what the trainer asks of it. */
static float overflow_above;
typedef struct Scripted {
    Backend base;
    int steps, updates;
    float scales[32];       /* the loss scale at each step */
    float first_update_bc2; /* inv_sqrt_bc2 of the first update: AdamW's step count */
    float first_update_grad_scale;
} Scripted;

static const BackendOps scripted_ops;

static int scripted_create(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp,
                           Err *e)
{
    (void)wp, (void)e;
    Scripted *s = calloc(1, sizeof *s);
    s->base = (Backend){.ops = &scripted_ops, .cfg = *c, .B = B, .T = T,
                        .n_params = (size_t)model_param_count(c), .loss_scale = 1.0f};
    *out = &s->base;
    return 0;
}

static Scripted *last_scripted;

static void scripted_destroy(Backend *b)
{
    last_scripted = (Scripted *)b; /* kept for the test to read; it frees it */
}

static int scripted_state(Backend *b, float *p, float *m, float *v, Err *e)
{
    (void)b, (void)p, (void)m, (void)v, (void)e;
    return 0;
}

static int scripted_write(Backend *b, const float *p, const float *m, const float *v, Err *e)
{
    (void)b, (void)p, (void)m, (void)v, (void)e;
    return 0;
}

static int scripted_grads(Backend *b, float *g, Err *e)
{
    (void)b, (void)g, (void)e;
    return 0;
}

/* When set, each scripted step records how many lines this --log file holds as it starts. */
static const char *scripted_log;
static int scripted_log_lines[32];

static int scripted_step(Backend *b, const int *inputs, const int *targets, bool backward,
                         float *loss, Err *e)
{
    (void)inputs, (void)targets, (void)backward, (void)e;
    Scripted *s = (Scripted *)b;
    if (scripted_log)
        scripted_log_lines[s->steps] = tu_count_lines(scripted_log);
    s->scales[s->steps++] = b->loss_scale;
    *loss = 3.0f;
    return 0;
}

static double scripted_grad_sq(Backend *b, size_t begin, size_t end)
{
    (void)begin, (void)end;
    double g = b->loss_scale * 1e-3; /* the scaled gradient's size */
    return b->loss_scale > overflow_above ? INFINITY : g * g;
}

static int scripted_update(Backend *b, const AdamStep *as, size_t begin, size_t end, Err *e)
{
    (void)begin, (void)end, (void)e;
    Scripted *s = (Scripted *)b;
    if (s->updates++ == 0) {
        s->first_update_bc2 = as->inv_sqrt_bc2;
        s->first_update_grad_scale = as->grad_scale;
    }
    return 0;
}

static const BackendOps scripted_ops = {
    "scripted", scripted_create, scripted_destroy, scripted_state, scripted_write,
    scripted_grads, NULL, scripted_step, scripted_grad_sq, scripted_update,
};

START_TEST(loss_scale_policy)
{
    TrainOptions o = opts(12);
    o.backend = &scripted_ops;
    o.model.dtype = DTYPE_FP16; /* the default scale: 65536 = 2^16 */
    o.loss_scale_window = 3;
    o.clip = 0;
    overflow_above = 4096;
    TrainResult r;
    Err e;
    ck_assert_msg(trainer_run(&o, &r, &e) == 0, "%s", e.msg);
    Scripted *s = last_scripted;
    /* 2^16 .. 2^13 overflow (4 skipped), 2^12 holds for 3 steps, then 2^13 overflows again */
    float want[12] = {65536, 32768, 16384, 8192, 4096, 4096, 4096, 8192, 4096, 4096, 4096, 8192};
    for (int i = 0; i < 12; i++)
        ck_assert_msg(s->scales[i] == want[i], "step %d: scale %g, expected %g", i + 1,
                      s->scales[i], want[i]);
    ck_assert_int_eq(r.skipped, 6); /* steps 1-4, 8, 12 */
    /* the other 6 steps update every sub-group: one per block (the tail holds block 0) */
    ck_assert_int_eq(s->updates, 6 * o.model.n_layer);
    ck_assert_double_eq(r.loss_scale, 4096);
    /* the first update is AdamW's step 1 (skips do not count) and unscales by 1/4096 */
    AdamConfig cfg = {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps,
                      .weight_decay = o.weight_decay};
    AdamStep step1;
    adam_step_init(&step1, &cfg, 1, 1.0f / 4096);
    ck_assert_float_eq(s->first_update_bc2, step1.inv_sqrt_bc2);
    ck_assert_float_eq(s->first_update_grad_scale, 1.0f / 4096);
    free(s), free(r.losses);
}
END_TEST

/* Unscaled (bf16 / fp32) training stops at non-finite gradients with a clear error, and so
 * does scaled training once the scale has fallen to its floor. */
START_TEST(nonfinite_gradients)
{
    TrainOptions o = opts(3);
    o.backend = &scripted_ops;
    overflow_above = 0.5f;
    TrainResult r;
    Err e;
    ck_assert_int_eq(trainer_run(&o, &r, &e), -EDOM);
    printf("%s\n", e.msg);
    ck_assert(strstr(e.msg, "step 1: the gradients are not finite"));
    free(last_scripted), free(r.losses);
    o = opts(40);
    o.backend = &scripted_ops;
    o.loss_scale = 4;
    overflow_above = 0;
    ck_assert_int_eq(trainer_run(&o, &r, &e), -EDOM);
    printf("%s\n", e.msg);
    ck_assert(strstr(e.msg, "overflow even at loss scale"));
    ck_assert_int_eq(r.skipped, 19); /* 4 .. 2^-15 skipped, then 2^-16 would be below 2^-16 */
    free(last_scripted), free(r.losses);
}
END_TEST

/* --log: each row is in the file when its step ends (a kill -9 loses none), not at exit */
START_TEST(log_rows_flushed)
{
    char path[64];
    tu_temp_file(path, sizeof path, ".tsv", "");
    TrainOptions o = opts(6);
    o.backend = &scripted_ops;
    o.log_path = path;
    overflow_above = INFINITY;
    scripted_log = path;
    TrainResult r;
    Err e;
    ck_assert_msg(trainer_run(&o, &r, &e) == 0, "%s", e.msg);
    scripted_log = NULL;
    for (int k = 0; k < 6; k++) /* the header and the k steps before */
        ck_assert_msg(scripted_log_lines[k] == 1 + k, "step %d began with %d lines in the log",
                      k + 1, scripted_log_lines[k]);
    ck_assert_int_eq(tu_count_lines(path), 7);
    free(last_scripted), free(r.losses);
    unlink(path);
}
END_TEST

/* The CPU backend, except that its step number die_at fails as if the process were killed
 * there: the rows of the steps before it are in the log, the checkpoints before it on disk. */
static int die_at, steps_run;
static BackendOps killed_ops;

static int killed_step(Backend *b, const int *inputs, const int *targets, bool backward,
                       float *loss, Err *e)
{
    if (++steps_run == die_at)
        return err_set(e, -EINTR, "killed at step %d", die_at);
    return backend_cpu.step(b, inputs, targets, backward, loss, e);
}

static int killed_create(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp,
                         Err *e)
{
    int rc = backend_cpu.create(out, c, B, T, wp, e);
    if (!rc)
        (*out)->ops = &killed_ops;
    return rc;
}

static int run_until(TrainOptions o, int die, Err *e)
{
    killed_ops = backend_cpu;
    killed_ops.create = killed_create;
    killed_ops.step = killed_step;
    o.backend = &killed_ops;
    die_at = die;
    steps_run = 0;
    TrainResult r;
    int rc = trainer_run(&o, &r, e);
    free(r.losses);
    return rc;
}

/* A run killed (twice, once in the middle of writing a row) and resumed from its last
 * checkpoint leaves the log an uninterrupted run writes: one header, every step once. */
START_TEST(log_resume_equals_uninterrupted)
{
    char dir_a[] = "/tmp/fuyou-logA-XXXXXX", dir_b[] = "/tmp/fuyou-logB-XXXXXX";
    char log_a[300], log_b[300];
    ck_assert_ptr_nonnull(mkdtemp(dir_a));
    ck_assert_ptr_nonnull(mkdtemp(dir_b));
    snprintf(log_a, sizeof log_a, "%s/train.tsv", dir_a);
    snprintf(log_b, sizeof log_b, "%s/train.tsv", dir_b);
    Err e;
    TrainOptions o = opts(10);
    o.seqs_per_step = 2, o.seq = 16;
    o.save_every = 4;
    o.save_dir = dir_a;
    o.log_path = log_a;
    ck_assert_msg(run_until(o, 0, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(tu_count_lines(log_a), 11);
    /* killed during step 7: rows 1-6 written, the checkpoint at step 4 */
    o.save_dir = dir_b;
    o.log_path = log_b;
    ck_assert_int_eq(run_until(o, 7, &e), -EINTR);
    ck_assert_int_eq(tu_count_lines(log_b), 7);
    FILE *f = fopen(log_b, "a"); /* and in the middle of writing row 7 */
    fputs("7\t2.91", f);
    fclose(f);
    /* resumed, killed during step 10 (its second step after step 8's checkpoint) */
    o.resume_dir = dir_b;
    ck_assert_int_eq(run_until(o, 6, &e), -EINTR);
    /* resumed again from step 8, to the end */
    ck_assert_msg(run_until(o, 0, &e) == 0, "%s", e.msg);
    tu_assert_same_log(log_a, log_b);
    tu_rm_tree(dir_a);
    tu_rm_tree(dir_b);
}
END_TEST

/* The first failed write of the log stops the run, naming the file and the reason */
START_TEST(log_write_error)
{
    if (access("/dev/full", W_OK)) {
        printf("no /dev/full here: skipped\n");
        return;
    }
    TrainOptions o = opts(3);
    o.log_path = "/dev/full";
    TrainResult r;
    Err e;
    ck_assert_int_eq(trainer_run(&o, &r, &e), -ENOSPC);
    tu_assert_contains(e.msg, "/dev/full");
    tu_assert_contains(e.msg, strerror(ENOSPC));
    ck_assert_int_eq(r.n_losses, 0); /* the header already failed: no step ran */
    free(r.losses);
}
END_TEST

START_TEST(checkpoint_round_trip)
{
    char dir[] = "/tmp/fuyou-ck-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ModelConfig c = *model_preset_find("gpt2-tiny");
    c.tied = false; /* exercise lm_head too */
    ModelLayout l;
    ck_assert_int_eq(layout_init(&l, &c), 0);
    ck_assert_uint_eq(l.total, (size_t)model_param_count(&c));
    size_t P = l.total;
    float *p = malloc(P * 4), *m = malloc(P * 4), *v = malloc(P * 4);
    for (size_t i = 0; i < P; i++)
        p[i] = (float)i * 1e-5f, m[i] = -(float)i, v[i] = (float)(i % 17);
    TrainState s = {.step = 12, .epoch = 3, .index = 77, .seed = 99, .prev_grad_norm = 1.25};
    Err e;
    ck_assert_msg(ckpt_save(dir, &c, &l, p, m, v, &s, &e) == 0, "%s", e.msg);
    /* Hugging Face names and (in, out) Conv1D layouts in the file */
    char path[256];
    snprintf(path, sizeof path, "%s/step-00000012/model.safetensors", dir);
    StFile f;
    ck_assert_int_eq(st_open(&f, path, &e), 0);
    const StTensor *t = st_find(&f, "transformer.h.1.attn.c_attn.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->shape[0], 128);
    ck_assert_int_eq(t->shape[1], 384);
    ck_assert_ptr_nonnull(st_find(&f, "transformer.wte.weight"));
    ck_assert_ptr_nonnull(st_find(&f, "lm_head.weight"));
    ck_assert_int_eq(f.n, l.n);
    /* element (out 5, in 2) of ours is at [2][5] in the file */
    const ParamTensor *pt = layout_find(&l, "h.1.attn.c_attn.weight");
    float *raw = malloc(128 * 384 * 4);
    ck_assert_int_eq(st_read_f32(&f, t, raw, &e), 0);
    ck_assert(raw[2 * 384 + 5] == p[pt->offset + 5 * 128 + 2]);
    free(raw);
    st_close(&f);
    float *p2 = calloc(P, 4), *m2 = calloc(P, 4), *v2 = calloc(P, 4);
    TrainState s2;
    ck_assert_msg(ckpt_load(dir, &c, &l, p2, m2, v2, &s2, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(p, p2, P * 4), 0);
    ck_assert_int_eq(memcmp(m, m2, P * 4), 0);
    ck_assert_int_eq(memcmp(v, v2, P * 4), 0);
    ck_assert_int_eq(s2.step, 12);
    ck_assert_int_eq(s2.index, 77);
    ck_assert_double_eq(s2.prev_grad_norm, 1.25);
    free(p2), free(m2), free(v2), free(p), free(m), free(v);
    layout_free(&l);
    tu_rm_tree(dir);
}
END_TEST

/* Writes bytes to a file in dir. */
static void put(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

START_TEST(bad_checkpoints)
{
    char dir[] = "/tmp/fuyou-bad-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ModelConfig c = *model_preset_find("gpt2-tiny");
    ModelLayout l;
    layout_init(&l, &c);
    float *p = calloc(l.total, 4);
    Err e;
    char path[256];
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    /* garbage, truncated header, JSON that is not an object */
    put(path, "hello", 5);
    ck_assert_int_eq(ckpt_load_model(path, &c, &l, p, &e), -EINVAL);
    tu_assert_contains(e.msg, path);
    uint8_t hdr[8 + 4] = {4, 0, 0, 0, 0, 0, 0, 0, '[', '1', ']', ' '};
    put(path, hdr, sizeof hdr);
    ck_assert_int_eq(ckpt_load_model(path, &c, &l, p, &e), -EINVAL);
    tu_assert_contains(e.msg, "not a JSON object");
    /* a valid file of a smaller model: a missing tensor */
    StWriter w;
    int64_t shape[2] = {256, 128};
    float *z = calloc(256 * 128, 4);
    st_writer_begin(&w, path, &e);
    st_writer_add(&w, "wte.weight", z, 2, shape, &e); /* GPT2Model naming, no prefix */
    ck_assert_int_eq(st_writer_finish(&w, NULL, NULL, &e), 0);
    ck_assert_int_eq(ckpt_load_model(path, &c, &l, p, &e), -EINVAL);
    tu_assert_contains(e.msg, "transformer.wpe.weight is missing");
    /* a wrong shape */
    int64_t bad[2] = {128, 256};
    st_writer_begin(&w, path, &e);
    st_writer_add(&w, "transformer.wte.weight", z, 2, bad, &e);
    st_writer_finish(&w, NULL, NULL, &e);
    ck_assert_int_eq(ckpt_load_model(path, &c, &l, p, &e), -EINVAL);
    tu_assert_contains(e.msg, "has shape [128, 256], gpt2-tiny wants [256, 128]");
    /* a tensor of a deeper model */
    int64_t one[1] = {128};
    st_writer_begin(&w, path, &e);
    st_writer_add(&w, "transformer.h.9.ln_1.weight", z, 1, one, &e);
    st_writer_finish(&w, NULL, NULL, &e);
    ck_assert_int_eq(ckpt_load_model(path, &c, &l, p, &e), -EINVAL);
    tu_assert_contains(e.msg, "has no place in gpt2-tiny");
    /* a file cut short */
    st_writer_begin(&w, path, &e);
    st_writer_add(&w, "transformer.wte.weight", z, 2, shape, &e);
    st_writer_finish(&w, NULL, NULL, &e);
    ck_assert_int_eq(truncate(path, 4000), 0);
    ck_assert_int_eq(ckpt_load_model(path, &c, &l, p, &e), -EINVAL);
    tu_assert_contains(e.msg, "truncated");
    /* resume: no latest; a checkpoint of another model */
    ck_assert_int_eq(ckpt_load(dir, &c, &l, p, p, p, &(TrainState){0}, &e), -ENOENT);
    tu_assert_contains(e.msg, "no checkpoint to resume");
    TrainState s = {.step = 1};
    ModelConfig other = c;
    other.n_layer = 2;
    ModelLayout lo;
    layout_init(&lo, &other);
    float *po = calloc(lo.total, 4);
    ck_assert_int_eq(ckpt_save(dir, &other, &lo, po, po, po, &s, &e), 0);
    ck_assert_int_eq(ckpt_load(dir, &c, &l, p, p, p, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, "2 layers");
    free(po), free(z), free(p);
    layout_free(&lo);
    layout_free(&l);
    tu_rm_tree(dir);
}
END_TEST

/* The progress line's time to go at a billion steps: whole minutes past an int's range, not
 * an overflow (UBSan's report) */
START_TEST(progress_eta_of_a_billion_steps)
{
    char buf[256] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    ck_assert_ptr_nonnull(f);
    TrainOptions o = {.steps = TRAIN_MAX_STEPS, .progress = f};
    trainer_progress(&o, 2, 1, 1.5f, 100, 10.0, true); /* 10 s a step */
    fclose(f);
    /* (1e9 - 2) steps x 10 s = 9999999980 s */
    tu_assert_contains(buf, "ETA 166666666m20s");
}
END_TEST

int main(void)
{
    if (!tu_can_read(text, "the default training text, from base-files"))
        return 77;
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, loss_falls);
    tcase_add_test(tc, progress_eta_of_a_billion_steps);
    tcase_add_test(tc, init_ranges_are_the_whole);
    tcase_add_test(tc, resume_is_exact);
    tcase_add_test(tc, stop_saves_the_step);
    tcase_add_test(tc, resume_says_the_schedule_changed);
    tcase_add_test(tc, resume_checks_the_data);
    tcase_add_test(tc, micro_batches_accumulate);
    tcase_add_test(tc, tail_beyond_the_model);
    tcase_add_test(tc, subgroups_equal_whole_step);
    tcase_add_test(tc, loss_scale_is_exact);
    tcase_add_test(tc, loss_scale_policy);
    tcase_add_test(tc, nonfinite_gradients);
    tcase_add_test(tc, checkpoint_round_trip);
    tcase_add_test(tc, bad_checkpoints);
    tcase_add_test(tc, log_rows_flushed);
    tcase_add_test(tc, log_resume_equals_uninterrupted);
    tcase_add_test(tc, log_write_error);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
