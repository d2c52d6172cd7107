/* gpt2_cpu: the fp32 CPU reference backend (backend_cpu): GPT-2 forward and backward with the
 * ops of gpt2_ops.h, and AdamW with exec/optim/adam. Activations and their gradients are carved
 * from one allocation by a size table. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "gpt2_block.h"
#include "gpt2_cpu.h"
#include "gpt2_layout.h"
#include "gpt2_ops.h"
#include "llama_cpu.h"
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
    CpuBackend cb;
    Acts acts, dacts;
    size_t act_size[A_COUNT];
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

static void cpu_destroy(Backend *b)
{
    Gpt2Cpu *g = (Gpt2Cpu *)b;
    if (!g)
        return;
    cpu_backend_release(&g->cb);
    free(g);
}

static int cpu_create(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    *out = NULL;
    if (c->arch == ARCH_LLAMA)
        return llama_cpu_create(out, c, B, T, wp, e);
    int rc = backend_check_shape(c, B, T, e);
    if (rc)
        return rc;
    Gpt2Cpu *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(e, -ENOMEM, "out of memory");
    act_sizes(c, B, T, g->act_size);
    rc = cpu_backend_init(&g->cb, &backend_cpu, c, B, T, wp, g->act_size, A_COUNT, g->acts.p,
                          g->dacts.p, e);
    if (rc) {
        cpu_destroy(&g->cb.base);
        return rc;
    }
    *out = &g->cb.base;
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
    int L = g->cb.base.cfg.n_layer;
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

static void forward(CpuBackend *cb, const int *inputs)
{
    Gpt2Cpu *g = (Gpt2Cpu *)cb;
    const ModelConfig *c = &g->cb.base.cfg;
    int B = g->cb.base.B, T = g->cb.base.T, C = c->d_model, L = c->n_layer, V = c->vocab, N = B * T;
    Acts *a = &g->acts;
    Gpt2Dims d;
    gpt2_dims(&d, c, B, T);
    Gpt2EdgeView ev;
    gpt2_view_edges(c, g->cb.params, &ev);
    encoder_forward_ref(a->p[A_ENCODED], inputs, ev.wte, ev.wpe, B, T, C);
    float *residual = a->p[A_ENCODED];
    for (int l = 0; l < L; l++) {
        Gpt2BlockView w;
        gpt2_view_block(c, g->cb.params, l, &w);
        Gpt2BlockActs x;
        block_acts(g, a, l, &x);
        for (int op = 0; op < GPT2_OPS; op++)
            gpt2_block_forward_op(op, &d, &w, &x, g->cb.wp);
        residual = x.out;
    }
    layernorm_forward_ref(a->p[A_LNF], a->p[A_LNF_MEAN], a->p[A_LNF_RSTD], residual, ev.lnfw,
                          ev.lnfb, N, C);
    matmul_forward_ref(a->p[A_LOGITS], a->p[A_LNF], ev.lm_head, NULL, N, C, V, g->cb.wp);
    softmax_forward_ref(a->p[A_PROBS], a->p[A_LOGITS], B, T, V);
}

static void backward(CpuBackend *cb, const int *inputs, const int *targets, float dloss)
{
    Gpt2Cpu *g = (Gpt2Cpu *)cb;
    const ModelConfig *c = &g->cb.base.cfg;
    int B = g->cb.base.B, T = g->cb.base.T, C = c->d_model, L = c->n_layer, V = c->vocab, N = B * T;
    const size_t *s = g->act_size;
    Acts *a = &g->acts, *d = &g->dacts;
    Gpt2Dims dims;
    gpt2_dims(&dims, c, B, T);
    memset(g->cb.grads, 0, g->cb.base.n_params * sizeof(float));
    memset(g->cb.dact_mem, 0, g->cb.act_floats * sizeof(float));
    Gpt2EdgeView ev, dev;
    gpt2_view_edges(c, g->cb.params, &ev);
    gpt2_view_edges(c, g->cb.grads, &dev);
    float *dlosses = d->p[A_LOSSES];
    for (int i = 0; i < N; i++)
        dlosses[i] = dloss;
    crossentropy_softmax_backward_ref(d->p[A_LOGITS], dlosses, a->p[A_PROBS], targets, B, T, V);
    matmul_backward_ref(d->p[A_LNF], dev.lm_head, NULL, d->p[A_LOGITS], a->p[A_LNF], ev.lm_head,
                        N, C, V, g->cb.wp);
    float *residual = L > 0 ? lay(a, s, A_RESIDUAL3, L - 1, L) : a->p[A_ENCODED];
    float *dresidual = L > 0 ? lay(d, s, A_RESIDUAL3, L - 1, L) : d->p[A_ENCODED];
    layernorm_backward_ref(dresidual, dev.lnfw, dev.lnfb, d->p[A_LNF], residual, ev.lnfw,
                           a->p[A_LNF_MEAN], a->p[A_LNF_RSTD], N, C);
    for (int l = L - 1; l >= 0; l--) {
        Gpt2BlockView w, dw;
        gpt2_view_block(c, g->cb.params, l, &w);
        gpt2_view_block(c, g->cb.grads, l, &dw);
        Gpt2BlockActs x, dx;
        block_acts(g, a, l, &x);
        block_acts(g, d, l, &dx);
        Gpt2BlockGrads gr = {.din = dx.in, .ln1 = dx.ln1, .qkv = dx.qkv, .atty = dx.atty,
                             .preatt = dx.preatt, .att = dx.att, .attproj = dx.attproj,
                             .res1 = dx.res1, .ln2 = dx.ln2, .fch = dx.fch,
                             .fch_gelu = dx.fch_gelu, .fcproj = dx.fcproj, .dout = dx.out};
        for (int op = GPT2_OPS - 1; op >= 0; op--)
            if (gpt2_block_op_has_backward(op))
                gpt2_block_backward_op(op, &dims, &w, &dw, &x, &gr, g->cb.wp);
    }
    encoder_backward_ref(dev.wte, dev.wpe, d->p[A_ENCODED], inputs, B, T, C);
}

static int cpu_step(Backend *b, const int *inputs, const int *targets, bool do_backward,
                    float *loss, Err *e)
{
    Gpt2Cpu *g = (Gpt2Cpu *)b;
    const CpuFamilyStep f = {forward, backward, g->acts.p[A_PROBS],
                             g->acts.p[A_LOSSES]};
    return cpu_backend_step(&g->cb, &f, inputs, targets, do_backward, loss, e);
}

const BackendOps backend_cpu = {
    .name = "cpu", .create = cpu_create, .destroy = cpu_destroy,
    .read_state = cpu_backend_read_state, .write_state = cpu_backend_write_state,
    .read_grads = cpu_backend_read_grads, .write_grads = cpu_backend_write_grads,
    .step = cpu_step, .grad_sq = cpu_backend_grad_sq, .update = cpu_backend_update,
};
