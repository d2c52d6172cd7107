/* model_hf: a model from a Hugging Face config.json (model_load, model.h): the architecture as
 * transformers' LlamaConfig, Qwen2Config, MistralConfig and GPT2Config write it. Every field
 * that changes what the model computes is read into the ModelConfig or checked against what
 * fuyou's blocks compute (the tables gpt2_fields and llama_fields), and refused naming the
 * field and its value where they differ, so a config never loads as a different model than the
 * one it describes. Dropout is the one exception: fuyou trains without it, and refusing it
 * would refuse every stock GPT-2 folder (0.1), so its rates load and come back as a notice for
 * the caller to print. The weights' torch_dtype is not the training's: a model trains in bf16
 * unless told otherwise (--dtype). */
#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
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

/* An integer of a config: its key, the largest value it may take, whether it must be there,
 * and the ModelConfig member it fills (offsetof). */
typedef struct IntKey {
    const char *key;
    int max;
    bool required;
    size_t member;
} IntKey;

#define INT_KEY(key, max, required, member) {key, max, required, offsetof(ModelConfig, member)}

/* Every key of keys[0..n) into c, in order: 0, or the first one's error (get_int). */
static int get_ints(const json_t *o, const char *path, const IntKey *keys, size_t n,
                    ModelConfig *c, Err *e)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = get_int(o, path, keys[i].key, keys[i].max, keys[i].required,
                     (int *)((char *)c + keys[i].member), e);
    return rc;
}

/* v as a message quotes it: a number in %.9g (enough to tell two floats apart), else its JSON
 * (a string in quotes), cut to fit buf. */
static const char *value_text(const json_t *v, char *buf, size_t n)
{
    if (json_is_number(v)) {
        snprintf(buf, n, "%.9g", json_number_value(v));
        return buf;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, n, "%s", s ? s : "(unprintable)");
    free(s);
    return buf;
}

/* What a field of the config must say for fuyou's block to compute the model it describes. */
typedef enum FieldRule {
    RULE_FALSE,   /* absent, null or false: a part the block does not have */
    RULE_TRUE,    /* absent, null or true: a part the block always has */
    RULE_NAMES,   /* absent, null, or a string among names: the function the block computes */
    RULE_EQUALS,  /* absent, null, or the number value */
    RULE_FLOAT,   /* absent, null, or a number that rounds to the float value, which the
                     kernels hard-code */
    RULE_DROPOUT, /* a rate from 0 to 1; above 0 it goes into the notice: not computed */
} FieldRule;

typedef struct MathField {
    const char *key;
    FieldRule rule;
    double value;            /* RULE_EQUALS, RULE_FLOAT */
    const char *names[4];    /* RULE_NAMES, up to a NULL */
    const char *computes;    /* what fuyou computes instead: the refusal's reason */
} MathField;

/* GPT2Config. Accepted without reading: reorder_and_upcast_attn, which changes the precision of
 * the scores only (q scaled before q k^T, the product and its softmax in fp32 under autocast):
 * fuyou's attention keeps scores and softmax in fp32 at every dtype. summary_* (dropout too)
 * belong to GPT2DoubleHeadsModel's classification head, which fuyou neither builds nor saves. */
static const MathField gpt2_fields[] = {
    {"activation_function", RULE_NAMES, 0, {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"},
     "fuyou's GPT-2 MLP computes gelu_new, GELU's tanh approximation (gelu_pytorch_tanh and "
     "gelu_fast are the same function)"},
    /* exec/cpu/gpt2_ops.c and exec/cuda/gpt2_kernels.cu add 1e-5f */
    {"layer_norm_epsilon", RULE_FLOAT, 1e-5, {NULL},
     "fuyou's GPT-2 layernorm adds 1e-05 (as a float)"},
    {"scale_attn_weights", RULE_TRUE, 0, {NULL},
     "fuyou's attention divides the scores by sqrt(head size)"},
    {"scale_attn_by_inverse_layer_idx", RULE_FALSE, 0, {NULL},
     "fuyou's attention does not divide the scores by the layer's number"},
    {"add_cross_attention", RULE_FALSE, 0, {NULL}, "fuyou's GPT-2 block has no cross-attention"},
    {"embd_pdrop", RULE_DROPOUT, 0, {NULL}, NULL},
    {"attn_pdrop", RULE_DROPOUT, 0, {NULL}, NULL},
    {"resid_pdrop", RULE_DROPOUT, 0, {NULL}, NULL},
};

/* LlamaConfig, MistralConfig, Qwen2Config; head_dim, the rotary embedding (and rope_fields)
 * and the sliding window are read in llama_config. hidden_activation is Gemma's name for
 * hidden_act, which transformers' Llama ignores; a config that names another activation there
 * is refused rather than guessed at. Accepted without reading: pretraining_tp, with which
 * transformers splits each projection's GEMM into that many slices and sums their products:
 * the same function, summed in another order. None of these model_types has q/k norms. */
static const MathField llama_fields[] = {
    {"hidden_act", RULE_NAMES, 0, {"silu", "swish"},
     "fuyou's Llama MLP computes SwiGLU, SiLU (swish) of the gate times up"},
    {"hidden_activation", RULE_NAMES, 0, {"silu", "swish"},
     "fuyou's Llama MLP computes SwiGLU, SiLU (swish) of the gate times up"},
    {"attention_bias", RULE_FALSE, 0, {NULL},
     "fuyou's Llama block has no biases on q, k, v and o (Qwen2's q/k/v biases come with "
     "model_type qwen2)"},
    {"mlp_bias", RULE_FALSE, 0, {NULL}, "fuyou's Llama block has no MLP biases"},
    {"attention_dropout", RULE_DROPOUT, 0, {NULL}, NULL},
};

/* The rotary embedding's, in the config or (transformers 5) in its rope_parameters. */
static const MathField rope_fields[] = {
    {"partial_rotary_factor", RULE_EQUALS, 1, {NULL},
     "fuyou's rotary embedding turns every dimension of a head"},
};

/* Whether v (present, not null) is what f's rule accepts. */
static bool field_ok(const MathField *f, const json_t *v)
{
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    switch (f->rule) {
    case RULE_FALSE:
        return json_is_false(v);
    case RULE_TRUE:
        return json_is_true(v);
    case RULE_NAMES:
        for (int i = 0; json_is_string(v) && i < 4 && f->names[i]; i++)
            if (!strcmp(json_string_value(v), f->names[i]))
                return true;
        return false;
    case RULE_EQUALS:
        return x == f->value;
    case RULE_FLOAT: /* in float's range first: converting a larger double is undefined */
        return fabs(x) <= FLT_MAX && (float)x == (float)f->value;
    case RULE_DROPOUT:
        return x >= 0 && x <= 1;
    }
    return false;
}

/* Checks o's fields against the table fs[0..n): 0, or -EINVAL naming the first that differs;
 * dropout rates above 0 appended to dropped (capacity cap) as "key rate". */
static int check_fields(const json_t *o, const char *path, const MathField *fs, size_t n,
                        char *dropped, size_t cap, Err *e)
{
    for (size_t i = 0; i < n; i++) {
        const MathField *f = &fs[i];
        const json_t *v = json_object_get(o, f->key);
        if (!v || json_is_null(v))
            continue;
        char text[80];
        if (!field_ok(f, v))
            return err_set(e, -EINVAL, "%s: \"%s\" is %s: %s", path, f->key,
                           value_text(v, text, sizeof text),
                           f->rule == RULE_DROPOUT ? "a dropout rate is a number from 0 to 1"
                                                   : f->computes);
        if (f->rule == RULE_DROPOUT && json_number_value(v) > 0 && dropped)
            err_append(dropped, cap, "%s%s %s", *dropped ? ", " : "", f->key,
                       value_text(v, text, sizeof text));
    }
    return 0;
}

/* The rotary embedding: rope_theta and rope_scaling as transformers 4 writes them, or one
 * rope_parameters object with rope_theta inside (transformers 5); rope_type "default" (no
 * scaling) or "llama3"; over every dimension of a head (rope_fields). */
static int llama_rope(const json_t *o, const char *path, ModelConfig *c, Err *e)
{
    const json_t *s = json_object_get(o, "rope_parameters");
    int rc = check_fields(o, path, rope_fields, 1, NULL, 0, e);
    if (rc)
        return rc;
    if (json_is_object(s)) {
        rc = check_fields(s, path, rope_fields, 1, NULL, 0, e);
        if (!rc)
            rc = get_real(s, path, "rope_theta", &c->rope_theta, e);
        if (rc)
            return rc;
    } else {
        rc = get_real(o, path, "rope_theta", &c->rope_theta, e);
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
    if ((rc = get_real(s, path, "factor", &r->factor, e)) ||
        (rc = get_real(s, path, "low_freq_factor", &r->low_freq_factor, e)) ||
        (rc = get_real(s, path, "high_freq_factor", &r->high_freq_factor, e)))
        return rc;
    return get_int(s, path, "original_max_position_embeddings", MODEL_MAX_SEQ, true,
                   &r->original_max_seq, e);
}

/* LlamaConfig, MistralConfig, Qwen2Config: the Llama block (Qwen2's q/k/v biases always on);
 * dropout rates above 0 appended to dropped (capacity cap). */
static int llama_config(const json_t *o, const char *path, const char *type, ModelConfig *c,
                        char *dropped, size_t cap, Err *e)
{
    static const IntKey ints[] = {
        INT_KEY("num_hidden_layers", MODEL_MAX_LAYERS, true, n_layer),
        INT_KEY("hidden_size", MODEL_MAX_HIDDEN, true, d_model),
        INT_KEY("num_attention_heads", MODEL_MAX_HIDDEN, true, n_head),
        INT_KEY("num_key_value_heads", MODEL_MAX_HIDDEN, false, n_kv_head),
        INT_KEY("intermediate_size", MODEL_MAX_FFN, true, d_ff),
        INT_KEY("vocab_size", MODEL_MAX_VOCAB, true, vocab),
        INT_KEY("max_position_embeddings", MODEL_MAX_SEQ, true, max_seq),
    };
    c->arch = ARCH_LLAMA;
    c->tied = false;
    c->qkv_bias = !strcmp(type, "qwen2");
    int rc = get_ints(o, path, ints, sizeof ints / sizeof *ints, c, e);
    if (rc || (rc = get_real(o, path, "rms_norm_eps", &c->norm_eps, e)) ||
        (rc = get_bool(o, path, "tie_word_embeddings", &c->tied, e)) ||
        (rc = check_fields(o, path, llama_fields, sizeof llama_fields / sizeof *llama_fields,
                           dropped, cap, e)) ||
        (rc = llama_rope(o, path, c, e)))
        return rc;
    int head_dim = 0, window = 0;
    if ((rc = get_int(o, path, "head_dim", MODEL_MAX_HIDDEN, false, &head_dim, e)))
        return rc;
    if (head_dim && (int64_t)head_dim * c->n_head != c->d_model)
        return err_set(e, -EINVAL, "%s: \"head_dim\" %d is not hidden_size / "
                       "num_attention_heads (%d / %d): fuyou's heads are hidden / heads wide",
                       path, head_dim, c->d_model, c->n_head);
    /* The sliding window (Mistral's; Qwen2's when use_sliding_window, false by default):
     * attention over a sequence no longer than the window is exact attention, so the window
     * bounds the sequences trained on, in every layer (Qwen2's max_window_layers, which says
     * which layers slide, changes nothing then) */
    bool sliding = strcmp(type, "qwen2") != 0;
    if ((rc = get_int(o, path, "sliding_window", INT_MAX, false, &window, e)) ||
        (rc = get_bool(o, path, "use_sliding_window", &sliding, e)))
        return rc;
    if (sliding && window > 0 && window < c->max_seq)
        c->max_seq = window;
    return 0;
}

/* GPT2Config: the GPT-2 block; dropout rates above 0 appended to dropped (capacity cap). */
static int gpt2_config(const json_t *o, const char *path, ModelConfig *c, char *dropped,
                       size_t cap, Err *e)
{
    static const IntKey ints[] = {
        INT_KEY("n_layer", MODEL_MAX_LAYERS, true, n_layer),
        INT_KEY("n_embd", MODEL_MAX_HIDDEN, true, d_model),
        INT_KEY("n_head", MODEL_MAX_HIDDEN, true, n_head),
        INT_KEY("vocab_size", MODEL_MAX_VOCAB, true, vocab),
        INT_KEY("n_positions", MODEL_MAX_SEQ, true, max_seq),
    };
    c->arch = ARCH_GPT2;
    c->tied = true;
    int rc = get_ints(o, path, ints, sizeof ints / sizeof *ints, c, e);
    c->d_ff = 4 * c->d_model; /* unless n_inner says otherwise */
    if (rc || (rc = get_int(o, path, "n_inner", MODEL_MAX_FFN, false, &c->d_ff, e)) ||
        (rc = get_bool(o, path, "tie_word_embeddings", &c->tied, e)))
        return rc;
    return check_fields(o, path, gpt2_fields, sizeof gpt2_fields / sizeof *gpt2_fields,
                        dropped, cap, e);
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

int model_load_hf(const char *path, ModelConfig *out, ModelNotice *notice, Err *e)
{
    if (notice)
        notice->msg[0] = 0;
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
    char dropped[256] = "";
    const json_t *t = json_object_get(o, "model_type");
    const char *type = json_is_string(t) ? json_string_value(t) : NULL;
    if (!json_is_object(o))
        rc = err_set(e, -EINVAL, "%s: not a JSON object", path);
    else if (type && (!strcmp(type, "llama") || !strcmp(type, "mistral") ||
                      !strcmp(type, "qwen2")))
        rc = llama_config(o, path, type, &c, dropped, sizeof dropped, e);
    else if (type && !strcmp(type, "gpt2"))
        rc = gpt2_config(o, path, &c, dropped, sizeof dropped, e);
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
    if (!rc && notice && *dropped)
        snprintf(notice->msg, sizeof notice->msg, "%s: %s ignored: fuyou trains without dropout",
                 path, dropped);
    return rc;
}
