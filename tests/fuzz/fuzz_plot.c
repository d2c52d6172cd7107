/* fuzz_plot: fuyou-plot's table reader and gnuplot script writer (plots/plot.h) under
 * libFuzzer.
 *
 * The input is a request: its first byte the kind (and bit 7 an --iter of 1), then the title,
 * the output, the input's and the --measured file's names, separated by NUL bytes (those
 * missing: no title, "o.png", "i.tsv", none), and after the fourth NUL the bytes of a table.
 * The table, given to plot_read_inputs as the request's kind, is either refused in one line
 * (-EINVAL, -ENOMEM) or found to hold rows to draw on lanes of the schedule's resources. The
 * writer, given what the table holds (or, for a table refused, the lanes and the infeasible
 * points the kind byte's bits 3 to 6 name), either refuses the request in one line (-EINVAL) or
 * writes a script with exactly the lines a request of plain names writes: no user text adds a
 * command. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "plot.h"
#include "schedule.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

/* The script for r with d: its text (caller frees) and the writer's return in *rc. */
static char *write_script(const PlotRequest *r, const PlotData *d, int *rc, Err *e)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        abort();
    *rc = plot_write_script(f, r, d, e);
    fclose(f);
    return text;
}

static size_t lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) {
        fuzz_check(*s == '\n' || (unsigned char)*s >= 0x20);
        n += *s == '\n';
    }
    return n;
}

/* The table's bytes read as kind r->kind; what it holds in *d when it is drawn. */
static bool check_table(const PlotRequest *req, const uint8_t *bytes, size_t n, PlotData *d)
{
    char path[512];
    fuzz_file(path, sizeof path, "table.tsv", bytes, n);
    PlotRequest r = *req;
    r.input = path, r.measured = NULL;
    Err e = {""};
    int rc = plot_read_inputs(&r, d, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL || rc == -ENOMEM);
        fuzz_check_message(e.msg);
        fuzz_check(strstr(e.msg, path) != NULL);
        return false;
    }
    fuzz_check(d->lanes < 1u << RES_COUNT);
    fuzz_check((r.kind != PLOT_TIMELINE && r.kind != PLOT_COMPARE) || d->lanes);
    fuzz_check(r.kind == PLOT_SWEEP || !d->infeasible);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *buf = malloc(size);
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    const char *part[4] = {NULL, "o.png", "i.tsv", NULL};
    char *at = buf, *end = buf + size - 1;
    for (int k = 0; k < 4 && at <= end; k++) {
        part[k] = at;
        at += strlen(at) + 1;
    }
    PlotRequest r = {.kind = (PlotKind)(data[0] % 5), .title = part[0], .output = part[1],
                     .input = part[2], .measured = part[3], .iter = data[0] & 0x80 ? 1 : -1};
    PlotData d;
    size_t table = at <= end ? (size_t)(at - buf) + 1 : size; /* the table's first byte */
    if (table >= size || !check_table(&r, data + table, size - table, &d))
        d = (PlotData){.lanes = (data[0] >> 3 & 7) * 9u, .infeasible = data[0] & 0x40};
    Err e = {""};
    int rc;
    char *text = write_script(&r, &d, &rc, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL);
        fuzz_check_message(e.msg);
    } else {
        const char *o = r.output, *dot = strrchr(o, '.');
        PlotRequest plain = r;
        plain.title = r.title ? "t" : NULL;
        plain.output = dot && !strcmp(dot, ".svg") ? "o.svg" : dot && !strcmp(dot, ".pdf")
                                                                ? "o.pdf" : "o.png";
        plain.input = "i.tsv";
        plain.measured = r.measured ? "m.tsv" : NULL;
        int prc;
        Err pe;
        char *ref = write_script(&plain, &d, &prc, &pe);
        fuzz_check(prc == 0 && lines(text) == lines(ref));
        free(ref);
    }
    free(text);
    free(buf);
    return 0;
}
