/* Check suite for exec/store/seqfile.h: streamed block reads and writes. */
#include <errno.h>
#include <stdint.h>

#include "seqfile.h"
#include "testutil.h"

enum { BLOCK = 16384 };

/* The byte at file offset i of the test files past their head. */
static uint8_t byte_at(size_t i)
{
    return (uint8_t)(i * 131 + (i >> 9) * 7 + 3);
}

/* Writes head_len bytes of head ('H's) and n data bytes to path, in pieces of odd sizes, half
 * copied (seq_write), half in place (room and advance). */
static void write_file(const char *path, size_t head_len, size_t n)
{
    SeqWriter *w;
    Err e;
    ck_assert_msg(seq_writer_open(&w, path, head_len, BLOCK, &e) == 0, "%s", e.msg);
    uint8_t piece[7001];
    for (size_t at = 0, k = 0; at < n; k++) {
        size_t len = (k * 2963 + 1) % sizeof piece;
        len = len < n - at ? len : n - at;
        if (k % 2) {
            for (size_t i = 0; i < len; i++)
                piece[i] = byte_at(head_len + at + i);
            ck_assert_msg(seq_write(w, piece, len, &e) == 0, "%s", e.msg);
        } else {
            void *p;
            size_t room;
            ck_assert_msg(seq_writer_room(w, &p, &room, &e) == 0, "%s", e.msg);
            ck_assert_uint_ge(room, 1);
            len = len < room ? len : room;
            for (size_t i = 0; i < len; i++)
                ((uint8_t *)p)[i] = byte_at(head_len + at + i);
            seq_writer_advance(w, len);
        }
        at += len;
    }
    uint8_t *head = malloc(head_len + 1);
    memset(head, 'H', head_len);
    ck_assert_msg(seq_writer_finish(w, head, &e) == 0, "%s", e.msg);
    free(head);
}

/* A file written with a head reserved reads back whole (the head as put in at the end, every
 * data byte, the exact size) through stdio and through the reader: forward in odd views,
 * then jumps back and forth; for heads shorter than 4 KiB, of several blocks, and files
 * smaller than their head's 4 KiB. */
START_TEST(written_file_reads_back)
{
    char dir[] = "/tmp/fuyou-seq-XXXXXX", path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/f.bin", dir);
    static const size_t cases[][2] = {{13, 3 * BLOCK + 1234}, {40000, 5000}, {8, 10},
                                      {0, 2 * BLOCK}, {4096, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t head = cases[c][0], n = cases[c][1], size = head + n;
        write_file(path, head, n);
        FILE *f = fopen(path, "rb");
        uint8_t *all = malloc(size + 1);
        ck_assert_uint_eq(fread(all, 1, size + 1, f), size);
        fclose(f);
        for (size_t i = 0; i < size; i++)
            ck_assert_msg(all[i] == (i < head ? 'H' : byte_at(i)), "case %zu byte %zu", c, i);
        SeqReader *r;
        Err e;
        ck_assert_msg(seq_reader_open(&r, path, BLOCK / 2, &e) == 0, "%s", e.msg);
        ck_assert_uint_eq(seq_reader_size(r), size);
        for (size_t at = 0, k = 0; at < size; k++) {
            const void *p;
            size_t got;
            int rc = seq_view(r, at, 1 + k * 977 % 9000, size, &p, &got, &e);
            ck_assert_msg(rc == 0, "%s", e.msg);
            ck_assert_uint_ge(got, 1);
            ck_assert_int_eq(memcmp(p, all + at, got), 0);
            at += got;
        }
        uint8_t buf[9000];
        for (size_t k = 0; k < 40; k++) {
            size_t at = (k * 104729) % size, len = 1 + (k * 7919) % sizeof buf;
            len = len < size - at ? len : size - at;
            ck_assert_msg(seq_read(r, at, buf, len, &e) == 0, "%s", e.msg);
            ck_assert_int_eq(memcmp(buf, all + at, len), 0);
        }
        ck_assert_int_eq(seq_read(r, size - 1, buf, 2, &e), -EINVAL);
        tu_assert_contains(e.msg, path);
        seq_reader_close(r);
        free(all);
    }
    tu_rm_tree(dir);
}
END_TEST

/* Paths that cannot be opened are one error naming them; a block size off the 4 KiB grid is
 * refused. */
START_TEST(bad_paths_are_errors)
{
    SeqReader *r;
    SeqWriter *w;
    Err e;
    ck_assert_int_eq(seq_reader_open(&r, "/tmp/fuyou-seq-missing/f", 0, &e), -ENOENT);
    ck_assert_ptr_null(r);
    tu_assert_contains(e.msg, "/tmp/fuyou-seq-missing/f: cannot read");
    ck_assert_int_eq(seq_writer_open(&w, "/tmp/fuyou-seq-missing/f", 8, 0, &e), -ENOENT);
    ck_assert_ptr_null(w);
    tu_assert_contains(e.msg, "/tmp/fuyou-seq-missing/f: cannot write");
    ck_assert_int_eq(seq_writer_open(&w, "/tmp/fuyou-seq-odd", 8, 1000, &e), -EINVAL);
    tu_assert_contains(e.msg, "not a multiple of 4096");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("seqfile");
    TCase *tc = tcase_create("seqfile");
    tcase_add_test(tc, written_file_reads_back);
    tcase_add_test(tc, bad_paths_are_errors);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
