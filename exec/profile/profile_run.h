/* profile_run: what fuyou-profile's measurements share, between fuyou_profile.c (the command
 * line, the CPU, host memory and the store, the ini) and profile_gpu.c (the GPU's, built with
 * CUDA only): the sizes every measurement uses, the ini being filled in, the comments on the
 * keys it measured, and what a later measurement takes from an earlier one. Internal to
 * fuyou-profile; the measurements themselves are profile.h's and cuda_device.h's. */
#ifndef FUYOU_PROFILE_RUN_H
#define FUYOU_PROFILE_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "hw.h"
#include "profile.h"
#if FUYOU_HAVE_CUDA
#include "cuda_device.h"
#endif

enum { PROFILE_MAX_NOTES = 48 };

/* The comment each measured key gets in the ini, the last one given for a key; keys without
 * one say what the base (its name, and its text when readable) says of them. */
typedef struct ProfileNotes {
    struct { const char *section, *key; char text[640]; } n[PROFILE_MAX_NOTES];
    int count;
    const char *base;
    const char *base_text; /* the base's text, read once for its comments (NULL: unreadable) */
} ProfileNotes;

/* Adds the comment of section.key (beyond PROFILE_MAX_NOTES: dropped). */
void profile_note(ProfileNotes *ns, const char *section, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

typedef struct ProfileRun {
    bool quick;
    int reps;                  /* runs per measurement, at most 7 */
    long cores;
    int used;                  /* the Adam task's threads: --threads or the pipeline's count */
    size_t params;             /* the Adam task's parameters */
    const char *const *dirs;   /* the store's directories */
    int n_dirs;
    size_t ssd_bytes;          /* per store test */
    char day[32];
    Hardware hw;               /* the ini written: the base's, measured keys replaced */
    ProfileNotes ns;           /* their comments */
    char *base_owned;
    double adam_x[2 * 8];      /* the Adam task at `used` threads, reps runs before the store's
                                  tests and reps after */
    Stat adam;                 /* both samples together */
    Stat mem;                  /* parallel memcpy */
    bool have_gpu;
#if FUYOU_HAVE_CUDA
    CudaDeviceInfo gi;         /* with have_gpu */
#endif
} ProfileRun;

/* The GPU's keys, after the CPU's and the store's (p->adam and p->mem measured; without them,
 * --gpu-only, the Adam alone first): PCIe alone and both ways, the Adam task beside pinned
 * copies one way (host memory's rate), task_us, the GEMM and attention curves, and the
 * memory-bound kernels. 0 or -errno with e. Defined with CUDA only. */
int profile_run_gpu(ProfileRun *p, Err *e);

#endif
