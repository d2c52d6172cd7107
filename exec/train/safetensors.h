/* safetensors: reading and writing the safetensors format (an 8-byte little-endian header
 * length, a JSON header of {"name": {"dtype", "shape", "data_offsets"}} plus "__metadata__",
 * then the raw little-endian data). Writing is F32; reading converts F32, F16 and BF16 to fp32.
 * The JSON goes through jansson. Every malformed file is an error naming the file and what is
 * wrong: never a crash, never a silent partial load. */
#ifndef FUYOU_SAFETENSORS_H
#define FUYOU_SAFETENSORS_H

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
} StTensor;

typedef struct StFile {
    char path[4096];
    FILE *f;
    uint64_t data_start;       /* 8 + header length */
    uint64_t file_size;
    StTensor *t;
    int n;
} StFile;

/* Opens and validates the header (offsets inside the file, sizes matching dtype x shape). */
int st_open(StFile *s, const char *path, Err *e);
void st_close(StFile *s);
const StTensor *st_find(const StFile *s, const char *name);
size_t st_numel(const StTensor *t);
/* Reads tensor t into dst as fp32 (numel values). */
int st_read_f32(StFile *s, const StTensor *t, float *dst, Err *e);

/* A writer: add F32 tensors in order, then finish. Data is written as it is added. */
typedef struct StWriter {
    char path[4096];
    FILE *f;
    void *header;   /* json_t object */
    uint64_t offset;
    int n, cap;
    struct { const float *data; size_t numel; } *pending;
} StWriter;

int st_writer_begin(StWriter *w, const char *path, Err *e);
/* Queues a tensor; data must stay valid until st_writer_finish. */
int st_writer_add(StWriter *w, const char *name, const float *data, int ndim,
                  const int64_t *shape, Err *e);
/* Writes header and data, fsyncs, closes. */
int st_writer_finish(StWriter *w, const char *metadata_key, const char *metadata_value, Err *e);
void st_writer_abort(StWriter *w);

#endif
