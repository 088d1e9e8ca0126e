/* hybrid: choose each unit's sync method for the iteration as a whole (schemes hybrid and
 * hybrid3), not layer by layer.
 *
 * Why. Poseidon's rule (POSEIDON.md §2, cost_choose()) prices each layer as if it had the
 * network alone. In an iteration every layer's sync shares the same NICs: an SFB layer puts
 * (P1-1) x K(M+N) factors on EVERY node's NIC, while a PS layer's load lands on the shards
 * that hold its blocks, and the next layers' blocks go to the other shards. Alone, a small
 * PS tensor on one shard looks P1-1 times as expensive as it is over the iteration; a
 * transformer then got SFB for half its matrices and ran at half of PS's speed (GPT-2,
 * S = 64, 8 nodes).
 *
 * The iteration's cost of an assignment of methods to units (hybrid_cost()) is the tightest
 * of these lower bounds on its sync time: the busiest node's NIC bytes in one direction
 * (every unit's flows together, the KV blocks placed as the plan places them) / bandwidth;
 * with racks, the busiest rack link's bytes likewise / its bandwidth; the busiest shard's
 * applies; a node's SFB reconstructions; a node's local steps; the
 * slowest unit alone (latency chains: a ring pays 2(P-1) latencies). Ties go to the smaller
 * of the first four, then to the smaller sum of the units alone.
 *
 * The search (hybrid_choose()) starts from the cheapest of: the per-layer choice, every unit
 * on PS, SFB wherever allowed, all-reduce everywhere (hybrid3), and flips one unit at a time
 * while that lowers the cost. Its result replaces the per-layer choice only where its bound
 * is lower by more than 5%: the bound does not see when bytes move, and in a near tie the
 * per-layer rule decides. Deterministic (units in order, methods in order), so every rank
 * computes the same plan. One evaluation costs O(units + KV blocks x log(shards) + shards);
 * passes are bounded.
 */
#ifndef POSEIDON_HYBRID_H
#define POSEIDON_HYBRID_H

#include <stdint.h>

#include "cost.h"

/* The per-layer choice stands unless the search's bound is lower by more than this share
 * (percent). The bound counts bytes, not when they move: which layers' syncs overlap the
 * backward pass, or one layer's blocks crowding a few NICs early. Within a few percent it
 * cannot tell two assignments apart (ResNet-152 on 32 nodes at 10 GbE: PS for the FC layer
 * bounds 0.6% lower, yet simulates 2.6% slower than SFB), and the per-layer rule, which sees
 * each layer's own hot spots, decides. */
#define HYBRID_CLEAR_GAIN_PCT 5

/* Which rule hybrid and hybrid3 follow. */
typedef enum {
    HYBRID_RULE_ITERATION, /* the whole iteration's cost (this module); the default */
    HYBRID_RULE_LAYER,     /* Poseidon's: each layer the cheapest alone (cost_choose) */
    HYBRID_RULE_COUNT
} hybrid_rule_t;

const char *hybrid_rule_name(hybrid_rule_t r);
/* 0 and *r set, or -1 for an unknown name ("iteration", "layer"). */
int hybrid_rule_parse(const char *name, hybrid_rule_t *r);

/* The units as the search sees them: tensors (block0 is not read: blocks are numbered here,
 * in unit order, as the plan numbers them). */
typedef struct {
    const cost_params_t *cost; /* block_shard is not read: blocks are placed here */
    kv_place_t placement;
    int n_units;
    const cost_tensor_t *tensor; /* [n_units] */
} hybrid_units_t;

/* The iteration's cost of one assignment. */
typedef struct {
    int64_t nic_bytes;    /* the busiest node's bytes sent in one iteration (= received) */
    int64_t shard_bytes;  /* the busiest shard's PS bytes */
    int64_t nic_ns;       /* nic_bytes / bandwidth */
    int64_t server_ns;    /* the busiest shard applies P1 x shard_bytes (0: applies free) */
    int64_t update_ns;    /* a node's SFB reconstructions, one after another */
    int64_t local_ns;     /* a node's local steps (several devices, host staging) */
    int64_t rack_bytes;   /* the busiest rack link's bytes in one direction (0: one rack) */
    int64_t rack_ns;      /* rack_bytes / the rack links' bandwidth */
    int64_t slowest_ns;   /* the slowest unit alone with its PS pieces spread evenly: a
                             ring's 2(P-1) steps, a PS push, apply and pull one after another,
                             an SFB broadcast and its reconstructions (placement-free, so the
                             search prices it once) */
    int64_t load_ns;      /* the largest of nic, server, update, local and rack */
    int64_t sum_ns;       /* the units alone as slowest_ns prices them, summed */
    int64_t bound_ns;     /* max(load_ns, slowest_ns): the cost compared first */
} hybrid_cost_t;

/* The iteration's cost of method[u] for every unit (SYNC_NONE for units without parameters;
 * every other method must be allowed: cost_method_allowed). */
hybrid_cost_t hybrid_cost(const hybrid_units_t *h, const sync_method_t *method);

/* Whether a costs less than b: the bound, then the load, then the sum. */
int hybrid_cost_less(const hybrid_cost_t *a, const hybrid_cost_t *b);

/* Choose method[u] for every unit among the methods in mask (bits 1 << SYNC_x) that the unit
 * allows; on entry method[] holds the per-layer choice, kept unless the search's bound is
 * lower by more than HYBRID_CLEAR_GAIN_PCT percent, and SYNC_NONE marks the units without
 * parameters (left so). */
void hybrid_choose(const hybrid_units_t *h, unsigned mask, sync_method_t *method);

#endif
