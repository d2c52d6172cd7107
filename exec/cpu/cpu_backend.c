/* cpu_backend: the CPU reference backend, once for every block family; see cpu_backend.h
 * and cpu_family.h. */
#include "cpu_backend.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_family.h"
#include "gpt2_ops.h"

/* Fills b (zeroed but for fam and act_size) for c: the flat state, the activations and their
 * gradients carved in the family's order. 0 or -ENOMEM with e; release frees what it
 * allocated either way (not b itself). */
static int state_init(CpuBackend *b, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    size_t P = (size_t)model_param_count(c), N = (size_t)B * T, act_floats = 0;
    int n_acts = b->fam->n_acts;
    for (int i = 0; i < n_acts; i++)
        act_floats += b->act_size[i];
    b->base = (Backend){.ops = &backend_cpu, .cfg = *c, .B = B, .T = T, .n_params = P,
                        .loss_scale = 1.0f};
    b->wp = wp;
    b->isa = adam_isa_best();
    b->act_floats = act_floats;
    b->params = calloc(P, sizeof(float));
    b->grads = calloc(P, sizeof(float));
    b->m = calloc(P, sizeof(float));
    b->v = calloc(P, sizeof(float));
    b->act_mem = calloc(act_floats, sizeof(float));
    b->dact_mem = calloc(act_floats, sizeof(float));
    b->targets = calloc(N, sizeof(int));
    b->inputs = calloc(N, sizeof(int));
    if (!b->params || !b->grads || !b->m || !b->v || !b->act_mem || !b->dact_mem ||
        !b->targets || !b->inputs)
        return err_set(e, -ENOMEM, "out of memory for %s's parameters and activations",
                       c->name);
    for (size_t i = 0, at = 0; i < (size_t)n_acts; at += b->act_size[i++])
        b->acts[i] = b->act_mem + at, b->dacts[i] = b->dact_mem + at;
    return 0;
}

static void cpu_destroy(Backend *be)
{
    CpuBackend *b = (CpuBackend *)be;
    if (!b)
        return;
    if (b->fam->fini)
        b->fam->fini(b);
    free(b->params), free(b->grads), free(b->m), free(b->v);
    free(b->act_mem), free(b->dact_mem), free(b->targets), free(b->inputs);
    free(b);
}

static int cpu_create(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    *out = NULL;
    int rc = backend_check_shape(c, B, T, e);
    if (rc)
        return rc;
    const CpuFamily *f = c->arch == ARCH_LLAMA ? &cpu_llama : &cpu_gpt2;
    assert(f->n_acts <= CPU_MAX_ACTS && f->size >= sizeof(CpuBackend));
    CpuBackend *b = calloc(1, f->size);
    if (!b)
        return err_set(e, -ENOMEM, "out of memory");
    b->fam = f;
    f->act_sizes(c, B, T, b->act_size);
    rc = state_init(b, c, B, T, wp, e);
    if (!rc && f->init)
        rc = f->init(b, e);
    if (rc) {
        cpu_destroy(&b->base);
        return rc;
    }
    *out = &b->base;
    return 0;
}

static int read_state(Backend *b, float *params, float *m, float *v, Err *e)
{
    (void)e;
    const CpuBackend *c = (const CpuBackend *)b;
    size_t n = b->n_params * sizeof(float);
    if (params)
        memcpy(params, c->params, n);
    if (m)
        memcpy(m, c->m, n);
    if (v)
        memcpy(v, c->v, n);
    return 0;
}

static int write_state(Backend *b, const float *params, const float *m, const float *v,
                       Err *e)
{
    (void)e;
    CpuBackend *c = (CpuBackend *)b;
    size_t n = b->n_params * sizeof(float);
    if (params)
        memcpy(c->params, params, n);
    if (m)
        memcpy(c->m, m, n);
    if (v)
        memcpy(c->v, v, n);
    return 0;
}

static int read_grads(Backend *b, float *grads, Err *e)
{
    (void)e;
    memcpy(grads, ((CpuBackend *)b)->grads, b->n_params * sizeof(float));
    return 0;
}

static int write_grads(Backend *b, const float *grads, Err *e)
{
    (void)e;
    memcpy(((CpuBackend *)b)->grads, grads, b->n_params * sizeof(float));
    return 0;
}

static double grad_sq(Backend *b, size_t begin, size_t end)
{
    CpuBackend *c = (CpuBackend *)b;
    return adam_sum_sq(c->grads + begin, DTYPE_FP32, end - begin, c->wp);
}

static int update(Backend *b, const AdamStep *s, size_t begin, size_t end, Err *e)
{
    (void)e;
    CpuBackend *c = (CpuBackend *)b;
    AdamSlice x = {.master = c->params + begin, .m = c->m + begin, .v = c->v + begin,
                   .grad = c->grads + begin, .grad_type = DTYPE_FP32, .n = end - begin};
    adam_update(c->isa, s, &x, c->wp);
    return 0;
}

/* The micro-batch's tokens forward: the embedding, the blocks, the final norm, the head's
 * logits and their softmax. */
static void forward(CpuBackend *b, const int *inputs)
{
    const CpuFamily *f = b->fam;
    const ModelConfig *c = &b->base.cfg;
    int B = b->base.B, T = b->base.T, C = c->d_model, V = c->vocab, N = B * T;
    f->embed_forward(b, inputs);
    for (int l = 0; l < c->n_layer; l++)
        f->block_forward(b, l);
    f->norm_forward(b, cpu_block_in(b, b->acts, c->n_layer));
    matmul_forward_ref(b->acts[f->logits], b->acts[f->normf], f->lm_head(c, b->params), NULL, N,
                       C, V, b->wp);
    softmax_forward_ref(b->acts[f->probs], b->acts[f->logits], B, T, V);
}

/* The gradients, from zero, of dloss times each counted target's loss: the head's first (with
 * a tied matrix the head's gradient comes before the embedding's), then the final norm's, the
 * blocks' last to first, the embedding's. */
static void backward(CpuBackend *b, const int *inputs, const int *targets, float dloss)
{
    const CpuFamily *f = b->fam;
    const ModelConfig *c = &b->base.cfg;
    int B = b->base.B, T = b->base.T, C = c->d_model, L = c->n_layer, V = c->vocab, N = B * T;
    memset(b->grads, 0, b->base.n_params * sizeof(float));
    memset(b->dact_mem, 0, b->act_floats * sizeof(float));
    float *dlosses = b->dacts[f->losses];
    for (int i = 0; i < N; i++)
        dlosses[i] = dloss;
    crossentropy_softmax_backward_ref(b->dacts[f->logits], dlosses, b->acts[f->probs], targets,
                                      B, T, V);
    matmul_backward_ref(b->dacts[f->normf], f->lm_head(c, b->grads), NULL, b->dacts[f->logits],
                        b->acts[f->normf], f->lm_head(c, b->params), N, C, V, b->wp);
    f->norm_backward(b, cpu_block_in(b, b->dacts, L), cpu_block_in(b, b->acts, L));
    for (int l = L - 1; l >= 0; l--)
        f->block_backward(b, l);
    f->embed_backward(b, inputs);
}

/* The tokens checked, forward, with targets the losses and their mean over the counted targets
 * (summed in double in token order; 0 when every target is DATA_IGNORE) into *loss, with
 * backward the gradients of loss_scale times that mean. */
static int step(Backend *be, const int *inputs, const int *targets, bool do_backward,
                float *loss, Err *e)
{
    CpuBackend *b = (CpuBackend *)be;
    const CpuFamily *f = b->fam;
    int N = be->B * be->T;
    int rc = backend_check_tokens(&be->cfg, N, inputs, targets, e);
    if (rc)
        return rc;
    forward(b, inputs);
    int n_targets = targets ? backend_count_targets(N, targets) : 0;
    float *losses = b->acts[f->losses];
    if (targets) {
        crossentropy_forward_ref(losses, b->acts[f->probs], targets, be->B, be->T,
                                 be->cfg.vocab);
        double sum = 0;
        for (int i = 0; i < N; i++)
            sum += losses[i];
        if (loss)
            *loss = n_targets ? (float)(sum / n_targets) : 0.0f;
    }
    if (do_backward) {
        if (!targets)
            return err_set(e, -EINVAL, "backward needs targets");
        backward(b, inputs, targets, n_targets ? be->loss_scale / (float)n_targets : 0.0f);
    }
    return 0;
}

const BackendOps backend_cpu = {
    .name = "cpu", .create = cpu_create, .destroy = cpu_destroy,
    .read_state = read_state, .write_state = write_state,
    .read_grads = read_grads, .write_grads = write_grads,
    .step = step, .grad_sq = grad_sq, .update = update,
};
