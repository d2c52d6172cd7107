/* sched_testutil: what the schedule's Check suites share (test_sched.c, test_sched_rings.c): two
 * small models, the graph and plan under test, and their setup and teardown. Header-only; tests
 * only. Each suite that includes it has its own g and p. */
#ifndef FUYOU_SCHED_TESTUTIL_H
#define FUYOU_SCHED_TESTUTIL_H

#include "schedule.h"
#include "testutil.h"

static const ModelConfig tiny = {.name = "tiny", .n_layer = 4, .d_model = 64, .n_head = 4,
                                 .d_ff = 256, .vocab = 128, .max_seq = 64, .tied = true,
                                 .dtype = DTYPE_BF16};

/* Ten blocks: zero-infinity's gradient buffers wrap (ZI_OPTIM_BUFFERS sub-groups) */
static const ModelConfig deep = {.name = "deep", .n_layer = 10, .d_model = 64, .n_head = 4,
                                 .d_ff = 256, .vocab = 128, .max_seq = 64, .tied = true,
                                 .dtype = DTYPE_BF16};

static Graph g;
static Plan p;

static inline void setup_model(const ModelConfig *c, Policy policy)
{
    Err e;
    ck_assert_int_eq(graph_init(&g, c, 2, 32, &e), 0);
    ck_assert_int_eq(plan_init(&p, &g, policy, &e), 0);
    if (policy == POLICY_ZERO_INFINITY)
        p.state_buffers = 2;
}

static inline void setup(Policy policy)
{
    setup_model(&tiny, policy);
}

static inline void teardown(void)
{
    plan_free(&p);
    graph_free(&g);
}

#endif
