/* store: a tensor store on NVMe through io_uring with O_DIRECT.
 *
 * Tensors live in one logical address space striped over N directories or devices (one file,
 * "fuyou.store", in each): chunk k of the space is on device k mod N at offset (k div N) *
 * chunk_bytes. Allocation is a deterministic bump in chunk units and reserves the space on disk
 * (fallocate), so a full disk is reported when a tensor is created, not found mid-run; reopening
 * an existing store with the same allocations finds the same tensors.
 *
 * I/O is asynchronous and driven by one thread: store_read/store_write queue a request and
 * return its id; store_poll reaps completions and issues more pieces; store_wait blocks on one
 * request. A request is cut at chunk boundaries into pieces of at most one chunk, at most
 * queue_depth in flight; short transfers are re-issued for the rest; files and (optionally)
 * buffers are registered with the ring. Offsets and buffers must be 4 KiB aligned; lengths may
 * be anything when the request ends at the tensor's end (the tail goes through an aligned bounce
 * block), otherwise multiples of 4 KiB. Errors carry -errno and name the file and offset. With
 * checksums on, each written piece's CRC-32C is kept and a read of the same range verifies it:
 * torn or stale data is reported as -EBADMSG, never returned silently. */
#ifndef FUYOU_STORE_H
#define FUYOU_STORE_H

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuyou_err.h"

/* The file the store keeps in each of its directories. */
#define STORE_FILE_NAME "fuyou.store"

enum { STORE_MAX_DEVICES = 16, STORE_ALIGN = 4096, STORE_MAX_REQUESTS = 256,
       STORE_MAX_BUFFERS = 16 };

typedef struct StoreConfig {
    const char *dirs[STORE_MAX_DEVICES];
    int n_dirs;
    size_t chunk_bytes; /* stripe unit and largest single I/O (default 4 MiB) */
    int queue_depth;    /* pieces in flight (default 32) */
    bool checksum;
    bool create;        /* create (truncate) the files; else open existing ones */
    bool buffered;      /* without O_DIRECT, for file systems that lack it */
} StoreConfig;

typedef struct StoreTensor {
    uint64_t base;  /* logical address, chunk-aligned */
    uint64_t bytes;
} StoreTensor;

typedef struct StoreReq {
    bool active, write, done;
    uint64_t base, off, len; /* tensor base, offset in it, length */
    uint64_t tensor_end;     /* where the tensor ends: only there may a length be unaligned */
    uint8_t *buf;
    uint64_t seq;            /* the order queued in */
    uint64_t cursor;         /* bytes cut into pieces so far */
    int inflight;
    int err;                 /* first error, -errno */
    char msg[256];
} StoreReq;

typedef struct StorePiece {
    int req;                 /* -1: free */
    int dev;
    uint64_t file_off;
    uint8_t *io_buf;         /* what the ring reads into or writes from */
    size_t io_len, done;
    uint8_t *user;           /* bounce pieces: the caller's bytes */
    size_t user_len;
    uint64_t chunk;          /* global chunk index and start in it, for checksums */
    uint32_t chunk_start;
    int buf_index;           /* registered buffer, or -1 */
} StorePiece;

typedef struct StoreSum {
    uint32_t start, len, crc;
    bool valid;
} StoreSum;

typedef struct Store {
    StoreConfig cfg;
    char paths[STORE_MAX_DEVICES][4096];
    int fds[STORE_MAX_DEVICES];
    bool files_registered, fixed_ok;
    struct io_uring ring;
    bool ring_ok;
    uint64_t next_base;      /* bump allocator */
    StoreReq reqs[STORE_MAX_REQUESTS];
    StorePiece *pieces;      /* queue_depth */
    uint8_t *bounce;         /* queue_depth blocks of STORE_ALIGN */
    int inflight;
    uint64_t next_seq;       /* the next request's seq */
    bool write_turn;         /* the direction the next piece goes to when both have bytes */
    struct iovec bufs[STORE_MAX_BUFFERS];
    int n_bufs;
    StoreSum *sums;          /* two per chunk (body, tail), when checksums are on */
    uint64_t n_sums;
    uint64_t bytes_read, bytes_written, short_transfers;
} Store;

/* Opens (or creates) the store's files and its ring. The caller owns st; store_close is safe
 * after a failure. 0 or -errno with e naming the path and the problem (missing directory or
 * file, O_DIRECT unsupported by the file system, io_uring unavailable). */
int store_open(Store *st, const StoreConfig *cfg, Err *e);
void store_close(Store *st);

/* Reserves bytes on disk for a new tensor. -ENOSPC / -EFBIG with e naming the file. */
int store_alloc(Store *st, uint64_t bytes, StoreTensor *t, Err *e);
/* Where chunk k of the space lies (the striping above): its device's index into paths and fds,
 * and the returned byte offset of the chunk's start in that device's file. */
uint64_t store_chunk_place(const Store *st, uint64_t chunk, int *dev);

/* Registers [base, base + len) for fixed-buffer I/O (best effort: 0 even if the kernel refuses,
 * then plain I/O is used). Whole pool blocks are the intended unit. */
int store_register_buffer(Store *st, void *base, size_t len, Err *e);

/* Queue a request; return its id (>= 0) or -errno with e (bad alignment, range, too many). */
int store_read(Store *st, const StoreTensor *t, uint64_t off, void *buf, size_t len, Err *e);
int store_write(Store *st, const StoreTensor *t, uint64_t off, const void *buf, size_t len,
                Err *e);

/* Reaps what has completed and issues more, without blocking. Returns 0 or -errno if the ring
 * itself failed. */
int store_poll(Store *st, Err *e);
bool store_done(const Store *st, int req);
/* Blocks until request req completes; returns its result (0 or -errno with e) and frees it. */
int store_wait(Store *st, int req, Err *e);
/* Waits for every request, then checks no store file was removed; the first error wins. */
int store_wait_all(Store *st, Err *e);

#endif
