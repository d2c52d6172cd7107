/* tp_baseline: Megatron-LM tensor parallelism as a closed model; the assumptions are in
 * tp_baseline.h. */
#include "tp_baseline.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "cost.h"

static int64_t div_up(int64_t x, int gpus)
{
    return (x + gpus - 1) / gpus;
}

/* Megatron-LM's column-parallel GEMMs (split by outputs); the others, proj and fc2, are
 * row-parallel (split by inputs). */
static bool column_parallel(const Op *op)
{
    static const char *const names[] = {"qkv", "fc1", "lm_head"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(op->name, names[i]))
            return true;
    assert((!strcmp(op->name, "proj") || !strcmp(op->name, "fc2")) && "a GEMM tp_baseline "
           "does not know how to split");
    return false;
}

Op tp_baseline_shard(const Op *op, int gpus)
{
    assert(gpus >= 1);
    Op s = *op;
    if (op->kind == OP_GEMM) {
        if (column_parallel(op))
            s.n = div_up(op->n, gpus);
        else
            s.k = div_up(op->k, gpus);
    }
    s.params = div_up(op->params, gpus);
    s.fwd_flops = op->fwd_flops / gpus;
    s.bwd_flops = op->bwd_flops / gpus;
    s.fwd_io_bytes = div_up(op->fwd_io_bytes, gpus);
    s.bwd_io_bytes = div_up(op->bwd_io_bytes, gpus);
    s.act_bytes = div_up(op->act_bytes, gpus);
    s.out_bytes = div_up(op->out_bytes, gpus);
    return s;
}

double tp_baseline_allreduce_s(const Hardware *hw, int gpus, double bytes)
{
    assert(gpus >= 1);
    if (gpus == 1)
        return 0;
    assert(hw->gpu_nvlink_GBps > 0 && "the caller checks that nvlink_GBps is given");
    return 2.0 * (gpus - 1) / gpus * bytes / (hw->gpu_nvlink_GBps * 1e9);
}

/* One GPU's seconds for a micro-batch's forward and backward: each op's share, backward where
 * the op has backward work (as the schedule makes tasks). */
static double micro_batch_compute_s(const Graph *g, const Hardware *hw, int gpus)
{
    double s = 0;
    for (int i = 0; i < g->n_ops; i++) {
        Op op = tp_baseline_shard(&g->ops[i], gpus);
        s += cost_gpu_op_s(hw, &op, TASK_FWD);
        if (op.bwd_flops > 0 || op.bwd_io_bytes > 0)
            s += cost_gpu_op_s(hw, &op, TASK_BWD);
    }
    return s;
}

void tp_baseline_predict(const Graph *g, int n_micro, const Hardware *hw, int gpus,
                         TpBaseline *out)
{
    assert(gpus >= 1 && gpus <= TP_MAX_GPUS && n_micro >= 1);
    const ModelConfig *c = &g->cfg;
    GraphTotals gt;
    graph_totals(g, &gt);
    double params = (double)gt.params, state = TP_STATE_BYTES_PER_PARAM * params;
    double act = (double)gt.act_all_bytes;
    *out = (TpBaseline){.gpus = gpus, .even = c->n_head % gpus == 0 && c->d_ff % gpus == 0};
    out->state_bytes = state / gpus;
    out->act_bytes = act / gpus;
    out->capacity_bytes = hw_gpu_bytes(hw);
    out->fits = out->state_bytes + out->act_bytes <= out->capacity_bytes;
    out->min_gpus = ceil((state + act) / out->capacity_bytes);

    double block_act_bytes = (double)g->tokens * c->d_model * (double)dtype_bytes(c->dtype);
    double allreduce_s = c->n_layer * TP_ALLREDUCES_PER_BLOCK *
                         tp_baseline_allreduce_s(hw, gpus, block_act_bytes);
    out->compute_s = n_micro * micro_batch_compute_s(g, hw, gpus);
    out->allreduce_s = n_micro * allreduce_s;
    out->adam_s = cost_gpu_adam_s(hw, params / gpus);
    out->iter_s = out->compute_s + out->allreduce_s + out->adam_s;
    out->tokens = (double)g->tokens * n_micro;
    out->model_flops = 6.0 * params * out->tokens;
}
