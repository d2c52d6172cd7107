/* cuda_check: error checks for CUDA and cuBLAS calls (C++ side of exec/cuda only). An
 * environment failure reports file:line and the library's message, then exits with status 1:
 * training state on the GPU cannot be recovered from a failed launch. A thread that can stop
 * cleanly instead (the out-of-core pipeline's compute lane, which drains its other lanes and
 * names the task) points cuda_failure at its own record for the length of a call: the first
 * failure is kept there and the call goes on to its end, its later failures unrecorded.
 * FUYOU_CUDA_SYNC=1 in the environment synchronises after every launch and cuBLAS call, so an
 * asynchronous fault names its kernel or call. */
#ifndef FUYOU_CUDA_CHECK_H
#define FUYOU_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

struct CudaFailure {
    bool failed;
    char msg[256]; /* "file:line: call: the library's words" */
};

/* This thread's record, or NULL: exit on failure (defined in cuda_check.cu). */
extern thread_local CudaFailure *cuda_failure;

static inline void cuda_report(const char *file, int line, const char *what, const char *why)
{
    if (cuda_failure) {
        if (!cuda_failure->failed) {
            cuda_failure->failed = true;
            /* each part bounded so the whole fits (a long call is cut, not the error) */
            snprintf(cuda_failure->msg, sizeof cuda_failure->msg, "%.80s:%d: %.100s: %.50s",
                     file, line, what, why);
        }
        return;
    }
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, why);
    exit(1);
}

static inline void cuda_fail(cudaError_t st, const char *what, const char *file, int line)
{
    cuda_report(file, line, what, cudaGetErrorString(st));
}

#define CUDA_CHECK(call)                                                                      \
    do {                                                                                      \
        cudaError_t st_ = (call);                                                             \
        if (st_ != cudaSuccess)                                                               \
            cuda_fail(st_, #call, __FILE__, __LINE__);                                        \
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

/* A cuBLAS call: its status, then as after a launch (its kernels, with FUYOU_CUDA_SYNC=1 their
 * execution). */
#define CUBLAS_CHECK(call)                                                                    \
    do {                                                                                      \
        cublasStatus_t st_ = (call);                                                          \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                     \
            cuda_report(__FILE__, __LINE__, #call, cublasGetStatusString(st_));               \
        else                                                                                  \
            cuda_after_launch(#call, __FILE__, __LINE__);                                     \
    } while (0)

#endif
