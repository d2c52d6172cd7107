/* progress: one line per long phase of a run (the state put in place, loaded, saved): how far,
 * how fast, how long to go. A phase that ends within PROGRESS_QUIET_S says nothing; a longer
 * one is told at most once a second, rewritten in place on a terminal, else a line every
 * PROGRESS_EVERY_S, and ends with a line of its total. Not the training steps' line
 * (trainer.h, trainer_progress). */
#ifndef FUYOU_PROGRESS_H
#define FUYOU_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

#define PROGRESS_QUIET_S 2.0
#define PROGRESS_EVERY_S 10.0

typedef struct Progress {
    FILE *out;          /* NULL: the phase says nothing */
    const char *what;   /* "initialising the state" */
    const char *unit;   /* "parameters", or "B" for bytes (binary prefixes) */
    double total, done;
    double t0, last;    /* monotonic clock: the start, the last line */
    bool tty, shown;
} Progress;

/* Starts a phase of total units (what and unit stay the caller's). */
void progress_begin(Progress *p, FILE *out, const char *what, double total, const char *unit);
/* done of total are done now; a line when one is due. */
void progress_to(Progress *p, double done);
/* The phase ended: its last line, with the total and the time, when any was shown. */
void progress_end(Progress *p);

#endif
