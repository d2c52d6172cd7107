/* Check suite for model/model_hf: Hugging Face config.json files as transformers writes them
 * (Llama 3.1, Qwen2.5, Mistral, GPT-2; transformers 4's rope_theta/rope_scaling and 5's
 * rope_parameters) load as the presets they describe, through model_load's folder and .json
 * paths; what fuyou's blocks do not compute is refused naming the field. */
#include <errno.h>
#include <sys/stat.h>

#include "model.h"
#include "model_hf.h"
#include "testutil.h"

static const char llama31_8b[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false,\n"
    " \"hidden_act\": \"silu\", \"hidden_size\": 4096, \"intermediate_size\": 14336,\n"
    " \"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\",\n"
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 8,\n"
    " \"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0,\n"
    " \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192,\n"
    " \"rope_type\": \"llama3\"}, \"rope_theta\": 500000.0, \"tie_word_embeddings\": false,\n"
    " \"torch_dtype\": \"bfloat16\", \"vocab_size\": 128256}\n";

/* Loads text as DIR/config.json through model_load's folder path. */
static int load_folder(const char *text, ModelConfig *c, Err *e)
{
    char dir[] = "/tmp/fuyou-hf-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    int rc = model_load(dir, c, e);
    tu_rm_tree(dir);
    return rc;
}

static void expect_same_shape(const ModelConfig *a, const char *preset)
{
    const ModelConfig *p = model_preset_find(preset);
    ck_assert_int_eq(a->arch, p->arch);
    ck_assert_int_eq(a->n_layer, p->n_layer);
    ck_assert_int_eq(a->d_model, p->d_model);
    ck_assert_int_eq(a->n_head, p->n_head);
    ck_assert_int_eq(model_kv_heads(a), model_kv_heads(p));
    ck_assert_int_eq(a->d_ff, p->d_ff);
    ck_assert_int_eq(a->vocab, p->vocab);
    ck_assert_int_eq(a->tied, p->tied);
    ck_assert_int_eq(a->qkv_bias, p->qkv_bias);
    ck_assert_int_eq(model_param_count(a), model_param_count(p));
}

START_TEST(llama_folder)
{
    ModelConfig c;
    Err e;
    ck_assert_msg(load_folder(llama31_8b, &c, &e) == 0, "%s", e.msg);
    expect_same_shape(&c, "llama-3.1-8b");
    ck_assert_int_eq(c.max_seq, 131072);
    ck_assert_double_eq(c.rope_theta, 500000);
    ck_assert_double_eq(c.norm_eps, 1e-5);
    ck_assert_double_eq(c.rope_scaling.factor, 8);
    ck_assert_double_eq(c.rope_scaling.high_freq_factor, 4);
    ck_assert_int_eq(c.rope_scaling.original_max_seq, 8192);
    ck_assert_int_eq(c.dtype, DTYPE_BF16);
    ck_assert(!strncmp(c.name, "fuyou-hf-", 9)); /* the folder's name */
}
END_TEST

/* transformers 5: rope_theta inside rope_parameters */
START_TEST(rope_parameters)
{
    char path[64];
    tu_temp_file(path, sizeof path, ".json",
                 "{\"model_type\": \"llama\", \"hidden_size\": 4096, \"intermediate_size\": 14336,"
                 " \"max_position_embeddings\": 131072, \"num_attention_heads\": 32,"
                 " \"num_hidden_layers\": 32, \"num_key_value_heads\": 8, \"vocab_size\": 128256,"
                 " \"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 250000.0,"
                 " \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
                 " \"original_max_position_embeddings\": 8192}}");
    ModelConfig c;
    Err e;
    int rc = model_load(path, &c, &e);
    unlink(path);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_double_eq(c.rope_theta, 250000);
    ck_assert_double_eq(c.rope_scaling.factor, 8);
    /* "default": no scaling */
    tu_temp_file(path, sizeof path, ".json",
                 "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"
                 " \"max_position_embeddings\": 256, \"num_attention_heads\": 4,"
                 " \"num_hidden_layers\": 2, \"vocab_size\": 256,"
                 " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}");
    rc = model_load(path, &c, &e);
    unlink(path);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_double_eq(c.rope_scaling.factor, 0);
    ck_assert_int_eq(model_kv_heads(&c), 4);
}
END_TEST

START_TEST(qwen_mistral_gpt2)
{
    ModelConfig c;
    Err e;
    const char *qwen =
        "{\"model_type\": \"qwen2\", \"hidden_size\": 3584, \"intermediate_size\": 18944,"
        " \"max_position_embeddings\": 131072, \"num_attention_heads\": 28,"
        " \"num_hidden_layers\": 28, \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06,"
        " \"rope_theta\": 1000000.0, \"sliding_window\": 131072, \"use_sliding_window\": false,"
        " \"tie_word_embeddings\": false, \"vocab_size\": 152064}";
    ck_assert_msg(load_folder(qwen, &c, &e) == 0, "%s", e.msg);
    expect_same_shape(&c, "qwen2.5-7b");
    /* Mistral 7B v0.1's window bounds the sequences: exact attention up to it */
    const char *mistral =
        "{\"model_type\": \"mistral\", \"hidden_size\": 4096, \"intermediate_size\": 14336,"
        " \"max_position_embeddings\": 32768, \"num_attention_heads\": 32,"
        " \"num_hidden_layers\": 32, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05,"
        " \"rope_theta\": 10000.0, \"sliding_window\": 4096, \"vocab_size\": 32000}";
    ck_assert_msg(load_folder(mistral, &c, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(c.max_seq, 4096);
    ck_assert_int_eq(model_param_count(&c), 7241732096); /* Mistral-7B-v0.1's */
    const char *gpt2 = "{\"model_type\": \"gpt2\", \"n_embd\": 768, \"n_head\": 12,"
                       " \"n_layer\": 12, \"n_positions\": 1024, \"n_inner\": null,"
                       " \"vocab_size\": 50257}";
    ck_assert_msg(load_folder(gpt2, &c, &e) == 0, "%s", e.msg);
    expect_same_shape(&c, "gpt2-124m");
}
END_TEST

/* Each refusal: -EINVAL (-ENOENT for no config) and one line naming the file and the field */
static void expect_bad(const char *text, const char *want)
{
    char path[64];
    tu_temp_file(path, sizeof path, ".json", text);
    ModelConfig c;
    Err e;
    int rc = model_load(path, &c, &e);
    unlink(path);
    ck_assert_msg(rc == -EINVAL, "%d for %s", rc, text);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, want);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
}

static void expect_bad_llama(const char *from, const char *to, const char *want)
{
    char text[2048];
    const char *at = strstr(llama31_8b, from);
    ck_assert_ptr_nonnull(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - llama31_8b), llama31_8b, to,
             at + strlen(from));
    expect_bad(text, want);
}

START_TEST(refusals)
{
    expect_bad("{\"model_type\": \"mamba\"}", "\"model_type\" \"mamba\": fuyou reads llama");
    expect_bad("{\"hidden_size\": 8}", "\"model_type\" missing");
    expect_bad("{\"model_type\": \"llama\",\n \"hidden_size\": }", ":2: not JSON");
    expect_bad("[1, 2]", "not a JSON object");
    expect_bad_llama("\"attention_bias\": false", "\"attention_bias\": true",
                     "\"attention_bias\" is set");
    expect_bad_llama("\"mlp_bias\": false", "\"mlp_bias\": true", "\"mlp_bias\" is set");
    expect_bad_llama("\"rope_type\": \"llama3\"", "\"rope_type\": \"yarn\"",
                     "\"rope_scaling\" of type yarn");
    expect_bad_llama("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5",
                     "kv_heads (5) must divide heads (32)");
    expect_bad_llama("\"num_hidden_layers\": 32", "\"num_hidden_layers\": 0",
                     "\"num_hidden_layers\" must be a whole number from 1 to 1024");
    expect_bad_llama("\"vocab_size\": 128256", "\"vocab_size\": 128256.5",
                     "\"vocab_size\" must be a whole number");
    expect_bad_llama("\"intermediate_size\": 14336,", "", "no \"intermediate_size\"");
    expect_bad_llama("\"rope_theta\": 500000.0", "\"rope_theta\": -1",
                     "\"rope_theta\" must be a positive number");
    expect_bad_llama("\"hidden_act\": \"silu\"", "\"head_dim\": 64",
                     "\"head_dim\" 64 is not hidden_size / num_attention_heads");
    expect_bad_llama("\"hidden_size\": 4096,", "\"hidden_size\": 4096, \"hidden_size\": 8,",
                     "not JSON");
    /* a folder without one */
    char dir[] = "/tmp/fuyou-hf-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ModelConfig c;
    Err e;
    ck_assert_int_eq(model_load(dir, &c, &e), -ENOENT);
    tu_assert_contains(e.msg, "a folder without a config.json");
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model_hf");
    TCase *tc = tcase_create("model_hf");
    tcase_add_test(tc, llama_folder);
    tcase_add_test(tc, rope_parameters);
    tcase_add_test(tc, qwen_mistral_gpt2);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
