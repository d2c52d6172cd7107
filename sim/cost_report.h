/* cost_report: fuyou-sim --cost, the block after the report: what the machine costs (the
 * [price] section of the --hw ini: one GPU, [ssd] count SSDs, the host), the predicted tokens/s
 * and model TFLOPS per 1000 US dollars, the same for the tensor-parallel baseline
 * (costmodel/tp_baseline.h) on --tp-gpus GPUs of the --tp-hw ini, and fuyou's ratio to it
 * (docs/fuyou-sim.md, "What a run costs"). It parses its own options and checks, before anything is
 * planned, that both inis give the prices (and the baseline its NVLink bandwidth) it needs. */
#ifndef FUYOU_COST_REPORT_H
#define FUYOU_COST_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "graph.h"
#include "hw.h"
#include "plan.h"
#include "predict.h"

/* The options, in this order: --cost, --tp-gpus N, --tp-hw NAME|PATH, --tp-set SEC.KEY=VALUE. */
enum CostOpt { COST_OPT_COST, COST_OPT_TP_GPUS, COST_OPT_TP_HW, COST_OPT_TP_SET, COST_OPT_N };
enum {
    COST_REPORT_MAX_SETS = 64,
    COST_REPORT_TP_GPUS = 8, /* --tp-gpus by default: a DGX node */
};
#define COST_REPORT_TP_HW "a100-80g.ini" /* --tp-hw by default */

typedef struct CostReportArgs {
    bool on;           /* --cost */
    int tp_gpus;       /* -1: not given */
    const char *tp_hw; /* NULL: not given */
    const char *tp_sets[COST_REPORT_MAX_SETS];
    int n_tp_sets;
} CostReportArgs;

/* No --cost, no --tp-* option given. */
void cost_report_args_init(CostReportArgs *a);

/* Takes option opt (enum CostOpt) with its value (NULL for --cost). 0, or -EINVAL with one
 * line printed on stderr, prefixed with prog. */
int cost_report_take(CostReportArgs *a, int opt, const char *value, const char *prog);

/* Checks the options against each other and the hardware before anything is planned: without
 * --cost, no --tp-* option; with it, a prediction to report on (predicts: not --describe or
 * --swap sweep), hw's GPU and SSD prices, the baseline's ini loading with its GPU price and,
 * over several GPUs, its nvlink_GBps. 0, or -EINVAL (-ENOENT: no such baseline ini, -ENOMEM)
 * with e saying which key to set and how. */
int cost_report_check(const CostReportArgs *a, bool predicts, const Hardware *hw, Err *e);

/* Prints the cost block for prediction pr of plan p (micro-batch graph g) on hw, after
 * cost_report_check passed. A side that does not fit gets no throughput and no ratio. 0, or a
 * negative errno with e filled (the baseline's ini failing to load again). */
int cost_report_print(FILE *out, const CostReportArgs *a, const Prediction *pr, const Graph *g,
                      const Plan *p, const Hardware *hw, Err *e);

/* What hw's machine costs: one GPU, [ssd] count SSDs and the host, in US dollars. */
double cost_report_machine_usd(const Hardware *hw);

#endif
