/* replay: runs a fuzz target over files, without libFuzzer: the main of the fuzz targets in a
 * build without -Dfuzz=true, so that `meson test` (and its ASan + UBSan build) replays every
 * corpus input, the crashes found so far among them, with any compiler.
 *
 * Usage: fuzz_TARGET FILE|DIR... (a directory: every regular file in it, in name order).
 * Exit status: 0 when every input ran (a finding aborts the process), 1 when an input could
 * not be read, 2 for no arguments. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"

/* Runs the target on the file at path; 0, or -1 when it cannot be read. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            uint8_t *p = realloc(buf, cap *= 2);
            if (!p)
                free(buf);
            buf = p;
        }
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        return -1;
    }
    /* a copy of exactly n bytes, so that ASan sees a read past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact)
        fuzz_die("malloc", path);
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of dir, in name order; the count in *count. */
static int run_dir(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, cap * sizeof *names);
            if (!p)
                fuzz_die("realloc", dir);
            names = p;
        }
        if (!(names[n++] = strdup(de->d_name)))
            fuzz_die("strdup", dir);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            rc |= run_file(path);
            ++*count;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    int rc = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            rc |= run_dir(argv[i], &count);
        } else {
            rc |= run_file(argv[i]);
            count++;
        }
    }
    printf("%s: %d inputs replayed%s\n", argv[0], count, rc ? ", some unreadable" : "");
    return rc ? 1 : 0;
}
