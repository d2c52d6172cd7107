/* Check suite for model/graph: op order, FLOP counts against 6·P·tokens, activation bytes. */
#include <errno.h>
#include <math.h>

#include "gpt2_arch.h"
#include "graph.h"
#include "llama_arch.h"
#include "testutil.h"

START_TEST(op_order)
{
    Graph g;
    Err e;
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt2-124m"), 2, 64, &e), 0);
    ck_assert_int_eq(g.n_ops, 1 + 12 * 10 + 3);
    static const char *block[] = {"ln1", "qkv", "attn", "proj", "res1",
                                  "ln2", "fc1", "gelu", "fc2", "res2"};
    ck_assert_ptr_eq(g.arch, &gpt2_arch);
    ck_assert_int_eq(g.arch->n_ops, GPT2_OPS);
    ck_assert_int_eq(GPT2_OPS, sizeof block / sizeof block[0]);
    for (int b = 0; b < 12; b++)
        for (int i = 0; i < GPT2_OPS; i++) {
            const Op *op = graph_block_op(&g, b, i);
            ck_assert_str_eq(op->name, block[i]);
            ck_assert_int_eq(op->id, i);
            ck_assert_int_eq(op->block, b);
            ck_assert_int_eq(graph_block_op_index(&g, b, i), 1 + b * GPT2_OPS + i);
        }
    /* the embedding first, the head's three last */
    static const struct { EdgeOp e; const char *name; int at; } edges[] = {
        {EDGE_EMBED, "embed", 0}, {EDGE_NORM, "lnf", 1 + 12 * 10},
        {EDGE_HEAD, "lm_head", 2 + 12 * 10}, {EDGE_LOSS, "loss", 3 + 12 * 10}};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(graph_edge_op_index(&g, edges[i].e), edges[i].at);
        ck_assert_str_eq(graph_edge_op(&g, edges[i].e)->name, edges[i].name);
        ck_assert_int_eq(g.ops[edges[i].at].id, edges[i].e);
    }
    /* the residual adds pass their gradient through: fc2's backward runs first */
    ck_assert_int_eq(graph_first_bwd_op(&g), GPT2_FC2);
    ck_assert_ptr_eq(graph_block_op_of_kind(&g, OP_ATTENTION), graph_block_op(&g, 0, GPT2_ATTN));
    ck_assert_ptr_null(graph_block_op_of_kind(&g, OP_LOSS));
    const Op *fc1 = graph_block_op(&g, 3, GPT2_FC1);
    ck_assert_int_eq(fc1->m, 128);
    ck_assert_int_eq(fc1->n, 3072);
    ck_assert_int_eq(fc1->k, 768);
    ck_assert_double_eq(fc1->fwd_flops, 2.0 * 128 * 3072 * 768);
    ck_assert_double_eq(fc1->bwd_flops, 2 * fc1->fwd_flops);
    graph_free(&g);
}
END_TEST

START_TEST(params_match_model)
{
    for (int i = 0; i < model_preset_count(); i++) {
        const ModelConfig *c = model_preset_at(i);
        Graph g;
        Err e;
        ck_assert_int_eq(graph_init(&g, c, 1, 16, &e), 0);
        GraphTotals t;
        graph_totals(&g, &t);
        ck_assert_int_eq(t.params, model_param_count(c));
        graph_free(&g);
    }
}
END_TEST

/* GEMM + other FLOPs within 2% of 6·P·tokens for the big GPT-3s; attention exactly
 * 12·L·b·s²·h (4 forward, 8 backward). */
START_TEST(six_p_tokens)
{
    static const char *big[] = {"gpt3-6.7b", "gpt3-13b", "gpt3-175b", "gpt-70b"};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        const ModelConfig *c = model_preset_find(big[i]);
        Graph g;
        Err e;
        ck_assert_int_eq(graph_init(&g, c, 4, 1024, &e), 0);
        GraphTotals t;
        graph_totals(&g, &t);
        double six = 6.0 * (double)t.params * (double)g.tokens;
        double r = (t.gemm_flops + t.other_flops) / six - 1;
        ck_assert_msg(fabs(r) < 0.02, "%s: %.4f", big[i], r);
        double attn = 12.0 * c->n_layer * 4 * 1024.0 * 1024 * c->d_model;
        ck_assert_double_eq_tol(t.attn_flops, attn, attn * 1e-12);
        graph_free(&g);
    }
}
END_TEST

/* The Llama block: GQA's qkv GEMM (h + 2g) d wide, SwiGLU's 2F-wide gate and up, the rotary
 * embedding and RMSNorms among the memory-bound ops; the GEMMs' FLOPs exactly 6 x tokens x
 * the GEMMs' parameters (all but the embedding, unless the head shares it, the norms' gains
 * and Qwen2's biases), the attention's 12 L b s^2 (h d) */
START_TEST(llama_graph)
{
    static const char *names[] = {"llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b",
                                  "llama-3.2-1b"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const ModelConfig *c = model_preset_find(names[i]);
        Graph g;
        Err e;
        ck_assert_int_eq(graph_init(&g, c, 2, 1024, &e), 0);
        ck_assert_ptr_eq(g.arch, &llama_arch);
        int64_t C = c->d_model, h = c->n_head, kv = model_kv_heads(c), d = C / h;
        const Op *qkv = graph_block_op(&g, 5, LLAMA_QKV);
        ck_assert_str_eq(qkv->name, "qkv");
        ck_assert_int_eq(qkv->n, (h + 2 * kv) * d);
        ck_assert_int_eq(qkv->k, C);
        ck_assert_int_eq(graph_block_op(&g, 5, LLAMA_GATE_UP)->n, 2 * c->d_ff);
        ck_assert_int_eq(graph_block_op(&g, 5, LLAMA_DOWN)->k, c->d_ff);
        ck_assert_int_eq(graph_block_op(&g, 5, LLAMA_ATTN)->head_size, d);
        ck_assert_int_eq(graph_block_op(&g, 5, LLAMA_ROPE)->kind, OP_ROPE);
        ck_assert_str_eq(graph_edge_op(&g, EDGE_NORM)->name, "norm");
        ck_assert_int_eq(graph_first_bwd_op(&g), LLAMA_DOWN);
        GraphTotals t;
        graph_totals(&g, &t);
        ck_assert_int_eq(t.params, model_param_count(c));
        int64_t bias = c->qkv_bias ? (h + 2 * kv) * d : 0;
        /* the head's GEMM runs on the embedding's matrix when tied */
        double gemm_params = (double)t.params - (c->tied ? 0 : (double)c->vocab * C) -
                             (double)(2 * C + bias) * c->n_layer - (double)C;
        double want = 6.0 * gemm_params * (double)g.tokens;
        ck_assert_msg(fabs(t.gemm_flops / want - 1) < 1e-12, "%s: %.17g vs %.17g", names[i],
                      t.gemm_flops, want);
        double attn = 12.0 * c->n_layer * 2 * 1024.0 * 1024 * (h * d);
        ck_assert_double_eq_tol(t.attn_flops, attn, attn * 1e-12);
        graph_free(&g);
    }
}
END_TEST

START_TEST(activation_bytes)
{
    const ModelConfig *c = model_preset_find("gpt3-13b");
    Graph g;
    Err e;
    int b = 2, s = 512;
    ck_assert_int_eq(graph_init(&g, c, b, s, &e), 0);
    GraphTotals t;
    graph_totals(&g, &t);
    int64_t T = (int64_t)b * s, h = c->d_model, a = c->n_head;
    /* 16·T·h values of 2 B (32·T·h bytes): ln1 in, qkv in, q k v, attn out, ln2 in, fc1 in
     * (T·h each), gelu in and fc2 in (4·T·h each); plus two LNs' fp32 mean and rstd and the
     * attention's fp32 log-sum-exp per head. */
    int64_t want = (1 + 1 + 3 + 1 + 1 + 1 + 4 + 4) * T * h * 2 + 2 * (2 * T * 4) + T * a * 4;
    ck_assert_int_eq(t.block_act_bytes, want);
    ck_assert_int_eq(t.block_ckpt_bytes, T * h * 2);
    /* edges: token ids, lnf input + stats, the head input's gradient (the head is fused per
     * chunk: no logits are kept), targets */
    ck_assert_int_eq(t.edge_act_bytes, T * 4 + (T * h * 2 + 8 * T) + T * h * 2 + T * 4);
    ck_assert_int_eq(t.act_all_bytes, 40 * want + t.edge_act_bytes);
    graph_free(&g);
}
END_TEST

START_TEST(bad_sizes)
{
    Graph g;
    Err e;
    const ModelConfig *c = model_preset_find("gpt2-124m");
    ck_assert_int_eq(graph_init(&g, c, 0, 16, &e), -EINVAL);
    tu_assert_contains(e.msg, "batch");
    graph_free(&g);
    ck_assert_int_eq(graph_init(&g, c, 1, 2048, &e), -EINVAL);
    tu_assert_contains(e.msg, "1024");
    graph_free(&g);
}
END_TEST

/* Sizes beyond the limits are refused before any size is computed: --batch 2147483647 once
 * printed wrapped (overflowed) sizes and exited 0. */
START_TEST(size_limits)
{
    Graph g;
    Err e;
    const ModelConfig *c = model_preset_find("gpt3-175b");
    ck_assert_int_eq(graph_init(&g, c, 2147483647, 1024, &e), -EINVAL);
    tu_assert_contains(e.msg, "a micro-batch (--batch / --micro-batches) must be 1 to 1048576");
    graph_free(&g);
    /* within each limit, but the micro-batch's activations (none recomputed) exceed 1 PiB */
    ck_assert_int_eq(graph_init(&g, c, 1 << 20, 2048, &e), -EINVAL);
    tu_assert_contains(e.msg, "1 PiB");
    tu_assert_contains(e.msg, "--batch");
    graph_free(&g);
    /* tokens per micro-batch beyond 2^32 */
    ModelConfig wide = *model_preset_find("gpt2-tiny");
    wide.max_seq = 1 << 24;
    ck_assert_int_eq(graph_init(&g, &wide, 1 << 20, 1 << 24, &e), -EINVAL);
    tu_assert_contains(e.msg, "tokens");
    graph_free(&g);
    /* just inside: the largest micro-batch of the largest preset that stays under 1 PiB */
    ck_assert_int_eq(graph_init(&g, c, 4096, 2048, &e), 0);
    GraphTotals t;
    graph_totals(&g, &t);
    ck_assert_int_gt(t.act_all_bytes, 0);
    ck_assert_int_le(t.act_all_bytes, (int64_t)1 << 50);
    graph_free(&g);
}
END_TEST

/* The head is fused per chunk of GRAPH_HEAD_CHUNK tokens: all its FLOPs are forward ones, its
 * GEMM runs at the chunk's shape, and no op keeps or outputs a micro-batch's logits. */
START_TEST(head_fused_per_chunk)
{
    Graph g;
    Err e;
    const ModelConfig *c = model_preset_find("gpt2-124m");
    ck_assert_int_eq(graph_init(&g, c, 8, 1024, &e), 0);
    const Op *head = graph_edge_op(&g, EDGE_HEAD), *loss = graph_edge_op(&g, EDGE_LOSS);
    double T = 8 * 1024, V = c->vocab, h = c->d_model;
    ck_assert_int_eq(head->m, GRAPH_HEAD_CHUNK);
    ck_assert_double_eq(head->fwd_flops, 6 * T * V * h);
    ck_assert_double_eq(head->bwd_flops, 0);
    ck_assert_int_eq(head->out_bytes, (int64_t)GRAPH_HEAD_CHUNK * c->vocab * 2);
    ck_assert_int_eq(loss->act_bytes, 8 * 1024 * 4);
    graph_free(&g);
    /* fewer tokens than a chunk: one chunk of them all */
    ck_assert_int_eq(graph_init(&g, c, 2, 64, &e), 0);
    ck_assert_int_eq(graph_edge_op(&g, EDGE_HEAD)->m, 128);
    graph_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("graph");
    tcase_add_test(tc, op_order);
    tcase_add_test(tc, params_match_model);
    tcase_add_test(tc, six_p_tokens);
    tcase_add_test(tc, llama_graph);
    tcase_add_test(tc, activation_bytes);
    tcase_add_test(tc, head_fused_per_chunk);
    tcase_add_test(tc, bad_sizes);
    tcase_add_test(tc, size_limits);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
