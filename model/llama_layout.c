/* llama_layout: views of the Llama family's parameters; see llama_layout.h and, for the order,
 * layout.c's llama_tensors. */
#include "llama_layout.h"

void llama_block_offsets(const ModelConfig *c, LlamaBlockOffsets *o)
{
    size_t C = (size_t)c->d_model, F = (size_t)c->d_ff, d = (size_t)model_head_dim(c);
    size_t qkv = ((size_t)c->n_head + 2 * (size_t)model_kv_heads(c)) * d, at = 0;
    o->norm1_w = at, at += C;
    o->qkv_w = at, at += qkv * C;
    o->qkv_b = at, at += c->qkv_bias ? qkv : 0;
    o->o_w = at, at += C * (size_t)c->n_head * d;
    o->norm2_w = at, at += C;
    o->gate_up_w = at, at += 2 * F * C;
    o->down_w = at;
}

void llama_edge_offsets(const ModelConfig *c, LlamaEdgeOffsets *o)
{
    size_t C = (size_t)c->d_model, V = (size_t)c->vocab;
    o->embed = 0;
    o->norm = V * C;
    o->lm_head = c->tied ? o->embed : o->norm + C;
}

void llama_view_block_at(const ModelConfig *c, float *p, LlamaBlockView *v)
{
    LlamaBlockOffsets o;
    llama_block_offsets(c, &o);
    *v = (LlamaBlockView){p + o.norm1_w, p + o.qkv_w, c->qkv_bias ? p + o.qkv_b : NULL,
                          p + o.o_w, p + o.norm2_w, p + o.gate_up_w, p + o.down_w};
}

void llama_view_block(const ModelConfig *c, float *buf, int b, LlamaBlockView *v)
{
    llama_view_block_at(c, buf + model_embed_params(c) + (size_t)b * model_block_params(c), v);
}

void llama_view_edges(const ModelConfig *c, float *buf, LlamaEdgeView *v)
{
    LlamaEdgeOffsets o;
    llama_edge_offsets(c, &o);
    *v = (LlamaEdgeView){buf + o.embed, buf + o.norm, buf + o.lm_head};
}
