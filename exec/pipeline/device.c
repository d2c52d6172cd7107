/* device: the compute devices this build has; see device.h. */
#include "device.h"

#include <math.h>
#include <string.h>

#include "lane.h"

const DeviceOps *device_find(const char *name)
{
    static const DeviceOps *const all[] = {
        &device_cpu,
#if FUYOU_HAVE_CUDA
        &device_cuda,
#endif
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(all[i]->name, name))
            return all[i];
    return NULL;
}

void device_wait_bell(const DeviceOps *ops, struct LaneBell *b, unsigned *seen,
                      double timeout_s)
{
    if (ops->on_host)
        lane_bell_wait(b, seen, timeout_s);
    else
        lane_bell_spin(b, seen, timeout_s);
}

void device_span_within(const DeviceSpan *span, double *t0, double *t1)
{
    if (!span->set)
        return;
    *t0 = fmax(*t0, fmin(span->start_s, *t1));
    *t1 = fmax(*t0, fmin(span->end_s, *t1));
}

void device_span_after(double *prev_end, double *t0, double *t1)
{
    *t0 = fmax(*t0, *prev_end);
    *t1 = fmax(*t1, *t0);
    *prev_end = *t1;
}
