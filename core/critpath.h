/* critpath: the critical path of one iteration of a trace (core/trace.h rows), the chain of
 * ops that the iteration's last op waited for, one after the other.
 *
 * Walked backwards from the row of the iteration that ends last. At each row, the binding
 * predecessor is the one among its candidates that ended last:
 *   with a plan (critpath_plan): the instances the plan's edges name (core/plan.h: DEP_LOCAL
 *     on the row's node, DEP_RECV the instances whose flows are addressed to it, DEP_ALL
 *     every instance), and, on an exclusive resource (a node's compute stream, server CPU,
 *     update thread, interconnect), the row that held the resource last before the row
 *     started: an op that waited for the resource and not for an edge;
 *   without (critpath_rows): every row that ended at or before the row started, the row's
 *     own node preferred on a tie. This reads the trace alone and is right where the
 *     latest end before a start is the cause of the start; a concurrent op of another node
 *     that happened to end just before can be picked instead of the true dependency.
 * The walk stops at the first row with no candidate or whose binding predecessor belongs to
 * an earlier iteration: that one is returned apart (*before), as what the iteration's first
 * op on the path waited for (typically the previous iteration's PULL or all-reduce).
 *
 * Several rows of one key (the runtime's APPLY, one per KV block) count as one instance
 * from the first start to the last end.
 */
#ifndef POSEIDON_CRITPATH_H
#define POSEIDON_CRITPATH_H

#include <stddef.h>

#include "plan.h"
#include "trace.h"

/* The path of `iteration` as indices into rows[], first op first: *path (malloc'ed, the
 * caller frees) of the returned count, and *before the row of an earlier iteration it
 * starts from (-1: none). Returns the count (0 when the iteration has no rows), or -1 with
 * a message in err: a row that names an op the plan does not have (another plan). */
int critpath_plan(const plan_t *p, const trace_rec_t *rows, int n, int iteration, int **path,
                  int *before, char *err, size_t errlen);
int critpath_rows(const trace_rec_t *rows, int n, int iteration, int **path, int *before);

#endif
