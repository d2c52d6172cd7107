/* fuyou-sim: what-if planning from the shared description. For now it describes a model on a
 * hardware ini: the layer graph and the memory footprint per tier of the chosen placement.
 * Exit codes: 0 success, 1 runtime failure, 2 usage or input error. */
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

enum { MAX_SETS = 64 };

typedef struct SimArgs {
    const char *hw;
    const char *model;
    const char *sets[MAX_SETS];
    int n_sets;
    int batch, seq;
    const char *tier_arg[3]; /* --weights, --optim, --checkpoints: NULL = auto */
    const char *act;         /* --act: NULL = auto */
} SimArgs;

static void usage(FILE *out)
{
    fprintf(out,
"usage: fuyou-sim [options]\n"
"Describes a GPT-style model's training step on a hardware description: the layer graph\n"
"(per-op FLOPs and bytes) and the memory footprint per tier (GPU, CPU, SSD).\n"
"\n"
"  --hw NAME|PATH        hardware ini: a preset (");
    for (int i = 0; hw_preset_name(i); i++)
        fprintf(out, "%s%s", i ? ", " : "", hw_preset_name(i));
    fprintf(out, ") or a file\n"
"                        (default 4090.ini, the Fuyou paper's testbed)\n"
"  --set SEC.KEY=VALUE   override one hardware key, repeatable (e.g. --set ssd.count=3)\n"
"  --model NAME|PATH     a preset or a model ini (default gpt3-175b); presets:\n"
"                        ");
    for (int i = 0; i < model_preset_count(); i++)
        fprintf(out, "%s%s", model_preset_at(i)->name,
                i + 1 < model_preset_count() ? (i % 6 == 5 ? ",\n                        " : ", ")
                                             : "\n");
    fprintf(out,
"  --batch N             micro-batch size in sequences (default 8)\n"
"  --seq N               sequence length in tokens (default 1024, the paper's)\n"
"  --weights TIER        home of the 16-bit weights: gpu, cpu, ssd (default: by capacity)\n"
"  --optim TIER          home of fp32 master weights and Adam m, v (default: by capacity)\n"
"  --checkpoints TIER    home of block-boundary activations (default: by capacity)\n"
"  --act all|checkpoint  keep every activation, or block inputs only and recompute\n"
"  --describe            print the layer graph and the footprint (what fuyou-sim does now)\n"
"  -h, --help            this text\n"
"  -V, --version         the version\n"
"\n"
"Exit status: 0 success, 1 runtime failure, 2 usage or input error.\n");
}

static int parse_positive(const char *opt, const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < 1 || v > INT_MAX) {
        fprintf(stderr, "fuyou-sim: %s expects a positive whole number, got '%s'\n", opt, s);
        return -EINVAL;
    }
    *out = (int)v;
    return 0;
}

/* Returns 0 to go on, 1 when --help/--version was served, -EINVAL on a usage error. */
static int parse_args(int argc, char **argv, SimArgs *a)
{
    enum { O_HW = 256, O_SET, O_MODEL, O_BATCH, O_SEQ, O_WEIGHTS, O_OPTIM, O_CKPT, O_ACT,
           O_DESCRIBE };
    static const struct option opts[] = {
        {"hw", required_argument, 0, O_HW}, {"set", required_argument, 0, O_SET},
        {"model", required_argument, 0, O_MODEL}, {"batch", required_argument, 0, O_BATCH},
        {"seq", required_argument, 0, O_SEQ}, {"weights", required_argument, 0, O_WEIGHTS},
        {"optim", required_argument, 0, O_OPTIM}, {"checkpoints", required_argument, 0, O_CKPT},
        {"act", required_argument, 0, O_ACT}, {"describe", no_argument, 0, O_DESCRIBE},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0},
    };
    *a = (SimArgs){.hw = "4090.ini", .model = "gpt3-175b", .batch = 8, .seq = 1024};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", opts, NULL)) != -1) {
        switch (c) {
        case O_HW: a->hw = optarg; break;
        case O_MODEL: a->model = optarg; break;
        case O_SET:
            if (a->n_sets == MAX_SETS) {
                fprintf(stderr, "fuyou-sim: at most %d --set options\n", MAX_SETS);
                return -EINVAL;
            }
            a->sets[a->n_sets++] = optarg;
            break;
        case O_BATCH:
            if (parse_positive("--batch", optarg, &a->batch))
                return -EINVAL;
            break;
        case O_SEQ:
            if (parse_positive("--seq", optarg, &a->seq))
                return -EINVAL;
            break;
        case O_WEIGHTS: a->tier_arg[0] = optarg; break;
        case O_OPTIM: a->tier_arg[1] = optarg; break;
        case O_CKPT: a->tier_arg[2] = optarg; break;
        case O_ACT: a->act = optarg; break;
        case O_DESCRIBE: break;
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

/* Applies --weights/--optim/--checkpoints/--act over the automatic placement. */
static int apply_placement_args(const SimArgs *a, Placement *p)
{
    Tier *fields[3] = {&p->weights, &p->optim, &p->checkpoints};
    static const char *names[3] = {"--weights", "--optim", "--checkpoints"};
    for (int i = 0; i < 3; i++)
        if (a->tier_arg[i] && strcmp(a->tier_arg[i], "auto") &&
            tier_parse(a->tier_arg[i], fields[i])) {
            fprintf(stderr, "fuyou-sim: %s expects gpu, cpu, ssd or auto, got '%s'\n", names[i],
                    a->tier_arg[i]);
            return -EINVAL;
        }
    if (a->act && strcmp(a->act, "auto")) {
        if (!strcmp(a->act, "all"))
            p->act = ACT_ALL;
        else if (!strcmp(a->act, "checkpoint"))
            p->act = ACT_CHECKPOINT;
        else {
            fprintf(stderr, "fuyou-sim: --act expects all, checkpoint or auto, got '%s'\n",
                    a->act);
            return -EINVAL;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    SimArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc > 0 ? 0 : 2;

    Err e;
    ModelConfig cfg;
    if (model_load(a.model, &cfg, &e)) {
        fprintf(stderr, "fuyou-sim: %s\n", e.msg);
        return 2;
    }
    Hardware hw;
    if (hw_load(a.hw, a.sets, a.n_sets, &hw, &e)) {
        fprintf(stderr, "fuyou-sim: %s\n", e.msg);
        return 2;
    }
    Graph g;
    rc = graph_init(&g, &cfg, a.batch, a.seq, &e);
    if (rc) {
        fprintf(stderr, "fuyou-sim: %s\n", e.msg);
        hw_free(&hw);
        return rc == -ENOMEM ? 1 : 2;
    }
    Placement p;
    footprint_auto_placement(&p, &g, &hw);
    rc = apply_placement_args(&a, &p);
    if (rc == 0) {
        describe_graph(stdout, &g);
        describe_footprint(stdout, &g, &hw, &p);
    }
    graph_free(&g);
    hw_free(&hw);
    return rc ? 2 : 0;
}
