/* schedule_info: what the schedule says about ops and tasks, apart from building it (see
 * schedule.h): resource and phase names, the ops a plan recomputes, successor lists and lookups
 * by id, and the size bound a schedule is held to. */
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

int sched_fwd_act_slot(const Plan *p, int block)
{
    return block % p->act_buffers;
}

void sched_recompute_set(const Plan *p, int block, bool rerun[])
{
    bool kept[ARCH_MAX_OPS];
    for (int i = 0; i < p->arch->n_ops; i++)
        kept[i] = plan_act(p, block, i) != ACT_RECOMPUTE;
    arch_recompute_set(p->arch, kept, rerun);
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

/* The most tasks one block's use per micro-batch emits (forward, recompute and backward: at
 * most three per op; weight loads and activation swaps both ways and the gradient copy: 10),
 * those of the embedding and head per micro-batch, and of one sub-group's update per iteration
 * (state reads and writes, Adam, the new weights' copies), each PCIe copy among them (at most 8,
 * 8 and 2) counted as its most chunks; tests/test_sched.c holds every plan below it. */
enum { PCIE_EXTRA = SCHED_COPY_CHUNKS - 1 };
enum { TASKS_PER_BLOCK_COPIES = 10 + 8 * PCIE_EXTRA, TASKS_PER_EDGE = 24 + 8 * PCIE_EXTRA,
       TASKS_PER_GROUP = 8 + 2 * PCIE_EXTRA, TASKS_PER_ITER = 8 };

double sched_estimate_tasks(const BlockArch *a, int n_layer, int n_micro, int iters)
{
    /* doubles: the product of unchecked counts must not overflow before it is compared */
    double L = n_layer, groups = n_layer + 1.0; /* sub-groups of one block, and the tail */
    double per_block = 3.0 * a->n_ops + TASKS_PER_BLOCK_COPIES;
    double per_micro = per_block * L + TASKS_PER_EDGE;
    return (double)iters * ((double)n_micro * per_micro + TASKS_PER_GROUP * groups +
                            TASKS_PER_ITER);
}

double sched_estimate_bytes(const BlockArch *a, int n_layer, int n_micro, int iters)
{
    return sched_estimate_tasks(a, n_layer, n_micro, iters) * SCHED_BYTES_PER_TASK;
}
