/* npy: the .npy header; see npy.h. */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* A cursor over the header's dict text. */
typedef struct Cur {
    const char *p, *end;
} Cur;

static void skip_space(Cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* The character ch next (after spaces): consumed, true. */
static bool take(Cur *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes into out (capacity n): true. */
static bool take_string(Cur *c, char *out, size_t n)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    size_t len = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || len + 1 >= n)
            return false;
        out[len++] = *c->p++;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    out[len] = '\0';
    return true;
}

static bool take_word(Cur *c, const char *w)
{
    skip_space(c);
    size_t len = strlen(w);
    if ((size_t)(c->end - c->p) < len || memcmp(c->p, w, len))
        return false;
    c->p += len;
    return true;
}

/* A whole number below 2^63 (numpy may write "5L" in Python 2's files: the L is taken). */
static bool take_uint(Cur *c, uint64_t *v)
{
    skip_space(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return false;
    uint64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > (INT64_MAX - 9) / 10)
            return false;
        x = x * 10 + (uint64_t)(*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L')
        c->p++;
    *v = x;
    return true;
}

/* '(' [n {',' n} [',']] ')' */
static bool take_shape(Cur *c, NpyHeader *h)
{
    if (!take(c, '('))
        return false;
    h->ndim = 0;
    if (take(c, ')'))
        return true;
    for (;;) {
        if (h->ndim == NPY_MAX_DIMS || !take_uint(c, &h->shape[h->ndim]))
            return false;
        h->ndim++;
        if (take(c, ')'))
            return true;
        if (!take(c, ','))
            return false;
        if (take(c, ')'))
            return true;
    }
}

/* The dict's three keys; a message in e otherwise. */
static int parse_dict(const char *path, Cur *c, NpyHeader *h, Err *e)
{
    bool seen[3] = {false, false, false};
    if (!take(c, '{'))
        return err_set(e, -EINVAL, "%s: the .npy header is not a dict ('{' missing)", path);
    while (!take(c, '}')) {
        char key[32];
        if (!take_string(c, key, sizeof key) || !take(c, ':'))
            return err_set(e, -EINVAL, "%s: the .npy header dict has no key here (a quoted "
                           "'descr', 'fortran_order' or 'shape' and a colon)", path);
        bool ok;
        int k;
        if (!strcmp(key, "descr")) {
            k = 0;
            ok = take_string(c, h->descr, sizeof h->descr);
        } else if (!strcmp(key, "fortran_order")) {
            k = 1;
            h->fortran_order = take_word(c, "True");
            ok = h->fortran_order || take_word(c, "False");
        } else if (!strcmp(key, "shape")) {
            k = 2;
            ok = take_shape(c, h);
        } else {
            return err_set(e, -EINVAL, "%s: the .npy header has a key '%s' besides descr, "
                           "fortran_order and shape; write it with numpy.save", path, key);
        }
        if (!ok)
            return err_set(e, -EINVAL, "%s: the .npy header's '%s' is malformed (a structured "
                           "dtype, or not numpy's own writing?)", path, key);
        if (seen[k])
            return err_set(e, -EINVAL, "%s: the .npy header gives '%s' twice", path, key);
        seen[k] = true;
        skip_space(c);
        if (c->p < c->end && *c->p == '}')
            continue;
        if (!take(c, ','))
            return err_set(e, -EINVAL, "%s: the .npy header dict lacks a ',' or '}' after "
                           "'%s'", path, key);
    }
    if (!seen[0] || !seen[1] || !seen[2])
        return err_set(e, -EINVAL, "%s: the .npy header lacks '%s'", path,
                       !seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape");
    skip_space(c);
    if (c->p != c->end)
        return err_set(e, -EINVAL, "%s: text after the .npy header's dict", path);
    return 0;
}

int npy_parse(const char *path, const uint8_t *buf, size_t size, NpyHeader *h, Err *e)
{
    memset(h, 0, sizeof *h);
    if (size < 10 || memcmp(buf, npy_magic, sizeof npy_magic))
        return err_set(e, -EINVAL, "%s: not a .npy file (no \\x93NUMPY magic)", path);
    h->major = buf[6];
    h->minor = buf[7];
    size_t len, at;
    if (h->major == 1 && h->minor == 0) {
        len = (size_t)buf[8] | (size_t)buf[9] << 8;
        at = 10;
    } else if ((h->major == 2 || h->major == 3) && h->minor == 0 && size >= 12) {
        len = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
              (size_t)buf[11] << 24;
        at = 12;
    } else {
        return err_set(e, -EINVAL, "%s: .npy format version %d.%d; versions 1.0, 2.0 and 3.0 "
                       "are read", path, h->major, h->minor);
    }
    if (len > size - at)
        return err_set(e, -EINVAL, "%s: the .npy header says %zu bytes, the file has %zu "
                       "after its length (truncated?)", path, len, size - at);
    const char *text = (const char *)buf + at;
    /* numpy ends the header with '\n' */
    if (len == 0 || text[len - 1] != '\n')
        return err_set(e, -EINVAL, "%s: the .npy header does not end with a newline", path);
    h->data_offset = at + len;
    Cur c = {text, text + len};
    return parse_dict(path, &c, h, e);
}

int npy_check_1d(const char *path, const NpyHeader *h, size_t size, const char *const *descrs,
                 const char *what, size_t *n, size_t *elem_bytes, Err *e)
{
    char want[64] = "";
    bool ok = false;
    for (int i = 0; descrs[i]; i++) {
        ok |= !strcmp(h->descr, descrs[i]);
        err_append(want, sizeof want, "%s'%s'", i ? " or " : "", descrs[i]);
    }
    if (!ok)
        return err_set(e, -EINVAL, "%s: dtype '%s'; %s are read as %s (numpy: "
                       "np.save(path, a.astype(...)), little-endian)", path, h->descr, want,
                       what);
    if (h->fortran_order)
        return err_set(e, -EINVAL, "%s: fortran_order is True; save a C-order array "
                       "(np.ascontiguousarray)", path);
    if (h->ndim != 1)
        return err_set(e, -EINVAL, "%s: shape of %d dimensions; %s are a 1-D array "
                       "(a.reshape(-1))", path, h->ndim, what);
    /* the dtype's size is its digits: "<u4" is 4 bytes */
    size_t es = (size_t)(h->descr[2] - '0');
    uint64_t count = h->shape[0];
    size_t body = size - h->data_offset;
    if (count > body / es || count * es != body)
        return err_set(e, -EINVAL, "%s: truncated or padded: shape (%llu,) of %zu-byte values, "
                       "the file holds %zu bytes after the header", path,
                       (unsigned long long)count, es, body);
    *n = (size_t)count;
    *elem_bytes = es;
    return 0;
}
