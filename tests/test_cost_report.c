/* Check suite for sim/cost_report: the --cost options, the checks that say which price (or
 * NVLink bandwidth) to give and how, and the block printed for a prediction, whose prices and
 * per-$1000 figures are worked out here. */
#include <errno.h>
#include <math.h>

#include "cost_report.h"
#include "tp_baseline.h"
#include "testutil.h"

/* Args as fuyou-sim would have parsed them: --cost (when on) and the --tp-set overrides. */
static CostReportArgs args(bool on, const char *const *sets, int n)
{
    CostReportArgs a;
    cost_report_args_init(&a);
    if (on)
        ck_assert_int_eq(cost_report_take(&a, COST_OPT_COST, NULL, "test"), 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_SET, sets[i], "test"), 0);
    return a;
}

static const char *const tp_prices[] = {"price.gpu_usd=15000", "price.host_usd=60000"};

static void load(const char *name, const char *const *sets, int n, Hardware *hw)
{
    Err e;
    ck_assert_msg(hw_load(name, sets, n, hw, &e) == 0, "%s", e.msg);
}

/* Expects cost_report_check to refuse with code, one line holding each of want[]. */
static void expect_refused(const CostReportArgs *a, bool predicts, const Hardware *hw, int code,
                           const char *const *want, int n_want)
{
    Err e = {""};
    ck_assert_int_eq(cost_report_check(a, predicts, hw, &e), code);
    for (int i = 0; i < n_want; i++)
        tu_assert_contains(e.msg, want[i]);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
}

START_TEST(options)
{
    CostReportArgs a = args(false, NULL, 0);
    ck_assert(!a.on);
    ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_GPUS, "16", "test"), 0);
    ck_assert_int_eq(a.tp_gpus, 16);
    ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_GPUS, "0", "test"), -EINVAL);
    ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_GPUS, "1025", "test"), -EINVAL);
    ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_GPUS, "2.5", "test"), -EINVAL);
    ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_HW, "h200.ini", "test"), 0);
    ck_assert_str_eq(a.tp_hw, "h200.ini");
    for (int i = 0; i < COST_REPORT_MAX_SETS; i++)
        ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_SET, "gpu.mem_GiB=40", "test"), 0);
    ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_SET, "gpu.mem_GiB=40", "test"), -EINVAL);
}
END_TEST

/* Each missing piece is named with the option that gives it */
START_TEST(check_names_the_key)
{
    Hardware hw;
    CostReportArgs a = args(false, NULL, 0);
    load("4090.ini", NULL, 0, &hw);
    Err e;
    ck_assert_int_eq(cost_report_check(&a, true, &hw, &e), 0); /* no --cost: nothing to check */
    a.tp_hw = "h200.ini";
    expect_refused(&a, true, &hw, -EINVAL, (const char *[]){"--tp-hw sets up the baseline",
                                                             "add --cost"}, 2);
    a = args(true, tp_prices, 2);
    expect_refused(&a, false, &hw, -EINVAL, (const char *[]){"not with --describe"}, 1);
    /* 4090.ini prices its GPU, not its SSDs */
    expect_refused(&a, true, &hw, -EINVAL,
                   (const char *[]){"price of one Intel D7-P5510 3.84 TB, of which [ssd] count "
                                    "says 12", "4090.ini has no [price] ssd_usd",
                                    "--set price.ssd_usd=USD"}, 3);
    hw_free(&hw);
    load("h200.ini", NULL, 0, &hw);
    expect_refused(&a, true, &hw, -EINVAL, (const char *[]){"price of one NVIDIA H200",
                                                             "--set price.gpu_usd=USD"}, 2);
    hw_free(&hw);

    const char *priced[] = {"price.ssd_usd=500"};
    load("4090.ini", priced, 1, &hw);
    ck_assert_msg(cost_report_check(&a, true, &hw, &e) == 0, "%s", e.msg);
    CostReportArgs bare = args(true, NULL, 0); /* the baseline's a100-80g.ini has no price */
    expect_refused(&bare, true, &hw, -EINVAL,
                   (const char *[]){"one NVIDIA A100-SXM4-80GB, the tensor-parallel baseline's",
                                    "a100-80g.ini has no [price] gpu_usd",
                                    "--tp-set price.gpu_usd=USD"}, 3);
    /* h200.ini gives no NVLink: needed over 8 GPUs, not over 1 */
    a.tp_hw = "h200.ini";
    expect_refused(&a, true, &hw, -EINVAL,
                   (const char *[]){"h200.ini has no [gpu] nvlink_GBps", "its 8 GPUs",
                                    "--tp-set gpu.nvlink_GBps=GBPS"}, 3);
    ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_GPUS, "1", "test"), 0);
    ck_assert_msg(cost_report_check(&a, true, &hw, &e) == 0, "%s", e.msg);
    /* the baseline's ini and overrides are named as the user gave them */
    a.tp_hw = "3090.ini";
    expect_refused(&a, true, &hw, -ENOENT, (const char *[]){"the baseline's hardware (--tp-hw): "
                                                             "unknown hardware '3090.ini'"}, 1);
    const char *bad[] = {"price.gpu_usd=cheap"};
    CostReportArgs b = args(true, bad, 1);
    expect_refused(&b, true, &hw, -EINVAL, (const char *[]){"--tp-set price.gpu_usd=cheap: "
                                                             "gpu_usd: expected a number"}, 1);
    hw_free(&hw);
}
END_TEST

START_TEST(machine_price)
{
    Hardware hw;
    const char *sets[] = {"price.ssd_usd=500", "price.host_usd=2000"};
    load("4090.ini", sets, 2, &hw);
    ck_assert_double_eq(cost_report_machine_usd(&hw), 1599 + 12 * 500 + 2000);
    hw_free(&hw);
    load("4090.ini", sets, 1, &hw);
    ck_assert_double_eq(cost_report_machine_usd(&hw), 7599); /* no host: left out */
    hw_free(&hw);
}
END_TEST

/* The block for a prediction of gpt3-13b, 32 x 1024 tokens, made up here: 32768 tokens in 20 s
 * (1638.4 tokens/s) and 2.4 PFLOP (120 TFLOPS) on a machine of 7599 dollars: 215.6 tokens/s
 * and 15.79 TFLOPS per $1000 */
static char *block(const Prediction *pr, const Graph *g, const CostReportArgs *a,
                   const Hardware *hw)
{
    Plan p = {.n_micro = 1};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    Err e;
    ck_assert_msg(cost_report_print(f, a, pr, g, &p, hw, &e) == 0, "%s", e.msg);
    fclose(f);
    return text;
}

START_TEST(block_figures)
{
    Graph g;
    Err e;
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt3-13b"), 32, 1024, &e), 0);
    Hardware hw, tp;
    const char *sets[] = {"price.ssd_usd=500"};
    load("4090.ini", sets, 1, &hw);
    load("a100-80g.ini", tp_prices, 2, &tp);
    CostReportArgs a = args(true, tp_prices, 2);
    Prediction pr = {.tokens = 32768, .iter_s = 20, .model_flops = 2.4e15};
    char *text = block(&pr, &g, &a, &hw);
    tu_assert_contains(text, "4090.ini: GPU 1599 + 12 x SSD 500 + host left out (no [price] "
                             "host_usd) = 7599\n");
    tu_assert_contains(text, "a100-80g.ini: 8 x GPU 15000 + host 60000 = 180000\n");
    tu_assert_contains(text, "  fuyou                  7599       1638    120.0"
                             "                215.6             15.79\n");
    /* the baseline's row and the ratio, from its model (test_tp_baseline checks that) */
    TpBaseline tb;
    tp_baseline_predict(&g, 1, &tp, 8, &tb);
    ck_assert(tb.fits && tb.even);
    char want[256];
    double tps = tb.tokens / tb.iter_s, tflops = tb.model_flops / tb.iter_s / 1e12;
    snprintf(want, sizeof want, "  tensor parallel      180000 %10.0f %8.1f %20.1f %17.2f\n", tps,
             tflops, tps / 180, tflops / 180);
    tu_assert_contains(text, want);
    snprintf(want, sizeof want, "iteration %.3f s: compute %.3f + all-reduce %.3f + AdamW %.3f",
             tb.iter_s, tb.compute_s, tb.allreduce_s, tb.adam_s);
    tu_assert_contains(text, want);
    snprintf(want, sizeof want, "fuyou / tensor parallel: %.3gx the tokens/s and model TFLOPS "
             "per dollar (%.3gx the throughput at 0.0422x the price)\n",
             1638.4 / 7599 / (tps / 180000), 1638.4 / tps);
    tu_assert_contains(text, want);
    free(text);

    /* fuyou's plan does not fit: no throughput, no ratio */
    pr.overflow = 1;
    text = block(&pr, &g, &a, &hw);
    tu_assert_contains(text, "  fuyou                  7599          -        -                    "
                             "-                 -\n");
    tu_assert_contains(text, "no ratio, fuyou's plan has no throughput");
    free(text);
    pr.overflow = 0;

    /* 3 does not divide 40 heads: the baseline is not modelled */
    ck_assert_int_eq(cost_report_take(&a, COST_OPT_TP_GPUS, "3", "test"), 0);
    text = block(&pr, &g, &a, &hw);
    tu_assert_contains(text, "3 x GPU 15000 + host 60000 = 105000");
    tu_assert_contains(text, "not modelled: Megatron-LM splits the heads (40) and the ffn width "
                             "(20480) evenly over the GPUs, and 3 does not divide both");
    tu_assert_contains(text, "no ratio, the baseline has no throughput");
    free(text);
    hw_free(&tp);
    hw_free(&hw);
    graph_free(&g);
}
END_TEST

/* GPT-3 175B: 16 B of state a parameter alone is 2.8 TB, beyond 8 GPUs of 78.5 GiB */
START_TEST(block_baseline_does_not_fit)
{
    Graph g;
    Err e;
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt3-175b"), 1, 1024, &e), 0);
    Hardware hw, tp;
    const char *sets[] = {"price.ssd_usd=500", "price.host_usd=20000"};
    load("4090.ini", sets, 2, &hw);
    load("a100-80g.ini", tp_prices, 2, &tp);
    TpBaseline tb;
    tp_baseline_predict(&g, 1, &tp, 8, &tb);
    ck_assert(!tb.fits);
    CostReportArgs a = args(true, tp_prices, 2);
    Prediction pr = {.tokens = 1024, .iter_s = 10, .model_flops = 1e15};
    char *text = block(&pr, &g, &a, &hw);
    tu_assert_contains(text, "host 20000 = 27599\n");
    char want[128];
    snprintf(want, sizeof want, "of its 78.50 GiB; %.0f GPUs' memory would hold them",
             tb.min_gpus);
    tu_assert_contains(text, want);
    tu_assert_contains(text, "does not fit: 16 B/param of state and the activations are ");
    tu_assert_contains(text, "no ratio, the baseline has no throughput");
    free(text);
    hw_free(&tp);
    hw_free(&hw);
    graph_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cost_report");
    TCase *tc = tcase_create("cost_report");
    tcase_add_test(tc, options);
    tcase_add_test(tc, check_names_the_key);
    tcase_add_test(tc, machine_price);
    tcase_add_test(tc, block_figures);
    tcase_add_test(tc, block_baseline_does_not_fit);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
