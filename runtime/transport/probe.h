/* probe: a short measurement of the link between rank 0 and rank 1 at start-up — a ping-pong
 * of small messages (latency) and a bulk transfer (bandwidth) — so that the cost model that
 * chooses each layer's scheme (hybrid, hybrid3) sees this cluster's links, not a guess.
 *
 * Rank 0 measures and is the only rank that gets a result; the caller broadcasts it so that
 * every rank builds the identical plan. Ranks other than 0 and 1 take no part. The comm must
 * have a bound ROUTER on both ranks and DEALERs 0 -> 1 and 1 -> 0. Every wait is bounded by
 * timeout_ms.
 */
#ifndef POSEIDON_PROBE_H
#define POSEIDON_PROBE_H

#include <stdint.h>

#include "runtime/transport/comm.h"

typedef struct {
    int64_t lat_ns;      /* one-way: the median round trip of small messages / 2 */
    double bw_Bps;       /* the bulk messages after the first / the time rank 1 took to
                          * receive them (with one round: bulk bytes / (time until
                          * acknowledged - one round trip)) */
    int64_t bulk_bytes;  /* bytes moved by the bulk transfer */
    int pings;
} probe_result_t;

/* Runs the probe on ranks 0 and 1 of c: `pings` round trips, then `rounds` messages of
 * bulk_bytes from rank 0 to rank 1, sent back to back, and one acknowledgement that carries
 * the time between the arrivals of the first and the last. Returns 0 (out filled on rank 0;
 * zeros elsewhere), or -1 after a wait of timeout_ms (logged). */
int probe_links(comm_t *c, int pings, int64_t bulk_bytes, int rounds, probe_result_t *out,
                int timeout_ms);

#endif
