/* fuzz_tokens: the token file and its llm.c header (exec/train/data.h, data_load) and the batch
 * loader over what it read, under libFuzzer.
 *
 * The input is the file, read three ways: as NAME.bin and as NAME.txt with --data-format auto
 * (the extension decides between headerless uint16 and bytes), and as llmc. A load either fails
 * with one line, or gives tokens whose format was decided, whose largest token is max_token,
 * and (llm.c) whose count is the header's; a batch of them then loads. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "fuzz_util.h"

static char bin_path[512], txt_path[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    /* the .txt name is a link to the .bin file: one write an input */
    fuzz_path(bin_path, sizeof bin_path, "tokens.bin");
    fuzz_path(txt_path, sizeof txt_path, "tokens.txt");
    if (symlink("tokens.bin", txt_path))
        fuzz_die("symlink", txt_path);
    return 0;
}

static void load(const char *path, DataFormat format, const uint8_t *data, size_t size)
{
    TokenData d;
    Err e = {""};
    int rc = data_load(&d, path, format, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL || rc == -EIO || rc == -ENOMEM);
        fuzz_check_message(e.msg);
        fuzz_check(d.tokens == NULL);
        data_free(&d);
        return;
    }
    fuzz_check(d.format != DATA_AUTO && (format == DATA_AUTO || d.format == format));
    fuzz_check(d.n > 0 && d.tokens != NULL);
    size_t body = d.format == DATA_LLMC ? 1024 : 0, es = d.format == DATA_TEXT ? 1 : 2;
    fuzz_check(body + d.n * es == size);
    if (d.format == DATA_LLMC) {
        int32_t count;
        memcpy(&count, data + 8, 4);
        fuzz_check((size_t)count == d.n);
    }
    int max = 0;
    for (size_t i = 0; i < d.n; i++)
        max = d.tokens[i] > max ? d.tokens[i] : max;
    fuzz_check(max == d.max_token);
    fuzz_check(d.format != DATA_TEXT || max < 256);
    if (d.n >= 2) {
        int T = d.n - 1 < 8 ? (int)d.n - 1 : 8, in[8], tg[8];
        Loader l;
        Err el;
        fuzz_check(loader_init(&l, &d, 1, T, 5, &el) == 0);
        loader_next(&l, in, tg);
        for (int t = 0; t < T; t++)
            fuzz_check(in[t] >= 0 && in[t] <= max && tg[t] >= 0 && tg[t] <= max);
        loader_free(&l);
    }
    data_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_file(bin_path, sizeof bin_path, "tokens.bin", data, size);
    load(bin_path, DATA_AUTO, data, size);
    load(txt_path, DATA_AUTO, data, size);
    load(bin_path, DATA_LLMC, data, size);
    return 0;
}
