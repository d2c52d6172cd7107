/* checkpoint: safetensors checkpoints with atomic replacement; see checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

enum { PATH_CAP = 4200, FILE_CAP = PATH_CAP + 64, NAME_CAP = 64 };

/* What a step directory needs to be resumed from (config.json is for Hugging Face only). */
static const char *const step_files[] = {"state.json", "model.safetensors",
                                         "optimizer.safetensors"};

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes a checkpoint directory tree (a stale temporary one, or one being replaced). */
static int remove_tree(const char *path)
{
    return nftw(path, rm_entry, 8, FTW_DEPTH | FTW_PHYS) ? -errno : 0;
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

/* Syncs a directory, so the renames inside it survive a crash. */
static int sync_dir(const char *dir, Err *e)
{
    int rc = fsync_path(dir);
    return rc ? err_set(e, rc, "%s: fsync: %s", dir, strerror(-rc)) : 0;
}

/* Writes text to a new file at path and syncs it. */
static int write_synced(const char *path, const char *text, Err *e)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return err_set(e, -errno, "%s: cannot write: %s", path, strerror(errno));
    int rc = fputs(text, f) < 0 || fflush(f) || fsync(fileno(f)) ? -(errno ? errno : EIO) : 0;
    if (fclose(f) && !rc)
        rc = -(errno ? errno : EIO);
    return rc ? err_set(e, rc, "%s: cannot write: %s", path, strerror(-rc)) : 0;
}

/* Writes root (consumed; NULL when building it failed) to path as JSON, synced; reals with
 * `digits` significant digits. */
static int write_json(const char *path, json_t *root, int digits, Err *e)
{
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                                         JSON_REAL_PRECISION(digits)) : NULL;
    json_decref(root);
    if (!text)
        return err_set(e, -ENOMEM, "out of memory writing %s", path);
    int rc = write_synced(path, text, e);
    free(text);
    return rc;
}

/* "step-00000010": the name of step's directory. */
static void step_name(char *name, size_t n, int64_t step)
{
    snprintf(name, n, "step-%08" PRId64, step);
}

/* Whether name is a step directory's name as step_name writes it; its step in *step. */
static bool parse_step_name(const char *name, int64_t *step)
{
    if (strncmp(name, "step-", 5) || strlen(name + 5) > 18)
        return false;
    for (const char *p = name + 5; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    char canonical[NAME_CAP];
    *step = strtoll(name + 5, NULL, 10);
    step_name(canonical, sizeof canonical, *step);
    return !strcmp(name, canonical);
}

/* Conv1D tensors go (cols, rows) in the file: transposes between the two. */
static void transpose(float *dst, const float *src, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}

static int write_model(const char *path, const ModelLayout *l, const float *params, Err *e)
{
    float *conv = malloc(l->total * sizeof *conv); /* transposed copies */
    if (!conv)
        return err_set(e, -ENOMEM, "out of memory writing %s", path);
    StWriter w;
    int rc = st_writer_begin(&w, path, e);
    for (int i = 0; !rc && i < l->n; i++) {
        const ParamTensor *t = &l->t[i];
        const float *data = params + t->offset;
        int64_t shape[2] = {t->rows, t->cols};
        int ndim = t->rows == 1 ? 1 : 2;
        if (ndim == 1)
            shape[0] = t->cols;
        if (t->conv1d) {
            transpose(conv + t->offset, data, t->rows, t->cols);
            data = conv + t->offset;
            shape[0] = t->cols;
            shape[1] = t->rows;
        }
        rc = st_writer_add(&w, t->name, data, ndim, shape, e);
    }
    if (!rc)
        rc = st_writer_finish(&w, "format", "pt", e); /* what transformers expects */
    else
        st_writer_abort(&w);
    free(conv);
    return rc;
}

static int write_optimizer(const char *path, size_t n, const float *m, const float *v, Err *e)
{
    StWriter w;
    int64_t shape[1] = {(int64_t)n};
    int rc = st_writer_begin(&w, path, e);
    if (!rc)
        rc = st_writer_add(&w, "adam.m", m, 1, shape, e);
    if (!rc)
        rc = st_writer_add(&w, "adam.v", v, 1, shape, e);
    if (!rc)
        return st_writer_finish(&w, "format", "fuyou-adamw", e);
    st_writer_abort(&w);
    return rc;
}

static json_t *model_json(const ModelConfig *c)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "name", c->name, "layers",
                     c->n_layer, "hidden", c->d_model, "heads", c->n_head, "ffn", c->d_ff,
                     "vocab", c->vocab, "max_seq", c->max_seq, "tied", c->tied);
}

static json_t *state_json(const ModelConfig *c, const TrainState *s)
{
    json_t *root = json_pack("{s:I, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:o}", "step",
                             (json_int_t)s->step, "loader_epoch", (json_int_t)s->epoch,
                             "loader_index", (json_int_t)s->index, "seed", (json_int_t)s->seed,
                             "prev_grad_norm", s->prev_grad_norm, "loss_scale", s->loss_scale,
                             "loss_scale_good_steps", (json_int_t)s->scale_good,
                             "skipped_steps", (json_int_t)s->skipped, "model", model_json(c));
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", s->data.crc32c);
    if (root && s->data.files > 0)
        json_object_set_new(root, "data", json_pack("{s:I, s:I, s:s}", "files",
                                                    (json_int_t)s->data.files, "tokens",
                                                    (json_int_t)s->data.tokens, "crc32c", crc));
    return root;
}

/* Hugging Face's GPT2Config for c, so that GPT2LMHeadModel.from_pretrained(step_dir) loads the
 * checkpoint: fuyou's GPT-2 is theirs with the tanh GELU ("gelu_new"), LayerNorm eps 1e-5 and
 * no dropout. n_inner only when the MLP is not 4h (their default); GPT-2's <|endoftext|> as bos
 * and eos when the vocabulary is GPT-2's (or llm.c's padding of it). */
static json_t *hf_config_json(const ModelConfig *c)
{
    json_t *root = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:b, s:f, s:f, "
                             "s:f, s:s}", "architectures", "GPT2LMHeadModel", "model_type",
                             "gpt2", "vocab_size", c->vocab, "n_positions", c->max_seq,
                             "n_embd", c->d_model, "n_layer", c->n_layer, "n_head", c->n_head,
                             "activation_function", "gelu_new", "layer_norm_epsilon", 1e-5,
                             "tie_word_embeddings", c->tied, "resid_pdrop", 0.0, "embd_pdrop",
                             0.0, "attn_pdrop", 0.0, "torch_dtype", "float32");
    if (root && c->d_ff != 4 * c->d_model)
        json_object_set_new(root, "n_inner", json_integer(c->d_ff));
    /* null otherwise: GPT2Config's default, 50256, would lie outside a smaller vocabulary */
    bool gpt2_vocab = c->vocab == 50257 || c->vocab == 50304;
    if (root) {
        json_object_set_new(root, "bos_token_id", gpt2_vocab ? json_integer(50256) : json_null());
        json_object_set_new(root, "eos_token_id", gpt2_vocab ? json_integer(50256) : json_null());
    }
    return root;
}

/* The files of a step directory, into dir (each synced). */
static int write_step_files(const char *dir, const ModelConfig *c, const ModelLayout *l,
                            const float *params, const float *m, const float *v,
                            const TrainState *s, Err *e)
{
    char file[FILE_CAP];
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    int rc = write_model(file, l, params, e);
    snprintf(file, sizeof file, "%s/optimizer.safetensors", dir);
    if (!rc)
        rc = write_optimizer(file, l->total, m, v, e);
    snprintf(file, sizeof file, "%s/state.json", dir);
    if (!rc) /* 17 digits: the norm and the scale come back exactly */
        rc = write_json(file, state_json(c, s), 17, e);
    snprintf(file, sizeof file, "%s/config.json", dir);
    if (!rc)
        rc = write_json(file, hf_config_json(c), 6, e);
    return rc;
}

/* Points dir/latest at name atomically: a synced temporary file renamed over it, then the
 * directory synced; after a crash latest holds the old name or the new one, never a torn one. */
static int write_latest(const char *dir, const char *name, Err *e)
{
    char tmp[PATH_CAP], latest[PATH_CAP], text[NAME_CAP + 2];
    snprintf(tmp, sizeof tmp, "%s/.latest.tmp", dir);
    snprintf(latest, sizeof latest, "%s/latest", dir);
    snprintf(text, sizeof text, "%s\n", name);
    int rc = write_synced(tmp, text, e);
    if (!rc && rename(tmp, latest))
        rc = err_set(e, -errno, "%s: rename: %s", latest, strerror(errno));
    return rc ? rc : sync_dir(dir, e);
}

int ckpt_save(const char *dir, const ModelConfig *c, const ModelLayout *l, const float *params,
              const float *m, const float *v, const TrainState *s, Err *e)
{
    if (mkdir(dir, 0755) && errno != EEXIST)
        return err_set(e, -errno, "%s: cannot create: %s", dir, strerror(errno));
    char name[NAME_CAP], tmp[PATH_CAP], final[PATH_CAP];
    step_name(name, sizeof name, s->step);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(final, sizeof final, "%s/%s", dir, name);
    if (access(tmp, F_OK) == 0 && remove_tree(tmp)) /* a leftover of a crash */
        return err_set(e, -EIO, "%s: cannot remove a stale temporary checkpoint", tmp);
    if (mkdir(tmp, 0755))
        return err_set(e, -errno, "%s: cannot create: %s", tmp, strerror(errno));
    int rc = write_step_files(tmp, c, l, params, m, v, s, e);
    if (!rc)
        rc = sync_dir(tmp, e);
    if (rc)
        return rc;
    if (access(final, F_OK) == 0 && remove_tree(final)) /* the same step saved again */
        return err_set(e, -EIO, "%s: cannot replace", final);
    if (rename(tmp, final))
        return err_set(e, -errno, "%s: rename: %s", final, strerror(errno));
    rc = sync_dir(dir, e); /* the step directory is in place before latest names it */
    return rc ? rc : write_latest(dir, name, e);
}

static int newest_first(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a < b) - (a > b);
}

/* The steps of dir's step directories, newest first, in *steps (caller frees); their count in
 * *n. A missing dir has none. */
static int list_steps(const char *dir, int64_t **steps, int *n, Err *e)
{
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : err_set(e, -errno, "%s: %s", dir, strerror(errno));
    int cap = 0, rc = 0;
    for (struct dirent *de; !rc && (de = readdir(d));) {
        int64_t step;
        if (!parse_step_name(de->d_name, &step))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *p = realloc(*steps, (size_t)cap * sizeof *p);
            if (!p) {
                rc = err_set(e, -ENOMEM, "out of memory listing %s", dir);
                break;
            }
            *steps = p;
        }
        (*steps)[(*n)++] = step;
    }
    closedir(d);
    if (*n)
        qsort(*steps, (size_t)*n, sizeof **steps, newest_first);
    return rc;
}

int ckpt_prepare_fresh(const char *dir, bool overwrite, Err *e)
{
    char latest[PATH_CAP], path[PATH_CAP], name[NAME_CAP];
    snprintf(latest, sizeof latest, "%s/latest", dir);
    int64_t *steps;
    int n, rc = list_steps(dir, &steps, &n, e);
    bool has_latest = access(latest, F_OK) == 0;
    if (!rc && (has_latest || n) && !overwrite) {
        step_name(name, sizeof name, n ? steps[0] : 0);
        rc = err_set(e, -EEXIST, "--save %s holds a checkpoint (%s): continue it with --resume "
                     "%s, save to another directory, or add --overwrite to replace it", dir,
                     n ? name : "latest", dir);
    }
    if (!rc && has_latest && unlink(latest))
        rc = err_set(e, -errno, "%s: cannot remove: %s", latest, strerror(errno));
    for (int i = 0; !rc && i < n; i++) {
        step_name(name, sizeof name, steps[i]);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (remove_tree(path))
            rc = err_set(e, -EIO, "%s: cannot remove: %s", path, strerror(errno));
    }
    if (!rc && (has_latest || n))
        rc = sync_dir(dir, e);
    free(steps);
    return rc;
}

static bool ignorable(const char *name)
{
    size_t n = strlen(name);
    return (n > 10 && !strcmp(name + n - 10, ".attn.bias")) ||
           (n > 17 && !strcmp(name + n - 17, ".attn.masked_bias"));
}

/* The file's tensor st has the shape that t has in a Hugging Face file. */
static int check_shape(const char *path, const ModelConfig *c, const ParamTensor *t,
                       const StTensor *st, Err *e)
{
    int64_t want0 = t->rows == 1 ? t->cols : t->conv1d ? t->cols : t->rows;
    int64_t want1 = t->rows == 1 ? 0 : t->conv1d ? t->rows : t->cols;
    int want_ndim = t->rows == 1 ? 1 : 2;
    if (st->ndim == want_ndim && st->shape[0] == want0 &&
        (want_ndim == 1 || st->shape[1] == want1))
        return 0;
    return err_set(e, -EINVAL, "%s: tensor %s has shape [%lld%s%lld], %s wants [%lld%s%lld]",
                   path, st->name, (long long)st->shape[0], st->ndim > 1 ? ", " : "",
                   st->ndim > 1 ? (long long)st->shape[1] : 0LL, c->name, (long long)want0,
                   want_ndim > 1 ? ", " : "", want_ndim > 1 ? (long long)want1 : 0LL);
}

/* Reads st into its place t in params; tmp: scratch for transposing, allocated on first use. */
static int load_tensor(StFile *s, const StTensor *st, const ParamTensor *t, const ModelLayout *l,
                       float *params, float **tmp, Err *e)
{
    if (!t->conv1d)
        return st_read_f32(s, st, params + t->offset, e);
    if (!*tmp && !(*tmp = malloc(l->total * sizeof **tmp)))
        return err_set(e, -ENOMEM, "out of memory");
    int rc = st_read_f32(s, st, *tmp, e);
    if (!rc)
        transpose(params + t->offset, *tmp, t->cols, t->rows);
    return rc;
}

/* A tied model takes a file's lm_head.weight only when it is the embedding bit for bit: an
 * untied model's own head would otherwise be dropped without a word. */
static int check_tied_head(StFile *s, const StTensor *head, const ModelConfig *c,
                           const ModelLayout *l, const float *params, Err *e)
{
    const ParamTensor *wte = layout_find(l, "transformer.wte.weight");
    int rc = check_shape(s->path, c, wte, head, e);
    float *buf = rc ? NULL : malloc(wte->numel * sizeof *buf);
    if (!rc && !buf)
        rc = err_set(e, -ENOMEM, "out of memory");
    if (!rc)
        rc = st_read_f32(s, head, buf, e);
    if (!rc && memcmp(buf, params + wte->offset, wte->numel * sizeof *buf))
        rc = err_set(e, -EINVAL, "%s: lm_head.weight differs from transformer.wte.weight: the "
                     "file is of an untied model and %s ties them (a model ini with tied = "
                     "false loads it)", s->path, c->name);
    free(buf);
    return rc;
}

int ckpt_load_model(const char *path, const ModelConfig *c, const ModelLayout *l, float *params,
                    Err *e)
{
    StFile s;
    int rc = st_open(&s, path, e);
    if (rc)
        return rc;
    bool *seen = calloc((size_t)l->n, sizeof *seen);
    float *tmp = NULL;
    const StTensor *head = NULL; /* lm_head.weight in a file for a tied model */
    if (!seen)
        rc = err_set(e, -ENOMEM, "out of memory");
    for (int i = 0; !rc && i < s.n; i++) {
        const StTensor *st = &s.t[i];
        const ParamTensor *t = layout_find(l, st->name);
        if (!t && c->tied && !strcmp(st->name, "lm_head.weight"))
            head = st;
        else if (!t && !ignorable(st->name))
            rc = err_set(e, -EINVAL, "%s: tensor %s has no place in %s (%d layers, hidden %d): "
                         "the checkpoint is for another model", path, st->name, c->name,
                         c->n_layer, c->d_model);
        if (!t || rc)
            continue;
        /* the same tensor under both of its names: which one would win is the file's order */
        if (seen[t - l->t])
            rc = err_set(e, -EINVAL, "%s: tensor %s is in the file twice (with and without "
                         "\"transformer.\")", path, t->name);
        if (!rc)
            rc = check_shape(path, c, t, st, e);
        if (!rc)
            rc = load_tensor(&s, st, t, l, params, &tmp, e);
        seen[t - l->t] = true;
    }
    for (int i = 0; !rc && i < l->n; i++)
        if (!seen[i])
            rc = err_set(e, -EINVAL, "%s: tensor %s is missing", path, l->t[i].name);
    if (!rc && head)
        rc = check_tied_head(&s, head, c, l, params, e);
    free(tmp);
    free(seen);
    st_close(&s);
    return rc;
}

/* v is in [lo, hi], else one line naming the file and the key. */
static int check_range(const char *path, const char *key, json_int_t v, json_int_t lo,
                       json_int_t hi, Err *e)
{
    if (v >= lo && v <= hi)
        return 0;
    return err_set(e, -EINVAL, "%s: %s is %lld; it must be %lld to %lld", path, key,
                   (long long)v, (long long)lo, (long long)hi);
}

/* The model description in state.json is c's. */
static int check_model(const char *path, json_t *model, const ModelConfig *c, Err *e)
{
    int layers, hidden, heads, ffn, vocab, max_seq, tied;
    if (json_unpack(model, "{s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "layers", &layers, "hidden",
                    &hidden, "heads", &heads, "ffn", &ffn, "vocab", &vocab, "max_seq", &max_seq,
                    "tied", &tied))
        return err_set(e, -EINVAL, "%s: malformed model description (layers, hidden, heads, "
                       "ffn, vocab, max_seq, tied)", path);
    if (layers == c->n_layer && hidden == c->d_model && heads == c->n_head && ffn == c->d_ff &&
        vocab == c->vocab && max_seq == c->max_seq && !tied == !c->tied)
        return 0;
    return err_set(e, -EINVAL, "%s: the checkpoint is of a model with %d layers, hidden %d, "
                   "%d heads, ffn %d, vocab %d, max_seq %d, %s; this run's %s has %d, %d, %d, "
                   "%d, %d, %d, %s", path, layers, hidden, heads, ffn, vocab, max_seq,
                   tied ? "tied" : "untied", c->name, c->n_layer, c->d_model, c->n_head,
                   c->d_ff, c->vocab, c->max_seq, c->tied ? "tied" : "untied");
}

/* Every number of state.json in its range (the trainer indexes and counts with them). */
static int check_state(const char *path, const TrainState *s, Err *e)
{
    int rc = check_range(path, "step", s->step, 0, CKPT_STEP_MAX, e);
    if (!rc)
        rc = check_range(path, "skipped_steps", s->skipped, 0, s->step, e);
    if (!rc)
        rc = check_range(path, "loss_scale_good_steps", s->scale_good, 0, s->step, e);
    if (!rc)
        rc = check_range(path, "loader_epoch", s->epoch, 0, INT64_MAX, e);
    if (!rc)
        rc = check_range(path, "loader_index", s->index, 0, INT64_MAX, e);
    if (!rc && !(isfinite(s->prev_grad_norm) && s->prev_grad_norm >= 0))
        rc = err_set(e, -EINVAL, "%s: prev_grad_norm is %g; it must be finite and at least 0",
                     path, s->prev_grad_norm);
    /* 0: never set; else what the trainer's halving and doubling can reach */
    if (!rc && s->loss_scale != 0 && !(s->loss_scale >= 1.0 / 65536 && s->loss_scale <= FLT_MAX))
        rc = err_set(e, -EINVAL, "%s: loss_scale is %g; it must be 0 (unset) or 2^-16 to %g",
                     path, s->loss_scale, (double)FLT_MAX);
    return rc;
}

/* state.json's "data" (NULL: absent, an older checkpoint) into *print. */
static int read_data_print(const char *path, json_t *data, DataPrint *print, Err *e)
{
    *print = (DataPrint){0};
    if (!data)
        return 0;
    json_int_t files = 0, tokens = 0;
    const char *crc = NULL;
    if (json_unpack(data, "{s:I, s:I, s:s}", "files", &files, "tokens", &tokens, "crc32c",
                    &crc))
        return err_set(e, -EINVAL, "%s: malformed data fingerprint (\"data\": {\"files\", "
                       "\"tokens\", \"crc32c\"})", path);
    int rc = check_range(path, "data.files", files, 1, DATA_MAX_FILES, e);
    if (!rc)
        rc = check_range(path, "data.tokens", tokens, 1, INT64_MAX, e);
    if (!rc && (strlen(crc) != 8 || strspn(crc, "0123456789abcdef") != 8))
        rc = err_set(e, -EINVAL, "%s: data.crc32c is not 8 lowercase hex digits", path);
    if (!rc)
        *print = (DataPrint){.files = files, .tokens = tokens,
                             .crc32c = (uint32_t)strtoul(crc, NULL, 16)};
    return rc;
}

static int read_state(const char *path, const ModelConfig *c, TrainState *s, Err *e)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return err_set(e, -EINVAL, "%s:%d: %s", path, jerr.line, jerr.text);
    json_int_t step = 0, epoch = 0, index = 0, seed = 0, good = 0, skipped = 0;
    double norm = 0, scale = 0;
    json_t *model, *data = NULL;
    int rc = 0;
    /* the loss-scaling fields and the data's fingerprint are optional: checkpoints from before
     * them resume unscaled, their data unchecked */
    if (json_unpack(root, "{s:I, s:I, s:I, s:I, s:F, s?F, s?I, s?I, s:o, s?o}", "step", &step,
                    "loader_epoch", &epoch, "loader_index", &index, "seed", &seed,
                    "prev_grad_norm", &norm, "loss_scale", &scale, "loss_scale_good_steps",
                    &good, "skipped_steps", &skipped, "model", &model, "data", &data))
        rc = err_set(e, -EINVAL, "%s: missing or malformed fields (step, loader_epoch, "
                     "loader_index, seed, prev_grad_norm, model)", path);
    if (!rc)
        rc = check_model(path, model, c, e);
    TrainState got = {.step = step, .epoch = epoch, .index = index, .seed = (uint64_t)seed,
                      .prev_grad_norm = norm, .loss_scale = scale, .scale_good = good,
                      .skipped = skipped};
    if (!rc)
        rc = check_state(path, &got, e);
    if (!rc)
        rc = read_data_print(path, data, &got.data, e);
    if (!rc)
        *s = got;
    json_decref(root);
    return rc;
}

static int load_optimizer(const char *path, const ModelLayout *l, float *m, float *v, Err *e)
{
    StFile st;
    int rc = st_open(&st, path, e);
    if (rc)
        return rc;
    const StTensor *tm = st_find(&st, "adam.m"), *tv = st_find(&st, "adam.v");
    if (!tm || !tv || st_numel(tm) != l->total || st_numel(tv) != l->total)
        rc = err_set(e, -EINVAL, "%s: needs adam.m and adam.v of %zu values each", path,
                     l->total);
    if (!rc)
        rc = st_read_f32(&st, tm, m, e);
    if (!rc)
        rc = st_read_f32(&st, tv, v, e);
    st_close(&st);
    return rc;
}

/* The first of step_files that dir/name lacks, or NULL when it holds them all. */
static const char *missing_file(const char *dir, const char *name)
{
    char path[PATH_CAP];
    struct stat st;
    for (size_t i = 0; i < sizeof step_files / sizeof *step_files; i++) {
        snprintf(path, sizeof path, "%s/%s/%s", dir, name, step_files[i]);
        if (stat(path, &st) || !S_ISREG(st.st_mode))
            return step_files[i];
    }
    return NULL;
}

/* Loads the checkpoint in dir/name: the state, the model, the optimizer. */
static int load_step(const char *dir, const char *name, const ModelConfig *c,
                     const ModelLayout *l, float *params, float *m, float *v, TrainState *s,
                     Err *e)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s/state.json", dir, name);
    int rc = read_state(path, c, s, e);
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, name);
    if (!rc)
        rc = ckpt_load_model(path, c, l, params, e);
    snprintf(path, sizeof path, "%s/%s/optimizer.safetensors", dir, name);
    if (!rc)
        rc = load_optimizer(path, l, m, v, e);
    return rc;
}

/* The step directory dir/latest names, in name: 0; -ENOENT when latest is missing or empty
 * (the fallback's case); another -errno when it cannot be read or names no step directory. */
static int read_latest(const char *dir, char *name, size_t n, Err *e)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return err_set(e, -errno, "%s: %s", path, strerror(errno));
    bool got = fgets(name, (int)n, f) != NULL;
    fclose(f);
    name[got ? strcspn(name, "\n") : 0] = '\0';
    int64_t step;
    if (!name[0])
        return err_set(e, -ENOENT, "%s is empty", path);
    if (!parse_step_name(name, &step))
        return err_set(e, -EINVAL, "%s: names %s, which is not a checkpoint here", path, name);
    return 0;
}

/* Resumes from the newest step directory of dir that loads completely (its files there, their
 * checksums right, its state valid), saying on stderr why (latest's problem) and what it
 * skipped. */
static int load_newest(const char *dir, const char *why, const ModelConfig *c,
                       const ModelLayout *l, float *params, float *m, float *v, TrainState *s,
                       Err *e)
{
    int64_t *steps;
    int n, rc = list_steps(dir, &steps, &n, e);
    Err newest = {""};
    int newest_rc = 0, i;
    for (i = 0; !rc && i < n; i++) {
        char name[NAME_CAP];
        step_name(name, sizeof name, steps[i]);
        const char *lacks = missing_file(dir, name);
        Err ei;
        int ri = lacks ? err_set(&ei, -ENOENT, "it has no %s", lacks)
                       : load_step(dir, name, c, l, params, m, v, s, &ei);
        if (!ri) {
            fprintf(stderr, "%s: %s; resuming from %s/%s, the newest complete checkpoint\n",
                    program_invocation_short_name, why, dir, name);
            break;
        }
        fprintf(stderr, "%s: skipping %s/%s: %s\n", program_invocation_short_name, dir, name,
                ei.msg);
        if (!newest_rc)
            newest = ei, newest_rc = ri;
    }
    free(steps);
    if (!rc && !n)
        rc = err_set(e, -ENOENT, "%s: no checkpoint to resume (%s, and no step directory)", dir,
                     why);
    else if (!rc && i == n)
        rc = err_set(e, newest_rc, "%s: no complete checkpoint to resume (%s); the newest: %s",
                     dir, why, newest.msg);
    return rc;
}

int ckpt_load(const char *dir, const ModelConfig *c, const ModelLayout *l, float *params,
              float *m, float *v, TrainState *s, Err *e)
{
    char name[256], why[PATH_CAP];
    Err el;
    int rc = read_latest(dir, name, sizeof name, &el);
    if (rc && rc != -ENOENT)
        return err_set(e, rc, "%s", el.msg);
    const char *lacks = rc ? NULL : missing_file(dir, name);
    if (!rc && !lacks)
        return load_step(dir, name, c, l, params, m, v, s, e);
    if (rc)
        snprintf(why, sizeof why, "%s", el.msg);
    else
        snprintf(why, sizeof why, "%s/latest names %s, which has no %s", dir, name, lacks);
    return load_newest(dir, why, c, l, params, m, v, s, e);
}
