/* Check suite for the command lines: fuyou-sim's --help, exit codes 0/2, one-line errors that
 * name file:line, and the --describe report; fuyou-run's usage errors. Runs the built binaries
 * (FUYOU_SIM and FUYOU_RUN in the environment). */
#include <sys/wait.h>

#include "testutil.h"

/* Runs the binary named by environment variable var with args (shell words), capturing
 * stdout+stderr; returns the exit status. */
static int run_bin(const char *var, const char *args, char *out, size_t n)
{
    const char *bin = getenv(var);
    ck_assert_msg(bin != NULL, "%s is not set (meson sets it)", var);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t len = fread(out, 1, n - 1, p);
    out[len] = '\0';
    int st = pclose(p);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int run_sim(const char *args, char *out, size_t n)
{
    return run_bin("FUYOU_SIM", args, out, n);
}

static char out[1 << 16];

/* fuyou-run: the precision and loss-scale options, refused with one line and status 2 */
START_TEST(run_usage_errors)
{
    ck_assert_int_eq(run_bin("FUYOU_RUN", "--help", out, sizeof out), 0);
    tu_assert_contains(out, "--dtype T");
    tu_assert_contains(out, "--loss-scale X");
    ck_assert_int_eq(run_bin("FUYOU_RUN", "--dtype fp16", out, sizeof out), 2);
    tu_assert_contains(out, "--dtype fp16 needs --backend cuda");
    ck_assert_int_eq(run_bin("FUYOU_RUN", "--backend cuda --dtype fp8", out, sizeof out), 2);
    tu_assert_contains(out, "fuyou-run: ");
    ck_assert_int_eq(run_bin("FUYOU_RUN", "--dtype fp32", out, sizeof out), 2);
    tu_assert_contains(out, "--dtype expects bf16 or fp16, got 'fp32'");
    ck_assert_int_eq(run_bin("FUYOU_RUN", "--loss-scale 0", out, sizeof out), 2);
    tu_assert_contains(out, "--loss-scale expects a number");
    ck_assert_int_eq(run_bin("FUYOU_RUN", "--loss-scale-window", out, sizeof out), 2);
    tu_assert_contains(out, "--loss-scale-window needs a value");
}
END_TEST

/* fuyou-run --offload: a short run reports its memory and lanes; placement without --offload,
 * budgets too small, a missing --ssd-dir and an unsupported plan are one line and status 2 */
START_TEST(run_offload)
{
    const char *small = "--offload --steps 2 --batch 2 --seq 16";
    char args[256];
    snprintf(args, sizeof args, "%s --weights ssd --optim ssd --act cpu", small);
    ck_assert_int_eq(run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "weights on ssd, optimizer states on ssd");
    tu_assert_contains(out, "memory (measured peak / predicted by the footprint)");
    tu_assert_contains(out, "lanes busy over 2 iterations");
    ck_assert_int_eq(run_bin("FUYOU_RUN", "--weights ssd", out, sizeof out), 2);
    tu_assert_contains(out, "need --offload");
    snprintf(args, sizeof args, "%s --gpu-mem 1MiB", small);
    ck_assert_int_eq(run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "--gpu-mem 1.00 MiB is too small for this plan: it needs");
    tu_assert_contains(out, "more); raise it");
    snprintf(args, sizeof args, "%s --cpu-mem 64KiB", small);
    ck_assert_int_eq(run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "--cpu-mem");
    snprintf(args, sizeof args, "%s --weights ssd --ssd-dir /nonexistent/fuyou-dir", small);
    ck_assert_int_eq(run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "/nonexistent/fuyou-dir");
    snprintf(args, sizeof args, "%s --micro-batches 2 --act ssd", small);
    ck_assert_int_eq(run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "2 micro-batches of 2 x 16 tokens");
    ck_assert_int_eq(run_bin("FUYOU_RUN", "--offload --gpu-mem lots", out, sizeof out), 2);
    tu_assert_contains(out, "--gpu-mem expects a size such as 24GiB, got 'lots'");
    ck_assert_int_eq(run_bin("FUYOU_RUN", "--offload --act sideways", out, sizeof out), 2);
    tu_assert_contains(out, "--act expects recompute, gpu, cpu or ssd");
}
END_TEST

/* Without plan options fuyou-run --offload runs the plan fuyou-sim predicts for the same
 * hardware and budget (an fp32 model, as the CPU device computes) */
START_TEST(run_offload_plans_as_sim)
{
    char ini[64], sim_plan[1024] = "", run_plan[1024] = "", args[512];
    tu_temp_file(ini, sizeof ini, ".ini",
                 "[model]\nlayers = 4\nhidden = 256\nheads = 4\nvocab = 512\nmax_seq = 128\n"
                 "dtype = fp32\n");
    snprintf(args, sizeof args, "--hw h200.ini --set gpu.mem_GiB=0.04 --set "
             "memory.gpu_reserved_GiB=0 --model %s --batch 2 --seq 64", ini);
    ck_assert_int_eq(run_sim(args, out, sizeof out), 0);
    const char *p = strstr(out, "\nplan: ");
    ck_assert_ptr_nonnull(p);
    sscanf(p + 1, "%1023[^\n]", sim_plan);
    snprintf(args, sizeof args, "--offload --model %s --gpu-mem 0.04GiB --batch 2 --seq 64 "
             "--steps 1", ini);
    ck_assert_int_eq(run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    p = strstr(out, "\nplan: ");
    ck_assert_ptr_nonnull(p);
    sscanf(p + 1, "%1023[^\n]", run_plan);
    ck_assert_str_eq(run_plan, sim_plan);
    tu_assert_contains(run_plan, "weights on cpu");
    unlink(ini);
}
END_TEST

/* fuyou-trace compare: fuyou-sim's prediction and fuyou-run's measurement of the same plan
 * have the same tasks; --max-error and a bad file */
START_TEST(trace_compare_cli)
{
    char pred[] = "/tmp/fuyou-pred-XXXXXX", meas[] = "/tmp/fuyou-meas-XXXXXX", args[1024];
    close(mkstemp(pred));
    close(mkstemp(meas));
    const char *plan = "--batch 2 --seq 32 --weights ssd --optim ssd --checkpoints cpu "
                       "--act recompute";
    snprintf(args, sizeof args, "--hw h200.ini --model %s %s --iters 3 --trace %s",
             getenv("TINY_INI"), plan, pred);
    ck_assert_int_eq(run_sim(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "--offload --model %s %s --steps 3 --segment 3 --trace %s",
             getenv("TINY_INI"), plan, meas);
    ck_assert_int_eq(run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(args, sizeof args, "compare %s %s", pred, meas);
    ck_assert_int_eq(run_bin("FUYOU_TRACE", args, out, sizeof out), 0);
    tu_assert_contains(out, "iterations compared: 3 (steady state from iteration 1)");
    tu_assert_contains(out, "0 only predicted, 0 only measured");
    tu_assert_contains(out, "bottleneck: predicted");
    snprintf(args, sizeof args, "compare %s %s --max-error 0", pred, meas);
    ck_assert_int_eq(run_bin("FUYOU_TRACE", args, out, sizeof out), 1);
    tu_assert_contains(out, "is above --max-error");
    FILE *f = fopen(meas, "w");
    fputs("iter\ttask_id\n", f);
    fclose(f);
    snprintf(args, sizeof args, "compare %s %s", pred, meas);
    ck_assert_int_eq(run_bin("FUYOU_TRACE", args, out, sizeof out), 2);
    char where[64];
    snprintf(where, sizeof where, "%s:1:", meas);
    tu_assert_contains(out, where);
    ck_assert_int_eq(run_bin("FUYOU_TRACE", "compare only-one.tsv", out, sizeof out), 2);
    tu_assert_contains(out, "compare needs PRED.tsv and MEAS.tsv");
    snprintf(args, sizeof args, "export --chrome %s -o %s.json", pred, pred);
    ck_assert_int_eq(run_bin("FUYOU_TRACE", args, out, sizeof out), 0);
    snprintf(args, sizeof args, "%s.json", pred);
    unlink(args);
    unlink(pred);
    unlink(meas);
}
END_TEST

/* fuyou-profile --quick writes an ini fuyou-sim reads; a bad directory is one line, status 2 */
START_TEST(profile_cli)
{
    char dir[] = "/tmp/fuyou-prof-XXXXXX", args[512], ini[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(ini, sizeof ini, "%s/me.ini", dir);
    snprintf(args, sizeof args, "--quick --no-gpu --ssd-dir %s --gib 0.0625 --out %s", dir, ini);
    ck_assert_int_eq(run_bin("FUYOU_PROFILE", args, out, sizeof out), 0);
    tu_assert_contains(out, "wrote");
    snprintf(args, sizeof args, "--hw %s --model gpt2-124m --batch 2 --seq 256", ini);
    ck_assert_int_eq(run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "iteration");
    FILE *f = fopen(ini, "r");
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    tu_assert_contains(out, "adam_Gparams_per_s = ");
    tu_assert_contains(out, "[meas ");
    ck_assert_int_eq(run_bin("FUYOU_PROFILE", "--ssd-dir /nonexistent/x", out, sizeof out), 2);
    tu_assert_contains(out, "--ssd-dir /nonexistent/x: not a directory");
    tu_rm_tree(dir);
}
END_TEST

START_TEST(help)
{
    ck_assert_int_eq(run_sim("--help", out, sizeof out), 0);
    tu_assert_contains(out, "usage: fuyou-sim");
    tu_assert_contains(out, "--set SEC.KEY=VALUE");
    tu_assert_contains(out, "4090.ini");
    ck_assert_int_eq(run_sim("--version", out, sizeof out), 0);
    tu_assert_contains(out, "fuyou-sim ");
}
END_TEST

START_TEST(usage_errors)
{
    ck_assert_int_eq(run_sim("--bogus", out, sizeof out), 2);
    tu_assert_contains(out, "unknown option '--bogus'");
    ck_assert_int_eq(run_sim("--batch", out, sizeof out), 2);
    tu_assert_contains(out, "--batch needs a value");
    ck_assert_int_eq(run_sim("--batch 0", out, sizeof out), 2);
    tu_assert_contains(out, "--batch expects a whole number >= 1");
    ck_assert_int_eq(run_sim("--model gpt9", out, sizeof out), 2);
    tu_assert_contains(out, "unknown model 'gpt9'");
    ck_assert_int_eq(run_sim("--hw 3090.ini", out, sizeof out), 2);
    ck_assert_int_eq(run_sim("--set ssd.cuont=2", out, sizeof out), 2);
    tu_assert_contains(out, "--set ssd.cuont=2: unknown key 'cuont' in [ssd]");
    ck_assert_int_eq(run_sim("--weights disk", out, sizeof out), 2);
    ck_assert_int_eq(run_sim("--model gpt2-124m --seq 2048", out, sizeof out), 2);
    tu_assert_contains(out, "max_seq");
    ck_assert_int_eq(run_sim("stray", out, sizeof out), 2);
}
END_TEST

START_TEST(bad_hw_file)
{
    char path[64], args[128];
    tu_temp_file(path, sizeof path, ".ini", "[gpu]\nmem_GiB = -1\n");
    snprintf(args, sizeof args, "--hw %s --describe", path);
    int rc = run_sim(args, out, sizeof out);
    unlink(path);
    ck_assert_int_eq(rc, 2);
    char want[160];
    snprintf(want, sizeof want, "fuyou-sim: %s:2: mem_GiB must be greater than 0", path);
    tu_assert_contains(out, want);
    /* one line, nothing else */
    ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);
}
END_TEST

START_TEST(describe)
{
    ck_assert_int_eq(run_sim("--hw 4090.ini --model gpt3-13b --batch 32 --seq 1024 --describe",
                             out, sizeof out), 0);
    tu_assert_contains(out, "model gpt3-13b: 40 layers, hidden 5120");
    tu_assert_contains(out, "b*.fc1");
    tu_assert_contains(out, "32768x20480x5120");
    tu_assert_contains(out, "6·P·tokens");
    tu_assert_contains(out, "attention term");
    tu_assert_contains(out, "memory footprint on 4090.ini");
    tu_assert_contains(out, "adam_m");
    tu_assert_contains(out, "capacity");
}
END_TEST

START_TEST(swap_modes)
{
    const char *base = "--hw 4090.ini --model gpt3-1.3b --batch 8 --weights cpu --optim cpu ";
    char args[512];
    snprintf(args, sizeof args, "%s--swap none", base);
    ck_assert_int_eq(run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "swap (none): intra-block activations kept on gpu 0 B, swapped to "
                            "cpu 0 B, to ssd 0 B");
    snprintf(args, sizeof args, "%s--swap 2GiB", base);
    ck_assert_int_eq(run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "swap (fixed amount)");
    snprintf(args, sizeof args, "%s--swap all", base);
    ck_assert_int_eq(run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "swap (all)");
    snprintf(args, sizeof args, "%s--swap lots", base);
    ck_assert_int_eq(run_sim(args, out, sizeof out), 2);
    tu_assert_contains(out, "--swap expects auto, none, all, sweep or an amount");
    ck_assert_int_eq(run_sim("--act cpu --swap none", out, sizeof out), 2);
    ck_assert_int_eq(run_sim("--sweep-out x.tsv", out, sizeof out), 2);
    /* auto: the planner names the binding resource and what it tried */
    ck_assert_int_eq(run_sim("--hw 4090.ini --model gpt3-13b --batch 8", out, sizeof out), 0);
    tu_assert_contains(out, "swap (auto)");
    tu_assert_contains(out, "planner: best of");
    tu_assert_contains(out, "closed form:");
}
END_TEST

START_TEST(swap_sweep)
{
    char path[64], args[256];
    tu_temp_file(path, sizeof path, ".tsv", "");
    snprintf(args, sizeof args, "--hw 4090.ini --model gpt3-1.3b --batch 8 --weights cpu "
             "--optim ssd --swap sweep --sweep-out %s", path);
    ck_assert_int_eq(run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "closed-form s");
    tu_assert_contains(out, "<- planner");
    tu_assert_contains(out, "regret");
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char header[256];
    ck_assert_ptr_nonnull(fgets(header, sizeof header, f));
    ck_assert_str_eq(header, "swap_bytes\tunits\tclosed_form_s\tsim_time_s\tbottleneck\tfits\t"
                             "planner\n");
    int rows = 0, planner = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        rows++;
        planner += line[strlen(line) - 2] == '1';
    }
    fclose(f);
    unlink(path);
    ck_assert_int_gt(rows, 10);
    ck_assert_int_eq(planner, 1);
}
END_TEST

/* The predicted trace of a tiny model equals the golden one (regenerate on purpose only:
 * `meson compile -C build regen-golden`, then review the diff). */
START_TEST(golden_trace)
{
    const char *golden = getenv("GOLDEN_TRACE"), *args = getenv("GOLDEN_ARGS");
    ck_assert_msg(golden && args, "GOLDEN_TRACE and GOLDEN_ARGS are not set (meson sets them)");
    char path[64], cmd[2048];
    tu_temp_file(path, sizeof path, ".tsv", "");
    snprintf(cmd, sizeof cmd, "%s --trace %s", args, path);
    int rc = run_sim(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "%s", out);
    FILE *a = fopen(path, "r"), *b = fopen(golden, "r");
    ck_assert_ptr_nonnull(a);
    ck_assert_msg(b != NULL, "cannot read %s", golden);
    char la[512], lb[512];
    int line = 0;
    for (;;) {
        char *ra = fgets(la, sizeof la, a), *rb = fgets(lb, sizeof lb, b);
        line++;
        if (!ra || !rb) {
            ck_assert_msg(!ra && !rb, "line %d: one trace ends before the other", line);
            break;
        }
        ck_assert_msg(!strcmp(la, lb), "line %d differs:\n got  %s want %s", line, la, lb);
    }
    ck_assert_int_gt(line, 100);
    fclose(a);
    fclose(b);
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, help);
    tcase_add_test(tc, run_usage_errors);
    tcase_add_test(tc, run_offload);
    tcase_add_test(tc, run_offload_plans_as_sim);
    tcase_add_test(tc, trace_compare_cli);
    tcase_add_test(tc, profile_cli);
    tcase_add_test(tc, usage_errors);
    tcase_add_test(tc, bad_hw_file);
    tcase_add_test(tc, describe);
    tcase_add_test(tc, golden_trace);
    tcase_add_test(tc, swap_modes);
    tcase_add_test(tc, swap_sweep);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
