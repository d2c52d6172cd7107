/* units: human-readable formatting of bytes, FLOPs and counts for reports. Not for parsing. */
#ifndef FUYOU_UNITS_H
#define FUYOU_UNITS_H

#include <stddef.h>

/* Each writes into buf (at least 16 bytes) and returns buf. */
char *units_bytes(char *buf, size_t n, double bytes); /* "12.3 GiB", binary prefixes */
char *units_flops(char *buf, size_t n, double flops); /* "1.23 PFLOP", decimal prefixes */
char *units_count(char *buf, size_t n, double count); /* "174.6 B", "124.4 M" */

#endif
