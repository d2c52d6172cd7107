/* seqfile: streamed block I/O with one read ahead or one write behind; see seqfile.h. */
#include "seqfile.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_memcheck.h"

enum { SEQ_ALIGN = 4096 };

/* One block of the file in memory: buf holds bytes [off, off + len). */
typedef struct Block {
    uint8_t *buf;
    uint64_t off;
    size_t len;
    bool held;          /* buf holds a block (reader), or its read / write is in flight */
    bool busy;          /* its I/O is in flight */
    bool reaped;        /* ... and its completion taken from the ring, its result in res */
    int res;
    size_t want;        /* the in-flight I/O's length */
} Block;

/* What a reader and a writer share: the file, the ring, two blocks by turns. */
typedef struct Seq {
    char path[4096];
    int fd, flags;      /* flags: open's, O_DIRECT aside */
    bool direct;        /* opened with O_DIRECT */
    bool ring_ok;       /* else every I/O is synchronous */
    struct io_uring ring;
    size_t block;
    Block b[2];
    int cur;            /* the block the caller is on; the other is ahead or behind */
} Seq;

struct SeqReader {
    Seq s;
    uint64_t size;
};

struct SeqWriter {
    Seq s;
    size_t head;        /* the reserved bytes at the start */
    size_t head_span;   /* head rounded up to SEQ_ALIGN: the span written last, from first */
    uint8_t *first;
};

static size_t align_up(size_t n)
{
    return (n + SEQ_ALIGN - 1) / SEQ_ALIGN * SEQ_ALIGN;
}

static int seq_init(Seq *s, const char *path, int flags, size_t block, Err *e)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    snprintf(s->path, sizeof s->path, "%s", path);
    if (block % SEQ_ALIGN)
        return err_set(e, -EINVAL, "%s: block of %zu bytes is not a multiple of %d", path,
                       block, SEQ_ALIGN);
    s->block = block ? block : SEQ_BLOCK;
    s->flags = flags;
    s->fd = open(path, flags | O_DIRECT | O_CLOEXEC, 0644);
    s->direct = s->fd >= 0;
    if (s->fd < 0 && errno == EINVAL) /* the file system has no O_DIRECT (tmpfs) */
        s->fd = open(path, flags | O_CLOEXEC, 0644);
    if (s->fd < 0)
        return err_set(e, -errno, "%s: cannot %s: %s", path,
                       (flags & O_ACCMODE) == O_RDONLY ? "read" : "write", strerror(errno));
    s->ring_ok = io_uring_queue_init(4, &s->ring, 0) == 0;
    for (int k = 0; k < 2; k++)
        if (!(s->b[k].buf = aligned_alloc(SEQ_ALIGN, s->block)))
            return err_set(e, -ENOMEM, "%s: out of memory for its %zu-byte blocks", path,
                           s->block);
    return 0;
}

/* The file again without O_DIRECT: for a file system that takes the flag and then refuses
 * the I/O. 0 or -errno. */
static int reopen_buffered(Seq *s)
{
    int fd = open(s->path, (s->flags & ~(O_CREAT | O_TRUNC)) | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    close(s->fd);
    s->fd = fd;
    s->direct = false;
    return 0;
}

/* Synchronous I/O of want bytes of buf at file offset off, from `done` on: short transfers
 * continued; a read stops at the file's end. The bytes moved, or -errno. */
static ssize_t sync_io(Seq *s, uint8_t *buf, uint64_t off, bool write, size_t done,
                       size_t want)
{
    while (done < want) {
        ssize_t n = write ? pwrite(s->fd, buf + done, want - done, (off_t)(off + done))
                          : pread(s->fd, buf + done, want - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EINVAL && s->direct) {
            int rc = reopen_buffered(s);
            if (rc)
                return rc;
            continue;
        }
        if (n < 0)
            return -errno;
        if (n == 0) {
            if (write)
                return -EIO;
            break;
        }
        done += (size_t)n;
        if (done % SEQ_ALIGN && done < want && s->direct) { /* the end of the file */
            if (write)
                return -EIO;
            break;
        }
    }
    return (ssize_t)done;
}

/* Starts the I/O of want bytes of block k at its offset (done now when there is no ring). */
static int seq_start(Seq *s, int k, bool write, size_t want)
{
    Block *b = &s->b[k];
    b->want = want;
    b->busy = true, b->reaped = false;
    struct io_uring_sqe *sqe = s->ring_ok ? io_uring_get_sqe(&s->ring) : NULL;
    if (!sqe) {
        ssize_t n = sync_io(s, b->buf, b->off, write, 0, want);
        b->busy = false;
        if (n < 0)
            return (int)n;
        if (!write)
            b->len = (size_t)n;
        return 0;
    }
    if (write)
        io_uring_prep_write(sqe, s->fd, b->buf, (unsigned)want, b->off);
    else
        io_uring_prep_read(sqe, s->fd, b->buf, (unsigned)want, b->off);
    io_uring_sqe_set_data(sqe, b);
    int rc = io_uring_submit(&s->ring);
    if (rc < 0) {
        b->busy = false;
        return rc;
    }
    return 0;
}

/* Waits for block k's I/O, if one is in flight, and finishes what it left short. 0 or -errno. */
static int seq_wait(Seq *s, int k, bool write)
{
    Block *b = &s->b[k];
    if (!b->busy)
        return 0;
    /* two writes may be in flight (the last block's and the one before): each completion goes
     * to its own block, whichever comes first */
    while (!b->reaped) {
        struct io_uring_cqe *cqe;
        int rc;
        do
            rc = io_uring_wait_cqe(&s->ring, &cqe);
        while (rc == -EINTR);
        if (rc < 0) {
            b->busy = false;
            return rc;
        }
        Block *x = io_uring_cqe_get_data(cqe);
        x->res = cqe->res;
        x->reaped = true;
        io_uring_cqe_seen(&s->ring, cqe);
    }
    int res = b->res;
    b->busy = b->reaped = false;
    if (!write && res > 0)
        IO_FILLED(b->buf, (size_t)res);
    if (res < 0 && res != -EINTR && res != -EAGAIN && !(res == -EINVAL && s->direct))
        return res; /* (sync_io retries an O_DIRECT refusal buffered) */
    ssize_t n = sync_io(s, b->buf, b->off, write, res < 0 ? 0 : (size_t)res, b->want);
    if (n < 0)
        return (int)n;
    if (!write)
        b->len = (size_t)n;
    return 0;
}

static void seq_free(Seq *s)
{
    for (int k = 0; k < 2; k++)
        (void)seq_wait(s, k, false);
    if (s->ring_ok)
        io_uring_queue_exit(&s->ring);
    if (s->fd >= 0)
        close(s->fd);
    for (int k = 0; k < 2; k++)
        free(s->b[k].buf);
}

int seq_reader_open(SeqReader **out, const char *path, size_t block, Err *e)
{
    SeqReader *r = calloc(1, sizeof *r);
    *out = r;
    if (!r)
        return err_set(e, -ENOMEM, "out of memory");
    int rc = seq_init(&r->s, path, O_RDONLY, block, e);
    struct stat st;
    if (!rc && fstat(r->s.fd, &st))
        rc = err_set(e, -errno, "%s: %s", path, strerror(errno));
    r->size = rc ? 0 : (uint64_t)st.st_size;
    if (rc) {
        seq_reader_close(r);
        *out = NULL;
    }
    return rc;
}

uint64_t seq_reader_size(const SeqReader *r)
{
    return r->size;
}

/* Block k to read from off (4 KiB aligned) on, ahead, to end at most (a block's worth). */
static int read_ahead(SeqReader *r, int k, uint64_t off, uint64_t end)
{
    Block *b = &r->s.b[k];
    b->off = off, b->len = 0, b->held = true;
    end = end < r->size ? end : r->size;
    size_t want = align_up((size_t)(end - off));
    return seq_start(&r->s, k, false, want < r->s.block ? want : r->s.block);
}

static int read_failed(SeqReader *r, int rc, uint64_t off, Err *e)
{
    r->s.b[0].held = r->s.b[1].held = false;
    return err_set(e, rc, "%s: read at byte %llu: %s", r->s.path, (unsigned long long)off,
                   strerror(-rc));
}

/* Makes the current block one holding off: the block read ahead when it starts there, else
 * one read now; the one after it then read ahead, up to end. */
static int turn_to(SeqReader *r, uint64_t off, uint64_t end, Err *e)
{
    Seq *s = &r->s;
    int next = s->cur ^ 1, rc;
    const Block *n = &s->b[next];
    if (n->held && off >= n->off && off < n->off + n->want) {
        s->cur = next;
    } else {
        uint64_t at = off / SEQ_ALIGN * SEQ_ALIGN;
        if ((rc = seq_wait(s, next, false)) || (rc = read_ahead(r, s->cur, at, end)))
            return read_failed(r, rc, at, e);
        s->b[next].held = false;
    }
    const Block *c = &s->b[s->cur];
    if ((rc = seq_wait(s, s->cur, false)))
        return read_failed(r, rc, c->off, e);
    if (off >= c->off + c->len)
        return err_set(e, -EIO, "%s: short read at byte %llu: did the file shrink?", s->path,
                       (unsigned long long)off);
    uint64_t after = c->off + c->len;
    if (c->len == c->want && after < end && after < r->size &&
        (rc = read_ahead(r, s->cur ^ 1, after, end)))
        return read_failed(r, rc, after, e);
    return 0;
}

int seq_view(SeqReader *r, uint64_t off, size_t len, uint64_t end, const void **p, size_t *got,
             Err *e)
{
    Seq *s = &r->s;
    if (off >= r->size)
        return err_set(e, -EINVAL, "%s: read at byte %llu of a %llu-byte file", s->path,
                       (unsigned long long)off, (unsigned long long)r->size);
    end = end > off + len ? end : off + len;
    const Block *c = &s->b[s->cur];
    if (!c->held || off < c->off || off >= c->off + c->len) {
        int rc = turn_to(r, off, end, e);
        if (rc)
            return rc;
        c = &s->b[s->cur];
    }
    size_t in = (size_t)(c->off + c->len - off);
    *got = len < in ? len : in;
    *p = c->buf + (off - c->off);
    return 0;
}

int seq_read(SeqReader *r, uint64_t off, void *dst, size_t len, Err *e)
{
    for (size_t got; len; off += got, len -= got, dst = (uint8_t *)dst + got) {
        const void *p;
        int rc = seq_view(r, off, len, off + len, &p, &got, e);
        if (rc)
            return rc;
        memcpy(dst, p, got);
    }
    return 0;
}

void seq_reader_close(SeqReader *r)
{
    if (!r)
        return;
    seq_free(&r->s);
    free(r);
}

int seq_writer_open(SeqWriter **out, const char *path, size_t head, size_t block, Err *e)
{
    SeqWriter *w = calloc(1, sizeof *w);
    *out = w;
    if (!w)
        return err_set(e, -ENOMEM, "out of memory");
    int rc = seq_init(&w->s, path, O_WRONLY | O_CREAT | O_TRUNC, block, e);
    w->head = head;
    w->head_span = align_up(head);
    if (!rc && w->head_span && !(w->first = aligned_alloc(SEQ_ALIGN, w->head_span)))
        rc = err_set(e, -ENOMEM, "%s: out of memory", path);
    if (rc) {
        seq_writer_abort(w);
        *out = NULL;
        return rc;
    }
    if (w->head_span) /* without a head there is no first block (memset's NULL is undefined) */
        memset(w->first, 0, w->head_span);
    /* the head's bytes are a placeholder until the end: the writing starts after them */
    for (size_t n = head; n;) {
        void *p;
        size_t room;
        seq_writer_room(w, &p, &room, e); /* cannot fail: nothing is written yet */
        room = room < n ? room : n;
        memset(p, 0, room);
        seq_writer_advance(w, room);
        n -= room;
    }
    return 0;
}

static int write_failed(SeqWriter *w, int rc, Err *e)
{
    return err_set(e, rc, "%s: write failed: %s", w->s.path, strerror(-rc));
}

/* Writes the current block behind (its part past the head's span; the part within kept in
 * first, written last) and turns to the other once its own write is done. */
static int flush_block(SeqWriter *w, Err *e)
{
    Seq *s = &w->s;
    Block *c = &s->b[s->cur];
    uint64_t end = c->off + c->len;
    if (c->off < w->head_span) {
        size_t upto = end < w->head_span ? (size_t)end : w->head_span;
        memcpy(w->first + c->off, c->buf, upto - (size_t)c->off);
    }
    uint64_t from = c->off > w->head_span ? c->off : w->head_span;
    int rc = 0;
    if (from < end) {
        size_t skip = (size_t)(from - c->off);
        size_t want = align_up((size_t)(end - from));
        if (skip) { /* the write starts at the head span's end: moved to the buffer's start */
            memmove(c->buf, c->buf + skip, (size_t)(end - from));
            c->off = from;
        }
        /* the last block rounds up past the data (truncated at the end): zeros, not whatever
         * the buffer held */
        memset(c->buf + (end - from), 0, want - (size_t)(end - from));
        rc = seq_start(s, s->cur, true, want);
    }
    int next = s->cur ^ 1;
    if (!rc)
        rc = seq_wait(s, next, true);
    if (rc)
        return write_failed(w, rc, e);
    s->b[next].off = end, s->b[next].len = 0;
    s->cur = next;
    return 0;
}

int seq_writer_room(SeqWriter *w, void **p, size_t *room, Err *e)
{
    Seq *s = &w->s;
    Block *c = &s->b[s->cur];
    /* blocks end on the block grid: each write aligned, the first one's start too */
    size_t cap = s->block - (size_t)(c->off % s->block);
    if (c->len == cap) {
        int rc = flush_block(w, e);
        if (rc)
            return rc;
        c = &s->b[s->cur];
        cap = s->block - (size_t)(c->off % s->block);
    }
    *p = c->buf + c->len;
    *room = cap - c->len;
    return 0;
}

void seq_writer_advance(SeqWriter *w, size_t n)
{
    w->s.b[w->s.cur].len += n;
}

int seq_write(SeqWriter *w, const void *src, size_t len, Err *e)
{
    while (len) {
        void *p;
        size_t room;
        int rc = seq_writer_room(w, &p, &room, e);
        if (rc)
            return rc;
        room = room < len ? room : len;
        memcpy(p, src, room);
        seq_writer_advance(w, room);
        src = (const uint8_t *)src + room, len -= room;
    }
    return 0;
}

int seq_writer_finish(SeqWriter *w, const void *head, Err *e)
{
    Seq *s = &w->s;
    Block *c = &s->b[s->cur];
    uint64_t end = c->off + c->len;
    int rc = flush_block(w, e);
    if (!rc && (rc = seq_wait(s, s->cur ^ 1, true)))
        rc = write_failed(w, rc, e);
    if (!rc && w->head_span) { /* the head, and the data that shares its last 4 KiB */
        memcpy(w->first, head, w->head);
        ssize_t n = sync_io(s, w->first, 0, true, 0, w->head_span);
        if (n < 0)
            rc = write_failed(w, (int)n, e);
    }
    if (!rc && ftruncate(s->fd, (off_t)end))
        rc = err_set(e, -errno, "%s: cannot set its size: %s", s->path, strerror(errno));
    if (!rc && fsync(s->fd))
        rc = err_set(e, -errno, "%s: write failed: %s", s->path, strerror(errno));
    if (!rc && close(s->fd))
        rc = err_set(e, -errno, "%s: close failed: %s", s->path, strerror(errno));
    s->fd = rc ? s->fd : -1;
    seq_writer_abort(w);
    return rc;
}

void seq_writer_abort(SeqWriter *w)
{
    if (!w)
        return;
    for (int k = 0; k < 2; k++)
        (void)seq_wait(&w->s, k, true);
    seq_free(&w->s);
    free(w->first);
    free(w);
}
