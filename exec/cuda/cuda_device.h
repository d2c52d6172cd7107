/* cuda_device: finding the GPU. A C header over the CUDA runtime, so C code (tests, the executor)
 * can ask whether a usable GPU is present without including CUDA headers. It does not select or
 * configure devices for training; the CUDA backend does that. */
#ifndef FUYOU_CUDA_DEVICE_H
#define FUYOU_CUDA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "fuyou_err.h"

typedef struct CudaDeviceInfo {
    char name[256];
    int cc_major, cc_minor; /* compute capability */
    int sm_count;
    size_t mem_bytes;       /* total device memory */
    size_t free_bytes;      /* free when probed */
    size_t l2_bytes;        /* the L2 cache */
} CudaDeviceInfo;

/* Probes device 0. Returns 0 with info filled, -ENODEV when the runtime finds no usable GPU (no
 * driver, no device, or the binary lacks code for it), with e saying why in the runtime's words. */
int cudadev_probe(CudaDeviceInfo *info, Err *e);

/* Pinned host <-> device copies of bytes, reps times each, GB/s of every run (the caller
 * summarises them): GBps[k * reps + r] for k = 0 host to device alone, 1 device to host alone,
 * 2 and 3 the same while the other direction runs (two streams). 0 or -errno with e. */
int cudadev_copy_bench(size_t bytes, int reps, double *GBps, Err *e);

/* Copy directions, for cudadev_copy_until. */
enum { CUDADEV_H2D = 1, CUDADEV_D2H = 2 };

/* Pinned copies of bytes in the directions `dirs` names (CUDADEV_H2D, CUDADEV_D2H or both, at
 * once on two streams), over and over until stopped(token) says so: a load on host memory for
 * something else to run beside. *GBps: the bytes copied over the time of the rounds that
 * counting(token) held before and after. 0 or -errno with e (-EINVAL: no direction). */
int cudadev_copy_until(size_t bytes, int dirs, bool (*stopped)(void *token),
                       bool (*counting)(void *token), void *token, double *GBps, Err *e);

#endif
