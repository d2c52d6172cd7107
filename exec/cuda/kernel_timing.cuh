/* kernel_timing: how the kernels' micro-benchmarks (fuyou-profile's GPU curves, bench/) time a
 * launch: between CUDA events on the default stream, after a few untimed runs, the median of
 * reps. sustain() first where the figure is to predict training, whose kernels run back to
 * back. Not a public header: C code sees the functions of gpt2_kernels.h and llama_kernels.h
 * built on it. */
#ifndef FUYOU_KERNEL_TIMING_CUH
#define FUYOU_KERNEL_TIMING_CUH

#include <cuda_runtime.h>
#include <errno.h>
#include <stdlib.h>

#include "cuda_check.h"

/* Runs launch() back to back for about seconds (one run timed first to count them; at most
 * SUSTAIN_MAX_RUNS), then waits: a GPU under a sustained load settles to lower clocks than a
 * burst of a few runs sees (its power limit), and training runs its kernels back to back, so a
 * measurement meant to predict training times them after this. */
enum { SUSTAIN_MAX_RUNS = 100000 };

template <typename Launch> static void sustain(Launch launch, double seconds)
{
    if (!(seconds > 0))
        return;
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    launch(); /* the first run pays for the library's set-up: not the one timed */
    CUDA_CHECK(cudaEventRecord(a));
    launch();
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    double runs = seconds * 1e3 / (ms > 1e-3f ? ms : 1e-3f);
    for (int i = 0; i < (runs < SUSTAIN_MAX_RUNS ? (int)runs : SUSTAIN_MAX_RUNS); i++)
        launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
}

static inline int timing_cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The median of ms[0..n) (sorts them). */
static inline double median_ms(float *ms, int n)
{
    qsort(ms, (size_t)n, sizeof *ms, timing_cmp_float);
    return ms[n / 2];
}

/* Runs first() then second() warmup times untimed, then reps times each between events: the
 * medians in milliseconds. 0, or -ENOMEM when the host has no room for the samples. */
template <typename First, typename Second>
static int time_pair_ms(First first, Second second, int warmup, int reps, double *first_ms,
                        double *second_ms)
{
    float *ms = (float *)malloc(2 * (size_t)reps * sizeof(float));
    if (!ms)
        return -ENOMEM;
    cudaEvent_t e[3];
    for (int i = 0; i < 3; i++)
        CUDA_CHECK(cudaEventCreate(&e[i]));
    for (int r = -warmup; r < reps; r++) {
        CUDA_CHECK(cudaEventRecord(e[0]));
        first();
        CUDA_CHECK(cudaEventRecord(e[1]));
        second();
        CUDA_CHECK(cudaEventRecord(e[2]));
        CUDA_CHECK(cudaEventSynchronize(e[2]));
        if (r >= 0) {
            CUDA_CHECK(cudaEventElapsedTime(&ms[r], e[0], e[1]));
            CUDA_CHECK(cudaEventElapsedTime(&ms[reps + r], e[1], e[2]));
        }
    }
    *first_ms = median_ms(ms, reps);
    *second_ms = median_ms(ms + reps, reps);
    for (int i = 0; i < 3; i++)
        cudaEventDestroy(e[i]);
    free(ms);
    return 0;
}

/* The same for one launch: its median in milliseconds, or -1 when the host has no room for
 * the samples. */
template <typename Launch> static double time_ms(Launch launch, int warmup, int reps)
{
    double ms = -1, none;
    if (time_pair_ms(launch, [] {}, warmup, reps, &ms, &none))
        return -1;
    return ms;
}

#endif
