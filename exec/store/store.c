/* store: striped O_DIRECT tensor I/O over io_uring; see store.h. */
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "io_memcheck.h"

static const char *const file_name = STORE_FILE_NAME;

/* ---- opening ------------------------------------------------------------------------------ */

static int open_file(Store *st, int d, Err *e)
{
    const char *dir = st->cfg.dirs[d];
    if (snprintf(st->paths[d], sizeof st->paths[d], "%s/%s", dir, file_name) >=
        (int)sizeof st->paths[d])
        return err_set(e, -ENAMETOOLONG, "%s: path too long", dir);
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
        return err_set(e, -ENOENT, "%s: not a directory; give one directory per SSD", dir);
    for (int k = 0; k < d; k++)
        if (!strcmp(st->paths[k], st->paths[d]))
            return err_set(e, -EINVAL, "%s: given twice", dir);
    int flags = O_RDWR | O_CLOEXEC | (st->cfg.buffered ? 0 : O_DIRECT);
    if (st->cfg.create)
        flags |= O_CREAT | O_TRUNC;
    int fd = open(st->paths[d], flags, 0600);
    if (fd < 0 && errno == EINVAL && !st->cfg.buffered)
        return err_set(e, -EINVAL, "%s: the file system does not support O_DIRECT; put the "
                       "store on a local SSD file system (ext4, xfs)", st->paths[d]);
    if (fd < 0)
        return err_set(e, -errno, "%s: %s%s", st->paths[d], strerror(errno),
                       errno == ENOENT ? " (the store was not created here, or was removed)"
                                       : "");
    st->fds[d] = fd;
    return 0;
}

int store_open(Store *st, const StoreConfig *cfg, Err *e)
{
    memset(st, 0, sizeof *st);
    for (int d = 0; d < STORE_MAX_DEVICES; d++)
        st->fds[d] = -1;
    st->cfg = *cfg;
    if (!st->cfg.chunk_bytes)
        st->cfg.chunk_bytes = 4u << 20;
    if (!st->cfg.queue_depth)
        st->cfg.queue_depth = 32;
    if (cfg->n_dirs < 1 || cfg->n_dirs > STORE_MAX_DEVICES)
        return err_set(e, -EINVAL, "store: 1 to %d directories, got %d", STORE_MAX_DEVICES,
                       cfg->n_dirs);
    if (st->cfg.chunk_bytes % STORE_ALIGN || st->cfg.queue_depth < 1 ||
        st->cfg.queue_depth > 4096)
        return err_set(e, -EINVAL, "store: chunk size must be a multiple of %d and queue depth "
                       "1 to 4096", STORE_ALIGN);
    for (int d = 0; d < cfg->n_dirs; d++) {
        int rc = open_file(st, d, e);
        if (rc)
            return rc;
    }
    int qd = st->cfg.queue_depth;
    st->pieces = calloc((size_t)qd, sizeof *st->pieces);
    if (!st->pieces || posix_memalign((void **)&st->bounce, STORE_ALIGN, (size_t)qd * STORE_ALIGN))
        return err_set(e, -ENOMEM, "out of memory for the store's queue");
    for (int i = 0; i < qd; i++)
        st->pieces[i].req = -1;
    int rc = io_uring_queue_init((unsigned)qd, &st->ring, 0);
    if (rc < 0)
        return err_set(e, rc, "io_uring_queue_init: %s (io_uring unavailable or limited here)",
                       strerror(-rc));
    st->ring_ok = true;
    /* Probe once: fixed buffers need READ_FIXED/WRITE_FIXED. */
    struct io_uring_probe *probe = io_uring_get_probe_ring(&st->ring);
    st->fixed_ok = probe && io_uring_opcode_supported(probe, IORING_OP_READ_FIXED) &&
                   io_uring_opcode_supported(probe, IORING_OP_WRITE_FIXED);
    if (probe)
        io_uring_free_probe(probe);
    st->files_registered = io_uring_register_files(&st->ring, st->fds,
                                                   (unsigned)cfg->n_dirs) == 0;
    return 0;
}

void store_close(Store *st)
{
    if (st->ring_ok)
        io_uring_queue_exit(&st->ring);
    st->ring_ok = false;
    for (int d = 0; d < STORE_MAX_DEVICES; d++)
        if (st->fds[d] >= 0) {
            close(st->fds[d]);
            st->fds[d] = -1;
        }
    free(st->pieces);
    free(st->bounce);
    free(st->sums);
    st->pieces = NULL;
    st->bounce = NULL;
    st->sums = NULL;
}

/* ---- allocation -------------------------------------------------------------------------- */

int store_alloc(Store *st, uint64_t bytes, StoreTensor *t, Err *e)
{
    uint64_t C = st->cfg.chunk_bytes, N = (uint64_t)st->cfg.n_dirs;
    uint64_t chunks = (bytes + C - 1) / C;
    if (chunks == 0)
        chunks = 1;
    uint64_t first = st->next_base / C, end_chunk = first + chunks;
    /* Each device holds chunks d, d + N, ...: it needs ceil((end - d) / N) of them. */
    for (int d = 0; d < (int)N; d++) {
        uint64_t per = end_chunk > (uint64_t)d ? (end_chunk - (uint64_t)d + N - 1) / N : 0;
        off_t need = (off_t)(per * C);
        if (need == 0)
            continue;
        int rc = fallocate(st->fds[d], 0, 0, need);
        if (rc && (errno == EOPNOTSUPP || errno == ENOSYS))
            rc = ftruncate(st->fds[d], need) ? -1 : 0; /* no reservation on this file system */
        if (rc) {
            int err = errno;
            return err_set(e, -err, "%s: cannot reserve %llu bytes: %s%s", st->paths[d],
                           (unsigned long long)need, strerror(err),
                           err == ENOSPC ? "; free space or add an SSD" : "");
        }
    }
    if (st->cfg.checksum) {
        /* Two entries per chunk: its aligned body and a tensor's unaligned tail. */
        StoreSum *s = realloc(st->sums, 2 * end_chunk * sizeof *s);
        if (!s)
            return err_set(e, -ENOMEM, "out of memory for checksums");
        memset(s + st->n_sums, 0, (2 * end_chunk - st->n_sums) * sizeof *s);
        st->sums = s;
        st->n_sums = 2 * end_chunk;
    }
    *t = (StoreTensor){.base = first * C, .bytes = bytes};
    st->next_base = end_chunk * C;
    return 0;
}

int store_register_buffer(Store *st, void *base, size_t len, Err *e)
{
    (void)e;
    if (!st->fixed_ok || st->n_bufs == STORE_MAX_BUFFERS)
        return 0;
    struct iovec all[STORE_MAX_BUFFERS];
    memcpy(all, st->bufs, (size_t)st->n_bufs * sizeof *all);
    all[st->n_bufs] = (struct iovec){base, len};
    if (st->n_bufs)
        io_uring_unregister_buffers(&st->ring);
    if (io_uring_register_buffers(&st->ring, all, (unsigned)st->n_bufs + 1) == 0) {
        st->bufs[st->n_bufs] = all[st->n_bufs];
        st->n_bufs++;
        return 0;
    }
    /* Refused (memlock limit, or over the kernel's size limit): keep the old set. */
    if (st->n_bufs)
        io_uring_register_buffers(&st->ring, st->bufs, (unsigned)st->n_bufs);
    return 0;
}

/* ---- requests ---------------------------------------------------------------------------- */

static int queue_request(Store *st, bool write, const StoreTensor *t, uint64_t off, void *buf,
                         size_t len, Err *e)
{
    const char *op = write ? "write" : "read";
    if (off % STORE_ALIGN || (uintptr_t)buf % STORE_ALIGN)
        return err_set(e, -EINVAL, "store %s: offset %llu and buffer must be %d-byte aligned",
                       op, (unsigned long long)off, STORE_ALIGN);
    if (off + len > t->bytes)
        return err_set(e, -EINVAL, "store %s: %zu bytes at %llu run past the tensor's %llu",
                       op, len, (unsigned long long)off, (unsigned long long)t->bytes);
    if (len % STORE_ALIGN && off + len != t->bytes)
        return err_set(e, -EINVAL, "store %s: a length that is not a multiple of %d must end "
                       "at the tensor's end", op, STORE_ALIGN);
    for (int i = 0; i < STORE_MAX_REQUESTS; i++) {
        StoreReq *r = &st->reqs[i];
        if (r->active)
            continue;
        *r = (StoreReq){.active = true, .write = write, .base = t->base, .off = off, .len = len,
                        .tensor_end = t->bytes, .buf = buf, .seq = st->next_seq++};
        if (len == 0)
            r->done = true;
        return i;
    }
    return err_set(e, -EBUSY, "store: more than %d requests outstanding; wait for some",
                   STORE_MAX_REQUESTS);
}

int store_read(Store *st, const StoreTensor *t, uint64_t off, void *buf, size_t len, Err *e)
{
    int id = queue_request(st, false, t, off, buf, len, e);
    if (id >= 0)
        store_poll(st, NULL);
    return id;
}

int store_write(Store *st, const StoreTensor *t, uint64_t off, const void *buf, size_t len,
                Err *e)
{
    int id = queue_request(st, true, t, off, (void *)buf, len, e);
    if (id >= 0)
        store_poll(st, NULL);
    return id;
}

static void fail_request(Store *st, StoreReq *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_request(Store *st, StoreReq *r, int err, const char *fmt, ...)
{
    (void)st;
    if (r->err)
        return;
    r->err = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

static int find_buffer(const Store *st, const uint8_t *p, size_t len)
{
    for (int i = 0; i < st->n_bufs; i++) {
        const uint8_t *b = st->bufs[i].iov_base;
        if (p >= b && p + len <= b + st->bufs[i].iov_len)
            return i;
    }
    return -1;
}

/* Puts piece k (with io_len - done bytes left) on the ring. */
static void prep_piece(Store *st, int k)
{
    StorePiece *pc = &st->pieces[k];
    StoreReq *r = &st->reqs[pc->req];
    struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
    assert(sqe); /* at most queue_depth pieces exist, the ring has queue_depth entries */
    uint8_t *buf = pc->io_buf + pc->done;
    unsigned len = (unsigned)(pc->io_len - pc->done);
    off_t off = (off_t)(pc->file_off + pc->done);
    int fd = st->files_registered ? pc->dev : st->fds[pc->dev];
    if (pc->buf_index >= 0) {
        if (r->write)
            io_uring_prep_write_fixed(sqe, fd, buf, len, off, pc->buf_index);
        else
            io_uring_prep_read_fixed(sqe, fd, buf, len, off, pc->buf_index);
    } else if (r->write) {
        io_uring_prep_write(sqe, fd, buf, len, off);
    } else {
        io_uring_prep_read(sqe, fd, buf, len, off);
    }
    if (st->files_registered)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, (uint64_t)k);
}

uint64_t store_chunk_place(const Store *st, uint64_t chunk, int *dev)
{
    uint64_t N = (uint64_t)st->cfg.n_dirs;
    *dev = (int)(chunk % N);
    return chunk / N * st->cfg.chunk_bytes;
}

/* Cuts the next piece of request ri into free slot k. */
static void cut_piece(Store *st, int ri, int k)
{
    StoreReq *r = &st->reqs[ri];
    StorePiece *pc = &st->pieces[k];
    uint64_t C = st->cfg.chunk_bytes;
    uint64_t addr = r->base + r->off + r->cursor;
    uint64_t chunk = addr / C, in_chunk = addr % C;
    uint64_t seg = C - in_chunk < r->len - r->cursor ? C - in_chunk : r->len - r->cursor;
    uint64_t aligned = seg / STORE_ALIGN * STORE_ALIGN;
    *pc = (StorePiece){.req = ri, .chunk = chunk, .chunk_start = (uint32_t)in_chunk,
                       .buf_index = -1};
    pc->file_off = store_chunk_place(st, chunk, &pc->dev) + in_chunk;
    uint8_t *user = r->buf + r->cursor;
    if (aligned > 0) {
        pc->io_buf = user;
        pc->io_len = pc->user_len = aligned;
        if (st->fixed_ok)
            pc->buf_index = find_buffer(st, user, aligned);
    } else {
        /* The tail of a tensor: one aligned bounce block, zero-padded past the tensor. */
        pc->io_buf = st->bounce + (size_t)k * STORE_ALIGN;
        pc->io_len = STORE_ALIGN;
        pc->user = user;
        pc->user_len = seg;
        if (r->write) {
            memcpy(pc->io_buf, user, seg);
            memset(pc->io_buf + seg, 0, STORE_ALIGN - seg);
        }
    }
    r->cursor += pc->user_len;
    r->inflight++;
    st->inflight++;
    if (r->write && st->cfg.checksum)
        st->sums[2 * chunk + (pc->user != NULL)] = (StoreSum){.start = pc->chunk_start, .len = (uint32_t)pc->user_len,
                                     .crc = crc32c(0, user, pc->user_len), .valid = true};
    prep_piece(st, k);
}

/* The oldest request of one direction with bytes left to cut, or -1. */
static int oldest_to_cut(const Store *st, bool write)
{
    int best = -1;
    for (int i = 0; i < STORE_MAX_REQUESTS; i++) {
        const StoreReq *r = &st->reqs[i];
        if (r->active && r->write == write && !r->done && !r->err && r->cursor < r->len &&
            (best < 0 || r->seq < st->reqs[best].seq))
            best = i;
    }
    return best;
}

/* Issues pieces while slots are free. In a direction the oldest request first, until it has
 * none left to cut (so a request queued behind another fills the device's queue as the first
 * drains); between the two directions piece by piece in turn, so reads and writes in flight
 * together share the queue, as the cost model shares the disk between them, and a write is
 * never held back until every read queued before it is cut (nor a read by writes). */
static void pump(Store *st)
{
    int oldest[2] = {oldest_to_cut(st, false), oldest_to_cut(st, true)}, k = 0;
    while (st->inflight < st->cfg.queue_depth) {
        bool w = oldest[st->write_turn] >= 0 ? st->write_turn : !st->write_turn;
        int ri = oldest[w];
        if (ri < 0)
            return;
        while (st->pieces[k].req >= 0)
            k++;
        cut_piece(st, ri, k);
        if (st->reqs[ri].cursor >= st->reqs[ri].len)
            oldest[w] = oldest_to_cut(st, w);
        st->write_turn = !w;
    }
}

static void finish_piece(Store *st, int k)
{
    StorePiece *pc = &st->pieces[k];
    StoreReq *r = &st->reqs[pc->req];
    if (!r->write && !r->err) {
        IO_FILLED(pc->io_buf, pc->io_len);
        if (pc->user)
            memcpy(pc->user, pc->io_buf, pc->user_len);
        if (st->cfg.checksum) {
            const uint8_t *data = pc->user ? pc->user : pc->io_buf;
            StoreSum s = st->sums[2 * pc->chunk + (pc->user != NULL)];
            if (!s.valid || s.start != pc->chunk_start || s.len != pc->user_len)
                fail_request(st, r, -EINVAL, "%s: read at offset %llu does not match a "
                             "written range, so it cannot be verified; read what was written",
                             st->paths[pc->dev], (unsigned long long)pc->file_off);
            else if (crc32c(0, data, pc->user_len) != s.crc)
                fail_request(st, r, -EBADMSG, "%s: checksum mismatch at offset %llu (%zu "
                             "bytes): torn or stale data on disk", st->paths[pc->dev],
                             (unsigned long long)pc->file_off, pc->user_len);
        }
    }
    if (r->write)
        st->bytes_written += pc->user_len;
    else
        st->bytes_read += pc->user_len;
    pc->req = -1;
    r->inflight--;
    st->inflight--;
    if (r->inflight == 0 && (r->cursor >= r->len || r->err))
        r->done = true;
}

static void handle_cqe(Store *st, const struct io_uring_cqe *cqe)
{
    int k = (int)io_uring_cqe_get_data64(cqe);
    StorePiece *pc = &st->pieces[k];
    StoreReq *r = &st->reqs[pc->req];
    int res = cqe->res;
    if (res == -EAGAIN || res == -EINTR) {
        prep_piece(st, k);
        return;
    }
    if (res < 0) {
        fail_request(st, r, res, "%s: %s at offset %llu: %s", st->paths[pc->dev],
                     r->write ? "write" : "read", (unsigned long long)(pc->file_off + pc->done),
                     strerror(-res));
    } else if (res == 0) {
        fail_request(st, r, -EIO, "%s: %s at offset %llu returned nothing (past the end of "
                     "the file?)", st->paths[pc->dev], r->write ? "write" : "read",
                     (unsigned long long)(pc->file_off + pc->done));
    } else if ((size_t)res < pc->io_len - pc->done) {
        pc->done += (size_t)res; /* short: issue the rest */
        st->short_transfers++;
        prep_piece(st, k);
        return;
    }
    finish_piece(st, k);
}

static int reap(Store *st, bool block, Err *e)
{
    struct io_uring_cqe *cqe;
    int rc = io_uring_submit(&st->ring);
    if (rc < 0)
        return err_set(e, rc, "io_uring_submit: %s", strerror(-rc));
    if (block && st->inflight > 0) {
        rc = io_uring_wait_cqe(&st->ring, &cqe);
        if (rc < 0 && rc != -EINTR)
            return err_set(e, rc, "io_uring_wait_cqe: %s", strerror(-rc));
    }
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&st->ring, head, cqe) {
        handle_cqe(st, cqe);
        seen++;
    }
    io_uring_cq_advance(&st->ring, seen);
    return 0;
}

int store_poll(Store *st, Err *e)
{
    pump(st);
    int rc = reap(st, false, e);
    pump(st);
    if (!rc) {
        int s = io_uring_submit(&st->ring);
        if (s < 0)
            rc = err_set(e, s, "io_uring_submit: %s", strerror(-s));
    }
    return rc;
}

bool store_done(const Store *st, int req)
{
    return req >= 0 && req < STORE_MAX_REQUESTS && st->reqs[req].active && st->reqs[req].done;
}

int store_wait(Store *st, int req, Err *e)
{
    assert(req >= 0 && req < STORE_MAX_REQUESTS && st->reqs[req].active);
    StoreReq *r = &st->reqs[req];
    while (!r->done) {
        pump(st);
        int rc = reap(st, true, e);
        if (rc)
            return rc;
    }
    int err = r->err;
    if (err)
        err_set(e, err, "%s", r->msg);
    r->active = false;
    return err;
}

int store_wait_all(Store *st, Err *e)
{
    int first = 0;
    Err local;
    for (int i = 0; i < STORE_MAX_REQUESTS; i++)
        if (st->reqs[i].active) {
            int rc = store_wait(st, i, &local);
            if (rc && !first) {
                first = rc;
                if (e)
                    *e = local;
            }
        }
    for (int d = 0; !first && d < st->cfg.n_dirs; d++) {
        struct stat sb;
        if (fstat(st->fds[d], &sb) == 0 && sb.st_nlink == 0)
            first = err_set(e, -ENOENT, "%s: removed while in use; what was written there is "
                            "lost", st->paths[d]);
    }
    return first;
}
