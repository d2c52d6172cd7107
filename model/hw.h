/* hw: the hardware description, read from an ini file ([gpu] [pcie] [cpu] [ssd] [memory], and
 * optionally [price], what the machine costs, for fuyou-sim --cost).
 *
 * Every number is in the unit its key names (GBps = 1e9 bytes/s, GiB = 2^30 bytes, TFLOPS = 1e12
 * FLOP/s, us = microseconds). Bare names such as "4090.ini" or "4090" resolve to the presets
 * compiled into the binary (model/presets/); anything with a '/' or an existing file is read from
 * disk. `section.key=value` overrides apply after the file, before validation, for what-if sweeps.
 * Every number has a plausible range (the key table in hw.c: bandwidths 0.001 to 10000 GBps,
 * latencies up to 10 ms, ...); a value outside it is refused, naming the key and the range. Only
 * regular files are read (regfile.h).
 * This module describes hardware; turning it into task durations is costmodel/'s job. */
#ifndef FUYOU_HW_H
#define FUYOU_HW_H

/* The most memory a tier may have, in GiB (1 PiB): [gpu] mem_GiB, [memory] cpu_mem_GiB, and
 * the programs' --gpu-mem and --cpu-mem (hw_set_budgets). */
#define HW_MAX_MEM_GIB 1048576
/* The most [ssd] capacity_GB of one device (10 PB), and of all of them together (fuyou-sim
 * --ssd-capacity, hw_set_ssd_bytes). */
#define HW_MAX_SSD_GB 1e7

#include <stdint.h>
#include <stdio.h>

#include "fuyou_err.h"

enum { HW_CURVE_MAX = 16 };

/* An efficiency (fraction of bf16_TFLOPS) against a size, n points of dim:eff.
 * gemm_efficiency: against a GEMM's effective size, the harmonic-style mean
 * 3 / (1/m + 1/n + 1/k) of its dimensions (N for an N^3 GEMM): interpolated monotonically (GSL's
 * Steffen method) in log2 of the size, clamped at the ends.
 * attn_efficiency: against the head size, whole numbers; a head size takes the point of that
 * size, else the nearest in log2 (the smaller on a tie), never a value between two: different
 * head sizes run different kernels (exec/cuda/flash_attention.cu). One bare number, for every
 * head size, is n = 1 with dim[0] = 0. */
typedef struct HwCurve {
    int n;
    double dim[HW_CURVE_MAX]; /* strictly increasing */
    double eff[HW_CURVE_MAX]; /* gemm in [1e-4, 1.2], attn in [1e-3, 1] */
    double logdim[HW_CURVE_MAX]; /* log2(dim), the interpolation's x (gemm) */
    void *interp;             /* gsl_interp, built by hw_load (gemm) */
} HwCurve;

typedef struct Hardware {
    char source[256]; /* the preset name or path it was loaded from */

    /* [gpu] */
    char gpu_name[64];
    double gpu_mem_GiB;
    double gpu_bf16_TFLOPS;     /* dense tensor peak, fp32 accumulate */
    double gpu_fp32_TFLOPS;
    double gpu_mem_GBps;        /* device memory bandwidth, for memory-bound kernels */
    double gpu_launch_us;       /* per-kernel gap */
    double gpu_task_us;         /* optional: the executor's own time around each GPU task (its
                                   lane's wait on the task's end event, the next task's
                                   dispatch), beyond its kernels'; 0: none */
    HwCurve attn;               /* attn_efficiency = eff, or head_size:eff head_size:eff ... */
    HwCurve gemm;               /* gemm_efficiency = dim:eff dim:eff ... */
    double gpu_nvlink_GBps;     /* NVLink to the node's other GPUs, each direction; 0: none
                                   given (optional; the tensor-parallel baseline's all-reduces) */

    /* [pcie] */
    double h2d_GBps, d2h_GBps;             /* pinned, each direction alone */
    double h2d_bidir_GBps, d2h_bidir_GBps; /* each direction while the other runs */
    double pcie_latency_us;

    /* [cpu] */
    char cpu_name[64];
    int cpu_cores;
    double cpu_mem_GBps;       /* host memory, bytes read plus written; the cores, PCIe and
                                  SSD transfers share it (costmodel/cost.h) */
    double adam_Gparams_per_s; /* the CPU Adam task (the pipeline's: gradient norm and AdamW)
                                  at the pipeline's thread count, alone */
    double cpu_sum_GBps;       /* the micro-batch gradient sum at its threads' count, alone
                                  (optional; 0: mem_GBps times their share of the cores) */

    /* [ssd] */
    char ssd_name[64];
    int ssd_count;           /* devices striped (RAID-0 or one store directory each) */
    double ssd_read_GBps;    /* per device, sequential, large blocks, O_DIRECT */
    double ssd_write_GBps;
    double ssd_duplex;       /* reads and writes together: r/read + w/write <= duplex (1..2) */
    double ssd_read_bidir_GBps, ssd_write_bidir_GBps; /* optional, together: each direction's
                                rate per device while the other runs (measured); given, they
                                replace duplex's shares. 0: not given */
    double ssd_host_GBps;    /* the host path's ceiling, all devices together, reads plus
                                writes; 0: none (optional) */
    double ssd_latency_us;
    double ssd_capacity_GB;  /* per device, usable */

    /* [memory] */
    double cpu_mem_GiB;      /* host memory */
    double cpu_reserved_GiB; /* kept for the OS and the rest of the process */
    double gpu_reserved_GiB; /* CUDA context, cuBLAS workspace, allocator slack */

    /* [price], US dollars, each optional (0: not given) */
    double price_gpu_usd;    /* one GPU of [gpu] */
    double price_ssd_usd;    /* one SSD of [ssd] (the machine has [ssd] count of them) */
    double price_host_usd;   /* the rest of the machine: CPUs, DRAM, board, chassis */
} Hardware;

/* Loads hardware from a preset name or a path, applies the overrides (each "section.key=value"),
 * then checks that every required key is present and consistent. On success the caller owns hw
 * and frees it with hw_free. Returns 0, -ENOENT (unknown preset, missing file) or -EINVAL (bad
 * content), with e naming file:line or the key and what to do. hw_free is safe on failure. */
int hw_load(const char *name_or_path, const char *const *overrides, int n_overrides,
            Hardware *hw, Err *e);
void hw_free(Hardware *hw);

/* Writes hw as an ini that hw_load reads back to the same values: every key that is set
 * (optional ones left unset, and a section all of whose keys are, are left out), each after
 * what note(ctx, section, key) says, as `; ` comment lines, when it says something (where the
 * number came from). 0, -EIO, or -E2BIG when a value (a curve of many points) makes a
 * line longer than an ini reader takes (INIFILE_LINE_MAX); nothing is written after that line. */
typedef const char *(*HwNoteFn)(void *ctx, const char *section, const char *key);
int hw_write(FILE *f, const Hardware *hw, HwNoteFn note, void *ctx);

/* The comment lines right above [section] key in a description (a preset name or a path, as
 * hw_load takes it, read by inih's rules: `;` or `#` lines, `key = value` or `key: value`, text
 * after a section's `]` ignored), then its inline comment (`; ...` after the value), their
 * prefixes dropped and joined by spaces into out (n bytes, cut short if need be): where that
 * value came from. 1 when there is such a comment, 0 when the key has none or is absent,
 * -errno when the file cannot be read (regfile.h's for what is not a regular file, -EFBIG past
 * 1 MiB). */
int hw_comment(const char *name_or_path, const char *section, const char *key, char *out,
               size_t n);
/* A description's whole text as hw_comment reads it: 0 with *text set (and *owned, NULL for a
 * preset, for the caller to free), or hw_comment's -errno. */
int hw_description_text(const char *name_or_path, const char **text, char **owned);
/* hw_comment over a text hw_description_text read: many keys of one description, read once.
 * 1 or 0 as hw_comment. */
int hw_comment_in(const char *text, const char *section, const char *key, char *out, size_t n);

/* Names of the shipped presets ("4090.ini", ...), NULL past the end. */
const char *hw_preset_name(int i);

/* GEMM efficiency (fraction of bf16 peak) for an (m x k) by (k x n) product. */
double hw_gemm_efficiency(const Hardware *hw, int64_t m, int64_t n, int64_t k);
/* Attention efficiency (fraction of bf16 peak, forward and backward kernels) for heads of
 * head_size (>= 1): attn_efficiency's point of that head size, else the nearest in log2 (the
 * smaller on a tie); not interpolated (HwCurve). */
double hw_attn_efficiency(const Hardware *hw, int64_t head_size);

/* Capacities in bytes after the reserves; SSD is all devices together. */
double hw_gpu_bytes(const Hardware *hw);
double hw_cpu_bytes(const Hardware *hw);
double hw_ssd_bytes(const Hardware *hw);
/* Gives the devices together `bytes` (at most HW_MAX_SSD_GB): capacity_GB of each is
 * bytes / 1e9 / count; their count and rates stay (fuyou-sim --ssd-capacity, applied after
 * hw_load and its overrides). */
void hw_set_ssd_bytes(Hardware *hw, double bytes);
/* Gives the GPU and the host memory these capacities, nothing reserved: what a plan may use
 * (--gpu-mem, --cpu-mem). 0 leaves that tier as the ini has it. */
void hw_set_budgets(Hardware *hw, double gpu_bytes, double cpu_bytes);

#endif
