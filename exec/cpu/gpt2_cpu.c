/* gpt2_cpu: GPT-2's half of the CPU reference backend (cpu_family.h): its activations, the
 * token and position embeddings, the blocks op by op (gpt2_block.h) and the final layernorm
 * on the reference ops (gpt2_ops.h). */
#include <string.h>

#include "cpu_family.h"
#include "gpt2_block.h"
#include "gpt2_layout.h"
#include "gpt2_ops.h"

enum {
    A_ENCODED, A_LN1, A_LN1_MEAN, A_LN1_RSTD, A_QKV, A_ATTY, A_PREATT, A_ATT, A_ATTPROJ,
    A_RESIDUAL2, A_LN2, A_LN2_MEAN, A_LN2_RSTD, A_FCH, A_FCH_GELU, A_FCPROJ, A_RESIDUAL3,
    A_LNF, A_LNF_MEAN, A_LNF_RSTD, A_LOGITS, A_PROBS, A_LOSSES, A_COUNT
};

typedef struct Gpt2Cpu {
    CpuBackend b;
    Gpt2Dims d;
} Gpt2Cpu;

static void act_sizes(const ModelConfig *c, int B, int T, size_t s[A_COUNT])
{
    size_t L = (size_t)c->n_layer, N = (size_t)B * T, C = (size_t)c->d_model;
    size_t F = (size_t)c->d_ff, V = (size_t)c->vocab, NH = (size_t)c->n_head;
    size_t att = (size_t)B * NH * T * T;
    const size_t table[A_COUNT] = {
        [A_ENCODED] = N * C, [A_LN1] = L * N * C, [A_LN1_MEAN] = L * N, [A_LN1_RSTD] = L * N,
        [A_QKV] = L * N * 3 * C, [A_ATTY] = L * N * C, [A_PREATT] = L * att, [A_ATT] = L * att,
        [A_ATTPROJ] = L * N * C, [A_RESIDUAL2] = L * N * C, [A_LN2] = L * N * C,
        [A_LN2_MEAN] = L * N, [A_LN2_RSTD] = L * N, [A_FCH] = L * N * F,
        [A_FCH_GELU] = L * N * F, [A_FCPROJ] = L * N * C, [A_RESIDUAL3] = L * N * C,
        [A_LNF] = N * C, [A_LNF_MEAN] = N, [A_LNF_RSTD] = N, [A_LOGITS] = N * V,
        [A_PROBS] = N * V, [A_LOSSES] = N,
    };
    memcpy(s, table, sizeof table);
}

static int init(CpuBackend *b, Err *e)
{
    (void)e;
    gpt2_dims(&((Gpt2Cpu *)b)->d, &b->base.cfg, b->base.B, b->base.T);
    return 0;
}

static float *lm_head(const ModelConfig *c, float *flat)
{
    Gpt2EdgeView ev;
    gpt2_view_edges(c, flat, &ev);
    return ev.lm_head;
}

/* Block l's activations in t (the activations or their gradients) as a block sees them. */
static void block_acts(const CpuBackend *b, float *const *t, int l, Gpt2BlockActs *x)
{
#define AT(which) cpu_block_slice(b, t, which, l)
    *x = (Gpt2BlockActs){
        .in = cpu_block_in(b, t, l), .ln1 = AT(A_LN1), .ln1_mean = AT(A_LN1_MEAN),
        .ln1_rstd = AT(A_LN1_RSTD), .qkv = AT(A_QKV), .atty = AT(A_ATTY), .att = AT(A_ATT),
        .preatt = AT(A_PREATT), .attproj = AT(A_ATTPROJ), .res1 = AT(A_RESIDUAL2),
        .ln2 = AT(A_LN2), .ln2_mean = AT(A_LN2_MEAN), .ln2_rstd = AT(A_LN2_RSTD),
        .fch = AT(A_FCH), .fch_gelu = AT(A_FCH_GELU), .fcproj = AT(A_FCPROJ),
        .out = AT(A_RESIDUAL3),
    };
#undef AT
}

static void block_forward(CpuBackend *b, int l)
{
    Gpt2BlockView w;
    gpt2_view_block(&b->base.cfg, b->params, l, &w);
    Gpt2BlockActs x;
    block_acts(b, b->acts, l, &x);
    for (int op = 0; op < GPT2_OPS; op++)
        gpt2_block_forward_op(op, &((Gpt2Cpu *)b)->d, &w, &x, b->wp);
}

static void block_backward(CpuBackend *b, int l)
{
    Gpt2BlockView w, dw;
    gpt2_view_block(&b->base.cfg, b->params, l, &w);
    gpt2_view_block(&b->base.cfg, b->grads, l, &dw);
    Gpt2BlockActs x, dx;
    block_acts(b, b->acts, l, &x);
    block_acts(b, b->dacts, l, &dx);
    Gpt2BlockGrads gr = {.din = dx.in, .ln1 = dx.ln1, .qkv = dx.qkv, .atty = dx.atty,
                         .preatt = dx.preatt, .att = dx.att, .attproj = dx.attproj,
                         .res1 = dx.res1, .ln2 = dx.ln2, .fch = dx.fch, .fch_gelu = dx.fch_gelu,
                         .fcproj = dx.fcproj, .dout = dx.out};
    for (int op = GPT2_OPS - 1; op >= 0; op--)
        if (gpt2_block_op_has_backward(op))
            gpt2_block_backward_op(op, &((Gpt2Cpu *)b)->d, &w, &dw, &x, &gr, b->wp);
}

static void embed_forward(CpuBackend *b, const int *inputs)
{
    Gpt2EdgeView ev;
    gpt2_view_edges(&b->base.cfg, b->params, &ev);
    encoder_forward_ref(b->acts[A_ENCODED], inputs, ev.wte, ev.wpe, b->base.B, b->base.T,
                        b->base.cfg.d_model);
}

static void embed_backward(CpuBackend *b, const int *inputs)
{
    Gpt2EdgeView dev;
    gpt2_view_edges(&b->base.cfg, b->grads, &dev);
    encoder_backward_ref(dev.wte, dev.wpe, b->dacts[A_ENCODED], inputs, b->base.B, b->base.T,
                         b->base.cfg.d_model);
}

static void norm_forward(CpuBackend *b, const float *in)
{
    Gpt2EdgeView ev;
    gpt2_view_edges(&b->base.cfg, b->params, &ev);
    layernorm_forward_ref(b->acts[A_LNF], b->acts[A_LNF_MEAN], b->acts[A_LNF_RSTD], in, ev.lnfw,
                          ev.lnfb, b->base.B * b->base.T, b->base.cfg.d_model);
}

static void norm_backward(CpuBackend *b, float *din, const float *in)
{
    Gpt2EdgeView ev, dev;
    gpt2_view_edges(&b->base.cfg, b->params, &ev);
    gpt2_view_edges(&b->base.cfg, b->grads, &dev);
    layernorm_backward_ref(din, dev.lnfw, dev.lnfb, b->dacts[A_LNF], in, ev.lnfw,
                           b->acts[A_LNF_MEAN], b->acts[A_LNF_RSTD], b->base.B * b->base.T,
                           b->base.cfg.d_model);
}

const CpuFamily cpu_gpt2 = {
    .size = sizeof(Gpt2Cpu), .n_acts = A_COUNT, .act_sizes = act_sizes,
    .embed = A_ENCODED, .out = A_RESIDUAL3, .normf = A_LNF, .logits = A_LOGITS,
    .probs = A_PROBS, .losses = A_LOSSES,
    .init = init, .lm_head = lm_head,
    .embed_forward = embed_forward, .embed_backward = embed_backward,
    .block_forward = block_forward, .block_backward = block_backward,
    .norm_forward = norm_forward, .norm_backward = norm_backward,
};
