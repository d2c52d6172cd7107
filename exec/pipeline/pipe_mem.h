/* pipe_mem: where the pipeline keeps every tensor (pipeline.h): the placement of each block
 * tensor under the plan, the sizes of every buffer and ring (checked against the budgets before
 * anything is allocated), their allocation, and where a task finds a tensor. Internal to the
 * pipeline. */
#ifndef FUYOU_PIPE_MEM_H
#define FUYOU_PIPE_MEM_H

#include <stdint.h>

#include "device.h"
#include "gpt2_layout.h"
#include "hostpool.h"
#include "ooc_adam.h"
#include "pipeline.h"
#include "progress.h"
#include "store.h"

enum { PIPE_MAX_RING = 64, PIPE_NO_OFFSET = -1 };

/* Where a block tensor lives between forward and backward. */
typedef enum Home { HOME_NONE = -1, HOME_GPU = ACT_GPU, HOME_CPU = ACT_CPU, HOME_SSD = ACT_SSD }
    Home;

typedef struct PipeMem {
    const ModelConfig *c;
    const BlockArch *arch;      /* c's block: its tensors by name */
    const Plan *p;
    const DeviceOps *ops;
    Device *dev;
    int L, G, B, T;
    size_t block_params, edge_params, wsz, gsz;
    int n_tensors;              /* of a block (arch_tensors) */
    size_t tbytes[ARCH_MAX_TENSORS];
    /* placement and layouts */
    signed char *home;          /* [L][n_tensors] */
    int64_t slot_off[ARCH_MAX_TENSORS]; /* device out/in slots: tensors swapped in any block */
    size_t slot_bytes;
    int64_t *cpu_off, *ssd_off; /* [L][n_tensors]: in the block's CPU home / SSD inner part */
    size_t *cpu_bytes, *ssd_inner_bytes;
    size_t stage_out_bytes, stage_in_bytes, stage_in_inner; /* inner part's offset in in-slots */
    size_t *grp_begin, *grp_end; /* sub-group slices of the flat layout */
    size_t max_host_group;      /* parameters of the largest sub-group updated off the GPU */
    /* the layout's prefix [0, gpu_state_params) is the GPU sub-groups' (plan.h: states,
     * weights and gradients on the device), [gpu_state_params, cpu_state_end) the CPU's */
    size_t gpu_state_params, cpu_state_end;
    /* [gpu_state_params, stream_end) the streamed sub-groups' (plan_group_streamed): states in
     * CPU memory, gradients on the device beside the GPU sub-groups' */
    size_t stream_end;
    int *ooc_index;             /* per sub-group: its index in oa when its states are on SSD */
    /* device memory */
    void *wbuf[PIPE_MAX_RING], *wedge, *gbuf[PIPE_MAX_RING], *gedge;
    /* the GPU sub-groups' weights, gradients and states, flat layout [0, gpu_state_params)
     * (wedge and gedge point at their start) */
    uint8_t *gpu_w, *gpu_g;     /* gpu_g: [0, stream_end) */
    float *gpu_master, *gpu_m, *gpu_v;
    /* a streamed sub-group's states and new weights on the device: master, m, v (fp32) and the
     * weights, each of the group's size, end to end (ARCHITECTURE.md, GPU state slots) */
    uint8_t *stream_slot[PLAN_STREAM_SLOTS];
    size_t stream_slot_params; /* the largest streamed sub-group's */
    void *act_slot[PIPE_MAX_RING]; /* the activation ring, both ways (ARCHITECTURE.md) */
    void **kept, *scratch, *final_res;
    double dev_bytes[MEM_TAG_COUNT];
    /* host memory */
    HostPool pool;
    uint8_t *w_home;            /* weights on the CPU, flat layout from gpu_state_params */
    uint8_t *pinned_w[PIPE_MAX_RING], *edge_stage;
    float *master, *m, *v;      /* states in CPU memory, flat layout [gpu_state_params,
                                   cpu_state_end) */
    bool moments_fresh;         /* m and v as the host pool gave them (zeros): unwritten */
    uint8_t *gpu_stage;         /* the GPU states' way in and out (footprint_gpu_stage_bytes) */
    size_t gpu_stage_params;
    uint8_t *state_slot[PIPE_MAX_RING];
    size_t state_slot_bytes;    /* each (footprint_state_slot_bytes) */
    uint8_t *host_grads[PIPE_MAX_RING];
    float *grad_sum;            /* micro-batches > 1: the whole model's gradients, fp32 */
    uint8_t *grad_bounce;       /* ... and where one block's land before they are added */
    uint8_t **act_cpu;          /* per block */
    uint8_t *stage_out[2], *stage_in[2];
    /* SSD */
    Store st;
    bool store_opened;
    bool budget_short;         /* pipe_mem_init refused the plan: a budget, or the memory the
                                  machine has, is short of it */
    char tmp_dir[256];          /* made for this run when no --ssd-dir was given */
    OocAdam oa;                 /* the sub-groups' states, when on SSD */
    StoreTensor *w_ssd, w_ssd_edge, *ckpt_ssd, *inner_ssd;
    double ssd_bytes[MEM_TAG_COUNT];
    /* the SSD tier's checksums (pipe_mem_sums_take): a CRC-32C per chunk of the store's space,
     * the chunks every extent starts at; sum_set says which were taken */
    uint32_t *sums;
    uint8_t *sum_set;
    uint64_t n_sums;
} PipeMem;

/* Places, sizes, checks the budgets and allocates everything for plan p (the device created
 * with wp; the host memory's pages put in RAM on host_wp's threads, NULL: the kernel's one).
 * The caller owns m and frees it with pipe_mem_free (safe after a failure). 0 or -errno with e
 * naming the budget and the shortfall, the directory, or the allocation. */
int pipe_mem_init(PipeMem *m, const ModelConfig *c, const Plan *p, int B, int T,
                  const PipeConfig *pc, WorkPool *wp, WorkPool *host_wp, Err *e);
void pipe_mem_free(PipeMem *m);

/* The device address of block b's tensor x as forward (backward false) or backward sees it;
 * slot is the task's gpu_acts. */
void *pipe_mem_tensor(const PipeMem *m, int b, int x, bool backward, int slot);
/* Where sub-group s's new weights go in a state slot on their way to SSD: each block's (and,
 * in the tail, the edges') at a 4 KiB-aligned offset, as the store wants. Returns the number of
 * pieces (at most PIPE_MAX_PIECES): piece k covers parameters [first[k], first[k] + count[k])
 * of the group's slice and starts at byte off[k] of the slot. */
enum { PIPE_MAX_PIECES = 4096 };
int pipe_mem_update_pieces(const PipeMem *m, int s, size_t *first, size_t *count, size_t *off);

/* Block b's weights and gradients where they stay on the device (plan_block_on_gpu; the
 * gradients also for a streamed sub-group's block, plan_grads_on_gpu), or NULL for a block
 * whose weights or gradients pass through the rings. */
void *pipe_mem_gpu_weights(const PipeMem *m, int b);
void *pipe_mem_gpu_grads(const PipeMem *m, int b);
/* Where the weights from parameter at on live in CPU memory (the plan's weights there; at is
 * at or past gpu_state_params). */
uint8_t *pipe_mem_w_home(const PipeMem *m, size_t at);

/* Whether tensor x of a block moves in a copy of cargo: the input in the checkpoint's
 * (CARGO_CKPT), every other tensor off the GPU in the inner activations' (CARGO_ACTS). */
bool pipe_mem_moves_with(const PipeMem *m, int x, Cargo cargo);
/* Where block b's tensor x lives between forward and backward (a Home). */
static inline int pipe_mem_home(const PipeMem *m, int b, int x)
{
    return m->home[b * m->n_tensors + x];
}

/* Writes the whole state from flat fp32 arrays (weights are the master's value in the
 * device's weight type; m, v may be NULL for zeros; params may be m->master itself). */
int pipe_mem_put_state(PipeMem *m, const float *params, const float *mo, const float *vo,
                       Err *e);
/* Values [begin, begin + n) of the state's part (0 master weights, 1 Adam's m, 2 its v) into
 * dst, for a checkpoint written range by range: an SSD sub-group is read whole into the first
 * state slot and kept there while *cached names it (-1 before the first call: the run at rest,
 * the slot free). 0 or -errno with e. */
int pipe_mem_read(PipeMem *m, int part, size_t begin, size_t n, float *dst, int *cached,
                  Err *e);
/* The starting state range by range, never the whole model in host memory beyond the plan's
 * own buffers: fill puts the n values of [begin, begin + n) into params, and every value of m
 * and v where it is given them (NULL: they start at zero). The ranges come front to back,
 * each where the last ended: the GPU sub-groups' through the GPU staging piece by piece, each
 * CPU-resident sub-group's in place (into its master weights and moments), then each SSD
 * sub-group's through the first state slot. 0 or -errno with e, which stops the fill. */
typedef int (*PipeMemFill)(void *user, size_t begin, size_t n, float *params, float *m,
                           float *v, Err *e);
typedef struct PipeMemFiller {
    PipeMemFill fill;
    void *user;
    bool moments;       /* fill writes Adam's m and v (a checkpoint's); else they start at 0 */
    WorkPool *wp;       /* the weights converted from the master values on its threads (NULL:
                           the caller's) */
    Progress *progress; /* told the parameters put in place so far (NULL: nothing) */
    size_t grain;       /* fill is fastest over ranges of a multiple of grain values that
                           start at one (0: any): the GPU staging takes such ranges when it
                           holds one */
} PipeMemFiller;
int pipe_mem_fill_state(PipeMem *m, const PipeMemFiller *f, Err *e);

/* The table, one entry per chunk of everything allocated in the store (each extent starts at
 * a chunk), once the store's extents are: pipe_mem_init's. 0 or -ENOMEM. */
int pipe_mem_sums_alloc(PipeMem *m, Err *e);

/* The SSD tier's checksums. Every extent (a block's weights, a sub-group's states, a block's
 * checkpoint or inner activations) is written and read whole; when it is written, sums_take
 * keeps a CRC-32C of each of its chunks (the store's chunk_bytes; 4 bytes of host memory per
 * chunk), and when it is read back sums_check compares, before anything uses the bytes. They
 * touch only buf and t's own entries, never the store, so they run on any thread (the
 * pipeline's checksum lanes, pipe_exec.h), one call per extent at a time, ordered against each
 * other as the extent's write and read are. t is one of m's extents and buf its t->bytes. */
void pipe_mem_sums_take(PipeMem *m, const StoreTensor *t, const void *buf);
/* 0, or -EBADMSG with e naming the file, the offset and the bytes that differ (the first chunk
 * that does), or -EIO for an extent that was never written. The chunks are checked on wp's
 * threads (NULL: the caller's alone); the error is the same either way. */
int pipe_mem_sums_check(const PipeMem *m, const StoreTensor *t, const void *buf, WorkPool *wp,
                        Err *e);

/* rc, an error of a run that read the SSD tier, with e's line told what to do when a read
 * found other bytes than were written there (-EBADMSG, pipe_mem_sums_check). Returns rc. */
int pipe_mem_ssd_error(int rc, Err *e);

/* The footprint table of what was allocated, at its peak. */
void pipe_mem_measured(const PipeMem *m, Footprint *f);
/* The plan's table on this device's sizes (footprint_compute_lane): what pipe_mem_init checks
 * the budgets with and then allocates, term by term. */
void pipe_mem_planned(const PipeMem *m, Footprint *f);


#endif
