/* testutil: small helpers shared by the Check suites (temporary files, substring asserts, the
 * suite runner). Header-only; tests only. */
#ifndef FUYOU_TESTUTIL_H
#define FUYOU_TESTUTIL_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

#define tu_assert_contains(haystack, needle)                                                     \
    ck_assert_msg(strstr((haystack), (needle)) != NULL, "expected \"%s\" in \"%s\"", (needle), \
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

/* Runs one suite; returns the process exit status for meson. */
static inline int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
