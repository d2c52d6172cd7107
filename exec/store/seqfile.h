/* seqfile: one file streamed front to back in large aligned blocks with O_DIRECT, the page
 * cache bypassed (buffered where the file system lacks O_DIRECT). A reader reads the next
 * block ahead while the caller works on the current one; a writer writes the last full block
 * behind while the caller fills the next. Two blocks by turns, their I/O through io_uring
 * (synchronous where a ring cannot be had). Checkpoints and Hugging Face shards go through it: a model's
 * size of data moved once at the disk's rate (ARCHITECTURE.md: checkpoints). Errors are
 * -errno with e naming the file. */
#ifndef FUYOU_SEQFILE_H
#define FUYOU_SEQFILE_H

#include <stddef.h>
#include <stdint.h>

#include "fuyou_err.h"

enum { SEQ_BLOCK = 16 << 20 }; /* the default block: dd's 16 MiB, the disks' rate one at a time */

typedef struct SeqReader SeqReader;

/* Opens path to read in blocks of block bytes (a multiple of 4 KiB; 0: SEQ_BLOCK). */
int seq_reader_open(SeqReader **r, const char *path, size_t block, Err *e);
/* Up to len bytes of the file from off, in place: a pointer to them in *p, their count in
 * *got (1 or more, cut at a block's end), valid until the next call. end (off + len or more)
 * is where the caller's reading from off on stops: the read ahead goes no further. Offsets
 * that move forward stream; a jump elsewhere restarts there. -errno with e past the file's
 * end or on a read error. */
int seq_view(SeqReader *r, uint64_t off, size_t len, uint64_t end, const void **p, size_t *got,
             Err *e);
/* len bytes from off into dst (seq_view's, copied; nothing read ahead). */
int seq_read(SeqReader *r, uint64_t off, void *dst, size_t len, Err *e);
uint64_t seq_reader_size(const SeqReader *r);
void seq_reader_close(SeqReader *r);

typedef struct SeqWriter SeqWriter;

/* Creates (truncates) path to write front to back; its first head bytes are reserved and
 * written last, by seq_writer_finish (a header whose content is known at the end). */
int seq_writer_open(SeqWriter **w, const char *path, size_t head, size_t block, Err *e);
/* Room for the next bytes, in place: *p and its size *room (1 or more, to a block's end).
 * seq_writer_advance then says how many were filled (at most *room). */
int seq_writer_room(SeqWriter *w, void **p, size_t *room, Err *e);
void seq_writer_advance(SeqWriter *w, size_t n);
/* len bytes of src appended (seq_writer_room's, copied). */
int seq_write(SeqWriter *w, const void *src, size_t len, Err *e);
/* The head's bytes put in, the file written to its end, fsynced and closed; w freed. */
int seq_writer_finish(SeqWriter *w, const void *head, Err *e);
/* Closes and frees w (the file is left as it is). */
void seq_writer_abort(SeqWriter *w);

#endif
