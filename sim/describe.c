/* describe: report printing for the layer graph and the footprint; see describe.h. */
#include "describe.h"

#include "units.h"

static void print_op(FILE *out, const Op *op, const char *prefix, int repeat)
{
    char shape[48] = "", params[24], fwd[24], bwd[24], act[24], outb[24];
    if (op->kind == OP_GEMM)
        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)op->m, (long long)op->n,
                 (long long)op->k);
    char name[32];
    snprintf(name, sizeof name, "%s%s", prefix, op->name);
    fprintf(out, "  %-12s %-10s %-20s %10s %12s %12s %11s %11s%s\n", name,
            op_kind_name(op->kind), shape, units_count(params, sizeof params, op->params),
            units_flops(fwd, sizeof fwd, op->fwd_flops), units_flops(bwd, sizeof bwd, op->bwd_flops),
            units_bytes(act, sizeof act, op->act_bytes), units_bytes(outb, sizeof outb, op->out_bytes),
            repeat > 1 ? "  (each block)" : "");
}

void describe_graph(FILE *out, const Graph *g)
{
    const ModelConfig *c = &g->cfg;
    GraphTotals t;
    graph_totals(g, &t);
    char b1[24], b2[24], b3[24], b4[24], b5[24];
    char kv[32] = "";
    if (model_kv_heads(c) != c->n_head)
        snprintf(kv, sizeof kv, " (%d kv heads)", model_kv_heads(c));
    fprintf(out, "model %s: %s block, %d layers, hidden %d, %d heads of %lld%s, ffn %d, vocab %d, "
            "max seq %d, %s embeddings%s, %s\n", c->name, g->arch->name, c->n_layer, c->d_model,
            c->n_head, (long long)model_head_dim(c), kv, c->d_ff, c->vocab, c->max_seq,
            c->tied ? "tied" : "untied", c->qkv_bias ? ", q/k/v biases" : "",
            dtype_name(c->dtype));
    fprintf(out, "parameters %s (%lld): %s per block, %s outside the blocks\n",
            units_count(b1, sizeof b1, (double)t.params), (long long)t.params,
            units_count(b2, sizeof b2, (double)model_block_params(c)),
            units_count(b3, sizeof b3, (double)model_embed_params(c)));
    fprintf(out, "micro-batch %d x sequence %d = %lld tokens\n\n", g->batch, g->seq,
            (long long)g->tokens);

    fprintf(out, "  %-12s %-10s %-20s %10s %12s %12s %11s %11s\n", "op", "kind",
            "gemm m x n x k", "params", "fwd", "bwd", "act kept", "output");
    print_op(out, graph_edge_op(g, EDGE_EMBED), "", 1);
    for (int i = 0; i < g->arch->n_ops; i++)
        print_op(out, graph_block_op(g, 0, i), "b*.", c->n_layer);
    static const EdgeOp head[] = {EDGE_NORM, EDGE_HEAD, EDGE_LOSS};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        print_op(out, graph_edge_op(g, head[i]), "", 1);
    const Op *lm = graph_edge_op(g, EDGE_HEAD);
    fprintf(out, "  lm_head: over chunks of at most %lld tokens (its m), forward and backward "
            "fused in one\n  task (fwd counts both, bwd 0), output one chunk's logits%s\n",
            (long long)lm->m, c->tied ? "; tied: its parameters are embed's" : "");

    double six_pt = 6.0 * (double)t.params * (double)g->tokens;
    double no_attn = t.gemm_flops + t.other_flops;
    fprintf(out, "\nFLOPs per micro-batch (forward + backward, no recomputation):\n");
    fprintf(out, "  forward %s, backward %s, total %s\n", units_flops(b1, sizeof b1, t.fwd_flops),
            units_flops(b2, sizeof b2, t.bwd_flops),
            units_flops(b3, sizeof b3, t.fwd_flops + t.bwd_flops));
    fprintf(out, "  GEMM %s + other %s = %s; 6·P·tokens = %s (%+.2f%%)\n",
            units_flops(b1, sizeof b1, t.gemm_flops), units_flops(b2, sizeof b2, t.other_flops),
            units_flops(b3, sizeof b3, no_attn), units_flops(b4, sizeof b4, six_pt),
            100.0 * (no_attn / six_pt - 1));
    fprintf(out, "  attention term (full s² convention) %s: +%.2f%% over 6·P·tokens\n",
            units_flops(b1, sizeof b1, t.attn_flops), 100.0 * t.attn_flops / six_pt);
    fprintf(out, "activations kept for backward: %s per block, %s at the edges; "
            "all kept %s, block checkpoints only %s (%s each)\n",
            units_bytes(b1, sizeof b1, (double)t.block_act_bytes),
            units_bytes(b2, sizeof b2, (double)t.edge_act_bytes),
            units_bytes(b3, sizeof b3, (double)t.act_all_bytes),
            units_bytes(b4, sizeof b4, (double)t.act_ckpt_bytes),
            units_bytes(b5, sizeof b5, (double)t.block_ckpt_bytes));
}

int describe_footprint(FILE *out, const Graph *g, const Hardware *hw, const Plan *p)
{
    Footprint f;
    footprint_compute(&f, g, p);
    char b[TIER_COUNT][24], summary[512];
    fprintf(out, "\nmemory footprint on %s (%s):\n", hw->source,
            plan_summary(p, g, summary, sizeof summary));
    fprintf(out, "  %-12s %12s %12s %12s\n", "", "gpu", "cpu", "ssd");
    for (int m = 0; m < MEM_TAG_COUNT; m++) {
        for (int t = 0; t < TIER_COUNT; t++)
            units_bytes(b[t], sizeof b[t], f.bytes[m][t]);
        fprintf(out, "  %-12s %12s %12s %12s\n", mem_tag_name(m), b[0], b[1], b[2]);
    }
    for (int t = 0; t < TIER_COUNT; t++)
        units_bytes(b[t], sizeof b[t], footprint_tier_total(&f, t));
    fprintf(out, "  %-12s %12s %12s %12s\n", "total", b[0], b[1], b[2]);
    for (int t = 0; t < TIER_COUNT; t++)
        units_bytes(b[t], sizeof b[t], footprint_capacity(hw, t));
    fprintf(out, "  %-12s %12s %12s %12s\n", "capacity", b[0], b[1], b[2]);
    int over = 0;
    for (int t = 0; t < TIER_COUNT; t++) {
        double excess = footprint_tier_total(&f, t) - footprint_capacity(hw, t);
        if (excess > 0) {
            char e[24];
            fprintf(out, "  over capacity: %s by %s\n", tier_name(t),
                    units_bytes(e, sizeof e, excess));
            over++;
        }
    }
    return over;
}
