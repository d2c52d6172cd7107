/* gpt2_cuda: the CUDA backend (backend_cuda, an ops table of exec/train/backend.h): bf16 weights
 * and activations, fp32 master weights, gradients, Adam m and v and all accumulation, cuBLAS
 * GEMMs and the kernels of gpt2_kernels.h, AdamW on the GPU (the all-on-GPU placement). The
 * streams are created per role (compute, h2d, d2h) for the out-of-core pipeline; this backend
 * runs everything on the compute stream. */
#ifndef FUYOU_GPT2_CUDA_H
#define FUYOU_GPT2_CUDA_H

#include "backend.h"

extern const BackendOps backend_cuda;

#endif
