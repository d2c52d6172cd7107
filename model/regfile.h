/* regfile: user-named paths: inputs that must be regular files, outputs checked before work.
 *
 * A reader of a file the user names (a hardware or model ini, a token file) wants a regular
 * file: a FIFO blocks in open until a writer comes, a device such as /dev/zero reads without
 * end, a directory is not text. These calls refuse anything else before reading from it and
 * without blocking on it, with one message naming the path and what it is. They do not bound
 * how much a reader reads from a regular file: that is the reader's business. */
#ifndef FUYOU_REGFILE_H
#define FUYOU_REGFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "fuyou_err.h"

/* Checks what path is, without opening it. Returns 0 for a regular file; -errno of stat(2)
 * ("path: cannot read: <strerror>"), -EISDIR for a directory, -EINVAL for a FIFO, a device, a
 * socket ("path: is a FIFO (named pipe), not a regular file"). */
int regfile_check(const char *path, Err *e);

/* Opens path read-only if it is a regular file (checked on the open descriptor too, so a path
 * swapped for a FIFO in between is refused, not waited on). Returns the descriptor, which the
 * caller closes (blocking, close-on-exec), or the negative errno and message of regfile_check
 * (or of open(2)). */
int regfile_open(const char *path, Err *e);

/* The same as a stdio stream opened "r": 0 with *out set (the caller fcloses it), or the
 * negative errno with *out NULL. */
int regfile_fopen(const char *path, FILE **out, Err *e);

/* Checks, before any work, that a program can later write path: a directory (dir true) it
 * writes files in, or a file (dir false) it creates or replaces. An existing path must be of
 * that kind and writable; a missing one needs a writable directory to be created in. Nothing is
 * created or opened. 0, or -errno with "path: cannot write: <why>" (-ENOTDIR for a file where a
 * directory goes, -EISDIR for the reverse). */
int outpath_check(const char *path, bool dir, Err *e);

#endif
