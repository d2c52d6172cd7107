/* cuda_device: GPU discovery through the CUDA runtime; see cuda_device.h. */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

extern "C" {
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
