/* testutil: small helpers shared by the Check suites (temporary files, substring asserts, running
 * the built command lines, the suite runner). Header-only; tests only. */
#ifndef FUYOU_TESTUTIL_H
#define FUYOU_TESTUTIL_H

#include <check.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The AddressSanitizer build (CI's second) runs the slowest suites' trainings sized down: the
 * same plans and paths over fewer steps, which the normal build runs whole (docs/testing.md).
 * tu_sized gives the count for this build. */
#ifdef __SANITIZE_ADDRESS__
#define TU_SANITIZED 1
#else
#define TU_SANITIZED 0
#endif

static inline int tu_sized(int whole, int sanitized)
{
    return TU_SANITIZED ? sanitized : whole;
}

/* A progress stream that sets *flag to sig as the text `when` is written to it, as a signal
 * handler would in the middle of a run (TrainOptions.stop): a stop asked at a step the test
 * names, not at a moment a timer picks. fclose it. */
typedef struct TuStopAt {
    const char *when;
    volatile sig_atomic_t *flag;
    int sig;
} TuStopAt;

static inline ssize_t tu_stop_at_write(void *cookie, const char *buf, size_t n)
{
    TuStopAt *s = cookie;
    if (memmem(buf, n, s->when, strlen(s->when)))
        *s->flag = s->sig;
    return (ssize_t)n;
}

static inline FILE *tu_stop_at(TuStopAt *s)
{
    FILE *f = fopencookie(s, "w", (cookie_io_functions_t){.write = tu_stop_at_write});
    if (f)
        setvbuf(f, NULL, _IONBF, 0); /* each line reaches the cookie as it is printed */
    return f;
}

/* Writes text to a new temporary file; returns its path in buf (the test unlinks it). */
static inline const char *tu_temp_file(char *buf, size_t n, const char *suffix, const char *text)
{
    snprintf(buf, n, "/tmp/fuyou-test-XXXXXX%s", suffix);
    int fd = mkstemps(buf, (int)strlen(suffix));
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(text);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    return buf;
}

/* The bytes of the file src as headerless uint16 tokens (nanoGPT's .bin), in a new temporary
 * file; its path in buf (the test unlinks it). Text for a model whose vocabulary is not bytes,
 * which fuyou-run refuses to give raw text. */
static inline const char *tu_bytes_as_u16(char *buf, size_t n, const char *src)
{
    snprintf(buf, n, "/tmp/fuyou-test-XXXXXX.bin");
    int fd = mkstemps(buf, 4);
    ck_assert_int_ge(fd, 0);
    FILE *in = fopen(src, "rb"), *out = fdopen(fd, "wb");
    ck_assert(in && out);
    for (int ch; (ch = getc(in)) != EOF;) {
        unsigned char tok[2] = {(unsigned char)ch, 0};
        ck_assert_uint_eq(fwrite(tok, 1, 2, out), 2);
    }
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
    return buf;
}

/* Whether path can be read; if not, prints "SKIP: path (what) is missing" for the suite to exit
 * 77 on. */
static inline int tu_can_read(const char *path, const char *what)
{
    if (!access(path, R_OK))
        return 1;
    printf("SKIP: %s (%s) is missing\n", path, what);
    return 0;
}

/* Lines in the file at path (0 when it cannot be read). */
static inline int tu_count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, ch;
    while (f && (ch = fgetc(f)) != EOF)
        n += ch == '\n';
    if (f)
        fclose(f);
    return n;
}

/* Runs a shell command line as it stands (its own redirections), capturing stdout into out as
 * tu_run_bin does; returns its exit status. */
static inline int tu_run_shell(const char *cmd, char *out, size_t n)
{
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t len = fread(out, 1, n - 1, p);
    out[len] = '\0';
    int st = pclose(p);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Runs the binary named by environment variable var with args (shell words), capturing
 * stdout+stderr into out (n bytes, NUL-terminated, cut short past that); returns the exit status
 * (a binary killed by a signal fails the test). */
static inline int tu_run_bin(const char *var, const char *args, char *out, size_t n)
{
    const char *bin = getenv(var);
    ck_assert_msg(bin != NULL, "%s is not set (meson sets it)", var);
    char cmd[1024];
    int cmd_len = snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", bin, args);
    ck_assert_msg(cmd_len >= 0 && (size_t)cmd_len < sizeof cmd, "command too long: %s %s", bin,
                  args);
    return tu_run_shell(cmd, out, n);
}

/* tu_run_bin of fuyou-sim (FUYOU_SIM). */
static inline int tu_run_sim(const char *args, char *out, size_t n)
{
    return tu_run_bin("FUYOU_SIM", args, out, n);
}

#define tu_assert_contains(haystack, needle)                                                     \
    ck_assert_msg(strstr((haystack), (needle)) != NULL, "expected \"%s\" in \"%s\"", (needle), \
                  (haystack))

#define tu_assert_not_contains(haystack, needle)                                                 \
    ck_assert_msg(strstr((haystack), (needle)) == NULL, "unexpected \"%s\" in \"%s\"", (needle), \
                  (haystack))

static inline int tu_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes a scratch directory tree a test made. */
static inline void tu_rm_tree(const char *path)
{
    nftw(path, tu_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* prog and the words of args (split at spaces, copied into buf of n bytes) as argv, at most
 * max entries with the NULL that ends them: argc. For the parsers' suites. */
static inline int tu_argv(const char *prog, const char *args, char *buf, size_t n, char **argv,
                          int max)
{
    int argc = 0;
    argv[argc++] = (char *)prog;
    snprintf(buf, n, "%s", args);
    for (char *t = strtok(buf, " "); t && argc < max - 1; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    return argc;
}

/* Runs one suite; returns the process exit status for meson. */
static inline int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    /* the lines a test prints as it goes (the pipeline's one per plan) reach meson's pipe as
     * they are printed: a suite that runs for minutes shows its progress */
    setvbuf(stdout, NULL, _IOLBF, 0);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Two --log files (step loss lr grad_norm tokens_per_s loss_scale) equal row for row except
 * tokens_per_s, the fifth column, which is a timing (the headers compared whole). */
static inline void tu_assert_same_log(const char *want_path, const char *got_path)
{
    FILE *a = fopen(want_path, "r"), *b = fopen(got_path, "r");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    char la[256], lb[256];
    const char *fmt = "%31[^\t]\t%31[^\t]\t%31[^\t]\t%31[^\t]\t%31[^\t]\t%31s";
    for (int line = 1;; line++) {
        char *ra = fgets(la, sizeof la, a), *rb = fgets(lb, sizeof lb, b);
        ck_assert_msg((ra == NULL) == (rb == NULL), "%s:%d: one log ends before the other (%s)",
                      got_path, line, ra ? ra : rb);
        if (!ra)
            break;
        char fa[6][32] = {{0}}, fb[6][32] = {{0}};
        ck_assert_msg(sscanf(la, fmt, fa[0], fa[1], fa[2], fa[3], fa[4], fa[5]) == 6,
                      "%s:%d: not a log row: %s", want_path, line, la);
        ck_assert_msg(sscanf(lb, fmt, fb[0], fb[1], fb[2], fb[3], fb[4], fb[5]) == 6,
                      "%s:%d: not a log row: %s", got_path, line, lb);
        for (int k = 0; k < 6; k++)
            if (k != 4 || line == 1)
                ck_assert_msg(!strcmp(fa[k], fb[k]), "%s:%d: %s expected, got %s", got_path,
                              line, la, lb);
    }
    fclose(a);
    fclose(b);
}

#endif
