/* Check suite for model/arch: every family's table is consistent (names, tensor references in
 * range, the checkpoint op keeps the block input, every tensor a later op reads is made before
 * it), and the recomputation closure on GPT-2's dataflow. */
#include <string.h>

#include "arch.h"
#include "gpt2_arch.h"
#include "testutil.h"

static bool valid_refs(const BlockArch *a, const signed char *refs)
{
    for (int k = 0; k < ARCH_MAX_REFS; k++) {
        if (refs[k] < 0)
            return true;
        if (refs[k] >= arch_tensors(a))
            return false;
    }
    return false; /* not -1 terminated within the bound */
}

START_TEST(tables_consistent)
{
    for (int f = 0; f < ARCH_COUNT; f++) {
        const BlockArch *a = arch_block((Arch)f);
        ck_assert_str_eq(arch_name((Arch)f), a->name);
        ck_assert_int_le(arch_tensors(a), ARCH_MAX_TENSORS);
        ck_assert_int_eq(a->input, a->n_ops);
        ck_assert_int_ge(a->output, 0);
        ck_assert_int_lt(a->output, a->n_ops);
        /* the checkpoint op reads and keeps the block input */
        ck_assert_int_eq(a->ops[BLOCK_CKPT_OP].inputs[0], a->input);
        ck_assert_int_eq(a->ops[BLOCK_CKPT_OP].saves[0], a->input);
        for (int i = 0; i < a->n_ops; i++) {
            const BlockOpInfo *op = &a->ops[i];
            ck_assert_msg(op->name && op->name[0], "%s op %d has no name", a->name, i);
            for (int j = 0; j < i; j++)
                ck_assert_str_ne(op->name, a->ops[j].name);
            ck_assert(valid_refs(a, op->inputs) && valid_refs(a, op->saves));
            /* dataflow in list order: an op reads the input or what an earlier op made */
            for (const signed char *x = op->inputs; *x >= 0; x++)
                ck_assert_msg(*x == a->input || *x < i, "%s.%s reads tensor %d", a->name,
                              op->name, *x);
            for (const signed char *x = op->saves; *x >= 0; x++)
                ck_assert(*x == a->input || *x <= i);
        }
    }
}
END_TEST

START_TEST(gpt2_named)
{
    const BlockArch *a = arch_block(ARCH_GPT2);
    ck_assert_ptr_eq(a, &gpt2_arch);
    ck_assert_int_eq(a->n_ops, GPT2_OPS);
    ck_assert_int_eq(a->input, GPT2_IN);
    ck_assert_int_eq(a->output, GPT2_RES2);
    ck_assert_str_eq(a->ops[GPT2_FC2].name, "fc2");
    ck_assert_int_eq(a->ops[GPT2_ATTN].kind, OP_ATTENTION);
    /* edge names never collide with any family's tensors */
    ck_assert_int_ge(EDGE_EMBED, ARCH_MAX_TENSORS);
}
END_TEST

/* Keeps every op's tensors but the ones listed recomputed; returns the ops rerun as a mask. */
static unsigned rerun_mask(const int *recomputed, int n)
{
    const BlockArch *a = &gpt2_arch;
    bool kept[ARCH_MAX_OPS] = {false}, rerun[ARCH_MAX_OPS];
    for (int i = 0; i < a->n_ops; i++)
        kept[i] = true;
    for (int k = 0; k < n; k++)
        kept[recomputed[k]] = false;
    arch_recompute_set(a, kept, rerun);
    unsigned m = 0;
    for (int i = 0; i < a->n_ops; i++)
        m |= rerun[i] ? 1u << i : 0;
    return m;
}

START_TEST(recompute_closure)
{
    /* nothing recomputed: nothing rerun */
    ck_assert_uint_eq(rerun_mask(NULL, 0), 0);
    /* fc2's input (the GELU's output) recomputed: the GELU again, from fc1's kept output */
    ck_assert_uint_eq(rerun_mask((int[]){GPT2_FC2}, 1), 1u << GPT2_GELU);
    /* attention's tensors (qkv's output and its own): qkv from ln1's kept output, attention */
    ck_assert_uint_eq(rerun_mask((int[]){GPT2_ATTN}, 1), 1u << GPT2_QKV | 1u << GPT2_ATTN);
    /* ln1's (the block input) is the checkpoint: never part of the closure */
    int all_inner[GPT2_OPS - 1];
    for (int i = 1; i < GPT2_OPS; i++)
        all_inner[i - 1] = i;
    unsigned upto_gelu = (1u << (GPT2_GELU + 1)) - 1;
    ck_assert_uint_eq(rerun_mask(all_inner, GPT2_OPS - 1), upto_gelu);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arch");
    TCase *tc = tcase_create("arch");
    tcase_add_test(tc, tables_consistent);
    tcase_add_test(tc, gpt2_named);
    tcase_add_test(tc, recompute_closure);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
