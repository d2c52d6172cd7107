/* fuyou_err: the one-line error message that an expected failure carries up to the user.
 *
 * Expected failures (bad ini, missing file, unknown model) return a negative errno and fill an Err
 * with one line naming the file, the line or key, and what to do. Bugs are asserts, not Errs. */
#ifndef FUYOU_ERR_H
#define FUYOU_ERR_H

#include <stddef.h>

typedef struct Err {
    char msg[512];
} Err;

/* Formats the message into e (when e is not NULL) and returns code, so a caller can write
 * `return err_set(e, -EINVAL, "...")`. code must be negative. Control characters (a newline, a
 * tab, an escape quoted from a file) become '?', so the message is one printable line. */
int err_set(Err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Appends formatted text to the string in buf (capacity n), truncating safely; for building
 * lists of names in messages. */
void err_append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
