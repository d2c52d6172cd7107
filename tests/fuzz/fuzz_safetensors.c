/* fuzz_safetensors: the safetensors header and tensor table (exec/train/safetensors.h) and a
 * model load from it (checkpoint.h, ckpt_load_model) under libFuzzer.
 *
 * The input is the file. st_open either fails with one line, or gives a tensor table whose
 * promises hold: every tensor inside the data section, its byte count dtype x shape (in exact
 * arithmetic: no element count that wrapped), and the tensors tiling the data section. Each
 * F32/F16/BF16 tensor is then read (its checksum checked), and the file is loaded as the micro
 * model's (fuzz_util.h) model.safetensors, which must fail cleanly or fill every parameter. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "fuzz_util.h"
#include "safetensors.h"

static ModelConfig micro;
static ModelLayout layout;
static float *params;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    micro = fuzz_micro_model();
    if (layout_init(&layout, &micro) || !(params = malloc(layout.total * sizeof *params)))
        fuzz_die("layout_init", "");
    return 0;
}

static size_t elem_bytes(const char *dt)
{
    static const struct { const char *name; size_t bytes; } types[] = {
        {"F64", 8}, {"I64", 8}, {"F32", 4}, {"I32", 4}, {"F16", 2}, {"BF16", 2}, {"I16", 2},
        {"U8", 1}, {"I8", 1}, {"BOOL", 1}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcmp(dt, types[i].name))
            return types[i].bytes;
    return 0;
}

/* The promises of an opened file's table (safetensors.h). */
static void check_table(const StFile *s)
{
    fuzz_check(s->data_start >= 8 && s->data_start <= s->file_size);
    uint64_t data_len = s->file_size - s->data_start, at = 0;
    for (int i = 0; i < s->n; i++) {
        const StTensor *t = &s->t[i];
        fuzz_check(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS);
        fuzz_check(t->begin <= t->end && t->end <= data_len);
        size_t es = elem_bytes(t->dtype);
        fuzz_check(es > 0);
        /* dtype x shape is the byte count exactly, without wrapping */
        uint64_t bytes = es;
        for (int d = 0; d < t->ndim; d++) {
            fuzz_check(t->shape[d] >= 0);
            fuzz_check(!__builtin_mul_overflow(bytes, (uint64_t)t->shape[d], &bytes));
        }
        fuzz_check(bytes == t->end - t->begin);
        fuzz_check(st_numel(t) * es == bytes);
        fuzz_check(st_find(s, t->name) != NULL);
        /* st_open sorts the table by offset, and the tensors tile the data section */
        fuzz_check(t->begin == at);
        at = t->end;
    }
    fuzz_check(at == data_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_file(path, sizeof path, "model.safetensors", data, size);
    StFile s;
    Err e = {""};
    int rc = st_open(&s, path, &e);
    if (rc) {
        fuzz_check(rc == -EINVAL || rc == -EIO || rc == -ENOMEM);
        fuzz_check_message(e.msg);
        fuzz_check(s.f == NULL && s.t == NULL);
    } else {
        check_table(&s);
        for (int i = 0; i < s.n; i++) {
            const StTensor *t = &s.t[i];
            /* at most 2 bytes an element in the file: the floats fit in twice its size */
            float *dst = malloc(st_numel(t) * sizeof *dst + 1);
            if (!dst)
                fuzz_die("malloc", "");
            Err er = {""};
            int r = st_read_f32(&s, t, dst, &er);
            if (r)
                fuzz_check_message(er.msg);
            free(dst);
        }
        st_close(&s);
    }
    Err el = {""};
    rc = ckpt_load_model(path, &micro, &layout, params, &el);
    if (rc) {
        fuzz_check_message(el.msg);
    } else if (st_open(&s, path, &e) == 0) {
        /* loaded: every parameter came from one tensor of the file, not two (a name with and
         * without "transformer.") */
        int *from = calloc((size_t)layout.n, sizeof *from);
        if (!from)
            fuzz_die("calloc", "");
        for (int i = 0; i < s.n; i++) {
            const ParamTensor *t = layout_find(&layout, s.t[i].name);
            if (t)
                fuzz_check(from[t - layout.t]++ == 0);
        }
        for (int i = 0; i < layout.n; i++)
            fuzz_check(from[i] == 1);
        free(from);
        st_close(&s);
    }
    return 0;
}
