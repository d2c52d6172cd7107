/* data: token files and a seeded, restorable batch loader.
 *
 * Formats: llm.c's .bin (a 256-int32 header with magic 20240520, version 1, the token count, then
 * uint16 tokens), nanoGPT's headerless uint16 (.bin from its prepare scripts), and plain text read
 * as bytes (vocabulary 256). DATA_AUTO takes llm.c when the magic is there, uint16 for other
 * .bin files, text otherwise, and guesses nothing else: a file whose header is llm.c's but for
 * its magic (damaged), or a .bin of an odd size, is an error that names --data-format. The
 * loader cuts the tokens into sequences of T + 1 (inputs and targets shifted by one) at stride
 * T, visits them in a shuffled order per epoch (gsl_rng seeded with the seed and the epoch), and
 * its position (epoch, index) is all a checkpoint needs. */
#ifndef FUYOU_DATA_H
#define FUYOU_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "fuyou_err.h"

typedef enum DataFormat { DATA_AUTO, DATA_LLMC, DATA_U16, DATA_TEXT } DataFormat;

typedef struct TokenData {
    char path[4096];
    DataFormat format;
    uint16_t *tokens;
    size_t n;
    int max_token;
} TokenData;

const char *data_format_name(DataFormat f);
int data_format_parse(const char *s, DataFormat *out); /* auto, llmc, u16, text */

/* Reads the whole file. 0 or -errno with e naming the file and the problem (missing, not a
 * regular file (a FIFO is refused without waiting for a writer), truncated or damaged llm.c
 * file, odd size for uint16, empty). The caller frees with data_free (safe on failure). */
int data_load(TokenData *d, const char *path, DataFormat format, Err *e);
void data_free(TokenData *d);

typedef struct Loader {
    const TokenData *d;
    int B, T;
    uint64_t seed;
    int64_t epoch, index; /* the position: sequences handed out in this epoch */
    size_t n_seq;
    uint32_t *order;      /* this epoch's permutation of sequence indices */
} Loader;

/* 0, or -EINVAL when the data holds fewer than B sequences of T + 1 tokens. */
int loader_init(Loader *l, const TokenData *d, int B, int T, uint64_t seed, Err *e);
void loader_free(Loader *l);
/* Moves to a saved position. */
void loader_seek(Loader *l, int64_t epoch, int64_t index);
/* The next batch: inputs and targets (B,T). */
void loader_next(Loader *l, int *inputs, int *targets);

#endif
