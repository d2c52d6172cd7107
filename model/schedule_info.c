/* schedule_info: what the schedule says about ops and tasks, apart from building it (see
 * schedule.h): resource and phase names, the tensors each block op keeps and the recomputation
 * closure, successor lists and lookups by id, and the size bound a schedule is held to. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

const char *resource_name(Resource r)
{
    static const char *names[] = {"gpu", "h2d", "d2h", "ssd_read", "ssd_write", "cpu_adam"};
    assert(r >= 0 && r < RES_COUNT);
    return names[r];
}

int resource_parse(const char *s, Resource *out)
{
    for (int r = 0; r < RES_COUNT; r++)
        if (!strcmp(s, resource_name(r)))
            return *out = r, 0;
    return -EINVAL;
}

const char *phase_name(Phase p)
{
    static const char *names[] = {"forward", "backward", "optimizer"};
    return names[p];
}

int phase_parse(const char *s, Phase *out)
{
    for (int p = 0; p <= PHASE_OPTIMIZER; p++)
        if (!strcmp(s, phase_name(p)))
            return *out = p, 0;
    return -EINVAL;
}

/* ---- recomputation ---------------------------------------------------------------------- */

enum { X_IN = GRAPH_OPS_PER_BLOCK }; /* the block input, as a tensor index beside op outputs */

/* Inputs of each block op (tensor indices: op outputs 0..9, X_IN), -1 terminated. */
static const int op_inputs[GRAPH_OPS_PER_BLOCK][3] = {
    {X_IN, -1}, {0, -1}, {1, -1}, {2, -1}, {X_IN, 3, -1},
    {4, -1},    {5, -1}, {6, -1}, {7, -1}, {4, 8, -1},
};
/* Tensors each op keeps for backward (its act_bytes), -1 terminated. */
static const int op_saves[GRAPH_OPS_PER_BLOCK][3] = {
    {X_IN, -1}, {0, -1}, {1, 2, -1}, {-1}, {-1}, {4, -1}, {5, -1}, {6, -1}, {7, -1}, {-1},
};

const int *sched_op_saves(int op)
{
    assert(op >= 0 && op < GRAPH_OPS_PER_BLOCK);
    return op_saves[op];
}

int sched_fwd_act_slot(const Plan *p, int block)
{
    return block % p->act_buffers;
}

static void need(int tensor, bool avail[], bool rerun[])
{
    if (avail[tensor])
        return;
    assert(tensor != X_IN);
    avail[tensor] = rerun[tensor] = true;
    for (const int *in = op_inputs[tensor]; *in >= 0; in++)
        need(*in, avail, rerun);
}

void sched_recompute_set(const Plan *p, int block, bool rerun[GRAPH_OPS_PER_BLOCK])
{
    bool avail[GRAPH_OPS_PER_BLOCK + 1] = {false};
    avail[X_IN] = true;
    memset(rerun, 0, GRAPH_OPS_PER_BLOCK * sizeof *rerun);
    for (int i = 0; i < GRAPH_OPS_PER_BLOCK; i++)
        if (plan_act(p, block, i) != ACT_RECOMPUTE)
            for (const int *t = op_saves[i]; *t >= 0; t++)
                avail[*t] = true;
    for (int i = 0; i < GRAPH_OPS_PER_BLOCK; i++)
        if (plan_act(p, block, i) == ACT_RECOMPUTE)
            for (const int *t = op_saves[i]; *t >= 0; t++)
                need(*t, avail, rerun);
}

int sched_successors(const Schedule *s, int **first_out, int **succ_out)
{
    int n = s->n_tasks;
    int *first = calloc((size_t)n + 1, sizeof(int)), *fill = calloc((size_t)n + 1, sizeof(int));
    int *succ = malloc(((size_t)s->n_deps + 1) * sizeof(int));
    *first_out = first;
    *succ_out = succ;
    if (!first || !fill || !succ) {
        free(fill);
        return -ENOMEM;
    }
    for (int t = 0; t < n; t++) {
        const int *d = sched_deps(s, t);
        for (int i = 0; i < s->tasks[t].n_deps; i++)
            first[d[i] + 1]++;
    }
    for (int t = 0; t < n; t++)
        first[t + 1] += first[t];
    for (int t = 0; t < n; t++) {
        const int *d = sched_deps(s, t);
        for (int i = 0; i < s->tasks[t].n_deps; i++)
            succ[first[d[i]] + fill[d[i]]++] = t;
    }
    free(fill);
    return 0;
}

int sched_find(const Schedule *s, int iter, const char *id)
{
    for (int i = 0; i < s->n_tasks; i++)
        if (s->tasks[i].iter == iter && !strcmp(s->tasks[i].id, id))
            return i;
    return -1;
}

/* The most tasks one block's use per micro-batch emits (forward 10, recompute up to 8,
 * backward 10, weight loads and activation swaps both ways, the gradient copy), those of the
 * embedding and head per micro-batch, and of one sub-group's update per iteration (state reads
 * and writes, Adam, the new weights' copies), each PCIe copy among them (at most 8, 8 and 2)
 * counted as its most chunks; tests/test_sched.c holds every plan below it. */
enum { PCIE_EXTRA = SCHED_COPY_CHUNKS - 1 };
enum { TASKS_PER_BLOCK = 40 + 8 * PCIE_EXTRA, TASKS_PER_EDGE = 24 + 8 * PCIE_EXTRA,
       TASKS_PER_GROUP = 8 + 2 * PCIE_EXTRA, TASKS_PER_ITER = 8 };

double sched_estimate_tasks(int n_layer, int micro_batches, int iters)
{
    /* doubles: the product of unchecked counts must not overflow before it is compared */
    double L = n_layer, groups = n_layer + 1.0; /* sub-groups of one block, and the tail */
    double per_micro = TASKS_PER_BLOCK * L + TASKS_PER_EDGE;
    return (double)iters * ((double)micro_batches * per_micro + TASKS_PER_GROUP * groups +
                            TASKS_PER_ITER);
}

double sched_estimate_bytes(int n_layer, int micro_batches, int iters)
{
    return sched_estimate_tasks(n_layer, micro_batches, iters) * SCHED_BYTES_PER_TASK;
}
