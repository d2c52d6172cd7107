/* Check suite for model/model_hf: Hugging Face config.json files as transformers writes them
 * (Llama 3.1, Qwen2.5, Mistral, GPT-2; transformers 4's rope_theta/rope_scaling and 5's
 * rope_parameters) load as the presets they describe, through model_load's folder and .json
 * paths; every field that changes the math is honoured or refused naming the field and its
 * value; dropout rates load and come back in the notice. */
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

/* base with its first `from` replaced by `to`, into text (capacity n). */
static void edit(char *text, size_t n, const char *base, const char *from, const char *to)
{
    const char *at = strstr(base, from);
    ck_assert_ptr_nonnull(at);
    int len = snprintf(text, n, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    ck_assert_int_lt(len, (int)n);
}

static void expect_bad_llama(const char *from, const char *to, const char *want)
{
    char text[2048];
    edit(text, sizeof text, llama31_8b, from, to);
    expect_bad(text, want);
}

/* GPT-2 124M's config.json as the Hub has it: every field that changes the math is there, at
 * what fuyou computes but the dropout rates */
static const char gpt2_124m[] =
    "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"],\n"
    " \"attn_pdrop\": 0.1, \"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256,\n"
    " \"initializer_range\": 0.02, \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\",\n"
    " \"n_ctx\": 1024, \"n_embd\": 768, \"n_head\": 12, \"n_layer\": 12, \"n_positions\": 1024,\n"
    " \"resid_pdrop\": 0.1, \"summary_activation\": null, \"summary_first_dropout\": 0.1,\n"
    " \"summary_proj_to_labels\": true, \"summary_type\": \"cls_index\",\n"
    " \"summary_use_proj\": true,"
    " \"vocab_size\": 50257}\n";

static void expect_bad_gpt2(const char *from, const char *to, const char *want)
{
    char text[2048];
    edit(text, sizeof text, gpt2_124m, from, to);
    expect_bad(text, want);
}

/* Loads text from a .json file through model_load_noticed: its return; the file's path in
 * path (capacity 64), removed. */
static int load_noticed(const char *text, char *path, ModelConfig *c, ModelNotice *notice,
                        Err *e)
{
    tu_temp_file(path, 64, ".json", text);
    int rc = model_load_noticed(path, c, notice, e);
    unlink(path);
    return rc;
}

/* gpt2_124m with `from` replaced by `to` loads: into *c, its notice into *notice. */
static void load_gpt2(const char *from, const char *to, ModelConfig *c, ModelNotice *notice)
{
    char text[2048], path[64];
    edit(text, sizeof text, gpt2_124m, from, to);
    Err e;
    ck_assert_msg(load_noticed(text, path, c, notice, &e) == 0, "%s for %s", e.msg, text);
}

static void load_llama(const char *from, const char *to, ModelConfig *c, ModelNotice *notice)
{
    char text[2048], path[64];
    edit(text, sizeof text, llama31_8b, from, to);
    Err e;
    ck_assert_msg(load_noticed(text, path, c, notice, &e) == 0, "%s for %s", e.msg, text);
}

START_TEST(refusals)
{
    expect_bad("{\"model_type\": \"mamba\"}", "\"model_type\" \"mamba\": fuyou reads llama");
    expect_bad("{\"hidden_size\": 8}", "\"model_type\" missing");
    expect_bad("{\"model_type\": \"llama\",\n \"hidden_size\": }", ":2: not JSON");
    expect_bad("[1, 2]", "not a JSON object");
    expect_bad_llama("\"attention_bias\": false", "\"attention_bias\": true",
                     "\"attention_bias\" is true: fuyou's Llama block has no biases");
    expect_bad_llama("\"mlp_bias\": false", "\"mlp_bias\": 1", "\"mlp_bias\" is 1: fuyou's Llama "
                     "block has no MLP biases");
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

/* GPT-2's fields that change the math, each at a value fuyou does not compute: refused with
 * the field, the value as the config has it and what fuyou computes */
START_TEST(gpt2_refusals)
{
    const char *act = "\"activation_function\": \"gelu_new\"";
    expect_bad_gpt2(act, "\"activation_function\": \"relu\"",
                    "\"activation_function\" is \"relu\": fuyou's GPT-2 MLP computes gelu_new");
    /* the exact GELU (erf), not its tanh approximation: a prefix of the name computed */
    expect_bad_gpt2(act, "\"activation_function\": \"gelu\"",
                    "\"activation_function\" is \"gelu\":");
    expect_bad_gpt2(act, "\"activation_function\": \"gelu_new \"", "is \"gelu_new \"");
    expect_bad_gpt2(act, "\"activation_function\": 1", "\"activation_function\" is 1:");
    const char *eps = "\"layer_norm_epsilon\": 1e-05";
    expect_bad_gpt2(eps, "\"layer_norm_epsilon\": 0.5",
                    "\"layer_norm_epsilon\" is 0.5: fuyou's GPT-2 layernorm adds 1e-05");
    expect_bad_gpt2(eps, "\"layer_norm_epsilon\": 1e-06", "\"layer_norm_epsilon\" is 1e-06:");
    /* 1e-12 from 1e-5 is beyond half a float's step there (2^-41): another float */
    expect_bad_gpt2(eps, "\"layer_norm_epsilon\": 1.0000001e-05", "is 1.0000001e-05:");
    expect_bad_gpt2(eps, "\"layer_norm_epsilon\": 1e300", "\"layer_norm_epsilon\" is 1e+300:");
    expect_bad_gpt2(eps, "\"layer_norm_epsilon\": \"1e-05\"",
                    "\"layer_norm_epsilon\" is \"1e-05\":");
    expect_bad_gpt2(eps, "\"scale_attn_weights\": false",
                    "\"scale_attn_weights\" is false: fuyou's attention divides the scores");
    expect_bad_gpt2(eps, "\"scale_attn_by_inverse_layer_idx\": true",
                    "\"scale_attn_by_inverse_layer_idx\" is true:");
    expect_bad_gpt2(eps, "\"add_cross_attention\": true",
                    "\"add_cross_attention\" is true: fuyou's GPT-2 block has no cross-attention");
    expect_bad_gpt2("\"resid_pdrop\": 0.1", "\"resid_pdrop\": 1.5",
                    "\"resid_pdrop\" is 1.5: a dropout rate is a number from 0 to 1");
    expect_bad_gpt2("\"attn_pdrop\": 0.1", "\"attn_pdrop\": \"0.1\"", "\"attn_pdrop\" is \"0.1\"");
    /* what was already read: n_inner within its bounds */
    expect_bad_gpt2("\"n_ctx\": 1024", "\"n_inner\": 0", "\"n_inner\" must be a whole number");
}
END_TEST

/* The Llama family's: the activation, a partial rotary embedding (in the config, or in
 * transformers 5's rope_parameters), the window switch and the dropout rate's range */
START_TEST(llama_refusals)
{
    const char *act = "\"hidden_act\": \"silu\"";
    expect_bad_llama(act, "\"hidden_act\": \"gelu\"",
                     "\"hidden_act\" is \"gelu\": fuyou's Llama MLP computes SwiGLU");
    expect_bad_llama(act, "\"hidden_act\": \"silu\", \"hidden_activation\": \"gelu_pytorch_tanh\"",
                     "\"hidden_activation\" is \"gelu_pytorch_tanh\":");
    expect_bad_llama(act, "\"partial_rotary_factor\": 0.5", "\"partial_rotary_factor\" is 0.5: "
                     "fuyou's rotary embedding turns every dimension of a head");
    expect_bad("{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"
               " \"max_position_embeddings\": 256, \"num_attention_heads\": 4,"
               " \"num_hidden_layers\": 2, \"vocab_size\": 256,"
               " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0,"
               " \"partial_rotary_factor\": 0.25}}", "\"partial_rotary_factor\" is 0.25:");
    expect_bad_llama("\"rope_type\": \"llama3\"", "\"rope_type\": \"linear\"",
                     "\"rope_scaling\" of type linear: fuyou computes llama3's");
    expect_bad_llama(act, "\"sliding_window\": 4096, \"use_sliding_window\": \"yes\"",
                     "\"use_sliding_window\" must be true or false");
    expect_bad_llama(act, "\"attention_dropout\": -0.1",
                     "\"attention_dropout\" is -0.1: a dropout rate is a number from 0 to 1");
}
END_TEST

/* What is honoured: the values read reach the ModelConfig (and differ from the defaults they
 * would otherwise take), and the ones equal to fuyou's function load */
START_TEST(honoured)
{
    ModelConfig c;
    ModelNotice n;
    load_gpt2("\"n_ctx\": 1024", "\"n_inner\": 1024, \"tie_word_embeddings\": false", &c, &n);
    ck_assert_int_eq(c.d_ff, 1024);
    ck_assert(!c.tied);
    ck_assert_int_eq(model_embed_params(&c), 2 * 50257LL * 768 + 1024 * 768 + 2 * 768);
    /* the same function under other names, and the same epsilon written with more digits */
    const char *act = "\"activation_function\": \"gelu_new\"";
    load_gpt2(act, "\"activation_function\": \"gelu_pytorch_tanh\"", &c, &n);
    load_gpt2(act, "\"activation_function\": \"gelu_fast\"", &c, &n);
    load_gpt2("\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": 1.0000000000001e-05", &c,
              &n);
    ck_assert_double_eq(model_norm_eps(&c), 1e-5);
    /* transformers' defaults, and reorder_and_upcast_attn: the precision only */
    load_gpt2(act, "\"activation_function\": null, \"scale_attn_weights\": true, "
              "\"scale_attn_by_inverse_layer_idx\": false, \"add_cross_attention\": false, "
              "\"reorder_and_upcast_attn\": true", &c, &n);
    expect_same_shape(&c, "gpt2-124m");
    /* Llama: rms_norm_eps and a tied head read; swish is SiLU; pretraining_tp splits GEMMs */
    const char *hact = "\"hidden_act\": \"silu\"";
    load_llama("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e-06", &c, &n);
    ck_assert_double_eq(model_norm_eps(&c), 1e-6);
    load_llama("\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true", &c, &n);
    ck_assert(c.tied);
    load_llama(hact, "\"hidden_act\": \"swish\", \"pretraining_tp\": 2, \"partial_rotary_factor\": "
               "1.0, \"hidden_activation\": \"silu\", \"head_dim\": 128", &c, &n);
    expect_same_shape(&c, "llama-3.1-8b");
    /* the window bounds the sequences where it slides: Mistral's always, Qwen2's only with
     * use_sliding_window (false by default) */
    const char *qwen = "{\"model_type\": \"qwen2\", \"hidden_size\": 64,"
                       " \"intermediate_size\": 128, \"max_position_embeddings\": 256,"
                       " \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
                       " \"vocab_size\": 256, \"sliding_window\": 32%s}";
    char text[512], path[64];
    Err e;
    snprintf(text, sizeof text, qwen, "");
    ck_assert_msg(load_noticed(text, path, &c, &n, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(c.max_seq, 256);
    snprintf(text, sizeof text, qwen, ", \"use_sliding_window\": true");
    ck_assert_msg(load_noticed(text, path, &c, &n, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(c.max_seq, 32);
}
END_TEST

/* Dropout rates above 0 load, named in one line of the notice; at 0, or from a preset or an
 * ini, the notice is empty (whatever it held) */
START_TEST(dropout_notice)
{
    ModelConfig c;
    ModelNotice n;
    char path[64], want[256];
    Err e;
    ck_assert_msg(load_noticed(gpt2_124m, path, &c, &n, &e) == 0, "%s", e.msg);
    expect_same_shape(&c, "gpt2-124m");
    snprintf(want, sizeof want, "%s: embd_pdrop 0.1, attn_pdrop 0.1, resid_pdrop 0.1 ignored: "
             "fuyou trains without dropout", path);
    ck_assert_str_eq(n.msg, want);
    load_gpt2("\"resid_pdrop\": 0.1", "\"resid_pdrop\": 0.25", &c, &n);
    tu_assert_contains(n.msg, "resid_pdrop 0.25 ignored");
    char text[2048], text2[2048];
    edit(text, sizeof text, gpt2_124m, "\"attn_pdrop\": 0.1", "\"attn_pdrop\": 0.0");
    edit(text2, sizeof text2, text, "\"embd_pdrop\": 0.1", "\"embd_pdrop\": 0");
    edit(text, sizeof text, text2, "\"resid_pdrop\": 0.1", "\"resid_pdrop\": null");
    ck_assert_msg(load_noticed(text, path, &c, &n, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(n.msg, "");
    /* Llama's attention_dropout */
    load_llama("\"hidden_act\": \"silu\"", "\"hidden_act\": \"silu\", \"attention_dropout\": 0.1",
               &c, &n);
    ck_assert_ptr_null(strchr(n.msg, '\n'));
    tu_assert_contains(n.msg, ".json: attention_dropout 0.1 ignored: fuyou trains without dropout");
    load_llama("\"hidden_act\": \"silu\"", "\"hidden_act\": \"silu\", \"attention_dropout\": 0.0",
               &c, &n);
    ck_assert_str_eq(n.msg, "");
    strcpy(n.msg, "stale");
    ck_assert_int_eq(model_load_noticed("gpt2-tiny", &c, &n, &e), 0);
    ck_assert_str_eq(n.msg, "");
    /* a refused config leaves no notice either, nor model_load_hf's (model_load_noticed's
     * clears it first) */
    strcpy(n.msg, "stale");
    edit(text, sizeof text, gpt2_124m, "\"n_ctx\": 1024", "\"scale_attn_weights\": false");
    tu_temp_file(path, sizeof path, ".json", text);
    ck_assert_int_eq(model_load_hf(path, &c, &n, &e), -EINVAL);
    unlink(path);
    ck_assert_str_eq(n.msg, "");
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
    tcase_add_test(tc, gpt2_refusals);
    tcase_add_test(tc, llama_refusals);
    tcase_add_test(tc, honoured);
    tcase_add_test(tc, dropout_notice);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
