/* data: token files, their loss masks, and a seeded, restorable batch loader.
 *
 * Formats, one per file (DATA_AUTO decides each file's by its magic and name, guessing nothing
 * else): NumPy .npy (uint16 or uint32), llm.c's .bin (its GPT-2 and Llama 3 files, and fuyou's
 * uint32 one), headerless uint16 (nanoGPT's) and text as bytes (vocabulary 256). Several files
 * are read in the order given (globs expanded and sorted), concatenated, each cut into
 * sequences of its own. Every token is held as a uint32 in memory. A token file may have a loss
 * mask beside it (X.mask.npy, or FILE.mask): 0 leaves a target out (DATA_IGNORE). The
 * fingerprint (DataPrint: files, tokens, a CRC-32C of names, counts and masks) identifies the
 * data a checkpoint was trained on. The loader cuts each file into sequences of T + 1 at stride
 * T and visits them in a shuffled order per epoch (gsl_rng seeded with the seed and the epoch);
 * its position (epoch, index) is all a checkpoint needs.
 * Every format's details, masks and memory: ARCHITECTURE.md, "Data". */
#ifndef FUYOU_DATA_H
#define FUYOU_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuyou_err.h"

typedef enum DataFormat { DATA_AUTO, DATA_LLMC, DATA_U16, DATA_TEXT, DATA_NPY } DataFormat;

/* The most --data (or --eval-data) arguments, and the most files they may name in all. */
enum { DATA_MAX_ARGS = 64, DATA_MAX_FILES = 100000 };

/* A target the loss leaves out (its mask says 0, or a padding row): PyTorch's ignore_index. */
enum { DATA_IGNORE = -1 };

typedef struct DataFile {
    char *path;
    DataFormat format;
    size_t begin, n;    /* its tokens: TokenData.tokens[begin, begin + n) */
    bool masked;        /* a mask file was read for it */
} DataFile;

typedef struct DataPrint {
    int64_t files, tokens; /* 0 files: unknown (a checkpoint from before fingerprints) */
    uint32_t crc32c;
} DataPrint;

typedef struct TokenData {
    DataFile *files;
    int n_files;
    uint32_t *tokens;   /* (n) every file's, in order */
    uint8_t *mask;      /* (n) 1: trained on as a target; NULL when no file has a mask */
    size_t n;
    uint32_t max_token;
    DataPrint print;
} TokenData;

const char *data_format_name(DataFormat f);
int data_format_parse(const char *s, DataFormat *out); /* auto, llmc, u16, text, npy */

/* Reads the files paths[0..n) name (globs expanded), each with its mask, in format (DATA_AUTO:
 * each file's own). 0 or -errno with e naming the file and the problem (missing, not a regular
 * file (a FIFO is refused without waiting for a writer), a pattern that matches nothing,
 * truncated or damaged header, odd size for uint16, empty, a token of 2^31 or above (the loader
 * gives tokens as int), a mask of another length or with a value other than 0 and 1, more than
 * DATA_MAX_FILES files). The caller frees with data_free; a failure leaves d empty (data_free
 * is safe on it). data_load: the same for one path. */
int data_load_list(TokenData *d, const char *const *paths, int n, DataFormat format, Err *e);
int data_load(TokenData *d, const char *path, DataFormat format, Err *e);
void data_free(TokenData *d);

/* Whether d suits a model of vocabulary vocab (named model): no text file unless vocab is 256
 * (bytes), every token below vocab. 0, or -EINVAL with e naming the file, and for a token the
 * first one outside and its position in the file. */
int data_check_model(const TokenData *d, int vocab, const char *model, Err *e);

/* The path of FILE's mask (above) in out (capacity n). */
void data_mask_path(const char *file, char *out, size_t n);

typedef struct Loader {
    const TokenData *d;
    int B, T;
    uint64_t seed;
    int64_t epoch, index; /* the position: sequences handed out in this epoch */
    size_t n_seq;
    size_t *seq_first;    /* (n_files + 1) file f's sequences are [seq_first[f], seq_first[f+1]) */
    uint32_t *order;      /* this epoch's permutation of sequence indices (NULL: in order) */
} Loader;

/* A training loader: 0, or -EINVAL when a file holds fewer than T + 1 tokens, when all of them
 * make fewer than B sequences or more than 2^32 - 1. loader_init_in_order: for evaluation, no
 * shuffle and at least one sequence. */
int loader_init(Loader *l, const TokenData *d, int B, int T, uint64_t seed, Err *e);
int loader_init_in_order(Loader *l, const TokenData *d, int B, int T, Err *e);
void loader_free(Loader *l);
/* The most epochs a loader counts: a checkpoint's loader_epoch beyond it is damaged (a
 * billion passes over the data), and loader_next's increment stays far from overflow. */
#define LOADER_MAX_EPOCH ((int64_t)1 << 40)
/* Moves to a saved position: 0, or -EINVAL with e when the index is past the data's
 * sequences (index n_seq is the epoch's end) or the epoch outside 0 to LOADER_MAX_EPOCH. */
int loader_seek(Loader *l, int64_t epoch, int64_t index, Err *e);
/* The next batch: inputs and targets (B,T), a masked target DATA_IGNORE. */
void loader_next(Loader *l, int *inputs, int *targets);
/* The B sequences from first in file order (not the shuffle's) into inputs and targets (B,T);
 * rows past the last sequence are padding: inputs 0, targets DATA_IGNORE. Returns the rows
 * filled with sequences. */
int loader_fill(const Loader *l, size_t first, int *inputs, int *targets);

#endif
