/* trace: the one trace schema both executors write — a CSV with one row per op instance
 *   node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns
 * (peer: the shard or peer a single transfer talks to, -1 for a group or a local op) and the
 * same rows as Chrome/Perfetto JSON ("X" events; pid = node, tid = resource lane) for viewing
 * in ui.perfetto.dev or chrome://tracing. Comparing a simulated and a real run is a join on
 * (node, iteration, op, layer) (`poseidon report compare`), so a row of one kind must be the
 * same interval in both: the simulator's (sim/sim.c) and the runtime's merged trace
 * (the runtime's ranks merged by core/trace_merge.c).
 *
 * Rows, node = the node the plan places the instance on (core/plan.h). A transfer group
 * completes at its source when all its flows are delivered: its end is when its last bytes
 * are at a receiver.
 *   FWD, BWD   the compute op ran [start, end].
 *   APPLY      the shard's update of the layer; the runtime applies KV block by KV block and
 *              writes a row per block (compare sums a key's rows).
 *   PUSH       node = the worker: from when it starts sending (its gradient is ready) to when
 *              its pieces are at every shard (one at its own shard costs no network); bytes =
 *              the whole tensor.
 *   PULL       node = the shard: from when it starts sending the layer's values after its
 *              APPLY (the simulator: the APPLY's end, when every flow starts; the runtime:
 *              its first answer to a worker's pull of them, stamped by the shard, which can
 *              be later: a worker asks once its own push is out) to when the last worker has
 *              them (its own rank's copy included); bytes = all it sent.
 *   SFB        node = the sender: from when its factors are ready to when they are at every
 *              other node (not when the peers' factors have come: that is the receivers'
 *              UPDATE dependency); bytes = K(M+N) x 4 per peer, summed.
 *   UPDATE     the rebuild and apply from every node's factors ran [start, end].
 *   LREDUCE, LBCAST  a node of several devices: its local reduce (or SFB gather) and its
 *              local broadcast over the interconnect ran [start, end]; bytes = what crossed
 *              it. The simulator's alone for now (the runtime runs one device per node).
 *   ALLREDUCE  node = a ring member: from its gradient ready to its last step delivered and
 *              the predecessor's last step received (plan.h); the runtime's row also holds
 *              its SGD step on the reduced tensor.
 * Clocks. The simulator's are virtual ns from 0. The runtime's are clock_now_ns()
 * (CLOCK_MONOTONIC) minus a trace zero; every rank on rank 0's host takes rank 0's, so rows
 * made of two processes' moments (PUSH and SFB ends, recorded by the receivers; PULL
 * starts, stamped by the shard) are on one clock. CLOCK_MONOTONIC of two machines are
 * unrelated: where the shard or the worker is not on rank 0's host the answer carries no
 * stamp that the worker could use, and the PULL row starts when the worker asked (earlier
 * than the definition); a merged PUSH or SFB end recorded on another host is off by the
 * offset of the two clocks; rank 0 merges only the files it can read.
 */
#ifndef POSEIDON_TRACE_H
#define POSEIDON_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct trace trace_t;

typedef enum { TRACE_LANE_COMPUTE, TRACE_LANE_NET, TRACE_LANE_SERVER, TRACE_LANE_UPDATE,
               TRACE_LANE_INTRA, TRACE_LANE_COUNT } trace_lane_t;

typedef struct {
    int node;
    int iteration;
    const char *op;     /* FWD, BWD, PUSH, ... */
    const char *layer;  /* model layer name */
    int peer;
    int64_t bytes;
    int64_t t_start_ns, t_end_ns;
    trace_lane_t lane;
} trace_row_t;

/* Open PREFIX.csv and PREFIX.json for writing. Returns NULL with a message in err. */
trace_t *trace_open(const char *prefix, char *err, size_t errlen);

void trace_write(trace_t *t, const trace_row_t *r);

/* Finish both files (closes the JSON array) and free; accepts NULL. Returns 0, or -1 when
 * either file could not be written whole. */
int trace_close(trace_t **tp);

extern const char *const trace_csv_header; /* without newline */

#define TRACE_OP_MAX 16     /* an op kind's name and its NUL */
#define TRACE_LAYER_MAX 128 /* a layer name and its NUL (model names: MODEL_NAME_MAX) */

/* A row read back from a trace CSV: the one parsed form, for every reader (the runtime's
 * merge, poseidon report, the tests). */
typedef struct {
    int node, iteration, peer;
    char op[TRACE_OP_MAX], layer[TRACE_LAYER_MAX];
    int64_t bytes, t_start_ns, t_end_ns;
} trace_rec_t;

/* Parse one CSV line (its newline optional). Returns 0 with *r filled; 1 for the header or
 * an empty line; -1 for anything else: a field missing or extra, a number that does not
 * parse whole, a name too long, an end before the start. */
int trace_rec_parse(const char *line, trace_rec_t *r);

/* The lane of an op kind's rows, by its name: FWD and BWD compute, the transfers net, APPLY
 * server, UPDATE update, LREDUCE and LBCAST interconnect; an unknown name: net. */
trace_lane_t trace_lane_of_op(const char *op);

/* Writes r as one CSV line. */
void trace_rec_write(FILE *f, const trace_rec_t *r);

#endif
