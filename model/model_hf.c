/* model_hf: a model from a Hugging Face config.json (model_load, model.h): the architecture as
 * transformers' LlamaConfig, Qwen2Config, MistralConfig and GPT2Config write it. What fuyou's
 * blocks do not compute (another model_type, biases on o or the MLP, a head size other than
 * hidden / heads, a rope_scaling other than llama3's) is refused naming the field, so a
 * config never loads as a different model than the one it describes. The weights' torch_dtype
 * is not the training's: a model trains in bf16 unless told otherwise (--dtype). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "model_hf.h"
#include "regfile.h"

enum { CONFIG_MAX_BYTES = 1 << 20 };

/* Field f of o as an int within [1, max] (absent: *out unchanged unless required). */
static int get_int(const json_t *o, const char *path, const char *f, int max, bool required,
                   int *out, Err *e)
{
    const json_t *v = json_object_get(o, f);
    if (!v || json_is_null(v))
        return required ? err_set(e, -EINVAL, "%s: no \"%s\"", path, f) : 0;
    json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
    if (!json_is_integer(v) || x < 1 || x > max)
        return err_set(e, -EINVAL, "%s: \"%s\" must be a whole number from 1 to %d", path, f,
                       max);
    *out = (int)x;
    return 0;
}

static int get_real(const json_t *o, const char *path, const char *f, double *out, Err *e)
{
    const json_t *v = json_object_get(o, f);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) <= 0)
        return err_set(e, -EINVAL, "%s: \"%s\" must be a positive number", path, f);
    *out = json_number_value(v);
    return 0;
}

static int get_bool(const json_t *o, const char *path, const char *f, bool *out, Err *e)
{
    const json_t *v = json_object_get(o, f);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return err_set(e, -EINVAL, "%s: \"%s\" must be true or false", path, f);
    *out = json_is_true(v);
    return 0;
}

/* A field that must be absent, null or false: what fuyou's block does not compute. */
static int refuse_true(const json_t *o, const char *path, const char *f, const char *why,
                       Err *e)
{
    const json_t *v = json_object_get(o, f);
    if (v && !json_is_null(v) && !json_is_false(v))
        return err_set(e, -EINVAL, "%s: \"%s\" is set: %s", path, f, why);
    return 0;
}

/* The rotary embedding: rope_theta and rope_scaling as transformers 4 writes them, or one
 * rope_parameters object with rope_theta inside (transformers 5); rope_type "default" (no
 * scaling) or "llama3". */
static int llama_rope(const json_t *o, const char *path, ModelConfig *c, Err *e)
{
    const json_t *s = json_object_get(o, "rope_parameters");
    if (json_is_object(s)) {
        int rc = get_real(s, path, "rope_theta", &c->rope_theta, e);
        if (rc)
            return rc;
    } else {
        int rc = get_real(o, path, "rope_theta", &c->rope_theta, e);
        if (rc)
            return rc;
        s = json_object_get(o, "rope_scaling");
    }
    if (!s || json_is_null(s))
        return 0;
    const json_t *t = json_object_get(s, "rope_type");
    if (!t)
        t = json_object_get(s, "type");
    if (json_is_string(t) && !strcmp(json_string_value(t), "default"))
        return 0;
    if (!json_is_object(s) || !json_is_string(t) || strcmp(json_string_value(t), "llama3"))
        return err_set(e, -EINVAL, "%s: \"rope_scaling\" of type %s: fuyou computes llama3's "
                       "frequency scaling only", path,
                       json_is_string(t) ? json_string_value(t) : "(none)");
    RopeScaling *r = &c->rope_scaling;
    int rc = get_real(s, path, "factor", &r->factor, e);
    if (!rc)
        rc = get_real(s, path, "low_freq_factor", &r->low_freq_factor, e);
    if (!rc)
        rc = get_real(s, path, "high_freq_factor", &r->high_freq_factor, e);
    if (!rc)
        rc = get_int(s, path, "original_max_position_embeddings", MODEL_MAX_SEQ, true,
                     &r->original_max_seq, e);
    return rc;
}

/* LlamaConfig, MistralConfig, Qwen2Config: the Llama block (Qwen2's q/k/v biases always on). */
static int llama_config(const json_t *o, const char *path, const char *type, ModelConfig *c,
                        Err *e)
{
    c->arch = ARCH_LLAMA;
    c->tied = false;
    c->qkv_bias = !strcmp(type, "qwen2");
    int rc = get_int(o, path, "num_hidden_layers", MODEL_MAX_LAYERS, true, &c->n_layer, e);
    if (!rc)
        rc = get_int(o, path, "hidden_size", MODEL_MAX_HIDDEN, true, &c->d_model, e);
    if (!rc)
        rc = get_int(o, path, "num_attention_heads", MODEL_MAX_HIDDEN, true, &c->n_head, e);
    if (!rc)
        rc = get_int(o, path, "num_key_value_heads", MODEL_MAX_HIDDEN, false, &c->n_kv_head, e);
    if (!rc)
        rc = get_int(o, path, "intermediate_size", MODEL_MAX_FFN, true, &c->d_ff, e);
    if (!rc)
        rc = get_int(o, path, "vocab_size", MODEL_MAX_VOCAB, true, &c->vocab, e);
    if (!rc)
        rc = get_int(o, path, "max_position_embeddings", MODEL_MAX_SEQ, true, &c->max_seq, e);
    if (!rc)
        rc = get_real(o, path, "rms_norm_eps", &c->norm_eps, e);
    if (!rc)
        rc = get_bool(o, path, "tie_word_embeddings", &c->tied, e);
    if (!rc)
        rc = refuse_true(o, path, "attention_bias", "fuyou's Llama block has no biases on q, k, "
                         "v and o (Qwen2's q/k/v biases come with model_type qwen2)", e);
    if (!rc)
        rc = refuse_true(o, path, "mlp_bias", "fuyou's Llama block has no MLP biases", e);
    if (!rc)
        rc = llama_rope(o, path, c, e);
    int head_dim = 0, window = 0;
    if (!rc)
        rc = get_int(o, path, "head_dim", MODEL_MAX_HIDDEN, false, &head_dim, e);
    if (!rc && head_dim && (int64_t)head_dim * c->n_head != c->d_model)
        rc = err_set(e, -EINVAL, "%s: \"head_dim\" %d is not hidden_size / num_attention_heads "
                     "(%d / %d): fuyou's heads are hidden / heads wide", path, head_dim,
                     c->d_model, c->n_head);
    /* Mistral's sliding window: attention over the sequence is exact up to the window, which
     * bounds the sequences trained on */
    if (!rc)
        rc = get_int(o, path, "sliding_window", INT_MAX, false, &window, e);
    const json_t *sw = json_object_get(o, "use_sliding_window");
    bool sliding = window > 0 && (!sw || json_is_true(sw));
    if (!rc && sliding && window < c->max_seq)
        c->max_seq = window;
    return rc;
}

/* GPT2Config: the GPT-2 block. */
static int gpt2_config(const json_t *o, const char *path, ModelConfig *c, Err *e)
{
    c->arch = ARCH_GPT2;
    c->tied = true;
    int rc = get_int(o, path, "n_layer", MODEL_MAX_LAYERS, true, &c->n_layer, e);
    if (!rc)
        rc = get_int(o, path, "n_embd", MODEL_MAX_HIDDEN, true, &c->d_model, e);
    if (!rc)
        rc = get_int(o, path, "n_head", MODEL_MAX_HIDDEN, true, &c->n_head, e);
    if (!rc)
        rc = get_int(o, path, "vocab_size", MODEL_MAX_VOCAB, true, &c->vocab, e);
    if (!rc)
        rc = get_int(o, path, "n_positions", MODEL_MAX_SEQ, true, &c->max_seq, e);
    c->d_ff = 4 * c->d_model;
    if (!rc)
        rc = get_int(o, path, "n_inner", MODEL_MAX_FFN, false, &c->d_ff, e);
    if (!rc)
        rc = get_bool(o, path, "tie_word_embeddings", &c->tied, e);
    return rc;
}

/* The model's name: its folder's, else the file's. */
static void config_name(const char *path, ModelConfig *c)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && !strcmp(slash + 1, "config.json")) {
        *slash = 0;
        slash = strrchr(dir, '/');
    }
    const char *base = slash ? slash + 1 : dir;
    if (!*base || !strcmp(base, "."))
        base = "config";
    size_t n = strlen(base) < sizeof c->name - 1 ? strlen(base) : sizeof c->name - 1;
    memcpy(c->name, base, n);
    c->name[n] = 0;
}

int model_load_hf(const char *path, ModelConfig *out, Err *e)
{
    FILE *f;
    int rc = regfile_fopen(path, &f, e);
    if (rc)
        return rc;
    json_error_t je;
    json_t *o = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!o)
        return err_set(e, -EINVAL, "%s:%d: not JSON: %s", path, je.line, je.text);
    ModelConfig c = {.dtype = DTYPE_BF16};
    const json_t *t = json_object_get(o, "model_type");
    const char *type = json_is_string(t) ? json_string_value(t) : NULL;
    if (!json_is_object(o))
        rc = err_set(e, -EINVAL, "%s: not a JSON object", path);
    else if (type && (!strcmp(type, "llama") || !strcmp(type, "mistral") ||
                      !strcmp(type, "qwen2")))
        rc = llama_config(o, path, type, &c, e);
    else if (type && !strcmp(type, "gpt2"))
        rc = gpt2_config(o, path, &c, e);
    else
        rc = err_set(e, -EINVAL, "%s: \"model_type\" %s%s%s: fuyou reads llama, mistral, qwen2 "
                     "and gpt2", path, type ? "\"" : "", type ? type : "missing",
                     type ? "\"" : "");
    if (!rc) {
        config_name(path, &c);
        Err why;
        rc = model_validate(&c, &why);
        if (rc)
            err_set(e, rc, "%s: %s", path, why.msg);
    }
    json_decref(o);
    if (!rc)
        *out = c;
    return rc;
}
