/* Check suite for exec/store (striped O_DIRECT io_uring store, CRC-32C, host pool): round trips
 * of odd sizes across stripes, fixed buffers, error injection (a file-size limit standing in
 * for a full disk, reads past the end, removed files, bad arguments), checksum detection of
 * torn or stale data, and the host pool's budget. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "crc32c.h"
#include "hostpool.h"
#include "store.h"
#include "testutil.h"

static char root[64];
static char dirs[3][96];

static void make_dirs(int n)
{
    snprintf(root, sizeof root, "/tmp/fuyou-store-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    for (int i = 0; i < n; i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/ssd%d", root, i);
        ck_assert_int_eq(mkdir(dirs[i], 0700), 0);
    }
}

static void remove_dirs(void)
{
    tu_rm_tree(root);
}

static StoreConfig config(int n, bool checksum)
{
    StoreConfig c = {.n_dirs = n, .chunk_bytes = 64 << 10, .queue_depth = 8,
                     .checksum = checksum, .create = true};
    for (int i = 0; i < n; i++)
        c.dirs[i] = dirs[i];
    return c;
}

static uint8_t *aligned_buf(size_t n)
{
    void *p = NULL;
    ck_assert_int_eq(posix_memalign(&p, 4096, n ? (n + 4095) / 4096 * 4096 : 4096), 0);
    return p;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
}

/* A tensor of n bytes allocated in st, and a buffer of n bytes to write to it (fill's, seed). */
static uint8_t *filled_tensor(Store *st, size_t n, unsigned seed, StoreTensor *t)
{
    Err e;
    ck_assert_msg(store_alloc(st, n, t, &e) == 0, "%s", e.msg);
    uint8_t *src = aligned_buf(n);
    fill(src, n, seed);
    return src;
}

static const size_t odd_sizes[] = {1, 4095, 4096, 4097, (64 << 10) + 5, 3 * (64 << 10) + 12305,
                                   (1 << 20) + 1, 5 * (64 << 10)};
enum { N_ODD = sizeof odd_sizes / sizeof odd_sizes[0] };

START_TEST(round_trips)
{
    make_dirs(3);
    for (int checksum = 0; checksum <= 1; checksum++) {
        Store st;
        Err e;
        StoreConfig c = config(3, checksum);
        ck_assert_msg(store_open(&st, &c, &e) == 0, "%s", e.msg);
        StoreTensor t[N_ODD];
        uint8_t *src[N_ODD], *dst[N_ODD];
        for (int i = 0; i < N_ODD; i++) {
            src[i] = filled_tensor(&st, odd_sizes[i], (unsigned)i + 7, &t[i]);
            dst[i] = aligned_buf(odd_sizes[i]);
            memset(dst[i], 0xaa, odd_sizes[i]);
            ck_assert_int_ge(store_write(&st, &t[i], 0, src[i], odd_sizes[i], &e), 0);
        }
        ck_assert_msg(store_wait_all(&st, &e) == 0, "%s", e.msg);
        int ids[N_ODD];
        for (int i = 0; i < N_ODD; i++)
            ck_assert_int_ge(ids[i] = store_read(&st, &t[i], 0, dst[i], odd_sizes[i], &e), 0);
        for (int i = N_ODD - 1; i >= 0; i--) { /* out of order on purpose */
            ck_assert_msg(store_wait(&st, ids[i], &e) == 0, "%s", e.msg);
            ck_assert_msg(!memcmp(src[i], dst[i], odd_sizes[i]), "size %zu differs",
                          odd_sizes[i]);
        }
        /* an aligned sub-range of the striped tensor, without checksums */
        if (!checksum) {
            uint8_t *part = aligned_buf(8192);
            int id = store_read(&st, &t[5], 61440, part, 8192, &e); /* crosses a chunk */
            ck_assert_int_eq(store_wait(&st, id, &e), 0);
            ck_assert(!memcmp(part, src[5] + 61440, 8192));
            free(part);
        }
        ck_assert_int_eq(st.bytes_read, st.bytes_written + (checksum ? 0 : 8192));
        for (int i = 0; i < N_ODD; i++)
            free(src[i]), free(dst[i]);
        store_close(&st);
    }
    remove_dirs();
}
END_TEST

/* Two reads queued: the device's queue holds only the first one's pieces while it has bytes to
 * cut, and the second one's fill in behind it as it drains (never to empty between them). */
START_TEST(queued_request_waits_its_turn)
{
    make_dirs(1);
    Store st;
    Err e;
    StoreConfig c = config(1, false);
    ck_assert_msg(store_open(&st, &c, &e) == 0, "%s", e.msg);
    size_t n = 2 * (size_t)c.queue_depth * c.chunk_bytes; /* twice the queue's pieces */
    StoreTensor t[2];
    uint8_t *src[2], *dst[2];
    int id[2];
    for (int k = 0; k < 2; k++) {
        src[k] = filled_tensor(&st, n, 31u + (unsigned)k, &t[k]);
        dst[k] = aligned_buf(n);
        ck_assert_int_ge(store_write(&st, &t[k], 0, src[k], n, &e), 0);
    }
    ck_assert_msg(store_wait_all(&st, &e) == 0, "%s", e.msg);
    for (int k = 0; k < 2; k++)
        ck_assert_int_ge(id[k] = store_read(&st, &t[k], 0, dst[k], n, &e), 0);
    while (!store_done(&st, id[0])) {
        int newer = 0;
        for (int q = 0; q < c.queue_depth; q++)
            newer += st.pieces[q].req == id[1];
        if (st.reqs[id[0]].cursor < st.reqs[id[0]].len)
            ck_assert_int_eq(newer, 0);
        ck_assert_int_eq(store_poll(&st, &e), 0);
    }
    ck_assert_uint_gt(st.reqs[id[1]].cursor, 0); /* cut as the older one drained */
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(store_wait(&st, id[k], &e) == 0, "%s", e.msg);
        ck_assert_mem_eq(dst[k], src[k], n);
        free(src[k]), free(dst[k]);
    }
    store_close(&st);
    remove_dirs();
}
END_TEST

/* A read and a write in flight together: the queue takes their pieces in turn, so the write
 * queued behind a read cuts as many bytes as the read does from then on (at least: the read's
 * last pump may fill its free slots with the write's pieces) and is not held back until the
 * read is cut. */
START_TEST(read_and_write_take_turns)
{
    make_dirs(1);
    Store st;
    Err e;
    StoreConfig c = config(1, false);
    ck_assert_msg(store_open(&st, &c, &e) == 0, "%s", e.msg);
    size_t n = 4 * (size_t)c.queue_depth * c.chunk_bytes;
    StoreTensor t[2];
    uint8_t *src[2], *dst = aligned_buf(n);
    for (int k = 0; k < 2; k++)
        src[k] = filled_tensor(&st, n, 41u + (unsigned)k, &t[k]);
    ck_assert_int_ge(store_write(&st, &t[0], 0, src[0], n, &e), 0);
    ck_assert_msg(store_wait_all(&st, &e) == 0, "%s", e.msg);
    int rd = store_read(&st, &t[0], 0, dst, n, &e);
    ck_assert_int_ge(rd, 0);
    uint64_t read_before = st.reqs[rd].cursor; /* the queue full of the read's pieces */
    int wr = store_write(&st, &t[1], 0, src[1], n, &e);
    ck_assert_int_ge(wr, 0);
    while (st.reqs[rd].cursor < st.reqs[rd].len)
        ck_assert_int_eq(store_poll(&st, &e), 0);
    uint64_t read_since = st.reqs[rd].cursor - read_before, wrote = st.reqs[wr].cursor;
    ck_assert_uint_ge(wrote + c.chunk_bytes, read_since);
    ck_assert_uint_le(wrote, read_since + (uint64_t)c.queue_depth * c.chunk_bytes);
    ck_assert_msg(store_wait_all(&st, &e) == 0, "%s", e.msg);
    ck_assert_mem_eq(dst, src[0], n);
    ck_assert_int_ge(store_read(&st, &t[1], 0, dst, n, &e), 0);
    ck_assert_msg(store_wait_all(&st, &e) == 0, "%s", e.msg);
    ck_assert_mem_eq(dst, src[1], n);
    free(src[0]), free(src[1]), free(dst);
    store_close(&st);
    remove_dirs();
}
END_TEST

START_TEST(fixed_buffers)
{
    make_dirs(2);
    Store st;
    Err e;
    StoreConfig c = config(2, true);
    ck_assert_int_eq(store_open(&st, &c, &e), 0);
    size_t n = 1 << 20;
    uint8_t *buf = aligned_buf(2 * n);
    ck_assert_int_eq(store_register_buffer(&st, buf, 2 * n, &e), 0);
    printf("fixed buffers: %s\n", st.n_bufs ? "registered" : "refused by the kernel (plain I/O)");
    StoreTensor t;
    ck_assert_int_eq(store_alloc(&st, n, &t, &e), 0);
    fill(buf, n, 3);
    ck_assert_int_eq(store_wait(&st, store_write(&st, &t, 0, buf, n, &e), &e), 0);
    ck_assert_int_eq(store_wait(&st, store_read(&st, &t, 0, buf + n, n, &e), &e), 0);
    ck_assert(!memcmp(buf, buf + n, n));
    free(buf);
    store_close(&st);
    remove_dirs();
}
END_TEST

START_TEST(checksum_detects_corruption)
{
    make_dirs(2);
    Store st;
    Err e;
    StoreConfig c = config(2, true);
    ck_assert_int_eq(store_open(&st, &c, &e), 0);
    size_t n = 256 << 10;
    uint8_t *a = aligned_buf(n), *b = aligned_buf(n);
    StoreTensor t;
    ck_assert_int_eq(store_alloc(&st, n, &t, &e), 0);
    fill(a, n, 9);
    ck_assert_int_eq(store_wait(&st, store_write(&st, &t, 0, a, n, &e), &e), 0);
    /* Tear one 4 KiB block of the second chunk (device 1, file offset 0) behind the store's
     * back, as a lost or partial write would. */
    char path[320];
    snprintf(path, sizeof path, "%s/fuyou.store", dirs[1]);
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    uint8_t junk[4096];
    memset(junk, 0x5a, sizeof junk);
    ck_assert_int_eq(pwrite(fd, junk, sizeof junk, 8192), (ssize_t)sizeof junk);
    close(fd);
    int rc = store_wait(&st, store_read(&st, &t, 0, b, n, &e), &e);
    ck_assert_int_eq(rc, -EBADMSG);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, "checksum mismatch");
    /* a read of a range that was never written as such cannot be verified: refused */
    rc = store_wait(&st, store_read(&st, &t, 4096, b, 8192, &e), &e);
    ck_assert_int_eq(rc, -EINVAL);
    tu_assert_contains(e.msg, "does not match a written range");
    free(a), free(b);
    store_close(&st);
    remove_dirs();
}
END_TEST

START_TEST(crc_reference)
{
    /* the standard check value of CRC-32C */
    ck_assert_uint_eq(crc32c_ref(0, "123456789", 9), 0xe3069283u);
    static uint8_t buf[2 * 3 * 8192 + 1000];
    fill(buf, sizeof buf, 1);
    for (size_t n = 0; n < 1000; n += 37)
        ck_assert_uint_eq(crc32c(0, buf, n), crc32c_ref(0, buf, n));
    ck_assert_uint_eq(crc32c(crc32c(0, buf, 100), buf + 100, 900), crc32c(0, buf, 1000));
    /* either side of the three chains' rounds (3 x 256 and 3 x 8192 bytes), at every
     * alignment, continuing from a CRC that is not 0 */
    static const size_t len[] = {767, 768, 769, 775, 776, 1536, 24575, 24576, 24577, 24583,
                                 25344, 49151, 49152, 49153, sizeof buf - 8};
    for (size_t i = 0; i < sizeof len / sizeof len[0]; i++)
        for (size_t off = 0; off < 8; off++) {
            uint32_t want = crc32c_ref(0x1234567u, buf + off, len[i]);
            ck_assert_uint_eq(crc32c(0x1234567u, buf + off, len[i]), want);
            ck_assert_uint_eq(crc32c_one_chain(0x1234567u, buf + off, len[i]), want);
        }
}
END_TEST

START_TEST(bad_arguments)
{
    make_dirs(1);
    Store st;
    Err e;
    StoreConfig c = config(1, false);
    ck_assert_int_eq(store_open(&st, &c, &e), 0);
    StoreTensor t;
    ck_assert_int_eq(store_alloc(&st, 3 * 4096 + 10, &t, &e), 0);
    uint8_t *buf = aligned_buf(4 * 4096);
    ck_assert_int_eq(store_read(&st, &t, 100, buf, 4096, &e), -EINVAL);
    tu_assert_contains(e.msg, "aligned");
    ck_assert_int_eq(store_read(&st, &t, 0, buf + 1, 4096, &e), -EINVAL);
    ck_assert_int_eq(store_read(&st, &t, 0, buf, 4 * 4096, &e), -EINVAL);
    tu_assert_contains(e.msg, "run past the tensor");
    ck_assert_int_eq(store_write(&st, &t, 0, buf, 100, &e), -EINVAL);
    tu_assert_contains(e.msg, "must end at the tensor's end");
    free(buf);
    store_close(&st);
    /* a directory that does not exist, and the same one twice */
    StoreConfig bad = c;
    bad.dirs[0] = "/nonexistent/ssd";
    ck_assert_int_eq(store_open(&st, &bad, &e), -ENOENT);
    tu_assert_contains(e.msg, "/nonexistent/ssd: not a directory");
    store_close(&st);
    bad = config(1, false);
    bad.n_dirs = 2;
    bad.dirs[1] = dirs[0];
    ck_assert_int_eq(store_open(&st, &bad, &e), -EINVAL);
    tu_assert_contains(e.msg, "given twice");
    store_close(&st);
    remove_dirs();
}
END_TEST

/* A file-size limit stands in for a full disk: reserving space fails, naming the file. */
START_TEST(file_system_full)
{
    make_dirs(2);
    signal(SIGXFSZ, SIG_IGN);
    Store st;
    Err e;
    StoreConfig c = config(2, false);
    ck_assert_int_eq(store_open(&st, &c, &e), 0);
    struct rlimit old, lim = {.rlim_cur = 1 << 20};
    getrlimit(RLIMIT_FSIZE, &old);
    lim.rlim_max = old.rlim_max;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    StoreTensor t;
    int rc = store_alloc(&st, 8 << 20, &t, &e);
    ck_assert_int_eq(rc, -EFBIG);
    tu_assert_contains(e.msg, dirs[0]);
    tu_assert_contains(e.msg, "cannot reserve");
    store_close(&st);
    /* Without a reservation (buffered, sparse), the write itself hits the limit mid-way: the
     * short write is re-issued and the error then reaches the caller with the path. */
    lim.rlim_cur = old.rlim_cur;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    c.buffered = true;
    ck_assert_int_eq(store_open(&st, &c, &e), 0);
    ck_assert_int_eq(store_alloc(&st, 512 << 10, &t, &e), 0);
    lim.rlim_cur = 100 << 10; /* inside device 0's first chunk */
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    uint8_t *buf = aligned_buf(512 << 10);
    fill(buf, 512 << 10, 1);
    for (int d = 0; d < 2; d++) { /* sparse files: drop the reservation made above */
        char path[320];
        snprintf(path, sizeof path, "%s/fuyou.store", dirs[d]);
        ck_assert_int_eq(truncate(path, 0), 0);
    }
    rc = store_wait(&st, store_write(&st, &t, 0, buf, 512 << 10, &e), &e);
    ck_assert_int_eq(rc, -EFBIG);
    tu_assert_contains(e.msg, "fuyou.store: write at offset");
    printf("short transfers re-issued: %llu\n", (unsigned long long)st.short_transfers);
    ck_assert_uint_ge(st.short_transfers, 1);
    lim.rlim_cur = old.rlim_cur;
    setrlimit(RLIMIT_FSIZE, &lim);
    free(buf);
    store_close(&st);
    remove_dirs();
}
END_TEST

START_TEST(removed_and_truncated_files)
{
    make_dirs(2);
    Store st;
    Err e;
    StoreConfig c = config(2, false);
    ck_assert_int_eq(store_open(&st, &c, &e), 0);
    StoreTensor t;
    uint8_t *buf = filled_tensor(&st, 256 << 10, 5, &t);
    ck_assert_int_eq(store_wait(&st, store_write(&st, &t, 0, buf, 256 << 10, &e), &e), 0);
    /* removed while in use */
    char path[320];
    snprintf(path, sizeof path, "%s/fuyou.store", dirs[1]);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(store_wait_all(&st, &e), -ENOENT);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, "removed while in use");
    store_close(&st);
    /* reopening finds it missing */
    c.create = false;
    ck_assert_int_eq(store_open(&st, &c, &e), -ENOENT);
    tu_assert_contains(e.msg, path);
    store_close(&st);
    /* a truncated file: reading past its end is an error, not zeros */
    c.create = true;
    ck_assert_int_eq(store_open(&st, &c, &e), 0);
    ck_assert_int_eq(store_alloc(&st, 256 << 10, &t, &e), 0);
    ck_assert_int_eq(store_wait(&st, store_write(&st, &t, 0, buf, 256 << 10, &e), &e), 0);
    snprintf(path, sizeof path, "%s/fuyou.store", dirs[0]);
    ck_assert_int_eq(truncate(path, 64 << 10), 0);
    int rc = store_wait(&st, store_read(&st, &t, 0, buf, 256 << 10, &e), &e);
    ck_assert_int_eq(rc, -EIO);
    tu_assert_contains(e.msg, "past the end of the file");
    free(buf);
    store_close(&st);
    remove_dirs();
}
END_TEST

START_TEST(host_pool_budget)
{
    HostPool p;
    Err e;
    ck_assert_int_eq(hostpool_init(&p, 1 << 20, &e), 0);
    void *a = hostpool_alloc(&p, 300 << 10, MEM_STAGING, &e);
    void *b = hostpool_alloc(&p, 500 << 10, MEM_GRADS, &e);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq((uintptr_t)a % 4096, 0);
    void *c = hostpool_alloc(&p, 300 << 10, MEM_ACTIVATIONS, &e);
    ck_assert_ptr_null(c);
    tu_assert_contains(e.msg, "host memory budget exceeded");
    tu_assert_contains(e.msg, "activations");
    tu_assert_contains(e.msg, "--cpu-mem");
    hostpool_release(&p, a);
    ck_assert_uint_eq(p.used, 500 << 10);
    ck_assert_uint_eq(p.peak, 800 << 10);
    ck_assert_uint_eq(p.peak_tag[MEM_STAGING], 300 << 10);
    c = hostpool_alloc(&p, 300 << 10, MEM_ACTIVATIONS, &e);
    ck_assert_ptr_nonnull(c);
    memset(c, 1, 300 << 10);
    hostpool_free(&p);
    /* a budget beyond the machine is refused up front */
    ck_assert_int_eq(hostpool_init(&p, (size_t)1 << 60, &e), -ENOMEM);
    tu_assert_contains(e.msg, "available");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, round_trips);
    tcase_add_test(tc, queued_request_waits_its_turn);
    tcase_add_test(tc, read_and_write_take_turns);
    tcase_add_test(tc, fixed_buffers);
    tcase_add_test(tc, checksum_detects_corruption);
    tcase_add_test(tc, crc_reference);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, file_system_full);
    tcase_add_test(tc, removed_and_truncated_files);
    tcase_add_test(tc, host_pool_budget);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
