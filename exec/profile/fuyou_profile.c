/* fuyou-profile: measures this machine and writes a hardware ini (hw.h) that fuyou-sim and the
 * planner read. Every measured value carries a comment saying how, when and with what spread
 * it was measured; what is not measured here (the dense peak of the GPU, latencies, reserves)
 * comes from a base description (--base, a preset or a file) and says so.
 * Exit codes: 0 success, 1 a measurement failed, 2 usage or input error. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "cost.h"
#include "grad_sum.h"
#include "graph.h"
#include "hw.h"
#include "profile.h"
#include "units.h"
#if FUYOU_HAVE_CUDA
#include "cuda_device.h"
#include "gpt2_kernels.h"
#endif

enum { MAX_NOTES = 48, MAX_DIRS = 16 };

typedef struct Notes {
    struct { const char *section, *key; char text[640]; } n[MAX_NOTES];
    int count;
    const char *base;
    const char *base_text; /* the base's text, read once for its comments (NULL: unreadable) */
} Notes;

static void note(Notes *ns, const char *section, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(Notes *ns, const char *section, const char *key, const char *fmt, ...)
{
    if (ns->count == MAX_NOTES)
        return;
    ns->n[ns->count].section = section;
    ns->n[ns->count].key = key;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ns->n[ns->count].text, sizeof ns->n[0].text, fmt, ap);
    va_end(ap);
    ns->count++;
}

static const char *lookup(void *ctx, const char *section, const char *key)
{
    Notes *ns = ctx;
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

#if FUYOU_HAVE_CUDA
/* A load beside the Adam task: pinned copies of `bytes` in the directions `dirs` (both: the
 * host memory's ceiling; one: what that direction keeps beside the Adam). */
typedef struct CopyLoad {
    size_t bytes;
    int dirs; /* CUDADEV_H2D, CUDADEV_D2H or both */
} CopyLoad;

static int copies(void *ctx, const ProfileLoadControl *lc, double *GBps, Err *e)
{
    const CopyLoad *cl = ctx;
    return cudadev_copy_until(cl->bytes, cl->dirs, lc->stopped, lc->counting, lc->token, GBps,
                              e);
}
#endif

static void usage(FILE *out)
{
    fprintf(out,
"usage: fuyou-profile [--quick] [--out FILE] [--base NAME|PATH] [--ssd-dir DIR]... [--gib N]\n"
"                     [--no-gpu] [--threads N] [--ssd-only | --adam-only]\n"
"Measures this machine and writes a hardware ini for fuyou-sim --hw: the CPU Adam task's rate\n"
"by thread count and host memory bandwidth, the io_uring store's read, write and read + write\n"
"GB/s over every --ssd-dir (and over the first alone: whether the host path caps the stripes),\n"
"host memory, and with a GPU its memory, pinned PCIe copies alone and both ways, the bf16\n"
"GEMM efficiency curve, the attention's efficiency by head size, and the bandwidth and\n"
"per-kernel time of memory-bound kernels. Other keys come from --base.\n"
"\n"
"  --quick             seconds instead of minutes: smaller sizes, fewer repetitions\n"
"  --out FILE          write the ini there (default: standard output)\n"
"  --base NAME|PATH    the description unmeasured keys come from (default h200.ini)\n"
"  --ssd-dir DIR       a store directory, one device each, repeatable (default: the current\n"
"                      directory)\n"
"  --gib N             GiB written and read per SSD test (default 8, --quick 1)\n"
"  --no-gpu            skip the GPU even when one is present\n"
"  --threads N         the Adam task's threads (default: the cores the pipeline gives it)\n"
"  --ssd-only          measure the store alone, every other key as --base has it with its\n"
"                      comment (e.g. an earlier fuyou-profile's ini: the disk measured again)\n"
"  --adam-only         the same for the Adam task alone at the pipeline's thread count (about\n"
"                      a second): the rate of a CPU that drifts, measured again\n"
"  -h, --help, -V, --version\n"
"\n"
"Exit status: 0 success, 1 a measurement failed, 2 usage or input error.\n");
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

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"quick", 0, 0, 'q'}, {"out", 1, 0, 'o'}, {"base", 1, 0, 'b'}, {"ssd-dir", 1, 0, 'd'},
        {"gib", 1, 0, 'g'}, {"no-gpu", 0, 0, 'n'}, {"threads", 1, 0, 't'},
        {"ssd-only", 0, 0, 's'}, {"adam-only", 0, 0, 'a'},
        {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'}, {0, 0, 0, 0},
    };
    bool quick = false, gpu = true, ssd_only = false, adam_only = false;
    const char *out_path = NULL, *base = "h200.ini", *dirs[MAX_DIRS];
    int n_dirs = 0, threads = 0;
    double gib = 0;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'q': quick = true; break;
        case 'o': out_path = optarg; break;
        case 'b': base = optarg; break;
        case 'd':
            if (n_dirs == MAX_DIRS) {
                fprintf(stderr, "fuyou-profile: at most %d --ssd-dir\n", MAX_DIRS);
                return 2;
            }
            dirs[n_dirs++] = optarg;
            break;
        case 'g':
            gib = strtod(optarg, &end);
            if (end == optarg || *end || !(gib > 0 && gib <= 4096)) {
                fprintf(stderr, "fuyou-profile: --gib expects a size in GiB in (0, 4096], got "
                        "'%s'\n", optarg);
                return 2;
            }
            break;
        case 'n': gpu = false; break;
        case 's': ssd_only = true; break;
        case 'a': adam_only = true; break;
        case 't':
            threads = (int)strtol(optarg, &end, 10);
            if (end == optarg || *end || threads < 1 || threads > 4096) {
                fprintf(stderr, "fuyou-profile: --threads expects 1 to 4096, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("fuyou-profile %s\n", FUYOU_VERSION); return 0;
        case ':':
            fprintf(stderr, "fuyou-profile: %s needs a value; see --help\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "fuyou-profile: unknown option '%s'; see --help\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fuyou-profile: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (ssd_only && adam_only) {
        fprintf(stderr, "fuyou-profile: --ssd-only and --adam-only exclude each other (the "
                "second can take the first's ini as its --base)\n");
        return 2;
    }
    if (!n_dirs)
        dirs[n_dirs++] = ".";
    for (int i = 0; i < n_dirs; i++) {
        struct stat sb;
        if (stat(dirs[i], &sb) || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "fuyou-profile: --ssd-dir %s: not a directory\n", dirs[i]);
            return 2;
        }
    }
    Err e = {""};
    Hardware hw;
    if (hw_load(base, NULL, 0, &hw, &e)) {
        fprintf(stderr, "fuyou-profile: %s\n", e.msg);
        return 2;
    }
    Notes ns = {.base = base};
    char *base_owned = NULL;
    if (hw_description_text(base, &ns.base_text, &base_owned))
        ns.base_text = NULL; /* hw_load read it: only a race; its keys then say "not measured" */
    char day[32];
    time_t now = time(NULL);
    strftime(day, sizeof day, "%Y-%m-%d", gmtime(&now));
    int reps = quick ? 3 : 7, status = 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    bool have_gpu = false;
#if FUYOU_HAVE_CUDA
    CudaDeviceInfo gi;
    Err ge;
    have_gpu = gpu && !ssd_only && cudadev_probe(&gi, &ge) == 0;
    if (gpu && !ssd_only && !have_gpu)
        fprintf(stderr, "fuyou-profile: no GPU measured: %s\n", ge.msg);
#else
    (void)gpu;
#endif
    int used = threads ? threads : plan_adam_threads((int)cores, have_gpu);
    size_t params = quick ? (size_t)16 << 20 : (size_t)128 << 20;
    double adam_x[2 * 8]; /* reps is at most 7 */
    Stat mem = {0};
    if (adam_only) {
        /* the pipeline's thread count, one burst; every other key from the base */
        Stat adam;
        if (profile_adam(used, params, reps, &adam, &e))
            goto fail;
        hw.adam_Gparams_per_s = adam.median;
        note(&ns, "cpu", "adam_Gparams_per_s", "[meas %s] norm + AdamW over %zu M params, bf16 "
             "grads and weights, %d threads: median of %d, %.3f..%.3f (--adam-only)", day,
             params >> 20, used, adam.n, adam.min, adam.max);
        fprintf(stderr, "fuyou-profile: the Adam task, %d threads: %.3f G params/s "
                "(%.3f..%.3f, %d runs)\n", used, adam.median, adam.min, adam.max, adam.n);
        goto write;
    }
    if (!ssd_only) {
        /* CPU: the Adam task by thread count; the ini keeps the pipeline's thread count */
        cpu_name(hw.cpu_name, sizeof hw.cpu_name);
        hw.cpu_cores = (int)cores;
        note(&ns, "cpu", "cores", "[meas %s] online CPUs", day);
        note(&ns, "cpu", "name", "[meas %s] /proc/cpuinfo", day);
        fprintf(stderr, "fuyou-profile: Adam task over %zu M parameters by thread count\n",
                params >> 20);
        for (int t = 1; t <= cores; t = t * 2 <= cores || t == cores ? t * 2 : (int)cores) {
            Stat s;
            if (profile_adam(t, params, reps, &s, &e))
                goto fail;
            fprintf(stderr, "  %3d threads: %.3f G params/s (%.3f..%.3f, %d runs)\n", t, s.median,
                    s.min, s.max, s.n);
            if (t == cores)
                break;
        }
        /* the pipeline's thread count, sampled now and again after the store's tests: the H200
         * machine's CPU drifts (the same 7 runs: 2.81 G params/s, then 2.34 later in the same
         * program, and 2.58 in another three minutes on), and one burst took whichever it met */
        if (profile_adam_runs(used, params, reps, adam_x, &e))
            goto fail;
        size_t mbytes = quick ? (size_t)256 << 20 : (size_t)2 << 30;
        if (profile_memory((int)cores, mbytes, reps, &mem, &e))
            goto fail;
        hw.cpu_mem_GBps = mem.median;
        note(&ns, "cpu", "mem_GBps", "[meas %s] parallel memcpy of %s, read + written: median of "
             "%d, %.1f..%.1f", day, quick ? "256 MiB" : "2 GiB", mem.n, mem.min, mem.max);
        Stat sum, first;
        int sum_threads = plan_grad_sum_threads((int)cores);
        size_t sum_params = quick ? (size_t)16 << 20 : (size_t)128 << 20;
        if (profile_grad_sum(sum_threads, sum_params, reps, false, &sum, &e) ||
            profile_grad_sum(sum_threads, sum_params, reps, true, &first, &e))
            goto fail;
        hw.cpu_sum_GBps = sum.median;
        hw.cpu_sum_first_GBps = first.median;
        note(&ns, "cpu", "sum_GBps", "[meas %s] the pipeline's sum of micro-batch gradients, %d "
             "thread%s as the pipeline takes here, %zu M bf16 gradients into fp32, %zu B each: "
             "median of %d, %.1f..%.1f", day, sum_threads, sum_threads == 1 ? "" : "s",
             sum_params >> 20, grad_sum_bytes(dtype_bytes(DTYPE_BF16), false), sum.n, sum.min,
             sum.max);
        note(&ns, "cpu", "sum_first_GBps", "[meas %s] the same as the step's first micro-batch "
             "writes the sum (%zu B each, with streaming stores): median of %d, %.1f..%.1f",
             day, grad_sum_bytes(dtype_bytes(DTYPE_BF16), true), first.n, first.min, first.max);
        hw.cpu_mem_GiB = mem_total_GiB();
        note(&ns, "memory", "cpu_mem_GiB", "[meas %s] MemTotal", day);
    }

    /* SSD through the store */
    size_t sbytes = (size_t)((gib > 0 ? gib : quick ? 1 : 8) * (double)(1u << 30));
    fprintf(stderr, "fuyou-profile: the store over %d director%s, %.1f GiB per test\n", n_dirs,
            n_dirs == 1 ? "y" : "ies", sbytes / 1073741824.0);
    SsdProfile sp, one;
    if (profile_ssd(dirs, n_dirs, sbytes, quick ? 1 : 3, &sp, &e))
        goto fail;
    /* with several stripes, the first alone too: whether they scale or the host path binds */
    if (n_dirs > 1) {
        fprintf(stderr, "fuyou-profile: the store over %s alone\n", dirs[0]);
        if (profile_ssd(dirs, 1, sbytes, quick ? 1 : 3, &one, &e))
            goto fail;
    }
    double scaling = profile_ssd_keys(&sp, n_dirs > 1 ? &one : NULL, n_dirs, &hw);
    hw.ssd_capacity_GB = sp.free_GB > 0 ? sp.free_GB : hw.ssd_capacity_GB;
    const char *how = sp.direct ? "O_DIRECT" : "buffered (no O_DIRECT here)";
    note(&ns, "ssd", "count", "[meas %s] store directories", day);
    note(&ns, "ssd", "read_GBps", "[meas %s] store, %s, 256 MiB requests two in flight (4 MiB "
         "pieces QD 32) through locked buffers; in all: median %.2f of %d, %.2f..%.2f GB/s "
         "(the key: per directory)", day, how, sp.read_GBps.median,
         sp.read_GBps.n, sp.read_GBps.min, sp.read_GBps.max);
    note(&ns, "ssd", "write_GBps", "[meas %s] the same, writing: %.2f..%.2f GB/s in all", day,
         sp.write_GBps.min, sp.write_GBps.max);
    note(&ns, "ssd", "duplex_factor", "[meas %s] read %.2f + write %.2f GB/s together over "
         "alone (1: they share, 2: independent)", day, sp.duplex_read_GBps.median,
         sp.duplex_write_GBps.median);
    note(&ns, "ssd", "read_bidir_GBps", "[meas %s] a tensor read while another is written, "
         "each two requests in flight: median of %d, %.2f..%.2f GB/s in all (the key: per "
         "directory); the model takes these over duplex_factor's shares", day,
         sp.duplex_read_GBps.n, sp.duplex_read_GBps.min, sp.duplex_read_GBps.max);
    note(&ns, "ssd", "write_bidir_GBps", "[meas %s] the same, writing: %.2f..%.2f GB/s in all",
         day, sp.duplex_write_GBps.min, sp.duplex_write_GBps.max);
    if (hw.ssd_host_GBps > 0)
        note(&ns, "ssd", "host_GBps", "[meas %s] the most the store moved over the %d directories "
             "together, %.2f of %d times what %s moved alone: the host path binds", day,
             n_dirs, scaling, n_dirs, dirs[0]);
    note(&ns, "ssd", "capacity_GB", "[meas %s] free space, least of the directories", day);

    Stat adam = {0};
    if (!ssd_only) {
        if (profile_adam_runs(used, params, reps, adam_x + reps, &e))
            goto fail;
        Stat adam_late;
        profile_stat(adam_x + reps, reps, &adam_late);
        profile_stat(adam_x, 2 * reps, &adam);
        hw.adam_Gparams_per_s = adam.median; /* its note, below, adds its rate under I/O */
        fprintf(stderr, "  the Adam task, %d threads, again: %.3f G params/s; both times: %.3f\n",
                used, adam_late.median, adam.median);

        /* Adam while the store streams: what sharing host memory costs it, against what the cost
         * model's sharing predicts from the keys measured above */
        Stat busy_adam;
        double io_GBps;
        size_t iobytes = sbytes < ((size_t)512 << 20) ? sbytes : (size_t)512 << 20;
        fprintf(stderr, "fuyou-profile: the Adam task while the store reads and writes\n");
        if (profile_adam_under_io(used, params, reps, dirs, n_dirs, iobytes, &busy_adam,
                                  &io_GBps, &e))
            goto fail;
        CostModel cm = {.hw = &hw};
        bool busy[RES_COUNT] = {[RES_CPU_ADAM] = true, [RES_SSD_READ] = true,
                                [RES_SSD_WRITE] = true};
        double rate[RES_COUNT];
        cost_rates(&cm, busy, rate);
        note(&ns, "cpu", "adam_Gparams_per_s", "[meas %s] norm + AdamW over %zu M params, bf16 "
             "grads and weights, %d threads: median of %d (half before the store's tests, half "
             "after), %.3f..%.3f; while the store read and wrote %.2f GB/s together: %.3f "
             "(%.3f..%.3f), where the cost model's host-memory sharing predicts %.3f", day,
             params >> 20, used, adam.n, adam.min, adam.max, io_GBps, busy_adam.median,
             busy_adam.min, busy_adam.max, rate[RES_CPU_ADAM] / 1e9);
    }

#if FUYOU_HAVE_CUDA
    if (have_gpu) {
        snprintf(hw.gpu_name, sizeof hw.gpu_name, "%.63s", gi.name);
        hw.gpu_mem_GiB = (double)gi.mem_bytes / 1073741824.0;
        note(&ns, "gpu", "name", "[meas %s] CUDA runtime", day);
        note(&ns, "gpu", "mem_GiB", "[meas %s] device memory in all", day);
        double runs[4 * 8]; /* reps is at most 7 */
        size_t pbytes = quick ? (size_t)256 << 20 : (size_t)1 << 30;
        if (cudadev_copy_bench(pbytes, reps, runs, &e))
            goto fail;
        double *field[4] = {&hw.h2d_GBps, &hw.d2h_GBps, &hw.h2d_bidir_GBps, &hw.d2h_bidir_GBps};
        const char *keys[4] = {"h2d_GBps", "d2h_GBps", "h2d_bidir_GBps", "d2h_bidir_GBps"};
        for (int k = 0; k < 4; k++) {
            Stat st;
            profile_stat(runs + k * reps, reps, &st);
            *field[k] = st.median;
            note(&ns, "pcie", keys[k], "[meas %s] pinned %s copies, %s: median of %d, "
                 "%.1f..%.1f", day, quick ? "256 MiB" : "1 GiB",
                 k < 2 ? "alone" : "both directions at once", st.n, st.min, st.max);
        }
        /* host memory's ceiling: the Adam task beside pinned copies both ways, the most the
         * pipeline's backward moves at once (memcpy alone falls well short of it) */
        size_t cbytes = quick ? (size_t)64 << 20 : (size_t)256 << 20;
        Stat beside;
        double copy_GBps;
        CopyLoad both = {cbytes, CUDADEV_H2D | CUDADEV_D2H};
        if (profile_adam_beside(used, params, reps, copies, &both, &beside, &copy_GBps, &e))
            goto fail;
        double moved = beside.median * COST_ADAM_HOST_BYTES + copy_GBps;
        fprintf(stderr, "  the Adam task beside pinned copies both ways: %.3f G params/s "
                "(alone %.3f), copies %.1f GB/s: %.1f GB/s of host memory at once\n",
                beside.median, adam.median, copy_GBps, moved);
        if (moved > hw.cpu_mem_GBps) {
            note(&ns, "cpu", "mem_GBps", "[meas %s] the most host memory measured moving at "
                 "once: the Adam task (%d threads, %.3f G params/s, alone %.3f; %d B each) "
                 "beside pinned copies both ways (%.1f GB/s); parallel memcpy moved %.1f "
                 "(%.1f..%.1f)", day, used, beside.median, adam.median, COST_ADAM_HOST_BYTES,
                 copy_GBps, mem.median, mem.min, mem.max);
            hw.cpu_mem_GBps = moved;
        }
        /* each direction alone beside the Adam: the most it moves there (the H200 traces:
         * copies to the GPU 37-46 GB/s beside it against 55 alone, where host memory's ceiling
         * left them alone), and what it leaves the Adam, over the Adam alone just before and
         * after */
        double ratio[2];
        Stat adam_one[2], adam_by[2];
        for (int d = 0; d < 2; d++) {
            CopyLoad one = {cbytes, d ? CUDADEV_D2H : CUDADEV_H2D};
            double one_GBps;
            if (profile_adam_bracketed(used, params, reps, copies, &one, &adam_one[d], &one_GBps,
                                       &adam_by[d], &e))
                goto fail;
            ratio[d] = adam_one[d].median / adam_by[d].median;
            double alone = d ? hw.d2h_GBps : hw.h2d_GBps;
            *(d ? &hw.d2h_adam_GBps : &hw.h2d_adam_GBps) = fmin(one_GBps, alone);
            fprintf(stderr, "  pinned copies %s beside the Adam task: %.1f GB/s (alone %.1f); "
                    "the Adam %.3f G params/s, %.3f of its %.3f alone just before and after\n",
                    d ? "from the GPU" : "to the GPU", one_GBps, alone, adam_one[d].median,
                    ratio[d], adam_by[d].median);
            note(&ns, "pcie", d ? "d2h_adam_GBps" : "h2d_adam_GBps", "[meas %s] pinned %s "
                 "copies one way beside the Adam task (%d threads, %.3f G params/s, %.3f..%.3f, "
                 "median of %d, %.3f of its rate alone just before and after: [cpu] "
                 "adam_%s_GBps): %.1f GB/s over the rounds it ran (alone %.1f; at most that)",
                 day, quick ? "64 MiB" : "256 MiB", used, adam_one[d].median, adam_one[d].min,
                 adam_one[d].max, adam_one[d].n, ratio[d], d ? "d2h" : "h2d", one_GBps, alone);
        }
        /* the Adam's side: what host memory's share leaves of its slowdown beside the copies,
         * each way and both ways, fitted together */
        cost_fit_adam_links(&hw, beside.median * 1e9, ratio);
        fprintf(stderr, "  fitted: adam_h2d_GBps %.1f, adam_d2h_GBps %.1f, adam_io_GBps %.1f "
                "(0: nothing left to explain)\n", hw.cpu_adam_h2d_GBps, hw.cpu_adam_d2h_GBps,
                hw.cpu_adam_io_GBps);
        for (int d = 0; d < 2; d++)
            if (*(d ? &hw.cpu_adam_d2h_GBps : &hw.cpu_adam_h2d_GBps) > 0)
                note(&ns, "cpu", d ? "adam_d2h_GBps" : "adam_h2d_GBps", "[meas %s] the Adam "
                     "task beside pinned copies %s: %.3f G params/s (%.3f..%.3f) against %.3f "
                     "(%.3f..%.3f) alone just before and after, %.3f of it, where host "
                     "memory's share gives it more; the copy rate that slows it that much "
                     "(rate / (1 + GBps / key)), adam_io_GBps in effect", day,
                     d ? "from the GPU" : "to the GPU", adam_one[d].median, adam_one[d].min,
                     adam_one[d].max, adam_by[d].median, adam_by[d].min, adam_by[d].max,
                     ratio[d]);
        if (hw.cpu_adam_io_GBps > 0)
            note(&ns, "cpu", "adam_io_GBps", "[meas %s] the same Adam task beside the copies: "
                 "%.3f G params/s where host memory's share gives it more; the I/O rate that "
                 "slows it that much more (rate / (1 + io / adam_io_GBps)), fitted before "
                 "the two keys above", day, beside.median);

        /* the executor's own time around each GPU task: empty tasks through a pipeline lane,
         * alone (the key) and beside the Adam task (the note: what its threads add) */
        Stat gap, adam_gpu, adam_now;
        double gap_mean, unused;
        int tasks = quick ? 2000 : 20000;
        DispatchLoad dl = {.ops = &device_cuda};
        if (profile_dispatch(&device_cuda, tasks, &gap, &gap_mean, &e) ||
            profile_adam_bracketed(used, params, reps, profile_dispatch_load, &dl, &adam_gpu,
                                   &unused, &adam_now, &e))
            goto fail;
        hw.gpu_task_us = gap_mean;
        fprintf(stderr, "  between GPU tasks: mean %.1f us, median %.1f (%.1f..%.1f, %d); beside "
                "the Adam task: mean %.1f, median %.1f, greatest %.0f (%d)\n", gap_mean,
                gap.median, gap.min, gap.max, gap.n, dl.mean_us, dl.gap_us.median,
                dl.gap_us.max, dl.gap_us.n);
        /* and what the lane and the dispatcher, each on a core, leave the Adam */
        hw.cpu_adam_gpu_share = fmin(adam_gpu.median / adam_now.median, 1);
        fprintf(stderr, "  the Adam task beside them: %.3f G params/s (%.3f..%.3f), alone just "
                "before and after %.3f (%.3f..%.3f)\n", adam_gpu.median, adam_gpu.min,
                adam_gpu.max, adam_now.median, adam_now.min, adam_now.max);
        note(&ns, "cpu", "adam_gpu_share", "[meas %s] the Adam task (%d threads, %zu M params) "
             "beside empty GPU tasks run as the pipeline runs them: median of %d, %.3f G "
             "params/s (%.3f..%.3f), over alone just before and after, %.3f (%.3f..%.3f); at "
             "most 1", day, used, params >> 20, adam_gpu.n, adam_gpu.median, adam_gpu.min,
             adam_gpu.max, adam_now.median, adam_now.min, adam_now.max);
        note(&ns, "gpu", "task_us", "[meas %s] the executor's own time between GPU tasks: %d "
             "empty compute tasks (issued, timed by CUDA events and waited for as a compute "
             "task is) through a pipeline lane, waited for as the dispatcher waits; the mean gap "
             "from one's end to the next's start (median %.1f, %.1f..%.1f us). Beside the Adam "
             "task (%d "
             "threads, niced as the pipeline's): mean %.1f, median %.1f, greatest %.0f us over "
             "%d gaps. A lower bound: the pipeline's dispatcher adds its bookkeeping (its "
             "traces on the H200 machine: 12-18 us mean)",
             day, tasks, gap.median, gap.min, gap.max, used, dl.mean_us, dl.gap_us.median,
             dl.gap_us.max, dl.gap_us.n);

        /* the GEMM efficiency curve: squares from 256 to 8192 and the presets' own shapes
         * (8 x 1024 tokens; with --quick up to 1.3B parameters), against the base's peak */
        enum { SQUARES = 6, MAX_SHAPES = 96 };
        GemmShape shapes[SQUARES + MAX_SHAPES];
        int n_shapes = 0;
        for (int d = 256; d <= 8192; d *= 2)
            shapes[n_shapes++] = (GemmShape){d, d, d};
        n_shapes += profile_gemm_shapes(quick ? 1400000000 : 14000000000, 8 * 1024,
                                        shapes + n_shapes, MAX_SHAPES);
        double size[SQUARES + MAX_SHAPES], eff[SQUARES + MAX_SHAPES];
        for (int i = 0; i < n_shapes; i++) {
            const GemmShape *g = &shapes[i];
            double tf = gk_gemm_tflops(g->m, g->k, g->n, quick ? 5 : 20);
            size[i] = 3.0 / (1.0 / g->m + 1.0 / g->n + 1.0 / g->k);
            eff[i] = tf / hw.gpu_bf16_TFLOPS;
            fprintf(stderr, "  GEMM %d x %d x %d: %.1f TFLOP/s\n", g->m, g->n, g->k, tf);
        }
        profile_gemm_curve(size, eff, n_shapes, &hw.gemm);
        char curve[HW_CURVE_MAX * 24] = "";
        for (int i = 0; i < hw.gemm.n; i++)
            err_append(curve, sizeof curve, "%s%.0f %.0f", i ? ", " : "", hw.gemm.dim[i],
                       hw.gemm.eff[i] * hw.gpu_bf16_TFLOPS);
        note(&ns, "gpu", "gemm_efficiency", "[meas %s] cuBLAS bf16, %d shapes (squares 256 to "
             "8192 and the presets' GEMMs at 8 x 1024 tokens), median of %d runs each; per "
             "octave of size (the harmonic mean of m, n, k) the median: %s TFLOP/s", day,
             n_shapes, quick ? 5 : 20, curve);

        /* the attention's efficiency: its kernels, forward and backward, at the presets' shapes
         * (8 x 1024 tokens), the work the cost model charges (cost_attention_work) over the time
         * at the peak; per head size (which picks the kernels) the median over its shapes */
        enum { MAX_ATT = 16 };
        double aeff[MAX_ATT];
        int seen_c[MAX_ATT], seen_h[MAX_ATT], head_size[MAX_ATT], n_att = 0;
        char att[MAX_ATT * 24] = "";
        for (int i = 0; i < model_preset_count() && n_att < MAX_ATT; i++) {
            const ModelConfig *c = model_preset_at(i);
            bool dup = false;
            for (int j = 0; j < n_att; j++)
                dup |= seen_c[j] == c->d_model && seen_h[j] == c->n_head;
            Graph g = {0};
            if (dup || model_param_count(c) > (quick ? 1400000000 : 14000000000) ||
                c->max_seq < 1024 || graph_init(&g, c, 8, 1024, &e))
                continue;
            const Op *op = graph_block_op_of_kind(&g, OP_ATTENTION);
            double work = cost_attention_work(op, TASK_FWD) + cost_attention_work(op, TASK_BWD);
            graph_free(&g);
            double f_ms, b_ms;
            if (gk_attention_ms(8, 1024, c->d_model, c->n_head, quick ? 5 : 20, &f_ms, &b_ms))
                continue;
            seen_c[n_att] = c->d_model, seen_h[n_att] = c->n_head;
            head_size[n_att] = c->d_model / c->n_head;
            aeff[n_att] = work / ((f_ms + b_ms) * 1e-3 * hw.gpu_bf16_TFLOPS * 1e12);
            fprintf(stderr, "  attention %d x %d heads (%s): forward %.3f ms, backward %.3f ms, "
                    "efficiency %.3f\n", c->n_head, head_size[n_att], c->name, f_ms, b_ms,
                    aeff[n_att]);
            err_append(att, sizeof att, "%s%d/%d %.2f", n_att ? ", " : "", c->n_head,
                       head_size[n_att], aeff[n_att]);
            n_att++;
        }
        if (n_att) {
            profile_attn_curve(head_size, aeff, n_att, &hw.attn);
            note(&ns, "gpu", "attn_efficiency", "[meas %s] the attention kernels, forward and "
                 "backward, at 8 x 1024 tokens, median of %d runs each; per heads/head size: %s; "
                 "per head size the median", day, quick ? 5 : 20, att);
        }

        /* memory-bound kernels (layernorms, residuals, conversions): the residual add from 1 K
         * to 64 M elements, fitted to bytes / mem_GBps + launch_us as the cost model times
         * them; the datasheet's bandwidth is more than such kernels reach */
        enum { MEM_POINTS = 9 };
        double mbytes[MEM_POINTS], msec[MEM_POINTS];
        for (int i = 0; i < MEM_POINTS; i++) {
            size_t n = (size_t)1 << (10 + 2 * i);
            mbytes[i] = 6.0 * (double)n;
            msec[i] = gk_residual_ms(n, quick ? 5 : 20) * 1e-3;
            fprintf(stderr, "  residual add over %zu elements: %.1f us\n", n, msec[i] * 1e6);
        }
        double GBps, launch_us;
        if (profile_mem_fit(mbytes, msec, MEM_POINTS, &GBps, &launch_us) == 0) {
            hw.gpu_mem_GBps = GBps;
            hw.gpu_launch_us = launch_us;
            note(&ns, "gpu", "mem_GBps", "[meas %s] the residual add (6 B an element), 1 K to "
                 "64 M elements, median of %d runs each, fitted to bytes / mem_GBps + launch_us "
                 "(GSL, by relative error): %.1f us at 1 K, %.0f GB/s at 64 M", day,
                 quick ? 5 : 20, msec[0] * 1e6, mbytes[MEM_POINTS - 1] / msec[MEM_POINTS - 1] /
                 1e9);
            note(&ns, "gpu", "launch_us", "[meas %s] the same fit's intercept: a kernel's time "
                 "beyond its bytes, launch included", day);
        }
    }
#endif

write:;
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "fuyou-profile: %s: cannot write: %s\n", out_path, strerror(errno));
        status = 2;
        goto out;
    }
    fprintf(f, "# fuyou-profile %s on %s, %s%s\n", FUYOU_VERSION, hw.cpu_name, day,
            quick ? " (--quick)" : "");
    if (hw_write(f, &hw, lookup, &ns) == -E2BIG) {
        fprintf(stderr, "fuyou-profile: a curve has too many points for one ini line (GEMM "
                "%d, attention %d); this is a bug, please report it\n", hw.gemm.n, hw.attn.n);
        if (out_path)
            fclose(f);
        status = 1;
        goto out;
    }
    if (out_path && fclose(f)) {
        fprintf(stderr, "fuyou-profile: %s: write failed\n", out_path);
        goto out;
    }
    /* what it wrote must load */
    if (out_path) {
        Hardware check;
        if (hw_load(out_path, NULL, 0, &check, &e)) {
            fprintf(stderr, "fuyou-profile: the ini written does not load: %s\n", e.msg);
            goto out;
        }
        hw_free(&check);
        fprintf(stderr, "fuyou-profile: wrote %s\n", out_path);
    }
    status = 0;
    goto out;
fail:
    fprintf(stderr, "fuyou-profile: %s\n", e.msg);
out:
    free(base_owned);
    hw_free(&hw);
    return status;
}
