/* Check suite for costmodel/cost: op times against the formulas in cost.h computed by hand, the
 * rate coupling of PCIe directions and SSD reads and writes, the SSDs' host path ceiling,
 * host memory shared by the CPU Adam and the links, and the rate cache (CostRateCache) against
 * the rates worked out, bit for bit. */
#include <errno.h>
#include <math.h>

#include "cost.h"
#include "gpt2_arch.h"
#include "plan.h"
#include "testutil.h"

static Hardware hw;

static void load(const char *const *sets, int n)
{
    Err e;
    ck_assert_msg(hw_load("4090.ini", sets, n, &hw, &e) == 0, "%s", e.msg);
}

START_TEST(gemm_times)
{
    const char *sets[] = {"gpu.gemm_efficiency=1024:0.5", "gpu.launch_us=10",
                          "gpu.bf16_TFLOPS=100"};
    load(sets, 3);
    Op op = {.kind = OP_GEMM, .m = 4096, .n = 1024, .k = 1024};
    op.fwd_flops = 2.0 * 4096 * 1024 * 1024;
    op.bwd_flops = 2 * op.fwd_flops;
    /* one-point curve: efficiency 0.5 everywhere */
    ck_assert_double_eq_tol(cost_gpu_op_s(&hw, &op, TASK_FWD), op.fwd_flops / 50e12 + 10e-6,
                            1e-15);
    ck_assert_double_eq_tol(cost_gpu_op_s(&hw, &op, TASK_BWD), op.bwd_flops / 50e12 + 20e-6,
                            1e-15);
    ck_assert_double_eq(cost_gpu_op_s(&hw, &op, TASK_RECOMPUTE), cost_gpu_op_s(&hw, &op, TASK_FWD));
    hw_free(&hw);
}
END_TEST

START_TEST(attention_and_memory_bound)
{
    const char *sets[] = {"gpu.attn_efficiency=0.5", "gpu.launch_us=0", "gpu.bf16_TFLOPS=100",
                          "gpu.mem_GBps=1000"};
    load(sets, 4);
    Op attn = {.kind = OP_ATTENTION, .head_size = 64, .fwd_flops = 1e12, .bwd_flops = 2e12};
    ck_assert_double_eq_tol(cost_gpu_op_s(&hw, &attn, TASK_FWD), 0.5e12 / 50e12, 1e-15);
    ck_assert_double_eq_tol(cost_gpu_op_s(&hw, &attn, TASK_BWD), 0.5 * 1.25 * 2e12 / 50e12,
                            1e-15);
    Op ln = {.kind = OP_LAYERNORM, .fwd_io_bytes = 2000000000, .bwd_io_bytes = 3000000000};
    ck_assert_double_eq_tol(cost_gpu_op_s(&hw, &ln, TASK_FWD), 2e-3, 1e-15);
    ck_assert_double_eq_tol(cost_gpu_op_s(&hw, &ln, TASK_BWD), 3e-3, 1e-15);
    hw_free(&hw);
}
END_TEST

/* Each attention op runs at the efficiency of its graph's head size: the point of that size,
 * else the nearest in log2 (96 is nearer 80 than 128; 32 takes the first point); one number
 * is every head size's. */
START_TEST(attention_by_head_size)
{
    static const struct { const char *model; int head_size; double eff; } cases[] = {
        {"gpt2-124m", 64, 0.2}, {"gpt3-2.7b", 80, 0.05}, {"gpt3-760m", 96, 0.05},
        {"gpt3-1.3b", 128, 0.4}, {"gpt2-tiny", 32, 0.2},
    };
    const char *sets[] = {"gpu.attn_efficiency=64:0.2 80:0.05 128:0.4", "gpu.launch_us=0",
                          "gpu.bf16_TFLOPS=100"};
    for (int one = 0; one < 2; one++) {
        if (one)
            sets[0] = "gpu.attn_efficiency=0.25";
        load(sets, 3);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            Graph g;
            Err e;
            ck_assert_msg(graph_init(&g, model_preset_find(cases[i].model), 1, 256, &e) == 0,
                          "%s", e.msg);
            const Op *attn = graph_block_op(&g, 0, GPT2_ATTN);
            ck_assert_int_eq(attn->kind, OP_ATTENTION);
            ck_assert_int_eq(attn->head_size, cases[i].head_size);
            double want = 0.5 * attn->fwd_flops / (100e12 * (one ? 0.25 : cases[i].eff));
            ck_assert_double_eq_tol(cost_gpu_op_s(&hw, attn, TASK_FWD), want, 1e-12 * want);
            graph_free(&g);
        }
        hw_free(&hw);
    }
}
END_TEST

START_TEST(rates)
{
    load(NULL, 0);
    CostModel m = {.hw = &hw};
    bool busy[RES_COUNT] = {false};
    double rate[RES_COUNT];
    busy[RES_H2D] = true;
    cost_rates(&m, busy, rate);
    ck_assert_double_eq(rate[RES_H2D], 25e9);
    busy[RES_D2H] = true;
    cost_rates(&m, busy, rate);
    ck_assert_double_eq(rate[RES_H2D], 21e9);
    ck_assert_double_eq(rate[RES_D2H], 21e9);
    /* 12 striped P5510s: 78 GB/s read, 40.8 write; duplex 1 halves both when together */
    busy[RES_SSD_READ] = true;
    cost_rates(&m, busy, rate);
    ck_assert_double_eq_tol(rate[RES_SSD_READ], 78e9, 1);
    busy[RES_SSD_WRITE] = true;
    cost_rates(&m, busy, rate);
    ck_assert_double_eq_tol(rate[RES_SSD_READ], 39e9, 1);
    ck_assert_double_eq_tol(rate[RES_SSD_WRITE], 20.4e9, 1);
    hw_free(&hw);
    const char *full[] = {"ssd.duplex_factor=2"};
    load(full, 1);
    cost_rates(&m, busy, rate);
    ck_assert_double_eq_tol(rate[RES_SSD_READ], 78e9, 1);
    hw_free(&hw);
    /* the rates together, measured, take duplex's place: 12 devices' 4 and 2 GB/s */
    const char *bidir[] = {"ssd.read_bidir_GBps=4", "ssd.write_bidir_GBps=2"};
    load(bidir, 2);
    cost_rates(&m, busy, rate);
    ck_assert_double_eq_tol(rate[RES_SSD_READ], 48e9, 1);
    ck_assert_double_eq_tol(rate[RES_SSD_WRITE], 24e9, 1);
    busy[RES_SSD_WRITE] = false; /* alone: the alone rate */
    cost_rates(&m, busy, rate);
    ck_assert_double_eq_tol(rate[RES_SSD_READ], 78e9, 1);
    hw_free(&hw);
}
END_TEST

START_TEST(task_work)
{
    load(NULL, 0);
    CostModel m = {.hw = &hw};
    Task copy = {.res = RES_SSD_READ, .kind = TASK_COPY, .bytes = 78e9};
    /* 1 s of bytes plus the 80 us latency */
    ck_assert_double_eq_tol(cost_task_alone_s(&m, &copy), 1 + 80e-6, 1e-12);
    Task adam = {.res = RES_CPU_ADAM, .kind = TASK_ADAM, .params = 8000000000};
    ck_assert_double_eq(cost_task_work(&m, &adam), 8e9); /* parameters */
    ck_assert_double_eq_tol(cost_task_alone_s(&m, &adam), 2.0, 1e-12); /* 4 G params/s */
    Task gpu_adam = {.res = RES_GPU, .kind = TASK_ADAM, .params = 1000000000};
    ck_assert_double_eq_tol(cost_task_alone_s(&m, &gpu_adam), 28e9 / 1008e9 + 4e-6, 1e-12);
    hw_free(&hw);
}
END_TEST

/* A micro-batch's gradient copy also adds its parameters into the step's sum on the host:
 * (grad bytes + 8) each at cpu.sum_GBps where measured, else at cpu.mem_GBps times the sum
 * threads' share of the cores; the step's first micro-batch writes the sum without reading it
 * (+ 4) */
START_TEST(grad_sum_on_the_host)
{
    const char *sets[] = {"cpu.cores=16", "cpu.mem_GBps=80", "pcie.latency_us=0"};
    load(sets, 3);
    CostModel m = {.hw = &hw};
    /* 4 threads of 16: 20 GB/s; 1 G bf16 gradients: 10 GB, 0.5 s; the first 6 GB, 0.3 s */
    ck_assert_double_eq_tol(cost_grad_sum_s(&hw, 1e9, 2, false), 0.5, 1e-12);
    ck_assert_double_eq_tol(cost_grad_sum_s(&hw, 1e9, 2, true), 0.3, 1e-12);
    Task copy = {.res = RES_D2H, .kind = TASK_COPY, .bytes = 2e9, .micro = 1};
    double alone = cost_task_alone_s(&m, &copy);
    ck_assert_double_eq_tol(alone, 2e9 / 25e9, 1e-12);
    copy.params = 1000000000;
    ck_assert_double_eq_tol(cost_task_alone_s(&m, &copy), alone + 0.5, 1e-12);
    copy.micro = 0;
    ck_assert_double_eq_tol(cost_task_alone_s(&m, &copy), alone + 0.3, 1e-12);
    hw_free(&hw);
    const char *few[] = {"cpu.cores=2", "cpu.mem_GBps=80"};
    load(few, 2); /* one thread of two: half the bandwidth */
    ck_assert_double_eq_tol(cost_grad_sum_s(&hw, 1e9, 2, false), 0.25, 1e-12);
    hw_free(&hw);
    /* measured: its rate, whatever the share of the cores */
    const char *measured[] = {"cpu.cores=16", "cpu.mem_GBps=80", "cpu.sum_GBps=40"};
    load(measured, 3);
    ck_assert_double_eq_tol(cost_grad_sum_s(&hw, 1e9, 2, false), 0.25, 1e-12);
    ck_assert_double_eq_tol(cost_grad_sum_s(&hw, 1e9, 2, true), 0.15, 1e-12);
    hw_free(&hw);
}
END_TEST

/* The memory step asks a gradient copy that adds into the step's sum for what it moves over its
 * time (the copy's bytes and the sum's), not for its link's rate; beside the Adam, the sum's
 * threads and the Adam's share the Adam's cores first (14 of them on 16 cores, 4 sum threads:
 * each keeps s = 14 / 18 while the sum runs), the copy over its sum's part f of its work, the
 * Adam over the sum's part q of the copy's time: the engine's rates take the running tasks. */
START_TEST(grad_sum_host_demand)
{
    /* host memory 61 GB/s: above any one configuration alone (the Adam's 60; one SSD); the
     * sum's 4 threads of 16 at a quarter of it */
    const char *sets[] = {"cpu.cores=16", "cpu.mem_GBps=61", "cpu.adam_Gparams_per_s=2",
                          "pcie.latency_us=0", "ssd.count=1"};
    load(sets, 5);
    double sum_GBps = 61.0 / 4;
    CostModel m = {.hw = &hw};
    double s = 14.0 / 18;
    ck_assert_double_eq_tol(cost_sum_core_share(&hw), s, 1e-15);
    Task adam = {.res = RES_CPU_ADAM, .kind = TASK_ADAM, .params = 1000000000};
    Task copy = {.res = RES_D2H, .kind = TASK_COPY, .bytes = 2e9, .micro = 1};
    const Task *running[RES_COUNT] = {[RES_CPU_ADAM] = &adam, [RES_D2H] = &copy};
    double rate[RES_COUNT];
    /* a plain copy asks for its link's 25 GB/s beside Adam's 60: 85 of 61, all at 61/85 */
    cost_task_rates(&m, running, rate);
    ck_assert_double_eq_tol(rate[RES_D2H], 25e9 * 61 / 85, 1);
    ck_assert_double_eq_tol(rate[RES_CPU_ADAM], 2e9 * 61 / 85, 1e-3);
    bool busy[RES_COUNT] = {[RES_CPU_ADAM] = true, [RES_D2H] = true};
    double by_resource[RES_COUNT];
    cost_rates(&m, busy, by_resource);
    ck_assert_double_eq(by_resource[RES_D2H], rate[RES_D2H]);
    /* with a sum of 1 G bf16 gradients (10 GB at sum_GBps: w = 25e9 x 10 / sum_GBps bytes of
     * work at the link's rate, of 2e9 + w): the copy at 1 / (1 - f + f / s) of its rate, f =
     * w / (2e9 + w), the Adam at 1 - q (1 - s), q = (f / s) / (1 - f + f / s); then 12 GB moved
     * (2 + 2 copied and read, 8 of the sum read and written) over the copy's 2e9 + w of work,
     * beside the Adam's 30 B a parameter */
    copy.params = 1000000000;
    /* with an SSD read beside them (r bytes a second alone), so that host memory binds */
    Task read = {.res = RES_SSD_READ, .kind = TASK_COPY, .bytes = 1e9};
    running[RES_SSD_READ] = &read;
    double r = cost_alone_rate(&hw, RES_SSD_READ);
    cost_task_rates(&m, running, rate);
    double w = 25e9 * 10 / sum_GBps, f = w / (2e9 + w), slow = 1 - f + f / s, c = 1 / slow;
    double a = 1 - f / s / slow * (1 - s);
    double demand = 25e9 * c * 12e9 / (2e9 + w) + 60e9 * a + r;
    ck_assert(demand > 61e9);
    ck_assert_double_eq_tol(rate[RES_D2H], 25e9 * c * 61e9 / demand, 1);
    ck_assert_double_eq_tol(rate[RES_CPU_ADAM], 2e9 * a * 61e9 / demand, 1e-3);
    ck_assert_double_eq_tol(rate[RES_SSD_READ], r * 61e9 / demand, 1);
    /* the first micro-batch's: 6 GB of sum (w = 25e9 x 6 / sum_GBps): 8 GB (2 copied and
     * read, 4 of the sum written) over 2e9 + w */
    copy.micro = 0;
    cost_task_rates(&m, running, rate);
    w = 25e9 * 6 / sum_GBps, f = w / (2e9 + w), slow = 1 - f + f / s, c = 1 / slow;
    a = 1 - f / s / slow * (1 - s);
    demand = 25e9 * c * 8e9 / (2e9 + w) + 60e9 * a + r;
    ck_assert(demand > 61e9);
    ck_assert_double_eq_tol(rate[RES_D2H], 25e9 * c * 61e9 / demand, 1);
    running[RES_SSD_READ] = NULL;
    /* without the Adam the copy keeps its rate (memory: 25 x 8 / 9.5 of 61) */
    const Task *alone[RES_COUNT] = {[RES_D2H] = &copy};
    cost_task_rates(&m, alone, rate);
    ck_assert_double_eq_tol(rate[RES_D2H], 25e9, 1);
    /* idle resources keep their rates alone */
    const Task *idle[RES_COUNT] = {NULL};
    cost_task_rates(&m, idle, rate);
    ck_assert_double_eq(rate[RES_D2H], 25e9);
    hw_free(&hw);
}
END_TEST

/* A CostRateCache gives the rates worked out without one, bit for bit: every busy set, asked
 * twice (the second time from the cache), with a plain or a summing gradient copy from the GPU
 * among the running tasks (a summing copy's rates depend on it: never kept), and every copy's
 * work (its link's rate alone). On h200.ini, whose keys use every step of the rates. */
START_TEST(rate_cache_agrees)
{
    Err e;
    ck_assert_msg(hw_load("h200.ini", NULL, 0, &hw, &e) == 0, "%s", e.msg);
    CostRateCache cache = {0};
    CostModel plain = {.hw = &hw}, cached = {.hw = &hw, .cache = &cache};
    Task task[RES_COUNT];
    for (int r = 0; r < RES_COUNT; r++)
        task[r] = (Task){.res = r, .kind = TASK_COPY, .bytes = 1e9};
    task[RES_GPU].kind = TASK_FWD;
    task[RES_CPU_ADAM] = (Task){.res = RES_CPU_ADAM, .kind = TASK_ADAM, .params = 1000000000};
    Task summing = {.res = RES_D2H, .kind = TASK_COPY, .bytes = 2e9, .params = 1000000000,
                    .micro = 1};
    for (int sum = 0; sum <= 1; sum++)
        for (unsigned set = 0; set < 1u << RES_COUNT; set++)
            for (int again = 0; again <= 1; again++) {
                const Task *running[RES_COUNT] = {NULL};
                for (int r = 0; r < RES_COUNT; r++)
                    if (set & 1u << r)
                        running[r] = sum && r == RES_D2H ? &summing : &task[r];
                double want[RES_COUNT], got[RES_COUNT];
                cost_task_rates(&plain, running, want);
                cost_task_rates(&cached, running, got);
                for (int r = 0; r < RES_COUNT; r++)
                    ck_assert_msg(got[r] == want[r], "busy set %#x, summing %d, resource %d: "
                                  "%.17g cached, %.17g worked out", set, sum, r, got[r], want[r]);
            }
    for (int r = RES_H2D; r <= RES_SSD_WRITE; r++)
        for (int again = 0; again <= 1; again++)
            ck_assert(cost_task_work(&cached, &task[r]) == cost_task_work(&plain, &task[r]));
    ck_assert(cost_task_work(&cached, &summing) == cost_task_work(&plain, &summing));
    hw_free(&hw);
}
END_TEST

/* The executor's thread counts the model shares cores by: the Adam on two cores fewer with a
 * GPU (on all of them without, and on tiny machines), four sum threads from 8 cores (else 1) */
START_TEST(thread_policy)
{
    ck_assert_int_eq(plan_adam_threads(16, true), 14);
    ck_assert_int_eq(plan_adam_threads(16, false), 16);
    ck_assert_int_eq(plan_adam_threads(3, true), 3);
    ck_assert_int_eq(plan_grad_sum_threads(16), 4);
    ck_assert_int_eq(plan_grad_sum_threads(4), 1);
    const char *sets[] = {"cpu.cores=4"};
    load(sets, 1);
    ck_assert_double_eq_tol(cost_sum_core_share(&hw), 2.0 / 3, 1e-15);
    hw_free(&hw);
}
END_TEST

/* Rates with the given resources busy. */
static void rates_with(const CostModel *m, const Resource *on, int n, double rate[RES_COUNT])
{
    bool busy[RES_COUNT] = {false};
    for (int i = 0; i < n; i++)
        busy[on[i]] = true;
    cost_rates(m, busy, rate);
}

/* A small machine: host memory 80 GB/s; Adam 2 G params/s, 60 GB/s of host memory; two SSDs of
 * 10 GB/s each way, full duplex (20 + 20); PCIe 25 alone, 21 + 21 both ways (4090.ini). */
static const char *const small[] = {
    "cpu.mem_GBps=80", "cpu.adam_Gparams_per_s=2", "ssd.count=2", "ssd.read_GBps=10",
    "ssd.write_GBps=10", "ssd.duplex_factor=2", "ssd.latency_us=0", "pcie.latency_us=0",
};
enum { N_SMALL = sizeof small / sizeof small[0] };

/* The CPU Adam alone at its rate; with the SSDs reading and writing the busy resources ask for
 * 60 + 20 + 20 = 100 GB/s of 80: each at 0.8 of its rate. */
START_TEST(host_memory_shared)
{
    load(small, N_SMALL);
    CostModel m = {.hw = &hw};
    ck_assert_double_eq(cost_host_mem_Bps(&hw), 80e9);
    double rate[RES_COUNT];
    rates_with(&m, (Resource[]){RES_CPU_ADAM}, 1, rate);
    ck_assert_double_eq(rate[RES_CPU_ADAM], 2e9);
    rates_with(&m, (Resource[]){RES_CPU_ADAM, RES_SSD_READ, RES_SSD_WRITE, RES_GPU}, 4, rate);
    ck_assert_double_eq_tol(rate[RES_CPU_ADAM], 1.6e9, 1e-3);
    ck_assert_double_eq_tol(rate[RES_SSD_READ], 16e9, 1e-3);
    ck_assert_double_eq_tol(rate[RES_SSD_WRITE], 16e9, 1e-3);
    ck_assert_double_eq(rate[RES_GPU], 1); /* moves no host memory */
    /* 60 + 20 = 80: at the ceiling, not above it */
    rates_with(&m, (Resource[]){RES_CPU_ADAM, RES_SSD_READ}, 2, rate);
    ck_assert_double_eq(rate[RES_CPU_ADAM], 2e9);
    ck_assert_double_eq(rate[RES_SSD_READ], 20e9);
    /* PCIe both ways (21 + 21) with the Adam: 102 GB/s asked, 80 given */
    rates_with(&m, (Resource[]){RES_CPU_ADAM, RES_H2D, RES_D2H}, 3, rate);
    ck_assert_double_eq_tol(rate[RES_H2D], 21e9 * 80 / 102, 1e-3);
    ck_assert_double_eq_tol(rate[RES_CPU_ADAM], 2e9 * 80 / 102, 1e-3);
    /* a task's work does not change, only its rate: 2 G params take 1 s alone */
    Task adam = {.res = RES_CPU_ADAM, .kind = TASK_ADAM, .params = 2000000000};
    ck_assert_double_eq_tol(cost_task_alone_s(&m, &adam), 1.0, 1e-12);
    hw_free(&hw);
}
END_TEST

/* The ceiling is at least what the ini's own configurations move: with mem_GBps 30 below PCIe
 * both ways (42) and the Adam alone (30), those run at their rates; the Adam with an H2D copy
 * (30 + 25 = 55) shares the 42. */
START_TEST(host_memory_floor)
{
    const char *sets[] = {"cpu.mem_GBps=30", "cpu.adam_Gparams_per_s=1", "ssd.count=1",
                          "ssd.read_GBps=1", "ssd.write_GBps=1"};
    load(sets, 5);
    CostModel m = {.hw = &hw};
    ck_assert_double_eq(cost_host_mem_Bps(&hw), 42e9);
    double rate[RES_COUNT];
    rates_with(&m, (Resource[]){RES_H2D, RES_D2H}, 2, rate);
    ck_assert_double_eq(rate[RES_H2D], 21e9);
    ck_assert_double_eq(rate[RES_D2H], 21e9);
    rates_with(&m, (Resource[]){RES_CPU_ADAM}, 1, rate);
    ck_assert_double_eq(rate[RES_CPU_ADAM], 1e9);
    rates_with(&m, (Resource[]){RES_CPU_ADAM, RES_H2D}, 2, rate);
    ck_assert_double_eq_tol(rate[RES_H2D], 25e9 * 42 / 55, 1e-3);
    ck_assert_double_eq_tol(rate[RES_CPU_ADAM], 1e9 * 42 / 55, 1e-3);
    hw_free(&hw);
}
END_TEST

/* [ssd] host_GBps caps reads plus writes of all devices: 20 + 12 = 32 GB/s asked, 24 given, each
 * at 0.75; below a direction's own rate it caps that direction alone too. Absent: no ceiling. */
START_TEST(ssd_host_ceiling)
{
    const char *sets[] = {"ssd.count=4", "ssd.read_GBps=5", "ssd.write_GBps=3",
                          "ssd.duplex_factor=2", "ssd.latency_us=80", "ssd.host_GBps=24"};
    load(sets, 6);
    CostModel m = {.hw = &hw};
    double rate[RES_COUNT];
    rates_with(&m, (Resource[]){RES_SSD_READ}, 1, rate);
    ck_assert_double_eq(rate[RES_SSD_READ], 20e9);
    rates_with(&m, (Resource[]){RES_SSD_READ, RES_SSD_WRITE}, 2, rate);
    ck_assert_double_eq_tol(rate[RES_SSD_READ], 15e9, 1e-3);
    ck_assert_double_eq_tol(rate[RES_SSD_WRITE], 9e9, 1e-3);
    hw_free(&hw);
    sets[5] = "ssd.host_GBps=16";
    load(sets, 6);
    rates_with(&m, (Resource[]){RES_SSD_READ}, 1, rate);
    ck_assert_double_eq(rate[RES_SSD_READ], 16e9);
    rates_with(&m, (Resource[]){RES_SSD_WRITE}, 1, rate);
    ck_assert_double_eq(rate[RES_SSD_WRITE], 12e9);
    /* the latency is charged at the rate the link has alone: 16 GB take 1 s, plus 80 us */
    Task copy = {.res = RES_SSD_READ, .kind = TASK_COPY, .bytes = 16e9};
    ck_assert_double_eq_tol(cost_task_alone_s(&m, &copy), 1 + 80e-6, 1e-12);
    hw_free(&hw);
    load(sets, 5);
    ck_assert_double_eq(hw.ssd_host_GBps, 0);
    rates_with(&m, (Resource[]){RES_SSD_READ, RES_SSD_WRITE}, 2, rate);
    ck_assert_double_eq(rate[RES_SSD_READ], 20e9);
    ck_assert_double_eq(rate[RES_SSD_WRITE], 12e9);
    hw_free(&hw);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cost");
    TCase *tc = tcase_create("cost");
    tcase_add_test(tc, gemm_times);
    tcase_add_test(tc, attention_and_memory_bound);
    tcase_add_test(tc, attention_by_head_size);
    tcase_add_test(tc, rates);
    tcase_add_test(tc, task_work);
    tcase_add_test(tc, grad_sum_on_the_host);
    tcase_add_test(tc, grad_sum_host_demand);
    tcase_add_test(tc, thread_policy);
    tcase_add_test(tc, host_memory_shared);
    tcase_add_test(tc, host_memory_floor);
    tcase_add_test(tc, ssd_host_ceiling);
    tcase_add_test(tc, rate_cache_agrees);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
