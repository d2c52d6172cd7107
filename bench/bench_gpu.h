/* bench_gpu: what the GPU benchmarks share. Benchmarks only. */
#ifndef FUYOU_BENCH_GPU_H
#define FUYOU_BENCH_GPU_H

#include <stdio.h>
#include <stdlib.h>

#include "cuda_device.h"

/* Exits 77 (skipped, as the GPU suites are) with the reason when there is no GPU. */
static inline void bench_gpu_or_skip(void)
{
    CudaDeviceInfo info;
    Err e;
    if (cudadev_probe(&info, &e)) {
        printf("SKIP: %s\n", e.msg);
        exit(77);
    }
}

#endif
