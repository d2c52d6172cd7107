/* backends: the table of backends compiled in; see backends.h. */
#include "backends.h"

#include <string.h>

#include "config.h"
#include "cpu_backend.h"
#if FUYOU_HAVE_CUDA
#include "cuda_backend.h"
#endif

const BackendOps *backend_find(const char *name)
{
    if (!strcmp(name, "cpu"))
        return &backend_cpu;
#if FUYOU_HAVE_CUDA
    if (!strcmp(name, "cuda"))
        return &backend_cuda;
#endif
    return NULL;
}
