/* Check suite for checkpoint integrity (exec/train/checkpoint.h, safetensors.h): per-tensor
 * CRC-32C written and checked (and files without them still read), data offsets that overlap
 * or leave gaps refused, state.json checked against the model and its ranges, resuming from the
 * newest complete step directory when latest is missing or names an incomplete or damaged one,
 * a fresh run refused a directory that holds checkpoints, a save directory held by one run at
 * a time, config.json for Hugging Face, an untied head refused by a tied model, and no leak
 * when a file is cut short (the ASan build checks that). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "checkpoint.h"
#include "crc32c.h"
#include "cpu_backend.h"
#include "safetensors.h"
#include "trainer.h"
#include "testutil.h"

/* A model, its layout and recognisable parameters and states, saved as step 4 in dir. */
typedef struct Fixture {
    char dir[64];
    ModelConfig c;
    ModelLayout l;
    float *p, *m, *v;
    TrainState s;
} Fixture;

static ModelConfig tiny(bool tied)
{
    ModelConfig c = *model_preset_find("gpt2-tiny");
    c.tied = tied;
    return c;
}

static void fixture_init(Fixture *f, ModelConfig c)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/fuyou-ckpt-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    f->c = c;
    ck_assert_int_eq(layout_init(&f->l, &f->c), 0);
    size_t P = f->l.total;
    f->p = malloc(P * 4), f->m = malloc(P * 4), f->v = malloc(P * 4);
    for (size_t i = 0; i < P; i++)
        f->p[i] = (float)i * 1e-5f, f->m[i] = -(float)i, f->v[i] = (float)(i % 17);
    f->s = (TrainState){.step = 4, .epoch = 1, .index = 3, .seed = 5, .prev_grad_norm = 0.5};
}

static void fixture_save(Fixture *f, int64_t step)
{
    Err e;
    f->s.step = step;
    ck_assert_msg(ckpt_save(f->dir, &f->c, &f->l, f->p, f->m, f->v, &f->s, &e) == 0, "%s",
                  e.msg);
}

/* Loads the checkpoint of f->dir into fresh arrays; the status, with e and the state. */
static int fixture_load(Fixture *f, TrainState *s, Err *e)
{
    size_t P = f->l.total;
    float *p = calloc(P, 4), *m = calloc(P, 4), *v = calloc(P, 4);
    int rc = ckpt_load(f->dir, &f->c, &f->l, p, m, v, s, e);
    if (!rc) {
        ck_assert_int_eq(memcmp(p, f->p, P * 4), 0);
        ck_assert_int_eq(memcmp(m, f->m, P * 4), 0);
        ck_assert_int_eq(memcmp(v, f->v, P * 4), 0);
    }
    free(p), free(m), free(v);
    return rc;
}

static void fixture_free(Fixture *f)
{
    free(f->p), free(f->m), free(f->v);
    layout_free(&f->l);
    tu_rm_tree(f->dir);
}

/* path = dir/step-0000000N/file */
static const char *step_file(char *path, size_t n, const Fixture *f, int step, const char *file)
{
    snprintf(path, n, "%s/step-%08d/%s", f->dir, step, file);
    return path;
}

/* Flips one bit of tensor name's data in the safetensors file at path. */
static void flip_bit(const char *path, const char *name)
{
    StFile st;
    Err e;
    ck_assert_msg(st_open(&st, path, &e) == 0, "%s", e.msg);
    const StTensor *t = st_find(&st, name);
    ck_assert_ptr_nonnull(t);
    off_t at = (off_t)(st.data_start + t->begin + (t->end - t->begin) / 2);
    st_close(&st);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, at), 1);
    b ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

/* Writes text to a new file at path. */
static void put_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Writes a safetensors file: the header text (padded to 8 bytes) and n bytes of data. */
static void put_st(const char *path, const char *header, const void *data, size_t n)
{
    size_t len = strlen(header), padded = (len + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint64_t hl = padded;
    fwrite(&hl, 8, 1, f);
    fwrite(header, 1, len, f);
    for (size_t i = len; i < padded; i++)
        fputc(' ', f);
    if (n)
        fwrite(data, 1, n, f);
    fclose(f);
}

/* Replaces key in dir/step-N/state.json (or in its "model" object when model) with value. */
static void set_state(const Fixture *f, int step, bool model, const char *key, json_t *value)
{
    char path[256];
    step_file(path, sizeof path, f, step, "state.json");
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    ck_assert_ptr_nonnull(root);
    json_object_set_new(model ? json_object_get(root, "model") : root, key, value);
    ck_assert_int_eq(json_dump_file(root, path, JSON_INDENT(2)), 0);
    json_decref(root);
}

static char err_text[4096];

/* Runs fn with stderr going to err_text; returns what fn returns. */
static int with_stderr(int (*fn)(Fixture *, TrainState *, Err *), Fixture *f, TrainState *s,
                       Err *e)
{
    char path[] = "/tmp/fuyou-stderr-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    int rc = fn(f, s, e);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, err_text, sizeof err_text - 1, 0);
    err_text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

/* Every tensor carries a CRC-32C of its bytes in __metadata__; one flipped bit in either file
 * is one error naming the file and the tensor. */
START_TEST(checksums_catch_a_flipped_bit)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    fixture_save(&f, 4);
    char model[256], optim[256];
    step_file(model, sizeof model, &f, 4, "model.safetensors");
    step_file(optim, sizeof optim, &f, 4, "optimizer.safetensors");
    StFile st;
    Err e;
    ck_assert_int_eq(st_open(&st, model, &e), 0);
    for (int i = 0; i < st.n; i++)
        ck_assert_msg(st.t[i].has_crc, "%s has no checksum", st.t[i].name);
    const StTensor *t = st_find(&st, "transformer.wpe.weight");
    float *raw = malloc(t->end - t->begin);
    ck_assert_int_eq(st_read_f32(&st, t, raw, &e), 0);
    ck_assert_uint_eq(t->crc, crc32c(0, raw, t->end - t->begin));
    free(raw);
    st_close(&st);
    TrainState s;
    ck_assert_int_eq(fixture_load(&f, &s, &e), 0);
    flip_bit(model, "transformer.h.2.mlp.c_fc.weight");
    ck_assert_int_eq(fixture_load(&f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, model);
    tu_assert_contains(e.msg, "tensor transformer.h.2.mlp.c_fc.weight is damaged");
    fixture_save(&f, 4);
    flip_bit(optim, "adam.v");
    ck_assert_int_eq(fixture_load(&f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, optim);
    tu_assert_contains(e.msg, "tensor adam.v is damaged");
    fixture_free(&f);
}
END_TEST

/* The format's data section: tensors tile it in offset order; overlaps, gaps and trailing
 * bytes are refused naming the tensors; a file without checksums (Hugging Face's) reads. */
START_TEST(data_offsets_tile_the_file)
{
    char dir[] = "/tmp/fuyou-st-XXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    float data[5] = {1, 2, 3, 4, 5}, got[2];
    StFile st;
    Err e;
    /* listed out of order but contiguous, no checksums: fine */
    put_st(path, "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 16);
    ck_assert_msg(st_open(&st, path, &e) == 0, "%s", e.msg);
    ck_assert(!st_find(&st, "b")->has_crc);
    ck_assert_int_eq(st_read_f32(&st, st_find(&st, "b"), got, &e), 0);
    ck_assert(got[0] == 3 && got[1] == 4);
    st_close(&st);
    put_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", data, 12);
    ck_assert_int_eq(st_open(&st, path, &e), -EINVAL);
    tu_assert_contains(e.msg, "tensors a and b overlap");
    put_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", data, 20);
    ck_assert_int_eq(st_open(&st, path, &e), -EINVAL);
    tu_assert_contains(e.msg, "data bytes 8..12, before tensor b, belong to no tensor");
    put_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 12);
    ck_assert_int_eq(st_open(&st, path, &e), -EINVAL);
    tu_assert_contains(e.msg, "data bytes 8..12, after tensor a, belong to no tensor");
    /* checksums that are not 8 hex digits, or for a tensor the file lacks */
    put_st(path, "{\"__metadata__\":{\"crc32c:a\":\"xyz\"},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8);
    ck_assert_int_eq(st_open(&st, path, &e), -EINVAL);
    tu_assert_contains(e.msg, "__metadata__ crc32c:a: expected a checksum of 8 hex digits");
    put_st(path, "{\"__metadata__\":{\"crc32c:q\":\"0000abcd\"},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8);
    ck_assert_int_eq(st_open(&st, path, &e), -EINVAL);
    tu_assert_contains(e.msg, "a checksum for tensor q, which the file does not hold");
    tu_rm_tree(dir);
}
END_TEST

/* state.json: a negative or absurd step, skipped steps outside 0..step, other numbers out of
 * range and another model's shape are one line each, never an abort or an overflow. */
START_TEST(state_is_validated)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    TrainState s;
    Err e;
    struct { bool model; const char *key; json_t *value; const char *want; } cases[] = {
        {false, "step", json_integer(-5), "step is -5; it must be 0 to"},
        {false, "step", json_integer(INT64_C(1) << 40), "step is 1099511627776"},
        {false, "skipped_steps", json_integer(9), "skipped_steps is 9; it must be 0 to 4"},
        {false, "skipped_steps", json_integer(-1), "skipped_steps is -1"},
        {false, "loss_scale_good_steps", json_integer(-3), "loss_scale_good_steps is -3"},
        {false, "loader_index", json_integer(-1), "loader_index is -1"},
        {false, "loader_epoch", json_integer(-2), "loader_epoch is -2"},
        {false, "prev_grad_norm", json_real(-1), "prev_grad_norm is -1"},
        {false, "loss_scale", json_real(1e-30), "loss_scale is 1e-30"},
        {false, "schedule_steps", json_integer(3), "schedule_steps is 3; it must be 4 to"},
        {true, "heads", json_integer(8), "8 heads"},
        {true, "ffn", json_integer(256), "ffn 256"},
        {true, "tied", json_false(), "untied; this run's gpt2-tiny"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fixture_save(&f, 4);
        set_state(&f, 4, cases[i].model, cases[i].key, cases[i].value);
        ck_assert_msg(fixture_load(&f, &s, &e) == -EINVAL, "%s accepted", cases[i].key);
        tu_assert_contains(e.msg, "state.json");
        tu_assert_contains(e.msg, cases[i].want);
    }
    fixture_free(&f);
}
END_TEST

/* The trainer resuming such a state: one error, not an abort in AdamW (skipped_steps above
 * step) or a write past the losses (a negative step). */
START_TEST(trainer_refuses_a_bad_state)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    TrainOptions o = {.backend = &backend_cpu,
                      .data_paths = {"/usr/share/common-licenses/GPL-3"}, .n_data = 1,
                      .seqs_per_step = 2, .seq = 16, .steps = 6, .lr = 1e-3f, .beta1 = 0.9f,
                      .beta2 = 0.95f, .eps = 1e-8f, .clip = 1.0f, .seed = 5,
                      .subgroup_blocks = 1, .tail_blocks = 1, .threads = 1,
                      .resume_dir = f.dir, .model = f.c};
    const char *keys[2] = {"step", "skipped_steps"};
    json_int_t values[2] = {-5, 1000};
    for (int i = 0; i < 2; i++) {
        fixture_save(&f, 4);
        set_state(&f, 4, false, keys[i], json_integer(values[i]));
        TrainResult r;
        Err e;
        ck_assert_int_eq(trainer_run(&o, &r, &e), -EINVAL);
        tu_assert_contains(e.msg, keys[i]);
        free(r.losses);
    }
    fixture_free(&f);
}
END_TEST

/* latest missing, empty, or naming a step directory without all its files: the newest step
 * directory that loads completely, said on stderr; a damaged newer one is skipped, said too. */
START_TEST(resume_falls_back_to_newest_complete)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    TrainState s;
    Err e;
    char path[256], latest[256];
    snprintf(latest, sizeof latest, "%s/latest", f.dir);
    ck_assert_int_eq(with_stderr(fixture_load, &f, &s, &e), -ENOENT);
    tu_assert_contains(e.msg, "no checkpoint to resume");
    fixture_save(&f, 2);
    fixture_save(&f, 4);
    FILE *lf = fopen(latest, "r");
    ck_assert_ptr_nonnull(lf);
    ck_assert_ptr_nonnull(fgets(path, sizeof path, lf));
    fclose(lf);
    ck_assert_str_eq(path, "step-00000004\n");
    snprintf(path, sizeof path, "%s/.latest.tmp", f.dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    /* latest missing: step 4, said */
    ck_assert_int_eq(unlink(latest), 0);
    ck_assert_msg(with_stderr(fixture_load, &f, &s, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(s.step, 4);
    tu_assert_contains(err_text, "resuming from");
    tu_assert_contains(err_text, "step-00000004, the newest complete checkpoint");
    /* latest empty: the same */
    put_text(latest, "");
    ck_assert_msg(with_stderr(fixture_load, &f, &s, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(s.step, 4);
    /* latest names step 4, which lost its optimizer file: step 2 */
    fixture_save(&f, 4);
    ck_assert_int_eq(unlink(step_file(path, sizeof path, &f, 4, "optimizer.safetensors")), 0);
    ck_assert_msg(with_stderr(fixture_load, &f, &s, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(s.step, 2);
    tu_assert_contains(err_text, "latest names step-00000004, which has no optimizer.safetensors");
    tu_assert_contains(err_text, "step-00000002, the newest complete checkpoint");
    /* no latest, step 4 complete but damaged: skipped, said, step 2 */
    fixture_save(&f, 4);
    ck_assert_int_eq(unlink(latest), 0);
    flip_bit(step_file(path, sizeof path, &f, 4, "model.safetensors"), "transformer.wte.weight");
    ck_assert_msg(with_stderr(fixture_load, &f, &s, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(s.step, 2);
    tu_assert_contains(err_text, "skipping");
    tu_assert_contains(err_text, "transformer.wte.weight is damaged");
    /* nothing loads: one error naming the newest's problem */
    flip_bit(step_file(path, sizeof path, &f, 2, "model.safetensors"), "transformer.wte.weight");
    ck_assert_int_eq(with_stderr(fixture_load, &f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, "no complete checkpoint to resume");
    tu_assert_contains(e.msg, "step-00000004/model.safetensors: tensor transformer.wte.weight");
    /* latest naming something that is no step directory stays an error */
    put_text(latest, "../elsewhere\n");
    ck_assert_int_eq(fixture_load(&f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, "names ../elsewhere");
    fixture_free(&f);
}
END_TEST

/* f's arrays and state as step's: each step's values its own. */
static void fixture_mark(Fixture *f, int step)
{
    for (size_t i = 0; i < f->l.total; i++)
        f->p[i] = (float)i * 1e-5f + (float)step, f->m[i] = -(float)i - (float)step,
        f->v[i] = (float)(i % 17) + (float)step;
    f->s.index = 10 * step, f->s.prev_grad_norm = 0.25 * step;
}

static void fixture_save_as(Fixture *f, int step)
{
    fixture_mark(f, step);
    fixture_save(f, step);
}

/* A step read range by range through a CkptReader, as the out-of-core pipeline reads one. */
typedef struct RangeLoad {
    const Fixture *f;
    float *p, *m, *v;
} RangeLoad;

static int load_ranges(void *user, const char *step_dir, Err *e)
{
    RangeLoad *r = user;
    CkptReader *cr;
    size_t P = r->f->l.total, chunk = 5000; /* ranges that end inside tensors */
    int rc = ckpt_reader_open(&cr, step_dir, &r->f->c, &r->f->l, e);
    for (size_t at = 0; !rc && at < P; at += chunk) {
        size_t n = P - at < chunk ? P - at : chunk;
        rc = ckpt_reader_read(cr, at, n, r->p + at, r->m + at, r->v + at, e);
    }
    ckpt_reader_close(cr);
    return rc;
}

/* fixture_load through ckpt_load_with and load_ranges, into arrays that start as garbage. */
static int fixture_load_ranges(Fixture *f, TrainState *s, Err *e)
{
    size_t P = f->l.total;
    RangeLoad r = {f, malloc(P * 4), malloc(P * 4), malloc(P * 4)};
    memset(r.p, 0x7f, P * 4), memset(r.m, 0x7f, P * 4), memset(r.v, 0x7f, P * 4);
    int rc = ckpt_load_with(f->dir, &f->c, load_ranges, &r, s, e);
    if (!rc) {
        ck_assert_int_eq(memcmp(r.p, f->p, P * 4), 0);
        ck_assert_int_eq(memcmp(r.m, f->m, P * 4), 0);
        ck_assert_int_eq(memcmp(r.v, f->v, P * 4), 0);
    }
    free(r.p), free(r.m), free(r.v);
    return rc;
}

/* latest naming a step whose tensors are damaged: the newest intact one, bit for bit what
 * resuming it directly gives, though the damage is found after the rest of the damaged step
 * was put in the arrays; one line naming both. None intact: one error. Another model in
 * latest's state.json is no damage: an error, no fallback. */
/* A step load that fails for the run's reason, not the files' (the SSD tier full as the
 * states are put there): counted, and the error returned as it is */
static int load_fails_full(void *user, const char *step_dir, Err *e)
{
    (void)step_dir;
    ++*(int *)user;
    return err_set(e, -ENOSPC, "the SSD tier is full");
}

/* ...is no damage: latest's step is not skipped for an older one, which would fail the same
 * way (it had tried every step and said none was complete) */
START_TEST(run_failure_is_not_damage)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    for (int step = 1; step <= 3; step++)
        fixture_save_as(&f, step);
    int calls = 0;
    TrainState s;
    Err e;
    ck_assert_int_eq(ckpt_load_with(f.dir, &f.c, load_fails_full, &calls, &s, &e), -ENOSPC);
    ck_assert_int_eq(calls, 1);
    ck_assert_str_eq(e.msg, "the SSD tier is full");
    fixture_free(&f);
}
END_TEST

START_TEST(resume_falls_back_from_damaged_latest)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    int (*loads[2])(Fixture *, TrainState *, Err *) = {fixture_load, fixture_load_ranges};
    char path[256], want[512], latest[256];
    snprintf(latest, sizeof latest, "%s/latest", f.dir);
    TrainState s, direct;
    Err e;
    for (int k = 0; k < 2; k++) {
        for (int step = 1; step <= 3; step++)
            fixture_save_as(&f, step);
        /* adam.v is read last: step 3's weights and m are in the arrays when it fails */
        flip_bit(step_file(path, sizeof path, &f, 3, k ? "model.safetensors"
                           : "optimizer.safetensors"), k ? "transformer.h.3.mlp.c_proj.weight"
                 : "adam.v");
        fixture_mark(&f, 2); /* what the loads compare with */
        put_text(latest, "step-00000002\n");
        ck_assert_msg(loads[k](&f, &direct, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(direct.step, 2);
        put_text(latest, "step-00000003\n");
        ck_assert_msg(with_stderr(loads[k], &f, &s, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(s.step, 2);
        ck_assert_int_eq(s.index, direct.index);
        ck_assert(s.prev_grad_norm == direct.prev_grad_norm);
        snprintf(want, sizeof want, "%s/latest names step-00000003, which does not load: %s/"
                 "step-00000003/%s: tensor %s is damaged", f.dir, f.dir,
                 k ? "model.safetensors" : "optimizer.safetensors",
                 k ? "transformer.h.3.mlp.c_proj.weight" : "adam.v");
        tu_assert_contains(err_text, want);
        snprintf(want, sizeof want, "resuming from %s/step-00000002, the newest complete "
                 "checkpoint\n", f.dir);
        tu_assert_contains(err_text, want);
        ck_assert_int_eq(strchr(err_text, '\n') - err_text + 1, (long)strlen(err_text));
    }
    /* none intact: one error naming latest's step; the others' on the lines before */
    flip_bit(step_file(path, sizeof path, &f, 2, "optimizer.safetensors"), "adam.m");
    flip_bit(step_file(path, sizeof path, &f, 1, "model.safetensors"), "transformer.wte.weight");
    ck_assert_int_eq(with_stderr(fixture_load, &f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, "no complete checkpoint to resume");
    tu_assert_contains(e.msg, "latest names step-00000003, which does not load");
    tu_assert_contains(e.msg, "model.safetensors: tensor transformer.h.3.mlp.c_proj.weight is "
                       "damaged");
    tu_assert_contains(e.msg, "; the other 2 step directories do not load either");
    tu_assert_contains(err_text, "step-00000002/optimizer.safetensors: tensor adam.m is damaged");
    tu_assert_contains(err_text, "skipping");
    /* a damaged step named on its own (--init-from) stays an error */
    float *p = calloc(f.l.total, 4);
    ck_assert_int_eq(ckpt_load_model(step_file(path, sizeof path, &f, 3, ""), &f.c, &f.l, p,
                                     &e), -EINVAL);
    tu_assert_contains(e.msg, "is damaged");
    free(p);
    /* latest's state.json of another model: an error, older steps not tried */
    fixture_save_as(&f, 2);
    fixture_save_as(&f, 4);
    set_state(&f, 4, true, "heads", json_integer(8));
    ck_assert_int_eq(with_stderr(fixture_load, &f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, "8 heads");
    ck_assert_str_eq(err_text, "");
    fixture_free(&f);
}
END_TEST


/* A fresh run's --save directory: refused when it holds latest or a step directory (saying
 * what to do), emptied of them with overwrite, other files kept. */
START_TEST(fresh_run_refuses_a_checkpoint_dir)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    Err e;
    char path[256], other[256];
    snprintf(path, sizeof path, "%s/nothing-yet", f.dir);
    ck_assert_int_eq(ckpt_prepare_fresh(path, false, &e), 0); /* missing: fine */
    ck_assert_int_eq(ckpt_prepare_fresh(f.dir, false, &e), 0);
    snprintf(path, sizeof path, "%s/.lock", f.dir); /* a run's lock (dirlock.h) is none */
    put_text(path, "1 fuyou-run\n");
    ck_assert_int_eq(ckpt_prepare_fresh(f.dir, false, &e), 0);
    fixture_save(&f, 2);
    ck_assert_int_eq(ckpt_prepare_fresh(f.dir, false, &e), -EEXIST);
    tu_assert_contains(e.msg, "holds a checkpoint (step-00000002)");
    tu_assert_contains(e.msg, "--resume");
    tu_assert_contains(e.msg, "another directory");
    tu_assert_contains(e.msg, "--overwrite");
    snprintf(path, sizeof path, "%s/latest", f.dir);
    ck_assert_int_eq(unlink(path), 0); /* a step directory alone */
    ck_assert_int_eq(ckpt_prepare_fresh(f.dir, false, &e), -EEXIST);
    snprintf(other, sizeof other, "%s/notes.txt", f.dir);
    put_text(other, "mine");
    fixture_save(&f, 4);
    ck_assert_int_eq(ckpt_prepare_fresh(f.dir, true, &e), 0);
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_ne(access(step_file(path, sizeof path, &f, 2, ""), F_OK), 0);
    ck_assert_int_ne(access(step_file(path, sizeof path, &f, 4, ""), F_OK), 0);
    ck_assert_int_eq(access(other, F_OK), 0);
    ck_assert_int_eq(ckpt_prepare_fresh(f.dir, false, &e), 0);
    fixture_free(&f);
}
END_TEST

static json_t *load_config(const char *dir, int step)
{
    char path[256];
    snprintf(path, sizeof path, "%s/step-%08d/config.json", dir, step);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    ck_assert_msg(root != NULL, "%s: %s", path, je.text);
    return root;
}

static json_int_t int_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_integer(v), "%s is not an integer", key);
    return json_integer_value(v);
}

/* config.json holds Hugging Face's GPT2Config for the model */
START_TEST(config_json_for_hugging_face)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    fixture_save(&f, 4);
    json_t *cfg = load_config(f.dir, 4);
    ck_assert_str_eq(json_string_value(json_object_get(cfg, "model_type")), "gpt2");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(cfg, "architectures"), 0)),
                     "GPT2LMHeadModel");
    ck_assert_int_eq(int_of(cfg, "vocab_size"), 256);
    ck_assert_int_eq(int_of(cfg, "n_positions"), 256);
    ck_assert_int_eq(int_of(cfg, "n_embd"), 128);
    ck_assert_int_eq(int_of(cfg, "n_layer"), 4);
    ck_assert_int_eq(int_of(cfg, "n_head"), 4);
    ck_assert_ptr_null(json_object_get(cfg, "n_inner")); /* 4h: their default */
    ck_assert(json_is_null(json_object_get(cfg, "eos_token_id"))); /* bytes, not GPT-2's BPE */
    ck_assert_str_eq(json_string_value(json_object_get(cfg, "activation_function")),
                     "gelu_new");
    ck_assert_double_eq(json_real_value(json_object_get(cfg, "layer_norm_epsilon")), 1e-5);
    ck_assert(json_is_true(json_object_get(cfg, "tie_word_embeddings")));
    json_decref(cfg);
    fixture_free(&f);
    /* GPT-2's vocabulary, an untied head and a narrower MLP */
    Fixture g;
    fixture_init(&g, (ModelConfig){.name = "gpt2-odd", .n_layer = 1, .d_model = 8, .n_head = 2,
                                   .d_ff = 24, .vocab = 50257, .max_seq = 16, .tied = false});
    fixture_save(&g, 1);
    cfg = load_config(g.dir, 1);
    ck_assert_int_eq(int_of(cfg, "n_inner"), 24);
    ck_assert_int_eq(int_of(cfg, "bos_token_id"), 50256);
    ck_assert_int_eq(int_of(cfg, "eos_token_id"), 50256);
    ck_assert(json_is_false(json_object_get(cfg, "tie_word_embeddings")));
    json_decref(cfg);
    fixture_free(&g);
}
END_TEST

/* A tied model loading a file with its own lm_head.weight: refused unless it is the embedding
 * bit for bit. */
START_TEST(untied_head_into_tied_model)
{
    Fixture f;
    fixture_init(&f, tiny(false)); /* lm_head differs from wte */
    fixture_save(&f, 1);
    ModelConfig tied = f.c;
    tied.tied = true;
    ModelLayout lt;
    ck_assert_int_eq(layout_init(&lt, &tied), 0);
    float *p = calloc(lt.total, 4);
    char path[256];
    step_file(path, sizeof path, &f, 1, "model.safetensors");
    Err e;
    ck_assert_int_eq(ckpt_load_model(path, &tied, &lt, p, &e), -EINVAL);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, "lm_head.weight differs from transformer.wte.weight");
    tu_assert_contains(e.msg, "tied = false");
    /* the same head as the embedding: a tied model in an untied file, fine */
    const ParamTensor *wte = layout_find(&f.l, "transformer.wte.weight");
    const ParamTensor *head = layout_find(&f.l, "lm_head.weight");
    memcpy(f.p + head->offset, f.p + wte->offset, wte->numel * 4);
    fixture_save(&f, 1);
    ck_assert_msg(ckpt_load_model(path, &tied, &lt, p, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(p, f.p, wte->numel * 4), 0);
    free(p);
    layout_free(&lt);
    fixture_free(&f);
}
END_TEST

/* An optimizer file cut short: one error, and nothing leaks (LeakSanitizer in the ASan build). */
START_TEST(truncated_optimizer_does_not_leak)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    fixture_save(&f, 4);
    char path[256];
    step_file(path, sizeof path, &f, 4, "optimizer.safetensors");
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(truncate(path, st.st_size / 2), 0);
    TrainState s;
    Err e;
    ck_assert_int_eq(fixture_load(&f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, "optimizer.safetensors: tensor adam.");
    tu_assert_contains(e.msg, "truncated");
    ck_assert_int_eq(truncate(path, 4), 0);
    ck_assert_int_eq(fixture_load(&f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, "too short");
    fixture_free(&f);
}
END_TEST

/* Found writing fuzz_safetensors, which checks it (tests/fuzz/corpus/safetensors/
 * regress-shape-wraps): a shape whose element count wraps around 2^64 matched a small byte
 * count, so a tensor of 2^62 + 1 rows read as 4 values; now the shape is refused. A zero
 * dimension still makes an empty tensor. */
START_TEST(shape_that_wraps_is_refused)
{
    char dir[] = "/tmp/fuyou-st-XXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    float data[4] = {1, 2, 3, 4};
    StFile st;
    Err e;
    put_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387905,4],"
                 "\"data_offsets\":[0,16]}}", data, 16);
    ck_assert_int_eq(st_open(&st, path, &e), -EINVAL);
    tu_assert_contains(e.msg, "tensor a: its shape holds 2^64 bytes or more");
    put_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
                 "\"data_offsets\":[0,0]}}", data, 0);
    ck_assert_int_eq(st_open(&st, path, &e), -EINVAL);
    tu_assert_contains(e.msg, "2^64 bytes or more");
    put_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904],"
                 "\"data_offsets\":[0,0]},\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
                 "\"data_offsets\":[0,16]}}", data, 16);
    ck_assert_msg(st_open(&st, path, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(st_numel(st_find(&st, "a")), 0);
    st_close(&st);
    tu_rm_tree(dir);
}
END_TEST

/* Found writing fuzz_safetensors, which checks it (tests/fuzz/corpus/safetensors/
 * regress-tensor-twice): a model file holding a tensor under both its names (with and without
 * "transformer.") loaded, the one later in the file winning; now one error naming it. */
START_TEST(tensor_twice_is_refused)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", f.dir);
    StWriter w;
    Err e;
    ck_assert_int_eq(st_writer_begin(&w, path, &e), 0);
    for (int i = 0; i < f.l.n; i++) {
        const ParamTensor *t = &f.l.t[i];
        int64_t shape[2] = {t->conv1d ? t->cols : t->rows, t->conv1d ? t->rows : t->cols};
        if (t->rows == 1)
            shape[0] = t->cols;
        ck_assert_int_eq(st_writer_add(&w, t->name, f.p + t->offset, t->rows == 1 ? 1 : 2,
                                       shape, &e), 0);
    }
    const ParamTensor *ln = layout_find(&f.l, "h.1.ln_2.bias");
    int64_t shape[1] = {ln->cols};
    ck_assert_int_eq(st_writer_add(&w, "h.1.ln_2.bias", f.m, 1, shape, &e), 0);
    ck_assert_int_eq(st_writer_finish(&w, NULL, NULL, &e), 0);
    float *p = calloc(f.l.total, sizeof *p);
    ck_assert_int_eq(ckpt_load_model(path, &f.c, &f.l, p, &e), -EINVAL);
    tu_assert_contains(e.msg, "tensor transformer.h.1.ln_2.bias is in the file twice");
    free(p);
    fixture_free(&f);
}
END_TEST

/* Found by fuzz_state (tests/fuzz/corpus/state/regress-newline-in-error*): jansson quotes a
 * broken token with the file's own bytes, so a state.json (or safetensors header) cut in a
 * string gave an error of two lines; every message is one printable line now (err_set). */
START_TEST(json_errors_are_one_line)
{
    Fixture f;
    fixture_init(&f, tiny(true));
    fixture_save(&f, 4);
    char path[256];
    step_file(path, sizeof path, &f, 4, "state.json");
    put_text(path, "{\n  \"step\": 4,\n  \"loss_\\\n");
    TrainState s;
    Err e;
    ck_assert_int_eq(fixture_load(&f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, "state.json:4: invalid escape");
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    put_text(path, "{\"step\": \"a\x01\x1b[31m");
    ck_assert_int_eq(fixture_load(&f, &s, &e), -EINVAL);
    tu_assert_contains(e.msg, "control character");
    for (const char *p = e.msg; *p; p++)
        ck_assert_int_ge((unsigned char)*p, 0x20);
    snprintf(path, sizeof path, "%s/x.safetensors", f.dir);
    put_st(path, "{\"a\\\n", NULL, 0);
    StFile st;
    ck_assert_int_eq(st_open(&st, path, &e), -EINVAL);
    tu_assert_contains(e.msg, "header is not a JSON object");
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    fixture_free(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, checksums_catch_a_flipped_bit);
    tcase_add_test(tc, data_offsets_tile_the_file);
    tcase_add_test(tc, state_is_validated);
    tcase_add_test(tc, trainer_refuses_a_bad_state);
    tcase_add_test(tc, resume_falls_back_to_newest_complete);
    tcase_add_test(tc, resume_falls_back_from_damaged_latest);
    tcase_add_test(tc, run_failure_is_not_damage);
    tcase_add_test(tc, fresh_run_refuses_a_checkpoint_dir);
    tcase_add_test(tc, config_json_for_hugging_face);
    tcase_add_test(tc, untied_head_into_tied_model);
    tcase_add_test(tc, truncated_optimizer_does_not_leak);
    tcase_add_test(tc, shape_that_wraps_is_refused);
    tcase_add_test(tc, tensor_twice_is_refused);
    tcase_add_test(tc, json_errors_are_one_line);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
