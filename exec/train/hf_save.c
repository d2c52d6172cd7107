/* hf_save: a model written as transformers' save_pretrained writes it; see hf_save.h. */
#include "hf_save.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf_folder.h"
#include "regfile.h"
#include "safetensors.h"

enum { PATH_CAP = 4200, SHARD_NAME_CAP = 64 };

/* ---- Files written synced ---- */

int hf_write_text(const char *path, const char *text, Err *e)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return err_set(e, -errno, "%s: cannot write: %s", path, strerror(errno));
    int rc = fputs(text, f) < 0 || fflush(f) || fsync(fileno(f)) ? -(errno ? errno : EIO) : 0;
    if (fclose(f) && !rc)
        rc = -(errno ? errno : EIO);
    return rc ? err_set(e, rc, "%s: cannot write: %s", path, strerror(-rc)) : 0;
}

static int write_json_flags(const char *path, json_t *root, size_t flags, Err *e)
{
    char *text = root ? json_dumps(root, flags) : NULL;
    json_decref(root);
    if (!text)
        return err_set(e, -ENOMEM, "out of memory writing %s", path);
    int rc = hf_write_text(path, text, e);
    free(text);
    return rc;
}

int hf_write_json(const char *path, json_t *root, int digits, Err *e)
{
    return write_json_flags(path, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                            JSON_REAL_PRECISION(digits), e);
}

/* The fewest significant digits (at least 6, jansson's JSON_REAL_PRECISION) that write each of
 * x[0..n) so that it reads back exactly. */
static int round_trip_digits(const double *x, int n)
{
    int digits = 6;
    for (int i = 0; i < n; i++) {
        char buf[400]; /* %g of a double: at most 310 digits and a few */
        for (;; digits++) {
            snprintf(buf, sizeof buf, "%.*g", digits, x[i]);
            if (digits >= 17 || strtod(buf, NULL) == x[i])
                break;
        }
    }
    return digits;
}

/* Hugging Face's GPT2Config for c, so that GPT2LMHeadModel.from_pretrained(dir) loads it:
 * fuyou's GPT-2 is theirs with the tanh GELU ("gelu_new"), LayerNorm eps 1e-5 and no dropout.
 * n_inner only when the MLP is not 4h (their default); GPT-2's <|endoftext|> as bos and eos
 * when the vocabulary is GPT-2's (or llm.c's padding of it), else null: their default, 50256,
 * would lie outside a smaller vocabulary. */
static json_t *gpt2_config_json(const ModelConfig *c)
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
    bool gpt2_vocab = c->vocab == 50257 || c->vocab == 50304;
    if (root) {
        json_object_set_new(root, "bos_token_id", gpt2_vocab ? json_integer(50256) : json_null());
        json_object_set_new(root, "eos_token_id", gpt2_vocab ? json_integer(50256) : json_null());
    }
    return root;
}

/* LlamaConfig (Qwen2Config with q/k/v biases) for c, with every field model_hf.c reads and
 * the ones transformers needs to build the same model: SiLU, no attention or MLP biases beyond
 * Qwen2's, no sliding window. bos/eos null: the tokenizer's, unknown here. */
static json_t *llama_config_json(const ModelConfig *c)
{
    bool qwen = c->qkv_bias;
    const RopeScaling *r = &c->rope_scaling;
    json_t *scaling = r->factor > 0 ? json_pack("{s:s, s:f, s:f, s:f, s:i}", "rope_type",
                                                "llama3", "factor", r->factor,
                                                "low_freq_factor", r->low_freq_factor,
                                                "high_freq_factor", r->high_freq_factor,
                                                "original_max_position_embeddings",
                                                r->original_max_seq) : json_null();
    json_t *root = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:o, "
                             "s:b, s:s, s:b, s:b, s:f, s:f, s:b, s:n, s:n, s:s}",
                             "architectures", qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM",
                             "model_type", qwen ? "qwen2" : "llama",
                             "vocab_size", c->vocab, "hidden_size", c->d_model,
                             "intermediate_size", c->d_ff, "num_hidden_layers", c->n_layer,
                             "num_attention_heads", c->n_head,
                             "num_key_value_heads", model_kv_heads(c),
                             "max_position_embeddings", c->max_seq,
                             "rms_norm_eps", model_norm_eps(c), "rope_theta", model_rope_theta(c),
                             "rope_scaling", scaling, "tie_word_embeddings", c->tied,
                             "hidden_act", "silu", "attention_bias", false, "mlp_bias", false,
                             "attention_dropout", 0.0, "initializer_range", 0.02,
                             "use_cache", true, "bos_token_id", "eos_token_id",
                             "torch_dtype", "float32");
    if (root && qwen)
        json_object_set_new(root, "use_sliding_window", json_false());
    else if (root)
        json_object_set_new(root, "head_dim", json_integer(model_head_dim(c)));
    return root;
}

/* The token ids of the config at source (NULL or unreadable: none) over root's. */
static void carry_token_ids(json_t *root, const char *source)
{
    static const char *const keys[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    FILE *f = NULL;
    json_t *src = source && !regfile_fopen(source, &f, NULL) ? json_loadf(f, 0, NULL) : NULL;
    if (f)
        fclose(f);
    for (size_t i = 0; root && json_is_object(src) && i < sizeof keys / sizeof *keys; i++) {
        json_t *v = json_object_get(src, keys[i]);
        if (json_is_integer(v) || json_is_array(v))
            json_object_set(root, keys[i], v);
    }
    json_decref(src);
}

const char *hf_torch_dtype(DType d)
{
    return d == DTYPE_BF16 ? "bfloat16" : d == DTYPE_FP16 ? "float16" : "float32";
}

const char *hf_st_dtype(DType d)
{
    return d == DTYPE_BF16 ? "BF16" : d == DTYPE_FP16 ? "F16" : "F32";
}

int hf_write_config(const char *path, const ModelConfig *c, DType dtype, const char *source,
                    Err *e)
{
    json_t *root = c->arch == ARCH_LLAMA ? llama_config_json(c) : gpt2_config_json(c);
    if (root)
        json_object_set_new(root, "torch_dtype", json_string(hf_torch_dtype(dtype)));
    carry_token_ids(root, source);
    const RopeScaling *r = &c->rope_scaling;
    double reals[] = {model_norm_eps(c), model_rope_theta(c), r->factor, r->low_freq_factor,
                      r->high_freq_factor};
    return hf_write_json(path, root, round_trip_digits(reals, 5), e);
}

/* ---- Writing the weights ---- */

/* The layout's tensors into shards of values of esize bytes: first[k] is shard k's first
 * tensor (first[n] = l->n). */
static int cut_shards(const ModelLayout *l, size_t esize, uint64_t max_bytes, int *first)
{
    int n = 0;
    uint64_t bytes = 0;
    for (int i = 0; i < l->n; i++) {
        uint64_t b = esize * (uint64_t)l->t[i].numel;
        if (i == 0 || (bytes > 0 && bytes + b > max_bytes)) {
            if (first)
                first[n] = i;
            n++;
            bytes = 0;
        }
        bytes += b;
    }
    if (first)
        first[n] = l->n;
    return n;
}

int hf_shard_count(const ModelLayout *l, DType dtype, uint64_t max_shard_bytes)
{
    return cut_shards(l, dtype_bytes(dtype), max_shard_bytes ? max_shard_bytes
                                                             : HF_MAX_SHARD_BYTES, NULL);
}

static int flat_get(void *user, HfPart part, size_t begin, size_t n, float *dst, Err *e)
{
    const HfFlat *f = user;
    (void)e;
    memcpy(dst, f->part[part] + begin, n * sizeof *dst);
    return 0;
}

HfSource hf_source_flat(HfFlat *f)
{
    return (HfSource){.get = flat_get, .user = f};
}

/* One shard's tensors pulled from the source (st_writer_finish_pull). */
typedef struct ShardPull {
    const ModelLayout *l;
    const HfSource *src;
    int first;
    float *conv;       /* a Conv1D weight, transposed as the file stores it */
    size_t conv_cap;
} ShardPull;

static int pull_tensor(void *user, int i, size_t at, size_t n, float *dst, Err *e)
{
    ShardPull *sp = user;
    const ParamTensor *t = &sp->l->t[sp->first + i];
    if (!t->conv1d)
        return sp->src->get(sp->src->user, HF_PART_PARAMS, t->offset + at, n, dst, e);
    if (at == 0) {
        if (t->numel > sp->conv_cap) {
            free(sp->conv);
            sp->conv_cap = 0;
            if (!(sp->conv = malloc(2 * t->numel * sizeof *sp->conv)))
                return err_set(e, -ENOMEM, "out of memory for tensor %s", t->name);
            sp->conv_cap = t->numel;
        }
        float *ours = sp->conv + t->numel;
        int rc = sp->src->get(sp->src->user, HF_PART_PARAMS, t->offset, t->numel, ours, e);
        if (rc)
            return rc;
        hf_transpose(sp->conv, ours, t->rows, t->cols);
    }
    memcpy(dst, sp->conv + at, n * sizeof *dst);
    return 0;
}

/* Tensors [first, last) of l into one safetensors file at path, stored as dtype. */
static int write_shard(const char *path, const ModelLayout *l, const HfSource *src, DType dtype,
                       int first, int last, Err *e)
{
    size_t chunk = HF_SAVE_CHUNK;
    for (int i = first; i < last; i++) /* a Conv1D weight goes whole */
        if (l->t[i].conv1d && l->t[i].numel > chunk)
            chunk = l->t[i].numel;
    StWriter w;
    int rc = st_writer_begin_as(&w, path, hf_st_dtype(dtype), e);
    for (int i = first; !rc && i < last; i++) {
        int64_t shape[2];
        int nd = hf_file_shape(&l->t[i], shape);
        rc = st_writer_add(&w, l->t[i].name, NULL, nd, shape, e);
    }
    ShardPull sp = {.l = l, .src = src, .first = first};
    if (!rc) /* "pt": what transformers expects */
        rc = st_writer_finish_pull(&w, pull_tensor, &sp, chunk, "format", "pt", e);
    else
        st_writer_abort(&w);
    free(sp.conv);
    return rc;
}

/* model.safetensors.index.json for the shards first[] cut: total_size and each tensor's shard,
 * keys sorted as transformers writes them. */
static int write_index(const char *dir, const ModelLayout *l, size_t esize, const int *first,
                       int n, Err *e)
{
    char path[PATH_CAP], shard[SHARD_NAME_CAP];
    json_t *map = json_object();
    uint64_t total = 0;
    for (int k = 0; map && k < n; k++) {
        snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", k + 1, n);
        for (int i = first[k]; i < first[k + 1]; i++) {
            json_object_set_new(map, l->t[i].name, json_string(shard));
            total += esize * (uint64_t)l->t[i].numel;
        }
    }
    json_t *root = map ? json_pack("{s:{s:I}, s:o}", "metadata", "total_size",
                                   (json_int_t)total, "weight_map", map) : NULL;
    snprintf(path, sizeof path, "%s/%s", dir, HF_INDEX_FILE);
    return write_json_flags(path, root, JSON_INDENT(2) | JSON_SORT_KEYS, e);
}

int hf_save_weights(const char *dir, const ModelLayout *l, const float *params, DType dtype,
                    uint64_t max_shard_bytes, Err *e)
{
    HfFlat f = {{params, NULL, NULL}};
    HfSource src = hf_source_flat(&f);
    return hf_save_weights_from(dir, l, &src, dtype, max_shard_bytes, e);
}

int hf_save_tensors(const char *path, const ModelLayout *l, const HfSource *src, Err *e)
{
    return write_shard(path, l, src, DTYPE_FP32, 0, l->n, e);
}

int hf_save_weights_from(const char *dir, const ModelLayout *l, const HfSource *src,
                         DType dtype, uint64_t max_shard_bytes, Err *e)
{
    uint64_t max = max_shard_bytes ? max_shard_bytes : HF_MAX_SHARD_BYTES;
    size_t esize = dtype_bytes(dtype);
    int n = cut_shards(l, esize, max, NULL);
    int *first = malloc((size_t)(n + 1) * sizeof *first);
    if (!first)
        return err_set(e, -ENOMEM, "out of memory writing %s", dir);
    cut_shards(l, esize, max, first);
    char path[PATH_CAP];
    int rc = 0;
    for (int k = 0; !rc && k < n; k++) {
        if (n == 1)
            snprintf(path, sizeof path, "%s/%s", dir, HF_SINGLE_FILE);
        else
            snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, k + 1, n);
        rc = write_shard(path, l, src, dtype, first[k], first[k + 1], e);
    }
    if (!rc && n > 1)
        rc = write_index(dir, l, esize, first, n, e);
    free(first);
    return rc;
}

/* ---- Tokenizer files ---- */

/* Copies the regular file from to a new file at path to, synced. */
static int copy_file(const char *from, const char *to, Err *e)
{
    int in = regfile_open(from, e);
    if (in < 0)
        return in;
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), rc = 0;
    if (out < 0)
        rc = err_set(e, -errno, "%s: cannot write: %s", to, strerror(errno));
    char buf[1 << 16];
    while (!rc) {
        ssize_t got = read(in, buf, sizeof buf), put = 0;
        if (got == 0)
            break;
        if (got < 0 && errno != EINTR)
            rc = err_set(e, -errno, "%s: cannot read: %s", from, strerror(errno));
        while (!rc && put < got) { /* a short write goes on where it stopped */
            ssize_t w = write(out, buf + put, (size_t)(got - put));
            if (w > 0)
                put += w;
            else if (w == 0 || errno != EINTR)
                rc = err_set(e, -(w ? errno : EIO), "%s: cannot write: %s", to,
                             strerror(w ? errno : EIO));
        }
    }
    if (!rc && fsync(out))
        rc = err_set(e, -errno, "%s: fsync: %s", to, strerror(errno));
    if (out >= 0 && close(out) && !rc)
        rc = err_set(e, -errno, "%s: close: %s", to, strerror(errno));
    close(in);
    return rc;
}

int hf_copy_tokenizer(const char *from, const char *to, Err *e)
{
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json",
                                        "special_tokens_map.json", "tokenizer.model",
                                        "vocab.json", "merges.txt", "generation_config.json"};
    char src[PATH_CAP], dst[PATH_CAP];
    int rc = 0;
    for (size_t i = 0; !rc && i < sizeof files / sizeof *files; i++) {
        snprintf(src, sizeof src, "%s/%s", from, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", to, files[i]);
        struct stat st;
        if (stat(src, &st) && errno == ENOENT)
            continue;
        rc = copy_file(src, dst, e);
    }
    return rc;
}

