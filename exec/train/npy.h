/* npy: the header of a NumPy .npy file (numpy.lib.format), as much of it as a 1-D array of
 * unsigned integers needs, for token files and their loss masks (data.h).
 *
 * What is read: the magic "\x93NUMPY", format version 1.0 (a uint16 little-endian header
 * length at byte 8), 2.0 or 3.0 (a uint32 at byte 8; 3.0 allows UTF-8 in the header), then the
 * header: a Python dict literal with exactly the keys 'descr' (a string), 'fortran_order'
 * (True or False) and 'shape' (a tuple of whole numbers), in any order, single or double
 * quotes, spaces anywhere, an optional trailing comma, ended by '\n' (numpy pads it with
 * spaces). The data follow the header. What is not: structured dtypes (a list as 'descr'),
 * other keys, expressions; this parser says so with one line naming the file and the
 * problem. The caller decides which dtypes, orders and shapes it takes (npy_check_1d). */
#ifndef FUYOU_NPY_H
#define FUYOU_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuyou_err.h"

enum { NPY_MAX_DIMS = 8, NPY_DESCR_MAX = 16 };

typedef struct NpyHeader {
    int major, minor;               /* the format version, 1.0, 2.0 or 3.0 */
    char descr[NPY_DESCR_MAX];      /* the dtype as numpy writes it: "<u2", "|u1", ... */
    bool fortran_order;
    int ndim;
    uint64_t shape[NPY_MAX_DIMS];
    size_t data_offset;             /* where the data start: magic, length and header */
} NpyHeader;

/* Parses the header at the start of buf (size bytes: the file or at least its header). 0, or
 * -EINVAL with e naming path and what is wrong (no magic, an unknown version, a header that
 * runs past size, a dict it does not read). */
int npy_parse(const char *path, const uint8_t *buf, size_t size, NpyHeader *h, Err *e);

/* Whether h is a C-order 1-D array of one of the dtypes in descrs (NULL-terminated), whose
 * data fill exactly the file's size bytes after the header. 0 with *n the element count and
 * *elem_bytes its size, or -EINVAL with e naming path and the fix (what dtype, order, shape or
 * size it has instead); what says what the file holds ("tokens", "a loss mask"). */
int npy_check_1d(const char *path, const NpyHeader *h, size_t size, const char *const *descrs,
                 const char *what, size_t *n, size_t *elem_bytes, Err *e);

#endif
