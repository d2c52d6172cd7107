/* gpt2_layout: the flat parameter layout and its Hugging Face names; see gpt2_layout.h. */
#include "gpt2_layout.h"

#include "plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(Gpt2Layout *l, const char *name, int rows, int cols, bool conv1d)
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

int gpt2_layout_init(Gpt2Layout *l, const ModelConfig *c)
{
    memset(l, 0, sizeof *l);
    int C = c->d_model, F = c->d_ff;
    l->t = calloc((size_t)(5 + GPT2_BLOCK_TENSORS * c->n_layer), sizeof *l->t);
    if (!l->t)
        return -ENOMEM;
    add(l, "transformer.wte.weight", c->vocab, C, false);
    add(l, "transformer.wpe.weight", c->max_seq, C, false);
    add(l, "transformer.ln_f.weight", 1, C, false);
    add(l, "transformer.ln_f.bias", 1, C, false);
    if (!c->tied)
        add(l, "lm_head.weight", c->vocab, C, false);
    static const char *names[GPT2_BLOCK_TENSORS] = {
        "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
        "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
        "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    const int shape[GPT2_BLOCK_TENSORS][2] = {
        {1, C}, {1, C}, {3 * C, C}, {1, 3 * C}, {C, C}, {1, C},
        {1, C}, {1, C}, {F, C},     {1, F},     {C, F}, {1, C}};
    for (int b = 0; b < c->n_layer; b++)
        for (int k = 0; k < GPT2_BLOCK_TENSORS; k++) {
            char name[GPT2_NAME_MAX];
            snprintf(name, sizeof name, "transformer.h.%d.%s", b, names[k]);
            add(l, name, shape[k][0], shape[k][1], shape[k][0] > 1);
        }
    return 0;
}

void gpt2_layout_free(Gpt2Layout *l)
{
    free(l->t);
    l->t = NULL;
    l->n = 0;
}

const ParamTensor *gpt2_layout_find(const Gpt2Layout *l, const char *name)
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

void gpt2_edge_offsets(const ModelConfig *c, Gpt2EdgeOffsets *o)
{
    size_t C = (size_t)c->d_model, V = (size_t)c->vocab;
    o->wte = 0;
    o->wpe = V * C;
    o->lnfw = o->wpe + (size_t)c->max_seq * C;
    o->lnfb = o->lnfw + C;
    o->lm_head = c->tied ? o->wte : o->lnfb + C;
}

void gpt2_block_offsets(const ModelConfig *c, Gpt2BlockOffsets *o)
{
    size_t C = (size_t)c->d_model, F = (size_t)c->d_ff, at = 0;
    o->ln1w = at, at += C;
    o->ln1b = at, at += C;
    o->qkvw = at, at += 3 * C * C;
    o->qkvb = at, at += 3 * C;
    o->projw = at, at += C * C;
    o->projb = at, at += C;
    o->ln2w = at, at += C;
    o->ln2b = at, at += C;
    o->fcw = at, at += F * C;
    o->fcb = at, at += F;
    o->fcprojw = at, at += C * F;
    o->fcprojb = at;
}

void gpt2_view_edges(const ModelConfig *c, float *buf, Gpt2EdgeView *v)
{
    Gpt2EdgeOffsets o;
    gpt2_edge_offsets(c, &o);
    *v = (Gpt2EdgeView){buf + o.wte, buf + o.wpe, buf + o.lnfw, buf + o.lnfb, buf + o.lm_head};
}

void gpt2_view_block(const ModelConfig *c, float *buf, int b, Gpt2BlockView *v)
{
    gpt2_view_block_at(c, buf + model_embed_params(c) + (size_t)b * model_block_params(c), v);
}

void gpt2_view_block_at(const ModelConfig *c, float *p, Gpt2BlockView *v)
{
    Gpt2BlockOffsets o;
    gpt2_block_offsets(c, &o);
    *v = (Gpt2BlockView){p + o.ln1w, p + o.ln1b, p + o.qkvw, p + o.qkvb, p + o.projw,
                         p + o.projb, p + o.ln2w, p + o.ln2b, p + o.fcw, p + o.fcb,
                         p + o.fcprojw, p + o.fcprojb};
}

void gpt2_subgroup_slice(const ModelConfig *c, const Plan *p, int g, size_t *begin, size_t *end)
{
    size_t edge = (size_t)model_embed_params(c), block = (size_t)model_block_params(c);
    int first, count;
    plan_subgroup_blocks(p, g, &first, &count);
    *begin = g == plan_subgroup_count(p) - 1 ? 0 : edge + (size_t)first * block;
    *end = edge + (size_t)(first + count) * block;
}
