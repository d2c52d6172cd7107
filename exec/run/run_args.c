/* run_args: fuyou-run's command line; see run_args.h. */
#include "run_args.h"

#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends.h"
#include "checkpoint.h"
#include "config.h"
#include "gpt2_cpu.h"
#include "graph.h"
#include "hf_folder.h"
#include "plan.h"
#include "regfile.h"

static const char *default_data = "/usr/share/common-licenses/GPL-3";

void run_args_usage(FILE *out)
{
    fprintf(out,
"usage: fuyou-run [options]\n"
"Trains or fine-tunes a decoder LLM, GPT-2's block or the Llama family's (Llama 3, Qwen2,\n"
"Mistral). With no options: the tiny byte-level model on a text every Debian and Ubuntu\n"
"system ships (%s), for 200 steps.\n"
"Fine-tuning a Hugging Face model: --model its folder (its weights load, as from_pretrained\n"
"loads them), --data the tokens tools/prepare_data.py wrote with its tokenizer\n"
"(docs/fine-tuning.md). Pretrained weights change the defaults to a fine-tune's: --lr 1e-5,\n"
"warmup over a tenth of --steps, --seq the model's longest up to 1024. The first lines say\n"
"where the weights come from and every hyperparameter the run uses.\n"
"\n"
"  --backend NAME        cpu (the fp32 reference; default), or cuda when built with it\n"
"  --dtype T             cuda: bf16 (default); fp16 needs loss scaling, which the\n"
"                        executor does not do yet (refused)\n"
"  --loss-scale X        1 only (the executor does not scale losses yet; bf16 needs none)\n"
"  --loss-scale-window N refused with any --loss-scale but 1\n"
"  --model NAME|PATH     a preset (default gpt2-tiny; fuyou-sim --help lists them), a\n"
"                        model ini, or a Hugging Face folder or its config.json, whose\n"
"                        weights are loaded (a folder without weights needs --init-from or\n"
"                        --from-scratch)\n"
"  --from-scratch        random weights (GPT-2's initialisation, --seed) for a --model\n"
"                        folder that has weights; presets and model inis always start so\n"
"  --data FILE|PATTERN   tokens: NumPy .npy (uint16, uint32), llm.c .bin (uint16 or\n"
"                        uint32), nanoGPT uint16 .bin, or text (bytes: vocabulary 256 only);\n"
"                        repeatable, concatenated in order; a quoted pattern ('d/*.npy') is\n"
"                        expanded in name order; FILE.mask (X.mask.npy for X.npy) beside a\n"
"                        file masks its targets out of the loss\n"
"  --data-format F       auto (default), npy, llmc, u16, text\n"
"  --eval-data FILE|PATTERN  held-out tokens (as --data, repeatable): their loss and\n"
"                        perplexity after the last step, on the console and in --log's\n"
"                        eval_loss and eval_ppl columns; on every plan, streamed as\n"
"                        training is; --steps 0 evaluates the weights alone\n"
"  --eval-every K        evaluate after every K steps too\n"
"  --eval-batches N      evaluate the first N batches of the held-out files (default all)\n"
"  --steps N             the step count to reach (default 200, at most 1e9); with --resume,\n"
"                        runs the rest (default: the checkpoint's); 0: evaluate only\n"
"  --batch B             sequences per step (default 8)\n"
"  --micro-batches M     split each step's batch into M micro-batches, gradients accumulated\n"
"                        (M divides B; default auto: 1 in memory, with --offload the fewest\n"
"                        whose plan fits the budgets, as fuyou-sim picks)\n"
"  --seq T               tokens per sequence (default 64; fine-tuning: up to 1024)\n"
"  --lr X                peak learning rate (default 3e-3; fine-tuning: 1e-5)\n"
"  --warmup N            linear warmup steps (default 20; fine-tuning: --steps / 10), then\n"
"                        cosine decay\n"
"  --min-lr-ratio X      final learning rate over peak (default 0.1)\n"
"  --weight-decay X      AdamW decoupled weight decay (default 0.1)\n"
"  --beta1 X --beta2 X --eps X    AdamW (defaults 0.9, 0.95, 1e-8)\n"
"  --clip X              clip to this global norm, using the previous step's norm (default 1;\n"
"                        0 turns clipping off)\n"
"  --seed N              initialisation and data order (default 1337)\n"
"  --subgroup N          optimizer sub-group size in blocks (default 1)\n"
"  --tail N              blocks in the tail sub-group (default 1)\n"
"  --save DIR            write checkpoints to DIR: each step-N folder loads with\n"
"                        from_pretrained (weights in the model's own dtype, bf16 for a\n"
"                        bf16 model), beside the training state a resume needs (fp32\n"
"                        master weights, AdamW moments, state.json)\n"
"  --save-every K        every K steps as well as at the end\n"
"  --save-total-limit N  keep the newest N step folders, removing older ones\n"
"  --save-weights-only   the weights alone, no training state (a final export; not\n"
"                        resumable): an 8B model's checkpoint is 16 GB, not 112\n"
"  --overwrite           save into a --save DIR that holds another run's checkpoints:\n"
"                        they are removed before the first save (without it, refused)\n"
"  --resume DIR          continue from DIR's latest checkpoint, exactly, with the\n"
"                        hyperparameters it recorded unless given again\n"
"  --init-from PATH      start from Hugging Face weights other than --model's folder: a\n"
"                        model folder (config.json checked against --model), its\n"
"                        model.safetensors.index.json, or one .safetensors file;\n"
"                        checkpoints carry its tokenizer files\n"
"  --log FILE            TSV: step loss lr grad_norm tokens_per_s loss_scale (and\n"
"                        eval_loss eval_ppl with --eval-data)\n"
"  --threads N           CPU threads (default: all)\n"
"the plan: every run is planned as fuyou-sim plans it for the same options and --hw (the\n"
"same function) and runs that plan, the schedule's task DAG, with weights, optimizer\n"
"states and activations on the device (all of them when they fit), in CPU memory and on\n"
"SSD; on the cpu backend the device is the host's memory and cores (the fp32 reference,\n"
"every copy and SSD transfer performed as on a GPU):\n"
"  --hw NAME|PATH        hardware ini the plan is judged on (default h200.ini;\n"
"                        fuyou-sim's is 4090.ini: give both the same --hw to plan alike);\n"
"                        a device with less free than the ini says is planned as it is\n"
"  --gpu-mem BYTES       device budget, e.g. 24GiB; never exceeded (default: the ini's)\n"
"  --cpu-mem BYTES       host budget for pinned buffers and CPU-resident state\n"
"  --offload             accepted, changes nothing: every run is planned\n"
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
"  (states of the last N sub-groups in CPU memory, the rest on SSD), --optim-gpu-groups\n"
"  (the last N sub-groups' states and weights on the GPU, updated there),\n"
"  --optim-stream-groups (the N CPU-memory sub-groups before those updated on the GPU,\n"
"  their states streamed over PCIe; and --subgroup,\n"
"  --tail above); --swap auto|none|all|BYTES (the intra-block activations kept, in the\n"
"  planner's order, unless --act fixes them). Each option given is a constraint: the\n"
"  planner searches only what they leave open (--weights or --optim puts every sub-group's\n"
"  weights or states on that tier unless a count says otherwise), and a run whose options\n"
"  leave no plan that fits is refused, naming the option and the shortfall\n"
"  -h, --help, -V, --version\n"
"\n"
"Ctrl-C (SIGINT) or SIGTERM finishes the step in flight, saves it with --save and exits; a\n"
"second one ends the run at once.\n"
"Exit status: 0 success, 1 runtime failure, 2 usage or input error, 130 / 143 stopped by\n"
"SIGINT / SIGTERM.\n", default_data,
            PIPE_OPTIM_NICE);
}

/* The options, training's first, then the plan's and the pipeline's (O_OFFLOAD on). */
enum { O_BACKEND = 256, O_MODEL, O_DATA, O_FORMAT, O_EVAL, O_EVAL_EVERY, O_EVAL_BATCHES,
       O_STEPS, O_BATCH, O_SEQ, O_LR, O_WARMUP, O_MINLR, O_WD, O_B1, O_B2, O_EPS, O_CLIP, O_SEED,
       O_SUBGROUP, O_TAIL, O_SAVE,
       O_SAVE_EVERY, O_RESUME, O_INIT, O_LOG, O_THREADS, O_DTYPE, O_LSCALE, O_LWINDOW,
       O_OVERWRITE, O_FROM_SCRATCH, O_WEIGHTS_ONLY, O_TOTAL_LIMIT, O_OFFLOAD, O_HW, O_GPUMEM,
       O_CPUMEM, O_SSDDIR, O_TRACE, O_CHROME, O_SEGMENT, O_NICE, O_SWAP, O_PLAN };

static const struct option opts[] = {
    {"backend", 1, 0, O_BACKEND}, {"model", 1, 0, O_MODEL}, {"data", 1, 0, O_DATA},
    {"data-format", 1, 0, O_FORMAT}, {"eval-data", 1, 0, O_EVAL},
    {"eval-every", 1, 0, O_EVAL_EVERY}, {"eval-batches", 1, 0, O_EVAL_BATCHES},
    {"steps", 1, 0, O_STEPS}, {"batch", 1, 0, O_BATCH},
    {"seq", 1, 0, O_SEQ}, {"lr", 1, 0, O_LR}, {"warmup", 1, 0, O_WARMUP},
    {"min-lr-ratio", 1, 0, O_MINLR}, {"weight-decay", 1, 0, O_WD}, {"beta1", 1, 0, O_B1},
    {"beta2", 1, 0, O_B2}, {"eps", 1, 0, O_EPS}, {"clip", 1, 0, O_CLIP},
    {"seed", 1, 0, O_SEED}, {"subgroup", 1, 0, O_SUBGROUP}, {"tail", 1, 0, O_TAIL},
    {"save", 1, 0, O_SAVE}, {"save-every", 1, 0, O_SAVE_EVERY}, {"resume", 1, 0, O_RESUME},
    {"overwrite", 0, 0, O_OVERWRITE}, {"swap", 1, 0, O_SWAP},
    {"from-scratch", 0, 0, O_FROM_SCRATCH}, {"save-weights-only", 0, 0, O_WEIGHTS_ONLY},
    {"save-total-limit", 1, 0, O_TOTAL_LIMIT},
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
    {"optim-gpu-groups", 1, 0, O_PLAN}, {"optim-stream-groups", 1, 0, O_PLAN},
    {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'}, {0, 0, 0, 0},
};

/* The options resolved after parsing, as given. */
typedef struct Given {
    const char *backend, *model, *format, *dtype;
    bool overwrite, from_scratch;
    bool eval_options;   /* --eval-every or --eval-batches */
    bool set[O_PLAN - O_BACKEND + 1]; /* by option, whether the command line gave it */
} Given;

static bool given(const Given *gv, int option)
{
    return gv->set[option - O_BACKEND];
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

/* One training option with its value v: 0, or -EINVAL (printed). */
static int take_train(RunArgs *a, Given *gv, int c, const char *v)
{
    TrainOptions *o = &a->train;
    double x = 0;
    int bad = 0;
    switch (c) {
    case O_BACKEND: gv->backend = v; break;
    case O_MODEL: gv->model = v; break;
    case O_DATA:
    case O_EVAL: {
        bool train = c == O_DATA;
        int *n = train ? &o->n_data : &o->n_eval;
        if (*n == DATA_MAX_ARGS) {
            fprintf(stderr, "fuyou-run: at most %d %s; name the files with a pattern instead "
                    "('shards/train_*.bin', quoted)\n", DATA_MAX_ARGS,
                    train ? "--data" : "--eval-data");
            return -EINVAL;
        }
        (train ? o->data_paths : o->eval_paths)[(*n)++] = v;
        break;
    }
    case O_EVAL_EVERY: bad = whole("--eval-every", v, 1, TRAIN_MAX_STEPS, &x);
        o->eval_every = (int)x; gv->eval_options = true; break;
    case O_EVAL_BATCHES: bad = whole("--eval-batches", v, 1, 1e12, &x);
        o->eval_batches = (int64_t)x; gv->eval_options = true; break;
    case O_FORMAT: gv->format = v; break;
    case O_STEPS: bad = whole("--steps", v, 0, TRAIN_MAX_STEPS, &x); o->steps = (int64_t)x;
        break;
    case O_BATCH: bad = whole("--batch", v, 1, GRAPH_MAX_BATCH, &x); o->seqs_per_step = (int)x;
        break;
    case O_SEQ: bad = whole("--seq", v, 1, MODEL_MAX_SEQ, &x); o->seq = (int)x; break;
    case O_LR: bad = num("--lr", v, 0, 10, &x); o->lr = (float)x; break;
    case O_WARMUP: bad = whole("--warmup", v, 0, 1e9, &x); o->warmup = (int)x; break;
    case O_MINLR: bad = num("--min-lr-ratio", v, 0, 1, &x); o->min_lr_ratio = (float)x; break;
    case O_WD: bad = num("--weight-decay", v, 0, 10, &x); o->weight_decay = (float)x; break;
    case O_B1: bad = num("--beta1", v, 0, 0.999999, &x); o->beta1 = (float)x; break;
    case O_B2: bad = num("--beta2", v, 0, 0.999999, &x); o->beta2 = (float)x; break;
    case O_EPS: bad = num("--eps", v, 1e-30, 1, &x); o->eps = (float)x; break;
    case O_CLIP: bad = num("--clip", v, 0, 1e9, &x); o->clip = (float)x; break;
    case O_SEED: bad = whole("--seed", v, 0, 4e9, &x); o->seed = (uint64_t)x; break;
    case O_SUBGROUP: bad = whole("--subgroup", v, 1, PLAN_MAX_COUNT, &x);
        o->subgroup_blocks = a->plan.count[PC_SUBGROUP] = (int)x; break;
    case O_TAIL: bad = whole("--tail", v, 1, PLAN_MAX_COUNT, &x);
        o->tail_blocks = a->plan.count[PC_TAIL] = (int)x; break;
    case O_SAVE: o->save_dir = v; break;
    case O_SAVE_EVERY: bad = whole("--save-every", v, 1, INT_MAX, &x); o->save_every = (int)x;
        break;
    case O_RESUME: o->resume_dir = v; break;
    case O_INIT: o->init_from = v; break;
    case O_LOG: o->log_path = v; break;
    case O_THREADS: bad = whole("--threads", v, 1, 4096, &x); o->threads = (int)x; break;
    case O_DTYPE: gv->dtype = v; break;
    case O_LSCALE: bad = num("--loss-scale", v, 1.0 / 65536, 1e30, &x); o->loss_scale = (float)x;
        break;
    case O_LWINDOW: bad = whole("--loss-scale-window", v, 1, 1e9, &x);
        o->loss_scale_window = (int)x; break;
    case O_OVERWRITE: gv->overwrite = true; break;
    case O_FROM_SCRATCH: gv->from_scratch = true; break;
    case O_WEIGHTS_ONLY: o->save_weights_only = true; break;
    case O_TOTAL_LIMIT: bad = whole("--save-total-limit", v, 1, INT_MAX, &x);
        o->save_total_limit = (int)x; break;
    }
    gv->set[c - O_BACKEND] = true;
    return bad;
}

/* One option of the pipeline's or the plan's (name: its long name; --micro-batches serves both
 * trainers) with its value v: 0, or -EINVAL (printed). */
/* What keeps path from being a directory we can write in, or NULL. */
static const char *dir_problem(const char *path)
{
    struct stat sb;
    if (stat(path, &sb))
        return strerror(errno);
    if (!S_ISDIR(sb.st_mode))
        return "not a directory";
    return access(path, W_OK | X_OK) ? strerror(errno) : NULL;
}

static int take_plan(RunArgs *a, int c, const char *name, const char *v)
{
    const char *why;
    PipeConfig *pc = &a->pipe;
    double x = 0;
    int bad = 0;
    switch (c) {
    case O_OFFLOAD: a->offload = true; break;
    case O_HW: a->hw_name = v; break;
    case O_GPUMEM:
    case O_CPUMEM:
        bad = plan_budget_parse("fuyou-run", c == O_GPUMEM ? "--gpu-mem" : "--cpu-mem", v, &x);
        if (!bad) /* a refused value (1e20) is no size_t */
            *(c == O_GPUMEM ? &pc->gpu_budget : &pc->cpu_budget) = (size_t)x;
        break;
    case O_SSDDIR:
        if (pc->n_ssd_dirs == STORE_MAX_DEVICES) {
            fprintf(stderr, "fuyou-run: at most %d --ssd-dir\n", STORE_MAX_DEVICES);
            return -EINVAL;
        }
        /* checked before any work, whether or not the plan puts anything on the SSD */
        if ((why = dir_problem(v))) {
            fprintf(stderr, "fuyou-run: --ssd-dir %s: %s; give a directory we can write, one "
                    "per SSD\n", v, why);
            return -EINVAL;
        }
        pc->ssd_dirs[pc->n_ssd_dirs++] = v;
        break;
    case O_TRACE: pc->trace_path = v; break;
    case O_CHROME: pc->chrome_path = v; break;
    case O_SEGMENT: bad = whole("--segment", v, 1, 1e6, &x); pc->segment_iters = (int)x; break;
    case O_NICE: bad = whole("--optimizer-nice", v, 0, 19, &x); pc->optim_nice = (int)x; break;
    case O_SWAP:
        if (plan_swap_parse(v, "fuyou-run", &a->swap, &a->swap_bytes))
            return -EINVAL;
        if (a->swap == SWAP_SWEEP) {
            fprintf(stderr, "fuyou-run: --swap sweep is fuyou-sim's (it predicts every "
                    "amount); run one amount\n");
            return -EINVAL;
        }
        break;
    case O_PLAN: bad = plan_args_take(&a->plan, name, v, "fuyou-run") < 0; break;
    }
    return bad ? -EINVAL : 0;
}

static void set_defaults(RunArgs *a)
{
    *a = (RunArgs){.hw_name = "h200.ini", .swap = SWAP_AUTO,
                   .pipe = {.optim_nice = PIPE_OPTIM_NICE}};
    a->train = (TrainOptions){.seqs_per_step = 8, .seq = 64,
                              .steps = 200, .lr = 3e-3f, .min_lr_ratio = 0.1f,
                              .weight_decay = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                              .clip = 1.0f, .warmup = 20, .seed = 1337, .subgroup_blocks = 1,
                              .tail_blocks = 1, .progress = stdout};
    plan_args_init(&a->plan);
}

/* The backend, the data format, the model and its dtype, from the names given. */
static int resolve_names(RunArgs *a, const Given *gv)
{
    TrainOptions *o = &a->train;
    Err e;
    o->backend = backend_find(gv->backend);
    if (!o->backend) {
        fprintf(stderr, "fuyou-run: backend '%s' is not in this build (it has: cpu%s)\n",
                gv->backend, backend_find("cuda") ? ", cuda" : "");
        return -EINVAL;
    }
    if (data_format_parse(gv->format, &o->data_format)) {
        fprintf(stderr, "fuyou-run: --data-format expects auto, npy, llmc, u16 or text, got '%s'\n",
                gv->format);
        return -EINVAL;
    }
    ModelNotice notice;
    if (model_load_noticed(gv->model, &o->model, &notice, &e)) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return -EINVAL;
    }
    if (*notice.msg)
        fprintf(stderr, "fuyou-run: %s\n", notice.msg);
    if (!gv->dtype)
        return 0;
    DType d;
    if (dtype_parse(gv->dtype, &d) || d == DTYPE_FP32) {
        fprintf(stderr, "fuyou-run: --dtype expects bf16 or fp16, got '%s'\n", gv->dtype);
        return -EINVAL;
    }
    if (o->backend == &backend_cpu) {
        fprintf(stderr, "fuyou-run: --dtype %s needs --backend cuda: the cpu backend is the "
                "fp32 reference\n", gv->dtype);
        return -EINVAL;
    }
    o->model.dtype = d;
    return 0;
}

/* A fine-tune's defaults (the weights were trained already): a small peak rate, warmup over a
 * tenth of the steps, and sequences as long as the model takes up to FINETUNE_SEQ. */
#define FINETUNE_LR 1e-5f
#define FINETUNE_SEQ 1024

/* The options a resumed run does not give, from what its checkpoint recorded (the
 * hyperparameters, the --steps scheduled over): a resume goes on as the run it continues. */
static void resume_defaults(RunArgs *a, const Given *gv)
{
    TrainOptions *o = &a->train;
    TrainHparams hp;
    int64_t sched;
    ckpt_read_hparams(o->resume_dir, &hp, &sched);
    if (sched && !given(gv, O_STEPS))
        o->steps = sched;
    if (!hp.set)
        return;
    struct { int option; float *to; double from; } reals[] = {
        {O_LR, &o->lr, hp.lr}, {O_MINLR, &o->min_lr_ratio, hp.min_lr_ratio},
        {O_WD, &o->weight_decay, hp.weight_decay}, {O_B1, &o->beta1, hp.beta1},
        {O_B2, &o->beta2, hp.beta2}, {O_EPS, &o->eps, hp.eps}, {O_CLIP, &o->clip, hp.clip}};
    for (size_t i = 0; i < sizeof reals / sizeof *reals; i++)
        if (!given(gv, reals[i].option))
            *reals[i].to = (float)reals[i].from;
    if (!given(gv, O_WARMUP))
        o->warmup = (int)hp.warmup;
    if (!given(gv, O_BATCH))
        o->seqs_per_step = (int)hp.batch;
    if (!given(gv, O_SEQ))
        o->seq = (int)hp.seq;
}

/* Where the weights come from: --resume's checkpoint, --init-from's folder, the --model folder
 * itself when it holds weights (as from_pretrained loads them), or random ones, which a
 * Hugging Face folder must ask for (--from-scratch). Pretrained weights get a fine-tune's
 * defaults; a resume its checkpoint's; the checkpoints' weights dtype is the source's. */
static int resolve_weights(RunArgs *a, const Given *gv)
{
    TrainOptions *o = &a->train;
    char folder[4096];
    struct stat sb;
    size_t len = strlen(gv->model);
    /* model_load's reading of the name: a folder, or a config.json */
    bool hf_model = (!stat(gv->model, &sb) && S_ISDIR(sb.st_mode)) ||
                    (len >= 5 && !strcmp(gv->model + len - 5, ".json"));
    hf_folder_of(gv->model, folder, sizeof folder);
    if (gv->from_scratch && (o->init_from || o->resume_dir)) {
        fprintf(stderr, "fuyou-run: --from-scratch and %s both say where the weights come "
                "from; pick one\n", o->init_from ? "--init-from" : "--resume");
        return -EINVAL;
    }
    if (hf_model && !gv->from_scratch && !o->init_from && !o->resume_dir) {
        if (!hf_folder_has_weights(folder)) {
            fprintf(stderr, "fuyou-run: --model %s: the folder has a config.json and no "
                    "weights (%s or %s); give --init-from with them, or --from-scratch to "
                    "train from random weights\n", gv->model, HF_SINGLE_FILE, HF_INDEX_FILE);
            return -ENOENT;
        }
        snprintf(a->model_folder, sizeof a->model_folder, "%s", folder);
        o->init_from = a->model_folder;
    }
    o->save_dtype = o->model.dtype;
    char source[4200];
    DType d;
    if (o->resume_dir) {
        resume_defaults(a, gv);
        FILE *f = NULL;
        char name[64] = "";
        snprintf(source, sizeof source, "%s/latest", o->resume_dir);
        if ((f = fopen(source, "r"))) {
            if (fgets(name, sizeof name, f))
                name[strcspn(name, "\n")] = '\0';
            fclose(f);
        }
        snprintf(source, sizeof source, "%s/%s", o->resume_dir, name);
        if (name[0] && !hf_folder_dtype(source, &d))
            o->save_dtype = d;
    } else if (o->init_from) {
        hf_folder_of(o->init_from, source, sizeof source);
        if (source[0] && !hf_folder_dtype(source, &d))
            o->save_dtype = d;
        if (!given(gv, O_LR))
            o->lr = FINETUNE_LR;
        if (!given(gv, O_WARMUP))
            o->warmup = (int)(o->steps / 10 > 0 ? o->steps / 10 : 1);
        if (!given(gv, O_SEQ))
            o->seq = o->model.max_seq < FINETUNE_SEQ ? o->model.max_seq : FINETUNE_SEQ;
    }
    return 0;
}

/* Whether two paths name the same existing directory. */
static bool same_dir(const char *a, const char *b)
{
    struct stat x, y;
    return !stat(a, &x) && !stat(b, &y) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* What a run reads and writes, by name, for the checks that none is written over. */
typedef struct PathRole {
    const char *option; /* "--data" */
    char path[4200];    /* as canonical as it can be made (path_canon) */
} PathRole;

typedef struct PathRoles {
    PathRole in[4 * DATA_MAX_ARGS + 16], out[8 + STORE_MAX_DEVICES];
    int n_in, n_out;
} PathRoles;

/* path made absolute and free of links: realpath(3) when it exists, else its folder's and its
 * name (a file a run is about to create), else as given. */
static void path_canon(const char *path, char *out, size_t n)
{
    char buf[PATH_MAX], dir[PATH_MAX];
    if (realpath(path, buf)) {
        snprintf(out, n, "%s", buf);
        return;
    }
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path)
        snprintf(dir, sizeof dir, "/");
    if (realpath(dir, buf))
        snprintf(out, n, "%s/%s", strcmp(buf, "/") ? buf : "", slash ? slash + 1 : path);
    else
        snprintf(out, n, "%s", path);
}

static void add_role(PathRole *list, int *n, int cap, const char *option, const char *path)
{
    if (*n < cap) {
        list[*n].option = option;
        path_canon(path, list[*n].path, sizeof list[*n].path);
        (*n)++;
    }
}

/* The files a run reads: the token files (patterns expanded) and their masks, the files of
 * the folders weights come from, the model's and the hardware's ini. */
static void input_roles(const RunArgs *a, const char *model, PathRoles *r)
{
    const TrainOptions *o = &a->train;
    int cap = (int)(sizeof r->in / sizeof *r->in);
    for (int k = 0; k < o->n_data + o->n_eval; k++) {
        bool train = k < o->n_data;
        const char *pat = train ? o->data_paths[k] : o->eval_paths[k - o->n_data];
        glob_t g;
        if (glob(pat, GLOB_NOCHECK, NULL, &g))
            continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            char mask[4200];
            add_role(r->in, &r->n_in, cap, train ? "--data" : "--eval-data", g.gl_pathv[i]);
            data_mask_path(g.gl_pathv[i], mask, sizeof mask);
            add_role(r->in, &r->n_in, cap, train ? "a --data mask" : "an --eval-data mask", mask);
        }
        globfree(&g);
    }
    /* a folder's weights, config and tokenizer: every file in it */
    const char *folders[3][2] = {{"--model", model}, {"--init-from", o->init_from},
                                 {"--resume", o->resume_dir}};
    for (int f = 0; f < 3; f++) {
        const char *path = folders[f][1];
        struct stat sb;
        if (!path || stat(path, &sb))
            continue;
        if (!S_ISDIR(sb.st_mode)) {
            add_role(r->in, &r->n_in, cap, folders[f][0], path);
            continue;
        }
        char pat[4200];
        snprintf(pat, sizeof pat, "%s/*", path);
        glob_t g;
        if (glob(pat, 0, NULL, &g))
            continue;
        for (size_t i = 0; i < g.gl_pathc; i++)
            if (!stat(g.gl_pathv[i], &sb) && S_ISREG(sb.st_mode))
                add_role(r->in, &r->n_in, cap, folders[f][0], g.gl_pathv[i]);
        globfree(&g);
    }
    add_role(r->in, &r->n_in, cap, "--hw", a->hw_name);
}

/* No file a run writes is one it reads, or one another of its outputs writes: -EINVAL after
 * one line naming both options, else 0. */
static int check_collisions(const RunArgs *a, const char *model)
{
    const TrainOptions *o = &a->train;
    static PathRoles r;
    r.n_in = r.n_out = 0;
    int cap = (int)(sizeof r.out / sizeof *r.out);
    input_roles(a, model, &r);
    const char *outs[3][2] = {{"--log", o->log_path}, {"--trace", a->pipe.trace_path},
                              {"--chrome", a->pipe.chrome_path}};
    for (int i = 0; i < 3; i++)
        if (outs[i][1])
            add_role(r.out, &r.n_out, cap, outs[i][0], outs[i][1]);
    for (int i = 0; i < a->pipe.n_ssd_dirs; i++) {
        char store[4200];
        snprintf(store, sizeof store, "%s/%s", a->pipe.ssd_dirs[i], STORE_FILE_NAME);
        add_role(r.out, &r.n_out, cap, "--ssd-dir's store", store);
    }
    for (int i = 0; i < r.n_out; i++) {
        for (int k = 0; k < r.n_in; k++)
            if (!strcmp(r.out[i].path, r.in[k].path)) {
                fprintf(stderr, "fuyou-run: %s %s is an input of the run (%s): writing it "
                        "would destroy it; give another path\n", r.out[i].option,
                        r.out[i].path, r.in[k].option);
                return -EINVAL;
            }
        for (int k = 0; k < i; k++)
            if (!strcmp(r.out[i].path, r.out[k].path)) {
                fprintf(stderr, "fuyou-run: %s and %s both name %s; give each its own file\n",
                        r.out[k].option, r.out[i].option, r.out[i].path);
                return -EINVAL;
            }
    }
    return 0;
}

/* The paths a run writes, and the one it resumes from, checked before any work: a bad one is
 * found now, not at the first save after hours of training. 0, or -errno (printed). */
static int check_paths(const RunArgs *a)
{
    const TrainOptions *o = &a->train;
    const struct { const char *option, *path; bool dir; } out[] = {
        {"--save", o->save_dir, true},
        {"--log", o->log_path, false},
        {"--trace", a->pipe.trace_path, false},
        {"--chrome", a->pipe.chrome_path, false},
    };
    Err e;
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        int rc = out[i].path ? outpath_check(out[i].path, out[i].dir, &e) : 0;
        if (rc) {
            fprintf(stderr, "fuyou-run: %s %s\n", out[i].option, e.msg);
            return rc;
        }
    }
    struct stat st;
    int err = !o->resume_dir ? 0 : stat(o->resume_dir, &st) ? errno
                                 : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    if (err) {
        fprintf(stderr, "fuyou-run: --resume %s: %s; give the --save directory of the run to "
                "continue\n", o->resume_dir, err == ENOTDIR ? "not a directory" : strerror(err));
        return -err;
    }
    return 0;
}

/* What the options say together. */
static int check_together(RunArgs *a, const Given *gv)
{
    TrainOptions *o = &a->train;
    if (o->resume_dir && o->init_from) {
        fprintf(stderr, "fuyou-run: --resume and --init-from both give the weights; pick one\n");
        return -EINVAL;
    }
    if (o->seq > o->model.max_seq) {
        fprintf(stderr, "fuyou-run: --seq %d exceeds %s's max_seq %d\n", o->seq, o->model.name,
                o->model.max_seq);
        return -EINVAL;
    }
    /* --batch is the sequences of a step, in --micro-batches of equal size: the count given,
     * else plan_make's (the fewest whose plan fits) */
    o->n_micro = a->plan.count[PC_MICRO] > 0 ? a->plan.count[PC_MICRO] : 0;
    if (o->seqs_per_step % trainer_n_micro(o)) {
        fprintf(stderr, "fuyou-run: --micro-batches %d does not divide --batch %d (the sequences "
                "of a step); give a divisor of it\n", trainer_n_micro(o), o->seqs_per_step);
        return -EINVAL;
    }
    if (o->loss_scale != 0 && o->loss_scale != 1) {
        fprintf(stderr, "fuyou-run: --loss-scale %g: the executor does not scale losses yet "
                "(bf16 needs none); give 1 or leave it out\n", o->loss_scale);
        return -EINVAL;
    }
    if (o->loss_scale_window && o->loss_scale != 1) {
        fprintf(stderr, "fuyou-run: --loss-scale-window needs loss scaling, which the executor "
                "does not do yet\n");
        return -EINVAL;
    }
    if (o->backend != &backend_cpu && o->model.dtype == DTYPE_FP16) {
        fprintf(stderr, "fuyou-run: %s is fp16, which needs loss scaling; the executor does "
                "not scale losses yet: train it in bf16 (--dtype bf16)\n", o->model.name);
        return -EINVAL;
    }
    if (a->plan.act && a->swap != SWAP_AUTO) {
        fprintf(stderr, "fuyou-run: --act and --swap both decide the activations; give one\n");
        return -EINVAL;
    }
    if (o->steps == 0 && (!o->n_eval || (!o->init_from && !o->resume_dir))) {
        fprintf(stderr, "fuyou-run: --steps 0 evaluates without training: it needs "
                "--eval-data and weights (--model DIR, --init-from or --resume)\n");
        return -EINVAL;
    }
    if (o->steps == 0 && o->save_dir) {
        fprintf(stderr, "fuyou-run: --steps 0 trains nothing to save; leave --save out\n");
        return -EINVAL;
    }
    if (gv->eval_options && !o->n_eval) {
        fprintf(stderr, "fuyou-run: --eval-every and --eval-batches need --eval-data (the "
                "held-out tokens)\n");
        return -EINVAL;
    }
    /* a run must not move another run's latest back or replace its steps: a fresh run's
     * --save, or a resumed run's when it is not the directory resumed from */
    a->fresh_save = o->save_dir && (!o->resume_dir || !same_dir(o->save_dir, o->resume_dir));
    if (gv->overwrite && !a->fresh_save) {
        fprintf(stderr, "fuyou-run: --overwrite is for a --save directory other than the one "
                "resumed from: it needs --save\n");
        return -EINVAL;
    }
    o->overwrite = gv->overwrite;
    int rc = check_paths(a);
    return rc ? rc : check_collisions(a, gv->model);
}

/* What getopt returns beside the options: --help or --version (1, printed), or a usage error
 * (-EINVAL, printed). */
static int take_other(int c, char **argv)
{
    switch (c) {
    case 'h': run_args_usage(stdout); return 1;
    case 'V': printf("fuyou-run %s\n", FUYOU_VERSION); return 1;
    case ':':
        fprintf(stderr, "fuyou-run: %s needs a value; see fuyou-run --help\n", argv[optind - 1]);
        return -EINVAL;
    default:
        fprintf(stderr, "fuyou-run: unknown option '%s'; see fuyou-run --help\n",
                argv[optind - 1]);
        return -EINVAL;
    }
}

int run_args_parse(RunArgs *a, int argc, char **argv)
{
    set_defaults(a);
    Given gv = {.backend = "cpu", .model = "gpt2-tiny", .format = "auto"};
    int c, li = 0, rc = 0;
    opterr = 0;
    optind = 0; /* a fresh scan, also for a second call */
    while ((c = getopt_long(argc, argv, ":hV", opts, &li)) != -1) {
        if (c >= O_BACKEND && c < O_OFFLOAD)
            rc = take_train(a, &gv, c, optarg);
        else if (c >= O_OFFLOAD && c <= O_PLAN)
            rc = take_plan(a, c, opts[li].name, optarg);
        else
            return take_other(c, argv);
        if (rc)
            return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "fuyou-run: unexpected argument '%s'; see fuyou-run --help\n",
                argv[optind]);
        return -EINVAL;
    }
    if (!a->train.n_data)
        a->train.data_paths[a->train.n_data++] = default_data;
    rc = resolve_names(a, &gv);
    if (!rc)
        rc = resolve_weights(a, &gv);
    return rc ? rc : check_together(a, &gv);
}
