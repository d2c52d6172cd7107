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

#include "hf_folder.h"
#include "hf_save.h"
#include "progress.h"
#include "safetensors.h"

enum { PATH_CAP = 4200, FILE_CAP = PATH_CAP + 64, NAME_CAP = 64 };

/* What a step directory needs to be resumed from (config.json and the tokenizer files are for
 * Hugging Face only); the weights are master.safetensors, else (fp32 weights) model.safetensors
 * or, sharded, its index (whose shards the load checks). */
static const char *const step_files[] = {"state.json", HF_SINGLE_FILE, "optimizer.safetensors"};
#define MASTER_FILE "master.safetensors"

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

/* adam.m and adam.v, each pulled from the source in chunks. */
static int pull_moment(void *user, int i, size_t at, size_t n, float *dst, Err *e)
{
    const HfSource *src = user;
    return src->get(src->user, i == 0 ? HF_PART_M : HF_PART_V, at, n, dst, e);
}

static int write_optimizer(const char *path, size_t n, const HfSource *src, Err *e)
{
    StWriter w;
    int64_t shape[1] = {(int64_t)n};
    int rc = st_writer_begin(&w, path, e);
    if (!rc)
        rc = st_writer_add(&w, "adam.m", NULL, 1, shape, e);
    if (!rc)
        rc = st_writer_add(&w, "adam.v", NULL, 1, shape, e);
    if (!rc)
        return st_writer_finish_pull(&w, pull_moment, (void *)src, HF_SAVE_CHUNK,
                                     "format", "fuyou-adamw", e);
    st_writer_abort(&w);
    return rc;
}

static json_t *model_json(const ModelConfig *c)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "name", c->name, "arch",
                     arch_name(c->arch), "layers", c->n_layer, "hidden", c->d_model, "heads",
                     c->n_head, "ffn", c->d_ff, "vocab", c->vocab, "max_seq", c->max_seq,
                     "tied", c->tied);
}

static json_t *hparams_json(const TrainHparams *h)
{
    return json_pack("{s:f, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I}", "lr", h->lr,
                     "warmup", (json_int_t)h->warmup, "min_lr_ratio", h->min_lr_ratio,
                     "weight_decay", h->weight_decay, "beta1", h->beta1, "beta2", h->beta2,
                     "eps", h->eps, "clip", h->clip, "batch", (json_int_t)h->batch, "seq",
                     (json_int_t)h->seq);
}

static json_t *state_json(const ModelConfig *c, const TrainState *s, const CkptSaveOptions *o)
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
    if (root && s->sched_steps > 0)
        json_object_set_new(root, "schedule_steps", json_integer((json_int_t)s->sched_steps));
    if (root && o && o->hp)
        json_object_set_new(root, "hyperparameters", hparams_json(o->hp));
    if (root) {
        json_object_set_new(root, "weights_dtype",
                            json_string(hf_torch_dtype(o ? o->weights_dtype : DTYPE_FP32)));
        json_object_set_new(root, "weights_only", json_boolean(o && o->weights_only));
    }
    return root;
}

/* The files of a step directory, into dir (each synced). */
static int read_latest(const char *dir, char *name, size_t n, Err *e);

/* The Hugging Face folder the run's model came from (o->tokenizer_from: a checkpoint
 * directory's latest step, or hf_folder_of's), into dir; "" for none. */
static void source_folder(const CkptSaveOptions *o, char *dir, size_t n)
{
    char name[NAME_CAP];
    dir[0] = '\0';
    if (!o || !o->tokenizer_from)
        return;
    if (!read_latest(o->tokenizer_from, name, sizeof name, NULL))
        snprintf(dir, n, "%s/%s", o->tokenizer_from, name);
    else
        hf_folder_of(o->tokenizer_from, dir, n);
}

/* The Hugging Face files of a step directory, into dir: config.json (the source folder's token
 * ids carried), the weights, the tokenizer files. */
static int write_hf_files(const char *dir, const ModelConfig *c, const ModelLayout *l,
                          const HfSource *src_state, const CkptSaveOptions *o, Err *e)
{
    char src[PATH_CAP], file[FILE_CAP], config[FILE_CAP];
    source_folder(o, src, sizeof src);
    snprintf(file, sizeof file, "%s/config.json", dir);
    snprintf(config, sizeof config, "%s/config.json", src);
    DType dtype = o ? o->weights_dtype : DTYPE_FP32;
    int rc = hf_write_config(file, c, dtype, src[0] ? config : NULL, e);
    if (!rc)
        rc = hf_save_weights_from(dir, l, src_state, dtype, o ? o->max_shard_bytes : 0, e);
    if (!rc && src[0])
        rc = hf_copy_tokenizer(src, dir, e);
    return rc;
}

static int write_step_files(const char *dir, const ModelConfig *c, const ModelLayout *l,
                            const HfSource *src, const TrainState *s, const CkptSaveOptions *o,
                            Err *e)
{
    char file[FILE_CAP];
    bool state = !(o && o->weights_only);
    int rc = write_hf_files(dir, c, l, src, o, e);
    snprintf(file, sizeof file, "%s/%s", dir, MASTER_FILE);
    if (!rc && state && o && o->weights_dtype != DTYPE_FP32)
        rc = hf_save_tensors(file, l, src, e);
    snprintf(file, sizeof file, "%s/optimizer.safetensors", dir);
    if (!rc && state)
        rc = write_optimizer(file, l->total, src, e);
    snprintf(file, sizeof file, "%s/state.json", dir);
    if (!rc) /* 17 digits: the norm and the scale come back exactly */
        rc = hf_write_json(file, state_json(c, s, o), 17, e);
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
    int rc = hf_write_text(tmp, text, e);
    if (!rc && rename(tmp, latest))
        rc = err_set(e, -errno, "%s: rename: %s", latest, strerror(errno));
    return rc ? rc : sync_dir(dir, e);
}

static int list_steps(const char *dir, int64_t **steps, int *n, Err *e);

/* Removes dir's step directories but the newest keep (latest names the newest, just saved). */
static int keep_newest(const char *dir, int keep, Err *e)
{
    int64_t *steps;
    int n, rc = list_steps(dir, &steps, &n, e);
    for (int i = keep; !rc && i < n; i++) {
        char name[NAME_CAP], path[PATH_CAP];
        step_name(name, sizeof name, steps[i]);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (remove_tree(path))
            rc = err_set(e, -EIO, "%s: cannot remove (--save-total-limit %d): %s", path, keep,
                         strerror(errno));
    }
    free(steps);
    return rc ? rc : sync_dir(dir, e);
}

int ckpt_save(const char *dir, const ModelConfig *c, const ModelLayout *l, const float *params,
              const float *m, const float *v, const TrainState *s, Err *e)
{
    return ckpt_save_with(dir, c, l, params, m, v, s, NULL, e);
}

int ckpt_save_with(const char *dir, const ModelConfig *c, const ModelLayout *l,
                   const float *params, const float *m, const float *v, const TrainState *s,
                   const CkptSaveOptions *o, Err *e)
{
    HfFlat f = {{params, m, v}};
    HfSource src = hf_source_flat(&f);
    return ckpt_save_from(dir, c, l, &src, s, o, e);
}

/* A save's source counted as it is read, for the progress line: each value read is one of
 * the files' values (4 bytes in fp32 files, the weights' dtype's in theirs). */
typedef struct Counted {
    const HfSource *src;
    Progress *pg;
    double bytes, weight_bytes; /* so far; a weight's in the Hugging Face files */
    int params_reads;           /* passes over the weights: the first is the HF files' */
    size_t next_param;          /* where the current pass over the weights is */
} Counted;

static int counted_get(void *user, HfPart part, size_t begin, size_t n, float *dst, Err *e)
{
    Counted *k = user;
    int rc = k->src->get(k->src->user, part, begin, n, dst, e);
    if (part == HF_PART_PARAMS && begin < k->next_param)
        k->params_reads++; /* a new pass: the master weights after the HF files' */
    if (part == HF_PART_PARAMS)
        k->next_param = begin + n;
    bool hf = part == HF_PART_PARAMS && k->params_reads == 0;
    k->bytes += (double)n * (hf ? k->weight_bytes : 4);
    progress_to(k->pg, k->bytes);
    return rc;
}

/* The bytes a save of l under o writes (the tokenizer and the JSON files aside). */
static double save_bytes(const ModelLayout *l, const CkptSaveOptions *o)
{
    DType d = o ? o->weights_dtype : DTYPE_FP32;
    double n = (double)l->total, bytes = n * (double)dtype_bytes(d);
    if (o && o->weights_only)
        return bytes;
    return bytes + (d != DTYPE_FP32 ? 4 * n : 0) + 8 * n;
}

static int save_step(const char *dir, const ModelConfig *c, const ModelLayout *l,
                     const HfSource *src, const TrainState *s, const CkptSaveOptions *o, Err *e);

int ckpt_save_from(const char *dir, const ModelConfig *c, const ModelLayout *l,
                   const HfSource *src, const TrainState *s, const CkptSaveOptions *o, Err *e)
{
    char what[96];
    snprintf(what, sizeof what, "saving step %lld", (long long)s->step);
    Progress pg;
    progress_begin(&pg, o ? o->progress : NULL, what, save_bytes(l, o), "B");
    Counted k = {.src = src, .pg = &pg,
                 .weight_bytes = (double)dtype_bytes(o ? o->weights_dtype : DTYPE_FP32)};
    HfSource counted = {.get = counted_get, .user = &k};
    int rc = save_step(dir, c, l, &counted, s, o, e);
    if (!rc)
        progress_end(&pg);
    return rc;
}

static int save_step(const char *dir, const ModelConfig *c, const ModelLayout *l,
                     const HfSource *src, const TrainState *s, const CkptSaveOptions *o, Err *e)
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
    int rc = write_step_files(tmp, c, l, src, s, o, e);
    if (!rc)
        rc = sync_dir(tmp, e);
    if (rc)
        return rc;
    if (access(final, F_OK) == 0 && remove_tree(final)) /* the same step saved again */
        return err_set(e, -EIO, "%s: cannot replace", final);
    if (rename(tmp, final))
        return err_set(e, -errno, "%s: rename: %s", final, strerror(errno));
    rc = sync_dir(dir, e); /* the step directory is in place before latest names it */
    if (!rc)
        rc = write_latest(dir, name, e);
    return rc || !o || o->keep_last <= 0 ? rc : keep_newest(dir, o->keep_last, e);
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

int ckpt_load_model(const char *path, const ModelConfig *c, const ModelLayout *l, float *params,
                    Err *e)
{
    HfSink flat = hf_sink_flat(params);
    return hf_load(path, c, l, &flat, e);
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
    const char *arch = NULL; /* absent from older checkpoints */
    json_unpack(model, "{s?s}", "arch", &arch);
    if (arch && strcmp(arch, arch_name(c->arch)))
        return err_set(e, -EINVAL, "%s: the checkpoint is of a %s model; this run's %s is %s: "
                       "give the --model it was trained with", path, arch, c->name,
                       arch_name(c->arch));
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
    int rc;
    if ((rc = check_range(path, "step", s->step, 0, CKPT_STEP_MAX, e)) ||
        (rc = check_range(path, "skipped_steps", s->skipped, 0, s->step, e)) ||
        (rc = check_range(path, "loss_scale_good_steps", s->scale_good, 0, s->step, e)) ||
        /* a run saves at most its --steps */
        (s->sched_steps && (rc = check_range(path, "schedule_steps", s->sched_steps, s->step,
                                             CKPT_STEP_MAX, e))) ||
        (rc = check_range(path, "loader_epoch", s->epoch, 0, INT64_MAX, e)) ||
        (rc = check_range(path, "loader_index", s->index, 0, INT64_MAX, e)))
        return rc;
    if (!(isfinite(s->prev_grad_norm) && s->prev_grad_norm >= 0))
        return err_set(e, -EINVAL, "%s: prev_grad_norm is %g; it must be finite and at least 0",
                       path, s->prev_grad_norm);
    /* 0: never set; else what the trainer's halving and doubling can reach */
    if (s->loss_scale != 0 && !(s->loss_scale >= 1.0 / 65536 && s->loss_scale <= FLT_MAX))
        return err_set(e, -EINVAL, "%s: loss_scale is %g; it must be 0 (unset) or 2^-16 to %g",
                       path, s->loss_scale, (double)FLT_MAX);
    return 0;
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
    int rc;
    if ((rc = check_range(path, "data.files", files, 1, DATA_MAX_FILES, e)) ||
        (rc = check_range(path, "data.tokens", tokens, 1, INT64_MAX, e)))
        return rc;
    if (strlen(crc) != 8 || strspn(crc, "0123456789abcdef") != 8)
        return err_set(e, -EINVAL, "%s: data.crc32c is not 8 lowercase hex digits", path);
    *print = (DataPrint){.files = files, .tokens = tokens,
                         .crc32c = (uint32_t)strtoul(crc, NULL, 16)};
    return 0;
}

/* state.json's root: its fields checked against this run's model c into *s. */
static int parse_state(const char *path, json_t *root, const ModelConfig *c, TrainState *s,
                       Err *e)
{
    json_int_t step = 0, epoch = 0, index = 0, seed = 0, good = 0, skipped = 0, sched = 0;
    double norm = 0, scale = 0;
    json_t *model, *data = NULL;
    /* the loss-scaling fields, the data's fingerprint and the schedule's length are optional:
     * checkpoints from before them resume unscaled, their data and schedule unchecked */
    if (json_unpack(root, "{s:I, s:I, s:I, s:I, s:F, s?F, s?I, s?I, s:o, s?o, s?I}", "step",
                    &step, "loader_epoch", &epoch, "loader_index", &index, "seed", &seed,
                    "prev_grad_norm", &norm, "loss_scale", &scale, "loss_scale_good_steps",
                    &good, "skipped_steps", &skipped, "model", &model, "data", &data,
                    "schedule_steps", &sched))
        return err_set(e, -EINVAL, "%s: missing or malformed fields (step, loader_epoch, "
                       "loader_index, seed, prev_grad_norm, model)", path);
    int weights_only = 0;
    json_unpack(root, "{s?b}", "weights_only", &weights_only);
    if (weights_only)
        return err_set(e, -EINVAL, "%s: saved with --save-weights-only, it holds the weights "
                       "and no training state to resume; fine-tune from its folder (--model) "
                       "instead", path);
    TrainState got = {.step = step, .epoch = epoch, .index = index, .seed = (uint64_t)seed,
                      .prev_grad_norm = norm, .loss_scale = scale, .scale_good = good,
                      .skipped = skipped, .sched_steps = sched};
    int rc;
    if ((rc = check_model(path, model, c, e)) || (rc = check_state(path, &got, e)) ||
        (rc = read_data_print(path, data, &got.data, e)))
        return rc;
    *s = got;
    return 0;
}

static int read_state(const char *path, const ModelConfig *c, TrainState *s, Err *e)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return err_set(e, -EINVAL, "%s:%d: %s", path, jerr.line, jerr.text);
    int rc = parse_state(path, root, c, s, e);
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

static bool regular_file(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISREG(st.st_mode);
}

/* The first of step_files that dir/name lacks, or NULL when it holds them all. */
static const char *missing_file(const char *dir, const char *name)
{
    char path[PATH_CAP], index[PATH_CAP];
    for (size_t i = 0; i < sizeof step_files / sizeof *step_files; i++) {
        snprintf(path, sizeof path, "%s/%s/%s", dir, name, step_files[i]);
        snprintf(index, sizeof index, "%s/%s/%s", dir, name, HF_INDEX_FILE);
        bool weights = !strcmp(step_files[i], HF_SINGLE_FILE);
        if (!regular_file(path) && !(weights && regular_file(index)))
            return step_files[i];
    }
    return NULL;
}

/* The hyperparameters object of state.json (absent: h->set false). */
static void read_hparams(json_t *root, TrainHparams *h)
{
    json_int_t warmup, batch, seq;
    *h = (TrainHparams){0};
    json_t *o = json_object_get(root, "hyperparameters");
    if (!o || json_unpack(o, "{s:F, s:I, s:F, s:F, s:F, s:F, s:F, s:F, s:I, s:I}", "lr", &h->lr,
                          "warmup", &warmup, "min_lr_ratio", &h->min_lr_ratio, "weight_decay",
                          &h->weight_decay, "beta1", &h->beta1, "beta2", &h->beta2, "eps",
                          &h->eps, "clip", &h->clip, "batch", &batch, "seq", &seq))
        return;
    h->warmup = warmup, h->batch = batch, h->seq = seq;
    h->set = true;
}

int ckpt_read_hparams(const char *dir, TrainHparams *hp, int64_t *sched_steps)
{
    char name[NAME_CAP], path[PATH_CAP];
    *hp = (TrainHparams){0};
    *sched_steps = 0;
    if (read_latest(dir, name, sizeof name, NULL))
        return 0;
    snprintf(path, sizeof path, "%s/%s/state.json", dir, name);
    json_t *root = json_load_file(path, 0, NULL);
    json_int_t sched = 0;
    if (root && !json_unpack(root, "{s?I}", "schedule_steps", &sched) && sched > 0)
        *sched_steps = sched;
    if (root)
        read_hparams(root, hp);
    json_decref(root);
    return 0;
}

/* A step's data into flat arrays (ckpt_load's CkptStepLoad). */
typedef struct FlatLoad {
    const ModelConfig *c;
    const ModelLayout *l;
    float *params, *m, *v;
} FlatLoad;

/* Where a step directory's fp32 master weights are, into path: master.safetensors, else the
 * folder's own weights when they are fp32 (state.json's weights_dtype float32, or absent: a
 * checkpoint from before it). 0, or -ENOENT with e (weights of another dtype, no master). */
static int master_path(const char *step_dir, char *path, size_t n, Err *e)
{
    snprintf(path, n, "%s/%s", step_dir, MASTER_FILE);
    if (regular_file(path))
        return 0;
    snprintf(path, n, "%s/state.json", step_dir);
    json_t *root = json_load_file(path, 0, NULL);
    const char *dt = NULL;
    json_unpack(root, "{s?s}", "weights_dtype", &dt);
    bool fp32 = !dt || !strcmp(dt, "float32");
    int rc = fp32 ? 0 : err_set(e, -ENOENT, "%s has %s weights and no %s (the fp32 master "
                                "weights a resume needs)", step_dir, dt, MASTER_FILE);
    json_decref(root);
    snprintf(path, n, "%s", step_dir);
    return rc;
}

static int load_flat(void *user, const char *step_dir, Err *e)
{
    const FlatLoad *f = user;
    char path[PATH_CAP];
    /* the master weights: state.json, checked before, describes the model, so the folder's
     * config.json (Hugging Face's) is not read: a user may edit it, older ones are GPT2Config
     * whatever the family */
    HfSink flat = hf_sink_flat(f->params);
    int rc = master_path(step_dir, path, sizeof path, e);
    if (!rc)
        rc = hf_load_weights(path, f->c, f->l, &flat, e);
    snprintf(path, sizeof path, "%s/optimizer.safetensors", step_dir);
    return rc ? rc : load_optimizer(path, f->l, f->m, f->v, e);
}

/* dir/name's state.json, checked against c, into *s. */
static int step_state(const char *dir, const char *name, const ModelConfig *c, TrainState *s,
                      Err *e)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s/state.json", dir, name);
    return read_state(path, c, s, e);
}

/* Whether dir/name's state.json says it was saved with the weights alone. */
static bool weights_only_step(const char *dir, const char *name)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s/state.json", dir, name);
    json_t *root = json_load_file(path, 0, NULL);
    int only = 0;
    json_unpack(root, "{s?b}", "weights_only", &only);
    json_decref(root);
    return only;
}

/* dir/name's model and optimizer, put by load. */
static int step_data(const char *dir, const char *name, CkptStepLoad load, void *user, Err *e)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return load(user, path, e);
}

/* Loads the checkpoint in dir/name: the state, then the model and the optimizer through
 * load. */
static int load_step(const char *dir, const char *name, const ModelConfig *c,
                     CkptStepLoad load, void *user, TrainState *s, Err *e)
{
    TrainState got;
    int rc = step_state(dir, name, c, &got, e);
    if (!rc)
        rc = step_data(dir, name, load, user, e);
    if (!rc)
        *s = got;
    return rc;
}

struct CkptReader {
    HfReader *weights;
    StFile opt_m, opt_v;         /* the optimizer's file twice: m and v each read front to back */
    StCursor m, v;
    size_t next;                 /* where the next range starts */
};

int ckpt_reader_open(CkptReader **out, const char *step_dir, const ModelConfig *c,
                     const ModelLayout *l, Err *e)
{
    CkptReader *r = calloc(1, sizeof *r);
    *out = r;
    if (!r)
        return err_set(e, -ENOMEM, "out of memory");
    char path[PATH_CAP];
    int rc = master_path(step_dir, path, sizeof path, e);
    if (rc || (rc = hf_reader_open_weights(&r->weights, path, c, l, e)))
        return rc; /* the caller's ckpt_reader_close frees what was opened */
    snprintf(path, sizeof path, "%s/optimizer.safetensors", step_dir);
    if ((rc = st_open(&r->opt_m, path, e)) || (rc = st_open(&r->opt_v, path, e)))
        return rc;
    const StTensor *tm = st_find(&r->opt_m, "adam.m"), *tv = st_find(&r->opt_v, "adam.v");
    if (!tm || !tv || st_numel(tm) != l->total || st_numel(tv) != l->total)
        return err_set(e, -EINVAL, "%s: needs adam.m and adam.v of %zu values each", path,
                       l->total);
    r->m = (StCursor){.t = tm}, r->v = (StCursor){.t = tv};
    return 0;
}

int ckpt_reader_read(CkptReader *r, size_t begin, size_t n, float *params, float *m, float *v,
                     Err *e)
{
    if (begin != r->next)
        return err_set(e, -EINVAL, "internal: checkpoint range at %zu, expected %zu", begin,
                       r->next);
    int rc = hf_reader_read_values(r->weights, begin, n, params, e);
    if (!rc)
        rc = st_read_next(&r->opt_m, &r->m, m, n, e);
    if (!rc)
        rc = st_read_next(&r->opt_v, &r->v, v, n, e);
    r->next = begin + n;
    return rc;
}

void ckpt_reader_set_pool(CkptReader *r, WorkPool *wp)
{
    hf_reader_set_pool(r->weights, wp);
    r->opt_m.wp = r->opt_v.wp = wp;
}

void ckpt_reader_close(CkptReader *r)
{
    if (!r)
        return;
    hf_reader_close(r->weights);
    st_close(&r->opt_m);
    st_close(&r->opt_v);
    free(r);
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

/* The step latest names when it was tried and did not load: its name and its error. */
typedef struct Tried {
    const char *name;
    int rc;
} Tried;

/* No step of dir's n loads (t: latest's tried first): the error, latest's own when it was
 * tried (the others' are on stderr), else the newest's. */
static int none_loads(const char *dir, const char *why, int n, const Tried *t,
                      const Err *newest, int newest_rc, Err *e)
{
    if (!t->name)
        return err_set(e, newest_rc, "%s: no complete checkpoint to resume (%s); the newest: %s",
                       dir, why, newest->msg);
    if (n == 1)
        return err_set(e, t->rc, "%s: no complete checkpoint to resume (%s)", dir, why);
    return err_set(e, t->rc, "%s: no complete checkpoint to resume (%s); the other %d step "
                   "director%s not load either", dir, why, n - 1, n == 2 ? "y does" : "ies do");
}

/* Loads dir/name, the step latest names, with all its files there: 0. Its state not fitting
 * this run, or a failure that is not the files' damage: -errno with e, as the older steps
 * would share it. Its weights or
 * optimizer not loading: -errno with t naming the step and why saying what failed, for
 * load_newest, whose older step rewrites every value this one put before its damage showed. */
static int load_latest(const char *dir, const char *name, const ModelConfig *c,
                       CkptStepLoad load, void *user, TrainState *s, Tried *t, char *why,
                       size_t n, Err *e)
{
    TrainState got;
    Err el;
    int rc = step_state(dir, name, c, &got, e);
    if (rc)
        return rc;
    if (!(rc = step_data(dir, name, load, user, &el))) {
        *s = got;
        return 0;
    }
    /* damage: a tensor that fails its checksum or its header, a file cut short or gone; any
     * other failure (a full disk filling the SSD tier, a read error) is the run's, not the
     * step's, and the older steps would fail the same way */
    if (rc != -EINVAL && rc != -EBADMSG && rc != -ENOENT)
        return err_set(e, rc, "%s", el.msg);
    *t = (Tried){name, rc};
    snprintf(why, n, "%s/latest names %s, which does not load: %s", dir, name, el.msg);
    return rc;
}

/* Resumes from the newest step directory of dir that loads completely (its files there, their
 * checksums right, its state valid), saying on stderr why (latest's problem) and what it
 * skipped; t's step, tried already, is not tried again. */
static int load_newest(const char *dir, const char *why, const Tried *t, const ModelConfig *c,
                       CkptStepLoad load, void *user, TrainState *s, Err *e)
{
    int64_t *steps;
    int n, rc = list_steps(dir, &steps, &n, e);
    Err newest = {""};
    int newest_rc = 0, i;
    for (i = 0; !rc && i < n; i++) {
        char name[NAME_CAP];
        step_name(name, sizeof name, steps[i]);
        if (t->name && !strcmp(name, t->name))
            continue;
        const char *lacks = missing_file(dir, name);
        Err ei;
        int ri = lacks ? err_set(&ei, -ENOENT, "it has no %s", lacks)
                       : load_step(dir, name, c, load, user, s, &ei);
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
        rc = none_loads(dir, why, n, t, &newest, newest_rc, e);
    return rc;
}

int ckpt_load(const char *dir, const ModelConfig *c, const ModelLayout *l, float *params,
              float *m, float *v, TrainState *s, Err *e)
{
    FlatLoad f = {c, l, params, m, v};
    return ckpt_load_with(dir, c, load_flat, &f, s, e);
}

int ckpt_load_with(const char *dir, const ModelConfig *c, CkptStepLoad load, void *user,
                   TrainState *s, Err *e)
{
    char name[256], why[PATH_CAP];
    Err el;
    Tried t = {NULL, 0};
    int rc = read_latest(dir, name, sizeof name, &el);
    if (rc && rc != -ENOENT)
        return err_set(e, rc, "%s", el.msg);
    if (!rc && weights_only_step(dir, name)) /* no training state: say so, not "damaged" */
        return step_state(dir, name, c, &(TrainState){0}, e);
    const char *lacks = rc ? NULL : missing_file(dir, name);
    if (rc)
        snprintf(why, sizeof why, "%s", el.msg);
    else if (lacks)
        snprintf(why, sizeof why, "%s/latest names %s, which has no %s", dir, name, lacks);
    else if (!(rc = load_latest(dir, name, c, load, user, s, &t, why, sizeof why, e)) || !t.name)
        return rc;
    return load_newest(dir, why, &t, c, load, user, s, e);
}
