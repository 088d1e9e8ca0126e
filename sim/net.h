/* net: flow-level network model. Each node has a full-duplex NIC with `nic_Bps` per direction;
 * an optional switch core caps the sum of all flows at `core_Bps`. Active flows share these
 * capacities max-min fairly (progressive filling over the resources send side, receive side
 * and core). Rates are recomputed only when the set of flows changed and virtual time is about
 * to advance, so flows that start or end at the same instant cost one recomputation.
 *
 * Two kinds of entity carry flows:
 *   a single flow  src -> dst (net_add);
 *   a broadcast    src -> every other node, the same bytes to each (net_add_bcast): ONE entity
 *                  standing for nodes-1 flows that move at one common rate, the smallest fair
 *                  share, so it ends at one instant. It weighs nodes-1 on its sender's send
 *                  side and on the core, and 1 on every other node's receive side. Where a
 *                  receive side would give its flow less than the others get (it saturates
 *                  first), that flow is split off into a single flow (the broadcast then
 *                  excludes that receiver), so rates are exactly per-flow max-min.
 * The rate computation never visits a broadcast's receivers one by one: a receive side that
 * carries only broadcasts (no single flow ends there, it is the source of no broadcast) is
 * "plain", and all plain receive sides are one resource class with the same load. So a
 * recomputation costs O(entities log entities), not O(flows): an all-to-all of P nodes is P
 * entities (plus the flows split off at congested receivers), not P^2 flows. The rates are
 * those of per-flow max-min over the flows the entities stand for (up to floating-point
 * rounding). Exactness does not rest on the nodes being alike: a broadcast is kept whole only
 * while its flows provably get one rate, and split where they do not.
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

/* The `dst` a finish callback gets for a broadcast: every node but src. */
#define NET_DST_ALL (-1)

/* core_Bps <= 0: a non-blocking switch. */
net_t *net_new(int nodes, double nic_Bps, double core_Bps);
void net_destroy(net_t **np);

/* Start a flow of bytes > 0 from src to dst != src at time now; tag comes back on finish. */
void net_add(net_t *n, int64_t now_ns, int src, int dst, int64_t bytes, int64_t tag);

/* Start a broadcast: bytes > 0 from src to each of the other nodes-1 nodes (nodes >= 2). */
void net_add_bcast(net_t *n, int64_t now_ns, int src, int64_t bytes, int64_t tag);

/* true when flows were added or removed since the last rate computation. */
int net_dirty(const net_t *n);

/* Recompute the rates at time now (after net_add/net_finish calls at now). */
void net_recompute(net_t *n, int64_t now_ns);

/* Earliest finish time of an active flow, INT64_MAX when none (valid after recompute). */
int64_t net_next_ns(const net_t *n);

/* A flow due at most this long after a finish event ends at that event (at most 1 us early:
 * well under one message latency). */
#define NET_FINISH_SLACK_NS 1000

/* Remove every entity finishing at or before now + NET_FINISH_SLACK_NS, calling fn for each
 * (in a fixed order). A broadcast is one call with dst = NET_DST_ALL, bytes per receiver, and
 * the receivers skip[0..nskip) whose flows were split off: each of those finishes as a single
 * flow (dst = that receiver) carrying the broadcast's tag, before or after the broadcast. */
typedef void (*net_finish_fn)(void *arg, int64_t tag, int src, int dst, int64_t bytes,
                              const int *skip, int nskip);
int net_finish(net_t *n, int64_t now_ns, net_finish_fn fn, void *arg);

int64_t net_active(const net_t *n);     /* active entities */
int64_t net_recomputes(const net_t *n);

#endif
