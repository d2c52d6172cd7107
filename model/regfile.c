/* regfile: regular-file checks before reading, output paths before work; see regfile.h. */
#include "regfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a file of mode m is, when it is not a regular file ("a directory", ...). */
static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO (named pipe)";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "a special file";
}

static int refuse(const char *path, mode_t m, Err *e)
{
    return err_set(e, S_ISDIR(m) ? -EISDIR : -EINVAL, "%s: is %s, not a regular file", path,
                   kind_of(m));
}

int regfile_check(const char *path, Err *e)
{
    struct stat st;
    if (stat(path, &st))
        return err_set(e, -errno, "%s: cannot read: %s", path, strerror(errno));
    return S_ISREG(st.st_mode) ? 0 : refuse(path, st.st_mode, e);
}

int regfile_open(const char *path, Err *e)
{
    /* stat first, so that a device is never opened (opening some has side effects) */
    int rc = regfile_check(path, e);
    if (rc)
        return rc;
    /* O_NONBLOCK: if path became a FIFO since the stat, open returns at once instead of
     * waiting for a writer; fstat below then refuses it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, -errno, "%s: cannot read: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        rc = err_set(e, -errno, "%s: cannot read: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = refuse(path, st.st_mode, e);
    } else {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
            rc = err_set(e, -errno, "%s: cannot read: %s", path, strerror(errno));
    }
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

int regfile_fopen(const char *path, FILE **out, Err *e)
{
    *out = NULL;
    int fd = regfile_open(path, e);
    if (fd < 0)
        return fd;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        int rc = err_set(e, -errno, "%s: cannot read: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    *out = f;
    return 0;
}

/* The directory a missing path would be created in: its text up to the last '/', or ".". */
static void parent_of(const char *path, char *out, size_t n)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--; /* "a/b/" is b in a */
    while (len && path[len - 1] != '/')
        len--;
    while (len > 1 && path[len - 1] == '/')
        len--;
    if (!len)
        snprintf(out, n, ".");
    else
        snprintf(out, n, "%.*s", (int)len, path);
}

static int cannot_write(const char *path, int err, const char *why, Err *e)
{
    return err_set(e, -err, "%s: cannot write: %s", path, why ? why : strerror(err));
}

int outpath_check(const char *path, bool dir, Err *e)
{
    struct stat st;
    if (!stat(path, &st)) {
        if (dir && !S_ISDIR(st.st_mode))
            return cannot_write(path, ENOTDIR, "not a directory", e);
        if (!dir && S_ISDIR(st.st_mode))
            return cannot_write(path, EISDIR, "is a directory, a file goes here", e);
        return access(path, dir ? W_OK | X_OK : W_OK) ? cannot_write(path, errno, NULL, e) : 0;
    }
    if (errno != ENOENT)
        return cannot_write(path, errno, NULL, e);
    char parent[4096], why[4200];
    parent_of(path, parent, sizeof parent);
    if (stat(parent, &st)) {
        int err = errno;
        snprintf(why, sizeof why, "%s: %s", parent, strerror(err));
        return cannot_write(path, err, why, e);
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, sizeof why, "%s is not a directory", parent);
        return cannot_write(path, ENOTDIR, why, e);
    }
    if (access(parent, W_OK | X_OK)) {
        int err = errno;
        snprintf(why, sizeof why, "cannot create it in %s: %s", parent, strerror(err));
        return cannot_write(path, err, why, e);
    }
    return 0;
}
