/* Check suite for what fuyou-sim must reproduce from the tree: the figures the README and
 * docs/fuyou-sim.md quote (FIGURE_DOCS), the output docs/what-if.md pastes (WHAT_IF) and the
 * golden trace of a tiny model (GOLDEN_TRACE, GOLDEN_ARGS). Runs the built binary (FUYOU_SIM
 * in the environment); its command line's own checks are test_cli_sim.c's. */
#include <unistd.h>

#include "testutil.h"

static char out[1 << 16];

/* The page at path into text (cap bytes, the last a NUL): the check fails if it cannot be read. */
static void read_page(const char *path, char *text, size_t cap)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: cannot read", path);
    size_t n = fread(text, 1, cap - 1, f);
    fclose(f);
    text[n] = 0;
}

/* The documentation's figures are checked, not copied: each `<!-- figure: ARGS | OUTPUT |
 * PROSE -->` line holds fuyou-sim's arguments, text its output must hold, and text the words
 * just above the marker must hold (the figure as the reader sees it). A figure that drifts
 * (the README once had 54 TFLOPS "bound by the host's sum" where fuyou-sim printed 59.5,
 * bound by waits) fails here, naming the file and line. FIGURE_DOCS: the pages, ':' apart. */
static int doc_figures(const char *path)
{
    static char text[1 << 20];
    read_page(path, text, sizeof text);
    int figures = 0;
    for (const char *m = strstr(text, "<!-- figure: "); m; m = strstr(m + 1, "<!-- figure: ")) {
        char args[256], want[128], prose[128];
        int line = 1;
        for (const char *c = text; c < m; c++)
            line += *c == '\n';
        ck_assert_msg(sscanf(m, "<!-- figure: %255[^|]| %127[^|]| %127[^\n]", args, want,
                             prose) == 3, "%s:%d: expected <!-- figure: ARGS | OUTPUT | PROSE -->",
                      path, line);
        want[strcspn(want, "|")] = 0;
        for (char *e = want + strlen(want); e > want && e[-1] == ' '; *--e = 0) {}
        char *end = strstr(prose, " -->");
        ck_assert_msg(end != NULL, "%s:%d: the marker does not end with -->", path, line);
        *end = 0;
        ck_assert_int_eq(tu_run_sim(args, out, sizeof out), 0);
        ck_assert_msg(strstr(out, want), "%s:%d: fuyou-sim %s printed no '%s'", path, line, args,
                      want);
        /* the words above: from the paragraph's start (after a blank line) to the first of
         * the markers under it */
        const char *block = m, *prev;
        while (block > text) {
            for (prev = block - 1; prev > text && prev[-1] != '\n'; prev--) {}
            if (strncmp(prev, "<!-- figure: ", 13))
                break;
            block = prev;
        }
        const char *para = block;
        while (para > text && !(para[-1] == '\n' && para - 1 > text && para[-2] == '\n'))
            para--;
        ck_assert_msg(memmem(para, (size_t)(block - para), prose, strlen(prose)), "%s:%d: the "
                      "text above the marker does not say '%s'", path, line, prose);
        figures++;
    }
    return figures;
}

START_TEST(readme_figures)
{
    const char *docs = getenv("FIGURE_DOCS");
    ck_assert_msg(docs != NULL, "FIGURE_DOCS is not set (meson sets it)");
    char list[4096];
    snprintf(list, sizeof list, "%s", docs);
    int figures = 0;
    for (char *save, *path = strtok_r(list, ":", &save); path; path = strtok_r(NULL, ":", &save))
        figures += doc_figures(path);
    ck_assert_int_ge(figures, 6);
}
END_TEST

/* The predicted trace of a tiny model equals the golden one (regenerate on purpose only:
 * `meson compile -C build regen-golden`, then review the diff). */
START_TEST(golden_trace)
{
    const char *golden = getenv("GOLDEN_TRACE"), *args = getenv("GOLDEN_ARGS");
    ck_assert_msg(golden && args, "GOLDEN_TRACE and GOLDEN_ARGS are not set (meson sets them)");
    char path[64], cmd[2048];
    tu_temp_file(path, sizeof path, ".tsv", "");
    snprintf(cmd, sizeof cmd, "%s --trace %s", args, path);
    int rc = tu_run_sim(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "%s", out);
    FILE *a = fopen(path, "r"), *b = fopen(golden, "r");
    ck_assert_ptr_nonnull(a);
    ck_assert_msg(b != NULL, "cannot read %s", golden);
    char la[512], lb[512];
    int line = 0;
    for (;;) {
        char *ra = fgets(la, sizeof la, a), *rb = fgets(lb, sizeof lb, b);
        line++;
        if (!ra || !rb) {
            ck_assert_msg(!ra && !rb, "line %d: one trace ends before the other", line);
            break;
        }
        ck_assert_msg(!strcmp(la, lb), "line %d differs:\n got  %s want %s", line, la, lb);
    }
    ck_assert_int_gt(line, 100);
    fclose(a);
    fclose(b);
    unlink(path);
}
END_TEST

/* docs/what-if.md pastes fuyou-sim's output: each `$ fuyou-sim ARGS` block is run again and
 * must print the same lines (the simulator's own wall time aside), so the page stays true. */
START_TEST(what_if_doc)
{
    const char *path = getenv("WHAT_IF");
    ck_assert_msg(path != NULL, "WHAT_IF is not set (meson sets it)");
    static char text[1 << 16];
    read_page(path, text, sizeof text);
    int blocks = 0;
    for (const char *m = strstr(text, "\n$ fuyou-sim "); m; m = strstr(m + 1, "\n$ fuyou-sim ")) {
        char args[256];
        const char *a = m + strlen("\n$ fuyou-sim ");
        snprintf(args, sizeof args, "%.*s", (int)strcspn(a, "\n"), a);
        const char *want = a + strcspn(a, "\n") + 1, *end = strstr(want, "```");
        ck_assert_ptr_nonnull(end);
        tu_run_sim(args, out, sizeof out);
        const char *got = out;
        while (want < end) {
            size_t wl = strcspn(want, "\n"), gl = strcspn(got, "\n");
            /* the planner's progress line comes only when it runs for seconds (a loaded
             * machine, a sanitizer): wall time, like the line below */
            if (!strncmp(got, "planner: ", 9) && memmem(got, gl, "configurations searched", 23)) {
                got += gl + (got[gl] != 0);
                continue;
            }
            /* "simulated N tasks, N events in 5.6 ms": the wall time varies */
            size_t cmp = !strncmp(want, "simulated ", 10) ? (size_t)(strstr(want, " in ") - want)
                                                          : wl;
            ck_assert_msg(wl == gl || cmp < wl, "fuyou-sim %s:\n doc %.*s\n got %.*s", args,
                          (int)wl, want, (int)gl, got);
            ck_assert_msg(!strncmp(want, got, cmp), "fuyou-sim %s:\n doc %.*s\n got %.*s", args,
                          (int)wl, want, (int)gl, got);
            want += wl + 1, got += gl + (got[gl] != 0);
        }
        ck_assert_msg(*got == 0, "fuyou-sim %s printed more than the doc: %s", args, got);
        blocks++;
    }
    ck_assert_int_eq(blocks, 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim_docs");
    TCase *tc = tcase_create("sim_docs");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, readme_figures);
    tcase_add_test(tc, golden_trace);
    tcase_add_test(tc, what_if_doc);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
