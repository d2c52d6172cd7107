/* bench_util: shared bits of the benchmarks (clock, median, argument parsing). Benchmarks only. */
#ifndef FUYOU_BENCH_UTIL_H
#define FUYOU_BENCH_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

static inline double bench_now(void)
{
    return clock_monotonic_s();
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

/* How a host pool's buffers stand, for a benchmark's header: unlocked memory may be paged out
 * in the middle of a timed run. */
static inline const char *bench_lock_state(bool lock_failed)
{
    return lock_failed ? "NOT locked (mlock refused: raise ulimit -l), may be paged"
                       : "locked in RAM";
}

/* The program's arguments checked before any is read: "--help" or "-h" prints the usage line
 * and exits 0; anything but "--name value" pairs of the NULL-terminated names prints what is
 * wrong and the usage on stderr and exits 2 (a misspelt option never runs with its default). */
static inline void bench_check_args(int argc, char **argv, const char *usage,
                                    const char *const *names)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: %s\n", usage);
            exit(0);
        }
    for (int i = 1; i < argc; i += 2) {
        bool known = false;
        for (const char *const *n = names; *n && !known; n++)
            known = !strcmp(argv[i], *n);
        if (!known || i + 1 >= argc) {
            fprintf(stderr, "%s: %s %s\nusage: %s\n", argv[0], argv[i],
                    known ? "needs a value" : "is not an option", usage);
            exit(2);
        }
    }
}

/* "--name value" from argv, or def. */
static inline const char *bench_arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return def;
}

#endif
