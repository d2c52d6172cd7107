/* bench_ooc_adam: one out-of-core AdamW step over GiB of states in the store, against the
 * longest of its parts measured alone in the same run: reading every group's states, writing
 * them, and Adam over them in memory. Goal: elapsed <= 1.15 x max(read, write, Adam). Reads and
 * writes on one device share it, so read + write alone is printed too.
 * Usage: bench_ooc_adam [--dir DIR] [--gib N] [--groups G] [--threads T] */
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "ooc_adam.h"

static void die(const Err *e)
{
    fprintf(stderr, "bench_ooc_adam: %s\n", e->msg);
    exit(1);
}

/* Reads (or writes) every group's states with two groups in flight; returns seconds. */
static double stream(OocAdam *o, bool write)
{
    Err e;
    int prev = -1;
    double t0 = bench_now();
    for (int g = 0; g < o->n_groups; g++) {
        size_t bytes = 12 * o->params[g];
        int id = write ? store_write(o->st, &o->states[g], 0, o->buf[g % 2], bytes, &e)
                       : store_read(o->st, &o->states[g], 0, o->buf[g % 2], bytes, &e);
        if (id < 0 || (prev >= 0 && store_wait(o->st, prev, &e)))
            die(&e);
        prev = id;
    }
    if (store_wait_all(o->st, &e))
        die(&e);
    return bench_now() - t0;
}

/* The command line (bench_check_args). */
static const char usage[] = "bench_ooc_adam [--dir DIR] [--gib G] [--groups N] "
                            "[--threads N]";
static const char *const options[] = {"--dir", "--gib", "--groups", "--threads", NULL};

int main(int argc, char **argv)
{
    bench_check_args(argc, argv, usage, options);
    const char *dir = bench_arg(argc, argv, "--dir", "bench-scratch");
    double gib = atof(bench_arg(argc, argv, "--gib", "4"));
    int groups = atoi(bench_arg(argc, argv, "--groups", "16"));
    int threads = atoi(bench_arg(argc, argv, "--threads", "0"));
    mkdir(dir, 0700);
    size_t per = (size_t)(gib * (1 << 30) / 12 / groups) / 1024 * 1024;
    size_t sizes[OOC_MAX_GROUPS];
    for (int g = 0; g < groups; g++)
        sizes[g] = per;
    Err e;
    StoreConfig sc = {.dirs = {dir}, .n_dirs = 1, .create = true};
    Store st;
    HostPool pool;
    WorkPool wp;
    OocAdam o;
    if (store_open(&st, &sc, &e) || hostpool_init(&pool, 4 * 12 * per + (64 << 20), &e) ||
        workpool_init(&wp, threads, &e) ||
        ooc_adam_init(&o, &st, &pool, &wp, adam_isa_best(), sizes, groups, 3, &e))
        die(&e);
    float *w = malloc(per * 4);
    uint16_t **grads = malloc((size_t)groups * sizeof *grads);
    uint16_t **out = malloc((size_t)groups * sizeof *out);
    for (size_t i = 0; i < per; i++)
        w[i] = (float)(i % 977) * 1e-4f;
    uint16_t *g1 = malloc(per * 2), *o1 = malloc(per * 2);
    for (size_t i = 0; i < per; i++)
        g1[i] = adam_f32_to_bf16((float)(i % 91) * 1e-4f);
    const float **ws = malloc((size_t)groups * sizeof *ws);
    for (int g = 0; g < groups; g++) {
        ws[g] = w;
        grads[g] = g1; /* the same gradients for every group: memory, not data, is measured */
        out[g] = o1;
    }
    if (ooc_adam_load(&o, ws, &e))
        die(&e);
    AdamConfig cfg = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.1f};
    AdamStep s;
    adam_step_init(&s, &cfg, 1, 1.0f);

    /* The parts alone: read all, write all (two groups in flight), Adam over buffers. */
    double t_read = stream(&o, false), t_write = stream(&o, true);
    double t0;
    t0 = bench_now();
    for (int g = 0; g < groups; g++) {
        float *b = o.buf[g % 3];
        AdamSlice x = {.master = b, .m = b + per, .v = b + 2 * per, .grad = g1,
                       .grad_type = DTYPE_BF16, .out = o1, .out_type = DTYPE_BF16, .n = per};
        adam_update(o.isa, &s, &x, &wp);
    }
    double t_adam = bench_now() - t0;

    OocStats stats;
    if (ooc_adam_step(&o, &s, (const void *const *)grads, DTYPE_BF16, out, DTYPE_BF16, &stats,
                      &e))
        die(&e);
    double bound = t_read > t_write ? t_read : t_write;
    if (t_adam > bound)
        bound = t_adam;
    double states = 12.0 * per * groups;
    printf("out-of-core AdamW: %d groups x %.1f M params = %.2f GB of states in %s, %s, %d "
           "threads\n", groups, per / 1e6, states / 1e9, dir, adam_isa_name(o.isa),
           wp.n_threads);
    printf("host buffers: %s\n", bench_lock_state(pool.lock_failed));
    printf("%-24s %9s %10s\n", "", "seconds", "GB/s");
    printf("%-24s %9.3f %10.2f\n", "read alone", t_read, states / t_read / 1e9);
    printf("%-24s %9.3f %10.2f\n", "write alone", t_write, states / t_write / 1e9);
    printf("%-24s %9.3f %10.2f\n", "Adam alone", t_adam, states / t_adam / 1e9);
    printf("%-24s %9.3f %10.2f  (read wait %.3f, write wait %.3f, Adam %.3f)\n",
           "out-of-core step", stats.elapsed_s, states / stats.elapsed_s / 1e9,
           stats.read_wait_s, stats.write_wait_s, stats.adam_s);
    printf("ratio to max(read, write, Adam): %.3f (goal <= 1.15); to read + write: %.3f\n",
           stats.elapsed_s / bound, stats.elapsed_s / (t_read + t_write));
    store_close(&st);
    char sp[4096];
    snprintf(sp, sizeof sp, "%s/fuyou.store", dir);
    unlink(sp);
    hostpool_free(&pool);
    workpool_free(&wp);
    return 0;
}
