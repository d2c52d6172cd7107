/* Check suite for costmodel/plan_advice: each change offered for a plan that does not fit was
 * planned again and is short of fewer bytes (here planned once more, independently); a change
 * that does not help is not offered; the capacities named when nothing fits do fit; the line
 * names the options given that are why, and a run's line names no what-if option. */
#include <math.h>

#include "plan_advice.h"
#include "testutil.h"

static Hardware hw;

/* plan_make of model at batch (the closed form scoring), with swap and args, on hw; its
 * shortfall. The caller frees g, p. */
static double make(const char *model, int batch, SwapMode swap, const PlanArgs *args,
                   const Hardware *on, Graph *g, Plan *p, PlanRequest *rq)
{
    *rq = (PlanRequest){.model = model_preset_find(model), .batch = batch, .seq = 1024,
                        .policy = POLICY_FUYOU, .swap = swap, .args = args, .prog = "fuyou-sim"};
    PlanInfo info;
    Err e;
    ck_assert_msg(plan_make(rq, on, g, p, &info, &e) == 0, "%s", e.msg);
    plan_make_free(&info);
    Footprint f;
    footprint_compute(&f, g, p);
    return footprint_short_bytes(&f, on);
}

static double short_of(const char *model, int batch, SwapMode swap, const PlanArgs *args,
                       const Hardware *on)
{
    Graph g;
    Plan p;
    PlanRequest rq;
    double s = make(model, batch, swap, args, on, &g, &p, &rq);
    plan_free(&p);
    graph_free(&g);
    return s;
}

static void advise(const char *model, int batch, const PlanArgs *args, PlanAdvice *a,
                   char *line, size_t n)
{
    Graph g;
    Plan p;
    PlanRequest rq;
    Err e;
    make(model, batch, SWAP_AUTO, args, &hw, &g, &p, &rq);
    ck_assert_msg(plan_advice_make(&rq, &hw, &g, &p, a, &e) == 0, "%s", e.msg);
    plan_advice_line(a, &rq, &hw, &g, line, n);
    plan_free(&p);
    graph_free(&g);
}

/* The 405B on a 4090: --swap none leaves it as short as it is, so it is not offered; nothing
 * fits, and the GPU memory named does (the same plan made on it fits, one GiB less of what
 * was named may not: not asserted, the capacity is one that fits, not the least). */
START_TEST(no_fit_names_capacity)
{
    Err e;
    ck_assert_int_eq(hw_load("4090.ini", NULL, 0, &hw, &e), 0);
    PlanArgs none_given;
    plan_args_init(&none_given);
    double as_is = short_of("llama-3.1-405b", 8, SWAP_AUTO, &none_given, &hw);
    double recomputed = short_of("llama-3.1-405b", 8, SWAP_NONE, &none_given, &hw);
    ck_assert_double_gt(as_is, 0);
    ck_assert_double_ge(recomputed, as_is); /* the premise */
    PlanAdvice a;
    char line[2048];
    advise("llama-3.1-405b", 8, &none_given, &a, line, sizeof line);
    ck_assert_double_eq(a.short_bytes, as_is);
    ck_assert(!a.fits);
    for (int i = 0; i < a.n_fixes; i++) {
        ck_assert_double_lt(a.fixes[i].short_bytes, a.short_bytes);
        ck_assert_ptr_null(strstr(a.fixes[i].change, "--swap none"));
    }
    ck_assert_ptr_null(strstr(line, "--swap"));
    ck_assert_int_ge(a.tried, 10);
    ck_assert_int_eq(a.n_capacity, 1);
    const PlanCapacity *c = &a.capacity[0];
    ck_assert(c->raised[TIER_GPU] && !c->raised[TIER_CPU] && !c->raised[TIER_SSD]);
    ck_assert_double_eq(c->bytes[TIER_GPU], 55 * 0x1p30);
    tu_assert_contains(line, "nothing fuyou can change fits llama-3.1-405b at --batch 8 --seq "
                             "1024 on 4090.ini (");
    tu_assert_contains(line, "it fits with 55 GiB of GPU memory (here 22.49 GiB): fuyou-sim "
                             "--gpu-mem 55GiB");
    Hardware more = hw; /* as --gpu-mem 55GiB gives it */
    more.gpu_mem_GiB = c->bytes[TIER_GPU] / 0x1p30, more.gpu_reserved_GiB = 0;
    ck_assert_double_eq(short_of("llama-3.1-405b", 8, SWAP_AUTO, &none_given, &more), 0);
    hw_free(&hw);
}
END_TEST

/* A change that fits is offered, and planning with it fits where the plan given does not. */
START_TEST(fix_that_fits)
{
    Err e;
    ck_assert_int_eq(hw_load("4090.ini", NULL, 0, &hw, &e), 0);
    PlanArgs one;
    plan_args_init(&one);
    one.count[PC_MICRO] = 1;
    PlanAdvice a;
    char line[2048];
    advise("gpt3-13b", 64, &one, &a, line, sizeof line);
    ck_assert(a.fits);
    ck_assert_str_eq(a.fixes[0].change, "--micro-batches 2");
    ck_assert_double_eq(a.fixes[0].short_bytes, 0);
    ck_assert_str_eq(line, "--micro-batches 2 fits (each planned again)");
    PlanArgs two = one;
    two.count[PC_MICRO] = 2;
    ck_assert_double_gt(short_of("gpt3-13b", 64, SWAP_AUTO, &one, &hw), 0);
    ck_assert_double_eq(short_of("gpt3-13b", 64, SWAP_AUTO, &two, &hw), 0);
    hw_free(&hw);
}
END_TEST

/* No change fits alone, two together do: they are offered together, cut to those needed, and
 * nothing is said not to fit (each alone, and both, planned here again). */
START_TEST(changes_together)
{
    Err e;
    const char *budget[] = {"memory.cpu_mem_GiB=9", "memory.cpu_reserved_GiB=0"};
    ck_assert_int_eq(hw_load("4090.ini", budget, 2, &hw, &e), 0);
    PlanArgs none_given, state1, pinned1, both;
    plan_args_init(&none_given);
    state1 = pinned1 = none_given;
    state1.count[PC_SBUF] = 1;
    pinned1.count[PC_PBUF] = 1;
    both = state1;
    both.count[PC_PBUF] = 1;
    ck_assert_double_gt(short_of("gpt3-13b", 8, SWAP_AUTO, &state1, &hw), 0);
    ck_assert_double_gt(short_of("gpt3-13b", 8, SWAP_AUTO, &pinned1, &hw), 0);
    ck_assert_double_eq(short_of("gpt3-13b", 8, SWAP_AUTO, &both, &hw), 0);
    PlanAdvice a;
    char line[2048];
    advise("gpt3-13b", 8, &none_given, &a, line, sizeof line);
    ck_assert(a.fits);
    ck_assert(a.fixes[0].combined);
    ck_assert_str_eq(line, "all of --state-buffers 1 --pinned-buffers 1 fits (each planned "
                           "again)");
    ck_assert_ptr_null(strstr(line, "nothing"));
    hw_free(&hw);
}
END_TEST

/* Options given that keep every plan from fitting: leaving them out is the change named, and
 * a run's line (fuyou-run's) names no what-if option. */
START_TEST(options_given_named)
{
    Err e;
    const char *small_cpu[] = {"memory.cpu_mem_GiB=32"};
    ck_assert_int_eq(hw_load("4090.ini", small_cpu, 1, &hw, &e), 0);
    PlanArgs cpu;
    plan_args_init(&cpu);
    cpu.weights = cpu.optim = "cpu";
    PlanAdvice a;
    char line[2048];
    advise("gpt3-13b", 8, &cpu, &a, line, sizeof line);
    ck_assert(a.fits);
    ck_assert_str_eq(line, "without --weights cpu --optim cpu fits (each planned again)");
    hw_free(&hw);
    /* nothing fits: the capacity, said without fuyou-sim's option for a run */
    ck_assert_int_eq(hw_load("4090.ini", NULL, 0, &hw, &e), 0);
    PlanArgs none_given;
    plan_args_init(&none_given);
    Graph g;
    Plan p;
    PlanRequest rq;
    make("llama-3.1-405b", 8, SWAP_AUTO, &none_given, &hw, &g, &p, &rq);
    rq.prog = "fuyou-run";
    ck_assert_int_eq(plan_advice_make(&rq, &hw, &g, &p, &a, &e), 0);
    plan_advice_line(&a, &rq, &hw, &g, line, sizeof line);
    tu_assert_contains(line, "it fits with 55 GiB of GPU memory (here 22.49 GiB)");
    ck_assert_ptr_null(strstr(line, "--gpu-mem"));
    char why[2048];
    tu_assert_contains(plan_advice_why_short(&rq, &hw, &g, &p, why, sizeof why),
                       "gpu needs 54.17 GiB of its 22.49 GiB (31.68 GiB short); nothing fuyou "
                       "can change fits");
    plan_free(&p);
    graph_free(&g);
    hw_free(&hw);
}
END_TEST

/* h200.ini's 64 GB disk holds no 70B plan; the SSD named, and --ssd-capacity's 2 TB, do
 * (hw_set_ssd_bytes, all devices together). */
START_TEST(ssd_capacity_fits_70b)
{
    Err e;
    ck_assert_int_eq(hw_load("h200.ini", NULL, 0, &hw, &e), 0);
    PlanArgs none_given;
    plan_args_init(&none_given);
    PlanAdvice a;
    char line[2048];
    advise("llama-3.1-70b", 8, &none_given, &a, line, sizeof line);
    ck_assert(!a.fits);
    ck_assert_int_ge(a.n_capacity, 1);
    const PlanCapacity *c = &a.capacity[0];
    ck_assert(c->raised[TIER_SSD] && !c->raised[TIER_GPU] && !c->raised[TIER_CPU]);
    ck_assert_double_eq_tol(c->bytes[TIER_SSD], 805e9, 1);
    tu_assert_contains(line, "it fits with 805 GB of SSD (here 64 GB): fuyou-sim --ssd-capacity "
                             "805GB");
    Hardware more = hw;
    hw_set_ssd_bytes(&more, 805e9);
    ck_assert_double_eq(short_of("llama-3.1-70b", 8, SWAP_AUTO, &none_given, &more), 0);
    hw_set_ssd_bytes(&more, 2e12);
    ck_assert_double_eq_tol(hw_ssd_bytes(&more), 2e12, 1);
    ck_assert_double_eq(short_of("llama-3.1-70b", 8, SWAP_AUTO, &none_given, &more), 0);
    hw_free(&hw);
    /* twelve devices share it, their rates as they were */
    ck_assert_int_eq(hw_load("4090.ini", NULL, 0, &hw, &e), 0);
    double read_GBps = hw.ssd_read_GBps;
    hw_set_ssd_bytes(&hw, 1.2e12);
    ck_assert_double_eq_tol(hw.ssd_capacity_GB, 100, 1e-9);
    ck_assert_int_eq(hw.ssd_count, 12);
    ck_assert_double_eq(hw.ssd_read_GBps, read_GBps);
    hw_free(&hw);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_advice");
    TCase *tc = tcase_create("plan_advice");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, no_fit_names_capacity);
    tcase_add_test(tc, fix_that_fits);
    tcase_add_test(tc, changes_together);
    tcase_add_test(tc, options_given_named);
    tcase_add_test(tc, ssd_capacity_fits_70b);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
