/* grad_sum: the step's gradient as the sum of its micro-batches' (the out-of-core pipeline's
 * host add after each gradient copy, exec/pipeline/pipe_exec.c). The bytes it moves:
 * grad_sum_bytes (model.h), which the cost model charges at host memory's rate (cost.h). */
#ifndef FUYOU_GRAD_SUM_H
#define FUYOU_GRAD_SUM_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

/* sum[i] += grad[i] over [begin, end) (sum starting from 0 where first), grad of grad_type
 * (fp32, or a 16-bit type widened exactly: bf16); the same additions, element by element, as
 * the in-memory trainer's, so splitting the range over threads changes nothing. AVX2 where the
 * CPU has it, else grad_sum_add_ref. */
void grad_sum_add(float *sum, const void *grad, DType grad_type, size_t begin, size_t end,
                  bool first);
/* The scalar reference grad_sum_add is tested against: the same bits. */
void grad_sum_add_ref(float *sum, const void *grad, DType grad_type, size_t begin, size_t end,
                      bool first);

#endif
