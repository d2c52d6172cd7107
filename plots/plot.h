/* plot: gnuplot figures of fuyou's tables: the timeline of a trace (predicted or measured; a
 * lane per resource with tasks, tasks coloured by phase), a swap sweep (closed-form and
 * simulated time against the amount kept, the points that do not fit apart, the planner's
 * choice marked), and from a joined predicted/measured table (fuyou-trace compare --tsv) the two
 * timelines one over the other, two rows per lane, and the scatter of measured against
 * predicted task durations with the y = x line; TFLOPS against batch size, predicted and
 * measured. Each figure has a title naming its kind and input unless one is given.
 *
 * It reads every table first (plot_read_inputs: the tables' kinds, columns and numbers, each
 * through traces/tsv.h, the trace through trace_read_tsv), then writes a gnuplot script that
 * reads the TSV files itself and runs gnuplot (a run-time dependency) on it: gnuplot is given
 * only tables of the kind its script expects. */
#ifndef FUYOU_PLOT_H
#define FUYOU_PLOT_H

#include <stdbool.h>
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
    const char *title;  /* may be NULL: the kind and the input's name */
    int iter;           /* timeline, compare, scatter: the iteration to draw, -1 for all */
} PlotRequest;

/* The header of fuyou-sim's --sweep-out table (sim/fuyou_sim.c writes it). */
#define PLOT_SWEEP_HEADER                                                                        \
    "swap_bytes\tunits\tclosed_form_s\tsim_time_s\tbottleneck\tfits\tplanner"
/* The header of the runs drawn over a sweep (--measured). */
#define PLOT_MEASURED_HEADER "swap_bytes\tmeasured_s"
/* The header of tools/regress.sh's batch.tsv. */
#define PLOT_BATCH_HEADER "model\tbatch\tpredicted_tflops\tmeasured_tflops"

/* What the inputs hold that the script draws by (plot_read_inputs finds it). */
typedef struct PlotData {
    unsigned lanes;  /* timeline, compare: bit r set where resource r has a row drawn (0: all) */
    bool infeasible; /* sweep: some point does not fit (fits is 0) */
} PlotData;

/* Reads the tables of r as gnuplot will (the input, then --measured), each a regular file
 * (regfile.h) of its kind: a trace (trace_read_tsv); a sweep table (PLOT_SWEEP_HEADER: bytes and
 * seconds finite and not negative, units whole, a resource, fits and planner 0 or 1); measured
 * runs (PLOT_MEASURED_HEADER, finite and not negative); a joined table (TRACE_JOINED_HEADER: an
 * iteration, a task id, a resource, each trace's start and end both empty or times of a trace
 * with the end not before the start, one trace's at least); a batch table (PLOT_BATCH_HEADER: a
 * model name, a batch above 0, TFLOPS finite and not negative, the measured ones NaN where not
 * measured). Each needs a row to draw: one of iteration r->iter where given (timeline, compare,
 * scatter; for scatter, a task with both durations above 0). Stops at the first bad line: a
 * file of another kind, or garbage, is refused at its first line after a few bytes. Returns 0
 * with *d; -EINVAL with e = "PATH:LINE: what is wrong" (line 1: "not a KIND: the header must
 * be ..."), "PATH: no rows to draw" or "--iter N: PATH has iterations A to B"; -errno with e
 * naming the path (regfile.h's for what is not a regular file); -ENOMEM. */
int plot_read_inputs(const PlotRequest *r, PlotData *d, Err *e);

/* Writes the gnuplot script for r, whose inputs hold d, to f: every text of r reaches gnuplot
 * as a string literal, never as code. 0 or -EINVAL (unknown output extension; a control
 * character, such as a newline, in the title, the output or an input's name). */
int plot_write_script(FILE *f, const PlotRequest *r, const PlotData *d, Err *e);

/* Writes the script next to the output and runs gnuplot. 0, -EINVAL as plot_write_script,
 * -ENOENT if gnuplot is not installed, or -EIO if it failed (e holds its message). */
int plot_render(const PlotRequest *r, const PlotData *d, Err *e);

#endif
