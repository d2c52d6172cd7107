/* llama_cpu: the fp32 CPU reference backend of the Llama family (backend_cpu creates it for a
 * Llama model): forward and backward block by block (llama_block.h), the head and loss on
 * gpt2_ops' matmul, softmax and cross-entropy, AdamW through cpu_backend.h. Activations and
 * their gradients are carved from one allocation by a size table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "gpt2_ops.h"
#include "llama_block.h"
#include "llama_cpu.h"
#include "llama_layout.h"

/* The activations: per layer those a block keeps (each L times), then the edges'. */
enum {
    A_EMBED, A_NORM1, A_NORM1_RSTD, A_QKV, A_ROPE, A_ATTN, A_PREATT, A_ATT, A_O, A_RES1,
    A_NORM2, A_NORM2_RSTD, A_GATE_UP, A_SWIGLU, A_DOWN, A_OUT, A_NORMF, A_NORMF_RSTD,
    A_LOGITS, A_PROBS, A_LOSSES, A_COUNT
};

typedef struct Acts {
    float *p[A_COUNT];
} Acts;

typedef struct LlamaCpu {
    CpuBackend cb;
    Acts acts, dacts;
    size_t act_size[A_COUNT];
    LlamaDims d;
    RopeTable rope;
} LlamaCpu;

static const BackendOps backend_cpu_llama;

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

static void llama_destroy(Backend *b)
{
    LlamaCpu *g = (LlamaCpu *)b;
    if (!g)
        return;
    cpu_backend_release(&g->cb);
    rope_table_free(&g->rope);
    free(g);
}

int llama_cpu_create(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    *out = NULL;
    int rc = backend_check_shape(c, B, T, e);
    if (rc)
        return rc;
    LlamaCpu *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(e, -ENOMEM, "out of memory");
    act_sizes(c, B, T, g->act_size);
    int d = (int)model_head_dim(c);
    rc = cpu_backend_init(&g->cb, &backend_cpu_llama, c, B, T, wp, g->act_size, A_COUNT,
                          g->acts.p, g->dacts.p, e);
    if (!rc)
        rc = rope_table_init(&g->rope, T, d, model_rope_theta(c),
                             c->rope_scaling.factor > 0 ? &c->rope_scaling : NULL, e);
    if (rc) {
        llama_destroy(&g->cb.base);
        return rc;
    }
    g->d = (LlamaDims){.B = B, .T = T, .C = c->d_model, .F = c->d_ff, .h = c->n_head,
                       .g = model_kv_heads(c), .d = d, .eps = (float)model_norm_eps(c),
                       .rope = &g->rope};
    *out = &g->cb.base;
    return 0;
}

/* Layer l's slice of a per-layer activation. */
static float *lay(const LlamaCpu *g, const Acts *a, int which, int l)
{
    return a->p[which] + (size_t)l * (g->act_size[which] / (size_t)g->cb.base.cfg.n_layer);
}

/* Layer l's activations (or their gradients) as a block sees them. */
static void block_acts(const LlamaCpu *g, const Acts *a, int l, LlamaBlockActs *x)
{
    *x = (LlamaBlockActs){
        .in = l == 0 ? a->p[A_EMBED] : lay(g, a, A_OUT, l - 1),
        .norm1 = lay(g, a, A_NORM1, l), .norm1_rstd = lay(g, a, A_NORM1_RSTD, l),
        .qkv = lay(g, a, A_QKV, l), .rope = lay(g, a, A_ROPE, l), .attn = lay(g, a, A_ATTN, l),
        .att = lay(g, a, A_ATT, l), .preatt = lay(g, a, A_PREATT, l), .o = lay(g, a, A_O, l),
        .res1 = lay(g, a, A_RES1, l), .norm2 = lay(g, a, A_NORM2, l),
        .norm2_rstd = lay(g, a, A_NORM2_RSTD, l), .gate_up = lay(g, a, A_GATE_UP, l),
        .swiglu = lay(g, a, A_SWIGLU, l), .down = lay(g, a, A_DOWN, l),
        .out = lay(g, a, A_OUT, l),
    };
}

static void forward(CpuBackend *cb, const int *inputs)
{
    LlamaCpu *g = (LlamaCpu *)cb;
    const ModelConfig *c = &g->cb.base.cfg;
    int B = g->d.B, T = g->d.T, C = c->d_model, V = c->vocab, N = B * T;
    const Acts *a = &g->acts;
    LlamaEdgeView ev;
    llama_view_edges(c, g->cb.params, &ev);
    embedding_forward_ref(a->p[A_EMBED], inputs, ev.embed, N, C);
    const float *residual = a->p[A_EMBED];
    for (int l = 0; l < c->n_layer; l++) {
        LlamaBlockView w;
        llama_view_block(c, g->cb.params, l, &w);
        LlamaBlockActs x;
        block_acts(g, a, l, &x);
        for (int op = 0; op < LLAMA_OPS; op++)
            llama_block_forward_op(op, &g->d, &w, &x, g->cb.wp);
        residual = x.out;
    }
    rmsnorm_forward_ref(a->p[A_NORMF], a->p[A_NORMF_RSTD], residual, ev.norm, N, C, g->d.eps);
    matmul_forward_ref(a->p[A_LOGITS], a->p[A_NORMF], ev.lm_head, NULL, N, C, V, g->cb.wp);
    softmax_forward_ref(a->p[A_PROBS], a->p[A_LOGITS], B, T, V);
}

static void backward(CpuBackend *cb, const int *inputs, const int *targets, float dloss)
{
    LlamaCpu *g = (LlamaCpu *)cb;
    const ModelConfig *c = &g->cb.base.cfg;
    int B = g->d.B, T = g->d.T, C = c->d_model, L = c->n_layer, V = c->vocab, N = B * T;
    const Acts *a = &g->acts, *d = &g->dacts;
    memset(g->cb.grads, 0, g->cb.base.n_params * sizeof(float));
    memset(g->cb.dact_mem, 0, g->cb.act_floats * sizeof(float));
    LlamaEdgeView ev, dev;
    llama_view_edges(c, g->cb.params, &ev);
    llama_view_edges(c, g->cb.grads, &dev);
    float *dlosses = d->p[A_LOSSES];
    for (int i = 0; i < N; i++)
        dlosses[i] = dloss;
    crossentropy_softmax_backward_ref(d->p[A_LOGITS], dlosses, a->p[A_PROBS], targets, B, T, V);
    matmul_backward_ref(d->p[A_NORMF], dev.lm_head, NULL, d->p[A_LOGITS], a->p[A_NORMF],
                        ev.lm_head, N, C, V, g->cb.wp);
    float *residual = L > 0 ? lay(g, a, A_OUT, L - 1) : a->p[A_EMBED];
    float *dresidual = L > 0 ? lay(g, d, A_OUT, L - 1) : d->p[A_EMBED];
    rmsnorm_backward_ref(dresidual, dev.norm, d->p[A_NORMF], residual, ev.norm,
                         a->p[A_NORMF_RSTD], N, C);
    for (int l = L - 1; l >= 0; l--) {
        LlamaBlockView w, dw;
        llama_view_block(c, g->cb.params, l, &w);
        llama_view_block(c, g->cb.grads, l, &dw);
        LlamaBlockActs x, dx;
        block_acts(g, a, l, &x);
        block_acts(g, d, l, &dx);
        LlamaBlockGrads gr = {.din = dx.in, .norm1 = dx.norm1, .qkv = dx.qkv, .rope = dx.rope,
                              .attn = dx.attn, .preatt = dx.preatt, .att = dx.att, .o = dx.o,
                              .res1 = dx.res1, .norm2 = dx.norm2, .gate_up = dx.gate_up,
                              .swiglu = dx.swiglu, .down = dx.down, .dout = dx.out};
        for (int op = LLAMA_OPS - 1; op >= 0; op--)
            if (llama_block_op_has_backward(op))
                llama_block_backward_op(op, &g->d, &w, &dw, &x, &gr, g->cb.wp);
    }
    /* after the head's, as the GPT-2 backend's: a tied matrix adds the two in that order */
    embedding_backward_ref(dev.embed, d->p[A_EMBED], inputs, N, C);
}

static int llama_step(Backend *b, const int *inputs, const int *targets, bool do_backward,
                      float *loss, Err *e)
{
    LlamaCpu *g = (LlamaCpu *)b;
    const CpuFamilyStep f = {forward, backward, g->acts.p[A_PROBS],
                             g->acts.p[A_LOSSES]};
    return cpu_backend_step(&g->cb, &f, inputs, targets, do_backward, loss, e);
}

static const BackendOps backend_cpu_llama = {
    .name = "cpu", .create = llama_cpu_create, .destroy = llama_destroy,
    .read_state = cpu_backend_read_state, .write_state = cpu_backend_write_state,
    .read_grads = cpu_backend_read_grads, .write_grads = cpu_backend_write_grads,
    .step = llama_step, .grad_sq = cpu_backend_grad_sq, .update = cpu_backend_update,
};
