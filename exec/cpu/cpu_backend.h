/* cpu_backend: the fp32 CPU reference backend (an ops table of exec/train/backend.h): forward
 * and backward of either block family on the reference ops, block by block, and AdamW with
 * exec/optim/adam, whatever the model's dtype says. One backend, "cpu", for every family: the
 * families' halves fill cpu_family.h's table. */
#ifndef FUYOU_CPU_BACKEND_H
#define FUYOU_CPU_BACKEND_H

#include "backend.h"

extern const BackendOps backend_cpu;

#endif
