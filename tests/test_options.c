/* Check suite for model/options: the table itself (every option named once, bounds in order,
 * what each type needs), the parser (values reach take() checked and typed, words, bounds,
 * unknown options, missing values, what was given) and --help printed from the table (every
 * option of a program once, none of another's, lines within the width). The messages as a
 * user sees them are test_cli's and test_cli_sim's. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"
#include "testutil.h"

START_TEST(table_is_whole)
{
    for (int i = 0; i < OPT_N; i++) {
        const OptSpec *s = &opt_specs[i];
        ck_assert_msg(s->name && s->help && *s->help, "option %d has no name or help", i);
        ck_assert_msg(s->progs && !(s->progs & ~7u), "--%s: no program", s->name);
        ck_assert_msg((s->type == OPT_FLAG) == !s->value, "--%s: a value's name iff it takes one",
                      s->name);
        if (s->type == OPT_WHOLE || s->type == OPT_REAL || s->type == OPT_SIZE)
            ck_assert_msg(s->lo <= s->hi, "--%s: bounds out of order", s->name);
        if (s->type == OPT_SIZE)
            ck_assert_msg(s->example && s->over && s->over_unit > 0,
                          "--%s: a size says an example and its bound", s->name);
        for (int k = 0; k < i; k++)
            ck_assert_msg(strcmp(s->name, opt_specs[k].name), "--%s twice", s->name);
    }
}
END_TEST

/* What take() was given, for the parser's tests. */
typedef struct Got {
    int n;
    OptId id[16];
    const char *value[16];
    double num[16];
    int refuse; /* 1 + the option take() refuses; 0: none */
} Got;

static int record(void *ctx, OptId id, const char *value, double num)
{
    Got *g = ctx;
    if ((int)id + 1 == g->refuse)
        return -EINVAL;
    g->id[g->n] = id, g->value[g->n] = value, g->num[g->n] = num;
    g->n++;
    return 0;
}

/* stderr to /dev/null (quiet) and back (its descriptor, returned then given back). */
static int quiet(int saved)
{
    fflush(stderr);
    if (saved < 0) {
        saved = dup(2);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        close(null);
        return saved;
    }
    dup2(saved, 2);
    close(saved);
    return -1;
}

static void no_text(FILE *out)
{
    (void)out;
}

static const OptProgram sim = {"fuyou-sim", OPT_SIM, no_text, no_text, record};

/* Parses "fuyou-sim " + args (split at spaces) with record(), quietly. */
static int parse(Got *g, bool given[OPT_N], const char *args)
{
    static char buf[1024];
    char *argv[64];
    int argc = tu_argv("fuyou-sim", args, buf, sizeof buf, argv, 64);
    *g = (Got){.refuse = g->refuse};
    int saved = quiet(-1);
    int rc = opts_parse(&sim, argc, argv, g, given);
    quiet(saved);
    return rc;
}

START_TEST(values_reach_take_typed)
{
    Got g = {0};
    bool given[OPT_N];
    ck_assert_int_eq(parse(&g, given, "--batch 1e3 --gpu-mem 24GiB --device cpu --describe "
                                      "--micro-batches auto --hw x.ini"), 0);
    ck_assert_int_eq(g.n, 6);
    ck_assert_int_eq(g.id[0], OPT_BATCH);
    ck_assert(g.num[0] == 1000);
    ck_assert(g.num[1] == 24.0 * (1 << 30));
    ck_assert_str_eq(g.value[2], "cpu");
    ck_assert(g.num[2] == -2); /* the second word of cuda|cpu */
    ck_assert_ptr_null(g.value[3]);
    ck_assert(g.num[4] == -1); /* auto: the word, not a count */
    ck_assert_str_eq(g.value[5], "x.ini");
    ck_assert(given[OPT_BATCH] && given[OPT_HW] && !given[OPT_SEQ]);
}
END_TEST

START_TEST(bad_values_refused)
{
    Got g = {0};
    const char *bad[] = {
        "--batch 0", "--batch 2.5", "--batch", "--gpu-mem 24", "--gpu-mem 2e21",
        "--gpu-mem lots", "--device tpu", "--weights tape", "--micro-batches most",
        "--prefetch 1048576", "--bogus 1", "stray", "--steps 4" /* fuyou-run's */,
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(parse(&g, NULL, bad[i]) == -EINVAL, "'%s' accepted", bad[i]);
    ck_assert_int_eq(parse(&g, NULL, "--prefetch 0 --gpu-mem 1MiB"), 0);
    g.refuse = 1 + OPT_HW; /* a program's own refusal ends the parse */
    ck_assert_int_eq(parse(&g, NULL, "--batch 2 --hw x.ini --seq 4"), -EINVAL);
    ck_assert_int_eq(g.n, 1);
}
END_TEST

/* opts_help of one program into buf. */
static void help_of(unsigned mask, char *buf, size_t n)
{
    OptProgram p = {"prog", mask, no_text, no_text, record};
    FILE *f = fmemopen(buf, n, "w");
    ck_assert_ptr_nonnull(f);
    opts_help(&p, f);
    fclose(f);
}

START_TEST(help_from_the_table)
{
    static char buf[1 << 16];
    const unsigned progs[] = {OPT_RUN, OPT_SIM, OPT_PROFILE};
    for (int k = 0; k < 3; k++) {
        help_of(progs[k], buf, sizeof buf);
        for (int i = 0; i < OPT_N; i++) {
            char flag[48];
            snprintf(flag, sizeof flag, "\n  --%s%s", opt_specs[i].name,
                     opt_specs[i].value ? " " : "");
            const char *at = strstr(buf, flag);
            bool mine = opt_specs[i].progs & progs[k];
            ck_assert_msg(mine == (at != NULL), "--%s in the help of program %u: %d",
                          opt_specs[i].name, progs[k], at != NULL);
            ck_assert_msg(!at || !strstr(at + 1, flag), "--%s twice", opt_specs[i].name);
        }
        for (const char *line = buf; *line;) {
            size_t len = strcspn(line, "\n");
            ck_assert_msg(len <= OPTS_HELP_WIDTH, "a line of %zu: %.*s", len, (int)len, line);
            line += len + (line[len] == '\n');
        }
    }
    help_of(OPT_SIM, buf, sizeof buf); /* a default another program has otherwise is said */
    tu_assert_contains(buf, "(default: 4090.ini; fuyou-run's: h200.ini)");
}
END_TEST

START_TEST(one_value_checked)
{
    double num;
    ck_assert_int_eq(opts_value("t", OPT_TP_GPUS, "16", &num), 0);
    ck_assert(num == 16);
    ck_assert_int_eq(opts_value("t", OPT_SSD_CAPACITY, "2TB", &num), 0);
    ck_assert(num == 2e12);
    ck_assert_int_eq(opts_value("t", OPT_LR, "1e-5", &num), 0);
    ck_assert(num == 1e-5);
    int saved = quiet(-1);
    int rc = opts_value("t", OPT_LR, "11", &num);
    quiet(saved);
    ck_assert_int_eq(rc, -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("options");
    tcase_add_test(tc, table_is_whole);
    tcase_add_test(tc, values_reach_take_typed);
    tcase_add_test(tc, bad_values_refused);
    tcase_add_test(tc, help_from_the_table);
    tcase_add_test(tc, one_value_checked);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
