/* cuda_wait: how a host thread waits for a host <-> device copy it issued (C++ side of
 * exec/cuda only).
 *
 * The runtime's own wait spins a core for the whole copy, milliseconds the CPU Adam's threads
 * want; a blocking wait frees the core but wakes late (MEASUREMENTS.md, "Copy lanes sleep
 * through a copy"). So a copy's waiter paces itself (copy_pace.h: it sleeps through most of the
 * copy, then polls the event), holding a core only near the end. A compute task's waiter keeps
 * spinning (tasks of tens of microseconds; pipe_exec.h). */
#ifndef FUYOU_CUDA_WAIT_H
#define FUYOU_CUDA_WAIT_H

#include <cuda_runtime.h>
#include <stddef.h>

extern "C" {
#include "copy_pace.h"
}

/* Waits for `done`, recorded after `bytes` of copies issued at t0_s (clock_monotonic_s) on a
 * stream that had nothing else queued: sleeps until copy_pace_wake_s, then polls. The runtime's
 * error of the work, or cudaSuccess. */
cudaError_t cuda_wait_paced(const CopyPace *pace, cudaEvent_t done, double t0_s, size_t bytes);

#endif
