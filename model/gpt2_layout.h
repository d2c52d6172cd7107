/* gpt2_layout: views of GPT-2's parameters in the flat layout (layout.h): each block's twelve
 * tensors and the edges' (wte, wpe, ln_f, an untied lm_head) as pointers or element offsets. */
#ifndef FUYOU_GPT2_LAYOUT_H
#define FUYOU_GPT2_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "layout.h"

/* Views of one block's tensors in a parameter (or gradient) buffer laid out as above. */
typedef struct Gpt2BlockView {
    float *ln1w, *ln1b;     /* (C) */
    float *qkvw, *qkvb;     /* (3C, C), (3C) */
    float *projw, *projb;   /* (C, C), (C) */
    float *ln2w, *ln2b;     /* (C) */
    float *fcw, *fcb;       /* (F, C), (F) */
    float *fcprojw, *fcprojb; /* (C, F), (C) */
} Gpt2BlockView;

typedef struct Gpt2EdgeView {
    float *wte;     /* (V, C) */
    float *wpe;     /* (maxT, C) */
    float *lnfw, *lnfb;
    float *lm_head; /* (V, C): wte when tied */
} Gpt2EdgeView;

void gpt2_view_edges(const ModelConfig *c, float *buf, Gpt2EdgeView *v);

/* The same views as element offsets, for buffers of other types (16-bit weights on a GPU). */
typedef struct Gpt2BlockOffsets {
    size_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
} Gpt2BlockOffsets;
typedef struct Gpt2EdgeOffsets {
    size_t wte, wpe, lnfw, lnfb, lm_head;
} Gpt2EdgeOffsets;
void gpt2_block_offsets(const ModelConfig *c, Gpt2BlockOffsets *o);
void gpt2_edge_offsets(const ModelConfig *c, Gpt2EdgeOffsets *o);
void gpt2_view_block(const ModelConfig *c, float *buf, int b, Gpt2BlockView *v);
/* The same over one block's parameters alone, starting at block. */
void gpt2_view_block_at(const ModelConfig *c, float *block, Gpt2BlockView *v);

#endif
