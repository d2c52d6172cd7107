/* device_cpu_llama: the CPU device's Llama half (device_cpu.h): its tasks on the fp32 reference
 * (llama_block.h; the head is every family's, cpu_device_head), as the in-memory backend
 * (exec/cpu/llama_cpu.c) makes the same calls in the same order, so the two train bit for bit
 * alike. Block tensors by the family's names (llama_arch.h); beside its output a norm's tensor
 * keeps its rstd, attention's its softmax. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device_cpu.h"
#include "graph.h"
#include "llama_block.h"
#include "llama_layout.h"

struct Device {
    CpuDeviceHead head;
    ModelConfig cfg;
    LlamaDims d;
    RopeTable rope;
    WorkPool *wp;
    float *mem;                 /* everything below, one allocation */
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

/* The rotary table's floats: T positions of d/2 cosines and sines. */
static size_t rope_floats(const ModelConfig *c, int T)
{
    return (size_t)T * (size_t)model_head_dim(c);
}

/* What create carves, in floats (the rotary table apart): llama_arch's cpu_lane_bytes. */
static size_t own_floats(const ModelConfig *c, int B, int T)
{
    int64_t bytes[ARCH_MAX_TENSORS], own;
    llama_arch.cpu_lane_bytes(c, B, T, bytes, &own);
    return (size_t)own / sizeof(float) - rope_floats(c, T);
}

static void llama_destroy(Device *d)
{
    free(d->mem);
    rope_table_free(&d->rope);
    free(d);
}

static int llama_create(Device **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    Device *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, -ENOMEM, "out of memory");
    d->head.fam = &cpu_device_llama;
    d->cfg = *c;
    d->wp = wp;
    int hd = (int)model_head_dim(c);
    d->mem = calloc(own_floats(c, B, T), sizeof(float));
    int rc = d->mem ? 0 : err_set(e, -ENOMEM, "out of memory for the compute lane's buffers");
    if (!rc)
        rc = rope_table_init(&d->rope, T, hd, model_rope_theta(c),
                             c->rope_scaling.factor > 0 ? &c->rope_scaling : NULL, e);
    if (rc) {
        llama_destroy(d);
        return rc;
    }
    d->d = (LlamaDims){.B = B, .T = T, .C = c->d_model, .F = c->d_ff, .h = c->n_head,
                       .g = model_kv_heads(c), .d = hd, .eps = (float)model_norm_eps(c),
                       .rope = &d->rope};
    size_t s[F_COUNT];
    sizes(c, B, T, s);
    float *p = d->mem;
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
    p = cpu_device_carve_shared(&d->head, p, c, B, T, wp);
    d->head.act_grads = d->g.norm1;
    d->head.act_grad_floats = (size_t)(d->preatt - d->g.norm1);
    assert((size_t)(p - d->mem) == own_floats(c, B, T));
    *out = d;
    return 0;
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
    const ModelConfig *cfg = &d->cfg;
    LlamaBlockView w, dw;
    llama_view_block_at(cfg, c->w, &w);
    LlamaBlockActs a;
    block_acts(d, c, &a);
    if (c->task->kind != TASK_BWD) {
        llama_block_forward_op(c->op, &d->d, &w, &a, d->wp);
        return 0;
    }
    LlamaBlockGrads g = d->g;
    cpu_device_block_grads(&d->head, c, &g.dout, &g.din);
    llama_view_block_at(cfg, c->dw, &dw);
    llama_block_backward_op(c->op, &d->d, &w, &dw, &a, &g, d->wp);
    return 0;
}

static int edge_call(Device *d, const ComputeCall *c)
{
    const ModelConfig *cfg = &d->cfg;
    int C = d->d.C, N = d->d.B * d->d.T, L = cfg->n_layer;
    LlamaEdgeView w, dw;
    llama_view_edges(cfg, c->w, &w);
    llama_view_edges(cfg, c->dw ? c->dw : c->w, &dw);
    bool bwd = c->task->kind == TASK_BWD;
    float *res = c->t[LLAMA_RES2];
    switch (c->op) {
    case EDGE_EMBED:
        if (!bwd)
            embedding_forward_ref(c->t[LLAMA_IN], c->inputs, w.embed, N, C);
        else
            embedding_backward_ref(dw.embed, d->head.dres[1 % 2], c->inputs, N, C);
        return 0;
    case EDGE_NORM: {
        if (!bwd) {
            rmsnorm_forward_ref(d->head.lm.x, d->normf_rstd, res, w.norm, N, C, d->d.eps);
            return 0;
        }
        float *dres = d->head.dres[(L - 1 + 2) % 2];
        memset(dres, 0, (size_t)N * C * sizeof(float));
        rmsnorm_backward_ref(dres, dw.norm, d->head.lm.dx, res, w.norm, d->normf_rstd, N, C);
        return 0;
    }
    case EDGE_HEAD:
        if (!bwd) { /* a backward task has nothing left: the forward did it */
            cpu_device_head(&d->head, c, w.lm_head, dw.lm_head,
                            (size_t)model_embed_params(cfg));
        }
        return 0;
    default: return -EINVAL;
    }
}

const CpuDeviceFamily cpu_device_llama = {
    .create = llama_create,
    .destroy = llama_destroy, .block = block_call, .edge = edge_call,
};
