/* units: human-readable formatting of bytes, FLOPs and counts for reports. Not for parsing. */
#ifndef FUYOU_UNITS_H
#define FUYOU_UNITS_H

#include <stddef.h>

/* Each writes into buf (at least 16 bytes) and returns buf. */
char *units_bytes(char *buf, size_t n, double bytes); /* "12.3 GiB", binary prefixes */
char *units_flops(char *buf, size_t n, double flops); /* "1.23 PFLOP", decimal prefixes */
char *units_count(char *buf, size_t n, double count); /* "174.6 B", "124.4 M" */

/* Parses a byte amount: a number with an optional unit, B, K/M/G/T (powers of 1000) or
 * KiB/MiB/GiB/TiB (powers of 1024), e.g. "12G", "1.5GiB", "4096". 0 or -EINVAL. */
int units_parse_bytes(const char *s, double *out);

#endif
