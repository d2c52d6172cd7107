/* plot: gnuplot figures of fuyou's tables: the timeline of a trace (predicted or measured; one
 * lane per resource, tasks coloured by phase), a swap sweep (closed-form and simulated time
 * against the amount kept, the planner's choice marked), and from a joined predicted/measured
 * table (fuyou-trace compare --tsv) the two timelines one over the other, two rows per lane, and
 * the scatter of measured against predicted task durations with the y = x line; TFLOPS against
 * batch size, predicted and measured. It writes a gnuplot script that reads the TSV files
 * directly and runs gnuplot (a run-time dependency) on it. */
#ifndef FUYOU_PLOT_H
#define FUYOU_PLOT_H

#include <stdio.h>

#include "fuyou_err.h"

typedef enum PlotKind { PLOT_TIMELINE, PLOT_SWEEP, PLOT_COMPARE, PLOT_SCATTER, PLOT_BATCH }
    PlotKind;

typedef struct PlotRequest {
    PlotKind kind;
    const char *input;  /* TSV: a trace (traces/ schema), a --sweep-out table, a joined
                           table (compare, scatter), or for batch `model batch
                           predicted_tflops measured_tflops` (tools/regress.sh's batch.tsv;
                           a measured value may be NaN) */
    const char *measured; /* sweep: TSV `swap_bytes measured_s` of runs at some of the
                             amounts, drawn over the predicted curves (NULL: none) */
    const char *output; /* .png, .svg or .pdf: the terminal follows the extension */
    const char *title;  /* may be NULL */
    int iter;           /* timeline, compare, scatter: the iteration to draw, -1 for all */
} PlotRequest;

/* Writes the gnuplot script for r to f: every text of r reaches gnuplot as a string literal,
 * never as code. 0 or -EINVAL (unknown output extension; a control character, such as a
 * newline, in the title, the output or an input's name). */
int plot_write_script(FILE *f, const PlotRequest *r, Err *e);

/* Whether the table at path (a header line, then rows whose first field is an iteration) has
 * rows of iteration `iter`: 1 or 0, with the least and greatest iteration it has in *lo and *hi
 * (*hi -1: none), or -errno with e (regfile.h's for what is not a regular file). */
int plot_find_iter(const char *path, int iter, int *lo, int *hi, Err *e);

/* Writes the script next to the output and runs gnuplot. 0, -ENOENT if gnuplot is not installed,
 * or -EIO if it failed (e holds its message). */
int plot_render(const PlotRequest *r, Err *e);

#endif
