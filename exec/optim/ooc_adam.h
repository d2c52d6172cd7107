/* ooc_adam: the out-of-core AdamW step over optimizer sub-groups held in the store.
 *
 * Each sub-group's fp32 master weights, m and v live in the store as one tensor [master | m |
 * v] (12 bytes per parameter). It offers two levels:
 *
 * - ooc_adam_step, the whole-step driver: it pipelines the groups through n_buffers pinned
 *   buffers (3: read g+1 while Adam updates g and g-1 is written back); a buffer is refilled
 *   only once its previous group's write has completed. Adam runs in slices, and the store is
 *   polled between slices so its queue stays full while the CPU computes.
 * - per-group pieces for an executor that schedules them on its own lanes and buffers:
 *   ooc_adam_read_start, ooc_adam_update_group, ooc_adam_write_start. ooc_adam_step is built on
 *   the same arithmetic, so both give bit-identical states and weights.
 *
 * Gradients come from and new 16-bit weights go to caller memory. It is not a scheduler: the
 * order of reads, updates and writes (and that a buffer is not reused before its write
 * completes) is the caller's business when it drives the pieces itself.
 *
 * Threads: the store is single-threaded, so every function that names an Err (init, load, the
 * start calls, the synchronous group reads and writes, step) runs on the one thread that drives
 * the store. ooc_adam_update_group touches neither the store nor the host pool and may run on
 * another thread, one call at a time per WorkPool (it runs Adam on o->workers, which takes one
 * job at a time), while the driving thread polls the store. */
#ifndef FUYOU_OOC_ADAM_H
#define FUYOU_OOC_ADAM_H

#include "adam.h"
#include "hostpool.h"
#include "store.h"

enum { OOC_MAX_GROUPS = 4096, OOC_MAX_BUFFERS = 8 };

typedef struct OocAdam {
    Store *st;
    HostPool *pool;
    WorkPool *workers;
    AdamIsa isa;
    int n_groups, n_buffers;
    size_t params[OOC_MAX_GROUPS];
    size_t max_params;           /* the biggest group */
    StoreTensor states[OOC_MAX_GROUPS];
    float *buf[OOC_MAX_BUFFERS]; /* from the host pool, each 12 * max_params bytes */
} OocAdam;

typedef struct OocStats {
    double elapsed_s, read_wait_s, write_wait_s, adam_s;
} OocStats;

/* Allocates the groups' state tensors in the store and n_buffers pinned buffers in the pool
 * (tag staging, registered with the store); the pool owns the buffers. n_buffers is 2 to
 * OOC_MAX_BUFFERS for ooc_adam_step, or 0 when the caller brings its own buffers to the
 * per-group calls (then ooc_adam_step refuses). store, pool and workers must outlive o.
 * 0 or -errno with e (bad counts, store full, over the host budget). */
int ooc_adam_init(OocAdam *o, Store *st, HostPool *pool, WorkPool *workers, AdamIsa isa,
                  const size_t *group_params, int n_groups, int n_buffers, Err *e);

/* Writes the initial states: master from weights[g] (fp32), m = v = 0, synchronously. With
 * n_buffers 0 it borrows one staging buffer of 12 * max_params bytes from the pool for the
 * duration. 0 or -errno with e. */
int ooc_adam_load(OocAdam *o, const float *const *weights, Err *e);

/* One step over every group: grads[g] in grad_type, new weights to out[g] in out_type (out may
 * be NULL). Returns after every write has completed. 0 or -errno with e (-EINVAL when init had
 * n_buffers 0); stats may be NULL. */
int ooc_adam_step(OocAdam *o, const AdamStep *s, const void *const *grads, DType grad_type,
                  uint16_t *const *out, DType out_type, OocStats *stats, Err *e);

/* Queues the read of group g's states [master | m | v] (12 * params[g] bytes) into buf (4 KiB
 * aligned, caller-owned; register it with the store for fixed-buffer I/O). Returns the store
 * request id (>= 0), which the caller completes with store_wait (or store_poll + store_done,
 * then store_wait to free it), or -errno with e. buf must stay untouched until then. */
int ooc_adam_read_start(OocAdam *o, int g, float *buf, Err *e);

/* Queues the write of group g's states from buf, as ooc_adam_read_start; buf must stay
 * unchanged until the request completes. */
int ooc_adam_write_start(OocAdam *o, int g, const float *buf, Err *e);

/* AdamW over group g's states in buf (master = buf, m = buf + n, v = buf + 2n, n = params[g]),
 * in place, with gradients grad (n elements, DTYPE_FP32 or DTYPE_BF16); new weights to out
 * (n elements in out_type) unless out is NULL. Uses o->workers; never touches the store or
 * the pool, so it may run on a thread other than the store's (see the top of this file). */
void ooc_adam_update_group(OocAdam *o, int g, float *buf, const AdamStep *s, const void *grad,
                           DType grad_type, uint16_t *out, DType out_type);

/* Reads group g's states into dst (12 * params bytes, aligned), synchronously: for checks and
 * checkpoints. 0 or -errno with e. */
int ooc_adam_read_group(OocAdam *o, int g, float *dst, Err *e);

/* Writes group g's states from src (12 * params bytes, aligned), synchronously: restores a
 * checkpoint's master, m and v. 0 or -errno with e. */
int ooc_adam_write_group(OocAdam *o, int g, const float *src, Err *e);

#endif
