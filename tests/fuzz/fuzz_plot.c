/* fuzz_plot: fuyou-plot's gnuplot script writer (plots/plot.h) under libFuzzer.
 *
 * The input is a request: its first byte the kind, then the title, the output, the input and
 * the --measured file's name, separated by NUL bytes (those missing: no title, "o.png",
 * "i.tsv", none). The writer either refuses it in one line (-EINVAL) or writes a script with
 * exactly the lines a request of plain names writes: no user text adds a command. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "plot.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

/* The script for r: its text (caller frees) and the writer's return in *rc. */
static char *write_script(const PlotRequest *r, int *rc, Err *e)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        abort();
    *rc = plot_write_script(f, r, e);
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
    Err e = {""};
    int rc;
    char *text = write_script(&r, &rc, &e);
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
        char *ref = write_script(&plain, &prc, &pe);
        fuzz_check(prc == 0 && lines(text) == lines(ref));
        free(ref);
    }
    free(text);
    free(buf);
    return 0;
}
