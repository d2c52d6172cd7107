/* llama_cpu: the Llama family's half of the CPU reference backend (cpu_family.h): its
 * activations, the token embedding, the blocks op by op (llama_block.h, with RoPE's table)
 * and the final RMSNorm. */
#include <string.h>

#include "cpu_family.h"
#include "gpt2_ops.h"
#include "llama_block.h"
#include "llama_layout.h"

/* The activations: per layer those a block keeps (each L times), then the edges'. */
enum {
    A_EMBED, A_NORM1, A_NORM1_RSTD, A_QKV, A_ROPE, A_ATTN, A_PREATT, A_ATT, A_O, A_RES1,
    A_NORM2, A_NORM2_RSTD, A_GATE_UP, A_SWIGLU, A_DOWN, A_OUT, A_NORMF, A_NORMF_RSTD,
    A_LOGITS, A_PROBS, A_LOSSES, A_COUNT
};

typedef struct LlamaCpu {
    CpuBackend b;
    LlamaDims d;
    RopeTable rope;
} LlamaCpu;

static void act_sizes(const ModelConfig *c, int B, int T, size_t s[A_COUNT])
{
    size_t L = (size_t)c->n_layer, N = (size_t)B * T, C = (size_t)c->d_model;
    size_t F = (size_t)c->d_ff, V = (size_t)c->vocab, h = (size_t)c->n_head;
    size_t d = (size_t)model_head_dim(c), qkv = (h + 2 * (size_t)model_kv_heads(c)) * d;
    size_t att = (size_t)B * h * T * T;
    const size_t table[A_COUNT] = {
        [A_EMBED] = N * C, [A_NORM1] = L * N * C, [A_NORM1_RSTD] = L * N,
        [A_QKV] = L * N * qkv, [A_ROPE] = L * N * qkv, [A_ATTN] = L * N * h * d,
        [A_PREATT] = L * att, [A_ATT] = L * att, [A_O] = L * N * C, [A_RES1] = L * N * C,
        [A_NORM2] = L * N * C, [A_NORM2_RSTD] = L * N, [A_GATE_UP] = L * N * 2 * F,
        [A_SWIGLU] = L * N * F, [A_DOWN] = L * N * C, [A_OUT] = L * N * C, [A_NORMF] = N * C,
        [A_NORMF_RSTD] = N, [A_LOGITS] = N * V, [A_PROBS] = N * V, [A_LOSSES] = N,
    };
    memcpy(s, table, sizeof table);
}

static int init(CpuBackend *b, Err *e)
{
    LlamaCpu *g = (LlamaCpu *)b;
    const ModelConfig *c = &b->base.cfg;
    int d = (int)model_head_dim(c);
    g->d = (LlamaDims){.B = b->base.B, .T = b->base.T, .C = c->d_model, .F = c->d_ff,
                       .h = c->n_head, .g = model_kv_heads(c), .d = d,
                       .eps = (float)model_norm_eps(c), .rope = &g->rope};
    return rope_table_init(&g->rope, b->base.T, d, model_rope_theta(c),
                           c->rope_scaling.factor > 0 ? &c->rope_scaling : NULL, e);
}

static void fini(CpuBackend *b)
{
    rope_table_free(&((LlamaCpu *)b)->rope);
}

static float *lm_head(const ModelConfig *c, float *flat)
{
    LlamaEdgeView ev;
    llama_view_edges(c, flat, &ev);
    return ev.lm_head;
}

/* Block l's activations in t (the activations or their gradients) as a block sees them. */
static void block_acts(const CpuBackend *b, float *const *t, int l, LlamaBlockActs *x)
{
#define AT(which) cpu_block_slice(b, t, which, l)
    *x = (LlamaBlockActs){
        .in = cpu_block_in(b, t, l), .norm1 = AT(A_NORM1), .norm1_rstd = AT(A_NORM1_RSTD),
        .qkv = AT(A_QKV), .rope = AT(A_ROPE), .attn = AT(A_ATTN), .att = AT(A_ATT),
        .preatt = AT(A_PREATT), .o = AT(A_O), .res1 = AT(A_RES1), .norm2 = AT(A_NORM2),
        .norm2_rstd = AT(A_NORM2_RSTD), .gate_up = AT(A_GATE_UP), .swiglu = AT(A_SWIGLU),
        .down = AT(A_DOWN), .out = AT(A_OUT),
    };
#undef AT
}

static void block_forward(CpuBackend *b, int l)
{
    LlamaBlockView w;
    llama_view_block(&b->base.cfg, b->params, l, &w);
    LlamaBlockActs x;
    block_acts(b, b->acts, l, &x);
    for (int op = 0; op < LLAMA_OPS; op++)
        llama_block_forward_op(op, &((LlamaCpu *)b)->d, &w, &x, b->wp);
}

static void block_backward(CpuBackend *b, int l)
{
    LlamaBlockView w, dw;
    llama_view_block(&b->base.cfg, b->params, l, &w);
    llama_view_block(&b->base.cfg, b->grads, l, &dw);
    LlamaBlockActs x, dx;
    block_acts(b, b->acts, l, &x);
    block_acts(b, b->dacts, l, &dx);
    LlamaBlockGrads gr = {.din = dx.in, .norm1 = dx.norm1, .qkv = dx.qkv, .rope = dx.rope,
                          .attn = dx.attn, .preatt = dx.preatt, .att = dx.att, .o = dx.o,
                          .res1 = dx.res1, .norm2 = dx.norm2, .gate_up = dx.gate_up,
                          .swiglu = dx.swiglu, .down = dx.down, .dout = dx.out};
    for (int op = LLAMA_OPS - 1; op >= 0; op--)
        if (llama_block_op_has_backward(op))
            llama_block_backward_op(op, &((LlamaCpu *)b)->d, &w, &dw, &x, &gr, b->wp);
}

static void embed_forward(CpuBackend *b, const int *inputs)
{
    LlamaEdgeView ev;
    llama_view_edges(&b->base.cfg, b->params, &ev);
    embedding_forward_ref(b->acts[A_EMBED], inputs, ev.embed, b->base.B * b->base.T,
                          b->base.cfg.d_model);
}

static void embed_backward(CpuBackend *b, const int *inputs)
{
    LlamaEdgeView dev;
    llama_view_edges(&b->base.cfg, b->grads, &dev);
    embedding_backward_ref(dev.embed, b->dacts[A_EMBED], inputs, b->base.B * b->base.T,
                           b->base.cfg.d_model);
}

static void norm_forward(CpuBackend *b, const float *in)
{
    LlamaEdgeView ev;
    llama_view_edges(&b->base.cfg, b->params, &ev);
    rmsnorm_forward_ref(b->acts[A_NORMF], b->acts[A_NORMF_RSTD], in, ev.norm,
                        b->base.B * b->base.T, b->base.cfg.d_model, ((LlamaCpu *)b)->d.eps);
}

static void norm_backward(CpuBackend *b, float *din, const float *in)
{
    LlamaEdgeView ev, dev;
    llama_view_edges(&b->base.cfg, b->params, &ev);
    llama_view_edges(&b->base.cfg, b->grads, &dev);
    rmsnorm_backward_ref(din, dev.norm, b->dacts[A_NORMF], in, ev.norm, b->acts[A_NORMF_RSTD],
                         b->base.B * b->base.T, b->base.cfg.d_model);
}

const CpuFamily cpu_llama = {
    .size = sizeof(LlamaCpu), .n_acts = A_COUNT, .act_sizes = act_sizes,
    .embed = A_EMBED, .out = A_OUT, .normf = A_NORMF, .logits = A_LOGITS, .probs = A_PROBS,
    .losses = A_LOSSES,
    .init = init, .fini = fini, .lm_head = lm_head,
    .embed_forward = embed_forward, .embed_backward = embed_backward,
    .block_forward = block_forward, .block_backward = block_backward,
    .norm_forward = norm_forward, .norm_backward = norm_backward,
};
