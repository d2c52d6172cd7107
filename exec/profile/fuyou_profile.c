/* fuyou-profile: measures this machine and writes a hardware ini (hw.h) that fuyou-sim and the
 * planner read. Every measured value carries a comment saying how, when and with what spread
 * it was measured; what is not measured here (the dense peak of the GPU, latencies, reserves)
 * comes from a base description (--base, a preset or a file) and says so. Here: the command
 * line, the CPU, host memory and the store, one function each, and the ini; the GPU's
 * measurements are profile_gpu.c's (profile_run.h, what both share).
 * Exit codes: 0 success, 1 a measurement failed, 2 usage or input error. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "cost.h"
#include "hw.h"
#include "model.h"
#include "options.h"
#include "plan.h"
#include "profile.h"
#include "profile_run.h"
#include "regfile.h"

enum { MAX_DIRS = 16 };

/* hw_write's comment of section.key: its note, else what the base says. */
static const char *lookup(void *ctx, const char *section, const char *key)
{
    ProfileNotes *ns = ctx;
    for (int i = ns->count - 1; i >= 0; i--)
        if (!strcmp(ns->n[i].section, section) && !strcmp(ns->n[i].key, key))
            return ns->n[i].text;
    /* the base's own word for it where it has one (an earlier profile's measurement); one
     * that already names the base it came from as it is */
    static char from[1200], said[1000];
    bool said_so = ns->base_text &&
                   hw_comment_in(ns->base_text, section, key, said, sizeof said) == 1;
    if (said_so && !strncmp(said, "[base ", 6))
        snprintf(from, sizeof from, "%s", said);
    else if (said_so)
        snprintf(from, sizeof from, "[base %s] %s", ns->base, said);
    else
        snprintf(from, sizeof from, "[base %s] not measured here", ns->base);
    return from;
}

static void intro(FILE *out)
{
    fprintf(out,
"usage: fuyou-profile [--quick] [--out FILE] [--base NAME|PATH] [--ssd-dir DIR]... [--gib N]\n"
"                     [--no-gpu] [--threads N] [--ssd-only | --adam-only | --gpu-only]\n"
"Measures this machine and writes a hardware ini for fuyou-sim --hw: the CPU Adam task's rate\n"
"by thread count and host memory bandwidth, the io_uring store's read, write and read + write\n"
"GB/s over every --ssd-dir (and over the first alone: whether the host path caps the stripes),\n"
"host memory, the micro-batch gradient sum, and with a GPU its memory, pinned PCIe copies\n"
"alone and both ways, the bf16 GEMM efficiency curve, the attention's efficiency by head\n"
"size, and the bandwidth and per-kernel time of memory-bound kernels. Other keys come from\n"
"--base.\n"
"\n");
}

static void outro(FILE *out)
{
    fprintf(out, "\nExit status: 0 success, 1 a measurement failed, 2 usage or input error.\n");
}

static void cpu_name(char *out, size_t n)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(out, n, "CPU");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(out, n, "%s", strchr(line, ':') + 2);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
}

static double mem_total_GiB(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %lf kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib / (1024.0 * 1024.0);
}


/* The command line. */
typedef struct ProfileArgs {
    bool quick, gpu, ssd_only, adam_only, gpu_only;
    const char *out_path, *base;
    const char *dirs[MAX_DIRS];
    int n_dirs, threads;
    double gib; /* 0: the default */
} ProfileArgs;

/* One option (options.h), its value checked against the table already: 0, or -EINVAL
 * (printed). */
static int take(void *ctx, OptId id, const char *v, double num)
{
    ProfileArgs *a = ctx;
    switch (id) {
    case OPT_QUICK: a->quick = true; break;
    case OPT_OUT: a->out_path = v; break;
    case OPT_BASE: a->base = v; break;
    case OPT_NO_GPU: a->gpu = false; break;
    case OPT_SSD_ONLY: a->ssd_only = true; break;
    case OPT_ADAM_ONLY: a->adam_only = true; break;
    case OPT_GPU_ONLY: a->gpu_only = true; break;
    case OPT_GIB: a->gib = num; break;
    case OPT_THREADS: a->threads = (int)num; break;
    case OPT_SSD_DIR:
        if (a->n_dirs == MAX_DIRS) {
            fprintf(stderr, "fuyou-profile: at most %d --ssd-dir\n", MAX_DIRS);
            return -EINVAL;
        }
        a->dirs[a->n_dirs++] = v;
        break;
    default: assert(!"an option of fuyou-profile's"); return -EINVAL;
    }
    return 0;
}

static const OptProgram program = {"fuyou-profile", OPT_PROFILE, intro, outro, take};

/* Parses argv into a: 0 to measure, 1 when --help or --version was printed, or -EINVAL
 * (printed). */
static int parse_args(int argc, char **argv, ProfileArgs *a)
{
    *a = (ProfileArgs){.gpu = true, .base = "h200.ini"};
    int rc = opts_parse(&program, argc, argv, a, NULL);
    if (rc)
        return rc;
    if (a->ssd_only + a->adam_only + a->gpu_only > 1) {
        fprintf(stderr, "fuyou-profile: --ssd-only, --adam-only and --gpu-only exclude each "
                "other (one can take another's ini as its --base)\n");
        return -EINVAL;
    }
    if (a->gpu_only && !a->gpu) {
        fprintf(stderr, "fuyou-profile: --gpu-only measures the GPU, which --no-gpu skips\n");
        return -EINVAL;
    }
    Err e;
    if (a->out_path && outpath_check(a->out_path, false, &e)) {
        fprintf(stderr, "fuyou-profile: --out %s\n", e.msg); /* before minutes of measuring */
        return -EINVAL;
    }
    if (!a->n_dirs)
        a->dirs[a->n_dirs++] = ".";
    for (int i = 0; i < a->n_dirs; i++) {
        struct stat sb;
        if (stat(a->dirs[i], &sb) || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "fuyou-profile: --ssd-dir %s: not a directory\n", a->dirs[i]);
            return -EINVAL;
        }
    }
    return 0;
}

/* Whether there is a GPU to measure (not with --no-gpu or --ssd-only); why not, when one was
 * looked for. */
static void probe_gpu(ProfileRun *p, const ProfileArgs *a)
{
#if FUYOU_HAVE_CUDA
    Err ge;
    p->have_gpu = a->gpu && !a->ssd_only && cudadev_probe(&p->gi, &ge) == 0;
    if (a->gpu && !a->ssd_only && !p->have_gpu)
        fprintf(stderr, "fuyou-profile: no GPU measured: %s\n", ge.msg);
#else
    (void)p, (void)a;
#endif
}

/* The base description, the day, the sizes. 0, or -EINVAL (printed); then nothing is held. */
static int profile_init(ProfileRun *p, const ProfileArgs *a)
{
    Err e = {""};
    *p = (ProfileRun){.quick = a->quick, .dirs = a->dirs, .n_dirs = a->n_dirs};
    if (hw_load(a->base, NULL, 0, &p->hw, &e)) {
        fprintf(stderr, "fuyou-profile: %s\n", e.msg);
        return -EINVAL;
    }
    p->ns.base = a->base;
    if (hw_description_text(a->base, &p->ns.base_text, &p->base_owned))
        p->ns.base_text = NULL; /* hw_load read it: only a race; its keys then say "not measured" */
    time_t now = time(NULL);
    strftime(p->day, sizeof p->day, "%Y-%m-%d", gmtime(&now));
    p->reps = a->quick ? 3 : 7;
    p->cores = sysconf(_SC_NPROCESSORS_ONLN);
    probe_gpu(p, a);
    p->used = a->threads ? a->threads : plan_adam_threads((int)p->cores, p->have_gpu);
    p->params = a->quick ? (size_t)16 << 20 : (size_t)128 << 20;
    p->ssd_bytes = (size_t)((a->gib > 0 ? a->gib : a->quick ? 1 : 8) * (double)(1u << 30));
    return 0;
}

static void profile_free(ProfileRun *p)
{
    free(p->base_owned);
    hw_free(&p->hw);
}

/* --adam-only: the pipeline's thread count, one burst; every other key from the base. */
static int measure_adam_only(ProfileRun *p, Err *e)
{
    Stat adam;
    int rc = profile_adam(p->used, p->params, p->reps, &adam, e);
    if (rc)
        return rc;
    p->hw.adam_Gparams_per_s = adam.median;
    profile_note(&p->ns, "cpu", "adam_Gparams_per_s", "[meas %s] norm + AdamW over %zu M params, "
                 "bf16 grads and weights, %d threads: median of %d, %.3f..%.3f (--adam-only)",
                 p->day, p->params >> 20, p->used, adam.n, adam.min, adam.max);
    fprintf(stderr, "fuyou-profile: the Adam task, %d threads: %.3f G params/s "
            "(%.3f..%.3f, %d runs)\n", p->used, adam.median, adam.min, adam.max, adam.n);
    return 0;
}

/* The pipeline's sum of micro-batch gradients, at its threads' count ([cpu] sum_GBps: without
 * it the cost model takes mem_GBps times their share of the cores, which the regression's
 * traces have at about three quarters of what 4 of 16 threads move; MEASUREMENTS.md). */
static int measure_grad_sum(ProfileRun *p, Err *e)
{
    Stat sum;
    int threads = plan_grad_sum_threads((int)p->cores);
    int rc = profile_grad_sum(threads, p->params, p->reps, &sum, e);
    if (rc)
        return rc;
    p->hw.cpu_sum_GBps = sum.median;
    profile_note(&p->ns, "cpu", "sum_GBps", "[meas %s] the pipeline's sum of a later "
                 "micro-batch's gradients into the step's, %d thread%s as the pipeline takes "
                 "here, %zu M bf16 gradients into fp32, %zu B each: median of %d, %.1f..%.1f",
                 p->day, threads, threads == 1 ? "" : "s", p->params >> 20,
                 grad_sum_bytes(dtype_bytes(DTYPE_BF16), false), sum.n, sum.min, sum.max);
    fprintf(stderr, "fuyou-profile: the micro-batch gradient sum, %d thread%s: %.1f GB/s "
            "(%.1f..%.1f, %d runs)\n", threads, threads == 1 ? "" : "s", sum.median, sum.min,
            sum.max, sum.n);
    return 0;
}

/* --gpu-only: the GPU's keys and the host memory's that the pipeline's copies and sums share
 * (mem_GBps, sum_GBps); every other key from the base. */
static int measure_gpu_only(ProfileRun *p, Err *e)
{
#if FUYOU_HAVE_CUDA
    if (p->have_gpu) {
        int rc = profile_run_gpu(p, e);
        return rc ? rc : measure_grad_sum(p, e);
    }
#else
    (void)p;
#endif
    return err_set(e, -ENODEV, "--gpu-only: no GPU to measure here");
}

/* The CPU's name and cores, and the Adam task by thread count (the ini keeps the pipeline's). */
static int measure_adam_threads(ProfileRun *p, Err *e)
{
    long cores = p->cores;
    cpu_name(p->hw.cpu_name, sizeof p->hw.cpu_name);
    p->hw.cpu_cores = (int)cores;
    profile_note(&p->ns, "cpu", "cores", "[meas %s] online CPUs", p->day);
    profile_note(&p->ns, "cpu", "name", "[meas %s] /proc/cpuinfo", p->day);
    fprintf(stderr, "fuyou-profile: Adam task over %zu M parameters by thread count\n",
            p->params >> 20);
    for (int t = 1; t <= cores; t = t * 2 <= cores || t == cores ? t * 2 : (int)cores) {
        Stat s;
        int rc = profile_adam(t, p->params, p->reps, &s, e);
        if (rc)
            return rc;
        fprintf(stderr, "  %3d threads: %.3f G params/s (%.3f..%.3f, %d runs)\n", t, s.median,
                s.min, s.max, s.n);
        if (t == cores)
            break;
    }
    return 0;
}

/* Host memory: a parallel memcpy, the most it moves (mem_GBps, raised later where the Adam
 * beside copies one way moves more), and its size. */
static int measure_memory(ProfileRun *p, Err *e)
{
    size_t bytes = p->quick ? (size_t)256 << 20 : (size_t)2 << 30;
    int rc = profile_memory((int)p->cores, bytes, p->reps, &p->mem, e);
    if (rc)
        return rc;
    p->hw.cpu_mem_GBps = p->mem.median;
    profile_note(&p->ns, "cpu", "mem_GBps", "[meas %s] parallel memcpy of %s, read + written: "
                 "median of %d, %.1f..%.1f", p->day, p->quick ? "256 MiB" : "2 GiB", p->mem.n,
                 p->mem.min, p->mem.max);
    p->hw.cpu_mem_GiB = mem_total_GiB();
    profile_note(&p->ns, "memory", "cpu_mem_GiB", "[meas %s] MemTotal", p->day);
    return 0;
}

/* The CPU and host memory, before the store's tests. */
static int measure_host(ProfileRun *p, Err *e)
{
    int rc = measure_adam_threads(p, e);
    /* the pipeline's thread count, sampled now and again after the store's tests: the H200
     * machine's CPU drifts (the same 7 runs: 2.81 G params/s, then 2.34 later in the same
     * program, and 2.58 in another three minutes on), and one burst took whichever it met */
    if (!rc)
        rc = profile_adam_runs(p->used, p->params, p->reps, p->adam_x, e);
    if (!rc)
        rc = measure_memory(p, e);
    if (!rc)
        rc = measure_grad_sum(p, e);
    return rc;
}

/* The [ssd] keys' comments, from the store measured over every directory (sp). */
static void note_ssd(ProfileRun *p, const SsdProfile *sp, double scaling)
{
    ProfileNotes *ns = &p->ns;
    const char *day = p->day, *how = sp->direct ? "O_DIRECT" : "buffered (no O_DIRECT here)";
    profile_note(ns, "ssd", "count", "[meas %s] store directories", day);
    profile_note(ns, "ssd", "read_GBps", "[meas %s] store, %s, 256 MiB requests two in flight "
                 "(4 MiB pieces QD 32) through locked buffers; in all: median %.2f of %d, "
                 "%.2f..%.2f GB/s (the key: per directory)", day, how, sp->read_GBps.median,
                 sp->read_GBps.n, sp->read_GBps.min, sp->read_GBps.max);
    profile_note(ns, "ssd", "write_GBps", "[meas %s] the same, writing: %.2f..%.2f GB/s in all",
                 day, sp->write_GBps.min, sp->write_GBps.max);
    profile_note(ns, "ssd", "duplex_factor", "[meas %s] read %.2f + write %.2f GB/s together over "
                 "alone (1: they share, 2: independent)", day, sp->duplex_read_GBps.median,
                 sp->duplex_write_GBps.median);
    profile_note(ns, "ssd", "read_bidir_GBps", "[meas %s] a tensor read while another is written, "
                 "each two requests in flight: median of %d, %.2f..%.2f GB/s in all (the key: per "
                 "directory); the model takes these over duplex_factor's shares", day,
                 sp->duplex_read_GBps.n, sp->duplex_read_GBps.min, sp->duplex_read_GBps.max);
    profile_note(ns, "ssd", "write_bidir_GBps", "[meas %s] the same, writing: %.2f..%.2f GB/s in "
                 "all", day, sp->duplex_write_GBps.min, sp->duplex_write_GBps.max);
    if (p->hw.ssd_host_GBps > 0)
        profile_note(ns, "ssd", "host_GBps", "[meas %s] the most the store moved over the %d "
                     "directories together, %.2f of %d times what %s moved alone: the host path "
                     "binds", day, p->n_dirs, scaling, p->n_dirs, p->dirs[0]);
    profile_note(ns, "ssd", "capacity_GB", "[meas %s] free space, least of the directories", day);
}

/* The store over every directory and, with several, over the first alone: whether they scale
 * or the host path binds. */
static int measure_store(ProfileRun *p, Err *e)
{
    int n = p->n_dirs, reps = p->quick ? 1 : 3;
    fprintf(stderr, "fuyou-profile: the store over %d director%s, %.1f GiB per test\n", n,
            n == 1 ? "y" : "ies", p->ssd_bytes / 1073741824.0);
    SsdProfile sp, one;
    int rc = profile_ssd(p->dirs, n, p->ssd_bytes, reps, &sp, e);
    if (rc)
        return rc;
    if (n > 1) {
        fprintf(stderr, "fuyou-profile: the store over %s alone\n", p->dirs[0]);
        rc = profile_ssd(p->dirs, 1, p->ssd_bytes, reps, &one, e);
        if (rc)
            return rc;
    }
    double scaling = profile_ssd_keys(&sp, n > 1 ? &one : NULL, n, &p->hw);
    p->hw.ssd_capacity_GB = sp.free_GB > 0 ? sp.free_GB : p->hw.ssd_capacity_GB;
    note_ssd(p, &sp, scaling);
    return 0;
}

/* The Adam task's second sample, after the store's tests, and both together (the key). */
static int measure_adam_again(ProfileRun *p, Err *e)
{
    int reps = p->reps;
    int rc = profile_adam_runs(p->used, p->params, reps, p->adam_x + reps, e);
    if (rc)
        return rc;
    Stat late;
    profile_stat(p->adam_x + reps, reps, &late);
    profile_stat(p->adam_x, 2 * reps, &p->adam);
    p->hw.adam_Gparams_per_s = p->adam.median; /* its note, next, adds its rate under I/O */
    fprintf(stderr, "  the Adam task, %d threads, again: %.3f G params/s; both times: %.3f\n",
            p->used, late.median, p->adam.median);
    return 0;
}

/* Adam while the store streams: what sharing host memory costs it, against what the cost
 * model's sharing predicts from the keys measured above. */
static int measure_adam_under_io(ProfileRun *p, Err *e)
{
    Stat busy;
    double io_GBps;
    size_t bytes = p->ssd_bytes < ((size_t)512 << 20) ? p->ssd_bytes : (size_t)512 << 20;
    fprintf(stderr, "fuyou-profile: the Adam task while the store reads and writes\n");
    int rc = profile_adam_under_io(p->used, p->params, p->reps, p->dirs, p->n_dirs, bytes, &busy,
                                   &io_GBps, e);
    if (rc)
        return rc;
    CostModel cm = {.hw = &p->hw};
    bool on[RES_COUNT] = {[RES_CPU_ADAM] = true, [RES_SSD_READ] = true, [RES_SSD_WRITE] = true};
    double rate[RES_COUNT];
    cost_rates(&cm, on, rate);
    profile_note(&p->ns, "cpu", "adam_Gparams_per_s", "[meas %s] norm + AdamW over %zu M params, "
                 "bf16 grads and weights, %d threads: median of %d (half before the store's "
                 "tests, half after), %.3f..%.3f; while the store read and wrote %.2f GB/s "
                 "together: %.3f (%.3f..%.3f), where the cost model's host-memory sharing "
                 "predicts %.3f", p->day, p->params >> 20, p->used, p->adam.n, p->adam.min,
                 p->adam.max, io_GBps, busy.median, busy.min, busy.max, rate[RES_CPU_ADAM] / 1e9);
    return 0;
}

/* Every measurement the options ask for, in the order they run. 0 or -errno with e. */
static int measure(ProfileRun *p, const ProfileArgs *a, Err *e)
{
    if (a->adam_only)
        return measure_adam_only(p, e);
    if (a->gpu_only)
        return measure_gpu_only(p, e);
    int rc = a->ssd_only ? 0 : measure_host(p, e);
    if (!rc)
        rc = measure_store(p, e);
    if (!rc && !a->ssd_only)
        rc = measure_adam_again(p, e);
    if (!rc && !a->ssd_only)
        rc = measure_adam_under_io(p, e);
#if FUYOU_HAVE_CUDA
    if (!rc && p->have_gpu)
        rc = profile_run_gpu(p, e);
#endif
    return rc;
}

/* The ini, to out_path (NULL: standard output), each key with its comment; a file written is
 * loaded back. The exit status. */
static int write_ini(ProfileRun *p, const char *out_path)
{
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "fuyou-profile: %s: cannot write: %s\n", out_path, strerror(errno));
        return 2;
    }
    fprintf(f, "# fuyou-profile %s on %s, %s%s\n", FUYOU_VERSION, p->hw.cpu_name, p->day,
            p->quick ? " (--quick)" : "");
    if (hw_write(f, &p->hw, lookup, &p->ns) == -E2BIG) {
        fprintf(stderr, "fuyou-profile: a curve has too many points for one ini line (GEMM "
                "%d, attention %d); this is a bug, please report it\n", p->hw.gemm.n,
                p->hw.attn.n);
        if (out_path)
            fclose(f);
        return 1;
    }
    if (!out_path)
        return 0;
    if (fclose(f)) {
        fprintf(stderr, "fuyou-profile: %s: write failed\n", out_path);
        return 1;
    }
    /* what it wrote must load */
    Hardware check;
    Err e;
    if (hw_load(out_path, NULL, 0, &check, &e)) {
        fprintf(stderr, "fuyou-profile: the ini written does not load: %s\n", e.msg);
        return 1;
    }
    hw_free(&check);
    fprintf(stderr, "fuyou-profile: wrote %s\n", out_path);
    return 0;
}

int main(int argc, char **argv)
{
    ProfileArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc > 0 ? 0 : 2;
    ProfileRun p;
    if (profile_init(&p, &a))
        return 2;
    Err e = {""};
    int status = 1;
    if (measure(&p, &a, &e))
        fprintf(stderr, "fuyou-profile: %s\n", e.msg);
    else
        status = write_ini(&p, a.out_path);
    profile_free(&p);
    return status;
}
