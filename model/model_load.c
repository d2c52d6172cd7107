/* model_load: a model from a preset name, a model ini ([model] section; docs/models-and-hardware.md) or
 * a Hugging Face folder or config.json (model_hf.h), every value checked where it is read; see
 * model.h. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <sys/stat.h>
#include <unistd.h>

#include "inifile.h"
#include "model.h"
#include "model_hf.h"

/* The model ini: one [model] section. */
typedef struct ModelIni {
    ModelConfig c;
    unsigned seen; /* bit per key in model_keys */
} ModelIni;

typedef enum KeyKind { MK_NAME, MK_SIZE, MK_BOOL, MK_DTYPE, MK_ARCH, MK_REAL } KeyKind;

typedef struct ModelKey {
    const char *key;
    KeyKind kind;
    size_t offset;   /* in ModelConfig */
    int max;         /* sizes: the largest (docs/fuyou-sim.md, "Limits") */
    bool required;
} ModelKey;

#define KEY(k, kind, field, max, req) {k, kind, offsetof(ModelConfig, field), max, req}
static const ModelKey model_keys[] = {
    KEY("name", MK_NAME, name, 0, false),
    KEY("arch", MK_ARCH, arch, 0, false),
    KEY("layers", MK_SIZE, n_layer, MODEL_MAX_LAYERS, true),
    KEY("hidden", MK_SIZE, d_model, MODEL_MAX_HIDDEN, true),
    KEY("heads", MK_SIZE, n_head, MODEL_MAX_HIDDEN, true),
    KEY("kv_heads", MK_SIZE, n_kv_head, MODEL_MAX_HIDDEN, false),
    KEY("ffn", MK_SIZE, d_ff, MODEL_MAX_FFN, false),
    KEY("vocab", MK_SIZE, vocab, MODEL_MAX_VOCAB, true),
    KEY("max_seq", MK_SIZE, max_seq, MODEL_MAX_SEQ, true),
    KEY("tied", MK_BOOL, tied, 0, false),
    KEY("qkv_bias", MK_BOOL, qkv_bias, 0, false),
    KEY("rope_theta", MK_REAL, rope_theta, 0, false),
    KEY("norm_eps", MK_REAL, norm_eps, 0, false),
    KEY("rope_scaling_factor", MK_REAL, rope_scaling.factor, 0, false),
    KEY("rope_low_freq_factor", MK_REAL, rope_scaling.low_freq_factor, 0, false),
    KEY("rope_high_freq_factor", MK_REAL, rope_scaling.high_freq_factor, 0, false),
    KEY("rope_original_max_seq", MK_SIZE, rope_scaling.original_max_seq, MODEL_MAX_SEQ, false),
    KEY("dtype", MK_DTYPE, dtype, 0, false),
};
#undef KEY
enum { N_MODEL_KEYS = sizeof model_keys / sizeof model_keys[0] };
_Static_assert(N_MODEL_KEYS <= 32, "one bit a key in ModelIni.seen");

static int key_index(const char *key)
{
    for (int k = 0; k < N_MODEL_KEYS; k++)
        if (!strcmp(key, model_keys[k].key))
            return k;
    return -1;
}

static bool model_section_ok(void *user, const char *section)
{
    (void)user;
    return !strcmp(section, "model");
}

static int set_key(ModelConfig *c, const ModelKey *k, const char *value, Err *e)
{
    void *field = (char *)c + k->offset;
    long v;
    double x;
    switch (k->kind) {
    case MK_NAME:
        if (!*value || strlen(value) >= sizeof c->name)
            return err_set(e, -EINVAL, "name must be 1 to %zu characters", sizeof c->name - 1);
        strcpy(c->name, value);
        return 0;
    case MK_ARCH:
        for (int a = 0; a < ARCH_COUNT; a++)
            if (!strcasecmp(value, arch_name((Arch)a)))
                return *(Arch *)field = (Arch)a, 0;
        return err_set(e, -EINVAL, "arch: expected gpt2 or llama, got '%s'", value);
    case MK_BOOL:
        return inifile_bool(value, field) ? err_set(e, -EINVAL, "%s: expected true or false, "
                                                    "got '%s'", k->key, value) : 0;
    case MK_DTYPE:
        return dtype_parse(value, field) ? err_set(e, -EINVAL, "dtype: expected bf16, fp16 or "
                                                   "fp32, got '%s'", value) : 0;
    case MK_REAL:
        if (inifile_double(value, &x) || x <= 0)
            return err_set(e, -EINVAL, "%s: expected a positive number, got '%s'", k->key,
                           value);
        *(double *)field = x;
        return 0;
    case MK_SIZE:
        if (inifile_int(value, &v) || v <= 0 || v > k->max)
            return err_set(e, -EINVAL, "%s: expected a positive integer of at most %d, got "
                           "'%s'", k->key, k->max, value);
        *(int *)field = (int)v;
        return 0;
    }
    return -EINVAL;
}

static int model_key(void *user, const IniLoc *loc, const char *section, const char *key,
                     const char *value, Err *e)
{
    (void)loc;
    (void)section;
    ModelIni *m = user;
    int k = key_index(key);
    if (k < 0) {
        char names[400] = "";
        for (int i = 0; i < N_MODEL_KEYS; i++)
            err_append(names, sizeof names, "%s%s", i ? ", " : "", model_keys[i].key);
        return err_set(e, -EINVAL, "unknown key '%s' in [model]; the keys are %s", key, names);
    }
    if (m->seen & (1u << k))
        return err_set(e, -EINVAL, "key '%s' given twice", key);
    m->seen |= 1u << k;
    return set_key(&m->c, &model_keys[k], value, e);
}

/* A model ini's defaults for the keys it leaves out: the name from the file, GPT-2's 4h MLP
 * (Llama has no such rule: its ffn is required) and tied head (Llama's: untied, as Hugging
 * Face's LlamaConfig). */
static int model_defaults(ModelIni *m, const char *path, Err *e)
{
    for (int k = 0; k < N_MODEL_KEYS; k++)
        if (model_keys[k].required && !(m->seen & (1u << k)))
            return err_set(e, -EINVAL, "%s: [model] lacks required key '%s'", path,
                           model_keys[k].key);
    if (!(m->seen & (1u << key_index("name")))) {
        const char *base = strrchr(path, '/');
        snprintf(m->c.name, sizeof m->c.name, "%s", base ? base + 1 : path);
    }
    if (!(m->seen & (1u << key_index("ffn")))) {
        if (m->c.arch == ARCH_LLAMA)
            return err_set(e, -EINVAL, "%s: [model] lacks key 'ffn' (arch = llama: the SwiGLU's "
                           "intermediate size)", path);
        m->c.d_ff = 4 * m->c.d_model;
    }
    if (m->c.arch == ARCH_LLAMA && !(m->seen & (1u << key_index("tied"))))
        m->c.tied = false;
    return 0;
}

int model_load(const char *name_or_path, ModelConfig *out, Err *e)
{
    return model_load_noticed(name_or_path, out, NULL, e);
}

int model_load_noticed(const char *name_or_path, ModelConfig *out, ModelNotice *notice, Err *e)
{
    if (notice)
        notice->msg[0] = 0;
    const ModelConfig *p = model_preset_find(name_or_path);
    if (p) {
        *out = *p;
        return 0;
    }
    struct stat st;
    bool dir = stat(name_or_path, &st) == 0 && S_ISDIR(st.st_mode);
    size_t n = strlen(name_or_path);
    bool json = n >= 5 && !strcmp(name_or_path + n - 5, ".json");
    if (!dir && !json && !strchr(name_or_path, '/') && !strstr(name_or_path, ".ini")) {
        char names[512] = "";
        for (int i = 0; i < model_preset_count(); i++)
            err_append(names, sizeof names, "%s%s", i ? ", " : "", model_preset_at(i)->name);
        return err_set(e, -ENOENT, "unknown model '%s'; presets: %s; or give a model ini, a "
                       "Hugging Face model folder or its config.json", name_or_path, names);
    }
    if (dir) {
        char config[4096];
        if (snprintf(config, sizeof config, "%s/config.json", name_or_path) >= (int)sizeof config)
            return err_set(e, -ENAMETOOLONG, "%s: path too long", name_or_path);
        if (access(config, F_OK))
            return err_set(e, -ENOENT, "%s is a folder without a config.json: give a Hugging "
                           "Face model folder, a model ini or a preset", name_or_path);
        return model_load_hf(config, out, notice, e);
    }
    if (json)
        return model_load_hf(name_or_path, out, notice, e);
    ModelIni m = {.c = {.tied = true, .dtype = DTYPE_BF16}};
    IniSchema schema = {model_section_ok, model_key, "[model]"};
    int rc = inifile_parse_file(name_or_path, &schema, &m, e);
    if (!rc)
        rc = model_defaults(&m, name_or_path, e);
    if (rc)
        return rc;
    Err why;
    rc = model_validate(&m.c, &why);
    if (rc)
        return err_set(e, rc, "%s: %s", name_or_path, why.msg);
    *out = m.c;
    return 0;
}
