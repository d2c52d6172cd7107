/* Check suite for the command lines other than fuyou-sim's: fuyou-run's usage errors,
 * --save/--resume and its log, fuyou-trace compare, fuyou-profile, and the whole numbers all of
 * them parse alike. Runs the built binaries (FUYOU_RUN, FUYOU_SIM, FUYOU_TRACE, FUYOU_PROFILE
 * and FUYOU_PLOT in the environment); fuyou-sim's own command line is test_cli_sim's, the plans
 * fuyou-run runs against fuyou-sim's test_cli_plan's. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"

static char out[1 << 16];

/* fuyou-run: the precision and loss-scale options, refused with one line and status 2 (the
 * executor scales no losses yet) */
START_TEST(run_usage_errors)
{
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--help", out, sizeof out), 0);
    tu_assert_contains(out, "--dtype T");
    tu_assert_contains(out, "--loss-scale X");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--dtype fp16", out, sizeof out), 2);
    tu_assert_contains(out, "--dtype fp16 needs --backend cuda");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--backend cuda --dtype fp8", out, sizeof out), 2);
    tu_assert_contains(out, "fuyou-run: ");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--dtype fp32", out, sizeof out), 2);
    tu_assert_contains(out, "--dtype expects bf16 or fp16, got 'fp32'");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--loss-scale 0", out, sizeof out), 2);
    tu_assert_contains(out, "--loss-scale expects a number");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--loss-scale-window", out, sizeof out), 2);
    tu_assert_contains(out, "--loss-scale-window needs a value");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--loss-scale 1024", out, sizeof out), 2);
    tu_assert_contains(out, "--loss-scale 1024: the executor does not scale losses yet");
    /* a Llama model: the cpu backend trains it all on its device, and out of core */
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--model llama-tiny --steps 3 --warmup 1", out,
                                sizeof out), 0);
    tu_assert_contains(out, "steps 1..3, loss 5.5");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--model llama-tiny --steps 3 --warmup 1 --offload "
                                "--weights ssd --optim ssd --act cpu", out, sizeof out), 0);
    tu_assert_contains(out, "steps 1..3, loss 5.5");

}
END_TEST

/* fuyou-run --model with a Hugging Face folder: its dropout rates named in one line (fuyou
 * trains without dropout) and the model it describes trained, gpt2-tiny's shape with the
 * preset's losses; a field fuyou does not compute refused with one line and status 2 */
START_TEST(run_hf_config_notice)
{
    static const char config[] =
        "{\"model_type\": \"gpt2\", \"n_embd\": 128, \"n_head\": 4, \"n_layer\": 4,"
        " \"n_positions\": 256, \"vocab_size\": 256, \"activation_function\": \"%s\","
        " \"layer_norm_epsilon\": 1e-05, \"resid_pdrop\": 0.1, \"embd_pdrop\": 0.0,"
        " \"attn_pdrop\": 0.1}";
    char dir[] = "/tmp/fuyou-cli-hf-XXXXXX", path[64], args[256], want[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, config, "gelu_new");
    fclose(f);
    const char *small = "--steps 2 --batch 2 --seq 16 --threads 1";
    snprintf(args, sizeof args, "--model %s --from-scratch %s", dir, small); /* no weights */
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(want, sizeof want, "fuyou-run: %s: attn_pdrop 0.1, resid_pdrop 0.1 ignored: fuyou "
             "trains without dropout\n", path);
    const char *at = strstr(out, want);
    ck_assert_msg(at && !strstr(at + strlen(want), "pdrop"), "expected \"%s\" once in \"%s\"",
                  want, out);
    float first, last, preset_first, preset_last;
    const char *sum = strstr(out, "steps 1..2, loss ");
    ck_assert_ptr_nonnull(sum);
    ck_assert_int_eq(sscanf(sum, "steps 1..2, loss %f -> %f", &first, &last), 2);
    snprintf(args, sizeof args, "--model gpt2-tiny %s", small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    ck_assert_ptr_null(strstr(out, "pdrop"));
    sum = strstr(out, "steps 1..2, loss ");
    ck_assert_ptr_nonnull(sum);
    ck_assert_int_eq(sscanf(sum, "steps 1..2, loss %f -> %f", &preset_first, &preset_last), 2);
    ck_assert_float_eq(first, preset_first);
    ck_assert_float_eq(last, preset_last);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, config, "relu");
    fclose(f);
    snprintf(args, sizeof args, "--model %s %s", dir, small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    snprintf(want, sizeof want, "fuyou-run: %s: \"activation_function\" is \"relu\": fuyou's GPT-2 "
             "MLP computes gelu_new", path);
    tu_assert_contains(out, want);
    ck_assert_ptr_null(strchr(strchr(out, '\n') + 1, '\n')); /* that one line */
    tu_rm_tree(dir);
}
END_TEST

/* fuyou-run --eval-data: the held-out loss on the console, after every --eval-every steps and
 * the last, and in the summary, whatever the plan (out of core too); raw text refused for
 * GPT-2's vocabulary, naming the tool that tokenizes it */
START_TEST(run_eval_and_data)
{
    const char *gpl = "/usr/share/common-licenses/GPL-3";
    char args[512];
    snprintf(args, sizeof args, "--steps 4 --batch 2 --seq 16 --threads 1 --eval-data %s "
             "--eval-every 2 --eval-batches 3", gpl);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "eval after step 2: loss ");
    tu_assert_contains(out, "eval after step 4: loss ");
    tu_assert_contains(out, "(96 targets of 6 sequences)");
    tu_assert_contains(out, ", held-out loss ");
    snprintf(args, sizeof args, "--steps 2 --batch 2 --seq 16 --weights ssd --optim ssd --act ssd "
             "--eval-data %s --eval-batches 3", gpl);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "eval after step 2: loss ");
    tu_assert_contains(out, "(96 targets of 6 sequences)");
    tu_assert_contains(out, "weights on ssd, optimizer states on ssd");
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--model gpt2-124m --steps 1", out, sizeof out), 2);
    tu_assert_contains(out, "read as text");
    tu_assert_contains(out, "tools/prepare_data.py");
    snprintf(args, sizeof args, "--steps 2 --batch 2 --seq 16 --data %s --data %s", gpl, gpl);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_contains(out, "and 1 more --data");
}
END_TEST

/* fuyou-run --save into a directory that holds checkpoints: a fresh run, on the device or out
 * of core, is refused before it trains (one line, status 2); --overwrite replaces them */
START_TEST(run_save_refuses_checkpoints)
{
    char dir[] = "/tmp/fuyou-cli-save-XXXXXX", args[512], path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *small = "--steps 2 --batch 2 --seq 16";
    snprintf(args, sizeof args, "%s --save %s", small, dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    for (int ssd = 0; ssd < 2; ssd++) {
        snprintf(args, sizeof args, "%s%s --save %s", ssd ? "--weights ssd " : "", small, dir);
        ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
        tu_assert_contains(out, "holds a checkpoint (step-00000002)");
        tu_assert_contains(out, "--resume");
        tu_assert_contains(out, "--overwrite");
        ck_assert_msg(!strstr(out, "parameters)"), "started training first: %s", out);
    }
    snprintf(args, sizeof args, "%s --overwrite", small);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "--overwrite is for a --save directory other than");
    /* a run that fails before its first save leaves the old checkpoints */
    snprintf(args, sizeof args, "--offload --steps 1 --batch 2 --seq 16 --save %s --overwrite "
             "--cpu-mem 4KiB", dir);
    ck_assert_int_ne(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(path, sizeof path, "%s/step-00000002/model.safetensors", dir);
    ck_assert_msg(access(path, F_OK) == 0, "a failed --overwrite run removed %s", path);
    snprintf(args, sizeof args, "--offload --steps 1 --batch 2 --seq 16 --save %s --overwrite",
             dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(path, sizeof path, "%s/step-00000002", dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/step-00000001/config.json", dir);
    ck_assert_int_eq(access(path, F_OK), 0);
    /* continuing it is what --resume is for */
    snprintf(args, sizeof args, "--steps 2 --batch 2 --seq 16 --resume %s --save %s", dir, dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    /* a resumed run saving into another directory that holds checkpoints: refused the same way
     * (it was not checked), --overwrite allowed there, and not for the directory resumed from */
    char other[] = "/tmp/fuyou-cli-save2-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(other));
    snprintf(args, sizeof args, "%s --save %s", small, other);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(args, sizeof args, "--steps 3 --batch 2 --seq 16 --resume %s --save %s", dir, other);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "holds a checkpoint");
    snprintf(args, sizeof args, "--steps 3 --batch 2 --seq 16 --resume %s --save %s --overwrite",
             dir, other);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(path, sizeof path, "%s/step-00000003/model.safetensors", other);
    ck_assert_int_eq(access(path, F_OK), 0);
    snprintf(args, sizeof args, "--steps 4 --batch 2 --seq 16 --resume %s --save %s --overwrite",
             dir, dir);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "--overwrite is for a --save directory other than the one resumed");
    tu_rm_tree(other);
    tu_rm_tree(dir);
}
END_TEST

/* Every path a run writes or resumes from is checked before any work: a bad --save had been
 * found at the first save, after training; --trace and --chrome at the end */
START_TEST(run_paths_checked_first)
{
    static const struct { const char *args, *said; } bad[] = {
        {"--save /nonexistent/x", "--save /nonexistent/x: cannot write: /nonexistent: "},
        {"--save /etc/passwd", "--save /etc/passwd: cannot write: not a directory"},
        {"--log /tmp", "--log /tmp: cannot write: is a directory, a file goes here"},
        {"--resume /etc/passwd", "--resume /etc/passwd: not a directory"},
        {"--resume /nonexistent/r", "--resume /nonexistent/r: No such file or directory"},
        {"--offload --trace /nonexistent/t.tsv", "--trace /nonexistent/t.tsv: cannot write"},
        {"--offload --chrome /tmp", "--chrome /tmp: cannot write: is a directory"},
    };
    char args[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "--steps 1000000 --batch 2 --seq 16 %s", bad[i].args);
        ck_assert_msg(tu_run_bin("FUYOU_RUN", args, out, sizeof out) == 2, "%s: %s", args, out);
        tu_assert_contains(out, bad[i].said);
        ck_assert_msg(!strstr(out, "parameters)"), "started training first: %s", out);
    }
}
END_TEST

/* An output that is an input, or another output, is refused before any work (status 2) and the
 * file is left as it was: a --log naming the --data file had turned a token file into a TSV */
START_TEST(run_outputs_never_inputs)
{
    char dir[] = "/tmp/fuyou-paths-XXXXXX", data[128], args[1024], want[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(data, sizeof data, "%s/tokens.txt", dir);
    FILE *f = fopen(data, "w");
    ck_assert_ptr_nonnull(f);
    fputs("some text to train on, some text to train on\n", f);
    fclose(f);
    const struct { const char *fmt, *said; } bad[] = {
        {"--data %s/tokens.txt --log %s/tokens.txt", "--log %s/tokens.txt is an input of the "
                                                     "run (--data)"},
        {"--data %s/*.txt --trace %s/tokens.txt", "--trace %s/tokens.txt is an input of the "
                                                  "run (--data)"},
        {"--data %s/tokens.txt --eval-data %s/../%s/tokens.txt --chrome %s/tokens.txt.mask",
         "is an input of the run (a --data mask)"},
        {"--data %s/tokens.txt --log %s/x.tsv --trace %s/x.tsv", "--log and --trace both name "
                                                                "%s/x.tsv"},
        {"--data %s/tokens.txt --ssd-dir %s --log %s/fuyou.store", "--log and --ssd-dir's store "
                                                                 "both name %s/fuyou.store"},
    };
    const char *base = strrchr(dir, '/') + 1;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (i == 2)
            snprintf(args, sizeof args, bad[i].fmt, dir, dir, base, dir);
        else
            snprintf(args, sizeof args, bad[i].fmt, dir, dir, dir);
        char full[1200];
        snprintf(full, sizeof full, "--steps 2 --batch 2 --seq 8 %s", args);
        ck_assert_msg(tu_run_bin("FUYOU_RUN", full, out, sizeof out) == 2, "%s: %s", full, out);
        snprintf(want, sizeof want, bad[i].said, dir);
        tu_assert_contains(out, want);
        ck_assert_msg(!strstr(out, "parameters)"), "started training first: %s", out);
    }
    f = fopen(data, "r");
    char line[128] = "";
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    ck_assert_str_eq(line, "some text to train on, some text to train on\n");
    ck_assert_int_eq(access(strcat(strcpy(want, data), ".mask"), F_OK), -1);
    /* the --model folder's files too */
    snprintf(args, sizeof args, "--model %s/llama-tiny-hf --log %s/llama-tiny-hf/config.json",
             getenv("TEST_DATA"), getenv("TEST_DATA"));
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 2);
    tu_assert_contains(out, "config.json is an input of the run (--model)");
    tu_rm_tree(dir);
}
END_TEST

/* SIGINT or SIGTERM during a run: the step in flight finished and saved, said so, exit status
 * 130 / 143, the log's rows up to the saved step; in memory and out of core. (Before, the run
 * ended at once with the shell's status, everything since the last save lost.) */
START_TEST(run_stops_on_a_signal)
{
    const char *bin = getenv("FUYOU_RUN");
    ck_assert_ptr_nonnull(bin);
    static const struct { const char *mode, *sig; int status; } runs[] = {
        {"", "INT", 130}, {"--weights ssd --optim ssd", "TERM", 143}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char dir[] = "/tmp/fuyou-cli-stop-XXXXXX", cmd[1024], path[256];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        /* started in the background; the signal once the log has two steps */
        snprintf(cmd, sizeof cmd, "'%s' %s --steps 1000000 --batch 2 --seq 16 --save %s/ck "
                 "--log %s/log.tsv > %s/out.txt 2>&1 & pid=$!; n=0; while [ $n -lt 600 ] && "
                 "[ \"$(cat %s/log.tsv 2>/dev/null | wc -l)\" -lt 3 ]; do sleep 0.05; "
                 "n=$((n+1)); done; kill -%s $pid; wait $pid; echo \"status $?\"; "
                 "cat %s/out.txt", bin, runs[i].mode, dir, dir, dir, dir, runs[i].sig, dir);
        ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
        snprintf(path, sizeof path, "status %d", runs[i].status);
        tu_assert_contains(out, path);
        tu_assert_contains(out, "saved in ");
        tu_assert_contains(out, "continue with --resume");
        long step = 0;
        const char *at = strstr(out, " after step ");
        ck_assert_msg(at && sscanf(at, " after step %ld", &step) == 1, "%s", out);
        snprintf(path, sizeof path, "%s/ck/step-%08ld/model.safetensors", dir, step);
        ck_assert_msg(access(path, F_OK) == 0, "no %s: %s", path, out);
        snprintf(path, sizeof path, "%s/log.tsv", dir);
        ck_assert_int_eq(tu_count_lines(path), (int)step + 1); /* the header and each step */
        tu_rm_tree(dir);
    }
}
END_TEST

/* fuyou-trace compare: fuyou-sim's prediction and fuyou-run's measurement of the same plan
 * have the same tasks; --max-error and a bad file */
START_TEST(trace_compare_cli)
{
    char pred[] = "/tmp/fuyou-pred-XXXXXX", meas[] = "/tmp/fuyou-meas-XXXXXX", args[1024];
    close(mkstemp(pred));
    close(mkstemp(meas));
    /* the sub-group pinned: the run plans on the CPU device's fp32 weights, the simulator on
     * the model's bf16, and the planner's pick between near-equal sizes may differ */
    const char *plan = "--batch 2 --seq 32 --weights ssd --optim ssd --checkpoints cpu "
                       "--act recompute --subgroup 1";
    char deps[80], where[96];
    snprintf(deps, sizeof deps, "%s.deps", pred);
    snprintf(args, sizeof args, "--hw h200.ini --model %s %s --iters 3 --trace %s --deps %s",
             getenv("TINY_INI"), plan, pred, deps);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    char tokens[64]; /* tiny.ini's vocabulary is not bytes: the text as uint16 tokens */
    tu_bytes_as_u16(tokens, sizeof tokens, "/usr/share/common-licenses/GPL-3");
    snprintf(args, sizeof args, "--offload --model %s %s --steps 3 --segment 3 --trace %s "
             "--data %s", getenv("TINY_INI"), plan, meas, tokens);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    unlink(tokens);
    snprintf(args, sizeof args, "compare %s %s", pred, meas);
    ck_assert_int_eq(tu_run_bin("FUYOU_TRACE", args, out, sizeof out), 0);
    tu_assert_contains(out, "iterations compared: 3 (steady state from iteration 1)");
    tu_assert_contains(out, "0 only predicted, 0 only measured");
    tu_assert_contains(out, "bottleneck: predicted");
    /* with the schedule's dependencies, each trace's critical path; every edge resolves */
    snprintf(args, sizeof args, "compare %s %s --deps %s", pred, meas, deps);
    ck_assert_int_eq(tu_run_bin("FUYOU_TRACE", args, out, sizeof out), 0);
    tu_assert_contains(out, "critical path, per iteration:");
    tu_assert_contains(out, "predicted path of iteration 2:");
    tu_assert_contains(out, "measured path of iteration 2:");
    ck_assert_ptr_null(strstr(out, "dependencies not in the trace"));
    snprintf(args, sizeof args, "compare %s %s --deps %s", pred, meas, pred);
    ck_assert_int_eq(tu_run_bin("FUYOU_TRACE", args, out, sizeof out), 2);
    snprintf(where, sizeof where, "%s:1: not a dependencies TSV", pred);
    tu_assert_contains(out, where);
    snprintf(args, sizeof args, "compare %s %s --max-error 0", pred, meas);
    ck_assert_int_eq(tu_run_bin("FUYOU_TRACE", args, out, sizeof out), 1);
    tu_assert_contains(out, "is above --max-error");
    FILE *f = fopen(meas, "w");
    fputs("iter\ttask_id\n", f);
    fclose(f);
    snprintf(args, sizeof args, "compare %s %s", pred, meas);
    ck_assert_int_eq(tu_run_bin("FUYOU_TRACE", args, out, sizeof out), 2);
    snprintf(where, sizeof where, "%s:1:", meas);
    tu_assert_contains(out, where);
    ck_assert_int_eq(tu_run_bin("FUYOU_TRACE", "compare only-one.tsv", out, sizeof out), 2);
    tu_assert_contains(out, "compare needs PRED.tsv and MEAS.tsv");
    snprintf(args, sizeof args, "export --chrome %s -o %s.json", pred, pred);
    ck_assert_int_eq(tu_run_bin("FUYOU_TRACE", args, out, sizeof out), 0);
    snprintf(args, sizeof args, "%s.json", pred);
    unlink(args);
    /* a trace with its header alone: nothing exported, said, status 2 */
    f = fopen(meas, "w");
    fputs("iter\ttask_id\tresource\tphase\tlayer\tstart_s\tend_s\tbytes\tflops\n", f);
    fclose(f);
    snprintf(args, sizeof args, "export --chrome %s -o %s.json", meas, meas);
    ck_assert_int_eq(tu_run_bin("FUYOU_TRACE", args, out, sizeof out), 2);
    tu_assert_contains(out, "has no task rows (its header alone); nothing to export");
    snprintf(args, sizeof args, "%s.json", meas);
    ck_assert_int_eq(access(args, F_OK), -1);
    unlink(pred);
    unlink(meas);
    unlink(deps);
}
END_TEST

/* fuyou-profile --quick writes an ini fuyou-sim reads (two store directories: the [ssd] keys
 * per directory, the first measured alone too; the micro-batch sum's rate); --ssd-only and
 * --adam-only on it as the base; a bad directory is one line, status 2 */
START_TEST(profile_cli)
{
    char dir[] = "/tmp/fuyou-prof-XXXXXX", args[512], ini[64], second[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(ini, sizeof ini, "%s/me.ini", dir);
    snprintf(second, sizeof second, "%s/b", dir);
    ck_assert_int_eq(mkdir(second, 0700), 0);
    snprintf(args, sizeof args, "--quick --no-gpu --ssd-dir %s --ssd-dir %s --gib 0.0625 "
             "--out %s", dir, second, ini);
    ck_assert_int_eq(tu_run_bin("FUYOU_PROFILE", args, out, sizeof out), 0);
    tu_assert_contains(out, "wrote");
    snprintf(args, sizeof args, "--hw %s --model gpt2-124m --batch 2 --seq 256", ini);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    tu_assert_contains(out, "iteration");
    FILE *f = fopen(ini, "r");
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    tu_assert_contains(out, "adam_Gparams_per_s = ");
    tu_assert_contains(out, "[meas ");
    tu_assert_contains(out, "\nsum_GBps = ");
    tu_assert_contains(out, "\ncount = 2\n");
    char adam[128];
    const char *line = strstr(out, "adam_Gparams_per_s = ");
    snprintf(adam, sizeof adam, "%.*s", (int)strcspn(line, "\n"), line);
    /* the disk measured again over one directory: every other key and its comment from the
     * base, the comment saying so */
    char again[64], said[128];
    snprintf(again, sizeof again, "%s/again.ini", dir);
    snprintf(args, sizeof args, "--ssd-only --base %s --ssd-dir %s --gib 0.0625 --out %s", ini,
             dir, again);
    ck_assert_int_eq(tu_run_bin("FUYOU_PROFILE", args, out, sizeof out), 0);
    f = fopen(again, "r");
    n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    tu_assert_contains(out, "\ncount = 1\n");
    tu_assert_contains(out, adam);
    snprintf(said, sizeof said, "; [base %s] [meas ", ini);
    tu_assert_contains(out, said);
    /* the Adam measured again: its key and comment new, the store's (two directories) the
     * base's; with --ssd-only too, one line, status 2 */
    snprintf(args, sizeof args, "--adam-only --no-gpu --threads 2 --quick --base %s --out %s",
             ini, again);
    ck_assert_int_eq(tu_run_bin("FUYOU_PROFILE", args, out, sizeof out), 0);
    tu_assert_contains(out, "the Adam task, 2 threads: ");
    f = fopen(again, "r");
    n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    tu_assert_contains(out, "\ncount = 2\n");
    tu_assert_contains(out, "2 threads: median of 3");
    tu_assert_contains(out, "(--adam-only)\nadam_Gparams_per_s = ");
    tu_assert_contains(out, said);
    ck_assert_int_eq(tu_run_bin("FUYOU_PROFILE", "--adam-only --ssd-only", out, sizeof out), 2);
    tu_assert_contains(out, "exclude each other");
    ck_assert_int_eq(tu_run_bin("FUYOU_PROFILE", "--gpu-only --adam-only", out, sizeof out), 2);
    tu_assert_contains(out, "exclude each other");
    ck_assert_int_eq(tu_run_bin("FUYOU_PROFILE", "--gpu-only --no-gpu", out, sizeof out), 2);
    tu_assert_contains(out, "--gpu-only measures the GPU, which --no-gpu skips");
    ck_assert_int_eq(tu_run_bin("FUYOU_PROFILE", "--ssd-dir /nonexistent/x", out, sizeof out), 2);
    tu_assert_contains(out, "--ssd-dir /nonexistent/x: not a directory");
    /* --out is checked before the minutes of measuring, not after */
    ck_assert_int_eq(tu_run_bin("FUYOU_PROFILE", "--out /nonexistent/p.ini", out, sizeof out), 2);
    tu_assert_contains(out, "--out /nonexistent/p.ini: cannot write: /nonexistent: ");
    ck_assert_msg(!strstr(out, "measur"), "measured first: %s", out);
    tu_rm_tree(dir);
}
END_TEST

/* Whether regress.sh's first row under DIR/out (run, measured, predicted, error) has the run
 * predicted more than 1.2 times slower than it measured. */
static bool regress_slower(const char *dir)
{
    char path[128], row[256] = "", name[64];
    snprintf(path, sizeof path, "%s/out/rows.tsv", dir);
    FILE *f = fopen(path, "r");
    double meas = 0, pred = 0;
    bool ok = f && fgets(row, sizeof row, f) /* the header */ && fgets(row, sizeof row, f) &&
              sscanf(row, "%63[^\t]\t%lf\t%lf", name, &meas, &pred) == 3;
    if (f)
        fclose(f);
    return ok && pred > 1.2 * meas;
}

/* tools/regress.sh over a run directory as tools/device_regress.sh leaves it: a "measured" trace that
 * is fuyou-sim's own on h200.ini predicts with no error; --set overrides a key in every
 * prediction (the Adam at half its rate: slower); --again predicts on the hw1.ini beside it (the
 * same); a run whose printed plan differs from the prediction's there is predicted on --hw
 * instead, and said so (here it differs on --hw too) */
START_TEST(regress_script)
{
    const char *script = getenv("REGRESS_SH"), *build = getenv("BUILD_ROOT"),
               *preset = getenv("H200_INI");
    ck_assert_ptr_nonnull(script);
    ck_assert_ptr_nonnull(build);
    ck_assert_ptr_nonnull(preset);
    char dir[] = "/tmp/fuyou-regress-XXXXXX", path[128], args[1024];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *plan = "--weights cpu --optim cpu --checkpoints gpu --act recompute";
    snprintf(path, sizeof path, "%s/runs.txt", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "small|gpt2-124m|4|2|%s|\n", plan);
    fclose(f);
    snprintf(args, sizeof args, "--hw h200.ini --gpu-mem 24GiB --model gpt2-124m --batch 4 "
             "--seq 1024 --iters 2 --micro-batches 1 --subgroup 1 --tail 1 --prefetch 1 "
             "--weight-buffers 2 --pinned-buffers 4 --act-buffers 2 --grad-buffers 2 "
             "--state-buffers 3 --optim-gpu-groups 0 %s --trace %s/meas1.tsv", plan, dir);
    ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash '%s' --build '%s' --out %s/out --hw h200.ini %s 2>&1", script,
             build, dir, dir);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
    tu_assert_contains(out, "small");
    tu_assert_contains(out, "0.0%");
    snprintf(cmd, sizeof cmd, "bash '%s' --build '%s' --out %s/out --set "
             "cpu.adam_Gparams_per_s=1.35 --hw h200.ini %s 2>&1", script, build, dir, dir);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
    ck_assert_msg(regress_slower(dir), "--set: %s", out);
    snprintf(cmd, sizeof cmd, "bash '%s' --hw h200.ini --set 2>&1", script);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 2);
    tu_assert_contains(out, "--set needs section.key=value");
    /* the ini measured again beside the run: the Adam at half h200.ini's rate */
    snprintf(cmd, sizeof cmd, "sed 's/^adam_Gparams_per_s = .*/adam_Gparams_per_s = 1.35/' '%s' "
             "> %s/hw1.ini", preset, dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "bash '%s' --build '%s' --out %s/out --again --hw h200.ini %s 2>&1",
             script, build, dir, dir);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
    ck_assert_msg(regress_slower(dir), "--again: %s", out);
    /* the run printed another plan: predicted on --hw, which plans otherwise as well */
    snprintf(path, sizeof path, "%s/run1.txt", dir);
    f = fopen(path, "w");
    fprintf(f, "plan: not the plan fuyou-sim prints\n");
    fclose(f);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
    tu_assert_contains(out, "small: planned otherwise on ");
    tu_assert_contains(out, "predicted on h200.ini");
    tu_assert_contains(out, "small: planned otherwise on h200.ini too");
    tu_assert_contains(out, "0.0%");
    tu_rm_tree(dir);
}
END_TEST

/* The regression's predictions, by this build's cost model: tools/repredict.sh over the 39
 * measured runs of traces/samples/regression-2026-12-01-j.tsv gives exactly the rows kept
 * beside it (regression-2026-12-01-j.repredicted.tsv: a change to the cost model changes them,
 * on purpose, and the file with it), within the fidelity goals (median |error| at most 3%,
 * worst at most 8%) */
START_TEST(repredict_regression)
{
    const char *script = getenv("REPREDICT_SH"), *build = getenv("BUILD_ROOT"),
               *samples = getenv("SAMPLES_DIR");
    ck_assert_ptr_nonnull(script);
    ck_assert_ptr_nonnull(build);
    ck_assert_ptr_nonnull(samples);
    char cmd[1024], kept[256];
    snprintf(cmd, sizeof cmd, "bash '%s' --build '%s' '%s/regression-2026-12-01-j.tsv' 2>&1",
             script, build, samples);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
    snprintf(kept, sizeof kept, "%s/regression-2026-12-01-j.repredicted.tsv", samples);
    FILE *f = fopen(kept, "r");
    ck_assert_ptr_nonnull(f);
    static char want[sizeof out];
    size_t n = fread(want, 1, sizeof want - 1, f);
    want[n] = 0;
    fclose(f);
    ck_assert_msg(!strcmp(out, want), "the predictions differ from %s:\n%s", kept, out);
    const char *sum = strstr(out, "# 39 runs: iteration time |error| median ");
    ck_assert_ptr_nonnull(sum);
    double median, worst;
    ck_assert_int_eq(sscanf(sum, "# 39 runs: iteration time |error| median %lf%%, worst %lf%%",
                            &median, &worst), 2);
    ck_assert_double_le(median, 3);
    ck_assert_double_le(worst, 8);
}
END_TEST

/* tools/regress.sh's regret over a sweep: the planner's runs ("swap auto", "swap auto-again")
 * against the other amounts, an amount that ran more than once at the mean of its runs. The
 * "measured" traces are fuyou-sim's own, the one of "swap none" with its times scaled: 0.9 in
 * one sweep (the best: 0.9 of a time within 1% of the planner's), 1.2 in the other (together
 * 1.05: the planner's the best, regret 0) */
START_TEST(regress_regret)
{
    const char *script = getenv("REGRESS_SH"), *build = getenv("BUILD_ROOT");
    ck_assert_ptr_nonnull(script);
    ck_assert_ptr_nonnull(build);
    char base[] = "/tmp/fuyou-regret-XXXXXX", path[160], args[1024], cmd[1024];
    ck_assert_ptr_nonnull(mkdtemp(base));
    const char *plan = "--weights cpu --optim cpu --checkpoints gpu";
    const char *amounts[] = {"auto", "none", "auto-again"};
    const double scale[2] = {0.9, 1.2};
    for (int d = 0; d < 2; d++) {
        snprintf(path, sizeof path, "%s/%d", base, d);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        snprintf(path, sizeof path, "%s/%d/runs.txt", base, d);
        FILE *f = fopen(path, "w");
        for (int a = 0; a < 3; a++)
            fprintf(f, "s swap %s|gpt2-124m|4|2|%s --swap %s|\n", amounts[a], plan,
                    a == 1 ? "none" : "auto");
        /* a configuration run at the planner's amount only: no regret to state */
        fprintf(f, "t swap auto|gpt2-124m|4|2|%s --swap auto|\n", plan);
        fclose(f);
        for (int a = 0; a < 4; a++) {
            snprintf(args, sizeof args, "--hw h200.ini --gpu-mem 24GiB --model gpt2-124m "
                     "--batch 4 --seq 1024 --iters 2 --micro-batches 1 --subgroup 1 --tail 1 "
                     "--prefetch 1 --weight-buffers 2 --pinned-buffers 4 --act-buffers 2 "
                     "--grad-buffers 2 --state-buffers 3 --optim-gpu-groups 0 %s --swap %s "
                     "--trace %s/%d/sim.tsv",
                     plan, a == 1 ? "none" : "auto", base, d);
            ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
            snprintf(cmd, sizeof cmd, "awk -F'\\t' -v OFS='\\t' -v x=%g 'NR > 1 { $6 = "
                     "sprintf(\"%%.9f\", $6 * x); $7 = sprintf(\"%%.9f\", $7 * x) } 1' "
                     "%s/%d/sim.tsv > %s/%d/meas%d.tsv", a == 1 ? scale[d] : 1.0, base, d, base,
                     d, a + 1);
            ck_assert_int_eq(system(cmd), 0);
        }
    }
    snprintf(cmd, sizeof cmd, "bash '%s' --build '%s' --out %s/out --hw h200.ini %s/0 2>&1",
             script, build, base, base);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
    tu_assert_contains(out, "the best of it and 1 amounts");
    tu_assert_contains(out, "(swap none): regret ");
    ck_assert_msg(!strstr(out, "t: the planner"), "%s", out);
    ck_assert_msg(!strstr(out, "regret 0.0%"), "%s", out);
    ck_assert_msg(!strstr(out, "mean of its runs"), "%s", out);
    snprintf(cmd, sizeof cmd, "bash '%s' --build '%s' --out %s/out --hw h200.ini %s/0 %s/1 "
             "2>&1", script, build, base, base, base);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
    tu_assert_contains(out, "(swap auto), each amount the mean of its runs (up to 2): regret "
                       "0.0%");
    tu_rm_tree(base);
}
END_TEST

/* fuyou-run --steps beyond its limit: one line about --steps, not an allocation failure */
START_TEST(run_steps_limit)
{
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--steps 1e12", out, sizeof out), 2);
    tu_assert_contains(out, "--steps");
    ck_assert_msg(!strstr(out, "out of memory"), "%s", out);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--offload --steps 1e12", out, sizeof out), 2);
    tu_assert_contains(out, "--steps");
}
END_TEST

/* fuyou-run killed with SIGKILL in the middle of training has written the log row of every
 * step it finished; resumed from its last checkpoint, the log is the uninterrupted run's */
START_TEST(run_log_survives_kill)
{
    const char *bin = getenv("FUYOU_RUN");
    char dir[] = "/tmp/fuyou-kill-XXXXXX", ckpt[256], log_k[256], log_u[256], args[1024];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    snprintf(log_k, sizeof log_k, "%s/killed.tsv", dir);
    snprintf(log_u, sizeof log_u, "%s/whole.tsv", dir);
    const char *run = "--steps 40 --batch 1 --seq 16 --threads 1";
    snprintf(args, sizeof args, "exec '%s' %s --save %s --save-every 3 --log %s >/dev/null",
             bin, run, ckpt, log_k);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", args, (char *)NULL);
        _exit(127);
    }
    /* kill it once eight rows are in the log, while it is still running */
    int lines = 0, st;
    while ((lines = tu_count_lines(log_k)) < 9 && waitpid(pid, &st, WNOHANG) == 0)
        usleep(1000);
    bool running = waitpid(pid, &st, WNOHANG) == 0;
    if (running) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    ck_assert_msg(running && lines < 41, "%d lines in the log were seen only as the run ended: "
                  "rows are not written as steps end", lines);
    snprintf(args, sizeof args, "%s --save %s --resume %s --log %s", run, ckpt, ckpt, log_k);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(args, sizeof args, "%s --log %s", run, log_u);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    ck_assert_int_eq(tu_count_lines(log_u), 41);
    tu_assert_same_log(log_u, log_k);
    tu_rm_tree(dir);
}
END_TEST

/* Two fuyou-runs on one --save directory: while the first trains the second is refused before
 * it trains, in memory or --offload (status 2, naming the first's pid); so is one on its
 * --ssd-dir (the SSD tier's file would be another run's); once the first is killed (SIGKILL) a
 * run takes the directory */
START_TEST(run_save_dir_in_use)
{
    const char *bin = getenv("FUYOU_RUN");
    char dir[] = "/tmp/fuyou-lock-XXXXXX", ckpt[256], log[256], args[1024], want[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    snprintf(log, sizeof log, "%s/first.tsv", dir);
    /* far more steps than it takes before it is killed; no checkpoint before the end */
    snprintf(args, sizeof args, "exec '%s' --steps 100000 --batch 1 --seq 16 --threads 1 "
             "--save %s --log %s --ssd-dir %s --weights ssd >/dev/null", bin, ckpt, log, dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", args, (char *)NULL);
        _exit(127);
    }
    /* a row in its log: it trains, so it holds the directory */
    int st;
    while (tu_count_lines(log) < 2 && waitpid(pid, &st, WNOHANG) == 0)
        usleep(1000);
    bool running = waitpid(pid, &st, WNOHANG) == 0;
    ck_assert_msg(running, "the first run ended before a row was in its log");
    snprintf(want, sizeof want, "in use by fuyou-run pid %d", (int)pid);
    for (int ssd = 0; ssd < 2; ssd++) {
        snprintf(args, sizeof args, "%s--steps 2 --batch 2 --seq 16 --save %s",
                 ssd ? "--weights ssd " : "", ckpt);
        int rc = tu_run_bin("FUYOU_RUN", args, out, sizeof out);
        if (rc != 2)
            kill(pid, SIGKILL);
        ck_assert_msg(rc == 2, "a second run in %s exited %d: %s", ckpt, rc, out);
        tu_assert_contains(out, want);
        tu_assert_contains(out, "/.lock); wait for it to end or pick another --save directory");
        ck_assert_msg(!strstr(out, "parameters)"), "started training first: %s", out);
    }
    snprintf(args, sizeof args, "--steps 2 --batch 2 --seq 16 --weights ssd --ssd-dir %s", dir);
    int rc = tu_run_bin("FUYOU_RUN", args, out, sizeof out);
    if (rc != 2)
        kill(pid, SIGKILL);
    ck_assert_msg(rc == 2, "a second run on --ssd-dir %s exited %d: %s", dir, rc, out);
    tu_assert_contains(out, want);
    tu_assert_contains(out, "/.lock); wait for it to end or pick another --ssd-dir directory");
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    snprintf(args, sizeof args, "--steps 2 --batch 2 --seq 16 --save %s", ckpt);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_rm_tree(dir);
}
END_TEST

/* The same with --offload (the pipeline writes the rows): the work after the checkpoint at step
 * 4 was lost, its rows are replaced; and a log that cannot be written stops the run at once */
START_TEST(run_offload_log_resume)
{
    char dir[] = "/tmp/fuyou-olog-XXXXXX", ckpt[256], log_r[256], log_u[256], args[1024];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    snprintf(log_r, sizeof log_r, "%s/resumed.tsv", dir);
    snprintf(log_u, sizeof log_u, "%s/whole.tsv", dir);
    /* steps 1-8 are inside the default warmup of 20, so --steps does not change their rate */
    const char *run = "--offload --batch 2 --seq 16 --weights ssd --optim ssd";
    snprintf(args, sizeof args, "%s --steps 8 --log %s", run, log_u);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(args, sizeof args, "%s --steps 4 --save %s --log %s", run, ckpt, log_r);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    snprintf(args, sizeof args, "%s --steps 6 --resume %s --log %s", run, ckpt, log_r);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    ck_assert_int_eq(tu_count_lines(log_r), 7);
    snprintf(args, sizeof args, "%s --steps 8 --resume %s --log %s", run, ckpt, log_r);
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
    tu_assert_same_log(log_u, log_r);
    if (!access("/dev/full", W_OK)) {
        snprintf(args, sizeof args, "%s --steps 2 --log /dev/full", run);
        ck_assert_int_ne(tu_run_bin("FUYOU_RUN", args, out, sizeof out), 0);
        tu_assert_contains(out, "/dev/full");
        tu_assert_contains(out, strerror(ENOSPC));
        ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--steps 2 --log /dev/full", out, sizeof out), 1);
        tu_assert_contains(out, "/dev/full");
        tu_assert_contains(out, strerror(ENOSPC));
    }
    tu_rm_tree(dir);
}
END_TEST

/* Both command lines parse whole numbers the same way (fuyou-run --batch 2.5 trained with a
 * batch of 2, fuyou-sim refused it): the same message after the program's name */
START_TEST(cli_whole_numbers)
{
    static const char *opts[] = {"--batch 2.5", "--seq 64x", "--micro-batches 1.5",
                                 "--subgroup 0x10", "--tail 1e400", "--batch nan"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        char sim[512], run[512], args[128];
        snprintf(args, sizeof args, "%s --steps 1", opts[i]);
        ck_assert_msg(tu_run_bin("FUYOU_RUN", args, out, sizeof out) == 2, "%s: %s", opts[i], out);
        snprintf(run, sizeof run, "%.500s", out);
        ck_assert_msg(tu_run_sim(opts[i], out, sizeof out) == 2, "%s: %s", opts[i], out);
        snprintf(sim, sizeof sim, "%.500s", out);
        ck_assert_msg(!strncmp(run, "fuyou-run: ", 11) && !strncmp(sim, "fuyou-sim: ", 11),
                      "%s | %s", run, sim);
        ck_assert_str_eq(run + 11, sim + 11);
        tu_assert_contains(sim, "expects a whole number from ");
    }
    /* a whole number in exponent form is one, in both */
    ck_assert_int_eq(tu_run_sim("--model gpt2-tiny --hw h200 --seq 64 --iters 2e0 --batch 4e0",
                             out, sizeof out), 0);
    /* fuyou-plot's --iter too (it took atoi's reading of "2.5" and of "x") */
    static const char *const iters[] = {"2.5", "x", "-1"};
    char args[512];
    for (size_t i = 0; i < sizeof iters / sizeof iters[0]; i++) {
        snprintf(args, sizeof args, "timeline %s -o /tmp/fuyou-never.png --iter %s",
                 getenv("GOLDEN_TRACE"), iters[i]);
        ck_assert_int_eq(tu_run_bin("FUYOU_PLOT", args, out, sizeof out), 2);
        tu_assert_contains(out, "--iter expects a whole number from 0 to");
    }
}
END_TEST

/* One range for the same option in both programs, and input errors exit 2: --gpu-mem and
 * --swap beyond 1 PiB (fuyou-run --offload took --gpu-mem 1e30 and trained), --threads 0, a
 * file given to --resume, a directory to --log (both exited 1) */
START_TEST(ranges_and_exit_codes)
{
    char out[4096], run[512], sim[512];
    static const char *const both[][2] = {
        {"--gpu-mem 1e30", "--gpu-mem is 1e30; a memory budget is at most 1048576 GiB"},
        {"--cpu-mem 2e15", "--cpu-mem is 2e15; a memory budget is at most 1048576 GiB"},
        {"--swap 1e30", "--swap is 1e30; an amount kept is at most 1048576 GiB"},
        /* a bare small number is a unit forgotten, not a budget of bytes */
        {"--gpu-mem 24", "--gpu-mem 24 is 24 bytes; give a unit: 24GiB (or 24GB, 24MiB)"},
    };
    for (size_t i = 0; i < sizeof both / sizeof *both; i++) {
        char args[128];
        snprintf(args, sizeof args, "--offload %s --steps 1", both[i][0]);
        ck_assert_msg(tu_run_bin("FUYOU_RUN", args, out, sizeof out) == 2, "%s: %s", args, out);
        tu_assert_contains(out, both[i][1]);
        snprintf(run, sizeof run, "%.500s", strstr(out, both[i][1]));
        ck_assert_msg(tu_run_sim(both[i][0], out, sizeof out) == 2, "%s: %s", both[i][0], out);
        tu_assert_contains(out, both[i][1]);
        snprintf(sim, sizeof sim, "%.500s", strstr(out, both[i][1]));
        ck_assert_str_eq(run, sim);
    }
    /* no GPU to use is said before any planning, as a usage error */
    int cuda = tu_run_bin("FUYOU_RUN", "--backend cuda --steps 1 --batch 2 --seq 16", out,
                          sizeof out);
    if (strstr(out, "no cuda device can be used here")) {
        ck_assert_int_eq(cuda, 2);
        ck_assert_ptr_null(strstr(out, "plan:"));
    } else if (strstr(out, "is not in this build")) {
        ck_assert_int_eq(cuda, 2);
    }
    ck_assert_int_eq(tu_run_bin("FUYOU_RUN", "--threads 0 --steps 1", out, sizeof out), 2);
    tu_assert_contains(out, "--threads expects a whole number from 1 to 4096");
    static const char *const inputs[][2] = {
        {"--resume /etc/hostname --steps 2", "--resume /etc/hostname: not a directory"},
        {"--log /tmp --steps 1", "--log /tmp: cannot write: is a directory"},
        /* as --tail 5 is */
        {"--subgroup 5 --steps 1", "plan: sub-groups of 5 blocks exceed the model's 4"},
        /* refused before any work, though this plan puts nothing on the SSD */
        {"--offload --ssd-dir /nonexistent/ssd --steps 1",
         "--ssd-dir /nonexistent/ssd: No such file or directory"},
        {"--offload --ssd-dir /etc/hostname --steps 1", "--ssd-dir /etc/hostname: not a "
         "directory"},
    };
    for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
        ck_assert_msg(tu_run_bin("FUYOU_RUN", inputs[i][0], out, sizeof out) == 2, "%s: %s",
                      inputs[i][0], out);
        tu_assert_contains(out, inputs[i][1]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, run_usage_errors);
    tcase_add_test(tc, run_hf_config_notice);
    tcase_add_test(tc, run_eval_and_data);
    tcase_add_test(tc, run_save_refuses_checkpoints);
    tcase_add_test(tc, run_paths_checked_first);
    tcase_add_test(tc, run_outputs_never_inputs);
    tcase_add_test(tc, run_stops_on_a_signal);
    tcase_add_test(tc, trace_compare_cli);
    tcase_add_test(tc, ranges_and_exit_codes);
    tcase_add_test(tc, profile_cli);
    tcase_add_test(tc, regress_script);
    tcase_add_test(tc, regress_regret);
    tcase_add_test(tc, repredict_regression);
    tcase_add_test(tc, cli_whole_numbers);
    tcase_add_test(tc, run_steps_limit);
    tcase_add_test(tc, run_log_survives_kill);
    tcase_add_test(tc, run_offload_log_resume);
    tcase_add_test(tc, run_save_dir_in_use);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
