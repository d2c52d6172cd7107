/* schedule (sched_*): one training iteration (or N) as a task DAG, from the graph and a plan.
 *
 * Both backends run this DAG: the simulator predicts it, the executor performs it. A task has a
 * stable id that reads well and is the same in every run ("F.b12.fc1", "H2D.b13.w",
 * "SSDR.g3.state", "ADAM.g3", "m1." in front for micro-batches), a resource, its work (bytes or
 * FLOPs, and the graph op for compute), the block or sub-group it belongs to, what a copy moves
 * (its cargo) and which buffer of each pool it uses (TaskSlots), and its dependencies. Every
 * pool is a ring whose reuse is a dependency, so an executor that follows the DAG never
 * overwrites a buffer still in use. The schedule describes work, not time: costmodel/ gives
 * durations, sim/ runs them. The rings and the policies: ARCHITECTURE.md, "The schedule". */
#ifndef FUYOU_SCHED_H
#define FUYOU_SCHED_H

#include <stdint.h>

#include "fuyou_err.h"
#include "graph.h"
#include "plan.h"

typedef enum Resource {
    RES_GPU,
    RES_H2D,
    RES_D2H,
    RES_SSD_READ,
    RES_SSD_WRITE,
    RES_CPU_ADAM,
    RES_COUNT
} Resource;

typedef enum Phase { PHASE_FORWARD, PHASE_BACKWARD, PHASE_OPTIMIZER } Phase;

typedef enum TaskKind {
    TASK_FWD,       /* forward of graph op `op` */
    TASK_RECOMPUTE, /* forward of op `op` again, in backward */
    TASK_BWD,       /* backward of op `op` */
    TASK_COPY,      /* bytes over a link (h2d, d2h, ssd_read, ssd_write) */
    TASK_ADAM,      /* AdamW over `params` parameters, on the CPU or the GPU */
} TaskKind;

enum { SCHED_ID_MAX = 40 };
/* The most chunks one PCIe copy is cut into (Plan.copy_chunk_bytes). */
enum { SCHED_COPY_CHUNKS = 8 };

/* What a copy moves. */
typedef enum Cargo {
    CARGO_NONE,    /* compute and Adam tasks */
    CARGO_WEIGHTS, /* a block's 16-bit weights (layer -1: the embedding and head's) */
    CARGO_CKPT,    /* a block's checkpoint: its input */
    CARGO_ACTS,    /* a block's intra-block activations kept off the GPU */
    CARGO_GRADS,   /* a block's gradients (layer -1: the embedding and head's) */
    CARGO_STATES,  /* a sub-group's fp32 master weights, Adam m and v */
    CARGO_UPDATE,  /* a sub-group's new 16-bit weights, from the optimizer to their home */
    CARGO_FP32_GRADS, /* zero-infinity: a block's (layer -1: the edges') fp32 gradients to the
                         CPU, a sub-group's to SSD and back for its update (group set) */
} Cargo;

/* The buffer of each pool a task uses, -1 where it uses none (the rings are described above). */
typedef struct TaskSlots {
    int gpu_weights; /* weight loads fill it; the block's compute reads it */
    int gpu_acts;    /* forward: the block's out-slot; backward: its in-slot */
    int gpu_grads;   /* the block's backward fills it; D2H .grad drains it */
    int pinned;      /* weights, activations to or from SSD, states and updates */
    int host_grads;  /* the sub-group's CPU gradient buffer */
    int gpu_state;   /* a streamed sub-group's GPU state slot: H2D .state fills it, its ADAM
                        updates it, D2H .state and .w drain it */
} TaskSlots;

typedef struct Task {
    char id[SCHED_ID_MAX];
    Resource res;
    TaskKind kind;
    Phase phase;
    int iter;
    int layer;      /* block; -1 the embedding; n_layer the head; sub-group tasks: first block */
    int op;         /* graph op index for compute tasks, else -1 */
    double bytes;   /* copies */
    double flops;   /* compute (model convention, see graph.h) */
    int64_t params; /* Adam: parameters updated; a gradient copy of a step with several
                       micro-batches: parameters the host adds into the step's sum after it
                       (fuyou; zero-infinity adds them on the GPU, 0 here) */
    int priority;   /* among ready tasks of one resource, lower first */
    int micro;      /* micro-batch */
    Cargo cargo;    /* copies: what moves, from tier `from` to tier `to` */
    Tier from, to;
    int group;      /* sub-group of Adam, state, update and gradient tasks, else -1 */
    int chunk, n_chunks; /* a PCIe copy in chunks: this is chunk `chunk` of n_chunks, moving
                            that share of the copy's bytes (executors cut it as they lay the
                            bytes out); n_chunks 0: the whole copy */
    TaskSlots slot;
    int dep_first;  /* dependencies: deps[dep_first .. dep_first + n_deps) */
    int n_deps;
} Task;

typedef struct Schedule {
    Task *tasks;
    int n_tasks;
    int *deps;     /* task indices, grouped per task */
    int n_deps;
    int iters;
    int n_layer;
} Schedule;

/* The size limit (docs/fuyou-sim.md, "Limits"). A schedule's tasks are bounded from above by
 * sched_estimate_tasks, from the sizes alone, so a caller can refuse before building anything;
 * building one and simulating it (the tasks, their dependencies, the engine's state and a trace
 * row each) takes at most SCHED_BYTES_PER_TASK per task, and a schedule that would need more
 * than SCHED_MAX_BYTES is refused. That also keeps every task index well inside an int. */
#define SCHED_BYTES_PER_TASK 256.0
#define SCHED_MAX_BYTES (4.0 * 0x1p30)
double sched_estimate_tasks(const BlockArch *a, int n_layer, int n_micro, int iters);
/* sched_estimate_tasks * SCHED_BYTES_PER_TASK. */
double sched_estimate_bytes(const BlockArch *a, int n_layer, int n_micro, int iters);

/* Builds iters iterations of plan p over g (p's sizes must match g's). The caller owns s and
 * frees it with sched_free (safe after a failure). Returns 0, -EINVAL for an invalid plan or one
 * whose schedule would need more than SCHED_MAX_BYTES (e says why and the estimate), -ENOMEM. */
int sched_build(Schedule *s, const Graph *g, const Plan *p, int iters, Err *e);
/* Builds the forward passes of `passes` micro-batches under plan p, one an "iteration" (an
 * evaluation's, on the buffers the plan's training uses): each block's weights loaded, its ops
 * run and the head's loss, as training's forward does, but nothing sent off the GPU (no
 * backward reads it back), no backward and no update. Returns as sched_build. */
int sched_build_forward(Schedule *s, const Graph *g, const Plan *p, int passes, Err *e);
void sched_free(Schedule *s);

static inline const int *sched_deps(const Schedule *s, int task)
{
    return s->deps + s->tasks[task].dep_first;
}

/* Successor lists: the tasks that depend on task t are succ[first[t] .. first[t + 1]). The
 * caller frees both. 0 or -ENOMEM. */
int sched_successors(const Schedule *s, int **first, int **succ);

/* Index of the task with this id in iteration iter, or -1. Linear: for tests and tools. */
int sched_find(const Schedule *s, int iter, const char *id);

const char *resource_name(Resource r);
int resource_parse(const char *s, Resource *out);
const char *phase_name(Phase p);
int phase_parse(const char *s, Phase *out);

/* The forward out-slot of block b's activations (its input included). */
int sched_fwd_act_slot(const Plan *p, int block);

/* Which forward ops of a block backward must run again under p: rerun[i] for op i (of
 * p->arch->n_ops). Follows the block's dataflow from each recomputed activation back to
 * tensors that are kept (arch_recompute_set). */
void sched_recompute_set(const Plan *p, int block, bool rerun[]);

#endif
