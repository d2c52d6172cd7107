/* op: one op of the layer graph (graph.h): what it computes, moves and keeps, in the counting
 * conventions graph.h states, and the constructors the families' builders (arch.h) share. It
 * describes work, not time. */
#ifndef FUYOU_OP_H
#define FUYOU_OP_H

#include <stdint.h>

#include "arch.h"

typedef struct Op {
    OpKind kind;
    const char *name;     /* "qkv", "fc1", ...: static */
    int id;               /* its name: the family's block op (gpt2_arch.h), or an EdgeOp */
    int block;            /* block index; -1 for the embedding, n_layer for lnf, lm_head, loss */
    int64_t m, n, k;      /* GEMM: m tokens, n outputs, k inputs; 0 for other kinds */
    int64_t head_size;    /* attention: d_model / n_head (its kernels depend on it); 0 for
                             other kinds */
    int64_t params;       /* parameters this op owns (the tied LM head owns none) */
    double fwd_flops;
    double bwd_flops;
    int64_t fwd_io_bytes; /* device-memory bytes read + written by memory-bound kernels, as
                             the CUDA executors run the op (for a GEMM: those beside it) */
    int64_t bwd_io_bytes;
    int64_t act_bytes;    /* bytes first saved here for backward */
    int64_t out_bytes;    /* size of the op's output */
} Op;

const char *op_kind_name(OpKind k);

/* For the families' builders (BlockArch.graph_ops), each in elements of dsz bytes, in block
 * `block`, named afterwards by the family's table: a GEMM of m tokens, n outputs, k inputs with
 * `params` parameters that keeps act_bytes; a layernorm over T rows of h; a residual add of
 * T x h. */
Op op_gemm(int block, int64_t m, int64_t n, int64_t k, int64_t params, int64_t act_bytes,
           int64_t dsz);
Op op_layernorm(int block, int64_t T, int64_t h, int64_t dsz);
/* An RMSNorm over T rows of h: a layernorm without the mean or a bias; it keeps its input and
 * each row's fp32 rstd. */
Op op_rmsnorm(int block, int64_t T, int64_t h, int64_t dsz);
Op op_residual(int block, int64_t T, int64_t h, int64_t dsz);

#endif
