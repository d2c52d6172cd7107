/* units: human-readable formatting of bytes, FLOPs and counts for reports, and the two parsers
 * of numbers the command lines and ini files share: byte amounts and whole numbers. */
#ifndef FUYOU_UNITS_H
#define FUYOU_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Each writes into buf (at least 16 bytes) and returns buf. */
char *units_bytes(char *buf, size_t n, double bytes); /* "12.3 GiB", binary prefixes */
char *units_flops(char *buf, size_t n, double flops); /* "1.23 PFLOP", decimal prefixes */
char *units_count(char *buf, size_t n, double count); /* "174.6 B", "124.4 M" */

/* Parses a byte amount: a number with an optional unit, B, K/M/G/T (powers of 1000) or
 * KiB/MiB/GiB/TiB (powers of 1024), e.g. "12G", "1.5GiB", "4096". 0 or -EINVAL. */
int units_parse_bytes(const char *s, double *out);

/* Parses a whole number in [lo, hi]: decimal digits with an optional sign ("12", "-3"), or a
 * whole number in exponent form ("1e6", "2.5e3"). Anything else is refused: blanks, fractions
 * ("2.5"), "1.", hex, inf, nan, trailing text. Both command lines parse every count through it
 * (options.c prints the message), and the ini files their whole numbers (inifile_int).
 * Returns 0, -EINVAL (not a whole number) or -ERANGE (whole, but outside [lo, hi] or int64);
 * *out is written only on success. */
int units_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);

#endif
