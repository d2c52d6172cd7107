/* Check suite for sim/engine: hand-computed cases with exact times (one through the cost model's
 * rates: host memory shared), deadlock detection, and invariants on random DAGs (servers never
 * overlap, dependencies hold, shared bandwidth is never exceeded, every task gets exactly its
 * work, makespan bounds). */
#include <gsl/gsl_rng.h>
#include <math.h>

#include "cost.h"
#include "engine.h"
#include "testutil.h"

/* ---- hand-built schedules ------------------------------------------------------------------ */

typedef struct Mini {
    Schedule s;
    int deps[4096];
    double work[1024];
} Mini;

static Mini mini;

static int mk(Resource r, double work, int priority)
{
    Schedule *s = &mini.s;
    int t = s->n_tasks++;
    s->tasks[t] = (Task){.res = r, .kind = TASK_COPY, .priority = priority,
                         .dep_first = s->n_deps, .op = -1};
    snprintf(s->tasks[t].id, sizeof s->tasks[t].id, "t%d", t);
    mini.work[t] = work;
    return t;
}

/* Dependencies must be added right after their task (contiguous layout). */
static void on(int t, int d)
{
    Schedule *s = &mini.s;
    ck_assert_int_eq(s->tasks[t].dep_first + s->tasks[t].n_deps, s->n_deps);
    s->deps[s->n_deps++] = d;
    s->tasks[t].n_deps++;
}

static void mini_reset(void)
{
    static Task tasks[1024];
    memset(&mini, 0, sizeof mini);
    mini.s.tasks = tasks;
    mini.s.deps = mini.deps;
    mini.s.iters = 1;
}

/* Rates: gpu and cpu 1; h2d 50, d2h 40 alone, 25 and 20 together; SSD read 100, write 50 alone,
 * duplex 1 (together each at half). */
static double mini_work(void *ctx, const Task *t)
{
    (void)ctx;
    return mini.work[t - mini.s.tasks];
}

static void mini_rates(void *ctx, const Task *const running[RES_COUNT], double rate[RES_COUNT])
{
    (void)ctx;
    double alone[RES_COUNT] = {1, 50, 40, 100, 50, 1};
    memcpy(rate, alone, sizeof alone);
    if (running[RES_H2D] && running[RES_D2H])
        rate[RES_H2D] = 25, rate[RES_D2H] = 20;
    if (running[RES_SSD_READ] && running[RES_SSD_WRITE])
        rate[RES_SSD_READ] = 50, rate[RES_SSD_WRITE] = 25;
}

static const SimModel mini_model = {NULL, mini_work, mini_rates, NULL};

static void run_mini(SimResult *r)
{
    Err e;
    int rc = sim_run(&mini.s, &mini_model, true, r, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
}

#define EXACT(x, want) ck_assert_double_eq_tol((x), (want), 1e-12)

START_TEST(chain)
{
    mini_reset();
    int a = mk(RES_GPU, 1, 0);
    int b = mk(RES_H2D, 100, 0);
    on(b, a);
    int c = mk(RES_GPU, 3, 0);
    on(c, b);
    SimResult r;
    run_mini(&r);
    EXACT(r.start[b], 1);
    EXACT(r.end[b], 3); /* 100 B at 50 B/s */
    EXACT(r.start[c], 3);
    EXACT(r.makespan, 6);
    EXACT(r.busy_s[RES_GPU], 4);
    EXACT(r.busy_s[RES_H2D], 2);
    sim_result_free(&r);
}
END_TEST

/* A lead of 0.5 s before every GPU task: the GPU held, not busy; its work starts after it. The
 * H2D copy beside the second GPU task runs at its rate throughout. */
static double gpu_lead(void *ctx, const Task *t)
{
    (void)ctx;
    return t->res == RES_GPU ? 0.5 : 0;
}

START_TEST(lead_before_work)
{
    mini_reset();
    int a = mk(RES_GPU, 1, 0);
    int b = mk(RES_GPU, 2, 0);
    on(b, a);
    int c = mk(RES_H2D, 100, 0);
    on(c, a);
    SimModel m = mini_model;
    m.lead = gpu_lead;
    SimResult r;
    Err e;
    ck_assert_msg(sim_run(&mini.s, &m, false, &r, &e) == 0, "%s", e.msg);
    EXACT(r.start[a], 0.5);
    EXACT(r.end[a], 1.5);
    EXACT(r.start[b], 2); /* ready at 1.5, its lead, then 2 s of work */
    EXACT(r.end[b], 4);
    EXACT(r.start[c], 1.5); /* no lead: 100 B at 50 B/s */
    EXACT(r.end[c], 3.5);
    EXACT(r.busy_s[RES_GPU], 3);
    EXACT(r.makespan, 4);
    sim_result_free(&r);
}
END_TEST

START_TEST(fork_join)
{
    mini_reset();
    int a = mk(RES_GPU, 1, 0);
    int b = mk(RES_CPU_ADAM, 2, 0);
    on(b, a);
    int c = mk(RES_SSD_READ, 300, 0);
    on(c, a);
    int d = mk(RES_GPU, 0.5, 0);
    on(d, b);
    on(d, c);
    SimResult r;
    run_mini(&r);
    EXACT(r.start[b], 1);
    EXACT(r.start[c], 1);
    EXACT(r.end[b], 3);
    EXACT(r.end[c], 4); /* 300 B at 100 B/s */
    EXACT(r.start[d], 4);
    EXACT(r.makespan, 4.5);
    sim_result_free(&r);
}
END_TEST

/* A read and a write share the SSD (duplex 1): each at half its rate while both run. */
START_TEST(shared_ssd)
{
    mini_reset();
    int rd = mk(RES_SSD_READ, 100, 0);
    int wr = mk(RES_SSD_WRITE, 100, 0);
    SimResult r;
    run_mini(&r);
    EXACT(r.end[rd], 2);  /* 100 B at 50 B/s */
    EXACT(r.end[wr], 3);  /* 50 B in the first 2 s at 25 B/s, the other 50 at 50 B/s */
    ck_assert_int_eq(r.n_segments, 2);
    EXACT(r.segments[0].rate[RES_SSD_WRITE], 25);
    EXACT(r.segments[1].rate[RES_SSD_WRITE], 50);
    sim_result_free(&r);
}
END_TEST

/* PCIe: a D2H that starts in the middle of an H2D slows it from then on. */
START_TEST(bidirectional_pcie)
{
    mini_reset();
    int h = mk(RES_H2D, 100, 0);       /* alone 50 B/s */
    int g = mk(RES_GPU, 1, 0);
    int d = mk(RES_D2H, 40, 0);        /* starts at 1 */
    on(d, g);
    SimResult r;
    run_mini(&r);
    /* t in [0,1]: h2d moves 50 B. Then both: d2h at 20 B/s needs 2 s, h2d at 25 B/s moves the
     * other 50 B in 2 s: both end at 3. */
    EXACT(r.end[h], 3);
    EXACT(r.end[d], 3);
    sim_result_free(&r);
}
END_TEST

static double cost_work(void *ctx, const Task *t)
{
    return cost_task_work(ctx, t);
}

static void cost_rates_cb(void *ctx, const Task *const running[RES_COUNT],
                          double rate[RES_COUNT])
{
    cost_task_rates(ctx, running, rate);
}

/* The engine on the cost model's rates (cost.h): an Adam of 2 G params (1 s alone at 2 G/s, 60
 * GB/s of host memory) beside an SSD read and write of 10 GB each (20 GB/s each alone, full
 * duplex). Host memory gives 80 of the 100 GB/s asked: all at 0.8 until the copies end at
 * 10 / 16 = 0.625 s, by when the Adam has done 1 G params; the other 1 G alone takes 0.5 s. */
START_TEST(host_memory_through_cost)
{
    const char *sets[] = {"cpu.mem_GBps=80", "cpu.adam_Gparams_per_s=2", "ssd.count=2",
                          "ssd.read_GBps=10", "ssd.write_GBps=10", "ssd.duplex_factor=2",
                          "ssd.latency_us=0"};
    Hardware hw;
    Err e;
    ck_assert_int_eq(hw_load("4090.ini", sets, 7, &hw, &e), 0);
    CostModel cm = {.hw = &hw};
    const SimModel model = {&cm, cost_work, cost_rates_cb, NULL};
    mini_reset();
    int adam = mk(RES_CPU_ADAM, 0, 0), rd = mk(RES_SSD_READ, 0, 0), wr = mk(RES_SSD_WRITE, 0, 0);
    mini.s.tasks[adam].kind = TASK_ADAM;
    mini.s.tasks[adam].params = 2000000000;
    mini.s.tasks[rd].bytes = mini.s.tasks[wr].bytes = 10e9;
    SimResult r;
    ck_assert_msg(sim_run(&mini.s, &model, true, &r, &e) == 0, "%s", e.msg);
    EXACT(r.end[rd], 0.625);
    EXACT(r.end[wr], 0.625);
    EXACT(r.end[adam], 1.125);
    ck_assert_int_eq(r.n_segments, 2);
    EXACT(r.segments[0].rate[RES_CPU_ADAM] / 1e9, 1.6);
    EXACT(r.segments[1].rate[RES_CPU_ADAM] / 1e9, 2);
    sim_result_free(&r);
    hw_free(&hw);
}
END_TEST

/* Two weight buffers: load 2 may not start before compute 0 has released its buffer. */
START_TEST(buffer_limited_prefetch)
{
    mini_reset();
    int l[3], c[3];
    for (int i = 0; i < 3; i++) {
        l[i] = mk(RES_H2D, 50, 0); /* 1 s each */
        if (i >= 2)
            on(l[i], c[i - 2]);
        c[i] = mk(RES_GPU, 2, 0);
        on(c[i], l[i]);
        if (i > 0)
            on(c[i], c[i - 1]);
    }
    SimResult r;
    run_mini(&r);
    EXACT(r.start[l[1]], 1);
    EXACT(r.end[c[0]], 3);
    EXACT(r.start[l[2]], 3); /* without the buffer limit it would have started at 2 */
    EXACT(r.start[c[1]], 3);
    EXACT(r.start[c[2]], 5);
    EXACT(r.makespan, 7);
    sim_result_free(&r);
}
END_TEST

/* Among ready tasks of one server, lower priority values go first, then earlier ready times. */
START_TEST(priorities)
{
    mini_reset();
    int first = mk(RES_H2D, 50, 0);
    int low = mk(RES_H2D, 50, 3);
    int high = mk(RES_H2D, 50, 1);
    SimResult r;
    run_mini(&r);
    EXACT(r.start[first], 0);
    EXACT(r.start[high], 1);
    EXACT(r.start[low], 2);
    sim_result_free(&r);
}
END_TEST

START_TEST(deadlock)
{
    mini_reset();
    int a = mk(RES_GPU, 1, 0);
    int b = mk(RES_GPU, 1, 0);
    on(b, 2);
    int c = mk(RES_GPU, 1, 0);
    on(c, b);
    (void)a;
    SimResult r;
    Err e;
    ck_assert_int_eq(sim_run(&mini.s, &mini_model, false, &r, &e), -EDEADLK);
    tu_assert_contains(e.msg, "2 tasks never ran");
    tu_assert_contains(e.msg, "t1");
}
END_TEST

/* ---- random DAGs ------------------------------------------------------------------------- */

static double alone_rate(Resource r)
{
    const Task *idle[RES_COUNT] = {NULL};
    double rate[RES_COUNT];
    mini_rates(NULL, idle, rate);
    return rate[r];
}

static void check_invariants(const SimResult *r)
{
    const Schedule *s = &mini.s;
    int n = s->n_tasks;
    const double eps = 1e-9;
    /* dependencies hold */
    for (int t = 0; t < n; t++)
        for (int i = 0; i < s->tasks[t].n_deps; i++)
            ck_assert_double_ge(r->start[t], r->end[sched_deps(s, t)[i]] - eps);
    /* a server never runs two tasks at once */
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (s->tasks[a].res == s->tasks[b].res && r->end[a] > r->start[a] &&
                r->end[b] > r->start[b])
                ck_assert_msg(r->end[a] <= r->start[b] + eps || r->end[b] <= r->start[a] + eps,
                              "t%d [%g,%g] overlaps t%d [%g,%g]", a, r->start[a], r->end[a], b,
                              r->start[b], r->end[b]);
    /* shared bandwidth is never exceeded, and each task receives exactly its work */
    double got[1024] = {0};
    for (int i = 0; i < r->n_segments; i++) {
        const RateSegment *g = &r->segments[i];
        ck_assert_double_le(g->rate[RES_SSD_READ] * g->busy[RES_SSD_READ] / 100 +
                                g->rate[RES_SSD_WRITE] * g->busy[RES_SSD_WRITE] / 50, 1 + eps);
        ck_assert_double_le(g->rate[RES_H2D] * g->busy[RES_H2D] / 50, 1 + eps);
        for (int t = 0; t < n; t++) {
            double lo = fmax(g->t0, r->start[t]), hi = fmin(g->t1, r->end[t]);
            if (hi > lo)
                got[t] += (hi - lo) * g->rate[s->tasks[t].res];
        }
    }
    for (int t = 0; t < n; t++)
        ck_assert_double_eq_tol(got[t], mini.work[t], 1e-6 * (1 + mini.work[t]));
    /* makespan bounds: every resource's busy time and the critical path at alone rates */
    double finish[1024], cp = 0;
    for (int t = 0; t < n; t++) {
        double ready = 0;
        for (int i = 0; i < s->tasks[t].n_deps; i++)
            ready = fmax(ready, finish[sched_deps(s, t)[i]]);
        finish[t] = ready + mini.work[t] / alone_rate(s->tasks[t].res);
        cp = fmax(cp, finish[t]);
    }
    for (int k = 0; k < RES_COUNT; k++)
        ck_assert_double_ge(r->makespan, r->busy_s[k] - eps);
    ck_assert_double_ge(r->makespan, cp - eps);
}

START_TEST(random_dags)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    unsigned long seed = 20261129;
    gsl_rng_set(rng, seed);
    printf("random_dags: gsl_rng mt19937 seed %lu\n", seed);
    for (int trial = 0; trial < 60; trial++) {
        mini_reset();
        int n = 20 + (int)gsl_rng_uniform_int(rng, 180);
        for (int t = 0; t < n; t++) {
            Resource res = (Resource)gsl_rng_uniform_int(rng, RES_COUNT);
            double work = gsl_rng_uniform(rng) < 0.05 ? 0 : 0.1 + 10 * gsl_rng_uniform(rng);
            if (res != RES_GPU && res != RES_CPU_ADAM)
                work *= 50;
            mk(res, work, (int)gsl_rng_uniform_int(rng, 3));
            int nd = t ? (int)gsl_rng_uniform_int(rng, 4) : 0;
            int last = -1;
            for (int i = 0; i < nd; i++) {
                int d = (int)gsl_rng_uniform_int(rng, (unsigned long)t);
                if (d > last) /* keep deps sorted and unique */
                    on(t, last = d);
            }
        }
        SimResult r;
        run_mini(&r);
        check_invariants(&r);
        sim_result_free(&r);
    }
    gsl_rng_free(rng);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, chain);
    tcase_add_test(tc, lead_before_work);
    tcase_add_test(tc, fork_join);
    tcase_add_test(tc, shared_ssd);
    tcase_add_test(tc, bidirectional_pcie);
    tcase_add_test(tc, buffer_limited_prefetch);
    tcase_add_test(tc, priorities);
    tcase_add_test(tc, host_memory_through_cost);
    tcase_add_test(tc, deadlock);
    tcase_add_test(tc, random_dags);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
