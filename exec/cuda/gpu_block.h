/* gpu_block: the model's compute on the GPU, op by op, for every block family: a block's
 * forward and backward ops by the family's names (arch.h) over tensors the caller places, and
 * the edges (embedding, final norm, LM head). The one GPU implementation both GPU executors
 * call: the CUDA backend (cuda_backend.h, every layer's tensors in GPU memory, a step a loop
 * over the layers) and the pipeline's CUDA device (exec/pipeline/device_cuda.cu, one schedule
 * task a call).
 *
 * Weights and activations are 16-bit (GkType: bf16 or fp16), statistics, losses and the
 * residual stream's gradient fp32, every accumulation fp32. Block tensors are laid out as the
 * family's lane_tensor_bytes says (arch.h): a norm's output carries its fp32 statistics after
 * it, attention's output its rows' log-sum-exp. The block owns what never leaves the GPU
 * (arch.h's LaneBuffer: activation gradients, the attention workspace, one head chunk of
 * logits, the final norm's output, losses, token ids, gradient sums, the rotary table): what
 * footprint_cuda_lane predicts, byte for byte. Every call is asynchronous on the block's
 * stream; calls of one block run in order. Weight pointers are the family's layout (llama_ /
 * gpt2_layout.h): a block's parameters, or the edges' (the flat layout's first
 * model_embed_params). */
#ifndef FUYOU_GPU_BLOCK_H
#define FUYOU_GPU_BLOCK_H

#include <stdbool.h>
#include <stddef.h>

#include "fuyou_err.h"
#include "gpt2_kernels.h"
#include "model.h"

typedef struct GpuBlock GpuBlock;

/* Where weight gradients go (dw, in the family's layout). */
typedef enum GpuGrads {
    /* Every gradient += in fp32 at dw, which the caller zeroes before a step: the backend. */
    GPU_GRADS_F32,
    /* A block's matrices written (=) in 16 bits at dw by their GEMMs, one micro-batch's; what
     * kernels sum over tokens (biases, norm gains) in fp32 in the block's sums buffer until
     * the block's last backward op (its first op's) writes them to dw in 16 bits; the edges'
     * in fp32 from the head's start (zeroed there) until the embedding's backward writes them
     * to dw: the pipeline's lane, whose micro-batches are summed on the host. */
    GPU_GRADS_16,
} GpuGrads;

/* Bytes the block allocates for micro-batches of B x T: LaneBuffer by LaneBuffer, each
 * rounded as carved (lane_round), summed. */
size_t gpu_block_own_bytes(const ModelConfig *c, int B, int T);
/* A block computing on stream s (NULL: the default stream) in c->dtype (bf16 or fp16), with
 * its buffers, cuBLAS handles and, for rotary embeddings, the table uploaded. 0, -ENOMEM when
 * the GPU has no room (e says how much it wanted), -EINVAL for a shape the kernels lack. */
int gpu_block_create(GpuBlock **out, const ModelConfig *c, int B, int T, GpuGrads grads,
                     cudaStream_t_c s, Err *e);
void gpu_block_destroy(GpuBlock *b);

/* Says the caller runs each block's forward ops all, in order, with every tensor in place (the
 * backend; not the pipeline, which may recompute one op alone): ops may then be fused across
 * (GPT-2's fc1 GEMM writes the GELU in its epilogue, and the gelu op has nothing left). */
void gpu_block_whole_forwards(GpuBlock *b);

/* (2N) on the GPU: the micro-batch's inputs, then its targets, which the caller copies in
 * before the embedding's forward (inputs) and the head (targets). */
int *gpu_block_tokens(GpuBlock *b);
/* (N) on the GPU: the per-token losses of the last head. */
const float *gpu_block_losses(const GpuBlock *b);
/* Writes them into N floats of pinned host memory (cudaMallocHost) on the block's stream by a
 * kernel's stores through the memory's device mapping (mapped: cudaHostGetDevicePointer's), not
 * a copy: a copy would queue on the copy engine behind whatever another stream moves that way
 * (an activation chunk's swap), and the stream with it. Read them once the stream passed it. */
void gpu_block_losses_out(GpuBlock *b, float *mapped);

/* A block op's forward (every op) and backward (llama_ / gpt2_block_op_has_backward's ops, a
 * block's last op first; first: this is the block's first backward op of the micro-batch).
 * w: the block's weights; t: its tensors by name; dw: its gradients (GpuGrads). The residual
 * stream's gradient is the block's own buffer: the op that ends a block's backward (its first)
 * leaves the previous block's there. */
void gpu_block_forward(GpuBlock *b, int op, const act16_t *w, act16_t *const t[]);
void gpu_block_backward(GpuBlock *b, int op, const act16_t *w, act16_t *const t[], void *dw,
                        bool first);

/* The edges. w, dw: the edges' weights and gradients. The embedding writes block 0's input
 * (out) from the inputs; its backward takes the residual gradient block 0 left and, with
 * GPU_GRADS_16, writes every edge gradient to dw. The final norm reads the last block's output
 * (res); its backward starts the residual gradient. The head runs in chunks of
 * graph_head_chunk tokens: logits, per-token losses (0 for a DATA_IGNORE target) and, with
 * backward, the gradient of grad_scale * the mean loss over the n_targets counted targets
 * (backend_count_targets) into the final norm's input gradient and the head's weights. */
void gpu_embed_forward(GpuBlock *b, const act16_t *w, act16_t *out);
void gpu_embed_backward(GpuBlock *b, void *dw);
void gpu_norm_forward(GpuBlock *b, const act16_t *w, const act16_t *res);
void gpu_norm_backward(GpuBlock *b, const act16_t *w, const act16_t *res, void *dw);
void gpu_head(GpuBlock *b, const act16_t *w, void *dw, float grad_scale, int n_targets,
              bool backward);

#endif
