/* hostpool: host memory for staging under a byte budget (--cpu-mem), tagged like the footprint.
 *
 * Every allocation is page-aligned (O_DIRECT and DMA need it), zero-filled (fresh anonymous
 * pages), touched up front (by the caller's
 * threads where it gives a toucher: tens of GiB take seconds, not minutes), locked in RAM
 * where the system allows, and optionally pinned for the GPU through a hook the CUDA backend
 * installs (cudaHostRegister). Going over the budget is an error the caller reports, never an
 * OOM kill: the budget is checked before any allocation and against the memory the system has
 * available at init. Used and peak bytes are kept per MemTag, the rows of the footprint table,
 * so measured memory compares with the simulator's prediction. Single-threaded. */
#ifndef FUYOU_HOSTPOOL_H
#define FUYOU_HOSTPOOL_H

#include <stdbool.h>
#include <stddef.h>

#include "footprint.h"
#include "fuyou_err.h"

/* Touches every page of [ptr, ptr + bytes), which puts it in RAM, on the caller's threads
 * (the pages' zeroing, the kernel's, is most of an allocation's time). */
typedef void (*HostTouchFn)(void *ctx, void *ptr, size_t bytes);

/* Writes the pages [begin, end) of base, of HOSTPOOL_TOUCH_PAGE bytes (a 4 KiB page; a huge
 * page is touched as many), which puts them in RAM: what a HostTouchFn runs over its share. */
enum { HOSTPOOL_TOUCH_PAGE = 4096 };
void hostpool_touch_pages(void *base, size_t begin, size_t end);

/* Pins [ptr, ptr + bytes) for device DMA; 0 or -errno with e. And undoes it. */
typedef int (*HostPinFn)(void *ctx, void *ptr, size_t bytes, Err *e);
typedef void (*HostUnpinFn)(void *ctx, void *ptr);

typedef struct HostBlock {
    void *ptr;
    size_t bytes; /* mapped, page-rounded */
    MemTag tag;
    bool locked, pinned;
} HostBlock;

typedef struct HostPool {
    size_t budget, used, peak;
    size_t used_tag[MEM_TAG_COUNT], peak_tag[MEM_TAG_COUNT];
    HostBlock *blocks;
    int n_blocks, cap;
    HostPinFn pin;
    HostUnpinFn unpin;
    void *pin_ctx;
    HostTouchFn touch;  /* NULL: each allocation touched on the caller's thread */
    void *touch_ctx;
    bool lock_failed; /* mlock refused at least once (RLIMIT_MEMLOCK): memory may be paged */
} HostPool;

/* A pool of at most budget bytes. -ENOMEM if the budget exceeds what the system has available
 * (MemAvailable), with e saying both figures. */
int hostpool_init(HostPool *p, size_t budget, Err *e);
/* Frees every block; safe on a zeroed pool. */
void hostpool_free(HostPool *p);
void hostpool_set_pin(HostPool *p, HostPinFn pin, HostUnpinFn unpin, void *ctx);
/* Each allocation's pages put in RAM by touch (say, on a pool of threads), instead of
 * touched on the caller's thread. Either way they are huge pages where the kernel has them. */
void hostpool_set_touch(HostPool *p, HostTouchFn touch, void *ctx);

/* bytes of tagged memory, page-aligned; NULL with e when over budget (naming the tag, what is
 * in use and what to change) or when the system refuses. */
void *hostpool_alloc(HostPool *p, size_t bytes, MemTag tag, Err *e);
void hostpool_release(HostPool *p, void *ptr);

/* Bytes available to the system now (MemAvailable), or 0 if unknown. */
size_t hostpool_system_available(void);

#endif
