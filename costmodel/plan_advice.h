/* plan_advice: what would make a plan that does not fit, fit; every answer checked by planning
 * again, none taken from a rule of thumb.
 *
 * For a plan plan_make made over capacity, each change a user can make to the options is
 * planned again (plan_make on the closed form, the same request otherwise): leaving out one
 * option given (and all of them); --swap none; the weights, the optimizer states or the
 * checkpoints on another tier; no sub-groups' states in CPU memory, on the GPU or streamed;
 * one buffer of a pool; sub-groups of one block; fuyou's policy for zero-infinity's. Where
 * none fits alone, those that helped are taken together, greedily (the one that helps most
 * with those taken first), and two all-at-once sets are tried: everything that spares GPU and
 * CPU memory (on the fewest and on the most micro-batches), and everything that spares the
 * SSD. A change is offered only where the plan it makes is short of fewer bytes (summed over
 * the tiers, footprint_short_bytes) than the plan was; a set of several that fits is cut to
 * the changes it needs. When nothing fits, the capacities that do: the tiers short raised to
 * what a plan needs there, the request as given planned again on them until one fits. The
 * workload (model, batch, sequence) is never changed. Not the planner: it chooses nothing,
 * it reports. */
#ifndef FUYOU_PLAN_ADVICE_H
#define FUYOU_PLAN_ADVICE_H

#include "plan_make.h"

enum { PLAN_ADVICE_MAX_FIXES = 32, PLAN_ADVICE_MAX_CAPACITIES = 2 };

/* One change and what planning with it gave. */
typedef struct PlanFix {
    char change[320];   /* as the command line spells it: "--swap none", "without --act gpu" */
    double short_bytes; /* its plan's shortfall over the tiers: 0 when it fits */
    bool combined;      /* several options set at once (said "all of") */
} PlanFix;

/* Capacities a plan of the request fits, checked. */
typedef struct PlanCapacity {
    double bytes[TIER_COUNT]; /* each tier's capacity: raised, or the hardware's own */
    bool raised[TIER_COUNT];
} PlanCapacity;

typedef struct PlanAdvice {
    double short_bytes;       /* the plan's own shortfall over the tiers */
    PlanFix fixes[PLAN_ADVICE_MAX_FIXES]; /* changes that shrink it: those that fit first,
                                             in the order tried, then the least short */
    int n_fixes;
    int tried;                /* changes planned again */
    bool fits;                /* some change fits */
    PlanCapacity capacity[PLAN_ADVICE_MAX_CAPACITIES]; /* when none fits: fewest tiers raised
                                                          first */
    int n_capacity;
} PlanAdvice;

/* Fills a for plan p of graph g, which plan_make made for rq on hw. rq is not changed; its
 * score and progress are not called (the closed form decides, quietly). 0, or a negative
 * errno (-ENOMEM) with e; a change plan_make refuses (options that contradict each other) is
 * not offered. */
int plan_advice_make(const PlanRequest *rq, const Hardware *hw, const Graph *g, const Plan *p,
                     PlanAdvice *a, Err *e);

/* One line (no newline) from a: the changes that fit ("--swap none: fits"), or, when none
 * does, those that shrink the shortfall and by how much, then that nothing fuyou can change
 * fits rq's model at its batch here and the capacities that would, as fuyou-sim's options.
 * Writes into buf and returns it. */
char *plan_advice_line(const PlanAdvice *a, const PlanRequest *rq, const Hardware *hw,
                       const Graph *g, char *buf, size_t n);

/* One line (no newline) on why p, the plan plan_make made for rq, does not fit hw: each tier
 * short and by how much, then what would make it fit, each change planned again
 * (plan_advice_line). Writes into buf and returns it. */
char *plan_advice_why_short(const PlanRequest *rq, const Hardware *hw, const Graph *g,
                            const Plan *p, char *buf, size_t n);

#endif
