/* layout: the flat parameter layout of each family and its Hugging Face names; see layout.h. */
#include "layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

static void add(ModelLayout *l, const char *name, int rows, int cols, bool conv1d)
{
    ParamTensor *t = &l->t[l->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows;
    t->cols = cols;
    t->numel = (size_t)rows * cols;
    t->offset = l->total;
    t->conv1d = conv1d;
    l->total += t->numel;
}

/* A block's tensors: its Hugging Face name after the block's prefix, and its shape. */
typedef struct BlockTensor {
    const char *name;
    int rows, cols;
} BlockTensor;

static void add_block(ModelLayout *l, const char *prefix, int b, const BlockTensor *t, int n,
                      bool conv1d)
{
    for (int k = 0; k < n; k++) {
        char name[LAYOUT_NAME_MAX];
        snprintf(name, sizeof name, "%s%d.%s", prefix, b, t[k].name);
        add(l, name, t[k].rows, t[k].cols, conv1d && t[k].rows > 1);
    }
}

enum { GPT2_BLOCK_TENSORS = 12, LLAMA_BLOCK_TENSORS = 12 /* with Qwen2's three biases */ };

static void gpt2_tensors(ModelLayout *l, const ModelConfig *c)
{
    int C = c->d_model, F = c->d_ff;
    add(l, "transformer.wte.weight", c->vocab, C, false);
    add(l, "transformer.wpe.weight", c->max_seq, C, false);
    add(l, "transformer.ln_f.weight", 1, C, false);
    add(l, "transformer.ln_f.bias", 1, C, false);
    if (!c->tied)
        add(l, "lm_head.weight", c->vocab, C, false);
    const BlockTensor t[GPT2_BLOCK_TENSORS] = {
        {"ln_1.weight", 1, C},        {"ln_1.bias", 1, C},
        {"attn.c_attn.weight", 3 * C, C}, {"attn.c_attn.bias", 1, 3 * C},
        {"attn.c_proj.weight", C, C}, {"attn.c_proj.bias", 1, C},
        {"ln_2.weight", 1, C},        {"ln_2.bias", 1, C},
        {"mlp.c_fc.weight", F, C},    {"mlp.c_fc.bias", 1, F},
        {"mlp.c_proj.weight", C, F},  {"mlp.c_proj.bias", 1, C}};
    for (int b = 0; b < c->n_layer; b++)
        add_block(l, "transformer.h.", b, t, GPT2_BLOCK_TENSORS, true);
}

static void llama_tensors(ModelLayout *l, const ModelConfig *c)
{
    int C = c->d_model, F = c->d_ff, d = (int)model_head_dim(c);
    int q = c->n_head * d, kv = model_kv_heads(c) * d;
    add(l, "model.embed_tokens.weight", c->vocab, C, false);
    add(l, "model.norm.weight", 1, C, false);
    if (!c->tied)
        add(l, "lm_head.weight", c->vocab, C, false);
    /* q, k and v stacked, their biases stacked after them: the fused qkv GEMM's weight and
     * bias, each one contiguous run (llama_arch.h) */
    const BlockTensor attn[] = {
        {"input_layernorm.weight", 1, C},  {"self_attn.q_proj.weight", q, C},
        {"self_attn.k_proj.weight", kv, C}, {"self_attn.v_proj.weight", kv, C},
        {"self_attn.q_proj.bias", 1, q},   {"self_attn.k_proj.bias", 1, kv},
        {"self_attn.v_proj.bias", 1, kv}};
    const BlockTensor rest[] = {
        {"self_attn.o_proj.weight", C, q}, {"post_attention_layernorm.weight", 1, C},
        {"mlp.gate_proj.weight", F, C},    {"mlp.up_proj.weight", F, C},
        {"mlp.down_proj.weight", C, F}};
    for (int b = 0; b < c->n_layer; b++) {
        add_block(l, "model.layers.", b, attn, c->qkv_bias ? 7 : 4, false);
        add_block(l, "model.layers.", b, rest, 5, false);
    }
}

int layout_init(ModelLayout *l, const ModelConfig *c)
{
    memset(l, 0, sizeof *l);
    int per_block = c->arch == ARCH_LLAMA ? LLAMA_BLOCK_TENSORS : GPT2_BLOCK_TENSORS;
    l->t = calloc((size_t)(5 + per_block * c->n_layer), sizeof *l->t);
    if (!l->t)
        return -ENOMEM;
    if (c->arch == ARCH_LLAMA)
        llama_tensors(l, c);
    else
        gpt2_tensors(l, c);
    return 0;
}

void layout_free(ModelLayout *l)
{
    free(l->t);
    l->t = NULL;
    l->n = 0;
}

const ParamTensor *layout_find(const ModelLayout *l, const char *name)
{
    static const char prefix[] = "transformer.";
    for (int i = 0; i < l->n; i++) {
        const char *n = l->t[i].name;
        if (!strcmp(n, name) ||
            (!strncmp(n, prefix, sizeof prefix - 1) && !strcmp(n + sizeof prefix - 1, name)))
            return &l->t[i];
    }
    return NULL;
}

void layout_subgroup_slice(const ModelConfig *c, const Plan *p, int g, size_t *begin,
                           size_t *end)
{
    size_t edge = (size_t)model_embed_params(c), block = (size_t)model_block_params(c);
    int first, count;
    plan_subgroup_blocks(p, g, &first, &count);
    *begin = g == plan_subgroup_count(p) - 1 ? 0 : edge + (size_t)first * block;
    *end = edge + (size_t)(first + count) * block;
}

size_t layout_gpu_state_params(const ModelConfig *c, const Plan *p)
{
    int n = plan_gpu_groups(p);
    if (n <= 0)
        return 0;
    size_t begin, end;
    layout_subgroup_slice(c, p, plan_subgroup_count(p) - n, &begin, &end);
    return end;
}

size_t layout_stream_end_params(const ModelConfig *c, const Plan *p)
{
    if (p->optim_stream_groups <= 0)
        return layout_gpu_state_params(c, p);
    size_t begin, end;
    int G = plan_subgroup_count(p);
    layout_subgroup_slice(c, p, G - p->optim_gpu_groups - p->optim_stream_groups, &begin, &end);
    return end;
}
