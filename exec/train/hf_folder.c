/* hf_folder: Hugging Face model folders read tensor by tensor into a sink; see hf_folder.h. */
#include "hf_folder.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_hf.h"
#include "regfile.h"
#include "safetensors.h"

enum { PATH_CAP = 4200, FILE_CAP = PATH_CAP + 64, SHARD_NAME_CAP = 256,
       SHARD_PATH_CAP = PATH_CAP + SHARD_NAME_CAP + 2, CHUNK = 4096 };

/* ---- Layout names and shapes ---- */

void hf_transpose(float *dst, const float *src, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}

int hf_file_shape(const ParamTensor *t, int64_t shape[2])
{
    if (t->rows == 1) {
        shape[0] = t->cols;
        return 1;
    }
    shape[0] = t->conv1d ? t->cols : t->rows;
    shape[1] = t->conv1d ? t->rows : t->cols;
    return 2;
}

/* Buffers that a Hugging Face file may hold beside the parameters, derived from the config:
 * GPT-2's causal mask, older Llama exports' rotary frequencies. */
static bool ignorable(const ModelConfig *c, const char *name)
{
    static const char *const gpt2[] = {".attn.bias", ".attn.masked_bias"};
    static const char *const llama[] = {".rotary_emb.inv_freq"};
    bool is_llama = c->arch == ARCH_LLAMA;
    const char *const *s = is_llama ? llama : gpt2;
    size_t n = strlen(name), k = is_llama ? 1 : 2;
    for (size_t i = 0; i < k; i++)
        if (n > strlen(s[i]) && !strcmp(name + n - strlen(s[i]), s[i]))
            return true;
    return false;
}

/* The token embedding, which a tied head is. */
static const ParamTensor *embedding(const ModelConfig *c, const ModelLayout *l)
{
    return layout_find(l, c->arch == ARCH_LLAMA ? "model.embed_tokens.weight"
                                                : "transformer.wte.weight");
}

/* The file's tensor st has the dtype and the shape that t has in a Hugging Face file. */
static int check_tensor(const char *path, const ModelConfig *c, const ParamTensor *t,
                        const StTensor *st, Err *e)
{
    if (strcmp(st->dtype, "F32") && strcmp(st->dtype, "F16") && strcmp(st->dtype, "BF16"))
        return err_set(e, -EINVAL, "%s: tensor %s is %s; F32, F16 or BF16 expected", path,
                       st->name, st->dtype);
    int64_t want[2];
    int nd = hf_file_shape(t, want);
    if (st->ndim == nd && st->shape[0] == want[0] && (nd == 1 || st->shape[1] == want[1]))
        return 0;
    return err_set(e, -EINVAL, "%s: tensor %s has shape [%lld%s%lld], %s wants [%lld%s%lld]",
                   path, st->name, st->ndim ? (long long)st->shape[0] : 0LL,
                   st->ndim > 1 ? ", " : "", st->ndim > 1 ? (long long)st->shape[1] : 0LL,
                   c->name, (long long)want[0], nd > 1 ? ", " : "", nd > 1 ? (long long)want[1]
                                                                              : 0LL);
}

/* ---- Where the weights are ---- */

/* What path names: the weights (one .safetensors file, or an index), the folder of the
 * shards, and the config.json to check ("" for none). */
typedef struct Source {
    char weights[FILE_CAP];
    bool index;
    char dir[PATH_CAP];
    char config[FILE_CAP];
} Source;

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The folder of a file's path into dir ("." for a bare name). */
static void parent(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, n, ".");
    else if (slash == path)
        snprintf(dir, n, "/");
    else
        snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

void hf_folder_of(const char *path, char *dir, size_t n)
{
    char config[FILE_CAP];
    if (is_dir(path)) {
        snprintf(dir, n, "%s", path);
        return;
    }
    parent(path, dir, n);
    snprintf(config, sizeof config, "%s/config.json", dir);
    if (!ends_with(path, ".json") && !is_file(config))
        dir[0] = '\0';
}

bool hf_folder_has_weights(const char *dir)
{
    char path[FILE_CAP];
    snprintf(path, sizeof path, "%s/%s", dir, HF_SINGLE_FILE);
    if (is_file(path))
        return true;
    snprintf(path, sizeof path, "%s/%s", dir, HF_INDEX_FILE);
    return is_file(path);
}

/* A torch dtype's name ("bfloat16", "torch.bfloat16") or a safetensors one ("BF16"). */
static int dtype_named(const char *s, DType *out)
{
    if (s && !strncmp(s, "torch.", 6))
        s += 6;
    if (!s)
        return -ENOENT;
    if (!strcmp(s, "bfloat16") || !strcmp(s, "BF16"))
        *out = DTYPE_BF16;
    else if (!strcmp(s, "float16") || !strcmp(s, "F16"))
        *out = DTYPE_FP16;
    else if (!strcmp(s, "float32") || !strcmp(s, "F32"))
        *out = DTYPE_FP32;
    else
        return -ENOENT;
    return 0;
}

int hf_folder_dtype(const char *dir, DType *out)
{
    char path[FILE_CAP];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *root = json_load_file(path, 0, NULL);
    const char *name = NULL;
    if (json_unpack(root, "{s:s}", "torch_dtype", &name))
        json_unpack(root, "{s:s}", "dtype", &name); /* transformers 5's key */
    int rc = dtype_named(name, out);
    json_decref(root);
    if (!rc)
        return 0;
    /* no config says: the first tensor's, in the single file or the first shard listed */
    StFile st;
    snprintf(path, sizeof path, "%s/%s", dir, HF_SINGLE_FILE);
    if (!is_file(path)) {
        char index[FILE_CAP];
        snprintf(index, sizeof index, "%s/%s", dir, HF_INDEX_FILE);
        json_t *ix = json_load_file(index, 0, NULL);
        json_t *map = json_object_get(ix, "weight_map");
        const char *key;
        json_t *v;
        path[0] = '\0';
        json_object_foreach(map, key, v) {
            if (json_is_string(v)) {
                snprintf(path, sizeof path, "%s/%s", dir, json_string_value(v));
                break;
            }
        }
        json_decref(ix);
    }
    Err e;
    if (!path[0] || st_open(&st, path, &e))
        return -ENOENT;
    rc = st.n > 0 ? dtype_named(st.t[0].dtype, out) : -ENOENT;
    st_close(&st);
    return rc;
}

static int resolve(const char *path, Source *s, Err *e)
{
    memset(s, 0, sizeof *s);
    if (strlen(path) >= PATH_CAP - 64)
        return err_set(e, -ENAMETOOLONG, "%.80s...: path too long", path);
    bool folder = is_dir(path), is_config = !folder && (!strcmp(path, "config.json") ||
                                                        ends_with(path, "/config.json"));
    if (!folder && !is_config && !ends_with(path, ".json")) {
        snprintf(s->weights, sizeof s->weights, "%s", path); /* a lone file: no config */
        parent(path, s->dir, sizeof s->dir);
        return 0;
    }
    if (folder)
        snprintf(s->dir, sizeof s->dir, "%s", path);
    else
        parent(path, s->dir, sizeof s->dir);
    snprintf(s->config, sizeof s->config, "%s/config.json", s->dir);
    if (!is_file(s->config))
        s->config[0] = '\0';
    s->index = true;
    if (!folder && !is_config) { /* an index */
        snprintf(s->weights, sizeof s->weights, "%s", path);
        return 0;
    }
    /* transformers' order: the single file first, then the index */
    snprintf(s->weights, sizeof s->weights, "%s/%s", s->dir, HF_SINGLE_FILE);
    if (is_file(s->weights)) {
        s->index = false;
        return 0;
    }
    snprintf(s->weights, sizeof s->weights, "%s/%s", s->dir, HF_INDEX_FILE);
    if (is_file(s->weights))
        return 0;
    return err_set(e, -ENOENT, "%s: no %s or %s in the folder: fuyou reads safetensors weights "
                   "(a folder with pytorch_model.bin wants converting first)", s->dir,
                   HF_SINGLE_FILE, HF_INDEX_FILE);
}

/* ---- The weight map: which shard holds each tensor, under which name ---- */

typedef struct WeightMap {
    const char *where;           /* the file that lists the names: the index, or the one file */
    bool listed;                 /* the shards are an index's */
    char (*shard)[SHARD_PATH_CAP]; /* the shards' paths, sorted */
    int n_shards;
    int *shard_of;               /* (l->n) each layout tensor's shard; -1 while unlisted */
    char (*name)[ST_NAME_MAX];   /* (l->n) its name in the files */
    int head_shard;              /* a tied model's lm_head.weight: its shard, else -1 */
} WeightMap;

static void map_free(WeightMap *m)
{
    free(m->shard), free(m->shard_of), free(m->name);
    memset(m, 0, sizeof *m);
}

static int map_init(WeightMap *m, const char *where, int n_shards, const ModelLayout *l, Err *e)
{
    memset(m, 0, sizeof *m);
    m->where = where;
    m->head_shard = -1;
    m->n_shards = n_shards;
    m->shard = calloc((size_t)n_shards, sizeof *m->shard);
    m->shard_of = malloc((size_t)l->n * sizeof *m->shard_of);
    m->name = calloc((size_t)l->n, sizeof *m->name);
    if (!m->shard || !m->shard_of || !m->name) {
        map_free(m);
        return err_set(e, -ENOMEM, "out of memory reading %s", where);
    }
    for (int i = 0; i < l->n; i++)
        m->shard_of[i] = -1;
    return 0;
}

/* Lists the files' tensor name as held by shard k: a layout tensor, a tied model's head, or a
 * buffer to ignore; anything else, or a tensor under both its names, is an error. */
static int place(WeightMap *m, const ModelConfig *c, const ModelLayout *l, const char *name,
                 int k, Err *e)
{
    const ParamTensor *t = layout_find(l, name);
    if (!t && c->tied && !strcmp(name, "lm_head.weight")) {
        m->head_shard = k;
        return 0;
    }
    if (!t)
        return ignorable(c, name) ? 0 : err_set(e, -EINVAL, "%s: tensor %s has no place in %s "
                                                "(%d layers, hidden %d): the checkpoint is for "
                                                "another model", m->where, name, c->name,
                                                c->n_layer, c->d_model);
    /* the same tensor under both of its names: which one would win is the files' order */
    if (m->shard_of[t - l->t] >= 0)
        return err_set(e, -EINVAL, "%s: tensor %s is in the file twice (with and without "
                       "\"transformer.\")", m->where, t->name);
    if (strlen(name) >= sizeof *m->name)
        return err_set(e, -EINVAL, "%s: tensor name too long: %.60s...", m->where, name);
    m->shard_of[t - l->t] = k;
    strcpy(m->name[t - l->t], name);
    return 0;
}

static int map_complete(const WeightMap *m, const ModelLayout *l, Err *e)
{
    for (int i = 0; i < l->n; i++)
        if (m->shard_of[i] < 0)
            return err_set(e, -EINVAL, "%s: tensor %s is missing", m->where, l->t[i].name);
    return 0;
}

/* One file's tensors, all in shard 0. */
static int map_file(WeightMap *m, const Source *src, const StFile *s, const ModelConfig *c,
                    const ModelLayout *l, Err *e)
{
    int rc = map_init(m, src->weights, 1, l, e);
    if (!rc)
        snprintf(m->shard[0], sizeof *m->shard, "%s", s->path);
    for (int i = 0; !rc && i < s->n; i++)
        rc = place(m, c, l, s->t[i].name, 0, e);
    return rc;
}

/* A shard's name as an index may give it: a file beside the index, no path. */
static bool shard_name_ok(const char *name)
{
    return name[0] && name[0] != '.' && !strchr(name, '/') && strlen(name) < SHARD_NAME_CAP &&
           ends_with(name, ".safetensors");
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The index's weight_map (an object of tensor: shard) into m: its distinct shards, sorted, and
 * each name placed. */
static int map_weight_map(WeightMap *m, const Source *src, json_t *wm, const ModelConfig *c,
                          const ModelLayout *l, Err *e)
{
    size_t n = json_object_size(wm);
    const char **names = malloc((n ? n : 1) * sizeof *names), *key;
    if (!names)
        return err_set(e, -ENOMEM, "out of memory reading %s", src->weights);
    json_t *v;
    int rc = 0, k = 0;
    json_object_foreach(wm, key, v) {
        const char *shard = json_string_value(v);
        if (!rc && (!shard || !shard_name_ok(shard)))
            rc = err_set(e, -EINVAL, "%s: weight_map: tensor %s: expected the name of a "
                         ".safetensors file beside the index, got %s%.80s%s", src->weights, key,
                         shard ? "\"" : "", shard ? shard : "no string", shard ? "\"" : "");
        if (!rc)
            names[k++] = shard;
    }
    if (!rc)
        qsort(names, (size_t)k, sizeof *names, cmp_names);
    int distinct = 0;
    for (int i = 0; !rc && i < k; i++)
        if (!i || strcmp(names[i], names[i - 1]))
            names[distinct++] = names[i];
    if (!rc)
        rc = map_init(m, src->weights, distinct, l, e);
    m->listed = true;
    for (int i = 0; !rc && i < distinct; i++)
        snprintf(m->shard[i], sizeof *m->shard, "%s/%s", src->dir, names[i]);
    json_object_foreach(wm, key, v) {
        if (rc)
            break;
        const char **at = bsearch(&(const char *){json_string_value(v)}, names,
                                  (size_t)distinct, sizeof *names, cmp_names);
        rc = place(m, c, l, key, (int)(at - names), e);
    }
    free(names);
    return rc;
}

static int map_index(WeightMap *m, const Source *src, const ModelConfig *c,
                     const ModelLayout *l, Err *e)
{
    memset(m, 0, sizeof *m);
    FILE *f;
    int rc = regfile_fopen(src->weights, &f, e);
    if (rc)
        return rc;
    json_error_t je;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!root)
        return err_set(e, -EINVAL, "%s:%d: not JSON: %s", src->weights, je.line, je.text);
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm) || !json_object_size(wm))
        rc = err_set(e, -EINVAL, "%s: no \"weight_map\" object of tensor names and shards: not "
                     "a model.safetensors.index.json", src->weights);
    if (!rc)
        rc = map_weight_map(m, src, wm, c, l, e);
    json_decref(root);
    return rc;
}

/* ---- Reading ---- */

typedef struct Load {
    const ModelConfig *c;
    const ModelLayout *l;
    const HfSink *sink;
    WeightMap m;
    float *scratch;              /* a Conv1D weight as the file has it, before transposing */
    size_t scratch_cap;
} Load;

/* Shard k's header agrees with the map: every tensor it holds is one the map puts there under
 * that name (or a buffer to ignore), every tensor the map puts there is there, with its dtype
 * and shape. */
static int check_shard(const Load *ld, const StFile *s, int k, Err *e)
{
    const WeightMap *m = &ld->m;
    for (int i = 0; i < s->n; i++) {
        const char *name = s->t[i].name;
        const ParamTensor *t = layout_find(ld->l, name);
        int at;
        if (t)
            at = m->shard_of[t - ld->l->t];
        else if (ld->c->tied && !strcmp(name, "lm_head.weight"))
            at = m->head_shard;
        else if (ignorable(ld->c, name))
            continue;
        else
            return err_set(e, -EINVAL, "%s: tensor %s has no place in %s (%d layers, hidden "
                           "%d): the checkpoint is for another model", s->path, name,
                           ld->c->name, ld->c->n_layer, ld->c->d_model);
        if (at != k)
            return err_set(e, -EINVAL, "%s: holds tensor %s, which %s puts in %s", s->path,
                           name, m->where, at < 0 ? "no shard" : m->shard[at]);
        if (t && strcmp(m->name[t - ld->l->t], name))
            return err_set(e, -EINVAL, "%s: holds tensor %s, which %s names %s", s->path, name,
                           m->where, m->name[t - ld->l->t]);
    }
    for (int i = 0; i < ld->l->n; i++) {
        if (m->shard_of[i] != k)
            continue;
        const StTensor *st = st_find(s, m->name[i]);
        if (!st)
            return err_set(e, -EINVAL, "%s: tensor %s, which %s lists in it, is absent", s->path,
                           m->name[i], m->where);
        int rc = check_tensor(s->path, ld->c, &ld->l->t[i], st, e);
        if (rc)
            return rc;
    }
    const StTensor *head = m->head_shard == k ? st_find(s, "lm_head.weight") : NULL;
    if (m->head_shard == k && !head)
        return err_set(e, -EINVAL, "%s: tensor lm_head.weight, which %s lists in it, is absent",
                       s->path, m->where);
    return head ? check_tensor(s->path, ld->c, embedding(ld->c, ld->l), head, e) : 0;
}

/* Opens shard k and checks its header (check_shard); st_close(s) after, either way. */
static int open_shard(const Load *ld, int k, StFile *s, Err *e)
{
    const char *path = ld->m.shard[k];
    if (ld->m.listed && !is_file(path)) {
        memset(s, 0, sizeof *s);
        return err_set(e, -ENOENT, "%s: shard missing (%s lists it)", path, ld->m.where);
    }
    int rc = st_open(s, path, e);
    return rc ? rc : check_shard(ld, s, k, e);
}

/* Reads the file's tensor st into its place t through the sink. */
static int load_one(Load *ld, StFile *s, const StTensor *st, const ParamTensor *t, Err *e)
{
    float *dst = ld->sink->dest(ld->sink->user, t);
    if (!dst)
        return err_set(e, -ENOMEM, "out of memory for tensor %s of %s", t->name, s->path);
    int rc;
    if (!t->conv1d) {
        rc = st_read_f32(s, st, dst, e);
    } else {
        if (t->numel > ld->scratch_cap) {
            free(ld->scratch);
            ld->scratch_cap = 0;
            if (!(ld->scratch = malloc(t->numel * sizeof *ld->scratch)))
                return err_set(e, -ENOMEM, "out of memory for tensor %s of %s", t->name,
                               s->path);
            ld->scratch_cap = t->numel;
        }
        rc = st_read_f32(s, st, ld->scratch, e);
        if (!rc)
            hf_transpose(dst, ld->scratch, t->cols, t->rows);
    }
    return !rc && ld->sink->done ? ld->sink->done(ld->sink->user, t, dst, e) : rc;
}

/* Shard k's tensors with offsets in [begin, end), in the file's order (st_open sorts them by
 * offset: one sequential read, the others skipped). */
static int load_shard(Load *ld, int k, size_t begin, size_t end, Err *e)
{
    bool any = false;
    for (int i = 0; i < ld->l->n && !any; i++)
        any = ld->m.shard_of[i] == k && ld->l->t[i].offset >= begin &&
              ld->l->t[i].offset < end;
    if (!any)
        return 0;
    StFile s;
    int rc = open_shard(ld, k, &s, e);
    for (int i = 0; !rc && i < s.n; i++) {
        const ParamTensor *t = layout_find(ld->l, s.t[i].name);
        if (t && t->offset >= begin && t->offset < end)
            rc = load_one(ld, &s, &s.t[i], t, e);
    }
    st_close(&s);
    return rc;
}

/* A tied model takes a file's lm_head.weight only when it is the embedding bit for bit: an
 * untied model's own head would otherwise be dropped without a word. Compared in chunks, as
 * the files have them. */
static int check_tied_head(const Load *ld, Err *e)
{
    const ParamTensor *wte = embedding(ld->c, ld->l);
    const WeightMap *m = &ld->m;
    StFile hs, ws;
    int rc = open_shard(ld, m->head_shard, &hs, e);
    if (rc) {
        st_close(&hs);
        return rc;
    }
    rc = open_shard(ld, m->shard_of[wte - ld->l->t], &ws, e);
    float *a = malloc(2 * CHUNK * sizeof *a);
    if (!rc && !a)
        rc = err_set(e, -ENOMEM, "out of memory");
    StCursor hc = {.t = st_find(&hs, "lm_head.weight")};
    StCursor wc = {.t = rc ? NULL : st_find(&ws, m->name[wte - ld->l->t])};
    bool same = true;
    for (size_t at = 0; !rc && same && at < wte->numel; at += CHUNK) {
        size_t n = wte->numel - at < CHUNK ? wte->numel - at : CHUNK;
        rc = st_read_next(&hs, &hc, a, n, e);
        if (!rc)
            rc = st_read_next(&ws, &wc, a + CHUNK, n, e);
        same = rc || !memcmp(a, a + CHUNK, n * sizeof *a);
    }
    if (!rc && !same)
        rc = err_set(e, -EINVAL, "%s: lm_head.weight differs from %s: the file is of an untied "
                     "model and %s ties them (a model ini with tied = false loads it)", hs.path,
                     wte->name, ld->c->name);
    free(a);
    st_close(&ws);
    st_close(&hs);
    return rc;
}

static float *flat_dest(void *user, const ParamTensor *t)
{
    return (float *)user + t->offset;
}

HfSink hf_sink_flat(float *params)
{
    return (HfSink){.dest = flat_dest, .done = NULL, .user = params};
}

/* A part of a range hf_reader_read_values reads: layout tensor i's values [lo, hi), bytes
 * [at, end) of its shard, read ahead up to `ahead` (the end of the parts that follow on). */
typedef struct ReadPart {
    int i, shard;
    size_t lo, hi;
    uint64_t at, end, ahead;
} ReadPart;

struct HfReader {
    Load ld;
    Source src;
    /* hf_reader_read_values: where the next range starts; each shard (opened at its first
     * read) and each layout tensor's cursor in it; a range's parts; the Conv1D weight held
     * whole in `ours`, transposed (its layout index, -1: none) */
    size_t next;
    StFile *files;
    StCursor *cursor;
    ReadPart *parts;
    int conv;
    float *ours;
    size_t ours_cap;
};

/* Every shard opened into files[] and its header checked (what it holds, dtypes and shapes),
 * then that every tensor is listed, then the tied head: a missing or wrong tensor is found
 * before any is read. The shards stay open for the reads. */
static int check_all(Load *ld, StFile *files, Err *e)
{
    int rc = 0;
    for (int k = 0; !rc && k < ld->m.n_shards; k++)
        rc = open_shard(ld, k, &files[k], e);
    if (!rc)
        rc = map_complete(&ld->m, ld->l, e);
    if (!rc && ld->m.head_shard >= 0)
        rc = check_tied_head(ld, e);
    return rc;
}

static int reader_open(HfReader **out, const char *path, const ModelConfig *c,
                       const ModelLayout *l, bool check_config, Err *e)
{
    HfReader *r = calloc(1, sizeof *r);
    *out = r;
    if (!r)
        return err_set(e, -ENOMEM, "out of memory");
    r->ld = (Load){.c = c, .l = l};
    r->conv = -1;
    int rc;
    if ((rc = resolve(path, &r->src, e)) ||
        (check_config && r->src.config[0] && (rc = hf_check_config(r->src.config, c, e))))
        return rc;
    if (r->src.index) {
        rc = map_index(&r->ld.m, &r->src, c, l, e);
    } else {
        StFile s;
        rc = st_open(&s, r->src.weights, e);
        if (!rc)
            rc = map_file(&r->ld.m, &r->src, &s, c, l, e);
        st_close(&s);
    }
    if (rc)
        return rc;
    r->files = calloc((size_t)r->ld.m.n_shards, sizeof *r->files);
    r->cursor = calloc((size_t)l->n, sizeof *r->cursor);
    r->parts = calloc((size_t)l->n, sizeof *r->parts);
    if (!r->files || !r->cursor || !r->parts)
        return err_set(e, -ENOMEM, "out of memory");
    if ((rc = check_all(&r->ld, r->files, e)))
        return rc;
    /* every tensor's cursor in its shard (check_all found each one there) */
    for (int i = 0; i < l->n; i++)
        r->cursor[i] = (StCursor){.t = st_find(&r->files[r->ld.m.shard_of[i]], r->ld.m.name[i])};
    return 0;
}

int hf_reader_open(HfReader **r, const char *path, const ModelConfig *c, const ModelLayout *l,
                   Err *e)
{
    return reader_open(r, path, c, l, true, e);
}

int hf_reader_open_weights(HfReader **r, const char *path, const ModelConfig *c,
                           const ModelLayout *l, Err *e)
{
    return reader_open(r, path, c, l, false, e);
}

/* Layout tensor i, a Conv1D weight, whole in r->ours as the layout has it (transposed). */
static int hold_conv1d(HfReader *r, int i, Err *e)
{
    Load *ld = &r->ld;
    const ParamTensor *t = &ld->l->t[i];
    if (r->conv == i)
        return 0;
    r->conv = -1;
    if (t->numel > r->ours_cap || t->numel > ld->scratch_cap) {
        free(r->ours), free(ld->scratch);
        r->ours_cap = ld->scratch_cap = 0;
        r->ours = malloc(t->numel * sizeof *r->ours);
        ld->scratch = malloc(t->numel * sizeof *ld->scratch);
        if (!r->ours || !ld->scratch)
            return err_set(e, -ENOMEM, "out of memory for tensor %s", t->name);
        r->ours_cap = ld->scratch_cap = t->numel;
    }
    StFile *f = &r->files[ld->m.shard_of[i]];
    int rc = st_read_f32(f, r->cursor[i].t, ld->scratch, e);
    if (!rc)
        hf_transpose(r->ours, ld->scratch, t->cols, t->rows);
    r->conv = rc ? -1 : i;
    return rc;
}

static int part_cmp(const void *pa, const void *pb)
{
    const ReadPart *a = pa, *b = pb;
    if (a->shard != b->shard)
        return a->shard < b->shard ? -1 : 1;
    return a->at < b->at ? -1 : a->at > b->at;
}

/* The range's parts: the tensors it holds, cut to it, in their files' order (shard, offset),
 * so that a range is read front to back in each file; each part's read-ahead reaches the end
 * of the parts that follow on from it in its file. Their count. */
static int range_parts(HfReader *r, size_t begin, size_t end)
{
    const ModelLayout *l = r->ld.l;
    int n = 0;
    for (int i = 0; i < l->n; i++) {
        const ParamTensor *t = &l->t[i];
        size_t lo = t->offset > begin ? t->offset : begin;
        size_t hi = t->offset + t->numel < end ? t->offset + t->numel : end;
        if (lo >= hi)
            continue;
        int k = r->ld.m.shard_of[i];
        const StTensor *st = r->cursor[i].t;
        uint64_t es = (st->end - st->begin) / t->numel;
        uint64_t at = st_file_offset(&r->files[k], st) + (lo - t->offset) * es;
        r->parts[n++] = (ReadPart){i, k, lo, hi, at, at + (hi - lo) * es, 0};
    }
    qsort(r->parts, (size_t)n, sizeof *r->parts, part_cmp);
    for (int j = n - 1; j >= 0; j--) {
        ReadPart *p = &r->parts[j], *q = p + 1;
        p->ahead = j + 1 < n && q->shard == p->shard && q->at == p->end ? q->ahead : p->end;
    }
    return n;
}

int hf_reader_read_values(HfReader *r, size_t begin, size_t n, float *dst, Err *e)
{
    const ModelLayout *l = r->ld.l;
    if (begin != r->next)
        return err_set(e, -EINVAL, "internal: weights read at %zu, expected %zu", begin,
                       r->next);
    int count = range_parts(r, begin, begin + n), rc = 0;
    for (int j = 0; !rc && j < count; j++) {
        const ReadPart *p = &r->parts[j];
        const ParamTensor *t = &l->t[p->i];
        StFile *f = &r->files[p->shard];
        if (j && r->parts[j - 1].shard != p->shard) /* one file's blocks held at a time */
            st_drop_stream(&r->files[r->parts[j - 1].shard]);
        f->ahead = p->ahead;
        if (t->conv1d) {
            rc = hold_conv1d(r, p->i, e);
            if (!rc)
                memcpy(dst + (p->lo - begin), r->ours + (p->lo - t->offset),
                       (p->hi - p->lo) * sizeof *dst);
        } else {
            rc = st_read_next(f, &r->cursor[p->i], dst + (p->lo - begin), p->hi - p->lo, e);
        }
    }
    r->next = begin + n;
    return rc;
}

int hf_reader_read(HfReader *r, size_t begin, size_t end, const HfSink *sink, Err *e)
{
    r->ld.sink = sink;
    int rc = 0;
    for (int k = 0; !rc && k < r->ld.m.n_shards; k++)
        rc = load_shard(&r->ld, k, begin, end, e);
    return rc;
}

void hf_reader_set_pool(HfReader *r, WorkPool *wp)
{
    for (int k = 0; k < r->ld.m.n_shards; k++)
        r->files[k].wp = wp;
}

void hf_reader_close(HfReader *r)
{
    if (!r)
        return;
    for (int k = 0; r->files && k < r->ld.m.n_shards; k++)
        st_close(&r->files[k]);
    map_free(&r->ld.m);
    free(r->ld.scratch);
    free(r->files), free(r->cursor), free(r->parts);
    free(r->ours);
    free(r);
}

/* hf_load, and hf_load_weights without the config check: one reader over the whole layout. */
static int load(const char *path, const ModelConfig *c, const ModelLayout *l, const HfSink *sink,
                bool check_config, Err *e)
{
    HfReader *r;
    int rc = reader_open(&r, path, c, l, check_config, e);
    if (!rc)
        rc = hf_reader_read(r, 0, l->total, sink, e);
    hf_reader_close(r);
    return rc;
}

int hf_load(const char *path, const ModelConfig *c, const ModelLayout *l, const HfSink *sink,
            Err *e)
{
    return load(path, c, l, sink, true, e);
}

int hf_load_weights(const char *path, const ModelConfig *c, const ModelLayout *l,
                    const HfSink *sink, Err *e)
{
    return load(path, c, l, sink, false, e);
}

/* ---- config.json ---- */

int hf_check_config(const char *path, const ModelConfig *c, Err *e)
{
    ModelConfig f;
    int rc = model_load_hf(path, &f, NULL, e);
    if (rc)
        return rc;
    if (f.arch != c->arch)
        return err_set(e, -EINVAL, "%s: a model of the %s family, this run's %s is %s: the "
                       "weights are another model's", path, arch_name(f.arch), c->name,
                       arch_name(c->arch));
    bool llama = c->arch == ARCH_LLAMA;
    const struct { const char *gpt2, *llama; int file, run; bool flag; } field[] = {
        {"n_layer", "num_hidden_layers", f.n_layer, c->n_layer, false},
        {"n_embd", "hidden_size", f.d_model, c->d_model, false},
        {"n_head", "num_attention_heads", f.n_head, c->n_head, false},
        {NULL, "num_key_value_heads", model_kv_heads(&f), model_kv_heads(c), false},
        {"n_inner", "intermediate_size", f.d_ff, c->d_ff, false},
        {"vocab_size", "vocab_size", f.vocab, c->vocab, false},
        {"tie_word_embeddings", "tie_word_embeddings", f.tied, c->tied, true},
        {NULL, "q/k/v biases (model_type qwen2)", f.qkv_bias, c->qkv_bias, true},
    };
    for (size_t i = 0; i < sizeof field / sizeof *field; i++) {
        const char *key = llama ? field[i].llama : field[i].gpt2;
        if (!key || field[i].file == field[i].run)
            continue;
        char a[16], b[16];
        snprintf(a, sizeof a, "%d", field[i].file);
        snprintf(b, sizeof b, "%d", field[i].run);
        return err_set(e, -EINVAL, "%s: %s is %s, this run's %s has %s: the weights are another "
                       "model's", path, key, field[i].flag ? (field[i].file ? "true" : "false")
                                                           : a, c->name,
                       field[i].flag ? (field[i].run ? "true" : "false") : b);
    }
    return 0;
}

