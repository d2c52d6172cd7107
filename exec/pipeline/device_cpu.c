/* device_cpu: the pipeline's compute on the fp32 CPU reference (gpt2_block.h, gpt2_ops.h).
 * "Device" memory is host memory and copies are memcpy: the executor still moves every tensor
 * the schedule moves, so placement, swapping, recomputation and the out-of-core optimizer are
 * exercised exactly, and the results are bit-identical to the in-memory CPU backend's. The LM
 * head runs in chunks of graph_head_chunk tokens, forward and backward fused per chunk in the
 * lm_head's forward task (graph.h); every op it calls works row by row, or sums over rows in
 * row order, so the chunks give the same bits as one pass over the micro-batch. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "device.h"
#include "gpt2_arch.h"
#include "gpt2_block.h"
#include "gpt2_ops.h"

struct Device {
    ModelConfig cfg;
    Gpt2Dims d;
    WorkPool *wp;
    float *mem;                 /* everything below, one allocation */
    Gpt2BlockGrads g;           /* din and dout are set per block */
    float *preatt;              /* forward scratch (B,NH,T,T) */
    float *dres[2];             /* the residual stream's gradient, ping-pong over blocks */
    float *lnf, *lnf_mean, *lnf_rstd, *dlnf; /* (N,C), (N), (N), (N,C) */
    float *logits;              /* (chunk,V): a chunk's logits, then their gradient */
    float *probs;               /* (chunk,V): their softmax */
    float *losses;              /* (N) */
    float *dlosses;             /* (chunk): d(grad_scale * mean loss)/d(loss) of each token */
    int n_targets;              /* the micro-batch's targets the loss counts (backend.h) */
    float loss;
};

enum { F_N_C, F_N, F_N_3C, F_N_F, F_ATT, F_CHUNK, F_CHUNK_V, F_COUNT };

static void sizes(const ModelConfig *c, int B, int T, size_t s[F_COUNT])
{
    size_t N = (size_t)B * T, C = (size_t)c->d_model;
    s[F_N_C] = N * C;
    s[F_N] = N;
    s[F_N_3C] = 3 * N * C;
    s[F_N_F] = N * (size_t)c->d_ff;
    s[F_ATT] = (size_t)B * c->n_head * T * T;
    s[F_CHUNK] = (size_t)graph_head_chunk((int64_t)N);
    s[F_CHUNK_V] = s[F_CHUNK] * (size_t)c->vocab;
}

/* Each block tensor in fp32, with its statistics (a layernorm's mean and rstd) or, for
 * attention's output, its softmax (B,NH,T,T) beside it. */
static void cpu_tensor_bytes(const ModelConfig *c, int B, int T, size_t bytes[ARCH_MAX_TENSORS])
{
    size_t s[F_COUNT];
    sizes(c, B, T, s);
    const size_t floats[GPT2_TENSORS] = {
        [GPT2_LN1] = s[F_N_C] + 2 * s[F_N], [GPT2_QKV] = s[F_N_3C],
        [GPT2_ATTN] = s[F_N_C] + s[F_ATT], [GPT2_PROJ] = s[F_N_C], [GPT2_RES1] = s[F_N_C],
        [GPT2_LN2] = s[F_N_C] + 2 * s[F_N], [GPT2_FC1] = s[F_N_F], [GPT2_GELU] = s[F_N_F],
        [GPT2_FC2] = s[F_N_C], [GPT2_RES2] = s[F_N_C], [GPT2_IN] = s[F_N_C]};
    for (int i = 0; i < GPT2_TENSORS; i++)
        bytes[i] = floats[i] * sizeof(float);
}

/* Activation gradients (one block's), residual gradients, scratch and the edges: what create
 * carves, in its order. */
static size_t own_floats(const ModelConfig *c, int B, int T)
{
    size_t s[F_COUNT];
    sizes(c, B, T, s);
    size_t grads = 6 * s[F_N_C] + s[F_N_3C] + 2 * s[F_ATT] + 2 * s[F_N_F];
    size_t edges = 2 * s[F_N_C] + 2 * s[F_N] + 2 * s[F_CHUNK_V] + s[F_N] + s[F_CHUNK];
    return grads + s[F_ATT] + 2 * s[F_N_C] + edges;
}

static size_t cpu_own_bytes(const ModelConfig *c, int B, int T)
{
    return own_floats(c, B, T) * sizeof(float);
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
    CARVE(d->dres[0], s[F_N_C]);
    CARVE(d->dres[1], s[F_N_C]);
    CARVE(d->lnf, s[F_N_C]);
    CARVE(d->dlnf, s[F_N_C]);
    CARVE(d->lnf_mean, s[F_N]);
    CARVE(d->lnf_rstd, s[F_N]);
    CARVE(d->logits, s[F_CHUNK_V]);
    CARVE(d->probs, s[F_CHUNK_V]);
    CARVE(d->losses, s[F_N]);
    CARVE(d->dlosses, s[F_CHUNK]);
#undef CARVE
    assert((size_t)(p - d->mem) == own_floats(c, B, T));
    *out = d;
    return 0;
}

static void *cpu_alloc(Device *d, size_t bytes, Err *e)
{
    (void)d;
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1)) {
        err_set(e, -ENOMEM, "out of memory for %zu bytes of compute-lane buffers", bytes);
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void cpu_release(Device *d, void *p)
{
    (void)d;
    free(p);
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
    int b = c->task->layer;
    size_t N = (size_t)d->d.B * d->d.T, C = (size_t)d->d.C;
    Gpt2BlockGrads g = d->g;
    g.dout = d->dres[b % 2];
    g.din = d->dres[(b + 1) % 2];
    if (c->first_bwd) {
        /* gradients accumulate into zeroed buffers, as in the in-memory backend */
        size_t own = (size_t)(d->preatt - d->g.ln1);
        memset(d->g.ln1, 0, own * sizeof(float));
        memset(g.din, 0, N * C * sizeof(float));
        memset(c->dw, 0, (size_t)model_block_params(cfg) * sizeof(float));
    }
    gpt2_view_block_at(cfg, c->dw, &dw);
    gpt2_block_backward_op(c->op, &d->d, &w, &dw, &a, &g, d->wp);
    return 0;
}

/* The head over the n tokens from row r, forward and backward fused: the chunk's logits, their
 * softmax and cross-entropy (its losses), the logits' gradient (in the logits' buffer), then the
 * head's input gradient (its rows of dlnf) and weight gradient (added into dlm_head). */
static void head_chunk(Device *d, const ComputeCall *c, const float *lm_head, float *dlm_head,
                       int r, int n)
{
    int C = d->d.C, V = d->cfg.vocab;
    const float *x = d->lnf + (size_t)r * C;
    float *dx = d->dlnf + (size_t)r * C;
    const int *targets = c->targets + r;
    matmul_forward_ref(d->logits, x, lm_head, NULL, n, C, V, d->wp);
    softmax_forward_ref(d->probs, d->logits, 1, n, V);
    crossentropy_forward_ref(d->losses + r, d->probs, targets, 1, n, V);
    /* the softmax is all the rest needs of the logits: their buffer takes their gradient, which
     * the backward adds into */
    memset(d->logits, 0, (size_t)n * V * sizeof(float));
    crossentropy_softmax_backward_ref(d->logits, d->dlosses, d->probs, targets, 1, n, V);
    memset(dx, 0, (size_t)n * C * sizeof(float));
    matmul_backward_ref(dx, dlm_head, NULL, d->logits, x, lm_head, n, C, V, d->wp);
}

/* F.head.lm_head: the micro-batch's head, chunk by chunk. The edges' gradients start here
 * (zeroed), so the head's weight gradient comes before the embedding's when they are tied, as
 * in the in-memory backend. */
static void head_forward(Device *d, const ComputeCall *c, const Gpt2EdgeView *w,
                         const Gpt2EdgeView *dw)
{
    int N = d->d.B * d->d.T, chunk = (int)graph_head_chunk(N);
    assert(c->dw);
    memset(c->dw, 0, (size_t)model_embed_params(&d->cfg) * sizeof(float));
    /* the mean over the counted targets, as the in-memory backend takes it (a masked target's
     * row of the chunk gets no gradient from crossentropy_softmax_backward_ref) */
    d->n_targets = backend_count_targets(N, c->targets);
    float dloss = d->n_targets ? c->grad_scale / (float)d->n_targets : 0.0f;
    for (int i = 0; i < chunk; i++)
        d->dlosses[i] = dloss;
    for (int r = 0; r < N; r += chunk)
        head_chunk(d, c, w->lm_head, dw->lm_head, r, N - r < chunk ? N - r : chunk);
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
            encoder_backward_ref(dw.wte, dw.wpe, d->dres[1 % 2], c->inputs, B, T, C);
        return 0;
    case EDGE_NORM: {
        if (!bwd) {
            layernorm_forward_ref(d->lnf, d->lnf_mean, d->lnf_rstd, res, w.lnfw, w.lnfb, N, C);
            return 0;
        }
        float *dres = d->dres[(L - 1 + 2) % 2];
        memset(dres, 0, (size_t)N * C * sizeof(float));
        layernorm_backward_ref(dres, dw.lnfw, dw.lnfb, d->dlnf, res, w.lnfw, d->lnf_mean,
                               d->lnf_rstd, N, C);
        return 0;
    }
    case EDGE_HEAD:
        if (!bwd) /* a backward task has nothing left: the forward did it */
            head_forward(d, c, &w, &dw);
        return 0;
    case EDGE_LOSS:
        if (!bwd) {
            double sum = 0;
            for (int i = 0; i < N; i++)
                sum += d->losses[i];
            d->loss = d->n_targets ? (float)(sum / d->n_targets) : 0.0f;
            return 0;
        }
        return -EINVAL;
    default: return -EINVAL;
    }
}

static int cpu_compute(Device *d, const ComputeCall *c, DeviceSpan *span, Err *e)
{
    span->set = false;
    int layer = c->task->layer;
    int rc = layer >= 0 && layer < d->cfg.n_layer ? block_call(d, c) : edge_call(d, c);
    if (rc)
        return err_set(e, rc, "%s: no such operation on the CPU device", c->task->id);
    return 0;
}

static float cpu_loss(Device *d)
{
    return d->loss;
}

static int cpu_copy(Device *d, bool to_device, int n, const DeviceCopy *c, DeviceSpan *span,
                    Err *e)
{
    (void)d, (void)to_device, (void)e;
    span->set = false;
    for (int i = 0; i < n; i++)
        memcpy(c[i].dst, c[i].src, c[i].bytes);
    return 0;
}

static int cpu_compute_empty(Device *d, DeviceSpan *span, Err *e)
{
    (void)d, (void)e;
    span->set = false;
    return 0;
}

const DeviceOps device_cpu = {
    .name = "cpu", .on_host = true, .weight_type = DTYPE_FP32, .grad_type = DTYPE_FP32,
    .tensor_bytes = cpu_tensor_bytes, .own_bytes = cpu_own_bytes, .create = cpu_create,
    .destroy = cpu_destroy, .alloc = cpu_alloc, .release = cpu_release,
    .compute = cpu_compute, .compute_empty = cpu_compute_empty, .loss = cpu_loss,
    .copy = cpu_copy,
};
