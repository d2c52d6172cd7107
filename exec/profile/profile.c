/* profile: this machine's CPU, memory and store, measured; see profile.h. */
#include "profile.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "adam.h"
#include "clock.h"
#include "grad_sum.h"
#include "graph.h"
#include "hostpool.h"
#include "lane.h"
#include "model.h"
#include "pipeline.h"
#include "store.h"
#include "workpool.h"

void profile_stat(double *x, int n, Stat *s)
{
    gsl_sort(x, 1, (size_t)n);
    *s = (Stat){.median = gsl_stats_median_from_sorted_data(x, 1, (size_t)n), .min = x[0],
                .max = x[n - 1], .n = n};
}

enum { MAX_REPS = 64 };

/* A load beside the Adam task (profile_adam_beside): told when to stop, and to count only the
 * work it does while the Adam's timed runs go on. */
typedef struct Beside {
    ProfileLoad load;
    void *ctx;
    atomic_bool stop, counting, started;
    double GBps;
    int rc;
    Err e;
} Beside;

static bool beside_stopped(void *token)
{
    return atomic_load(&((Beside *)token)->stop);
}

static bool beside_counting(void *token)
{
    Beside *b = token;
    atomic_store(&b->started, true);
    return atomic_load(&b->counting);
}

/* Before the timed runs: the load has started (it asked whether to count) or ended; at most
 * 10 s. */
static void beside_wait_started(Beside *b)
{
    for (int i = 0; i < 10000 && !atomic_load(&b->started); i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* The Adam task reps times into x[0..reps): G params/s each; with a load beside it (b, else
 * NULL), the load counts during the timed runs only (not this function's set-up). */
static int adam_runs(int threads, size_t params, int reps, double *x, Beside *b, Err *e)
{
    WorkPool wp = {0};
    /* its workers niced as the pipeline's are by default (fuyou-run --optimizer-nice), which
     * matters only beside a load: what the load's threads take from it */
    int rc = workpool_init_nice(&wp, threads, PIPE_OPTIM_NICE, e);
    /* the pipeline's memory: its host pool's pages (huge where the kernel has them) */
    HostPool pool = {0};
    float *state = NULL;
    uint16_t *grad = NULL, *out = NULL;
    size_t page = 1 << 21;
    if (!rc)
        rc = hostpool_init(&pool, params * 16 + 3 * page, e);
    if (!rc && (!(state = hostpool_alloc(&pool, params * 12, MEM_MASTER, e)) ||
                !(grad = hostpool_alloc(&pool, params * 2, MEM_GRADS, e)) ||
                !(out = hostpool_alloc(&pool, params * 2, MEM_STAGING, e))))
        rc = -ENOMEM;
    for (size_t i = 0; !rc && i < params; i++) {
        state[i] = 0.01f * (float)(i % 97);
        state[params + i] = state[2 * params + i] = 0;
        grad[i] = adam_f32_to_bf16(1e-3f * (float)(i % 89) - 0.04f);
    }
    AdamConfig cfg = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.1f};
    AdamIsa isa = adam_isa_best();
    if (b && !rc) {
        beside_wait_started(b);
        atomic_store(&b->counting, true);
    }
    for (int r = 0; !rc && r < reps; r++) {
        AdamStep st;
        adam_step_init(&st, &cfg, r + 1, 1.0f);
        AdamSlice s = {.master = state, .m = state + params, .v = state + 2 * params,
                       .grad = grad, .grad_type = DTYPE_BF16, .out = out,
                       .out_type = DTYPE_BF16, .n = params};
        double t0 = clock_monotonic_s();
        /* what the pipeline's Adam task does: the norm's share, then the update */
        volatile double sq = adam_sum_sq(grad, DTYPE_BF16, params, &wp);
        (void)sq;
        adam_update(isa, &st, &s, &wp);
        x[r] = (double)params / (clock_monotonic_s() - t0) / 1e9;
    }
    if (b)
        atomic_store(&b->counting, false);
    hostpool_free(&pool);
    workpool_free(&wp);
    return rc;
}

static void *run_beside(void *arg)
{
    Beside *b = arg;
    ProfileLoadControl lc = {beside_stopped, beside_counting, b};
    b->rc = b->load(b->ctx, &lc, &b->GBps, &b->e);
    atomic_store(&b->started, true);
    return NULL;
}

int profile_adam_runs(int threads, size_t params, int reps, double *x, Err *e)
{
    if (reps < 1 || reps > MAX_REPS)
        return err_set(e, -EINVAL, "1 to %d repetitions", MAX_REPS);
    return adam_runs(threads, params, reps, x, NULL, e);
}

int profile_adam(int threads, size_t params, int reps, Stat *gparams, Err *e)
{
    double x[MAX_REPS];
    int rc = profile_adam_runs(threads, params, reps, x, e);
    if (!rc)
        profile_stat(x, reps, gparams);
    return rc;
}

typedef struct MemcpyJob {
    uint8_t *dst;
    const uint8_t *src;
} MemcpyJob;

static void copy_range(void *ctx, size_t begin, size_t end)
{
    MemcpyJob *j = ctx;
    memcpy(j->dst + begin, j->src + begin, end - begin);
}

int profile_memory(int threads, size_t bytes, int reps, Stat *GBps, Err *e)
{
    if (reps < 1 || reps > MAX_REPS)
        return err_set(e, -EINVAL, "1 to %d repetitions", MAX_REPS);
    WorkPool wp = {0};
    int rc = workpool_init(&wp, threads, e);
    uint8_t *a = malloc(bytes), *b = malloc(bytes);
    if (!rc && (!a || !b))
        rc = err_set(e, -ENOMEM, "out of memory for 2 x %zu bytes", bytes);
    double x[MAX_REPS];
    if (!rc) {
        memset(a, 1, bytes);
        memset(b, 2, bytes); /* both touched: no page faults in the timing */
    }
    for (int r = 0; !rc && r < reps; r++) {
        MemcpyJob j = {r % 2 ? a : b, r % 2 ? b : a};
        double t0 = clock_monotonic_s();
        workpool_run(&wp, copy_range, &j, bytes, 4096);
        x[r] = 2.0 * (double)bytes / (clock_monotonic_s() - t0) / 1e9;
    }
    if (!rc)
        profile_stat(x, reps, GBps);
    free(a), free(b);
    workpool_free(&wp);
    return rc;
}

typedef struct SumJob {
    float *sum;
    const uint16_t *grad;
} SumJob;

static void sum_range(void *ctx, size_t begin, size_t end)
{
    const SumJob *j = ctx;
    grad_sum_add(j->sum, j->grad, DTYPE_BF16, begin, end, false);
}

int profile_grad_sum(int threads, size_t params, int reps, Stat *GBps, Err *e)
{
    if (reps < 1 || reps > MAX_REPS)
        return err_set(e, -EINVAL, "1 to %d repetitions", MAX_REPS);
    WorkPool wp = {0};
    int rc = workpool_init(&wp, threads, e);
    float *sum = malloc(params * sizeof *sum);
    uint16_t *grad = malloc(params * sizeof *grad);
    if (!rc && (!sum || !grad))
        rc = err_set(e, -ENOMEM, "out of memory for %zu gradients and their sum", params);
    double x[MAX_REPS];
    if (!rc) { /* both touched: no page faults in the timing */
        memset(sum, 0, params * sizeof *sum);
        for (size_t i = 0; i < params; i++)
            grad[i] = 0x3c00 + (uint16_t)(i & 0xff); /* small bf16 values: sums stay finite */
    }
    double bytes = (double)params * (double)grad_sum_bytes(dtype_bytes(DTYPE_BF16), false);
    for (int r = 0; !rc && r < reps; r++) {
        SumJob j = {sum, grad};
        double t0 = clock_monotonic_s();
        workpool_run(&wp, sum_range, &j, params, 64);
        x[r] = bytes / (clock_monotonic_s() - t0) / 1e9;
    }
    if (!rc)
        profile_stat(x, reps, GBps);
    free(sum), free(grad);
    workpool_free(&wp);
    return rc;
}

/* The two I/O buffers of len bytes from a host pool, as the pipeline's staging buffers are
 * (locked in RAM where the system allows). */
static int io_buffers(HostPool *pool, size_t len, uint8_t *buf[2], Err *e)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), each = (len + page - 1) / page * page;
    int rc = hostpool_init(pool, 2 * each, e);
    for (int k = 0; k < 2 && !rc; k++)
        if (!(buf[k] = hostpool_alloc(pool, len, MEM_STAGING, e)))
            rc = -ENOMEM;
    return rc;
}

/* One direction of a store test: a tensor moved through buf, len bytes a request, IO_DEPTH
 * requests in flight (each cut into chunk-sized pieces the store keeps queue_depth deep), so
 * the device's queue never drains between requests. One request at a time measured 1.53-1.63
 * GB/s on the H200 machine's virtual disk where two in flight (bench_store) moved 1.96 and the
 * pipeline's reads 1.85-1.89: the measurement is of the device, the pipeline's per-request
 * cost is ssd.latency_us. */
enum { IO_DEPTH = 2 };
typedef struct Flow {
    const StoreTensor *t;
    uint8_t *buf;
    size_t len;
    bool write;
    uint64_t off;
    int id[IO_DEPTH], n; /* in flight, oldest first */
    double end;          /* when its last request completed */
} Flow;

static int flow_fill(Store *st, Flow *f, Err *e)
{
    while (f->n < IO_DEPTH && f->off < f->t->bytes) {
        size_t n = f->t->bytes - f->off < f->len ? (size_t)(f->t->bytes - f->off) : f->len;
        int id = f->write ? store_write(st, f->t, f->off, f->buf, n, e)
                          : store_read(st, f->t, f->off, f->buf, n, e);
        if (id < 0)
            return id;
        f->off += n;
        f->id[f->n++] = id;
    }
    return 0;
}

/* Reaps the oldest request (waiting for it when wait, else only if done) and refills; sets end
 * once the whole tensor has moved. 0, or a negative errno. */
static int flow_step(Store *st, Flow *f, bool wait, Err *e)
{
    if (f->n && (wait || store_done(st, f->id[0]))) {
        int rc = store_wait(st, f->id[0], e);
        if (rc)
            return rc;
        memmove(f->id, f->id + 1, (size_t)--f->n * sizeof f->id[0]);
        if (!f->n && f->off >= f->t->bytes)
            f->end = clock_monotonic_s();
    }
    return flow_fill(st, f, e);
}

/* Moves a whole tensor through buf. Returns GB/s, or a negative errno. */
static double stream(Store *st, const StoreTensor *t, uint8_t *buf, size_t len, bool write,
                     Err *e)
{
    Flow f = {.t = t, .buf = buf, .len = len, .write = write};
    double t0 = clock_monotonic_s();
    int rc = flow_fill(st, &f, e);
    while (!rc && f.n)
        rc = flow_step(st, &f, true, e);
    return rc ? rc : (double)t->bytes / (f.end - t0) / 1e9;
}

/* One tensor read while another is written, each direction as stream moves it. */
static int duplex(Store *st, const StoreTensor *rt, const StoreTensor *wt, uint8_t *rbuf,
                  uint8_t *wbuf, size_t len, double *r_GBps, double *w_GBps, Err *e)
{
    Flow r = {.t = rt, .buf = rbuf, .len = len}, w = {.t = wt, .buf = wbuf, .len = len,
                                                     .write = true};
    double t0 = clock_monotonic_s();
    int rc = flow_fill(st, &r, e);
    if (!rc)
        rc = flow_fill(st, &w, e);
    while (!rc && (r.n || w.n)) {
        rc = store_poll(st, e);
        if (!rc)
            rc = flow_step(st, &r, false, e);
        if (!rc)
            rc = flow_step(st, &w, false, e);
    }
    if (!rc) {
        /* each direction's rate over the time both ran: the overlap is what duplex means */
        double both = (r.end < w.end ? r.end : w.end) - t0;
        double r_bytes = (double)rt->bytes, w_bytes = (double)wt->bytes;
        if (r.end < w.end)
            w_bytes *= both / (w.end - t0);
        else
            r_bytes *= both / (r.end - t0);
        *r_GBps = r_bytes / both / 1e9;
        *w_GBps = w_bytes / both / 1e9;
    }
    return rc;
}

/* A store created over dirs, with O_DIRECT where the file systems have it, else buffered
 * (*direct says which; NULL: not told). 0 or -errno with e. */
static int open_store(Store *st, const char *const *dirs, int n_dirs, bool *direct, Err *e)
{
    StoreConfig cfg = {.n_dirs = n_dirs, .create = true};
    for (int i = 0; i < n_dirs; i++)
        cfg.dirs[i] = dirs[i];
    int rc = store_open(st, &cfg, e);
    if (rc == -EINVAL) { /* no O_DIRECT here: buffered */
        store_close(st);
        cfg.buffered = true;
        rc = store_open(st, &cfg, e);
    }
    if (direct)
        *direct = !cfg.buffered;
    return rc;
}

/* The pool freed, the store closed and its files removed: a profile leaves nothing behind. */
static void remove_store(Store *st, HostPool *pool, int n_dirs)
{
    hostpool_free(pool);
    store_close(st);
    for (int i = 0; i < n_dirs; i++)
        if (st->paths[i][0])
            unlink(st->paths[i]);
}

int profile_ssd(const char *const *dirs, int n_dirs, size_t bytes, int reps, SsdProfile *p,
                Err *e)
{
    memset(p, 0, sizeof *p);
    if (reps < 1 || reps > MAX_REPS || n_dirs < 1 || n_dirs > STORE_MAX_DEVICES)
        return err_set(e, -EINVAL, "1 to %d repetitions and 1 to %d directories", MAX_REPS,
                       STORE_MAX_DEVICES);
    p->free_GB = -1;
    for (int i = 0; i < n_dirs; i++) {
        struct statvfs v;
        if (statvfs(dirs[i], &v))
            return err_set(e, -errno, "%s: %s", dirs[i], strerror(errno));
        double gb = (double)v.f_bavail * (double)v.f_frsize / 1e9;
        if (p->free_GB < 0 || gb < p->free_GB)
            p->free_GB = gb;
    }
    Store st;
    int rc = open_store(&st, dirs, n_dirs, &p->direct, e);
    size_t len = bytes < ((size_t)256 << 20) ? bytes : (size_t)256 << 20;
    uint8_t *buf[2] = {NULL, NULL};
    HostPool pool = {0};
    if (!rc)
        rc = io_buffers(&pool, len, buf, e);
    StoreTensor t[2];
    for (int k = 0; k < 2 && !rc; k++)
        rc = store_alloc(&st, bytes, &t[k], e);
    for (int k = 0; k < 2 && !rc; k++)
        memset(buf[k], 0x5a + k, len);
    double w[MAX_REPS], r[MAX_REPS], dr[MAX_REPS], dw[MAX_REPS];
    for (int i = 0; !rc && i < reps; i++) {
        double x = stream(&st, &t[0], buf[0], len, true, e);
        double y = x < 0 ? x : stream(&st, &t[0], buf[0], len, false, e);
        if (x < 0 || y < 0) {
            rc = (int)(x < 0 ? x : y);
            break;
        }
        w[i] = x, r[i] = y;
        if (i == 0) { /* the second tensor must hold data before it is read */
            double z = stream(&st, &t[1], buf[1], len, true, e);
            rc = z < 0 ? (int)z : 0;
        }
        if (!rc)
            rc = duplex(&st, &t[i % 2], &t[(i + 1) % 2], buf[0], buf[1], len, &dr[i], &dw[i],
                        e);
    }
    if (!rc) {
        profile_stat(w, reps, &p->write_GBps);
        profile_stat(r, reps, &p->read_GBps);
        profile_stat(dr, reps, &p->duplex_read_GBps);
        profile_stat(dw, reps, &p->duplex_write_GBps);
    }
    remove_store(&st, &pool, n_dirs);
    return rc;
}

/* The store streaming on a thread of its own: one tensor read while the other is written,
 * over and over, until stop (a round begun is finished: once `running`, at least one is); what
 * it moved and for how long. */
typedef struct Streamer {
    Store *st;
    StoreTensor *t;
    uint8_t *buf[2];
    size_t len;
    atomic_bool stop, running;
    double bytes, seconds;
    int rc;
    Err e;
} Streamer;

static void *stream_until_stopped(void *arg)
{
    Streamer *s = arg;
    double t0 = clock_monotonic_s(), r, w;
    for (int i = 0; !s->rc && !atomic_load(&s->stop); i++) {
        atomic_store(&s->running, true);
        s->rc = duplex(s->st, &s->t[i % 2], &s->t[(i + 1) % 2], s->buf[0], s->buf[1], s->len,
                       &r, &w, &s->e);
        if (!s->rc)
            s->bytes += (double)s->t[0].bytes + (double)s->t[1].bytes;
    }
    s->seconds = clock_monotonic_s() - t0;
    return NULL;
}

int profile_adam_under_io(int threads, size_t params, int reps, const char *const *dirs,
                          int n_dirs, size_t bytes, Stat *gparams, double *io_GBps, Err *e)
{
    if (reps < 1 || reps > MAX_REPS || n_dirs < 1 || n_dirs > STORE_MAX_DEVICES)
        return err_set(e, -EINVAL, "1 to %d repetitions and 1 to %d directories", MAX_REPS,
                       STORE_MAX_DEVICES);
    Store st;
    int rc = open_store(&st, dirs, n_dirs, NULL, e);
    StoreTensor t[2];
    Streamer s = {.st = &st, .t = t, .len = bytes < ((size_t)64 << 20) ? bytes : (size_t)64 << 20};
    HostPool pool = {0};
    if (!rc)
        rc = io_buffers(&pool, s.len, s.buf, e);
    for (int k = 0; k < 2 && !rc; k++) {
        memset(s.buf[k], 0x3c + k, s.len);
        rc = store_alloc(&st, bytes, &t[k], e);
    }
    for (int k = 0; k < 2 && !rc; k++) { /* both hold data before either is read */
        double x = stream(&st, &t[k], s.buf[k], s.len, true, e);
        rc = x < 0 ? (int)x : 0;
    }
    pthread_t io;
    bool started = false;
    if (!rc) {
        int prc = pthread_create(&io, NULL, stream_until_stopped, &s);
        if (prc)
            rc = err_set(e, -prc, "cannot start the I/O thread: %s", strerror(prc));
        started = !prc;
    }
    /* the Adam timed only once the store streams (a loaded machine may not have started the
     * thread yet; a short Adam then ran, and finished, alone) */
    struct timespec nap = {0, 100000};
    while (started && !atomic_load(&s.running))
        nanosleep(&nap, NULL);
    double x[MAX_REPS];
    if (started)
        rc = adam_runs(threads, params, reps, x, NULL, e);
    if (started) {
        atomic_store(&s.stop, true);
        pthread_join(io, NULL);
        if (!rc && s.rc)
            rc = s.rc, *e = s.e;
    }
    if (!rc) {
        profile_stat(x, reps, gparams);
        *io_GBps = s.seconds > 0 ? s.bytes / s.seconds / 1e9 : 0;
    }
    remove_store(&st, &pool, n_dirs);
    return rc;
}

int profile_adam_beside(int threads, size_t params, int reps, ProfileLoad load, void *ctx,
                        Stat *gparams, double *load_GBps, Err *e)
{
    if (reps < 1 || reps > MAX_REPS)
        return err_set(e, -EINVAL, "1 to %d repetitions", MAX_REPS);
    Beside b = {.load = load, .ctx = ctx};
    pthread_t th;
    int prc = pthread_create(&th, NULL, run_beside, &b);
    if (prc)
        return err_set(e, -prc, "cannot start the load's thread: %s", strerror(prc));
    double x[MAX_REPS];
    int rc = adam_runs(threads, params, reps, x, &b, e);
    atomic_store(&b.stop, true);
    pthread_join(th, NULL);
    if (b.rc)
        rc = b.rc, *e = b.e;
    if (!rc) {
        profile_stat(x, reps, gparams);
        *load_GBps = b.GBps;
    }
    return rc;
}

/* profile_dispatch's tasks: one queue lane issuing empty compute tasks (DeviceOps.compute_empty)
 * with LANE_DEPTH in flight, as the pipeline's dispatcher issues dependent compute tasks
 * (pipe_exec.c), the caller waiting for each end as the dispatcher waits. */
enum { DISPATCH_WARMUP = 64, DISPATCH_MAX_GAPS = 1 << 20 };
typedef struct Dispatch {
    const DeviceOps *ops;
    Device *d;
    bool bell_ok;
    LaneBell bell;
    unsigned seen;
    Lane lane;
    int slots[DEVICE_SLOTS];    /* the jobs: their slots */
    DeviceSpan span[DEVICE_SLOTS];
    unsigned posted;
    double prev_end;
} Dispatch;

static int dispatch_task(void *ctx, void *job, Err *e)
{
    Dispatch *p = ctx;
    return p->ops->compute_empty(p->d, *(const int *)job, e);
}

static int dispatch_ended(void *ctx, void *job, Err *e)
{
    Dispatch *p = ctx;
    int slot = *(const int *)job;
    return p->ops->compute_ended(p->d, slot, &p->span[slot], e);
}

static void dispatch_close(Dispatch *p)
{
    lane_free(&p->lane);
    if (p->bell_ok)
        lane_bell_free(&p->bell);
    if (p->d)
        p->ops->destroy(p->d);
}

/* The next task's end, the lane kept full; *gap_s from the previous task's end to this one's
 * start as the trace records them (device_span_within, then device_span_after, as pipe_exec.c
 * places a task issued behind another); -1 for the first. */
static int dispatch_one(Dispatch *p, double *gap_s, Err *e)
{
    while (lane_in_flight(&p->lane) < lane_depth(&p->lane)) {
        lane_post(&p->lane, &p->slots[p->posted % DEVICE_SLOTS]);
        p->posted++;
    }
    while (!lane_poll(&p->lane))
        device_wait_bell(p->ops, &p->bell, &p->seen, 10e-3);
    if (p->lane.rc) {
        *e = p->lane.err;
        return p->lane.rc;
    }
    double t0 = p->lane.start_s, t1 = p->lane.end_s;
    device_span_within(&p->span[*(const int *)p->lane.job], &t0, &t1);
    double prev_end = p->prev_end;
    device_span_after(&p->prev_end, &t0, &t1);
    *gap_s = prev_end > 0 ? t0 - prev_end : -1;
    return 0;
}

/* The device (the smallest preset, at its own weight type) and the lane. */
static int dispatch_open(Dispatch *p, const DeviceOps *ops, Err *e)
{
    *p = (Dispatch){.ops = ops};
    ModelConfig c = *model_preset_find("gpt2-tiny");
    c.dtype = ops->weight_type;
    int rc = ops->create(&p->d, &c, 1, 64, NULL, e);
    if (!rc) {
        lane_bell_init(&p->bell);
        p->bell_ok = true;
        rc = lane_init(&p->lane, dispatch_task, p, &p->bell, e);
    }
    if (!rc)
        lane_set_queue(&p->lane, dispatch_ended);
    for (int i = 0; i < DEVICE_SLOTS; i++)
        p->slots[i] = i;
    if (rc)
        dispatch_close(p);
    return rc;
}

/* dispatch_open, then DISPATCH_WARMUP tasks (the first ones pay for the device's and the
 * lane's set-up); closed again on a failure. */
static int dispatch_start(Dispatch *p, const DeviceOps *ops, Err *e)
{
    int rc = dispatch_open(p, ops, e);
    double gap;
    for (int i = 0; !rc && i < DISPATCH_WARMUP; i++)
        if ((rc = dispatch_one(p, &gap, e)))
            dispatch_close(p);
    return rc;
}

/* The gaps x[0..n) in seconds summarised in microseconds (x reordered). */
static void gap_stat(double *x, int n, Stat *s, double *mean_us)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += x[i] *= 1e6;
    *mean_us = sum / n;
    profile_stat(x, n, s);
}

int profile_dispatch(const DeviceOps *ops, int n, Stat *gap_us, double *mean_us, Err *e)
{
    if (n < 2)
        return err_set(e, -EINVAL, "at least 2 tasks");
    double *x = malloc((size_t)n * sizeof *x), gap;
    if (!x)
        return err_set(e, -ENOMEM, "out of memory");
    Dispatch p;
    int rc = dispatch_start(&p, ops, e);
    bool opened = !rc;
    p.prev_end = 0;
    for (int i = 0; !rc && i < n; i++) {
        rc = dispatch_one(&p, &gap, e);
        if (i)
            x[i - 1] = gap;
    }
    if (opened)
        dispatch_close(&p);
    if (!rc)
        gap_stat(x, n - 1, gap_us, mean_us);
    free(x);
    return rc;
}

int profile_dispatch_load(void *ctx, const ProfileLoadControl *lc, double *load_GBps, Err *e)
{
    DispatchLoad *dl = ctx;
    *load_GBps = 0;
    size_t cap = 4096;
    int n = 0;
    double *x = malloc(cap * sizeof *x), gap;
    if (!x)
        return err_set(e, -ENOMEM, "out of memory");
    Dispatch p;
    int rc = dispatch_start(&p, dl->ops, e);
    bool opened = !rc;
    while (!rc && !lc->stopped(lc->token)) {
        bool counting = lc->counting(lc->token);
        rc = dispatch_one(&p, &gap, e);
        if (rc || !counting || !lc->counting(lc->token) || n == DISPATCH_MAX_GAPS)
            continue;
        if ((size_t)n == cap) {
            double *y = realloc(x, 2 * cap * sizeof *x);
            if (!y) {
                rc = err_set(e, -ENOMEM, "out of memory");
                break;
            }
            x = y, cap *= 2;
        }
        x[n++] = gap;
    }
    if (opened)
        dispatch_close(&p);
    if (!rc) {
        if (n < 2)
            rc = err_set(e, -EAGAIN, "no GPU tasks ran while the Adam task was timed");
        else
            gap_stat(x, n, &dl->gap_us, &dl->mean_us);
    }
    free(x);
    return rc;
}

/* The most the store moved in one of its three tests, GB/s. */
static double most_moved(const SsdProfile *p)
{
    double both = p->duplex_read_GBps.median + p->duplex_write_GBps.median;
    double one = fmax(p->read_GBps.median, p->write_GBps.median);
    return fmax(one, both);
}

double profile_ssd_keys(const SsdProfile *all, const SsdProfile *one, int n_dirs, Hardware *hw)
{
    hw->ssd_count = n_dirs;
    hw->ssd_read_GBps = all->read_GBps.median / n_dirs;
    hw->ssd_write_GBps = all->write_GBps.median / n_dirs;
    double duplex = all->duplex_read_GBps.median / all->read_GBps.median +
                    all->duplex_write_GBps.median / all->write_GBps.median;
    hw->ssd_duplex = fmin(fmax(duplex, 1), 2);
    /* the rates together themselves: the device splits its bytes about evenly between the
     * directions (the pipeline's traces: 1.15 + 1.16 and 1.38 + 1.40 GB/s), where duplex's
     * equal time shares gave reads 1.0 and writes 1.55, starving the reads */
    hw->ssd_read_bidir_GBps = fmin(all->duplex_read_GBps.median, all->read_GBps.median) / n_dirs;
    hw->ssd_write_bidir_GBps = fmin(all->duplex_write_GBps.median, all->write_GBps.median) /
                               n_dirs;
    double ratio = n_dirs > 1 && one ? most_moved(all) / (n_dirs * most_moved(one)) : 1;
    hw->ssd_host_GBps = ratio < PROFILE_HOST_BOUND ? most_moved(all) : 0;
    return ratio;
}

int profile_gemm_shapes(int64_t max_params, int tokens, GemmShape *out, int max)
{
    int n = 0;
    for (int i = 0; i < model_preset_count(); i++) {
        const ModelConfig *c = model_preset_at(i);
        if (model_param_count(c) > max_params)
            continue;
        /* sequences of up to 1024 tokens (the paper's), as many as make `tokens` */
        int seq = c->max_seq < 1024 ? c->max_seq : 1024;
        Graph g = {0};
        Err e;
        if (tokens % seq || graph_init(&g, c, tokens / seq, seq, &e))
            continue;
        for (int o = 0; o < g.n_ops; o++) {
            const Op *op = &g.ops[o];
            if (op->kind != OP_GEMM)
                continue;
            GemmShape s = {(int)op->m, (int)op->n, (int)op->k};
            /* the executors run the head over the vocabulary's largest multiple of
             * MODEL_VOCAB_ALIGN and the few left apart (model.h): the first is its time */
            if (op->id == EDGE_HEAD && s.n >= MODEL_VOCAB_ALIGN)
                s.n = s.n / MODEL_VOCAB_ALIGN * MODEL_VOCAB_ALIGN;
            bool seen = false;
            for (int j = 0; j < n && !seen; j++)
                seen = out[j].m == s.m && out[j].n == s.n && out[j].k == s.k;
            if (!seen && n < max)
                out[n++] = s;
        }
        graph_free(&g);
    }
    return n;
}

int profile_gemm_curve(const double *size, const double *eff, int n, HwCurve *c)
{
    if (n <= 0)
        return -EINVAL;
    /* octaves of size, lowest first: the points of each, summarised by their medians */
    double lo = size[0];
    for (int i = 1; i < n; i++)
        if (size[i] < lo)
            lo = size[i];
    double s_oct[n], e_oct[n];
    c->n = 0;
    for (int oct = 0; c->n < HW_CURVE_MAX; oct++) {
        double from = lo * exp2(oct), to = from * 2;
        int k = 0;
        for (int i = 0; i < n; i++)
            if (size[i] >= from && size[i] < to) {
                s_oct[k] = size[i];
                e_oct[k++] = eff[i];
            }
        if (k) {
            gsl_sort(s_oct, 1, (size_t)k);
            gsl_sort(e_oct, 1, (size_t)k);
            c->dim[c->n] = gsl_stats_median_from_sorted_data(s_oct, 1, (size_t)k);
            c->eff[c->n++] = gsl_stats_median_from_sorted_data(e_oct, 1, (size_t)k);
        }
        bool more = false;
        for (int i = 0; i < n; i++)
            more |= size[i] >= to;
        if (!more)
            break;
    }
    return 0;
}

int profile_attn_curve(const int *head_size, const double *eff, int n, HwCurve *c)
{
    if (n <= 0)
        return -EINVAL;
    double e_of[n];
    c->n = 0;
    /* the head sizes in increasing order: the least above the last one taken, each time */
    for (int last = 0; c->n < HW_CURVE_MAX;) {
        int next = 0, k = 0;
        for (int i = 0; i < n; i++)
            if (head_size[i] > last && (next == 0 || head_size[i] < next))
                next = head_size[i];
        if (next == 0)
            break;
        for (int i = 0; i < n; i++)
            if (head_size[i] == next)
                e_of[k++] = eff[i];
        gsl_sort(e_of, 1, (size_t)k);
        c->dim[c->n] = next;
        c->eff[c->n++] = gsl_stats_median_from_sorted_data(e_of, 1, (size_t)k);
        last = next;
    }
    return 0;
}

int profile_mem_fit(const double *bytes, const double *seconds, int n, double beyond,
                    double *GBps, double *launch_us)
{
    if (n < 2)
        return -EINVAL;
    double xb[n], tb[n];
    int big = 0;
    for (int i = 0; i < n; i++) {
        if (!(seconds[i] > 0))
            return -EINVAL;
        if (bytes[i] >= beyond)
            xb[big] = bytes[i], tb[big++] = seconds[i];
    }
    if (big < 2)
        return -EINVAL;
    double c0, c1, cov00, cov01, cov11, sumsq;
    gsl_fit_linear(xb, 1, tb, 1, (size_t)big, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    if (!(c1 > 0))
        return -EINVAL;
    double sum = 0, wsum = 0; /* the small points' intercept under that slope */
    for (int i = 0; i < n; i++) {
        if (bytes[i] >= beyond)
            continue;
        double w = 1 / (seconds[i] * seconds[i]);
        sum += w * (seconds[i] - bytes[i] * c1), wsum += w;
    }
    double l = wsum > 0 ? sum / wsum : c0;
    *GBps = 1e-9 / c1;
    *launch_us = l > 0 ? l * 1e6 : 0;
    return 0;
}
