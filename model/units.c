/* units: report formatting and number parsing; see units.h. */
#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *units_bytes(char *buf, size_t n, double bytes)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    double v = bytes;
    while (fabs(v) >= 1024 && u < 5)
        v /= 1024, u++;
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

static char *decimal(char *buf, size_t n, double v, const char *const *unit, int max,
                     const char *sep)
{
    int u = 0;
    while (fabs(v) >= 1000 && u < max)
        v /= 1000, u++;
    snprintf(buf, n, u ? "%.2f%s%s" : "%.0f%s%s", v, sep, unit[u]);
    return buf;
}

char *units_flops(char *buf, size_t n, double flops)
{
    static const char *unit[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
    return decimal(buf, n, flops, unit, 6, " ");
}

char *units_count(char *buf, size_t n, double count)
{
    static const char *unit[] = {"", " K", " M", " B", " T"};
    return decimal(buf, n, count, unit, 4, "");
}

int units_parse_bytes(const char *s, double *out)
{
    static const struct { const char *suffix; double scale; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1e3}, {"KB", 1e3}, {"M", 1e6}, {"MB", 1e6}, {"G", 1e9},
        {"GB", 1e9}, {"T", 1e12}, {"TB", 1e12}, {"KiB", 0x1p10}, {"MiB", 0x1p20},
        {"GiB", 0x1p30}, {"TiB", 0x1p40},
    };
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0)
        return -EINVAL;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(end, units[i].suffix)) {
            *out = v * units[i].scale;
            return 0;
        }
    return -EINVAL;
}

int units_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    /* strtoll and strtod accept leading blanks, hex, inf and nan: only these characters pass */
    if (!*s || s[strspn(s, "0123456789+-.eE")])
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s)
        return -EINVAL;
    if (*end) {
        /* not plain digits: a whole number in exponent form, or nothing */
        if (!strpbrk(s, "eE"))
            return -EINVAL;
        errno = 0;
        double d = strtod(s, &end);
        if (end == s || *end || (errno == ERANGE && fabs(d) < 1) || !isfinite(d) ||
            d != floor(d))
            return -EINVAL;
        if (fabs(d) >= 0x1p63)
            return -ERANGE;
        v = (long long)d;
    } else if (errno == ERANGE) {
        return -ERANGE; /* digits beyond int64 */
    }
    if (v < lo || v > hi)
        return -ERANGE;
    *out = v;
    return 0;
}
