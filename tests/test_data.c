/* Check suite for exec/train/data and npy: every token format (llm.c's three headers, .npy of
 * uint16 and uint32 in each header version, headerless uint16, text) read exactly and each bad
 * file refused with one line naming it; the model check (the first token outside the
 * vocabulary by file and position, text only for a byte vocabulary); several files
 * concatenated in order, patterns expanded in name order, no sequence across two files; the
 * fingerprint; loss masks (FILE.mask and X.mask.npy) turned into ignored targets exactly; and
 * the loader: deterministic, restorable, shifted targets, the in-order fill with padding. */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "data.h"
#include "cpu_backend.h"
#include "npy.h"
#include "trainer.h"
#include "testutil.h"

static const char *text = "/usr/share/common-licenses/GPL-3";

static void put(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* A .npy file: version major.0, the dict text as given (padded to 64 bytes with a newline),
 * then n bytes of data. */
static void put_npy(const char *path, int major, const char *dict, const void *data, size_t n)
{
    size_t at = major == 1 ? 10 : 12, len = strlen(dict) + 1;
    len += (64 - (at + len) % 64) % 64;
    uint8_t head[512] = {0x93, 'N', 'U', 'M', 'P', 'Y', (uint8_t)major, 0};
    for (int k = 0; k < (major == 1 ? 2 : 4); k++)
        head[8 + k] = (uint8_t)(len >> (8 * k));
    memset(head + at, ' ', len);
    memcpy(head + at, dict, strlen(dict));
    head[at + len - 1] = '\n';
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(head, 1, at + len, f);
    fwrite(data, 1, n, f);
    fclose(f);
}

/* An llm.c file of magic and version with count tokens of width bytes. */
static void put_llmc(const char *path, int32_t magic, int32_t version, const void *toks,
                     int count, int width)
{
    int32_t header[256] = {magic, version, count};
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(header, 4, 256, f);
    fwrite(toks, (size_t)width, (size_t)count, f);
    fclose(f);
}

START_TEST(data_formats_and_loader)
{
    char dir[] = "/tmp/fuyou-data-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    Err e;
    TokenData d;
    /* llm.c: header + uint16 */
    uint16_t toks[128] = {0};
    for (int i = 0; i < 100; i++)
        toks[i] = (uint16_t)(i * 500);
    snprintf(path, sizeof path, "%s/train.bin", dir);
    put_llmc(path, 20240520, 1, toks, 100, 2);
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), 0);
    ck_assert_int_eq(d.files[0].format, DATA_LLMC);
    ck_assert_int_eq(d.n, 100);
    ck_assert_int_eq(d.max_token, 49500);
    ck_assert_ptr_null(d.mask);
    data_free(&d);
    ck_assert_int_eq(truncate(path, 1024 + 150), 0);
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "says 100 tokens");
    /* nanoGPT: headerless uint16, and an odd size */
    snprintf(path, sizeof path, "%s/val.bin", dir);
    put(path, toks, 200);
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), 0);
    ck_assert_int_eq(d.files[0].format, DATA_U16);
    ck_assert_int_eq(d.tokens[3], 1500);
    data_free(&d);
    put(path, toks, 201);
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "not a whole number of uint16 tokens");
    ck_assert_int_lt(data_load(&d, "/no/such/file", DATA_AUTO, &e), 0);
    tu_assert_contains(e.msg, "/no/such/file: cannot read");
    /* text, and the loader: deterministic, restorable, shifted targets */
    ck_assert_int_eq(data_load(&d, text, DATA_AUTO, &e), 0);
    ck_assert_int_eq(d.files[0].format, DATA_TEXT);
    Loader a, b;
    ck_assert_int_eq(loader_init(&a, &d, 3, 16, 5, &e), 0);
    ck_assert_int_eq(loader_init(&b, &d, 3, 16, 5, &e), 0);
    int ia[48], ta[48], ib[48], tb[48];
    for (int k = 0; k < 5; k++)
        loader_next(&a, ia, ta);
    ck_assert_int_eq(loader_seek(&b, a.epoch, a.index, &e), 0);
    /* a damaged position (state.json's loader_epoch and loader_index): refused, where the
     * increment would overflow and the index read past the order */
    Loader c;
    ck_assert_int_eq(loader_init(&c, &d, 3, 16, 5, &e), 0);
    ck_assert_int_eq(loader_seek(&c, INT64_MAX, 0, &e), -EINVAL);
    tu_assert_contains(e.msg, "loader_epoch 9223372036854775807 is outside 0 to");
    ck_assert_int_eq(loader_seek(&c, 0, 1000000000000000, &e), -EINVAL);
    tu_assert_contains(e.msg, "loader_index 1000000000000000 is past the data's");
    ck_assert_int_eq(loader_seek(&c, 0, (int64_t)c.n_seq, &e), 0); /* the epoch's end */
    loader_next(&c, ib, tb);
    ck_assert_int_eq(c.epoch, 1);
    loader_free(&c);
    loader_next(&a, ia, ta);
    loader_next(&b, ib, tb);
    ck_assert_int_eq(memcmp(ia, ib, sizeof ia), 0);
    ck_assert_int_eq(memcmp(ta, tb, sizeof ta), 0);
    for (int i = 0; i < 15; i++)
        ck_assert_int_eq(ta[i], ia[i + 1]);
    loader_free(&a), loader_free(&b);
    ck_assert_int_eq(loader_init(&a, &d, 100000, 256, 5, &e), -EINVAL);
    tu_assert_contains(e.msg, "fewer than a batch");
    loader_free(&a);
    data_free(&d);
    tu_rm_tree(dir);
}
END_TEST

/* Token ids above 65535: llm.c's uint32 headers and .npy '<u4', read exactly; the rest of
 * llm.c's versions refused */
START_TEST(uint32_tokens)
{
    char dir[] = "/tmp/fuyou-u32-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    Err e;
    TokenData d;
    uint32_t toks[300];
    for (int i = 0; i < 300; i++)
        toks[i] = (uint32_t)i * 509u % 152064u;
    toks[7] = 152063;
    const int32_t headers[2][2] = {{20240520, 2}, {20240801, 7}};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/train%d.bin", dir, k);
        put_llmc(path, headers[k][0], headers[k][1], toks, 300, 4);
        ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), 0);
        ck_assert_int_eq(d.files[0].format, DATA_LLMC);
        ck_assert_uint_eq(d.n, 300);
        ck_assert_int_eq(memcmp(d.tokens, toks, sizeof toks), 0);
        ck_assert_uint_eq(d.max_token, 152063);
        data_free(&d);
        ck_assert_int_eq(truncate(path, 1024 + 4 * 299), 0);
        ck_assert_int_eq(data_load(&d, path, DATA_LLMC, &e), -EINVAL);
        tu_assert_contains(e.msg, "says 300 tokens of 4 bytes");
        data_free(&d);
    }
    /* a token the loader could not hand out as an int (fuzz_tokens found it) */
    toks[299] = 0x80000000u;
    put_llmc(path, 20240801, 7, toks, 300, 4);
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "token 2147483648 at position 299 is beyond any vocabulary");
    data_free(&d);
    toks[299] = 1;
    put_llmc(path, 20240520, 3, toks, 300, 4);
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "version 3");
    data_free(&d);
    /* .npy, each header version */
    const char *dict = "{'descr': '<u4', 'fortran_order': False, 'shape': (300,), }";
    for (int major = 1; major <= 3; major++) {
        snprintf(path, sizeof path, "%s/v%d.npy", dir, major);
        put_npy(path, major, dict, toks, sizeof toks);
        ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), 0);
        ck_assert_int_eq(d.files[0].format, DATA_NPY);
        ck_assert_int_eq(memcmp(d.tokens, toks, sizeof toks), 0);
        data_free(&d);
    }
    /* uint16, keys in another order with double quotes */
    uint16_t small[5] = {1, 65535, 3, 4, 5};
    snprintf(path, sizeof path, "%s/u2.npy", dir);
    put_npy(path, 1, "{\"shape\": (5,), \"fortran_order\": False, \"descr\": \"<u2\"}", small,
            sizeof small);
    ck_assert_int_eq(data_load(&d, path, DATA_NPY, &e), 0);
    ck_assert_uint_eq(d.n, 5);
    ck_assert_uint_eq(d.tokens[1], 65535);
    data_free(&d);
    tu_rm_tree(dir);
}
END_TEST

/* .npy files fuyou does not read: each one line naming the file and the fix */
START_TEST(npy_refused)
{
    char dir[] = "/tmp/fuyou-npy-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/t.npy", dir);
    uint32_t toks[6] = {1, 2, 3, 4, 5, 6};
    const struct {
        const char *dict;
        size_t bytes;
        const char *says;
    } bad[] = {
        {"{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", 24, "dtype '<i8'"},
        {"{'descr': '>u4', 'fortran_order': False, 'shape': (6,), }", 24, "dtype '>u4'"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (6,), }", 6, "dtype '|u1'"},
        {"{'descr': '<u4', 'fortran_order': True, 'shape': (6,), }", 24, "fortran_order"},
        {"{'descr': '<u4', 'fortran_order': False, 'shape': (2, 3), }", 24, "2 dimensions"},
        {"{'descr': '<u4', 'fortran_order': False, 'shape': (7,), }", 24, "truncated"},
        {"{'descr': '<u4', 'fortran_order': False, 'shape': (5,), }", 24, "padded"},
        {"{'descr': '<u4', 'fortran_order': False}", 24, "lacks 'shape'"},
        {"{'descr': '<u4', 'fortran_order': False, 'shape': (6,), 'x': 1}", 24, "key 'x'"},
        {"{'descr': [('a', '<u4')], 'fortran_order': False, 'shape': (6,)}", 24, "malformed"},
        {"['descr', '<u4']", 24, "not a dict"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        put_npy(path, 1, bad[i].dict, toks, bad[i].bytes);
        TokenData d;
        Err e;
        ck_assert_msg(data_load(&d, path, DATA_AUTO, &e) == -EINVAL, "%s", bad[i].dict);
        tu_assert_contains(e.msg, path);
        tu_assert_contains(e.msg, bad[i].says);
        data_free(&d);
    }
    /* an unknown version, a header longer than the file, a .npy name without the magic */
    uint8_t raw[64] = {0x93, 'N', 'U', 'M', 'P', 'Y', 4, 0, 10, 0};
    const struct {
        uint8_t major, len;
        const char *says;
    } heads[] = {{4, 10, "version 4.0"}, {1, 200, "truncated"}};
    for (size_t i = 0; i < 2; i++) {
        raw[6] = heads[i].major, raw[8] = heads[i].len;
        put(path, raw, sizeof raw);
        TokenData d;
        Err e;
        ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
        tu_assert_contains(e.msg, heads[i].says);
        data_free(&d);
    }
    put(path, toks, sizeof toks);
    TokenData d;
    Err e;
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "without the .npy magic");
    data_free(&d);
    tu_rm_tree(dir);
}
END_TEST

/* The data against a model: the first token outside its vocabulary by file and position; text
 * only for a vocabulary of bytes; and a run refuses such data before it starts */
START_TEST(data_against_the_model)
{
    char dir[] = "/tmp/fuyou-vocab-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char ok[256], big[256];
    uint16_t toks[100];
    for (int i = 0; i < 100; i++)
        toks[i] = (uint16_t)(i % 200);
    snprintf(ok, sizeof ok, "%s/a.bin", dir);
    put(ok, toks, sizeof toks);
    toks[57] = 300, toks[80] = 400;
    snprintf(big, sizeof big, "%s/b.bin", dir);
    put(big, toks, sizeof toks);
    const char *both[] = {ok, big};
    TokenData d;
    Err e;
    ck_assert_int_eq(data_load_list(&d, both, 2, DATA_AUTO, &e), 0);
    ck_assert_int_eq(data_check_model(&d, 401, "m", &e), 0);
    ck_assert_int_eq(data_check_model(&d, 400, "m", &e), -EINVAL);
    tu_assert_contains(e.msg, "token 400 at position 80 is outside m's vocabulary of 400");
    ck_assert_int_eq(data_check_model(&d, 256, "m", &e), -EINVAL);
    tu_assert_contains(e.msg, big);
    tu_assert_contains(e.msg, "token 300 at position 57");
    data_free(&d);
    ck_assert_int_eq(data_load(&d, text, DATA_AUTO, &e), 0);
    ck_assert_int_eq(data_check_model(&d, 256, "gpt2-tiny", &e), 0);
    ck_assert_int_eq(data_check_model(&d, 50257, "gpt2-124m", &e), -EINVAL);
    tu_assert_contains(e.msg, text);
    tu_assert_contains(e.msg, "tools/prepare_data.py");
    data_free(&d);
    /* the trainer checks once, at load */
    TrainOptions o = {.backend = &backend_cpu, .data_paths = {ok, big}, .n_data = 2,
                      .seqs_per_step = 2, .seq = 8, .steps = 1, .subgroup_blocks = 1,
                      .tail_blocks = 1, .threads = 1};
    o.model = *model_preset_find("gpt2-tiny");
    TrainResult r;
    ck_assert_int_eq(trainer_run(&o, &r, &e), -EINVAL);
    tu_assert_contains(e.msg, "token 300 at position 57 is outside gpt2-tiny's vocabulary");
    free(r.losses);
    tu_rm_tree(dir);
}
END_TEST

/* Whether each of the B rows of a batch lies in one file: file k's tokens are 1000 k + i. */
static void assert_rows_in_one_file(const int *in, const int *tg, int B, int T)
{
    for (int b = 0; b < B; b++) {
        int file = in[b * T] / 1000;
        for (int t = 0; t < T; t++) {
            ck_assert_int_eq(in[b * T + t] / 1000, file);
            ck_assert_int_eq(tg[b * T + t], in[b * T + t] + 1);
        }
    }
}

/* Several files: concatenated in the order given, a pattern expanded in name order; no
 * sequence straddles two files; the fingerprint sees names, sizes and order, not directories */
START_TEST(several_files)
{
    char dir[] = "/tmp/fuyou-files-XXXXXX", dir2[] = "/tmp/fuyou-files2-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_ptr_nonnull(mkdtemp(dir2));
    char paths[3][256], moved[3][256], pattern[256];
    const int sizes[3] = {53, 40, 77}; /* 4 + 3 + 6 sequences of 12 + 1 */
    for (int k = 0; k < 3; k++) {
        uint16_t toks[100];
        for (int i = 0; i < sizes[k]; i++)
            toks[i] = (uint16_t)(1000 * k + i);
        snprintf(paths[k], sizeof paths[k], "%s/shard_%d.bin", dir, k);
        snprintf(moved[k], sizeof moved[k], "%s/shard_%d.bin", dir2, k);
        put(paths[k], toks, 2 * (size_t)sizes[k]);
        put(moved[k], toks, 2 * (size_t)sizes[k]);
    }
    TokenData d;
    Err e;
    /* the pattern's order is the names': 0, 1, 2 */
    snprintf(pattern, sizeof pattern, "%s/shard_*.bin", dir);
    const char *pat = pattern;
    ck_assert_int_eq(data_load_list(&d, &pat, 1, DATA_AUTO, &e), 0);
    ck_assert_int_eq(d.n_files, 3);
    ck_assert_str_eq(d.files[2].path, paths[2]);
    ck_assert_uint_eq(d.files[1].begin, 53);
    ck_assert_uint_eq(d.tokens[53], 1000);
    DataPrint by_pattern = d.print;
    ck_assert_int_eq(by_pattern.files, 3);
    ck_assert_int_eq(by_pattern.tokens, 170);
    Loader l;
    ck_assert_int_eq(loader_init(&l, &d, 13, 12, 3, &e), 0);
    ck_assert_uint_eq(l.n_seq, 13);
    int in[13 * 12], tg[13 * 12];
    for (int epoch = 0; epoch < 3; epoch++) {
        loader_next(&l, in, tg);
        assert_rows_in_one_file(in, tg, 13, 12);
        /* every sequence once per epoch: the starts are the files' strides */
        int seen[3] = {0};
        for (int b = 0; b < 13; b++) {
            ck_assert_int_eq(in[b * 12] % 1000 % 12, 0);
            seen[in[b * 12] / 1000]++;
        }
        ck_assert(seen[0] == 4 && seen[1] == 3 && seen[2] == 6);
    }
    loader_free(&l);
    /* in order, padded past the end */
    ck_assert_int_eq(loader_init_in_order(&l, &d, 5, 12, &e), 0);
    ck_assert_int_eq(loader_fill(&l, 10, in, tg), 3);
    ck_assert_int_eq(in[0], 2000 + 36);
    ck_assert_int_eq(in[2 * 12], 2000 + 60);
    for (int i = 3 * 12; i < 5 * 12; i++)
        ck_assert(in[i] == 0 && tg[i] == DATA_IGNORE);
    loader_free(&l);
    data_free(&d);
    /* the same files given one by one, then moved, then in another order */
    const char *given[3] = {paths[0], paths[1], paths[2]};
    ck_assert_int_eq(data_load_list(&d, given, 3, DATA_AUTO, &e), 0);
    ck_assert_uint_eq(d.print.crc32c, by_pattern.crc32c);
    data_free(&d);
    const char *elsewhere[3] = {moved[0], moved[1], moved[2]};
    ck_assert_int_eq(data_load_list(&d, elsewhere, 3, DATA_AUTO, &e), 0);
    ck_assert_uint_eq(d.print.crc32c, by_pattern.crc32c);
    data_free(&d);
    const char *swapped[3] = {paths[1], paths[0], paths[2]};
    ck_assert_int_eq(data_load_list(&d, swapped, 3, DATA_AUTO, &e), 0);
    ck_assert_uint_eq(d.tokens[0], 1000);
    ck_assert_uint_ne(d.print.crc32c, by_pattern.crc32c);
    /* a file shorter than a sequence is refused by name */
    ck_assert_int_eq(loader_init(&l, &d, 1, 45, 3, &e), -EINVAL);
    tu_assert_contains(e.msg, paths[1]);
    tu_assert_contains(e.msg, "never straddles");
    loader_free(&l);
    data_free(&d);
    /* a pattern that matches nothing */
    snprintf(pattern, sizeof pattern, "%s/none_*.bin", dir);
    ck_assert_int_eq(data_load_list(&d, &pat, 1, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "no file matches");
    data_free(&d);
    tu_rm_tree(dir);
    tu_rm_tree(dir2);
}
END_TEST

/* Loss masks: FILE.mask and X.mask.npy, one value a token; a masked target is DATA_IGNORE
 * exactly where its mask is 0, an unmasked file's targets all kept; bad masks refused */
START_TEST(masks)
{
    char dir[] = "/tmp/fuyou-mask-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char a[256], am[256], b[256], bm[256], c[256];
    uint16_t toks[40];
    uint8_t mask[40];
    for (int i = 0; i < 40; i++) {
        toks[i] = (uint16_t)i;
        mask[i] = (uint8_t)(i % 3 != 0);
    }
    snprintf(a, sizeof a, "%s/a.bin", dir);
    put(a, toks, sizeof toks);
    data_mask_path(a, am, sizeof am);
    ck_assert_str_eq(am + strlen(dir), "/a.bin.mask");
    put(am, mask, sizeof mask);
    snprintf(b, sizeof b, "%s/b.npy", dir);
    for (int i = 0; i < 40; i++)
        toks[i] = (uint16_t)(100 + i);
    put_npy(b, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (40,), }", toks,
            sizeof toks);
    data_mask_path(b, bm, sizeof bm);
    ck_assert_str_eq(bm + strlen(dir), "/b.mask.npy");
    put_npy(bm, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (40,), }", mask,
            sizeof mask);
    snprintf(c, sizeof c, "%s/c.bin", dir);
    for (int i = 0; i < 40; i++)
        toks[i] = (uint16_t)(200 + i);
    put(c, toks, sizeof toks);
    const char *files[3] = {c, a, b};
    TokenData d;
    Err e;
    ck_assert_int_eq(data_load_list(&d, files, 3, DATA_AUTO, &e), 0);
    ck_assert(!d.files[0].masked && d.files[1].masked && d.files[2].masked);
    ck_assert_ptr_nonnull(d.mask);
    Loader l;
    ck_assert_int_eq(loader_init_in_order(&l, &d, 9, 13, &e), 0);
    int in[9 * 13], tg[9 * 13];
    ck_assert_int_eq(loader_fill(&l, 0, in, tg), 9);
    int ignored = 0;
    for (int i = 0; i < 9 * 13; i++) {
        int tok = in[i] + 1, pos = tok % 100; /* the target's position in its file */
        bool keep = in[i] >= 200 || pos % 3 != 0;
        ck_assert_int_eq(tg[i], keep ? tok : DATA_IGNORE);
        ignored += !keep;
    }
    ck_assert_int_eq(ignored, 2 * 3 * 13 / 3);
    loader_free(&l);
    ck_assert(d.print.crc32c != 0);
    data_free(&d);
    /* of another length, or with a value other than 0 and 1 */
    put(am, mask, 39);
    ck_assert_int_eq(data_load(&d, a, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, am);
    tu_assert_contains(e.msg, "39 mask values for the 40 tokens");
    data_free(&d);
    mask[17] = 2;
    put(am, mask, sizeof mask);
    ck_assert_int_eq(data_load(&d, a, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "value 2 at position 17");
    data_free(&d);
    put_npy(bm, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (20,), }", mask,
            sizeof mask);
    ck_assert_int_eq(data_load(&d, b, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "dtype '<u2'");
    tu_assert_contains(e.msg, "loss mask");
    data_free(&d);
    tu_rm_tree(dir);
}
END_TEST

/* An llm.c file whose magic number is damaged is not guessed to be headerless uint16 (its
 * header would be trained as tokens); nor is a .bin of a size neither format has. An explicit
 * format reads it anyway. */
START_TEST(data_damaged_llmc_header)
{
    char dir[] = "/tmp/fuyou-magic-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    Err e;
    TokenData d;
    uint16_t toks[100];
    for (int i = 0; i < 100; i++)
        toks[i] = (uint16_t)(i * 7);
    const char *names[] = {"train.bin", "train.dat"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        put_llmc(path, 20240520 ^ 0x10, 1, toks, 100, 2);
        ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
        tu_assert_contains(e.msg, path);
        tu_assert_contains(e.msg, "magic 20240536");
        tu_assert_contains(e.msg, "--data-format");
        data_free(&d);
        ck_assert_int_eq(data_load(&d, path, DATA_U16, &e), 0);
        ck_assert_int_eq(d.n, 512 + 100);
        data_free(&d);
    }
    /* the version and token count damaged too: the zero rest of the header still tells */
    snprintf(path, sizeof path, "%s/train.bin", dir);
    put_llmc(path, 20240520 ^ 0x10, 9, toks, 5, 2);
    ck_assert_int_eq(truncate(path, 1024 + 200), 0);
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "magic 20240536");
    data_free(&d);
    /* an odd-sized .bin is neither format */
    put(path, toks, 199);
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "neither");
    data_free(&d);
    /* headerless tokens that merely start with small values are still uint16 */
    snprintf(path, sizeof path, "%s/val.bin", dir);
    uint16_t many[2048];
    for (int i = 0; i < 2048; i++)
        many[i] = (uint16_t)(1 + i % 300);
    put(path, many, sizeof many);
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), 0);
    ck_assert_int_eq(d.files[0].format, DATA_U16);
    data_free(&d);
    tu_rm_tree(dir);
}
END_TEST

/* A FIFO or a directory as data: one clear error, at once (a FIFO used to block in fopen) */
START_TEST(data_not_regular)
{
    char dir[] = "/tmp/fuyou-fifo-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    TokenData d;
    Err e;
    ck_assert_int_eq(data_load(&d, path, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, "not a regular file");
    data_free(&d);
    ck_assert_int_eq(data_load(&d, dir, DATA_AUTO, &e), -EINVAL);
    tu_assert_contains(e.msg, "not a regular file");
    data_free(&d);
    tu_rm_tree(dir);
}
END_TEST

int main(void)
{
    if (!tu_can_read(text, "the default training text, from base-files"))
        return 77;
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("data");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, data_formats_and_loader);
    tcase_add_test(tc, uint32_tokens);
    tcase_add_test(tc, npy_refused);
    tcase_add_test(tc, data_against_the_model);
    tcase_add_test(tc, several_files);
    tcase_add_test(tc, masks);
    tcase_add_test(tc, data_damaged_llmc_header);
    suite_add_tcase(s, tc);
    /* a FIFO as data used to block in fopen forever: a short timeout makes that a failure */
    TCase *tf = tcase_create("not_regular");
    tcase_set_timeout(tf, 10);
    tcase_add_test(tf, data_not_regular);
    suite_add_tcase(s, tf);
    return tu_run(s);
}
