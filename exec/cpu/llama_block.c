/* llama_block: a Llama block's ops on the fp32 reference; see llama_block.h. */
#include "llama_block.h"

#include <assert.h>

#include "gpt2_ops.h"

void llama_block_forward_op(int op, const LlamaDims *dims, const LlamaBlockView *w,
                            const LlamaBlockActs *a, WorkPool *wp)
{
    int B = dims->B, T = dims->T, C = dims->C, F = dims->F, N = B * T;
    int h = dims->h, g = dims->g, d = dims->d, QKV = (h + 2 * g) * d;
    switch ((LlamaOp)op) {
    case LLAMA_NORM1:
        rmsnorm_forward_ref(a->norm1, a->norm1_rstd, a->in, w->norm1_w, N, C, dims->eps);
        break;
    case LLAMA_QKV:
        matmul_forward_ref(a->qkv, a->norm1, w->qkv_w, w->qkv_b, N, C, QKV, wp);
        break;
    case LLAMA_ROPE: rope_forward_ref(a->rope, a->qkv, B, T, h, g, d, dims->rope); break;
    case LLAMA_ATTN:
        attention_gqa_forward_ref(a->attn, a->preatt, a->att, a->rope, B, T, h, g, d);
        break;
    case LLAMA_O: matmul_forward_ref(a->o, a->attn, w->o_w, NULL, N, h * d, C, wp); break;
    case LLAMA_RES1: residual_forward_ref(a->res1, a->in, a->o, N * C); break;
    case LLAMA_NORM2:
        rmsnorm_forward_ref(a->norm2, a->norm2_rstd, a->res1, w->norm2_w, N, C, dims->eps);
        break;
    case LLAMA_GATE_UP:
        matmul_forward_ref(a->gate_up, a->norm2, w->gate_up_w, NULL, N, C, 2 * F, wp);
        break;
    case LLAMA_SWIGLU: swiglu_forward_ref(a->swiglu, a->gate_up, N, F); break;
    case LLAMA_DOWN: matmul_forward_ref(a->down, a->swiglu, w->down_w, NULL, N, F, C, wp); break;
    case LLAMA_RES2: residual_forward_ref(a->out, a->res1, a->down, N * C); break;
    default: assert(!"not a Llama block op");
    }
}

bool llama_block_op_has_backward(int op)
{
    return op != LLAMA_RES1 && op != LLAMA_RES2;
}

void llama_block_backward_op(int op, const LlamaDims *dims, const LlamaBlockView *w,
                             const LlamaBlockView *dw, const LlamaBlockActs *a,
                             const LlamaBlockGrads *g, WorkPool *wp)
{
    int B = dims->B, T = dims->T, C = dims->C, F = dims->F, N = B * T;
    int h = dims->h, kv = dims->g, d = dims->d, QKV = (h + 2 * kv) * d;
    switch ((LlamaOp)op) {
    case LLAMA_DOWN:
        /* res2 = res1 + down: its gradient reaches both */
        residual_backward_ref(g->res1, g->down, g->dout, N * C);
        matmul_backward_ref(g->swiglu, dw->down_w, NULL, g->down, a->swiglu, w->down_w, N, F,
                            C, wp);
        break;
    case LLAMA_SWIGLU: swiglu_backward_ref(g->gate_up, g->swiglu, a->gate_up, N, F); break;
    case LLAMA_GATE_UP:
        matmul_backward_ref(g->norm2, dw->gate_up_w, NULL, g->gate_up, a->norm2, w->gate_up_w,
                            N, C, 2 * F, wp);
        break;
    case LLAMA_NORM2:
        rmsnorm_backward_ref(g->res1, dw->norm2_w, g->norm2, a->res1, w->norm2_w,
                             a->norm2_rstd, N, C);
        /* res1 = in + o: its gradient, now complete, reaches both */
        residual_backward_ref(g->din, g->o, g->res1, N * C);
        break;
    case LLAMA_O:
        matmul_backward_ref(g->attn, dw->o_w, NULL, g->o, a->attn, w->o_w, N, h * d, C, wp);
        break;
    case LLAMA_ATTN:
        attention_gqa_backward_ref(g->rope, g->preatt, g->att, g->attn, a->rope, a->att, B, T,
                                   h, kv, d);
        break;
    case LLAMA_ROPE: rope_backward_ref(g->qkv, g->rope, B, T, h, kv, d, dims->rope); break;
    case LLAMA_QKV:
        assert((w->qkv_b == NULL) == (dw->qkv_b == NULL));
        matmul_backward_ref(g->norm1, dw->qkv_w, dw->qkv_b, g->qkv, a->norm1, w->qkv_w, N, C,
                            QKV, wp);
        break;
    case LLAMA_NORM1:
        rmsnorm_backward_ref(g->din, dw->norm1_w, g->norm1, a->in, w->norm1_w, a->norm1_rstd,
                             N, C);
        break;
    default: assert(!"a Llama block op without a backward");
    }
}
