/* heap: binary min-heap and the ready-queue key; see heap.h. */
#include "heap.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

static bool less(const HeapItem *x, const HeapItem *y)
{
    if (x->k1 != y->k1)
        return x->k1 < y->k1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2;
    return x->k3 < y->k3;
}

int heap_push(Heap *h, HeapItem it)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        HeapItem *p = realloc(h->items, (size_t)cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        h->items = p;
        h->cap = cap;
    }
    int i = h->n++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!less(&it, &h->items[parent]))
            break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = it;
    return 0;
}

HeapItem heap_pop(Heap *h)
{
    assert(h->n > 0);
    HeapItem top = h->items[0], last = h->items[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && less(&h->items[c + 1], &h->items[c]))
            c++;
        if (!less(&h->items[c], &last))
            break;
        h->items[i] = h->items[c];
        i = c;
    }
    if (h->n > 0)
        h->items[i] = last;
    return top;
}

HeapItem heap_top(const Heap *h)
{
    assert(h->n > 0);
    return h->items[0];
}

void heap_free(Heap *h)
{
    free(h->items);
    *h = (Heap){0};
}

HeapItem heap_ready_item(const Task *t, int index, double ready_s)
{
    return (HeapItem){.k1 = t->priority, .k2 = ready_s, .k3 = index, .a = index};
}
