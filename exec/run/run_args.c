/* run_args: fuyou-run's command line; see run_args.h. */
#include "run_args.h"

#include <assert.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends.h"
#include "checkpoint.h"
#include "config.h"
#include "cpu_backend.h"
#include "graph.h"
#include "hf_folder.h"
#include "options.h"
#include "plan.h"
#include "regfile.h"

/* The data a run reads when none is given: a text every Debian and Ubuntu system ships (the
 * table says so in --help). */
static const char *default_data = "/usr/share/common-licenses/GPL-3";

static void intro(FILE *out)
{
    fprintf(out,
"usage: fuyou-run [options]\n"
"Trains or fine-tunes a decoder LLM, GPT-2's block or the Llama family's (Llama 3, Qwen2,\n"
"Mistral). With no options: the tiny byte-level model on a text every Debian and Ubuntu\n"
"system ships, for 200 steps.\n"
"Fine-tuning a Hugging Face model: --model its folder (its weights load, as from_pretrained\n"
"loads them), --data the tokens tools/prepare_data.py wrote with its tokenizer\n"
"(docs/fine-tuning.md). Pretrained weights change the defaults to a fine-tune's. The first\n"
"lines say where the weights come from and every hyperparameter the run uses.\n"
"Every run is planned as fuyou-sim plans it for the same options and --hw and runs that\n"
"plan, with weights, optimizer states and activations on the device (all of them when they\n"
"fit), in CPU memory and on SSD; on the cpu backend the device is the host's memory and\n"
"cores (the fp32 reference, every copy and SSD transfer performed as on a GPU).\n"
"\n");
}

static void outro(FILE *out)
{
    fprintf(out,
"\n"
"Ctrl-C (SIGINT) or SIGTERM finishes the step in flight, saves it with --save and exits; a\n"
"second one ends the run at once.\n"
"Exit status: 0 success, 1 runtime failure, 2 usage or input error, 130 / 143 stopped by\n"
"SIGINT / SIGTERM.\n");
}

_Static_assert(TRAIN_MAX_STEPS == 1000000000, "options.c bounds --steps and --eval-every so");
_Static_assert(PIPE_OPTIM_NICE == 10, "options.c says --optimizer-nice's default");

/* The options resolved after parsing, as given. */
typedef struct Given {
    const char *backend, *model, *format, *dtype;
    bool set[OPT_N]; /* by option, whether the command line gave it */
} Given;

static bool given(const Given *gv, OptId option)
{
    return gv->set[option];
}

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

/* A file list option (--data, --eval-data) given once more. 0, or -EINVAL (printed). */
static int add_path(const char **paths, int *n, const char *v, const char *option)
{
    if (*n == DATA_MAX_ARGS) {
        fprintf(stderr, "fuyou-run: at most %d %s; name the files with a pattern instead "
                "('shards/train_*.bin', quoted)\n", DATA_MAX_ARGS, option);
        return -EINVAL;
    }
    paths[(*n)++] = v;
    return 0;
}

/* An --ssd-dir, checked before any work, whether or not the plan puts anything on the SSD.
 * 0, or -EINVAL (printed). */
static int add_ssd_dir(PipeConfig *pc, const char *v)
{
    const char *why;
    if (pc->n_ssd_dirs == STORE_MAX_DEVICES) {
        fprintf(stderr, "fuyou-run: at most %d --ssd-dir\n", STORE_MAX_DEVICES);
        return -EINVAL;
    }
    if ((why = dir_problem(v))) {
        fprintf(stderr, "fuyou-run: --ssd-dir %s: %s; give a directory we can write, one per "
                "SSD\n", v, why);
        return -EINVAL;
    }
    pc->ssd_dirs[pc->n_ssd_dirs++] = v;
    return 0;
}

/* Where take() keeps what it is given. */
typedef struct Taking {
    RunArgs *a;
    Given *gv;
} Taking;

/* One option (options.h), its value checked against the table already: 0, or -EINVAL
 * (printed). */
static int take(void *ctx, OptId id, const char *v, double num)
{
    RunArgs *a = ((Taking *)ctx)->a;
    Given *gv = ((Taking *)ctx)->gv;
    TrainOptions *o = &a->train;
    PipeConfig *pc = &a->pipe;
    if (id >= OPT_WEIGHTS && id <= OPT_OPTIM_STREAM_GROUPS) {
        plan_args_take(&a->plan, id - OPT_WEIGHTS, v, num);
        if (id == OPT_SUBGROUP)
            o->subgroup_blocks = (int)num;
        if (id == OPT_TAIL)
            o->tail_blocks = (int)num;
        return 0;
    }
    switch (id) {
    case OPT_BACKEND: gv->backend = v; break;
    case OPT_MODEL: gv->model = v; break;
    case OPT_DATA: return add_path(o->data_paths, &o->n_data, v, "--data");
    case OPT_EVAL_DATA: return add_path(o->eval_paths, &o->n_eval, v, "--eval-data");
    case OPT_EVAL_EVERY: o->eval_every = (int)num; break;
    case OPT_EVAL_BATCHES: o->eval_batches = (int64_t)num; break;
    case OPT_DATA_FORMAT: gv->format = v; break;
    case OPT_STEPS: o->steps = (int64_t)num; break;
    case OPT_BATCH: o->seqs_per_step = (int)num; break;
    case OPT_SEQ: o->seq = (int)num; break;
    case OPT_LR: o->lr = (float)num; break;
    case OPT_WARMUP: o->warmup = (int)num; break;
    case OPT_MIN_LR_RATIO: o->min_lr_ratio = (float)num; break;
    case OPT_WEIGHT_DECAY: o->weight_decay = (float)num; break;
    case OPT_BETA1: o->beta1 = (float)num; break;
    case OPT_BETA2: o->beta2 = (float)num; break;
    case OPT_EPS: o->eps = (float)num; break;
    case OPT_CLIP: o->clip = (float)num; break;
    case OPT_SEED: o->seed = (uint64_t)num; break;
    case OPT_SAVE: o->save_dir = v; break;
    case OPT_SAVE_EVERY: o->save_every = (int)num; break;
    case OPT_RESUME: o->resume_dir = v; break;
    case OPT_INIT_FROM: o->init_from = v; break;
    case OPT_LOG: o->log_path = v; break;
    case OPT_THREADS: o->threads = (int)num; break;
    case OPT_DTYPE: gv->dtype = v; break;
    case OPT_LOSS_SCALE: o->loss_scale = (float)num; break;
    case OPT_LOSS_SCALE_WINDOW: o->loss_scale_window = (int)num; break;
    case OPT_OVERWRITE: case OPT_FROM_SCRATCH: break; /* given[] says */
    case OPT_SAVE_WEIGHTS_ONLY: o->save_weights_only = true; break;
    case OPT_SAVE_TOTAL_LIMIT: o->save_total_limit = (int)num; break;
    case OPT_OFFLOAD: a->offload = true; break;
    case OPT_HW: a->hw_name = v; break;
    case OPT_GPU_MEM: pc->gpu_budget = (size_t)num; break;
    case OPT_CPU_MEM: pc->cpu_budget = (size_t)num; break;
    case OPT_SSD_DIR: return add_ssd_dir(pc, v);
    case OPT_TRACE: pc->trace_path = v; break;
    case OPT_CHROME: pc->chrome_path = v; break;
    case OPT_SEGMENT: pc->segment_iters = (int)num; break;
    case OPT_OPTIMIZER_NICE: pc->optim_nice = (int)num; break;
    case OPT_SWAP:
        if (plan_swap_parse(v, "fuyou-run", &a->swap, &a->swap_bytes))
            return -EINVAL;
        if (a->swap == SWAP_SWEEP) {
            fprintf(stderr, "fuyou-run: --swap sweep is fuyou-sim's (it predicts every "
                    "amount); run one amount\n");
            return -EINVAL;
        }
        break;
    default: assert(!"an option of fuyou-run's"); return -EINVAL;
    }
    return 0;
}

static const OptProgram program = {"fuyou-run", OPT_RUN, intro, outro, take};

void run_args_usage(FILE *out)
{
    opts_help(&program, out);
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
    if (data_format_parse(gv->format, &o->data_format))
        assert(!"--data-format: options.c's words are the formats");
    ModelNotice notice;
    if (model_load_noticed(gv->model, &o->model, &notice, &e)) {
        fprintf(stderr, "fuyou-run: %s\n", e.msg);
        return -EINVAL;
    }
    if (*notice.msg)
        fprintf(stderr, "fuyou-run: %s\n", notice.msg);
    if (!gv->dtype)
        return 0;
    DType d = DTYPE_BF16;
    if (dtype_parse(gv->dtype, &d) || d == DTYPE_FP32)
        assert(!"--dtype: options.c's words are bf16 and fp16");
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
    if (sched && !given(gv, OPT_STEPS))
        o->steps = sched;
    if (!hp.set)
        return;
    struct { OptId option; float *to; double from; } reals[] = {
        {OPT_LR, &o->lr, hp.lr}, {OPT_MIN_LR_RATIO, &o->min_lr_ratio, hp.min_lr_ratio},
        {OPT_WEIGHT_DECAY, &o->weight_decay, hp.weight_decay}, {OPT_BETA1, &o->beta1, hp.beta1},
        {OPT_BETA2, &o->beta2, hp.beta2}, {OPT_EPS, &o->eps, hp.eps},
        {OPT_CLIP, &o->clip, hp.clip}};
    for (size_t i = 0; i < sizeof reals / sizeof *reals; i++)
        if (!given(gv, reals[i].option))
            *reals[i].to = (float)reals[i].from;
    if (!given(gv, OPT_WARMUP))
        o->warmup = (int)hp.warmup;
    if (!given(gv, OPT_BATCH))
        o->seqs_per_step = (int)hp.batch;
    if (!given(gv, OPT_SEQ))
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
    if (given(gv, OPT_FROM_SCRATCH) && (o->init_from || o->resume_dir)) {
        fprintf(stderr, "fuyou-run: --from-scratch and %s both say where the weights come "
                "from; pick one\n", o->init_from ? "--init-from" : "--resume");
        return -EINVAL;
    }
    if (hf_model && !given(gv, OPT_FROM_SCRATCH) && !o->init_from && !o->resume_dir) {
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
        if (!given(gv, OPT_LR))
            o->lr = FINETUNE_LR;
        if (!given(gv, OPT_WARMUP))
            o->warmup = (int)(o->steps / 10 > 0 ? o->steps / 10 : 1);
        if (!given(gv, OPT_SEQ))
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
    if ((given(gv, OPT_EVAL_EVERY) || given(gv, OPT_EVAL_BATCHES)) && !o->n_eval) {
        fprintf(stderr, "fuyou-run: --eval-every and --eval-batches need --eval-data (the "
                "held-out tokens)\n");
        return -EINVAL;
    }
    /* a run must not move another run's latest back or replace its steps: a fresh run's
     * --save, or a resumed run's when it is not the directory resumed from */
    a->fresh_save = o->save_dir && (!o->resume_dir || !same_dir(o->save_dir, o->resume_dir));
    if (given(gv, OPT_OVERWRITE) && !a->fresh_save) {
        fprintf(stderr, "fuyou-run: --overwrite is for a --save directory other than the one "
                "resumed from: it needs --save\n");
        return -EINVAL;
    }
    o->overwrite = given(gv, OPT_OVERWRITE);
    int rc = check_paths(a);
    return rc ? rc : check_collisions(a, gv->model);
}

int run_args_parse(RunArgs *a, int argc, char **argv)
{
    set_defaults(a);
    Given gv = {.backend = "cpu", .model = "gpt2-tiny", .format = "auto"};
    int rc = opts_parse(&program, argc, argv, &(Taking){a, &gv}, gv.set);
    if (rc)
        return rc;
    if (!a->train.n_data)
        a->train.data_paths[a->train.n_data++] = default_data;
    rc = resolve_names(a, &gv);
    if (!rc)
        rc = resolve_weights(a, &gv);
    return rc ? rc : check_together(a, &gv);
}
