/* llama_block: one Llama block's forward and backward op by op, on the fp32 CPU reference ops
 * (llama_ops.h, and gpt2_ops.h's matmul and residual add), over tensors the caller places
 * wherever it likes. gpt2_block.h's counterpart: a backend that runs a whole block and the
 * out-of-core pipeline that runs one schedule task at a time make the same calls in the same
 * order, so their results are bit-identical. Ops are the Llama block's by name (llama_arch.h).
 *
 * Backward runs for the ops with a backward (llama_block_op_has_backward), last to first: all
 * but the residual adds, whose pass-through is carried by another op's: LLAMA_DOWN's includes
 * res2's, LLAMA_NORM2's res1's. RoPE has a backward of its own (LLAMA_ROPE), between
 * attention's and the qkv GEMM's. The weights are views (llama_layout.h) wherever the caller
 * keeps them. */
#ifndef FUYOU_LLAMA_BLOCK_H
#define FUYOU_LLAMA_BLOCK_H

#include <stdbool.h>

#include "llama_arch.h"
#include "llama_layout.h"
#include "llama_ops.h"
#include "workpool.h"

/* A block's activations, op X's output in field X; N = B * T rows. Beside their outputs, the
 * norms keep rstd and attention keeps att, for backward. */
typedef struct LlamaBlockActs {
    float *in;                 /* (N,C) the block input: the checkpoint (LLAMA_IN) */
    float *norm1, *norm1_rstd; /* (N,C), (N) */
    float *qkv;                /* (N,(h+2g)d), the bias added when there is one */
    float *rope;               /* (N,(h+2g)d) qkv with q and k rotated, v copied */
    float *attn, *att;         /* (N,h d), (B,h,T,T) softmax kept for backward */
    float *preatt;             /* (B,h,T,T) scratch of the forward */
    float *o, *res1;           /* (N,C) */
    float *norm2, *norm2_rstd; /* (N,C), (N) */
    float *gate_up;            /* (N,2F) gate then up in each row */
    float *swiglu;             /* (N,F) */
    float *down, *out;         /* (N,C); out (LLAMA_RES2) is the next block's input */
} LlamaBlockActs;

/* Gradients of a block's activations; every one starts zeroed (backward accumulates), except
 * dout, the incoming gradient of the block's output. */
typedef struct LlamaBlockGrads {
    float *din;                /* (N,C) += into the previous block's dout */
    float *norm1, *qkv, *rope, *attn;
    float *preatt, *att;       /* (B,h,T,T) scratch */
    float *o, *res1, *norm2, *gate_up, *swiglu, *down;
    float *dout;
} LlamaBlockGrads;

typedef struct LlamaDims {
    int B, T;
    int C;                  /* hidden size */
    int F;                  /* intermediate_size */
    int h, g, d;            /* query heads, kv heads (dividing h), head size (even) */
    float eps;              /* rms_norm_eps */
    const RopeTable *rope;  /* cos and sin of positions 0..T-1 at least, d/2 wide */
} LlamaDims;

/* Forward of op (a LlamaOp): reads its inputs from a, writes its outputs there. */
void llama_block_forward_op(int op, const LlamaDims *dims, const LlamaBlockView *w,
                            const LlamaBlockActs *a, WorkPool *wp);
/* Backward of op (one with a backward; a block's in reverse op order): activation gradients
 * += into g, weight gradients += into dw (dw->qkv_b NULL exactly when w->qkv_b is). */
void llama_block_backward_op(int op, const LlamaDims *dims, const LlamaBlockView *w,
                             const LlamaBlockView *dw, const LlamaBlockActs *a,
                             const LlamaBlockGrads *g, WorkPool *wp);
/* Whether op has a backward task: all but LLAMA_RES1 and LLAMA_RES2. */
bool llama_block_op_has_backward(int op);

#endif
