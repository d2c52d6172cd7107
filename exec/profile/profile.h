/* profile: measurements of this machine for fuyou-profile, each repeated and summarised
 * (median, least and greatest, sample count, via GSL), on the code paths the executor uses:
 * the pipeline's Adam task (gradient norm + AdamW, bf16 gradients and weights) by thread
 * count, host memory bandwidth, and the io_uring store's sequential read, write, and read and
 * write together over every store directory (and the [ssd] keys they give). The GPU's are in
 * cuda_device.h. */
#ifndef FUYOU_PROFILE_H
#define FUYOU_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "device.h"
#include "fuyou_err.h"
#include "hw.h"

typedef struct Stat {
    double median, min, max;
    int n;
} Stat;

/* Summarises x[0..n) (reordered). */
void profile_stat(double *x, int n, Stat *s);

/* The Adam task on threads threads over params parameters, reps times: G params/s. 0 or
 * -errno with e. */
int profile_adam(int threads, size_t params, int reps, Stat *gparams, Err *e);
/* The same, each run's G params/s into x[0..reps) (for samples taken at several times). */
int profile_adam_runs(int threads, size_t params, int reps, double *x, Err *e);

/* Copying bytes between two host buffers on threads threads, reps times: GB/s of memory
 * traffic (bytes read plus bytes written). */
int profile_memory(int threads, size_t bytes, int reps, Stat *GBps, Err *e);

/* The pipeline's sum of a later micro-batch's gradients into the step's (grad_sum_add, params
 * bf16 gradients into fp32) on threads threads, reps times: GB/s of memory traffic as
 * grad_sum_bytes counts it (model.h). */
int profile_grad_sum(int threads, size_t params, int reps, Stat *GBps, Err *e);

/* The store over dirs (O_DIRECT where the file system has it): bytes written, then read back,
 * then one tensor read while another is written; GB/s of each over all directories together. */
typedef struct SsdProfile {
    Stat write_GBps, read_GBps;
    Stat duplex_read_GBps, duplex_write_GBps; /* each direction while the other runs */
    double free_GB;                           /* the least free space among dirs */
    bool direct;                              /* O_DIRECT was available */
} SsdProfile;
int profile_ssd(const char *const *dirs, int n_dirs, size_t bytes, int reps, SsdProfile *p,
                Err *e);

/* The Adam task (as profile_adam) while the store streams over dirs on a thread of its own
 * (one tensor of bytes read while another is written, over and over, as the pipeline's SSD
 * lanes run during backward): Adam's G params/s and the store's GB/s, read plus written,
 * meanwhile. They share the host's memory bandwidth (the cost model's host-memory sharing,
 * ARCHITECTURE.md, predicts how much). 0 or -errno with e. */
int profile_adam_under_io(int threads, size_t params, int reps, const char *const *dirs,
                          int n_dirs, size_t bytes, Stat *gparams, double *io_GBps, Err *e);

/* The Adam task (as profile_adam) while load runs on a thread of its own: Adam's G params/s,
 * and *load_GBps what the load reports. The load runs until stopped(token) and reports the GB/s
 * of the work it did while counting(token) held, each piece asked before and after (the Adam's
 * timed runs, which start once the load first asked). 0 or -errno with e (the load's error
 * first). */
typedef struct ProfileLoadControl {
    bool (*stopped)(void *token);
    bool (*counting)(void *token);
    void *token;
} ProfileLoadControl;
typedef int (*ProfileLoad)(void *ctx, const ProfileLoadControl *lc, double *load_GBps, Err *e);
int profile_adam_beside(int threads, size_t params, int reps, ProfileLoad load, void *ctx,
                        Stat *gparams, double *load_GBps, Err *e);

/* The executor's own time around each GPU task (gpu.task_us): n empty compute tasks
 * (DeviceOps.compute_empty: issued and timed by the device's events as a compute task, with no
 * work) through a queue lane (lane.h) kept LANE_DEPTH deep, the caller waiting for each end as
 * the pipeline's dispatcher does (lane_poll, then device_wait_bell) and posting the next. Each
 * gap runs from one task's end on the device to the next one's start: what the GPU waits for
 * the host when a task is shorter than the host's time to see the one before end, post and
 * issue the next (longer tasks hide it). gap_us summarises the n - 1 gaps (median, least,
 * greatest), *mean_us is their mean (what they add to a schedule). A device without timers of
 * its own (the CPU reference) is timed by the lane's clock. 0 or -errno with e (no device of
 * ops here, n below 2). */
int profile_dispatch(const DeviceOps *ops, int n, Stat *gap_us, double *mean_us, Err *e);
/* The same as a load beside the Adam task (profile_adam_beside, ctx a DispatchLoad): tasks
 * until stopped, the gaps of those that ran while counting summarised into the DispatchLoad;
 * it reports 0 GB/s. */
typedef struct DispatchLoad {
    const DeviceOps *ops;
    Stat gap_us;
    double mean_us;
} DispatchLoad;
int profile_dispatch_load(void *ctx, const ProfileLoadControl *lc, double *load_GBps, Err *e);

/* A shortfall below this fraction of n devices' own bandwidth is the host path's, not noise. */
#define PROFILE_HOST_BOUND 0.9

/* The [ssd] keys of hw from the store measured over n_dirs directories, one device each (all)
 * and, with several, over the first alone (one; NULL with one directory): count = n_dirs;
 * read_GBps and write_GBps all's medians over n_dirs (so count times each is what was measured);
 * duplex_factor = all's read and write together over alone, r2/r + w2/w, within [1, 2];
 * read_bidir_GBps and write_bidir_GBps those rates together over n_dirs (at most alone's); and
 * host_GBps, the most all moved (read alone, write alone, or read plus write together), when it
 * falls short of PROFILE_HOST_BOUND times n_dirs times the most one moved: the host path bound
 * the stripes. Otherwise, and with one directory (a device's own limit cannot be told from its
 * path's), host_GBps is 0: no ceiling. Returns host_GBps's shortfall ratio, all over n_dirs
 * times one (1 with one directory), for the note. */
double profile_ssd_keys(const SsdProfile *all, const SsdProfile *one, int n_dirs, Hardware *hw);

/* One GEMM: m rows (tokens), n outputs, k inputs. */
typedef struct GemmShape {
    int m, n, k;
} GemmShape;

/* The distinct forward GEMM shapes of the model presets' layer graphs (every preset up to
 * max_params parameters, micro-batches of `tokens` tokens), at most max; the count. The
 * backward's two products of a shape have the same size to hw_gemm_efficiency (the harmonic
 * mean of m, n, k), so its curve is measured on these. */
int profile_gemm_shapes(int64_t max_params, int tokens, GemmShape *out, int max);

/* The gemm_efficiency curve from n measured points (size: the harmonic mean of m, n, k;
 * eff: measured TFLOP/s over the dense peak): the median size and efficiency of each octave of
 * size that has points, at most HW_CURVE_MAX, sizes increasing. Sets c->dim, c->eff and c->n
 * (hw_load's interpolation is not built here). 0, or -EINVAL when n is 0. */
int profile_gemm_curve(const double *size, const double *eff, int n, HwCurve *c);

/* The attn_efficiency curve from n measured points (head_size, >= 1; eff: the kernels' work
 * over their time at the dense peak): each head size that has points once, increasing, at the
 * median of its points' efficiencies; at most HW_CURVE_MAX head sizes, the smallest. Sets
 * c->dim, c->eff and c->n. 0, or -EINVAL when n is 0. */
int profile_attn_curve(const int *head_size, const double *eff, int n, HwCurve *c);

/* The device's memory-bound kernels as the cost model times them, seconds = bytes / B + l,
 * from n (bytes, seconds) points: B the least-squares slope through the points of at least
 * beyond bytes (the tensors training streams are larger than the device's cache, which smaller
 * kernels run in, faster: fitted with them, B overstates what a large task moves), l the
 * intercept that line leaves the smaller points, each weighted by 1 / seconds^2 (the small
 * kernels fix it). 0 with *GBps = 1e-9 / slope and *launch_us = l in us (at least 0), or
 * -EINVAL with fewer than 2 points of beyond bytes or more, a time that is not positive, or a
 * slope that is not. */
int profile_mem_fit(const double *bytes, const double *seconds, int n, double beyond,
                    double *GBps, double *launch_us);

#endif
