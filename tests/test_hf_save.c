/* Check suite for exec/train/hf_save.h and the checkpoints written with it (checkpoint.h):
 * config.json for Llama, Llama 3.1's scaling and Qwen2 reads back through model_load to the
 * same model, with transformers' fields and the source's token ids; shards cut as
 * huggingface_hub cuts them, with an index whose total_size and weight_map match the shards;
 * the sharded fixture saved as a sharded checkpoint resumes bit for bit (ckpt_load), loads as
 * --init-from (ckpt_load_model) bit for bit and carries the tokenizer files, also into a
 * resumed run's checkpoints; a step with a shard missing is skipped by the fallback, latest
 * naming it or not; GPT-2's Conv1D
 * weights go transposed across shards and come back; the trainer starts from the fixture's
 * folder, saves a folder and resumes from it exactly. */
#include <errno.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "cpu_backend.h"
#include "hf_save.h"
#include "hf_testutil.h"
#include "safetensors.h"
#include "trainer.h"

/* a and b describe the same model, as far as a Hugging Face config.json says. */
static void expect_same_model(const ModelConfig *a, const ModelConfig *b)
{
    ck_assert_int_eq(a->arch, b->arch);
    ck_assert_int_eq(a->n_layer, b->n_layer);
    ck_assert_int_eq(a->d_model, b->d_model);
    ck_assert_int_eq(a->n_head, b->n_head);
    ck_assert_int_eq(model_kv_heads(a), model_kv_heads(b));
    ck_assert_int_eq(a->d_ff, b->d_ff);
    ck_assert_int_eq(a->vocab, b->vocab);
    ck_assert_int_eq(a->max_seq, b->max_seq);
    ck_assert_int_eq(a->tied, b->tied);
    ck_assert_int_eq(a->qkv_bias, b->qkv_bias);
    ck_assert(model_rope_theta(a) == model_rope_theta(b));
    ck_assert(model_norm_eps(a) == model_norm_eps(b));
    ck_assert(a->rope_scaling.factor == b->rope_scaling.factor);
    ck_assert(a->rope_scaling.low_freq_factor == b->rope_scaling.low_freq_factor);
    ck_assert(a->rope_scaling.high_freq_factor == b->rope_scaling.high_freq_factor);
    ck_assert_int_eq(a->rope_scaling.original_max_seq, b->rope_scaling.original_max_seq);
}

static const char *str_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_string(v), "%s is not a string", key);
    return json_string_value(v);
}

START_TEST(llama_config_reads_back)
{
    ModelConfig fx;
    ModelLayout l;
    hf_fixture_model(&fx, &l);
    layout_free(&l);
    ModelConfig odd = fx; /* reals that 6 digits would not bring back */
    odd.rope_theta = 0.1 + 0.2;
    odd.norm_eps = 1.0 / 3e6;
    const ModelConfig *cases[] = {&fx, &odd, model_preset_find("llama-3.2-1b"),
                                  model_preset_find("qwen2.5-7b")};
    const char *types[] = {"llama", "llama", "llama", "qwen2"};
    for (int i = 0; i < 4; i++) {
        char dir[] = "/tmp/fuyou-hfs-XXXXXX", path[64];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/config.json", dir);
        Err e;
        ck_assert_msg(hf_write_config(path, cases[i], DTYPE_FP32, NULL, &e) == 0, "%s", e.msg);
        ModelConfig back;
        ck_assert_msg(model_load(dir, &back, &e) == 0, "%s", e.msg);
        expect_same_model(cases[i], &back);
        json_t *cfg = hf_read_json(path);
        ck_assert_str_eq(str_of(cfg, "model_type"), types[i]);
        ck_assert_str_eq(json_string_value(json_array_get(json_object_get(cfg, "architectures"),
                                                          0)),
                         i == 3 ? "Qwen2ForCausalLM" : "LlamaForCausalLM");
        ck_assert_str_eq(str_of(cfg, "hidden_act"), "silu");
        ck_assert_str_eq(str_of(cfg, "torch_dtype"), "float32");
        ck_assert(json_is_false(json_object_get(cfg, "attention_bias")));
        ck_assert(json_is_false(json_object_get(cfg, "mlp_bias")));
        ck_assert(json_is_null(json_object_get(cfg, "eos_token_id")));
        json_t *rs = json_object_get(cfg, "rope_scaling");
        ck_assert(i == 2 ? json_is_object(rs) : json_is_null(rs));
        if (i == 2)
            ck_assert_str_eq(str_of(rs, "rope_type"), "llama3");
        json_decref(cfg);
        tu_rm_tree(dir);
    }
}
END_TEST

/* The source config's token ids come along; GPT-2 keeps its GPT2Config. */
START_TEST(token_ids_from_the_source)
{
    ModelConfig fx;
    ModelLayout l;
    hf_fixture_model(&fx, &l);
    layout_free(&l);
    char dir[] = "/tmp/fuyou-hfs-XXXXXX", path[64], source[1100];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(source, sizeof source, "%s/config.json", hf_fixture());
    Err e;
    ck_assert_msg(hf_write_config(path, &fx, DTYPE_FP32, source, &e) == 0, "%s", e.msg);
    json_t *cfg = hf_read_json(path);
    ck_assert_int_eq(json_integer_value(json_object_get(cfg, "bos_token_id")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(cfg, "eos_token_id")), 2);
    ck_assert_ptr_null(json_object_get(cfg, "pad_token_id")); /* the source has none */
    json_decref(cfg);
    ck_assert_int_eq(hf_write_config(path, model_preset_find("gpt2-124m"), DTYPE_FP32, NULL, &e), 0);
    cfg = hf_read_json(path);
    ck_assert_str_eq(str_of(cfg, "model_type"), "gpt2");
    ck_assert_int_eq(json_integer_value(json_object_get(cfg, "eos_token_id")), 50256);
    json_decref(cfg);
    tu_rm_tree(dir);
}
END_TEST

/* Recognisable parameters for l. */
static float *some_params(const ModelLayout *l)
{
    float *p = malloc(l->total * sizeof *p);
    for (size_t i = 0; i < l->total; i++)
        p[i] = (float)i * 1e-3f - 1.0f;
    return p;
}

/* huggingface_hub's cut: in layout order, a new shard when the next tensor would take this one
 * past the limit, a tensor larger than the limit alone; the index lists each tensor in the
 * shard that holds it, total_size their bytes. */
START_TEST(shards_cut_as_huggingface_does)
{
    ModelConfig c;
    ModelLayout l;
    hf_fixture_model(&c, &l);
    float *p = some_params(&l);
    const uint64_t max = 3000; /* the embedding and the head (4096 bytes) alone */
    int n = hf_shard_count(&l, DTYPE_FP32, max);
    ck_assert_int_gt(n, 4);
    ck_assert_int_eq(hf_shard_count(&l, DTYPE_FP32, 0), 1);
    char dir[] = "/tmp/fuyou-hfs-XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    Err e;
    ck_assert_msg(hf_save_weights(dir, &l, p, DTYPE_FP32, max, &e) == 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/%s", dir, HF_SINGLE_FILE);
    ck_assert_int_ne(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/%s", dir, HF_INDEX_FILE);
    json_t *index = hf_read_json(path), *map = json_object_get(index, "weight_map");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(index, "metadata"),
                                                        "total_size")),
                     (json_int_t)(4 * l.total));
    ck_assert_int_eq(json_object_size(map), l.n);
    uint64_t bytes = 0;
    int shard = 0;
    for (int k = 0; k < l.n; k++) {
        const ParamTensor *t = &l.t[k];
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", shard + 1, n);
        const char *in = json_string_value(json_object_get(map, t->name));
        ck_assert_ptr_nonnull(in);
        if (strcmp(in, name)) { /* the next shard starts: this tensor did not fit */
            ck_assert(bytes + 4 * t->numel > max);
            shard++;
            snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", shard + 1, n);
            ck_assert_str_eq(in, name);
            bytes = 0;
        }
        bytes += 4 * t->numel;
        ck_assert(bytes <= max || bytes == 4 * t->numel);
    }
    ck_assert_int_eq(shard + 1, n);
    /* each shard holds exactly the tensors the index puts in it, F32 with their checksums */
    int held = 0;
    for (int k = 0; k < n; k++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, n);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        StFile s;
        ck_assert_msg(st_open(&s, path, &e) == 0, "%s", e.msg);
        for (int i = 0; i < s.n; i++, held++) {
            ck_assert_str_eq(json_string_value(json_object_get(map, s.t[i].name)), name);
            ck_assert_str_eq(s.t[i].dtype, "F32");
            ck_assert(s.t[i].has_crc);
        }
        st_close(&s);
    }
    ck_assert_int_eq(held, l.n);
    json_decref(index);
    float *q;
    ck_assert_msg(hf_load_flat(dir, &c, &l, &q, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(p, q, l.total * 4), 0);
    free(p), free(q);
    layout_free(&l);
    tu_rm_tree(dir);
}
END_TEST

/* Two files hold the same bytes. */
static void expect_same_file(const char *a, const char *b)
{
    char cmd[2300], out[64];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    ck_assert_msg(tu_run_shell(cmd, out, sizeof out) == 0, "%s differs from %s", b, a);
}

/* The fixture (BF16, 2 shards) saved as a sharded checkpoint: resumed bit for bit, loaded as
 * --init-from bit for bit, its config.json the same model, the tokenizer files along. */
START_TEST(sharded_checkpoint_round_trip)
{
    ModelConfig c;
    ModelLayout l;
    float *p = hf_fixture_params(&c, &l), *m = some_params(&l), *v = some_params(&l);
    Err e;
    char dir[] = "/tmp/fuyou-hfs-XXXXXX", step[128], path[256], src[1100];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    TrainState s = {.step = 7, .epoch = 1, .index = 9, .seed = 3, .prev_grad_norm = 0.75};
    CkptSaveOptions o = {.max_shard_bytes = 8000, .tokenizer_from = hf_fixture()};
    ck_assert_msg(ckpt_save_with(dir, &c, &l, p, m, v, &s, &o, &e) == 0, "%s", e.msg);
    snprintf(step, sizeof step, "%s/step-00000007", dir);
    int n = hf_shard_count(&l, DTYPE_FP32, 8000);
    ck_assert_int_gt(n, 2);
    snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", step, n, n);
    ck_assert_int_eq(access(path, F_OK), 0);
    const char *tok[] = {"generation_config.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", step, tok[i]);
        snprintf(src, sizeof src, "%s/%s", hf_fixture(), tok[i]);
        expect_same_file(src, path);
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", step);
    ck_assert_int_ne(access(path, F_OK), 0); /* the fixture has none */
    /* resume: bit for bit */
    float *p2 = calloc(l.total, 4), *m2 = calloc(l.total, 4), *v2 = calloc(l.total, 4);
    TrainState s2;
    ck_assert_msg(ckpt_load(dir, &c, &l, p2, m2, v2, &s2, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(p, p2, l.total * 4), 0);
    ck_assert_int_eq(memcmp(m, m2, l.total * 4), 0);
    ck_assert_int_eq(memcmp(v, v2, l.total * 4), 0);
    ck_assert_int_eq(s2.step, 7);
    ck_assert_int_eq(s2.index, 9);
    /* resuming reads state.json's model, not config.json: a GPT2Config there (as checkpoints
     * of Llama before this one had) still resumes, and --init-from refuses it */
    snprintf(path, sizeof path, "%s/config.json", step);
    ck_assert_int_eq(hf_write_config(path, model_preset_find("gpt2-tiny"), DTYPE_FP32, NULL, &e), 0);
    memset(p2, 0, l.total * 4);
    ck_assert_msg(ckpt_load(dir, &c, &l, p2, m2, v2, &s2, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(p, p2, l.total * 4), 0);
    ck_assert_int_eq(ckpt_load_model(step, &c, &l, p2, &e), -EINVAL);
    tu_assert_contains(e.msg, "a model of the gpt2 family");
    snprintf(src, sizeof src, "%s/config.json", hf_fixture());
    ck_assert_int_eq(hf_write_config(path, &c, DTYPE_FP32, src, &e), 0); /* as it was */
    /* --init-from the step folder and its index: bit for bit; its config the same model */
    memset(p2, 0, l.total * 4);
    ck_assert_msg(ckpt_load_model(step, &c, &l, p2, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(p, p2, l.total * 4), 0);
    snprintf(path, sizeof path, "%s/%s", step, HF_INDEX_FILE);
    memset(p2, 0, l.total * 4);
    ck_assert_msg(ckpt_load_model(path, &c, &l, p2, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(p, p2, l.total * 4), 0);
    ModelConfig back;
    ck_assert_msg(model_load(step, &back, &e) == 0, "%s", e.msg);
    expect_same_model(&c, &back);
    snprintf(path, sizeof path, "%s/config.json", step);
    json_t *cfg = hf_read_json(path);
    ck_assert_int_eq(json_integer_value(json_object_get(cfg, "eos_token_id")), 2);
    json_decref(cfg);
    /* a run resumed from dir saving elsewhere: the tokenizer files come from dir's latest */
    char dir2[] = "/tmp/fuyou-hfs-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir2));
    s2.step = 8;
    o.tokenizer_from = dir;
    ck_assert_msg(ckpt_save_with(dir2, &c, &l, p, m, v, &s2, &o, &e) == 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/step-00000008/generation_config.json", dir2);
    snprintf(src, sizeof src, "%s/generation_config.json", hf_fixture());
    expect_same_file(src, path);
    free(p), free(m), free(v), free(p2), free(m2), free(v2);
    layout_free(&l);
    tu_rm_tree(dir);
    tu_rm_tree(dir2);
}
END_TEST

/* A sharded step as the fallback treats it: one whose shard is gone is damaged, as one with a
 * flipped bit is (a write never leaves it so), and skipped, latest naming it or not; one whose
 * index is gone lacks its weights, and latest naming it falls back. */
START_TEST(resume_and_a_step_with_a_shard_missing)
{
    ModelConfig c;
    ModelLayout l;
    hf_fixture_model(&c, &l);
    float *p = some_params(&l), *q = calloc(l.total, 4);
    char dir[] = "/tmp/fuyou-hfs-XXXXXX", path[256], latest[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    CkptSaveOptions o = {.max_shard_bytes = 8000};
    Err e;
    TrainState s = {.step = 2}, got;
    ck_assert_int_eq(ckpt_save_with(dir, &c, &l, p, p, p, &s, &o, &e), 0);
    s.step = 4;
    p[0] = 42; /* step 4's weights differ */
    ck_assert_int_eq(ckpt_save_with(dir, &c, &l, p, p, p, &s, &o, &e), 0);
    snprintf(path, sizeof path, "%s/step-00000004/model-00002-of-%05d.safetensors", dir,
             hf_shard_count(&l, DTYPE_FP32, 8000));
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_msg(ckpt_load(dir, &c, &l, q, q, q, &got, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(got.step, 2);
    ck_assert(q[0] != 42);
    snprintf(latest, sizeof latest, "%s/latest", dir);
    ck_assert_int_eq(unlink(latest), 0);
    ck_assert_msg(ckpt_load(dir, &c, &l, q, q, q, &got, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(got.step, 2);
    ck_assert(q[0] != 42);
    FILE *f = fopen(latest, "w");
    fputs("step-00000004\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/step-00000004/%s", dir, HF_INDEX_FILE);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_msg(ckpt_load(dir, &c, &l, q, q, q, &got, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(got.step, 2);
    free(p), free(q);
    layout_free(&l);
    tu_rm_tree(dir);
}
END_TEST

/* GPT-2 sharded: the Conv1D weights (in, out) in their shards, back as ours bit for bit. */
START_TEST(gpt2_sharded_round_trip)
{
    ModelConfig c = *model_preset_find("gpt2-tiny");
    c.tied = false;
    ModelLayout l;
    ck_assert_int_eq(layout_init(&l, &c), 0);
    float *p = some_params(&l), *m = some_params(&l), *q = calloc(l.total, 4);
    char dir[] = "/tmp/fuyou-hfs-XXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    CkptSaveOptions o = {.max_shard_bytes = 300000};
    TrainState s = {.step = 1}, got;
    Err e;
    ck_assert_msg(ckpt_save_with(dir, &c, &l, p, m, m, &s, &o, &e) == 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/step-00000001/%s", dir, HF_INDEX_FILE);
    json_t *index = hf_read_json(path);
    const char *shard = json_string_value(json_object_get(json_object_get(index, "weight_map"),
                                                          "transformer.h.1.attn.c_attn.weight"));
    ck_assert_ptr_nonnull(shard);
    snprintf(path, sizeof path, "%s/step-00000001/%s", dir, shard);
    json_decref(index);
    StFile st;
    ck_assert_int_eq(st_open(&st, path, &e), 0);
    const StTensor *t = st_find(&st, "transformer.h.1.attn.c_attn.weight");
    ck_assert_int_eq(t->shape[0], 128);
    ck_assert_int_eq(t->shape[1], 384);
    float *raw = malloc(128 * 384 * 4);
    ck_assert_int_eq(st_read_f32(&st, t, raw, &e), 0);
    const ParamTensor *pt = layout_find(&l, "h.1.attn.c_attn.weight");
    ck_assert(raw[2 * 384 + 5] == p[pt->offset + 5 * 128 + 2]); /* (out 5, in 2) at [2][5] */
    free(raw);
    st_close(&st);
    ck_assert_msg(ckpt_load(dir, &c, &l, q, q, q, &got, &e) == 0, "%s", e.msg);
    ck_assert_msg(ckpt_load_model(path, &c, &l, q, &e) == -EINVAL, "one shard is not a model");
    snprintf(path, sizeof path, "%s/step-00000001", dir);
    ck_assert_msg(ckpt_load_model(path, &c, &l, q, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(p, q, l.total * 4), 0);
    free(p), free(m), free(q);
    layout_free(&l);
    tu_rm_tree(dir);
}
END_TEST

/* Tokens below the fixture's vocabulary of 64, as raw uint16, at path (capacity 64). */
static void small_vocab_data(char *path)
{
    strcpy(path, "/tmp/fuyou-hfs-data-XXXXXX.bin"); /* raw uint16 tokens (data.h) */
    int fd = mkstemps(path, 4);
    ck_assert_int_ge(fd, 0);
    uint16_t b[4096];
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        b[i] = (uint16_t)((i * 7 + i / 13) % 64);
    ck_assert_int_eq(write(fd, b, sizeof b), (ssize_t)sizeof b);
    close(fd);
}

/* fuyou-run's in-memory trainer started from the fixture's folder: with lr 0 its checkpoint
 * holds the fixture's weights bit for bit, a LlamaConfig and the tokenizer files; resumed,
 * it continues with the losses of an uninterrupted run. */
START_TEST(trainer_from_the_fixture_folder)
{
    ModelConfig c;
    ModelLayout l;
    float *want = hf_fixture_params(&c, &l);
    char data[64], dir[] = "/tmp/fuyou-hfs-XXXXXX", path[256], src[1100];
    small_vocab_data(data);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    TrainOptions o = {.backend = &backend_cpu, .data_paths = {data}, .n_data = 1,
                      .seqs_per_step = 2, .seq = 16, .steps = 1, .lr = 0, .beta1 = 0.9f, .beta2 = 0.95f,
                      .eps = 1e-8f, .clip = 1.0f, .seed = 5, .subgroup_blocks = 1,
                      .tail_blocks = 1, .threads = 1, .init_from = hf_fixture(),
                      .save_dir = dir, .model = c};
    TrainResult r;
    Err e;
    ck_assert_msg(trainer_run(&o, &r, &e) == 0, "%s", e.msg);
    free(r.losses);
    snprintf(path, sizeof path, "%s/step-00000001", dir);
    float *got;
    ck_assert_msg(hf_load_flat(path, &c, &l, &got, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(want, got, l.total * 4), 0);
    free(got);
    snprintf(path, sizeof path, "%s/step-00000001/config.json", dir);
    json_t *cfg = hf_read_json(path);
    ck_assert_str_eq(str_of(cfg, "model_type"), "llama");
    json_decref(cfg);
    snprintf(path, sizeof path, "%s/step-00000001/tokenizer_config.json", dir);
    snprintf(src, sizeof src, "%s/tokenizer_config.json", hf_fixture());
    expect_same_file(src, path);
    /* 4 steps at once, and 2 then 2 more resumed: the same losses (in the warmup, where the
     * learning rate does not depend on --steps) */
    TrainResult full, first, rest;
    o.lr = 1e-2f, o.warmup = 10, o.steps = 4, o.save_dir = NULL;
    ck_assert_msg(trainer_run(&o, &full, &e) == 0, "%s", e.msg);
    o.steps = 2, o.save_dir = dir, o.overwrite = true;
    ck_assert_msg(trainer_run(&o, &first, &e) == 0, "%s", e.msg);
    o.steps = 4, o.init_from = NULL, o.resume_dir = dir, o.overwrite = false;
    ck_assert_msg(trainer_run(&o, &rest, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rest.n_losses, 2);
    ck_assert(full.losses[3] != full.losses[0]); /* it trains */
    for (int i = 0; i < 2; i++) {
        ck_assert(full.losses[i] == first.losses[i]);
        ck_assert(full.losses[2 + i] == rest.losses[i]);
    }
    snprintf(path, sizeof path, "%s/step-00000004/generation_config.json", dir);
    snprintf(src, sizeof src, "%s/generation_config.json", hf_fixture());
    expect_same_file(src, path); /* carried on by the resumed run */
    free(full.losses), free(first.losses), free(rest.losses), free(want);
    layout_free(&l);
    unlink(data);
    tu_rm_tree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hf_save");
    TCase *tc = tcase_create("hf_save");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, llama_config_reads_back);
    tcase_add_test(tc, token_ids_from_the_source);
    tcase_add_test(tc, shards_cut_as_huggingface_does);
    tcase_add_test(tc, sharded_checkpoint_round_trip);
    tcase_add_test(tc, resume_and_a_step_with_a_shard_missing);
    tcase_add_test(tc, gpt2_sharded_round_trip);
    tcase_add_test(tc, trainer_from_the_fixture_folder);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
