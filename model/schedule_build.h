/* schedule_build: the builder sched_build uses, shared by schedule.c (the walk over the run,
 * finishing), schedule_optim.c (the optimizer's tasks, the fuyou policy's update) and
 * schedule_zero.c (the zero-infinity policy's gradients and step). Private to model/: not
 * installed, and no part of the schedule's interface, which is schedule.h. The builder's state and
 * the helpers that add tasks and dependencies (schedule_build.c); every helper ignores a task
 * index of -1 (out of memory, sticky in b->oom). The walk calls the optimizer's and the
 * zero-infinity policy's emitters (schedule_optim.h, schedule_zero.h), which call only these. */
#ifndef FUYOU_SCHEDULE_BUILD_H
#define FUYOU_SCHEDULE_BUILD_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "schedule.h"

typedef enum RefKind {
    REF_USE_END,      /* a = use index: the last GPU task of that use */
    REF_BLOCK_UPDATE, /* a = iteration, b = block: the task after which its weights are new */
    REF_EDGE_UPDATE,  /* a = iteration: same for the embedding and head parameters */
    REF_SWAP_OUT,     /* a = forward use, b = its ActPart: the part's last swap-out task */
} RefKind;

/* A block's activations off the GPU move in two parts: its checkpoint (the block input) and
 * the inner ones its ops keep. */
typedef enum ActPart { PART_CKPT, PART_INNER, N_ACT_PARTS } ActPart;

static inline Cargo part_cargo(int part)
{
    return part == PART_CKPT ? CARGO_CKPT : CARGO_ACTS;
}

/* The part in task ids: "D2H.b3.ckpt", "H2D.b3.act". */
static inline const char *part_name(int part)
{
    return part == PART_CKPT ? "ckpt" : "act";
}

typedef struct Deferred {
    int task;
    RefKind kind;
    int a, b;
} Deferred;

typedef struct Edge {
    int from, to;
} Edge;

typedef struct Builder {
    const Graph *g;
    const Plan *p;
    Schedule *s;
    int L, M, n_uses, n_groups;
    bool forward_only; /* sched_build_forward: forward passes only, nothing swapped out */
    int task_cap;
    Edge *edges;
    int n_edges, edges_cap;
    Deferred *defs;
    int n_defs, defs_cap;
    bool oom;
    int last_gpu;
    int iter, micro;
    char prefix[16]; /* "m1." when micro-batches accumulate */
    /* per use (all iterations); these arrays are views of one allocation, per_use: */
    int *per_use;
    int *use_last;     /* last GPU task */
    int *swap_out[N_ACT_PARTS]; /* forward uses: each part's last swap-out task, or -1 */
    /* weight buffers: acquisitions (uses that load) and releases (uses whose end frees one) */
    int *w_acq, n_w_acq, *w_rel, n_w_rel;
    int *w_acq_of_use; /* acquisition index of a use, or -1 */
    int *w_h2d;        /* per acquisition: its H2D task (for the pinned-buffer pool) */
    int *w_buf;        /* per use: the GPU weight buffer holding its block's weights, or -1 */
    int *a_acq, n_a_acq; /* activation fetches: acquiring uses in order */
    int *a_slot;       /* per use: its fetch index (backward uses that fetch), or -1 */
    int next_load_use;   /* next use whose loads are still to be emitted */
    int *fetch_h2d[N_ACT_PARTS];   /* per use: H2D of each fetched part, or -1 */
    int *fetch_k_h2d[N_ACT_PARTS]; /* per fetch index: the same (the pinned in-staging ring) */
    int *act_d2h;        /* per forward use: D2H of its inner acts (GPU staging pool), or -1 */
    int *ckpt_d2h;       /* per forward use: D2H of its checkpoint, or -1 */
    int *load_h2d;       /* per use: H2D task of its weights, or -1 */
    /* per iteration x block, and per iteration: update tasks */
    int *upd_block, *upd_edge;
    /* this iteration, current micro-batch: */
    int *grad_d2h;     /* per block */
    int embed_grad_d2h;
    int embed_grad_done; /* the edges' gradient's last copy: their GPU buffer is free after it */
    int *grad32;       /* zero-infinity, per block: D2H of its fp32 gradients, last micro-batch */
    int embed_grad32;
    int *grad_ssdw;    /* zero-infinity, per sub-group this iteration: SSDW of its fp32 gradients */
    int *bwd_d2h_seq;  /* gradient D2H tasks in backward order (grad buffer pool) */
    int n_bwd_d2h;
    int *adam;         /* per sub-group, this iteration */
    int *state_written; /* per sub-group: its states' last write home (to SSD or, streamed,
                           CPU memory), any iteration, or -1 */
    int n_updates;     /* sub-group updates so far, all iterations (the state-buffer ring) */
    int *upd_release;  /* per update: the two tasks after which its state buffer is free */
    int n_streams;     /* streamed sub-group updates so far, all iterations (GPU state slots) */
    int *stream_release; /* per streamed update: the two tasks after which its slot is free */
    int bwd_first;     /* first backward task of the last micro-batch (gates state reads) */
    int bwd_last;      /* last backward task of the last micro-batch (zero-infinity's step) */
    int act_ssdw[2];   /* the last two SSD writes of activations (pinned staging) */
    int n_act_ssdw;
} Builder;

/* Grows *ptr (capacity *cap elements of elem bytes) to hold need: 0 or -ENOMEM. */
static inline int grow(void **ptr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    void *q = realloc(*ptr, (size_t)n * elem);
    if (!q)
        return -ENOMEM;
    *ptr = q;
    *cap = n;
    return 0;
}

/* Task task waits for task on (nothing when either is -1). */
static inline void dep(Builder *b, int task, int on)
{
    if (task < 0 || on < 0)
        return;
    if (grow((void **)&b->edges, &b->edges_cap, b->n_edges + 1, sizeof *b->edges)) {
        b->oom = true;
        return;
    }
    b->edges[b->n_edges++] = (Edge){on, task};
}

/* What copy task t moves; group -1 for block cargo. */
static inline void set_move(Builder *b, int t, Cargo cargo, Tier from, Tier to, int group)
{
    if (t < 0)
        return;
    Task *x = &b->s->tasks[t];
    x->cargo = cargo;
    x->from = from;
    x->to = to;
    x->group = group;
}

/* Priorities among ready tasks of one link: weights first, then activations and gradients,
 * then activation swap-out, then optimizer traffic. */
enum { PRIO_WEIGHTS = 0, PRIO_ACT_IN = 1, PRIO_GRAD = 1, PRIO_ACT_OUT = 2, PRIO_OPTIM = 3 };

/* Adds a task of the builder's iteration and micro-batch (layer, op, priority as in Task) with id
 * fmt after its micro-batch prefix. Returns its index, or -1 when out of memory (sticky: b->oom,
 * checked at the end). */
int sched_add_task(Builder *b, Resource res, TaskKind kind, Phase ph, int layer, int op,
                   int priority, const char *fmt, ...) __attribute__((format(printf, 8, 9)));

/* Adds a copy of bytes over link res (block layer, -1 the edges; a sub-group's: its first block)
 * with id fmt after the builder's micro-batch prefix. Returns its index, or -1. */
int sched_copy_task(Builder *b, Resource res, Phase ph, int layer, double bytes, int priority,
                    const char *fmt, ...) __attribute__((format(printf, 7, 8)));

#endif
