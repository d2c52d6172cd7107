/* cuda_backend: the CUDA training backend; see cuda_backend.h. A step: the batch up on h2d,
 * then on the compute stream the embedding, every block's forward ops, the final norm and the
 * head (fused with its backward when there is one), every block's backward ops last to first
 * and the embedding's, all gpu_block.h calls with gradients GPU_GRADS_F32 (fp32, += into the
 * one flat gradient buffer); the losses down on d2h. Every layer keeps its block tensors in
 * the lane's layout (arch.h's lane_tensor_bytes), a block's input the previous block's output. */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"

extern "C" {
#include "cuda_backend.h"
#include "gpt2_kernels.h"
#include "gpu_block.h"
}

typedef act16_t a16;

struct CudaBackend {
    Backend base;
    const BlockArch *arch;
    GpuBlock *blk;
    cudaStream_t compute, h2d, d2h; /* one stream per role */
    cudaEvent_t computed, uploaded; /* compute's work so far done; the batch on the device */
    float *master, *grads, *m, *v;  /* (P) fp32 */
    a16 *params;                    /* (P) 16-bit, what the kernels read */
    void *act_mem;                  /* the embedding's output, then every block's tensors */
    a16 **tensors;                  /* (L, ARCH_MAX_TENSORS): block l's tensors by name */
    double *sq_scratch;             /* one double: gk_sum_sq's accumulator */
    float *losses_host;
    int n_targets;                  /* of the step's targets, those the loss counts */
};

/* The bytes of one layer's own tensors (all but its input, the previous one's output). */
static size_t layer_bytes(const CudaBackend *g, size_t off[ARCH_MAX_TENSORS])
{
    const ModelConfig *c = &g->base.cfg;
    int64_t bytes[ARCH_MAX_TENSORS];
    g->arch->lane_tensor_bytes(c, g->base.B, g->base.T, (int64_t)dtype_bytes(c->dtype), bytes);
    size_t n = 0;
    for (int x = 0; x < g->arch->n_ops; x++) {
        off[x] = n;
        n += (size_t)lane_round(bytes[x]);
    }
    return n;
}

static size_t embed_out_bytes(const CudaBackend *g)
{
    const Backend *b = &g->base;
    return (size_t)lane_round((int64_t)b->B * b->T * b->cfg.d_model * 2);
}

static a16 *const *layer(const CudaBackend *g, int l)
{
    return g->tensors + (size_t)l * ARCH_MAX_TENSORS;
}

/* Points each layer's tensors into act_mem: the embedding's output first, then the layers. */
static void place_tensors(CudaBackend *g)
{
    size_t off[ARCH_MAX_TENSORS], per = layer_bytes(g, off);
    char *p = (char *)g->act_mem;
    a16 *input = (a16 *)p;
    p += embed_out_bytes(g);
    for (int l = 0; l < g->base.cfg.n_layer; l++, p += per) {
        a16 **t = g->tensors + (size_t)l * ARCH_MAX_TENSORS;
        for (int x = 0; x < g->arch->n_ops; x++)
            t[x] = (a16 *)(p + off[x]);
        t[g->arch->input] = input;
        input = t[g->arch->output];
    }
}

/* The last block's output: the final norm's input. */
static a16 *model_output(const CudaBackend *g)
{
    int L = g->base.cfg.n_layer;
    return L ? layer(g, L - 1)[g->arch->output] : (a16 *)g->act_mem;
}

static void cuda_destroy(Backend *b)
{
    CudaBackend *g = (CudaBackend *)b;
    if (!g)
        return;
    gpu_block_destroy(g->blk);
    gk_free(g->master), gk_free(g->grads), gk_free(g->m), gk_free(g->v), gk_free(g->params);
    gk_free(g->act_mem), gk_free(g->sq_scratch);
    cudaStream_t st[] = {g->compute, g->h2d, g->d2h};
    for (int i = 0; i < 3; i++)
        if (st[i])
            cudaStreamDestroy(st[i]);
    if (g->computed)
        cudaEventDestroy(g->computed);
    if (g->uploaded)
        cudaEventDestroy(g->uploaded);
    free(g->tensors);
    free(g->losses_host);
    free(g);
}

/* Whether the model, its states and one step's tensors fit the GPU's free memory. */
static int check_room(const CudaBackend *g, size_t act, Err *e)
{
    const Backend *b = &g->base;
    size_t need = act + gpu_block_own_bytes(&b->cfg, b->B, b->T) + b->n_params * (4 * 4 + 2);
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    if (need <= free_b)
        return 0;
    return err_set(e, -ENOMEM, "%s at batch %d x %d needs %.1f GiB on the GPU, %.1f GiB are "
                   "free; lower --batch or --seq, or train out of core (--offload)",
                   b->cfg.name, b->B, b->T, need / 1073741824.0, free_b / 1073741824.0);
}

static int check_model(const ModelConfig *c, int B, int T, Err *e)
{
    int rc = backend_check_shape(c, B, T, e);
    if (rc)
        return rc;
    if (c->dtype != DTYPE_BF16 && c->dtype != DTYPE_FP16)
        return err_set(e, -EINVAL, "the cuda backend keeps weights and activations in bf16 or "
                       "fp16, not %s: use --dtype bf16 or fp16 (or --backend cpu, the fp32 "
                       "reference)", dtype_name(c->dtype));
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
        return err_set(e, -ENODEV, "no CUDA device: use --backend cpu");
    return 0;
}

static int cuda_create(Backend **out, const ModelConfig *c, int B, int T, WorkPool *wp, Err *e)
{
    (void)wp;
    *out = NULL;
    int rc = check_model(c, B, T, e);
    if (rc)
        return rc;
    CudaBackend *g = (CudaBackend *)calloc(1, sizeof *g);
    if (!g)
        return err_set(e, -ENOMEM, "out of memory");
    size_t P = (size_t)model_param_count(c);
    g->base = (Backend){.ops = &backend_cuda, .cfg = *c, .B = B, .T = T, .n_params = P,
                        .loss_scale = 1.0f};
    g->arch = model_arch(c);
    size_t off[ARCH_MAX_TENSORS];
    size_t act = embed_out_bytes(g) + (size_t)c->n_layer * layer_bytes(g, off);
    g->tensors = (a16 **)calloc((size_t)(c->n_layer ? c->n_layer : 1) * ARCH_MAX_TENSORS,
                                sizeof *g->tensors);
    g->losses_host = (float *)malloc((size_t)B * T * sizeof(float));
    rc = !g->tensors || !g->losses_host ? err_set(e, -ENOMEM, "out of memory")
                                        : check_room(g, act, e);
    if (rc) {
        cuda_destroy(&g->base);
        return rc;
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->h2d, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->d2h, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&g->computed, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g->uploaded, cudaEventDisableTiming));
    rc = gpu_block_create(&g->blk, c, B, T, GPU_GRADS_F32, (cudaStream_t_c)g->compute, e);
    if (rc) {
        cuda_destroy(&g->base);
        return rc;
    }
    gpu_block_whole_forwards(g->blk);
    g->master = (float *)gk_alloc(P * 4);
    g->grads = (float *)gk_alloc(P * 4);
    g->m = (float *)gk_alloc(P * 4);
    g->v = (float *)gk_alloc(P * 4);
    g->params = (a16 *)gk_alloc(P * 2);
    g->act_mem = gk_alloc(act);
    g->sq_scratch = (double *)gk_alloc(sizeof(double));
    gk_memset(g->master, 0, P * 4), gk_memset(g->m, 0, P * 4), gk_memset(g->v, 0, P * 4);
    gk_memset(g->params, 0, P * 2);
    place_tensors(g);
    *out = &g->base;
    return 0;
}

static GkType gk_type(const CudaBackend *g)
{
    return g->base.cfg.dtype == DTYPE_FP16 ? GK_FP16 : GK_BF16;
}

static int cuda_read_state(Backend *b, float *params, float *m, float *v, Err *e)
{
    (void)e;
    CudaBackend *g = (CudaBackend *)b;
    size_t n = b->n_params * 4;
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    if (params)
        gk_download(params, g->master, n);
    if (m)
        gk_download(m, g->m, n);
    if (v)
        gk_download(v, g->v, n);
    return 0;
}

static int cuda_write_state(Backend *b, const float *params, const float *m, const float *v,
                            Err *e)
{
    (void)e;
    CudaBackend *g = (CudaBackend *)b;
    size_t n = b->n_params * 4;
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    if (params) {
        gk_upload(g->master, params, n);
        gk_from_f32(g->params, g->master, b->n_params, gk_type(g),
                    (cudaStream_t_c)g->compute);
    }
    if (m)
        gk_upload(g->m, m, n);
    if (v)
        gk_upload(g->v, v, n);
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    return 0;
}

static int cuda_read_grads(Backend *b, float *grads, Err *e)
{
    (void)e;
    CudaBackend *g = (CudaBackend *)b;
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    gk_download(grads, g->grads, b->n_params * 4);
    return 0;
}

static int cuda_write_grads(Backend *b, const float *grads, Err *e)
{
    (void)e;
    CudaBackend *g = (CudaBackend *)b;
    CUDA_CHECK(cudaStreamSynchronize(g->compute));
    gk_upload(g->grads, grads, b->n_params * 4);
    return 0;
}

/* Block l's parameters, in 16 bits and as fp32 gradients. */
static const a16 *block_weights(const CudaBackend *g, int l)
{
    const ModelConfig *c = &g->base.cfg;
    return g->params + model_embed_params(c) + (size_t)l * model_block_params(c);
}

static float *block_grads(const CudaBackend *g, int l)
{
    const ModelConfig *c = &g->base.cfg;
    return g->grads + model_embed_params(c) + (size_t)l * model_block_params(c);
}

/* Forward, and the head's backward fused with it (the gradients zeroed first). */
static void forward(CudaBackend *g, bool backward)
{
    const ModelConfig *c = &g->base.cfg;
    if (backward)
        CUDA_CHECK(cudaMemsetAsync(g->grads, 0, g->base.n_params * 4, g->compute));
    gpu_embed_forward(g->blk, g->params, (a16 *)g->act_mem);
    for (int l = 0; l < c->n_layer; l++)
        for (int op = 0; op < g->arch->n_ops; op++)
            gpu_block_forward(g->blk, op, block_weights(g, l), layer(g, l));
    gpu_norm_forward(g->blk, g->params, model_output(g));
    gpu_head(g->blk, g->params, g->grads, g->base.loss_scale, g->n_targets, backward);
}

static void backward(CudaBackend *g)
{
    const ModelConfig *c = &g->base.cfg;
    gpu_norm_backward(g->blk, g->params, model_output(g), g->grads);
    for (int l = c->n_layer - 1; l >= 0; l--) {
        bool first = true;
        for (int op = g->arch->n_ops - 1; op >= 0; op--) {
            if (!arch_op_has_backward(g->arch, op))
                continue;
            gpu_block_backward(g->blk, op, block_weights(g, l), layer(g, l), block_grads(g, l),
                               first);
            first = false;
        }
    }
    gpu_embed_backward(g->blk, g->grads);
}

static int cuda_step(Backend *b, const int *inputs, const int *targets, bool do_backward,
                     float *loss, Err *e)
{
    CudaBackend *g = (CudaBackend *)b;
    int N = b->B * b->T;
    int rc = backend_check_tokens(&b->cfg, N, inputs, targets, e);
    if (rc)
        return rc;
    if (do_backward && !targets)
        return err_set(e, -EINVAL, "backward needs targets");
    g->n_targets = targets ? backend_count_targets(N, targets) : N;
    /* The batch goes up on the h2d stream, the losses come down on d2h; compute waits for the
     * upload, the download for compute. The previous step's work on these buffers is over:
     * every step ends by waiting for its download, which waits for all of compute. */
    int *tokens = gpu_block_tokens(g->blk);
    CUDA_CHECK(cudaMemcpyAsync(tokens, inputs, (size_t)N * sizeof(int), cudaMemcpyHostToDevice,
                               g->h2d));
    if (targets)
        CUDA_CHECK(cudaMemcpyAsync(tokens + N, targets, (size_t)N * sizeof(int),
                                   cudaMemcpyHostToDevice, g->h2d));
    else
        CUDA_CHECK(cudaMemsetAsync(tokens + N, 0, (size_t)N * sizeof(int), g->h2d));
    CUDA_CHECK(cudaEventRecord(g->uploaded, g->h2d));
    CUDA_CHECK(cudaStreamWaitEvent(g->compute, g->uploaded, 0));
    forward(g, do_backward);
    if (do_backward)
        backward(g);
    CUDA_CHECK(cudaEventRecord(g->computed, g->compute));
    CUDA_CHECK(cudaStreamWaitEvent(g->d2h, g->computed, 0));
    CUDA_CHECK(cudaMemcpyAsync(g->losses_host, gpu_block_losses(g->blk), (size_t)N * 4,
                               cudaMemcpyDeviceToHost, g->d2h));
    CUDA_CHECK(cudaStreamSynchronize(g->d2h));
    if (targets && loss) {
        double sum = 0;
        for (int i = 0; i < N; i++)
            sum += g->losses_host[i];
        *loss = g->n_targets ? (float)(sum / g->n_targets) : 0.0f;
    }
    return 0;
}

static double cuda_grad_sq(Backend *b, size_t begin, size_t end)
{
    CudaBackend *g = (CudaBackend *)b;
    return gk_sum_sq(g->grads + begin, end - begin, g->sq_scratch, (cudaStream_t_c)g->compute);
}

static int cuda_update(Backend *b, const AdamStep *s, size_t begin, size_t end, Err *e)
{
    (void)e;
    CudaBackend *g = (CudaBackend *)b;
    gk_adamw(g->master + begin, g->m + begin, g->v + begin, g->grads + begin,
             g->params + begin, end - begin, s->beta1, s->one_minus_beta1, s->beta2,
             s->one_minus_beta2, s->eps, s->decay, s->neg_step_size, s->inv_sqrt_bc2,
             s->grad_scale, gk_type(g), (cudaStream_t_c)g->compute);
    return 0;
}

extern "C" const BackendOps backend_cuda = {
    "cuda", cuda_create, cuda_destroy, cuda_read_state, cuda_write_state, cuda_read_grads,
    cuda_write_grads, cuda_step, cuda_grad_sq, cuda_update,
};
