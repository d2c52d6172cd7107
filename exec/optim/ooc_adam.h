/* ooc_adam: the out-of-core AdamW step over optimizer sub-groups held in the store.
 *
 * Each sub-group's fp32 master weights, m and v live in the store as one tensor [master | m |
 * v] (12 bytes per parameter). A step pipelines the groups through n_buffers pinned buffers
 * (3: read g+1 while Adam updates g and g-1 is written back): a buffer is refilled only once
 * its previous group's write has completed. Adam runs in slices, and the store is polled
 * between slices so its queue stays full while the CPU computes. Gradients come from and new
 * 16-bit weights go to caller memory. One thread drives it (Adam itself uses the WorkPool). */
#ifndef FUYOU_OOC_ADAM_H
#define FUYOU_OOC_ADAM_H

#include "adam.h"
#include "hostpool.h"
#include "store.h"

enum { OOC_MAX_GROUPS = 4096, OOC_MAX_BUFFERS = 8 };

typedef struct OocAdam {
    Store *st;
    WorkPool *workers;
    AdamIsa isa;
    int n_groups, n_buffers;
    size_t params[OOC_MAX_GROUPS];
    StoreTensor states[OOC_MAX_GROUPS];
    float *buf[OOC_MAX_BUFFERS]; /* from the host pool, each 12 * max group params bytes */
} OocAdam;

typedef struct OocStats {
    double elapsed_s, read_wait_s, write_wait_s, adam_s;
} OocStats;

/* Allocates the groups' state tensors in the store and n_buffers pinned buffers in the pool
 * (tag staging). 0 or -errno with e (store full, over the host budget). */
int ooc_adam_init(OocAdam *o, Store *st, HostPool *pool, WorkPool *workers, AdamIsa isa,
                  const size_t *group_params, int n_groups, int n_buffers, Err *e);

/* Writes the initial states: master from weights[g] (fp32), m = v = 0. */
int ooc_adam_load(OocAdam *o, const float *const *weights, Err *e);

/* One step over every group: grads[g] in grad_type, new weights to out[g] in out_type (out may
 * be NULL). 0 or -errno with e; stats may be NULL. */
int ooc_adam_step(OocAdam *o, const AdamStep *s, const void *const *grads, DType grad_type,
                  uint16_t *const *out, DType out_type, OocStats *stats, Err *e);

/* Reads group g's states into dst (12 * params bytes, aligned): for checks and checkpoints. */
int ooc_adam_read_group(OocAdam *o, int g, float *dst, Err *e);

#endif
