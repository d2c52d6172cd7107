/* clock: the monotonic wall clock every timing in fuyou reads (simulation time spent, training
 * throughput, benchmarks). Seconds as a double; not for simulated time. */
#ifndef FUYOU_CLOCK_H
#define FUYOU_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double clock_monotonic_s(void);

#endif
