/* gpt2_block: one GPT-2 block's forward and backward op by op, on the fp32 CPU reference ops
 * (gpt2_ops.h), over tensors the caller places wherever it likes.
 *
 * The in-memory CPU backend (gpt2_cpu.c) runs a whole block with these; the out-of-core
 * pipeline runs them one schedule task at a time, with each tensor in its own buffer (kept,
 * swapped back in, or recomputed). Both perform the same calls in the same order, so their
 * results are bit-identical. Ops are GPT-2's by name (gpt2_arch.h). Backward runs for the ops
 * with a backward task in the schedule, last to first, all but the residual adds: fc2's
 * includes res2's pass-through, ln2's res1's. */
#ifndef FUYOU_GPT2_BLOCK_H
#define FUYOU_GPT2_BLOCK_H

#include "gpt2_arch.h"
#include "gpt2_layout.h"
#include "workpool.h"

/* A block's activations. N = B * T rows. */
typedef struct Gpt2BlockActs {
    float *in;                       /* (N,C) the block input: the checkpoint */
    float *ln1, *ln1_mean, *ln1_rstd; /* (N,C), (N), (N) */
    float *qkv;                      /* (N,3C) */
    float *atty, *att;               /* (N,C), (B,NH,T,T) softmax kept for backward */
    float *preatt;                   /* (B,NH,T,T) scratch of the forward */
    float *attproj, *res1;           /* (N,C) */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;           /* (N,F) */
    float *fcproj, *out;             /* (N,C); out is the next block's input */
} Gpt2BlockActs;

/* Gradients of a block's activations; every one starts zeroed (backward accumulates), except
 * dout, the incoming gradient of the block's output. */
typedef struct Gpt2BlockGrads {
    float *din;                      /* (N,C) += into the previous block's dout */
    float *ln1, *qkv, *atty;
    float *preatt, *att;             /* (B,NH,T,T) scratch */
    float *attproj, *res1, *ln2, *fch, *fch_gelu, *fcproj;
    float *dout;
} Gpt2BlockGrads;

typedef struct Gpt2Dims {
    int B, T, C, F, NH;
} Gpt2Dims;

void gpt2_dims(Gpt2Dims *d, const ModelConfig *c, int B, int T);

/* Forward of op (a Gpt2Op): reads its inputs from a, writes its outputs there. */
void gpt2_block_forward_op(int op, const Gpt2Dims *d, const Gpt2BlockView *w,
                           const Gpt2BlockActs *a, WorkPool *wp);
/* Backward of op (one with a backward, gpt2_block_op_has_backward; a block's in reverse op
 * order): weight gradients += into dw. */
void gpt2_block_backward_op(int op, const Gpt2Dims *d, const Gpt2BlockView *w,
                            const Gpt2BlockView *dw, const Gpt2BlockActs *a,
                            const Gpt2BlockGrads *g, WorkPool *wp);
/* Whether op has a backward task (residuals pass their gradient through another op's). */
bool gpt2_block_op_has_backward(int op);

#endif
