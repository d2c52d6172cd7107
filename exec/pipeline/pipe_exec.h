/* pipe_exec: the dispatcher and the lanes' jobs of the out-of-core pipeline (pipeline.h): what
 * each schedule task does on its lane, and the loop that releases tasks as their dependencies
 * end. Internal to the pipeline; the training loop around it is pipeline.c. */
#ifndef FUYOU_PIPE_EXEC_H
#define FUYOU_PIPE_EXEC_H

#include "heap.h"
#include "lane.h"
#include "pipe_mem.h"
#include "trace.h"

/* The thread lanes: the compute, copy and optimizer tasks', and the SSD tasks' checksums (a read's
 * checked, a write's taken; pipe_mem_sums_*), which never run on the dispatcher's thread. */
enum { LANE_GPU, LANE_H2D, LANE_D2H, LANE_ADAM, LANE_SUMS_READ, LANE_SUMS_WRITE, N_THREAD_LANES,
       MAX_COPIES = ARCH_MAX_TENSORS + 2 };
enum { MAX_IO = 64, IO_DEPTH = 2 };

typedef struct CopyJob {
    bool to_device;
    int n;
    DeviceCopy c[MAX_COPIES];
    DeviceSpan span;            /* out: when the copies (and the sum) ran */
    /* micro-batches > 1: then sum[i] += bounce[i] over n_add gradients of grad_type (sum
     * starting from 0 at the first micro-batch) */
    float *sum;
    const void *bounce;
    DType bounce_type;
    size_t n_add;
    bool first;
} CopyJob;

typedef struct AdamJob {
    int group, iter;
    AdamStep step;
    float *master, *m, *v;
    const void *grad;
    size_t n;
    /* the new weights, in pieces (pipe_mem_update_pieces) */
    int n_out;
    size_t first[PIPE_MAX_PIECES], count[PIPE_MAX_PIECES];
    uint8_t *out[PIPE_MAX_PIECES];
    double sq; /* out: the sub-group's squared gradient norm */
} AdamJob;

/* The extents of one SSD task, whole, and their buffers: their checksums' job. */
typedef struct SumsJob {
    bool write;
    int n;
    const StoreTensor *t[MAX_IO];
    const void *buf[MAX_IO];
} SumsJob;

/* Where a write's checksums are: waiting for their lane, on it, or taken. */
typedef enum { SUMS_WAITING, SUMS_ON_LANE, SUMS_TAKEN } SumsState;

typedef struct IoJob {
    int n, req[MAX_IO];
    SumsJob sums;
    SumsState sums_state;       /* a write's */
    double issued_s;            /* when its task was issued to the store */
} IoJob;

/* One direction's SSD tasks in flight, oldest first: a second is issued behind the first, so
 * the device's queue does not drain between two tasks (the store cuts one request's pieces
 * until none are left before it turns to the next). */
typedef struct IoQueue {
    IoJob job[IO_DEPTH];        /* by count issued, modulo IO_DEPTH */
    unsigned issued, ended;
    double last_end;            /* when the task before ended, as the trace has it */
} IoQueue;

typedef struct Pipe {
    const TrainOptions *o;
    PipeMem mem;
    ModelLayout layout;
    WorkPool wp_adam, wp_compute;
    WorkPool wp_sum;            /* the D2H lane's, for adding micro-batch gradients */
    WorkPool wp_check;          /* the read checksums' lane's (pipe_mem_sums_check) */
    Lane lanes[N_THREAD_LANES];
    LaneBell bell;
    unsigned rings_seen;
    AdamIsa isa;
    /* the segment being run: its schedule, of this graph */
    const Graph *g;
    Schedule s;
    int *succ_first, *succ, *waiting;
    /* a compute task's dependencies that are compute tasks issued and not ended: once they
     * are all its waits, it is released to queue behind them (stream order) */
    int *on_stream;
    bool *released;             /* pushed to its ready queue */
    Heap ready[RES_COUNT];
    int running[RES_COUNT];     /* task index, or -1; the oldest, where two are in flight */
    int behind[RES_COUNT];      /* issued behind running[r], or -1: a compute task (stream
                                   order) or an SSD task (IoQueue) */
    double gpu_end;             /* when the last compute task ended, as the trace has it */
    ComputeCall calls[DEVICE_SLOTS]; /* the compute lane's jobs, by slot, in turn */
    unsigned calls_posted;
    DeviceSpan call_span[DEVICE_SLOTS]; /* out: when each ran */
    DeviceAdam gpu_adam;        /* the compute lane's job when its task is a GPU sub-group's
                                   AdamW (else a call); it runs alone on the lane */
    int gpu_adam_group, gpu_adam_iter;
    DeviceSpan gpu_adam_span;   /* out: when it ran */
    CopyJob copy[2];            /* h2d, d2h */
    AdamJob adam;
    IoQueue io[2];              /* ssd_read, ssd_write */
    /* a read whose bytes are in and being checked (LANE_SUMS_READ) while the next read runs:
     * its task, its times on the SSD, its extents; its successors wait for the check */
    int checking;
    double check_t0, check_t1;
    SumsJob check;
    bool quiet;                 /* an evaluation's DAG: no trace rows or busy time, and a
                                   stop asked waits for it to end */
    int iter0;                  /* run iteration of the segment's iteration 0 */
    int M;                      /* micro-batches per iteration */
    int *inputs, *targets;      /* per segment iteration x micro-batch, (B,T) each */
    double *sq;                 /* per segment iteration x sub-group */
    int *sq_count;
    float *losses;              /* per segment iteration x micro-batch */
    int64_t step0;              /* the optimizer step of run iteration 0, minus one */
    double prev_norm;           /* the clip policy's norm, of the step before */
    double *norms;              /* per segment iteration */
    int *iter_left;             /* per segment iteration: its tasks not yet ended */
    int stop_iter;              /* out: a stop was asked: the last segment iteration run; -1 */
    /* called as segment iteration i's last task ends, on the dispatcher's thread (NULL:
     * nothing): 0, or -errno with e, which stops the DAG as a task's failure does */
    int (*iter_done)(void *user, int i, Err *e);
    void *iter_user;
    /* the measured trace (task ids copied: a segment's schedule is freed before the next) */
    TraceRow *rows;
    char (*ids)[SCHED_ID_MAX];
    int n_rows, cap_rows;
    double t0;
    double busy[RES_COUNT];
} Pipe;

/* The lanes' job functions (lane.h), in LANE_* order; the compute lane is a queue lane, and
 * pipe_compute_ended its query. */
extern const LaneFn pipe_lane_fns[N_THREAD_LANES];
extern const LaneQueryFn pipe_compute_ended;

/* Runs the DAG in pp->s to its end. On a failure, stops releasing tasks, lets the ones in
 * flight finish, and returns the first error (-errno with e naming the task). When a stop is
 * asked (trainer_stop_signal), runs the iteration in flight (the first not yet ended) to its
 * end, starts no task of a later one, lets those in flight finish and returns 0 with
 * pp->stop_iter that iteration; nothing of a later iteration has changed the state (its tasks
 * before the backward read it only). Every task's start and end are appended to pp->rows. */
int pipe_run_dag(Pipe *pp, Err *e);

/* Points every trace row at its copied task id (after the last append, before writing). */
void pipe_trace_fix_ids(Pipe *pp);

#endif
