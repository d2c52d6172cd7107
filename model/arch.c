/* arch: the block architectures' tables and the recomputation closure; see arch.h and the
 * families' headers (gpt2_arch.h). */
#include "arch.h"

#include <assert.h>
#include <string.h>

#include "gpt2_arch.h"
#include "llama_arch.h"

const BlockArch *arch_block(Arch a)
{
    static const BlockArch *const archs[ARCH_COUNT] = {[ARCH_GPT2] = &gpt2_arch,
                                                       [ARCH_LLAMA] = &llama_arch};
    assert(a >= 0 && a < ARCH_COUNT);
    return archs[a];
}

const char *arch_name(Arch a)
{
    return arch_block(a)->name;
}

/* Tensor x is needed: recompute its op unless it is available, and what that op reads. */
static void need(const BlockArch *a, int x, bool avail[], bool rerun[])
{
    if (avail[x])
        return;
    assert(x != a->input);
    avail[x] = rerun[x] = true;
    for (const signed char *in = a->ops[x].inputs; *in >= 0; in++)
        need(a, *in, avail, rerun);
}

void arch_recompute_set(const BlockArch *a, const bool kept[], bool rerun[])
{
    bool avail[ARCH_MAX_TENSORS] = {false};
    avail[a->input] = true;
    memset(rerun, 0, (size_t)a->n_ops * sizeof *rerun);
    for (int i = 0; i < a->n_ops; i++)
        if (kept[i])
            for (const signed char *x = a->ops[i].saves; *x >= 0; x++)
                avail[*x] = true;
    for (int i = 0; i < a->n_ops; i++)
        if (!kept[i])
            for (const signed char *x = a->ops[i].saves; *x >= 0; x++)
                need(a, *x, avail, rerun);
}
