/* Check suite for model/model: presets, parameter counts, the model ini. */
#include <errno.h>
#include <math.h>

#include "model.h"
#include "testutil.h"

static double rel(double a, double b)
{
    return fabs(a - b) / fabs(b);
}

START_TEST(gpt2_124m_params)
{
    const ModelConfig *c = model_preset_find("gpt2-124m");
    ck_assert_ptr_nonnull(c);
    /* The released checkpoint's tensors add up to exactly this (LM head tied). */
    ck_assert_int_eq(model_param_count(c), 124439808);
    ck_assert_double_le(rel((double)model_param_count(c), 124.4e6), 0.001);
}
END_TEST

START_TEST(gpt3_175b_params)
{
    const ModelConfig *c = model_preset_find("GPT3-175B");
    ck_assert_ptr_nonnull(c);
    ck_assert_double_le(rel((double)model_param_count(c), 174.6e9), 0.005);
    ck_assert_int_eq(model_block_params(c), 12LL * 12288 * 12288 + 13 * 12288);
}
END_TEST

/* The GPT-3 paper's table 2.1 names; the counts of our shapes land within 6% of each (the paper
 * rounds, and XL/13B rows are corrected as model.c explains). */
START_TEST(gpt3_family_params)
{
    static const struct { const char *name; double paper; } rows[] = {
        {"gpt3-125m", 125e6}, {"gpt3-350m", 350e6}, {"gpt3-760m", 760e6}, {"gpt3-1.3b", 1.3e9},
        {"gpt3-2.7b", 2.7e9}, {"gpt3-6.7b", 6.7e9}, {"gpt3-13b", 13e9}, {"gpt3-175b", 175e9},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const ModelConfig *c = model_preset_find(rows[i].name);
        ck_assert_ptr_nonnull(c);
        double r = rel((double)model_param_count(c), rows[i].paper);
        ck_assert_msg(r < 0.06, "%s: %lld vs %g", rows[i].name,
                      (long long)model_param_count(c), rows[i].paper);
    }
}
END_TEST

START_TEST(seventy_b_shape)
{
    const ModelConfig *c = model_preset_find("gpt-70b");
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->n_layer, 80);
    ck_assert_int_eq(c->d_model, 8192);
    ck_assert_int_eq(c->n_head, 64);
}
END_TEST

/* The Llama family's presets have exactly the published parameter counts (each model's
 * safetensors total on its Hugging Face card): GQA's k/v widths, SwiGLU's three matrices,
 * Qwen2's q/k/v biases, tied and untied heads, no position embedding. */
START_TEST(llama_family_params)
{
    static const struct { const char *name; int64_t params; } rows[] = {
        {"llama-3.2-1b", 1235814400},     {"llama-3.2-3b", 3212749824},
        {"llama-3.1-8b", 8030261248},     {"llama-3.1-70b", 70553706496},
        {"llama-3.1-405b", 405853388800}, {"qwen2.5-7b", 7615616512},
        {"qwen2.5-72b", 72706203648},     {"mistral-large-2", 122610069504},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const ModelConfig *c = model_preset_find(rows[i].name);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(c->arch, ARCH_LLAMA);
        Err e;
        ck_assert_msg(model_validate(c, &e) == 0, "%s", e.msg);
        ck_assert_msg(model_param_count(c) == rows[i].params, "%s: %lld, published %lld",
                      rows[i].name, (long long)model_param_count(c), (long long)rows[i].params);
    }
    /* Llama 3.1 8B's block by hand: 2 gains, q 4096 x 4096, k and v 1024 x 4096, o, 3 of
     * 14336 x 4096 */
    const ModelConfig *c = model_preset_find("llama-3.1-8b");
    ck_assert_int_eq(model_kv_heads(c), 8);
    ck_assert_int_eq(model_block_params(c), 2 * 4096 + 2 * 4096LL * 4096 + 2 * 1024LL * 4096 +
                                                3 * 14336LL * 4096);
    ck_assert_double_eq(model_rope_theta(c), 500000);
    ck_assert_double_eq(c->rope_scaling.factor, 8);
    /* GPT-2's defaults where a config leaves them out */
    const ModelConfig *g = model_preset_find("gpt2-124m");
    ck_assert_int_eq(model_kv_heads(g), 12);
    ck_assert_double_eq(model_norm_eps(g), 1e-5);
}
END_TEST

START_TEST(unknown_preset)
{
    ModelConfig c;
    Err e;
    ck_assert_int_eq(model_load("gpt5", &c, &e), -ENOENT);
    tu_assert_contains(e.msg, "unknown model 'gpt5'");
    tu_assert_contains(e.msg, "gpt3-175b");
}
END_TEST

START_TEST(model_ini_loads)
{
    char path[64];
    tu_temp_file(path, sizeof path, ".ini",
                 "# a custom shape\n[model]\nname = mini\nlayers = 2\nhidden = 64\nheads = 4\n"
                 "vocab = 256\nmax_seq = 32\ntied = false ; its own head\ndtype = fp16\n");
    ModelConfig c;
    Err e;
    int rc = model_load(path, &c, &e);
    unlink(path);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_str_eq(c.name, "mini");
    ck_assert_int_eq(c.d_ff, 256); /* defaults to 4h */
    ck_assert(!c.tied);
    ck_assert_int_eq(c.dtype, DTYPE_FP16);
    /* untied: wte + head + wpe + lnf + 2 blocks */
    int64_t block = 12 * 64 * 64 + 13 * 64;
    ck_assert_int_eq(model_param_count(&c), 2 * 256 * 64 + 32 * 64 + 2 * 64 + 2 * block);
}
END_TEST

/* arch = llama: kv heads, biases, the rotary base and scaling, the norm's epsilon; its head
 * untied unless the ini says otherwise */
START_TEST(model_ini_llama)
{
    char path[64];
    tu_temp_file(path, sizeof path, ".ini",
                 "[model]\narch = llama\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\n"
                 "ffn = 176\nvocab = 256\nmax_seq = 128\nqkv_bias = true\nrope_theta = 500000\n"
                 "rope_scaling_factor = 8\nrope_low_freq_factor = 1\nrope_high_freq_factor = 4\n"
                 "rope_original_max_seq = 64\nnorm_eps = 1e-6\n");
    ModelConfig c;
    Err e;
    int rc = model_load(path, &c, &e);
    unlink(path);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_int_eq(c.arch, ARCH_LLAMA);
    ck_assert_int_eq(model_kv_heads(&c), 2);
    ck_assert(!c.tied && c.qkv_bias);
    ck_assert_double_eq(c.rope_theta, 500000);
    ck_assert_double_eq(c.norm_eps, 1e-6);
    ck_assert_int_eq(c.rope_scaling.original_max_seq, 64);
    /* a block: 2 gains, qkv (4 + 2 x 2) x 16 wide with its bias, o, gate, up, down; the edges:
     * the embedding, the final gain and the untied head */
    int64_t block = 2 * 64 + 128 * 64 + 128 + 64 * 64 + 3 * 176 * 64;
    ck_assert_int_eq(model_param_count(&c), 2 * block + 256 * 64 + 64 + 256 * 64);
}
END_TEST

/* Each bad model ini gives -EINVAL (or -ENOENT) and one message naming where and what. */
static void expect_bad(const char *text, const char *want1, const char *want2)
{
    char path[64], loc[80];
    tu_temp_file(path, sizeof path, ".ini", text);
    ModelConfig c;
    Err e;
    int rc = model_load(path, &c, &e);
    unlink(path);
    ck_assert_int_eq(rc, -EINVAL);
    snprintf(loc, sizeof loc, "%s%s", path, want1);
    tu_assert_contains(e.msg, loc);
    tu_assert_contains(e.msg, want2);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
}

START_TEST(model_ini_bad)
{
    expect_bad("[model]\nlayers = 2\nhiden = 64\n", ":3:", "unknown key 'hiden'");
    expect_bad("[model]\nlayers = 2\nhidden = 64\nheads = 4\nvocab = 256\n", ":", "max_seq");
    expect_bad("[model]\nlayers = two\n", ":2:", "positive integer");
    expect_bad("[model]\nlayers = 0\n", ":2:", "positive integer");
    expect_bad("[model]\nlayers = -3\n", ":2:", "positive integer");
    expect_bad("[modle]\nlayers = 2\n", ":1:", "unknown section [modle]");
    expect_bad("[model]\nlayers = 2\nlayers = 3\n", ":3:", "twice");
    expect_bad("[model]\nlayers 2\n", ":2:", "syntax error");
    expect_bad("[model]\nlayers=2\nhidden=60\nheads=7\nvocab=9\nmax_seq=8\n", ":", "divide");
    static const char llama[] = "[model]\narch = llama\nlayers = 2\nhidden = 64\nheads = 4\n"
                                "vocab = 256\nmax_seq = 32\n";
    char text[256];
    expect_bad("[model]\narch = mamba\n", ":2:", "arch: expected gpt2 or llama");
    expect_bad(llama, ":", "lacks key 'ffn'");
    snprintf(text, sizeof text, "%sffn = 128\nkv_heads = 3\n", llama);
    expect_bad(text, ":", "kv_heads (3) must divide heads (4)");
    expect_bad("[model]\nlayers=2\nhidden=64\nheads=4\nkv_heads=2\nvocab=9\nmax_seq=8\n",
               ":", "belong to arch = llama");
    snprintf(text, sizeof text, "%sffn = 128\nrope_scaling_factor = 8\n", llama);
    expect_bad(text, ":", "rope scaling (llama3) needs");
    snprintf(text, sizeof text, "%sffn = 128\nnorm_eps = -1\n", llama);
    expect_bad(text, ":9:", "norm_eps: expected a positive number");
    /* GPT-2's layernorm computes 1e-5 only: another epsilon is refused, not ignored */
    expect_bad("[model]\nlayers=2\nhidden=64\nheads=4\nvocab=9\nmax_seq=8\nnorm_eps=1e-6\n",
               ":", "norm_eps 1e-06: fuyou's GPT-2 layernorm adds 1e-05");
    char path[64];
    tu_temp_file(path, sizeof path, ".ini",
                 "[model]\nlayers=2\nhidden=64\nheads=4\nvocab=9\nmax_seq=8\nnorm_eps=1e-5\n");
    ModelConfig c;
    Err e;
    int rc = model_load(path, &c, &e);
    unlink(path);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_double_eq(model_norm_eps(&c), 1e-5);
}
END_TEST

/* Sizes beyond the stated limits are refused at the key's own line: hidden = 2^29 without ffn
 * once reported "ffn ... got -2147483648" (4h overflowed int), a key the user never set, and
 * layers = 2^30 or hidden = 2^30 overflowed the graph's sizes. */
START_TEST(model_ini_limits)
{
    expect_bad("[model]\nlayers = 2\nhidden = 536870912\nheads = 1\nvocab = 10\nmax_seq = 16\n",
               ":3:", "hidden: expected a positive integer of at most 131072");
    expect_bad("[model]\nlayers = 1073741824\nhidden = 64\nheads = 1\nvocab = 10\n"
               "max_seq = 16\n", ":2:", "layers: expected a positive integer of at most 1024");
    expect_bad("[model]\nlayers = 2\nhidden = 1073741824\nffn = 1\nheads = 1\nvocab = 10\n"
               "max_seq = 16\n", ":3:", "hidden");
    expect_bad("[model]\nlayers = 2\nhidden = 64\nffn = 2000000\n", ":4:", "at most 1048576");
    expect_bad("[model]\nvocab = 20000000\n", ":2:", "at most 16777216");
    expect_bad("[model]\nmax_seq = 20000000\n", ":2:", "at most 16777216");
    /* the largest of every size loads, and its parameter count is exact in int64 */
    char path[64];
    tu_temp_file(path, sizeof path, ".ini",
                 "[model]\nlayers = 1024\nhidden = 131072\nheads = 1024\nffn = 1048576\n"
                 "vocab = 16777216\nmax_seq = 16777216\ntied = false\n");
    ModelConfig c;
    Err e;
    int rc = model_load(path, &c, &e);
    unlink(path);
    ck_assert_msg(rc == 0, "%s", e.msg);
    int64_t h = 131072, f = 1048576, V = 16777216, S = 16777216;
    int64_t block = 4 * h + 3 * h * h + 3 * h + h * h + h + f * h + f + h * f + h;
    ck_assert_int_eq(model_param_count(&c), 1024 * block + 2 * V * h + S * h + 2 * h);
    /* model_validate holds every config to the same limits, presets included */
    ModelConfig big = *model_preset_find("gpt2-124m");
    big.n_layer = 1025;
    ck_assert_int_eq(model_validate(&big, &e), -EINVAL);
    tu_assert_contains(e.msg, "layers");
    for (int i = 0; i < model_preset_count(); i++)
        ck_assert_int_eq(model_validate(model_preset_at(i), &e), 0);
}
END_TEST

/* A NUL byte in a value is an error at its line, not the end of the value */
START_TEST(model_ini_nul)
{
    static const char text[] = "[model]\nlayers = 2\0 4\nhidden = 64\nheads = 4\nvocab = 256\n"
                               "max_seq = 32\n";
    char path[] = "/tmp/fuyou-test-XXXXXX.ini", want[64];
    int fd = mkstemps(path, 4);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    ModelConfig c;
    Err e;
    int rc = model_load(path, &c, &e);
    unlink(path);
    ck_assert_int_eq(rc, -EINVAL);
    snprintf(want, sizeof want, "%s:2: ", path);
    tu_assert_contains(e.msg, want);
    tu_assert_contains(e.msg, "NUL byte");
}
END_TEST

/* /dev/zero as a model is refused at once (it has a '/', so it is taken for a path) */
START_TEST(model_ini_not_regular)
{
    ModelConfig c;
    Err e;
    ck_assert_int_eq(model_load("/dev/zero", &c, &e), -EINVAL);
    tu_assert_contains(e.msg, "/dev/zero: is a character device, not a regular file");
}
END_TEST

START_TEST(model_ini_unreadable)
{
    ModelConfig c;
    Err e;
    ck_assert_int_eq(model_load("/nonexistent/dir/m.ini", &c, &e), -ENOENT);
    tu_assert_contains(e.msg, "/nonexistent/dir/m.ini: cannot read");
}
END_TEST

START_TEST(dtypes)
{
    DType t;
    ck_assert_int_eq(dtype_parse("bfloat16", &t), 0);
    ck_assert_int_eq(t, DTYPE_BF16);
    ck_assert_int_eq(dtype_bytes(t), 2);
    ck_assert_int_eq(dtype_parse("fp8", &t), -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, gpt2_124m_params);
    tcase_add_test(tc, gpt3_175b_params);
    tcase_add_test(tc, gpt3_family_params);
    tcase_add_test(tc, llama_family_params);
    tcase_add_test(tc, model_ini_llama);
    tcase_add_test(tc, seventy_b_shape);
    tcase_add_test(tc, unknown_preset);
    tcase_add_test(tc, model_ini_loads);
    tcase_add_test(tc, model_ini_bad);
    tcase_add_test(tc, model_ini_unreadable);
    tcase_add_test(tc, model_ini_limits);
    tcase_add_test(tc, model_ini_nul);
    tcase_add_test(tc, model_ini_not_regular);
    tcase_add_test(tc, dtypes);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
