/* Check suite for exec/optim/ooc_adam: several steps of the out-of-core AdamW over sub-groups in
 * a striped store equal the in-memory scalar reference (states read back from the store, new
 * bf16 weights), with 2, 3 and 4 pinned buffers and groups of odd sizes. */
#include <sys/stat.h>

#include "ooc_adam.h"
#include <math.h>

#include "testutil.h"

static char root[64];

static float frand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return ((float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f) * 0.02f;
}

static void run_case(int n_buffers)
{
    enum { G = 5 };
    static const size_t sizes[G] = {1000, 65537, 4096, 300001, 17};
    snprintf(root, sizeof root, "/tmp/fuyou-ooc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    char d0[96], d1[96];
    snprintf(d0, sizeof d0, "%s/a", root);
    snprintf(d1, sizeof d1, "%s/b", root);
    mkdir(d0, 0700);
    mkdir(d1, 0700);
    StoreConfig sc = {.dirs = {d0, d1}, .n_dirs = 2, .chunk_bytes = 256 << 10,
                      .queue_depth = 4, .checksum = true, .create = true};
    Store st;
    HostPool pool;
    WorkPool wp;
    OocAdam o;
    Err e;
    ck_assert_msg(store_open(&st, &sc, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(hostpool_init(&pool, 64 << 20, &e), 0);
    ck_assert_int_eq(workpool_init(&wp, 2, &e), 0);
    ck_assert_msg(ooc_adam_init(&o, &st, &pool, &wp, adam_isa_best(), sizes, G, n_buffers,
                                &e) == 0, "%s", e.msg);
    float *w[G], *ref[G];
    uint16_t *grads[G], *out[G], *ref_out[G];
    unsigned seed = 42;
    for (int g = 0; g < G; g++) {
        size_t n = sizes[g];
        w[g] = malloc(n * 4);
        ref[g] = calloc(3 * n, 4); /* master | m | v */
        grads[g] = malloc(n * 2);
        out[g] = malloc(n * 2);
        ref_out[g] = malloc(n * 2);
        for (size_t i = 0; i < n; i++)
            ref[g][i] = w[g][i] = frand(&seed);
    }
    ck_assert_int_eq(ooc_adam_load(&o, (const float *const *)w, &e), 0);
    AdamConfig cfg = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                      .weight_decay = 0.01f};
    for (int step = 1; step <= 3; step++) {
        for (int g = 0; g < G; g++)
            for (size_t i = 0; i < sizes[g]; i++)
                grads[g][i] = adam_f32_to_bf16(frand(&seed));
        AdamStep s;
        adam_step_init(&s, &cfg, step, 1.0f);
        OocStats stats;
        int rc = ooc_adam_step(&o, &s, (const void *const *)grads, DTYPE_BF16, out, DTYPE_BF16,
                               &stats, &e);
        ck_assert_msg(rc == 0, "%s", e.msg);
        for (int g = 0; g < G; g++) {
            size_t n = sizes[g];
            AdamSlice x = {.master = ref[g], .m = ref[g] + n, .v = ref[g] + 2 * n,
                           .grad = grads[g], .grad_type = DTYPE_BF16, .out = ref_out[g],
                           .out_type = DTYPE_BF16, .n = n};
            adam_update_ref(&s, &x, 0, n);
            ck_assert_msg(!memcmp(out[g], ref_out[g], n * 2), "step %d group %d weights", step,
                          g);
        }
    }
    for (int g = 0; g < G; g++) {
        float *back;
        ck_assert_int_eq(posix_memalign((void **)&back, 4096, 12 * sizes[g] + 4096), 0);
        ck_assert_int_eq(ooc_adam_read_group(&o, g, back, &e), 0);
        for (size_t i = 0; i < 3 * sizes[g]; i++)
            ck_assert_msg(fabsf(back[i] - ref[g][i]) <= 1e-6f * fabsf(ref[g][i]),
                          "group %d state %zu", g, i);
        free(back);
        free(w[g]), free(ref[g]), free(grads[g]), free(out[g]), free(ref_out[g]);
    }
    ck_assert_uint_le(pool.peak, (size_t)n_buffers * (12 * 300001 + 4096));
    store_close(&st);
    hostpool_free(&pool);
    workpool_free(&wp);
    tu_rm_tree(root);
}

START_TEST(matches_reference)
{
    run_case(2);
    run_case(3);
    run_case(4);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ooc_adam");
    TCase *tc = tcase_create("ooc_adam");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, matches_reference);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
