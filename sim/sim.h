/* sim: executes a plan in virtual time. Compute ops take the per-unit times (divided by the
 * node's speed, times per-op noise), server applies take bytes / server throughput, SFB
 * reconstructions take FLOPs / GEMM rate, and transfers become flows of the network model
 * (net.h) delivered one latency after their last byte. The executor follows plan.h's walking
 * rules exactly; it holds no policy of its own. How flows enter the network is a matter of
 * speed only: a broadcast group is one network entity, and the flows started at one instant
 * by one op and iteration into one node with equal bytes from more than half of the other
 * nodes (every worker's PUSH to a shard) are one gather; the rates are per-flow max-min
 * either way. An op with steps > 1 (the ring all-reduce) is a chain of single flows, one per
 * step, each step started at a node by its own previous step's delivery and its
 * predecessor's (plan.h). When every node issues step 0 at one instant and the network holds
 * nothing but such steps, every node stays at the same step: the ring is then in lockstep,
 * each step one network entity (net_add_ring) and one counter for all nodes, O(steps) per
 * instance; the first transfer of another kind ends the lockstep (the network splits the
 * step in flight into its flows) and the ring goes on node by node, O(nodes x steps).
 * Under send_order = layer (sim/sendorder.h) a connection sends one slice at a time; while
 * every ring connection v -> v + 1 holds the same queue and nothing else is in the network,
 * the queue is held once and each slice is one ring step entity, its rings in lockstep, the
 * same run as slice by slice; anything else ends that lockstep.
 *
 * State is O(iterations x ops x nodes) counters; everything is passed through sim_t, so one
 * process can run several simulations. Deterministic for a given (plan, times, seed).
 */
#ifndef POSEIDON_SIM_H
#define POSEIDON_SIM_H

#include <stdint.h>

#include "unit_times.h"
#include "plan.h"
#include "trace.h"

typedef struct {
    int iterations;      /* >= 1 */
    int warmup;          /* the first iterations, not measured (0 means 1): warmup <
                            iterations, or iterations == 1 */
    uint64_t seed;
    trace_t *trace;      /* optional: one row per op instance */
    int whole_network;   /* broadcasts and gathers move whole (net_set_whole): faster on
                            thousands of nodes, not exactly per-flow max-min */
    int ring_flows;      /* test aid: ring steps always go node by node, flow by flow (no
                            lockstep; under the send order, slice by slice), as a reference
                            for the lockstep rings */
} sim_opts_t;

typedef struct {
    int nodes;
    int iterations;
    int64_t makespan_ns;
    int64_t iter_ns;              /* steady state: (end of T-1 - end of W-1) / (T - W), W the
                                     warm-up; the end of 0 when T == 1 */
    double images_per_s;          /* nodes x devices x batch / iter */
    double sent_bytes_per_node;   /* per iteration, mean over nodes */
    double recv_bytes_per_node;
    double max_sent_bytes_node;   /* per iteration, the busiest node */
    double compute_idle_frac;     /* 1 - compute busy time / (nodes x makespan) */
    double comm_hidden_frac;      /* time a node communicates while computing / time it
                                     communicates (1 when nothing is sent) */
    uint64_t events;
    int64_t net_recomputes;
    int64_t ring_steps_whole;     /* ring steps that moved in lockstep, one entity each */
} sim_result_t;

/* Run the plan. Returns 0 (it cannot fail on a valid plan; bugs ASSERT). */
int sim_run(const plan_t *p, const unit_times_t *times, const sim_opts_t *o, sim_result_t *r);

#endif
