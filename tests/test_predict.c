/* Check suite for sim/predict on the shipped presets: Fuyou against ZeRO-Infinity on the paper's
 * 4090 testbed (Fuyou shorter, its optimizer overlapping backward; ZeRO-Infinity's step after
 * backward, its sub-groups one after the other), sanity bounds on the figures fuyou-sim
 * reports, and its cached rates' timeline against the engine on rates worked out each event. */
#include <math.h>

#include "cost.h"
#include "predict.h"
#include "testutil.h"

typedef struct Case {
    Graph g;
    Plan p;
    Prediction pr;
} Case;

static Hardware hw;

static void predict(Case *c, const char *model, int batch, Policy policy)
{
    Err e;
    ck_assert_int_eq(graph_init(&c->g, model_preset_find(model), batch, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&c->p, &c->g, policy, &e), 0);
    /* The paper's setting: weights and optimizer states on the SSDs, checkpoints in CPU memory,
     * everything else recomputed; ZeRO-Infinity with DeepSpeed's defaults. */
    c->p.weights = c->p.optim = TIER_SSD;
    plan_set_all_act(&c->p, ACT_CPU, ACT_RECOMPUTE);
    if (policy == POLICY_ZERO_INFINITY)
        plan_zero_infinity_config(&c->p, &c->g.cfg);
    int rc = predict_run(&c->pr, &c->g, &hw, &c->p, 3, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
}

static void release(Case *c)
{
    predict_free(&c->pr);
    plan_free(&c->p);
    graph_free(&c->g);
}

/* In iteration 1: [first Adam start, last backward GPU end]. */
static void optimizer_vs_backward(const Prediction *pr, double *adam_start, double *bwd_end)
{
    *adam_start = INFINITY;
    *bwd_end = 0;
    for (int t = 0; t < pr->sched.n_tasks; t++) {
        const Task *task = &pr->sched.tasks[t];
        if (task->iter != 1)
            continue;
        if (task->kind == TASK_ADAM)
            *adam_start = fmin(*adam_start, pr->res.start[t]);
        if (task->kind == TASK_BWD)
            *bwd_end = fmax(*bwd_end, pr->res.end[t]);
    }
}

/* Task id (a format with the sub-group) of iteration 1 in the prediction. */
static int task_of(const Prediction *pr, const char *fmt, int group)
{
    char id[SCHED_ID_MAX];
    snprintf(id, sizeof id, fmt, group);
    int t = sched_find(&pr->sched, 1, id);
    ck_assert_msg(t >= 0, "no %s", id);
    return t;
}

/* ZeRO-Infinity's step as DeepSpeed runs it without pipelining: in the simulated timeline no
 * sub-group's read starts before the previous one's states are written, and Adam runs after
 * its gradients are read back. */
static void check_zero_step(const Prediction *pr, int groups)
{
    for (int s = groups - 1; s >= 0; s--) {
        int rd = task_of(pr, "SSDR.g%d.state", s), gr = task_of(pr, "SSDR.g%d.grad", s);
        ck_assert_double_ge(pr->res.start[task_of(pr, "ADAM.g%d", s)], pr->res.end[gr]);
        if (s < groups - 1)
            ck_assert_double_ge(pr->res.start[rd],
                                pr->res.end[task_of(pr, "SSDW.g%d.state", s + 1)]);
    }
}

static void compare(const char *model, int batch)
{
    Case fy, zi;
    predict(&fy, model, batch, POLICY_FUYOU);
    predict(&zi, model, batch, POLICY_ZERO_INFINITY);
    printf("%s batch %d on 4090: fuyou %.3f s, zero-infinity %.3f s\n", model, batch,
           fy.pr.iter_s, zi.pr.iter_s);
    ck_assert_double_lt(fy.pr.iter_s, zi.pr.iter_s);
    double adam, bwd;
    optimizer_vs_backward(&fy.pr, &adam, &bwd);
    ck_assert_msg(adam < bwd, "fuyou's optimizer should start (%g) before backward ends (%g)",
                  adam, bwd);
    optimizer_vs_backward(&zi.pr, &adam, &bwd);
    ck_assert_msg(adam >= bwd, "zero-infinity's optimizer started (%g) before backward ended "
                  "(%g)", adam, bwd);
    check_zero_step(&zi.pr, plan_subgroup_count(&zi.p));
    /* fuyou's tail (updated last, loaded first by the next forward) writes its weights before
     * its states */
    int tail = plan_subgroup_count(&fy.p) - 1;
    ck_assert_double_le(fy.pr.res.end[task_of(&fy.pr, "SSDW.g%d.w", tail)],
                        fy.pr.res.start[task_of(&fy.pr, "SSDW.g%d.state", tail)]);
    release(&fy);
    release(&zi);
}

START_TEST(fuyou_vs_zero_infinity_13b)
{
    compare("gpt3-13b", 32);
}
END_TEST

START_TEST(fuyou_vs_zero_infinity_175b)
{
    compare("gpt3-175b", 8);
}
END_TEST

START_TEST(report_bounds)
{
    Case c;
    predict(&c, "gpt3-6.7b", 16, POLICY_FUYOU);
    const Prediction *pr = &c.pr;
    /* never faster than the GPU's peak, and never busier than the iteration is long */
    ck_assert_double_le(pr->hw_flops / pr->iter_s, hw.gpu_bf16_TFLOPS * 1e12);
    ck_assert_double_lt(pr->model_flops, pr->hw_flops); /* recomputation adds work */
    for (int r = 0; r < RES_COUNT; r++)
        ck_assert_double_le(pr->busy_s[r], pr->iter_s * (1 + 1e-9));
    ck_assert_double_ge(pr->busy_s[pr->bottleneck], pr->busy_s[RES_H2D]);
    ck_assert_double_eq(pr->tokens, 16 * 1024);
    /* steady state is not slower than the cold first iteration */
    ck_assert_double_le(pr->iter_s, pr->first_iter_s * (1 + 1e-9));
    ck_assert_uint_eq(pr->overflow, 0);
    release(&c);
}
END_TEST

static double work_uncached(void *ctx, const Task *t)
{
    return cost_task_work(ctx, t);
}

static void rates_uncached(void *ctx, const Task *const running[RES_COUNT],
                           double rate[RES_COUNT])
{
    cost_task_rates(ctx, running, rate);
}

static double lead_uncached(void *ctx, const Task *t)
{
    return cost_task_lead_s(ctx, t);
}

/* predict_run's rates come through a CostRateCache: its timeline is the one of the cost model
 * working every rate out at every event, bit for bit (two micro-batches, so summing gradient
 * copies beside the Adam; weights and states on SSD). */
START_TEST(rate_cache_same_timeline)
{
    Case c;
    Err e;
    ck_assert_int_eq(graph_init(&c.g, model_preset_find("gpt3-1.3b"), 4, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&c.p, &c.g, POLICY_FUYOU, &e), 0);
    c.p.weights = c.p.optim = TIER_SSD;
    c.p.n_micro = 2;
    plan_set_all_act(&c.p, ACT_CPU, ACT_RECOMPUTE);
    ck_assert_int_eq(predict_run(&c.pr, &c.g, &hw, &c.p, 2, &e), 0);
    CostModel cm = {.hw = &hw, .g = &c.g};
    SimModel m = {&cm, work_uncached, rates_uncached, lead_uncached};
    SimResult r;
    ck_assert_int_eq(sim_run(&c.pr.sched, &m, false, &r, &e), 0);
    ck_assert_int_eq(r.events, c.pr.res.events);
    for (int t = 0; t < r.n_tasks; t++) {
        ck_assert_msg(r.start[t] == c.pr.res.start[t], "%s", c.pr.sched.tasks[t].id);
        ck_assert_msg(r.end[t] == c.pr.res.end[t], "%s", c.pr.sched.tasks[t].id);
    }
    sim_result_free(&r);
    release(&c);
}
END_TEST

int main(void)
{
    Err e;
    if (hw_load("4090.ini", NULL, 0, &hw, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    Suite *s = suite_create("predict");
    TCase *tc = tcase_create("predict");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, fuyou_vs_zero_infinity_13b);
    tcase_add_test(tc, fuyou_vs_zero_infinity_175b);
    tcase_add_test(tc, report_bounds);
    tcase_add_test(tc, rate_cache_same_timeline);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    hw_free(&hw);
    return rc;
}
