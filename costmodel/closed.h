/* closed: the closed-form iteration time of a plan, without simulation.
 *
 * Each phase's work is summed per resource as "alone" seconds (the time it would take with
 * nothing else on its resource); a phase takes as long as its most loaded resource, with the
 * coupled links combined exactly as the simulator's rates couple them:
 *   pcie(a, b) = max(b + a (1 - rho_d) / rho_h,  a + b (1 - rho_h) / rho_d)
 *                a = h2d alone s, b = d2h alone s, rho_h = h2d_bidir/h2d, rho_d = d2h_bidir/d2h
 *   ssd(r, w)  = max(r + c w, w + c r, (r R + w W) / H),  c = 2 / duplex - 1, R and W the
 *                SSDs' rates alone, H = ssd.host_GBps (the last term only when it is given);
 *                with read_bidir and write_bidir given, the two at those rates until one
 *                ends, the rest alone, in place of the duplex terms
 *   gpu        = the op tasks' times, each with its gpu.task_us lead
 *   mem        = sum over resources of load * rate alone * host bytes per unit of work, over
 *                the host memory ceiling D (cost.h): the phase's host memory bytes
 *   phase      = max(gpu, cpu_adam, pcie(h2d, d2h), ssd(ssd_read, ssd_write), mem)
 * mem is a lower bound: the phase is at least as long as its host memory traffic takes at D.
 * It is exact when the phase's memory-bound resources overlap from end to end; where they
 * overlap in part (a weight copy during a fraction of a long Adam) the simulator slows the
 * Adam while the copy runs, so the phase is longer than both mem and the Adam alone, and the
 * closed form is optimistic; it also leaves out the cores a gradient sum's threads take from
 * the Adam, and counts a gradient sum's host bytes at its link's rate (the simulator does
 * neither: the planner simulates each candidate configuration, the closed form picks only the
 * swap amount within one). A
 * phase bound by mem names as binding the resource that moves the most of those bytes. A copy
 * that runs by itself (stalls, the fill, the tail's chain) takes its alone seconds on the SSDs
 * at the host path's ceiling where that is lower.
 * FORWARD and BACKWARD are each the larger of two sums: the phase formula over the phase's
 * total loads (perfect overlap), and the sum over blocks of the phase formula over each block's
 * own loads (the pipeline advances block by block, so one block's heavy copy cannot hide behind
 * other blocks' compute; the two agree when blocks are alike). Every term is a maximum of
 * lines in the loads, so the time is convex in any amount the loads depend on linearly (the
 * planner relies on this).
 *
 * The terms, per micro-batch unless said (P_b block parameters, w weight bytes, L blocks, r
 * blocks resident across the forward/backward turn, rates as in cost.h):
 *   FORWARD   gpu  = sum of forward op times
 *             h2d  = L P_b w / h2d  (+ embedding and head once), weights away from the GPU
 *             d2h  = swapped activation bytes / d2h;   ssd_write = SSD-bound ones / write
 *             ssd_read = weight bytes / read, weights on SSD
 *   BACKWARD  gpu  = recomputation + backward op times
 *             h2d  = (L - r) P_b w / h2d + swapped activation bytes / h2d
 *                    (+ P w / h2d zero-infinity: the gradients back from the CPU buffer)
 *             d2h  = P w / d2h (gradients; none with the optimizer on the GPU)
 *             zero-infinity, last micro-batch: d2h += 4 P / d2h (fp32 gradients);
 *               ssd_write += 4 P_s / write, P_s the parameters of sub-groups but the tail with
 *               states on SSD
 *             ssd_read = (L - r) P_b w / read (SSD weights) + SSD activation bytes / read
 *             fuyou, last micro-batch, every sub-group but the tail (P_o parameters):
 *               cpu_adam += P_o / adam rate;  ssd_read += 12 P_o / read;
 *               ssd_write += (12 + w [SSD weights]) P_o / write  (states on SSD)
 *   TAIL      fuyou: the tail sub-group's Adam, then its new weights written (SSD) or copied
 *             (GPU) before the next forward can load them; zero-infinity: DeepSpeed's step, a
 *             chain with nothing overlapped (ARCHITECTURE.md): the tail's fp32 gradients
 *             written (4 P_t), then per sub-group states and gradients read (16 B a
 *             parameter on SSD), Adam, new weights and states written ((w + 12) B), each alone:
 *             P / adam + solo(16 P_ssd / read) + solo((4 P_t + 12 P_ssd + w P) / write)
 *   FILL      the first block's and the embedding's weights read and copied before compute
 *   PREFETCH 0: a block's inbound copies (weights, activations) wait for the previous block's
 *             compute, so their alone seconds are added to the GPU line of their phase
 *   ONE ACTIVATION BUFFER: likewise a block's swapped activations' copies (out in forward, in
 *             in backward) serialize with compute
 *   ZERO-INFINITY'S GRADIENTS: with one gradient buffer (DeepSpeed's) the next block's backward
 *             waits for a block's 16-bit gradient out (as far as it outlasts the inbound copies
 *             it runs beside at depth 0) and back, and in the last micro-batch its fp32 copy
 *             out: added to the GPU line of backward; with more buffers, at depth 0, the way
 *             back (it holds the link the next load waits for). The edges' likewise.
 *   iteration = M * FORWARD + M * BACKWARD + TAIL + FILL    (M micro-batches) */
#ifndef FUYOU_CLOSED_H
#define FUYOU_CLOSED_H

#include "cost.h"
#include "plan.h"

typedef enum CfPhase { CF_FORWARD, CF_BACKWARD, CF_TAIL, CF_PHASES } CfPhase;

typedef struct ClosedForm {
    double load_s[CF_PHASES][RES_COUNT]; /* alone seconds per phase and resource (backward: the
                                            last micro-batch's, with the optimizer work) */
    double phase_s[CF_PHASES];
    Resource binding[CF_PHASES];         /* the resource that sets each phase's time */
    double stall_s[CF_PHASES];           /* of the GPU's load: waiting on copies it cannot
                                            overlap (prefetch depth 0, one activation buffer) */
    double fill_s;
    double iter_s;
} ClosedForm;

const char *cf_phase_name(CfPhase p);

/* The closed-form time of plan p for graph g on hw. */
void cost_closed_form(const Hardware *hw, const Graph *g, const Plan *p, ClosedForm *cf);

/* A phase's time from its per-resource alone seconds; binding gets the resource that sets it. */
double cost_phase_s(const Hardware *hw, const double load_s[RES_COUNT], Resource *binding);

/* Every op task's GPU seconds (cost_gpu_task_s) of graph g on hw, in each kind, and which
 * blocks' ops are alike, for a search that evaluates the closed form of many plans of one
 * graph: the planner's, a hundred amounts per configuration, would otherwise price every op of
 * every block again each time, and work out the loads and phase time of every block where
 * most are their predecessor's again (alike ops, activations and weight reloads: a GPT's
 * blocks under the ladder). A plan changes which op tasks run, never what one takes, and a
 * block like its predecessor has its loads, so cost_closed_form_priced gives
 * cost_closed_form's numbers, bit for bit. */
typedef struct ClosedPrices {
    const Hardware *hw;
    const Graph *g;
    double *task_s; /* (n_ops, 3): TASK_FWD, TASK_RECOMPUTE, TASK_BWD */
    bool *alike;    /* per block: its ops priced and kept as the previous block's */
} ClosedPrices;

/* Prices g's ops on hw; cp borrows both. Returns 0 or -ENOMEM (then cp holds no prices and
 * cost_closed_form_priced prices each op as it goes: the same numbers, slower). Freed by
 * cost_closed_prices_free, safe after a failure. */
int cost_closed_prices_init(ClosedPrices *cp, const Hardware *hw, const Graph *g);
void cost_closed_prices_free(ClosedPrices *cp);

/* cost_closed_form(cp->hw, cp->g, p, cf) with the op tasks' seconds of cp. */
void cost_closed_form_priced(const ClosedPrices *cp, const Plan *p, ClosedForm *cf);

#endif
