/* model: presets, the model ini loader and parameter counts; see model.h. */
#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "inifile.h"

size_t dtype_bytes(DType t)
{
    return t == DTYPE_FP32 ? 4 : 2;
}

size_t grad_sum_bytes(size_t grad_bytes, bool first)
{
    return grad_bytes + (first ? 4 : 8);
}

const char *dtype_name(DType t)
{
    static const char *names[] = {"fp32", "bf16", "fp16"};
    return names[t];
}

int dtype_parse(const char *s, DType *out)
{
    static const struct { const char *name; DType t; } table[] = {
        {"fp32", DTYPE_FP32}, {"float32", DTYPE_FP32}, {"bf16", DTYPE_BF16},
        {"bfloat16", DTYPE_BF16}, {"fp16", DTYPE_FP16}, {"float16", DTYPE_FP16},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcasecmp(s, table[i].name))
            return *out = table[i].t, 0;
    return -EINVAL;
}

#define GPT(nm, L, h, a, V, S) \
    {.name = nm, .n_layer = L, .d_model = h, .n_head = a, .d_ff = 4 * (h), .vocab = V, \
     .max_seq = S, .tied = true, .dtype = DTYPE_BF16}

/* GPT-2: Radford et al. 2019 and the released checkpoints (n_ctx 1024, vocab 50257).
 * GPT-3: Brown et al. 2020, table 2.1 (n_ctx 2048, the GPT-2 tokenizer). Two rows of that table are
 * inconsistent with d_head: XL lists 24 heads of 128 for d_model 2048 (we use 16 heads of 128) and
 * 13B lists d_model 5140 for 40 heads of 128 (we use 5120, as every reproduction does).
 * gpt-70b: the 70B shape used by the Fuyou paper's evaluation (80 layers, hidden 8192, 64 heads)
 * in GPT-3 form (4h MLP, vocab 50257, seq 2048): 64.9B parameters counted this way. */
static const ModelConfig presets[] = {
    /* byte-level (vocab 256) and small enough to train visibly on two CPU cores in a minute */
    GPT("gpt2-tiny", 4, 128, 4, 256, 256),
    GPT("gpt2-124m", 12, 768, 12, 50257, 1024),
    GPT("gpt2-355m", 24, 1024, 16, 50257, 1024),
    GPT("gpt2-774m", 36, 1280, 20, 50257, 1024),
    GPT("gpt2-1.5b", 48, 1600, 25, 50257, 1024),
    GPT("gpt3-125m", 12, 768, 12, 50257, 2048),
    GPT("gpt3-350m", 24, 1024, 16, 50257, 2048),
    GPT("gpt3-760m", 24, 1536, 16, 50257, 2048),
    GPT("gpt3-1.3b", 24, 2048, 16, 50257, 2048),
    GPT("gpt3-2.7b", 32, 2560, 32, 50257, 2048),
    GPT("gpt3-6.7b", 32, 4096, 32, 50257, 2048),
    GPT("gpt3-13b", 40, 5120, 40, 50257, 2048),
    GPT("gpt3-175b", 96, 12288, 96, 50257, 2048),
    GPT("gpt-70b", 80, 8192, 64, 50257, 2048),
};

int model_preset_count(void)
{
    return (int)(sizeof presets / sizeof presets[0]);
}

const ModelConfig *model_preset_at(int i)
{
    return i >= 0 && i < model_preset_count() ? &presets[i] : NULL;
}

const ModelConfig *model_preset_find(const char *name)
{
    for (int i = 0; i < model_preset_count(); i++)
        if (!strcasecmp(presets[i].name, name))
            return &presets[i];
    return NULL;
}

int64_t model_head_dim(const ModelConfig *c)
{
    return c->d_model / c->n_head;
}

int64_t model_block_params(const ModelConfig *c)
{
    int64_t h = c->d_model, f = c->d_ff;
    int64_t ln = 2 * h;                     /* gain and bias */
    int64_t qkv = 3 * h * h + 3 * h;
    int64_t proj = h * h + h;
    int64_t fc1 = f * h + f, fc2 = h * f + h;
    return 2 * ln + qkv + proj + fc1 + fc2;
}

int64_t model_embed_params(const ModelConfig *c)
{
    int64_t h = c->d_model;
    int64_t wte = (int64_t)c->vocab * h, wpe = (int64_t)c->max_seq * h;
    return wte + wpe + 2 * h + (c->tied ? 0 : wte);
}

int64_t model_padded_vocab(const ModelConfig *c)
{
    return ((int64_t)c->vocab + MODEL_VOCAB_ALIGN - 1) / MODEL_VOCAB_ALIGN * MODEL_VOCAB_ALIGN;
}

int64_t model_param_count(const ModelConfig *c)
{
    return c->n_layer * model_block_params(c) + model_embed_params(c);
}

/* Each size's limit, in model_keys order from MKEY_LAYERS. */
static const int size_max[] = {MODEL_MAX_LAYERS, MODEL_MAX_HIDDEN, MODEL_MAX_HIDDEN,
                               MODEL_MAX_FFN, MODEL_MAX_VOCAB, MODEL_MAX_SEQ};

int model_validate(const ModelConfig *c, Err *e)
{
    const struct { const char *key; int v; } pos[] = {
        {"layers", c->n_layer}, {"hidden", c->d_model}, {"heads", c->n_head},
        {"ffn", c->d_ff}, {"vocab", c->vocab}, {"max_seq", c->max_seq},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0 || pos[i].v > size_max[i])
            return err_set(e, -EINVAL, "model %s: %s must be a positive integer of at most %d "
                           "(got %d)", c->name, pos[i].key, size_max[i], pos[i].v);
    if (c->d_model % c->n_head)
        return err_set(e, -EINVAL, "model %s: heads (%d) must divide hidden (%d)", c->name,
                       c->n_head, c->d_model);
    return 0;
}

/* The model ini: one [model] section. */
typedef struct ModelIni {
    ModelConfig c;
    unsigned seen; /* bit per key in model_keys */
} ModelIni;

enum { MKEY_NAME, MKEY_LAYERS, MKEY_HIDDEN, MKEY_HEADS, MKEY_FFN, MKEY_VOCAB, MKEY_MAX_SEQ,
       MKEY_TIED, MKEY_DTYPE, MKEY_COUNT };
static const char *model_keys[MKEY_COUNT] = {"name", "layers", "hidden", "heads", "ffn", "vocab",
                                             "max_seq", "tied", "dtype"};

static bool model_section_ok(void *user, const char *section)
{
    (void)user;
    return !strcmp(section, "model");
}

static int model_key(void *user, const IniLoc *loc, const char *section, const char *key,
                     const char *value, Err *e)
{
    (void)loc;
    (void)section;
    ModelIni *m = user;
    int k = 0;
    while (k < MKEY_COUNT && strcmp(key, model_keys[k]))
        k++;
    if (k == MKEY_COUNT)
        return err_set(e, -EINVAL, "unknown key '%s' in [model]; the keys are name, layers, "
                       "hidden, heads, ffn, vocab, max_seq, tied, dtype", key);
    if (m->seen & (1u << k))
        return err_set(e, -EINVAL, "key '%s' given twice", key);
    m->seen |= 1u << k;
    if (k == MKEY_NAME) {
        if (!*value || strlen(value) >= sizeof m->c.name)
            return err_set(e, -EINVAL, "name must be 1 to %zu characters",
                           sizeof m->c.name - 1);
        strcpy(m->c.name, value);
        return 0;
    }
    if (k == MKEY_TIED)
        return inifile_bool(value, &m->c.tied) ? err_set(e, -EINVAL, "tied: expected true or "
                                                         "false, got '%s'", value) : 0;
    if (k == MKEY_DTYPE)
        return dtype_parse(value, &m->c.dtype) ? err_set(e, -EINVAL, "dtype: expected bf16, "
                                                         "fp16 or fp32, got '%s'", value) : 0;
    long v;
    int max = size_max[k - MKEY_LAYERS];
    if (inifile_int(value, &v) || v <= 0 || v > max)
        return err_set(e, -EINVAL, "%s: expected a positive integer of at most %d, got '%s'",
                       key, max, value);
    int *fields[] = {[MKEY_LAYERS] = &m->c.n_layer, [MKEY_HIDDEN] = &m->c.d_model,
                     [MKEY_HEADS] = &m->c.n_head, [MKEY_FFN] = &m->c.d_ff,
                     [MKEY_VOCAB] = &m->c.vocab, [MKEY_MAX_SEQ] = &m->c.max_seq};
    *fields[k] = (int)v;
    return 0;
}

int model_load(const char *name_or_path, ModelConfig *out, Err *e)
{
    const ModelConfig *p = model_preset_find(name_or_path);
    if (p) {
        *out = *p;
        return 0;
    }
    if (!strchr(name_or_path, '/') && !strstr(name_or_path, ".ini")) {
        char names[512] = "";
        for (int i = 0; i < model_preset_count(); i++)
            err_append(names, sizeof names, "%s%s", i ? ", " : "", presets[i].name);
        return err_set(e, -ENOENT, "unknown model '%s'; presets: %s; or give a model ini path",
                       name_or_path, names);
    }
    ModelIni m = {.c = {.tied = true, .dtype = DTYPE_BF16}};
    IniSchema schema = {model_section_ok, model_key, "[model]"};
    int rc = inifile_parse_file(name_or_path, &schema, &m, e);
    if (rc)
        return rc;
    static const int required[] = {MKEY_LAYERS, MKEY_HIDDEN, MKEY_HEADS, MKEY_VOCAB,
                                   MKEY_MAX_SEQ};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!(m.seen & (1u << required[i])))
            return err_set(e, -EINVAL, "%s: [model] lacks required key '%s'", name_or_path,
                           model_keys[required[i]]);
    if (!(m.seen & (1u << MKEY_NAME))) {
        const char *base = strrchr(name_or_path, '/');
        snprintf(m.c.name, sizeof m.c.name, "%s", base ? base + 1 : name_or_path);
    }
    if (!(m.seen & (1u << MKEY_FFN)))
        m.c.d_ff = 4 * m.c.d_model;
    Err why;
    rc = model_validate(&m.c, &why);
    if (rc)
        return err_set(e, rc, "%s: %s", name_or_path, why.msg);
    *out = m.c;
    return 0;
}
