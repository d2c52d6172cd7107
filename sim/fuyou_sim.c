/* fuyou-sim: what-if planning. Predicts a training iteration of a model on a hardware
 * description under a plan (Fuyou or ZeRO-Infinity policy) by discrete-event simulation of the
 * same schedule the executor runs, or with --describe prints the layer graph and footprint.
 * Exit codes: 0 success, 1 runtime failure or a plan over capacity, 2 usage or input error. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "cost_report.h"
#include "describe.h"
#include "footprint.h"
#include "graph.h"
#include "hw.h"
#include "model.h"
#include "options.h"
#include "plan.h"
#include "plan_advice.h"
#include "plan_args.h"
#include "plan_make.h"
#include "planner.h"
#include "predict.h"
#include "sweep.h"
#include "trace.h"
#include "units.h"

enum { MAX_SETS = 64 };

typedef struct SimArgs {
    const char *hw, *model, *policy, *trace, *chrome, *deps, *swap, *sweep_out, *device;
    const char *sets[MAX_SETS];
    int n_sets;
    double gpu_bytes, cpu_bytes; /* --gpu-mem, --cpu-mem; 0: the ini's */
    double ssd_bytes;            /* --ssd-capacity; 0: the ini's */
    int batch, seq, iters;
    bool describe;
    PlanArgs plan;
    CostReportArgs cost;
} SimArgs;

static void intro(FILE *out)
{
    fprintf(out,
"usage: fuyou-sim [options]\n"
"Predicts one training iteration of a decoder LLM (GPT-2/GPT-3's block or the Llama family's)\n"
"on a hardware description by simulating the schedule the executor runs: iteration time,\n"
"TFLOPS, tokens/s, per-resource busy time and the bottleneck, memory per tier; optionally\n"
"the predicted timeline.\n"
"hardware presets: ");
    for (int i = 0; hw_preset_name(i); i++)
        fprintf(out, "%s%s", i ? ", " : "", hw_preset_name(i));
    fprintf(out, "\nmodel presets: ");
    for (int i = 0; i < model_preset_count(); i++)
        fprintf(out, "%s%s", model_preset_at(i)->name,
                i + 1 < model_preset_count() ? (i % 6 == 5 ? ",\n  " : ", ") : "\n");
    fputc('\n', out);
}

static void outro(FILE *out)
{
    fprintf(out,
"\n"
"Limits (docs/fuyou-sim.md, \"Limits\"): layers <= 1024, hidden and heads <= 131072, ffn <= 1048576,\n"
"vocab and max_seq <= 16777216; a micro-batch of at most 2^32 tokens whose activations, none\n"
"recomputed, stay within 1 PiB; every plan count <= 1048576; every hardware key in a plausible\n"
"range, named when a value falls outside it.\n"
"\n"
"Exit status: 0 success, 1 runtime failure or a plan over capacity, 2 usage or input error.\n");
}

/* One option (options.h), checked against the table already. */
static int take(void *ctx, OptId id, const char *v, double num)
{
    SimArgs *a = ctx;
    if (id >= OPT_WEIGHTS && id <= OPT_OPTIM_STREAM_GROUPS) {
        plan_args_take(&a->plan, id - OPT_WEIGHTS, v, num);
        return 0;
    }
    if (id >= OPT_COST && id <= OPT_TP_SET)
        return cost_report_take(&a->cost, id - OPT_COST, v, "fuyou-sim");
    switch (id) {
    case OPT_HW: a->hw = v; break;
    case OPT_MODEL: a->model = v; break;
    case OPT_POLICY: a->policy = v; break;
    case OPT_TRACE: a->trace = v; break;
    case OPT_DEPS: a->deps = v; break;
    case OPT_CHROME: a->chrome = v; break;
    case OPT_DESCRIBE: a->describe = true; break;
    case OPT_SWAP: a->swap = v; break;
    case OPT_DEVICE: a->device = v; break;
    case OPT_SWEEP_OUT: a->sweep_out = v; break;
    case OPT_BATCH: a->batch = (int)num; break;
    case OPT_SEQ: a->seq = (int)num; break;
    case OPT_ITERS: a->iters = (int)num; break; /* bounded by its memory (check_size) */
    case OPT_GPU_MEM: a->gpu_bytes = num; break;
    case OPT_CPU_MEM: a->cpu_bytes = num; break;
    case OPT_SSD_CAPACITY: a->ssd_bytes = num; break;
    case OPT_SET:
        if (a->n_sets == MAX_SETS) {
            fprintf(stderr, "fuyou-sim: at most %d --set options\n", MAX_SETS);
            return -EINVAL;
        }
        a->sets[a->n_sets++] = v;
        break;
    default: assert(!"an option of fuyou-sim's"); return -EINVAL;
    }
    return 0;
}

static const OptProgram program = {"fuyou-sim", OPT_SIM, intro, outro, take};

/* Returns 0 to go on, 1 when --help/--version was served, -EINVAL on a usage error. */
static int parse_args(int argc, char **argv, SimArgs *a)
{
    *a = (SimArgs){.hw = "4090.ini", .model = "gpt3-13b", .policy = "fuyou", .swap = "auto",
                   .device = "cuda", .batch = 8, .seq = 1024, .iters = 3};
    plan_args_init(&a->plan);
    cost_report_args_init(&a->cost);
    int rc = opts_parse(&program, argc, argv, a, NULL);
    if (rc)
        return rc;
    if (a->plan.act && strcmp(a->swap, "auto")) {
        fprintf(stderr, "fuyou-sim: --act and --swap both decide the activations; give one\n");
        return -EINVAL;
    }
    if (a->sweep_out && strcmp(a->swap, "sweep")) {
        fprintf(stderr, "fuyou-sim: --sweep-out needs --swap sweep\n");
        return -EINVAL;
    }
    return 0;
}

/* The planner's progress on stderr, for a search that takes long (a thousand layers in dozens
 * of micro-batches): on a terminal one line rewritten in place from PROGRESS_TTY_S on, at
 * most four times a second, and erased when the plan is made; elsewhere (a log) a line every
 * PROGRESS_LOG_S once that long has passed, so short runs print nothing. */
#define PROGRESS_TTY_S 1.0
#define PROGRESS_LOG_S 5.0

typedef struct Progress {
    double start_s, last_s;
    bool tty, shown;
} Progress;

static void progress_line(void *ctx, const PlanProgress *at)
{
    Progress *pg = ctx;
    double now = clock_monotonic_s();
    double first = pg->tty ? PROGRESS_TTY_S : PROGRESS_LOG_S;
    double every = pg->tty ? 0.25 : PROGRESS_LOG_S;
    if (now - pg->start_s < first || now - pg->last_s < every)
        return;
    pg->last_s = now;
    pg->shown = true;
    fprintf(stderr, "%splanner: %d micro-batch%s, %d/%d configurations searched",
            pg->tty ? "\r" : "", at->n_micro, at->n_micro == 1 ? "" : "es", at->searched,
            at->to_search);
    if (at->to_score)
        fprintf(stderr, ", %d/%d simulated", at->scored, at->to_score);
    fprintf(stderr, ", %.1f s%s", now - pg->start_s, pg->tty ? "\033[K" : "\n");
    fflush(stderr);
}

/* The CPU reference device's lane (--device cpu), as plan_make takes lane sizes. */
static void cpu_lane(const void *ctx, const ModelConfig *c, int B, int T, LaneSizes *out)
{
    (void)ctx;
    footprint_cpu_lane(c, B, T, out);
}

/* The request both programs plan from the same options (plan_make.h), scored by the
 * simulator, with what it points to. */
typedef struct SimRequest {
    ModelConfig lane_cfg;
    PredictScoreCtx sc;
    Progress pg;
    PlanRequest rq;
} SimRequest;

/* Fills r from a's options; r must not move while rq is used. 0 or -EINVAL (printed). */
static int sim_request(const SimArgs *a, const ModelConfig *cfg, SwapMode swap,
                       double swap_bytes, const Hardware *hw, SimRequest *r)
{
    Policy policy = POLICY_FUYOU;
    if (policy_parse(a->policy, &policy))
        assert(!"--policy: options.c's words are the policies");
    double now = clock_monotonic_s();
    r->sc = (PredictScoreCtx){hw, 0};
    r->pg = (Progress){.start_s = now, .last_s = now, .tty = isatty(STDERR_FILENO)};
    bool on_cpu = !strcmp(a->device, "cpu");
    r->lane_cfg = *cfg;
    if (on_cpu) /* the graph's bytes are what the device moves: fp32 */
        r->lane_cfg.dtype = DTYPE_FP32;
    r->rq = (PlanRequest){.model = &r->lane_cfg, .batch = a->batch, .seq = a->seq,
                          .policy = policy, .swap = swap, .swap_bytes = swap_bytes,
                          .args = &a->plan, .score = predict_score, .score_ctx = &r->sc,
                          .prog = "fuyou-sim", .progress = progress_line,
                          .progress_ctx = &r->pg, .lane_sizes = on_cpu ? cpu_lane : NULL};
    return 0;
}

/* The plan of r (plan_make.h) and the graph of its micro-batch. */
static int make_plan(SimRequest *r, const Hardware *hw, Graph *g, Plan *p, PlanInfo *info,
                     Err *e)
{
    int rc = plan_make(&r->rq, hw, g, p, info, e);
    if (r->pg.tty && r->pg.shown)
        fprintf(stderr, "\r\033[K");
    return rc;
}

/* What would make plan p fit, each change planned again (plan_advice.h), into buf; NULL when
 * it fits. A failure to advise (out of memory) is said in buf. */
static const char *to_fit(const SimRequest *r, const Hardware *hw, const Graph *g,
                          const Plan *p, char *buf, size_t n)
{
    if (plan_make_fits(g, hw, p))
        return NULL;
    PlanAdvice adv;
    Err e = {""};
    if (plan_advice_make(&r->rq, hw, g, p, &adv, &e))
        snprintf(buf, n, "no advice: %s", e.msg);
    else
        plan_advice_line(&adv, &r->rq, hw, g, buf, n);
    return buf;
}

static void report_swap(FILE *out, SwapMode swap, const PlanInfo *info, const Graph *g,
                        const Hardware *hw, const Plan *p, bool fits)
{
    double kept[TIER_COUNT] = {0};
    plan_inner_kept_bytes(p, g, kept);
    char k0[24], k1[24], k2[24];
    fprintf(out, "swap (%s): intra-block activations kept on gpu %s, swapped to cpu %s, to ssd "
            "%s", plan_swap_name(swap), units_bytes(k0, sizeof k0, kept[TIER_GPU]),
            units_bytes(k1, sizeof k1, kept[TIER_CPU]), units_bytes(k2, sizeof k2,
                                                                      kept[TIER_SSD]));
    if (info->have_ladder || info->planned)
        fprintf(out, " (%d of %d block-steps)", info->units,
                info->planned ? info->choice.units_total : planner_units(&info->ladder));
    fprintf(out, "\n");
    ClosedForm cf;
    cost_closed_form(hw, g, p, &cf);
    if (fits) { /* a plan that does not fit has no time, closed-form or simulated */
        fprintf(out, "closed form: %.3f s (", cf.iter_s);
        for (CfPhase ph = CF_FORWARD; ph <= CF_BACKWARD; ph++) {
            fprintf(out, "%s %.3f bound by %s", cf_phase_name(ph), cf.phase_s[ph],
                    resource_name(cf.binding[ph]));
            /* the GPU's load counts its waits on copies it cannot overlap: say how much */
            if (cf.binding[ph] == RES_GPU && cf.stall_s[ph] > 0)
                fprintf(out, " (%.3f s of it waiting on copies)", cf.stall_s[ph]);
            fprintf(out, ", ");
        }
        fprintf(out, "tail %.3f, fill %.3f)\n", cf.phase_s[CF_TAIL], cf.fill_s);
    }
    if (info->planned && info->choice.overflow) {
        fprintf(out, "planner: no configuration fits (sub-groups 1/2/4 blocks x 4 buffer sets "
                "x 3 or 2 state buffers x none, half or the most sub-groups updated on the GPU, "
                "the plan options over each); the one short of the fewest bytes is shown\n");
    } else if (info->planned) {
        const PlanChoice *c = &info->choice;
        fprintf(out, "planner: best of %d distinct configuration%s that fit%s (sub-groups 1/2/4 "
                "blocks x 4 buffer sets x 3 or 2 state buffers x none, half or the most "
                "sub-groups updated on the GPU, the plan options over each; ",
                c->configs_tried, c->configs_tried == 1 ? "" : "s",
                c->configs_tried == 1 ? "s" : "");
        if (c->configs_scored == c->configs_tried)
            fprintf(out, "each simulated)");
        else /* PLANNER_SCORE_TASKS */
            fprintf(out, "the %d the closed form rates fastest simulated, as many as %.0f "
                    "tasks an iteration allow)", c->configs_scored, PLANNER_SCORE_TASKS);
        if (c->gpu_counts_tried)
            fprintf(out, "; then %d count%s of sub-groups updated on the GPU around each "
                    "sub-group size's fastest, simulated", c->gpu_counts_tried,
                    c->gpu_counts_tried == 1 ? "" : "s");
        if (c->streams_tried)
            fprintf(out, "; then the best with %d count%s of its cpu-memory sub-groups streamed "
                    "to the GPU's AdamW, simulated", c->streams_tried,
                    c->streams_tried == 1 ? "" : "s");
        if (c->bind_below != c->bind_above)
            fprintf(out, "; at this amount backward is bound by %s, one block-step more and %s "
                    "would bind", resource_name(c->bind_below), resource_name(c->bind_above));
        else
            fprintf(out, "; backward is bound by %s", resource_name(c->bind_below));
        fprintf(out, "\n");
    }
}

/* --swap sweep: the closed form and the simulator over the ladder. */
static int print_sweep(FILE *out, const SimArgs *a, const Graph *g, const Hardware *hw,
                       Plan *p, PlanInfo *info, Err *e)
{
    if (!info->have_ladder)
        return err_set(e, -EINVAL, "--swap sweep: this plan has no activations to swap (%s)",
                       a->plan.act ? "--act fixes them" : "everything fits on the GPU");
    char summary[640];
    fprintf(out, "plan swept: %s\n", plan_summary(p, g, summary, sizeof summary));
    Sweep sw;
    int chosen = info->units;
    int rc = sweep_run(g, hw, p, &info->ladder, 201, &chosen, 1, &sw, e);
    if (rc)
        return rc;
    FILE *tsv = NULL;
    if (a->sweep_out && !(tsv = fopen(a->sweep_out, "w"))) {
        rc = err_set(e, -errno, "%s: cannot write: %s", a->sweep_out, strerror(errno));
        sweep_free(&sw);
        return rc;
    }
    if (tsv)
        fprintf(tsv, "swap_bytes\tunits\tclosed_form_s\tsim_time_s\tbottleneck\tfits\t"
                "planner\n");
    fprintf(out, "%14s %6s %14s %12s  %-10s\n", "swap", "units", "closed-form s", "simulated s",
            "bottleneck");
    for (int i = 0; i < sw.n; i++) {
        const SweepPoint *pt = &sw.pts[i];
        char b[24];
        fprintf(out, "%14s %6d %14.3f %12.3f  %-10s%s%s\n", units_bytes(b, sizeof b, pt->bytes),
                pt->units, pt->closed_s, pt->sim_s, resource_name(pt->bottleneck),
                pt->fits ? "" : "  (over capacity)", pt->units == chosen ? "  <- planner" : "");
        if (tsv)
            fprintf(tsv, "%.0f\t%d\t%.6f\t%.6f\t%s\t%d\t%d\n", pt->bytes, pt->units,
                    pt->closed_s, pt->sim_s, resource_name(pt->bottleneck), pt->fits,
                    pt->units == chosen);
    }
    const SweepPoint *mine = sweep_find(&sw, chosen);
    if (sw.best >= 0 && mine)
        fprintf(out, "planner's amount (%d units) simulates at %.3f s; the best point that fits "
                "(%d units) at %.3f s: regret %.2f%%\n", chosen, mine->sim_s,
                sw.pts[sw.best].units, sw.pts[sw.best].sim_s,
                100 * (mine->sim_s / sw.pts[sw.best].sim_s - 1));
    if (tsv && fclose(tsv))
        rc = err_set(e, -EIO, "%s: write failed", a->sweep_out);
    sweep_free(&sw);
    return rc;
}

/* Refuses, before anything is planned or simulated, a run whose schedules would need more than
 * SCHED_MAX_BYTES (sched_build would refuse it too, but cannot name the option): the planner and
 * --swap sweep simulate 2 iterations, the prediction --iters. Returns 0 or -EINVAL with e
 * naming the option to lower and how far. */
static int check_size(const SimArgs *a, const ModelConfig *c, int M, SwapMode swap, Err *e)
{
    int L = c->n_layer;
    const BlockArch *arch = model_arch(c);
    bool predicts = !a->describe && swap != SWAP_SWEEP;
    int iters = predicts && a->iters > 2 ? a->iters : 2;
    double need = sched_estimate_bytes(arch, L, M, iters);
    if (need <= SCHED_MAX_BYTES)
        return 0;
    char b1[24], b2[24], what[64];
    units_bytes(b1, sizeof b1, need);
    units_bytes(b2, sizeof b2, SCHED_MAX_BYTES);
    if (sched_estimate_bytes(arch, L, M, 2) <= SCHED_MAX_BYTES) {
        /* the estimate grows with the iterations: the most that fit */
        int lo = 2, hi = iters;
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            *(sched_estimate_bytes(arch, L, M, mid) <= SCHED_MAX_BYTES ? &lo : &hi) = mid;
        }
        return err_set(e, -EINVAL, "--iters %d would need about %s to simulate (%s: %d blocks x "
                       "%d micro-batch%s, up to %.0f tasks an iteration); at most %s: --iters %d "
                       "or fewer", a->iters, b1, c->name, L, M, M == 1 ? "" : "es",
                       sched_estimate_tasks(arch, L, M, 1), b2, lo);
    }
    if (M > 1 && sched_estimate_bytes(arch, L, 1, iters) <= SCHED_MAX_BYTES) {
        int lo = 1, hi = M;
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            *(sched_estimate_bytes(arch, L, mid, iters) <= SCHED_MAX_BYTES ? &lo : &hi) = mid;
        }
        snprintf(what, sizeof what, "%d iteration%s", iters, iters == 1 ? "" : "s");
        return err_set(e, -EINVAL, "--micro-batches %d would need about %s to simulate (%s of "
                       "%s: %d blocks); at most %s: --micro-batches %d or fewer", M, b1, what,
                       c->name, L, b2, lo);
    }
    return err_set(e, -EINVAL, "model %s (%d layers) would need about %s to simulate; at most "
                   "%s: fewer layers", c->name, L, b1, b2);
}

/* Whether fuyou-sim can write its output file `path` (option opt), checked before anything is
 * planned or simulated, so that a long run does not end on a path it cannot create: a regular
 * file (or none yet) is opened for writing without truncating it, and one this made is removed
 * again (the report writes it later); a directory is refused; a pipe or a device is left to
 * the writer (opening a FIFO would wait for its reader). 0, or -errno with e naming the path. */
static int check_out_path(const char *opt, const char *path, Err *e)
{
    struct stat st;
    bool existed = stat(path, &st) == 0;
    if (existed && S_ISDIR(st.st_mode))
        return err_set(e, -EISDIR, "%s %s: is a directory; give a file to write", opt, path);
    if (existed && !S_ISREG(st.st_mode))
        return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return err_set(e, -errno, "%s %s: cannot create it: %s", opt, path, strerror(errno));
    close(fd);
    if (!existed)
        unlink(path);
    return 0;
}

/* The output files of a, each checked with check_out_path. 0 or its -errno. */
static int check_out_paths(const SimArgs *a, Err *e)
{
    const struct { const char *opt, *path; } outs[] = {
        {"--trace", a->trace}, {"--chrome", a->chrome}, {"--deps", a->deps},
        {"--sweep-out", a->sweep_out},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        int rc = outs[i].path ? check_out_path(outs[i].opt, outs[i].path, e) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    SimArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc > 0 ? 0 : 2;

    Err e = {""};
    if (check_out_paths(&a, &e)) {
        fprintf(stderr, "fuyou-sim: %s\n", e.msg);
        return 2;
    }
    ModelConfig cfg;
    Hardware hw;
    Graph g = {0};
    Plan p = {0};
    Prediction pr = {0};
    PlanInfo info = {0};
    SwapMode swap;
    double swap_bytes = 0;
    int status = 2;
    if (model_load(a.model, &cfg, &e) || hw_load(a.hw, a.sets, a.n_sets, &hw, &e))
        goto out_msg;
    hw_set_budgets(&hw, a.gpu_bytes, a.cpu_bytes); /* after --set */
    if (a.ssd_bytes > 0)
        hw_set_ssd_bytes(&hw, a.ssd_bytes);
    if (cost_report_check(&a.cost, !a.describe && strcmp(a.swap, "sweep"), &hw, &e))
        goto out_hw;
    /* the size a given micro-batch count needs is checked before planning, the count the
     * search chose after (it tries at most PLAN_AUTO_MICRO_MAX) */
    int given = a.plan.count[PC_MICRO];
    if (plan_swap_parse(a.swap, "fuyou-sim", &swap, &swap_bytes) ||
        check_size(&a, &cfg, given > 0 ? given : 1, swap, &e))
        goto out_hw;
    SimRequest req;
    if (sim_request(&a, &cfg, swap, swap_bytes, &hw, &req))
        goto out_hw;
    rc = make_plan(&req, &hw, &g, &p, &info, &e);
    if (rc) {
        status = rc == -ENOMEM ? 1 : 2;
        goto out_hw;
    }
    if (check_size(&a, &cfg, p.n_micro, swap, &e))
        goto out_hw;
    if (swap == SWAP_SWEEP) {
        status = print_sweep(stdout, &a, &g, &hw, &p, &info, &e) ? 1 : 0;
        goto out_hw;
    }
    if (a.describe) {
        describe_graph(stdout, &g);
        describe_footprint(stdout, &g, &hw, &p);
        char advice[2048];
        if (to_fit(&req, &hw, &g, &p, advice, sizeof advice))
            printf("  to fit: %s\n", advice);
        status = 0;
        goto out_hw;
    }
    rc = predict_run(&pr, &g, &hw, &p, a.iters, &e);
    if (rc) {
        status = rc == -EINVAL ? 2 : 1; /* a plan or size sched_build refuses */
        goto out_hw;
    }
    char advice[2048];
    predict_report(stdout, &pr, &g, &hw, &p, to_fit(&req, &hw, &g, &p, advice, sizeof advice));
    report_swap(stdout, swap, &info, &g, &hw, &p, !pr.overflow);
    status = pr.overflow ? 1 : 0;
    if (a.cost.on && cost_report_print(stdout, &a.cost, &pr, &g, &p, &hw, &e))
        status = 1;
    if ((a.trace && predict_write_trace(&pr, a.trace, false, &e)) ||
        (a.chrome && predict_write_trace(&pr, a.chrome, true, &e)) ||
        (a.deps && trace_save_deps(a.deps, &pr.sched, &e)))
        status = 1;
    predict_free(&pr);
out_hw:
    plan_make_free(&info);
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
out_msg:
    if (e.msg[0] && status)
        fprintf(stderr, "fuyou-sim: %s\n", e.msg);
    return status;
}
