/* fuzz_tokens: the token file (exec/train/data.h, data_load: llm.c's headers, .npy and its
 * header (npy.h), headerless uint16, text), its loss mask, and the batch loader over what it
 * read, under libFuzzer.
 *
 * The input is the file, read five ways: as NAME.bin, NAME.txt and NAME.npy with --data-format
 * auto (the extension and the magic decide), and as llmc and npy. A load either fails with one
 * line, or gives tokens whose format was decided, whose largest token is max_token, and whose
 * count fills the file after its header (llm.c: the header's count); a batch of them then
 * loads. The input is also the mask of a fixed token file, raw (FILE.mask) and as .npy
 * (X.mask.npy): either one line, or a mask of 0 and 1 whose zeros are exactly the loader's
 * ignored targets. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "fuzz_util.h"
#include "npy.h"

static char bin_path[512], txt_path[512], npy_path[512], masked_bin[512], masked_npy[512];

enum { MASKED_TOKENS = 64 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    /* the .txt and .npy names are links to the .bin file: one write an input */
    fuzz_path(bin_path, sizeof bin_path, "tokens.bin");
    fuzz_path(txt_path, sizeof txt_path, "tokens.txt");
    fuzz_path(npy_path, sizeof npy_path, "tokens.npy");
    if (symlink("tokens.bin", txt_path) || symlink("tokens.bin", npy_path))
        fuzz_die("symlink", txt_path);
    /* the token files the input masks: 64 tokens each, headerless and .npy */
    uint16_t toks[MASKED_TOKENS];
    for (int i = 0; i < MASKED_TOKENS; i++)
        toks[i] = (uint16_t)(i * 37);
    fuzz_file(masked_bin, sizeof masked_bin, "masked.bin", (const uint8_t *)toks, sizeof toks);
    uint8_t npy[128 + sizeof toks] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 118, 0};
    const char *dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (64,), }";
    memset(npy + 10, ' ', 118);
    memcpy(npy + 10, dict, strlen(dict));
    npy[127] = '\n';
    memcpy(npy + 128, toks, sizeof toks);
    fuzz_file(masked_npy, sizeof masked_npy, "masked.npy", npy, sizeof npy);
    return 0;
}

/* Bytes before the tokens and bytes a token of a loaded file of format f. */
static void layout_of(DataFormat f, const uint8_t *data, size_t size, size_t *head, size_t *es)
{
    *head = 0, *es = f == DATA_TEXT ? 1 : 2;
    if (f == DATA_LLMC) {
        int32_t version;
        memcpy(&version, data + 4, 4);
        *head = 1024, *es = version == 1 ? 2 : 4;
    } else if (f == DATA_NPY) {
        NpyHeader h;
        Err e;
        fuzz_check(npy_parse("input", data, size, &h, &e) == 0);
        *head = h.data_offset, *es = (size_t)(h.descr[2] - '0');
    }
}

static void load(const char *path, DataFormat format, const uint8_t *data, size_t size)
{
    TokenData d;
    Err e = {""};
    int rc = data_load(&d, path, format, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL || rc == -EIO || rc == -ENOMEM);
        fuzz_check_message(e.msg);
        fuzz_check(d.tokens == NULL && d.files == NULL && d.n == 0);
        data_free(&d);
        return;
    }
    DataFormat got = d.files[0].format;
    fuzz_check(d.n_files == 1 && got != DATA_AUTO && (format == DATA_AUTO || got == format));
    fuzz_check(d.n > 0 && d.tokens != NULL && d.files[0].n == d.n);
    size_t head, es;
    layout_of(got, data, size, &head, &es);
    fuzz_check(head + d.n * es == size);
    if (got == DATA_LLMC) {
        int32_t count;
        memcpy(&count, data + 8, 4);
        fuzz_check((size_t)count == d.n);
    }
    uint32_t max = 0;
    for (size_t i = 0; i < d.n; i++)
        max = d.tokens[i] > max ? d.tokens[i] : max;
    fuzz_check(max == d.max_token);
    fuzz_check(got != DATA_TEXT || max < 256);
    fuzz_check(es == 4 || max < 65536);
    fuzz_check(d.print.files == 1 && d.print.tokens == (int64_t)d.n);
    if (d.n >= 2) {
        int T = d.n - 1 < 8 ? (int)d.n - 1 : 8, in[8], tg[8];
        Loader l;
        Err el;
        fuzz_check(loader_init(&l, &d, 1, T, 5, &el) == 0);
        loader_next(&l, in, tg);
        for (int t = 0; t < T; t++)
            fuzz_check(in[t] >= 0 && (uint32_t)in[t] <= max && tg[t] >= 0 &&
                       (uint32_t)tg[t] <= max);
        loader_free(&l);
    }
    data_free(&d);
}

/* The input as the mask of tokens (64 of them): refused in one line, or exactly the loader's
 * ignored targets. */
static void load_masked(const char *tokens, const uint8_t *data, size_t size)
{
    char mask[520], name[200];
    data_mask_path(tokens, mask, sizeof mask);
    snprintf(name, sizeof name, "%s", strrchr(mask, '/') + 1);
    fuzz_file(mask, sizeof mask, name, data, size);
    TokenData d;
    Err e = {""};
    int rc = data_load(&d, tokens, DATA_AUTO, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL || rc == -EIO || rc == -ENOMEM);
        fuzz_check_message(e.msg);
        data_free(&d);
        return;
    }
    fuzz_check(d.n == MASKED_TOKENS && d.files[0].masked && d.mask);
    Loader l;
    Err el;
    int in[63], tg[63];
    fuzz_check(loader_init_in_order(&l, &d, 1, 63, &el) == 0);
    fuzz_check(loader_fill(&l, 0, in, tg) == 1);
    for (int t = 0; t < 63; t++) {
        fuzz_check(d.mask[t + 1] <= 1);
        fuzz_check(tg[t] == (d.mask[t + 1] ? (int)d.tokens[t + 1] : DATA_IGNORE));
    }
    loader_free(&l);
    data_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_file(bin_path, sizeof bin_path, "tokens.bin", data, size);
    load(bin_path, DATA_AUTO, data, size);
    load(txt_path, DATA_AUTO, data, size);
    load(npy_path, DATA_AUTO, data, size);
    load(bin_path, DATA_LLMC, data, size);
    load(bin_path, DATA_NPY, data, size);
    load_masked(masked_bin, data, size);
    load_masked(masked_npy, data, size);
    return 0;
}
