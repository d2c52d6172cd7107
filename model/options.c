/* options: the three programs' options, their parser and --help; see options.h. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "graph.h"
#include "hw.h"
#include "model.h"
#include "plan.h"
#include "units.h"

#define RUN OPT_RUN
#define SIM OPT_SIM
#define PROF OPT_PROFILE
#define BOTH (OPT_RUN | OPT_SIM)

/* The kinds of entry, by what they take. */
#define FLAG(p) .type = OPT_FLAG, .progs = (p)
#define TEXT(v, p) .type = OPT_TEXT, .value = (v), .progs = (p)
#define WORDS(v, w, p) .type = OPT_TEXT, .value = (v), .words = (w), .progs = (p)
#define WHOLE(v, l, h, p) .type = OPT_WHOLE, .value = (v), .lo = (l), .hi = (h), .progs = (p)
#define REAL(v, l, h, p) .type = OPT_REAL, .value = (v), .lo = (l), .hi = (h), .progs = (p)
#define BUDGET(p) .type = OPT_SIZE, .value = "BYTES", .lo = 1, .hi = HW_MAX_MEM_GIB * 0x1p30, \
    .example = "24GiB", .over = "a memory budget is at most %.0f GiB (1 PiB)", \
    .over_unit = 0x1p30, .progs = (p)
#define COUNT(l, h) WHOLE("N", l, h, BOTH)
#define TIER "gpu|cpu|ssd"

/* The sections of --help, each before its first option a program takes. */
static const char *const section[OPT_N] = {
    [OPT_HW] = "the machine:",
    [OPT_MODEL] = "the model and the data:",
    [OPT_LR] = "training (AdamW, linear warmup then cosine decay):",
    [OPT_SAVE] = "checkpoints (each step-N folder loads with from_pretrained, beside the state a "
                 "resume needs):",
    [OPT_POLICY] = "the plan: every option given is a constraint; the planner searches only "
                   "what they leave open, and a plan that does not fit is refused, naming the "
                   "option and the shortfall (fuyou-run runs the plan fuyou-sim predicts for "
                   "the same options and --hw):",
    [OPT_OFFLOAD] = "the pipeline:",
    [OPT_LOG] = "what is written:",
    [OPT_COST] = "cost (docs/fuyou-sim.md, \"What a run costs\"):",
    [OPT_QUICK] = "what is measured:",
};

const OptSpec opt_specs[OPT_N] = {
    [OPT_HW] = {"hw", TEXT("NAME|PATH", BOTH), .dflt = {"h200.ini", "4090.ini"},
        .help = "hardware ini the plan is made for: a preset (fuyou-sim --help lists them) or a "
                "file; give fuyou-sim and fuyou-run the same to plan alike"},
    [OPT_SET] = {"set", TEXT("SEC.KEY=VALUE", SIM),
        .help = "override one hardware key, repeatable (e.g. --set ssd.count=3)"},
    [OPT_GPU_MEM] = {"gpu-mem", BUDGET(BOTH), .dflt = {"the ini's", "the ini's"},
        .help = "the GPU memory a plan may use, e.g. 24GiB, nothing reserved; fuyou-run never "
                "exceeds it (fuyou-sim's --set gpu.mem_GiB=24 keeps the ini's gpu_reserved_GiB)"},
    [OPT_CPU_MEM] = {"cpu-mem", BUDGET(BOTH), .dflt = {"the ini's", "the ini's"},
        .help = "the same for host memory: pinned buffers and CPU-resident state"},
    [OPT_SSD_CAPACITY] = {"ssd-capacity", .type = OPT_SIZE, .value = "BYTES", .lo = 1,
        .hi = HW_MAX_SSD_GB * 1e9, .example = "2TB", .over = "at most %.0f TB",
        .over_unit = 1e12, .progs = SIM,
        .help = "the SSD space a plan may use, all devices together, e.g. 2TB (each device's "
                "[ssd] capacity_GB becomes BYTES / count; the rates stay); applied after "
                "--set. What-ifs: docs/what-if.md"},
    [OPT_SSD_DIR] = {"ssd-dir", TEXT("DIR", RUN | PROF),
        .dflt = {"a temporary directory, removed at the end", NULL, "the current directory"},
        .help = "a directory on an SSD, one per device, repeatable (striped)"},
    [OPT_THREADS] = {"threads", WHOLE("N", 1, 4096, RUN | PROF),
        .dflt = {"all", NULL, "the cores the pipeline gives the Adam task"},
        .help = "CPU threads (fuyou-profile: the Adam task's)"},

    [OPT_MODEL] = {"model", TEXT("NAME|PATH", BOTH), .dflt = {"gpt2-tiny", "gpt3-13b"},
        .help = "a preset (fuyou-sim --help lists them), a model ini, or a Hugging Face folder "
                "or its config.json, whose weights fuyou-run loads (a folder without weights "
                "needs --init-from or --from-scratch)"},
    [OPT_FROM_SCRATCH] = {"from-scratch", FLAG(RUN),
        .help = "random weights (GPT-2's initialisation, --seed) for a --model folder that has "
                "weights; presets and model inis always start so"},
    [OPT_BACKEND] = {"backend", TEXT("NAME", RUN), .dflt = {"cpu"},
        .help = "cpu (the fp32 reference), or cuda when built with it"},
    [OPT_DEVICE] = {"device", WORDS("D", "cuda|cpu", SIM), .dflt = {NULL, "cuda"},
        .help = "the executor's device the plan is for: cuda (its 16-bit buffers) or cpu "
                "(fuyou-run --backend cpu: the fp32 reference, whose device memory is the "
                "host's)"},
    [OPT_DTYPE] = {"dtype", WORDS("T", "bf16|fp16", RUN), .dflt = {"bf16"},
        .help = "cuda: fp16 needs loss scaling, which the executor does not do yet (refused)"},
    [OPT_LOSS_SCALE] = {"loss-scale", REAL("X", 1.0 / 65536, 1e30, RUN),
        .help = "1 only (the executor does not scale losses yet; bf16 needs none)"},
    [OPT_LOSS_SCALE_WINDOW] = {"loss-scale-window", WHOLE("N", 1, 1e9, RUN),
        .help = "refused with any --loss-scale but 1"},
    [OPT_DATA] = {"data", TEXT("FILE|PATTERN", RUN),
        .dflt = {"/usr/share/common-licenses/GPL-3"},
        .help = "tokens: NumPy .npy (uint16, uint32), llm.c .bin (uint16 or uint32), nanoGPT "
                "uint16 .bin, or text (bytes: vocabulary 256 only); repeatable, concatenated in "
                "order; a quoted pattern ('d/*.npy') is expanded in name order; FILE.mask "
                "(X.mask.npy for X.npy) beside a file masks its targets out of the loss"},
    [OPT_DATA_FORMAT] = {"data-format", WORDS("F", "auto|npy|llmc|u16|text", RUN),
        .dflt = {"auto"}, .help = "the --data files' format"},
    [OPT_EVAL_DATA] = {"eval-data", TEXT("FILE|PATTERN", RUN),
        .help = "held-out tokens (as --data, repeatable): their loss and perplexity after the "
                "last step, on the console and in --log's eval_loss and eval_ppl; on every plan, "
                "streamed as training is; --steps 0 evaluates the weights alone"},
    [OPT_EVAL_EVERY] = {"eval-every", WHOLE("K", 1, 1e9, RUN),
        .help = "evaluate after every K steps too"},
    [OPT_EVAL_BATCHES] = {"eval-batches", WHOLE("N", 1, 1e12, RUN), .dflt = {"all"},
        .help = "evaluate the first N batches of the held-out files"},
    [OPT_BATCH] = {"batch", WHOLE("N", 1, GRAPH_MAX_BATCH, BOTH), .dflt = {"8", "8"},
        .help = "sequences per step (an optimizer step), in --micro-batches of equal size"},
    [OPT_SEQ] = {"seq", WHOLE("T", 1, MODEL_MAX_SEQ, BOTH),
        .dflt = {"64; fine-tuning: the model's longest up to 1024", "1024, the paper's"},
        .help = "tokens per sequence"},
    [OPT_STEPS] = {"steps", WHOLE("N", 0, 1e9, RUN), .dflt = {"200"},
        .help = "the step count to reach; with --resume, runs the rest (default: the "
                "checkpoint's); 0: evaluate only"},
    [OPT_ITERS] = {"iters", WHOLE("N", 1, INT_MAX, SIM), .dflt = {NULL, "3"},
        .help = "iterations to simulate; N >= 2 reports the steady state (at most what 4 GiB of "
                "simulator memory holds, about 1460 for gpt3-175b)"},

    [OPT_LR] = {"lr", REAL("X", 0, 10, RUN), .dflt = {"3e-3; fine-tuning: 1e-5"},
        .help = "peak learning rate"},
    [OPT_WARMUP] = {"warmup", WHOLE("N", 0, 1e9, RUN), .dflt = {"20; fine-tuning: --steps / 10"},
        .help = "linear warmup steps, then cosine decay"},
    [OPT_MIN_LR_RATIO] = {"min-lr-ratio", REAL("X", 0, 1, RUN), .dflt = {"0.1"},
        .help = "final learning rate over peak"},
    [OPT_WEIGHT_DECAY] = {"weight-decay", REAL("X", 0, 10, RUN), .dflt = {"0.1"},
        .help = "AdamW decoupled weight decay"},
    [OPT_BETA1] = {"beta1", REAL("X", 0, 0.999999, RUN), .dflt = {"0.9"}, .help = "AdamW"},
    [OPT_BETA2] = {"beta2", REAL("X", 0, 0.999999, RUN), .dflt = {"0.95"}, .help = "AdamW"},
    [OPT_EPS] = {"eps", REAL("X", 1e-30, 1, RUN), .dflt = {"1e-8"}, .help = "AdamW"},
    [OPT_CLIP] = {"clip", REAL("X", 0, 1e9, RUN), .dflt = {"1"},
        .help = "clip to this global norm, using the previous step's norm; 0 turns clipping off"},
    [OPT_SEED] = {"seed", WHOLE("N", 0, 4e9, RUN), .dflt = {"1337"},
        .help = "initialisation and data order"},
    [OPT_SAVE] = {"save", TEXT("DIR", RUN),
        .help = "write checkpoints to DIR: the weights in the model's own dtype, beside the fp32 "
                "master weights, AdamW moments and state.json"},
    [OPT_SAVE_EVERY] = {"save-every", WHOLE("K", 1, INT_MAX, RUN),
        .help = "every K steps as well as at the end"},
    [OPT_SAVE_TOTAL_LIMIT] = {"save-total-limit", WHOLE("N", 1, INT_MAX, RUN),
        .help = "keep the newest N step folders, removing older ones"},
    [OPT_SAVE_WEIGHTS_ONLY] = {"save-weights-only", FLAG(RUN),
        .help = "the weights alone, no training state (a final export; not resumable): an 8B "
                "model's checkpoint is 16 GB, not 112"},
    [OPT_OVERWRITE] = {"overwrite", FLAG(RUN),
        .help = "save into a --save DIR that holds another run's checkpoints: they are removed "
                "before the first save (without it, refused)"},
    [OPT_RESUME] = {"resume", TEXT("DIR", RUN),
        .help = "continue from DIR's latest checkpoint, exactly, with the hyperparameters it "
                "recorded unless given again"},
    [OPT_INIT_FROM] = {"init-from", TEXT("PATH", RUN),
        .help = "start from Hugging Face weights other than --model's folder: a model folder "
                "(config.json checked against --model), its model.safetensors.index.json, or "
                "one .safetensors file; checkpoints carry its tokenizer files"},

    [OPT_POLICY] = {"policy", WORDS("P", "fuyou|zero-infinity", SIM), .dflt = {NULL, "fuyou"},
        .help = "zero-infinity runs DeepSpeed's defaults: states and, past 1e9 parameters, "
                "weights on SSD, sub-groups of 1e9 parameters, its buffer counts, checkpoints "
                "in CPU memory (the options below override)"},
    [OPT_SWAP] = {"swap", TEXT("auto|none|all|BYTES|sweep", BOTH), .dflt = {"auto", "auto"},
        .help = "intra-block activations kept (GPU, else swapped to CPU, else SSD) instead of "
                "recomputed: auto lets the planner choose the amount, sub-groups and buffers; "
                "none recomputes all; all keeps all; BYTES keeps that much (e.g. 12GiB) in the "
                "planner's order; sweep (fuyou-sim) prints closed-form and simulated time over "
                "the amounts"},
    [OPT_SWEEP_OUT] = {"sweep-out", TEXT("FILE", SIM),
        .help = "with --swap sweep: also write the table as TSV"},
    [OPT_WEIGHTS] = {"weights", WORDS("TIER", TIER, BOTH),
        .help = "home of the 16-bit weights: gpu, cpu, ssd (every sub-group's, unless a count "
                "below says otherwise)"},
    [OPT_OPTIM] = {"optim", WORDS("TIER", TIER, BOTH),
        .help = "home of the fp32 master weights and Adam m, v: gpu, cpu, ssd (every "
                "sub-group's, unless a count below says otherwise)"},
    [OPT_CHECKPOINTS] = {"checkpoints", WORDS("TIER", TIER, BOTH),
        .help = "block-boundary activations: gpu, cpu, ssd"},
    [OPT_ACT] = {"act", WORDS("WHERE", "recompute|" TIER, BOTH),
        .help = "every other kept activation: recompute, gpu, cpu, ssd (instead of --swap)"},
    [OPT_MICRO_BATCHES] = {"micro-batches", .type = OPT_WHOLE, .value = "N|auto", .lo = 1,
        .hi = PLAN_MAX_COUNT, .words = "auto", .progs = BOTH, .dflt = {"auto", "auto"},
        .help = "split the batch into N micro-batches, gradients accumulated (N divides "
                "--batch); auto: the fewest whose plan fits, more while they are faster"},
    [OPT_SUBGROUP] = {"subgroup", COUNT(1, PLAN_MAX_COUNT), .dflt = {"1", "1"},
        .help = "optimizer sub-group size in blocks"},
    [OPT_TAIL] = {"tail", COUNT(1, PLAN_MAX_COUNT), .dflt = {"1", "1"},
        .help = "blocks in the tail sub-group, updated last"},
    [OPT_PREFETCH] = {"prefetch", COUNT(0, PLAN_MAX_COUNT - 1), .dflt = {"1", "1"},
        .help = "weight and activation loads issued N blocks ahead"},
    [OPT_WEIGHT_BUFFERS] = {"weight-buffers", COUNT(1, PLAN_MAX_COUNT), .dflt = {"2", "2"},
        .help = "GPU buffers of one block's weights"},
    [OPT_PINNED_BUFFERS] = {"pinned-buffers", COUNT(1, PLAN_MAX_COUNT), .dflt = {"4", "4"},
        .help = "pinned CPU buffers for SSD weights"},
    [OPT_ACT_BUFFERS] = {"act-buffers", COUNT(1, PLAN_MAX_COUNT), .dflt = {"2", "2"},
        .help = "GPU buffers for a block's swapped activations"},
    [OPT_GRAD_BUFFERS] = {"grad-buffers", COUNT(1, PLAN_MAX_COUNT), .dflt = {"2", "2"},
        .help = "GPU buffers of one block's gradients"},
    [OPT_STATE_BUFFERS] = {"state-buffers", COUNT(1, PLAN_MAX_COUNT), .dflt = {"3", "3"},
        .help = "pinned CPU buffers of one sub-group's states"},
    [OPT_OPTIM_CPU_GROUPS] = {"optim-cpu-groups", COUNT(0, PLAN_MAX_COUNT),
        .help = "with --optim ssd, keep the last N sub-groups' states (the tail first) in CPU "
                "memory (default: with the states placed on SSD, as many as fit, or none where "
                "the planner finds that faster)"},
    [OPT_OPTIM_GPU_GROUPS] = {"optim-gpu-groups", COUNT(0, PLAN_MAX_COUNT),
        .help = "with the optimizer off the GPU, keep the last N sub-groups' states (the tail "
                "first), and their blocks' weights and gradients, on the GPU and update them "
                "there (one micro-batch only; default: the planner's fastest that fits)"},
    [OPT_OPTIM_STREAM_GROUPS] = {"optim-stream-groups", COUNT(0, PLAN_MAX_COUNT),
        .help = "of the sub-groups whose states are in CPU memory, update the last N (those "
                "before the GPU's) on the GPU: states streamed over PCIe and back, gradients "
                "kept there (needs --optim-gpu-groups >= 1 and the weights in CPU memory; "
                "default: the planner's fastest)"},

    [OPT_OFFLOAD] = {"offload", FLAG(RUN), .help = "accepted, changes nothing: every run is planned"},
    [OPT_SEGMENT] = {"segment", WHOLE("N", 1, 1e6, RUN), .dflt = {"8"},
        .help = "iterations per DAG run; checkpoints end a segment"},
    [OPT_OPTIMIZER_NICE] = {"optimizer-nice", WHOLE("N", 0, 19, RUN), .dflt = {"10"},
        .help = "the CPU optimizer's worker threads run N nice levels below the lanes that feed "
                "the device (0: the same level)"},

    [OPT_LOG] = {"log", TEXT("FILE", RUN),
        .help = "TSV: step loss lr grad_norm tokens_per_s loss_scale (and eval_loss eval_ppl "
                "with --eval-data)"},
    [OPT_TRACE] = {"trace", TEXT("FILE", BOTH),
        .help = "the timeline as TSV (traces/ schema, the schedule's task ids): fuyou-sim's "
                "predicted, fuyou-run's measured"},
    [OPT_CHROME] = {"chrome", TEXT("FILE", BOTH),
        .help = "the same as Chrome/Perfetto JSON, one lane per resource"},
    [OPT_DEPS] = {"deps", TEXT("FILE", SIM),
        .help = "the schedule's dependencies as TSV (for fuyou-trace compare --deps: the "
                "critical path of this and a measured trace)"},
    [OPT_DESCRIBE] = {"describe", FLAG(SIM),
        .help = "print the layer graph and the memory footprint instead"},

    [OPT_COST] = {"cost", FLAG(SIM),
        .help = "after the report, the machine's price ([price] of the ini), tokens/s and TFLOPS "
                "per 1000 US dollars, beside a Megatron-LM tensor-parallel baseline with all "
                "state on the GPUs of one node, and the ratio"},
    [OPT_TP_GPUS] = {"tp-gpus", WHOLE("N", 1, 1024, SIM), .dflt = {NULL, "8"},
        .help = "the baseline's GPUs"},
    [OPT_TP_HW] = {"tp-hw", TEXT("NAME|PATH", SIM), .dflt = {NULL, "a100-80g.ini"},
        .help = "the baseline's hardware ini: its [gpu] (with nvlink_GBps) and [price] gpu_usd, "
                "host_usd (the rest of the node)"},
    [OPT_TP_SET] = {"tp-set", TEXT("SEC.KEY=VALUE", SIM),
        .help = "override one key of the baseline's ini, repeatable (e.g. --tp-set "
                "gpu.mem_GiB=40)"},

    [OPT_QUICK] = {"quick", FLAG(PROF),
        .help = "seconds instead of minutes: smaller sizes, fewer repetitions"},
    [OPT_OUT] = {"out", TEXT("FILE", PROF), .dflt = {NULL, NULL, "standard output"},
        .help = "write the ini there"},
    [OPT_BASE] = {"base", TEXT("NAME|PATH", PROF), .dflt = {NULL, NULL, "h200.ini"},
        .help = "the description unmeasured keys come from"},
    [OPT_GIB] = {"gib", REAL("N", 0.001, 4096, PROF), .dflt = {NULL, NULL, "8, --quick 1"},
        .help = "GiB written and read per SSD test"},
    [OPT_NO_GPU] = {"no-gpu", FLAG(PROF), .help = "skip the GPU even when one is present"},
    [OPT_SSD_ONLY] = {"ssd-only", FLAG(PROF),
        .help = "measure the store alone, every other key as --base has it with its comment "
                "(e.g. an earlier fuyou-profile's ini: the disk measured again)"},
    [OPT_ADAM_ONLY] = {"adam-only", FLAG(PROF),
        .help = "the same for the Adam task alone at the pipeline's thread count (about a "
                "second): the rate of a CPU that drifts, measured again"},
    [OPT_GPU_ONLY] = {"gpu-only", FLAG(PROF),
        .help = "the same for the GPU alone (PCIe copies, GEMM and attention curves, "
                "memory-bound kernels; a minute or two): the GPU's keys after a change to its "
                "kernels"},
};

/* The index of value among s's words, or -1. */
static int word_index(const OptSpec *s, const char *value)
{
    const char *w = s->words;
    for (int i = 0; w && *w; i++) {
        size_t n = strcspn(w, "|");
        if (strlen(value) == n && !strncmp(w, value, n))
            return i;
        w += n + (w[n] == '|');
    }
    return -1;
}

/* s's words as a list: "a, b or c". */
static void say_words(const OptSpec *s, char *out, size_t n)
{
    const char *w = s->words;
    size_t at = 0;
    out[0] = '\0';
    while (*w && at < n) {
        size_t len = strcspn(w, "|");
        const char *next = w + len + (w[len] == '|');
        at += (size_t)snprintf(out + at, n - at, "%s%.*s", !at ? "" : *next ? ", " : " or ",
                               (int)len, w);
        w = next;
    }
}

/* A size: bytes with a unit ("24" alone is 24 bytes, no budget anyone means), within the
 * bounds. 0 or -EINVAL (printed). */
static int parse_size(const char *prog, const OptSpec *s, const char *v, double *bytes)
{
    char flag[40];
    snprintf(flag, sizeof flag, "--%s", s->name);
    if (units_parse_bytes(v, bytes) || *bytes < s->lo) {
        fprintf(stderr, "%s: %s expects a size such as %s, got '%s'\n", prog, flag, s->example,
                v);
        return -EINVAL;
    }
    size_t len = strlen(v);
    if (len && v[len - 1] >= '0' && v[len - 1] <= '9' && *bytes < 0x1p20) {
        fprintf(stderr, "%s: %s %s is %s bytes; give a unit: %sGiB (or %sGB, %sMiB)\n", prog,
                flag, v, v, v, v, v);
        return -EINVAL;
    }
    if (*bytes > s->hi) {
        char over[96];
        snprintf(over, sizeof over, s->over, s->hi / s->over_unit);
        fprintf(stderr, "%s: %s is %s; %s\n", prog, flag, v, over);
        return -EINVAL;
    }
    return 0;
}

int opts_value(const char *prog, OptId id, const char *v, double *num)
{
    const OptSpec *s = &opt_specs[id];
    char flag[40], list[160];
    snprintf(flag, sizeof flag, "--%s", s->name);
    int word = s->words ? word_index(s, v) : -1;
    *num = 0;
    if (word >= 0) {
        *num = -1 - word;
        return 0;
    }
    switch (s->type) {
    case OPT_FLAG:
        return 0;
    case OPT_TEXT:
        if (!s->words)
            return 0;
        say_words(s, list, sizeof list);
        fprintf(stderr, "%s: %s expects %s, got '%s'\n", prog, flag, list, v);
        return -EINVAL;
    case OPT_WHOLE: {
        int64_t x;
        if (units_parse_int(v, (int64_t)s->lo, (int64_t)s->hi, &x)) {
            fprintf(stderr, "%s: %s expects a whole number from %lld to %lld, got '%s'\n", prog,
                    flag, (long long)s->lo, (long long)s->hi, v);
            return -EINVAL;
        }
        *num = (double)x;
        return 0;
    }
    case OPT_REAL: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (end == v || *end || errno || !(x >= s->lo && x <= s->hi)) {
            fprintf(stderr, "%s: %s expects a number in [%g, %g], got '%s'\n", prog, flag, s->lo,
                    s->hi, v);
            return -EINVAL;
        }
        *num = x;
        return 0;
    }
    case OPT_SIZE:
        return parse_size(prog, s, v, num);
    }
    return -EINVAL;
}

/* The bit of p's program in dflt[]: 0 run, 1 sim, 2 profile. */
static int prog_index(unsigned mask)
{
    return mask == OPT_RUN ? 0 : mask == OPT_SIM ? 1 : 2;
}

int opts_parse(const OptProgram *p, int argc, char **argv, void *ctx, bool given[OPT_N])
{
    struct option longopts[OPT_N + 3];
    int n = 0;
    for (int i = 0; i < OPT_N; i++)
        if (opt_specs[i].progs & p->mask)
            longopts[n++] = (struct option){opt_specs[i].name,
                                            opt_specs[i].type == OPT_FLAG ? no_argument
                                                                          : required_argument,
                                            NULL, 256 + i};
    longopts[n++] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[n++] = (struct option){"version", no_argument, NULL, 'V'};
    longopts[n] = (struct option){0};
    if (given)
        memset(given, 0, OPT_N * sizeof *given);
    int c;
    opterr = 0;
    optind = 0; /* a fresh scan, also for a second call */
    while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
        if (c == 'h') {
            opts_help(p, stdout);
            return 1;
        }
        if (c == 'V') {
            printf("%s %s\n", p->name, FUYOU_VERSION);
            return 1;
        }
        if (c == ':' || c == '?') {
            fprintf(stderr, c == ':' ? "%s: %s needs a value; see %s --help\n"
                                     : "%s: unknown option '%s'; see %s --help\n",
                    p->name, argv[optind - 1], p->name);
            return -EINVAL;
        }
        OptId id = (OptId)(c - 256);
        double num;
        if (opts_value(p->name, id, optarg ? optarg : "", &num) ||
            p->take(ctx, id, optarg, num))
            return -EINVAL;
        if (given)
            given[id] = true;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'; see %s --help\n", p->name, argv[optind],
                p->name);
        return -EINVAL;
    }
    return 0;
}

/* Writes text from column `at` (where the line stands now), wrapped at OPTS_HELP_WIDTH with
 * continuation lines starting at column indent. */
static void wrap(FILE *out, const char *text, int at, int indent)
{
    const char *w = text;
    while (*w) {
        size_t len = strcspn(w, " ");
        if (at > indent && at + 1 + (int)len > OPTS_HELP_WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            at = indent;
        } else if (at > indent) {
            fputc(' ', out);
            at++;
        }
        fprintf(out, "%.*s", (int)len, w);
        at += (int)len;
        w += len;
        while (*w == ' ')
            w++;
    }
    fputc('\n', out);
}

void opts_help(const OptProgram *p, FILE *out)
{
    static const char *const prog_names[3] = {"fuyou-run", "fuyou-sim", "fuyou-profile"};
    int me = prog_index(p->mask);
    p->intro(out);
    for (int i = 0; i < OPT_N; i++) {
        const OptSpec *s = &opt_specs[i];
        if (!(s->progs & p->mask))
            continue;
        for (int k = i; k >= 0; k--) { /* the section this option opens, if it is the first */
            if (section[k]) {
                bool first = true;
                for (int j = k; j < i; j++)
                    first &= !(opt_specs[j].progs & p->mask);
                if (first)
                    wrap(out, section[k], 0, 2);
                break;
            }
        }
        char head[64], text[1024];
        int at = snprintf(head, sizeof head, "  --%s%s%s", s->name, s->value ? " " : "",
                          s->value ? s->value : "");
        int len = snprintf(text, sizeof text, "%s", s->help);
        if (s->dflt[me]) {
            len += snprintf(text + len, sizeof text - (size_t)len, " (default: %s", s->dflt[me]);
            for (int o = 0; o < 3; o++)
                if (o != me && s->dflt[o] && strcmp(s->dflt[o], s->dflt[me]))
                    len += snprintf(text + len, sizeof text - (size_t)len, "; %s's: %s",
                                    prog_names[o], s->dflt[o]);
            snprintf(text + len, sizeof text - (size_t)len, ")");
        }
        fputs(head, out);
        if (at + 1 >= OPTS_HELP_COLUMN) {
            fputc('\n', out);
            at = 0;
        }
        fprintf(out, "%*s", OPTS_HELP_COLUMN - at, "");
        wrap(out, text, OPTS_HELP_COLUMN, OPTS_HELP_COLUMN);
    }
    fprintf(out, "  -h, --help, -V, --version\n");
    p->outro(out);
}
