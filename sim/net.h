/* net: flow-level network model. Each node has a full-duplex NIC with `nic_Bps` per direction;
 * an optional switch core caps the sum of all flows at `core_Bps`. Active flows share these
 * capacities max-min fairly (progressive filling over the resources send side, receive side
 * and core). Rates are recomputed only when the set of flows changed and virtual time is about
 * to advance, so flows that start or end at the same instant cost one recomputation.
 *
 * A flow's bytes drain at its rate; net_next_ns() is the earliest finish. Latency is not
 * modelled here: the caller delivers a finished flow after the message latency.
 * Finish times are rounded to whole nanoseconds; one flow alone takes exactly
 * llround(bytes / nic_Bps * 1e9) ns; flows due within NET_FINISH_SLACK_NS of a finish event
 * end with it.
 */
#ifndef POSEIDON_NET_H
#define POSEIDON_NET_H

#include <stdint.h>

typedef struct net net_t;

/* core_Bps <= 0: a non-blocking switch. */
net_t *net_new(int nodes, double nic_Bps, double core_Bps);
void net_destroy(net_t **np);

/* Start a flow of bytes > 0 from src to dst != src at time now; tag comes back on finish. */
void net_add(net_t *n, int64_t now_ns, int src, int dst, int64_t bytes, int64_t tag);

/* true when flows were added or removed since the last rate computation. */
int net_dirty(const net_t *n);

/* Recompute the rates at time now (after net_add/net_finish calls at now). */
void net_recompute(net_t *n, int64_t now_ns);

/* Earliest finish time of an active flow, INT64_MAX when none (valid after recompute). */
int64_t net_next_ns(const net_t *n);

/* A flow due at most this long after a finish event ends at that event (at most 1 us early:
 * well under one message latency). */
#define NET_FINISH_SLACK_NS 1000

/* Remove every flow finishing at or before now + NET_FINISH_SLACK_NS, calling fn for each (in a fixed order). */
typedef void (*net_finish_fn)(void *arg, int64_t tag, int src, int dst, int64_t bytes);
int net_finish(net_t *n, int64_t now_ns, net_finish_fn fn, void *arg);

int64_t net_active(const net_t *n);
int64_t net_recomputes(const net_t *n);

#endif
