/* Check suite for fuyou-sim's command line: --help, exit codes 0/2, one-line errors that name
 * file:line, the --describe report, the report's wording, --swap, --cost, the limits on sizes
 * and inputs (the pages and the golden trace it must reproduce: test_sim_docs.c). Runs the
 * built binary (FUYOU_SIM in the environment);
 * fuyou-run and the other tools are test_cli's, fuyou-plot's and fuyou-trace's on hostile input
 * test_cli_plot's. */
#include <sys/stat.h>

#include "testutil.h"

static char out[1 << 16];

START_TEST(help)
{
    ck_assert_int_eq(tu_run_sim("--help", out, sizeof out), 0);
    tu_assert_contains(out, "usage: fuyou-sim");
    tu_assert_contains(out, "--set SEC.KEY=VALUE");
    tu_assert_contains(out, "4090.ini");
    ck_assert_int_eq(tu_run_sim("--version", out, sizeof out), 0);
    tu_assert_contains(out, "fuyou-sim ");
}
END_TEST

START_TEST(usage_errors)
{
    ck_assert_int_eq(tu_run_sim("--bogus", out, sizeof out), 2);
    tu_assert_contains(out, "unknown option '--bogus'");
    ck_assert_int_eq(tu_run_sim("--batch", out, sizeof out), 2);
    tu_assert_contains(out, "--batch needs a value");
    ck_assert_int_eq(tu_run_sim("--batch 0", out, sizeof out), 2);
    tu_assert_contains(out, "--batch expects a whole number from 1 to 1048576, got '0'");
    ck_assert_int_eq(tu_run_sim("--model gpt9", out, sizeof out), 2);
    tu_assert_contains(out, "unknown model 'gpt9'");
    ck_assert_int_eq(tu_run_sim("--hw 3090.ini", out, sizeof out), 2);
    ck_assert_int_eq(tu_run_sim("--set ssd.cuont=2", out, sizeof out), 2);
    tu_assert_contains(out, "--set ssd.cuont=2: unknown key 'cuont' in [ssd]");
    ck_assert_int_eq(tu_run_sim("--weights disk", out, sizeof out), 2);
    ck_assert_int_eq(tu_run_sim("--model gpt2-124m --seq 2048", out, sizeof out), 2);
    tu_assert_contains(out, "max_seq");
    ck_assert_int_eq(tu_run_sim("stray", out, sizeof out), 2);
    ck_assert_int_eq(tu_run_sim("--gpu-mem 24XB", out, sizeof out), 2);
    tu_assert_contains(out, "fuyou-sim: --gpu-mem expects a size such as 24GiB, got '24XB'");
}
END_TEST

/* --gpu-mem is fuyou-run's budget: the capacity with nothing reserved, so the planner places
 * the same plan the run does; --set gpu.mem_GiB keeps the ini's reserve */
START_TEST(gpu_mem_budget)
{
    static char with_budget[sizeof out];
    const char *plan = "--hw h200.ini --model gpt3-350m --batch 64 --weights cpu --optim cpu "
                       "--checkpoints gpu --iters 2";
    char args[512];
    snprintf(args, sizeof args, "%s --gpu-mem 24GiB", plan);
    ck_assert_int_eq(tu_run_sim(args, with_budget, sizeof with_budget), 0);
    tu_assert_contains(with_budget, "of 24.00 GiB");
    snprintf(args, sizeof args, "%s --set gpu.mem_GiB=24 --set memory.gpu_reserved_GiB=0", plan);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    /* the same report but for the simulator's own wall time */
    const char *a = strstr(with_budget, "swap (auto)"), *b = strstr(out, "swap (auto)");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(strncmp(a, b, strcspn(a, "\n")), 0);
    snprintf(args, sizeof args, "%s --set gpu.mem_GiB=24", plan);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "of 22.00 GiB");
}
END_TEST

START_TEST(bad_hw_file)
{
    char path[64], args[128];
    tu_temp_file(path, sizeof path, ".ini", "[gpu]\nmem_GiB = -1\n");
    snprintf(args, sizeof args, "--hw %s --describe", path);
    int rc = tu_run_sim(args, out, sizeof out);
    unlink(path);
    ck_assert_int_eq(rc, 2);
    char want[160];
    snprintf(want, sizeof want, "fuyou-sim: %s:2: mem_GiB must be greater than 0", path);
    tu_assert_contains(out, want);
    /* one line, nothing else */
    ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);
}
END_TEST

/* fuyou-sim plans the Llama family: --describe shows grouped-query attention's qkv and SwiGLU's
 * gate_up, the rotary embedding among the ops; a prediction names its plan */
START_TEST(sim_llama)
{
    ck_assert_int_eq(tu_run_sim("--model llama-3.1-8b --batch 2 --seq 4096 --describe", out,
                                sizeof out), 0);
    tu_assert_contains(out, "llama block, 32 layers, hidden 4096, 32 heads of 128 (8 kv heads)");
    tu_assert_contains(out, "(8030261248)");
    tu_assert_contains(out, "8192x6144x4096");  /* q's 32 heads, k's and v's 8, of 128 */
    tu_assert_contains(out, "8192x28672x4096"); /* gate and up */
    tu_assert_contains(out, "b*.rope");
    ck_assert_int_eq(tu_run_sim("--hw h200.ini --gpu-mem 24GiB --model llama-3.1-8b --batch 8 "
                                "--seq 2048", out, sizeof out), 0);
    tu_assert_contains(out, "llama-3.1-8b on h200.ini");
    tu_assert_contains(out, "iteration ");
}
END_TEST

/* --batch is an iteration's sequences; the micro-batch count is the plan's: the fewest that
 * fit (the paper's GPT-3 13B at batch 64 and 128 on the 24 GB card, with weight prefetch), the
 * one given (a divisor), or none fitting with the most frugal shown. */
START_TEST(sim_micro_batches)
{
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 64", out, sizeof out), 0);
    tu_assert_contains(out, "2 micro-batches of 32 x 1024 tokens");
    ck_assert_ptr_null(strstr(out, "prefetch depth 0"));
    tu_assert_contains(out, "TFLOPS");
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 128", out, sizeof out), 0);
    tu_assert_contains(out, "micro-batches of 32 x 1024 tokens");
    ck_assert_ptr_null(strstr(out, "prefetch depth 0"));
    /* fits whole: one */
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 16", out, sizeof out), 0);
    tu_assert_contains(out, "1 micro-batch of 16 x 1024 tokens");
    /* given */
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 64 --micro-batches 4", out, sizeof out),
                     0);
    tu_assert_contains(out, "4 micro-batches of 16 x 1024 tokens");
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 64 --micro-batches auto --describe", out,
                             sizeof out), 0);
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 64 --micro-batches 3", out, sizeof out),
                     2);
    tu_assert_contains(out, "--micro-batches 3 does not divide --batch 64");
    /* the paper's points on its card: 175B at batch 16 with a block of weights prefetched */
    ck_assert_int_eq(tu_run_sim("--model gpt3-175b --batch 16", out, sizeof out), 0);
    tu_assert_contains(out, "prefetch depth 1");
    tu_assert_contains(out, "2 micro-batches of 8 x 1024 tokens");
    /* nothing fits: of every count and configuration, the plan short of the fewest bytes
     * (175B on 12 GiB: the most micro-batches, sub-groups of one block; the GPU alone is
     * short) */
    ck_assert_int_eq(tu_run_sim("--model gpt3-175b --batch 8 --set gpu.mem_GiB=12", out,
                                sizeof out), 1);
    tu_assert_contains(out, "the one short of the fewest bytes is shown");
    tu_assert_contains(out, "8 micro-batches of 1 x 1024 tokens");
    tu_assert_contains(out, "sub-groups of 1 block");
    ck_assert_ptr_null(strstr(out, "over capacity: cpu"));
}
END_TEST

/* Plan options fix what they name and the planner searches the rest: the same placement with
 * its own buffers and prefetch, each distinct configuration scored once. */
START_TEST(sim_options_with_planner)
{
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 16 --weights ssd", out, sizeof out), 0);
    tu_assert_contains(out, "weights on ssd");
    tu_assert_contains(out, "planner: best of");
    /* everything the search varies fixed: one configuration */
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 16 --weights cpu --prefetch 1 "
                             "--weight-buffers 2 --grad-buffers 1 --act-buffers 1 --subgroup 2 "
                             "--state-buffers 3",
                             out, sizeof out), 0);
    tu_assert_contains(out, "planner: best of 1 distinct configuration");
    tu_assert_contains(out, "prefetch depth 1; buffers: weights 2");
    tu_assert_contains(out, "sub-groups of 2 blocks");
    /* a bad combination of options is still refused, once */
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 16 --optim cpu --optim-cpu-groups 1", out,
                             sizeof out), 2);
    tu_assert_contains(out, "on SSD");
}
END_TEST

/* The seconds on the report's iteration line, or -1. */
static double report_iter_s(const char *report)
{
    const char *at = strstr(report, "\niteration ");
    double x;
    return at && sscanf(at, " iteration %lf s", &x) == 1 ? x : -1;
}

/* The planner's plan for base is at least as fast as each of the n forced by `base opt k`. */
static void assert_planned_not_slower(const char *base, const char *opt, const int *ks, int n)
{
    char args[512];
    ck_assert_int_eq(tu_run_sim(base, out, sizeof out), 0);
    double planned = report_iter_s(out);
    ck_assert_double_gt(planned, 0);
    for (int i = 0; i < n; i++) {
        snprintf(args, sizeof args, "%s %s %d", base, opt, ks[i]);
        ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
        double forced = report_iter_s(out);
        ck_assert_double_gt(forced, 0);
        ck_assert_msg(planned <= forced * (1 + 1e-9), "planned %.3f s, %s %d: %.3f s", planned,
                      opt, ks[i], forced);
    }
}

/* fuyou-sim with base and extra exits with status, its output naming what. */
static void assert_sim_says(const char *base, const char *extra, int status, const char *what)
{
    char args[512];
    snprintf(args, sizeof args, "%s %s", base, extra);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), status);
    tu_assert_contains(out, what);
}

/* States on SSD with room for some in CPU memory: the planner scores keeping them there
 * against giving that room to swapped activations, and is at least as fast as either forced. */
START_TEST(sim_states_split_scored)
{
    static const int cpu_groups[] = {0, 16};
    assert_planned_not_slower("--model gpt3-13b --batch 32 --set memory.cpu_mem_GiB=128",
                              "--optim ssd --optim-cpu-groups", cpu_groups, 2);
}
END_TEST

/* Sub-groups updated on the GPU: the planner's choice is at least as fast as none or a count
 * forced, the plan line names them, and what a plan cannot have is refused naming why
 * (exit 2). */
START_TEST(sim_gpu_groups)
{
    const char *base = "--hw h200.ini --gpu-mem 24GiB --model gpt3-2.7b --batch 8";
    static const int gpu_groups[] = {0, 4};
    assert_planned_not_slower(base, "--optim-gpu-groups", gpu_groups, 2);
    assert_sim_says(base, "", 0, "sub-groups' on gpu with the weights, updated there");
    assert_sim_says(base, "--optim-gpu-groups 3 --micro-batches 2", 2,
                    "take one micro-batch (got 2)");
    assert_sim_says(base, "--optim-gpu-groups 999", 2, "999 sub-groups' states on the GPU, of ");
    assert_sim_says(base, "--optim-gpu-groups -1", 2, "--optim-gpu-groups expects a whole number");
    assert_sim_says(base, "--policy zero-infinity --optim-gpu-groups 1", 2, "fuyou's");
}
END_TEST

/* Sub-groups streamed to the GPU's AdamW: the planner weighs them after its choice and is at
 * least as fast as none or a count forced; the plan line and the planner's line say so; a count
 * pinned is not searched; what a plan cannot stream is refused naming why (exit 2). */
START_TEST(sim_stream_groups)
{
    const char *base = "--hw h200.ini --gpu-mem 24GiB --model gpt3-2.7b --batch 8";
    static const int streams[] = {0, 2};
    assert_planned_not_slower(base, "--optim-stream-groups", streams, 2);
    assert_sim_says(base, "", 0, "streamed to gpu and updated there)");
    tu_assert_contains(out, "of its cpu-memory sub-groups streamed to the GPU's AdamW, simulated");
    assert_sim_says(base, "--optim-stream-groups 0", 0, "planner: best of");
    ck_assert_ptr_null(strstr(out, "streamed"));
    assert_sim_says(base, "--optim-stream-groups 2 --optim-gpu-groups 0", 2,
                    "keep it on the GPU (optim-gpu-groups at least 1)");
    assert_sim_says(base, "--optim-stream-groups 1 --weights ssd", 2,
                    "they need the weights there (weights cpu)");
    assert_sim_says(base, "--optim-stream-groups 2 --micro-batches 2", 2, "one micro-batch");
    assert_sim_says(base, "--optim-stream-groups 999", 2, "999 sub-groups streamed to the GPU");
    assert_sim_says(base, "--optim-stream-groups -1", 2,
                    "--optim-stream-groups expects a whole number");
}
END_TEST

/* The report says one thing at a time: what bounds the iteration (a marked resource, or the
 * waits, never both); a plan that does not fit gets its shortfall and no time; the plan line's
 * activations say they include the checkpoints; an override that breaks a pair of keys is
 * named */
START_TEST(sim_report_wording)
{
    /* bound by a resource: one mark, no "waits" sentence */
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 8", out, sizeof out), 0);
    tu_assert_contains(out, "bound by       gpu (busy");
    ck_assert_ptr_nonnull(strstr(out, "<- bound"));
    ck_assert_ptr_null(strstr(strstr(out, "<- bound") + 1, "<- bound"));
    ck_assert_ptr_null(strstr(out, "waits between dependent tasks"));
    tu_assert_contains(out, "activations with the block checkpoints: on gpu");
    ck_assert_ptr_null(strstr(out, "waiting on copies")); /* prefetched: no stall */
    /* bound by waits (one weight buffer, no prefetch: loads set the pace): no resource marked */
    ck_assert_int_eq(tu_run_sim("--hw h200.ini --model gpt2-124m --batch 1 --seq 64 --weights cpu "
                             "--optim cpu --prefetch 0 --weight-buffers 1 --optim-gpu-groups 0",
                             out, sizeof out), 0);
    tu_assert_contains(out, "bound by       waits between dependent tasks");
    tu_assert_contains(out, "the GPU idles");
    ck_assert_ptr_null(strstr(out, "<- bound"));
    /* the closed form's GPU line says how much of it is waiting on copies */
    tu_assert_contains(out, "forward");
    tu_assert_contains(out, "bound by gpu (");
    tu_assert_contains(out, " s of it waiting on copies)");
    /* does not fit: the shortfall, no time of any kind */
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 64 --micro-batches 1", out, sizeof out),
                     1);
    tu_assert_contains(out, "iteration      none: the plan does not fit");
    tu_assert_contains(out, "over capacity: gpu needs");
    /* the one change that fits, planned again: the micro-batch count the search picks */
    tu_assert_contains(out, "more than its 22.49 GiB\nto fit:        --micro-batches 2 fits "
                            "(each planned again)\n");
    ck_assert_ptr_null(strstr(out, "TFLOPS"));
    ck_assert_ptr_null(strstr(out, "tokens/s"));
    ck_assert_ptr_null(strstr(out, "closed form:"));
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 64 --micro-batches 2 --iters 2", out,
                                sizeof out), 0);
    tu_assert_contains(out, "TFLOPS");
    /* a small SSD is not fixed by a smaller batch (it had been told to lower --batch): the
     * options given that put the states there are */
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --weights ssd --optim ssd --set "
                                "ssd.capacity_GB=50 --set ssd.count=1 --optim-gpu-groups 0", out,
                                sizeof out), 1);
    tu_assert_contains(out, "over capacity: ssd needs");
    tu_assert_contains(out, "to fit:        without --optim ssd fits; ");
    tu_assert_contains(out, "; --optim cpu fits");
    ck_assert_ptr_null(strstr(out, "--batch"));
    /* CPU memory: neither tier given alone is why, both are (the planner then puts state on
     * the SSD) */
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --weights cpu --optim cpu --set "
                                "memory.cpu_mem_GiB=32", out, sizeof out), 1);
    tu_assert_contains(out, "over capacity: cpu needs");
    tu_assert_contains(out, "to fit:        without --weights cpu --optim cpu fits (each planned "
                            "again)\n");
    /* an override below the file's both-ways value: named, with the fix */
    ck_assert_int_eq(tu_run_sim("--set pcie.h2d_GBps=5 --describe", out, sizeof out), 2);
    tu_assert_contains(out, "h2d_bidir_GBps 21 (4090.ini:");
    tu_assert_contains(out, "h2d_GBps 5 (--set pcie.h2d_GBps)");
    tu_assert_contains(out, "--set pcie.h2d_bidir_GBps=5");
}
END_TEST

/* zero-infinity runs DeepSpeed's defaults, and the report says so: its step, its sub-groups of
 * about 1e9 parameters in blocks, one state buffer; no planner line (nothing was tuned); the
 * fp32 gradients on SSD in the footprint. */
START_TEST(sim_zero_infinity)
{
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 8 --policy zero-infinity", out,
                             sizeof out), 0);
    tu_assert_contains(out, "policy zero-infinity (DeepSpeed's defaults: its step after "
                            "backward, one sub-group at a time)");
    tu_assert_contains(out, "sub-groups of 3 blocks (tail 2 + embedding)");
    tu_assert_contains(out, "states 1;");
    ck_assert_ptr_null(strstr(out, "planner:"));
    ck_assert_int_eq(tu_run_sim("--model gpt3-13b --batch 8 --policy zero-infinity --describe",
                             out, sizeof out), 0);
    tu_assert_contains(out, "  grads            1.08 GiB    23.94 GiB    47.88 GiB");
}
END_TEST

START_TEST(describe)
{
    ck_assert_int_eq(tu_run_sim("--hw 4090.ini --model gpt3-13b --batch 32 --seq 1024 --describe",
                             out, sizeof out), 0);
    tu_assert_contains(out, "model gpt3-13b: gpt2 block, 40 layers, hidden 5120");
    tu_assert_contains(out, "b*.fc1");
    tu_assert_contains(out, "32768x20480x5120");
    /* the LM head's row explained: one chunk's m, its fused backward, its tied parameters */
    tu_assert_contains(out, "4096x50257x5120");
    tu_assert_contains(out, "lm_head: over chunks of at most 4096 tokens (its m), forward and "
                            "backward fused in one\n  task (fwd counts both, bwd 0)");
    tu_assert_contains(out, "tied: its parameters are embed's");
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
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "swap (none): intra-block activations kept on gpu 0 B, swapped to "
                            "cpu 0 B, to ssd 0 B");
    snprintf(args, sizeof args, "%s--swap 2GiB", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "swap (fixed amount)");
    snprintf(args, sizeof args, "%s--swap all", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "swap (all)");
    snprintf(args, sizeof args, "%s--swap lots", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 2);
    tu_assert_contains(out, "--swap expects auto, none, all, sweep or an amount");
    ck_assert_int_eq(tu_run_sim("--act cpu --swap none", out, sizeof out), 2);
    ck_assert_int_eq(tu_run_sim("--sweep-out x.tsv", out, sizeof out), 2);
    /* auto: the planner names the binding resource and what it tried */
    ck_assert_int_eq(tu_run_sim("--hw 4090.ini --model gpt3-13b --batch 8", out, sizeof out), 0);
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
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
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
    /* without options the sweep is of the planner's configuration: the plan --swap auto runs,
     * and its mark at the amount auto keeps (they once differed: another configuration) */
    char auto_plan[1024], swept[1024];
    int units = -1, marked = -2;
    ck_assert_int_eq(tu_run_sim("--hw 4090.ini --model gpt3-1.3b --batch 8", out, sizeof out), 0);
    sscanf(strstr(out, "\nplan: ") + 7, "%1023[^\n]", auto_plan);
    const char *steps = strstr(out, " block-steps)");
    ck_assert_ptr_nonnull(steps);
    while (steps > out && *steps != '(')
        steps--;
    ck_assert_int_eq(sscanf(steps, "(%d of", &units), 1);
    ck_assert_int_eq(tu_run_sim("--hw 4090.ini --model gpt3-1.3b --batch 8 --swap sweep", out,
                             sizeof out), 0);
    sscanf(strstr(out, "plan swept: ") + 12, "%1023[^\n]", swept);
    ck_assert_str_eq(swept, auto_plan);
    const char *mark = strstr(out, "<- planner");
    ck_assert_ptr_nonnull(mark);
    while (mark > out && mark[-1] != '\n')
        mark--;
    ck_assert_int_eq(sscanf(mark, "%*s %*s %d", &marked), 1);
    ck_assert_int_eq(marked, units);
}
END_TEST

/* fuyou-sim under a time limit (for inputs that once hung), stdout and stderr together. */
static int run_sim_timeout(const char *args, char *buf, size_t n)
{
    char wrapped[1024];
    snprintf(wrapped, sizeof wrapped, "%s %s", getenv("FUYOU_SIM"), args);
    setenv("FUYOU_SIM_TIMEOUT", "timeout", 1);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "-s KILL 30 %s", wrapped);
    return tu_run_bin("FUYOU_SIM_TIMEOUT", cmd, buf, n);
}

/* The output is exactly one line. */
static void assert_one_line(const char *s)
{
    ck_assert_msg(strchr(s, '\n') == s + strlen(s) - 1, "not one line: %s", s);
}

/* Sizes from the command line that overflowed int arithmetic (a heap overflow in the schedule,
 * a segfault, wrapped sizes printed with status 0, an abort): one line naming the option, 2 */
START_TEST(sim_size_limits)
{
    static const struct { const char *args, *what; } cases[] = {
        {"--micro-batches 7456541", "--micro-batches expects a whole number from 1 to 1048576"},
        {"--micro-batches 1048576", "--micro-batches 1048576 would need about"},
        {"--iters 22369622", "--iters 22369622 would need about"},
        {"--batch 2147483647 --describe", "--batch expects a whole number from 1 to 1048576"},
        {"--batch 1048576 --seq 2048 --micro-batches 1 --describe", "1 PiB"},
        {"--subgroup 2147483647", "--subgroup expects a whole number from 1 to 1048576"},
        {"--prefetch 2147483647", "--prefetch expects a whole number from 0 to 1048575"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run_sim_timeout(cases[i].args, out, sizeof out);
        ck_assert_msg(rc == 2, "%s: status %d: %s", cases[i].args, rc, out);
        tu_assert_contains(out, cases[i].what);
        assert_one_line(out);
    }
    /* the iteration limit names the most iterations this model may simulate */
    ck_assert_int_eq(tu_run_sim("--iters 22369622", out, sizeof out), 2);
    tu_assert_contains(out, "at most 4.00 GiB: --iters ");
    tu_assert_contains(out, " or fewer");
}
END_TEST

/* Model ini sizes beyond the limits: refused at their line (hidden = 2^29 without ffn once
 * blamed ffn, a key the user never set, with "got -2147483648") */
START_TEST(sim_model_limits)
{
    static const struct { const char *ini, *where, *what; } cases[] = {
        {"[model]\nlayers = 2\nhidden = 536870912\nheads = 1\nvocab = 10\nmax_seq = 1024\n",
         ":3:", "hidden: expected a positive integer of at most 131072"},
        {"[model]\nlayers = 1073741824\nhidden = 64\nheads = 1\nvocab = 10\nmax_seq = 1024\n",
         ":2:", "layers: expected a positive integer of at most 1024"},
        {"[model]\nlayers = 2\nhidden = 1073741824\nffn = 1\nheads = 1\nvocab = 10\n"
         "max_seq = 1024\n", ":3:", "hidden"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64], args[128], where[96];
        tu_temp_file(path, sizeof path, ".ini", cases[i].ini);
        snprintf(args, sizeof args, "--model %s", path);
        int rc = run_sim_timeout(args, out, sizeof out);
        unlink(path);
        ck_assert_msg(rc == 2, "case %zu: status %d: %s", i, rc, out);
        snprintf(where, sizeof where, "%s%s", path, cases[i].where);
        tu_assert_contains(out, where);
        tu_assert_contains(out, cases[i].what);
        ck_assert_msg(!strstr(out, "ffn"), "%s", out);
        assert_one_line(out);
    }
}
END_TEST

/* --cost: its options in --help; a missing price is one line naming the --set that gives it
 * (status 2, before anything is simulated); with the prices, the block after the report */
START_TEST(sim_cost)
{
    ck_assert_int_eq(tu_run_sim("--help", out, sizeof out), 0);
    tu_assert_contains(out, "--cost ");
    tu_assert_contains(out, "--tp-gpus N ");
    tu_assert_contains(out, "--tp-hw NAME|PATH ");
    tu_assert_contains(out, "--tp-set SEC.KEY=VALUE ");
    const char *base = "--model gpt3-13b --batch 32 --seq 1024";
    char args[512];
    snprintf(args, sizeof args, "%s --cost", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 2);
    tu_assert_contains(out, "fuyou-sim: --cost needs the price of one Intel D7-P5510 3.84 TB");
    tu_assert_contains(out, "--set price.ssd_usd=USD");
    ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1); /* one line, nothing else */
    snprintf(args, sizeof args, "%s --cost --set price.ssd_usd=500", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 2);
    tu_assert_contains(out, "--tp-set price.gpu_usd=USD");
    ck_assert_int_eq(tu_run_sim("--tp-gpus 4", out, sizeof out), 2);
    tu_assert_contains(out, "fuyou-sim: --tp-gpus sets up the baseline of the --cost report");
    ck_assert_int_eq(tu_run_sim("--cost --tp-gpus 0", out, sizeof out), 2);
    tu_assert_contains(out, "--tp-gpus expects a whole number from 1 to 1024, got '0'");
    snprintf(args, sizeof args, "%s --cost --describe", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 2);
    tu_assert_contains(out, "--cost reports on a prediction");

    snprintf(args, sizeof args, "%s --cost --set price.ssd_usd=500 --tp-set price.gpu_usd=15000 "
             "--tp-set price.host_usd=60000", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "throughput     ");
    tu_assert_contains(out, "\ncost, US dollars");
    tu_assert_contains(out, "4090.ini: GPU 1599 + 12 x SSD 500 + host left out");
    tu_assert_contains(out, "a100-80g.ini: 8 x GPU 15000 + host 60000 = 180000");
    tu_assert_contains(out, "tokens/s per $1000");
    tu_assert_contains(out, "fuyou / tensor parallel: ");
    tu_assert_contains(out, "x the tokens/s and model TFLOPS per dollar");
    /* a plan over capacity keeps its status 1; the block says it has no throughput */
    snprintf(args, sizeof args, "--model gpt3-13b --batch 64 --micro-batches 1 --cost --set "
             "price.ssd_usd=500 --tp-set price.gpu_usd=15000");
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 1);
    tu_assert_contains(out, "no ratio, fuyou's plan has no throughput");
}
END_TEST

/* Huge but finite hardware values: an abort in the engine, 300-digit iteration times */
START_TEST(sim_hw_ranges)
{
    static const char *sets[] = {"pcie.latency_us=1e305", "gpu.bf16_TFLOPS=1e-300",
                                 "gpu.launch_us=1e300", "ssd.count=1000000"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        char args[128], want[128];
        snprintf(args, sizeof args, "--model gpt3-1.3b --set %s", sets[i]);
        int rc = run_sim_timeout(args, out, sizeof out);
        ck_assert_msg(rc == 2, "%s: status %d: %s", sets[i], rc, out);
        snprintf(want, sizeof want, "fuyou-sim: --set %s: ", sets[i]);
        tu_assert_contains(out, want);
        tu_assert_contains(out, " from ");
        assert_one_line(out);
    }
}
END_TEST

/* Input files that are not regular files (/dev/zero grew memory without bound, a FIFO blocked
 * in open) and NUL bytes in values (silently cut short) */
START_TEST(sim_input_files)
{
    ck_assert_int_eq(run_sim_timeout("--hw /dev/zero", out, sizeof out), 2);
    tu_assert_contains(out, "fuyou-sim: /dev/zero: is a character device, not a regular file");
    assert_one_line(out);
    ck_assert_int_eq(run_sim_timeout("--model /dev/zero", out, sizeof out), 2);
    tu_assert_contains(out, "fuyou-sim: /dev/zero: is a character device, not a regular file");
    char dir[] = "/tmp/fuyou-fifo-XXXXXX", fifo[64], args[128], want[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/hw.ini", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "--hw %s", fifo);
    int rc = run_sim_timeout(args, out, sizeof out);
    unlink(fifo);
    rmdir(dir);
    ck_assert_msg(rc == 2, "status %d: %s", rc, out);
    tu_assert_contains(out, "hw.ini: is a FIFO");
    static const char text[] = "[model]\nlayers = 2\0 4\nhidden = 64\nheads = 4\nvocab = 256\n"
                               "max_seq = 1024\n";
    char path[] = "/tmp/fuyou-test-XXXXXX.ini";
    int fd = mkstemps(path, 4);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    snprintf(args, sizeof args, "--model %s", path);
    rc = run_sim_timeout(args, out, sizeof out);
    unlink(path);
    ck_assert_msg(rc == 2, "status %d: %s", rc, out);
    snprintf(want, sizeof want, "fuyou-sim: %s:2: ", path);
    tu_assert_contains(out, want);
    tu_assert_contains(out, "NUL byte");
    assert_one_line(out);
}
END_TEST

/* Models at the limits (1024 layers) are planned with bounded work: the documented largest shape
 * (hidden 131072, 1024 heads) fits nowhere and says so; a thousand layers in 16 micro-batches
 * would simulate a dozen configurations of 1.6 M tasks an iteration, and simulates the two the
 * closed form rates fastest, saying so. */
START_TEST(sim_planner_at_limits)
{
    static const struct { const char *ini, *args, *want; int status; } cases[] = {
        {"[model]\nlayers = 1024\nhidden = 131072\nheads = 1024\nvocab = 50257\n"
         "max_seq = 2048\n", "--batch 8 --seq 64", "planner: no configuration fits", 1},
        {"[model]\nlayers = 1024\nhidden = 1024\nheads = 16\nvocab = 50257\nmax_seq = 2048\n",
         "--batch 16 --seq 64 --micro-batches 16 --iters 2",
         "the 2 the closed form rates fastest simulated, as many as 4000000 tasks an iteration "
         "allow", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64], args[256];
        tu_temp_file(path, sizeof path, ".ini", cases[i].ini);
        snprintf(args, sizeof args, "--model %s %s", path, cases[i].args);
        int rc = tu_run_sim(args, out, sizeof out);
        unlink(path);
        ck_assert_msg(rc == cases[i].status, "case %zu: status %d: %s", i, rc, out);
        tu_assert_contains(out, cases[i].want);
    }
}
END_TEST

/* The line of out that starts with prefix, into line (n bytes); fails the test without one. */
static void line_of(const char *out, const char *prefix, char *line, size_t n)
{
    const char *p = strstr(out, prefix);
    ck_assert_msg(p != NULL, "no line '%s' in: %s", prefix, out);
    snprintf(line, n, "%.*s", (int)strcspn(p, "\n"), p);
}

/* Advice for a plan that does not fit is checked, not a rule of thumb: the 405B on a 4090
 * had been told to recompute (--swap none) and split into more micro-batches; the first
 * leaves it exactly as short, the second shorter of GPU memory but far shorter of CPU memory
 * (the fp32 gradient sum). Neither is offered now; the line says nothing fuyou can change
 * fits, and the GPU memory it names does fit. */
START_TEST(advice_checked)
{
    static char none[sizeof out];
    char want[256], got[256];
    const char *base = "--hw 4090.ini --model llama-3.1-405b --batch 8 --iters 2";
    char args[512];
    ck_assert_int_eq(tu_run_sim(base, out, sizeof out), 1);
    snprintf(args, sizeof args, "%s --swap none", base);
    ck_assert_int_eq(tu_run_sim(args, none, sizeof none), 1);
    line_of(out, "over capacity: ", want, sizeof want);
    line_of(none, "over capacity: ", got, sizeof got);
    ck_assert_str_eq(got, want); /* the premise: --swap none is no better */
    ck_assert_str_eq(want, "over capacity: gpu needs 31.68 GiB more than its 22.49 GiB");
    snprintf(args, sizeof args, "%s --micro-batches 8", base);
    ck_assert_int_eq(tu_run_sim(args, none, sizeof none), 1);
    tu_assert_contains(none, "over capacity: cpu needs"); /* ... nor are more micro-batches */
    line_of(out, "to fit: ", got, sizeof got);
    ck_assert_ptr_null(strstr(got, "--swap"));
    ck_assert_ptr_null(strstr(got, "--micro-batches"));
    ck_assert_str_eq(got, "to fit:        nothing fuyou can change fits llama-3.1-405b at --batch "
                          "8 --seq 1024 on 4090.ini (10 changes planned): it fits with 55 GiB of "
                          "GPU memory (here 22.49 GiB): fuyou-sim --gpu-mem 55GiB");
    snprintf(args, sizeof args, "%s --gpu-mem 55GiB", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "memory peak    gpu 54.17 GiB of 55.00 GiB");
}
END_TEST

/* h200.ini's SSD is the test machine's 64 GB disk: no 70B plan fits it, and the line names
 * the SSD (or CPU memory) that would; --ssd-capacity gives it, all devices together, and the
 * plan runs; bad values are refused in one line */
START_TEST(ssd_capacity_what_if)
{
    const char *base = "--hw h200.ini --model llama-3.1-70b --batch 8 --iters 2";
    char args[512];
    ck_assert_int_eq(tu_run_sim(base, out, sizeof out), 1);
    tu_assert_contains(out, "over capacity: ssd needs 689.47 GiB more than its 59.60 GiB\n");
    tu_assert_contains(out, "nothing fuyou can change fits llama-3.1-70b at --batch 8 --seq 1024 "
                            "on h200.ini (");
    tu_assert_contains(out, "it fits with 805 GB of SSD (here 64 GB): fuyou-sim --ssd-capacity "
                            "805GB; or with ");
    snprintf(args, sizeof args, "%s --ssd-capacity 805GB", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "ssd 749.08 GiB of 749.71 GiB");
    snprintf(args, sizeof args, "%s --ssd-capacity 2TB", base);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "ssd 749.08 GiB of 1.82 TiB");
    ck_assert_ptr_null(strstr(out, "to fit:"));
    /* all devices together: 4090.ini's twelve share 1 TB */
    ck_assert_int_eq(tu_run_sim("--ssd-capacity 1TB --describe", out, sizeof out), 0);
    tu_assert_contains(out, "capacity        22.49 GiB   752.00 GiB   931.32 GiB");
    ck_assert_int_eq(tu_run_sim("--ssd-capacity 2XB", out, sizeof out), 2);
    tu_assert_contains(out, "fuyou-sim: --ssd-capacity expects a size such as 2TB, got '2XB'");
    ck_assert_int_eq(tu_run_sim("--ssd-capacity 1e20", out, sizeof out), 2);
    tu_assert_contains(out, "fuyou-sim: --ssd-capacity is 1e20; at most 10000 TB");
    ck_assert_int_eq(tu_run_sim("--help", out, sizeof out), 0);
    tu_assert_contains(out, "--ssd-capacity BYTES");
}
END_TEST

/* An output path that cannot be written is refused before anything is planned (a 175B run of
 * 800 iterations simulated for seconds and gigabytes before it failed there): exit 2, one
 * line naming the option and the path, no report. A file that exists is not truncated by the
 * check, and one the check made is not left behind by a run that fails later. */
START_TEST(output_paths_checked_first)
{
    ck_assert_int_eq(tu_run_sim("--model gpt3-175b --iters 800 --trace /nonexistent-fuyou/t.tsv",
                                out, sizeof out), 2);
    ck_assert_str_eq(out, "fuyou-sim: --trace /nonexistent-fuyou/t.tsv: cannot create it: No "
                          "such file or directory\n");
    ck_assert_int_eq(tu_run_sim("--model gpt3-175b --iters 800 --chrome /tmp", out, sizeof out),
                     2);
    ck_assert_str_eq(out, "fuyou-sim: --chrome /tmp: is a directory; give a file to write\n");
    ck_assert_int_eq(tu_run_sim("--deps /nonexistent-fuyou/d.tsv", out, sizeof out), 2);
    tu_assert_contains(out, "--deps /nonexistent-fuyou/d.tsv: cannot create it");
    ck_assert_int_eq(tu_run_sim("--swap sweep --sweep-out /nonexistent-fuyou/s.tsv", out,
                                sizeof out), 2);
    tu_assert_contains(out, "--sweep-out /nonexistent-fuyou/s.tsv: cannot create it");
    char path[64], args[256];
    tu_temp_file(path, sizeof path, ".tsv", "kept\n");
    snprintf(args, sizeof args, "--trace %s --model gpt9", path);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 2);
    tu_assert_contains(out, "unknown model 'gpt9'");
    FILE *f = fopen(path, "r");
    char text[16] = "";
    ck_assert_ptr_nonnull(fgets(text, sizeof text, f));
    fclose(f);
    ck_assert_str_eq(text, "kept\n");
    unlink(path);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 2);
    ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_sim");
    TCase *tc = tcase_create("cli_sim");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, help);
    tcase_add_test(tc, usage_errors);
    tcase_add_test(tc, gpu_mem_budget);
    tcase_add_test(tc, bad_hw_file);
    tcase_add_test(tc, describe);
    tcase_add_test(tc, sim_zero_infinity);
    tcase_add_test(tc, sim_gpu_groups);
    tcase_add_test(tc, sim_stream_groups);
    tcase_add_test(tc, sim_report_wording);
    tcase_add_test(tc, sim_micro_batches);
    tcase_add_test(tc, sim_llama);
    tcase_add_test(tc, sim_options_with_planner);
    tcase_add_test(tc, sim_states_split_scored);
    tcase_add_test(tc, sim_planner_at_limits);
    tcase_add_test(tc, swap_modes);
    tcase_add_test(tc, swap_sweep);
    tcase_add_test(tc, sim_size_limits);
    tcase_add_test(tc, sim_model_limits);
    tcase_add_test(tc, sim_hw_ranges);
    tcase_add_test(tc, sim_cost);
    tcase_add_test(tc, sim_input_files);
    tcase_add_test(tc, advice_checked);
    tcase_add_test(tc, ssd_capacity_what_if);
    tcase_add_test(tc, output_paths_checked_first);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
