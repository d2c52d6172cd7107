/* cuda_check: error checks for CUDA and cuBLAS calls (C++ side of exec/cuda only). An
 * environment failure reports file:line and the library's message, then exits with status 1:
 * training state on the GPU cannot be recovered from a failed launch. FUYOU_CUDA_SYNC=1 in the
 * environment synchronises after every launch, so an asynchronous fault names its kernel. */
#ifndef FUYOU_CUDA_CHECK_H
#define FUYOU_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static inline void cuda_fail(cudaError_t st, const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(st));
    exit(1);
}

#define CUDA_CHECK(call)                                                                      \
    do {                                                                                      \
        cudaError_t st_ = (call);                                                             \
        if (st_ != cudaSuccess)                                                               \
            cuda_fail(st_, #call, __FILE__, __LINE__);                                        \
    } while (0)

#define CUBLAS_CHECK(call)                                                                    \
    do {                                                                                      \
        cublasStatus_t st_ = (call);                                                          \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                     \
                    cublasGetStatusString(st_));                                              \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* After every launch: the launch error, and with FUYOU_CUDA_SYNC=1 the execution error. */
static inline void cuda_after_launch(const char *kernel, const char *file, int line)
{
    static int sync = -1;
    if (sync < 0) {
        const char *s = getenv("FUYOU_CUDA_SYNC");
        sync = s && *s == '1';
    }
    cudaError_t st = cudaGetLastError();
    if (st == cudaSuccess && sync)
        st = cudaDeviceSynchronize();
    if (st != cudaSuccess)
        cuda_fail(st, kernel, file, line);
}

#define LAUNCHED(kernel) cuda_after_launch(#kernel, __FILE__, __LINE__)

#endif
