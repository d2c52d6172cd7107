/* Check suite for the plan fuyou-run runs: the plan it reports, its memory and lanes, refusals
 * naming the option that keeps every plan from fitting, and its plan against fuyou-sim's for the
 * same options (the plan line is the memory table). Runs the built binaries (FUYOU_RUN and
 * FUYOU_SIM in the environment). */
#include <math.h>
#include <stdbool.h>

#include "testutil.h"

static char out[1 << 16];

/* fuyou-run: a short run reports its plan, its memory and lanes; budgets no plan fits, a
 * missing --ssd-dir and bad values are one line and status 2, the line saying which tier is
 * short by how much and which option given keeps every plan from fitting */
START_TEST(run_plans)
{
    const char *small = "--steps 2 --batch 2 --seq 16";
    char args[256];
    snprintf(args, sizeof args, "%s --weights ssd --optim ssd --act cpu", small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "weights on ssd, optimizer states on ssd");
    tu_assert_contains(out, "memory (measured peak / predicted by the footprint)");
    tu_assert_contains(out, "lanes busy over 2 iterations");
    /* the cpu backend's device is the host: no line calls it a GPU */
    tu_assert_contains(out, " s): device ");
    ck_assert_msg(!strstr(out, "gpu ") && !strstr(out, "GPU"), "says GPU on the cpu device: %s",
                  out);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--optimizer-nice 20", out, sizeof out), 2);
    tu_assert_contains(out, "--optimizer-nice expects a whole number from 0 to 19, got '20'");
    snprintf(args, sizeof args, "%s --gpu-mem 1MiB", small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "no plan fits h200.ini under the budgets given: gpu needs ");
    tu_assert_contains(out, "of its 1.00 MiB (");
    ck_assert_msg(!strstr(out, "parameters)"), "started training: %s", out);
    snprintf(args, sizeof args, "%s --cpu-mem 64KiB", small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "cpu needs ");
    tu_assert_contains(out, "of its 64.00 KiB (");
    /* a constraint that keeps every plan from fitting is named (everything on the device does
     * not fit 8 MiB, and without --optim gpu a plan does) */
    snprintf(args, sizeof args, "%s --gpu-mem 8MiB --optim gpu", small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "; without --optim gpu fits; --optim cpu fits");
    /* more state than the machine has: the message names what to do, not an option the user
     * never gave (206 B parameters: TiBs of states in CPU memory) */
    char huge[64];
    tu_temp_file(huge, sizeof huge, ".ini",
                 "[model]\nlayers = 64\nhidden = 16384\nheads = 128\nvocab = 256\n"
                 "max_seq = 64\ndtype = fp32\n");
    snprintf(args, sizeof args, "--model %s --batch 1 --seq 16 --steps 1 --weights cpu "
             "--optim cpu", huge);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "no plan fits h200.ini: ");
    tu_assert_contains(out, "cpu needs ");
    tu_assert_contains(out, "nothing fuyou can change fits ");
    tu_assert_contains(out, " of CPU memory (here 117 GiB)");
    /* a run's budget cannot exceed its machine: the capacity is said, not an option */
    ck_assert_msg(!strstr(out, "--cpu-mem"), "names an option not given: %s", out);
    unlink(huge);
    snprintf(args, sizeof args, "%s --weights ssd --ssd-dir /nonexistent/fuyou-dir", small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "/nonexistent/fuyou-dir");
    snprintf(args, sizeof args, "%s --batch 4 --micro-batches 2 --act ssd", small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "2 micro-batches of 2 x 16 tokens");
    tu_assert_contains(out, "batch 4 x 16");
    snprintf(args, sizeof args, "%s --batch 4 --micro-batches 3", small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "--micro-batches 3 does not divide --batch 4");
    /* the plan is made on the lane that runs it (the CPU device's fp32 buffers), so a tight
     * budget that plan fits is one the run fits (it was refused: planned on bf16 sizes) */
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--steps 1 --gpu-mem 16MiB", out, sizeof out), 0);
    tu_assert_contains(out, "memory (measured peak / predicted by the footprint)");
    /* the report names the CPU device's tier as what it is, totals each tier and sets the
     * budgets beside them */
    const char *head = strstr(out, "footprint):\n");
    ck_assert_ptr_nonnull(head);
    char columns[128];
    ck_assert_int_eq(sscanf(head + 12, "%127[^\n]", columns), 1);
    tu_assert_contains(columns, "device (cpu)");
    ck_assert_msg(!strstr(columns, "gpu"), "the CPU device labelled gpu: %s", columns);
    ck_assert_ptr_nonnull(strstr(out, "\ntotal "));
    ck_assert_ptr_nonnull(strstr(out, "\nbudget "));
    tu_assert_contains(out, "16.00 MiB ");
    tu_assert_contains(out, "none given");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--gpu-mem lots", out, sizeof out), 2);
    tu_assert_contains(out, "--gpu-mem expects a size such as 24GiB, got 'lots'");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--act sideways", out, sizeof out), 2);
    tu_assert_contains(out, "--act expects recompute, gpu, cpu or ssd");
}
END_TEST


/* fuyou-run runs the plan fuyou-sim predicts for the same options, hardware and budget, and
 * prints the same line: fuyou-sim --device cpu plans the CPU device's fp32 lane */
static const char *const plan_option_sets[] = {
    "", "--weights cpu --optim ssd", "--weights cpu --swap 256KiB",
    "--weights ssd --optim cpu --swap all", "--weights cpu --swap none --subgroup 2",
    "--weights cpu --optim ssd --swap none --optim-gpu-groups 1",
};

START_TEST(run_offload_plans_as_sim)
{
    char ini[64], sim_plan[1024], run_plan[1024], args[512];
    tu_temp_file(ini, sizeof ini, ".ini",
                 "[model]\nlayers = 4\nhidden = 256\nheads = 4\nvocab = 512\nmax_seq = 128\n"
                 "dtype = fp32\n");
    /* the planner's plan; plan options without --act (the swap amount still the planner's);
     * --swap amounts, all and none (fuyou-run once made these differently from fuyou-sim, and
     * refused --swap) */
    const char *opts = plan_option_sets[_i]; /* one set per loop iteration: each its timeout */
    /* no sub-groups on the GPU but where a set asks: they fill the GPU to its last block,
     * so the swap amount beside them turns on the lane's own bytes, which differ between the
     * CPU device the run computes on and the CUDA lane fuyou-sim sizes */
    snprintf(args, sizeof args, "--hw h200.ini --set gpu.mem_GiB=0.04 --set "
             "memory.gpu_reserved_GiB=0 --model %s --batch 2 --seq 64 --optim-gpu-groups 0 %s",
             ini, opts);
    strcat(args, " --device cpu");
    ck_assert_msg(tu_run_sim(args, out, sizeof out) == 0, "fuyou-sim %s: %s", args, out);
    const char *p = strstr(out, "\nplan: ");
    ck_assert_ptr_nonnull(p);
    sscanf(p + 1, "%1023[^\n]", sim_plan);
    char tokens[64]; /* the vocabulary is not bytes: the text as uint16 tokens */
    tu_bytes_as_u16(tokens, sizeof tokens, "/usr/share/common-licenses/GPL-3");
    snprintf(args, sizeof args, "--model %s --gpu-mem 0.04GiB --batch 2 --seq 64 "
             "--steps 1 --optim-gpu-groups 0 --data %s %s", ini, tokens, opts);
    ck_assert_msg(tu_run_bin("FUYOU_RUN", args, out, sizeof out) == 0, "fuyou-run %s: %s", args,
                  out);
    p = strstr(out, "\nplan: ");
    ck_assert_ptr_nonnull(p);
    sscanf(p + 1, "%1023[^\n]", run_plan);
    ck_assert_msg(!strcmp(run_plan, sim_plan), "options '%s':\n sim %s\n run %s", opts,
                  sim_plan, run_plan);
    tu_assert_contains(run_plan, "weights on ");
    unlink(tokens);
    if (_i == 0) {
        ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--swap sweep", out, sizeof out), 2);
        tu_assert_contains(out, "--swap sweep is fuyou-sim's");
        ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--swap 12 --act gpu", out, sizeof out), 2);
        tu_assert_contains(out, "--act and --swap both decide");
    }
    unlink(ini);
}
END_TEST

/* fuyou-run on the cpu device: its memory is the host's, so with no --gpu-mem the plan is for
 * what the machine has free, said with the fuyou-sim command that predicts it, whose plan line
 * is the run's; the device's tier is named device; a budget no plan fits is refused before
 * anything is allocated, with what is short; with weights and states on the SSD already, the
 * advice is what is left in CPU memory */
START_TEST(cpu_device_plans_as_sim)
{
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--steps 1", out, sizeof out), 0);
    const char *cmd = strstr(out, "(fuyou-sim ");
    ck_assert_msg(cmd, "%s", out);
    char sim[256], sim_plan[1024], run_plan[1024];
    const char *end = strstr(cmd, " predicts");
    ck_assert_ptr_nonnull(end);
    snprintf(sim, sizeof sim, "%.*s", (int)(end - cmd - 11), cmd + 11);
    tu_assert_contains(sim, "--device cpu");
    const char *p = strstr(out, "\nplan: ");
    ck_assert_ptr_nonnull(p);
    sscanf(p + 1, "%1023[^\n]", run_plan);
    tu_assert_contains(run_plan, "weights and optimizer states on device, updated there");
    char args[512];
    snprintf(args, sizeof args, "%s --model gpt2-tiny --batch 8 --seq 64", sim);
    ck_assert_msg(tu_run_sim(args, out, sizeof out) == 0, "fuyou-sim %s: %s", args, out);
    p = strstr(out, "\nplan: ");
    ck_assert_ptr_nonnull(p);
    sscanf(p + 1, "%1023[^\n]", sim_plan);
    ck_assert_str_eq(run_plan, sim_plan);
    ck_assert_int_eq(tu_run_sim("--device tpu", out, sizeof out), 2);
    tu_assert_contains(out, "--device expects cuda or cpu, got 'tpu'");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--steps 1 --cpu-mem 8MiB", out, sizeof out), 2);
    tu_assert_contains(out, "no plan fits h200.ini under the budgets given: cpu needs ");
    ck_assert_msg(!strstr(out, "parameters)"), "started training: %s", out);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--steps 1 --cpu-mem 8MiB --weights ssd --optim ssd "
                                "--ssd-dir /tmp", out, sizeof out), 2);
    tu_assert_contains(out, "cpu needs ");
    ck_assert_msg(!strstr(out, "on SSD (--weights ssd"), "%s", out);
    tu_assert_contains(out, "--state-buffers 1 leaves ");
    tu_assert_contains(out, "nothing fuyou can change fits gpt2-tiny at --batch 8 --seq 64 on "
                            "h200.ini");
    tu_assert_contains(out, " of CPU memory (here 8 MiB)");
    ck_assert_int_eq(tu_run_bin("FUYOU_SIM", "--help", out, sizeof out), 0);
    tu_assert_contains(out, "(default: 4090.ini; fuyou-run's: h200.ini)");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--help", out, sizeof out), 0);
    tu_assert_contains(out, "(default: h200.ini; fuyou-sim's: 4090.ini)");
}
END_TEST

/* Measured bytes per tier of row `tag` in fuyou-run's memory table ("3.28 MiB / 3.28 MiB" a
 * cell: measured / predicted), into got and want. */
static void table_row(const char *out, const char *tag, double got[3], double want[3])
{
    char key[32];
    snprintf(key, sizeof key, "\n%s ", tag);
    const char *p = strstr(strstr(out, "footprint):\n"), key);
    ck_assert_msg(p, "no row %s in: %s", tag, out);
    p += strlen(key);
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < 2; k++) {
            char *end;
            double v = strtod(p, &end);
            ck_assert_msg(end != p, "row %s: %s", tag, p);
            while (*end == ' ')
                end++;
            double unit = !strncmp(end, "KiB", 3) ? 1024 : !strncmp(end, "MiB", 3) ? 1 << 20
                          : !strncmp(end, "GiB", 3) ? 1 << 30 : 1;
            (k ? want : got)[t] = v * unit;
            p = strpbrk(end, k ? " \n" : "/");
            p += 1;
        }
}

/* A plan line's count before `what` (" sub-group's on device", ...), 0 where it has none. */
static int groups_in(const char *plan, const char *what)
{
    const char *p = strstr(plan, what);
    if (!p)
        return 0;
    while (p > plan && p[-1] != ' ')
        p--;
    return atoi(p);
}

/* The plan line is the table: over a grid of option sets on the cpu device, each tier the line
 * names for the weights, the states and the swapped activations holds bytes in the measured
 * table (and the tiers it does not name hold none), every cell as the footprint predicted.
 * With --weights ssd --optim ssd under --cpu-mem 64MiB, the case: the SSD is used
 * (its reads and writes in the trace), the losses and saved weights are those of everything
 * on the device, bit for bit, and the peak resident memory is the program's own plus the
 * plan's host memory (both tiers, the device's being the host's) within 16 MiB. */
static const char *const table_sets[] = {
    "", "--weights ssd --optim ssd --cpu-mem 64MiB", "--weights cpu --optim ssd --optim-cpu-groups 1",
    "--weights ssd --optim cpu --act cpu", "--weights cpu --optim cpu --optim-gpu-groups 1",
    "--weights cpu --checkpoints ssd --act ssd", "--optim ssd --swap all --gpu-mem 8MiB",
};

START_TEST(plan_line_is_the_table)
{
    char dir[] = "/tmp/fuyou-cli-table-XXXXXX", args[1024], plan[1024], path[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *opts = table_sets[_i];
    snprintf(args, sizeof args, "--steps 2 --batch 2 --seq 16 --trace %s/t.tsv --ssd-dir %s %s",
             dir, dir, opts);
    ck_assert_msg(tu_run_bin("FUYOU_RUN", args, out, sizeof out) == 0, "%s: %s", args, out);
    const char *p = strstr(out, "\nplan: ");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p + 1, "%1023[^\n]", plan), 1);
    static const char *const tiers[] = {"device", "cpu", "ssd"};
    int w = -1, o = -1;
    if (strstr(plan, "weights and optimizer states on device"))
        w = o = 0;
    for (int t = 0; t < 3 && w < 0; t++) {
        char key[64];
        snprintf(key, sizeof key, "weights on %s,", tiers[t]);
        if (strstr(plan, key))
            w = t;
    }
    for (int t = 0; t < 3 && o < 0; t++) {
        char key[64];
        snprintf(key, sizeof key, "optimizer states on %s", tiers[t]);
        if (strstr(plan, key))
            o = t;
    }
    ck_assert_msg(w >= 0 && o >= 0, "%s", plan);
    int ng = groups_in(plan, " sub-group's on device") + groups_in(plan, " sub-groups' on device");
    int nc = groups_in(plan, " sub-group's in cpu memory") +
             groups_in(plan, " sub-groups' in cpu memory");
    double got[3], want[3];
    static const char *const rows[] = {"weights", "master", "adam_m", "adam_v", "grads",
                                       "activations", "staging", "total"};
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        table_row(out, rows[r], got, want);
        for (int t = 0; t < 3; t++)
            ck_assert_msg(got[t] == want[t], "%s: %s on %s measured %g, predicted %g", opts,
                          rows[r], tiers[t], got[t], want[t]);
    }
    table_row(out, "weights", got, want);
    ck_assert_msg(got[w] > 0, "%s: weights on %s, none there", opts, tiers[w]);
    for (int t = 1; t < 3; t++) /* the device holds rings and the edges wherever they live */
        ck_assert_msg(t == w || got[t] == 0, "%s: weights on %s too", opts, tiers[t]);
    table_row(out, "master", got, want);
    ck_assert_msg(got[o] > 0, "%s: states on %s, none there", opts, tiers[o]);
    ck_assert_msg((got[0] > 0) == (o == 0 || ng > 0), "%s: states on the device", opts);
    ck_assert_msg((got[1] > 0) == (o == 1 || nc > 0), "%s: states in cpu memory", opts);
    ck_assert_msg((got[2] > 0) == (o == 2), "%s: states on the ssd", opts);
    table_row(out, "activations", got, want);
    ck_assert_msg((got[1] > 0) == !strstr(plan, "swapped to cpu 0 B"), "%s: %s", opts, plan);
    ck_assert_msg((got[2] > 0) == !strstr(plan, "to ssd 0 B"), "%s: %s", opts, plan);
    table_row(out, "total", got, want);
    /* the store's files: what the SSD tier reserves on disk, said beside the table's bytes */
    const char *sf = strstr(out, "ssd files: ");
    ck_assert_msg((sf != NULL) == (got[2] > 0), "%s: %s", opts, out);
    if (sf) {
        double reserved;
        char unit[8];
        ck_assert_int_eq(sscanf(sf, "ssd files: %lf %7s reserved", &reserved, unit), 2);
        ck_assert_str_eq(unit, "MiB");
        ck_assert_double_ge(reserved * 1048576, got[2]); /* rounded up to whole chunks */
        ck_assert_double_eq(fmod(reserved, 4), 0);
    }
    snprintf(path, sizeof path, "%s/t.tsv", dir);
    char cmd[600], grep[256];
    snprintf(cmd, sizeof cmd, "grep -c 'ssd_read\\|ssd_write' %s", path);
    ck_assert_int_eq(tu_run_shell(cmd, grep, sizeof grep) == 0, got[2] > 0);
    if (_i == 1) {
        ck_assert_double_le(got[1], 64 << 20);
        double peak, own, host;
        const char *h = strstr(out, "host memory: peak resident ");
        ck_assert_ptr_nonnull(h);
        char u0[8], u1[8], u2[8];
        ck_assert_int_eq(sscanf(h, "host memory: peak resident %lf %7s = the program's own %lf "
                                "%7s", &peak, u0, &own, u1), 4);
        const char *pl = strstr(h, ") is ");
        ck_assert_ptr_nonnull(pl);
        ck_assert_int_eq(sscanf(pl, ") is %lf %7s", &host, u2), 2);
        ck_assert_str_eq(u0, "MiB");
        ck_assert_str_eq(u1, "MiB");
        double host_mib = !strcmp(u2, "KiB") ? host / 1024 : host;
        ck_assert_msg(peak <= own + host_mib + 16, "peak %g MiB: own %g + the plan's %g", peak,
                      own, host_mib);
        /* saved, against the same run with everything on the device: the same losses, the
         * same weights and states (a checkpoint's writer buffers are its own, so apart) */
        char ref[600];
        snprintf(ref, sizeof ref, "--steps 2 --batch 2 --seq 16 --save %s/ck %s", dir, opts);
        ck_assert_int_eq(tu_run_bin("FUYOU_RUN", ref, out, sizeof out), 0);
        snprintf(ref, sizeof ref, "--steps 2 --batch 2 --seq 16 --save %s/ref", dir);
        ck_assert_int_eq(tu_run_bin("FUYOU_RUN", ref, out, sizeof out), 0);
        snprintf(cmd, sizeof cmd, "cmp %s/ck/step-00000002/model.safetensors "
                 "%s/ref/step-00000002/model.safetensors && cmp "
                 "%s/ck/step-00000002/optimizer.safetensors "
                 "%s/ref/step-00000002/optimizer.safetensors", dir, dir, dir, dir);
        ck_assert_msg(tu_run_shell(cmd, grep, sizeof grep) == 0, "%s", grep);
    }
    tu_rm_tree(dir);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("cli_plan");
    TCase *tc = tcase_create("cli_plan");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, run_plans);
    tcase_add_test(tc, cpu_device_plans_as_sim);
    tcase_add_loop_test(tc, plan_line_is_the_table, 0,
                        sizeof table_sets / sizeof table_sets[0]);
    tcase_add_loop_test(tc, run_offload_plans_as_sim, 0,
                        (int)(sizeof plan_option_sets / sizeof plan_option_sets[0]));
    suite_add_tcase(s, tc);
    return tu_run(s);
}
