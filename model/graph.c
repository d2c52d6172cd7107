/* graph: building the per-op layer graph; see graph.h for the counting conventions. */
#include "graph.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Block b's ops from its family's builder, named by its table. */
static void add_block(Op *op, const Graph *g, int b)
{
    const BlockArch *a = g->arch;
    a->graph_ops(op, &g->cfg, b, g->batch, g->seq);
    for (int i = 0; i < a->n_ops; i++) {
        assert(op[i].kind == a->ops[i].kind && op[i].block == b);
        op[i].id = i;
        op[i].name = a->ops[i].name;
    }
}

int graph_init(Graph *g, const ModelConfig *cfg, int batch, int seq, Err *e)
{
    memset(g, 0, sizeof *g);
    int rc = model_validate(cfg, e);
    if (rc)
        return rc;
    if (batch < 1 || batch > GRAPH_MAX_BATCH)
        return err_set(e, -EINVAL, "a micro-batch (--batch / --micro-batches) must be 1 to %d "
                       "sequences (got %d)", GRAPH_MAX_BATCH, batch);
    if (seq < 1 || seq > cfg->max_seq)
        return err_set(e, -EINVAL, "sequence length must be 1 to %d, the model's max_seq "
                       "(got %d)", cfg->max_seq, seq);
    if ((int64_t)batch * seq > GRAPH_MAX_TOKENS)
        return err_set(e, -EINVAL, "a micro-batch of %d x %d = %lld tokens is over the limit of "
                       "%lld; lower --batch or --seq, or split it into more --micro-batches",
                       batch, seq, (long long)batch * seq,
                       (long long)GRAPH_MAX_TOKENS);
    g->cfg = *cfg;
    g->arch = model_arch(cfg);
    g->batch = batch;
    g->seq = seq;
    g->tokens = (int64_t)batch * seq;
    g->n_ops = 1 + g->arch->n_ops * cfg->n_layer + 3;
    g->ops = calloc((size_t)g->n_ops, sizeof *g->ops);
    if (!g->ops)
        return err_set(e, -ENOMEM, "out of memory for a graph of %d ops", g->n_ops);

    int64_t T = g->tokens, h = cfg->d_model, V = cfg->vocab, dsz = (int64_t)dtype_bytes(cfg->dtype);
    int L = cfg->n_layer;
    Op *op = g->ops;
    Op embed, norm;
    g->arch->graph_edge_ops(&embed, &norm, cfg, T);
    embed.id = EDGE_EMBED, embed.block = -1;
    norm.id = EDGE_NORM, norm.block = L;
    int64_t embed_params = embed.params;
    *op++ = embed;
    for (int b = 0; b < L; b++, op += g->arch->n_ops)
        add_block(op, g, b);
    *op++ = norm;
    /* The head runs fused over chunks of tokens (graph.h, GRAPH_HEAD_CHUNK): its forward also
     * does its backward, so all its FLOPs are forward ones, at the chunk's GEMM shape, and what
     * it keeps for the lnf's backward is its input's gradient, not the logits. */
    Op head = op_gemm(L, T, V, h, cfg->tied ? 0 : V * h, T * h * dsz, dsz);
    head.name = "lm_head", head.id = EDGE_HEAD;
    head.m = graph_head_chunk(T);
    head.fwd_flops += head.bwd_flops;
    head.bwd_flops = 0;
    head.out_bytes = head.m * V * dsz; /* one chunk's logits at a time */
    /* Beside its GEMMs: the embedding's fp32 gradient zeroed, each chunk's logits read and
     * their gradient written in place by the softmax + cross-entropy, and the weight gradient's
     * GEMM adding into that fp32 sum (read and written) once a chunk. */
    int64_t chunks = (T + head.m - 1) / head.m;
    head.fwd_io_bytes = 4 * embed_params + 2 * T * V * dsz + 8 * V * h * chunks;
    *op++ = head;
    /* Softmax + cross-entropy, computed within the head's chunks (its FLOPs are counted here,
     * its time there): what is left is the per-token losses' copy to the host; it keeps the
     * targets. */
    *op++ = (Op){.kind = OP_LOSS, .name = "loss", .id = EDGE_LOSS, .block = L,
                 .fwd_flops = 5.0 * T * V,
                 .bwd_flops = 0, .fwd_io_bytes = T * 4, .bwd_io_bytes = 0,
                 .act_bytes = T * 4, .out_bytes = T * 4};
    assert(op - g->ops == g->n_ops);
    /* Each op's sizes are exact (tokens and model sizes are limited); their sum over the blocks
     * is checked in double, before graph_totals adds it up in int64. */
    double act = 0;
    for (int i = 0; i < g->n_ops; i++)
        act += (double)g->ops[i].act_bytes;
    if (act > (double)GRAPH_MAX_ACT_BYTES) {
        graph_free(g);
        return err_set(e, -EINVAL, "%s with a micro-batch of %d x %d tokens keeps %.3g PiB of "
                       "activations when nothing is recomputed, over the limit of 1 PiB; lower "
                       "--batch or --seq, or split it into more --micro-batches", cfg->name,
                       batch, seq, act / 0x1p50);
    }
    return 0;
}

void graph_free(Graph *g)
{
    free(g->ops);
    g->ops = NULL;
    g->n_ops = 0;
}

/* The embedding comes first, the blocks' ops after it, the head's last. */
int graph_block_op_index(const Graph *g, int b, int op)
{
    assert(b >= 0 && b < g->cfg.n_layer && op >= 0 && op < g->arch->n_ops);
    return 1 + b * g->arch->n_ops + op;
}

int graph_edge_op_index(const Graph *g, EdgeOp e)
{
    assert(e >= EDGE_EMBED && e <= EDGE_LOSS);
    int i = e == EDGE_EMBED ? 0 : g->n_ops - 3 + (int)(e - EDGE_NORM);
    assert(g->ops[i].id == (int)e);
    return i;
}

const Op *graph_block_op(const Graph *g, int b, int op)
{
    return &g->ops[graph_block_op_index(g, b, op)];
}

const Op *graph_edge_op(const Graph *g, EdgeOp e)
{
    return &g->ops[graph_edge_op_index(g, e)];
}

const Op *graph_block_op_of_kind(const Graph *g, OpKind k)
{
    for (int i = 0; i < g->arch->n_ops; i++)
        if (g->arch->ops[i].kind == k)
            return graph_block_op(g, 0, i);
    return NULL;
}

int graph_first_bwd_op(const Graph *g)
{
    for (int i = g->arch->n_ops - 1; i >= 0; i--) {
        const Op *op = graph_block_op(g, 0, i);
        if (op->bwd_flops > 0 || op->bwd_io_bytes > 0)
            return i;
    }
    assert(!"a block without backward work");
    return -1;
}

void graph_totals(const Graph *g, GraphTotals *t)
{
    memset(t, 0, sizeof *t);
    int64_t block_params = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const Op *op = &g->ops[i];
        double flops = op->fwd_flops + op->bwd_flops;
        t->params += op->params;
        t->fwd_flops += op->fwd_flops;
        t->bwd_flops += op->bwd_flops;
        if (op->kind == OP_GEMM)
            t->gemm_flops += flops;
        else if (op->kind == OP_ATTENTION)
            t->attn_flops += flops;
        else
            t->other_flops += flops;
        if (op->block < 0 || op->block >= g->cfg.n_layer)
            t->edge_act_bytes += op->act_bytes;
        else if (op->block == 0)
            t->block_act_bytes += op->act_bytes, block_params += op->params;
    }
    const Op *embed = graph_edge_op(g, EDGE_EMBED), *lm_head = graph_edge_op(g, EDGE_HEAD);
    t->max_block_params = block_params;
    if (embed->params > t->max_block_params)
        t->max_block_params = embed->params;
    if (lm_head->params > t->max_block_params)
        t->max_block_params = lm_head->params;
    t->block_ckpt_bytes = g->tokens * g->cfg.d_model * (int64_t)dtype_bytes(g->cfg.dtype);
    t->act_all_bytes = g->cfg.n_layer * t->block_act_bytes + t->edge_act_bytes;
    t->act_ckpt_bytes = g->cfg.n_layer * t->block_ckpt_bytes + t->edge_act_bytes;
}
