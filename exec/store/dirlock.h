/* dirlock: a directory a run writes into, held by that run alone (its --save directory, the SSD
 * tier's --ssd-dir): an exclusive flock(2) on DIR/.lock. The lock is the open file's, so a
 * second one conflicts in the same process too, and the kernel drops it when the holder ends,
 * killed or not: a run resumed after kill -9 finds it free. The file stays, with its last
 * holder's "pid program". */
#ifndef FUYOU_DIRLOCK_H
#define FUYOU_DIRLOCK_H

#include <stdbool.h>

#include "fuyou_err.h"

/* Zero-initialised: none held. */
typedef struct DirLock {
    bool held;
    int fd;
} DirLock;

/* Creates dir if needed (one level) and holds it in *lock: 0; -EBUSY while another holds it,
 * with one line naming its program, its pid and what to do (option: the command-line option
 * that named dir, "--save"); another -errno with e. Called before any work, so a run refused
 * has done none. */
int dirlock_take(const char *dir, const char *option, DirLock *lock, Err *e);
/* Releases *lock (none held: nothing). */
void dirlock_release(DirLock *lock);

#endif
