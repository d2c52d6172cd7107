/* Check suite for model/footprint: hand-computed tables and the automatic placement. */
#include <errno.h>
#include "footprint.h"
#include "testutil.h"

static const ModelConfig tiny = {.name = "tiny", .n_layer = 4, .d_model = 64, .n_head = 4,
                                 .d_ff = 256, .vocab = 128, .max_seq = 32, .tied = true,
                                 .dtype = DTYPE_BF16};

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
    Footprint f;
    footprint_compute(&f, &g, &p);
    double P = (double)t.params;
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_GPU], 2 * P);
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_GPU], 4 * P);
    ck_assert_double_eq(f.bytes[MEM_ADAM_V][TIER_GPU], 4 * P);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_GPU], 2 * P);
    /* all activations + two gradient buffers of the largest op output (fc1/gelu: T x 4h) */
    ck_assert_double_eq(f.bytes[MEM_ACTIVATIONS][TIER_GPU], t.act_all_bytes + 2.0 * 32 * 256 * 2);
    ck_assert_double_eq(footprint_tier_total(&f, TIER_CPU), 0);
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
    Footprint f;
    footprint_compute(&f, &g, &p);
    double P = (double)t.params;
    double block = (double)model_block_params(&tiny), edge = (double)model_embed_params(&tiny);
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_SSD], 2 * P);
    ck_assert_double_eq(f.bytes[MEM_WEIGHTS][TIER_GPU], 3 * block * 2 + edge * 2);
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_SSD] + f.bytes[MEM_ADAM_M][TIER_SSD] +
                            f.bytes[MEM_ADAM_V][TIER_SSD], 12 * P);
    /* the largest sub-group is the tail: 2 blocks and the embedding; 3 state buffers of it */
    double group = 2 * block + edge;
    ck_assert_double_eq(f.bytes[MEM_STAGING][TIER_CPU], 3 * block * 2 + 3 * group * 12);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_GPU], 2 * block * 2);
    ck_assert_double_eq(f.bytes[MEM_GRADS][TIER_CPU], 4 * group * 2 < P * 2 ? 4 * group * 2
                                                                                : P * 2);
    double ckpt_op = (double)graph_block_op(&g, 0, 0)->act_bytes; /* input + LN stats */
    ck_assert_double_eq(f.bytes[MEM_ACTIVATIONS][TIER_CPU], 4 * ckpt_op);
    double recomputed = (double)t.block_act_bytes - ckpt_op;
    ck_assert_double_eq(f.bytes[MEM_ACTIVATIONS][TIER_GPU],
                        recomputed + 2 * ckpt_op + t.edge_act_bytes + 2.0 * 32 * 256 * 2);
    /* the last sub-group in update order (the tail) keeps its states in CPU memory */
    p.optim_cpu_groups = 1;
    ck_assert_int_eq(plan_validate(&p, &e), 0);
    ck_assert_int_eq(plan_optim_tier(&p, plan_subgroup_count(&p) - 1), TIER_CPU);
    ck_assert_int_eq(plan_optim_tier(&p, 0), TIER_SSD);
    footprint_compute(&f, &g, &p);
    ck_assert_double_eq(f.bytes[MEM_MASTER][TIER_CPU], 4 * group);
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
    footprint_auto_place(&p, &g, &hw);
    ck_assert_int_eq(p.weights, TIER_GPU);
    ck_assert_int_eq(plan_act(&p, 3, 6), ACT_GPU);
    plan_free(&p);
    graph_free(&g);
    /* GPT-3 175B: 2.1 TB of states go to SSD, 349 GB of bf16 weights fit in 752 GiB of RAM */
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt3-175b"), 8, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    footprint_auto_place(&p, &g, &hw);
    ck_assert_int_eq(p.optim, TIER_SSD);
    ck_assert_int_eq(p.weights, TIER_CPU);
    ck_assert_int_eq(plan_act(&p, 5, 6), ACT_RECOMPUTE);
    Footprint f;
    footprint_compute(&f, &g, &p);
    ck_assert_uint_eq(footprint_overflow(&f, &hw), 0);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
    /* the same on one 1 TB SSD cannot fit: the SSD tier overflows */
    const char *sets[] = {"ssd.count=1", "ssd.capacity_GB=1000"};
    ck_assert_int_eq(hw_load("4090.ini", sets, 2, &hw, &e), 0);
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt3-175b"), 8, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
    footprint_auto_place(&p, &g, &hw);
    footprint_compute(&f, &g, &p);
    ck_assert_uint_eq(footprint_overflow(&f, &hw), 1u << TIER_SSD);
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
    tcase_add_test(tc, auto_placement);
    tcase_add_test(tc, names);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
