/* Check suite for model/footprint: hand-computed tables and the automatic placement. */
#include <errno.h>
#include <math.h>

#include "footprint.h"
#include "gpt2_arch.h"
#include "layout.h"
#include "testutil.h"

static const ModelConfig tiny = {.name = "tiny", .n_layer = 4, .d_model = 64, .n_head = 4,
                                 .d_ff = 256, .vocab = 128, .max_seq = 32, .tied = true,
                                 .dtype = DTYPE_BF16};

/* A lane with round sizes, so every term below is checkable by hand: tensor x takes
 * 1 KiB x (x + 1) (a multiple of 256: the GPU's alignment adds nothing), the lane's own
 * working set 7777 bytes, 16-bit weights and gradients. */
static LaneSizes round_lane(void)
{
    LaneSizes l = {.own = 7777, .weight_bytes = 2, .grad_bytes = 2};
    for (int x = 0; x < GPT2_TENSORS; x++)
        l.tensor[x] = 1024 * (x + 1);
    return l;
}

static double page(double n)
{
    return ceil(n / 4096) * 4096;
}

/* What every plan puts on the GPU for activations beside what it keeps there: one block's
 * scratch (all eleven tensors: 1 KiB x 66), the last block's output (tensor 9) and the lane's
 * own working set. */
enum { SCRATCH = 1024 * 66, LAST_OUT = 1024 * 10, OWN = 7777 };

START_TEST(all_on_gpu)
{
    Graph g;
    Plan p;
    Err e;
    ck_assert_int_eq(graph_init(&g, &tiny, 2, 16, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    GraphTotals t;
    graph_totals(&g, &t);
    p.weights = p.optim = TIER_GPU;
    plan_set_all_act(&p, ACT_GPU, ACT_GPU);
    LaneSizes lane = round_lane();
    Footprint f;
    footprint_compute_lane(&f, &tiny, &p, &lane);
    double P = (double)t.params;
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_GPU], 2 * P);
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_GPU], 4 * P);
    ck_assert_double_eq(f.bytes[MEM_ADAM_V][TIER_GPU], 4 * P);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_GPU], 2 * P);
    /* each block keeps its input (tensor 10) and the outputs of ops 0 1 2 4 5 6 7 (schedule.h):
     * 1 KiB x (11 + 1 + 2 + 3 + 5 + 6 + 7 + 8); nothing swapped, so no ring slots */
    ck_assert_double_eq(f.bytes[MEM_ACTIVATIONS][TIER_GPU],
                        4 * 1024 * 43 + SCRATCH + LAST_OUT + OWN);
    /* in CPU memory only the staging the state passes through on its way in and out */
    ck_assert_double_gt(footprint_gpu_stage_bytes(&tiny, &p, 2), 0);
    ck_assert_double_eq(footprint_tier_total(&f, TIER_CPU),
                        footprint_gpu_stage_bytes(&tiny, &p, 2));
    ck_assert_double_eq(f.bytes[MEM_STAGING][TIER_CPU], footprint_gpu_stage_bytes(&tiny, &p, 2));
    ck_assert_double_eq(footprint_tier_total(&f, TIER_SSD), 0);
    plan_free(&p);
    graph_free(&g);
}
END_TEST

START_TEST(out_of_core)
{
    Graph g;
    Plan p;
    Err e;
    ck_assert_int_eq(graph_init(&g, &tiny, 2, 16, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    GraphTotals t;
    graph_totals(&g, &t);
    p.weights = p.optim = TIER_SSD;
    p.weight_buffers = 3;
    p.pinned_buffers = 3;
    p.subgroup_blocks = 2;
    p.tail_blocks = 2;
    plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
    LaneSizes lane = round_lane();
    Footprint f;
    footprint_compute_lane(&f, &tiny, &p, &lane);
    double P = (double)t.params;
    double block = (double)model_block_params(&tiny), edge = (double)model_embed_params(&tiny);
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_SSD], 2 * P);
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_GPU], 3 * block * 2 + edge * 2);
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_SSD] + f.bytes[MEM_ADAM_M][TIER_SSD] +
                            f.bytes[MEM_ADAM_V][TIER_SSD], 12 * P);
    /* staging: 3 pinned blocks and the edges' weights; 3 state slots of the largest sub-group,
     * the tail (2 blocks and the edges), its states then its new weights, each on its pages */
    double group = 2 * block + edge;
    double slot = page(12 * group) + 2 * page(2 * block) + page(2 * edge);
    ck_assert_double_eq(f.bytes[MEM_STAGING][TIER_CPU],
                        3 * page(2 * block) + page(2 * edge) + 3 * slot);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_GPU], 2 * block * 2 + edge * 2);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_CPU], 4 * page(group * 2));
    /* each block's checkpoint (tensor 10, 11 KiB) on its own pages in CPU memory; on the GPU
     * a ring of two slots of it */
    ck_assert_double_eq(f.bytes[MEM_ACTIVATIONS][TIER_CPU], 4 * page(11 * 1024));
    ck_assert_double_eq(f.bytes[MEM_ACTIVATIONS][TIER_GPU],
                        2 * 11 * 1024 + SCRATCH + LAST_OUT + OWN);
    /* the last sub-group in update order (the tail) keeps its states in CPU memory */
    p.optim_cpu_groups = 1;
    ck_assert_int_eq(plan_validate(&p, &e), 0);
    ck_assert_int_eq(plan_optim_tier(&p, plan_subgroup_count(&p) - 1), TIER_CPU);
    ck_assert_int_eq(plan_optim_tier(&p, 0), TIER_SSD);
    footprint_compute_lane(&f, &tiny, &p, &lane);
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_CPU], page(4 * group));
    ck_assert_double_eq(f.bytes[MEM_ADAM_V][TIER_SSD], 4 * (P - group));
    p.optim_cpu_groups = plan_subgroup_count(&p) + 1;
    ck_assert_int_eq(plan_validate(&p, &e), -EINVAL);
    p.optim = TIER_CPU;
    p.optim_cpu_groups = 1;
    ck_assert_int_eq(plan_validate(&p, &e), -EINVAL);
    tu_assert_contains(e.msg, "on SSD");
    plan_free(&p);
    graph_free(&g);
}
END_TEST

/* zero-infinity as DeepSpeed allocates it: each state slot holds a sub-group's fp32 gradient
 * beside its master, m and v (the optimizer swapper's four buffers), the whole model's 16-bit
 * gradients in CPU memory (its flat buffer; micro-batches add into it on the GPU), the fp32
 * gradients on SSD with the states, and the pinned max_in_cpu buffer of weights. */
START_TEST(zero_infinity)
{
    Graph g;
    Plan p;
    Err e;
    ck_assert_int_eq(graph_init(&g, &tiny, 2, 16, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_ZERO_INFINITY, &e), 0);
    GraphTotals t;
    graph_totals(&g, &t);
    p.weights = p.optim = TIER_SSD;
    p.weight_buffers = p.pinned_buffers = 3;
    p.subgroup_blocks = p.tail_blocks = 2;
    p.state_buffers = 1;
    plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
    LaneSizes lane = round_lane();
    Footprint f;
    footprint_compute_lane(&f, &tiny, &p, &lane);
    double P = (double)t.params;
    double block = (double)model_block_params(&tiny), edge = (double)model_embed_params(&tiny);
    double group = 2 * block + edge; /* the largest sub-group: the tail */
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_SSD], 2 * P);
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_CPU], page(2 * P)); /* P < max_in_cpu */
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_SSD], 4 * P);
    /* one slot: 16 B of the tail's parameters, then its new weights block by block */
    double slot = page(16 * group) + 2 * page(2 * block) + page(2 * edge);
    ck_assert_double_eq(f.bytes[MEM_STAGING][TIER_CPU],
                        3 * page(2 * block) + page(2 * edge) + slot);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_GPU], 2 * block * 2 + edge * 2);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_CPU], page(2 * P));
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_SSD], 4 * P);
    /* micro-batches add into the same 16-bit buffer: no fp32 sum, no landing buffer */
    p.n_micro = 2;
    footprint_compute_lane(&f, &tiny, &p, &lane);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_CPU], page(2 * P));
    ck_assert_double_eq(f.bytes[MEM_STAGING][TIER_CPU],
                        3 * page(2 * block) + page(2 * edge) + slot);
    /* the tail's states in CPU memory: its fp32 gradients there too, the rest on SSD */
    p.n_micro = 1;
    p.optim_cpu_groups = 1;
    footprint_compute_lane(&f, &tiny, &p, &lane);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_CPU], page(2 * P) + page(4 * group));
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_SSD], 4 * (P - group));
    ck_assert_double_eq(f.bytes[MEM_ADAM_M][TIER_CPU], page(4 * group));
    /* weights in CPU memory: no max_in_cpu buffer beside them */
    p.optim_cpu_groups = 0;
    p.weights = TIER_CPU;
    footprint_compute_lane(&f, &tiny, &p, &lane);
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_CPU], page(2 * P));
    plan_free(&p);
    graph_free(&g);
}
END_TEST

/* The CUDA lane's sizes: its block tensors are the graph's kept activations (bf16, with the
 * norms' statistics and attention's log-sum-exp) plus the three the graph does not keep; its
 * own working set holds one chunk of logits, never the micro-batch's. */
START_TEST(cuda_lane)
{
    Graph g;
    Err e;
    const ModelConfig *c = model_preset_find("gpt2-124m");
    ck_assert_int_eq(graph_init(&g, c, 8, 1024, &e), 0);
    GraphTotals t;
    graph_totals(&g, &t);
    LaneSizes lane;
    footprint_cuda_lane(&g, &lane);
    double kept = 0, N = 8 * 1024, C = c->d_model;
    for (int x = 0; x < GPT2_TENSORS; x++)
        kept += (double)lane.tensor[x];
    /* the graph's 32 N C bytes and statistics, plus proj's, fc2's and res2's outputs */
    ck_assert_double_eq(kept, (double)t.block_act_bytes + 3 * N * C * 2);
    ck_assert_int_eq(lane.weight_bytes, 2);
    /* a model in fp32: its 16-bit buffers are 32-bit */
    ModelConfig c32 = *c;
    c32.dtype = DTYPE_FP32;
    Graph g32;
    ck_assert_int_eq(graph_init(&g32, &c32, 8, 1024, &e), 0);
    LaneSizes lane32;
    footprint_cuda_lane(&g32, &lane32);
    ck_assert_int_eq(lane32.weight_bytes, 4);
    ck_assert_int_eq(lane32.tensor[6], 2 * lane.tensor[6]); /* fc1's output */
    ck_assert_int_gt(lane32.own, lane.own);
    graph_free(&g32);
    Graph big;
    ck_assert_int_eq(graph_init(&big, c, 32, 1024, &e), 0);
    LaneSizes lane4;
    footprint_cuda_lane(&big, &lane4);
    /* four times the tokens: the activation-sized part grows four times, the logits do not */
    double per_token = (double)(lane4.own - lane.own) / (3 * N);
    ck_assert_double_lt(per_token, 60 * C);
    graph_free(&big);
    graph_free(&g);
}
END_TEST

START_TEST(auto_placement)
{
    Hardware hw;
    Err e;
    ck_assert_int_eq(hw_load("4090.ini", NULL, 0, &hw, &e), 0);
    Graph g;
    Plan p;
    /* GPT-2 124M at batch 1: everything fits a 24 GB card */
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt2-124m"), 1, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    footprint_auto_place(&p, &g, &hw, NULL);
    ck_assert_int_eq(p.weights, TIER_GPU);
    ck_assert_int_eq(plan_act(&p, 3, 6), ACT_GPU);
    plan_free(&p);
    graph_free(&g);
    /* GPT-3 175B: 2.1 TB of states go to SSD, 349 GB of bf16 weights fit in 752 GiB of RAM;
     * on the 24 GB card its whole-block buffers do not (a block's weights are 3.4 GiB, its
     * fp32 gradient sum 6.8 GiB): the GPU tier is short */
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt3-175b"), 8, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    footprint_auto_place(&p, &g, &hw, NULL);
    ck_assert_int_eq(p.optim, TIER_SSD);
    ck_assert_int_eq(p.weights, TIER_CPU);
    ck_assert_int_eq(plan_act(&p, 5, 6), ACT_RECOMPUTE);
    Footprint f;
    footprint_compute(&f, &g, &p);
    ck_assert_uint_eq(footprint_overflow(&f, &hw), 1u << TIER_GPU);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
    /* with an 80 GiB card it fits */
    const char *big[] = {"gpu.mem_GiB=80"};
    ck_assert_int_eq(hw_load("4090.ini", big, 1, &hw, &e), 0);
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt3-175b"), 8, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    footprint_auto_place(&p, &g, &hw, NULL);
    footprint_compute(&f, &g, &p);
    ck_assert_uint_eq(footprint_overflow(&f, &hw), 0);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
    /* the same on one 1 TB SSD cannot fit: the SSD tier overflows */
    const char *sets[] = {"ssd.count=1", "ssd.capacity_GB=1000", "gpu.mem_GiB=80"};
    ck_assert_int_eq(hw_load("4090.ini", sets, 3, &hw, &e), 0);
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt3-175b"), 8, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    footprint_auto_place(&p, &g, &hw, NULL);
    footprint_compute(&f, &g, &p);
    ck_assert_uint_eq(footprint_overflow(&f, &hw), 1u << TIER_SSD);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
}
END_TEST

/* Sub-groups updated on the GPU: the last two (the tail, block 0 with the edges, and block 1)
 * keep their states, weights and gradients there; block 2's states in CPU memory, block 3's
 * on SSD; the rings carry blocks 2 and 3. */
START_TEST(gpu_groups)
{
    Graph g;
    Plan p;
    Err e;
    ck_assert_int_eq(graph_init(&g, &tiny, 2, 16, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    p.weights = TIER_CPU;
    p.optim = TIER_SSD;
    p.weight_buffers = 3;
    p.optim_gpu_groups = 2;
    p.optim_cpu_groups = 1;
    plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
    ck_assert_int_eq(plan_validate(&p, &e), 0);
    ck_assert_int_eq(plan_optim_tier(&p, 3), TIER_GPU);
    ck_assert_int_eq(plan_optim_tier(&p, 2), TIER_GPU);
    ck_assert_int_eq(plan_optim_tier(&p, 1), TIER_CPU);
    ck_assert_int_eq(plan_optim_tier(&p, 0), TIER_SSD);
    ck_assert_int_eq(plan_gpu_group_blocks(&p), 2);
    ck_assert(plan_edges_on_gpu(&p) && plan_block_on_gpu(&p, 1) && !plan_block_on_gpu(&p, 2));
    LaneSizes lane = round_lane();
    Footprint f;
    footprint_compute_lane(&f, &tiny, &p, &lane);
    double block = (double)model_block_params(&tiny), edge = (double)model_embed_params(&tiny);
    double gpu = edge + 2 * block;
    ck_assert_double_eq((double)layout_gpu_state_params(&tiny, &p), gpu);
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_GPU], 3 * block * 2 + gpu * 2);
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_CPU], page(2 * block * 2));
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_GPU], 4 * gpu);
    ck_assert_double_eq(f.bytes[MEM_ADAM_V][TIER_GPU], 4 * gpu);
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_CPU], page(4 * block));
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_SSD], 4 * block);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_GPU], 2 * block * 2 + gpu * 2);
    /* the host's gradients: the largest sub-group updated off the GPU, one block */
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_CPU], p.host_grad_groups * page(2 * block));
    /* staging: the state slots of block 3's states, and the GPU state's way in and out */
    ck_assert_double_eq(f.bytes[MEM_STAGING][TIER_CPU],
                        p.state_buffers * page(12 * block) + page(gpu * (12 + 2)));
    /* every sub-group there: no rings, nothing of the state off the GPU */
    p.optim_cpu_groups = 0;
    p.optim_gpu_groups = plan_subgroup_count(&p);
    footprint_compute_lane(&f, &tiny, &p, &lane);
    double P = edge + 4 * block;
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_GPU], 2 * P);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_GPU], 2 * P);
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_CPU] + f.bytes[MEM_MASTER][TIER_CPU] +
                            f.bytes[MEM_MASTER][TIER_SSD], 0);
    /* what the plan may not ask */
    p.optim_gpu_groups = plan_subgroup_count(&p) + 1;
    ck_assert_int_eq(plan_validate(&p, &e), -EINVAL);
    p.optim_gpu_groups = 3;
    p.optim_cpu_groups = 2;
    ck_assert_int_eq(plan_validate(&p, &e), -EINVAL);
    tu_assert_contains(e.msg, "3 sub-groups on the GPU and 2 in CPU memory, of 4");
    p.optim_cpu_groups = 0;
    p.n_micro = 2;
    ck_assert_int_eq(plan_validate(&p, &e), -EINVAL);
    tu_assert_contains(e.msg, "one micro-batch");
    p.n_micro = 1;
    p.optim = TIER_GPU;
    ck_assert_int_eq(plan_validate(&p, &e), -EINVAL);
    tu_assert_contains(e.msg, "optim-gpu-groups 0");
    plan_free(&p);
    graph_free(&g);
}
END_TEST

/* The most sub-groups a budget holds on the GPU: that many fit, one more does not. */
START_TEST(max_gpu_groups)
{
    Hardware hw;
    Err e;
    const char *sets[] = {"gpu.mem_GiB=24", "memory.gpu_reserved_GiB=0"};
    ck_assert_int_eq(hw_load("h200.ini", sets, 2, &hw, &e), 0);
    Graph g;
    Plan p;
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt3-2.7b"), 8, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    footprint_auto_place(&p, &g, &hw, NULL);
    ck_assert_int_eq(p.optim_gpu_groups, 0);
    int most = footprint_max_gpu_groups(&p, &g, &hw);
    ck_assert_int_gt(most, 0);
    ck_assert_int_lt(most, plan_subgroup_count(&p));
    ck_assert_int_eq(p.optim_gpu_groups, 0); /* p as it was */
    Footprint f;
    footprint_set_gpu_groups(&p, &g, &hw, most);
    footprint_compute(&f, &g, &p);
    ck_assert_uint_eq(footprint_overflow(&f, &hw), 0);
    p.optim_gpu_groups = most + 1;
    footprint_compute(&f, &g, &p);
    ck_assert_uint_eq(footprint_overflow(&f, &hw), 1u << TIER_GPU);
    /* none with micro-batches, where their gradients would be summed */
    p.n_micro = 2;
    ck_assert_int_eq(footprint_max_gpu_groups(&p, &g, &hw), 0);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
}
END_TEST

START_TEST(names)
{
    Tier t;
    ck_assert_int_eq(tier_parse("SSD", &t), 0);
    ck_assert_int_eq(t, TIER_SSD);
    ck_assert_int_lt(tier_parse("disk", &t), 0);
    ck_assert_str_eq(mem_tag_name(MEM_ADAM_M), "adam_m");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("footprint");
    TCase *tc = tcase_create("footprint");
    tcase_add_test(tc, all_on_gpu);
    tcase_add_test(tc, out_of_core);
    tcase_add_test(tc, zero_infinity);
    tcase_add_test(tc, cuda_lane);
    tcase_add_test(tc, auto_placement);
    tcase_add_test(tc, gpu_groups);
    tcase_add_test(tc, max_gpu_groups);
    tcase_add_test(tc, names);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
