/* units: report formatting; see units.h. */
#include "units.h"

#include <math.h>
#include <stdio.h>

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
