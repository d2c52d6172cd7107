/* hf_testutil: the tiny sharded Llama fixture (tests/data/llama-tiny-hf, made by
 * tests/data/make_llama_fixture.py) and Hugging Face folders made from it, for the suites of
 * exec/train/hf_folder.h and hf_save.h. Header-only; tests only. */
#ifndef FUYOU_HF_TESTUTIL_H
#define FUYOU_HF_TESTUTIL_H

#include <jansson.h>

#include "hf_folder.h"
#include "layout.h"
#include "model.h"
#include "testutil.h"

/* The fixture's folder: TEST_DATA (meson sets it to tests/data) / llama-tiny-hf. */
static inline const char *hf_fixture(void)
{
    static char path[1024];
    const char *data = getenv("TEST_DATA");
    ck_assert_msg(data != NULL, "TEST_DATA is not set (meson sets it)");
    snprintf(path, sizeof path, "%s/llama-tiny-hf", data);
    return path;
}

/* Element i of the fixture's tensor name, as make_llama_fixture.py writes it (exact in BF16). */
static inline float hf_fixture_value(const char *name, size_t i)
{
    unsigned sum = 0;
    for (const char *p = name; *p; p++)
        sum += (unsigned char)*p;
    return (float)((int)((sum + 11 * i) % 255) - 127) / 64.0f;
}

/* The fixture's model (its config.json through model_load) and layout. */
static inline void hf_fixture_model(ModelConfig *c, ModelLayout *l)
{
    Err e;
    ck_assert_msg(model_load(hf_fixture(), c, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(layout_init(l, c), 0);
}

/* A copy of the fixture in a new temporary folder dir (capacity 64), to break. */
static inline void hf_fixture_copy(char *dir)
{
    strcpy(dir, "/tmp/fuyou-hf-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char cmd[2048], out[256];
    snprintf(cmd, sizeof cmd, "cp '%s'/* '%s'/", hf_fixture(), dir);
    ck_assert_int_eq(tu_run_shell(cmd, out, sizeof out), 0);
}

/* Loads path into a fresh flat buffer for (c, l): the status, with e; the buffer in *out
 * (caller frees) when it loaded. */
static inline int hf_load_flat(const char *path, const ModelConfig *c, const ModelLayout *l,
                               float **out, Err *e)
{
    float *p = calloc(l->total, sizeof *p);
    ck_assert_ptr_nonnull(p);
    HfSink sink = hf_sink_flat(p);
    int rc = hf_load(path, c, l, &sink, e);
    if (rc || !out)
        free(p);
    else
        *out = p;
    return rc;
}

/* The fixture's model and layout, and its weights in a flat buffer (caller frees). */
static inline float *hf_fixture_params(ModelConfig *c, ModelLayout *l)
{
    hf_fixture_model(c, l);
    float *p;
    Err e;
    ck_assert_msg(hf_load_flat(hf_fixture(), c, l, &p, &e) == 0, "%s", e.msg);
    return p;
}

/* Reads the JSON file at path (a test failure if it is not). */
static inline json_t *hf_read_json(const char *path)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    ck_assert_msg(root != NULL, "%s: %s", path, je.text);
    return root;
}

#endif
