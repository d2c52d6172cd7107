/* tsv: the one reader of fuyou's tab-separated tables: traces and their dependencies
 * (trace.h), and the tables fuyou-plot draws (plots/plot.h).
 *
 * A table is a header line, which must be the one given, then rows of a fixed number of
 * fields, handed one at a time to the caller's take(). The first bad line stops the read and
 * its error names PATH:LINE. The header is read only as far as it could match, so a file of
 * another kind, or binary garbage without a line break, is refused after a few bytes, not read
 * to its end. This module splits and parses; what a row means is the caller's. */
#ifndef FUYOU_TSV_H
#define FUYOU_TSV_H

#include "fuyou_err.h"

typedef struct TsvReader TsvReader;
struct TsvReader {
    const char *path;
    long line;    /* 1-based number of the line being read (after a read: the lines read) */
    Err *e;
    int n_fields; /* every row has exactly this many */
    /* A row's fields, each NUL-terminated (f[0] .. f[n_fields - 1]): 0, or a negative errno
     * with e set (tsv_bad_line), which stops the read. */
    int (*take)(TsvReader *r, char **f);
    void *ctx;    /* the caller's */
};

/* Reads r->path (opened with regfile_fopen: a regular file only) with r (line 0): the first
 * line must equal header (what names the file's kind in "PATH:1: not a WHAT"), every other is a
 * row. Rows may be of any length. Returns 0; -EINVAL with e = "PATH:LINE: what is wrong" (an
 * empty file, another header, a NUL byte, a row of another number of fields, or what take()
 * refused); -errno of opening (e naming path); -EIO; -ENOMEM; or take()'s error. */
int tsv_read(TsvReader *r, const char *header, const char *what);

/* Sets r->e to "PATH:LINE: " and the formatted text; returns -EINVAL. */
int tsv_bad_line(const TsvReader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Strict parses of a whole field, no blanks around it (strtol and strtod would skip leading
 * ones): an integer in int's range; a number strtod reads as finite (overflow, an infinity or a
 * NaN is refused; underflow to a denormal or 0 is accepted). 0 or -EINVAL. */
int tsv_parse_int(const char *s, int *out);
int tsv_parse_number(const char *s, double *out);

#endif
