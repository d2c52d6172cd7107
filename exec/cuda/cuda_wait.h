/* cuda_wait: how a host thread waits for a host <-> device copy it issued (C++ side of
 * exec/cuda only).
 *
 * With the runtime's default schedule (one context, many cores) cudaEventSynchronize spins a
 * core for the whole wait. A copy lasts milliseconds and the Adam's threads want the cores: the
 * pipeline's two copy lanes spinning beside them made 18 runnable threads on 16 cores. A
 * blocking wait (cudaEventBlockingSync) frees the core but wakes late: on the H200 machine the
 * copy lanes' tasks then started 0.1-0.4 ms after the one before (median 0.2). So a copy's
 * waiter paces itself: it sleeps through most of the time the copy should take at the fastest
 * rate its stream has shown, then polls the event, holding a core only near the end. A compute
 * task's waiter keeps spinning (tasks of tens of microseconds; pipe_exec.h). */
#ifndef FUYOU_CUDA_WAIT_H
#define FUYOU_CUDA_WAIT_H

#include <cuda_runtime.h>
#include <stddef.h>

/* The fastest rate one stream's copies have run at, bytes per second (0: none seen yet). */
struct CudaPace {
    double bytes_per_s;
};

/* Waits for `done`, recorded after `bytes` of copies issued at t0_s (clock_monotonic_s) on a
 * stream that had nothing else queued: sleeps until CUDA_WAIT_SLEEP_SHARE of the time they
 * take at pace's rate, less CUDA_WAIT_MARGIN_S, has passed, then polls. The runtime's error of
 * the work, or cudaSuccess. */
cudaError_t cuda_wait_paced(const CudaPace *pace, cudaEvent_t done, double t0_s, size_t bytes);

/* Records that `bytes` moved in `secs` (the events' time) on pace's stream. */
void cuda_pace_seen(CudaPace *pace, size_t bytes, double secs);

#define CUDA_WAIT_SLEEP_SHARE 0.8
#define CUDA_WAIT_MARGIN_S 100e-6

#endif
