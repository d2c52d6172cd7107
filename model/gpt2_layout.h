/* gpt2_layout: where each GPT-2 parameter tensor lives in one flat fp32 buffer, and its Hugging
 * Face name and shape. Part of the shared description: the schedule's sub-groups are slices of
 * this layout, and every backend (the CPU reference, CUDA, the out-of-core pipeline) and the
 * checkpoints address parameters through it.
 *
 * The layout is block-major: the edge parameters first (wte, wpe, ln_f, an untied lm_head), then
 * each block's twelve tensors contiguously. So an optimizer sub-group of blocks is one
 * contiguous slice, the tail sub-group (the first blocks and the edges) is the slice starting at
 * 0, and block b starts at model_embed_params + b * model_block_params (model.h). Linear weights
 * are stored (out, in), as matmul_forward_ref wants; Hugging Face's GPT-2 Conv1D stores (in, out)
 * and the conv1d flag says to transpose on load and save. */
#ifndef FUYOU_GPT2_LAYOUT_H
#define FUYOU_GPT2_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

enum { GPT2_BLOCK_TENSORS = 12, GPT2_NAME_MAX = 64 };

typedef struct ParamTensor {
    char name[GPT2_NAME_MAX]; /* "transformer.h.3.attn.c_attn.weight" */
    size_t offset, numel;
    int rows, cols;           /* ours: (rows, cols); 1-D tensors have rows 1 */
    bool conv1d;              /* Hugging Face stores it (cols, rows) */
} ParamTensor;

typedef struct Gpt2Layout {
    ParamTensor *t;
    int n;
    size_t total;
} Gpt2Layout;

/* Fills l for c; the caller frees it with gpt2_layout_free. 0 or -ENOMEM. */
int gpt2_layout_init(Gpt2Layout *l, const ModelConfig *c);
void gpt2_layout_free(Gpt2Layout *l);
/* The tensor with this Hugging Face name (with or without the "transformer." prefix), or NULL. */
const ParamTensor *gpt2_layout_find(const Gpt2Layout *l, const char *name);

/* Optimizer sub-group g of plan p (plan.h) as the slice [begin, end) of the flat layout: blocks
 * are contiguous, and the tail's slice starts at 0 with the edge parameters. */
struct Plan;
void gpt2_subgroup_slice(const ModelConfig *c, const struct Plan *p, int g, size_t *begin,
                         size_t *end);

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
