/* backends: the training backends compiled into fuyou-run, by name: cpu always, cuda when the
 * build found nvcc. The interface they share is exec/train/backend.h; this table is the one
 * place that knows every implementation. */
#ifndef FUYOU_BACKENDS_H
#define FUYOU_BACKENDS_H

#include "backend.h"

/* The backend with this name ("cpu", "cuda"), or NULL. */
const BackendOps *backend_find(const char *name);

#endif
