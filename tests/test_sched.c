/* Check suite for model/sched: ids, well-formedness (acyclic, unique ids), the dependencies that
 * carry the policies (buffers, prefetch, no delayed update, optimizer placement), the
 * recomputation closure, the size limits and copies in chunks. Not the buffer rings' safety (no
 * task overwrites a buffer another still reads): test_sched_rings.c. */
#include <errno.h>
#include <math.h>

#include "gpt2_arch.h"
#include "sched_testutil.h"

static int find(const Schedule *s, int iter, const char *id)
{
    int t = sched_find(s, iter, id);
    ck_assert_msg(t >= 0, "no task %s in iteration %d", id, iter);
    return t;
}

static bool depends(const Schedule *s, int t, int on)
{
    for (int i = 0; i < s->tasks[t].n_deps; i++)
        if (sched_deps(s, t)[i] == on)
            return true;
    return false;
}

static bool reach(const Schedule *s, int t, int on, char *seen)
{
    if (t == on)
        return true;
    if (seen[t])
        return false;
    seen[t] = 1;
    for (int i = 0; i < s->tasks[t].n_deps; i++)
        if (reach(s, sched_deps(s, t)[i], on, seen))
            return true;
    return false;
}

/* Transitive: does t wait (directly or not) for on? */
static bool waits_for(const Schedule *s, int t, int on)
{
    char *seen = calloc((size_t)s->n_tasks, 1);
    bool r = t != on && reach(s, t, on, seen);
    free(seen);
    return r;
}

static void check_well_formed(const Schedule *s)
{
    /* unique ids per iteration, valid deps, acyclic (Kahn) */
    for (int a = 0; a < s->n_tasks; a++)
        for (int b = a + 1; b < s->n_tasks; b++)
            if (s->tasks[a].iter == s->tasks[b].iter)
                ck_assert_msg(strcmp(s->tasks[a].id, s->tasks[b].id), "duplicate %s",
                              s->tasks[a].id);
    int *indeg = calloc((size_t)s->n_tasks, sizeof *indeg), *queue = malloc(
        (size_t)s->n_tasks * sizeof *queue);
    int head = 0, tail = 0;
    for (int t = 0; t < s->n_tasks; t++) {
        indeg[t] = s->tasks[t].n_deps;
        for (int i = 0; i < s->tasks[t].n_deps; i++) {
            int d = sched_deps(s, t)[i];
            ck_assert(d >= 0 && d < s->n_tasks && d != t);
        }
        if (!indeg[t])
            queue[tail++] = t;
    }
    while (head < tail) {
        int t = queue[head++];
        for (int u = 0; u < s->n_tasks; u++)
            if (depends(s, u, t) && --indeg[u] == 0)
                queue[tail++] = u;
    }
    ck_assert_int_eq(tail, s->n_tasks);
    free(indeg);
    free(queue);
}

START_TEST(fuyou_structure)
{
    setup(POLICY_FUYOU);
    Schedule s;
    Err e;
    ck_assert_int_eq(sched_build(&s, &g, &p, 2, &e), 0);
    check_well_formed(&s);
    /* forward: weights from SSD via pinned memory to the GPU, then the block's ops */
    int ssdr = find(&s, 0, "SSDR.b2.w"), h2d = find(&s, 0, "H2D.b2.w");
    ck_assert(depends(&s, h2d, ssdr));
    ck_assert(depends(&s, find(&s, 0, "F.b2.ln1"), h2d));
    ck_assert_int_eq(s.tasks[h2d].res, RES_H2D);
    ck_assert_double_eq(s.tasks[h2d].bytes, (double)model_block_params(&tiny) * 2);
    /* two weight buffers: block 2's load waits for block 0's compute to end */
    ck_assert(depends(&s, h2d, find(&s, 0, "F.b0.res2")));
    /* checkpoints go to CPU memory in forward and come back in backward */
    int out = find(&s, 0, "D2H.b1.ckpt"), back = find(&s, 0, "H2D.b1.ckpt");
    ck_assert(depends(&s, back, out));
    /* the last two blocks stay resident: no backward reload for them, one for block 1 */
    ck_assert_int_lt(sched_find(&s, 0, "H2D.b3.w.bwd"), 0);
    ck_assert_int_lt(sched_find(&s, 0, "H2D.b2.w.bwd"), 0);
    find(&s, 0, "H2D.b1.w.bwd");
    /* recomputation before the block's backward */
    ck_assert(waits_for(&s, find(&s, 0, "B.b1.fc2"), find(&s, 0, "R.b1.gelu")));
    ck_assert_int_lt(sched_find(&s, 0, "R.b1.res2"), 0);
    /* the optimizer of sub-group 0 (block 3) runs during backward: it needs block 3's gradients,
     * not block 0's */
    int adam0 = find(&s, 0, "ADAM.g0");
    ck_assert(depends(&s, adam0, find(&s, 0, "D2H.b3.grad")));
    ck_assert(depends(&s, adam0, find(&s, 0, "SSDR.g0.state")));
    ck_assert(!waits_for(&s, adam0, find(&s, 0, "B.b0.ln1")));
    ck_assert(depends(&s, find(&s, 0, "SSDW.g0.state"), adam0));
    /* no delayed update: iteration 1 reads block 3's weights only after iteration 0 wrote them */
    ck_assert(depends(&s, find(&s, 1, "SSDR.b3.w"), find(&s, 0, "SSDW.g0.w")));
    /* the tail (block 0 + embedding) is updated last and the next forward waits for it */
    int tail = plan_subgroup_count(&p) - 1;
    char id[32];
    snprintf(id, sizeof id, "SSDW.g%d.w", tail);
    ck_assert(depends(&s, find(&s, 1, "SSDR.embed.w"), find(&s, 0, id)));
    snprintf(id, sizeof id, "ADAM.g%d", tail);
    ck_assert(depends(&s, find(&s, 0, id), find(&s, 0, "D2H.embed.grad")));
    sched_free(&s);
    teardown();
}
END_TEST

/* Forward passes alone (an evaluation's): every block's weights loaded from SSD and its ops
 * run, each pass after the one before on the GPU, through the same weight ring (every forward
 * releases its buffer: none is held for a backward), and nothing else: no backward, no
 * recomputation, no gradient, no update, nothing sent off the GPU; the head's loss ends each
 * pass. Under a plan with micro-batches, one pass a batch. */
START_TEST(forward_only)
{
    setup(POLICY_FUYOU);
    p.n_micro = 2;
    plan_set_all_act(&p, ACT_SSD, ACT_CPU);
    Schedule s;
    Err e;
    ck_assert_int_eq(sched_build_forward(&s, &g, &p, 3, &e), 0);
    check_well_formed(&s);
    ck_assert_int_eq(s.iters, 3);
    int loads = 0, ops = 0;
    for (int t = 0; t < s.n_tasks; t++) {
        const Task *x = &s.tasks[t];
        ck_assert_msg(x->kind == TASK_FWD || (x->kind == TASK_COPY && x->cargo == CARGO_WEIGHTS &&
                                              x->to != TIER_SSD),
                      "%s in forward passes", x->id);
        ck_assert_int_eq(x->micro, 0);
        loads += x->res == RES_H2D;
        ops += x->kind == TASK_FWD;
    }
    /* each pass: every block and the edges loaded; the embedding, the blocks' ops, the head */
    ck_assert_int_eq(loads, 3 * (tiny.n_layer + 1));
    ck_assert_int_eq(ops, 3 * (1 + tiny.n_layer * g.arch->n_ops + 3));
    int h2d = find(&s, 1, "H2D.b3.w");
    ck_assert(depends(&s, h2d, find(&s, 1, "SSDR.b3.w")));
    /* two weight buffers: block 3's load waits for block 1's forward in the same pass, and
     * the next pass's first load for this one's blocks */
    ck_assert(depends(&s, h2d, find(&s, 1, "F.b1.res2")));
    ck_assert(waits_for(&s, find(&s, 2, "F.b0.ln1"), find(&s, 1, "F.head.loss")));
    sched_free(&s);
    teardown();
}
END_TEST

/* zero-infinity, as DeepSpeed runs it by default (ARCHITECTURE.md): each block's 16-bit gradient to
 * the CPU and back, its fp32 copy out in the last micro-batch and on to SSD per sub-group; the
 * step after the last backward task and those writes, one sub-group at a time from the tail,
 * each read after the previous one's writes. */
START_TEST(zero_infinity_structure)
{
    setup(POLICY_ZERO_INFINITY);
    Schedule s;
    Err e;
    ck_assert_int_eq(sched_build(&s, &g, &p, 2, &e), 0);
    check_well_formed(&s);
    double block = (double)model_block_params(&tiny), edge = (double)model_embed_params(&tiny);
    /* block 3 (sub-group 0): out, back, out in fp32, then the sub-group to SSD */
    int out = find(&s, 0, "D2H.b3.grad"), back = find(&s, 0, "H2D.b3.grad");
    int out32 = find(&s, 0, "D2H.b3.grad32"), w0 = find(&s, 0, "SSDW.g0.grad");
    ck_assert(depends(&s, back, out) && depends(&s, out32, back) && depends(&s, w0, out32));
    ck_assert_double_eq(s.tasks[out].bytes, 2 * block);
    ck_assert_double_eq(s.tasks[back].bytes, 2 * block);
    ck_assert_double_eq(s.tasks[out32].bytes, 4 * block);
    ck_assert_double_eq(s.tasks[w0].bytes, 4 * block);
    ck_assert_int_eq(s.tasks[w0].cargo, CARGO_FP32_GRADS);
    ck_assert_int_eq(s.tasks[w0].to, TIER_SSD);
    ck_assert_int_eq(s.tasks[w0].phase, PHASE_BACKWARD);
    /* the tail's gradients (block 0 and the edges) go out after the last backward task */
    int end_bwd = find(&s, 0, "B.embed"), w3 = find(&s, 0, "SSDW.g3.grad");
    ck_assert(depends(&s, w3, find(&s, 0, "D2H.embed.grad32")));
    ck_assert(depends(&s, w3, find(&s, 0, "D2H.b0.grad32")));
    ck_assert_double_eq(s.tasks[w3].bytes, 4 * (block + edge));
    /* the step starts with the tail (DeepSpeed's first sub-group) after backward and after
     * every gradient write */
    int first = find(&s, 0, "SSDR.g3.state");
    ck_assert(depends(&s, first, end_bwd));
    for (int k = 0; k < plan_subgroup_count(&p); k++) {
        char id[32];
        snprintf(id, sizeof id, "SSDW.g%d.grad", k);
        ck_assert(depends(&s, first, find(&s, 0, id)));
    }
    /* each sub-group: states, then gradients read back; Adam; new weights, then states out;
     * the next sub-group's read after that write, so no read overlaps the previous write */
    static const char *chain[] = {"SSDR.g%d.state", "SSDR.g%d.grad", "ADAM.g%d", "SSDW.g%d.w",
                                  "SSDW.g%d.state"};
    int prev = -1;
    for (int k = plan_subgroup_count(&p) - 1; k >= 0; k--)
        for (size_t i = 0; i < sizeof chain / sizeof chain[0]; i++) {
            char id[32];
            snprintf(id, sizeof id, chain[i], k);
            int t = find(&s, 0, id);
            ck_assert_msg(prev < 0 || depends(&s, t, prev), "%s does not follow its "
                          "predecessor", id);
            ck_assert(waits_for(&s, t, end_bwd));
            prev = t;
        }
    ck_assert_double_eq(s.tasks[find(&s, 0, "SSDR.g2.grad")].bytes, 4 * block);
    ck_assert_double_eq(s.tasks[find(&s, 0, "SSDR.g2.state")].bytes, 12 * block);
    /* no delayed update, and the next iteration starts once step() returns: its first loads
     * wait for the last write of the step */
    ck_assert(depends(&s, find(&s, 1, "SSDR.embed.w"), prev));
    ck_assert(depends(&s, find(&s, 1, "SSDR.b3.w"), prev));
    sched_free(&s);
    /* DeepSpeed's single gradient buffer: a block's backward starts once the block before has
     * copied its gradients out (its hook returns after them) */
    p.grad_buffers = 1;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), 0);
    ck_assert(depends(&s, find(&s, 0, "R.b2.ln1"), find(&s, 0, "D2H.b3.grad32")));
    sched_free(&s);
    teardown();
}
END_TEST

/* zero-infinity with micro-batches: the 16-bit round trip in each (DeepSpeed adds them on the
 * GPU, so the host adds nothing), the fp32 gradients only in the last. */
START_TEST(zero_infinity_micro_batches)
{
    setup(POLICY_ZERO_INFINITY);
    p.n_micro = 2;
    Schedule s;
    Err e;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), 0);
    check_well_formed(&s);
    ck_assert_int_eq(s.tasks[find(&s, 0, "m0.D2H.b2.grad")].params, 0);
    find(&s, 0, "m0.H2D.b2.grad");
    find(&s, 0, "m1.H2D.b2.grad");
    ck_assert_int_lt(sched_find(&s, 0, "m0.D2H.b2.grad32"), 0);
    ck_assert(depends(&s, find(&s, 0, "m1.D2H.b2.grad32"), find(&s, 0, "m1.H2D.b2.grad")));
    ck_assert_int_lt(sched_find(&s, 0, "m0.D2H.embed.grad32"), 0);
    find(&s, 0, "m1.D2H.embed.grad32");
    /* the next micro-batch's head starts the edges' gradients once the last ones are back */
    ck_assert(depends(&s, find(&s, 0, "m1.F.head.lm_head"), find(&s, 0, "m0.H2D.embed.grad")));
    sched_free(&s);
    teardown();
}
END_TEST

/* DeepSpeed's gradient swapper fills its four pinned buffers (a sub-group's gradients each, in
 * our blocks) and, out of free ones, waits for all its writes: sub-group 4's fp32 gradients wait
 * for the writes of sub-groups 0 to 3. States in CPU memory: the gradients stay there, and the
 * update reads them from the last micro-batch's copies. */
START_TEST(zero_infinity_gradient_buffers)
{
    Graph gd;
    Plan pd;
    Schedule s;
    Err e;
    ck_assert_int_eq(graph_init(&gd, &deep, 2, 32, &e), 0);
    ck_assert_int_eq(plan_init(&pd, &gd, POLICY_ZERO_INFINITY, &e), 0);
    pd.state_buffers = 1;
    ck_assert_int_eq(sched_build(&s, &gd, &pd, 1, &e), 0);
    /* sub-group 4 is block 5 */
    int g4 = find(&s, 0, "D2H.b5.grad32");
    ck_assert_int_eq(s.tasks[g4].slot.host_grads, 4 % ZI_OPTIM_BUFFERS);
    for (int k = 0; k < 4; k++) {
        char id[32];
        snprintf(id, sizeof id, "SSDW.g%d.grad", k);
        ck_assert(depends(&s, g4, find(&s, 0, id)));
    }
    ck_assert(!waits_for(&s, find(&s, 0, "D2H.b6.grad32"), find(&s, 0, "SSDW.g0.grad")));
    sched_free(&s);
    /* the last two sub-groups' states in CPU memory: no gradient write or read for them */
    pd.optim_cpu_groups = 2;
    ck_assert_int_eq(sched_build(&s, &gd, &pd, 1, &e), 0);
    int tail = plan_subgroup_count(&pd) - 1;
    char id[32];
    snprintf(id, sizeof id, "SSDW.g%d.grad", tail);
    ck_assert_int_lt(sched_find(&s, 0, id), 0);
    snprintf(id, sizeof id, "SSDR.g%d.grad", tail - 1);
    ck_assert_int_lt(sched_find(&s, 0, id), 0);
    snprintf(id, sizeof id, "ADAM.g%d", tail);
    ck_assert(depends(&s, find(&s, 0, id), find(&s, 0, "D2H.embed.grad32")));
    ck_assert_int_eq(s.tasks[find(&s, 0, "D2H.b0.grad32")].slot.host_grads, -1);
    sched_free(&s);
    plan_free(&pd);
    graph_free(&gd);
}
END_TEST

/* DeepSpeed's defaults in the plan's blocks (plan.h): GPT-3 13B's blocks hold 315 M parameters,
 * 175B's 1.81 G. */
START_TEST(zero_infinity_config)
{
    static const struct {
        const char *model;
        int subgroup, tail, weights, prefetch, pinned, grads;
        Tier home;
    } want[] = {
        /* 1e9 / 315 M = 3.2 blocks; (1e9 - 268 M of edges) / 315 M = 2.3; buffers of the
         * 257 M-parameter embedding, 5 of them = 4.1 blocks */
        {"gpt3-13b", 3, 2, 3, 1, 4, 1, TIER_SSD},
        /* 1e9 / 1.81 G = 0.55: one block each; 5 x 618 M = 1.7 blocks of swap buffers */
        {"gpt3-175b", 1, 1, 1, 0, 2, 1, TIER_SSD},
        /* 124 M parameters: one sub-group, the weights in max_in_cpu */
        {"gpt2-124m", 12, 12, 12, 1, 12, 1, TIER_CPU},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        Graph gg;
        Plan pp;
        Err e;
        ck_assert_int_eq(graph_init(&gg, model_preset_find(want[i].model), 1, 1024, &e), 0);
        ck_assert_int_eq(plan_init(&pp, &gg, POLICY_ZERO_INFINITY, &e), 0);
        plan_zero_infinity_config(&pp, &gg.cfg);
        ck_assert_int_eq(plan_validate(&pp, &e), 0);
        ck_assert_int_eq(pp.subgroup_blocks, want[i].subgroup);
        ck_assert_int_eq(pp.tail_blocks, want[i].tail);
        ck_assert_int_eq(pp.weight_buffers, want[i].weights);
        ck_assert_int_eq(pp.prefetch_depth, want[i].prefetch);
        ck_assert_int_eq(pp.pinned_buffers, want[i].pinned);
        ck_assert_int_eq(pp.grad_buffers, want[i].grads);
        ck_assert_int_eq(pp.state_buffers, 1);
        ck_assert_int_eq(pp.weights, want[i].home);
        ck_assert_int_eq(pp.optim, TIER_SSD);
        ck_assert_int_eq(plan_act(&pp, 3, BLOCK_CKPT_OP), ACT_CPU);
        ck_assert_int_eq(plan_act(&pp, 3, 6), ACT_RECOMPUTE);
        plan_free(&pp);
        graph_free(&gg);
    }
}
END_TEST

START_TEST(all_on_gpu)
{
    setup(POLICY_FUYOU);
    p.weights = p.optim = TIER_GPU;
    plan_set_all_act(&p, ACT_GPU, ACT_GPU);
    Schedule s;
    Err e;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), 0);
    check_well_formed(&s);
    for (int t = 0; t < s.n_tasks; t++)
        ck_assert_msg(s.tasks[t].res == RES_GPU, "%s is not on the GPU", s.tasks[t].id);
    /* embed + 10 per block + lnf, lm_head, loss forward; backward skips residuals, the loss
     * and the head (fused into its forward): lnf, the blocks, embed; every sub-group's AdamW
     * on the GPU, as a GPU sub-group's: after its first block's backward, the tail's last */
    int G = plan_subgroup_count(&p), adams = 0;
    for (int t = 0; t < s.n_tasks; t++)
        adams += s.tasks[t].kind == TASK_ADAM;
    ck_assert_int_eq(adams, G);
    ck_assert_int_eq(s.n_tasks, (1 + 40 + 3) + (1 + 4 * 8 + 1) + G);
    ck_assert_int_eq(s.tasks[s.n_tasks - 1].kind, TASK_ADAM);
    ck_assert_str_eq(s.tasks[s.n_tasks - 1].id, "ADAM.g3");
    sched_free(&s);
    teardown();
}
END_TEST

START_TEST(n_micro)
{
    setup(POLICY_FUYOU);
    p.n_micro = 3;
    Schedule s;
    Err e;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), 0);
    check_well_formed(&s);
    find(&s, 0, "m0.F.b0.qkv");
    find(&s, 0, "m2.B.b3.fc2");
    /* Adam waits for the last micro-batch's gradients */
    ck_assert(depends(&s, find(&s, 0, "m2.ADAM.g0"), find(&s, 0, "m2.D2H.b3.grad")));
    /* every gradient copy says how many parameters the host adds into the sum after it */
    ck_assert_int_eq(s.tasks[find(&s, 0, "m1.D2H.b3.grad")].params,
                     model_block_params(&g.cfg));
    ck_assert_int_eq(s.tasks[find(&s, 0, "m0.D2H.embed.grad")].params,
                     model_embed_params(&g.cfg));
    /* the fused head starts a micro-batch's edge gradients: after the last one's left */
    ck_assert(depends(&s, find(&s, 0, "m1.F.head.lm_head"), find(&s, 0, "m0.D2H.embed.grad")));
    ck_assert(depends(&s, find(&s, 0, "m2.F.head.lm_head"), find(&s, 0, "m1.D2H.embed.grad")));
    sched_free(&s);
    /* one micro-batch: nothing to add */
    p.n_micro = 1;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), 0);
    ck_assert_int_eq(s.tasks[find(&s, 0, "D2H.b3.grad")].params, 0);
    sched_free(&s);
    teardown();
}
END_TEST

/* One activation ring serves both ways: a backward fetch into a slot waits until the slot's last
 * forward user of the micro-batch has computed into it and its copies out have drained. */
START_TEST(activation_ring_both_ways)
{
    setup(POLICY_FUYOU);
    p.weights = p.optim = TIER_CPU;
    plan_set_all_act(&p, ACT_CPU, ACT_CPU);
    p.act_buffers = 2;
    Schedule s;
    Err e;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), 0);
    check_well_formed(&s);
    /* four blocks, two slots: block 3's fetch (the first) takes slot 0, last used forward by
     * block 2; block 2's takes slot 1, last used by block 3 */
    int f3 = find(&s, 0, "H2D.b3.ckpt"), f2 = find(&s, 0, "H2D.b2.act");
    ck_assert_int_eq(s.tasks[f3].slot.gpu_acts, 0);
    ck_assert_int_eq(s.tasks[f2].slot.gpu_acts, 1);
    ck_assert_int_eq(s.tasks[find(&s, 0, "D2H.b2.act")].slot.gpu_acts, 0);
    ck_assert(waits_for(&s, f3, find(&s, 0, "D2H.b2.act")));
    ck_assert(waits_for(&s, f3, find(&s, 0, "D2H.b2.ckpt")));
    ck_assert(waits_for(&s, f3, find(&s, 0, "F.b2.res2")));
    ck_assert(waits_for(&s, f2, find(&s, 0, "D2H.b3.act")));
    sched_free(&s);
    teardown();
}
END_TEST

START_TEST(recompute_closure)
{
    setup(POLICY_FUYOU);
    bool rerun[ARCH_MAX_OPS];
    /* everything recomputed: the forward up to gelu (fc2 and res2 outputs are not needed) */
    plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
    sched_recompute_set(&p, 1, rerun);
    for (int i = 0; i < GPT2_OPS; i++)
        ck_assert_int_eq(rerun[i], i <= GPT2_GELU);
    /* only gelu's input (fc1's output) recomputed: fc1 again, from ln2's kept output */
    plan_set_all_act(&p, ACT_CPU, ACT_CPU);
    plan_set_act(&p, 1, GPT2_GELU, ACT_RECOMPUTE);
    sched_recompute_set(&p, 1, rerun);
    for (int i = 0; i < GPT2_OPS; i++)
        ck_assert_int_eq(rerun[i], i == GPT2_FC1);
    /* ln2's input (res1's output) recomputed: res1 needs proj of attention's kept output */
    plan_set_all_act(&p, ACT_CPU, ACT_CPU);
    plan_set_act(&p, 1, GPT2_LN2, ACT_RECOMPUTE);
    sched_recompute_set(&p, 1, rerun);
    for (int i = 0; i < GPT2_OPS; i++)
        ck_assert_int_eq(rerun[i], i == GPT2_PROJ || i == GPT2_RES1);
    teardown();
}
END_TEST

START_TEST(subgroups)
{
    setup(POLICY_FUYOU);
    p.n_layer = 10;
    p.subgroup_blocks = 3;
    p.tail_blocks = 2;
    /* blocks 7-9, 4-6, 2-3 (short), then the tail 0-1 */
    ck_assert_int_eq(plan_subgroup_count(&p), 4);
    int first, count;
    plan_subgroup_blocks(&p, 0, &first, &count);
    ck_assert_int_eq(first, 7);
    ck_assert_int_eq(count, 3);
    plan_subgroup_blocks(&p, 2, &first, &count);
    ck_assert_int_eq(first, 2);
    ck_assert_int_eq(count, 2);
    plan_subgroup_blocks(&p, 3, &first, &count);
    ck_assert_int_eq(first, 0);
    ck_assert_int_eq(count, 2);
    for (int b = 0; b < 10; b++) {
        int k = plan_subgroup_of_block(&p, b);
        plan_subgroup_blocks(&p, k, &first, &count);
        ck_assert(b >= first && b < first + count);
    }
    p.n_layer = 4;
    teardown();
}
END_TEST

START_TEST(bad_plans)
{
    setup(POLICY_FUYOU);
    Schedule s;
    Err e;
    p.prefetch_depth = 2; /* needs 3 weight buffers */
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), -EINVAL);
    tu_assert_contains(e.msg, "prefetch depth of 2");
    p.prefetch_depth = 1;
    p.seqs_per_micro = 3;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), -EINVAL);
    tu_assert_contains(e.msg, "does not match");
    p.seqs_per_micro = 2;
    ck_assert_int_eq(sched_build(&s, &g, &p, 0, &e), -EINVAL);
    teardown();
}
END_TEST

/* Iteration and micro-batch counts whose schedule would not fit in a few GB are refused with
 * the estimate before anything is built: 22369622 iterations of 96 blocks overflowed the use
 * count (int) into a heap overflow, as did 7456541 micro-batches. */
START_TEST(size_limit)
{
    Graph big;
    Plan bp;
    Schedule s;
    Err e;
    ck_assert_int_eq(graph_init(&big, model_preset_find("gpt3-175b"), 1, 1024, &e), 0);
    ck_assert_int_eq(plan_init(&bp, &big, POLICY_FUYOU, &e), 0);
    ck_assert_int_eq(sched_build(&s, &big, &bp, 22369622, &e), -EINVAL);
    tu_assert_contains(e.msg, "22369622 iterations");
    tu_assert_contains(e.msg, "the limit is 4.00 GiB");
    bp.n_micro = 7456541;
    ck_assert_int_eq(sched_build(&s, &big, &bp, 3, &e), -EINVAL);
    tu_assert_contains(e.msg, "micro-batches");
    bp.n_micro = 1;
    /* within the limit, it builds */
    ck_assert_int_eq(sched_build(&s, &big, &bp, 2, &e), 0);
    sched_free(&s);
    plan_free(&bp);
    graph_free(&big);
}
END_TEST

/* Counts beyond PLAN_MAX_COUNT are refused by plan_validate (a sub-group of 2^31 - 1 blocks
 * overflowed the sub-group count; a prefetch depth of 2^31 - 1 its buffer count) */
START_TEST(plan_count_limits)
{
    setup(POLICY_FUYOU);
    Err e;
    p.subgroup_blocks = 2147483647;
    ck_assert_int_eq(plan_validate(&p, &e), -EINVAL);
    tu_assert_contains(e.msg, "sub-group blocks must be 1 to 1048576");
    p.subgroup_blocks = 1;
    p.prefetch_depth = 2147483646;
    p.weight_buffers = 2147483647;
    ck_assert_int_eq(plan_validate(&p, &e), -EINVAL);
    tu_assert_contains(e.msg, "prefetch depth");
    p.prefetch_depth = 1;
    p.weight_buffers = 2;
    p.n_micro = 2147483647;
    ck_assert_int_eq(plan_validate(&p, &e), -EINVAL);
    tu_assert_contains(e.msg, "micro-batches");
    teardown();
}
END_TEST

/* The estimate bounds every schedule from above, whatever the plan */
START_TEST(estimate_bounds)
{
    static const ModelConfig shapes[] = {
        {.name = "tiny", .n_layer = 4, .d_model = 64, .n_head = 4, .d_ff = 256, .vocab = 128,
         .max_seq = 64, .tied = true, .dtype = DTYPE_BF16},
        {.name = "one", .n_layer = 1, .d_model = 64, .n_head = 4, .d_ff = 256, .vocab = 128,
         .max_seq = 64, .tied = false, .dtype = DTYPE_BF16},
        {.name = "deep", .n_layer = 40, .d_model = 64, .n_head = 4, .d_ff = 256, .vocab = 128,
         .max_seq = 64, .tied = true, .dtype = DTYPE_BF16},
    };
    static const ActPlace inner[] = {ACT_RECOMPUTE, ACT_GPU, ACT_CPU, ACT_SSD};
    static const Tier tiers[] = {TIER_GPU, TIER_CPU, TIER_SSD};
    for (size_t m = 0; m < sizeof shapes / sizeof shapes[0]; m++)
        for (int policy = 0; policy < 2; policy++)
            for (int t = 0; t < 3; t++)
                for (int a = 0; a < 4; a++)
                    for (int micro = 1; micro <= 3; micro += 2)
                    for (int whole = 0; whole < 2; whole++) {
                        Graph gg;
                        Plan pp;
                        Schedule s;
                        Err e;
                        ck_assert_int_eq(graph_init(&gg, &shapes[m], 2, 32, &e), 0);
                        ck_assert_int_eq(plan_init(&pp, &gg, policy, &e), 0);
                        /* everything on the GPU is fuyou's, on one micro-batch */
                        if (tiers[t] == TIER_GPU && (policy || micro > 1)) {
                            plan_free(&pp);
                            graph_free(&gg);
                            continue;
                        }
                        pp.weights = pp.optim = tiers[t];
                        pp.state_buffers = policy == POLICY_ZERO_INFINITY ? 2 : 3;
                        pp.n_micro = micro;
                        /* every PCIe copy in its most chunks, or whole */
                        pp.copy_chunk_bytes = whole ? 0 : 1;
                        plan_set_all_act(&pp, tiers[t] == TIER_GPU ? ACT_GPU : ACT_SSD,
                                         inner[a]);
                        int rc = sched_build(&s, &gg, &pp, 2, &e);
                        ck_assert_msg(rc == 0, "%s", e.msg);
                        double bound = sched_estimate_tasks(gg.arch, gg.cfg.n_layer, micro, 2);
                        ck_assert_msg(s.n_tasks <= bound, "%s: %d tasks, estimate %g",
                                      shapes[m].name, s.n_tasks, bound);
                        /* not absurdly loose where copies cross PCIe in their most chunks */
                        if (tiers[t] != TIER_GPU && !whole)
                            ck_assert_double_le(bound, 4.0 * s.n_tasks + 64);
                        sched_free(&s);
                        plan_free(&pp);
                        graph_free(&gg);
                    }
}
END_TEST

/* "<id>.c<k>" */
static const char *chunk_id(const char *id, int c)
{
    static char out[SCHED_ID_MAX + 8];
    snprintf(out, sizeof out, "%.*s.c%c", SCHED_ID_MAX, id, (char)('0' + c % 10));
    return out;
}

/* A PCIe copy above the plan's chunk is a chain of chunks: "<id>.c<k>", its bytes split, the
 * first waiting for what the copy waited for, the next for the one before, and what waited for
 * the copy for the last; other tasks are as they were. */
START_TEST(copies_in_chunks)
{
    setup_model(&tiny, POLICY_FUYOU);
    plan_set_all_act(&p, ACT_CPU, ACT_CPU);
    Err e;
    Schedule whole, cut;
    p.copy_chunk_bytes = 0;
    ck_assert_int_eq(sched_build(&whole, &g, &p, 2, &e), 0);
    p.copy_chunk_bytes = 4096;
    ck_assert_int_eq(sched_build(&cut, &g, &p, 2, &e), 0);
    check_well_formed(&cut);
    int chunked = 0, n = 0;
    for (int t = 0; t < whole.n_tasks; t++) {
        const Task *x = &whole.tasks[t];
        bool pcie = x->kind == TASK_COPY && (x->res == RES_H2D || x->res == RES_D2H);
        int k = pcie && x->bytes > 4096 ? (int)fmin(ceil(x->bytes / 4096), SCHED_COPY_CHUNKS) : 1;
        if (k == 1) {
            int u = find(&cut, x->iter, x->id);
            ck_assert_int_eq(cut.tasks[u].n_chunks, 0);
            ck_assert_double_eq(cut.tasks[u].bytes, x->bytes);
            n++;
            continue;
        }
        chunked++;
        double bytes = 0;
        int prev = -1;
        for (int c = 0; c < k; c++) {
            int u = find(&cut, x->iter, chunk_id(x->id, c));
            ck_assert_int_eq(cut.tasks[u].chunk, c);
            ck_assert_int_eq(cut.tasks[u].n_chunks, k);
            ck_assert_int_eq(cut.tasks[u].priority, x->priority);
            bytes += cut.tasks[u].bytes;
            if (prev >= 0)
                ck_assert(depends(&cut, u, prev));
            prev = u;
            n++;
        }
        ck_assert_double_eq_tol(bytes, x->bytes, 1e-6 * x->bytes);
        /* what waited for the copy (or for a copy now in chunks: its first) waits for its last
         * chunk */
        for (int v = 0; v < whole.n_tasks; v++) {
            if (!depends(&whole, v, t))
                continue;
            const Task *y = &whole.tasks[v];
            int u = sched_find(&cut, y->iter, y->id);
            if (u < 0)
                u = find(&cut, y->iter, chunk_id(y->id, 0));
            ck_assert(depends(&cut, u, prev));
        }
    }
    ck_assert_int_gt(chunked, 0);
    ck_assert_int_eq(n, cut.n_tasks);
    sched_free(&whole);
    sched_free(&cut);
    teardown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("sched");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fuyou_structure);
    tcase_add_test(tc, zero_infinity_structure);
    tcase_add_test(tc, zero_infinity_micro_batches);
    tcase_add_test(tc, zero_infinity_gradient_buffers);
    tcase_add_test(tc, zero_infinity_config);
    tcase_add_test(tc, all_on_gpu);
    tcase_add_test(tc, forward_only);
    tcase_add_test(tc, n_micro);
    tcase_add_test(tc, activation_ring_both_ways);
    tcase_add_test(tc, recompute_closure);
    tcase_add_test(tc, subgroups);
    tcase_add_test(tc, bad_plans);
    tcase_add_test(tc, size_limit);
    tcase_add_test(tc, plan_count_limits);
    tcase_add_test(tc, estimate_bounds);
    tcase_add_test(tc, copies_in_chunks);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
