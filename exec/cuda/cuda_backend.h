/* cuda_backend: the CUDA training backend (backend_cuda, an ops table of exec/train/backend.h)
 * for every block family: the whole model in GPU memory (the all-on-GPU placement), 16-bit
 * weights and activations (bf16, or fp16 with loss scaling), fp32 master weights, gradients
 * and Adam m and v, AdamW on the GPU. Its step is gpu_block.h's ops over every layer in order,
 * the same ops the pipeline's CUDA device runs one task at a time. The streams are per role
 * (compute, h2d, d2h): the batch goes up and the losses come down beside the compute. */
#ifndef FUYOU_CUDA_BACKEND_H
#define FUYOU_CUDA_BACKEND_H

#include "backend.h"

extern const BackendOps backend_cuda;

#endif
