/* fuyou_err: formatting of one-line error messages; see err.h. */
#include "fuyou_err.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(Err *e, int code, const char *fmt, ...)
{
    assert(code < 0);
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        /* one line, whatever it quotes: a parser's message may carry the file's own bytes
         * (jansson quotes a broken token with its newline) */
        for (char *p = e->msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
    }
    return code;
}

void err_append(char *buf, size_t n, const char *fmt, ...)
{
    size_t len = strnlen(buf, n);
    if (len + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}
