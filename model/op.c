/* op: the op kinds' names and the constructors the families' builders share; see op.h. */
#include "op.h"

const char *op_kind_name(OpKind k)
{
    static const char *names[] = {"embed", "layernorm", "gemm", "attention", "residual",
                                  "gelu", "loss", "rmsnorm", "rope", "swiglu"};
    return names[k];
}

Op op_gemm(int block, int64_t m, int64_t n, int64_t k, int64_t params, int64_t act_bytes,
           int64_t dsz)
{
    double f = 2.0 * (double)m * (double)n * (double)k;
    return (Op){.kind = OP_GEMM, .block = block, .m = m, .n = n, .k = k, .params = params,
                .fwd_flops = f, .bwd_flops = 2 * f, .act_bytes = act_bytes,
                .out_bytes = m * n * dsz};
}

/* A layernorm over T rows of h: ~8 FLOPs per element forward, ~14 backward; it keeps its input
 * and the fp32 mean and rstd of each row. Its backward moves what the CUDA executors' kernels
 * do: the residual stream's gradient is fp32 there, so the incoming gradient (fp32) and the
 * input are each read twice (the rows' pass and the weight's column sums) and the residual
 * gradient (fp32) read and written: 2 dsz + 16 bytes an element. */
Op op_layernorm(int block, int64_t T, int64_t h, int64_t dsz)
{
    return (Op){.kind = OP_LAYERNORM, .block = block, .params = 2 * h,
                .fwd_flops = 8.0 * T * h, .bwd_flops = 14.0 * T * h,
                .fwd_io_bytes = 2 * T * h * dsz, .bwd_io_bytes = T * h * (2 * dsz + 16),
                .act_bytes = T * h * dsz + 2 * T * 4, .out_bytes = T * h * dsz};
}

/* ~4 FLOPs an element forward (square, sum, scale, gain), ~8 backward; its backward moves what
 * a layernorm's does (the CUDA lane's residual gradient is fp32 there too). */
Op op_rmsnorm(int block, int64_t T, int64_t h, int64_t dsz)
{
    return (Op){.kind = OP_RMSNORM, .block = block, .params = h, .fwd_flops = 4.0 * T * h,
                .bwd_flops = 8.0 * T * h, .fwd_io_bytes = 2 * T * h * dsz,
                .bwd_io_bytes = T * h * (2 * dsz + 16), .act_bytes = T * h * dsz + T * 4,
                .out_bytes = T * h * dsz};
}

Op op_residual(int block, int64_t T, int64_t h, int64_t dsz)
{
    return (Op){.kind = OP_RESIDUAL, .block = block, .fwd_flops = (double)T * h,
                .bwd_flops = 0, .fwd_io_bytes = 3 * T * h * dsz, .bwd_io_bytes = 0,
                .out_bytes = T * h * dsz};
}
