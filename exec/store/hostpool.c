/* hostpool: budgeted, locked, optionally pinned host memory; see hostpool.h. */
#include "hostpool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "units.h"

size_t hostpool_system_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[128];
    size_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kib) == 1)
            break;
    fclose(f);
    return kib * 1024;
}

int hostpool_init(HostPool *p, size_t budget, Err *e)
{
    memset(p, 0, sizeof *p);
    size_t avail = hostpool_system_available();
    if (avail && budget > avail) {
        char b1[24], b2[24];
        return err_set(e, -ENOMEM, "--cpu-mem %s is more than the %s this machine has "
                       "available; lower it", units_bytes(b1, sizeof b1, (double)budget),
                       units_bytes(b2, sizeof b2, (double)avail));
    }
    p->budget = budget;
    return 0;
}

void hostpool_touch_pages(void *base, size_t begin, size_t end)
{
    volatile uint8_t *b = base;
    for (size_t i = begin; i < end; i++)
        b[i * HOSTPOOL_TOUCH_PAGE] = 0;
}

void hostpool_set_touch(HostPool *p, HostTouchFn touch, void *ctx)
{
    p->touch = touch;
    p->touch_ctx = ctx;
}

void hostpool_set_pin(HostPool *p, HostPinFn pin, HostUnpinFn unpin, void *ctx)
{
    p->pin = pin;
    p->unpin = unpin;
    p->pin_ctx = ctx;
}

static void unmap_block(HostPool *p, HostBlock *b)
{
    if (b->pinned && p->unpin)
        p->unpin(p->pin_ctx, b->ptr);
    if (b->locked)
        munlock(b->ptr, b->bytes);
    munmap(b->ptr, b->bytes);
}

void hostpool_free(HostPool *p)
{
    for (int i = 0; i < p->n_blocks; i++)
        unmap_block(p, &p->blocks[i]);
    free(p->blocks);
    p->blocks = NULL;
    p->n_blocks = p->cap = 0;
    p->used = 0;
    memset(p->used_tag, 0, sizeof p->used_tag);
}

void *hostpool_alloc(HostPool *p, size_t bytes, MemTag tag, Err *e)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = (bytes + page - 1) / page * page;
    char b1[24], b2[24], b3[24];
    if (size == 0)
        size = page;
    if (p->used + size > p->budget) {
        err_set(e, -ENOMEM, "host memory budget exceeded: %s more for %s, with %s of %s in use; "
                "raise --cpu-mem or choose a plan with fewer or smaller buffers",
                units_bytes(b1, sizeof b1, (double)size), mem_tag_name(tag),
                units_bytes(b2, sizeof b2, (double)p->used),
                units_bytes(b3, sizeof b3, (double)p->budget));
        return NULL;
    }
    if (p->n_blocks == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        HostBlock *nb = realloc(p->blocks, (size_t)cap * sizeof *nb);
        if (!nb) {
            err_set(e, -ENOMEM, "out of memory for the host pool's block table");
            return NULL;
        }
        p->blocks = nb;
        p->cap = cap;
    }
    void *ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptr == MAP_FAILED) {
        err_set(e, -errno, "mmap of %s for %s: %s", units_bytes(b1, sizeof b1, (double)size),
                mem_tag_name(tag), strerror(errno));
        return NULL;
    }
    /* huge pages where the kernel has them: fewer pages to fault, lock and pin, and fewer TLB
     * misses for what streams through them (the CPU Adam's states: MEASUREMENTS.md) */
    madvise(ptr, size, MADV_HUGEPAGE);
    if (p->touch)
        p->touch(p->touch_ctx, ptr, size);
    else
        hostpool_touch_pages(ptr, 0, size / HOSTPOOL_TOUCH_PAGE);
    HostBlock b = {.ptr = ptr, .bytes = size, .tag = tag};
    b.locked = mlock(ptr, size) == 0;
    if (!b.locked)
        p->lock_failed = true;
    if (p->pin) {
        int rc = p->pin(p->pin_ctx, ptr, size, e);
        if (rc) {
            unmap_block(p, &b);
            return NULL;
        }
        b.pinned = true;
    }
    p->blocks[p->n_blocks++] = b;
    p->used += size;
    p->used_tag[tag] += size;
    if (p->used > p->peak)
        p->peak = p->used;
    if (p->used_tag[tag] > p->peak_tag[tag])
        p->peak_tag[tag] = p->used_tag[tag];
    return ptr;
}

void hostpool_release(HostPool *p, void *ptr)
{
    for (int i = 0; i < p->n_blocks; i++)
        if (p->blocks[i].ptr == ptr) {
            HostBlock b = p->blocks[i];
            p->blocks[i] = p->blocks[--p->n_blocks];
            p->used -= b.bytes;
            p->used_tag[b.tag] -= b.bytes;
            unmap_block(p, &b);
            return;
        }
}
