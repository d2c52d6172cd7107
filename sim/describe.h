/* describe: the `fuyou-sim --describe` report: the layer graph (per-op FLOPs and bytes, totals,
 * 6·P·tokens) and the memory footprint per tier for a placement, against the hardware's capacity.
 * It prints; it decides nothing. */
#ifndef FUYOU_DESCRIBE_H
#define FUYOU_DESCRIBE_H

#include <stdio.h>

#include "footprint.h"
#include "graph.h"
#include "hw.h"
#include "plan.h"

void describe_graph(FILE *out, const Graph *g);
/* Prints the footprint table; returns the number of tiers over capacity. */
int describe_footprint(FILE *out, const Graph *g, const Hardware *hw, const Plan *p);

#endif
