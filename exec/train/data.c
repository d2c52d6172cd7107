/* data: token files and the batch loader; see data.h. */
#include "data.h"

#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "regfile.h"

enum { LLMC_MAGIC = 20240520, LLMC_HEADER_INTS = 256 };

const char *data_format_name(DataFormat f)
{
    static const char *names[] = {"auto", "llmc", "u16", "text"};
    return names[f];
}

int data_format_parse(const char *s, DataFormat *out)
{
    for (int f = DATA_AUTO; f <= DATA_TEXT; f++)
        if (!strcasecmp(s, data_format_name(f)))
            return *out = f, 0;
    return -EINVAL;
}

void data_free(TokenData *d)
{
    free(d->tokens);
    d->tokens = NULL;
    d->n = 0;
}

/* Whether a header without llm.c's magic is llm.c's all the same (a damaged magic number): the
 * rest is as llm.c writes it, version 1 with a token count that matches the file's size, or the
 * 253 reserved ints zero (in headerless tokens, 506 zero tokens in a row at the start). */
static bool looks_llmc(const int32_t *h, size_t size)
{
    if (size < LLMC_HEADER_INTS * sizeof *h)
        return false;
    bool zeros = true;
    for (int i = 3; i < LLMC_HEADER_INTS && zeros; i++)
        zeros = h[i] == 0;
    return zeros || (h[1] == 1 && h[2] > 0 &&
                     size == LLMC_HEADER_INTS * sizeof *h + 2 * (size_t)h[2]);
}

int data_load(TokenData *d, const char *path, DataFormat format, Err *e)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    /* a regular file only, checked before it is opened: a FIFO would block in fopen */
    FILE *f = NULL;
    int orc = regfile_fopen(path, &f, e);
    if (orc) /* a directory too is an input error (exit 2), as it was before the check */
        return orc == -EISDIR ? -EINVAL : orc;
    struct stat st;
    if (fstat(fileno(f), &st)) {
        orc = err_set(e, -errno, "%s: cannot read: %s", path, strerror(errno));
        fclose(f);
        return orc;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *raw = malloc(size ? size : 1);
    if (!raw || fread(raw, 1, size, f) != size) {
        free(raw);
        fclose(f);
        return err_set(e, -EIO, "%s: read failed", path);
    }
    fclose(f);
    int32_t header[LLMC_HEADER_INTS] = {0};
    if (size >= sizeof header)
        memcpy(header, raw, sizeof header);
    int rc = 0;
    if (format == DATA_AUTO) {
        /* a guess only where the file can be nothing else: a damaged llm.c header read as
         * tokens would be trained on without a word */
        const char *dot = strrchr(path, '.');
        bool bin = dot && !strcmp(dot, ".bin");
        if (header[0] == LLMC_MAGIC)
            format = DATA_LLMC;
        else if (looks_llmc(header, size))
            rc = err_set(e, -EINVAL, "%s: an llm.c token file header with magic %d, not %d "
                         "(damaged?); repair it, or pass --data-format u16 or text to read the "
                         "whole file as headerless tokens or bytes", path, header[0], LLMC_MAGIC);
        else if (bin && size % 2)
            rc = err_set(e, -EINVAL, "%s: neither an llm.c token file (no magic %d) nor "
                         "headerless uint16 tokens (%zu bytes is not a whole number of uint16 "
                         "tokens); check the file, or pass --data-format", path, LLMC_MAGIC,
                         size);
        else
            format = bin ? DATA_U16 : DATA_TEXT;
    }
    d->format = format;
    if (rc) {
        free(raw);
        return rc;
    }
    const uint8_t *body = raw;
    size_t count = 0;
    if (format == DATA_LLMC) {
        if (size < sizeof header || header[0] != LLMC_MAGIC)
            rc = err_set(e, -EINVAL, "%s: not an llm.c token file (magic %d, want %d)", path,
                         header[0], LLMC_MAGIC);
        else if (header[1] != 1)
            rc = err_set(e, -EINVAL, "%s: llm.c token file version %d; only version 1 "
                         "(uint16 tokens) is read", path, header[1]);
        else if (header[2] < 0 || size != sizeof header + 2 * (size_t)header[2])
            rc = err_set(e, -EINVAL, "%s: truncated or padded: the header says %d tokens, the "
                         "file holds %zu bytes after it", path, header[2], size - sizeof header);
        body = raw + sizeof header;
        count = rc ? 0 : (size_t)header[2];
    } else if (format == DATA_U16) {
        if (size % 2)
            rc = err_set(e, -EINVAL, "%s: %zu bytes is not a whole number of uint16 tokens",
                         path, size);
        count = size / 2;
    } else {
        count = size;
    }
    if (!rc && count == 0)
        rc = err_set(e, -EINVAL, "%s: no tokens", path);
    if (!rc && !(d->tokens = malloc(count * sizeof *d->tokens)))
        rc = err_set(e, -ENOMEM, "%s: out of memory for %zu tokens", path, count);
    if (!rc) {
        if (format == DATA_TEXT)
            for (size_t i = 0; i < count; i++)
                d->tokens[i] = body[i];
        else
            memcpy(d->tokens, body, count * 2);
        d->n = count;
        for (size_t i = 0; i < count; i++)
            if (d->tokens[i] > d->max_token)
                d->max_token = d->tokens[i];
    }
    free(raw);
    return rc;
}

static void shuffle(Loader *l)
{
    for (size_t i = 0; i < l->n_seq; i++)
        l->order[i] = (uint32_t)i;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, (unsigned long)(l->seed * 1000003u + (uint64_t)l->epoch));
    gsl_ran_shuffle(r, l->order, l->n_seq, sizeof *l->order);
    gsl_rng_free(r);
}

int loader_init(Loader *l, const TokenData *d, int B, int T, uint64_t seed, Err *e)
{
    memset(l, 0, sizeof *l);
    *l = (Loader){.d = d, .B = B, .T = T, .seed = seed};
    l->n_seq = d->n > (size_t)T ? (d->n - 1) / (size_t)T : 0;
    if (l->n_seq < (size_t)B)
        return err_set(e, -EINVAL, "%s: %zu tokens make %zu sequences of %d + 1, fewer than a "
                       "batch of %d; use more data or a smaller --batch/--seq", d->path, d->n,
                       l->n_seq, T, B);
    l->order = malloc(l->n_seq * sizeof *l->order);
    if (!l->order)
        return err_set(e, -ENOMEM, "out of memory for the loader");
    shuffle(l);
    return 0;
}

void loader_free(Loader *l)
{
    free(l->order);
    l->order = NULL;
}

void loader_seek(Loader *l, int64_t epoch, int64_t index)
{
    l->epoch = epoch;
    l->index = index;
    shuffle(l);
}

void loader_next(Loader *l, int *inputs, int *targets)
{
    for (int b = 0; b < l->B; b++) {
        if ((size_t)l->index >= l->n_seq) {
            l->epoch++;
            l->index = 0;
            shuffle(l);
        }
        size_t start = (size_t)l->order[l->index++] * (size_t)l->T;
        for (int t = 0; t < l->T; t++) {
            inputs[b * l->T + t] = l->d->tokens[start + (size_t)t];
            targets[b * l->T + t] = l->d->tokens[start + (size_t)t + 1];
        }
    }
}
