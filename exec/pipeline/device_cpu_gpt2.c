/* device_cpu_gpt2: the CPU device's GPT-2 half (device_cpu.h): its buffers, its blocks' tasks,
 * the token and position embeddings and the final layernorm on the fp32 reference
 * (gpt2_block.h, gpt2_ops.h), as the in-memory backend (exec/cpu/gpt2_cpu.c) makes the same
 * calls in the same order. Block tensors by the family's names (gpt2_arch.h); beside its
 * output a layernorm's tensor keeps its mean and rstd, attention's its softmax. */
#include "device_cpu.h"
#include "gpt2_arch.h"
#include "gpt2_block.h"
#include "gpt2_ops.h"

struct Device {
    CpuDeviceHead head;
    Gpt2Dims d;
    Gpt2BlockGrads g;           /* din and dout are set per block */
    float *preatt;              /* forward scratch (B,NH,T,T) */
    float *lnf_mean, *lnf_rstd; /* (N) each: the final layernorm's, whose output is head.lm.x */
};

enum { F_N_C, F_N, F_N_3C, F_N_F, F_ATT, F_COUNT };

static void sizes(const ModelConfig *c, int B, int T, size_t s[F_COUNT])
{
    size_t N = (size_t)B * T, C = (size_t)c->d_model;
    s[F_N_C] = N * C;
    s[F_N] = N;
    s[F_N_3C] = 3 * N * C;
    s[F_N_F] = N * (size_t)c->d_ff;
    s[F_ATT] = (size_t)B * c->n_head * T * T;
}

static int init(Device *d, Err *e)
{
    (void)e;
    gpt2_dims(&d->d, &d->head.cfg, d->head.B, d->head.T);
    return 0;
}

static float *carve(Device *d, float *p)
{
    size_t s[F_COUNT];
    sizes(&d->head.cfg, d->head.B, d->head.T, s);
#define CARVE(dst, n) (dst = p, p += (n))
    CARVE(d->g.ln1, s[F_N_C]);
    CARVE(d->g.qkv, s[F_N_3C]);
    CARVE(d->g.atty, s[F_N_C]);
    CARVE(d->g.preatt, s[F_ATT]);
    CARVE(d->g.att, s[F_ATT]);
    CARVE(d->g.attproj, s[F_N_C]);
    CARVE(d->g.res1, s[F_N_C]);
    CARVE(d->g.ln2, s[F_N_C]);
    CARVE(d->g.fch, s[F_N_F]);
    CARVE(d->g.fch_gelu, s[F_N_F]);
    CARVE(d->g.fcproj, s[F_N_C]);
    CARVE(d->preatt, s[F_ATT]);
    CARVE(d->lnf_mean, s[F_N]);
    CARVE(d->lnf_rstd, s[F_N]);
#undef CARVE
    d->head.act_grads = d->g.ln1;
    d->head.act_grad_floats = (size_t)(d->preatt - d->g.ln1);
    return p;
}

/* The block tensors of a call as gpt2_block wants them. */
static void block_acts(const Device *d, const ComputeCall *c, Gpt2BlockActs *a)
{
    size_t N = (size_t)d->d.B * d->d.T, C = (size_t)d->d.C;
    float *const *t = (float *const *)c->t;
    *a = (Gpt2BlockActs){
        .in = t[GPT2_IN], .ln1 = t[GPT2_LN1], .qkv = t[GPT2_QKV], .atty = t[GPT2_ATTN],
        .preatt = d->preatt, .attproj = t[GPT2_PROJ], .res1 = t[GPT2_RES1],
        .ln2 = t[GPT2_LN2], .fch = t[GPT2_FC1], .fch_gelu = t[GPT2_GELU],
        .fcproj = t[GPT2_FC2], .out = t[GPT2_RES2]};
    if (a->ln1)
        a->ln1_mean = a->ln1 + N * C, a->ln1_rstd = a->ln1 + N * C + N;
    if (a->atty)
        a->att = a->atty + N * C;
    if (a->ln2)
        a->ln2_mean = a->ln2 + N * C, a->ln2_rstd = a->ln2 + N * C + N;
}

static int block_call(Device *d, const ComputeCall *c)
{
    const ModelConfig *cfg = &d->head.cfg;
    Gpt2BlockView w, dw;
    gpt2_view_block_at(cfg, c->w, &w);
    Gpt2BlockActs a;
    block_acts(d, c, &a);
    if (c->task->kind != TASK_BWD) {
        gpt2_block_forward_op(c->op, &d->d, &w, &a, d->head.wp);
        return 0;
    }
    Gpt2BlockGrads g = d->g;
    cpu_device_block_grads(&d->head, c, &g.dout, &g.din);
    gpt2_view_block_at(cfg, c->dw, &dw);
    gpt2_block_backward_op(c->op, &d->d, &w, &dw, &a, &g, d->head.wp);
    return 0;
}

static void embed_forward(Device *d, const ComputeCall *c)
{
    Gpt2EdgeView w;
    gpt2_view_edges(&d->head.cfg, c->w, &w);
    encoder_forward_ref(c->t[GPT2_IN], c->inputs, w.wte, w.wpe, d->d.B, d->d.T, d->d.C);
}

static void embed_backward(Device *d, const ComputeCall *c, float *dres)
{
    Gpt2EdgeView dw;
    gpt2_view_edges(&d->head.cfg, c->dw, &dw);
    encoder_backward_ref(dw.wte, dw.wpe, dres, c->inputs, d->d.B, d->d.T, d->d.C);
}

static void norm_forward(Device *d, const ComputeCall *c, float *x)
{
    Gpt2EdgeView w;
    gpt2_view_edges(&d->head.cfg, c->w, &w);
    layernorm_forward_ref(x, d->lnf_mean, d->lnf_rstd, c->t[GPT2_RES2], w.lnfw, w.lnfb,
                          d->d.B * d->d.T, d->d.C);
}

static void norm_backward(Device *d, const ComputeCall *c, const float *dx, float *dres)
{
    Gpt2EdgeView w, dw;
    gpt2_view_edges(&d->head.cfg, c->w, &w);
    gpt2_view_edges(&d->head.cfg, c->dw, &dw);
    layernorm_backward_ref(dres, dw.lnfw, dw.lnfb, dx, c->t[GPT2_RES2], w.lnfw, d->lnf_mean,
                           d->lnf_rstd, d->d.B * d->d.T, d->d.C);
}

static float *lm_head(const ModelConfig *c, float *edges)
{
    Gpt2EdgeView v;
    gpt2_view_edges(c, edges, &v);
    return v.lm_head;
}

const CpuDeviceFamily cpu_device_gpt2 = {
    .size = sizeof(Device), .init = init, .carve = carve, .block = block_call,
    .embed_forward = embed_forward, .embed_backward = embed_backward,
    .norm_forward = norm_forward, .norm_backward = norm_backward, .lm_head = lm_head,
};
