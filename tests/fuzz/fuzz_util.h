/* fuzz_util: what the fuzz targets share. The parsers read paths, so a target writes its input
 * to a file in a scratch directory of its own (made once, removed at exit) and hands the parser
 * that path. The checkpoint targets use the micro model below (tests/fuzz/micro.ini says the
 * same, for the trainer that wrote the seed checkpoint). A broken promise that is not a crash
 * (a value outside the range the parser checked) is reported with fuzz_check, which aborts so
 * that libFuzzer keeps the input. Header-only; the fuzz targets only. */
#ifndef FUYOU_FUZZ_UTIL_H
#define FUYOU_FUZZ_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: says which and aborts (libFuzzer saves the input as a crash). */
#define fuzz_check(cond)                                                                         \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond);       \
            abort();                                                                             \
        }                                                                                        \
    } while (0)

/* An environment failure in the harness itself (not a finding). */
static inline void fuzz_die(const char *what, const char *path)
{
    fprintf(stderr, "fuzz: %s %s failed\n", what, path);
    exit(1);
}

static char fuzz_dir_path[256];

static inline int fuzz_rm_entry(const char *path, const struct stat *sb, int flag,
                                struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static inline void fuzz_rm_dir(void)
{
    if (fuzz_dir_path[0])
        nftw(fuzz_dir_path, fuzz_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* The scratch directory, under $TMPDIR, else /dev/shm (every input is written to a file:
 * in memory a run is about ten times faster than on a disk), else /tmp; made on first use,
 * removed at exit. */
static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp)
            tmp = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/fuyou-fuzz-XXXXXX", tmp);
        if (!mkdtemp(fuzz_dir_path))
            fuzz_die("mkdtemp", fuzz_dir_path);
        atexit(fuzz_rm_dir);
    }
    return fuzz_dir_path;
}

/* dir/name in path (capacity n). */
static inline const char *fuzz_path(char *path, size_t n, const char *name)
{
    snprintf(path, n, "%s/%s", fuzz_dir(), name);
    return path;
}

/* Writes size bytes to the file dir/name (replacing it); its path in path. */
static inline const char *fuzz_file(char *path, size_t n, const char *name, const void *data,
                                    size_t size)
{
    fuzz_path(path, n, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        fuzz_die("open", path);
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, (const char *)data + done, size - done);
        if (w <= 0)
            fuzz_die("write", path);
        done += (size_t)w;
    }
    close(fd);
    return path;
}

/* The model of the checkpoint targets: tiny, so that a whole checkpoint loads in microseconds,
 * with a byte vocabulary, so that fuyou-run trains it on text (tests/fuzz/micro.ini). */
static inline ModelConfig fuzz_micro_model(void)
{
    return (ModelConfig){.name = "micro", .n_layer = 1, .d_model = 8, .n_head = 2, .d_ff = 32,
                         .vocab = 256, .max_seq = 16, .tied = true, .dtype = DTYPE_BF16};
}

/* An error message is one line naming something: never empty, no newline. */
static inline void fuzz_check_message(const char *msg)
{
    fuzz_check(msg[0] != '\0');
    fuzz_check(strchr(msg, '\n') == NULL);
}

#endif
