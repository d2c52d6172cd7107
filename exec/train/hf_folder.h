/* hf_folder: a model's weights read from what a Hugging Face user has.
 *
 * A folder with config.json beside model.safetensors, or beside the shards
 * model-00001-of-0000N.safetensors that model.safetensors.index.json lists ({"metadata":
 * {"total_size": bytes}, "weight_map": {tensor: shard}}); that index itself; or one .safetensors
 * file. The tensors carry the family's Hugging Face names and shapes (layout.h: GPT-2's with or
 * without "transformer.", its Conv1D weights transposed; Llama's (out, in) as ours), in F32, F16
 * or BF16, converted to fp32 on the way in. Writing the same layout is hf_save.h's.
 *
 * Streaming. Tensor by tensor, each shard opened in turn and its tensors read in file order
 * (one sequential pass over each file) straight into where the caller's sink says (HfSink); the
 * loader's own memory is one tensor's worth at most (a GPT-2 Conv1D weight being transposed)
 * and a few KiB of headers, never a file. Before any tensor's data is read, the folder's
 * config.json (when there is one) is checked against the model and every shard's header
 * against the index and the layout, so a broken download fails at once with one line naming
 * the tensor and the file. */
#ifndef FUYOU_HF_FOLDER_H
#define FUYOU_HF_FOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuyou_err.h"
#include "layout.h"
#include "workpool.h"

#define HF_SINGLE_FILE "model.safetensors"
#define HF_INDEX_FILE "model.safetensors.index.json"

/* Where the loader puts each tensor of the layout: once each, in the files' order (not the
 * layout's). dest gives room for t->numel fp32 values in ours (rows, cols) order, valid until
 * done returns (NULL: the load fails with -ENOMEM); done, when not NULL, is called once they are
 * all there and may return -errno with e to stop the load. An out-of-core loader gives a
 * staging buffer in dest and writes it on to where the tensor lives (host pool, SSD store) in
 * done; a tensor larger than any buffer it can give would read through st_read_next (a
 * StCursor) instead. A failed load leaves what it had given to done. */
typedef struct HfSink {
    float *(*dest)(void *user, const ParamTensor *t);
    int (*done)(void *user, const ParamTensor *t, float *values, Err *e);
    void *user;
} HfSink;

/* The in-memory trainer's sink: each tensor at its offset in the flat buffer params (l->total
 * values, caller-owned), nothing to do after. */
HfSink hf_sink_flat(float *params);


/* Loads the weights at path into sink for model c (layout l). path: a folder (its
 * model.safetensors, else its model.safetensors.index.json, in transformers' order), an index
 * (.json) or the config.json of a folder, or one .safetensors file. A folder's config.json,
 * when present, must describe c (hf_check_config); a lone .safetensors file is not checked
 * against the one that may lie beside it. A tied model takes a file's lm_head.weight only when
 * it is the embedding bit for bit. The files may hold no tensor the layout lacks but GPT-2's
 * attn.bias / attn.masked_bias and Llama's rotary_emb.inv_freq (buffers derived from the config,
 * not learned). 0, or -errno with one line naming the tensor and the file: -ENOENT for a folder
 * without weights or a missing shard, -EINVAL for a tensor missing, extra, listed but absent,
 * of another shape or dtype, or a config of another model. */
int hf_load(const char *path, const ModelConfig *c, const ModelLayout *l, const HfSink *sink,
            Err *e);
/* The same load in parts, for an out-of-core loader that fills one tier's range at a time:
 * hf_reader_open resolves path and checks everything hf_load checks before any data is read
 * (hf_reader_close(r) after, either way); hf_reader_read gives sink the tensors whose offsets
 * in the layout lie in [begin, end), each shard that holds one read in its file order (the
 * others' headers only). Reading every range once reads each tensor once. */
typedef struct HfReader HfReader;
int hf_reader_open(HfReader **r, const char *path, const ModelConfig *c, const ModelLayout *l,
                   Err *e);
/* hf_reader_open without the config.json check (hf_load_weights') */
int hf_reader_open_weights(HfReader **r, const char *path, const ModelConfig *c,
                           const ModelLayout *l, Err *e);
int hf_reader_read(HfReader *r, size_t begin, size_t end, const HfSink *sink, Err *e);
/* The layout's values [begin, begin + n) into dst, in layout order, whatever tensors the
 * range cuts (a Conv1D weight is read whole once and served in parts): for a loader whose
 * ranges are its staging buffer's, not the tensors'. The ranges go front to back, each
 * starting where the one before ended (from 0); each tensor's checksum is checked when its
 * last value is read. Not to be mixed with hf_reader_read on one reader. 0 or -errno. */
int hf_reader_read_values(HfReader *r, size_t begin, size_t n, float *dst, Err *e);
/* The values read from here on widened to fp32 on wp's threads (NULL: the reader's). */
void hf_reader_set_pool(HfReader *r, WorkPool *wp);
void hf_reader_close(HfReader *r);
/* hf_load without the config.json check: for a folder whose model is known otherwise (a
 * checkpoint's state.json describes it; its config.json is for Hugging Face only). */
int hf_load_weights(const char *path, const ModelConfig *c, const ModelLayout *l,
                    const HfSink *sink, Err *e);

/* The model the config.json at path describes (model_load_hf) has c's family, layers, hidden
 * size, heads, k/v heads, MLP width, vocabulary, tied head and q/k/v biases: 0, or -EINVAL
 * naming the field as the config spells it and both values (model_load_hf's errors as they
 * are). */
int hf_check_config(const char *path, const ModelConfig *c, Err *e);

/* The Hugging Face folder path names or lies in, into dir (capacity n): path when it is a
 * folder, the folder of an index or a config.json, the folder of a .safetensors file when a
 * config.json lies beside it; else "" (a lone file). */
void hf_folder_of(const char *path, char *dir, size_t n);

/* Whether the folder dir holds weights: model.safetensors or model.safetensors.index.json. */
bool hf_folder_has_weights(const char *dir);
/* The dtype the folder dir's weights are stored in: config.json's torch_dtype (or
 * transformers 5's dtype), else its first tensor's. 0, or -ENOENT when neither says. */
int hf_folder_dtype(const char *dir, DType *out);

/* The shape t has in a Hugging Face file (Conv1D weights transposed): its dims into shape,
 * their count (1 or 2) returned. */
int hf_file_shape(const ParamTensor *t, int64_t shape[2]);
/* dst (cols, rows) = src (rows, cols) transposed: a Conv1D weight between file and layout. */
void hf_transpose(float *dst, const float *src, int rows, int cols);

#endif
