/* gpt2_layout: views of GPT-2's parameters in the flat layout; see gpt2_layout.h. */
#include "gpt2_layout.h"

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
