/* run_args: fuyou-run's command line. The options parsed and checked into what a run is made
 * from: the training options (the model loaded, the backend found), the pipeline's
 * configuration and the plan options. Nothing here trains, plans or touches a
 * checkpoint directory (fuyou_run.c does, in that order). Errors are one line on stderr,
 * prefixed "fuyou-run: ", as the program prints them. */
#ifndef FUYOU_RUN_ARGS_H
#define FUYOU_RUN_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "pipeline.h"
#include "plan_args.h"
#include "plan_make.h"
#include "trainer.h"

typedef struct RunArgs {
    TrainOptions train;  /* seqs_per_step is --batch; n_micro --micro-batches, 0: not given */
    bool offload;        /* --offload: accepted, changes nothing (every run is planned) */
    bool fresh_save;     /* --save names a directory other than the one resumed from (if any),
                            which must then hold no other run's checkpoints (train.overwrite:
                            they are removed) */
    const char *hw_name; /* the hardware ini the plan is judged on */
    SwapMode swap;       /* --swap: auto (the default), none, all or an amount */
    double swap_bytes;
    PlanArgs plan;       /* the plan options, --subgroup and --tail with them */
    PipeConfig pipe;     /* the device is left for the run to find */
    char model_folder[4096]; /* --model's folder when its weights are loaded (train.init_from
                                then points here) */
} RunArgs;

/* The usage text, as --help prints it. */
void run_args_usage(FILE *out);

/* Parses argv into a (every field set, defaults where an option is absent) and checks what the
 * options say together. 0 to run; 1 when --help or --version was printed; -EINVAL after one
 * line on stderr; a model's notice (model.h: what its config states that fuyou ignores) is a
 * line on stderr too. It reads the model's ini or config.json (a path, not a preset) and stats
 * the --save and --resume directories, nothing else. Re-entrant (it resets getopt). */
int run_args_parse(RunArgs *a, int argc, char **argv);

#endif
