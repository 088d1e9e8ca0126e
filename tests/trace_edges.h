/* trace_edges: a trace walked against the plan's edges. Every instance of an op with a row
 * must start no earlier than the end of each instance it depends on in the plan on the same
 * node (DEP_LOCAL): the executor waited for it. The simulator's trace must pass every such
 * edge; the runtime's too, except edges on PUSH and SFB, whose rows end when the bytes are at
 * the receivers (core/trace.h), after the local completion the executor waits for, and with
 * an APPLY ending at its first KV block (the runtime's shard applies and answers block by
 * block, each row a block: core/trace.h). Shared
 * by tests/test_worker.c and tests/test_bucket.c. */
#ifndef POSEIDON_TESTS_TRACE_EDGES_H
#define POSEIDON_TESTS_TRACE_EDGES_H

#include <stdbool.h>

#include "core/plan.h"

/* Edges of p violated by the trace at csv (an instance of several rows, the runtime's
 * per-block APPLY, spans from its first start to its last end), each printed with `what`;
 * *checked receives the edges checked. real: the runtime's trace (edges on PUSH and SFB
 * skipped). Shift the start of the `corrupt`-th checked instance (0: none) to just before
 * its dependency's end, to show the check can fail. Returns the count, or -1 when the trace
 * cannot be read or a row names no op of the plan. */
int trace_edge_violations(const plan_t *p, const char *csv, bool real, int corrupt,
                          const char *what, int *checked);

#endif
