/* progress: a long phase's progress line; see progress.h. */
#include "progress.h"

#include <math.h>
#include <unistd.h>

#include "clock.h"
#include "units.h"

void progress_begin(Progress *p, FILE *out, const char *what, double total, const char *unit)
{
    double now = clock_monotonic_s();
    *p = (Progress){.out = out, .what = what, .unit = unit, .total = total, .t0 = now,
                    .last = now, .tty = out && isatty(fileno(out))};
}

/* An amount of the phase's unit: bytes with binary prefixes, counts with SI ones. */
static const char *amount(const Progress *p, double x, char *buf, size_t n)
{
    if (p->unit[0] == 'B' && !p->unit[1])
        return units_bytes(buf, n, x);
    const char *si = x >= 1e9 ? "G" : x >= 1e6 ? "M" : x >= 1e3 ? "k" : "";
    double d = x >= 1e9 ? 1e9 : x >= 1e6 ? 1e6 : x >= 1e3 ? 1e3 : 1;
    snprintf(buf, n, "%.2f %s%s", x / d, si, p->unit);
    return buf;
}

static void line(Progress *p, double now, bool last)
{
    char a[32], b[32], r[32];
    double s = now - p->t0, rate = s > 0 ? p->done / s : 0;
    fprintf(p->out, "%s%s: %s of %s (%.0f%%), %s/s", p->tty ? "\r" : "", p->what,
            amount(p, p->done, a, sizeof a), amount(p, p->total, b, sizeof b),
            p->total > 0 ? 100 * p->done / p->total : 100, amount(p, rate, r, sizeof r));
    if (last)
        fprintf(p->out, ", %.1f s", s);
    else if (rate > 0)
        fprintf(p->out, ", %.0f s to go", ceil((p->total - p->done) / rate));
    fprintf(p->out, "%s", p->tty && !last ? "\033[K" : "\n");
    fflush(p->out);
    p->shown = true;
    p->last = now;
}

void progress_to(Progress *p, double done)
{
    p->done = done;
    if (!p->out)
        return;
    double now = clock_monotonic_s();
    double every = p->tty ? 1.0 : PROGRESS_EVERY_S;
    if (now - p->t0 >= PROGRESS_QUIET_S && (!p->shown || now - p->last >= every))
        line(p, now, false);
}

void progress_end(Progress *p)
{
    if (p->out && p->shown)
        line(p, clock_monotonic_s(), true);
}
