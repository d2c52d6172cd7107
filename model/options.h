/* options: the command-line options of fuyou-run, fuyou-sim and fuyou-profile in one table
 * (name, type, value's name, bounds, help line, the programs that take it). One parser checks
 * every value against it, so an option two programs share reads and fails alike in both
 * (messages such as "fuyou-sim: --batch expects a whole number from 1 to 1048576, got '0'"),
 * and --help is printed from it. A size (--gpu-mem 24GiB) reaches a program as bytes.
 * What the options mean together stays with each program (run_args.c, fuyou_sim.c,
 * fuyou_profile.c). */
#ifndef FUYOU_OPTIONS_H
#define FUYOU_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

/* The programs, as masks of OptSpec.progs. */
enum { OPT_RUN = 1, OPT_SIM = 2, OPT_PROFILE = 4 };

/* Every option, in --help's order. The plan options are one run, in plan_args.h's order
 * (the four tiers, then enum PlanCount's counts): OPT_WEIGHTS + k is plan option k. */
typedef enum OptId {
    OPT_HW, OPT_SET, OPT_GPU_MEM, OPT_CPU_MEM, OPT_SSD_CAPACITY, OPT_SSD_DIR, OPT_THREADS,
    OPT_MODEL, OPT_FROM_SCRATCH, OPT_BACKEND, OPT_DEVICE, OPT_DTYPE, OPT_LOSS_SCALE,
    OPT_LOSS_SCALE_WINDOW, OPT_DATA, OPT_DATA_FORMAT, OPT_EVAL_DATA, OPT_EVAL_EVERY,
    OPT_EVAL_BATCHES, OPT_BATCH, OPT_SEQ, OPT_STEPS, OPT_ITERS,
    OPT_LR, OPT_WARMUP, OPT_MIN_LR_RATIO, OPT_WEIGHT_DECAY, OPT_BETA1, OPT_BETA2, OPT_EPS,
    OPT_CLIP, OPT_SEED,
    OPT_SAVE, OPT_SAVE_EVERY, OPT_SAVE_TOTAL_LIMIT, OPT_SAVE_WEIGHTS_ONLY, OPT_OVERWRITE,
    OPT_RESUME, OPT_INIT_FROM,
    OPT_POLICY, OPT_SWAP, OPT_SWEEP_OUT,
    OPT_WEIGHTS, OPT_OPTIM, OPT_CHECKPOINTS, OPT_ACT, OPT_MICRO_BATCHES, OPT_SUBGROUP,
    OPT_TAIL, OPT_PREFETCH, OPT_WEIGHT_BUFFERS, OPT_PINNED_BUFFERS, OPT_ACT_BUFFERS,
    OPT_GRAD_BUFFERS, OPT_STATE_BUFFERS, OPT_OPTIM_CPU_GROUPS, OPT_OPTIM_GPU_GROUPS,
    OPT_OPTIM_STREAM_GROUPS,
    OPT_OFFLOAD, OPT_SEGMENT, OPT_OPTIMIZER_NICE,
    OPT_LOG, OPT_TRACE, OPT_CHROME, OPT_DEPS, OPT_DESCRIBE,
    OPT_COST, OPT_TP_GPUS, OPT_TP_HW, OPT_TP_SET,
    OPT_QUICK, OPT_OUT, OPT_BASE, OPT_GIB, OPT_NO_GPU, OPT_SSD_ONLY, OPT_ADAM_ONLY,
    OPT_GPU_ONLY,
    OPT_N
} OptId;

typedef enum OptType {
    OPT_FLAG,  /* no value */
    OPT_TEXT,  /* kept as given; where words are listed, one of them */
    OPT_WHOLE, /* a whole number within the bounds (units_parse_int); or one of the words */
    OPT_REAL,  /* a number within the bounds */
    OPT_SIZE,  /* bytes, with a unit (24GiB), within the bounds */
} OptType;

typedef struct OptSpec {
    const char *name;   /* without "--" */
    OptType type;
    const char *value;  /* the value's name in --help (N, FILE, BYTES); NULL for a flag */
    double lo, hi;      /* OPT_WHOLE, OPT_REAL, OPT_SIZE */
    const char *words;  /* the words a value may be, '|' between them; NULL: none */
    const char *example;  /* OPT_SIZE: a size it takes ("24GiB") */
    const char *over;     /* OPT_SIZE: its bound in words, a format of hi / over_unit */
    double over_unit;
    unsigned progs;     /* OPT_RUN | OPT_SIM | OPT_PROFILE */
    const char *dflt[3]; /* the default in --help, by program (run, sim, profile); NULL: none
                            said */
    const char *help;
} OptSpec;

extern const OptSpec opt_specs[OPT_N];

/* What one program is, for the parser and --help. */
typedef struct OptProgram {
    const char *name;            /* "fuyou-sim" */
    unsigned mask;               /* OPT_RUN, OPT_SIM or OPT_PROFILE */
    void (*intro)(FILE *out);    /* --help before the options ("usage: ..." and what it does) */
    void (*outro)(FILE *out);    /* after them (exit status) */
    /* Takes one option: value as given (NULL for a flag) and, for a number or a size, num
     * (a word of a whole option: -1 - its index). 0, or -EINVAL after one line on stderr. */
    int (*take)(void *ctx, OptId id, const char *value, double num);
} OptProgram;

/* Parses argv, every option of p's in order through p->take; given[id] says which were
 * given (may be NULL). 0; 1 when --help or --version was printed; -EINVAL after one line on
 * stderr ("PROG: --x expects ..., got 'v'", an unknown option, one without its value, an
 * argument that is no option). Re-entrant: it resets getopt. */
int opts_parse(const OptProgram *p, int argc, char **argv, void *ctx, bool given[OPT_N]);

/* --help: p's intro, then its options from the table in order with their help wrapped at
 * OPTS_HELP_WIDTH columns, each default said (and another program's where it differs), then
 * its outro. */
enum { OPTS_HELP_WIDTH = 92, OPTS_HELP_COLUMN = 26 };
void opts_help(const OptProgram *p, FILE *out);

/* Checks one value of option id as the parser does: *num as take() gets it. 0 or -EINVAL
 * after one line on stderr prefixed with prog. */
int opts_value(const char *prog, OptId id, const char *value, double *num);

#endif
