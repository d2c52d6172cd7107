/* dirlock: one run to a directory; see dirlock.h. */
#include "dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PATH_CAP = 4200, NAME_CAP = 64 };

/* Who holds the lock file fd: "program pid N" as write_holder wrote it, into who. */
static void lock_holder(int fd, char *who, size_t n)
{
    char text[NAME_CAP + 32], prog[NAME_CAP];
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    text[got > 0 ? got : 0] = '\0';
    int pid;
    if (sscanf(text, "%d %63s", &pid, prog) == 2 && pid > 0)
        snprintf(who, n, "%s pid %d", prog, pid);
    else /* between its lock and its write */
        snprintf(who, n, "another process");
}

/* This process's "pid program\n" into the lock file fd at path: written over the old one, then
 * cut to its length, so a reader never finds it empty. */
static int write_holder(int fd, const char *path, Err *e)
{
    char text[NAME_CAP + 32];
    int n = snprintf(text, sizeof text, "%d %.*s\n", (int)getpid(), NAME_CAP - 1,
                     program_invocation_short_name);
    ssize_t put = pwrite(fd, text, (size_t)n, 0);
    if (put == n && !ftruncate(fd, n))
        return 0;
    int rc = put >= 0 && put < n ? -ENOSPC : -errno;
    return err_set(e, rc, "%s: cannot write: %s", path, strerror(-rc));
}

/* The lock on the open lock file fd at path, for dir: 0, or -EBUSY naming its holder. */
static int take_lock(int fd, const char *dir, const char *option, const char *path, Err *e)
{
    if (!flock(fd, LOCK_EX | LOCK_NB))
        return write_holder(fd, path, e);
    if (errno != EWOULDBLOCK)
        return err_set(e, -errno, "%s: flock: %s", path, strerror(errno));
    char who[2 * NAME_CAP];
    lock_holder(fd, who, sizeof who);
    return err_set(e, -EBUSY, "%s: in use by %s (lock %s); wait for it to end or pick another "
                   "%s directory", dir, who, path, option);
}

int dirlock_take(const char *dir, const char *option, DirLock *lock, Err *e)
{
    *lock = (DirLock){false, -1};
    if (mkdir(dir, 0755) && errno != EEXIST)
        return err_set(e, -errno, "%s: cannot create: %s", dir, strerror(errno));
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return err_set(e, -errno, "%s: cannot open: %s", path, strerror(errno));
    int rc = take_lock(fd, dir, option, path, e);
    if (rc) {
        close(fd);
        return rc;
    }
    *lock = (DirLock){true, fd};
    return 0;
}

void dirlock_release(DirLock *lock)
{
    if (lock->held)
        close(lock->fd); /* the lock goes with the file's last descriptor */
    *lock = (DirLock){false, -1};
}

