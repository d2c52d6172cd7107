/* safetensors: reading and writing the safetensors format (an 8-byte little-endian header
 * length, a JSON header of {"name": {"dtype", "shape", "data_offsets"}} plus "__metadata__",
 * then the raw little-endian data). Writing is F32, or BF16 / F16 rounded to nearest even from
 * fp32 values pulled as they are written; reading converts F32, F16 and BF16 to fp32.
 * The JSON goes through jansson. Every malformed file is an error naming the file and what is
 * wrong: never a crash, never a silent partial load.
 *
 * Integrity. The tensors' data must tile the data section as the format requires: ordered by
 * offset, each starting where the one before ends, the last ending at the end of the file (an
 * overlap, a gap or trailing bytes is an error naming the tensors). The writer stores each
 * tensor's CRC-32C (crc32c.h, of its bytes as stored) in "__metadata__" as "crc32c:NAME": eight
 * hex digits; the reader checks it on every read and reports a mismatch naming the file and the
 * tensor. Files without checksums (Hugging Face's) read as before. */
#ifndef FUYOU_SAFETENSORS_H
#define FUYOU_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fuyou_err.h"

enum { ST_MAX_DIMS = 4, ST_NAME_MAX = 128 };

typedef struct StTensor {
    char name[ST_NAME_MAX];
    char dtype[8];             /* "F32", "F16", "BF16", ... */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;       /* data offsets, relative to the data section */
    bool has_crc;              /* __metadata__ holds its checksum */
    uint32_t crc;              /* its CRC-32C (of bytes begin..end), when has_crc */
} StTensor;

typedef struct StFile {
    char path[4096];
    FILE *f;                   /* the header's reads */
    struct SeqReader *stream;  /* the data's (seqfile.h): opened at the first read */
    uint64_t ahead;            /* where the caller's reading stops from the next read on, when
                                  past that tensor's end (0: its end): the read ahead's limit */
    struct WorkPool *wp;       /* widens what it reads to fp32 on these threads (NULL: the
                                  caller's), touching fresh pages in parallel */
    uint64_t data_start;       /* 8 + header length */
    uint64_t file_size;
    StTensor *t;
    int n;
} StFile;

/* Opens and validates the header (offsets inside the file and tiling the data section, sizes
 * matching dtype x shape, the checksums' form). 0, or -errno with e and s closed (nothing to free). */
int st_open(StFile *s, const char *path, Err *e);
void st_close(StFile *s);
/* The data's stream closed and its blocks freed (a later read opens it again). */
void st_drop_stream(StFile *s);
/* Where tensor t's data begins in the file. */
uint64_t st_file_offset(const StFile *s, const StTensor *t);
const StTensor *st_find(const StFile *s, const char *name);
size_t st_numel(const StTensor *t);
/* Reads tensor t into dst as fp32 (numel values), checking its checksum when the file has one.
 * 0, or -errno with e (-EINVAL: damaged). */
int st_read_f32(StFile *s, const StTensor *t, float *dst, Err *e);

/* A tensor read in parts, front to back: for a destination smaller than the tensor (a staging
 * buffer of an out-of-core loader) or two tensors compared chunk by chunk. Start one with
 * `StCursor c = {.t = t}`; it holds no resource. */
typedef struct StCursor {
    const StTensor *t;
    size_t at;                 /* values read so far */
    uint32_t crc;              /* CRC-32C of their bytes */
} StCursor;

/* Reads the next n values of c's tensor (n at most what is left) into dst as fp32; the read
 * that reaches the tensor's end checks its checksum. 0, or -errno with e as st_read_f32. */
int st_read_next(StFile *s, StCursor *c, float *dst, size_t n, Err *e);

/* A writer: add F32 tensors in order, then finish. Each tensor's checksum is taken when it is
 * added; the data is written at finish. */
typedef struct StWriter {
    char path[4096];
    char dtype[8];  /* of every tensor: "F32" (st_writer_begin), "BF16" or "F16" */
    size_t esize;   /* its bytes a value */
    void *header;   /* json_t object */
    void *meta;     /* its "__metadata__" (json_t, owned by header): the checksums */
    uint64_t offset;
    int n, cap;
    struct { const float *data; size_t numel; char crc_key[ST_NAME_MAX + 8]; } *pending;
} StWriter;

int st_writer_begin(StWriter *w, const char *path, Err *e);
/* st_writer_begin for tensors stored as dtype: "F32", "BF16" or "F16" (the last two only
 * pulled, st_writer_finish_pull: each value rounded to nearest even as it is written). */
int st_writer_begin_as(StWriter *w, const char *path, const char *dtype, Err *e);
/* Queues a tensor; data must stay valid until st_writer_finish. */
int st_writer_add(StWriter *w, const char *name, const float *data, int ndim,
                  const int64_t *shape, Err *e);
/* Writes header (with metadata_key: metadata_value, when the key is not NULL, beside the
 * checksums) and data, fsyncs, closes (through seqfile.h: O_DIRECT, written behind). */
int st_writer_finish(StWriter *w, const char *metadata_key, const char *metadata_value, Err *e);
void st_writer_abort(StWriter *w);
/* st_writer_finish for tensors added with data NULL, whose values are pulled as they are
 * written, chunk values at a time, never held whole: pull(user, i, at, n, dst) puts values
 * [at, at + n) of the i-th tensor added into dst (0, or -errno with e, which stops the write).
 * Each one's checksum is taken on the way; the header, its length fixed beforehand (checksums
 * are 8 hex digits), is written last. */
typedef int (*StPull)(void *user, int i, size_t at, size_t n, float *dst, Err *e);
int st_writer_finish_pull(StWriter *w, StPull pull, void *user, size_t chunk,
                          const char *metadata_key, const char *metadata_value, Err *e);

#endif
