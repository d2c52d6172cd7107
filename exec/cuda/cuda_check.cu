/* cuda_check: the one definition cuda_check.h's checks share: each thread's failure record. */
#include "cuda_check.h"

thread_local CudaFailure *cuda_failure = nullptr;
