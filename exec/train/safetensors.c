/* safetensors: the format's reader and writer; see safetensors.h. */
#include "safetensors.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adam.h"
#include "crc32c.h"
#include "seqfile.h"
#include "workpool.h"

/* The metadata key of a tensor's checksum: this prefix and the tensor's name. */
static const char crc_prefix[] = "crc32c:";

static size_t dtype_size(const char *dt)
{
    if (!strcmp(dt, "F32") || !strcmp(dt, "I32"))
        return 4;
    if (!strcmp(dt, "F16") || !strcmp(dt, "BF16") || !strcmp(dt, "I16"))
        return 2;
    if (!strcmp(dt, "F64") || !strcmp(dt, "I64"))
        return 8;
    if (!strcmp(dt, "U8") || !strcmp(dt, "I8") || !strcmp(dt, "BOOL"))
        return 1;
    return 0;
}

size_t st_numel(const StTensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (size_t)t->shape[i];
    return n;
}

void st_drop_stream(StFile *s)
{
    seq_reader_close(s->stream);
    s->stream = NULL;
}

uint64_t st_file_offset(const StFile *s, const StTensor *t)
{
    return s->data_start + t->begin;
}

void st_close(StFile *s)
{
    st_drop_stream(s);
    if (s->f)
        fclose(s->f);
    s->f = NULL;
    free(s->t);
    s->t = NULL;
    s->n = 0;
}

static int parse_entry(StFile *s, const char *name, json_t *v, uint64_t data_len, Err *e)
{
    StTensor *t = &s->t[s->n];
    memset(t, 0, sizeof *t);
    if (strlen(name) >= sizeof t->name)
        return err_set(e, -EINVAL, "%s: tensor name too long: %.60s...", s->path, name);
    strcpy(t->name, name);
    json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
    json_t *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(off) ||
        json_array_size(off) != 2 || json_array_size(shape) > ST_MAX_DIMS)
        return err_set(e, -EINVAL, "%s: tensor %s: needs dtype, shape (at most %d dims) and "
                       "two data_offsets", s->path, name, ST_MAX_DIMS);
    snprintf(t->dtype, sizeof t->dtype, "%s", json_string_value(dt));
    t->ndim = (int)json_array_size(shape);
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return err_set(e, -EINVAL, "%s: tensor %s: bad shape", s->path, name);
        t->shape[i] = json_integer_value(d);
    }
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b))
        return err_set(e, -EINVAL, "%s: tensor %s: bad data_offsets", s->path, name);
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(en);
    size_t es = dtype_size(t->dtype);
    if (!es)
        return err_set(e, -EINVAL, "%s: tensor %s: unknown dtype %s", s->path, name, t->dtype);
    if (t->end > data_len)
        return err_set(e, -EINVAL, "%s: tensor %s ends at byte %llu of a %llu-byte data section: "
                       "the file is truncated", s->path, name, (unsigned long long)t->end,
                       (unsigned long long)data_len);
    /* dtype x shape in exact arithmetic: a product that wraps could match any byte count */
    uint64_t bytes = es;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] && bytes > UINT64_MAX / (uint64_t)t->shape[i])
            return err_set(e, -EINVAL, "%s: tensor %s: its shape holds 2^64 bytes or more",
                           s->path, name);
        bytes *= (uint64_t)t->shape[i];
    }
    if (t->end - t->begin != bytes)
        return err_set(e, -EINVAL, "%s: tensor %s: %llu bytes for %zu %s values", s->path,
                       name, (unsigned long long)(t->end - t->begin), st_numel(t), t->dtype);
    s->n++;
    return 0;
}

static int cmp_offsets(const void *pa, const void *pb)
{
    const StTensor *a = pa, *b = pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    return (a->end > b->end) - (a->end < b->end);
}

/* The format's rule for the data section: the tensors, ordered by offset, tile it exactly (each
 * starts where the one before ends, the last ends at the end of the file). Sorts s->t. */
static int check_tiling(StFile *s, uint64_t data_len, Err *e)
{
    qsort(s->t, (size_t)s->n, sizeof *s->t, cmp_offsets);
    uint64_t at = 0;
    for (int i = 0; i < s->n; i++) {
        const StTensor *t = &s->t[i], *prev = i ? &s->t[i - 1] : NULL;
        if (t->begin < at)
            return err_set(e, -EINVAL, "%s: tensors %s and %s overlap (data bytes %llu..%llu and "
                           "%llu..%llu)", s->path, prev->name, t->name,
                           (unsigned long long)prev->begin, (unsigned long long)prev->end,
                           (unsigned long long)t->begin, (unsigned long long)t->end);
        if (t->begin > at)
            return err_set(e, -EINVAL, "%s: data bytes %llu..%llu, before tensor %s, belong to no "
                           "tensor: the offsets must be contiguous", s->path,
                           (unsigned long long)at, (unsigned long long)t->begin, t->name);
        at = t->end;
    }
    if (at != data_len)
        return err_set(e, -EINVAL, "%s: data bytes %llu..%llu%s%s%s belong to no tensor: the "
                       "offsets must cover the data section", s->path, (unsigned long long)at,
                       (unsigned long long)data_len, s->n ? ", after tensor " : "",
                       s->n ? s->t[s->n - 1].name : "", s->n ? "," : "");
    return 0;
}

static StTensor *find_tensor(const StFile *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name))
            return &s->t[i];
    return NULL;
}

/* The checksums in meta (the header's "__metadata__", or NULL) onto their tensors. */
static int parse_checksums(StFile *s, json_t *meta, Err *e)
{
    if (!meta)
        return 0;
    if (!json_is_object(meta))
        return err_set(e, -EINVAL, "%s: __metadata__ is not a JSON object", s->path);
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v) {
        if (strncmp(key, crc_prefix, sizeof crc_prefix - 1))
            continue;
        const char *hex = json_string_value(v);
        bool ok = hex && strlen(hex) == 8;
        for (int i = 0; ok && i < 8; i++)
            ok = isxdigit((unsigned char)hex[i]);
        if (!ok)
            return err_set(e, -EINVAL, "%s: __metadata__ %s: expected a checksum of 8 hex digits",
                           s->path, key);
        StTensor *t = find_tensor(s, key + sizeof crc_prefix - 1);
        if (!t)
            return err_set(e, -EINVAL, "%s: __metadata__ has a checksum for tensor %s, which the "
                           "file does not hold", s->path, key + sizeof crc_prefix - 1);
        t->has_crc = true;
        t->crc = (uint32_t)strtoul(hex, NULL, 16);
    }
    return 0;
}

/* st_open's work; st_open closes s when it fails. */
static int open_file(StFile *s, const char *path, Err *e)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    s->f = fopen(path, "rb");
    if (!s->f)
        return err_set(e, -errno, "%s: cannot read: %s", path, strerror(errno));
    struct stat st;
    fstat(fileno(s->f), &st);
    s->file_size = (uint64_t)st.st_size;
    uint8_t len8[8];
    if (fread(len8, 1, 8, s->f) != 8)
        return err_set(e, -EINVAL, "%s: too short for a safetensors file", path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | len8[i];
    if (hlen == 0 || hlen > 100000000 || 8 + hlen > s->file_size)
        return err_set(e, -EINVAL, "%s: header length %llu does not fit a %llu-byte file: not "
                       "a safetensors file, or truncated", path, (unsigned long long)hlen,
                       (unsigned long long)s->file_size);
    char *text = malloc(hlen + 1);
    if (!text || fread(text, 1, hlen, s->f) != hlen) {
        free(text);
        return err_set(e, -EIO, "%s: cannot read the header", path);
    }
    text[hlen] = '\0';
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    free(text);
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(e, -EINVAL, "%s: header is not a JSON object (%s at column %d)", path,
                       jerr.text, jerr.column);
    }
    s->data_start = 8 + hlen;
    uint64_t data_len = s->file_size - s->data_start;
    s->t = calloc(json_object_size(root) + 1, sizeof *s->t);
    int rc = s->t ? 0 : err_set(e, -ENOMEM, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (rc || !strcmp(key, "__metadata__"))
            continue;
        rc = parse_entry(s, key, v, data_len, e);
    }
    if (!rc)
        rc = parse_checksums(s, json_object_get(root, "__metadata__"), e);
    if (!rc)
        rc = check_tiling(s, data_len, e);
    json_decref(root);
    return rc;
}

int st_open(StFile *s, const char *path, Err *e)
{
    int rc = open_file(s, path, e);
    if (rc)
        st_close(s);
    return rc;
}

const StTensor *st_find(const StFile *s, const char *name)
{
    return find_tensor(s, name);
}

/* crc: the CRC-32C of t's bytes as read. */
static int check_crc(const StFile *s, const StTensor *t, uint32_t crc, Err *e)
{
    if (t->has_crc && crc != t->crc)
        return err_set(e, -EINVAL, "%s: tensor %s is damaged: its data's CRC-32C is %08x, the "
                       "header's %08x", s->path, t->name, crc, t->crc);
    return 0;
}

/* A float dtype's DType (F32, BF16 or F16). */
static DType float_dtype(const char *dt)
{
    return !strcmp(dt, "BF16") ? DTYPE_BF16 : !strcmp(dt, "F16") ? DTYPE_FP16 : DTYPE_FP32;
}

/* n values of type at src widened into dst (a WorkFn over value ranges). */
typedef struct Widen {
    float *dst;
    const uint8_t *src;
    size_t es;
    DType type;
} Widen;

static void widen_range(void *ctx, size_t begin, size_t end)
{
    const Widen *w = ctx;
    adam_widen(w->dst + begin, w->src + begin * w->es, end - begin, w->type);
}

/* What st_read_next reads, widened: on s's pool when it has one and the piece is large (the
 * conversion writes fresh fp32 pages: 4 bytes for every 2 read), else here. */
static void widen(const StFile *s, float *dst, const void *src, size_t n, size_t es, DType type)
{
    Widen w = {dst, src, es, type};
    if (s->wp && n >= 1 << 14)
        workpool_run(s->wp, widen_range, &w, n, 4096);
    else
        widen_range(&w, 0, n);
}

int st_read_next(StFile *s, StCursor *c, float *dst, size_t n, Err *e)
{
    const StTensor *t = c->t;
    size_t numel = st_numel(t), es = dtype_size(t->dtype);
    assert(n <= numel - c->at);
    if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "F16") && strcmp(t->dtype, "BF16"))
        return err_set(e, -EINVAL, "%s: tensor %s is %s; F32, F16 or BF16 expected", s->path,
                       t->name, t->dtype);
    int rc = s->stream ? 0 : seq_reader_open(&s->stream, s->path, 0, e);
    DType type = float_dtype(t->dtype);
    uint64_t off = s->data_start + t->begin + c->at * es, tensor_end = s->data_start + t->end;
    uint64_t end = s->ahead > tensor_end ? s->ahead : tensor_end;
    for (size_t left = n * es; !rc && left;) {
        const void *p;
        size_t got;
        uint8_t one[4];
        rc = seq_view(s->stream, off, left, end, &p, &got, e);
        if (!rc && got < es) /* a value across two blocks */
            rc = seq_read(s->stream, off, one, es, e), p = one, got = es;
        if (rc)
            break;
        got -= got % es;
        /* a file's checksum is taken only where it has one to check (Hugging Face's have none) */
        if (t->has_crc)
            c->crc = crc32c(c->crc, p, got);
        widen(s, dst, p, got / es, es, type);
        dst += got / es, off += got, left -= got;
    }
    if (rc)
        return rc;
    c->at += n;
    return c->at == numel ? check_crc(s, t, c->crc, e) : 0;
}

int st_read_f32(StFile *s, const StTensor *t, float *dst, Err *e)
{
    StCursor c = {.t = t};
    return st_read_next(s, &c, dst, st_numel(t), e);
}

int st_writer_begin(StWriter *w, const char *path, Err *e)
{
    return st_writer_begin_as(w, path, "F32", e);
}

int st_writer_begin_as(StWriter *w, const char *path, const char *dtype, Err *e)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    w->esize = dtype_size(dtype);
    if (strcmp(dtype, "F32") && strcmp(dtype, "BF16") && strcmp(dtype, "F16"))
        return err_set(e, -EINVAL, "%s: cannot write %s tensors (F32, BF16 or F16)", path, dtype);
    snprintf(w->dtype, sizeof w->dtype, "%s", dtype);
    json_t *meta = json_object();
    w->header = json_object();
    /* first in the header, as Hugging Face's writer puts it */
    int rc = w->header && meta ? json_object_set(w->header, "__metadata__", meta) : -1;
    json_decref(meta); /* the header holds it */
    w->meta = meta;
    if (rc) {
        json_decref(w->header);
        w->header = w->meta = NULL;
        return err_set(e, -ENOMEM, "out of memory");
    }
    return 0;
}

int st_writer_add(StWriter *w, const char *name, const float *data, int ndim,
                  const int64_t *shape, Err *e)
{
    if (strlen(name) >= ST_NAME_MAX)
        return err_set(e, -EINVAL, "%s: tensor name too long: %.60s...", w->path, name);
    if (data && w->esize != 4)
        return err_set(e, -EINVAL, "%s: %s tensors are written pulled", w->path, w->dtype);
    size_t numel = 1;
    json_t *sh = json_array();
    for (int i = 0; i < ndim; i++) {
        numel *= (size_t)shape[i];
        json_array_append_new(sh, json_integer(shape[i]));
    }
    json_t *off = json_array();
    json_array_append_new(off, json_integer((json_int_t)w->offset));
    json_array_append_new(off, json_integer((json_int_t)(w->offset + w->esize * numel)));
    json_t *entry = json_object();
    json_object_set_new(entry, "dtype", json_string(w->dtype));
    json_object_set_new(entry, "shape", sh);
    json_object_set_new(entry, "data_offsets", off);
    json_object_set_new(w->header, name, entry);
    char key[sizeof crc_prefix + ST_NAME_MAX], hex[9];
    snprintf(key, sizeof key, "%s%s", crc_prefix, name);
    /* a pulled tensor's checksum is taken as it is written: 8 digits now, the header's length */
    snprintf(hex, sizeof hex, "%08x", data ? crc32c(0, data, 4 * numel) : 0u);
    json_object_set_new(w->meta, key, json_string(hex));
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        void *p = realloc(w->pending, (size_t)cap * sizeof *w->pending);
        if (!p)
            return err_set(e, -ENOMEM, "out of memory");
        w->pending = p;
        w->cap = cap;
    }
    w->pending[w->n].data = data;
    w->pending[w->n].numel = numel;
    snprintf(w->pending[w->n].crc_key, sizeof w->pending[w->n].crc_key, "%s", key);
    w->n++;
    w->offset += w->esize * numel;
    return 0;
}

void st_writer_abort(StWriter *w)
{
    json_decref(w->header);
    w->header = w->meta = NULL;
    free(w->pending);
    w->pending = NULL;
}

/* The header as text, padded to 8 bytes (data 8-byte aligned), its length in *padded. */
static char *header_text(StWriter *w, size_t *padded, Err *e)
{
    char *text = json_dumps(w->header, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text) {
        err_set(e, -ENOMEM, "out of memory for the header");
        return NULL;
    }
    *padded = (strlen(text) + 7) / 8 * 8;
    return text;
}

/* The file's first 8 + padded bytes: the header's length, the header, spaces. */
static uint8_t *head_bytes(const char *text, size_t padded, Err *e)
{
    uint8_t *head = malloc(8 + padded);
    if (!head) {
        err_set(e, -ENOMEM, "out of memory for the header");
        return NULL;
    }
    for (int i = 0; i < 8; i++)
        head[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    size_t len = strlen(text);
    memcpy(head + 8, text, len);
    memset(head + 8 + len, ' ', padded - len);
    return head;
}

/* n values of src stored as w's dtype at the file's end, their checksum taken on the way. */
static int put_values(StWriter *w, SeqWriter *sw, const float *src, size_t n, uint32_t *crc,
                      Err *e)
{
    while (n) {
        void *p;
        size_t room;
        int rc = seq_writer_room(sw, &p, &room, e);
        if (rc)
            return rc;
        size_t k = room / w->esize < n ? room / w->esize : n; /* room: whole values */
        adam_narrow(p, src, k, float_dtype(w->dtype));
        *crc = crc32c(*crc, p, k * w->esize);
        seq_writer_advance(sw, k * w->esize);
        src += k, n -= k;
    }
    return 0;
}

/* Tensor i's data, pulled chunk values at a time into buf when it was added without; its
 * checksum into the header's metadata. */
static int write_tensor(StWriter *w, SeqWriter *sw, int i, StPull pull, void *user, float *buf,
                        size_t chunk, Err *e)
{
    uint32_t crc = 0;
    size_t numel = w->pending[i].numel;
    const float *data = w->pending[i].data;
    int rc = 0;
    for (size_t at = 0; !rc && at < numel; at += chunk) {
        size_t n = numel - at < chunk ? numel - at : chunk;
        if (!data && !pull)
            rc = err_set(e, -EINVAL, "internal: %s: tensor %d has no data", w->path, i);
        else if (!data)
            rc = pull(user, i, at, n, buf, e);
        if (rc)
            break;
        rc = put_values(w, sw, data ? data + at : buf, n, &crc, e);
    }
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", crc);
    json_object_set_new(w->meta, w->pending[i].crc_key, json_string(hex));
    return rc;
}

/* The file written front to back (seqfile.h: the data behind, the header, whose length is fixed
 * beforehand, last), fsynced, closed; w's queue freed either way. */
static int write_file(StWriter *w, StPull pull, void *user, size_t chunk, Err *e)
{
    size_t padded, again;
    char *text = header_text(w, &padded, e);
    float *buf = pull ? malloc(chunk * sizeof *buf) : NULL;
    SeqWriter *sw = NULL;
    int rc = !text ? -ENOMEM
             : pull && !buf ? err_set(e, -ENOMEM, "out of memory writing %s", w->path)
                            : seq_writer_open(&sw, w->path, 8 + padded, 0, e);
    for (int i = 0; !rc && i < w->n; i++)
        rc = write_tensor(w, sw, i, pull, user, buf, chunk, e);
    free(text);
    text = rc ? NULL : header_text(w, &again, e); /* the checksums in; the same length */
    if (!rc && !text)
        rc = -ENOMEM;
    if (!rc && again != padded)
        rc = err_set(e, -EIO, "%s: internal: the header changed length", w->path);
    uint8_t *head = rc ? NULL : head_bytes(text, padded, e);
    if (!rc && !head)
        rc = -ENOMEM;
    if (!rc) {
        rc = seq_writer_finish(sw, head, e);
        sw = NULL;
    }
    seq_writer_abort(sw);
    free(head);
    free(text);
    free(buf);
    st_writer_abort(w);
    return rc;
}

int st_writer_finish(StWriter *w, const char *metadata_key, const char *metadata_value, Err *e)
{
    if (metadata_key)
        json_object_set_new(w->meta, metadata_key, json_string(metadata_value));
    return write_file(w, NULL, NULL, SIZE_MAX, e);
}

int st_writer_finish_pull(StWriter *w, StPull pull, void *user, size_t chunk,
                          const char *metadata_key, const char *metadata_value, Err *e)
{
    if (metadata_key)
        json_object_set_new(w->meta, metadata_key, json_string(metadata_value));
    return write_file(w, pull, user, chunk, e);
}
