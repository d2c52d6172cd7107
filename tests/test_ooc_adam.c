/* Check suite for exec/optim/ooc_adam: several steps of the out-of-core AdamW over sub-groups in
 * a striped store equal the in-memory scalar reference (states read back from the store, new
 * bf16 weights), with 2, 3 and 4 pinned buffers and groups of odd sizes; groups driven by hand
 * through read_start / update_group (on another thread) / write_start with the caller's buffers
 * give bit-identical states and weights to ooc_adam_step; write_group / read_group round-trip;
 * the whole step refuses without buffers of its own. */
#include <errno.h>
#include <pthread.h>
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

/* A striped store in a fresh temporary directory, and a host pool. */
typedef struct Scratch {
    char root[64];
    Store st;
    HostPool pool;
} Scratch;

static void scratch_open(Scratch *x, size_t pool_bytes)
{
    snprintf(x->root, sizeof x->root, "/tmp/fuyou-ooc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(x->root));
    char d0[96], d1[96];
    snprintf(d0, sizeof d0, "%s/a", x->root);
    snprintf(d1, sizeof d1, "%s/b", x->root);
    mkdir(d0, 0700);
    mkdir(d1, 0700);
    StoreConfig sc = {.dirs = {d0, d1}, .n_dirs = 2, .chunk_bytes = 256 << 10,
                      .queue_depth = 4, .checksum = true, .create = true};
    Err e;
    ck_assert_msg(store_open(&x->st, &sc, &e) == 0, "%s", e.msg);
    ck_assert_msg(hostpool_init(&x->pool, pool_bytes, &e) == 0, "%s", e.msg);
}

static void scratch_close(Scratch *x)
{
    store_close(&x->st);
    hostpool_free(&x->pool);
    tu_rm_tree(x->root);
}

typedef struct UpdateJob {
    OocAdam *o;
    int g;
    float *buf;
    const AdamStep *s;
    const void *grad;
    DType grad_type;
    uint16_t *out;
    DType out_type;
} UpdateJob;

static void *update_thread(void *arg)
{
    UpdateJob *j = arg;
    ooc_adam_update_group(j->o, j->g, j->buf, j->s, j->grad, j->grad_type, j->out, j->out_type);
    return NULL;
}

/* Two groups (the first spans two Adam slices, the second ends off a 4 KiB boundary) from the
 * same start in two stores: one stepped by ooc_adam_step, one driven by hand with buffers from
 * a HostPool (n_buffers 0), updating group 0 on another thread while this one waits on the
 * store. Weights and the states read back must match bit for bit. */
START_TEST(by_hand_matches_step)
{
    enum { G = 2 };
    static const size_t sizes[G] = {(1 << 20) + 4099, 5001};
    Scratch a, b;
    scratch_open(&a, 64 << 20);
    scratch_open(&b, 64 << 20);
    WorkPool wp;
    Err e;
    ck_assert_int_eq(workpool_init(&wp, 3, &e), 0);
    OocAdam oa, ob;
    ck_assert_msg(ooc_adam_init(&oa, &a.st, &a.pool, &wp, adam_isa_best(), sizes, G, 3, &e) == 0,
                  "%s", e.msg);
    ck_assert_msg(ooc_adam_init(&ob, &b.st, &b.pool, &wp, adam_isa_best(), sizes, G, 0, &e) == 0,
                  "%s", e.msg);
    ck_assert_uint_eq(b.pool.used, 0);
    float *w[G];
    void *grads[G];
    uint16_t *out_a[G], *out_b[G];
    unsigned seed = 7;
    for (int g = 0; g < G; g++) {
        w[g] = malloc(sizes[g] * 4);
        grads[g] = malloc(sizes[g] * 4); /* room for fp32 */
        out_a[g] = malloc(sizes[g] * 2);
        out_b[g] = malloc(sizes[g] * 2);
        for (size_t i = 0; i < sizes[g]; i++)
            w[g][i] = frand(&seed);
    }
    ck_assert_msg(ooc_adam_load(&oa, (const float *const *)w, &e) == 0, "%s", e.msg);
    ck_assert_msg(ooc_adam_load(&ob, (const float *const *)w, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(b.pool.used, 0); /* the borrowed load buffer went back */
    size_t bytes = 12 * sizes[0];
    float *buf[G];
    for (int g = 0; g < G; g++) {
        buf[g] = hostpool_alloc(&b.pool, bytes, MEM_STAGING, &e);
        ck_assert_msg(buf[g] != NULL, "%s", e.msg);
        store_register_buffer(&b.st, buf[g], bytes, &e);
    }
    AdamConfig cfg = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                      .weight_decay = 0.01f};
    /* Step 1: bf16 gradients, bf16 weights; step 2: fp32 gradients, fp16 weights. */
    for (int step = 1; step <= 2; step++) {
        DType gt = step == 1 ? DTYPE_BF16 : DTYPE_FP32;
        DType ot = step == 1 ? DTYPE_BF16 : DTYPE_FP16;
        for (int g = 0; g < G; g++)
            for (size_t i = 0; i < sizes[g]; i++) {
                float v = frand(&seed);
                if (gt == DTYPE_BF16)
                    ((uint16_t *)grads[g])[i] = adam_f32_to_bf16(v);
                else
                    ((float *)grads[g])[i] = v;
            }
        AdamStep s;
        adam_step_init(&s, &cfg, step, 1.0f);
        ck_assert_msg(ooc_adam_step(&oa, &s, (const void *const *)grads, gt, out_a, ot, NULL,
                                    &e) == 0,
                      "%s", e.msg);

        int r0 = ooc_adam_read_start(&ob, 0, buf[0], &e);
        ck_assert_msg(r0 >= 0, "%s", e.msg);
        int r1 = ooc_adam_read_start(&ob, 1, buf[1], &e);
        ck_assert_msg(r1 >= 0, "%s", e.msg);
        ck_assert_msg(store_wait(&b.st, r0, &e) == 0, "%s", e.msg);
        UpdateJob j = {&ob, 0, buf[0], &s, grads[0], gt, out_b[0], ot};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, update_thread, &j), 0);
        ck_assert_msg(store_wait(&b.st, r1, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        int w0 = ooc_adam_write_start(&ob, 0, buf[0], &e);
        ck_assert_msg(w0 >= 0, "%s", e.msg);
        ooc_adam_update_group(&ob, 1, buf[1], &s, grads[1], gt, out_b[1], ot);
        int w1 = ooc_adam_write_start(&ob, 1, buf[1], &e);
        ck_assert_msg(w1 >= 0, "%s", e.msg);
        ck_assert_msg(store_wait(&b.st, w0, &e) == 0, "%s", e.msg);
        ck_assert_msg(store_wait(&b.st, w1, &e) == 0, "%s", e.msg);

        for (int g = 0; g < G; g++)
            ck_assert_msg(!memcmp(out_a[g], out_b[g], sizes[g] * 2), "step %d group %d weights",
                          step, g);
    }
    for (int g = 0; g < G; g++) {
        float *sa, *sb;
        ck_assert_int_eq(posix_memalign((void **)&sa, 4096, 12 * sizes[g] + 4096), 0);
        ck_assert_int_eq(posix_memalign((void **)&sb, 4096, 12 * sizes[g] + 4096), 0);
        ck_assert_msg(ooc_adam_read_group(&oa, g, sa, &e) == 0, "%s", e.msg);
        ck_assert_msg(ooc_adam_read_group(&ob, g, sb, &e) == 0, "%s", e.msg);
        ck_assert_msg(!memcmp(sa, sb, 12 * sizes[g]), "group %d states", g);
        /* And the step did move them: master differs from the initial weights. */
        ck_assert_msg(memcmp(sa, w[g], 4 * sizes[g]), "group %d unchanged", g);
        free(sa), free(sb);
        free(w[g]), free(grads[g]), free(out_a[g]), free(out_b[g]);
    }
    workpool_free(&wp);
    scratch_close(&a);
    scratch_close(&b);
}
END_TEST

START_TEST(write_group_round_trips)
{
    enum { G = 3 };
    static const size_t sizes[G] = {1024, 70001, 3};
    Scratch x;
    scratch_open(&x, 16 << 20);
    OocAdam o;
    Err e;
    ck_assert_msg(ooc_adam_init(&o, &x.st, &x.pool, NULL, ADAM_ISA_SCALAR, sizes, G, 0, &e) == 0,
                  "%s", e.msg);
    unsigned seed = 99;
    for (int g = 0; g < G; g++) {
        size_t n = 3 * sizes[g];
        float *src, *back;
        ck_assert_int_eq(posix_memalign((void **)&src, 4096, 4 * n + 4096), 0);
        ck_assert_int_eq(posix_memalign((void **)&back, 4096, 4 * n + 4096), 0);
        for (size_t i = 0; i < n; i++)
            src[i] = frand(&seed) + (float)g;
        memset(back, 0xa5, 4 * n);
        ck_assert_msg(ooc_adam_write_group(&o, g, src, &e) == 0, "%s", e.msg);
        ck_assert_msg(ooc_adam_read_group(&o, g, back, &e) == 0, "%s", e.msg);
        ck_assert_msg(!memcmp(src, back, 4 * n), "group %d", g);
        free(src), free(back);
    }
    scratch_close(&x);
}
END_TEST

START_TEST(step_needs_buffers)
{
    static const size_t sizes[1] = {4096};
    Scratch x;
    scratch_open(&x, 16 << 20);
    OocAdam o;
    Err e = {{0}};
    ck_assert_int_eq(ooc_adam_init(&o, &x.st, &x.pool, NULL, ADAM_ISA_SCALAR, sizes, 1, 1, &e),
                     -EINVAL);
    tu_assert_contains(e.msg, "buffers");
    ck_assert_int_eq(
        ooc_adam_init(&o, &x.st, &x.pool, NULL, ADAM_ISA_SCALAR, sizes, 1, OOC_MAX_BUFFERS + 1,
                      &e),
        -EINVAL);
    ck_assert_msg(ooc_adam_init(&o, &x.st, &x.pool, NULL, ADAM_ISA_SCALAR, sizes, 1, 0, &e) == 0,
                  "%s", e.msg);
    float *grad = calloc(sizes[0], 4);
    const void *grads[1] = {grad};
    AdamConfig cfg = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    AdamStep s;
    adam_step_init(&s, &cfg, 1, 1.0f);
    e.msg[0] = 0;
    ck_assert_int_eq(ooc_adam_step(&o, &s, grads, DTYPE_FP32, NULL, DTYPE_BF16, NULL, &e),
                     -EINVAL);
    tu_assert_contains(e.msg, "n_buffers");
    free(grad);
    scratch_close(&x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ooc_adam");
    TCase *tc = tcase_create("ooc_adam");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, matches_reference);
    tcase_add_test(tc, by_hand_matches_step);
    tcase_add_test(tc, write_group_round_trips);
    tcase_add_test(tc, step_needs_buffers);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
