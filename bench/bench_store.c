/* bench_store: the store's sequential write and read GB/s against a raw io_uring O_DIRECT loop
 * (one file, the same block size and queue depth, nothing else) on the same file system, in the
 * same run, without and with checksums (the pipeline's setting: a CRC-32C per piece written,
 * verified on the store's thread as each piece read completes); the store moving a tensor at a
 * time against two in flight; dd with oflag/iflag=direct (one request at a time) is printed for
 * reference, and the CRC-32C's rate on one thread against a memcpy of the same bytes.
 * Usage: bench_store [--dir DIR] [--gib N] [--block-mib B] [--qd Q] */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "crc32c.h"
#include "hostpool.h"
#include "store.h"

/* The baseline: write (or read) total bytes of one file in block-size requests, qd in flight,
 * from (into) successive blocks of a region as large as the store's buffer, as the store does:
 * rereading one small buffer would flatter the baseline with cache-hot destinations. */
static double raw_loop(const char *path, bool write, size_t total, size_t block, int qd,
                       uint8_t *buf, size_t region)
{
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    if (write && fallocate(fd, 0, 0, (off_t)total))
        perror("fallocate");
    struct io_uring ring;
    if (io_uring_queue_init((unsigned)qd, &ring, 0))
        exit(1);
    size_t issued = 0, done = 0;
    int inflight = 0;
    double t0 = bench_now();
    while (done < total) {
        while (inflight < qd && issued < total) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            uint8_t *b = buf + issued % region;
            if (write)
                io_uring_prep_write(sqe, fd, b, (unsigned)block, (off_t)issued);
            else
                io_uring_prep_read(sqe, fd, b, (unsigned)block, (off_t)issued);
            issued += block;
            inflight++;
        }
        io_uring_submit(&ring);
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&ring, &cqe))
            exit(1);
        if (cqe->res != (int)block) {
            fprintf(stderr, "raw loop: short or failed I/O (%d)\n", cqe->res);
            exit(1);
        }
        io_uring_cqe_seen(&ring, cqe);
        inflight--;
        done += block;
    }
    double t = bench_now() - t0;
    io_uring_queue_exit(&ring);
    close(fd);
    return total / t / 1e9;
}

/* n tensors moved, depth (1 or 2) in flight: two as the pipeline keeps them in each direction
 * (pipe_exec.h's IoQueue), one as it did before. */
static double store_pass(Store *st, const StoreTensor *t, int n, bool write, uint8_t *buf,
                         size_t tensor_bytes, int depth)
{
    Err e;
    double t0 = bench_now();
    int prev = -1;
    for (int i = 0; i < n; i++) {
        int id = write ? store_write(st, &t[i], 0, buf, tensor_bytes, &e)
                       : store_read(st, &t[i], 0, buf, tensor_bytes, &e);
        int rc = id < 0 ? id : 0;
        if (!rc && (depth == 1 || prev >= 0))
            rc = store_wait(st, depth == 1 ? id : prev, &e);
        if (rc) {
            fprintf(stderr, "bench_store: %s\n", e.msg);
            exit(1);
        }
        prev = depth == 1 ? -1 : id;
    }
    if (store_wait_all(st, &e)) {
        fprintf(stderr, "bench_store: %s\n", e.msg);
        exit(1);
    }
    return (double)n * tensor_bytes / (bench_now() - t0) / 1e9;
}

/* The store's passes over n tensors, in order: first write, rewrite and read with two tensors
 * in flight, then a rewrite and a read one at a time. */
enum { N_PASSES = 5 };
static const struct {
    bool write;
    int depth;
} passes[N_PASSES] = {{true, 2}, {true, 2}, {false, 2}, {true, 1}, {false, 1}};

/* The passes over n tensors in dir, into gbps. */
static void store_passes(const char *dir, size_t block, int qd, bool checksum, uint8_t *buf,
                         int n, size_t tensor_bytes, double gbps[N_PASSES])
{
    Err e;
    StoreConfig sc = {.dirs = {dir}, .n_dirs = 1, .chunk_bytes = block, .queue_depth = qd,
                      .checksum = checksum, .create = true};
    Store st;
    if (store_open(&st, &sc, &e)) {
        fprintf(stderr, "bench_store: %s\n", e.msg);
        exit(1);
    }
    store_register_buffer(&st, buf, tensor_bytes, &e);
    StoreTensor *t = calloc((size_t)n, sizeof *t);
    for (int i = 0; i < n; i++)
        if (store_alloc(&st, tensor_bytes, &t[i], &e)) {
            fprintf(stderr, "bench_store: %s\n", e.msg);
            exit(1);
        }
    for (int p = 0; p < N_PASSES; p++)
        gbps[p] = store_pass(&st, t, n, passes[p].write, buf, tensor_bytes, passes[p].depth);
    store_close(&st);
    free(t);
    char sp[4096];
    snprintf(sp, sizeof sp, "%s/fuyou.store", dir);
    unlink(sp);
}

/* GB/s of the CRC-32C (the store's, one thread: three chains of the crc32 instruction), of
 * the same instruction in one chain (what it was) and of a memcpy of the same bytes from src
 * into dst (bytes copied per second): the best of five each, interleaved. */
static void crc_vs_memcpy(const uint8_t *src, uint8_t *dst, size_t len, double *crc_gbps,
                          double *one_gbps, double *copy_gbps)
{
    memset(dst, 0, len); /* its pages in place before the first timed copy */
    volatile uint32_t sink = 0;
    *crc_gbps = *one_gbps = *copy_gbps = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = bench_now();
        memcpy(dst, src, len);
        double t1 = bench_now();
        sink ^= crc32c(0, src, len) ^ dst[len / 2];
        double t2 = bench_now();
        sink ^= crc32c_one_chain(0, src, len);
        double t3 = bench_now();
        if (len / (t1 - t0) / 1e9 > *copy_gbps)
            *copy_gbps = len / (t1 - t0) / 1e9;
        if (len / (t2 - t1) / 1e9 > *crc_gbps)
            *crc_gbps = len / (t2 - t1) / 1e9;
        if (len / (t3 - t2) / 1e9 > *one_gbps)
            *one_gbps = len / (t3 - t2) / 1e9;
    }
    (void)sink;
}

static double dd_gbps(const char *path, bool write, size_t total, size_t block)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, write ? "dd if=/dev/zero of=%s bs=%zu count=%zu oflag=direct "
                                      "2>/dev/null"
                                    : "dd if=%s of=/dev/null bs=%zu count=%zu iflag=direct "
                                      "2>/dev/null", path, block, total / block);
    double t0 = bench_now();
    int rc = system(cmd);
    double t = bench_now() - t0;
    return rc == 0 ? total / t / 1e9 : 0;
}

/* The command line (bench_check_args). */
static const char usage[] = "bench_store [--dir DIR] [--gib G] [--block-mib M] [--qd N]";
static const char *const options[] = {"--dir", "--gib", "--block-mib", "--qd", NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    const char *dir = bench_arg(argc, argv, "--dir", "bench-scratch");
    double gib = atof(bench_arg(argc, argv, "--gib", "2"));
    size_t block = (size_t)atof(bench_arg(argc, argv, "--block-mib", "4")) << 20;
    int qd = atoi(bench_arg(argc, argv, "--qd", "32"));
    mkdir(dir, 0700);
    size_t tensor_bytes = 256u << 20, total = (size_t)(gib * (1 << 30)) / tensor_bytes *
                                                tensor_bytes;
    int n = (int)(total / tensor_bytes);
    Err e;
    HostPool pool;
    if (hostpool_init(&pool, tensor_bytes + (64 << 20), &e)) {
        fprintf(stderr, "bench_store: %s\n", e.msg);
        return 1;
    }
    uint8_t *buf = hostpool_alloc(&pool, tensor_bytes, MEM_STAGING, &e);
    if (!buf) {
        fprintf(stderr, "bench_store: %s\n", e.msg);
        return 1;
    }
    for (size_t i = 0; i < tensor_bytes; i++)
        buf[i] = (uint8_t)(i * 31);

    char raw_path[4096], dd_path[4096];
    snprintf(raw_path, sizeof raw_path, "%s/raw.bin", dir);
    snprintf(dd_path, sizeof dd_path, "%s/dd.bin", dir);
    /* Each side: a first write into freshly reserved space, a rewrite (what every training
     * step does), a read. The baseline runs before and after the store (the device drifts);
     * its faster run of each pass is the baseline. */
    /* The store without checksums, with them, and without again (the device drifts: the
     * mean of the two runs without is their baseline). */
    double raw[2][3], sto[N_PASSES], sto2[N_PASSES], sum[N_PASSES];
    for (int k = 0; k < 2; k++) {
        if (k == 1) {
            store_passes(dir, block, qd, false, buf, n, tensor_bytes, sto);
            store_passes(dir, block, qd, true, buf, n, tensor_bytes, sum);
            store_passes(dir, block, qd, false, buf, n, tensor_bytes, sto2);
        }
        int r = k == 0 ? 0 : 1;
        raw[r][0] = raw_loop(raw_path, true, total, block, qd, buf, tensor_bytes);
        raw[r][1] = raw_loop(raw_path, true, total, block, qd, buf, tensor_bytes);
        raw[r][2] = raw_loop(raw_path, false, total, block, qd, buf, tensor_bytes);
        unlink(raw_path);
    }
    double dd_w = dd_gbps(dd_path, true, total, block), dd_r = dd_gbps(dd_path, false, total,
                                                                       block);
    unlink(dd_path);
    printf("store vs raw io_uring O_DIRECT loop, %s, %.2f GiB, %zu MiB blocks, QD %d\n", dir,
           total / 1073741824.0, block >> 20, qd);
    printf("host buffer: %s\n", bench_lock_state(pool.lock_failed));
    static const char *pass[3] = {"first write", "rewrite", "read"};
    printf("%-12s %10s %12s %8s %12s %8s   %s\n", "", "store GB/s", "raw GB/s", "ratio",
           "+crc GB/s", "ratio", "(raw before / after; store before / after)");
    for (int p = 0; p < 3; p++) {
        double base = raw[0][p] > raw[1][p] ? raw[0][p] : raw[1][p];
        double plain = (sto[p] + sto2[p]) / 2;
        printf("%-12s %10.2f %12.2f %8.3f %12.2f %8.3f   (%.2f / %.2f; %.2f / %.2f)\n",
               pass[p], plain, base, plain / base, sum[p], sum[p] / plain, raw[0][p],
               raw[1][p], sto[p], sto2[p]);
    }
    printf("store, a tensor at a time against two in flight (no checksums; the pipeline's SSD "
           "tasks before and since IoQueue): rewrite %.2f GB/s, ratio %.3f; read %.2f GB/s, "
           "ratio %.3f\n", (sto[3] + sto2[3]) / 2, (sto[3] + sto2[3]) / (sto[1] + sto2[1]),
           (sto[4] + sto2[4]) / 2, (sto[4] + sto2[4]) / (sto[2] + sto2[2]));
    printf("dd, one request at a time: write %.2f GB/s, read %.2f GB/s\n", dd_w, dd_r);
    uint8_t *copy = malloc(tensor_bytes);
    double crc, one, cpy;
    crc_vs_memcpy(buf, copy, tensor_bytes, &crc, &one, &cpy);
    free(copy);
    printf("CRC-32C (%s), one thread: %.2f GB/s; memcpy of the same %zu MiB: %.2f GB/s; "
           "ratio %.3f; one %zu MiB piece: %.3f ms\n",
           crc32c_hw_available() ? "SSE4.2, three chains" : "table", crc, tensor_bytes >> 20,
           cpy, crc / cpy, block >> 20, (double)block / (crc * 1e9) * 1e3);
    printf("CRC-32C, three chains against one: %.2f GB/s against %.2f, ratio %.3f\n", crc, one,
           crc / one);
    hostpool_free(&pool);
    return 0;
}
