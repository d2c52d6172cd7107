/* cpu_backend: the CPU reference backends' shared state and ops; see cpu_backend.h. */
#include "cpu_backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_ops.h"

int cpu_backend_init(CpuBackend *b, const BackendOps *ops, const ModelConfig *c, int B, int T,
                     WorkPool *wp, const size_t *act_size, int n_acts, float **acts,
                     float **dacts, Err *e)
{
    size_t P = (size_t)model_param_count(c), N = (size_t)B * T, act_floats = 0;
    for (int i = 0; i < n_acts; i++)
        act_floats += act_size[i];
    b->base = (Backend){.ops = ops, .cfg = *c, .B = B, .T = T, .n_params = P,
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
    for (size_t i = 0, at = 0; i < (size_t)n_acts; at += act_size[i++])
        acts[i] = b->act_mem + at, dacts[i] = b->dact_mem + at;
    return 0;
}

void cpu_backend_release(CpuBackend *b)
{
    free(b->params), free(b->grads), free(b->m), free(b->v);
    free(b->act_mem), free(b->dact_mem), free(b->targets), free(b->inputs);
}

int cpu_backend_read_state(Backend *b, float *params, float *m, float *v, Err *e)
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

int cpu_backend_write_state(Backend *b, const float *params, const float *m, const float *v,
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

int cpu_backend_read_grads(Backend *b, float *grads, Err *e)
{
    (void)e;
    memcpy(grads, ((CpuBackend *)b)->grads, b->n_params * sizeof(float));
    return 0;
}

int cpu_backend_write_grads(Backend *b, const float *grads, Err *e)
{
    (void)e;
    memcpy(((CpuBackend *)b)->grads, grads, b->n_params * sizeof(float));
    return 0;
}

double cpu_backend_grad_sq(Backend *b, size_t begin, size_t end)
{
    CpuBackend *c = (CpuBackend *)b;
    return adam_sum_sq(c->grads + begin, DTYPE_FP32, end - begin, c->wp);
}

int cpu_backend_update(Backend *b, const AdamStep *s, size_t begin, size_t end, Err *e)
{
    (void)e;
    CpuBackend *c = (CpuBackend *)b;
    AdamSlice x = {.master = c->params + begin, .m = c->m + begin, .v = c->v + begin,
                   .grad = c->grads + begin, .grad_type = DTYPE_FP32, .n = end - begin};
    adam_update(c->isa, s, &x, c->wp);
    return 0;
}

int cpu_backend_step(CpuBackend *b, const CpuFamilyStep *f, const int *inputs,
                     const int *targets, bool do_backward, float *loss, Err *e)
{
    const Backend *be = &b->base;
    int N = be->B * be->T;
    int rc = backend_check_tokens(&be->cfg, N, inputs, targets, e);
    if (rc)
        return rc;
    f->forward(b, inputs);
    int n_targets = targets ? backend_count_targets(N, targets) : 0;
    if (targets) {
        crossentropy_forward_ref(f->losses, f->probs, targets, be->B, be->T, be->cfg.vocab);
        double sum = 0;
        for (int i = 0; i < N; i++)
            sum += f->losses[i];
        if (loss)
            *loss = n_targets ? (float)(sum / n_targets) : 0.0f;
    }
    if (do_backward) {
        if (!targets)
            return err_set(e, -EINVAL, "backward needs targets");
        f->backward(b, inputs, targets, n_targets ? be->loss_scale / (float)n_targets : 0.0f);
    }
    return 0;
}
