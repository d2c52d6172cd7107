/* Check suite for model/layout: both families' flat layouts cover their parameters exactly, in
 * order, with Hugging Face's names and shapes, blocks contiguous after the edges. */
#include "layout.h"
#include "llama_layout.h"
#include "testutil.h"

static void check_covers(const ModelConfig *c, ModelLayout *l)
{
    ck_assert_int_eq(layout_init(l, c), 0);
    ck_assert_int_eq((int64_t)l->total, model_param_count(c));
    size_t at = 0;
    for (int i = 0; i < l->n; i++) {
        ck_assert_msg(l->t[i].offset == at, "%s: %s at %zu, not %zu", c->name, l->t[i].name,
                      l->t[i].offset, at);
        ck_assert_int_eq(l->t[i].numel, (size_t)l->t[i].rows * l->t[i].cols);
        at += l->t[i].numel;
    }
    /* the blocks start after the edges, one block's parameters apart */
    char name[LAYOUT_NAME_MAX];
    snprintf(name, sizeof name, c->arch == ARCH_LLAMA ? "model.layers.1.input_layernorm.weight"
                                                       : "transformer.h.1.ln_1.weight");
    const ParamTensor *t = layout_find(l, name);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq((int64_t)t->offset, model_embed_params(c) + model_block_params(c));
}

START_TEST(every_preset_covered)
{
    for (int i = 0; i < model_preset_count(); i++) {
        const ModelConfig *c = model_preset_at(i);
        ModelLayout l;
        check_covers(c, &l);
        layout_free(&l);
    }
}
END_TEST

START_TEST(llama_names)
{
    ModelLayout l;
    const ModelConfig *c = model_preset_find("llama-3.1-8b");
    check_covers(c, &l);
    const ParamTensor *k = layout_find(&l, "model.layers.3.self_attn.k_proj.weight");
    ck_assert_ptr_nonnull(k);
    ck_assert_int_eq(k->rows, 1024); /* 8 kv heads of 128 */
    ck_assert_int_eq(k->cols, 4096);
    ck_assert(!k->conv1d);
    /* q, k and v stacked: the fused GEMM's one weight */
    const ParamTensor *q = layout_find(&l, "model.layers.3.self_attn.q_proj.weight");
    const ParamTensor *v = layout_find(&l, "model.layers.3.self_attn.v_proj.weight");
    ck_assert_int_eq(q->offset + q->numel, k->offset);
    ck_assert_int_eq(k->offset + k->numel, v->offset);
    const ParamTensor *gate = layout_find(&l, "model.layers.3.mlp.gate_proj.weight");
    const ParamTensor *up = layout_find(&l, "model.layers.3.mlp.up_proj.weight");
    ck_assert_int_eq(gate->offset + gate->numel, up->offset);
    ck_assert_ptr_nonnull(layout_find(&l, "lm_head.weight")); /* untied */
    ck_assert_ptr_null(layout_find(&l, "model.layers.3.self_attn.q_proj.bias"));
    ck_assert_ptr_null(layout_find(&l, "model.layers.32.input_layernorm.weight"));
    layout_free(&l);
    /* tied (Llama 3.2): no head of its own */
    check_covers(model_preset_find("llama-3.2-1b"), &l);
    ck_assert_ptr_null(layout_find(&l, "lm_head.weight"));
    layout_free(&l);
    /* Qwen2: q, k and v biases, stacked after the weights */
    check_covers(model_preset_find("qwen2.5-7b"), &l);
    const ParamTensor *qb = layout_find(&l, "model.layers.0.self_attn.q_proj.bias");
    const ParamTensor *kb = layout_find(&l, "model.layers.0.self_attn.k_proj.bias");
    ck_assert_ptr_nonnull(qb);
    ck_assert_int_eq(qb->cols, 3584);
    ck_assert_int_eq(qb->offset + qb->numel, kb->offset);
    layout_free(&l);
}
END_TEST

/* The Llama views point where the layout's names are */
START_TEST(llama_views)
{
    static const char *names[] = {"llama-3.2-1b", "qwen2.5-7b", "llama-tiny"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const ModelConfig *c = model_preset_find(names[i]);
        ModelLayout l;
        check_covers(c, &l);
        float *base = (float *)16; /* never dereferenced: offsets only */
        LlamaBlockView v;
        LlamaEdgeView ev;
        llama_view_block(c, base, 1, &v);
        llama_view_edges(c, base, &ev);
        const struct { const char *name; float *at; } want[] = {
            {"model.layers.1.input_layernorm.weight", v.norm1_w},
            {"model.layers.1.self_attn.q_proj.weight", v.qkv_w},
            {"model.layers.1.self_attn.o_proj.weight", v.o_w},
            {"model.layers.1.post_attention_layernorm.weight", v.norm2_w},
            {"model.layers.1.mlp.gate_proj.weight", v.gate_up_w},
            {"model.layers.1.mlp.down_proj.weight", v.down_w},
            {"model.embed_tokens.weight", ev.embed}, {"model.norm.weight", ev.norm},
        };
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            ck_assert_msg(base + layout_find(&l, want[k].name)->offset == want[k].at, "%s: %s",
                          names[i], want[k].name);
        if (c->qkv_bias)
            ck_assert_ptr_eq(base + layout_find(&l, "model.layers.1.self_attn.q_proj.bias")->offset,
                             v.qkv_b);
        else
            ck_assert_ptr_null(v.qkv_b);
        const ParamTensor *head = layout_find(&l, "lm_head.weight");
        ck_assert_ptr_eq(ev.lm_head, c->tied ? ev.embed : base + head->offset);
        layout_free(&l);
    }
}
END_TEST

START_TEST(gpt2_names)
{
    ModelLayout l;
    check_covers(model_preset_find("gpt2-124m"), &l);
    const ParamTensor *t = layout_find(&l, "h.0.attn.c_attn.weight"); /* GPT2Model's name */
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(t, layout_find(&l, "transformer.h.0.attn.c_attn.weight"));
    ck_assert(t->conv1d);
    ck_assert_int_eq(t->rows, 3 * 768);
    ck_assert(!layout_find(&l, "transformer.h.0.ln_1.weight")->conv1d);
    layout_free(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, every_preset_covered);
    tcase_add_test(tc, llama_names);
    tcase_add_test(tc, llama_views);
    tcase_add_test(tc, gpt2_names);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
