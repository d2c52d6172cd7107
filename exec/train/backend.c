/* backend: the table of backends compiled in; see backend.h. */
#include "backend.h"

#include <string.h>

const BackendOps *backend_find(const char *name)
{
    if (!strcmp(name, "cpu"))
        return &backend_cpu;
    return NULL;
}
