/* trace: the one trace schema both executors write — a CSV with one row per op instance
 *   node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns
 * (peer: the shard or peer a single transfer talks to, -1 for a group or a local op) and the
 * same rows as Chrome/Perfetto JSON ("X" events; pid = node, tid = resource lane) for viewing
 * in ui.perfetto.dev or chrome://tracing. Comparing a simulated and a real run is a join on
 * (node, iteration, op, layer).
 */
#ifndef POSEIDON_TRACE_H
#define POSEIDON_TRACE_H

#include <stddef.h>
#include <stdint.h>

typedef struct trace trace_t;

typedef enum { TRACE_LANE_COMPUTE, TRACE_LANE_NET, TRACE_LANE_SERVER, TRACE_LANE_UPDATE,
               TRACE_LANE_COUNT } trace_lane_t;

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

/* Finish both files (closes the JSON array) and free; accepts NULL. */
void trace_close(trace_t **tp);

extern const char *const trace_csv_header; /* without newline */

#endif
