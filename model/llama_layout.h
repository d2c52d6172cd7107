/* llama_layout: views of the Llama family's parameters in the flat layout (layout.h): each
 * block's tensors and the edges' (the embedding, the final norm, an untied lm_head) as
 * pointers or element offsets. q, k and v are one (h + 2g) d x C matrix and their biases one
 * run (Qwen2), gate and up one 2F x C matrix: as the fused GEMMs read them (llama_arch.h). */
#ifndef FUYOU_LLAMA_LAYOUT_H
#define FUYOU_LLAMA_LAYOUT_H

#include <stddef.h>

#include "layout.h"

/* One block's weights, Hugging Face's (out, in) matrices: h query heads and g kv heads of d. */
typedef struct LlamaBlockView {
    float *norm1_w;   /* (C) input_layernorm */
    float *qkv_w;     /* ((h+2g)d, C): q_proj, k_proj, v_proj stacked */
    float *qkv_b;     /* ((h+2g)d), or NULL: none (Llama); Qwen2 has it */
    float *o_w;       /* (C, h d) o_proj */
    float *norm2_w;   /* (C) post_attention_layernorm */
    float *gate_up_w; /* (2F, C): gate_proj, up_proj stacked */
    float *down_w;    /* (C, F) down_proj */
} LlamaBlockView;

typedef struct LlamaEdgeView {
    float *embed;   /* (V, C) */
    float *norm;    /* (C) */
    float *lm_head; /* (V, C): embed when tied */
} LlamaEdgeView;

/* The same as element offsets, for buffers of other types (16-bit weights on a GPU); qkv_b is
 * meaningful only where the config has q/k/v biases. */
typedef struct LlamaBlockOffsets {
    size_t norm1_w, qkv_w, qkv_b, o_w, norm2_w, gate_up_w, down_w;
} LlamaBlockOffsets;
typedef struct LlamaEdgeOffsets {
    size_t embed, norm, lm_head;
} LlamaEdgeOffsets;

void llama_block_offsets(const ModelConfig *c, LlamaBlockOffsets *o);
void llama_edge_offsets(const ModelConfig *c, LlamaEdgeOffsets *o);
/* Views over one block's parameters alone, starting at block; over the whole flat buffer. */
void llama_view_block_at(const ModelConfig *c, float *block, LlamaBlockView *v);
void llama_view_block(const ModelConfig *c, float *buf, int b, LlamaBlockView *v);
void llama_view_edges(const ModelConfig *c, float *buf, LlamaEdgeView *v);

#endif
