/* cost_report: the --cost options, their checks and the cost block; see cost_report.h. */
#include "cost_report.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "options.h"
#include "tp_baseline.h"
#include "units.h"

_Static_assert(OPT_TP_SET - OPT_COST == COST_OPT_N - 1, "options.h lists them in this order");
_Static_assert(TP_MAX_GPUS == 1024, "options.c bounds --tp-gpus at TP_MAX_GPUS");

void cost_report_args_init(CostReportArgs *a)
{
    *a = (CostReportArgs){.tp_gpus = -1};
}

int cost_report_take(CostReportArgs *a, int opt, const char *value, const char *prog)
{
    switch (opt) {
    case COST_OPT_COST:
        a->on = true;
        return 0;
    case COST_OPT_TP_GPUS: {
        double n;
        if (opts_value(prog, OPT_TP_GPUS, value, &n))
            return -EINVAL;
        a->tp_gpus = (int)n;
        return 0;
    }
    case COST_OPT_TP_HW:
        a->tp_hw = value;
        return 0;
    case COST_OPT_TP_SET:
        if (a->n_tp_sets == COST_REPORT_MAX_SETS) {
            fprintf(stderr, "%s: at most %d --tp-set options\n", prog, COST_REPORT_MAX_SETS);
            return -EINVAL;
        }
        a->tp_sets[a->n_tp_sets++] = value;
        return 0;
    }
    assert(!"no such cost option");
    return -EINVAL;
}

static int tp_gpus(const CostReportArgs *a)
{
    return a->tp_gpus > 0 ? a->tp_gpus : COST_REPORT_TP_GPUS;
}

/* Loads the baseline's ini: --tp-hw with the --tp-set overrides. hw_load names an override
 * "--set ...": here the user gave it as --tp-set. */
static int load_tp_hw(const CostReportArgs *a, Hardware *tp, Err *e)
{
    Err local = {""};
    int rc = hw_load(a->tp_hw ? a->tp_hw : COST_REPORT_TP_HW, a->tp_sets, a->n_tp_sets, tp,
                     &local);
    if (rc == 0)
        return 0;
    bool set = !strncmp(local.msg, "--set ", 6);
    return err_set(e, rc, "the baseline's hardware (--tp-hw): %s%s", set ? "--tp-" : "",
                   set ? local.msg + 2 : local.msg);
}

/* e says that ini `source` gives no [price] key for `what`, and the two ways to give it. */
static int need_price(Err *e, const char *source, const char *key, const char *what,
                      const char *set_opt)
{
    return err_set(e, -EINVAL, "--cost needs the price of %s: %s has no [price] %s; add it "
                   "there or give %s price.%s=USD (US dollars)", what, source, key, set_opt, key);
}

/* The baseline's ini: its GPU's price and, over several GPUs, its NVLink bandwidth. */
static int check_tp_hw(const CostReportArgs *a, Err *e)
{
    Hardware tp;
    int rc = load_tp_hw(a, &tp, e);
    if (rc)
        return rc;
    char what[128];
    snprintf(what, sizeof what, "one %s, the tensor-parallel baseline's GPU", tp.gpu_name);
    if (tp.price_gpu_usd == 0)
        rc = need_price(e, tp.source, "gpu_usd", what, "--tp-set");
    else if (tp_gpus(a) > 1 && tp.gpu_nvlink_GBps == 0)
        rc = err_set(e, -EINVAL, "--cost: the baseline's %s has no [gpu] nvlink_GBps, the NVLink "
                     "bandwidth (GB/s each way) its %d GPUs all-reduce over; add it there or give "
                     "--tp-set gpu.nvlink_GBps=GBPS", tp.source, tp_gpus(a));
    hw_free(&tp);
    return rc;
}

int cost_report_check(const CostReportArgs *a, bool predicts, const Hardware *hw, Err *e)
{
    if (!a->on) {
        int opt = a->tp_gpus >= 0 ? COST_OPT_TP_GPUS : a->tp_hw ? COST_OPT_TP_HW
                : a->n_tp_sets ? COST_OPT_TP_SET : COST_OPT_COST;
        return opt == COST_OPT_COST ? 0 : err_set(e, -EINVAL, "--%s sets up the baseline of "
                                                  "the --cost report; add --cost",
                                                  opt_specs[OPT_COST + opt].name);
    }
    if (!predicts)
        return err_set(e, -EINVAL, "--cost reports on a prediction: not with --describe or "
                       "--swap sweep");
    char what[160];
    if (hw->price_gpu_usd == 0) {
        snprintf(what, sizeof what, "one %s", hw->gpu_name);
        return need_price(e, hw->source, "gpu_usd", what, "--set");
    }
    if (hw->price_ssd_usd == 0) {
        snprintf(what, sizeof what, "one %s, of which [ssd] count says %d", hw->ssd_name,
                 hw->ssd_count);
        return need_price(e, hw->source, "ssd_usd", what, "--set");
    }
    return check_tp_hw(a, e);
}

double cost_report_machine_usd(const Hardware *hw)
{
    return hw->price_gpu_usd + hw->ssd_count * hw->price_ssd_usd + hw->price_host_usd;
}

static void print_fuyou_machine(FILE *out, const Hardware *hw)
{
    fprintf(out, "  %-17s%s: GPU %.10g + %d x SSD %.10g + host ", "fuyou", hw->source,
            hw->price_gpu_usd, hw->ssd_count, hw->price_ssd_usd);
    if (hw->price_host_usd > 0)
        fprintf(out, "%.10g", hw->price_host_usd);
    else
        fprintf(out, "left out (no [price] host_usd)");
    fprintf(out, " = %.10g\n", cost_report_machine_usd(hw));
}

/* The baseline's price, then what it assumes of memory and time, or why it has no time. */
static void print_tp_machine(FILE *out, const Hardware *tp, const TpBaseline *tb, double usd,
                             const ModelConfig *c)
{
    fprintf(out, "  %-17s%s: %d x GPU %.10g + host ", "tensor parallel", tp->source, tb->gpus,
            tp->price_gpu_usd);
    if (tp->price_host_usd > 0)
        fprintf(out, "%.10g", tp->price_host_usd);
    else
        fprintf(out, "left out (no [price] host_usd)");
    fprintf(out, " = %.10g\n", usd);
    char b1[32], b2[32];
    units_bytes(b1, sizeof b1, tb->state_bytes + tb->act_bytes);
    units_bytes(b2, sizeof b2, tb->capacity_bytes);
    const char *pad = "                   ";
    if (!tb->even) {
        fprintf(out, "%snot modelled: Megatron-LM splits the heads (%d) and the ffn width (%d) "
                "evenly over the GPUs, and %d does not divide both\n", pad, c->n_head, c->d_ff,
                tb->gpus);
    } else if (!tb->fits) {
        fprintf(out, "%sdoes not fit: %d B/param of state and the activations are %s a GPU over "
                "%d GPU%s, of its %s; %.0f GPUs' memory would hold them\n", pad,
                TP_STATE_BYTES_PER_PARAM, b1, tb->gpus, tb->gpus == 1 ? "" : "s", b2,
                tb->min_gpus);
    } else {
        fprintf(out, "%sMegatron-LM, %d-way tensor parallel, all state on the GPUs: %s of %s a "
                "GPU\n", pad, tb->gpus, b1, b2);
        fprintf(out, "%siteration %.3f s: compute %.3f + all-reduce %.3f + AdamW %.3f, one after "
                "another\n", pad, tb->iter_s, tb->compute_s, tb->allreduce_s, tb->adam_s);
    }
}

/* One row of the table; NAN throughput: it has none (does not fit). */
static void print_row(FILE *out, const char *name, double usd, double tokens_per_s,
                      double tflops)
{
    fprintf(out, "  %-17s%10.10g", name, usd);
    if (isnan(tokens_per_s))
        fprintf(out, " %10s %8s %20s %17s\n", "-", "-", "-", "-");
    else
        fprintf(out, " %10.0f %8.1f %20.1f %17.2f\n", tokens_per_s, tflops,
                tokens_per_s / usd * 1000, tflops / usd * 1000);
}

int cost_report_print(FILE *out, const CostReportArgs *a, const Prediction *pr, const Graph *g,
                      const Plan *p, const Hardware *hw, Err *e)
{
    Hardware tp;
    int rc = load_tp_hw(a, &tp, e);
    if (rc)
        return rc;
    TpBaseline tb;
    tp_baseline_predict(g, p->n_micro, &tp, tp_gpus(a), &tb);
    double usd = cost_report_machine_usd(hw), tp_usd = tb.gpus * tp.price_gpu_usd +
                                                       tp.price_host_usd;
    fprintf(out, "\ncost, US dollars (the baseline's assumptions: docs/fuyou-sim.md, \"What a run costs\")\n");
    print_fuyou_machine(out, hw);
    print_tp_machine(out, &tp, &tb, tp_usd, &g->cfg);

    bool ok = !pr->overflow, tp_ok = tb.even && tb.fits;
    double tps = ok ? pr->tokens / pr->iter_s : NAN, tp_tps = tp_ok ? tb.tokens / tb.iter_s : NAN;
    fprintf(out, "\n  %-17s%10s %10s %8s %20s %17s\n", "", "price", "tokens/s", "TFLOPS",
            "tokens/s per $1000", "TFLOPS per $1000");
    print_row(out, "fuyou", usd, tps, ok ? pr->model_flops / pr->iter_s / 1e12 : NAN);
    print_row(out, "tensor parallel", tp_usd, tp_tps,
              tp_ok ? tb.model_flops / tb.iter_s / 1e12 : NAN);
    if (ok && tp_ok)
        fprintf(out, "fuyou / tensor parallel: %.3gx the tokens/s and model TFLOPS per dollar "
                "(%.3gx the throughput at %.3gx the price)\n", tps / usd / (tp_tps / tp_usd),
                tps / tp_tps, usd / tp_usd);
    else
        fprintf(out, "fuyou / tensor parallel: no ratio, %s has no throughput\n",
                ok ? "the baseline" : "fuyou's plan");
    hw_free(&tp);
    return 0;
}
