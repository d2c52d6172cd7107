/* safetensors: the format's reader and writer; see safetensors.h. */
#include "safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adam.h"

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

void st_close(StFile *s)
{
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
    if (t->end - t->begin != st_numel(t) * es)
        return err_set(e, -EINVAL, "%s: tensor %s: %llu bytes for %zu %s values", s->path,
                       name, (unsigned long long)(t->end - t->begin), st_numel(t), t->dtype);
    s->n++;
    return 0;
}

int st_open(StFile *s, const char *path, Err *e)
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
    s->t = calloc(json_object_size(root) + 1, sizeof *s->t);
    int rc = s->t ? 0 : err_set(e, -ENOMEM, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (rc || !strcmp(key, "__metadata__"))
            continue;
        rc = parse_entry(s, key, v, s->file_size - s->data_start, e);
    }
    json_decref(root);
    return rc;
}

const StTensor *st_find(const StFile *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name))
            return &s->t[i];
    return NULL;
}

int st_read_f32(StFile *s, const StTensor *t, float *dst, Err *e)
{
    size_t n = st_numel(t), es = dtype_size(t->dtype);
    if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "F16") && strcmp(t->dtype, "BF16"))
        return err_set(e, -EINVAL, "%s: tensor %s is %s; F32, F16 or BF16 expected", s->path,
                       t->name, t->dtype);
    if (fseeko(s->f, (off_t)(s->data_start + t->begin), SEEK_SET))
        return err_set(e, -errno, "%s: seek: %s", s->path, strerror(errno));
    if (es == 4) {
        if (fread(dst, 4, n, s->f) != n)
            return err_set(e, -EIO, "%s: tensor %s: short read", s->path, t->name);
        return 0;
    }
    uint16_t buf[4096];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 4096 ? n - done : 4096;
        if (fread(buf, 2, k, s->f) != k)
            return err_set(e, -EIO, "%s: tensor %s: short read", s->path, t->name);
        for (size_t i = 0; i < k; i++) {
            uint32_t u = (uint32_t)buf[i] << 16;
            float f;
            memcpy(&f, &u, 4);
            dst[done + i] = strcmp(t->dtype, "BF16") ? adam_f16_to_f32(buf[i]) : f;
        }
        done += k;
    }
    return 0;
}

int st_writer_begin(StWriter *w, const char *path, Err *e)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    w->header = json_object();
    if (!w->header)
        return err_set(e, -ENOMEM, "out of memory");
    return 0;
}

int st_writer_add(StWriter *w, const char *name, const float *data, int ndim,
                  const int64_t *shape, Err *e)
{
    size_t numel = 1;
    json_t *sh = json_array();
    for (int i = 0; i < ndim; i++) {
        numel *= (size_t)shape[i];
        json_array_append_new(sh, json_integer(shape[i]));
    }
    json_t *off = json_array();
    json_array_append_new(off, json_integer((json_int_t)w->offset));
    json_array_append_new(off, json_integer((json_int_t)(w->offset + 4 * numel)));
    json_t *entry = json_object();
    json_object_set_new(entry, "dtype", json_string("F32"));
    json_object_set_new(entry, "shape", sh);
    json_object_set_new(entry, "data_offsets", off);
    json_object_set_new(w->header, name, entry);
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
    w->n++;
    w->offset += 4 * numel;
    return 0;
}

void st_writer_abort(StWriter *w)
{
    if (w->f)
        fclose(w->f);
    w->f = NULL;
    json_decref(w->header);
    w->header = NULL;
    free(w->pending);
    w->pending = NULL;
}

int st_writer_finish(StWriter *w, const char *metadata_key, const char *metadata_value, Err *e)
{
    if (metadata_key) {
        json_t *meta = json_object();
        json_object_set_new(meta, metadata_key, json_string(metadata_value));
        json_object_set_new(w->header, "__metadata__", meta);
    }
    char *text = json_dumps(w->header, JSON_COMPACT | JSON_PRESERVE_ORDER);
    int rc = 0;
    if (!text) {
        st_writer_abort(w);
        return err_set(e, -ENOMEM, "out of memory for the header");
    }
    size_t len = strlen(text), padded = (len + 7) / 8 * 8; /* data 8-byte aligned */
    w->f = fopen(w->path, "wb");
    if (!w->f) {
        rc = err_set(e, -errno, "%s: cannot write: %s", w->path, strerror(errno));
    } else {
        uint8_t len8[8];
        for (int i = 0; i < 8; i++)
            len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
        fwrite(len8, 1, 8, w->f);
        fwrite(text, 1, len, w->f);
        for (size_t i = len; i < padded; i++)
            fputc(' ', w->f);
        for (int i = 0; i < w->n; i++)
            fwrite(w->pending[i].data, 4, w->pending[i].numel, w->f);
        if (fflush(w->f) || ferror(w->f) || fsync(fileno(w->f)))
            rc = err_set(e, -EIO, "%s: write failed: %s", w->path, strerror(errno));
    }
    free(text);
    if (w->f && fclose(w->f) && !rc)
        rc = err_set(e, -EIO, "%s: close failed: %s", w->path, strerror(errno));
    w->f = NULL;
    st_writer_abort(w);
    return rc;
}
