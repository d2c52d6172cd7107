/* Check suite for exec/train/hf_folder.h: the tiny sharded Llama fixture (tests/data/
 * llama-tiny-hf, BF16) loads value for value from its folder, its index and its config.json;
 * the sink gets every tensor once, in the files' order, and can stop the load; F32 and F16
 * files convert; a folder's config.json of another model is refused naming the field and both
 * values; a shard missing, a tensor listed but absent, unlisted, missing, extra, of another shape
 * or dtype, a malformed index, a folder without weights and a tied model's differing lm_head
 * are each one error naming the tensor and the file. */
#include <errno.h>
#include <sys/stat.h>

#include "adam.h"
#include "hf_save.h"
#include "hf_testutil.h"
#include "safetensors.h"

/* Every tensor of p (layout l) holds the fixture's values. */
static void expect_fixture_values(const ModelLayout *l, const float *p)
{
    for (int k = 0; k < l->n; k++) {
        const ParamTensor *t = &l->t[k];
        for (size_t i = 0; i < t->numel; i++)
            ck_assert_msg(p[t->offset + i] == hf_fixture_value(t->name, i),
                          "%s[%zu] is %g, the fixture's %g", t->name, i, p[t->offset + i],
                          hf_fixture_value(t->name, i));
    }
}

START_TEST(fixture_loads_from_folder_index_and_config)
{
    ModelConfig c;
    ModelLayout l;
    hf_fixture_model(&c, &l);
    ck_assert_int_eq(c.arch, ARCH_LLAMA);
    ck_assert_int_eq(c.n_layer, 2);
    ck_assert_int_eq(c.d_model, 16);
    ck_assert_int_eq(c.n_head, 4);
    ck_assert_int_eq(model_kv_heads(&c), 2);
    ck_assert_int_eq(c.d_ff, 32);
    ck_assert_int_eq(c.vocab, 64);
    ck_assert(!c.tied && !c.qkv_bias);
    char paths[3][1100];
    snprintf(paths[0], sizeof paths[0], "%s", hf_fixture());
    snprintf(paths[1], sizeof paths[1], "%s/%s", hf_fixture(), HF_INDEX_FILE);
    snprintf(paths[2], sizeof paths[2], "%s/config.json", hf_fixture());
    for (int i = 0; i < 3; i++) {
        float *p;
        Err e;
        ck_assert_msg(hf_load_flat(paths[i], &c, &l, &p, &e) == 0, "%s: %s", paths[i], e.msg);
        expect_fixture_values(&l, p);
        free(p);
    }
    layout_free(&l);
}
END_TEST

/* A sink that records the order it was given the tensors in, and fails at tensor fail_at. */
typedef struct Recorder {
    const ModelLayout *l;
    float *room;        /* one tensor's worth, reused: the sink owns where values go */
    float *params;      /* where done copies them, to check */
    int order[64], n, fail_at;
    bool no_room;
} Recorder;

static float *rec_dest(void *user, const ParamTensor *t)
{
    Recorder *r = user;
    (void)t;
    return r->no_room ? NULL : r->room;
}

static int rec_done(void *user, const ParamTensor *t, float *values, Err *e)
{
    Recorder *r = user;
    ck_assert_ptr_eq(values, r->room);
    ck_assert_int_lt(r->n, 64);
    if (r->n == r->fail_at)
        return err_set(e, -ENOSPC, "sink full at %s", t->name);
    memcpy(r->params + t->offset, values, t->numel * sizeof *values);
    r->order[r->n++] = (int)(t - r->l->t);
    return 0;
}

/* A recorder for layout l: room for its largest tensor, a flat buffer for all of them. */
static Recorder recorder(const ModelLayout *l)
{
    size_t biggest = 0;
    for (int k = 0; k < l->n; k++)
        biggest = l->t[k].numel > biggest ? l->t[k].numel : biggest;
    return (Recorder){.l = l, .room = malloc(biggest * 4), .params = calloc(l->total, 4),
                      .fail_at = -1};
}

/* The index's tensors by shard, then by offset in the shard (the fixture's: by name). */
static int cmp_file_order(const void *a, const void *b, void *map)
{
    const ParamTensor *x = a, *y = b;
    int sx = strcmp(json_string_value(json_object_get(map, x->name)),
                    json_string_value(json_object_get(map, y->name)));
    return sx ? sx : strcmp(x->name, y->name);
}

START_TEST(sink_gets_each_tensor_once_in_file_order)
{
    ModelConfig c;
    ModelLayout l;
    hf_fixture_model(&c, &l);
    Recorder r = recorder(&l);
    HfSink sink = {rec_dest, rec_done, &r};
    Err e;
    ck_assert_msg(hf_load(hf_fixture(), &c, &l, &sink, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.n, l.n);
    expect_fixture_values(&l, r.params);
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", hf_fixture(), HF_INDEX_FILE);
    json_t *index = hf_read_json(path), *map = json_object_get(index, "weight_map");
    ParamTensor *want = malloc((size_t)l.n * sizeof *want);
    memcpy(want, l.t, (size_t)l.n * sizeof *want);
    qsort_r(want, (size_t)l.n, sizeof *want, cmp_file_order, map);
    for (int k = 0; k < l.n; k++)
        ck_assert_str_eq(l.t[r.order[k]].name, want[k].name);
    ck_assert_str_eq(l.t[r.order[0]].name, "model.embed_tokens.weight");
    free(want);
    json_decref(index);
    /* the sink stops the load with its own error; a sink without room is -ENOMEM */
    r.n = 0, r.fail_at = 3;
    ck_assert_int_eq(hf_load(hf_fixture(), &c, &l, &sink, &e), -ENOSPC);
    tu_assert_contains(e.msg, "sink full at");
    ck_assert_int_eq(r.n, 3);
    r.no_room = true;
    ck_assert_int_eq(hf_load(hf_fixture(), &c, &l, &sink, &e), -ENOMEM);
    tu_assert_contains(e.msg, "model.embed_tokens.weight");
    free(r.room), free(r.params);
    layout_free(&l);
}
END_TEST

/* A reader read by values, in ranges that cut tensors anywhere (the out-of-core loader's
 * staging ranges: a range of 16 M values had cut an 8B model's 525 M-value embedding, whose
 * tail was then never read), gives the values hf_load gives, in every range size; a range
 * out of order is refused. */
START_TEST(reader_reads_values)
{
    ModelConfig c;
    ModelLayout l;
    float *want = hf_fixture_params(&c, &l);
    float *got = malloc(l.total * sizeof *got);
    ck_assert_ptr_nonnull(got);
    static const size_t parts[] = {1, 7, 100, 1000, 1 << 20};
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
        Err e;
        HfReader *hr;
        ck_assert_msg(hf_reader_open(&hr, hf_fixture(), &c, &l, &e) == 0, "%s", e.msg);
        memset(got, 0xff, l.total * sizeof *got);
        for (size_t at = 0; at < l.total; at += parts[k]) {
            size_t n = l.total - at < parts[k] ? l.total - at : parts[k];
            ck_assert_msg(hf_reader_read_values(hr, at, n, got + at, &e) == 0, "%zu at %zu: %s",
                          parts[k], at, e.msg);
        }
        ck_assert_mem_eq(got, want, l.total * sizeof *got);
        ck_assert_int_eq(hf_reader_read_values(hr, 3, 1, got, &e), -EINVAL);
        tu_assert_contains(e.msg, "expected");
        hf_reader_close(hr);
    }
    free(got), free(want);
    layout_free(&l);
    /* GPT-2's Conv1D weights, transposed in the files, cut too */
    ModelConfig g = *model_preset_find("gpt2-tiny");
    ck_assert_int_eq(layout_init(&l, &g), 0);
    want = malloc(l.total * sizeof *want), got = malloc(l.total * sizeof *got);
    ck_assert(want && got);
    for (size_t i = 0; i < l.total; i++)
        want[i] = (float)((int)(i * 2654435761u % 1000) - 500) / 256.0f;
    char dir[] = "/tmp/fuyou-values-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    Err e;
    ck_assert_msg(hf_save_weights(dir, &l, want, DTYPE_FP32, 0, &e) == 0, "%s", e.msg);
    HfReader *hr;
    ck_assert_msg(hf_reader_open_weights(&hr, dir, &g, &l, &e) == 0, "%s", e.msg);
    for (size_t at = 0; at < l.total; at += 5000) {
        size_t n = l.total - at < 5000 ? l.total - at : 5000;
        ck_assert_msg(hf_reader_read_values(hr, at, n, got + at, &e) == 0, "%s", e.msg);
    }
    ck_assert_mem_eq(got, want, l.total * sizeof *got);
    hf_reader_close(hr);
    tu_rm_tree(dir);
    free(got), free(want);
    layout_free(&l);
}
END_TEST

/* A reader read range by range (each block's, then the edges') gives each tensor once, only
 * those whose offsets lie in the range, and the values hf_load gives. */
START_TEST(reader_reads_ranges)
{
    ModelConfig c;
    ModelLayout l;
    hf_fixture_model(&c, &l);
    Recorder r = recorder(&l);
    HfSink sink = {rec_dest, rec_done, &r};
    Err e;
    HfReader *hr;
    ck_assert_msg(hf_reader_open(&hr, hf_fixture(), &c, &l, &e) == 0, "%s", e.msg);
    size_t edges = (size_t)model_embed_params(&c), bp = (size_t)model_block_params(&c);
    size_t seen = 0;
    for (int b = c.n_layer - 1; b >= -1; b--) {
        size_t begin = b < 0 ? 0 : edges + (size_t)b * bp, end = b < 0 ? edges : begin + bp;
        int n0 = r.n;
        ck_assert_msg(hf_reader_read(hr, begin, end, &sink, &e) == 0, "%s", e.msg);
        ck_assert_int_gt(r.n, n0);
        for (int k = n0; k < r.n; k++) {
            const ParamTensor *t = &l.t[r.order[k]];
            ck_assert_uint_ge(t->offset, begin);
            ck_assert_uint_le(t->offset + t->numel, end);
            seen += t->numel;
        }
    }
    ck_assert_int_eq(r.n, l.n);
    ck_assert_uint_eq(seen, l.total);
    expect_fixture_values(&l, r.params);
    hf_reader_close(hr);
    /* the checks come at open, before any data: a config of another model */
    c.n_layer++;
    ModelLayout l3;
    layout_init(&l3, &c);
    ck_assert_int_eq(hf_reader_open(&hr, hf_fixture(), &c, &l3, &e), -EINVAL);
    tu_assert_contains(e.msg, "num_hidden_layers");
    hf_reader_close(hr);
    layout_free(&l3);
    free(r.room), free(r.params);
    layout_free(&l);
}
END_TEST

/* The folder's config.json against the run's model: each field that differs, by the config's
 * name for it, with both values. */
START_TEST(config_mismatch_names_the_field)
{
    ModelConfig fx;
    ModelLayout lf;
    hf_fixture_model(&fx, &lf);
    layout_free(&lf);
    struct { const char *field; int delta; const char *want; } cases[] = {
        {"layers", 1, "num_hidden_layers is 2, this run's llama-tiny-hf has 3"},
        {"hidden", 16, "hidden_size is 16, this run's llama-tiny-hf has 32"},
        {"heads", -2, "num_attention_heads is 4, this run's llama-tiny-hf has 2"},
        {"kv_heads", 2, "num_key_value_heads is 2, this run's llama-tiny-hf has 4"},
        {"ffn", 32, "intermediate_size is 32, this run's llama-tiny-hf has 64"},
        {"vocab", 64, "vocab_size is 64, this run's llama-tiny-hf has 128"},
        {"tied", 1, "tie_word_embeddings is false, this run's llama-tiny-hf has true"},
        {"qkv_bias", 1, "q/k/v biases (model_type qwen2) is false, this run's llama-tiny-hf has "
                        "true"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ModelConfig c = fx;
        int *f = !strcmp(cases[i].field, "layers") ? &c.n_layer
               : !strcmp(cases[i].field, "hidden") ? &c.d_model
               : !strcmp(cases[i].field, "heads") ? &c.n_head
               : !strcmp(cases[i].field, "kv_heads") ? &c.n_kv_head
               : !strcmp(cases[i].field, "ffn") ? &c.d_ff
               : !strcmp(cases[i].field, "vocab") ? &c.vocab : NULL;
        if (f)
            *f += cases[i].delta;
        c.tied = !strcmp(cases[i].field, "tied");
        c.qkv_bias = !strcmp(cases[i].field, "qkv_bias");
        ModelLayout l;
        ck_assert_int_eq(layout_init(&l, &c), 0);
        Err e;
        ck_assert_int_eq(hf_load_flat(hf_fixture(), &c, &l, NULL, &e), -EINVAL);
        tu_assert_contains(e.msg, "llama-tiny-hf/config.json: ");
        tu_assert_contains(e.msg, cases[i].want);
        layout_free(&l);
    }
    ModelConfig g = *model_preset_find("gpt2-tiny");
    ModelLayout l;
    ck_assert_int_eq(layout_init(&l, &g), 0);
    Err e;
    ck_assert_int_eq(hf_load_flat(hf_fixture(), &g, &l, NULL, &e), -EINVAL);
    tu_assert_contains(e.msg, "a model of the llama family, this run's gpt2-tiny is gpt2");
    layout_free(&l);
}
END_TEST

/* Sets (value not NULL) or removes key in the weight_map of dir's index. */
static void edit_index(const char *dir, const char *key, const char *value)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, HF_INDEX_FILE);
    json_t *root = hf_read_json(path), *map = json_object_get(root, "weight_map");
    if (value)
        json_object_set_new(map, key, json_string(value));
    else
        json_object_del(map, key);
    ck_assert_int_eq(json_dump_file(root, path, JSON_INDENT(2)), 0);
    json_decref(root);
}

/* Replaces from with to in the JSON header of the safetensors file at path, the data kept. */
static void edit_header(const char *path, const char *from, const char *to)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    uint64_t hl;
    ck_assert_int_eq(fread(&hl, 8, 1, f), 1);
    char *text = calloc(hl + 1, 1), *out = calloc(hl + strlen(to) + 16, 1);
    if (!text || !out)
        abort();
    ck_assert_uint_eq(fread(text, 1, hl, f), hl);
    struct stat st;
    fstat(fileno(f), &st);
    size_t n = (size_t)st.st_size - 8 - hl;
    char *data = malloc(n + 1);
    ck_assert_uint_eq(fread(data, 1, n, f), n);
    fclose(f);
    char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "%s: no %s in the header", path, from);
    sprintf(out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    size_t len = strlen(out);
    while (len % 8)
        out[len++] = ' ';
    f = fopen(path, "wb");
    hl = len;
    fwrite(&hl, 8, 1, f);
    fwrite(out, 1, len, f);
    fwrite(data, 1, n, f);
    fclose(f);
    free(text), free(out), free(data);
}

/* Loads dir as the model (c with the changes a test made) and expects rc and the message. */
static void expect_refusal(const char *dir, const ModelConfig *c, int rc, const char *file,
                           const char *want)
{
    ModelLayout l;
    ck_assert_int_eq(layout_init(&l, c), 0);
    Err e;
    ck_assert_int_eq(hf_load_flat(dir, c, &l, NULL, &e), rc);
    tu_assert_contains(e.msg, file);
    tu_assert_contains(e.msg, want);
    layout_free(&l);
}

START_TEST(index_and_shard_refusals)
{
    ModelConfig fx;
    ModelLayout lf;
    hf_fixture_model(&fx, &lf);
    layout_free(&lf);
    const char *s1 = "model-00001-of-00002.safetensors", *s2 = "model-00002-of-00002.safetensors";
    char dir[64], path[256];
    /* a shard missing */
    hf_fixture_copy(dir);
    snprintf(path, sizeof path, "%s/%s", dir, s2);
    ck_assert_int_eq(unlink(path), 0);
    expect_refusal(dir, &fx, -ENOENT, s2, ": shard missing (");
    tu_rm_tree(dir);
    /* a tensor the index lists in a shard that lacks it */
    hf_fixture_copy(dir);
    edit_index(dir, "model.norm.weight", s1);
    expect_refusal(dir, &fx, -EINVAL, s1, "tensor model.norm.weight, which");
    expect_refusal(dir, &fx, -EINVAL, HF_INDEX_FILE, "lists in it, is absent");
    /* a tensor a shard holds and the index does not list */
    edit_index(dir, "model.norm.weight", NULL);
    expect_refusal(dir, &fx, -EINVAL, s2, "holds tensor model.norm.weight, which");
    expect_refusal(dir, &fx, -EINVAL, HF_INDEX_FILE, "puts in no shard");
    tu_rm_tree(dir);
    /* without config.json, models other than the fixture's reach the tensors: a tensor missing
     * (q/k/v biases), extra (a shallower model), of another shape (a wider MLP) */
    hf_fixture_copy(dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    ck_assert_int_eq(unlink(path), 0);
    ModelConfig c = fx;
    c.qkv_bias = true;
    expect_refusal(dir, &c, -EINVAL, HF_INDEX_FILE,
                   ": tensor model.layers.0.self_attn.q_proj.bias is missing");
    c = fx, c.n_layer = 1;
    expect_refusal(dir, &c, -EINVAL, HF_INDEX_FILE,
                   ": tensor model.layers.1.input_layernorm.weight has no place in");
    c = fx, c.d_ff = 48;
    expect_refusal(dir, &c, -EINVAL, s1, ": tensor model.layers.0.mlp.gate_proj.weight has "
                   "shape [32, 16], llama-tiny-hf wants [48, 16]");
    /* a dtype that is not a float's; an extra tensor in a shard */
    snprintf(path, sizeof path, "%s/%s", dir, s2);
    edit_header(path, "\"model.norm.weight\":{\"dtype\":\"BF16\"",
                "\"model.norm.weight\":{\"dtype\":\"I16\"");
    expect_refusal(dir, &fx, -EINVAL, s2, "tensor model.norm.weight is I16; F32, F16 or BF16 "
                   "expected");
    edit_header(path, "\"model.norm.weight\"", "\"model.norm.bias\"");
    expect_refusal(dir, &fx, -EINVAL, s2, "tensor model.norm.bias has no place in");
    tu_rm_tree(dir);
}
END_TEST

/* An index whose weight_map is missing, not JSON, or names a shard outside its folder; a folder
 * without weights. */
START_TEST(malformed_index_and_empty_folder)
{
    ModelConfig c;
    ModelLayout l;
    hf_fixture_model(&c, &l);
    layout_free(&l);
    char dir[64], path[256];
    hf_fixture_copy(dir);
    edit_index(dir, "model.norm.weight", "../elsewhere/model-00002-of-00002.safetensors");
    expect_refusal(dir, &c, -EINVAL, HF_INDEX_FILE, "weight_map: tensor model.norm.weight: "
                   "expected the name of a .safetensors file beside the index");
    edit_index(dir, "model.norm.weight", "pytorch_model-00002-of-00002.bin");
    expect_refusal(dir, &c, -EINVAL, HF_INDEX_FILE, "got \"pytorch_model-00002-of-00002.bin\"");
    snprintf(path, sizeof path, "%s/%s", dir, HF_INDEX_FILE);
    FILE *f = fopen(path, "w");
    fputs("{\"metadata\": {}}", f);
    fclose(f);
    expect_refusal(dir, &c, -EINVAL, HF_INDEX_FILE, "no \"weight_map\"");
    f = fopen(path, "w");
    fputs("{\"weight_map\": {", f);
    fclose(f);
    expect_refusal(dir, &c, -EINVAL, HF_INDEX_FILE, "not JSON");
    ck_assert_int_eq(unlink(path), 0);
    expect_refusal(dir, &c, -ENOENT, dir, "no model.safetensors or "
                   "model.safetensors.index.json in the folder");
    tu_rm_tree(dir);
}
END_TEST

/* Writes p (layout l) as one safetensors file of dtype F32, F16 or F64, Hugging Face shapes. */
static void write_raw(const char *path, const ModelLayout *l, const float *p, const char *dtype)
{
    size_t es = !strcmp(dtype, "F16") ? 2 : !strcmp(dtype, "F64") ? 8 : 4, at = 0;
    json_t *h = json_object();
    for (int k = 0; k < l->n; k++) {
        int64_t shape[2];
        int nd = hf_file_shape(&l->t[k], shape);
        json_t *sh = nd == 1 ? json_pack("[I]", shape[0]) : json_pack("[I, I]", shape[0], shape[1]);
        json_object_set_new(h, l->t[k].name, json_pack("{s:s, s:o, s:[I, I]}", "dtype", dtype,
                                                       "shape", sh, "data_offsets", (json_int_t)at,
                                                       (json_int_t)(at + es * l->t[k].numel)));
        at += es * l->t[k].numel;
    }
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    size_t len = strlen(text);
    uint64_t hl = (len + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    fwrite(&hl, 8, 1, f);
    fwrite(text, 1, len, f);
    for (size_t i = len; i < hl; i++)
        fputc(' ', f);
    float *t = malloc(l->total * 4);
    for (int k = 0; k < l->n; k++) {
        const ParamTensor *pt = &l->t[k];
        const float *src = p + pt->offset;
        if (pt->conv1d) {
            hf_transpose(t, src, pt->rows, pt->cols);
            src = t;
        }
        for (size_t i = 0; i < pt->numel; i++) {
            uint16_t h16 = adam_f32_to_f16(src[i]);
            double d = src[i];
            fwrite(es == 2 ? (void *)&h16 : es == 8 ? (void *)&d : (void *)&src[i], es, 1, f);
        }
    }
    fclose(f);
    free(t);
    free(text);
    json_decref(h);
}

/* The fixture's values written as F32 and F16 read back the same; F64 is refused. */
START_TEST(f32_and_f16_files_convert)
{
    ModelConfig c;
    ModelLayout l;
    float *p = hf_fixture_params(&c, &l), *q;
    Err e;
    char dir[] = "/tmp/fuyou-hfd-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    const char *dtypes[] = {"F32", "F16"};
    for (int i = 0; i < 2; i++) {
        write_raw(path, &l, p, dtypes[i]);
        ck_assert_msg(hf_load_flat(path, &c, &l, &q, &e) == 0, "%s: %s", dtypes[i], e.msg);
        ck_assert_int_eq(memcmp(p, q, l.total * 4), 0);
        free(q);
    }
    write_raw(path, &l, p, "F64");
    ck_assert_int_eq(hf_load_flat(path, &c, &l, NULL, &e), -EINVAL);
    tu_assert_contains(e.msg, "weights.safetensors: tensor ");
    tu_assert_contains(e.msg, " is F64; F32, F16 or BF16 expected");
    free(p);
    layout_free(&l);
    tu_rm_tree(dir);
}
END_TEST

/* A tied Llama takes a file's lm_head.weight only when it is model.embed_tokens.weight bit for
 * bit (a lone file: no config.json to refuse it first). */
START_TEST(tied_llama_and_a_file_head)
{
    ModelConfig c;
    ModelLayout l, lt;
    float *p = hf_fixture_params(&c, &l), *q;
    ModelConfig tied = c;
    tied.tied = true;
    ck_assert_int_eq(layout_init(&lt, &tied), 0);
    Err e;
    char dir[] = "/tmp/fuyou-hfd-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_raw(path, &l, p, "F32");
    ck_assert_int_eq(hf_load_flat(path, &tied, &lt, NULL, &e), -EINVAL);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, "lm_head.weight differs from model.embed_tokens.weight");
    const ParamTensor *emb = layout_find(&l, "model.embed_tokens.weight");
    const ParamTensor *head = layout_find(&l, "lm_head.weight");
    memcpy(p + head->offset, p + emb->offset, emb->numel * 4);
    write_raw(path, &l, p, "F32");
    ck_assert_msg(hf_load_flat(path, &tied, &lt, &q, &e) == 0, "%s", e.msg);
    for (int k = 0; k < lt.n; k++) {
        const ParamTensor *t = layout_find(&l, lt.t[k].name);
        ck_assert_int_eq(memcmp(q + lt.t[k].offset, p + t->offset, t->numel * 4), 0);
    }
    free(p), free(q);
    layout_free(&l), layout_free(&lt);
    tu_rm_tree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hf_folder");
    TCase *tc = tcase_create("hf_folder");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fixture_loads_from_folder_index_and_config);
    tcase_add_test(tc, sink_gets_each_tensor_once_in_file_order);
    tcase_add_test(tc, reader_reads_ranges);
    tcase_add_test(tc, reader_reads_values);
    tcase_add_test(tc, config_mismatch_names_the_field);
    tcase_add_test(tc, index_and_shard_refusals);
    tcase_add_test(tc, malformed_index_and_empty_folder);
    tcase_add_test(tc, f32_and_f16_files_convert);
    tcase_add_test(tc, tied_llama_and_a_file_head);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
