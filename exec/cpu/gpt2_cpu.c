/* gpt2_cpu: the fp32 CPU reference backend (backend_cpu): GPT-2 forward and backward with the
 * ops of gpt2_ops.h, and AdamW with exec/optim/adam. Activations and their gradients are carved
 * from one allocation by a size table. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_block.h"
#include "gpt2_cpu.h"
#include "gpt2_layout.h"
#include "gpt2_ops.h"
#include "graph.h"

enum {
    A_ENCODED, A_LN1, A_LN1_MEAN, A_LN1_RSTD, A_QKV, A_ATTY, A_PREATT, A_ATT, A_ATTPROJ,
    A_RESIDUAL2, A_LN2, A_LN2_MEAN, A_LN2_RSTD, A_FCH, A_FCH_GELU, A_FCPROJ, A_RESIDUAL3,
    A_LNF, A_LNF_MEAN, A_LNF_RSTD, A_LOGITS, A_PROBS, A_LOSSES, A_COUNT
};

typedef struct Acts {
    float *p[A_COUNT];
} Acts;

typedef struct Gpt2Cpu {
    Backend base;
    WorkPool *wp;
    AdamIsa isa;
    float *params, *grads, *m, *v;
    float *act_mem, *dact_mem;
    Acts acts, dacts;
    size_t act_size[A_COUNT];
    size_t act_total;
    int *targets; /* (B,T), kept for backward */
    int *inputs;
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

static float *carve(float *mem, const size_t s[A_COUNT], Acts *a)
{
    for (int i = 0; i < A_COUNT; i++) {
        a->p[i] = mem;
        mem += s[i];
    }
    return mem;
}

static void cpu_destroy(Backend *b)
{
    Gpt2Cpu *g = (Gpt2Cpu *)b;
    if (!g)
        return;
    free(g->params), free(g->grads), free(g->m), free(g->v);
    free(g->act_mem), free(g->dact_mem), free(g->targets), free(g->inputs);
    free(g);
}

static int cpu_create(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    *out = NULL;
    int rc = backend_check_shape(c, B, T, e);
    if (rc)
        return rc;
    Gpt2Cpu *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(e, -ENOMEM, "out of memory");
    size_t P = (size_t)model_param_count(c);
    g->base = (Backend){.ops = &backend_cpu, .cfg = *c, .B = B, .T = T, .n_params = P,
                        .loss_scale = 1.0f};
    g->wp = wp;
    g->isa = adam_isa_best();
    act_sizes(c, B, T, g->act_size);
    size_t total = 0;
    for (int i = 0; i < A_COUNT; i++)
        total += g->act_size[i];
    g->params = calloc(P, sizeof(float));
    g->grads = calloc(P, sizeof(float));
    g->m = calloc(P, sizeof(float));
    g->v = calloc(P, sizeof(float));
    g->act_total = total;
    g->act_mem = calloc(total, sizeof(float));
    g->dact_mem = calloc(total, sizeof(float));
    g->targets = calloc((size_t)B * T, sizeof(int));
    g->inputs = calloc((size_t)B * T, sizeof(int));
    if (!g->params || !g->grads || !g->m || !g->v || !g->act_mem || !g->dact_mem ||
        !g->targets || !g->inputs) {
        cpu_destroy(&g->base);
        return err_set(e, -ENOMEM, "out of memory for %s of parameters and activations of %s",
                       c->name, c->name);
    }
    carve(g->act_mem, g->act_size, &g->acts);
    carve(g->dact_mem, g->act_size, &g->dacts);
    *out = &g->base;
    return 0;
}

static int cpu_read_state(Backend *b, float *params, float *m, float *v, Err *e)
{
    (void)e;
    Gpt2Cpu *g = (Gpt2Cpu *)b;
    size_t n = b->n_params * sizeof(float);
    if (params)
        memcpy(params, g->params, n);
    if (m)
        memcpy(m, g->m, n);
    if (v)
        memcpy(v, g->v, n);
    return 0;
}

static int cpu_write_state(Backend *b, const float *params, const float *m, const float *v,
                           Err *e)
{
    (void)e;
    Gpt2Cpu *g = (Gpt2Cpu *)b;
    size_t n = b->n_params * sizeof(float);
    if (params)
        memcpy(g->params, params, n);
    if (m)
        memcpy(g->m, m, n);
    if (v)
        memcpy(g->v, v, n);
    return 0;
}

static int cpu_read_grads(Backend *b, float *grads, Err *e)
{
    (void)e;
    memcpy(grads, ((Gpt2Cpu *)b)->grads, b->n_params * sizeof(float));
    return 0;
}

static int cpu_write_grads(Backend *b, const float *grads, Err *e)
{
    (void)e;
    memcpy(((Gpt2Cpu *)b)->grads, grads, b->n_params * sizeof(float));
    return 0;
}

/* Layer l's slice of a per-layer activation. */
static float *lay(const Acts *a, const size_t s[A_COUNT], int which, int l, int L)
{
    return a->p[which] + (size_t)l * (s[which] / (size_t)L);
}

/* Layer l's activations (or their gradients) as a block sees them. */
static void block_acts(const Gpt2Cpu *g, const Acts *a, int l, Gpt2BlockActs *x)
{
    const size_t *s = g->act_size;
    int L = g->base.cfg.n_layer;
    *x = (Gpt2BlockActs){
        .in = l == 0 ? a->p[A_ENCODED] : lay(a, s, A_RESIDUAL3, l - 1, L),
        .ln1 = lay(a, s, A_LN1, l, L), .ln1_mean = lay(a, s, A_LN1_MEAN, l, L),
        .ln1_rstd = lay(a, s, A_LN1_RSTD, l, L), .qkv = lay(a, s, A_QKV, l, L),
        .atty = lay(a, s, A_ATTY, l, L), .att = lay(a, s, A_ATT, l, L),
        .preatt = lay(a, s, A_PREATT, l, L), .attproj = lay(a, s, A_ATTPROJ, l, L),
        .res1 = lay(a, s, A_RESIDUAL2, l, L), .ln2 = lay(a, s, A_LN2, l, L),
        .ln2_mean = lay(a, s, A_LN2_MEAN, l, L), .ln2_rstd = lay(a, s, A_LN2_RSTD, l, L),
        .fch = lay(a, s, A_FCH, l, L), .fch_gelu = lay(a, s, A_FCH_GELU, l, L),
        .fcproj = lay(a, s, A_FCPROJ, l, L), .out = lay(a, s, A_RESIDUAL3, l, L),
    };
}

static void forward(Gpt2Cpu *g, const int *inputs)
{
    const ModelConfig *c = &g->base.cfg;
    int B = g->base.B, T = g->base.T, C = c->d_model, L = c->n_layer, V = c->vocab, N = B * T;
    Acts *a = &g->acts;
    Gpt2Dims d;
    gpt2_dims(&d, c, B, T);
    Gpt2EdgeView ev;
    gpt2_view_edges(c, g->params, &ev);
    encoder_forward_ref(a->p[A_ENCODED], inputs, ev.wte, ev.wpe, B, T, C);
    float *residual = a->p[A_ENCODED];
    for (int l = 0; l < L; l++) {
        Gpt2BlockView w;
        gpt2_view_block(c, g->params, l, &w);
        Gpt2BlockActs x;
        block_acts(g, a, l, &x);
        for (int op = 0; op < GPT2_OPS; op++)
            gpt2_block_forward_op(op, &d, &w, &x, g->wp);
        residual = x.out;
    }
    layernorm_forward_ref(a->p[A_LNF], a->p[A_LNF_MEAN], a->p[A_LNF_RSTD], residual, ev.lnfw,
                          ev.lnfb, N, C);
    matmul_forward_ref(a->p[A_LOGITS], a->p[A_LNF], ev.lm_head, NULL, N, C, V, g->wp);
    softmax_forward_ref(a->p[A_PROBS], a->p[A_LOGITS], B, T, V);
}

/* Backward of loss_scale * the mean loss over the n_targets counted targets. */
static void backward(Gpt2Cpu *g, const int *inputs, const int *targets, int n_targets)
{
    const ModelConfig *c = &g->base.cfg;
    int B = g->base.B, T = g->base.T, C = c->d_model, L = c->n_layer, V = c->vocab, N = B * T;
    const size_t *s = g->act_size;
    Acts *a = &g->acts, *d = &g->dacts;
    Gpt2Dims dims;
    gpt2_dims(&dims, c, B, T);
    memset(g->grads, 0, g->base.n_params * sizeof(float));
    memset(g->dact_mem, 0, g->act_total * sizeof(float));
    Gpt2EdgeView ev, dev;
    gpt2_view_edges(c, g->params, &ev);
    gpt2_view_edges(c, g->grads, &dev);
    float *dlosses = d->p[A_LOSSES];
    float dloss = n_targets ? g->base.loss_scale / (float)n_targets : 0.0f;
    for (int i = 0; i < N; i++)
        dlosses[i] = dloss;
    crossentropy_softmax_backward_ref(d->p[A_LOGITS], dlosses, a->p[A_PROBS], targets, B, T, V);
    matmul_backward_ref(d->p[A_LNF], dev.lm_head, NULL, d->p[A_LOGITS], a->p[A_LNF], ev.lm_head,
                        N, C, V, g->wp);
    float *residual = L > 0 ? lay(a, s, A_RESIDUAL3, L - 1, L) : a->p[A_ENCODED];
    float *dresidual = L > 0 ? lay(d, s, A_RESIDUAL3, L - 1, L) : d->p[A_ENCODED];
    layernorm_backward_ref(dresidual, dev.lnfw, dev.lnfb, d->p[A_LNF], residual, ev.lnfw,
                           a->p[A_LNF_MEAN], a->p[A_LNF_RSTD], N, C);
    for (int l = L - 1; l >= 0; l--) {
        Gpt2BlockView w, dw;
        gpt2_view_block(c, g->params, l, &w);
        gpt2_view_block(c, g->grads, l, &dw);
        Gpt2BlockActs x, dx;
        block_acts(g, a, l, &x);
        block_acts(g, d, l, &dx);
        Gpt2BlockGrads gr = {.din = dx.in, .ln1 = dx.ln1, .qkv = dx.qkv, .atty = dx.atty,
                             .preatt = dx.preatt, .att = dx.att, .attproj = dx.attproj,
                             .res1 = dx.res1, .ln2 = dx.ln2, .fch = dx.fch,
                             .fch_gelu = dx.fch_gelu, .fcproj = dx.fcproj, .dout = dx.out};
        for (int op = GPT2_OPS - 1; op >= 0; op--)
            if (gpt2_block_op_has_backward(op))
                gpt2_block_backward_op(op, &dims, &w, &dw, &x, &gr, g->wp);
    }
    encoder_backward_ref(dev.wte, dev.wpe, d->p[A_ENCODED], inputs, B, T, C);
}

static int cpu_step(Backend *b, const int *inputs, const int *targets, bool do_backward,
                    float *loss, Err *e)
{
    Gpt2Cpu *g = (Gpt2Cpu *)b;
    const ModelConfig *c = &b->cfg;
    int N = b->B * b->T;
    int rc = backend_check_tokens(c, N, inputs, targets, e);
    if (rc)
        return rc;
    forward(g, inputs);
    int n_targets = targets ? backend_count_targets(N, targets) : 0;
    if (targets) {
        crossentropy_forward_ref(g->acts.p[A_LOSSES], g->acts.p[A_PROBS], targets, b->B, b->T,
                                 c->vocab);
        double sum = 0;
        for (int i = 0; i < N; i++)
            sum += g->acts.p[A_LOSSES][i];
        if (loss)
            *loss = n_targets ? (float)(sum / n_targets) : 0.0f;
    }
    if (do_backward) {
        if (!targets)
            return err_set(e, -EINVAL, "backward needs targets");
        backward(g, inputs, targets, n_targets);
    }
    return 0;
}

static double cpu_grad_sq(Backend *b, size_t begin, size_t end)
{
    Gpt2Cpu *g = (Gpt2Cpu *)b;
    return adam_sum_sq(g->grads + begin, DTYPE_FP32, end - begin, g->wp);
}

static int cpu_update(Backend *b, const AdamStep *s, size_t begin, size_t end, Err *e)
{
    (void)e;
    Gpt2Cpu *g = (Gpt2Cpu *)b;
    AdamSlice x = {.master = g->params + begin, .m = g->m + begin, .v = g->v + begin,
                   .grad = g->grads + begin, .grad_type = DTYPE_FP32, .n = end - begin};
    adam_update(g->isa, s, &x, g->wp);
    return 0;
}

const BackendOps backend_cpu = {
    .name = "cpu", .create = cpu_create, .destroy = cpu_destroy,
    .read_state = cpu_read_state, .write_state = cpu_write_state,
    .read_grads = cpu_read_grads, .write_grads = cpu_write_grads, .step = cpu_step, .grad_sq = cpu_grad_sq,
    .update = cpu_update,
};
