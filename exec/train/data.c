/* data: token files, masks and the batch loader; see data.h. */
#include "data.h"

#include <errno.h>
#include <glob.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "crc32c.h"
#include "npy.h"
#include "regfile.h"

enum {
    LLMC_MAGIC = 20240520,     /* versions 1 (uint16) and 2 (uint32, fuyou's) */
    LLMC_MAGIC_U32 = 20240801, /* llm.c's Llama 3 files: version 7, uint32 */
    LLMC_HEADER_INTS = 256,
    LLMC_HEADER_BYTES = LLMC_HEADER_INTS * 4,
};

const char *data_format_name(DataFormat f)
{
    static const char *names[] = {"auto", "llmc", "u16", "text", "npy"};
    return names[f];
}

int data_format_parse(const char *s, DataFormat *out)
{
    for (int f = DATA_AUTO; f <= DATA_NPY; f++)
        if (!strcasecmp(s, data_format_name(f)))
            return *out = f, 0;
    return -EINVAL;
}

void data_free(TokenData *d)
{
    for (int i = 0; i < d->n_files; i++)
        free(d->files[i].path);
    free(d->files);
    free(d->tokens);
    free(d->mask);
    memset(d, 0, sizeof *d);
}

/* The bytes of one file the user named, whole: 0 with *raw (caller frees) and *size. */
static int read_whole(const char *path, uint8_t **raw, size_t *size, Err *e)
{
    *raw = NULL;
    /* a regular file only, checked before it is opened: a FIFO would block in fopen */
    FILE *f = NULL;
    int rc = regfile_fopen(path, &f, e);
    if (rc) /* a directory too is an input error (exit 2), as it was before the check */
        return rc == -EISDIR ? -EINVAL : rc;
    struct stat st;
    if (fstat(fileno(f), &st)) {
        rc = err_set(e, -errno, "%s: cannot read: %s", path, strerror(errno));
        fclose(f);
        return rc;
    }
    *size = (size_t)st.st_size;
    *raw = malloc(*size ? *size : 1);
    if (!*raw || fread(*raw, 1, *size, f) != *size)
        rc = err_set(e, -EIO, "%s: read failed", path);
    fclose(f);
    if (rc) {
        free(*raw);
        *raw = NULL;
    }
    return rc;
}

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* The token width of an llm.c header's magic and version: 2 or 4 bytes, 0 for none known. */
static int llmc_width(int32_t magic, int32_t version)
{
    if (magic == LLMC_MAGIC)
        return version == 1 ? 2 : version == 2 ? 4 : 0;
    return magic == LLMC_MAGIC_U32 && version == 7 ? 4 : 0;
}

/* Whether a header without an llm.c magic is llm.c's all the same (a damaged magic number): the
 * rest is as llm.c writes it, a known version with a token count that matches the file's size,
 * or the 253 reserved ints zero (in headerless tokens, 506 zero tokens in a row at the start). */
static bool looks_llmc(const uint8_t *raw, size_t size)
{
    if (size < LLMC_HEADER_BYTES)
        return false;
    bool zeros = true;
    for (int i = 3; i < LLMC_HEADER_INTS && zeros; i++)
        zeros = le32(raw + 4 * i) == 0;
    int32_t version = le32(raw + 4), count = le32(raw + 8);
    int w = version == 1 ? 2 : version == 2 || version == 7 ? 4 : 0;
    return zeros || (w && count > 0 && size == LLMC_HEADER_BYTES + (size_t)w * (size_t)count);
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* DATA_AUTO's decision for the file path of size bytes: the format, or -EINVAL with e. */
static int guess_format(const char *path, const uint8_t *raw, size_t size, DataFormat *f,
                        Err *e)
{
    /* a guess only where the file can be nothing else: a damaged llm.c header read as tokens
     * would be trained on without a word */
    bool bin = has_suffix(path, ".bin");
    int32_t magic = size >= 4 ? le32(raw) : 0;
    if (size >= sizeof npy_magic && !memcmp(raw, npy_magic, sizeof npy_magic))
        *f = DATA_NPY;
    else if (has_suffix(path, ".npy"))
        return err_set(e, -EINVAL, "%s: named .npy but without the .npy magic \\x93NUMPY "
                       "(damaged?); write it with numpy.save, or pass --data-format", path);
    else if (magic == LLMC_MAGIC || magic == LLMC_MAGIC_U32)
        *f = DATA_LLMC;
    else if (looks_llmc(raw, size))
        return err_set(e, -EINVAL, "%s: an llm.c token file header with magic %d, not %d or %d "
                       "(damaged?); repair it, or pass --data-format u16 or text to read the "
                       "whole file as headerless tokens or bytes", path, magic, LLMC_MAGIC,
                       LLMC_MAGIC_U32);
    else if (bin && size % 2)
        return err_set(e, -EINVAL, "%s: neither an llm.c token file (no magic %d) nor "
                       "headerless uint16 tokens (%zu bytes is not a whole number of uint16 "
                       "tokens); check the file, or pass --data-format", path, LLMC_MAGIC,
                       size);
    else
        *f = bin ? DATA_U16 : DATA_TEXT;
    return 0;
}

/* Where a file's tokens are in its bytes: *body, *count tokens of *width bytes (1: text). */
typedef struct Body {
    const uint8_t *at;
    size_t count;
    int width;
} Body;

static int llmc_body(const char *path, const uint8_t *raw, size_t size, Body *b, Err *e)
{
    int32_t magic = size >= 4 ? le32(raw) : 0;
    if (size < LLMC_HEADER_BYTES || (magic != LLMC_MAGIC && magic != LLMC_MAGIC_U32))
        return err_set(e, -EINVAL, "%s: not an llm.c token file (magic %d, want %d or %d)", path,
                       magic, LLMC_MAGIC, LLMC_MAGIC_U32);
    int32_t version = le32(raw + 4), count = le32(raw + 8);
    b->width = llmc_width(magic, version);
    if (!b->width)
        return err_set(e, -EINVAL, "%s: llm.c token file of magic %d, version %d; read are "
                       "magic %d versions 1 (uint16 tokens) and 2 (uint32), magic %d version 7 "
                       "(uint32)", path, magic, version, LLMC_MAGIC, LLMC_MAGIC_U32);
    size_t after = size - LLMC_HEADER_BYTES;
    if (count < 0 || after / (size_t)b->width < (size_t)count ||
        after != (size_t)b->width * (size_t)count)
        return err_set(e, -EINVAL, "%s: truncated or padded: the header says %d tokens of %d "
                       "bytes, the file holds %zu bytes after it", path, count, b->width, after);
    b->at = raw + LLMC_HEADER_BYTES;
    b->count = (size_t)count;
    return 0;
}

static int npy_body(const char *path, const uint8_t *raw, size_t size, const char *const *descrs,
                    const char *what, Body *b, Err *e)
{
    NpyHeader h;
    size_t es = 0;
    int rc = npy_parse(path, raw, size, &h, e);
    if (!rc)
        rc = npy_check_1d(path, &h, size, descrs, what, &b->count, &es, e);
    b->at = raw + h.data_offset;
    b->width = (int)es;
    return rc;
}

/* The tokens of a file in format f (not DATA_AUTO). */
static int find_body(const char *path, DataFormat f, const uint8_t *raw, size_t size, Body *b,
                     Err *e)
{
    static const char *const token_descrs[] = {"<u2", "<u4", NULL};
    *b = (Body){raw, size, 1};
    switch (f) {
    case DATA_LLMC: return llmc_body(path, raw, size, b, e);
    case DATA_NPY: return npy_body(path, raw, size, token_descrs, "tokens", b, e);
    case DATA_U16:
        if (size % 2)
            return err_set(e, -EINVAL, "%s: %zu bytes is not a whole number of uint16 tokens",
                           path, size);
        *b = (Body){raw, size / 2, 2};
        return 0;
    default: return 0; /* text: the bytes */
    }
}

/* Grows d's arrays to hold n more tokens (and a mask when mask or d has one). */
static int grow(TokenData *d, size_t n, bool mask, Err *e)
{
    uint32_t *t = realloc(d->tokens, (d->n + n) * sizeof *t);
    if (!t)
        return err_set(e, -ENOMEM, "out of memory for %zu tokens", d->n + n);
    d->tokens = t;
    if (!mask && !d->mask)
        return 0;
    uint8_t *m = realloc(d->mask, d->n + n);
    if (!m)
        return err_set(e, -ENOMEM, "out of memory for the mask of %zu tokens", d->n + n);
    if (!d->mask) /* the files before had none: every token of theirs trains */
        memset(m, 1, d->n);
    d->mask = m;
    return 0;
}

void data_mask_path(const char *file, char *out, size_t n)
{
    size_t len = strlen(file);
    if (has_suffix(file, ".npy"))
        snprintf(out, n, "%.*s.mask.npy", (int)(len - 4), file);
    else
        snprintf(out, n, "%s.mask", file);
}

/* The mask at path (data_mask_path's) of file's count tokens into d->mask[at, at + count). */
static int read_mask(TokenData *d, const char *path, const char *file, size_t at, size_t count,
                     Err *e)
{
    static const char *const mask_descrs[] = {"|u1", "|b1", NULL};
    uint8_t *raw;
    size_t size;
    int rc = read_whole(path, &raw, &size, e);
    if (rc)
        return rc;
    Body b = {raw, size, 1};
    if (has_suffix(path, ".npy"))
        rc = npy_body(path, raw, size, mask_descrs, "a loss mask", &b, e);
    if (!rc && b.count != count)
        rc = err_set(e, -EINVAL, "%s: %zu mask values for the %zu tokens of %s; write both "
                     "with tools/prepare_data.py, or remove the mask", path, b.count, count,
                     file);
    for (size_t i = 0; !rc && i < count; i++)
        if (b.at[i] > 1)
            rc = err_set(e, -EINVAL, "%s: value %d at position %zu; a mask holds 0 (not "
                         "trained on) or 1", path, b.at[i], i);
    if (!rc)
        memcpy(d->mask + at, b.at, count);
    free(raw);
    return rc;
}

/* The tokens of one file's bytes (format guessed if DATA_AUTO) into the store after d's n,
 * *count of them; d->max_token raised to theirs. */
static int decode_tokens(TokenData *d, DataFile *df, const char *path, DataFormat format,
                         const uint8_t *raw, size_t size, size_t *count, Err *e)
{
    int rc;
    if (format == DATA_AUTO && (rc = guess_format(path, raw, size, &format, e)))
        return rc;
    df->format = format;
    Body b = {0};
    if ((rc = find_body(path, format, raw, size, &b, e)))
        return rc;
    if (b.count == 0)
        return err_set(e, -EINVAL, "%s: no tokens", path);
    if ((rc = grow(d, b.count, df->masked, e)))
        return rc;
    uint32_t *t = d->tokens + d->n;
    for (size_t i = 0; i < b.count; i++) {
        const uint8_t *p = b.at + i * (size_t)b.width;
        t[i] = b.width == 1 ? p[0]
               : b.width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8
                              : (uint32_t)le32(p);
        if (t[i] > d->max_token)
            d->max_token = t[i];
    }
    *count = b.count;
    return 0;
}

/* Appends one file's tokens (and mask) to d. */
static int load_file(TokenData *d, const char *path, DataFormat format, Err *e)
{
    DataFile *df = &d->files[d->n_files];
    *df = (DataFile){.path = strdup(path), .begin = d->n};
    if (!df->path)
        return err_set(e, -ENOMEM, "out of memory");
    d->n_files++;
    char mpath[4200];
    data_mask_path(path, mpath, sizeof mpath);
    struct stat st;
    df->masked = !stat(mpath, &st);
    uint8_t *raw;
    size_t size, count = 0;
    int rc = read_whole(path, &raw, &size, e);
    if (rc)
        return rc;
    rc = decode_tokens(d, df, path, format, raw, size, &count, e);
    free(raw);
    if (rc)
        return rc;
    /* the loader hands tokens out as int: nothing above INT32_MAX (no vocabulary is so large) */
    const uint32_t *t = d->tokens + d->n;
    for (size_t i = 0; d->max_token > INT32_MAX && i < count; i++)
        if (t[i] > INT32_MAX)
            return err_set(e, -EINVAL, "%s: token %u at position %zu is beyond any vocabulary "
                           "(damaged? tokens are below 2^31)", path, t[i], i);
    if (df->masked && (rc = read_mask(d, mpath, path, d->n, count, e)))
        return rc;
    if (d->mask && !df->masked)
        memset(d->mask + d->n, 1, count);
    df->n = count;
    d->n += count;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files a path names: itself, or a pattern's matches sorted by name. 0 with g (globfree
 * it) or -EINVAL with e. */
static int expand(const char *path, glob_t *g, Err *e)
{
    memset(g, 0, sizeof *g);
    int flags = strpbrk(path, "*?[") ? GLOB_ERR : GLOB_ERR | GLOB_NOCHECK | GLOB_NOESCAPE;
    int rc = glob(path, flags, NULL, g);
    if (rc == GLOB_NOMATCH)
        return err_set(e, -EINVAL, "%s: no file matches the pattern; check it (and quote it, "
                       "so that fuyou-run expands it, not the shell)", path);
    if (rc)
        return err_set(e, rc == GLOB_NOSPACE ? -ENOMEM : -EINVAL, "%s: cannot expand the "
                       "pattern (a directory in it cannot be read)", path);
    /* glob sorts by the locale's collation: byte order is the same everywhere */
    qsort(g->gl_pathv, g->gl_pathc, sizeof *g->gl_pathv, cmp_names);
    return 0;
}

/* The fingerprint (data.h) of what d holds. */
static void fingerprint(TokenData *d)
{
    uint32_t crc = 0;
    for (int i = 0; i < d->n_files; i++) {
        const DataFile *f = &d->files[i];
        const char *slash = strrchr(f->path, '/'), *name = slash ? slash + 1 : f->path;
        uint8_t rec[9];
        for (int k = 0; k < 8; k++)
            rec[k] = (uint8_t)((uint64_t)f->n >> (8 * k));
        rec[8] = f->masked;
        crc = crc32c(crc, name, strlen(name) + 1);
        crc = crc32c(crc, rec, sizeof rec);
    }
    d->print = (DataPrint){.files = d->n_files, .tokens = (int64_t)d->n, .crc32c = crc};
}

int data_load_list(TokenData *d, const char *const *paths, int n, DataFormat format, Err *e)
{
    memset(d, 0, sizeof *d);
    int rc = 0;
    for (int a = 0; a < n && !rc; a++) {
        glob_t g;
        rc = expand(paths[a], &g, e);
        size_t count = rc ? 0 : g.gl_pathc;
        if (!rc && (size_t)d->n_files + count > DATA_MAX_FILES)
            rc = err_set(e, -EINVAL, "%s: %zu files, beyond the %d a run reads in all; "
                         "concatenate some", paths[a], (size_t)d->n_files + count,
                         DATA_MAX_FILES);
        DataFile *files = rc ? NULL : realloc(d->files, (d->n_files + count) * sizeof *files);
        if (!rc && !files)
            rc = err_set(e, -ENOMEM, "out of memory");
        if (files)
            d->files = files;
        for (size_t i = 0; !rc && i < count; i++)
            rc = load_file(d, g.gl_pathv[i], format, e);
        globfree(&g);
    }
    if (!rc && n == 0)
        rc = err_set(e, -EINVAL, "no data file given");
    if (rc)
        data_free(d); /* nothing half-read is left to a caller that does not free */
    else
        fingerprint(d);
    return rc;
}

int data_load(TokenData *d, const char *path, DataFormat format, Err *e)
{
    return data_load_list(d, &path, 1, format, e);
}

int data_check_model(const TokenData *d, int vocab, const char *model, Err *e)
{
    for (int i = 0; i < d->n_files; i++) {
        const DataFile *f = &d->files[i];
        if (f->format == DATA_TEXT && vocab != 256)
            return err_set(e, -EINVAL, "%s: read as text (bytes: a vocabulary of 256), but %s's "
                           "vocabulary is %d; tokenize it with tools/prepare_data.py "
                           "--tokenizer MODEL_DIR and train on the file it writes", f->path,
                           model, vocab);
        if (d->max_token < (uint32_t)vocab)
            continue;
        for (size_t k = 0; k < f->n; k++)
            if (d->tokens[f->begin + k] >= (uint32_t)vocab)
                return err_set(e, -EINVAL, "%s: token %u at position %zu is outside %s's "
                               "vocabulary of %d; pick the model the data were tokenized for, "
                               "or other data", f->path, d->tokens[f->begin + k], k, model,
                               vocab);
    }
    return 0;
}

/* ---- the loader ------------------------------------------------------------------------------ */

static void shuffle(Loader *l)
{
    if (!l->order)
        return;
    for (size_t i = 0; i < l->n_seq; i++)
        l->order[i] = (uint32_t)i;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, (unsigned long)(l->seed * 1000003u + (uint64_t)l->epoch));
    gsl_ran_shuffle(r, l->order, l->n_seq, sizeof *l->order);
    gsl_rng_free(r);
}

/* Each file's sequences, at least min_seq in all. */
static int setup(Loader *l, const TokenData *d, int B, int T, size_t min_seq, Err *e)
{
    memset(l, 0, sizeof *l);
    *l = (Loader){.d = d, .B = B, .T = T};
    l->seq_first = malloc(((size_t)d->n_files + 1) * sizeof *l->seq_first);
    if (!l->seq_first)
        return err_set(e, -ENOMEM, "out of memory for the loader");
    for (int f = 0; f < d->n_files; f++) {
        size_t n = d->files[f].n;
        if (n <= (size_t)T)
            return err_set(e, -EINVAL, "%s: %zu tokens, not one sequence of %d + 1 (a sequence "
                           "never straddles two files); drop it, or use a smaller --seq",
                           d->files[f].path, n, T);
        l->seq_first[f] = l->n_seq;
        l->n_seq += (n - 1) / (size_t)T;
    }
    l->seq_first[d->n_files] = l->n_seq;
    const char *what = d->n_files > 1 ? "the files'" : d->files[0].path;
    if (l->n_seq < min_seq)
        return err_set(e, -EINVAL, "%s: %zu tokens make %zu sequences of %d + 1, fewer than a "
                       "batch of %d; use more data or a smaller --batch/--seq", what, d->n,
                       l->n_seq, T, B);
    if (l->n_seq > UINT32_MAX)
        return err_set(e, -EINVAL, "%s: %zu sequences of %d + 1, more than the loader's 2^32 - "
                       "1; use a longer --seq or fewer files", what, l->n_seq, T);
    return 0;
}

int loader_init(Loader *l, const TokenData *d, int B, int T, uint64_t seed, Err *e)
{
    int rc = setup(l, d, B, T, (size_t)B, e);
    if (rc)
        return rc;
    l->seed = seed;
    l->order = malloc(l->n_seq * sizeof *l->order);
    if (!l->order)
        return err_set(e, -ENOMEM, "out of memory for the loader");
    shuffle(l);
    return 0;
}

int loader_init_in_order(Loader *l, const TokenData *d, int B, int T, Err *e)
{
    return setup(l, d, B, T, 1, e);
}

void loader_free(Loader *l)
{
    free(l->order);
    free(l->seq_first);
    l->order = NULL;
    l->seq_first = NULL;
}

int loader_seek(Loader *l, int64_t epoch, int64_t index, Err *e)
{
    if (index < 0 || (uint64_t)index > l->n_seq)
        return err_set(e, -EINVAL, "loader_index %lld is past the data's %zu sequences of %d "
                       "tokens: the checkpoint is of other data or damaged", (long long)index,
                       l->n_seq, l->T);
    if (epoch < 0 || epoch > LOADER_MAX_EPOCH)
        return err_set(e, -EINVAL, "loader_epoch %lld is outside 0 to %lld", (long long)epoch,
                       (long long)LOADER_MAX_EPOCH);
    l->epoch = epoch;
    l->index = index;
    shuffle(l);
    return 0;
}

/* Sequence k (in file order) into row b: its file found by bisection. */
static void put_sequence(const Loader *l, size_t k, int b, int *inputs, int *targets)
{
    int lo = 0, hi = l->d->n_files - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (l->seq_first[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    const uint32_t *tok = l->d->tokens;
    const uint8_t *mask = l->d->mask;
    size_t start = l->d->files[lo].begin + (k - l->seq_first[lo]) * (size_t)l->T;
    int *in = inputs + (size_t)b * l->T, *tg = targets + (size_t)b * l->T;
    for (int t = 0; t < l->T; t++) {
        size_t at = start + (size_t)t;
        in[t] = (int)tok[at];
        tg[t] = mask && !mask[at + 1] ? DATA_IGNORE : (int)tok[at + 1];
    }
}

void loader_next(Loader *l, int *inputs, int *targets)
{
    for (int b = 0; b < l->B; b++) {
        if ((size_t)l->index >= l->n_seq) {
            l->epoch++;
            l->index = 0;
            shuffle(l);
        }
        size_t k = (size_t)l->index++;
        put_sequence(l, l->order ? l->order[k] : k, b, inputs, targets);
    }
}

int loader_fill(const Loader *l, size_t first, int *inputs, int *targets)
{
    int filled = 0;
    for (int b = 0; b < l->B; b++) {
        if (first + (size_t)b < l->n_seq) {
            put_sequence(l, first + (size_t)b, b, inputs, targets);
            filled++;
            continue;
        }
        for (int t = 0; t < l->T; t++) {
            inputs[(size_t)b * l->T + t] = 0;
            targets[(size_t)b * l->T + t] = DATA_IGNORE;
        }
    }
    return filled;
}
