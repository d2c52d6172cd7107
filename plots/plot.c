/* plot: gnuplot scripts for timelines and sweeps; see plot.h. */
#include "plot.h"

#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "regfile.h"
#include "schedule.h"

extern char **environ;

static const char *terminal(const char *out)
{
    const char *dot = strrchr(out, '.');
    if (!dot)
        return NULL;
    if (!strcmp(dot, ".png"))
        return "pngcairo size 1600,600 noenhanced";
    if (!strcmp(dot, ".svg"))
        return "svg size 1600,600 noenhanced";
    if (!strcmp(dot, ".pdf"))
        return "pdfcairo size 16cm,6cm noenhanced";
    return NULL;
}

/* gnuplot string literal: single quotes, doubled inside. */
static void quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

/* One data series: the quoted file, its header line skipped, then `using` and the rest. */
static void series(FILE *f, const char *path, const char *rest)
{
    quoted(f, path);
    fprintf(f, " skip 1 using %s", rest);
}

/* The resource lanes of a timeline, from the top in the schedule's order (gpu, h2d, d2h,
 * ssd_read, ssd_write, cpu_adam); other resources at 0. */
static void lanes(FILE *f)
{
    fprintf(f, "lane(s) = ");
    for (int r = 0; r < RES_COUNT; r++)
        fprintf(f, "s eq '%s' ? %d : ", resource_name(r), RES_COUNT - r);
    fprintf(f, "0\nset ytics (");
    for (int r = 0; r < RES_COUNT; r++)
        fprintf(f, "'%s' %d, ", resource_name(r), RES_COUNT - r);
    fprintf(f, "'other' 0)\nset yrange [-0.6:%.1f]\nset xlabel 'seconds'\n"
               "set style fill solid 0.8 noborder\n", RES_COUNT + 0.6);
}

/* Text for a gnuplot string literal: a single-quoted one takes every byte literally (no
 * escapes, no backquote substitution) but a line break ends the command, so a newline in a
 * title would start a command of the title's choosing. Control characters are refused. */
static int check_text(const char *what, const char *s, Err *e)
{
    for (const char *c = s; c && *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return err_set(e, -EINVAL, "%s: control character 0x%02x at byte %td: not allowed "
                           "in a figure's text or file names", what, (unsigned char)*c, c - s);
    return 0;
}

int plot_write_script(FILE *f, const PlotRequest *r, Err *e)
{
    int rc = check_text("--title", r->title, e);
    if (!rc)
        rc = check_text("-o", r->output, e);
    if (!rc)
        rc = check_text("the input", r->input, e);
    if (!rc)
        rc = check_text("--measured", r->measured, e);
    if (rc)
        return rc;
    const char *term = terminal(r->output);
    if (!term)
        return err_set(e, -EINVAL, "%s: the output must end in .png, .svg or .pdf", r->output);
    fprintf(f, "set terminal %s\nset output ", term);
    quoted(f, r->output);
    fprintf(f, "\nset datafile separator '\\t'\nset key outside right top\nset grid\n");
    if (r->title) {
        fprintf(f, "set title ");
        quoted(f, r->title);
        fputc('\n', f);
    }
    fprintf(f, "keep(i) = %d < 0 || i == %d\n", r->iter, r->iter);
    if (r->kind == PLOT_TIMELINE || r->kind == PLOT_COMPARE)
        lanes(f);
    if (r->kind == PLOT_TIMELINE) {
        fprintf(f, "phase(s) = s eq 'forward' ? 1 : s eq 'backward' ? 2 : 3\n"
                   "plot for [p=1:3] ");
        series(f, r->input, "(keep($1) ? ($6 + $7) / 2 : NaN):(keep($1) && "
                            "phase(strcol(4)) == p ? lane(strcol(3)) : NaN):"
                            "(($7 - $6) / 2):(0.35) with boxxyerror "
                            "title word('forward backward optimizer', p)\n");
    } else if (r->kind == PLOT_COMPARE) {
        /* Joined table: 1 iter, 3 resource, 4-5 predicted start/end, 6-7 measured start/end.
         * Each lane has the predicted row above the measured one; each trace is drawn from its
         * own first task drawn (a measured iteration starts later than the predicted one
         * after slower iterations before it; fuyou-plot checks the table has rows of the
         * iteration asked for, plot_find_iter). */
        fprintf(f, "stats ");
        series(f, r->input, "(keep($1) ? $4 : NaN) nooutput\np0 = STATS_min\nstats ");
        series(f, r->input, "(keep($1) ? $6 : NaN) nooutput\nm0 = STATS_min\n");
        fprintf(f, "set xlabel 'seconds from the first task drawn (each trace its own)'\n"
                   "plot ");
        series(f, r->input, "(keep($1) ? ($4 + $5) / 2 - p0 : NaN):(lane(strcol(3)) + 0.2):"
                            "(($5 - $4) / 2):(0.17) with boxxyerror title 'predicted', ");
        series(f, r->input, "(keep($1) ? ($6 + $7) / 2 - m0 : NaN):(lane(strcol(3)) - 0.2):"
                            "(($7 - $6) / 2):(0.17) with boxxyerror title 'measured'\n");
    } else if (r->kind == PLOT_SCATTER) {
        fprintf(f, "set logscale xy\nset xlabel 'predicted task duration (s)'\n"
                   "set ylabel 'measured task duration (s)'\nset size ratio -1\nplot ");
        series(f, r->input, "(keep($1) && $5 > $4 ? $5 - $4 : NaN):($7 > $6 ? $7 - $6 : "
                            "NaN) with points pt 7 ps 0.5 title 'tasks', x with lines lw 2 "
                            "title 'y = x'\n");
    } else if (r->kind == PLOT_BATCH) {
        fprintf(f, "set xlabel 'batch (sequences)'\nset ylabel 'model TFLOPS'\n"
                   "set logscale x 2\nset yrange [0:*]\n"
                   "set offsets graph 0.05, graph 0.05, 0, 0\nplot ");
        series(f, r->input, "2:3 with points pt 6 ps 1.5 title 'predicted', ");
        series(f, r->input, "2:4 with points pt 7 ps 1 title 'measured', ");
        series(f, r->input, "2:3:1 with labels offset 0,1 font ',8' notitle\n");
    } else {
        fprintf(f, "set xlabel 'activations kept instead of recomputed (GiB)'\n"
                   "set ylabel 'seconds per iteration'\nplot ");
        series(f, r->input, "($1 / 2**30):3 with lines lw 2 title 'closed form', ");
        series(f, r->input, "($1 / 2**30):4 with linespoints pt 7 ps 0.4 title "
                            "'simulated', ");
        series(f, r->input, "($1 / 2**30):($7 == 1 ? $4 : NaN) with points pt 9 ps 2.5 "
                            "title 'planner'");
        if (r->measured) {
            fprintf(f, ", ");
            series(f, r->measured, "($1 / 2**30):2 with points pt 5 ps 1.2 title 'measured'");
        }
        fputc('\n', f);
    }
    return ferror(f) ? err_set(e, -EIO, "cannot write the gnuplot script") : 0;
}

int plot_find_iter(const char *path, int iter, int *lo, int *hi, Err *e)
{
    FILE *f;
    int rc = regfile_fopen(path, &f, e); /* as the trace readers open it: a FIFO is refused */
    if (rc)
        return rc;
    char line[512];
    bool found = false;
    *lo = INT_MAX, *hi = -1;
    for (int n = 0; fgets(line, sizeof line, f); n++) {
        char *end;
        long v = strtol(line, &end, 10);
        bool whole = strchr(line, '\n') != NULL || feof(f);
        if (n > 0 && end != line && *end == '\t' && v >= 0 && v <= INT_MAX) {
            found |= v == iter;
            *lo = v < *lo ? (int)v : *lo;
            *hi = v > *hi ? (int)v : *hi;
        }
        while (!whole && fgets(line, sizeof line, f)) /* the rest of a long line */
            whole = strchr(line, '\n') != NULL;
    }
    fclose(f);
    return found;
}

int plot_render(const PlotRequest *r, Err *e)
{
    char script[4200];
    snprintf(script, sizeof script, "%s.gp", r->output);
    FILE *f = fopen(script, "w");
    if (!f)
        return err_set(e, -errno, "%s: cannot write: %s", script, strerror(errno));
    int rc = plot_write_script(f, r, e);
    if (fclose(f) && !rc)
        rc = err_set(e, -EIO, "%s: write failed", script);
    if (rc) {
        unlink(script);
        return rc;
    }
    char *argv[] = {"gnuplot", script, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
    if (err)
        return err_set(e, -ENOENT, "gnuplot is not installed (apt-get install gnuplot-nox); "
                       "the script is in %s", script);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return err_set(e, -EIO, "gnuplot did not finish; the script is in %s", script);
    if (WEXITSTATUS(status) == 127)
        return err_set(e, -ENOENT, "gnuplot is not installed (apt-get install gnuplot-nox); "
                       "the script is in %s", script);
    if (WEXITSTATUS(status))
        return err_set(e, -EIO, "gnuplot failed on %s (exit %d); see its message above", script,
                       WEXITSTATUS(status));
    return 0;
}
