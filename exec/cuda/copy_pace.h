/* copy_pace: when a thread waiting for a host <-> device copy should wake (plain C, header only:
 * the CUDA waits in cuda_wait.h use it, tests check it without a GPU).
 *
 * A copy lane sleeps through most of a copy and polls for its end: it wakes once
 * COPY_PACE_SHARE of the time the copy takes at the fastest rate its stream has shown has
 * passed, less COPY_PACE_MARGIN_S. Only copies of at least COPY_PACE_MIN_BYTES teach the rate (a
 * small copy's fixed latency would read as a slow rate, and the next large copy would sleep
 * past its end); below it, or before any was seen, the waiter does not sleep. The share leaves
 * room for copies slower than the fastest seen, as copies beside the CPU Adam run
 * (MEASUREMENTS.md, "Copy lanes sleep through a copy"). */
#ifndef FUYOU_COPY_PACE_H
#define FUYOU_COPY_PACE_H

#include <stddef.h>

#define COPY_PACE_SHARE 0.6
#define COPY_PACE_MARGIN_S 100e-6
#define COPY_PACE_MIN_BYTES ((size_t)4 << 20)

/* The fastest rate one stream's copies of at least COPY_PACE_MIN_BYTES have run at, bytes per
 * second (0: none seen yet). */
typedef struct CopyPace {
    double bytes_per_s;
} CopyPace;

/* When to wake for `bytes` of copies issued at t0_s (seconds, any clock): t0_s itself where
 * there is nothing to sleep through. */
static inline double copy_pace_wake_s(const CopyPace *p, double t0_s, size_t bytes)
{
    if (p->bytes_per_s <= 0 || bytes < COPY_PACE_MIN_BYTES)
        return t0_s;
    double wake = t0_s + COPY_PACE_SHARE * (double)bytes / p->bytes_per_s - COPY_PACE_MARGIN_S;
    return wake > t0_s ? wake : t0_s;
}

/* Records that `bytes` moved in `secs` on the stream (the device's own time). */
static inline void copy_pace_seen(CopyPace *p, size_t bytes, double secs)
{
    if (bytes >= COPY_PACE_MIN_BYTES && secs > 0 && (double)bytes / secs > p->bytes_per_s)
        p->bytes_per_s = (double)bytes / secs;
}

#endif
