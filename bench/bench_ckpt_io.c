/* bench_ckpt_io: a checkpoint's safetensors file written and read the way fuyou-run saves and
 * loads one (bf16 tensors of an 8B model's sizes, pulled from fp32 values and widened back to
 * fp32 into a staging range), against the disk's raw sequential rate on the same file system
 * in the same run: the same bytes in 16 MiB O_DIRECT requests, one at a time (dd's
 * oflag=direct / iflag=direct, the rate the issue compares with).
 * Usage: bench_ckpt_io [--dir DIR] [--gib N] */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "bench_util.h"
#include "safetensors.h"
#include "seqfile.h"

enum { RAW_BLOCK = 16 << 20, TENSOR_VALUES = 28 << 20, STAGE_VALUES = 16 << 20 };

static void die(const char *what, const Err *e)
{
    fprintf(stderr, "bench_ckpt_io: %s: %s\n", what, e ? e->msg : strerror(errno));
    exit(1);
}

/* GB/s of total bytes written (or read) at path in RAW_BLOCK requests with O_DIRECT. */
static double raw_pass(const char *path, bool write, size_t total, uint8_t *buf)
{
    int fd = open(path, write ? O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT : O_RDONLY | O_DIRECT,
                  0600);
    if (fd < 0)
        die(path, NULL);
    double t0 = bench_now();
    for (size_t at = 0; at < total; at += RAW_BLOCK) {
        ssize_t n = write ? pwrite(fd, buf, RAW_BLOCK, (off_t)at)
                          : pread(fd, buf, RAW_BLOCK, (off_t)at);
        if (n != RAW_BLOCK)
            die(path, NULL);
    }
    if (write && fsync(fd))
        die(path, NULL);
    double t = bench_now() - t0;
    close(fd);
    return (double)total / t / 1e9;
}

typedef struct Source {
    const float *values; /* a staging-sized range the pulls copy from, as pipe_mem_read does */
} Source;

static int pull(void *user, int i, size_t at, size_t n, float *dst, Err *e)
{
    (void)i, (void)e;
    const Source *s = user;
    memcpy(dst, s->values + at % STAGE_VALUES, n * sizeof *dst);
    return 0;
}

/* The command line (bench_check_args). */
static const char usage[] = "bench_ckpt_io [--dir DIR] [--gib G]";
static const char *const options[] = {"--dir", "--gib", NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    const char *dir = bench_arg(argc, argv, "--dir", ".");
    double gib = atof(bench_arg(argc, argv, "--gib", "2"));
    int n_tensors = (int)(gib * (1 << 30) / (2.0 * TENSOR_VALUES) + 0.5);
    n_tensors = n_tensors < 1 ? 1 : n_tensors;
    size_t total = (size_t)n_tensors * TENSOR_VALUES * 2;
    char raw[4096], st_path[4096];
    snprintf(raw, sizeof raw, "%s/bench_ckpt_io.raw", dir);
    snprintf(st_path, sizeof st_path, "%s/bench_ckpt_io.safetensors", dir);
    uint8_t *buf = aligned_alloc(4096, RAW_BLOCK);
    float *stage = malloc((size_t)STAGE_VALUES * sizeof *stage);
    if (!buf || !stage)
        die("out of memory", NULL);
    for (size_t i = 0; i < STAGE_VALUES; i++)
        stage[i] = (float)((int)(i % 2001) - 1000) / 512.0f;
    memset(buf, 7, RAW_BLOCK);
    printf("bench_ckpt_io: %d bf16 tensors of %d Mi values (%.2f GB) in %s\n", n_tensors,
           TENSOR_VALUES >> 20, total / 1e9, dir);

    double raw_w = raw_pass(raw, true, total, buf), raw_r = raw_pass(raw, false, total, buf);
    unlink(raw);

    Err e;
    StWriter w;
    Source src = {stage};
    if (st_writer_begin_as(&w, st_path, "BF16", &e))
        die("writer", &e);
    for (int i = 0; i < n_tensors; i++) {
        char name[64];
        int64_t shape[2] = {TENSOR_VALUES >> 12, 4096};
        snprintf(name, sizeof name, "model.layers.%d.weight", i);
        if (st_writer_add(&w, name, NULL, 2, shape, &e))
            die("writer", &e);
    }
    double t0 = bench_now();
    if (st_writer_finish_pull(&w, pull, &src, 1 << 22, "format", "pt", &e))
        die("writer", &e);
    double st_w = (double)total / (bench_now() - t0) / 1e9;

    /* the stream alone: every block viewed, nothing converted */
    SeqReader *sr;
    t0 = bench_now();
    if (seq_reader_open(&sr, st_path, 0, &e))
        die("stream", &e);
    uint64_t size = seq_reader_size(sr);
    for (uint64_t at = 0, got; at < size; at += got) {
        const void *p;
        size_t g;
        if (seq_view(sr, at, (size_t)(size - at), size, &p, &g, &e))
            die("stream", &e);
        got = g;
    }
    seq_reader_close(sr);
    double seq_r = (double)size / (bench_now() - t0) / 1e9;

    StFile f;
    t0 = bench_now();
    if (st_open(&f, st_path, &e))
        die("reader", &e);
    for (int i = 0; i < f.n; i++) {
        StCursor c = {.t = &f.t[i]};
        f.ahead = f.file_size; /* the tensors in the file's order, one after another */
        for (size_t at = 0, n; at < TENSOR_VALUES; at += n) {
            n = TENSOR_VALUES - at < STAGE_VALUES ? TENSOR_VALUES - at : STAGE_VALUES;
            if (st_read_next(&f, &c, stage, n, &e))
                die("reader", &e);
        }
    }
    st_close(&f);
    double st_r = (double)total / (bench_now() - t0) / 1e9;
    unlink(st_path);

    printf("%-38s %8s %8s %8s\n", "", "GB/s", "raw GB/s", "ratio");
    printf("%-38s %8.2f %8.2f %8.2f\n", "save (fp32 pulled -> bf16 file)", st_w, raw_w,
           st_w / raw_w);
    printf("%-38s %8.2f %8.2f %8.2f\n", "load (bf16 file -> fp32 staging)", st_r, raw_r,
           st_r / raw_r);
    printf("%-38s %8.2f %8.2f %8.2f\n", "read stream alone (seqfile)", seq_r, raw_r,
           seq_r / raw_r);
    free(buf), free(stage);
    return 0;
}
