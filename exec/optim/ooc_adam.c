/* ooc_adam: sub-group states streamed through pinned buffers around the CPU AdamW; see
 * ooc_adam.h. The per-group pieces (read_start, update_group, write_start) are the building
 * blocks; ooc_adam_step is one schedule of them. */
#include "ooc_adam.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "clock.h"

enum { SLICE_PARAMS = 1 << 20 }; /* Adam between store polls */

int ooc_adam_init(OocAdam *o, Store *st, HostPool *pool, WorkPool *workers, AdamIsa isa,
                  const size_t *group_params, int n_groups, int n_buffers, Err *e)
{
    memset(o, 0, sizeof *o);
    if (n_groups < 1 || n_groups > OOC_MAX_GROUPS ||
        (n_buffers != 0 && (n_buffers < 2 || n_buffers > OOC_MAX_BUFFERS)))
        return err_set(e, -EINVAL,
                       "out-of-core Adam: 1 to %d groups, and 0 (caller's own) or 2 to %d "
                       "buffers",
                       OOC_MAX_GROUPS, OOC_MAX_BUFFERS);
    o->st = st;
    o->pool = pool;
    o->workers = workers;
    o->isa = isa;
    o->n_groups = n_groups;
    o->n_buffers = n_buffers;
    for (int g = 0; g < n_groups; g++) {
        o->params[g] = group_params[g];
        if (group_params[g] > o->max_params)
            o->max_params = group_params[g];
        int rc = store_alloc(st, 12 * (uint64_t)group_params[g], &o->states[g], e);
        if (rc)
            return rc;
    }
    for (int b = 0; b < n_buffers; b++) {
        o->buf[b] = hostpool_alloc(pool, 12 * o->max_params, MEM_STAGING, e);
        if (!o->buf[b])
            return -ENOMEM;
        store_register_buffer(st, o->buf[b], 12 * o->max_params, e);
    }
    return 0;
}

int ooc_adam_load(OocAdam *o, const float *const *weights, Err *e)
{
    /* Without buffers of its own, borrow one (not registered: it is released at the end). */
    float *b = o->n_buffers ? o->buf[0]
                            : hostpool_alloc(o->pool, 12 * o->max_params, MEM_STAGING, e);
    if (!b)
        return -ENOMEM;
    int rc = 0;
    for (int g = 0; g < o->n_groups && !rc; g++) {
        size_t n = o->params[g];
        memcpy(b, weights[g], n * sizeof *b);
        memset(b + n, 0, 2 * n * sizeof *b);
        rc = ooc_adam_write_group(o, g, b, e);
    }
    if (!o->n_buffers)
        hostpool_release(o->pool, b);
    return rc;
}

int ooc_adam_read_start(OocAdam *o, int g, float *buf, Err *e)
{
    assert(g >= 0 && g < o->n_groups);
    return store_read(o->st, &o->states[g], 0, buf, 12 * o->params[g], e);
}

int ooc_adam_write_start(OocAdam *o, int g, const float *buf, Err *e)
{
    assert(g >= 0 && g < o->n_groups);
    return store_write(o->st, &o->states[g], 0, buf, 12 * o->params[g], e);
}

int ooc_adam_read_group(OocAdam *o, int g, float *dst, Err *e)
{
    int id = ooc_adam_read_start(o, g, dst, e);
    return id < 0 ? id : store_wait(o->st, id, e);
}

int ooc_adam_write_group(OocAdam *o, int g, const float *src, Err *e)
{
    int id = ooc_adam_write_start(o, g, src, e);
    return id < 0 ? id : store_wait(o->st, id, e);
}

/* Adam over group g in slices of SLICE_PARAMS. With poll, the store is polled after each slice
 * (only the store's thread may ask for that); the arithmetic is the same either way, since
 * every element is updated independently. 0, or -errno with e if a poll failed. */
static int update_slices(OocAdam *o, int g, float *buf, const AdamStep *s, const void *grad,
                         DType grad_type, uint16_t *out, DType out_type, bool poll, Err *e)
{
    assert(g >= 0 && g < o->n_groups);
    assert(grad_type == DTYPE_FP32 || grad_type == DTYPE_BF16);
    size_t n = o->params[g];
    size_t gsz = grad_type == DTYPE_BF16 ? 2 : 4;
    for (size_t i = 0; i < n; i += SLICE_PARAMS) {
        size_t len = n - i < SLICE_PARAMS ? n - i : SLICE_PARAMS;
        AdamSlice x = {.master = buf + i, .m = buf + n + i, .v = buf + 2 * n + i,
                       .grad = (const uint8_t *)grad + i * gsz, .grad_type = grad_type,
                       .out = out ? out + i : NULL, .out_type = out_type, .n = len};
        adam_update(o->isa, s, &x, o->workers);
        if (poll) {
            int rc = store_poll(o->st, e); /* keep the queue full while computing */
            if (rc)
                return rc;
        }
    }
    return 0;
}

void ooc_adam_update_group(OocAdam *o, int g, float *buf, const AdamStep *s, const void *grad,
                           DType grad_type, uint16_t *out, DType out_type)
{
    update_slices(o, g, buf, s, grad, grad_type, out, out_type, false, NULL);
}

int ooc_adam_step(OocAdam *o, const AdamStep *s, const void *const *grads, DType grad_type,
                  uint16_t *const *out, DType out_type, OocStats *stats, Err *e)
{
    if (o->n_buffers == 0)
        return err_set(e, -EINVAL,
                       "out-of-core Adam: the whole step needs its own buffers; init with "
                       "n_buffers 2 to %d, or drive the groups with ooc_adam_read_start, "
                       "ooc_adam_update_group and ooc_adam_write_start",
                       OOC_MAX_BUFFERS);
    int reads[OOC_MAX_GROUPS], writes[OOC_MAX_GROUPS];
    OocStats st = {0};
    double t0 = clock_monotonic_s();
    int nb = o->n_buffers, rc = 0;
    /* Reads run ahead by n_buffers - 2 groups (one buffer in Adam, one writing back). */
    int ahead = nb - 2 > 0 ? nb - 2 : 1;
    for (int g = 0; g < o->n_groups && g < ahead && !rc; g++) {
        reads[g] = ooc_adam_read_start(o, g, o->buf[g % nb], e);
        rc = reads[g] < 0 ? reads[g] : 0;
    }
    for (int g = 0; g < o->n_groups && !rc; g++) {
        double t = clock_monotonic_s();
        rc = store_wait(o->st, reads[g], e);
        st.read_wait_s += clock_monotonic_s() - t;
        if (rc)
            break;
        int next = g + ahead;
        if (next < o->n_groups) {
            int prev = next - nb; /* the group whose buffer the next read reuses */
            if (prev >= 0) {
                t = clock_monotonic_s();
                rc = store_wait(o->st, writes[prev], e);
                writes[prev] = -1;
                st.write_wait_s += clock_monotonic_s() - t;
                if (rc)
                    break;
            }
            reads[next] = ooc_adam_read_start(o, next, o->buf[next % nb], e);
            if (reads[next] < 0) {
                rc = reads[next];
                break;
            }
        }
        float *b = o->buf[g % nb];
        t = clock_monotonic_s();
        rc = update_slices(o, g, b, s, grads[g], grad_type, out ? out[g] : NULL, out_type, true,
                           e);
        st.adam_s += clock_monotonic_s() - t;
        if (rc)
            break;
        writes[g] = ooc_adam_write_start(o, g, b, e);
        if (writes[g] < 0)
            rc = writes[g];
    }
    double t = clock_monotonic_s();
    Err late;
    int rc2 = store_wait_all(o->st, &late);
    st.write_wait_s += clock_monotonic_s() - t;
    if (!rc && rc2) {
        rc = rc2;
        if (e)
            *e = late;
    }
    st.elapsed_s = clock_monotonic_s() - t0;
    if (stats)
        *stats = st;
    return rc;
}
