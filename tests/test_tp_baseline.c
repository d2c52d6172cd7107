/* Check suite for costmodel/tp_baseline: the tensor-parallel baseline of fuyou-sim --cost, on a
 * one-block model and a hand-made GPU whose numbers make every term a value worked out by hand
 * below (the GEMM curve is one point, so every GEMM runs at half the peak). */
#include <errno.h>
#include <math.h>

#include "cost.h"
#include "gpt2_arch.h"
#include "tp_baseline.h"
#include "testutil.h"

/* 1 block, h 64, 4 heads, ffn 256, vocab 512: P = 49984 (block: LNs 256, qkv 12480, proj 4160,
 * fc1 16640, fc2 16448) + 33792 (token and position embeddings) + 128 (lnf) = 83904. */
static const ModelConfig cfg = {.name = "tp-test", .n_layer = 1, .d_model = 64, .n_head = 4,
                                .d_ff = 256, .vocab = 512, .max_seq = 16, .tied = true,
                                .dtype = DTYPE_BF16};

/* 100 TFLOPS, every GEMM and the attention at 0.5 of it (5e13 FLOP/s), 1000 GB/s of device
 * memory, no launch gap, NVLink 100 GB/s each way, 1 GiB with no reserve. */
static Hardware test_hw(void)
{
    Hardware hw = {.gpu_bf16_TFLOPS = 100, .gpu_mem_GBps = 1000, .gpu_nvlink_GBps = 100,
                   .gpu_mem_GiB = 1};
    hw.attn.n = 1; /* one number (dim 0): every head size */
    hw.attn.eff[0] = 0.5;
    hw.gemm.n = 1;
    hw.gemm.dim[0] = 1024;
    hw.gemm.eff[0] = 0.5;
    return hw;
}

/* The micro-batch: 2 sequences of 16 tokens, T = 32. */
static Graph test_graph(void)
{
    Graph g;
    Err e;
    ck_assert_msg(graph_init(&g, &cfg, 2, 16, &e) == 0, "%s", e.msg);
    return g;
}

#define ck_assert_close(x, want) ck_assert_double_eq_tol((x), (want), 1e-12 * fabs(want))

/* Megatron-LM's split: qkv, fc1 and the LM head by outputs, proj and fc2 by inputs; FLOPs and
 * bytes by N, whole numbers rounded up */
START_TEST(shard_splits_as_megatron)
{
    Graph g = test_graph();
    Op qkv = tp_baseline_shard(graph_block_op(&g, 0, GPT2_QKV), 2);
    ck_assert_int_eq(qkv.m, 32);
    ck_assert_int_eq(qkv.n, 96); /* 3h / 2 */
    ck_assert_int_eq(qkv.k, 64);
    ck_assert_double_eq(qkv.fwd_flops, 2.0 * 32 * 192 * 64 / 2);
    Op proj = tp_baseline_shard(graph_block_op(&g, 0, GPT2_PROJ), 2);
    ck_assert_int_eq(proj.n, 64);
    ck_assert_int_eq(proj.k, 32);
    Op fc1 = tp_baseline_shard(graph_block_op(&g, 0, GPT2_FC1), 4);
    ck_assert_int_eq(fc1.n, 64);
    ck_assert_int_eq(fc1.k, 64);
    Op fc2 = tp_baseline_shard(graph_block_op(&g, 0, GPT2_FC2), 4);
    ck_assert_int_eq(fc2.n, 64);
    ck_assert_int_eq(fc2.k, 64);
    const Op *head = graph_edge_op(&g, EDGE_HEAD);
    ck_assert_str_eq(head->name, "lm_head");
    Op h3 = tp_baseline_shard(head, 3);
    ck_assert_int_eq(h3.n, 171); /* 512 / 3, rounded up */
    ck_assert_int_eq(h3.m, 32);
    Op attn = tp_baseline_shard(graph_block_op(&g, 0, GPT2_ATTN), 2);
    ck_assert_double_eq(attn.fwd_flops, 4.0 * 2 * 16 * 16 * 64 / 2);
    ck_assert_int_eq(attn.act_bytes, (3 * 4096 + 4096 + 32 * 4 * 4) / 2);
    Op ln = tp_baseline_shard(graph_block_op(&g, 0, GPT2_LN1), 2);
    ck_assert_int_eq(ln.fwd_io_bytes, 4096);
    ck_assert_int_eq(ln.bwd_io_bytes, 20480); /* 32 x 64 x 20 / 2 */
    Op one = tp_baseline_shard(graph_block_op(&g, 0, GPT2_QKV), 1);
    ck_assert_int_eq(one.n, 192);
    ck_assert_double_eq(one.fwd_flops, graph_block_op(&g, 0, GPT2_QKV)->fwd_flops);
    graph_free(&g);
}
END_TEST

/* A ring: each GPU sends 2(N-1)/N of the bytes; one GPU none */
START_TEST(allreduce_ring)
{
    Hardware hw = test_hw();
    ck_assert_close(tp_baseline_allreduce_s(&hw, 8, 1e9), 2.0 * 7 / 8 * 1e9 / 100e9); /* 17.5 ms */
    ck_assert_close(tp_baseline_allreduce_s(&hw, 2, 4096), 4096 / 100e9);
    ck_assert_double_eq(tp_baseline_allreduce_s(&hw, 1, 1e9), 0);
    hw.gpu_nvlink_GBps = 0; /* not needed for one GPU */
    ck_assert_double_eq(tp_baseline_allreduce_s(&hw, 1, 1e9), 0);
}
END_TEST

/* Two GPUs, worked out by hand (T = 32 tokens):
 * GEMMs, 6mnk each forward + backward: qkv 2359296, proj 786432, fc1 3145728, fc2 3145728,
 *   lm_head 6291456 = 15728640 FLOPs, / 2 GPUs / 5e13 = 1.572864e-7 s;
 * attention: F = 4·b·s²·h = 131072; causal forward 0.5 F, backward 0.5·1.25·2F: 1.75 F = 229376,
 *   / 2 / 5e13 = 2.29376e-9 s;
 * memory-bound work, bytes forward + backward (graph.c): embed 12288 + 243712 (20 T h + 6 x
 *   33792 table), ln1 8192 + 40960 (20 T h), res1 12288, ln2 49152, gelu 32768 (its backward in
 *   fc2's), res2 12288, lnf 49152, loss 128; beside the GEMMs proj 12288 (6 T h), fc2 28672
 *   (6 T h + 2 T f), lm_head 462848 (4 x 33792 + 2 T V 2 + 8 V h) = 964736, / 2 / 1e12 =
 *   4.82368e-7 s; compute 6.4194816e-7 s;
 * all-reduce: 4 a block of T·h·2 = 4096 bytes, 2(N-1)/N = 1: 16384 / 1e11 = 1.6384e-7 s;
 * AdamW: 28 B x P / 2 = 1174656 bytes / 1e12 = 1.174656e-6 s;
 * iteration 1.98044416e-6 s. Memory: 16 x 83904 / 2 = 671232 B of state, 75264 / 2 = 37632 of
 * activations a GPU. */
START_TEST(predict_by_hand)
{
    Graph g = test_graph();
    Hardware hw = test_hw();
    GraphTotals gt;
    graph_totals(&g, &gt);
    ck_assert_int_eq(gt.params, 83904);
    ck_assert_int_eq(gt.act_all_bytes, 75264);
    TpBaseline tb;
    tp_baseline_predict(&g, 1, &hw, 2, &tb);
    ck_assert_int_eq(tb.gpus, 2);
    ck_assert(tb.even);
    ck_assert_close(tb.compute_s, 6.4194816e-7);
    ck_assert_close(tb.allreduce_s, 1.6384e-7);
    ck_assert_close(tb.adam_s, 1.174656e-6);
    ck_assert_close(tb.iter_s, 1.98044416e-6);
    ck_assert_double_eq(tb.tokens, 32);
    ck_assert_double_eq(tb.model_flops, 6.0 * 83904 * 32);
    ck_assert_double_eq(tb.state_bytes, 671232);
    ck_assert_double_eq(tb.act_bytes, 37632);
    ck_assert_double_eq(tb.capacity_bytes, 0x1p30);
    ck_assert(tb.fits);
    ck_assert_double_eq(tb.min_gpus, 1);

    /* two micro-batches: compute and all-reduces twice, the optimizer once */
    tp_baseline_predict(&g, 2, &hw, 2, &tb);
    ck_assert_close(tb.iter_s, 2 * (6.4194816e-7 + 1.6384e-7) + 1.174656e-6);
    ck_assert_double_eq(tb.tokens, 64);
    /* a launch gap of 1 us: 14 forward kernels, 9 backward tasks that launch (the GELU's runs
     * in fc2's; res1, res2, the fused head and the loss have no backward) of which the 4 block
     * GEMMs launch two kernels each, and the AdamW kernel */
    hw.gpu_launch_us = 1;
    tp_baseline_predict(&g, 1, &hw, 2, &tb);
    ck_assert_close(tb.compute_s, 6.4194816e-7 + 27e-6);
    ck_assert_close(tb.adam_s, 1.174656e-6 + 1e-6);
    graph_free(&g);
}
END_TEST

/* One GPU: no all-reduce, the whole work; NVLink not needed */
START_TEST(one_gpu)
{
    Graph g = test_graph();
    Hardware hw = test_hw();
    hw.gpu_nvlink_GBps = 0;
    TpBaseline tb;
    tp_baseline_predict(&g, 1, &hw, 1, &tb);
    ck_assert_double_eq(tb.allreduce_s, 0);
    ck_assert_close(tb.compute_s, 2 * 6.4194816e-7);
    ck_assert_close(tb.adam_s, 2 * 1.174656e-6);
    ck_assert_double_eq(tb.state_bytes, 16.0 * 83904);
    graph_free(&g);
}
END_TEST

/* Memory: 16 x 83904 + 75264 = 1417728 bytes in all; on 0.0005 GiB (536870.912 B) GPUs they
 * do not fit two, and three GPUs' memory would hold them. 3 does not divide 4 heads. */
START_TEST(fit_and_evenness)
{
    Graph g = test_graph();
    Hardware hw = test_hw();
    hw.gpu_mem_GiB = 0.0005;
    TpBaseline tb;
    tp_baseline_predict(&g, 1, &hw, 2, &tb);
    ck_assert(!tb.fits);
    ck_assert_double_eq(tb.min_gpus, 3);
    ck_assert(tb.even);
    tp_baseline_predict(&g, 1, &hw, 3, &tb);
    ck_assert(tb.fits); /* 1417728 / 3 = 472576 */
    ck_assert(!tb.even);
    hw.gpu_reserved_GiB = 0.0001; /* the reserve counts: 429496.7296 B left */
    tp_baseline_predict(&g, 1, &hw, 3, &tb);
    ck_assert(!tb.fits);
    ck_assert_double_eq(tb.min_gpus, 4);
    graph_free(&g);
}
END_TEST

/* The GEMM curve is read at the split shape: with efficiency growing with size, more GPUs make
 * each GEMM smaller and slower per FLOP */
START_TEST(split_shapes_lower_efficiency)
{
    Graph g;
    Hardware hw;
    Err e;
    ck_assert_msg(graph_init(&g, model_preset_find("gpt3-13b"), 1, 1024, &e) == 0, "%s", e.msg);
    ck_assert_msg(hw_load("a100-80g.ini", NULL, 0, &hw, &e) == 0, "%s", e.msg);
    const Op *fc1 = graph_block_op(&g, 0, GPT2_FC1); /* 1024 x 20480 x 5120; split: n = 2560 */
    Op s1 = tp_baseline_shard(fc1, 1), s8 = tp_baseline_shard(fc1, 8);
    double t1 = cost_gpu_op_s(&hw, &s1, TASK_FWD), t8 = cost_gpu_op_s(&hw, &s8, TASK_FWD);
    ck_assert_double_gt(t8, t1 / 8); /* an eighth of the work, at a lower efficiency */
    ck_assert_double_lt(hw_gemm_efficiency(&hw, s8.m, s8.n, s8.k),
                        hw_gemm_efficiency(&hw, s1.m, s1.n, s1.k));
    hw_free(&hw);
    graph_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tp_baseline");
    TCase *tc = tcase_create("tp_baseline");
    tcase_add_test(tc, shard_splits_as_megatron);
    tcase_add_test(tc, allreduce_ring);
    tcase_add_test(tc, predict_by_hand);
    tcase_add_test(tc, one_gpu);
    tcase_add_test(tc, fit_and_evenness);
    tcase_add_test(tc, split_shapes_lower_efficiency);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
