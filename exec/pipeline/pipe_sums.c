/* pipe_sums: the SSD tier's checksums, a CRC-32C per chunk of the store's space; see
 * pipe_mem.h (pipe_mem_sums_*). */
#include "pipe_mem.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "crc32c.h"

int pipe_mem_sums_alloc(PipeMem *m, Err *e)
{
    m->n_sums = m->st.next_base / m->st.cfg.chunk_bytes;
    m->sums = calloc(m->n_sums ? m->n_sums : 1, sizeof *m->sums);
    m->sum_set = calloc(m->n_sums ? m->n_sums : 1, 1);
    if (!m->sums || !m->sum_set)
        return err_set(e, -ENOMEM, "out of memory for the SSD tier's checksums");
    return 0;
}

/* The bytes of t's chunk k: [k C, k C + *len) of t, entry *at of the table. */
static uint64_t sum_chunk(const PipeMem *m, const StoreTensor *t, uint64_t k, size_t *len,
                          uint64_t *at)
{
    uint64_t C = m->st.cfg.chunk_bytes, off = k * C;
    *len = (size_t)(t->bytes - off < C ? t->bytes - off : C);
    *at = t->base / C + k;
    assert(*at < m->n_sums);
    return off;
}

static uint64_t chunks_of(const PipeMem *m, const StoreTensor *t)
{
    return (t->bytes + m->st.cfg.chunk_bytes - 1) / m->st.cfg.chunk_bytes;
}

void pipe_mem_sums_take(PipeMem *m, const StoreTensor *t, const void *buf)
{
    for (uint64_t k = 0; k < chunks_of(m, t); k++) {
        size_t len;
        uint64_t at, off = sum_chunk(m, t, k, &len, &at);
        m->sums[at] = crc32c(0, (const uint8_t *)buf + off, len);
        m->sum_set[at] = 1;
    }
}

/* A read's check: the chunks [begin, end) of its extent, the first that fails lowered into
 * first_bad (any split of the chunks finds the same lowest one). */
typedef struct SumsCheck {
    const PipeMem *m;
    const StoreTensor *t;
    const uint8_t *buf;
    _Atomic uint64_t first_bad;
} SumsCheck;

static void check_chunks(void *ctx, size_t begin, size_t end)
{
    SumsCheck *c = ctx;
    for (uint64_t k = begin; k < end; k++) {
        size_t len;
        uint64_t at, off = sum_chunk(c->m, c->t, k, &len, &at);
        if (c->m->sum_set[at] && crc32c(0, c->buf + off, len) == c->m->sums[at])
            continue;
        uint64_t was = atomic_load(&c->first_bad);
        while (k < was && !atomic_compare_exchange_weak(&c->first_bad, &was, k))
            ;
        return; /* the chunks after it cannot be the first */
    }
}

int pipe_mem_sums_check(const PipeMem *m, const StoreTensor *t, const void *buf, WorkPool *wp,
                        Err *e)
{
    uint64_t n = chunks_of(m, t);
    SumsCheck c = {.m = m, .t = t, .buf = buf};
    atomic_init(&c.first_bad, n);
    if (wp && n > 1)
        workpool_run(wp, check_chunks, &c, n, 1);
    else
        check_chunks(&c, 0, n);
    uint64_t k = atomic_load(&c.first_bad);
    if (k == n)
        return 0;
    size_t len;
    uint64_t at, off = sum_chunk(m, t, k, &len, &at);
    int dev;
    unsigned long long file_off = store_chunk_place(&m->st, at, &dev);
    const char *path = m->st.paths[dev];
    if (!m->sum_set[at])
        return err_set(e, -EIO, "%s: the %zu bytes at offset %llu were read before the run "
                       "wrote them (a bug: every read of the SSD tier follows a write)", path,
                       len, file_off);
    return err_set(e, -EBADMSG, "%s: checksum mismatch at offset %llu (%zu bytes, from byte "
                   "%llu of the extent)", path, file_off, len, (unsigned long long)off);
}

int pipe_mem_ssd_error(int rc, Err *e)
{
    if (rc == -EBADMSG && e)
        err_append(e->msg, sizeof e->msg, "; the SSD tier gave back other bytes than the run "
                   "wrote there (a failing disk, or another program writing the file): check "
                   "the disk, then --resume from the last checkpoint");
    return rc;
}
