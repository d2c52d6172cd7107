/* Check suite for costmodel/closed and costmodel/planner: the closed form's equations on a
 * hand-checkable case, the priced closed form (ClosedPrices) against it bit for bit, the
 * ladder's order, the exactness of the minimisation against a full scan, memory fitting, a
 * corner of the planner grid (regret within 2% of a fine sweep), the options binding, and the
 * GPU sub-group counts searched against every count.
 * The full grid runs as a benchmark (bench_planner) and its distributions go in notes. */
#include <errno.h>
#include <math.h>

#include "gpt2_arch.h"
#include "plan_args.h"
#include "planner_grid.h"
#include "predict.h"
#include "testutil.h"

static Hardware hw;
static Graph g;
static Plan p;

static void setup_case(const char *hwname, const char *model, int batch)
{
    Err e;
    ck_assert_int_eq(hw_load(hwname, NULL, 0, &hw, &e), 0);
    ck_assert_int_eq(graph_init(&g, model_preset_find(model), batch, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
}

static void teardown_case(void)
{
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
}

/* All on the GPU with nothing to copy: the closed form is the GPU's op times, each task's
 * dispatch (h200.ini's task_us) with it, plus the sub-groups' AdamW on the GPU: the tail's
 * after backward, the others' in it. */
START_TEST(closed_form_all_gpu)
{
    setup_case("h200.ini", "gpt3-1.3b", 2);
    p.weights = p.optim = TIER_GPU;
    plan_set_all_act(&p, ACT_GPU, ACT_GPU);
    ClosedForm cf;
    cost_closed_form(&hw, &g, &p, &cf);
    double fwd = 0, bwd = 0, lead = hw.gpu_task_us * 1e-6;
    ck_assert_double_gt(lead, 0);
    for (int i = 0; i < g.n_ops; i++) {
        fwd += cost_gpu_op_s(&hw, &g.ops[i], TASK_FWD) + lead;
        if (g.ops[i].bwd_flops > 0 || g.ops[i].bwd_io_bytes > 0)
            bwd += cost_gpu_op_s(&hw, &g.ops[i], TASK_BWD) + lead;
    }
    int first, count;
    plan_subgroup_blocks(&p, plan_subgroup_count(&p) - 1, &first, &count);
    double tail = (double)model_embed_params(&g.cfg) + count * (double)model_block_params(&g.cfg);
    double P = (double)model_param_count(&g.cfg);
    double adam_bwd = cost_gpu_adam_s(&hw, P - tail), adam_tail = cost_gpu_adam_s(&hw, tail);
    ck_assert_double_eq_tol(cf.phase_s[CF_FORWARD], fwd, 1e-12);
    ck_assert_double_eq_tol(cf.phase_s[CF_BACKWARD], bwd + adam_bwd, 1e-12);
    ck_assert_double_eq_tol(cf.phase_s[CF_TAIL], adam_tail, 1e-12);
    ck_assert_double_eq(cf.fill_s, 0);
    ck_assert_double_eq_tol(cf.iter_s, fwd + bwd + adam_bwd + adam_tail, 1e-12);
    ck_assert_int_eq(cf.binding[CF_BACKWARD], RES_GPU);
    teardown_case();
}
END_TEST

/* The link coupling as in cost.h: reads and writes together on a duplex-1 SSD add up. */
START_TEST(phase_coupling)
{
    setup_case("4090.ini", "gpt3-1.3b", 1);
    double load[RES_COUNT] = {0};
    load[RES_GPU] = 1;
    load[RES_SSD_READ] = 0.8;
    load[RES_SSD_WRITE] = 0.7;
    Resource r;
    ck_assert_double_eq_tol(cost_phase_s(&hw, load, &r), 1.5, 1e-12);
    ck_assert_int_eq(r, RES_SSD_READ);
    /* PCIe: 21 of 25 GB/s while both run: a 1 s h2d and a 1 s d2h take 25/21 s */
    double pcie[RES_COUNT] = {0};
    pcie[RES_H2D] = pcie[RES_D2H] = 1;
    ck_assert_double_eq_tol(cost_phase_s(&hw, pcie, NULL), 25.0 / 21, 1e-12);
    teardown_case();
}
END_TEST

/* Host memory (cost.h) as a lower bound per phase: an Adam of 60 GB/s and SSD reads and writes
 * of 20 GB/s each, each 1 s alone, move 100 GB at 80 GB/s: 1.25 s, what the simulator gives when
 * all three overlap from end to end, named after the Adam that moves the most. The SSDs' host
 * path ceiling: 20 GB read and 20 GB written through 30 GB/s take 4/3 s. */
START_TEST(phase_host_memory)
{
    const char *sets[] = {"cpu.mem_GBps=80", "cpu.adam_Gparams_per_s=2", "ssd.count=2",
                          "ssd.read_GBps=10", "ssd.write_GBps=10", "ssd.duplex_factor=2"};
    Err e;
    ck_assert_int_eq(hw_load("4090.ini", sets, 6, &hw, &e), 0);
    double load[RES_COUNT] = {0};
    load[RES_GPU] = 1.1;
    load[RES_CPU_ADAM] = load[RES_SSD_READ] = load[RES_SSD_WRITE] = 1;
    Resource r;
    ck_assert_double_eq_tol(cost_phase_s(&hw, load, &r), 1.25, 1e-12);
    ck_assert_int_eq(r, RES_CPU_ADAM);
    load[RES_CPU_ADAM] = 0; /* 40 GB at 80: the GPU's 1.1 s binds */
    ck_assert_double_eq_tol(cost_phase_s(&hw, load, &r), 1.1, 1e-12);
    ck_assert_int_eq(r, RES_GPU);
    hw_free(&hw);
    const char *host[] = {"ssd.count=2", "ssd.read_GBps=10", "ssd.write_GBps=10",
                          "ssd.duplex_factor=2", "ssd.host_GBps=30"};
    ck_assert_int_eq(hw_load("4090.ini", host, 5, &hw, &e), 0);
    ck_assert_double_eq_tol(cost_phase_s(&hw, load, &r), 4.0 / 3, 1e-12);
    ck_assert_int_eq(r, RES_SSD_READ);
    hw_free(&hw);
}
END_TEST

START_TEST(ladder_order)
{
    setup_case("4090.ini", "gpt3-13b", 8);
    p.weights = TIER_CPU;
    plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
    SwapLadder l;
    planner_ladder(&hw, &g, &p, &l);
    ck_assert_int_gt(l.n_steps, 0);
    double covered = 0;
    for (int k = 0; k < l.n_steps; k++) {
        ck_assert_double_gt(l.steps[k].saved_s, 0);
        if (k > 0)
            ck_assert_double_le(l.steps[k].saved_s / l.steps[k].bytes,
                                l.steps[k - 1].saved_s / l.steps[k - 1].bytes * (1 + 1e-12));
        covered += l.steps[k].bytes;
    }
    /* keeping every rung recomputes nothing */
    planner_apply(&p, &l, planner_units(&l));
    bool rerun[ARCH_MAX_OPS];
    sched_recompute_set(&p, 7, rerun);
    for (int i = 0; i < p.arch->n_ops; i++)
        ck_assert(!rerun[i]);
    ck_assert_double_eq_tol(planner_amount(&l, planner_units(&l)), covered * g.cfg.n_layer, 1);
    ck_assert_int_eq(planner_units_for(&l, planner_amount(&l, 17)), 17);
    ck_assert_int_eq(planner_units_for(&l, planner_amount(&l, 17) - 1), 16);
    teardown_case();
}
END_TEST

/* The run-wise bisection finds the same minimum as evaluating every amount. */
START_TEST(minimum_is_exact)
{
    static const struct { const char *hw, *model; int batch; const char *mem; } cases[] = {
        {"4090.ini", "gpt3-13b", 8, "memory.cpu_mem_GiB=768"},
        {"4090.ini", "gpt3-6.7b", 4, "memory.cpu_mem_GiB=64"},
        {"h200.ini", "gpt3-2.7b", 64, "memory.cpu_mem_GiB=64"},
        {"a100-80g.ini", "gpt3-13b", 16, "memory.cpu_mem_GiB=256"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Err e;
        const char *sets[] = {cases[c].mem};
        ck_assert_int_eq(hw_load(cases[c].hw, sets, 1, &hw, &e), 0);
        ck_assert_int_eq(graph_init(&g, model_preset_find(cases[c].model), cases[c].batch, 1024,
                                    &e), 0);
        ck_assert_int_eq(plan_init(&p, &g, POLICY_FUYOU, &e), 0);
        footprint_auto_place(&p, &g, &hw, NULL);
        plan_set_all_act(&p, plan_act(&p, 0, BLOCK_CKPT_OP), ACT_RECOMPUTE);
        SwapLadder l;
        planner_ladder(&hw, &g, &p, &l);
        int n = planner_best_units(&hw, &g, &p, &l);
        /* the search walks the plan from amount to amount: it ends as planner_apply sets n */
        Plan applied;
        ck_assert_int_eq(plan_copy(&applied, &p, &e), 0);
        planner_apply(&applied, &l, n);
        ck_assert_mem_eq(applied.act, p.act, (size_t)p.n_layer * (size_t)p.arch->n_ops *
                                             sizeof *p.act);
        plan_free(&applied);
        ClosedForm cf;
        cost_closed_form(&hw, &g, &p, &cf);
        double best = INFINITY;
        for (int u = 0; u <= planner_units(&l); u++) {
            planner_apply(&p, &l, u);
            Footprint f;
            footprint_compute(&f, &g, &p);
            if (footprint_overflow(&f, &hw))
                continue;
            ClosedForm x;
            cost_closed_form(&hw, &g, &p, &x);
            best = fmin(best, x.iter_s);
        }
        ck_assert_msg(cf.iter_s <= best * (1 + 1e-12), "case %zu: planner %d units at %.6f s, "
                      "a scan finds %.6f s", c, n, cf.iter_s, best);
        teardown_case();
    }
}
END_TEST

static void assert_same_closed(const ClosedForm *a, const ClosedForm *b, const char *what)
{
    for (int ph = 0; ph < CF_PHASES; ph++) {
        ck_assert_msg(a->phase_s[ph] == b->phase_s[ph], "%s: phase %d", what, ph);
        ck_assert_msg(a->binding[ph] == b->binding[ph], "%s: binding %d", what, ph);
        ck_assert_msg(a->stall_s[ph] == b->stall_s[ph], "%s: stall %d", what, ph);
        for (int r = 0; r < RES_COUNT; r++)
            ck_assert_msg(a->load_s[ph][r] == b->load_s[ph][r], "%s: load %d %d", what, ph, r);
    }
    ck_assert_msg(a->fill_s == b->fill_s, "%s: fill", what);
    ck_assert_msg(a->iter_s == b->iter_s, "%s: iteration", what);
}

/* The closed form with the ops priced once (ClosedPrices) is the closed form, bit for bit: on
 * the GPU, swapped to each tier along the ladder, at prefetch depth 0 with one activation
 * buffer, with micro-batches, with blocks unlike the others, and zero-infinity's. */
START_TEST(closed_form_priced_is_exact)
{
    setup_case("4090.ini", "gpt3-13b", 8);
    ClosedPrices cp;
    ck_assert_int_eq(cost_closed_prices_init(&cp, &hw, &g), 0);
    ClosedForm a, b;
    p.weights = p.optim = TIER_GPU;
    plan_set_all_act(&p, ACT_GPU, ACT_GPU);
    cost_closed_form(&hw, &g, &p, &a);
    cost_closed_form_priced(&cp, &p, &b);
    assert_same_closed(&a, &b, "all on the GPU");
    p.weights = p.optim = TIER_SSD;
    plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
    SwapLadder l;
    planner_ladder(&hw, &g, &p, &l);
    l.room[TIER_GPU] = 20 * planner_unit_bytes(&l, 0);
    l.room[TIER_CPU] = 30 * planner_unit_bytes(&l, 0);
    for (int depth = 0; depth <= 1; depth++)
        for (int u = 0; u <= planner_units(&l); u += 7) {
            p.prefetch_depth = depth;
            p.act_buffers = depth ? 2 : 1;
            p.n_micro = depth ? 1 : 2;
            planner_apply(&p, &l, u);
            cost_closed_form(&hw, &g, &p, &a);
            cost_closed_form_priced(&cp, &p, &b);
            assert_same_closed(&a, &b, "along the ladder");
        }
    /* blocks unlike their neighbours (more work in one op, more kept in another) are worked
     * out on their own */
    cost_closed_prices_free(&cp);
    g.ops[graph_block_op_index(&g, 3, GPT2_QKV)].fwd_flops *= 2;
    g.ops[graph_block_op_index(&g, 5, GPT2_ATTN)].act_bytes += 4096;
    ck_assert_int_eq(cost_closed_prices_init(&cp, &hw, &g), 0);
    for (int u = 0; u <= planner_units(&l); u += 5) {
        planner_apply(&p, &l, u);
        cost_closed_form(&hw, &g, &p, &a);
        cost_closed_form_priced(&cp, &p, &b);
        assert_same_closed(&a, &b, "blocks unlike");
    }
    plan_free(&p);
    Err e;
    ck_assert_int_eq(plan_init(&p, &g, POLICY_ZERO_INFINITY, &e), 0);
    plan_zero_infinity_config(&p, &g.cfg);
    cost_closed_form(&hw, &g, &p, &a);
    cost_closed_form_priced(&cp, &p, &b);
    assert_same_closed(&a, &b, "zero-infinity");
    cost_closed_prices_free(&cp);
    /* without prices (out of memory), the same numbers too */
    cost_closed_form_priced(&cp, &p, &b);
    assert_same_closed(&a, &b, "unpriced");
    teardown_case();
}
END_TEST

START_TEST(tiers_fill_in_order)
{
    setup_case("4090.ini", "gpt3-13b", 8);
    p.weights = TIER_CPU;
    plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
    SwapLadder l;
    planner_ladder(&hw, &g, &p, &l);
    l.room[TIER_GPU] = 2.5 * planner_unit_bytes(&l, 0);
    l.room[TIER_CPU] = 1.5 * planner_unit_bytes(&l, 0);
    planner_apply(&p, &l, 5);
    /* units 0, 1 on the GPU, 2 in CPU memory, 3, 4 on SSD (blocks 0..4 of the first rung) */
    int op = l.steps[0].ops[0];
    ck_assert_int_eq(plan_act(&p, 0, op), ACT_GPU);
    ck_assert_int_eq(plan_act(&p, 1, op), ACT_GPU);
    ck_assert_int_eq(plan_act(&p, 2, op), ACT_CPU);
    ck_assert_int_eq(plan_act(&p, 3, op), ACT_SSD);
    ck_assert_int_eq(plan_act(&p, 4, op), ACT_SSD);
    ck_assert_int_eq(plan_act(&p, 5, op), ACT_RECOMPUTE);
    teardown_case();
}
END_TEST

/* zero-infinity's step in the closed form, by hand: nothing overlaps (DeepSpeed's swapper
 * without pipelining), so it is the tail's fp32 gradients written, every sub-group's states and
 * gradients read (16 B a parameter), Adam, the new weights and states written (2 + 12 B), each
 * at its rate alone; and the closed form keeps within 5% of the simulated schedule, below it
 * (13B: prefetch depth 1; 175B: depth 0, its loads waiting for compute and gradients). */
START_TEST(closed_form_zero_infinity)
{
    setup_case("4090.ini", "gpt3-13b", 8);
    plan_zero_infinity_config(&p, &g.cfg);
    ClosedForm cf;
    cost_closed_form(&hw, &g, &p, &cf);
    double P = (double)model_param_count(&g.cfg);
    int first, count;
    plan_subgroup_blocks(&p, plan_subgroup_count(&p) - 1, &first, &count);
    double tail = count * (double)model_block_params(&g.cfg) +
                  (double)model_embed_params(&g.cfg);
    double R = cost_alone_rate(&hw, RES_SSD_READ), W = cost_alone_rate(&hw, RES_SSD_WRITE);
    double step = 16 * P / R + P / cost_alone_rate(&hw, RES_CPU_ADAM) + (4 * tail + 14 * P) / W;
    ck_assert_double_eq_tol(cf.phase_s[CF_TAIL], step, 1e-9 * step);
    static const struct { const char *model; int batch; } pts[] = {
        {"gpt3-13b", 8}, {"gpt3-13b", 32}, {"gpt3-175b", 1},
    };
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        Graph gb;
        Plan pb;
        Prediction pr;
        Err e;
        ck_assert_int_eq(graph_init(&gb, model_preset_find(pts[i].model), pts[i].batch, 1024,
                                    &e), 0);
        ck_assert_int_eq(plan_init(&pb, &gb, POLICY_ZERO_INFINITY, &e), 0);
        plan_zero_infinity_config(&pb, &gb.cfg);
        ck_assert_int_eq(predict_run(&pr, &gb, &hw, &pb, 3, &e), 0);
        cost_closed_form(&hw, &gb, &pb, &cf);
        printf("%s batch %d zero-infinity: closed form %.3f s, simulated %.3f s\n",
               pts[i].model, pts[i].batch, cf.iter_s, pr.iter_s);
        ck_assert_double_le(cf.iter_s, pr.iter_s * (1 + 1e-9)); /* a lower bound */
        ck_assert_double_ge(cf.iter_s, 0.95 * pr.iter_s);
        predict_free(&pr);
        plan_free(&pb);
        graph_free(&gb);
    }
    teardown_case();
}
END_TEST

/* Every tier's bytes grow with the amount along a ladder whose units land in all three tiers,
 * from checkpoints in each tier, in both block families: the planner's search for the most
 * that fits (planner.c, last_fitting) bisects on it. */
START_TEST(memory_grows_with_amount)
{
    static const char *models[] = {"gpt3-1.3b", "llama-3.2-1b"};
    static const ActPlace ckpts[] = {ACT_GPU, ACT_CPU, ACT_SSD};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++)
        for (size_t k = 0; k < sizeof ckpts / sizeof ckpts[0]; k++) {
            setup_case("4090.ini", models[m], 4);
            p.weights = TIER_CPU;
            plan_set_all_act(&p, ckpts[k], ACT_RECOMPUTE);
            SwapLadder l;
            planner_ladder(&hw, &g, &p, &l);
            ck_assert_int_gt(l.n_steps, 1);
            l.room[TIER_GPU] = 5.5 * planner_unit_bytes(&l, 0);
            l.room[TIER_CPU] = 1.5 * planner_amount(&l, g.cfg.n_layer);
            double last[TIER_COUNT] = {0};
            for (int u = 0; u <= planner_units(&l); u++) {
                planner_apply(&p, &l, u);
                Footprint f;
                footprint_compute(&f, &g, &p);
                for (int t = 0; t < TIER_COUNT; t++) {
                    double now = footprint_tier_total(&f, t);
                    ck_assert_msg(now >= last[t], "%s, checkpoints %d: tier %d at %d units "
                                  "%.0f B, below %.0f B at one less", models[m], (int)ckpts[k],
                                  t, u, now, last[t]);
                    last[t] = now;
                }
            }
            int last_op = l.steps[l.n_steps - 1].ops[0], n = g.cfg.n_layer - 1;
            ck_assert_int_eq(plan_act(&p, 0, l.steps[0].ops[0]), ACT_GPU);
            ck_assert_int_eq(plan_act(&p, n, last_op), ACT_SSD);
            teardown_case();
        }
}
END_TEST

/* The search at the documented limits (1024 layers), where nothing or little fits: a few
 * footprints an amount searched, not one per unit of the ladder (thousands a configuration,
 * each a pass over the layers: minutes), and no search of configurations that cannot be kept. */
START_TEST(search_work_at_the_limits)
{
    static const struct { const char *hw; int hidden, heads; bool fits; } cases[] = {
        {"h200.ini", 1024, 16, true},       /* the states half on SSD, the rest in CPU memory */
        {"4090.ini", 131072, 1024, false},  /* 211 T parameters: nothing fits */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Err e;
        ModelConfig cfg = *model_preset_find("gpt3-13b");
        cfg.n_layer = MODEL_MAX_LAYERS;
        cfg.d_model = cases[i].hidden;
        cfg.n_head = cases[i].heads;
        cfg.d_ff = 4 * cases[i].hidden;
        ck_assert_int_eq(model_validate(&cfg, &e), 0);
        ck_assert_int_eq(hw_load(cases[i].hw, NULL, 0, &hw, &e), 0);
        ck_assert_int_eq(graph_init(&g, &cfg, 8, 64, &e), 0);
        PlanChoice c;
        ck_assert_int_eq(planner_choose(&hw, &g, 1, POLICY_FUYOU, NULL, NULL, NULL, &c, &e), 0);
        ck_assert_int_eq(c.overflow == 0, cases[i].fits);
        /* per configuration (48 at most: 4 buffer sets x 3 sub-group sizes x 2 state buffer
         * counts x states kept in CPU memory or not): its own, the optimum's, and a bisection
         * over the ladder's units (at most a step an op, each of every block) */
        int units = g.arch->n_ops * cfg.n_layer, log_units = 0;
        while ((1 << log_units) <= units)
            log_units++;
        printf("%d layers, hidden %d on %s: %lld searches, %lld footprints, %lld closed "
               "forms\n", cfg.n_layer, cfg.d_model, cases[i].hw, (long long)c.work.searches,
               (long long)c.work.footprints, (long long)c.work.closed_forms);
        ck_assert_int_le(c.work.footprints, 48 * (3 + log_units));
        /* a configuration short of memory with every activation recomputed is short at every
         * amount: where some fit, only those are searched (48 were where 24 fit); where none
         * does, those least short first, until the rest are short of more already (24 of 24
         * were searched, each more frugal than the one before) */
        if (cases[i].fits)
            ck_assert_int_eq(c.work.searches, c.configs_tried);
        else
            ck_assert_int_le(c.work.searches, 2);
        plan_free(&c.plan);
        graph_free(&g);
        hw_free(&hw);
    }
}
END_TEST

/* A PlanScoreFn for the tests: the closed form, counted. */
static int closed_score(void *ctx, const Graph *gr, const Plan *pl, double *iter_s, Err *e)
{
    (void)e;
    ClosedForm cf;
    cost_closed_form(&hw, gr, pl, &cf);
    *iter_s = cf.iter_s;
    (*(int *)ctx)++;
    return 0;
}

/* Simulations within PLANNER_SCORE_TASKS: a thousand layers in 16 micro-batches would simulate
 * every configuration that fits (1.6 M tasks an iteration each, a dozen of them: a minute);
 * the planner scores the two the closed form rates fastest, so the plan is the closed form's
 * best. A preset at the batches the suite plans scores every one. */
START_TEST(scores_within_budget)
{
    Err e;
    ModelConfig cfg = *model_preset_find("gpt3-13b");
    cfg.n_layer = MODEL_MAX_LAYERS;
    cfg.d_model = 1024;
    cfg.n_head = 16;
    cfg.d_ff = 4096;
    ck_assert_int_eq(hw_load("4090.ini", NULL, 0, &hw, &e), 0);
    ck_assert_int_eq(graph_init(&g, &cfg, 64, 2048, &e), 0);
    int sims = 0;
    PlanChoice c, closed;
    ck_assert_int_eq(planner_choose(&hw, &g, 16, POLICY_FUYOU, NULL, closed_score, &sims, &c,
                                    &e), 0);
    ck_assert_int_eq(planner_choose(&hw, &g, 16, POLICY_FUYOU, NULL, NULL, NULL, &closed, &e),
                     0);
    printf("%d layers, 16 micro-batches: %d of %d configurations that fit scored, %.0f tasks\n",
           cfg.n_layer, c.configs_scored, c.configs_tried, c.work.score_tasks);
    ck_assert_uint_eq(c.overflow, 0);
    ck_assert_double_gt(c.configs_tried * sched_estimate_tasks(g.arch, cfg.n_layer, 16, 1),
                        PLANNER_SCORE_TASKS);
    ck_assert_int_eq(c.work.scores, sims);
    ck_assert_double_le(c.work.score_tasks, PLANNER_SCORE_TASKS);
    ck_assert_int_ge(sims, 1);
    ck_assert_int_eq(c.configs_scored, sims);
    ck_assert_double_eq(c.score_s, closed.score_s);
    ck_assert_mem_eq(c.plan.act, closed.plan.act, (size_t)c.plan.n_layer *
                                                  (size_t)c.plan.arch->n_ops * sizeof *c.plan.act);
    plan_free(&c.plan);
    plan_free(&closed.plan);
    graph_free(&g);
    hw_free(&hw);

    setup_case("4090.ini", "gpt3-6.7b", 8);
    sims = 0;
    ck_assert_int_eq(planner_choose(&hw, &g, 16, POLICY_FUYOU, NULL, closed_score, &sims, &c,
                                    &e), 0);
    ck_assert_int_gt(c.configs_tried, 1);
    ck_assert_int_eq(c.configs_scored, c.configs_tried);
    ck_assert_int_eq(sims, c.configs_tried);
    plan_free(&c.plan);
    teardown_case();
}
END_TEST

/* What the progress hook hears: the searches and scores as they happen, ending with every
 * configuration that fits searched and every marked one scored. */
typedef struct Heard {
    int calls;
    PlanProgress last;
    bool backwards;
} Heard;

static void hear(void *ctx, const PlanProgress *at)
{
    Heard *h = ctx;
    h->backwards |= h->calls && (at->searched < h->last.searched || at->scored < h->last.scored);
    h->last = *at;
    h->calls++;
}

START_TEST(progress_reports)
{
    setup_case("4090.ini", "gpt3-6.7b", 8);
    Heard h = {0};
    int sims = 0;
    PlanChoice c;
    Err e;
    PlannerOptions o = {.score = closed_score, .score_ctx = &sims, .progress = hear,
                        .progress_ctx = &h};
    ck_assert_int_eq(planner_choose_with(&hw, &g, 2, POLICY_FUYOU, &o, &c, &e), 0);
    ck_assert(!h.backwards);
    ck_assert_int_eq(h.last.n_micro, 2);
    ck_assert_int_eq(h.last.searched, c.configs_tried);
    ck_assert_int_eq(h.last.to_search, c.configs_tried);
    ck_assert_int_eq(h.last.scored, sims);
    ck_assert_int_eq(h.last.to_score, sims);
    ck_assert_int_eq(h.calls, c.configs_tried + sims + 1);
    plan_free(&c.plan);
    teardown_case();
}
END_TEST

/* zero-infinity's plan is DeepSpeed's defaults, not the planner's tuning. */
START_TEST(planner_zero_infinity)
{
    setup_case("4090.ini", "gpt3-13b", 8);
    PlanChoice c;
    Err e;
    ck_assert_int_eq(planner_choose(&hw, &g, 1, POLICY_ZERO_INFINITY, NULL, NULL, NULL, &c, &e), 0);
    ck_assert_uint_eq(c.overflow, 0);
    plan_zero_infinity_config(&p, &g.cfg);
    ck_assert_int_eq(c.plan.subgroup_blocks, p.subgroup_blocks);
    ck_assert_int_eq(c.plan.tail_blocks, p.tail_blocks);
    ck_assert_int_eq(c.plan.prefetch_depth, p.prefetch_depth);
    ck_assert_int_eq(c.plan.weight_buffers, p.weight_buffers);
    ck_assert_int_eq(c.plan.pinned_buffers, p.pinned_buffers);
    ck_assert_int_eq(c.plan.grad_buffers, p.grad_buffers);
    ck_assert_int_eq(c.plan.state_buffers, 1);
    ck_assert_int_eq(c.units, 0);
    plan_free(&c.plan);
    teardown_case();
}
END_TEST

/* A corner of the grid: the planner's plan simulated lies within 2% of the best point of a
 * fine sweep, and the closed form within 10% of the simulator at the planner's plan. */
START_TEST(grid_corner)
{
    static const GridPoint pts[] = {
        {"gpt3-1.3b", "4090.ini", 8, 64},   {"gpt3-6.7b", "4090.ini", 16, 768},
        {"gpt3-13b", "4090.ini", 8, 256},   {"gpt3-2.7b", "h200.ini", 64, 64},
        {"gpt3-6.7b", "a100-80g.ini", 4, 768}, {"gpt3-13b", "a100-80g.ini", 32, 256},
    };
    int swept = 0;
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        GridResult r;
        Err e;
        int rc = grid_eval(&pts[i], 41, &r, &e);
        ck_assert_msg(rc == 0, "%s", e.msg);
        printf("%s %s batch %d cpu %g GiB: fits %d, regret %.3f%%\n", pts[i].model, pts[i].hw,
               pts[i].batch, pts[i].cpu_mem_GiB, r.fits, 100 * r.regret);
        ck_assert(r.fits);
        if (r.swept) {
            swept++;
            ck_assert_double_le(r.regret, 0.02);
        }
        grid_result_free(&r);
    }
    ck_assert_int_ge(swept, 4);
}
END_TEST

/* The options a user gives bind the planner: a tier given puts every sub-group's weights or
 * states there (none on the GPU, streamed or in CPU memory) unless a count says otherwise;
 * weights and states on the GPU go together; --swap keeps its amount while the rest is
 * searched; a count no configuration allows names the most sub-groups there are. GPT-3 13B on
 * the 4090 at batch 8 (the planner, left free, puts sub-groups on the GPU and in CPU memory). */
static int choose(const char *tiers[2], int gpu_groups, SwapMode swap, PlanChoice *c, Err *e)
{
    PlanArgs a;
    plan_args_init(&a);
    a.weights = tiers[0];
    a.optim = tiers[1];
    a.count[PC_OGPU] = gpu_groups;
    PlannerOptions o = {.args = &a, .swap = swap};
    return planner_choose_with(&hw, &g, 1, POLICY_FUYOU, &o, c, e);
}

START_TEST(options_bind)
{
    setup_case("4090.ini", "gpt3-13b", 8);
    PlanChoice c;
    Err e;
    /* free: the planner's own choice has sub-groups off the SSD */
    const char *none[2] = {NULL, NULL};
    ck_assert_int_eq(choose(none, -1, SWAP_AUTO, &c, &e), 0);
    ck_assert_int_gt(c.plan.optim_gpu_groups + c.plan.optim_cpu_groups, 0);
    plan_free(&c.plan);
    /* --weights ssd --optim ssd: every sub-group's there */
    const char *ssd[2] = {"ssd", "ssd"};
    ck_assert_int_eq(choose(ssd, -1, SWAP_AUTO, &c, &e), 0);
    ck_assert_int_eq(c.plan.weights, TIER_SSD);
    ck_assert_int_eq(c.plan.optim, TIER_SSD);
    ck_assert_int_eq(c.plan.optim_gpu_groups, 0);
    ck_assert_int_eq(c.plan.optim_cpu_groups, 0);
    ck_assert_int_eq(c.plan.optim_stream_groups, 0);
    for (int s = 0; s < plan_subgroup_count(&c.plan); s++)
        ck_assert_int_eq(plan_optim_tier(&c.plan, s), TIER_SSD);
    plan_free(&c.plan);
    /* a count says otherwise: two sub-groups on the GPU, the rest still on the SSD */
    ck_assert_int_eq(choose(ssd, 2, SWAP_AUTO, &c, &e), 0);
    ck_assert_int_eq(c.plan.optim_gpu_groups, 2);
    ck_assert_int_eq(c.plan.optim_cpu_groups, 0);
    plan_free(&c.plan);
    /* --optim cpu alone: the weights left to the placement, no sub-group on the GPU */
    const char *cpu[2] = {NULL, "cpu"};
    ck_assert_int_eq(choose(cpu, -1, SWAP_AUTO, &c, &e), 0);
    ck_assert_int_eq(c.plan.optim, TIER_CPU);
    ck_assert_int_eq(c.plan.optim_gpu_groups + c.plan.optim_stream_groups, 0);
    plan_free(&c.plan);
    /* --swap none: nothing kept but the checkpoints, the sub-groups still searched */
    ck_assert_int_eq(choose(ssd, -1, SWAP_NONE, &c, &e), 0);
    for (int b = 0; b < c.plan.n_layer; b++)
        for (int i = 0; i < c.plan.arch->n_ops; i++)
            if (i != BLOCK_CKPT_OP)
                ck_assert_int_eq(plan_act(&c.plan, b, i), ACT_RECOMPUTE);
    ck_assert_int_gt(c.configs_tried, 1);
    plan_free(&c.plan);
    /* --weights gpu alone puts the states there too; with them elsewhere, refused */
    const char *gpu[2] = {"gpu", NULL}, *split[2] = {"gpu", "cpu"};
    ck_assert_int_eq(choose(gpu, -1, SWAP_AUTO, &c, &e), 0);
    ck_assert_int_eq(c.plan.optim, TIER_GPU);
    ck_assert_uint_ne(c.overflow, 0); /* 13B's state does not fit the card */
    plan_free(&c.plan);
    ck_assert_int_eq(choose(split, -1, SWAP_AUTO, &c, &e), -EINVAL);
    tu_assert_contains(e.msg, "weights gpu and optim gpu together");
    /* more sub-groups on the GPU than any configuration has: the most there are (40 blocks,
     * sub-groups of one) */
    ck_assert_int_eq(choose(none, 41, SWAP_AUTO, &c, &e), -EINVAL);
    tu_assert_contains(e.msg, "41 sub-groups' states on the GPU, of 40");
    teardown_case();
}
END_TEST

/* GPT-3 2.7B at batch 8 under 24 GiB is bound by the CPU's Adam: the planner puts sub-groups'
 * optimizer on the GPU, and the simulator finds that faster than the same search without any
 * (--optim-gpu-groups 0); asked for a count, it keeps it. */
START_TEST(gpu_groups_chosen)
{
    Hardware hw;
    Err e;
    const char *sets[] = {"gpu.mem_GiB=24", "memory.gpu_reserved_GiB=0"};
    ck_assert_int_eq(hw_load("h200.ini", sets, 2, &hw, &e), 0);
    Graph g;
    ck_assert_int_eq(graph_init(&g, model_preset_find("gpt3-2.7b"), 8, 1024, &e), 0);
    PredictScoreCtx sc = {&hw, 0};
    PlanChoice with, without, given;
    ck_assert_int_eq(planner_choose(&hw, &g, 1, POLICY_FUYOU, NULL, predict_score, &sc, &with,
                                    &e), 0);
    PlanArgs a;
    plan_args_init(&a);
    a.count[PC_OGPU] = 0;
    ck_assert_int_eq(planner_choose(&hw, &g, 1, POLICY_FUYOU, &a, predict_score, &sc, &without,
                                    &e), 0);
    a.count[PC_OGPU] = 3;
    ck_assert_int_eq(planner_choose(&hw, &g, 1, POLICY_FUYOU, &a, predict_score, &sc, &given,
                                    &e), 0);
    printf("2.7b b8, 24 GiB: %d sub-groups on the GPU, %.3f s; none, %.3f s\n",
           with.plan.optim_gpu_groups, with.score_s, without.score_s);
    ck_assert_int_gt(with.plan.optim_gpu_groups, 0);
    ck_assert_int_eq(without.plan.optim_gpu_groups, 0);
    ck_assert_int_eq(given.plan.optim_gpu_groups, 3);
    ck_assert_double_lt(with.score_s, without.score_s);
    ck_assert_uint_eq(with.overflow, 0);
    plan_free(&with.plan), plan_free(&without.plan), plan_free(&given.plan);
    graph_free(&g);
    hw_free(&hw);
}
END_TEST

/* The planner's choice for graph gr on hw, and its score, with the options given: a GPU
 * sub-group count (-1: none), --subgroup (0: none), --weights (NULL: none). */
static double scored_choice(const Graph *gr, int gpu_groups, int subgroup, const char *weights,
                            PlanChoice *c)
{
    PlanArgs a;
    plan_args_init(&a);
    a.count[PC_OGPU] = gpu_groups;
    a.weights = weights;
    if (subgroup)
        a.count[PC_SUBGROUP] = subgroup;
    PredictScoreCtx sc = {&hw, 0};
    Err e;
    int rc = planner_choose(&hw, gr, 1, POLICY_FUYOU, &a, predict_score, &sc, c, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    return c->score_s;
}

/* Llama 3.1 8B at batch 8 on the whole H200: everything fits on the GPU with recomputation, and
 * the planner also weighs the states off it, some sub-groups updated on the GPU: the memory the
 * others leave keeps activations. The counts between none, half and the most are searched: the
 * choice is within 1% of the fastest of every count of its sub-group size (each a search with
 * the count given, which also puts the optimizer off the GPU where everything would fit), and
 * faster than everything on the GPU. */
START_TEST(gpu_counts_refined)
{
    setup_case("h200.ini", "llama-3.1-8b", 8);
    PlanChoice free_c, c;
    double free_s = scored_choice(&g, -1, 0, NULL, &free_c);
    double all_gpu_s = scored_choice(&g, -1, 0, "gpu", &c);
    ck_assert_int_eq(c.plan.optim, TIER_GPU);
    plan_free(&c.plan);
    ck_assert_int_ne(free_c.plan.optim, TIER_GPU);
    ck_assert_int_gt(free_c.gpu_counts_tried, 0);
    int size = free_c.plan.subgroup_blocks, groups = plan_subgroup_count(&free_c.plan);
    double scan_s = INFINITY;
    int scan_n = -1;
    for (int n = 0; n <= groups; n++) {
        double s = scored_choice(&g, n, size, NULL, &c);
        ck_assert_int_ne(c.plan.optim, TIER_GPU);
        ck_assert_int_eq(c.plan.optim_gpu_groups, n);
        plan_free(&c.plan);
        if (s < scan_s)
            scan_s = s, scan_n = n;
    }
    printf("8b b8 on h200.ini: %d of %d sub-groups of %d on the GPU, %.4f s; every count's "
           "fastest %d, %.4f s; everything on the GPU %.4f s\n", free_c.plan.optim_gpu_groups,
           groups, size, free_s, scan_n, scan_s, all_gpu_s);
    ck_assert_double_lt(free_s, all_gpu_s);
    ck_assert_double_le(free_s, 1.01 * scan_s);
    plan_free(&free_c.plan);
    teardown_case();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("planner");
    TCase *tc = tcase_create("planner");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, closed_form_all_gpu);
    tcase_add_test(tc, gpu_groups_chosen);
    tcase_add_test(tc, gpu_counts_refined);
    tcase_add_test(tc, options_bind);
    tcase_add_test(tc, phase_coupling);
    tcase_add_test(tc, phase_host_memory);
    tcase_add_test(tc, ladder_order);
    tcase_add_test(tc, minimum_is_exact);
    tcase_add_test(tc, closed_form_priced_is_exact);
    tcase_add_test(tc, tiers_fill_in_order);
    tcase_add_test(tc, closed_form_zero_infinity);
    tcase_add_test(tc, memory_grows_with_amount);
    tcase_add_test(tc, search_work_at_the_limits);
    tcase_add_test(tc, scores_within_budget);
    tcase_add_test(tc, progress_reports);
    tcase_add_test(tc, planner_zero_infinity);
    tcase_add_test(tc, grid_corner);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
