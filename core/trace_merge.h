/* trace_merge: the runtime's per-rank traces (PREFIX-rank<R>.csv) merged into PREFIX.csv,
 * whose rows mean what core/trace.h says, as the simulator's do, and the same rows as one
 * Chrome/Perfetto JSON across ranks, PREFIX.json (a process per node, a thread per lane).
 *
 * Rows pass unchanged but PULL, PUSH and SFB. PULL: the ranks write one per (shard,
 * receiving rank), from the shard's answer to the last arrival; the merge joins those of one
 * (shard, iteration, layer): bytes = all the shard sent (its own rank's copy included),
 * peer = the rank when only one received, else -1, start = the earliest answer, end = the
 * last arrival. PUSH and SFB: a rank's own row (peer -1) ends when ZeroMQ let go of its
 * buffers (PUSH), or when the peers' factors were in (SFB, the receive side); the group
 * completes when its bytes are at the other nodes, which they record as arrival rows (node =
 * the sender, peer = the receiver, end = the arrival), so the merge ends the row at the last
 * of those arrivals and drops the arrival rows. Times of one row then come from two
 * processes' clocks: on one host they share rank 0's zero, across hosts they do not.
 */
#ifndef POSEIDON_TRACE_MERGE_H
#define POSEIDON_TRACE_MERGE_H

#include <stddef.h>

/* Merge the `world` ranks' CSVs (those readable here: ranks on one host or a shared folder;
 * each missing one is logged) into PREFIX.csv and PREFIX.json. Returns 0, or -1 with a
 * message in err (the output cannot be written, or a rank's file holds a malformed row,
 * named by file:line). */
int trace_merge_ranks(const char *prefix, int world, char *err, size_t errlen);

#endif
