/* Check suite for exec/run/run_args: fuyou-run's command line parsed into what a run is made of,
 * without running it: the defaults, --batch staying the sequences of a step beside the
 * micro-batch count, the plan and executor options (--offload accepted, changing nothing),
 * --swap and what cannot go with it, loss scaling refused, --overwrite's conditions, and
 * --help. The messages themselves are test_cli's. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "backends.h"
#include "cpu_backend.h"
#include "run_args.h"
#include "testutil.h"

/* Parses "fuyou-run " + args (split at spaces) into a. */
static int parse(RunArgs *a, const char *args)
{
    static char buf[4096];
    char *argv[256];
    int argc = tu_argv("fuyou-run", args, buf, sizeof buf, argv, 256);
    return run_args_parse(a, argc, argv);
}

START_TEST(defaults)
{
    RunArgs a;
    ck_assert_int_eq(parse(&a, ""), 0);
    const TrainOptions *o = &a.train;
    ck_assert_str_eq(o->model.name, "gpt2-tiny");
    ck_assert_ptr_eq(o->backend, &backend_cpu);
    ck_assert_int_eq(o->seqs_per_step, 8);
    ck_assert_int_eq(o->n_micro, 0);
    ck_assert_int_eq(trainer_n_micro(o), 1);
    ck_assert_int_eq(o->seq, 64);
    ck_assert_int_eq(o->steps, 200);
    ck_assert(!a.offload && !a.fresh_save && !o->overwrite);
    ck_assert_str_eq(a.hw_name, "h200.ini");
    ck_assert_int_eq(a.swap, SWAP_AUTO);
    ck_assert_int_eq(a.pipe.optim_nice, PIPE_OPTIM_NICE);
    ck_assert_ptr_null(a.pipe.device);
}
END_TEST

/* args parse to a step of seqs sequences in n_micro micro-batches (0: not given) */
static void assert_step(const char *args, int seqs, int n_micro)
{
    RunArgs a;
    ck_assert_msg(parse(&a, args) == 0, "%s", args);
    ck_assert_int_eq(a.train.seqs_per_step, seqs);
    ck_assert_int_eq(a.train.n_micro, n_micro);
    ck_assert_int_eq(a.plan.count[PC_MICRO], n_micro ? n_micro : -1);
}

/* --batch is a step's sequences whatever else is given: the micro-batch count stands beside it */
START_TEST(batch_is_the_step)
{
    RunArgs a;
    assert_step("--batch 12 --micro-batches 3 --seq 32", 12, 3);
    assert_step("--weights ssd --batch 12 --micro-batches 3", 12, 3);
    assert_step("--batch 12", 12, 0); /* the plan's count */
    ck_assert_int_eq(parse(&a, "--batch 12 --micro-batches 3"), 0);
    ck_assert_int_eq(trainer_seqs_per_micro(&a.train), 4);
    ck_assert_int_eq(parse(&a, "--batch 12 --micro-batches 5"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--weights ssd --batch 12 --micro-batches 5"), -EINVAL);
}
END_TEST

/* --subgroup and --tail are the trainer's and the plan's */
START_TEST(subgroups_both_ways)
{
    RunArgs a;
    ck_assert_int_eq(parse(&a, "--subgroup 3 --tail 2"), 0);
    ck_assert_int_eq(a.train.subgroup_blocks, 3);
    ck_assert_int_eq(a.train.tail_blocks, 2);
    ck_assert_int_eq(a.plan.count[PC_SUBGROUP], 3);
    ck_assert_int_eq(a.plan.count[PC_TAIL], 2);
}
END_TEST

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* Whether two parses give the same plan options */
static bool same_plan(const PlanArgs *a, const PlanArgs *b)
{
    return same_str(a->weights, b->weights) && same_str(a->optim, b->optim) &&
           same_str(a->checkpoints, b->checkpoints) && same_str(a->act, b->act) &&
           !memcmp(a->count, b->count, sizeof a->count);
}

/* The plan's and the executor's options on any run; --offload is accepted and changes
 * nothing; --swap parsed here, with what cannot go with it */
START_TEST(plan_and_executor_options)
{
    static const char *any[] = {"--weights ssd", "--swap all", "--gpu-mem 1GiB",
                                "--ssd-dir /tmp", "--trace t.tsv", "--segment 2",
                                "--optimizer-nice 3", "--prefetch 1", "--offload"};
    RunArgs a, b;
    for (size_t i = 0; i < sizeof any / sizeof *any; i++) {
        char args[128], weights[16] = "";
        ck_assert_msg(parse(&a, any[i]) == 0, "%s", any[i]);
        if (a.plan.weights) /* the parse's strings live in its buffer, which the next reuses */
            snprintf(weights, sizeof weights, "%s", a.plan.weights);
        snprintf(args, sizeof args, "--offload %s", any[i]);
        ck_assert_msg(parse(&b, args) == 0, "%s", args);
        a.plan.weights = a.plan.weights ? weights : NULL;
        ck_assert_msg(same_plan(&a.plan, &b.plan) && a.swap == b.swap &&
                      a.pipe.gpu_budget == b.pipe.gpu_budget, "--offload changed %s", any[i]);
    }
    ck_assert_int_eq(parse(&a, "--gpu-mem 2MiB --ssd-dir /tmp --ssd-dir /var/tmp "
                               "--hw 4090.ini --trace t.tsv --optimizer-nice 0"), 0);
    ck_assert_int_eq(a.pipe.gpu_budget, 2 << 20);
    ck_assert_int_eq(a.pipe.n_ssd_dirs, 2);
    ck_assert_str_eq(a.pipe.ssd_dirs[1], "/var/tmp");
    ck_assert_str_eq(a.hw_name, "4090.ini");
    ck_assert_str_eq(a.pipe.trace_path, "t.tsv");
    ck_assert_int_eq(a.pipe.optim_nice, 0);
    ck_assert_int_eq(parse(&a, "--swap 12MiB"), 0);
    ck_assert_int_eq(a.swap, SWAP_BYTES);
    ck_assert_double_eq(a.swap_bytes, 12 << 20);
    ck_assert_int_eq(parse(&a, "--swap none"), 0);
    ck_assert_int_eq(a.swap, SWAP_NONE);
    ck_assert_int_eq(parse(&a, "--swap sweep"), -EINVAL); /* fuyou-sim's */
    ck_assert_int_eq(parse(&a, "--swap all --act gpu"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--swap lots"), -EINVAL);
}
END_TEST

/* The executor scales no losses yet: a scale other than 1, its window, and fp16 (which needs
 * one) are refused at parse */
START_TEST(loss_scaling_refused)
{
    RunArgs a;
    ck_assert_int_eq(parse(&a, "--loss-scale 1"), 0);
    ck_assert_int_eq(parse(&a, "--loss-scale 1024"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--loss-scale-window 100"), -EINVAL);
    if (backend_find("cuda"))
        ck_assert_int_eq(parse(&a, "--backend cuda --dtype fp16"), -EINVAL);
}
END_TEST

/* --overwrite: only for a --save directory that is not the one resumed from */
START_TEST(overwrite_needs_another_save)
{
    char dir[] = "/tmp/fuyou-args-XXXXXX", args[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    RunArgs a;
    ck_assert_int_eq(parse(&a, "--overwrite"), -EINVAL);
    snprintf(args, sizeof args, "--resume %s --save %s/. --overwrite", dir, dir);
    ck_assert_int_eq(parse(&a, args), -EINVAL);
    snprintf(args, sizeof args, "--resume %s --save %s", dir, dir);
    ck_assert_int_eq(parse(&a, args), 0);
    ck_assert(!a.fresh_save);
    snprintf(args, sizeof args, "--save %s --overwrite", dir);
    ck_assert_int_eq(parse(&a, args), 0);
    ck_assert(a.fresh_save && a.train.overwrite);
    ck_assert_str_eq(a.train.save_dir, dir);
    tu_rm_tree(dir);
}
END_TEST

/* The paths a run writes or resumes from are checked at parse, with the errno of what is wrong */
START_TEST(paths_checked_at_parse)
{
    RunArgs a;
    ck_assert_int_eq(parse(&a, "--save /nonexistent/x"), -ENOENT);
    ck_assert_int_eq(parse(&a, "--save /etc/passwd"), -ENOTDIR);
    ck_assert_int_eq(parse(&a, "--log /tmp"), -EISDIR);
    ck_assert_int_eq(parse(&a, "--trace /nonexistent/t.tsv"), -ENOENT);
    ck_assert_int_eq(parse(&a, "--chrome /tmp"), -EISDIR);
    ck_assert_int_eq(parse(&a, "--resume /etc/passwd"), -ENOTDIR);
    ck_assert_int_eq(parse(&a, "--resume /nonexistent/r"), -ENOENT);
    /* a --save or --log that does not exist yet, in a directory that does */
    ck_assert_int_eq(parse(&a, "--save /tmp/fuyou-args-new --log /tmp/fuyou-args-new.tsv"), 0);
    ck_assert_int_eq(access("/tmp/fuyou-args-new", F_OK), -1); /* checked, not created */
}
END_TEST

/* --data: the default text alone; repeated, every file in the order given (it kept the last) */
START_TEST(data_repeats_in_order)
{
    RunArgs a;
    ck_assert_int_eq(parse(&a, ""), 0);
    ck_assert_int_eq(a.train.n_data, 1);
    ck_assert_str_eq(a.train.data_paths[0], "/usr/share/common-licenses/GPL-3");
    ck_assert_int_eq(parse(&a, "--data b.bin --data a.npy --data shards/*.bin --data-format npy"),
                     0);
    ck_assert_int_eq(a.train.n_data, 3);
    ck_assert_str_eq(a.train.data_paths[0], "b.bin");
    ck_assert_str_eq(a.train.data_paths[1], "a.npy");
    ck_assert_str_eq(a.train.data_paths[2], "shards/*.bin");
    ck_assert_int_eq(a.train.data_format, DATA_NPY);
    char many[1024] = "";
    for (int i = 0; i <= DATA_MAX_ARGS; i++)
        strcat(many, "--data x ");
    ck_assert_int_eq(parse(&a, many), -EINVAL);
}
END_TEST

/* --eval-data as --data; --eval-every and --eval-batches need it; any plan evaluates */
START_TEST(eval_options)
{
    RunArgs a;
    ck_assert_int_eq(parse(&a, "--eval-data val.npy --eval-data val2.npy --eval-every 50 "
                               "--eval-batches 20"), 0);
    ck_assert_int_eq(a.train.n_eval, 2);
    ck_assert_str_eq(a.train.eval_paths[1], "val2.npy");
    ck_assert_int_eq(a.train.eval_every, 50);
    ck_assert_int_eq(a.train.eval_batches, 20);
    ck_assert_int_eq(parse(&a, ""), 0);
    ck_assert_int_eq(a.train.n_eval, 0);
    ck_assert_int_eq(parse(&a, "--eval-every 50"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--eval-batches 5"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--eval-data v.npy --eval-every 0"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--eval-data v.npy --weights ssd"), 0);
}
END_TEST

START_TEST(usage_and_errors)
{
    RunArgs a;
    ck_assert_int_eq(parse(&a, "--version"), 1);
    ck_assert_int_eq(parse(&a, "--help --bogus"), 1);
    ck_assert_int_eq(parse(&a, "--bogus --help"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--lr"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--lr 11"), -EINVAL);
    ck_assert_int_eq(parse(&a, "extra"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--model nosuch"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--backend nosuch"), -EINVAL);
    ck_assert_int_eq(parse(&a, "--dtype fp16"), -EINVAL); /* the cpu backend is fp32 */
    ck_assert_int_eq(parse(&a, "--resume a --init-from b"), -EINVAL);
    /* and after an error, a fresh parse */
    ck_assert_int_eq(parse(&a, "--lr 0.5 --seq 16"), 0);
    ck_assert_float_eq(a.train.lr, 0.5f);
    ck_assert_int_eq(a.train.seq, 16);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_args");
    TCase *tc = tcase_create("run_args");
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, batch_is_the_step);
    tcase_add_test(tc, subgroups_both_ways);
    tcase_add_test(tc, plan_and_executor_options);
    tcase_add_test(tc, loss_scaling_refused);
    tcase_add_test(tc, overwrite_needs_another_save);
    tcase_add_test(tc, paths_checked_at_parse);
    tcase_add_test(tc, data_repeats_in_order);
    tcase_add_test(tc, eval_options);
    tcase_add_test(tc, usage_and_errors);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
