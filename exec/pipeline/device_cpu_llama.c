/* device_cpu_llama: the CPU device's Llama half (device_cpu.h): its buffers, its blocks' tasks,
 * the token embedding and the final RMSNorm on the fp32 reference (llama_block.h; the head is
 * every family's, device_cpu.c), as the in-memory backend (exec/cpu/llama_cpu.c) makes the
 * same calls in the same order, so the two train bit for bit alike. Block tensors by the family's names (llama_arch.h); beside its output a norm's tensor
 * keeps its rstd, attention's its softmax. */
#include "device_cpu.h"
#include "graph.h"
#include "llama_block.h"
#include "llama_layout.h"

struct Device {
    CpuDeviceHead head;
    LlamaDims d;
    RopeTable rope;
    LlamaBlockGrads g;          /* din and dout are set per block */
    float *preatt;              /* forward scratch (B,h,T,T) */
    float *normf_rstd;          /* (N): the final norm's, whose output is head.lm.x */
};

/* Floats of each size the tensors and scratch take. */
enum { F_N_C, F_N, F_N_QKV, F_N_Q, F_N_F, F_ATT, F_COUNT };

static void sizes(const ModelConfig *c, int B, int T, size_t s[F_COUNT])
{
    size_t N = (size_t)B * T, C = (size_t)c->d_model, d = (size_t)model_head_dim(c);
    size_t h = (size_t)c->n_head, g = (size_t)model_kv_heads(c);
    s[F_N_C] = N * C;
    s[F_N] = N;
    s[F_N_QKV] = N * (h + 2 * g) * d;
    s[F_N_Q] = N * h * d;
    s[F_N_F] = N * (size_t)c->d_ff;
    s[F_ATT] = (size_t)B * h * T * T;
}

/* The rotary table, which init allocates apart from the lane's buffers: T positions of d/2
 * cosines and sines. */
static size_t rope_floats(const ModelConfig *c, int B, int T)
{
    (void)B;
    return (size_t)T * (size_t)model_head_dim(c);
}

static int init(Device *d, Err *e)
{
    const ModelConfig *c = &d->head.cfg;
    int hd = (int)model_head_dim(c);
    d->d = (LlamaDims){.B = d->head.B, .T = d->head.T, .C = c->d_model, .F = c->d_ff,
                       .h = c->n_head, .g = model_kv_heads(c), .d = hd,
                       .eps = (float)model_norm_eps(c), .rope = &d->rope};
    return rope_table_init(&d->rope, d->head.T, hd, model_rope_theta(c),
                           c->rope_scaling.factor > 0 ? &c->rope_scaling : NULL, e);
}

static void fini(Device *d)
{
    rope_table_free(&d->rope);
}

static float *carve(Device *d, float *p)
{
    size_t s[F_COUNT];
    sizes(&d->head.cfg, d->head.B, d->head.T, s);
#define CARVE(dst, n) (dst = p, p += (n))
    CARVE(d->g.norm1, s[F_N_C]);
    CARVE(d->g.qkv, s[F_N_QKV]);
    CARVE(d->g.rope, s[F_N_QKV]);
    CARVE(d->g.attn, s[F_N_Q]);
    CARVE(d->g.preatt, s[F_ATT]);
    CARVE(d->g.att, s[F_ATT]);
    CARVE(d->g.o, s[F_N_C]);
    CARVE(d->g.res1, s[F_N_C]);
    CARVE(d->g.norm2, s[F_N_C]);
    CARVE(d->g.gate_up, 2 * s[F_N_F]);
    CARVE(d->g.swiglu, s[F_N_F]);
    CARVE(d->g.down, s[F_N_C]);
    CARVE(d->preatt, s[F_ATT]);
    CARVE(d->normf_rstd, s[F_N]);
#undef CARVE
    d->head.act_grads = d->g.norm1;
    d->head.act_grad_floats = (size_t)(d->preatt - d->g.norm1);
    return p;
}

/* The block tensors of a call as llama_block wants them. */
static void block_acts(const Device *d, const ComputeCall *c, LlamaBlockActs *a)
{
    size_t N = (size_t)d->d.B * d->d.T, C = (size_t)d->d.C;
    size_t q = N * (size_t)d->d.h * (size_t)d->d.d;
    float *const *t = (float *const *)c->t;
    *a = (LlamaBlockActs){
        .in = t[LLAMA_IN], .norm1 = t[LLAMA_NORM1], .qkv = t[LLAMA_QKV],
        .rope = t[LLAMA_ROPE], .attn = t[LLAMA_ATTN], .preatt = d->preatt, .o = t[LLAMA_O],
        .res1 = t[LLAMA_RES1], .norm2 = t[LLAMA_NORM2], .gate_up = t[LLAMA_GATE_UP],
        .swiglu = t[LLAMA_SWIGLU], .down = t[LLAMA_DOWN], .out = t[LLAMA_RES2]};
    if (a->norm1)
        a->norm1_rstd = a->norm1 + N * C;
    if (a->attn)
        a->att = a->attn + q;
    if (a->norm2)
        a->norm2_rstd = a->norm2 + N * C;
}

static int block_call(Device *d, const ComputeCall *c)
{
    const ModelConfig *cfg = &d->head.cfg;
    LlamaBlockView w, dw;
    llama_view_block_at(cfg, c->w, &w);
    LlamaBlockActs a;
    block_acts(d, c, &a);
    if (c->task->kind != TASK_BWD) {
        llama_block_forward_op(c->op, &d->d, &w, &a, d->head.wp);
        return 0;
    }
    LlamaBlockGrads g = d->g;
    cpu_device_block_grads(&d->head, c, &g.dout, &g.din);
    llama_view_block_at(cfg, c->dw, &dw);
    llama_block_backward_op(c->op, &d->d, &w, &dw, &a, &g, d->head.wp);
    return 0;
}

static void embed_forward(Device *d, const ComputeCall *c)
{
    LlamaEdgeView w;
    llama_view_edges(&d->head.cfg, c->w, &w);
    embedding_forward_ref(c->t[LLAMA_IN], c->inputs, w.embed, d->d.B * d->d.T, d->d.C);
}

static void embed_backward(Device *d, const ComputeCall *c, float *dres)
{
    LlamaEdgeView dw;
    llama_view_edges(&d->head.cfg, c->dw, &dw);
    embedding_backward_ref(dw.embed, dres, c->inputs, d->d.B * d->d.T, d->d.C);
}

static void norm_forward(Device *d, const ComputeCall *c, float *x)
{
    LlamaEdgeView w;
    llama_view_edges(&d->head.cfg, c->w, &w);
    rmsnorm_forward_ref(x, d->normf_rstd, c->t[LLAMA_RES2], w.norm, d->d.B * d->d.T, d->d.C,
                        d->d.eps);
}

static void norm_backward(Device *d, const ComputeCall *c, const float *dx, float *dres)
{
    LlamaEdgeView w, dw;
    llama_view_edges(&d->head.cfg, c->w, &w);
    llama_view_edges(&d->head.cfg, c->dw, &dw);
    rmsnorm_backward_ref(dres, dw.norm, dx, c->t[LLAMA_RES2], w.norm, d->normf_rstd,
                         d->d.B * d->d.T, d->d.C);
}

static float *lm_head(const ModelConfig *c, float *edges)
{
    LlamaEdgeView v;
    llama_view_edges(c, edges, &v);
    return v.lm_head;
}

const CpuDeviceFamily cpu_device_llama = {
    .size = sizeof(Device), .apart_floats = rope_floats, .init = init, .fini = fini,
    .carve = carve, .block = block_call,
    .embed_forward = embed_forward, .embed_backward = embed_backward,
    .norm_forward = norm_forward, .norm_backward = norm_backward, .lm_head = lm_head,
};
