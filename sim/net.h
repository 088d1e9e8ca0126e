/* net: flow-level network model. Each node has a full-duplex NIC with `nic_Bps` per direction
 * (or a rate of its own: net_set_node_nic); an optional switch core caps the sum of all flows
 * at `core_Bps`. With racks (net_new_racks) consecutive nodes share a rack switch whose
 * uplink and downlink carry `rack_Bps` each: a flow between racks crosses its sender's rack
 * uplink and its receiver's rack downlink. Active flows share these capacities max-min fairly
 * (progressive filling over the resources send side, receive side, rack links and core).
 * Rates are recomputed only when the set of flows changed and virtual time is about to
 * advance, so flows that start or end at the same instant cost one recomputation.
 * A computation keeps its levels (the shares at which resources saturate, lowest first, and
 * what the flows frozen at each took of every resource), and the next one starts at the
 * lowest level a change can alter: a flow that ended froze at its level and crossed no
 * resource that saturated below it, so without it those levels stand, bit for bit; a flow
 * that starts may lower any level (the computation starts from scratch). Most events end
 * flows, so most computations redo only the levels above the lowest one that changed.
 * The last level of a computation only freezes and notes its entities: no later level and
 * no later computation reads the loads it would change (each starts at or below it).
 *
 * Three kinds of entity carry flows:
 *   a single flow  src -> dst (net_add);
 *   a broadcast    src -> every other node, the same bytes to each (net_add_bcast): ONE entity
 *                  standing for nodes-1 flows that move at one common rate, the smallest fair
 *                  share, so it ends at one instant. It weighs nodes-1 on its sender's send
 *                  side (its "hub") and on the core, and 1 on every other node's receive side
 *                  (its "leaves"). Where a receive side would give its flow less than the
 *                  others get (it saturates first), that flow is split off (the broadcast
 *                  then excludes that receiver), so rates are exactly per-flow max-min. The
 *                  flows split off at one level of the computation leave together, as one
 *                  entity with its leaves listed (a "fan"), so that they keep finishing at
 *                  one instant.
 *   a gather       every node but dst and an excluded list -> dst, the same bytes each
 *                  (net_add_gather): the mirror image, hub = dst's receive side, leaves = the
 *                  senders' send sides; split the same way where a sender is congested.
 * With racks, a broadcast or gather is one such entity per rack holding its leaves (a "part"):
 * every flow of a part crosses the same rack links (none for the hub's own rack, the hub
 * rack's uplink and the leaves' rack downlink for a broadcast's other parts, the reverse for
 * a gather), which weigh like its hub, so a part's flows differ only at their leaves, as a
 * whole broadcast's do on one switch, and a part splits the same way. A broadcast to P nodes
 * in R racks is R entities, an all-to-all P x R.
 * The rate computation never visits a broadcast's or gather's leaves one by one: a send or
 * receive side that carries only the leaves of such entities (no single flow, no hub, not
 * excluded from any) is "plain", and the plain sides of one direction in one rack are one
 * resource class with the same load (the parts with leaves in that rack). A node whose NIC
 * rate is not nic_Bps is never plain (its sides count as touched), so the sides of a class
 * share one rate. So a recomputation costs O(entities log entities), not O(flows): an
 * all-to-all of P nodes is P entities (P x R with racks), P workers pushing to one shard one
 * entity (R) (plus the flows split off at congested nodes), not P^2 or P flows. The rates
 * are those of per-flow max-min over the flows the entities stand for (up to floating-point
 * rounding). Exactness does not rest on the nodes being alike: an entity is kept whole only
 * while its flows provably get one rate, and split where they do not.
 *
 * A flow's bytes drain at its rate; net_next_ns() is the earliest finish. Latency is not
 * modelled here: the caller delivers a finished flow after the message latency.
 * The entities that froze at one level of a computation share one rate and one clock
 * (sim/rates.h), so a level whose rate changes while it keeps its entities costs one
 * change, not one per entity: when a flow ends, every flow of its bottleneck and of the
 * levels above gets a new rate, thousands of entities at thousands of nodes.
 * Finish times are rounded to whole nanoseconds: one flow alone takes exactly
 * llround(bytes / nic_Bps * 1e9) ns, and a flow whose rate changes ends within half a
 * nanosecond (plus floating-point rounding, ~1e-6 ns over 10 s) of the instant its bytes
 * drain at the rates it had between events.
 */
#ifndef POSEIDON_NET_H
#define POSEIDON_NET_H

#include <stddef.h>
#include <stdint.h>

typedef struct net net_t;

/* The `dst` a finish callback gets for a broadcast: every node but src; the `src` it gets for
 * a gather: every node but dst (and those skipped). With racks, a part's: every node of rack
 * q (but src, dst and those skipped); NET_RACK_OF gives q back. */
#define NET_DST_ALL (-1)
#define NET_SRC_ALL (-1)
#define NET_RACK(q) (-2 - (q))
#define NET_RACK_OF(code) (-2 - (code))
/* The src and dst a finish callback gets for a ring step kept whole (net_add_ring). */
#define NET_RING INT32_MIN

/* core_Bps <= 0: a non-blocking switch. */
net_t *net_new(int nodes, double nic_Bps, double core_Bps);

/* The same with racks: nodes_per_rack consecutive nodes share a rack switch (rack q holds
 * nodes q*nodes_per_rack ..), whose uplink and downlink carry rack_Bps each. A flow between
 * racks crosses its sender's rack uplink and its receiver's rack downlink. nodes_per_rack 0
 * or >= nodes: one switch (net_new). nodes_per_rack must divide nodes. */
net_t *net_new_racks(int nodes, double nic_Bps, double core_Bps, int nodes_per_rack,
                     double rack_Bps);

/* Give one node's NIC its own rate per direction (before any flow starts). A node whose rate
 * differs from nic_Bps is never part of a plain class (net.c): each costs one resource in
 * every rate computation that has a broadcast or gather. */
void net_set_node_nic(net_t *n, int node, double nic_Bps);
void net_destroy(net_t **np);

/* Start a flow of bytes > 0 from src to dst != src at time now; tag comes back on finish. */
void net_add(net_t *n, int64_t now_ns, int src, int dst, int64_t bytes, int64_t tag);

/* Start a broadcast: bytes > 0 from src to each of the other nodes-1 nodes (nodes >= 2).
 * Returns the number of parts it finishes as (net_finish): 1, or with racks one per rack
 * holding a receiver. */
int net_add_bcast(net_t *n, int64_t now_ns, int src, int64_t bytes, int64_t tag);

/* Start a gather: bytes > 0 from every node but dst and but ex[0..nex) (distinct, none equal
 * to dst, nex <= nodes - 2) to dst. Returns its parts, as net_add_bcast. */
int net_add_gather(net_t *n, int64_t now_ns, int dst, int64_t bytes, int64_t tag, const int *ex,
                   int nex);

/* Start one step of a ring all-reduce over every node: bytes > 0 from each node v to
 * (v + 1) % nodes (nodes >= 2), tag coming back on finish. While the network holds nothing
 * but such steps (and every NIC has the common rate) the step is one entity: its flows share
 * every resource alike, so they get one rate (the exact per-flow max-min one) and finish as
 * one call with src = dst = NET_RING. Otherwise it is, or becomes when another entity
 * starts, nodes single flows, each finishing on its own (src, dst) with this tag. In the
 * grouped model (net_set_whole) a step stays one entity beside any other (every NIC at the
 * common rate): its flows move at the least fair share of the resources they cross. Returns
 * 1 when it entered as one entity. */
int net_add_ring(net_t *n, int64_t now_ns, int64_t bytes, int64_t tag);
/* true when a ring step started now would be one entity (nothing but ring steps live, or the
 * grouped model; every NIC at the common rate). */
int net_ring_whole(const net_t *n);

/* Keep every broadcast, gather and ring step whole: its flows move at one rate, the smallest
 * fair share among the resources it crosses, so it never splits (default: off, exact
 * per-flow max-min).
 * Rates stay feasible and every resource's capacity is shared among the rest as before, but
 * a flow of a broadcast (gather) at an uncongested receiver (sender) gets no more than the
 * most congested one. A recomputation then costs O(entities) with entities = the transfers
 * started, however unevenly the nodes are loaded: for clusters of thousands of nodes. */
void net_set_whole(net_t *n, int whole);

/* true when flows were added or removed since the last rate computation. */
int net_dirty(const net_t *n);

/* Recompute the rates at time now (after net_add/net_finish calls at now). */
void net_recompute(net_t *n, int64_t now_ns);

/* Earliest finish time of an active flow, INT64_MAX when none (valid after recompute). */
int64_t net_next_ns(const net_t *n);

/* Remove every entity finishing at or before now, calling fn for each
 * (in a fixed order). A broadcast is one call with dst = NET_DST_ALL, bytes per receiver, and
 * the receivers skip[0..nskip) whose flows were split off: each of those finishes as a single
 * flow (dst = that receiver) carrying the broadcast's tag, before or after the broadcast. A
 * gather is one call with src = NET_SRC_ALL and skip = the senders it does not cover (those
 * excluded at the start and those split off; a split-off flow finishes as a single flow from
 * its sender carrying the gather's tag). With racks a broadcast or gather is one such call
 * per part (net_add_bcast), with dst (src) = NET_RACK(q) for the part of rack q and skip the
 * nodes of that rack it does not cover. */
typedef void (*net_finish_fn)(void *arg, int64_t tag, int src, int dst, int64_t bytes,
                              const int *skip, int nskip);
int net_finish(net_t *n, int64_t now_ns, net_finish_fn fn, void *arg);

/* Test aid: recompute the rates of every flow the entities stand for by per-flow progressive
 * filling, one flow at a time (O(levels x (flows + resources)), so usable at hundreds of
 * nodes), and compare them with the entities' rates (valid after net_recompute, in the exact
 * model). Returns 0, or -1 with the first flow that differs by more than rel_tol, or an
 * entity whose flow count contradicts its node set, in err. */
int net_verify_maxmin(const net_t *n, double rel_tol, char *err, size_t errlen);

/* Test aid: the rates of every model (the grouped one included) fit: no NIC side, rack link
 * or core carries more than its capacity x (1 + rel_tol), and every entity moves. Returns 0,
 * or -1 with the first resource over its capacity in err (NIC sides 0..2N-1, rack links,
 * the core last). Valid after net_recompute. */
int net_verify_feasible(const net_t *n, double rel_tol, char *err, size_t errlen);

/* Test aid: rebuild from the live entities alone what every rate computation starts from
 * and that is kept across computations instead (each NIC side's list of entities in creation
 * order, its load, which sides anything touches, the multis excluding each side, the live
 * multis, the earliest finish time), and compare. Returns 0, or -1 with the first difference
 * in err. O(entities x nodes). */
int net_check_kept(const net_t *n, char *err, size_t errlen);

int64_t net_active(const net_t *n);     /* active entities */
int64_t net_recomputes(const net_t *n);
/* Computations that kept the levels below the first one a change could alter. */
int64_t net_restarts(const net_t *n);

/* Test aid: start every rate computation from its first level (on = 1), as a reference for
 * the computations that keep the levels no change can alter (default). */
void net_set_from_scratch(net_t *n, int on);

/* Test aid: do the level at which the last computation ended in full, as every other level
 * (on = 0), as a reference for the level done fast where it is taken to be the computation's
 * last (default): there no load it would change is read again, so it only freezes and notes
 * its entities, and where it is not the last it is undone and done in full (net.c, struct
 * net's `fast`). net_fast_tops: the levels done fast that were the last. */
void net_set_fast_top(net_t *n, int on);
int64_t net_fast_tops(const net_t *n);

#endif
