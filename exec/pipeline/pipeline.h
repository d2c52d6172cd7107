/* pipeline: the out-of-core executor. It trains by running model/schedule's task DAG for real:
 * every task of the schedule on its lane (compute on the device, H2D and D2H copies, SSD reads
 * and writes through the io_uring store, the CPU Adam), released by a dispatcher when its
 * dependencies are done, in the order the simulator's engine uses among ready tasks
 * (heap.h: priority, ready time, index), with no barrier the DAG does not state. State lives
 * where the plan says (weights and optimizer states in CPU memory or on SSD, each activation
 * kept on the device, swapped to CPU memory or SSD, or recomputed), in buffers whose reuse the
 * schedule's dependencies make safe (schedule.h, TaskSlots), under a device budget and a host
 * budget that are checked, for every allocation, before anything is allocated.
 *
 * The optimizer is Fuyou's: each sub-group's AdamW runs on the CPU as soon as its gradients
 * are there, during backward; the gradient norm of step t is summed over the sub-groups and
 * clips step t + 1 (ARCHITECTURE.md's numerics), so the losses and weights equal the in-memory
 * trainer's bit for bit on the CPU device. A run is cut into segments of iterations, one DAG
 * each (the schedule of that many iterations); a segment ends with everything at rest, which
 * is where checkpoints are written. Every task's start and end go to the measured trace, with
 * the schedule's task ids, in the simulator's schema (traces/). */
#ifndef FUYOU_PIPELINE_H
#define FUYOU_PIPELINE_H

#include <stdio.h>

#include "device.h"
#include "footprint.h"
#include "plan.h"
#include "store.h"
#include "trainer.h"

typedef struct PipeConfig {
    const DeviceOps *device;
    size_t gpu_budget;             /* bytes the device may hold; 0: no limit */
    size_t cpu_budget;             /* bytes of host memory (pinned); 0: what the plan needs */
    const char *ssd_dirs[STORE_MAX_DEVICES];
    int n_ssd_dirs;                /* 0: a temporary directory under /tmp (or $TMPDIR) */
    const char *trace_path;        /* measured trace, TSV (NULL: none) */
    const char *chrome_path;       /* the same as Chrome/Perfetto JSON */
    int segment_iters;             /* iterations per DAG (0: 8) */
    int optim_nice;                /* the CPU optimizer's and the micro-batch sums' threads'
                                      nice increment (workpool_init_nice; fuyou-run's default
                                      PIPE_OPTIM_NICE), 0: the lanes' priority */
    unsigned jitter_us;            /* tests: each thread lane waits up to this long before each
                                      job, at random (lane_set_jitter); 0: never */
} PipeConfig;

/* fuyou-run's --optimizer-nice default: a lane that wakes on a core an optimizer thread holds
 * should get it (MEASUREMENTS.md, "The optimizer's threads run at lower priority"). */
enum { PIPE_OPTIM_NICE = 10 };

/* The most threads that check one read from the SSD tier (a quarter of the cores up to this):
 * one thread's CRC-32C moves about a memory channel's worth, and a sub-group's states (a GB or
 * more) wait for their check before their update. */
enum { PIPE_CHECK_THREADS = 4 };

/* What a run used, for the report: bytes per footprint row and tier, measured at their peak
 * (the plan's prediction beside them), and the lanes' busy time. */
typedef struct PipeReport {
    Footprint measured, predicted;
    const char *device;        /* the device tier's name in the report: "gpu", or the device's */
    double budget[TIER_COUNT]; /* --gpu-mem, --cpu-mem (0: none given) */
    bool budget_short;         /* the plan was refused before anything was allocated: a
                                  budget (--gpu-mem, --cpu-mem) or the machine's memory is
                                  short of it */
    double busy_s[RES_COUNT];
    double elapsed_s;          /* the segments' wall time */
    int iterations;
    double steady_iter_s;      /* mean over iterations after each segment's first */
    /* this process's memory (its resident set): its peak, what it held before the plan's
     * buffers (the program's own: code, data, threads, the segment's arrays), and the plan's
     * buffers that are host memory (the cpu tier; with a device on the host, its tier too) */
    double host_peak_bytes, host_own_bytes, host_plan_bytes;
    double ssd_file_bytes;     /* what the SSD tier's store files reserve on disk: its tensors,
                                  each rounded up to the store's chunk (0: no store) */
} PipeReport;

/* Trains o->model for o->steps like trainer_run (same options, data order, learning rate,
 * clipping, micro-batches, checkpoints and results), out of core under plan. The plan owns the
 * step's division: its micro-batches and sub-groups are the ones run (o->n_micro,
 * subgroup_blocks and tail_blocks are trainer_run's); it must match the model, o->seq and
 * o->seqs_per_step (its n_micro of seqs_per_micro sequences); fp16 (loss scaling) is
 * refused. With micro-batches, the CPU keeps the step's gradient sum for the whole model in
 * fp32 (each block's gradients are added to it as they arrive) and the updates wait for the
 * last micro-batch.
 * 0 or -errno with e naming the task and the call that failed; rep may be NULL. */
int pipe_train(const TrainOptions *o, const Plan *plan, const PipeConfig *pc, TrainResult *r,
               PipeReport *rep, Err *e);

/* Prints rep: the footprint table, measured against predicted, and the lanes' busy time. */
void pipe_report_print(FILE *out, const PipeReport *rep);

/* A device's buffer sizes (device_ops: a DeviceOps) for micro-batches of B x T: what the
 * executor allocates per micro-batch, as plan_make.h's lane_sizes wants them, so that
 * fuyou-run --offload plans on the lane it runs. */
void pipe_lane_sizes(const void *device_ops, const ModelConfig *c, int B, int T,
                     LaneSizes *lane);

#endif
