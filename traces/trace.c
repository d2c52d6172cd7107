/* trace: TSV and Chrome/Perfetto JSON writers; see trace.h. */
#include "trace.h"

#include <errno.h>
#include <string.h>

static int finish(FILE *f, const char *path, Err *e)
{
    if (ferror(f) || fflush(f))
        return err_set(e, -EIO, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

int trace_write_tsv(FILE *f, const char *path, const TraceRow *rows, int n, Err *e)
{
    fprintf(f, "%s\n", TRACE_TSV_HEADER);
    for (int i = 0; i < n; i++) {
        const TraceRow *r = &rows[i];
        fprintf(f, "%d\t%s\t%s\t%s\t%d\t%.9f\t%.9f\t%.0f\t%.0f\n", r->iter, r->task_id,
                r->resource, r->phase, r->layer, r->start_s, r->end_s, r->bytes, r->flops);
    }
    return finish(f, path, e);
}

/* Lanes in a fixed order; other resource names get lanes after them. */
static const char *const known_lanes[] = {"gpu", "h2d", "d2h", "ssd_read", "ssd_write",
                                          "cpu_adam"};
enum { N_KNOWN = sizeof known_lanes / sizeof known_lanes[0], MAX_LANES = 32 };

static int lane_of(const char *res, const char *lanes[], int *n)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(lanes[i], res))
            return i;
    if (*n == MAX_LANES)
        return MAX_LANES - 1;
    lanes[*n] = res;
    return (*n)++;
}

/* Task ids and resource names are plain ASCII without quotes; escape defensively anyway. */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

int trace_write_chrome(FILE *f, const char *path, const TraceRow *rows, int n, Err *e)
{
    const char *lanes[MAX_LANES];
    int n_lanes = N_KNOWN;
    memcpy(lanes, known_lanes, sizeof known_lanes);
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (int i = 0; i < n; i++) {
        const TraceRow *r = &rows[i];
        fprintf(f, "{\"name\": ");
        json_string(f, r->task_id);
        fprintf(f, ", \"cat\": ");
        json_string(f, r->phase);
        fprintf(f, ", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                "\"args\": {\"iter\": %d, \"layer\": %d, \"bytes\": %.0f, \"flops\": %.0f}},\n",
                lane_of(r->resource, lanes, &n_lanes), r->start_s * 1e6,
                (r->end_s - r->start_s) * 1e6, r->iter, r->layer, r->bytes, r->flops);
    }
    for (int i = 0; i < n_lanes; i++) {
        fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                "\"args\": {\"name\": ", i);
        json_string(f, lanes[i]);
        fprintf(f, "}},\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, "
                "\"tid\": %d, \"args\": {\"sort_index\": %d}}%s\n", i, i,
                i + 1 < n_lanes ? "," : "");
    }
    fprintf(f, "]}\n");
    return finish(f, path, e);
}
