/* schedule_optim: the optimizer's part of the task DAG (schedule_optim.c): one sub-group's
 * update as both policies build it, fuyou's update during backward, on the CPU, on the GPU or
 * streamed to it.
 * Private to model/, as schedule_build.h. */
#ifndef FUYOU_SCHEDULE_OPTIM_H
#define FUYOU_SCHEDULE_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "schedule_build.h"

/* Sub-group s's blocks [*first, *first + *count) and its parameters (the tail's with the
 * edges). */
int64_t sched_group_params(const Builder *b, int s, int *first, int *count);

/* The pinned state buffer of the k-th update of the run when sub-group s needs one, else -1. */
int sched_update_slot(const Builder *b, int s, int k);

/* Sub-group s's fp32 states read from SSD into pinned state buffer slot, or written back from
 * it (write). Returns the copy. */
int sched_emit_states(Builder *b, int s, int first, int64_t params, bool write, int slot);

/* Sub-group s's AdamW on the CPU (recorded in b->adam[s]). Returns the task. */
int sched_emit_adam(Builder *b, int s, int first, int64_t params, int slot);

/* Sub-group s's new 16-bit weights, from Adam task a, on their way home. Returns the task after
 * which they are there (a itself when Adam wrote them in place). */
int sched_emit_new_weights(Builder *b, int s, int first, int64_t params, int a, int slot);

/* Fuyou's update of sub-group s during backward, once its gradients are there: states read,
 * Adam, states and new weights written; records the task after which its weights are new. */
void sched_emit_update(Builder *b, int s);

/* Sub-group s's AdamW on the GPU (its states there, plan_optim_tier: a GPU sub-group, or any
 * with everything on the GPU), after its blocks' backward in the GPU's program order; its
 * weights are new after it. */
void sched_emit_gpu_group_update(Builder *b, int s);

/* A streamed sub-group's update (plan_group_streamed): its states from CPU memory into a GPU
 * state slot, AdamW on the GPU after its blocks' backward in the GPU's program order, the
 * states and the new weights back to CPU memory; its weights are new after the latter. */
void sched_emit_stream_update(Builder *b, int s);

#endif
