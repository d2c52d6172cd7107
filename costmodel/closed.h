/* closed: the closed-form iteration time of a plan, without simulation.
 *
 * Each phase's work is summed per resource as "alone" seconds (the time it would take with
 * nothing else on its resource); a phase takes as long as its most loaded resource, the coupled
 * links combined as the simulator's rates couple them (cost.h), host memory a lower bound.
 * FORWARD and BACKWARD are each the larger of the phase formula over the phase's total loads
 * and the sum of it over each block's own loads; iteration = M * FORWARD + M * BACKWARD + TAIL
 * + FILL for M micro-batches. Every term is a maximum of lines in the loads, so the time is
 * convex in any amount the loads depend on linearly (the planner relies on this). It is
 * optimistic where memory-bound resources overlap in part; the planner simulates each
 * candidate configuration and uses this form only to pick the swap amount within one.
 * The formulas, term by term: ARCHITECTURE.md, "The closed form". */
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
