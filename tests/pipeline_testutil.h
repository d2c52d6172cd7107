/* pipeline_testutil: what the pipeline's CPU-device suites share (test_pipeline.c,
 * test_pipeline_sums.c, test_pipe_mem.c): the text they train on, the training options, the
 * base plan, the model's parameter count and the pipeline's memory on the CPU device (not
 * every suite takes every one: inline).
 * Header-only; tests only. */
#ifndef FUYOU_PIPELINE_TESTUTIL_H
#define FUYOU_PIPELINE_TESTUTIL_H

#include "cpu_backend.h"
#include "graph.h"
#include "pipe_mem.h"
#include "pipeline.h"
#include "testutil.h"

static const char *text = "/usr/share/common-licenses/GPL-3";

static TrainOptions opts(int64_t steps)
{
    TrainOptions o = {.backend = &backend_cpu, .data_paths = {text},
                      .n_data = 1, .seqs_per_step = 2, .seq = 32,
                      .steps = steps, .lr = 2e-3f, .min_lr_ratio = 0.1f, .weight_decay = 0.1f,
                      .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .clip = 1.0f, .warmup = 2,
                      .seed = 11, .subgroup_blocks = 1, .tail_blocks = 1, .threads = 2};
    o.model = *model_preset_find("gpt2-tiny");
    return o;
}

/* A plan over o's model with every state in CPU memory and every activation swapped to it. */
static void base_plan(Plan *p, Graph *g, const TrainOptions *o)
{
    Err e;
    ModelConfig c = o->model;
    c.dtype = DTYPE_FP32;
    ck_assert_int_eq(graph_init(g, &c, trainer_seqs_per_micro(o), o->seq, &e), 0);
    ck_assert_int_eq(plan_init(p, g, POLICY_FUYOU, &e), 0);
    p->weights = p->optim = TIER_CPU;
    plan_set_all_act(p, ACT_CPU, ACT_CPU);
}

static size_t n_params(const TrainOptions *o)
{
    return (size_t)model_param_count(&o->model);
}

/* The pipeline's memory for plan p over o's model, its SSD tier in the directory ssd. The
 * caller frees m and wp. */
static inline void open_mem(PipeMem *m, WorkPool *wp, const TrainOptions *o, const Plan *p,
                            const char *ssd)
{
    Err e;
    ck_assert_int_eq(workpool_init(wp, 1, &e), 0);
    PipeConfig pc = {.device = &device_cpu, .ssd_dirs = {ssd}, .n_ssd_dirs = 1};
    ck_assert_msg(pipe_mem_init(m, &o->model, p, trainer_seqs_per_micro(o), o->seq, &pc, wp, wp,
                                &e) == 0, "%s", e.msg);
}

#endif
