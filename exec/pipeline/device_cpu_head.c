/* device_cpu_head: what every family's CPU device shares (device_cpu.h): the residual
 * gradients and the LM head, with its buffers. */
#include <assert.h>
#include <string.h>

#include "backend.h"
#include "device_cpu.h"
#include "gpt2_ops.h"
#include "graph.h"

float *cpu_device_carve_shared(CpuDeviceHead *h, float *p)
{
    const ModelConfig *c = &h->cfg;
    const float *start = p;
    int N = h->B * h->T, chunk = (int)graph_head_chunk(N);
    size_t NC = (size_t)N * c->d_model, chunk_V = (size_t)chunk * c->vocab;
    h->block_params = (size_t)model_block_params(c);
    h->lm = (CpuHead){.C = c->d_model, .V = c->vocab, .N = N, .wp = h->wp};
#define CARVE(dst, n) (dst = p, p += (n))
    CARVE(h->dres[0], NC);
    CARVE(h->dres[1], NC);
    CARVE(h->lm.x, NC);
    CARVE(h->lm.dx, NC);
    CARVE(h->lm.logits, chunk_V);
    CARVE(h->lm.probs, chunk_V);
    CARVE(h->lm.losses, (size_t)N);
    CARVE(h->lm.dlosses, (size_t)chunk);
#undef CARVE
    assert(p - start == graph_cpu_head_floats(c, h->B, h->T));
    return p;
}

void cpu_device_block_grads(const CpuDeviceHead *h, const ComputeCall *c, float **dout,
                            float **din)
{
    int b = c->task->layer;
    *dout = h->dres[b % 2];
    *din = h->dres[(b + 1) % 2];
    if (!c->first_bwd)
        return;
    memset(h->act_grads, 0, h->act_grad_floats * sizeof(float));
    memset(*din, 0, (size_t)h->lm.N * h->lm.C * sizeof(float));
    memset(c->dw, 0, h->block_params * sizeof(float));
}

static void head_chunk(const CpuHead *h, const ComputeCall *c, const float *lm_head,
                       float *dlm_head, int r, int n)
{
    int C = h->C, V = h->V;
    const float *x = h->x + (size_t)r * C;
    float *dx = h->dx + (size_t)r * C;
    const int *targets = c->targets + r;
    matmul_forward_ref(h->logits, x, lm_head, NULL, n, C, V, h->wp);
    softmax_forward_ref(h->probs, h->logits, 1, n, V);
    crossentropy_forward_ref(h->losses + r, h->probs, targets, 1, n, V);
    if (c->no_grad)
        return;
    /* the softmax is all the rest needs of the logits: their buffer takes their gradient, which
     * the backward adds into */
    memset(h->logits, 0, (size_t)n * V * sizeof(float));
    crossentropy_softmax_backward_ref(h->logits, h->dlosses, h->probs, targets, 1, n, V);
    memset(dx, 0, (size_t)n * C * sizeof(float));
    matmul_backward_ref(dx, dlm_head, NULL, h->logits, x, lm_head, n, C, V, h->wp);
}

void cpu_device_head(CpuDeviceHead *h, const ComputeCall *c, const float *lm_head,
                     float *dlm_head, size_t edge_params)
{
    const CpuHead *lm = &h->lm;
    int N = lm->N, chunk = (int)graph_head_chunk(N);
    assert(c->dw);
    if (!c->no_grad)
        memset(c->dw, 0, edge_params * sizeof(float));
    h->n_targets = backend_count_targets(N, c->targets);
    float dloss = h->n_targets ? c->grad_scale / (float)h->n_targets : 0.0f;
    for (int i = 0; i < chunk; i++)
        lm->dlosses[i] = dloss;
    for (int r = 0; r < N; r += chunk)
        head_chunk(lm, c, lm_head, dlm_head, r, N - r < chunk ? N - r : chunk);
}
