/* Check suite for the pipeline's memory (exec/pipeline/pipe_mem.h) on the CPU device, below a
 * run: how pipe_mem_fill_state hands the starting state's ranges to a fill. */
#include <stdlib.h>

#include "pipe_mem.h"
#include "pipeline_testutil.h"
#include "testutil.h"

/* The fill's ranges through the GPU staging (everything on the device): with a grain, each a
 * multiple of it that starts at one, the last what is left; without, the staging's size. The
 * values land where the ranges say (read back whole), and the moments start at zero. */
typedef struct RecordedFill {
    size_t step, total;     /* the ranges expected: [k step, (k + 1) step), the last cut at total */
    size_t calls, bad, end; /* bad: ranges other than those; end: where the last one ended */
} RecordedFill;

static int fill_recorded(void *user, size_t begin, size_t n, float *params, float *m, float *v,
                         Err *e)
{
    (void)m, (void)v, (void)e;
    RecordedFill *r = user;
    r->bad += begin != r->end || n != (r->total - begin < r->step ? r->total - begin : r->step);
    r->calls++, r->end = begin + n;
    for (size_t i = 0; i < n; i++)
        params[i] = (float)(begin + i);
    return 0;
}

START_TEST(fill_takes_the_grain)
{
    TrainOptions o = opts(1);
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.weights = p.optim = TIER_GPU;
    PipeMem m;
    WorkPool wp;
    open_mem(&m, &wp, &o, &p, "/tmp");
    size_t P = n_params(&o), S = m.gpu_stage_params;
    ck_assert_uint_eq(m.gpu_state_params, P);
    ck_assert_uint_eq(S, P); /* a small model: the staging holds it whole */
    size_t grains[] = {0, S / 3 + 1, S / 7, S + 1};
    for (size_t k = 0; k < sizeof grains / sizeof grains[0]; k++) {
        size_t grain = grains[k] <= S ? grains[k] : 0; /* a grain over the staging: none */
        RecordedFill r = {.step = grain ? S / grain * grain : S, .total = P};
        PipeMemFiller f = {.fill = fill_recorded, .user = &r, .grain = grains[k]};
        Err e;
        ck_assert_msg(pipe_mem_fill_state(&m, &f, &e) == 0, "%s", e.msg);
        ck_assert_uint_eq(r.bad, 0);
        ck_assert_uint_eq(r.end, P);
        ck_assert_uint_eq(r.calls, (P + r.step - 1) / r.step);
        float *back = malloc(P * sizeof *back);
        int cached = -1;
        for (int part = 0; part < 3; part++) {
            ck_assert_int_eq(pipe_mem_read(&m, part, 0, P, back, &cached, &e), 0);
            size_t wrong = 0; /* counted, asserted once: an assertion a value is slow */
            for (size_t i = 0; i < P; i++)
                wrong += back[i] != (part ? 0.0f : (float)i);
            ck_assert_uint_eq(wrong, 0);
        }
        free(back);
    }
    pipe_mem_free(&m);
    workpool_free(&wp);
    plan_free(&p);
    graph_free(&g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipe_mem");
    TCase *tc = tcase_create("fill");
    tcase_set_timeout(tc, 120); /* the sanitized build */
    tcase_add_test(tc, fill_takes_the_grain);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
