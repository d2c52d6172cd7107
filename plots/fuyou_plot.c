/* fuyou-plot: gnuplot figures from fuyou's TSV files.
 *   fuyou-plot timeline TRACE.tsv -o timeline.png [--iter N] [--title T]
 *   fuyou-plot sweep SWEEP.tsv -o sweep.png [--measured MEAS.tsv] [--title T]
 *   fuyou-plot compare JOINED.tsv -o compare.png [--iter N] [--title T]
 *   fuyou-plot scatter JOINED.tsv -o scatter.png [--iter N] [--title T]
 *   fuyou-plot batch BATCH.tsv -o batch.png [--title T]
 * Exit codes: 0 success, 1 gnuplot failed or is missing, 2 usage or input error. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "plot.h"
#include "units.h"

static void usage(FILE *out)
{
    fprintf(out,
"usage: fuyou-plot timeline TRACE.tsv -o OUT [--iter N] [--title T]\n"
"       fuyou-plot sweep SWEEP.tsv -o OUT [--measured MEAS.tsv] [--title T]\n"
"       fuyou-plot compare|scatter JOINED.tsv -o OUT [--iter N] [--title T]\n"
"       fuyou-plot batch BATCH.tsv -o OUT [--title T]\n"
"Draws a trace (fuyou-sim --trace, or a measured one) as one lane per resource, tasks coloured\n"
"by phase; a swap sweep (fuyou-sim --swap sweep --sweep-out) as closed-form and simulated\n"
"time against the activations kept, with --measured runs (TSV: swap_bytes measured_s) as\n"
"points; from fuyou-trace compare --tsv, the predicted timeline over the measured one\n"
"(compare) or measured against predicted task durations (scatter); model TFLOPS against\n"
"batch size, predicted and measured (TSV: model batch predicted_tflops measured_tflops, as\n"
"tools/regress.sh writes it).\n"
"Each table is read first and must be of its kind (its header, its columns' numbers finite):\n"
"the first bad line is an input error. The title names the kind and the input unless --title\n"
"gives one. OUT ends in .png, .svg or .pdf. Needs gnuplot.\n"
"Exit status: 0 success, 1 gnuplot failed or is missing, 2 usage or input error.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", 1, 0, 'o'}, {"iter", 1, 0, 'i'}, {"title", 1, 0, 't'},
        {"measured", 1, 0, 'm'},
        {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'}, {0, 0, 0, 0},
    };
    PlotRequest r = {.iter = -1};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'o': r.output = optarg; break;
        case 'i': {
            int64_t v;
            if (units_parse_int(optarg, 0, INT_MAX, &v)) {
                fprintf(stderr, "fuyou-plot: --iter expects a whole number from 0 to %d, got "
                        "'%s'\n", INT_MAX, optarg);
                return 2;
            }
            r.iter = (int)v;
            break;
        }
        case 't': r.title = optarg; break;
        case 'm': r.measured = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("fuyou-plot %s\n", FUYOU_VERSION); return 0;
        default:
            fprintf(stderr, "fuyou-plot: bad option '%s'; see fuyou-plot --help\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (argc - optind != 2 || !r.output) {
        fprintf(stderr, "fuyou-plot: give a kind (timeline, sweep, compare, scatter, batch), an "
                "input and -o OUT; see fuyou-plot --help\n");
        return 2;
    }
    if (!strcmp(argv[optind], "timeline"))
        r.kind = PLOT_TIMELINE;
    else if (!strcmp(argv[optind], "sweep"))
        r.kind = PLOT_SWEEP;
    else if (!strcmp(argv[optind], "compare"))
        r.kind = PLOT_COMPARE;
    else if (!strcmp(argv[optind], "scatter"))
        r.kind = PLOT_SCATTER;
    else if (!strcmp(argv[optind], "batch"))
        r.kind = PLOT_BATCH;
    else {
        fprintf(stderr, "fuyou-plot: unknown kind '%s': timeline, sweep, compare, scatter or "
                "batch\n", argv[optind]);
        return 2;
    }
    r.input = argv[optind + 1];
    if (r.measured && r.kind != PLOT_SWEEP) {
        fprintf(stderr, "fuyou-plot: --measured goes with sweep\n");
        return 2;
    }
    /* every table read and checked before gnuplot is given it: one line naming the file and
     * line of the first thing wrong, not gnuplot's messages or a figure of nonsense */
    PlotData d;
    Err e;
    int rc = plot_read_inputs(&r, &d, &e);
    if (rc) {
        fprintf(stderr, "fuyou-plot: %s\n", e.msg);
        return rc == -ENOMEM ? 1 : 2;
    }
    rc = plot_render(&r, &d, &e);
    if (rc) {
        fprintf(stderr, "fuyou-plot: %s\n", e.msg);
        return rc == -EINVAL ? 2 : 1;
    }
    return 0;
}
