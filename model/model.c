/* model: presets, parameter counts, the families' defaults and checks; see model.h (loading:
 * model_load.c). */
#include "model.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

size_t dtype_bytes(DType t)
{
    return t == DTYPE_FP32 ? 4 : 2;
}

size_t grad_sum_bytes(size_t grad_bytes, bool first)
{
    return grad_bytes + (first ? 4 : 8);
}

const char *dtype_name(DType t)
{
    static const char *names[] = {"fp32", "bf16", "fp16"};
    return names[t];
}

int dtype_parse(const char *s, DType *out)
{
    static const struct { const char *name; DType t; } table[] = {
        {"fp32", DTYPE_FP32}, {"float32", DTYPE_FP32}, {"bf16", DTYPE_BF16},
        {"bfloat16", DTYPE_BF16}, {"fp16", DTYPE_FP16}, {"float16", DTYPE_FP16},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcasecmp(s, table[i].name))
            return *out = table[i].t, 0;
    return -EINVAL;
}

#define GPT(nm, L, h, a, V, S) \
    {.name = nm, .n_layer = L, .d_model = h, .n_head = a, .d_ff = 4 * (h), .vocab = V, \
     .max_seq = S, .tied = true, .dtype = DTYPE_BF16}

#define LLAMA(nm, L, h, a, g, f, V, S, tie, theta, eps, scaling) \
    {.name = nm, .arch = ARCH_LLAMA, .n_layer = L, .d_model = h, .n_head = a, .n_kv_head = g, \
     .d_ff = f, .vocab = V, .max_seq = S, .tied = tie, .rope_theta = theta, \
     .rope_scaling = scaling, .norm_eps = eps, .dtype = DTYPE_BF16}
#define QWEN2(nm, L, h, a, g, f, V, S, eps) \
    {.name = nm, .arch = ARCH_LLAMA, .n_layer = L, .d_model = h, .n_head = a, .n_kv_head = g, \
     .d_ff = f, .vocab = V, .max_seq = S, .tied = false, .qkv_bias = true, .rope_theta = 1e6, \
     .norm_eps = eps, .dtype = DTYPE_BF16}
#define NO_SCALING {0, 0, 0, 0}
#define LLAMA3_SCALING(f) {f, 1, 4, 8192}

/* GPT-2: Radford et al. 2019 and the released checkpoints (n_ctx 1024, vocab 50257).
 * GPT-3: Brown et al. 2020, table 2.1 (n_ctx 2048, the GPT-2 tokenizer). Two rows of that table are
 * inconsistent with d_head: XL lists 24 heads of 128 for d_model 2048 (we use 16 heads of 128) and
 * 13B lists d_model 5140 for 40 heads of 128 (we use 5120, as every reproduction does).
 * gpt-70b: the 70B shape used by the Fuyou paper's evaluation (80 layers, hidden 8192, 64 heads)
 * in GPT-3 form (4h MLP, vocab 50257, seq 2048): 64.9B parameters counted this way.
 * The Llama family, from each model's published config.json (hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
 * max_position_embeddings, tie_word_embeddings, rope_theta, rope_scaling, rms_norm_eps): Meta's
 * Llama 3.2 1B and 3B, Llama 3.1 8B, 70B and 405B; Qwen's Qwen2.5 7B and 72B (q/k/v biases);
 * Mistral Large 2 (Mistral-Large-Instruct-2407). Their parameter counts equal the published
 * ones exactly (tests/test_model.c). */
static const ModelConfig presets[] = {
    /* byte-level (vocab 256) and small enough to train visibly on two CPU cores in a minute */
    GPT("gpt2-tiny", 4, 128, 4, 256, 256),
    GPT("gpt2-124m", 12, 768, 12, 50257, 1024),
    GPT("gpt2-355m", 24, 1024, 16, 50257, 1024),
    GPT("gpt2-774m", 36, 1280, 20, 50257, 1024),
    GPT("gpt2-1.5b", 48, 1600, 25, 50257, 1024),
    GPT("gpt3-125m", 12, 768, 12, 50257, 2048),
    GPT("gpt3-350m", 24, 1024, 16, 50257, 2048),
    GPT("gpt3-760m", 24, 1536, 16, 50257, 2048),
    GPT("gpt3-1.3b", 24, 2048, 16, 50257, 2048),
    GPT("gpt3-2.7b", 32, 2560, 32, 50257, 2048),
    GPT("gpt3-6.7b", 32, 4096, 32, 50257, 2048),
    GPT("gpt3-13b", 40, 5120, 40, 50257, 2048),
    GPT("gpt3-175b", 96, 12288, 96, 50257, 2048),
    GPT("gpt-70b", 80, 8192, 64, 50257, 2048),
    /* small enough for the CPU suites: byte-level, 2 kv heads for 4 query heads */
    LLAMA("llama-tiny", 4, 128, 4, 2, 384, 256, 256, true, 10000, 1e-5, NO_SCALING),
    LLAMA("llama-3.2-1b", 16, 2048, 32, 8, 8192, 128256, 131072, true, 500000, 1e-5,
          LLAMA3_SCALING(32)),
    LLAMA("llama-3.2-3b", 28, 3072, 24, 8, 8192, 128256, 131072, true, 500000, 1e-5,
          LLAMA3_SCALING(32)),
    LLAMA("llama-3.1-8b", 32, 4096, 32, 8, 14336, 128256, 131072, false, 500000, 1e-5,
          LLAMA3_SCALING(8)),
    LLAMA("llama-3.1-70b", 80, 8192, 64, 8, 28672, 128256, 131072, false, 500000, 1e-5,
          LLAMA3_SCALING(8)),
    LLAMA("llama-3.1-405b", 126, 16384, 128, 8, 53248, 128256, 131072, false, 500000, 1e-5,
          LLAMA3_SCALING(8)),
    QWEN2("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, 131072, 1e-6),
    QWEN2("qwen2.5-72b", 80, 8192, 64, 8, 29568, 152064, 131072, 1e-6),
    LLAMA("mistral-large-2", 88, 12288, 96, 8, 28672, 32768, 131072, false, 1000000, 1e-5,
          NO_SCALING),
};

int model_preset_count(void)
{
    return (int)(sizeof presets / sizeof presets[0]);
}

const ModelConfig *model_preset_at(int i)
{
    return i >= 0 && i < model_preset_count() ? &presets[i] : NULL;
}

const ModelConfig *model_preset_find(const char *name)
{
    for (int i = 0; i < model_preset_count(); i++)
        if (!strcasecmp(presets[i].name, name))
            return &presets[i];
    return NULL;
}

int64_t model_head_dim(const ModelConfig *c)
{
    return c->d_model / c->n_head;
}

int model_kv_heads(const ModelConfig *c)
{
    return c->n_kv_head > 0 ? c->n_kv_head : c->n_head;
}

double model_rope_theta(const ModelConfig *c)
{
    return c->rope_theta > 0 ? c->rope_theta : 10000;
}

double model_norm_eps(const ModelConfig *c)
{
    return c->norm_eps > 0 ? c->norm_eps : 1e-5;
}

int64_t model_block_params(const ModelConfig *c)
{
    int64_t h = c->d_model, f = c->d_ff;
    if (c->arch == ARCH_LLAMA) {
        int64_t d = model_head_dim(c), qkv_out = (c->n_head + 2 * model_kv_heads(c)) * d;
        int64_t attn = qkv_out * h + (c->qkv_bias ? qkv_out : 0) + h * c->n_head * d;
        return 2 * h + attn + 3 * f * h; /* two RMSNorm gains; gate, up and down */
    }
    int64_t ln = 2 * h;                     /* gain and bias */
    int64_t qkv = 3 * h * h + 3 * h;
    int64_t proj = h * h + h;
    int64_t fc1 = f * h + f, fc2 = h * f + h;
    return 2 * ln + qkv + proj + fc1 + fc2;
}

int64_t model_embed_params(const ModelConfig *c)
{
    int64_t h = c->d_model;
    int64_t wte = (int64_t)c->vocab * h;
    if (c->arch == ARCH_LLAMA) /* no position embedding; the final RMSNorm's gain */
        return wte + h + (c->tied ? 0 : wte);
    int64_t wpe = (int64_t)c->max_seq * h;
    return wte + wpe + 2 * h + (c->tied ? 0 : wte);
}

int64_t model_padded_vocab(const ModelConfig *c)
{
    return ((int64_t)c->vocab + MODEL_VOCAB_ALIGN - 1) / MODEL_VOCAB_ALIGN * MODEL_VOCAB_ALIGN;
}

int64_t model_param_count(const ModelConfig *c)
{
    return c->n_layer * model_block_params(c) + model_embed_params(c);
}

static const int size_max[] = {MODEL_MAX_LAYERS, MODEL_MAX_HIDDEN, MODEL_MAX_HIDDEN,
                               MODEL_MAX_FFN, MODEL_MAX_VOCAB, MODEL_MAX_SEQ};

int model_validate(const ModelConfig *c, Err *e)
{
    const struct { const char *key; int v; } pos[] = {
        {"layers", c->n_layer}, {"hidden", c->d_model}, {"heads", c->n_head},
        {"ffn", c->d_ff}, {"vocab", c->vocab}, {"max_seq", c->max_seq},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0 || pos[i].v > size_max[i])
            return err_set(e, -EINVAL, "model %s: %s must be a positive integer of at most %d "
                           "(got %d)", c->name, pos[i].key, size_max[i], pos[i].v);
    if (c->d_model % c->n_head)
        return err_set(e, -EINVAL, "model %s: heads (%d) must divide hidden (%d)", c->name,
                       c->n_head, c->d_model);
    if (c->arch != ARCH_LLAMA && (c->n_kv_head || c->qkv_bias || c->rope_theta > 0 ||
                                  c->rope_scaling.factor > 0))
        return err_set(e, -EINVAL, "model %s: kv_heads, qkv_bias, rope_theta and rope_scaling "
                       "belong to arch = llama", c->name);
    int g = model_kv_heads(c);
    if (g < 1 || g > c->n_head || c->n_head % g)
        return err_set(e, -EINVAL, "model %s: kv_heads (%d) must divide heads (%d)", c->name, g,
                       c->n_head);
    if (c->arch == ARCH_LLAMA && model_head_dim(c) % 2)
        return err_set(e, -EINVAL, "model %s: the rotary embedding needs an even head size "
                       "(hidden %d / heads %d = %lld)", c->name, c->d_model, c->n_head,
                       (long long)model_head_dim(c));
    if (!(c->norm_eps >= 0 && c->norm_eps <= 1) || !(c->rope_theta >= 0 && c->rope_theta <= 1e12))
        return err_set(e, -EINVAL, "model %s: norm_eps must be in [0, 1] and rope_theta in "
                       "[0, 1e12]", c->name);
    /* GPT-2's layernorm adds 1e-5f (exec/cpu/gpt2_ops.c, exec/cuda/gpt2_kernels.cu): an
     * epsilon that rounds to another float would train another model than the one described */
    if (c->arch == ARCH_GPT2 && c->norm_eps > 0 && (float)c->norm_eps != 1e-5f)
        return err_set(e, -EINVAL, "model %s: norm_eps %g: fuyou's GPT-2 layernorm adds 1e-05 "
                       "(norm_eps is arch = llama's RMSNorm epsilon)", c->name, c->norm_eps);
    const RopeScaling *r = &c->rope_scaling;
    if (r->factor != 0 && !(r->factor >= 1 && r->factor <= 1e6 && r->low_freq_factor > 0 &&
                            r->high_freq_factor > r->low_freq_factor &&
                            r->original_max_seq >= 1))
        return err_set(e, -EINVAL, "model %s: rope scaling (llama3) needs factor >= 1, "
                       "0 < low_freq_factor < high_freq_factor and an original_max_seq",
                       c->name);
    return 0;
}
