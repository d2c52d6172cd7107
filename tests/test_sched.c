/* Check suite for model/sched: ids, well-formedness (acyclic, unique ids), the dependencies that
 * carry the policies (buffers, prefetch, no delayed update, optimizer placement), and the
 * recomputation closure. */
#include <errno.h>

#include "schedule.h"
#include "testutil.h"

static const ModelConfig tiny = {.name = "tiny", .n_layer = 4, .d_model = 64, .n_head = 4,
                                 .d_ff = 256, .vocab = 128, .max_seq = 64, .tied = true,
                                 .dtype = DTYPE_BF16};

static Graph g;
static Plan p;

static void setup(Policy policy)
{
    Err e;
    ck_assert_int_eq(graph_init(&g, &tiny, 2, 32, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, policy, &e), 0);
    if (policy == POLICY_ZERO_INFINITY)
        p.state_buffers = 2;
}

static void teardown(void)
{
    plan_free(&p);
    graph_free(&g);
}

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

START_TEST(zero_infinity_structure)
{
    setup(POLICY_ZERO_INFINITY);
    Schedule s;
    Err e;
    ck_assert_int_eq(sched_build(&s, &g, &p, 2, &e), 0);
    check_well_formed(&s);
    int end_bwd = find(&s, 0, "B.embed");
    /* the optimizer step comes after backward: every state read and Adam waits for its end */
    for (int k = 0; k < plan_subgroup_count(&p); k++) {
        char id[32];
        snprintf(id, sizeof id, "SSDR.g%d.state", k);
        ck_assert(depends(&s, find(&s, 0, id), end_bwd));
        snprintf(id, sizeof id, "ADAM.g%d", k);
        ck_assert(depends(&s, find(&s, 0, id), end_bwd));
    }
    /* pipelined one ahead: the read of sub-group 2 waits for the write of sub-group 0 */
    ck_assert(depends(&s, find(&s, 0, "SSDR.g2.state"), find(&s, 0, "SSDW.g0.state")));
    sched_free(&s);
    teardown();
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
    /* embed + 10 per block + lnf, lm_head, loss forward; backward skips residuals and loss */
    ck_assert_int_eq(s.n_tasks, (1 + 40 + 3) + (1 + 4 * 8 + 2) + 1);
    ck_assert_int_eq(s.tasks[s.n_tasks - 1].kind, TASK_ADAM);
    sched_free(&s);
    teardown();
}
END_TEST

START_TEST(micro_batches)
{
    setup(POLICY_FUYOU);
    p.micro_batches = 3;
    Schedule s;
    Err e;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), 0);
    check_well_formed(&s);
    find(&s, 0, "m0.F.b0.qkv");
    find(&s, 0, "m2.B.b3.fc2");
    /* Adam waits for the last micro-batch's gradients */
    ck_assert(depends(&s, find(&s, 0, "m2.ADAM.g0"), find(&s, 0, "m2.D2H.b3.grad")));
    sched_free(&s);
    teardown();
}
END_TEST

START_TEST(recompute_closure)
{
    setup(POLICY_FUYOU);
    bool rerun[GRAPH_OPS_PER_BLOCK];
    /* everything recomputed: the forward up to gelu (fc2 and res2 outputs are not needed) */
    plan_set_all_act(&p, ACT_CPU, ACT_RECOMPUTE);
    sched_recompute_set(&p, 1, rerun);
    for (int i = 0; i < GRAPH_OPS_PER_BLOCK; i++)
        ck_assert_int_eq(rerun[i], i < 8);
    /* only gelu's input (fc1's output) recomputed: fc1 again, from ln2's kept output */
    plan_set_all_act(&p, ACT_CPU, ACT_CPU);
    plan_set_act(&p, 1, 7, ACT_RECOMPUTE);
    sched_recompute_set(&p, 1, rerun);
    for (int i = 0; i < GRAPH_OPS_PER_BLOCK; i++)
        ck_assert_int_eq(rerun[i], i == 6);
    /* ln2's input (res1's output) recomputed: res1 needs proj of attention's kept output */
    plan_set_all_act(&p, ACT_CPU, ACT_CPU);
    plan_set_act(&p, 1, 5, ACT_RECOMPUTE);
    sched_recompute_set(&p, 1, rerun);
    for (int i = 0; i < GRAPH_OPS_PER_BLOCK; i++)
        ck_assert_int_eq(rerun[i], i == 3 || i == 4);
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
    p.micro_batch = 3;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), -EINVAL);
    tu_assert_contains(e.msg, "does not match");
    p.micro_batch = 2;
    ck_assert_int_eq(sched_build(&s, &g, &p, 0, &e), -EINVAL);
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
    tcase_add_test(tc, all_on_gpu);
    tcase_add_test(tc, micro_batches);
    tcase_add_test(tc, recompute_closure);
    tcase_add_test(tc, subgroups);
    tcase_add_test(tc, bad_plans);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
