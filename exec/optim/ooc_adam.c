/* ooc_adam: sub-group states streamed through pinned buffers around the CPU AdamW; see
 * ooc_adam.h. */
#include "ooc_adam.h"

#include <errno.h>
#include <string.h>

#include "clock.h"

enum { SLICE_PARAMS = 1 << 20 }; /* Adam between store polls */

int ooc_adam_init(OocAdam *o, Store *st, HostPool *pool, WorkPool *workers, AdamIsa isa,
                  const size_t *group_params, int n_groups, int n_buffers, Err *e)
{
    memset(o, 0, sizeof *o);
    if (n_groups < 1 || n_groups > OOC_MAX_GROUPS || n_buffers < 2 ||
        n_buffers > OOC_MAX_BUFFERS)
        return err_set(e, -EINVAL, "out-of-core Adam: 1 to %d groups and 2 to %d buffers",
                       OOC_MAX_GROUPS, OOC_MAX_BUFFERS);
    *o = (OocAdam){.st = st, .workers = workers, .isa = isa, .n_groups = n_groups,
                   .n_buffers = n_buffers};
    size_t biggest = 0;
    for (int g = 0; g < n_groups; g++) {
        o->params[g] = group_params[g];
        if (group_params[g] > biggest)
            biggest = group_params[g];
        int rc = store_alloc(st, 12 * (uint64_t)group_params[g], &o->states[g], e);
        if (rc)
            return rc;
    }
    for (int b = 0; b < n_buffers; b++) {
        o->buf[b] = hostpool_alloc(pool, 12 * biggest, MEM_STAGING, e);
        if (!o->buf[b])
            return -ENOMEM;
        store_register_buffer(st, o->buf[b], 12 * biggest, e);
    }
    return 0;
}

int ooc_adam_load(OocAdam *o, const float *const *weights, Err *e)
{
    for (int g = 0; g < o->n_groups; g++) {
        float *b = o->buf[0];
        size_t n = o->params[g];
        memcpy(b, weights[g], n * sizeof *b);
        memset(b + n, 0, 2 * n * sizeof *b);
        int id = store_write(o->st, &o->states[g], 0, b, 12 * n, e);
        if (id < 0)
            return id;
        int rc = store_wait(o->st, id, e);
        if (rc)
            return rc;
    }
    return 0;
}

int ooc_adam_read_group(OocAdam *o, int g, float *dst, Err *e)
{
    int id = store_read(o->st, &o->states[g], 0, dst, 12 * o->params[g], e);
    return id < 0 ? id : store_wait(o->st, id, e);
}

static int issue_read(OocAdam *o, int g, int *ids, Err *e)
{
    ids[g] = store_read(o->st, &o->states[g], 0, o->buf[g % o->n_buffers],
                        12 * o->params[g], e);
    return ids[g] < 0 ? ids[g] : 0;
}

int ooc_adam_step(OocAdam *o, const AdamStep *s, const void *const *grads, DType grad_type,
                  uint16_t *const *out, DType out_type, OocStats *stats, Err *e)
{
    int reads[OOC_MAX_GROUPS], writes[OOC_MAX_GROUPS];
    OocStats st = {0};
    double t0 = clock_monotonic_s();
    int nb = o->n_buffers, rc = 0;
    /* Reads run ahead by n_buffers - 2 groups (one buffer in Adam, one writing back). */
    int ahead = nb - 2 > 0 ? nb - 2 : 1;
    for (int g = 0; g < o->n_groups && g < ahead && !rc; g++)
        rc = issue_read(o, g, reads, e);
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
            rc = issue_read(o, next, reads, e);
            if (rc)
                break;
        }
        size_t n = o->params[g];
        float *b = o->buf[g % nb];
        size_t gsz = grad_type == DTYPE_BF16 ? 2 : 4;
        t = clock_monotonic_s();
        for (size_t i = 0; i < n; i += SLICE_PARAMS) {
            size_t len = n - i < SLICE_PARAMS ? n - i : SLICE_PARAMS;
            AdamSlice x = {.master = b + i, .m = b + n + i, .v = b + 2 * n + i,
                           .grad = (const uint8_t *)grads[g] + i * gsz, .grad_type = grad_type,
                           .out = out ? out[g] + i : NULL, .out_type = out_type, .n = len};
            adam_update(o->isa, s, &x, o->workers);
            rc = store_poll(o->st, e); /* keep the queue full while computing */
            if (rc)
                break;
        }
        st.adam_s += clock_monotonic_s() - t;
        if (rc)
            break;
        writes[g] = store_write(o->st, &o->states[g], 0, b, 12 * n, e);
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
