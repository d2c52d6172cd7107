/* Check suite for exec/pipeline on the CPU device: placement does not change the math (losses,
 * gradient norms and the saved weights and Adam states equal the in-memory trainer's bit for
 * bit, for every placement and ring size tried, across segment boundaries and a resume), nor
 * does running the LM head in chunks of tokens (a micro-batch of more than two chunks, the head
 * tied and untied), whose devices then hold one chunk's logits however many tokens there are;
 * the measured trace holds exactly the schedule's tasks and respects every dependency, the host
 * budget holds, and bad budgets, directories and plans give one clear error each; a lane's bell
 * waited for by spinning. The SSD tier's checksums: test_pipeline_sums.c. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint.h"
#include "cpu_backend.h"
#include "graph.h"
#include "hf_testutil.h"
#include "lane.h"
#include "pipe_mem.h"
#include "pipeline.h"
#include "trace.h"
#include "pipeline_testutil.h"
#include "testutil.h"

/* A lane's bell, waited for without sleeping (lane_bell_spin, the dispatcher's wait while a GPU
 * task runs): with nothing posted it gives up after its time and nothing has rung; with a job
 * it returns once the job has ended and rung, the count seen */
static int sleep_job(void *ctx, void *job, Err *e)
{
    (void)ctx, (void)job, (void)e;
    struct timespec ms = {0, 2000000};
    nanosleep(&ms, NULL);
    return 7;
}

START_TEST(bell_spin)
{
    LaneBell bell;
    lane_bell_init(&bell);
    Lane l;
    Err e;
    ck_assert_int_eq(lane_init(&l, sleep_job, NULL, &bell, &e), 0);
    unsigned seen = 0;
    lane_bell_spin(&bell, &seen, 1e-3);
    ck_assert_uint_eq(seen, 0);
    ck_assert(!lane_poll(&l));
    lane_post(&l, NULL);
    while (seen == 0)
        lane_bell_spin(&bell, &seen, 10.0);
    ck_assert_uint_eq(seen, 1);
    ck_assert(lane_poll(&l));
    ck_assert_int_eq(l.rc, 7);
    ck_assert_double_ge(l.end_s - l.start_s, 1e-3);
    lane_free(&l);
    lane_bell_free(&bell);
}
END_TEST

/* A queue lane (the compute lane's kind): jobs issue as they are posted, two in flight, and end
 * in the order posted whatever order the device finishes them in; a job whose issue fails ends
 * with its error and the one queued behind it is not issued (-ECANCELED) */
typedef struct QueueJob {
    atomic_bool done;
    int fail_issue;
} QueueJob;
static atomic_int issued_jobs;
static int issue_job(void *ctx, void *job, Err *e)
{
    (void)ctx;
    atomic_fetch_add(&issued_jobs, 1);
    const QueueJob *j = job;
    return j->fail_issue ? err_set(e, j->fail_issue, "refused") : 0;
}
static int job_ended(void *ctx, void *job, Err *e)
{
    (void)ctx, (void)e;
    return atomic_load(&((QueueJob *)job)->done);
}
/* Polls until a job ends (at most 10 s). */
static void poll_end(Lane *l)
{
    for (int i = 0; i < 10000 && !lane_poll(l); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

START_TEST(queue_lane)
{
    Lane l;
    Err e;
    ck_assert_int_eq(lane_init(&l, issue_job, NULL, NULL, &e), 0);
    lane_set_queue(&l, job_ended);
    QueueJob a = {0}, b = {0}, c = {.fail_issue = -EIO}, d = {0};
    lane_post(&l, &a);
    lane_post(&l, &b);
    ck_assert_uint_eq(lane_in_flight(&l), 2);
    atomic_store(&b.done, true); /* the second done first: nothing ends until the first has */
    for (int i = 0; i < 1000 && atomic_load(&issued_jobs) < 2; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    ck_assert_int_eq(atomic_load(&issued_jobs), 2); /* both issued before either ended */
    nanosleep(&(struct timespec){0, 5000000}, NULL);
    ck_assert(!lane_poll(&l));
    atomic_store(&a.done, true);
    poll_end(&l);
    ck_assert_int_eq(l.rc, 0);
    ck_assert_uint_eq(lane_in_flight(&l), 1);
    poll_end(&l);
    ck_assert_int_eq(l.rc, 0);
    ck_assert_uint_eq(lane_in_flight(&l), 0);
    lane_post(&l, &c);
    lane_post(&l, &d);
    poll_end(&l);
    ck_assert_int_eq(l.rc, -EIO);
    tu_assert_contains(l.err.msg, "refused");
    poll_end(&l);
    ck_assert_int_eq(l.rc, -ECANCELED);
    ck_assert_int_eq(atomic_load(&issued_jobs), 3); /* d was never issued */
    lane_free(&l);
}
END_TEST

typedef struct Variant {
    const char *name;
    Tier weights, optim;
    ActPlace ckpt, inner;
    int subgroup, tail, ring, segment, micro, cpu_groups;
    int64_t chunk; /* PCIe copies cut at this many bytes (0: the plan's default) */
    int gpu_groups; /* sub-groups updated on the device (-1: all of them) */
    int stream_groups; /* sub-groups before those streamed to the device's AdamW */
} Variant;

static const Variant variants[] = {
    {"all in CPU memory", TIER_CPU, TIER_CPU, ACT_CPU, ACT_CPU, 1, 1, 2, 0, 1, 0, 0, 0, 0},
    {"weights and states on SSD", TIER_SSD, TIER_SSD, ACT_CPU, ACT_GPU, 1, 1, 2, 0, 1, 0, 0, 0, 0},
    {"activations to SSD", TIER_CPU, TIER_CPU, ACT_SSD, ACT_SSD, 1, 1, 2, 0, 1, 0, 0, 0, 0},
    {"full recomputation", TIER_SSD, TIER_CPU, ACT_GPU, ACT_RECOMPUTE, 1, 1, 2, 0, 1, 0, 0, 0, 0},
    {"sub-groups of 2, tail 2, all on SSD", TIER_SSD, TIER_SSD, ACT_SSD, ACT_SSD, 2, 2, 2, 0, 1,
     0, 0, 0, 0},
    {"rings of one, segments of 2", TIER_SSD, TIER_SSD, ACT_CPU, ACT_SSD, 1, 1, 1, 2, 1, 0, 0, 0,
     0},
    {"2 micro-batches, states on SSD", TIER_CPU, TIER_SSD, ACT_SSD, ACT_CPU, 2, 1, 2, 0, 2, 0, 0,
     0, 0},
    {"3 micro-batches, rings of one", TIER_SSD, TIER_CPU, ACT_CPU, ACT_RECOMPUTE, 1, 2, 1, 2, 3,
     0, 0, 0, 0},
    {"states split: 2 sub-groups in CPU memory", TIER_SSD, TIER_SSD, ACT_CPU, ACT_SSD, 1, 1, 2,
     0, 1, 2, 0, 0, 0},
    {"copies in chunks, activations to SSD", TIER_SSD, TIER_CPU, ACT_SSD, ACT_CPU, 1, 1, 2, 0, 1,
     0, 4096, 0, 0},
    {"copies in chunks, 2 micro-batches", TIER_CPU, TIER_SSD, ACT_CPU, ACT_SSD, 2, 1, 1, 0, 2, 0,
     8192, 0, 0},
    {"2 sub-groups on the device, the rest in CPU", TIER_CPU, TIER_CPU, ACT_CPU, ACT_CPU, 1, 1, 2,
     0, 1, 0, 0, 2, 0},
    {"sub-groups on the device, in CPU, on SSD", TIER_SSD, TIER_SSD, ACT_CPU, ACT_SSD, 1, 1, 2, 0,
     1, 1, 0, 1, 0},
    {"every sub-group on the device", TIER_CPU, TIER_SSD, ACT_SSD, ACT_CPU, 1, 1, 2, 0, 1, 0, 0,
     -1, 0},
    {"the tail of 2 on the device, rings of one", TIER_SSD, TIER_CPU, ACT_GPU, ACT_RECOMPUTE, 2,
     2, 1, 2, 1, 0, 0, 1, 0},
    {"2 sub-groups streamed to the device", TIER_CPU, TIER_CPU, ACT_CPU, ACT_CPU, 1, 1, 2, 0, 1,
     0, 0, 1, 2},
    {"streamed in chunks, states split, segments", TIER_CPU, TIER_SSD, ACT_CPU, ACT_SSD, 1, 1, 2,
     2, 1, 2, 4096, 1, 1},
    {"every block streamed but the tail's, rings of one", TIER_CPU, TIER_CPU, ACT_GPU,
     ACT_RECOMPUTE, 1, 2, 1, 2, 1, 0, 0, 1, 2},
    /* everything on the device (the plan the planner gives a model that fits): every sub-group
     * a device one, the activations through the ring or recomputed */
    {"everything on the device", TIER_GPU, TIER_GPU, ACT_GPU, ACT_CPU, 2, 1, 2, 2, 1, 0, 0, 0,
     0},
    {"everything on the device, recomputed, rings of one", TIER_GPU, TIER_GPU, ACT_GPU,
     ACT_RECOMPUTE, 1, 1, 1, 0, 1, 0, 0, 0, 0},
};

static void read_ckpt(const char *dir, const TrainOptions *o, float **p, float **m, float **v)
{
    ModelLayout l;
    ck_assert_int_eq(layout_init(&l, &o->model), 0);
    *p = calloc(l.total, 4), *m = calloc(l.total, 4), *v = calloc(l.total, 4);
    TrainState st;
    Err e;
    ck_assert_msg(ckpt_load(dir, &o->model, &l, *p, *m, *v, &st, &e) == 0, "%s", e.msg);
    layout_free(&l);
}

/* Trains o in memory and through the pipeline under plan p on the CPU device (in segments of
 * segment_iters iterations, 0: one; each lane's jobs delayed up to jitter_us at random), and
 * asserts that every loss, the saved weights and the Adam states are the same bits. */
static void assert_pipeline_is_the_trainer(TrainOptions *o, const Plan *p, int segment_iters,
                                           unsigned jitter_us, const char *name)
{
    char ref_dir[] = "/tmp/fuyou-pipe-ref-XXXXXX", dir[] = "/tmp/fuyou-pipe-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(ref_dir));
    ck_assert_ptr_nonnull(mkdtemp(dir));
    Err e;
    int steps = (int)o->steps;
    o->save_dir = ref_dir;
    TrainResult ref, got;
    ck_assert_msg(trainer_run(o, &ref, &e) == 0, "%s", e.msg);
    o->save_dir = dir;
    PipeConfig pc = {.device = &device_cpu, .segment_iters = segment_iters,
                     .jitter_us = jitter_us};
    PipeReport rep;
    ck_assert_msg(pipe_train(o, p, &pc, &got, &rep, &e) == 0, "%s: %s", name, e.msg);
    ck_assert_int_eq(got.n_losses, steps);
    /* it allocated exactly what the footprint's accounting says, cell by cell */
    for (int k = 0; k < MEM_TAG_COUNT; k++)
        for (int t = 0; t < TIER_COUNT; t++)
            ck_assert_msg(rep.measured.bytes[k][t] == rep.predicted.bytes[k][t],
                          "%s: %s on %s: measured %.0f, predicted %.0f", name, mem_tag_name(k),
                          tier_name(t), rep.measured.bytes[k][t], rep.predicted.bytes[k][t]);
    for (int i = 0; i < steps; i++)
        ck_assert_msg(got.losses[i] == ref.losses[i], "%s, step %d: %.9g vs %.9g", name, i + 1,
                      got.losses[i], ref.losses[i]);
    float *p1, *m1, *v1, *p2, *m2, *v2;
    read_ckpt(ref_dir, o, &p1, &m1, &v1);
    read_ckpt(dir, o, &p2, &m2, &v2);
    size_t n = n_params(o) * 4;
    ck_assert_msg(!memcmp(p1, p2, n), "%s: weights differ", name);
    ck_assert_msg(!memcmp(m1, m2, n) && !memcmp(v1, v2, n), "%s: Adam states differ", name);
    printf("%-40s bit-identical over %d steps; last loss %.6f\n", name, steps, got.last_loss);
    free(p1), free(m1), free(v1), free(p2), free(m2), free(v2);
    free(ref.losses), free(got.losses);
    o->save_dir = NULL;
    tu_rm_tree(ref_dir);
    tu_rm_tree(dir);
}

/* Every variant on either block family: _i / n_variants picks GPT-2 (0) or Llama (1). */
START_TEST(placement_does_not_change_the_math)
{
    const int n_variants = sizeof variants / sizeof *variants;
    const Variant *x = &variants[_i % n_variants];
    TrainOptions o = opts(tu_sized(5, 3)); /* 3: still across segments of 2 */
    o.seq = tu_sized(32, 16);                /* 16: every copy still cut where chunks say */
    if (_i >= n_variants)
        o.model = *model_preset_find("llama-tiny");
    o.n_micro = x->micro; /* each of opts' two sequences */
    o.seqs_per_step *= x->micro;
    o.subgroup_blocks = x->subgroup;
    o.tail_blocks = x->tail;
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.weights = x->weights;
    p.optim = x->optim;
    plan_set_all_act(&p, x->ckpt, x->inner);
    p.subgroup_blocks = x->subgroup;
    p.tail_blocks = x->tail;
    p.n_micro = x->micro > 1 ? x->micro : 1;
    p.optim_cpu_groups = x->cpu_groups;
    p.optim_gpu_groups = x->gpu_groups < 0 ? plan_subgroup_count(&p) : x->gpu_groups;
    if (x->chunk) {
        /* and the schedule does cut copies */
        p.copy_chunk_bytes = x->chunk;
        Schedule s;
        Err e;
        ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), 0);
        int cut = 0;
        for (int t = 0; t < s.n_tasks; t++)
            cut += s.tasks[t].n_chunks > 1;
        ck_assert_int_gt(cut, 0);
        sched_free(&s);
    }
    if (x->ring == 1) {
        p.prefetch_depth = 0;
        p.weight_buffers = p.pinned_buffers = p.act_buffers = p.grad_buffers = 1;
        p.state_buffers = p.host_grad_groups = 1;
    }
    if (x->stream_groups)
        plan_set_stream_groups(&p, x->stream_groups);
    char name[96];
    snprintf(name, sizeof name, "%s: %s", arch_name(o.model.arch), x->name);
    assert_pipeline_is_the_trainer(&o, &p, x->segment, 300, name);
    plan_free(&p);
    graph_free(&g);
}
END_TEST

/* --eval-data out of core: the held-out loss after every second step and the last, each
 * batch a forward pass on the training plan's buffers (sched_build_forward), is the in-memory
 * trainer's to the bit, and the training around it is unchanged; weights and states on SSD
 * with activations there and in CPU memory, and everything on the device; GPT-2 and Llama; a
 * segment cut at each evaluated step */
START_TEST(evaluates_as_the_trainer)
{
    TrainOptions o = opts(tu_sized(5, 3)); /* 3: evaluated after step 2 and the last */
    o.seq = tu_sized(32, 16);
    if (_i % 2)
        o.model = *model_preset_find("llama-tiny");
    o.eval_paths[0] = text;
    o.n_eval = 1;
    o.eval_every = 2;
    o.eval_batches = 5;
    o.seqs_per_step = 2;
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    if (_i < 2) {
        p.weights = p.optim = TIER_SSD;
        plan_set_all_act(&p, ACT_SSD, ACT_CPU);
    } else {
        p.weights = p.optim = TIER_GPU;
        plan_set_all_act(&p, ACT_GPU, ACT_RECOMPUTE);
    }
    TrainResult ref, got, plain;
    Err e;
    ck_assert_msg(trainer_run(&o, &ref, &e) == 0, "%s", e.msg);
    PipeConfig pc = {.device = &device_cpu, .jitter_us = 200};
    ck_assert_msg(pipe_train(&o, &p, &pc, &got, NULL, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(got.eval_step, o.steps);
    ck_assert_msg(got.eval_loss == ref.eval_loss, "held-out loss %.17g, in memory %.17g",
                  got.eval_loss, ref.eval_loss);
    ck_assert(got.eval_perplexity == ref.eval_perplexity);
    o.n_eval = 0;
    ck_assert_msg(pipe_train(&o, &p, &pc, &plain, NULL, &e) == 0, "%s", e.msg);
    for (int i = 0; i < o.steps; i++) {
        ck_assert(got.losses[i] == ref.losses[i]);
        ck_assert(got.losses[i] == plain.losses[i]);
    }
    free(ref.losses), free(got.losses), free(plain.losses);
    plan_free(&p);
    graph_free(&g);
}
END_TEST

/* --init-from a sharded Hugging Face folder (the Llama fixture), read range by range into
 * the tiers (no whole-model array): the same bits as the in-memory trainer started from it,
 * with the weights and part of the states on the SSD, and with everything in CPU memory. */
START_TEST(starts_from_a_folder)
{
    char data[] = "/tmp/fuyou-pipe-data-XXXXXX.bin"; /* raw uint16 tokens below 64 */
    int fd = mkstemps(data, 4);
    ck_assert_int_ge(fd, 0);
    uint16_t tok[4096];
    for (size_t i = 0; i < sizeof tok / sizeof *tok; i++)
        tok[i] = (uint16_t)((i * 7 + i / 13) % 64);
    ck_assert_int_eq(write(fd, tok, sizeof tok), (ssize_t)sizeof tok);
    close(fd);
    TrainOptions o = opts(3);
    ModelLayout l;
    hf_fixture_model(&o.model, &l);
    layout_free(&l);
    o.data_paths[0] = data;
    o.init_from = hf_fixture();
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    if (_i) {
        p.weights = p.optim = TIER_SSD;
        p.optim_cpu_groups = 1;
        p.optim_gpu_groups = _i - 1; /* and one sub-group on the device, read through its
                                        staging */
    }
    const char *what[] = {"from a folder: all in CPU memory",
                          "from a folder: weights and states on SSD",
                          "from a folder: on the device, in CPU, on SSD"};
    assert_pipeline_is_the_trainer(&o, &p, 0, 0, what[_i]);
    plan_free(&p);
    graph_free(&g);
    unlink(data);
}
END_TEST

/* A model small enough to train micro-batches of more than GRAPH_HEAD_CHUNK tokens in a test:
 * its vocabulary (above the text's 256 bytes) makes the head's logits the largest tensor. */
static ModelConfig narrow_model(bool tied, int vocab)
{
    return (ModelConfig){.name = "narrow", .n_layer = 2, .d_model = 32, .n_head = 4,
                         .d_ff = 128, .vocab = vocab, .max_seq = 64, .tied = tied,
                         .dtype = DTYPE_BF16};
}

/* The same width in the Llama family, with what its larger members have: q/k/v biases (Qwen),
 * grouped kv heads and Llama 3's RoPE frequency scaling. */
static ModelConfig narrow_llama(bool tied, int vocab)
{
    ModelConfig c = narrow_model(tied, vocab);
    c.arch = ARCH_LLAMA;
    c.n_kv_head = 2;
    c.qkv_bias = true;
    c.rope_theta = 500000;
    c.rope_scaling = (RopeScaling){.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                                   .original_max_seq = 16};
    return c;
}

static const struct {
    const char *name;
    ModelConfig (*model)(bool tied, int vocab);
    bool tied;
    int micro;
} head_variants[] = {
    {"head in chunks, tied", narrow_model, true, 1},
    {"head in chunks, untied, 2 micro-batches", narrow_model, false, 2},
    {"llama: head in chunks, untied", narrow_llama, false, 1},
    {"llama: head in chunks, tied, 2 micro-batches", narrow_llama, true, 2},
};

/* 143 x 64 = 9152 tokens: two full chunks of the head and a partial one. */
START_TEST(head_chunks_do_not_change_the_math)
{
    TrainOptions o = opts(tu_sized(3, 1)); /* 1: the chunks' gradients and Adam's step */
    o.model = head_variants[_i].model(head_variants[_i].tied, 300);
    char tokens[64]; /* the vocabulary is not bytes: the text as uint16 tokens */
    o.data_paths[0] = tu_bytes_as_u16(tokens, sizeof tokens, text);
    o.n_micro = head_variants[_i].micro;
    o.seqs_per_step = 143 * o.n_micro;
    o.seq = 64;
    ck_assert_int_gt(trainer_seqs_per_micro(&o) * o.seq, 2 * GRAPH_HEAD_CHUNK);
    ck_assert_int_ne(trainer_seqs_per_micro(&o) * o.seq % GRAPH_HEAD_CHUNK, 0);
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.n_micro = o.n_micro;
    assert_pipeline_is_the_trainer(&o, &p, 0, 0, head_variants[_i].name);
    unlink(tokens);
    plan_free(&p);
    graph_free(&g);
}
END_TEST

/* The text as uint16 tokens in tokens (capacity n) with a loss mask beside it: runs of 40
 * targets in every 120 left out, as a prompt's are (the test unlinks both). */
static void masked_tokens(char *tokens, size_t n)
{
    tu_bytes_as_u16(tokens, n, text);
    struct stat st;
    ck_assert_int_eq(stat(tokens, &st), 0);
    char mask[96];
    data_mask_path(tokens, mask, sizeof mask);
    FILE *f = fopen(mask, "wb");
    ck_assert_ptr_nonnull(f);
    for (off_t i = 0; i < st.st_size / 2; i++)
        fputc(i % 120 >= 40, f);
    fclose(f);
}

static const struct {
    const char *name;
    int micro, vocab; /* vocab 0: gpt2-tiny; else the narrow model, its head in chunks */
} masked_variants[] = {
    {"masked targets", 1, 0},
    {"masked targets, 2 micro-batches", 2, 0},
    {"masked targets, head in chunks", 1, 300},
};

/* With a loss mask the pipeline still trains the in-memory trainer's bits: each micro-batch's
 * loss the mean over its counted targets, on both of them; and the mask does change the loss */
START_TEST(masked_loss_is_the_trainers)
{
    TrainOptions o = opts(masked_variants[_i].vocab ? tu_sized(4, 1) : 4);
    char tokens[64], mask[96];
    masked_tokens(tokens, sizeof tokens);
    o.data_paths[0] = tokens;
    o.n_micro = masked_variants[_i].micro;
    o.seqs_per_step *= o.n_micro;
    if (masked_variants[_i].vocab) {
        o.model = narrow_model(true, masked_variants[_i].vocab);
        o.seqs_per_step = 143;
        o.seq = 64;
    }
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.n_micro = o.n_micro > 1 ? o.n_micro : 1;
    assert_pipeline_is_the_trainer(&o, &p, 0, 0, masked_variants[_i].name);
    /* the same run without its mask starts from another loss */
    TrainResult with, without;
    Err e;
    o.steps = 1;
    ck_assert_int_eq(trainer_run(&o, &with, &e), 0);
    data_mask_path(tokens, mask, sizeof mask);
    unlink(mask);
    ck_assert_int_eq(trainer_run(&o, &without, &e), 0);
    ck_assert(with.first_loss != without.first_loss);
    free(with.losses), free(without.losses);
    unlink(tokens);
    plan_free(&p);
    graph_free(&g);
}
END_TEST

/* A device's own bytes for micro-batches of 2 and of 4 chunks' tokens: what the extra tokens
 * add (their activation gradients and edge activations) is far from their logits, and does not
 * depend on the vocabulary; both vocabularies' logits are one chunk's, at either size. */
static void assert_own_bytes_hold_one_chunk(const DeviceOps *dev)
{
    const int T = 64, V = 50257, B2 = 2 * GRAPH_HEAD_CHUNK / T, B4 = 4 * GRAPH_HEAD_CHUNK / T;
    for (int f = 0; f < 2; f++) {
        ModelConfig (*model)(bool, int) = f ? narrow_llama : narrow_model;
        ModelConfig big = model(true, V), small = model(true, V / 2);
        if (!(dev->archs & 1u << big.arch))
            continue;
        size_t added = dev->own_bytes(&big, B4, T) - dev->own_bytes(&big, B2, T);
        size_t added_small = dev->own_bytes(&small, B4, T) - dev->own_bytes(&small, B2, T);
        size_t logits = (size_t)(B4 - B2) * T * V * 4;
        printf("%s device, %s: %zu more own bytes for %d more tokens (their fp32 logits: "
               "%zu)\n", dev->name, arch_name(big.arch), added, (B4 - B2) * T, logits);
        ck_assert_uint_lt(added, logits / 16);
        ck_assert_uint_eq(added, added_small);
    }
}

START_TEST(own_bytes_hold_one_chunk_of_logits)
{
    assert_own_bytes_hold_one_chunk(&device_cpu);
#if FUYOU_HAVE_CUDA
    assert_own_bytes_hold_one_chunk(&device_cuda);
#endif
}
END_TEST

START_TEST(resume_is_exact)
{
    char dir[] = "/tmp/fuyou-pipe-res-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    Err e;
    TrainOptions o = opts(6);
    o.seq = tu_sized(32, 16);
    if (_i % 2)
        o.model = *model_preset_find("llama-tiny");
    o.warmup = 4; /* the first run's steps are all in warmup, where --steps does not matter */
    TrainResult full, first, rest;
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.weights = p.optim = TIER_SSD;
    p.optim_cpu_groups = 1; /* the checkpoint read into CPU memory and onto the SSD */
    p.optim_gpu_groups = _i / 2; /* and onto the device */
    PipeConfig pc = {.device = &device_cpu};
    ck_assert_msg(pipe_train(&o, &p, &pc, &full, NULL, &e) == 0, "%s", e.msg);
    o.steps = 3;
    o.save_dir = dir;
    o.save_every = 1;
    ck_assert_msg(pipe_train(&o, &p, &pc, &first, NULL, &e) == 0, "%s", e.msg);
    o.steps = 6;
    o.save_dir = NULL;
    o.resume_dir = dir;
    ck_assert_msg(pipe_train(&o, &p, &pc, &rest, NULL, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rest.first_step, 4);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(rest.losses[i] == full.losses[3 + i], "step %d", i + 4);
    free(rest.losses);
    /* the newest checkpoint's last value flipped: found as its last range is read, after the
     * rest went to the tiers; latest naming it or not, step 3 is skipped, step 2's read over
     * it, and the run goes on exactly */
    char path[256];
    snprintf(path, sizeof path, "%s/step-00000003/optimizer.safetensors", dir);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
    int last = fgetc(f);
    ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
    fputc(last ^ 1, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/latest", dir);
    for (int with_latest = 1; with_latest >= 0; with_latest--) {
        if (!with_latest)
            ck_assert_int_eq(unlink(path), 0);
        ck_assert_msg(pipe_train(&o, &p, &pc, &rest, NULL, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(rest.first_step, 3);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(rest.losses[i] == full.losses[2 + i], "step %d", i + 3);
        free(rest.losses);
    }
    free(full.losses), free(first.losses);
    plan_free(&p);
    graph_free(&g);
    tu_rm_tree(dir);
}
END_TEST

/* A stop asked as step 2 ends (the step's row and progress line come as it ends, in the
 * middle of the segment's DAG) ends the run after the step in flight, with SSD reads and
 * writes of later iterations possibly in flight: the checkpoint is of that step, the loader's
 * place with it, and the resume is the uninterrupted run bit for bit. _i: segments of one
 * DAG (8) or of 2 iterations. */
START_TEST(stop_mid_segment_resumes_exactly)
{
    char dir[] = "/tmp/fuyou-pipe-stop-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    Err e;
    TrainOptions o = opts(6);
    o.seq = tu_sized(32, 16);
    TrainResult full, first, rest;
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.weights = p.optim = TIER_SSD;
    PipeConfig pc = {.device = &device_cpu, .segment_iters = _i ? 2 : 0};
    ck_assert_msg(pipe_train(&o, &p, &pc, &full, NULL, &e) == 0, "%s", e.msg);
    volatile sig_atomic_t flag = 0;
    TuStopAt at = {"step 2/6", &flag, SIGINT};
    o.progress = tu_stop_at(&at);
    o.stop = &flag;
    o.save_dir = dir;
    char trace[256];
    snprintf(trace, sizeof trace, "%s/trace.tsv", dir);
    pc.trace_path = trace;
    PipeReport rep;
    ck_assert_int_eq(pipe_train(&o, &p, &pc, &first, &rep, &e), -EINTR);
    pc.trace_path = NULL;
    tu_assert_contains(e.msg, "stopped by SIGINT after step ");
    int stopped = (int)first.n_losses; /* 3 or 4: an update of the next may have begun */
    ck_assert_msg(stopped >= 2 && stopped < 6, "stopped after %d steps", stopped);
    /* the trace holds the steps run, and the lanes' busy time is the trace's */
    TraceTable t = {0};
    ck_assert_msg(trace_read_tsv(trace, &t, &e) == 0, "%s", e.msg);
    double busy[RES_COUNT] = {0};
    for (int k = 0; k < t.n; k++) {
        Resource r;
        ck_assert_int_lt(t.rows[k].iter, stopped);
        ck_assert_int_eq(resource_parse(t.rows[k].resource, &r), 0);
        busy[r] += t.rows[k].end_s - t.rows[k].start_s;
    }
    for (int r = 0; r < RES_COUNT; r++)
        ck_assert_msg(fabs(busy[r] - rep.busy_s[r]) < 1e-6, "%s busy %.9f, its rows %.9f",
                      resource_name(r), rep.busy_s[r], busy[r]);
    trace_table_free(&t);
    unlink(trace);
    char path[256], want[64];
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(want, sizeof want, f));
    fclose(f);
    snprintf(path, sizeof path, "step-%08d", stopped);
    tu_assert_contains(want, path);
    flag = 0;
    o.save_dir = NULL;
    o.resume_dir = dir;
    ck_assert_msg(pipe_train(&o, &p, &pc, &rest, NULL, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rest.first_step, stopped + 1);
    for (int i = 0; i < 6; i++) {
        float got = i < stopped ? first.losses[i] : rest.losses[i - stopped];
        ck_assert_msg(got == full.losses[i], "step %d (stopped after %d): %.9g vs %.9g", i + 1,
                      stopped, got, full.losses[i]);
    }
    fclose(o.progress);
    free(full.losses), free(first.losses), free(rest.losses);
    plan_free(&p);
    graph_free(&g);
    tu_rm_tree(dir);
}
END_TEST

START_TEST(trace_is_the_schedule)
{
    char path[] = "/tmp/fuyou-pipe-trace-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    Err e;
    TrainOptions o = opts(3);
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.weights = TIER_SSD;
    p.optim = TIER_SSD;
    plan_set_all_act(&p, ACT_SSD, ACT_RECOMPUTE);
    plan_set_act(&p, 1, 6, ACT_CPU);
    /* two segments: the trace outlives the first one's schedule */
    PipeConfig pc = {.device = &device_cpu, .trace_path = path, .segment_iters = 2};
    TrainResult r;
    ck_assert_msg(pipe_train(&o, &p, &pc, &r, NULL, &e) == 0, "%s", e.msg);
    free(r.losses);
    TraceTable t;
    ck_assert_msg(trace_read_tsv(path, &t, &e) == 0, "%s", e.msg);
    Schedule s;
    ck_assert_int_eq(sched_build(&s, &g, &p, 3, &e), 0);
    ck_assert_int_eq(t.n, s.n_tasks);
    /* one row per task, by (iter, id); then every dependency ends before its task starts */
    int *row_of = malloc((size_t)s.n_tasks * sizeof(int));
    for (int i = 0; i < s.n_tasks; i++)
        row_of[i] = -1;
    for (int k = 0; k < t.n; k++) {
        int ti = sched_find(&s, t.rows[k].iter, t.rows[k].task_id);
        ck_assert_msg(ti >= 0, "row %d: %s of iteration %d is not in the schedule", k,
                      t.rows[k].task_id, t.rows[k].iter);
        ck_assert_msg(row_of[ti] < 0, "%s appears twice", t.rows[k].task_id);
        ck_assert_str_eq(t.rows[k].resource, resource_name(s.tasks[ti].res));
        row_of[ti] = k;
    }
    int edges = 0;
    for (int ti = 0; ti < s.n_tasks; ti++) {
        const int *d = sched_deps(&s, ti);
        for (int j = 0; j < s.tasks[ti].n_deps; j++, edges++)
            ck_assert_msg(t.rows[row_of[d[j]]].end_s <= t.rows[row_of[ti]].start_s,
                          "%s started before %s ended", s.tasks[ti].id, s.tasks[d[j]].id);
    }
    printf("trace: %d tasks, %d dependencies respected\n", t.n, edges);
    free(row_of);
    sched_free(&s);
    trace_table_free(&t);
    plan_free(&p);
    graph_free(&g);
    unlink(path);
}
END_TEST

/* The CPU device, but F.b1.qkv of the second iteration fails as a device can. */
static DeviceOps failing_cpu;

static int compute_or_fail(Device *d, const ComputeCall *c, int slot, Err *e)
{
    if (c->task->iter == 1 && !strcmp(c->task->id, "F.b1.qkv"))
        return err_set(e, -EIO, "an injected device failure");
    return device_cpu.compute(d, c, slot, e);
}

/* A failure inside the run is the error, naming the task, and the trace keeps what ran. */
START_TEST(failure_keeps_its_trace)
{
    char path[] = "/tmp/fuyou-pipe-fail-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    failing_cpu = device_cpu;
    failing_cpu.compute = compute_or_fail;
    Err e;
    TrainOptions o = opts(3);
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    PipeConfig pc = {.device = &failing_cpu, .trace_path = path};
    TrainResult r;
    ck_assert_int_eq(pipe_train(&o, &p, &pc, &r, NULL, &e), -EIO);
    free(r.losses);
    tu_assert_contains(e.msg, "F.b1.qkv");
    tu_assert_contains(e.msg, "an injected device failure");
    tu_assert_contains(e.msg, "the trace holds the");
    TraceTable t;
    ck_assert_msg(trace_read_tsv(path, &t, &e) == 0, "%s", e.msg);
    /* the first iteration whole, none of the failed task, nothing of the third */
    Schedule s;
    ck_assert_int_eq(sched_build(&s, &g, &p, 1, &e), 0);
    int first = 0;
    for (int k = 0; k < t.n; k++) {
        first += t.rows[k].iter == 0;
        ck_assert_int_lt(t.rows[k].iter, 2);
        ck_assert(t.rows[k].iter != 1 || strcmp(t.rows[k].task_id, "F.b1.qkv"));
    }
    ck_assert_int_eq(first, s.n_tasks);
    sched_free(&s);
    trace_table_free(&t);
    plan_free(&p);
    graph_free(&g);
    unlink(path);
}
END_TEST

START_TEST(budgets_hold)
{
    Err e;
    TrainOptions o = opts(3);
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    p.weights = p.optim = TIER_SSD;
    PipeConfig pc = {.device = &device_cpu};
    TrainResult free_run, tight;
    PipeReport rep;
    ck_assert_msg(pipe_train(&o, &p, &pc, &free_run, &rep, &e) == 0, "%s", e.msg);
    double need = footprint_tier_total(&rep.measured, TIER_CPU);
    /* just enough: the peak stays under it and the math is the same */
    pc.cpu_budget = (size_t)need + 4096;
    ck_assert_msg(pipe_train(&o, &p, &pc, &tight, &rep, &e) == 0, "%s", e.msg);
    ck_assert_double_le(footprint_tier_total(&rep.measured, TIER_CPU), (double)pc.cpu_budget);
    for (int i = 0; i < 3; i++)
        ck_assert(tight.losses[i] == free_run.losses[i]);
    free(free_run.losses), free(tight.losses);
    /* too little: refused before anything is allocated, naming the budget and the shortfall */
    pc.cpu_budget = (size_t)(need / 2);
    ck_assert_int_eq(pipe_train(&o, &p, &pc, &tight, NULL, &e), -ENOSPC);
    tu_assert_contains(e.msg, "--cpu-mem");
    tu_assert_contains(e.msg, "more");
    free(tight.losses);
    pc.cpu_budget = 0;
    pc.gpu_budget = 1 << 20;
    ck_assert_int_eq(pipe_train(&o, &p, &pc, &tight, NULL, &e), -ENOSPC);
    tu_assert_contains(e.msg, "--gpu-mem");
    ck_assert_ptr_null(strstr(e.msg, "--optim-gpu-groups"));
    free(tight.losses);
    /* with sub-groups on the GPU, the advice names them too */
    p.optim_gpu_groups = 1;
    ck_assert_int_eq(pipe_train(&o, &p, &pc, &tight, NULL, &e), -ENOSPC);
    tu_assert_contains(e.msg, "fewer sub-groups there (--optim-gpu-groups)");
    free(tight.losses);
    plan_free(&p);
    graph_free(&g);
}
END_TEST

START_TEST(bad_input)
{
    Err e;
    TrainOptions o = opts(2);
    Plan p;
    Graph g;
    base_plan(&p, &g, &o);
    TrainResult r;
    p.weights = TIER_SSD;
    PipeConfig pc = {.device = &device_cpu, .ssd_dirs = {"/nonexistent/fuyou"}, .n_ssd_dirs = 1};
    ck_assert_int_eq(pipe_train(&o, &p, &pc, &r, NULL, &e), -ENOENT);
    tu_assert_contains(e.msg, "/nonexistent/fuyou");
    free(r.losses);
    pc.n_ssd_dirs = 0;
    p.n_micro = 2; /* a step of 2 x 2 sequences, but the run's has 2 */
    PipeReport rep;
    ck_assert_int_eq(pipe_train(&o, &p, &pc, &r, &rep, &e), -EINVAL);
    ck_assert_int_eq(rep.iterations, 0);
    tu_assert_contains(e.msg, "micro-batches");
    free(r.losses);
    p.n_micro = 1;
    p.optim = TIER_GPU; /* the weights on SSD: the two go together */
    ck_assert_int_eq(pipe_train(&o, &p, &pc, &r, NULL, &e), -EINVAL);
    tu_assert_contains(e.msg, "weights gpu and optim gpu together");
    free(r.losses);
    plan_free(&p);
    graph_free(&g);
}
END_TEST

int main(void)
{
    /* two cases of about equal length, which meson runs side by side (CK_RUN_CASE) */
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("placements");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, starts_from_a_folder, 0, 3);
    tcase_add_loop_test(tc, evaluates_as_the_trainer, 0, 4);
    tcase_add_loop_test(tc, placement_does_not_change_the_math, 0,
                        2 * (int)(sizeof variants / sizeof variants[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("runs");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, head_chunks_do_not_change_the_math, 0,
                        (int)(sizeof head_variants / sizeof head_variants[0]));
    tcase_add_loop_test(tc, masked_loss_is_the_trainers, 0,
                        (int)(sizeof masked_variants / sizeof masked_variants[0]));
    tcase_add_test(tc, own_bytes_hold_one_chunk_of_logits);
    tcase_add_loop_test(tc, resume_is_exact, 0, 4); /* GPT-2, Llama; with a sub-group on the
                                                       device */
    tcase_add_loop_test(tc, stop_mid_segment_resumes_exactly, 0, 2);
    tcase_add_test(tc, trace_is_the_schedule);
    tcase_add_test(tc, budgets_hold);
    tcase_add_test(tc, failure_keeps_its_trace);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, bell_spin);
    tcase_add_test(tc, queue_lane);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
