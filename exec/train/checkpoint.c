/* checkpoint: safetensors checkpoints with atomic replacement; see checkpoint.h. */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

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

/* Conv1D tensors go (cols, rows) in the file: transposes between the two. */
static void transpose(float *dst, const float *src, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}

static int write_model(const char *path, const ModelConfig *c, const Gpt2Layout *l,
                       const float *params, Err *e)
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
    (void)c;
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

static json_t *config_json(const ModelConfig *c)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "name", c->name, "layers",
                     c->n_layer, "hidden", c->d_model, "heads", c->n_head, "ffn", c->d_ff,
                     "vocab", c->vocab, "max_seq", c->max_seq, "tied", c->tied);
}

static int write_state(const char *path, const ModelConfig *c, const TrainState *s, Err *e)
{
    json_t *root = json_pack("{s:I, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:o}", "step",
                             (json_int_t)s->step, "loader_epoch", (json_int_t)s->epoch,
                             "loader_index", (json_int_t)s->index, "seed", (json_int_t)s->seed,
                             "prev_grad_norm", s->prev_grad_norm, "loss_scale", s->loss_scale,
                             "loss_scale_good_steps", (json_int_t)s->scale_good,
                             "skipped_steps", (json_int_t)s->skipped, "model", config_json(c));
    int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (rc || fsync_path(path))
        return err_set(e, -EIO, "%s: cannot write", path);
    return 0;
}

int ckpt_save(const char *dir, const ModelConfig *c, const Gpt2Layout *l, const float *params,
              const float *m, const float *v, const TrainState *s, Err *e)
{
    if (mkdir(dir, 0755) && errno != EEXIST)
        return err_set(e, -errno, "%s: cannot create: %s", dir, strerror(errno));
    char name[64], tmp[4200], final[4200], file[4300];
    snprintf(name, sizeof name, "step-%08lld", (long long)s->step);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(final, sizeof final, "%s/%s", dir, name);
    if (access(tmp, F_OK) == 0 && remove_tree(tmp)) /* a leftover of a crash */
        return err_set(e, -EIO, "%s: cannot remove a stale temporary checkpoint", tmp);
    if (mkdir(tmp, 0755))
        return err_set(e, -errno, "%s: cannot create: %s", tmp, strerror(errno));
    snprintf(file, sizeof file, "%s/model.safetensors", tmp);
    int rc = write_model(file, c, l, params, e);
    snprintf(file, sizeof file, "%s/optimizer.safetensors", tmp);
    if (!rc)
        rc = write_optimizer(file, l->total, m, v, e);
    snprintf(file, sizeof file, "%s/state.json", tmp);
    if (!rc)
        rc = write_state(file, c, s, e);
    if (rc)
        return rc;
    fsync_path(tmp);
    if (access(final, F_OK) == 0 && remove_tree(final)) /* the same step saved again */
        return err_set(e, -EIO, "%s: cannot replace", final);
    if (rename(tmp, final))
        return err_set(e, -errno, "%s: rename: %s", final, strerror(errno));
    /* Point latest at it, atomically. */
    char latest_tmp[4200], latest[4200];
    snprintf(latest_tmp, sizeof latest_tmp, "%s/.latest.tmp", dir);
    snprintf(latest, sizeof latest, "%s/latest", dir);
    FILE *f = fopen(latest_tmp, "w");
    if (!f || fprintf(f, "%s\n", name) < 0 || fflush(f) || fsync(fileno(f))) {
        if (f)
            fclose(f);
        return err_set(e, -EIO, "%s: cannot write", latest_tmp);
    }
    fclose(f);
    if (rename(latest_tmp, latest))
        return err_set(e, -errno, "%s: rename: %s", latest, strerror(errno));
    fsync_path(dir);
    return 0;
}

static bool ignorable(const char *name)
{
    size_t n = strlen(name);
    return (n > 10 && !strcmp(name + n - 10, ".attn.bias")) ||
           (n > 17 && !strcmp(name + n - 17, ".attn.masked_bias"));
}

int ckpt_load_model(const char *path, const ModelConfig *c, const Gpt2Layout *l, float *params,
                    Err *e)
{
    StFile s;
    int rc = st_open(&s, path, e);
    bool *seen = calloc((size_t)l->n, sizeof *seen);
    float *tmp = NULL;
    if (!rc && !seen)
        rc = err_set(e, -ENOMEM, "out of memory");
    for (int i = 0; !rc && i < s.n; i++) {
        const StTensor *st = &s.t[i];
        const ParamTensor *t = gpt2_layout_find(l, st->name);
        if (!t) {
            if (ignorable(st->name) || (c->tied && !strcmp(st->name, "lm_head.weight")))
                continue;
            rc = err_set(e, -EINVAL, "%s: tensor %s has no place in %s (%d layers, hidden %d): "
                         "the checkpoint is for another model", path, st->name, c->name,
                         c->n_layer, c->d_model);
            break;
        }
        int64_t want0 = t->rows == 1 ? t->cols : t->conv1d ? t->cols : t->rows;
        int64_t want1 = t->rows == 1 ? 0 : t->conv1d ? t->rows : t->cols;
        int want_ndim = t->rows == 1 ? 1 : 2;
        if (st->ndim != want_ndim || st->shape[0] != want0 || (want_ndim == 2 &&
                                                                st->shape[1] != want1)) {
            rc = err_set(e, -EINVAL, "%s: tensor %s has shape [%lld%s%lld], %s wants [%lld%s%lld]",
                         path, st->name, (long long)st->shape[0], st->ndim > 1 ? ", " : "",
                         st->ndim > 1 ? (long long)st->shape[1] : 0LL, c->name,
                         (long long)want0, want_ndim > 1 ? ", " : "",
                         want_ndim > 1 ? (long long)want1 : 0LL);
            break;
        }
        if (t->conv1d) {
            if (!tmp && !(tmp = malloc(l->total * sizeof *tmp))) {
                rc = err_set(e, -ENOMEM, "out of memory");
                break;
            }
            rc = st_read_f32(&s, st, tmp, e);
            if (!rc)
                transpose(params + t->offset, tmp, t->cols, t->rows);
        } else {
            rc = st_read_f32(&s, st, params + t->offset, e);
        }
        seen[t - l->t] = true;
    }
    for (int i = 0; !rc && i < l->n; i++)
        if (!seen[i])
            rc = err_set(e, -EINVAL, "%s: tensor %s is missing", path, l->t[i].name);
    free(tmp);
    free(seen);
    st_close(&s);
    return rc;
}

static int read_state(const char *path, const ModelConfig *c, TrainState *s, Err *e)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return err_set(e, -EINVAL, "%s:%d: %s", path, jerr.line, jerr.text);
    json_int_t step, epoch, index, seed, good = 0, skipped = 0;
    double norm, scale = 0;
    json_t *model;
    int rc = 0;
    /* the loss-scaling fields are optional: checkpoints from before them resume unscaled */
    if (json_unpack(root, "{s:I, s:I, s:I, s:I, s:F, s?F, s?I, s?I, s:o}", "step", &step,
                    "loader_epoch", &epoch, "loader_index", &index, "seed", &seed,
                    "prev_grad_norm", &norm, "loss_scale", &scale, "loss_scale_good_steps",
                    &good, "skipped_steps", &skipped, "model", &model))
        rc = err_set(e, -EINVAL, "%s: missing or malformed fields (step, loader_epoch, "
                     "loader_index, seed, prev_grad_norm, model)", path);
    int layers = 0, hidden = 0, vocab = 0;
    if (!rc && json_unpack(model, "{s:i, s:i, s:i}", "layers", &layers, "hidden", &hidden,
                           "vocab", &vocab))
        rc = err_set(e, -EINVAL, "%s: malformed model description", path);
    if (!rc && (layers != c->n_layer || hidden != c->d_model || vocab != c->vocab))
        rc = err_set(e, -EINVAL, "%s: the checkpoint is of a model with %d layers, hidden %d, "
                     "vocab %d; this run's %s has %d, %d, %d", path, layers, hidden, vocab,
                     c->name, c->n_layer, c->d_model, c->vocab);
    if (!rc)
        *s = (TrainState){.step = step, .epoch = epoch, .index = index, .seed = (uint64_t)seed,
                          .prev_grad_norm = norm, .loss_scale = scale, .scale_good = good,
                          .skipped = skipped};
    json_decref(root);
    return rc;
}

int ckpt_load(const char *dir, const ModelConfig *c, const Gpt2Layout *l, float *params,
              float *m, float *v, TrainState *s, Err *e)
{
    char path[4200], name[256] = "";
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return err_set(e, -errno, "%s: no checkpoint to resume (%s)", path, strerror(errno));
    if (!fgets(name, sizeof name, f) || !name[0]) {
        fclose(f);
        return err_set(e, -EINVAL, "%s: empty", path);
    }
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    if (strchr(name, '/'))
        return err_set(e, -EINVAL, "%s: names %s, which is not a checkpoint here", path, name);
    snprintf(path, sizeof path, "%s/%s/state.json", dir, name);
    int rc = read_state(path, c, s, e);
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, name);
    if (!rc)
        rc = ckpt_load_model(path, c, l, params, e);
    snprintf(path, sizeof path, "%s/%s/optimizer.safetensors", dir, name);
    StFile st;
    if (!rc)
        rc = st_open(&st, path, e);
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
