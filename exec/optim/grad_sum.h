/* grad_sum: the step's gradient as the sum of its micro-batches' (the out-of-core pipeline's
 * host add after each gradient copy, exec/pipeline/pipe_exec.c), and what fuyou-profile times
 * as the cost model's [cpu] sum_GBps. */
#ifndef FUYOU_GRAD_SUM_H
#define FUYOU_GRAD_SUM_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

/* Host memory bytes one element of the sum moves: the gradient read (its type's bytes), the
 * fp32 sum read and written (8). */
size_t grad_sum_bytes_per_element(DType grad_type);

/* sum[i] += grad[i] over [begin, end) (sum starting from 0 where first), grad of grad_type
 * (fp32, or a 16-bit type widened exactly: bf16); the same additions, element by element, as
 * the in-memory trainer's, so splitting the range over threads changes nothing. */
void grad_sum_add(float *sum, const void *grad, DType grad_type, size_t begin, size_t end,
                  bool first);

#endif
