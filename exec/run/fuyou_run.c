/* fuyou-run: the real trainer: in memory on the CPU reference backend (fp32) or the CUDA backend
 * (bf16 or fp16 with dynamic loss scaling), or with --offload out of core, by running the
 * schedule's task DAG on the pipeline (exec/pipeline/pipeline.h) under memory budgets.
 * Exit codes: 0 success, 1 runtime failure, 2 usage or input error. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends.h"
#include "checkpoint.h"
#include "config.h"
#include "footprint.h"
#include "gpt2_cpu.h"
#include "hw.h"
#include "pipeline.h"
#include "plan_args.h"
#include "plan_make.h"
#include "planner.h"
#include "predict.h"
#include "trainer.h"
#include "units.h"

static const char *default_data = "/usr/share/common-licenses/GPL-3";

static void usage(FILE *out)
{
    fprintf(out,
"usage: fuyou-run [options]\n"
"Trains a GPT-2-style model. With no options: the tiny byte-level model on a text every\n"
"Debian and Ubuntu system ships (%s), for 200 steps.\n"
"\n"
"  --backend NAME        cpu (the fp32 reference; default), or cuda when built with it\n"
"  --dtype T             cuda: bf16 (default, or the model ini's dtype) or fp16\n"
"  --loss-scale X        initial loss scale; dynamic unless 1 (default 65536 for fp16, 1\n"
"                        otherwise): halved and the update skipped when gradients overflow\n"
"  --loss-scale-window N steps without overflow before the scale doubles (default 1000)\n"
"  --model NAME|PATH     a preset (default gpt2-tiny) or a model ini\n"
"  --data FILE           tokens: llm.c .bin, nanoGPT uint16 .bin, or text (bytes)\n"
"  --data-format F       auto (default), llmc, u16, text\n"
"  --steps N             the step count to reach (default 200, at most 1e9); with --resume,\n"
"                        runs the rest\n"
"  --batch B             sequences per step (default 8)\n"
"  --micro-batches M     split each step's batch into M micro-batches, gradients accumulated\n"
"                        (M divides B; default auto: 1 in memory, with --offload the fewest\n"
"                        whose plan fits the budgets, as fuyou-sim picks)\n"
"  --seq T               tokens per sequence (default 64)\n"
"  --lr X                peak learning rate (default 3e-3)\n"
"  --warmup N            linear warmup steps (default 20), then cosine decay\n"
"  --min-lr-ratio X      final learning rate over peak (default 0.1)\n"
"  --weight-decay X      AdamW decoupled weight decay (default 0.1)\n"
"  --beta1 X --beta2 X --eps X    AdamW (defaults 0.9, 0.95, 1e-8)\n"
"  --clip X              clip to this global norm, using the previous step's norm (default 1;\n"
"                        0 turns clipping off)\n"
"  --seed N              initialisation and data order (default 1337)\n"
"  --subgroup N          optimizer sub-group size in blocks (default 1)\n"
"  --tail N              blocks in the tail sub-group (default 1)\n"
"  --save DIR            write checkpoints (safetensors, Hugging Face names) to DIR\n"
"  --save-every K        every K steps as well as at the end\n"
"  --overwrite           save into a --save DIR that holds another run's checkpoints:\n"
"                        they are removed before the first save (without it, refused)\n"
"  --resume DIR          continue from DIR's latest checkpoint, exactly\n"
"  --init-from FILE      start from a model.safetensors (e.g. GPT-2 from the Hugging Face hub)\n"
"  --log FILE            TSV: step loss lr grad_norm tokens_per_s loss_scale\n"
"  --threads N           CPU threads (default: all)\n"
"out of core (--offload): run the schedule's task DAG with weights, optimizer states and\n"
"activations placed across device, CPU memory and SSD (cpu backend: the fp32 reference on\n"
"the CPU, every copy and SSD transfer performed as on a GPU):\n"
"  --offload             train out of core on the pipeline\n"
"  --hw NAME|PATH        hardware ini the placement is judged on (default h200.ini)\n"
"  --gpu-mem BYTES       device budget, e.g. 24GiB; never exceeded (default: the ini's)\n"
"  --cpu-mem BYTES       host budget for pinned buffers and CPU-resident state\n"
"  --ssd-dir DIR         where the SSD tier lives, repeatable (striped); default a\n"
"                        temporary directory, removed at the end\n"
"  --trace FILE          the measured timeline, TSV (the simulator's schema and task ids)\n"
"  --chrome FILE         the same as Chrome/Perfetto JSON\n"
"  --segment N           iterations per DAG run (default 8); checkpoints end a segment\n"
"  --optimizer-nice N    the CPU optimizer's worker threads run N nice levels below the\n"
"                        lanes that feed the device (0-19, default %d; 0: the same level)\n"
"  plan options, as fuyou-sim's: --weights --optim --checkpoints (cpu, ssd; gpu for\n"
"  checkpoints), --act (recompute, gpu, cpu, ssd), --prefetch, --weight-buffers,\n"
"  --pinned-buffers, --act-buffers, --grad-buffers, --state-buffers, --optim-cpu-groups\n"
"  (states of the last N sub-groups in CPU memory, the rest on SSD; and --subgroup,\n"
"  --tail above); --swap auto|none|all|BYTES (the intra-block activations kept, in the\n"
"  planner's order, unless --act fixes them); without any, the planner's plan for --hw\n"
"  and the budgets: always the plan fuyou-sim predicts for the same options\n"
"  -h, --help, -V, --version\n"
"\n"
"Exit status: 0 success, 1 runtime failure, 2 usage or input error.\n", default_data,
            PIPE_OPTIM_NICE);
}

static int num(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi)) {
        fprintf(stderr, "fuyou-run: %s expects a number in [%g, %g], got '%s'\n", opt, lo, hi, s);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* A whole-number option: parsed as fuyou-sim parses its own (plan_args_int, the same message). */
static int whole(const char *opt, const char *s, double lo, double hi, double *out)
{
    int64_t v;
    if (plan_args_int("fuyou-run", opt, s, (int64_t)lo, (int64_t)hi, &v))
        return -EINVAL;
    *out = (double)v;
    return 0;
}

/* Whether two paths name the same existing directory. */
static bool same_dir(const char *a, const char *b)
{
    struct stat x, y;
    return !stat(a, &x) && !stat(b, &y) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* --offload: the plan for the budgets, then the pipeline. */
static int run_offload(TrainOptions *o, const PlanArgs *pa, const char *swap_arg,
                       PipeConfig *pc, const char *hw_name)
{
    pc->device = device_find(o->backend->name);
    if (!pc->device) {
        fprintf(stderr, "fuyou-run: --offload has no %s device in this build\n",
                o->backend->name);
        return 2;
    }
    Err e = {""};
    /* a budget is what the plan may use: the ini's capacity, with nothing reserved */
    char sets[PLAN_BUDGET_SETS][PLAN_BUDGET_SET_LEN];
    const char *set[PLAN_BUDGET_SETS];
    PlanBudget budget = {(double)pc->gpu_budget, (double)pc->cpu_budget};
    int n_sets = plan_budget_sets(&budget, sets);
    for (int i = 0; i < n_sets; i++)
        set[i] = sets[i];
    ModelConfig gc = o->model;
    gc.dtype = pc->device->weight_type; /* the graph's bytes are what the device moves */
    Hardware hw;
    Graph g = {0};
    Plan p = {0};
    int status = 2;
    if (hw_load(hw_name, set, n_sets, &hw, &e)) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return 2;
    }
    /* the plan fuyou-sim makes from the same options (plan_make.h) */
    SwapMode swap = SWAP_AUTO;
    double swap_bytes = 0;
    if (plan_swap_parse(swap_arg, "fuyou-run", &swap, &swap_bytes))
        goto out;
    if (swap == SWAP_SWEEP) {
        fprintf(stderr, "fuyou-run: --swap sweep is fuyou-sim's (it predicts every amount); "
                "run one amount\n");
        goto out;
    }
    if (pa->act && swap != SWAP_AUTO) {
        fprintf(stderr, "fuyou-run: --act and --swap both decide the activations; give one\n");
        goto out;
    }
    PredictScoreCtx sc = {&hw, 0};
    PlanRequest rq = {.model = &gc, .batch = o->seqs_per_step, .seq = o->seq,
                      .policy = POLICY_FUYOU, .swap = swap, .swap_bytes = swap_bytes, .args = pa,
                      .score = predict_score, .score_ctx = &sc, .prog = "fuyou-run",
                      .lane_sizes = pipe_lane_sizes, .lane_ctx = pc->device};
    PlanInfo info;
    int made = plan_make(&rq, &hw, &g, &p, &info, &e);
    bool frugal = info.planned && info.choice.overflow;
    plan_make_free(&info);
    if (made)
        goto out;
    if (frugal)
        printf("fuyou-run: the planner found no configuration that fits %s; the most "
               "frugal one follows\n", hw_name);
    /* the pipeline keeps weights and optimizer states off the device: where the plan put
     * them on it without being asked to, they go to CPU memory */
    bool w_gpu = p.weights == TIER_GPU && !pa->weights, s_gpu = p.optim == TIER_GPU && !pa->optim;
    if (w_gpu || s_gpu) {
        printf("fuyou-run: everything fits on the GPU (training without --offload is faster); "
               "--offload keeps %s in CPU memory\n",
               w_gpu && s_gpu ? "weights and optimizer states"
               : w_gpu ? "the weights" : "the optimizer states");
        if (w_gpu)
            p.weights = TIER_CPU;
        if (s_gpu)
            p.optim = TIER_CPU;
    }
    if (plan_validate(&p, &e))
        goto out;
    char summary[512];
    printf("fuyou-run: %s (%lld parameters) on %s, batch %d x %d, out of core on the %s "
           "device\nplan: %s\n", o->model.name, (long long)model_param_count(&o->model),
           o->data_path, o->seqs_per_step, o->seq, pc->device->name,
           plan_summary(&p, &g, summary, sizeof summary));
    TrainResult r;
    PipeReport rep;
    int rc = pipe_train(o, &p, pc, &r, &rep, &e);
    free(r.losses);
    if (rc) {
        status = rc == -EINVAL || rc == -ENOENT || rc == -ENOSPC || rc == -EACCES ||
                 rc == -EROFS || rc == -ENOTDIR ? 2 : 1;
        goto out;
    }
    printf("fuyou-run: steps %lld..%lld, loss %.4f -> %.4f, %.0f tokens/s\n",
           (long long)r.first_step, (long long)r.last_step, r.first_loss, r.last_loss,
           r.tokens_per_s);
    pipe_report_print(stdout, &rep);
    status = 0;
out:
    if (status && e.msg[0])
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
    return status;
}

int main(int argc, char **argv)
{
    enum { O_BACKEND = 256, O_MODEL, O_DATA, O_FORMAT, O_STEPS, O_BATCH, O_SEQ, O_LR, O_WARMUP,
           O_MINLR, O_WD, O_B1, O_B2, O_EPS, O_CLIP, O_SEED, O_SUBGROUP, O_TAIL, O_SAVE,
           O_SAVE_EVERY, O_RESUME, O_INIT, O_LOG, O_THREADS, O_DTYPE, O_LSCALE, O_LWINDOW,
           O_OFFLOAD, O_HW, O_GPUMEM, O_CPUMEM, O_SSDDIR, O_TRACE, O_CHROME, O_SEGMENT, O_NICE,
           O_OVERWRITE, O_SWAP, O_PLAN };
    static const struct option opts[] = {
        {"backend", 1, 0, O_BACKEND}, {"model", 1, 0, O_MODEL}, {"data", 1, 0, O_DATA},
        {"data-format", 1, 0, O_FORMAT}, {"steps", 1, 0, O_STEPS}, {"batch", 1, 0, O_BATCH},
        {"seq", 1, 0, O_SEQ}, {"lr", 1, 0, O_LR}, {"warmup", 1, 0, O_WARMUP},
        {"min-lr-ratio", 1, 0, O_MINLR}, {"weight-decay", 1, 0, O_WD}, {"beta1", 1, 0, O_B1},
        {"beta2", 1, 0, O_B2}, {"eps", 1, 0, O_EPS}, {"clip", 1, 0, O_CLIP},
        {"seed", 1, 0, O_SEED}, {"subgroup", 1, 0, O_SUBGROUP}, {"tail", 1, 0, O_TAIL},
        {"save", 1, 0, O_SAVE}, {"save-every", 1, 0, O_SAVE_EVERY}, {"resume", 1, 0, O_RESUME},
        {"overwrite", 0, 0, O_OVERWRITE}, {"swap", 1, 0, O_SWAP},
        {"init-from", 1, 0, O_INIT}, {"log", 1, 0, O_LOG}, {"threads", 1, 0, O_THREADS},
        {"dtype", 1, 0, O_DTYPE}, {"loss-scale", 1, 0, O_LSCALE},
        {"loss-scale-window", 1, 0, O_LWINDOW}, {"offload", 0, 0, O_OFFLOAD},
        {"hw", 1, 0, O_HW}, {"gpu-mem", 1, 0, O_GPUMEM}, {"cpu-mem", 1, 0, O_CPUMEM},
        {"ssd-dir", 1, 0, O_SSDDIR}, {"trace", 1, 0, O_TRACE}, {"chrome", 1, 0, O_CHROME},
        {"segment", 1, 0, O_SEGMENT}, {"optimizer-nice", 1, 0, O_NICE},
        /* the plan options beside --subgroup and --tail (plan_args.h) */
        {"weights", 1, 0, O_PLAN}, {"optim", 1, 0, O_PLAN}, {"checkpoints", 1, 0, O_PLAN},
        {"act", 1, 0, O_PLAN}, {"micro-batches", 1, 0, O_PLAN}, {"prefetch", 1, 0, O_PLAN},
        {"weight-buffers", 1, 0, O_PLAN}, {"pinned-buffers", 1, 0, O_PLAN},
        {"act-buffers", 1, 0, O_PLAN}, {"grad-buffers", 1, 0, O_PLAN},
        {"state-buffers", 1, 0, O_PLAN}, {"optim-cpu-groups", 1, 0, O_PLAN},
        {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'}, {0, 0, 0, 0},
    };
    bool offload = false, overwrite = false;
    const char *hw_name = "h200.ini", *swap_arg = "auto";
    PipeConfig pc = {.optim_nice = PIPE_OPTIM_NICE};
    PlanArgs pa;
    plan_args_init(&pa);
    const char *backend = "cpu", *model = "gpt2-tiny", *format = "auto", *dtype = NULL;
    TrainOptions o = {.data_path = default_data, .seqs_per_step = 8, .seq = 64, .steps = 200,
                      .lr = 3e-3f, .min_lr_ratio = 0.1f, .weight_decay = 0.1f, .beta1 = 0.9f,
                      .beta2 = 0.95f, .eps = 1e-8f, .clip = 1.0f, .warmup = 20, .seed = 1337,
                      .subgroup_blocks = 1, .tail_blocks = 1, .progress = stdout};
    int c;
    double x;
    opterr = 0;
    int li;
    while ((c = getopt_long(argc, argv, ":hV", opts, &li)) != -1) {
        int bad = 0;
        switch (c) {
        case O_OFFLOAD: offload = true; break;
        case O_HW: hw_name = optarg; break;
        case O_GPUMEM:
        case O_CPUMEM: {
            double bytes;
            if (plan_budget_parse("fuyou-run", c == O_GPUMEM ? "--gpu-mem" : "--cpu-mem",
                                  optarg, &bytes))
                return 2;
            *(c == O_GPUMEM ? &pc.gpu_budget : &pc.cpu_budget) = (size_t)bytes;
            break;
        }
        case O_SSDDIR:
            if (pc.n_ssd_dirs == STORE_MAX_DEVICES) {
                fprintf(stderr, "fuyou-run: at most %d --ssd-dir\n", STORE_MAX_DEVICES);
                return 2;
            }
            pc.ssd_dirs[pc.n_ssd_dirs++] = optarg;
            break;
        case O_TRACE: pc.trace_path = optarg; break;
        case O_CHROME: pc.chrome_path = optarg; break;
        case O_SEGMENT: bad = whole("--segment", optarg, 1, 1e6, &x); pc.segment_iters = (int)x;
            break;
        case O_NICE: bad = whole("--optimizer-nice", optarg, 0, 19, &x); pc.optim_nice = (int)x;
            break;
        case O_SWAP: swap_arg = optarg; break;
        case O_PLAN: bad = plan_args_take(&pa, opts[li].name, optarg, "fuyou-run") < 0; break;
        case O_BACKEND: backend = optarg; break;
        case O_MODEL: model = optarg; break;
        case O_DATA: o.data_path = optarg; break;
        case O_FORMAT: format = optarg; break;
        case O_STEPS: bad = whole("--steps", optarg, 1, TRAIN_MAX_STEPS, &x); o.steps = (int64_t)x;
            break;
        case O_BATCH: bad = whole("--batch", optarg, 1, GRAPH_MAX_BATCH, &x);
            o.seqs_per_step = (int)x;
            break;
        case O_SEQ: bad = whole("--seq", optarg, 1, MODEL_MAX_SEQ, &x); o.seq = (int)x; break;
        case O_LR: bad = num("--lr", optarg, 0, 10, &x); o.lr = (float)x; break;
        case O_WARMUP: bad = whole("--warmup", optarg, 0, 1e9, &x); o.warmup = (int)x; break;
        case O_MINLR: bad = num("--min-lr-ratio", optarg, 0, 1, &x); o.min_lr_ratio = (float)x;
            break;
        case O_WD: bad = num("--weight-decay", optarg, 0, 10, &x); o.weight_decay = (float)x;
            break;
        case O_B1: bad = num("--beta1", optarg, 0, 0.999999, &x); o.beta1 = (float)x; break;
        case O_B2: bad = num("--beta2", optarg, 0, 0.999999, &x); o.beta2 = (float)x; break;
        case O_EPS: bad = num("--eps", optarg, 1e-30, 1, &x); o.eps = (float)x; break;
        case O_CLIP: bad = num("--clip", optarg, 0, 1e9, &x); o.clip = (float)x; break;
        case O_SEED: bad = whole("--seed", optarg, 0, 4e9, &x); o.seed = (uint64_t)x; break;
        case O_SUBGROUP: bad = whole("--subgroup", optarg, 1, PLAN_MAX_COUNT, &x);
            o.subgroup_blocks = pa.count[PC_SUBGROUP] = (int)x; break;
        case O_TAIL: bad = whole("--tail", optarg, 1, PLAN_MAX_COUNT, &x);
            o.tail_blocks = pa.count[PC_TAIL] = (int)x; break;
        case O_SAVE: o.save_dir = optarg; break;
        case O_SAVE_EVERY: bad = whole("--save-every", optarg, 1, INT_MAX, &x);
            o.save_every = (int)x; break;
        case O_RESUME: o.resume_dir = optarg; break;
        case O_OVERWRITE: overwrite = true; break;
        case O_INIT: o.init_from = optarg; break;
        case O_LOG: o.log_path = optarg; break;
        case O_THREADS: bad = whole("--threads", optarg, 0, 4096, &x); o.threads = (int)x; break;
        case O_DTYPE: dtype = optarg; break;
        case O_LSCALE: bad = num("--loss-scale", optarg, 1.0 / 65536, 1e30, &x);
            o.loss_scale = (float)x; break;
        case O_LWINDOW: bad = whole("--loss-scale-window", optarg, 1, 1e9, &x);
            o.loss_scale_window = (int)x; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("fuyou-run %s\n", FUYOU_VERSION); return 0;
        case ':':
            fprintf(stderr, "fuyou-run: %s needs a value; see fuyou-run --help\n",
                    argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "fuyou-run: unknown option '%s'; see fuyou-run --help\n",
                    argv[optind - 1]);
            return 2;
        }
        if (bad)
            return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "fuyou-run: unexpected argument '%s'; see fuyou-run --help\n",
                argv[optind]);
        return 2;
    }
    Err e;
    o.backend = backend_find(backend);
    if (!o.backend) {
        fprintf(stderr, "fuyou-run: backend '%s' is not in this build (it has: cpu%s)\n",
                backend, backend_find("cuda") ? ", cuda" : "");
        return 2;
    }
    if (data_format_parse(format, &o.data_format)) {
        fprintf(stderr, "fuyou-run: --data-format expects auto, llmc, u16 or text, got '%s'\n",
                format);
        return 2;
    }
    if (model_load(model, &o.model, &e)) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return 2;
    }
    if (dtype) {
        DType d;
        if (dtype_parse(dtype, &d) || d == DTYPE_FP32) {
            fprintf(stderr, "fuyou-run: --dtype expects bf16 or fp16, got '%s'\n", dtype);
            return 2;
        }
        if (o.backend == &backend_cpu) {
            fprintf(stderr, "fuyou-run: --dtype %s needs --backend cuda: the cpu backend is the "
                    "fp32 reference\n", dtype);
            return 2;
        }
        o.model.dtype = d;
    }
    if (o.resume_dir && o.init_from) {
        fprintf(stderr, "fuyou-run: --resume and --init-from both give the weights; pick one\n");
        return 2;
    }
    if (o.seq > o.model.max_seq) {
        fprintf(stderr, "fuyou-run: --seq %d exceeds %s's max_seq %d\n", o.seq, o.model.name,
                o.model.max_seq);
        return 2;
    }
    bool placed = pa.weights || pa.optim || pa.checkpoints || pa.act;
    for (int i = 0; i < PC_N; i++)
        placed |= i != PC_SUBGROUP && i != PC_TAIL && i != PC_MICRO && pa.count[i] >= 0;
    /* --batch is the sequences of a step, in --micro-batches of equal size: in memory, the
     * count given or one; with --offload, plan_make's (the fewest whose plan fits) */
    o.n_micro = pa.count[PC_MICRO] > 0 ? pa.count[PC_MICRO] : 0;
    int micro = trainer_n_micro(&o);
    if (o.seqs_per_step % micro) {
        fprintf(stderr, "fuyou-run: --micro-batches %d does not divide --batch %d (the sequences "
                "of a step); give a divisor of it\n", micro, o.seqs_per_step);
        return 2;
    }
    if (!offload && (placed || strcmp(swap_arg, "auto") || pc.gpu_budget || pc.cpu_budget ||
                     pc.n_ssd_dirs || pc.trace_path || pc.chrome_path || pc.segment_iters ||
                     pc.optim_nice != PIPE_OPTIM_NICE)) {
        fprintf(stderr, "fuyou-run: placement, budgets, --ssd-dir, traces and --optimizer-nice "
                "need --offload\n");
        return 2;
    }
    /* a run must not move another run's latest back or replace its steps: a fresh run's --save,
     * or a resumed run's when it is not the directory resumed from; checked once, here, before
     * either trainer starts */
    bool save_elsewhere = o.save_dir && (!o.resume_dir || !same_dir(o.save_dir, o.resume_dir));
    if (overwrite && !save_elsewhere) {
        fprintf(stderr, "fuyou-run: --overwrite is for a --save directory other than the one "
                "resumed from: it needs --save\n");
        return 2;
    }
    o.overwrite = overwrite;
    int ck = save_elsewhere ? ckpt_prepare_fresh(o.save_dir, false, &e) : 0;
    if (ck == -EEXIST && overwrite)
        ck = 0; /* removed before the first save (trainer_clear_old_checkpoints) */
    if (ck) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return ck == -EEXIST || ck == -ENOTDIR || ck == -EACCES ? 2 : 1;
    }
    if (offload)
        return run_offload(&o, &pa, swap_arg, &pc, hw_name);
    printf("fuyou-run: %s (%lld parameters) on %s, batch %d x %d", o.model.name,
           (long long)model_param_count(&o.model), o.data_path, o.seqs_per_step, o.seq);
    if (micro > 1)
        printf(" (%d micro-batches of %d)", micro, trainer_seqs_per_micro(&o));
    printf(", %s backend (%s)\n", o.backend->name,
           o.backend == &backend_cpu ? "fp32" : dtype_name(o.model.dtype));
    TrainResult r;
    int rc = trainer_run(&o, &r, &e);
    free(r.losses);
    if (rc) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return rc == -EINVAL || rc == -ENOENT ? 2 : 1;
    }
    printf("fuyou-run: steps %lld..%lld, loss %.4f -> %.4f, %.0f tokens/s", (long long)r.first_step,
           (long long)r.last_step, r.first_loss, r.last_loss, r.tokens_per_s);
    if (r.loss_scale != 1.0 || r.skipped)
        printf(", loss scale %g, %lld updates skipped on overflow", r.loss_scale,
               (long long)r.skipped);
    printf("\n");
    return 0;
}
