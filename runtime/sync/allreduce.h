/* allreduce: ring all-reduce (sum) of a float buffer over comm: reduce-scatter then
 * all-gather, 2 (W-1) steps, each moving one W-th of the buffer to the right neighbour
 * (Patarasuk & Yuan 2009; the bandwidth-optimal ring that Horovod/NCCL use).
 *
 * The comm's peers must be the ranks 0..W-1 with a DEALER connected to the right neighbour
 * (rank + 1) % W and a bound ROUTER the left one reaches. Segments are sent in chunks of at
 * most chunk_floats so that one huge layer does not become one huge message; unless the comm
 * has a send order, a chunk goes on to the right as soon as it is in (pipelined), so a link
 * does not idle between steps while a rank waits for the rest of a segment. Every rank ends
 * with bit-identical values: each segment is summed on one rank, in ring order, and then
 * copied around. Messages carry (iteration, layer, step), so rings of different layers may
 * share a comm in order.
 */
#ifndef POSEIDON_ALLREDUCE_H
#define POSEIDON_ALLREDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "core/cost.h"
#include "core/precision.h"
#include "runtime/transport/comm.h"

/* 4 MB at fp32, the PS block size */
#define ALLREDUCE_CHUNK_FLOATS_DEFAULT ((unsigned)COST_RING_PIECE_MAX_VALUES)
/* Unordered, the ring is pipelined (a chunk goes on as soon as it is in): a segment goes in
 * at least this many chunks, each of at least chunk_floats / ALLREDUCE_PIPELINE_MIN_DIV (so
 * that small segments do not become many small messages; scaled with the chunk) and at most
 * chunk_floats; the cost model's pieces (core/cost.h) at the default chunk */
#define ALLREDUCE_PIPELINE_DEPTH COST_RING_PIPELINE_DEPTH
#define ALLREDUCE_PIPELINE_MIN_DIV (COST_RING_PIECE_MAX_VALUES / COST_RING_PIECE_MIN_VALUES)

/* Sums buf (count floats) over all ranks of c in place. Returns 0, or -1 if a step waited
 * longer than timeout_ms (logged with the step and the neighbour). */
int allreduce_sum(comm_t *c, int64_t iteration, int layer, float *buf, size_t count,
                  size_t chunk_floats, int timeout_ms);

/* allreduce_sum with every chunk sent at the wire precision (runtime/sync/wire.h): each
 * reduce step decodes what arrives and adds it in fp32 to this rank's fp32 partial sum, which
 * the next step sends encoded again; before the all-gather the owner of a complete segment
 * rounds it to the wire precision, so every rank ends with the same values, bit for bit.
 * At fp32 it is allreduce_sum. */
int allreduce_sum_at(comm_t *c, precision_t wire, int64_t iteration, int layer, float *buf,
                     size_t count, size_t chunk_floats, int timeout_ms);

#endif
