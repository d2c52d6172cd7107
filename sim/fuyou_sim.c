/* fuyou-sim: what-if planning. Predicts a training iteration of a model on a hardware
 * description under a plan (Fuyou or ZeRO-Infinity policy) by discrete-event simulation of the
 * same schedule the executor runs, or with --describe prints the layer graph and footprint.
 * Exit codes: 0 success, 1 runtime failure or a plan over capacity, 2 usage or input error. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "describe.h"
#include "footprint.h"
#include "graph.h"
#include "hw.h"
#include "model.h"
#include "plan.h"
#include "predict.h"

enum { MAX_SETS = 64 };

/* Plan knobs settable from the command line; -1 (or NULL) keeps the policy's default. */
typedef struct PlanArgs {
    const char *weights, *optim, *checkpoints, *act;
    int micro_batches, subgroup, tail, prefetch, weight_buffers, pinned_buffers, act_buffers,
        grad_buffers, state_buffers;
} PlanArgs;

typedef struct SimArgs {
    const char *hw, *model, *policy, *trace, *chrome;
    const char *sets[MAX_SETS];
    int n_sets;
    int batch, seq, iters;
    bool describe;
    PlanArgs plan;
} SimArgs;

static void usage(FILE *out)
{
    fprintf(out,
"usage: fuyou-sim [options]\n"
"Predicts one training iteration of a GPT-style model on a hardware description by simulating\n"
"the schedule the executor runs: iteration time, TFLOPS, tokens/s, per-resource busy time and\n"
"the bottleneck, memory per tier; optionally the predicted timeline.\n"
"\n"
"  --hw NAME|PATH          hardware ini: a preset (");
    for (int i = 0; hw_preset_name(i); i++)
        fprintf(out, "%s%s", i ? ", " : "", hw_preset_name(i));
    fprintf(out, ") or a file\n"
"                          (default 4090.ini, the Fuyou paper's testbed)\n"
"  --set SEC.KEY=VALUE     override one hardware key, repeatable (e.g. --set ssd.count=3)\n"
"  --model NAME|PATH       a preset or a model ini (default gpt3-175b); presets:\n"
"                          ");
    for (int i = 0; i < model_preset_count(); i++)
        fprintf(out, "%s%s", model_preset_at(i)->name,
                i + 1 < model_preset_count() ? (i % 5 == 4 ? ",\n                          "
                                                           : ", ")
                                             : "\n");
    fprintf(out,
"  --batch N               micro-batch size in sequences (default 8)\n"
"  --seq N                 sequence length in tokens (default 1024, the paper's)\n"
"  --policy P              fuyou (default) or zero-infinity\n"
"  --iters N               iterations to simulate; N >= 2 reports the steady state (default 3)\n"
"  --trace FILE            write the predicted timeline as TSV (traces/ schema)\n"
"  --chrome FILE           write it as Chrome/Perfetto JSON, one lane per resource\n"
"  --describe              print the layer graph and the memory footprint instead\n"
"plan (defaults: fuyou places state by capacity; zero-infinity puts weights and optimizer\n"
"states on SSD and checkpoints in CPU memory):\n"
"  --weights TIER          home of the 16-bit weights: gpu, cpu, ssd\n"
"  --optim TIER            home of fp32 master weights and Adam m, v: gpu, cpu, ssd\n"
"  --checkpoints TIER      block-boundary activations: gpu, cpu, ssd\n"
"  --act WHERE             other kept activations: recompute (default), gpu, cpu, ssd\n"
"  --micro-batches N       micro-batches per iteration, gradients accumulated (default 1)\n"
"  --subgroup N            optimizer sub-group size in blocks (default 1)\n"
"  --tail N                blocks in the tail sub-group, updated last (default 1)\n"
"  --prefetch N            weight and activation loads issued N blocks ahead (default 1)\n"
"  --weight-buffers N      GPU buffers of one block's weights (default 2)\n"
"  --pinned-buffers N      pinned CPU buffers for SSD weights (default 4)\n"
"  --act-buffers N         GPU buffers for a block's swapped activations (default 2)\n"
"  --grad-buffers N        GPU buffers of one block's gradients (default 2)\n"
"  --state-buffers N       pinned CPU buffers of one sub-group's states (default 3, z-i 2)\n"
"  -h, --help              this text\n"
"  -V, --version           the version\n"
"\n"
"Exit status: 0 success, 1 runtime failure or a plan over capacity, 2 usage or input error.\n");
}

static int parse_count(const char *opt, const char *s, int min, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < min || v > INT_MAX) {
        fprintf(stderr, "fuyou-sim: %s expects a whole number >= %d, got '%s'\n", opt, min, s);
        return -EINVAL;
    }
    *out = (int)v;
    return 0;
}

/* Returns 0 to go on, 1 when --help/--version was served, -EINVAL on a usage error. */
static int parse_args(int argc, char **argv, SimArgs *a)
{
    enum { O_HW = 256, O_SET, O_MODEL, O_POLICY, O_TRACE, O_CHROME, O_DESCRIBE, O_WEIGHTS,
           O_OPTIM, O_CKPT, O_ACT, O_BATCH, O_SEQ, O_ITERS, O_MICRO, O_SUBGROUP, O_TAIL,
           O_PREFETCH, O_WBUF, O_PBUF, O_ABUF, O_GBUF, O_SBUF };
    static const struct option opts[] = {
        {"hw", required_argument, 0, O_HW}, {"set", required_argument, 0, O_SET},
        {"model", required_argument, 0, O_MODEL}, {"policy", required_argument, 0, O_POLICY},
        {"trace", required_argument, 0, O_TRACE}, {"chrome", required_argument, 0, O_CHROME},
        {"describe", no_argument, 0, O_DESCRIBE}, {"weights", required_argument, 0, O_WEIGHTS},
        {"optim", required_argument, 0, O_OPTIM}, {"checkpoints", required_argument, 0, O_CKPT},
        {"act", required_argument, 0, O_ACT}, {"batch", required_argument, 0, O_BATCH},
        {"seq", required_argument, 0, O_SEQ}, {"iters", required_argument, 0, O_ITERS},
        {"micro-batches", required_argument, 0, O_MICRO},
        {"subgroup", required_argument, 0, O_SUBGROUP}, {"tail", required_argument, 0, O_TAIL},
        {"prefetch", required_argument, 0, O_PREFETCH},
        {"weight-buffers", required_argument, 0, O_WBUF},
        {"pinned-buffers", required_argument, 0, O_PBUF},
        {"act-buffers", required_argument, 0, O_ABUF},
        {"grad-buffers", required_argument, 0, O_GBUF},
        {"state-buffers", required_argument, 0, O_SBUF},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0},
    };
    *a = (SimArgs){.hw = "4090.ini", .model = "gpt3-175b", .policy = "fuyou", .batch = 8,
                   .seq = 1024, .iters = 3,
                   .plan = {.micro_batches = -1, .subgroup = -1, .tail = -1, .prefetch = -1,
                            .weight_buffers = -1, .pinned_buffers = -1, .act_buffers = -1,
                            .grad_buffers = -1, .state_buffers = -1}};
    /* Count options and their minimum, indexed from O_BATCH. */
    int *counts[] = {&a->batch, &a->seq, &a->iters, &a->plan.micro_batches, &a->plan.subgroup,
                     &a->plan.tail, &a->plan.prefetch, &a->plan.weight_buffers,
                     &a->plan.pinned_buffers, &a->plan.act_buffers, &a->plan.grad_buffers,
                     &a->plan.state_buffers};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", opts, NULL)) != -1) {
        if (c >= O_BATCH && c <= O_SBUF) {
            const struct option *o = opts;
            while (o->val != c)
                o++;
            char name[32];
            snprintf(name, sizeof name, "--%s", o->name);
            if (parse_count(name, optarg, c == O_PREFETCH ? 0 : 1, counts[c - O_BATCH]))
                return -EINVAL;
            continue;
        }
        switch (c) {
        case O_HW: a->hw = optarg; break;
        case O_MODEL: a->model = optarg; break;
        case O_POLICY: a->policy = optarg; break;
        case O_TRACE: a->trace = optarg; break;
        case O_CHROME: a->chrome = optarg; break;
        case O_DESCRIBE: a->describe = true; break;
        case O_WEIGHTS: a->plan.weights = optarg; break;
        case O_OPTIM: a->plan.optim = optarg; break;
        case O_CKPT: a->plan.checkpoints = optarg; break;
        case O_ACT: a->plan.act = optarg; break;
        case O_SET:
            if (a->n_sets == MAX_SETS) {
                fprintf(stderr, "fuyou-sim: at most %d --set options\n", MAX_SETS);
                return -EINVAL;
            }
            a->sets[a->n_sets++] = optarg;
            break;
        case 'h': usage(stdout); return 1;
        case 'V': printf("fuyou-sim %s\n", FUYOU_VERSION); return 1;
        case ':':
            fprintf(stderr, "fuyou-sim: %s needs a value; see fuyou-sim --help\n",
                    argv[optind - 1]);
            return -EINVAL;
        default:
            fprintf(stderr, "fuyou-sim: unknown option '%s'; see fuyou-sim --help\n",
                    argv[optind - 1]);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fuyou-sim: unexpected argument '%s'; see fuyou-sim --help\n",
                argv[optind]);
        return -EINVAL;
    }
    return 0;
}

static int parse_tier(const char *opt, const char *s, Tier *out)
{
    if (tier_parse(s, out)) {
        fprintf(stderr, "fuyou-sim: %s expects gpu, cpu or ssd, got '%s'\n", opt, s);
        return -EINVAL;
    }
    return 0;
}

/* The policy's default plan by capacity, then the command line's choices over it. */
static int make_plan(const SimArgs *a, const Graph *g, const Hardware *hw, Plan *p, Err *e)
{
    Policy policy;
    if (policy_parse(a->policy, &policy)) {
        fprintf(stderr, "fuyou-sim: --policy expects fuyou or zero-infinity, got '%s'\n",
                a->policy);
        return -EINVAL;
    }
    int rc = plan_init(p, g, policy, e);
    if (rc)
        return rc;
    if (policy == POLICY_FUYOU) {
        footprint_auto_place(p, g, hw);
    } else {
        p->weights = p->optim = TIER_SSD;
        plan_set_all_act(p, ACT_CPU, ACT_RECOMPUTE);
        p->state_buffers = 2; /* read g+1 while Adam g: pipelined one ahead */
    }
    const PlanArgs *pa = &a->plan;
    if ((pa->weights && parse_tier("--weights", pa->weights, &p->weights)) ||
        (pa->optim && parse_tier("--optim", pa->optim, &p->optim)))
        return -EINVAL;
    Tier ckpt_tier = TIER_CPU;
    ActPlace ckpt = plan_act(p, 0, 0), inner = plan_act(p, 0, 1);
    if (pa->checkpoints) {
        if (parse_tier("--checkpoints", pa->checkpoints, &ckpt_tier))
            return -EINVAL;
        ckpt = (ActPlace)ckpt_tier;
    }
    if (pa->act) {
        Tier t;
        if (!strcmp(pa->act, "recompute"))
            inner = ACT_RECOMPUTE;
        else if (!tier_parse(pa->act, &t))
            inner = (ActPlace)t;
        else {
            fprintf(stderr, "fuyou-sim: --act expects recompute, gpu, cpu or ssd, got '%s'\n",
                    pa->act);
            return -EINVAL;
        }
    }
    plan_set_all_act(p, ckpt, inner);
    int *fields[] = {&p->micro_batches, &p->subgroup_blocks, &p->tail_blocks,
                     &p->prefetch_depth, &p->weight_buffers, &p->pinned_buffers,
                     &p->act_buffers, &p->grad_buffers, &p->state_buffers};
    const int values[] = {pa->micro_batches, pa->subgroup, pa->tail, pa->prefetch,
                          pa->weight_buffers, pa->pinned_buffers, pa->act_buffers,
                          pa->grad_buffers, pa->state_buffers};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        if (values[i] >= 0)
            *fields[i] = values[i];
    if (pa->prefetch >= 0 && pa->weight_buffers < 0 && p->weight_buffers < p->prefetch_depth + 1)
        p->weight_buffers = p->prefetch_depth + 1;
    return plan_validate(p, e);
}

int main(int argc, char **argv)
{
    SimArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc > 0 ? 0 : 2;

    Err e = {""};
    ModelConfig cfg;
    Hardware hw;
    Graph g = {0};
    Plan p = {0};
    Prediction pr = {0};
    int status = 2;
    if (model_load(a.model, &cfg, &e) || hw_load(a.hw, a.sets, a.n_sets, &hw, &e))
        goto out_msg;
    rc = graph_init(&g, &cfg, a.batch, a.seq, &e);
    if (rc) {
        status = rc == -ENOMEM ? 1 : 2;
        goto out_hw;
    }
    rc = make_plan(&a, &g, &hw, &p, &e);
    if (rc) {
        status = rc == -ENOMEM ? 1 : 2;
        goto out_hw;
    }
    if (a.describe) {
        describe_graph(stdout, &g);
        describe_footprint(stdout, &g, &hw, &p);
        status = 0;
        goto out_hw;
    }
    rc = predict_run(&pr, &g, &hw, &p, a.iters, &e);
    if (rc) {
        status = 1;
        goto out_hw;
    }
    predict_report(stdout, &pr, &g, &hw, &p);
    status = pr.overflow ? 1 : 0;
    if ((a.trace && predict_write_trace(&pr, a.trace, false, &e)) ||
        (a.chrome && predict_write_trace(&pr, a.chrome, true, &e)))
        status = 1;
    predict_free(&pr);
out_hw:
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
out_msg:
    if (e.msg[0] && status)
        fprintf(stderr, "fuyou-sim: %s\n", e.msg);
    return status;
}
