/* heap: a binary min-heap of small items ordered by a three-part key, and the order in which a
 * resource picks among its ready tasks.
 *
 * The simulator's engine (sim/) keeps its events and ready queues in these, and the executor's
 * dispatcher (exec/pipeline) its ready queues, so both pick the next task of a resource the same
 * way: lowest (priority, ready time, task index) first. */
#ifndef FUYOU_HEAP_H
#define FUYOU_HEAP_H

#include <stdint.h>

#include "schedule.h"

typedef struct HeapItem {
    double k1;  /* time (events) or priority (ready queues) */
    double k2;  /* priority (events) or ready time */
    int64_t k3; /* sequence (events) or task index */
    int a, b;   /* payload: resource and version (events), task (ready queues) */
} HeapItem;

typedef struct Heap {
    HeapItem *items;
    int n, cap;
} Heap;

/* 0 or -ENOMEM. */
int heap_push(Heap *h, HeapItem it);
/* The smallest item (h must not be empty), taken out; heap_top leaves it in. */
HeapItem heap_pop(Heap *h);
HeapItem heap_top(const Heap *h);
void heap_free(Heap *h);

/* Task index's ready-queue item: key (priority, ready_s, index), payload a = index. */
HeapItem heap_ready_item(const Task *t, int index, double ready_s);

#endif
