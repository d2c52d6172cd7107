/* gpt2_block: a block's ops on the fp32 reference; see gpt2_block.h. */
#include "gpt2_block.h"

#include <assert.h>

#include "gpt2_ops.h"

void gpt2_dims(Gpt2Dims *d, const ModelConfig *c, int B, int T)
{
    *d = (Gpt2Dims){.B = B, .T = T, .C = c->d_model, .F = c->d_ff, .NH = c->n_head};
}

void gpt2_block_forward_op(int op, const Gpt2Dims *d, const Gpt2BlockView *w,
                           const Gpt2BlockActs *a, WorkPool *wp)
{
    int B = d->B, T = d->T, C = d->C, F = d->F, N = B * T;
    switch (op) {
    case GPT2_LN1:
        layernorm_forward_ref(a->ln1, a->ln1_mean, a->ln1_rstd, a->in, w->ln1w, w->ln1b, N, C);
        break;
    case GPT2_QKV: matmul_forward_ref(a->qkv, a->ln1, w->qkvw, w->qkvb, N, C, 3 * C, wp); break;
    case GPT2_ATTN:
        attention_forward_ref(a->atty, a->preatt, a->att, a->qkv, B, T, C, d->NH);
        break;
    case GPT2_PROJ:
        matmul_forward_ref(a->attproj, a->atty, w->projw, w->projb, N, C, C, wp);
        break;
    case GPT2_RES1: residual_forward_ref(a->res1, a->in, a->attproj, N * C); break;
    case GPT2_LN2:
        layernorm_forward_ref(a->ln2, a->ln2_mean, a->ln2_rstd, a->res1, w->ln2w, w->ln2b, N,
                              C);
        break;
    case GPT2_FC1: matmul_forward_ref(a->fch, a->ln2, w->fcw, w->fcb, N, C, F, wp); break;
    case GPT2_GELU: gelu_forward_ref(a->fch_gelu, a->fch, N * F); break;
    case GPT2_FC2:
        matmul_forward_ref(a->fcproj, a->fch_gelu, w->fcprojw, w->fcprojb, N, F, C, wp);
        break;
    case GPT2_RES2: residual_forward_ref(a->out, a->res1, a->fcproj, N * C); break;
    default: assert(!"not a GPT-2 block op");
    }
}

bool gpt2_block_op_has_backward(int op)
{
    return op != GPT2_RES1 && op != GPT2_RES2;
}

void gpt2_block_backward_op(int op, const Gpt2Dims *d, const Gpt2BlockView *w,
                            const Gpt2BlockView *dw, const Gpt2BlockActs *a,
                            const Gpt2BlockGrads *g, WorkPool *wp)
{
    int B = d->B, T = d->T, C = d->C, F = d->F, N = B * T;
    switch (op) {
    case GPT2_FC2:
        residual_backward_ref(g->res1, g->fcproj, g->dout, N * C);
        matmul_backward_ref(g->fch_gelu, dw->fcprojw, dw->fcprojb, g->fcproj, a->fch_gelu,
                            w->fcprojw, N, F, C, wp);
        break;
    case GPT2_GELU: gelu_backward_ref(g->fch, a->fch, g->fch_gelu, N * F); break;
    case GPT2_FC1:
        matmul_backward_ref(g->ln2, dw->fcw, dw->fcb, g->fch, a->ln2, w->fcw, N, C, F, wp);
        break;
    case GPT2_LN2:
        layernorm_backward_ref(g->res1, dw->ln2w, dw->ln2b, g->ln2, a->res1, w->ln2w,
                               a->ln2_mean, a->ln2_rstd, N, C);
        residual_backward_ref(g->din, g->attproj, g->res1, N * C);
        break;
    case GPT2_PROJ:
        matmul_backward_ref(g->atty, dw->projw, dw->projb, g->attproj, a->atty, w->projw, N, C,
                            C, wp);
        break;
    case GPT2_ATTN:
        attention_backward_ref(g->qkv, g->preatt, g->att, g->atty, a->qkv, a->att, B, T, C,
                               d->NH);
        break;
    case GPT2_QKV:
        matmul_backward_ref(g->ln1, dw->qkvw, dw->qkvb, g->qkv, a->ln1, w->qkvw, N, C, 3 * C,
                            wp);
        break;
    case GPT2_LN1:
        layernorm_backward_ref(g->din, dw->ln1w, dw->ln1b, g->ln1, a->in, w->ln1w, a->ln1_mean,
                               a->ln1_rstd, N, C);
        break;
    default: assert(!"a GPT-2 block op without a backward");
    }
}
