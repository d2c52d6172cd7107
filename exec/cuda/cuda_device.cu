/* cuda_device: GPU discovery through the CUDA runtime; see cuda_device.h. */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_wait.h"

extern "C" {
#include "clock.h"
#include "cuda_device.h"
}

/* A trivial kernel: launching it proves the binary carries code for this GPU's architecture. */
__global__ void probe_kernel(int *out)
{
    *out = 42;
}

extern "C" int cudadev_probe(CudaDeviceInfo *info, Err *e)
{
    int n = 0;
    cudaError_t st = cudaGetDeviceCount(&n);
    if (st != cudaSuccess || n == 0)
        return err_set(e, -ENODEV, "no usable GPU: %s",
                       st != cudaSuccess ? cudaGetErrorString(st) : "no CUDA device found");
    cudaDeviceProp prop;
    st = cudaGetDeviceProperties(&prop, 0);
    if (st != cudaSuccess)
        return err_set(e, -ENODEV, "no usable GPU: %s", cudaGetErrorString(st));
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->sm_count = prop.multiProcessorCount;
    info->mem_bytes = prop.totalGlobalMem;
    info->l2_bytes = (size_t)prop.l2CacheSize;

    int *d = NULL, h = 0;
    st = cudaMalloc(&d, sizeof *d);
    if (st == cudaSuccess) {
        probe_kernel<<<1, 1>>>(d);
        st = cudaGetLastError();
    }
    if (st == cudaSuccess)
        st = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (st != cudaSuccess || h != 42)
        return err_set(e, -ENODEV, "GPU %s (sm_%d%d) cannot run this build: %s", info->name,
                       info->cc_major, info->cc_minor,
                       st != cudaSuccess ? cudaGetErrorString(st) : "probe kernel wrote nothing");
    st = cudaMemGetInfo(&info->free_bytes, &info->mem_bytes);
    if (st != cudaSuccess)
        return err_set(e, -ENODEV, "cudaMemGetInfo: %s", cudaGetErrorString(st));
    return 0;
}

/* Two pinned host buffers, two device buffers and two streams of bytes each: what both copy
 * measurements move through (index 0 host to device, 1 device to host). */
typedef struct CopyRig {
    void *host[2], *dev[2];
    cudaStream_t s[2];
} CopyRig;

static cudaError_t rig_open(CopyRig *r, size_t bytes)
{
    *r = CopyRig{};
    cudaError_t st = cudaSuccess;
    for (int i = 0; i < 2 && st == cudaSuccess; i++) {
        st = cudaMallocHost(&r->host[i], bytes);
        if (st == cudaSuccess)
            st = cudaMalloc(&r->dev[i], bytes);
        if (st == cudaSuccess)
            st = cudaStreamCreateWithFlags(&r->s[i], cudaStreamNonBlocking);
    }
    return st;
}

static void rig_close(CopyRig *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->s[i])
            cudaStreamDestroy(r->s[i]);
        cudaFreeHost(r->host[i]);
        cudaFree(r->dev[i]);
    }
}

extern "C" int cudadev_copy_bench(size_t bytes, int reps, double *GBps, Err *e)
{
    enum { MAX_REPS = 64 };
    if (reps < 1 || reps > MAX_REPS)
        return err_set(e, -EINVAL, "1 to %d repetitions", MAX_REPS);
    CopyRig rig;
    cudaError_t st = rig_open(&rig, bytes);
    void *const *host = rig.host, *const *dev = rig.dev;
    const cudaStream_t *s = rig.s;
    cudaEvent_t ev[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4 && st == cudaSuccess; i++)
        st = cudaEventCreate(&ev[i]);
    double *x[4] = {GBps, GBps + reps, GBps + 2 * reps, GBps + 3 * reps};
    for (int r = 0; r < reps && st == cudaSuccess; r++) {
        /* alone: one direction on one stream */
        for (int d = 0; d < 2 && st == cudaSuccess; d++) {
            cudaEventRecord(ev[0], s[d]);
            st = d ? cudaMemcpyAsync(host[1], dev[1], bytes, cudaMemcpyDeviceToHost, s[d])
                   : cudaMemcpyAsync(dev[0], host[0], bytes, cudaMemcpyHostToDevice, s[d]);
            cudaEventRecord(ev[1], s[d]);
            if (st == cudaSuccess)
                st = cudaEventSynchronize(ev[1]);
            float ms = 0;
            cudaEventElapsedTime(&ms, ev[0], ev[1]);
            x[d][r] = (double)bytes / (ms * 1e-3) / 1e9;
        }
        /* together: both directions at once, each timed on its own stream */
        cudaEventRecord(ev[0], s[0]);
        cudaEventRecord(ev[2], s[1]);
        st = cudaMemcpyAsync(dev[0], host[0], bytes, cudaMemcpyHostToDevice, s[0]);
        if (st == cudaSuccess)
            st = cudaMemcpyAsync(host[1], dev[1], bytes, cudaMemcpyDeviceToHost, s[1]);
        cudaEventRecord(ev[1], s[0]);
        cudaEventRecord(ev[3], s[1]);
        if (st == cudaSuccess)
            st = cudaDeviceSynchronize();
        float up = 0, down = 0;
        cudaEventElapsedTime(&up, ev[0], ev[1]);
        cudaEventElapsedTime(&down, ev[2], ev[3]);
        x[2][r] = (double)bytes / (up * 1e-3) / 1e9;
        x[3][r] = (double)bytes / (down * 1e-3) / 1e9;
    }
    for (int i = 0; i < 4; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    rig_close(&rig);
    if (st != cudaSuccess)
        return err_set(e, -EIO, "copying %zu bytes between host and GPU: %s", bytes,
                       cudaGetErrorString(st));
    return 0;
}

extern "C" int cudadev_copy_until(size_t bytes, int dirs, bool (*stopped)(void *token),
                                  bool (*counting)(void *token), void *token, double *GBps,
                                  Err *e)
{
    if (!(dirs & (CUDADEV_H2D | CUDADEV_D2H)) || (dirs & ~(CUDADEV_H2D | CUDADEV_D2H)))
        return err_set(e, -EINVAL, "copy directions %d: CUDADEV_H2D, CUDADEV_D2H or both", dirs);
    bool on[2] = {(dirs & CUDADEV_H2D) != 0, (dirs & CUDADEV_D2H) != 0};
    CopyRig r;
    cudaError_t st = rig_open(&r, bytes);
    /* each direction timed and waited for as the pipeline's copy lanes wait (cuda_wait.h) */
    cudaEvent_t ev[2][2] = {{NULL, NULL}, {NULL, NULL}}; /* [direction][began, done] */
    CopyPace pace[2] = {};
    for (int i = 0; i < 4 && st == cudaSuccess; i++)
        st = cudaEventCreate(&ev[i / 2][i % 2]);
    double moved = 0, secs = 0;
    while (st == cudaSuccess && !stopped(token)) {
        bool count = counting(token);
        double t0 = clock_monotonic_s();
        for (int i = 0; i < 2 && st == cudaSuccess; i++) {
            if (!on[i])
                continue;
            st = cudaEventRecord(ev[i][0], r.s[i]);
            if (st == cudaSuccess)
                st = cudaMemcpyAsync(i ? r.host[1] : r.dev[0], i ? r.dev[1] : r.host[0], bytes,
                                     i ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, r.s[i]);
            if (st == cudaSuccess)
                st = cudaEventRecord(ev[i][1], r.s[i]);
        }
        for (int i = 0; i < 2 && st == cudaSuccess; i++) {
            if (!on[i])
                continue;
            st = cuda_wait_paced(&pace[i], ev[i][1], t0, bytes);
            float ms = 0;
            if (st == cudaSuccess && cudaEventElapsedTime(&ms, ev[i][0], ev[i][1]) == cudaSuccess)
                copy_pace_seen(&pace[i], bytes, ms * 1e-3);
        }
        if (count && counting(token)) {
            moved += (on[0] + on[1]) * (double)bytes;
            secs += clock_monotonic_s() - t0;
        }
    }
    *GBps = secs > 0 ? moved / secs / 1e9 : 0;
    for (int i = 0; i < 4; i++)
        if (ev[i / 2][i % 2])
            cudaEventDestroy(ev[i / 2][i % 2]);
    rig_close(&r);
    if (st != cudaSuccess)
        return err_set(e, -EIO, "copying %zu bytes %s between host and GPU: %s", bytes,
                       on[0] && on[1] ? "both ways" : on[0] ? "to the GPU" : "from the GPU",
                       cudaGetErrorString(st));
    return 0;
}
