/* Check suite for the SSD tier's checksums in exec/pipeline, on the CPU device: a bit of the
 * optimizer states flipped on the SSD between a write and a read ends the run naming the read,
 * the file and the offset; a checkpoint's read of a flipped sub-group names it; the error names
 * the chunk that differs. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "pipe_mem.h"
#include "pipeline_testutil.h"
#include "testutil.h"

/* The CPU device, but as compute task flip.task of iteration flip.iter starts, bit 0 of byte
 * flip.at of the SSD tier's file is flipped, as a failing disk or another process would do it
 * between a write and the next read. The flip is counted; the suite asserts on the count. */
static DeviceOps flipping_cpu;
typedef struct Flip {
    int iter, flips;
    char task[SCHED_ID_MAX], path[4096];
    off_t at;
} Flip;
static Flip flip;

/* Flips bit 0 of byte at of the file at path; whether it did. */
static bool flip_bit(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return false;
    unsigned char byte = 0;
    bool done = pread(fd, &byte, 1, at) == 1;
    byte ^= 1;
    done = done && pwrite(fd, &byte, 1, at) == 1;
    close(fd);
    return done;
}

static int compute_after_flip(Device *d, const ComputeCall *c, int slot, Err *e)
{
    if (c->task->iter == flip.iter && !strcmp(c->task->id, flip.task))
        flip.flips += flip_bit(flip.path, flip.at);
    return device_cpu.compute(d, c, slot, e);
}

/* Marks in seen every task that follows task t in the DAG (along successors: after true) or
 * precedes it (along dependencies), t included. */
static void reach(const Schedule *s, const int *first, const int *succ, int t, bool after,
                  bool *seen)
{
    int *stack = malloc((size_t)s->n_tasks * sizeof *stack), n = 0;
    memset(seen, 0, (size_t)s->n_tasks);
    seen[t] = true;
    stack[n++] = t;
    while (n) {
        int u = stack[--n];
        const int *next = after ? succ + first[u] : sched_deps(s, u);
        int k = after ? first[u + 1] - first[u] : s->tasks[u].n_deps;
        for (int i = 0; i < k; i++)
            if (!seen[next[i]]) {
                seen[next[i]] = true;
                stack[n++] = next[i];
            }
    }
    free(stack);
}

/* A compute task that starts after the write w has ended and before the read r is issued: one
 * the DAG orders between them, whatever the lanes' timing. Its index, or -1. */
static int compute_between(const Schedule *s, int w, int r)
{
    int *first, *succ, found = -1;
    ck_assert_int_eq(sched_successors(s, &first, &succ), 0);
    bool *after_w = malloc((size_t)s->n_tasks), *before_r = malloc((size_t)s->n_tasks);
    reach(s, first, succ, w, true, after_w);
    reach(s, first, succ, r, false, before_r);
    for (int t = 0; t < s->n_tasks && found < 0; t++)
        if (s->tasks[t].res == RES_GPU && after_w[t] && before_r[t])
            found = t;
    free(after_w), free(before_r), free(first), free(succ);
    return found;
}

/* Where a sub-group's states lie in the SSD tier's one file, as m put them there (the store
 * allocates deterministically, so every run of the same plan puts them there too). */
typedef struct StateExtent {
    char path[4096];
    uint64_t base, params, chunk; /* [master | m | v] of params values each, from base */
} StateExtent;

static StateExtent state_extent(const PipeMem *m, int group)
{
    StateExtent x = {.base = m->oa.states[m->ooc_index[group]].base,
                     .params = m->oa.params[m->ooc_index[group]],
                     .chunk = m->st.cfg.chunk_bytes};
    snprintf(x.path, sizeof x.path, "%s", m->st.paths[0]);
    return x;
}

/* That a read's error names the file and the offset of the piece (at most one chunk) that
 * holds byte at of the extent. */
static void assert_names_the_piece(const char *msg, const StateExtent *x, uint64_t at)
{
    char want[128];
    snprintf(want, sizeof want, "checksum mismatch at offset %llu ",
             (unsigned long long)(x->base + at / x->chunk * x->chunk));
    tu_assert_contains(msg, x->path);
    tu_assert_contains(msg, want);
}

/* One bit of a sub-group's optimizer states flipped on the SSD between their write in the first
 * iteration and their read in the second is one clear error, -EBADMSG, naming the read (the
 * task, so the sub-group and its states), the file and the offset, and what to do; no step is
 * recorded, so nothing read was used. The flip comes as a compute task starts that the DAG
 * orders after the write and before the read, whatever the lanes' timing. */
START_TEST(flipped_state_bit_is_an_error)
{
    char ssd[] = "/tmp/fuyou-pipe-flip-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(ssd));
    Err e;
    TrainOptions o = opts(2);
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.weights = p.optim = TIER_SSD; /* the weights first in the file, the states after them */
    Schedule s;
    ck_assert_int_eq(sched_build(&s, &g, &p, 2, &e), 0);
    int group = -1, between = -1;
    /* the last sub-group that has one: not the file's first extent, so the offset says more */
    for (int k = plan_subgroup_count(&p) - 1; k >= 0 && between < 0; k--) {
        char w[SCHED_ID_MAX], r[SCHED_ID_MAX];
        snprintf(w, sizeof w, "SSDW.g%d.state", k);
        snprintf(r, sizeof r, "SSDR.g%d.state", k);
        int wi = sched_find(&s, 0, w), ri = sched_find(&s, 1, r);
        ck_assert(wi >= 0 && ri >= 0);
        between = compute_between(&s, wi, ri);
        group = k;
    }
    ck_assert_msg(between >= 0, "no compute task between a state write and its next read");
    /* where the run will put them: the layout of its memory, opened once before */
    PipeMem m;
    WorkPool wp;
    open_mem(&m, &wp, &o, &p, ssd);
    StateExtent x = state_extent(&m, group);
    pipe_mem_free(&m);
    workpool_free(&wp);
    /* a bit of Adam's m, in the middle of the sub-group */
    uint64_t at = 4 * x.params + 4 * (x.params / 2);
    flip = (Flip){.iter = s.tasks[between].iter, .at = (off_t)(x.base + at)};
    snprintf(flip.task, sizeof flip.task, "%s", s.tasks[between].id);
    snprintf(flip.path, sizeof flip.path, "%s", x.path);
    flipping_cpu = device_cpu;
    flipping_cpu.compute = compute_after_flip;
    PipeConfig pc = {.device = &flipping_cpu, .ssd_dirs = {ssd}, .n_ssd_dirs = 1};
    TrainResult res;
    int rc = pipe_train(&o, &p, &pc, &res, NULL, &e);
    ck_assert_int_eq(flip.flips, 1);
    ck_assert_msg(rc == -EBADMSG, "rc %d: %s", rc, e.msg);
    printf("a bit flipped as %s started: %s\n", flip.task, e.msg);
    char want[64];
    snprintf(want, sizeof want, "SSDR.g%d.state (iteration 1): ", group);
    tu_assert_contains(e.msg, want);
    assert_names_the_piece(e.msg, &x, at);
    tu_assert_contains(e.msg, "--resume");
    /* the step that read the flipped bytes is not recorded; the one before it is when it
     * ended before the error (steps are recorded as they end) */
    ck_assert_int_le(res.n_losses, 1);
    free(res.losses);
    sched_free(&s);
    plan_free(&p);
    graph_free(&g);
    tu_rm_tree(ssd);
}
END_TEST

/* The same flip under a checkpoint's read of the states (pipe_mem_read, outside the DAG): the
 * error names the sub-group, the file and the offset, and what to do; no value comes back. */
START_TEST(flipped_state_bit_fails_a_checkpoint_read)
{
    char ssd[] = "/tmp/fuyou-pipe-flip-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(ssd));
    Err e;
    TrainOptions o = opts(1);
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.optim = TIER_SSD;
    PipeMem m;
    WorkPool wp;
    open_mem(&m, &wp, &o, &p, ssd);
    size_t P = n_params(&o);
    float *params = calloc(P, sizeof *params), *got = calloc(P, sizeof *got);
    for (size_t i = 0; i < P; i++)
        params[i] = (float)i;
    ck_assert_msg(pipe_mem_put_state(&m, params, NULL, NULL, &e) == 0, "%s", e.msg);
    int group = m.G - 1, cached = -1;
    StateExtent x = state_extent(&m, group);
    uint64_t n = x.params, at = 4 * n + 4 * (n / 2);
    size_t b0 = m.grp_begin[group];
    /* read back as written: the values, then the flip is an error naming where */
    ck_assert_msg(pipe_mem_read(&m, 0, b0, n, got, &cached, &e) == 0, "%s", e.msg);
    ck_assert(!memcmp(got, params + b0, n * 4));
    ck_assert(flip_bit(x.path, (off_t)(x.base + at)));
    cached = -1;
    memset(got, 0, n * 4);
    ck_assert_int_eq(pipe_mem_read(&m, 1, b0, n, got, &cached, &e), -EBADMSG);
    printf("a checkpoint's read: %s\n", e.msg);
    char want[64];
    snprintf(want, sizeof want, "sub-group %d's optimizer states", group);
    tu_assert_contains(e.msg, want);
    assert_names_the_piece(e.msg, &x, at);
    tu_assert_contains(e.msg, "--resume");
    ck_assert_int_eq(cached, -1);
    for (size_t i = 0; i < n; i++)
        ck_assert(got[i] == 0);
    free(params), free(got);
    pipe_mem_free(&m);
    workpool_free(&wp);
    plan_free(&p);
    graph_free(&g);
    tu_rm_tree(ssd);
}
END_TEST

/* The checksums' bookkeeping on a store striped over two files in chunks of 4 KiB: an extent of
 * chunks 2 to 5 (the last one 100 bytes) reads back as written; a byte changed in its second
 * chunk, or in its short last one, is named by the file that chunk is in (odd chunks: the
 * second), the file's offset and the extent's; one never written is an error of its own. The
 * same on the caller's thread and on a pool's three, which name the first chunk that differs
 * however they split the check. */
START_TEST(sums_name_the_chunk)
{
    enum { C = 4096 };
    WorkPool wp;
    Err e;
    ck_assert_int_eq(workpool_init(&wp, 3, &e), 0);
    for (int pooled = 0; pooled < 2; pooled++) {
        WorkPool *pool = pooled ? &wp : NULL;
        PipeMem m = {.n_sums = 8};
        m.st.cfg.chunk_bytes = C;
        m.st.cfg.n_dirs = 2;
        snprintf(m.st.paths[0], sizeof m.st.paths[0], "/ssd0/fuyou.store");
        snprintf(m.st.paths[1], sizeof m.st.paths[1], "/ssd1/fuyou.store");
        uint32_t sums[8];
        uint8_t set[8] = {0};
        m.sums = sums, m.sum_set = set;
        StoreTensor t = {.base = 2 * C, .bytes = 3 * C + 100};
        uint8_t *buf = malloc(t.bytes);
        for (size_t i = 0; i < t.bytes; i++)
            buf[i] = (uint8_t)(i * 7 + 1);
        ck_assert_int_eq(pipe_mem_sums_check(&m, &t, buf, pool, &e), -EIO);
        tu_assert_contains(e.msg, "/ssd0/fuyou.store: the 4096 bytes at offset 4096 were read");
        pipe_mem_sums_take(&m, &t, buf);
        ck_assert_int_eq(pipe_mem_sums_check(&m, &t, buf, pool, &e), 0);
        buf[C + 5] ^= 0x10;
        buf[3 * C + 99] ^= 1; /* a later chunk differs too: the first is named */
        ck_assert_int_eq(pipe_mem_sums_check(&m, &t, buf, pool, &e), -EBADMSG);
        tu_assert_contains(e.msg, "/ssd1/fuyou.store: checksum mismatch at offset 4096 (4096 "
                                  "bytes, from byte 4096 of the extent)");
        buf[C + 5] ^= 0x10;
        ck_assert_int_eq(pipe_mem_sums_check(&m, &t, buf, pool, &e), -EBADMSG);
        tu_assert_contains(e.msg, "/ssd1/fuyou.store: checksum mismatch at offset 8192 (100 "
                                  "bytes, from byte 12288 of the extent)");
        free(buf);
    }
    workpool_free(&wp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline_sums");
    TCase *tc = tcase_create("cpu device");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, flipped_state_bit_is_an_error);
    tcase_add_test(tc, flipped_state_bit_fails_a_checkpoint_read);
    tcase_add_test(tc, sums_name_the_chunk);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
