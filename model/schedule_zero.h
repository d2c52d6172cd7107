/* schedule_zero: the zero-infinity policy's part of the task DAG (schedule_zero.c): its
 * gradients' way to SSD and its optimizer step after backward. Private to model/, as
 * schedule_build.h. */
#ifndef FUYOU_SCHEDULE_ZERO_H
#define FUYOU_SCHEDULE_ZERO_H

#include <stdint.h>

#include "schedule_build.h"

/* The rest of a gradient's way after its 16-bit copy d2h to the CPU (block layer, -1 the edges,
 * of sub-group s; gpu_slot its GPU buffer). Returns the last copy: the GPU buffer is free after
 * it. */
int sched_emit_zero_grad(Builder *b, int d2h, int layer, int s, int64_t params, int gpu_slot);

/* Sub-group s's fp32 gradients written to SSD once complete (states on SSD; else nothing). */
void sched_emit_zero_grad_write(Builder *b, int s);

/* The optimizer step of iteration b->iter, after backward: every sub-group's update, one after
 * the other; records the tasks after which the weights are new. */
void sched_emit_zero_step(Builder *b);

#endif
