/* device_cpu_gpt2: the CPU device's GPT-2 half (device_cpu.h): its tasks on the fp32 reference
 * (gpt2_block.h, gpt2_ops.h), as the in-memory backend makes the same calls. The LM head runs
 * in chunks of graph_head_chunk tokens, forward and backward fused per chunk in the
 * lm_head's forward task (graph.h); every op it calls works row by row, or sums over rows in
 * row order, so the chunks give the same bits as one pass over the micro-batch. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device_cpu.h"
#include "gpt2_arch.h"
#include "gpt2_block.h"
#include "gpt2_ops.h"

struct Device {
    CpuDeviceHead head;
    ModelConfig cfg;
    Gpt2Dims d;
    WorkPool *wp;
    float *mem;                 /* everything below, one allocation */
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

/* What create carves, in floats: gpt2_arch's cpu_lane_bytes. */
static size_t own_floats(const ModelConfig *c, int B, int T)
{
    int64_t bytes[ARCH_MAX_TENSORS], own;
    gpt2_arch.cpu_lane_bytes(c, B, T, bytes, &own);
    return (size_t)own / sizeof(float);
}

static void cpu_destroy(Device *d)
{
    if (d) {
        free(d->mem);
        free(d);
    }
}

static int cpu_create(Device **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    Device *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, -ENOMEM, "out of memory");
    d->head.fam = &cpu_device_gpt2;
    d->cfg = *c;
    gpt2_dims(&d->d, c, B, T);
    d->wp = wp;
    d->mem = calloc(own_floats(c, B, T), sizeof(float));
    if (!d->mem) {
        cpu_destroy(d);
        return err_set(e, -ENOMEM, "out of memory for the compute lane's buffers");
    }
    size_t s[F_COUNT];
    sizes(c, B, T, s);
    float *p = d->mem;
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
    p = cpu_device_carve_shared(&d->head, p, c, B, T, wp);
    d->head.act_grads = d->g.ln1;
    d->head.act_grad_floats = (size_t)(d->preatt - d->g.ln1);
    assert((size_t)(p - d->mem) == own_floats(c, B, T));
    *out = d;
    return 0;
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
    const ModelConfig *cfg = &d->cfg;
    Gpt2BlockView w, dw;
    gpt2_view_block_at(cfg, c->w, &w);
    Gpt2BlockActs a;
    block_acts(d, c, &a);
    if (c->task->kind != TASK_BWD) {
        gpt2_block_forward_op(c->op, &d->d, &w, &a, d->wp);
        return 0;
    }
    Gpt2BlockGrads g = d->g;
    cpu_device_block_grads(&d->head, c, &g.dout, &g.din);
    gpt2_view_block_at(cfg, c->dw, &dw);
    gpt2_block_backward_op(c->op, &d->d, &w, &dw, &a, &g, d->wp);
    return 0;
}

static int edge_call(Device *d, const ComputeCall *c)
{
    const ModelConfig *cfg = &d->cfg;
    int B = d->d.B, T = d->d.T, C = d->d.C, N = B * T, L = cfg->n_layer;
    Gpt2EdgeView w, dw;
    gpt2_view_edges(cfg, c->w, &w);
    gpt2_view_edges(cfg, c->dw ? c->dw : c->w, &dw);
    bool bwd = c->task->kind == TASK_BWD;
    float *res = c->t[GPT2_RES2];
    switch (c->op) {
    case EDGE_EMBED:
        if (!bwd)
            encoder_forward_ref(c->t[GPT2_IN], c->inputs, w.wte, w.wpe, B, T, C);
        else
            encoder_backward_ref(dw.wte, dw.wpe, d->head.dres[1 % 2], c->inputs, B, T, C);
        return 0;
    case EDGE_NORM: {
        if (!bwd) {
            layernorm_forward_ref(d->head.lm.x, d->lnf_mean, d->lnf_rstd, res, w.lnfw, w.lnfb,
                                  N, C);
            return 0;
        }
        float *dres = d->head.dres[(L - 1 + 2) % 2];
        memset(dres, 0, (size_t)N * C * sizeof(float));
        layernorm_backward_ref(dres, dw.lnfw, dw.lnfb, d->head.lm.dx, res, w.lnfw, d->lnf_mean,
                               d->lnf_rstd, N, C);
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

const CpuDeviceFamily cpu_device_gpt2 = {
    .create = cpu_create,
    .destroy = cpu_destroy, .block = block_call, .edge = edge_call,
};
