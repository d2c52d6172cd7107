/* tsv: the tab-separated table reader; see tsv.h. */
#include "tsv.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regfile.h"

int tsv_bad_line(const TsvReader *r, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return err_set(r->e, -EINVAL, "%s:%ld: %s", r->path, r->line, what);
}

int tsv_parse_int(const char *s, int *out)
{
    if (!*s || isspace((unsigned char)*s))
        return -EINVAL;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno == ERANGE || v < INT_MIN || v > INT_MAX)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

int tsv_parse_number(const char *s, double *out)
{
    if (!*s || isspace((unsigned char)*s))
        return -EINVAL;
    char *end;
    double v = strtod(s, &end);
    if (*end || !isfinite(v))
        return -EINVAL;
    *out = v;
    return 0;
}

/* Splits one data line in place (its newline removed) and hands it to take(). */
static int read_row(TsvReader *r, char *line)
{
    enum { MAX_FIELDS = 16 };
    assert(r->n_fields > 0 && r->n_fields <= MAX_FIELDS);
    char *f[MAX_FIELDS];
    int n = 0;
    for (char *p = line;;) {
        char *tab = strchr(p, '\t');
        if (n < MAX_FIELDS)
            f[n] = p;
        n++;
        if (!tab)
            break;
        *tab = '\0';
        p = tab + 1;
    }
    if (n != r->n_fields)
        return tsv_bad_line(r, "expected %d tab-separated fields, got %d", r->n_fields, n);
    return r->take(r, f);
}

/* The first line, read no further than it could be header (a file of 100 MB without a line
 * break is refused after the header's length): 0 when it is header. */
static int read_header(TsvReader *r, FILE *f, const char *header, const char *what)
{
    char buf[256];
    size_t n = strlen(header);
    assert(n + 2 <= sizeof buf);
    r->line = 1;
    errno = 0;
    if (!fgets(buf, (int)n + 2, f)) {
        if (ferror(f))
            return err_set(r->e, -EIO, "%s: read failed: %s", r->path, strerror(errno));
        return tsv_bad_line(r, "empty file, expected the header of a %s", what);
    }
    if (strncmp(buf, header, n))
        return tsv_bad_line(r, "not a %s", what);
    /* the header and its newline, or the header alone at the end of the file */
    if (buf[n] == '\n' || (buf[n] == '\0' && fgetc(f) == EOF && !ferror(f)))
        return 0;
    return tsv_bad_line(r, "not a %s", what);
}

int tsv_read(TsvReader *r, const char *header, const char *what)
{
    FILE *f;
    int rc = regfile_fopen(r->path, &f, r->e); /* a FIFO named as a table is refused, not read */
    if (rc)
        return rc;
    rc = read_header(r, f, header, what);
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    while (!rc && (errno = 0, len = getline(&line, &line_cap, f)) >= 0) {
        r->line++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (strlen(line) != (size_t)len)
            rc = tsv_bad_line(r, "contains a NUL byte");
        else
            rc = read_row(r, line);
    }
    if (!rc && errno == ENOMEM)
        rc = err_set(r->e, -ENOMEM, "%s:%ld: out of memory", r->path, r->line + 1);
    else if (!rc && ferror(f))
        rc = err_set(r->e, -EIO, "%s: read failed: %s", r->path, strerror(errno));
    free(line);
    fclose(f);
    return rc;
}
