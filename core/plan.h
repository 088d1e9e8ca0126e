/* plan: what every node does in one training iteration — a DAG of ops (compute, transfers,
 * server applies, updates) with dependencies, resources, bytes and priorities — built once by
 * the scheduler from (model, cluster, scheme, consistency) and executed unchanged by the
 * simulator (sim/, in virtual time) and the runtime (runtime/, for real). All policy (which
 * layer syncs how, what overlaps what, what waits for what) is decided here; executors only
 * walk the structure.
 *
 * Units. The model's layers are cut into units, one per layer with parameters (the layers
 * after it up to the next one with parameters ride along: FWD/BWD of a unit computes layers
 * first..last; the layers before the first parameter layer join unit 0). Unit u syncs the
 * parameters of layer units[u].layer with units[u].method.
 *
 * KV blocks. A unit's PS tensor (all its parameters, or its biases under SFB) is cut into
 * cost_ps_blocks() blocks numbered globally in unit order (tensor.block0 is its first); each
 * block goes to a shard by the kv_placement policy, evaluated block by block in that order,
 * and kv_block_shard records the result, the one table that the cost model, the simulator
 * and the runtime's PS layout read. A method is costed with the blocks placed as if the unit
 * chose PS; the placement of block i of a tensor depends only on the blocks before it, so
 * the biases alone (SFB) land on the shards of that tensor's first blocks.
 *
 * Ops are a template for ONE iteration; an op instance is (op, node, iteration t). The template
 * has O(layers) ops, so the plan's size does not grow with the cluster; an executor's state is
 * O(nodes x ops). Placement says where instances exist:
 *   PLACE_WORKERS  on every node (every node runs a worker);
 *   PLACE_SHARDS   on each node that holds a PS shard with a piece of the unit's tensor
 *                  (plan_has_instance()).
 * A transfer op instance is a symmetric GROUP of flows from its node to plan_n_dests()
 * destinations (plan_dest() gives each destination and its bytes; a destination equal to the
 * source is a local copy that costs no network). The group completes at its source when all
 * its flows are delivered. Destination patterns:
 *   PUSH      worker -> each shard holding the unit's blocks (its piece of the gradient)
 *   PULL      shard  -> every worker (the updated piece)
 *   SFB       worker -> every other worker (K x (M+N) sufficient factors)
 *   VOTE      worker -> every other worker (PLAN_VOTE_BYTES: its loss-scaling verdict)
 *   ALLREDUCE worker -> next worker on the ring, in op.steps = 2(P-1) dependent steps
 *             (reduce-scatter, then all-gather) of one flow each, plan_dest()'s bytes (a
 *             chunk: ceil(tensor/P), the tensor of the op's bucket, below) per step. Step
 *             k > 0 of node r starts when r's own step k-1 has been delivered and the
 *             predecessor's step k-1 has been delivered to r (a node forwards a chunk only
 *             once the previous one has arrived, as runtime/sync/allreduce.c does). The
 *             instance completes when its last step has been delivered and it has received
 *             the predecessor's last step. For DEP_RECV the
 *             predecessor's steps count as ONE flow (plan_n_sources() is 1), delivered with
 *             its last step: the reduced tensor is then complete at r.
 *   Every other op has steps = 1: its flows start together when the instance is ready.
 *
 * All-reduce buckets (gradient fusion, as Horovod's tensor fusion and PyTorch DDP's buckets).
 * Every unit synced by all-reduce belongs to exactly one bucket, and each bucket has ONE
 * OP_ALLREDUCE op over the concatenation of its units' tensors. With a bucket size of B bytes
 * (plan_opts_t.allreduce_bucket_bytes), the units are walked in backward order (unit U-1
 * first); all-reduce units join the open bucket, which closes as soon as it holds >= B bytes,
 * and the next all-reduce unit opens a new one. A unit synced by another method (hybrid3) is
 * skipped over: it neither joins nor closes a bucket, so a bucket's units need not be
 * consecutive. B = 0 turns fusion off: one bucket per unit, and the plan is exactly the
 * unfused one (same ops, deps, bytes). The methods are chosen before and independently of the
 * buckets (each unit's all-reduce is costed alone).
 *   The bucket's op has unit = buckets[b].first, its lowest unit: the member whose BWD runs
 *   last. It waits for that BWD (with WFBP; without, for the last BWD as every sync op), which
 *   under the compute chain means every member's gradient is ready. Its bytes are the ring's
 *   bytes of the bucket's tensor, ceil(bucket bytes / P) per step, 2(P-1) steps, and the cost
 *   model's time is cost_allreduce() of the bucket's bytes (buckets[b].cost_ns). Every member
 *   u has units[u].op_allreduce = the bucket's op, so FWD(u) of the next iteration waits for
 *   the bucket's all-reduce exactly as it waits for its own unfused one.
 *
 * Dependencies of an instance (op, node, t) — each plan_dep_t names an op j and an iteration
 * t - iter_back (a dependency on an iteration < 0 is already met):
 *   DEP_LOCAL  instance (j, same node) has completed;
 *   DEP_RECV   every flow of op j addressed to this node has been delivered: there are
 *              plan_n_sources(j, node) of them (a local copy counts, delivered when the
 *              source instance starts);
 *   DEP_ALL    every instance of j (on all nodes) has completed (a barrier).
 *
 * The edges, per op (back = 1 + staleness):
 *   FWD(u)      FWD(u-1) (FWD(0): BWD(0) of t-1); the syncs of u at t-back (with WFBP; without
 *               it FWD(0) waits for every unit's): PULL (DEP_RECV), UPDATE, ALLREDUCE (DEP_RECV)
 *   BWD(u)      BWD(u+1) (BWD(U-1): FWD(U-1)); PUSH, SFB and ALLREDUCE of u at t-back: the
 *               gradient buffers are reused every `back` iterations (an executor keeps back
 *               of them per unit)
 *   PUSH, SFB, ALLREDUCE  BWD(u) with WFBP, else BWD(0); SFB also UPDATE(u) at t-back (the
 *               peers' factors it receives refill the buffer that UPDATE read)
 *   APPLY       PUSH (DEP_RECV); APPLY at t-1      PULL   APPLY
 *   UPDATE      SFB (DEP_RECV); BWD(u); UPDATE at t-1
 * A node of D > 1 devices (three levels: devices -> node -> cluster, Poseidon's client
 * library) adds two ops per unit with parameters, on the node's interconnect (RES_INTRA,
 * one transfer at a time): LREDUCE, after BWD(u) (with WFBP; else after BWD(0)), reduces the
 * D devices' gradients into the node's (SFB: gathers their factors), and the network sync
 * (PUSH, SFB, the bucket's ALLREDUCE) waits for it instead of BWD; LBCAST, after the sync
 * is in (PULL received, UPDATE done, ALLREDUCE received), hands the result to the D
 * devices, and the next FWD(u) waits for LBCAST instead of the sync ops; BWD(u) also waits
 * for LREDUCE(u) at t-back (the devices' gradient buffers). With one node, the local steps
 * are the only sync. With D = 1 there are none, and the plan is the one-level plan.
 * Under BSP with WFBP the buffer edges are implied by the others except through the SFB and
 * all-reduce sends (an UPDATE or a reduced tensor needs the peers' bytes, not this node's
 * delivered); they bind only when a node's own sends lag.
 *
 * How an executor walks the plan (the simulator does exactly this in virtual time):
 *   for each instance, count its unmet dependencies; an instance with none is ready;
 *   RES_COMPUTE ops of a node run one at a time in op-array order (they form a chain through
 *   their DEP_LOCAL deps: FWD 0..U-1, BWD U-1..0, then the next iteration); RES_SERVER and
 *   RES_UPDATE ops of a node run one at a time, the ready one with the smallest priority first
 *   (ties: lower op id, then iteration); RES_NET ops start all their flows when ready (the
 *   network shares bandwidth; an op with steps > 1 starts its first step, the others as
 *   ALLREDUCE above says); when an instance completes, or a flow is delivered, decrement
 *   the counters of the instances that wait on it. Iterations are unrolled: instance (op, t)
 *   only waits on iterations t and t - iter_back.
 *
 * Loss scaling (precision = fp16, torch.amp's GradScaler). The step of iteration t is taken
 * only if no gradient of t, on any node, holds an inf or a NaN; else every node skips it and
 * halves the loss scale. With WFBP a unit's update would otherwise follow its own sync, before
 * the lower layers' gradients exist, so the plan defers it: one OP_VERDICT per node and
 * iteration (unit 0, RES_UPDATE, no FLOPs) waits for every gradient of t on the node: BWD(0),
 * each LREDUCE, each ALLREDUCE and SFB received (their sums and factors are the same on every
 * node, so each node judges them alike without a message), and VERDICT at t-1; and every
 * update waits for VERDICT(t): SFB's UPDATE, and an OP_UPDATE (no FLOPs) that each all-reduce
 * unit, and each unit a node of several devices applies itself, gets for the step its ALLREDUCE
 * or LREDUCE took before. BWD(u) then also waits for that UPDATE at t-back (it reads the
 * gradient buffer BWD refills), and the first BWD (unit U-1) for VERDICT at t-1: the backward
 * scales the loss by the scale the previous ruling left (fp16 runs under BSP only). A PS shard sees only its blocks of the workers' gradients, so
 * with PS units each worker, once it has pushed every gradient of t (PUSH(u) for every PS
 * unit), sends its own verdict to every other worker in an OP_VOTE (PLAN_VOTE_BYTES each;
 * the shards are the workers' processes); VERDICT waits for every vote (DEP_RECV), and every
 * APPLY(t) for its node's VERDICT(t) (DEP_LOCAL: a shard's op on its own worker's). At any
 * other precision none of these ops or edges exists.
 *
 * Precision. Every byte count (tensors, PS pieces, KV blocks, SFB factors, ring chunks, the
 * local steps) is at the wire precision: 2 bytes a value at bf16 or fp16, half of fp32's, so
 * the methods' costs, the hybrid choices and what the simulator moves all follow from it.
 * The arithmetic precision sets the device's peak (core/cluster.h, device_peak_flops).
 *
 * Invariants: ops[i].id == i; each op's deps are deps[dep_first .. dep_first + n_deps);
 * DEP_LOCAL only joins ops of the same placement, or a shard's op to a worker's op (every node
 * runs a worker); iter_back <= 1 + staleness.
 */
#ifndef POSEIDON_PLAN_H
#define POSEIDON_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "cost.h"
#include "hybrid.h"
#include "precision.h"
#include "scheme.h"
#include "model.h"

typedef enum {
    OP_FWD,       /* forward of the unit's layers */
    OP_BWD,       /* backward of the unit's layers; the gradient of units[u].layer is ready after */
    OP_PUSH,      /* worker sends its gradient pieces to the shards */
    OP_APPLY,     /* shard applies every worker's piece (server CPU) */
    OP_PULL,      /* shard sends the updated piece to every worker */
    OP_SFB,       /* worker broadcasts its sufficient factors */
    OP_UPDATE,    /* worker rebuilds peers' gradients from factors and applies them */
    OP_ALLREDUCE, /* ring all-reduce of the gradient */
    OP_LREDUCE,   /* a node's devices reduce their gradients (or gather SFB factors) over
                     the node's interconnect: only with devices_per_node > 1 */
    OP_LBCAST,    /* the node broadcasts the synced parameters to its devices */
    OP_VERDICT,   /* precision = fp16: every gradient of the iteration is in and checked for
                     inf and NaN; the step is taken or skipped (see "Loss scaling") */
    OP_VOTE,      /* precision = fp16 with PS units: a worker tells every other whether its
                     own gradients of the iteration hold an inf or a NaN */
    OP_KIND_COUNT
} op_kind_t;

typedef enum { PLACE_WORKERS, PLACE_SHARDS } op_place_t;

/* The order in which the transfers that share a link go (P3, MLSys'19; ByteScheduler,
 * SOSP'19). ARRIVAL: every transfer as soon as it is ready, the link shared among them
 * (the default). LAYER: tensors are cut into slices of plan_t.slice_bytes, and on each link
 * the slice of the op with the smallest priority (the unit the next forward pass needs
 * first: every transfer op of unit u has priority u) goes first, ahead of queued slices of
 * later units; a slice once started finishes. FAIR: tensors are cut into slices of
 * plan_t.slice_bytes and the messages queued on one connection take turns, a slice each,
 * so that none waits behind another's tail: the link shared among every message at once,
 * the max-min sharing the simulator assumes under ARRIVAL (where a real connection sends
 * its messages first in, first out). */
typedef enum { SEND_ORDER_ARRIVAL, SEND_ORDER_LAYER, SEND_ORDER_FAIR } send_order_t;
#define PLAN_SLICE_BYTES_DEFAULT (1 << 20)
/* FAIR's default slice: the smallest that a sender can follow (below) */
#define PLAN_SLICE_BYTES_FAIR_DEFAULT 65536
/* the plan's slices, at full size (a run under tensor_scale S sends slices S times smaller,
 * runtime/exec/worker_scale.c) */
#define PLAN_SLICE_BYTES_MIN 65536
#define PLAN_SLICE_BYTES_MAX (1 << 30)
/* A loss-scaling vote's payload: one byte (runtime/transport/msg.h, MSG_LS_VOTE) */
#define PLAN_VOTE_BYTES 1

/* "arrival" | "layer" | "fair"; parse: 0, or -1 for any other text. */
const char *send_order_name(send_order_t s);
int send_order_parse(const char *text, send_order_t *out);
/* The slice of order s given `given` bytes (0: the order's default): 0 under ARRIVAL. */
int64_t send_order_slice_bytes(send_order_t s, int64_t given);
typedef enum { RES_COMPUTE, RES_NET, RES_SERVER, RES_UPDATE, RES_INTRA, RES_COUNT } op_resource_t;
typedef enum { DEP_LOCAL, DEP_RECV, DEP_ALL } dep_scope_t;

const char *op_kind_name(op_kind_t k);

typedef struct {
    int op;
    dep_scope_t scope;
    int iter_back;        /* 0: same iteration; 1: previous; 1+s under SSP(s) */
} plan_dep_t;

typedef struct {
    int id;
    op_kind_t kind;
    int unit;
    op_place_t place;
    op_resource_t res;
    int64_t bytes;        /* transfers: the tensor bytes the op moves (see plan_dest for each
                             flow); APPLY: the shard's tensor bytes before x workers */
    double flops;         /* FWD/BWD: the unit's FLOPs for the whole per-node batch;
                             UPDATE: SFB reconstruction FLOPs */
    int priority;         /* smaller runs first where a resource has a choice; a transfer's
                             priority is its unit: under SEND_ORDER_LAYER its slices go
                             before those of any op with a larger one on the same link */
    int dep_first, n_deps;
    int steps;            /* transfers: sequential steps of the group (ALLREDUCE: 2(P-1));
                             1 otherwise */
} plan_op_t;

typedef struct {
    int layer;            /* model layer whose parameters the unit syncs (-1: none) */
    int first, last;      /* model layers computed by FWD/BWD, inclusive */
    sync_method_t method;
    cost_tensor_t tensor; /* the layer's parameters; tensor.block0 is the PS tensor's block */
    int64_t ps_bytes;     /* bytes through PS (all params, or the biases under SFB) */
    int64_t sfb_peer_bytes;
    int64_t ar_bytes;     /* bytes each node sends in the unit's own ring (all its steps);
                             a fused bucket's ring moves buckets[bucket].ar_bytes */
    int64_t ar_chunk_bytes; /* bytes each node sends in one step of the unit's own ring */
    int64_t cost_ns[SYNC_METHOD_COUNT]; /* predicted time of each method; -1: not allowed */
    int bucket;           /* all-reduce bucket of the unit; -1: not synced by all-reduce */
    int piece0, n_pieces; /* the PS tensor's shards: pieces[piece0 .. piece0 + n_pieces) */
    int op_fwd, op_bwd, op_push, op_apply, op_pull, op_sfb, op_update;
    int op_allreduce;     /* the OP_ALLREDUCE of the unit's bucket, shared by its members */
    int op_lreduce, op_lbcast; /* devices_per_node > 1: the local steps (else -1) */
    int op_verdict;       /* precision = fp16: the node's OP_VERDICT, shared by every unit */
    int op_vote;          /* precision = fp16 with PS units: the node's OP_VOTE (else -1) */
    int64_t lreduce_bytes, lbcast_bytes; /* what they move over the interconnect */
} plan_unit_t;                /* op_*: -1 when the unit has no such op */

/* A bucket of all-reduce units (see above): members are the units u in first..last with
 * units[u].bucket equal to the bucket's index; n_units of them. */
typedef struct {
    int first, last;      /* lowest and highest member unit */
    int n_units;
    int64_t bytes;        /* the members' tensors (weights + biases), summed */
    int64_t ar_bytes;     /* bytes each node sends in the bucket's ring (all its steps) */
    int64_t ar_chunk_bytes; /* bytes each node sends in one step */
    int64_t cost_ns;      /* cost_allreduce() of bytes: the ring alone on an idle network */
    int op;               /* its OP_ALLREDUCE */
} plan_bucket_t;

/* The part of a unit's PS tensor that one shard holds. */
typedef struct {
    int shard;
    int64_t bytes;
} plan_piece_t;

typedef struct {
    const model_t *model;  /* borrowed: must outlive the plan */
    cluster_t cluster;
    scheme_t scheme;
    int staleness;
    int batch;             /* per worker; a node computes batch x devices_per_node */
    int workers, shards;   /* P1, P2 */
    cost_params_t cost;
    int n_units;
    plan_unit_t *units;
    int n_ops;
    plan_op_t *ops;
    int n_deps;
    plan_dep_t *deps;
    int64_t allreduce_bucket_bytes; /* B; 0: no fusion */
    int n_buckets;
    plan_bucket_t *buckets; /* in backward order: bucket 0 holds unit U-1's all-reduce */
    kv_place_t kv_placement;
    hybrid_rule_t hybrid_rule;
    precision_t precision;  /* arithmetic: the device's peak of it (compute, SFB rebuilds) */
    precision_t wire_precision; /* every byte count of the plan is at it (cost.wire_bytes) */
    send_order_t send_order;    /* how transfers sharing a link are ordered (above) */
    int64_t slice_bytes;        /* LAYER and FAIR: the slice, bytes; 0 under ARRIVAL */
    int *kv_block_shard;    /* the shard of each global KV block (kv_block_bytes > 0; else
                               NULL); cost.block_shard points here */
    int n_pieces;
    plan_piece_t *pieces;   /* per unit, ascending by shard */
} plan_t;

/* What a plan is built for, beyond the model and the cluster. */
typedef struct {
    scheme_t scheme;
    int staleness;                  /* SSP s; 0: BSP */
    int batch;                      /* per worker */
    int64_t kv_block_bytes;         /* PS block; 0: every tensor split evenly over shards */
    int64_t allreduce_bucket_bytes; /* all-reduce bucket size B; 0: one all-reduce per unit */
    kv_place_t kv_placement;        /* which shard each KV block goes to (core/cost.h) */
    hybrid_rule_t hybrid_rule;      /* hybrid, hybrid3: for the iteration (default) or per
                                       layer (Poseidon's rule; core/hybrid.h) */
    precision_t precision;          /* arithmetic (core/precision.h); fp32 when 0 */
    precision_t wire_precision;     /* what the exchanges send; fp32 when 0 */
    send_order_t send_order;        /* SEND_ORDER_ARRIVAL when 0 */
    int64_t slice_bytes;            /* LAYER and FAIR: slice size; 0: the default */
} plan_opts_t;

/* Build the plan. Returns 0, or -1 with a message in err (a model without layers). The plan
 * borrows the model; free with plan_fini(). plan_build() is plan_build_opts() without
 * all-reduce fusion. */
int plan_build_opts(plan_t *p, const model_t *m, const cluster_t *c, const plan_opts_t *o,
                    char *err, size_t errlen);
int plan_build(plan_t *p, const model_t *m, const cluster_t *c, scheme_t scheme, int staleness,
               int batch, int64_t kv_block_bytes, char *err, size_t errlen);
void plan_fini(plan_t *p);

/* Bytes of unit u's PS tensor that shard holds (0 when none). */
int64_t plan_shard_bytes(const plan_t *p, int unit, int shard);

/* Where instances of op exist. */
int plan_has_instance(const plan_t *p, int op, int node);
int plan_n_instances(const plan_t *p, int op);

/* Flows of a transfer instance (op, node): count, then destination i and its bytes (per
 * step: an op with steps > 1 sends these flows once per step). */
int plan_n_dests(const plan_t *p, int op, int node);
int plan_dest(const plan_t *p, int op, int node, int i, int64_t *bytes);

/* Whether the flows of transfer instance (op, node) go to EVERY other node with the same
 * bytes each (a PULL to all workers, an SFB broadcast): then returns 1, sets *bytes to one
 * flow's bytes and *self to 1 when a local copy to node itself is among the plan_n_dests()
 * destinations. An executor may move such a group as one broadcast instead of walking
 * plan_dest() (O(1) instead of O(nodes)). Returns 0 for any other pattern. */
int plan_dest_broadcast(const plan_t *p, int op, int node, int64_t *bytes, int *self);

/* Flows of op addressed to node (from all instances, a local copy included). */
int plan_n_sources(const plan_t *p, int op, int node);

/* The cost model's prediction of the sync time of one iteration: the sum over units of the
 * chosen method's time, an all-reduce bucket counted once with its own time (no overlap
 * counted). */
int64_t plan_predicted_sync_ns(const plan_t *p);

/* The iteration's cost of the plan's methods (core/hybrid.h): the busiest node's bytes per
 * direction, the busiest shard, and the bounds they put on the sync time. Zeros with one
 * node. */
hybrid_cost_t plan_iteration_cost(const plan_t *p);

/* Network flows (messages between two different nodes) of one iteration, over all nodes: a
 * transfer instance sends one flow per destination other than its node, per step. */
int64_t plan_flows_per_iteration(const plan_t *p);

/* A fingerprint of everything an executor runs: units and their methods and buckets, ops,
 * edges, bytes, priorities and the shards' pieces (FNV-1a). Two plans that hash alike run
 * alike; a run logs it and writes it with its job, and `poseidon plan` prints it. */
uint64_t plan_hash(const plan_t *p);

/* Per-unit table: layer, parameters, method chosen, each alternative's bytes per node and
 * predicted time, the all-reduce bucket. csv: one header line then one row per unit; the
 * text form ends with the buckets that fuse several units. */
void plan_print(const plan_t *p, FILE *f, int csv);

#endif
