/* cost: bytes and time of synchronising one layer's parameters per iteration, per scheme —
 * sharded parameter server (PS, tensors cut into KV blocks spread over P2 shards),
 * sufficient-factor broadcasting (SFB, FC weights only; biases go through PS) and ring
 * all-reduce. The planner chooses schemes with it; the simulator adds contention on top.
 *
 * Byte counts are the formulas of POSEIDON.md §2 (×4 bytes, fp32; ×2 at a bf16 or fp16 wire
 * precision: every value crosses the network in wire_bytes) when the PS split is even
 * (kv_block_bytes = 0, in whole values); with KV blocks each shard holds whole blocks.
 * Blocks are numbered globally, tensor after tensor in the plan's unit order, and placed one
 * at a time by a kv_place_t policy (least-loaded by default), so a small layer lands on one
 * shard; the plan records every block's shard in a table (cost_params_t.block_shard). A
 * node that is both a worker and a shard does not send to itself.
 *
 * Time is for the layer alone on an idle full-duplex network: per phase, the busiest NIC
 * direction's bytes / bandwidth + one latency (blocks are pipelined). PS: push, apply on the
 * shard, pull. SFB: one all-to-all broadcast, then P1-1 rank-K reconstructions (2KMN FLOPs
 * each) at gemm_flops. Ring all-reduce: 2(P-1) dependent steps (reduce-scatter, then
 * all-gather), each moving a chunk of ceil(bytes/P) to the ring successor and paying one
 * latency, since a node forwards a chunk only once the previous one has arrived:
 * 2(P-1) (latency + chunk / bandwidth).
 *
 * Racks (nodes_per_rack S < P, R = P / S racks, each uplink and downlink carrying rack_Bps):
 * a phase's time is its busiest NIC direction's bytes / bandwidth or its busiest rack link's
 * bytes / rack_Bps, whichever is longer, + one latency. Rack q's uplink carries, per phase:
 * PS push, its S workers' pieces for shards outside q, S (bytes - held_q); PS pull, the
 * pieces its shards serve to the P - S workers outside, held_q (P - S) (downlinks the
 * reverse; the phase's time takes the busiest link of either direction); SFB, every factor
 * its S workers send to the P - S peers outside, S (P - S) K(M+N)x4; ring all-reduce (the
 * ring visits nodes in order, so it leaves each rack once), one chunk per step, as a NIC.
 * So oversubscribed uplinks slow PS and SFB by up to the ratio and the ring not at all
 * (until an uplink is slower than a NIC).
 *
 * A node of D > 1 devices first reduces its devices' gradients over its interconnect (D-1
 * tensors cross it into one) and, once the network sync is done, broadcasts the result back
 * (D-1 tensors); under SFB it gathers the devices' factors instead ((D-1)/D of the node's
 * K(M+N), plus the biases' D-1 copies) and broadcasts the rebuilt parameters. Each local
 * step costs one interconnect latency + bytes / its bandwidth, and a method's time counts
 * both (cost_local()).
 *
 * Send order (core/plan.h, send_order = layer) changes none of these costs: a layer alone
 * on an idle network has no one to overtake, and slicing moves the same bytes (the slice
 * headers, 32 bytes a slice, are left out as the message headers are). What it changes is
 * which of several layers' transfers sharing a link finishes first, which only the
 * simulator sees; the planner's methods, and so the plan's choices, are the same for both
 * orders.
 */
#ifndef POSEIDON_COST_H
#define POSEIDON_COST_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    SYNC_NONE,       /* one worker: nothing to synchronise */
    SYNC_PS,
    SYNC_SFB,
    SYNC_ALLREDUCE,
    SYNC_METHOD_COUNT
} sync_method_t;

const char *sync_method_name(sync_method_t m);

/* Where the next KV block goes. Least-loaded: to the shard holding the fewest bytes so far
 * (ties: the lowest shard), which keeps the busiest shard close to the mean: round-robin
 * gave one of 4 shards 49% of GoogLeNet's parameters, least-loaded 34%. Round-robin: block
 * b to shard b mod P2 (Poseidon-TF's KV store walked its blocks in turn). */
typedef enum { KV_PLACE_LEAST_LOADED, KV_PLACE_ROUND_ROBIN, KV_PLACE_COUNT } kv_place_t;

const char *kv_place_name(kv_place_t k);
/* 0 and *k set, or -1 for an unknown name ("least_loaded", "round_robin"). */
int kv_place_parse(const char *name, kv_place_t *k);

/* The shard of global block `block` under policy k, given each shard's bytes so far. */
int cost_kv_next_shard(kv_place_t k, const int64_t *load, int shards, int64_t block);

typedef struct {
    int workers;            /* P1 */
    int shards;             /* P2 <= P1, on nodes 0..P2-1 (colocated with workers) */
    int batch;              /* K, per worker */
    int64_t kv_block_bytes; /* 0: every tensor split evenly over the shards */
    const int *block_shard; /* with KV blocks: the shard of every global block (the plan's
                               table); NULL: block b on shard b mod P2 */
    double bw_Bps;          /* per NIC and direction (the slowest node's) */
    int nodes_per_rack;     /* S: nodes per rack; 0, or >= workers: one switch */
    double rack_Bps;        /* each rack uplink and downlink per direction (racks only) */
    int64_t lat_ns;         /* per message */
    double server_Bps;      /* bytes/s a shard applies; 0: free */
    double gemm_flops;      /* FLOP/s of SFB reconstruction; 0: not counted */
    int devices;            /* D, devices per node (0 or 1: one; batch is the node's D x B) */
    double intra_Bps;       /* the node's interconnect, bytes/s (D > 1) */
    int64_t intra_lat_ns;   /* per local transfer */
    int wire_bytes;         /* bytes of one value on the wire and the interconnect: 4
                               (fp32), 2 (bf16, fp16); 0 reads as 4. Tensor byte counts
                               (cost_tensor_t) are already at it; KV blocks are blocks of
                               wire bytes */
    bool host_staging;      /* each device stages its gradient (SFB: its factors) in host
                             * memory and gets the synced values (SFB: the peers' factors)
                             * back over the interconnect; the host reduces a node's devices */
} cost_params_t;

/* One layer's parameters as the sync sees them. */
typedef struct {
    int64_t m, n;           /* FC weight m x n (outputs x inputs); 0 if not an FC layer */
    int64_t rows;           /* factor rows per sample: 1 for fc (0 reads as 1), S positions
                               for a linear layer over a sequence: K = batch x rows tokens */
    int64_t weight_bytes;   /* at the wire precision (cost_params_t.wire_bytes a value) */
    int64_t bias_bytes;
    int64_t block0;         /* first global KV block of the layer's PS tensor */
} cost_tensor_t;

typedef struct {
    int64_t worker_sent, worker_recv; /* a node that is only a worker (exists when P1 > P2) */
    int64_t server_sent, server_recv; /* the busiest shard's server part alone */
    int64_t node_sent, node_recv;     /* busiest node that is worker and shard (colocated) */
    int64_t time_ns;                  /* predicted time, alone on an idle network */
    int64_t rack_sent;                /* bytes the busiest rack uplink carries (0: one rack) */
} cost_t;

/* Racks of a cost model: workers / nodes_per_rack, or 1. */
int cost_racks(const cost_params_t *p);

/* Bytes of a PS tensor of `bytes` starting at global block `block0` held by shard s. With
 * an even split (kv_block_bytes = 0) the tensor's pieces rotate from shard block0 mod P2. */
int64_t cost_ps_shard_bytes(const cost_params_t *p, int64_t bytes, int64_t block0, int shard);

/* Number of KV blocks of a tensor (1 per shard-piece when kv_block_bytes is 0). */
int64_t cost_ps_blocks(const cost_params_t *p, int64_t bytes);

/* Bytes of block i of a tensor (the last block may be shorter). */
int64_t cost_ps_block_bytes(const cost_params_t *p, int64_t bytes, int64_t i);

/* The shard of block i of a tensor starting at global block block0. */
int cost_ps_block_shard(const cost_params_t *p, int64_t bytes, int64_t block0, int64_t i);

/* The shards that hold a piece of the tensor, ascending, and each one's bytes: writes up to
 * min(blocks, P2) entries to shard[] and piece_bytes[] and returns how many. */
int cost_ps_pieces(const cost_params_t *p, int64_t bytes, int64_t block0, int *shard,
                   int64_t *piece_bytes);

/* The pieces of one scheme. */
cost_t cost_ps(const cost_params_t *p, int64_t bytes, int64_t block0);
cost_t cost_sfb(const cost_params_t *p, int64_t m, int64_t n);
/* SFB with K = p->batch x rows factor rows (rows: a linear layer's positions). */
cost_t cost_sfb_rows(const cost_params_t *p, int64_t rows, int64_t m, int64_t n);
/* K, the factor rows one worker sends: batch x t->rows. */
int64_t cost_sfb_k(const cost_params_t *p, const cost_tensor_t *t);
cost_t cost_allreduce(const cost_params_t *p, int64_t bytes);

/* Ring all-reduce bytes each node sends (and receives): 2(P-1)/P of the tensor, in whole
 * per-step chunks of ceil(bytes/P). */
int64_t cost_allreduce_bytes(int nodes, int64_t bytes);

/* Steps of a ring all-reduce over `nodes` (2(P-1); 0 for one node) and the bytes one node
 * sends in each step (ceil(bytes/P)). */
int cost_allreduce_steps(int nodes);
int64_t cost_allreduce_chunk_bytes(int nodes, int64_t bytes);

/* The ring is pipelined (runtime/sync/allreduce.c): a step's chunk goes in pieces of
 * ceil(chunk / COST_RING_PIPELINE_DEPTH), of COST_RING_PIECE_MIN_VALUES values at least and
 * COST_RING_PIECE_MAX_VALUES at most, and a node passes a piece on as soon as it is in. */
#define COST_RING_PIPELINE_DEPTH 4
#define COST_RING_PIECE_MIN_VALUES 4096
#define COST_RING_PIECE_MAX_VALUES (1 << 20)
int64_t cost_allreduce_piece_bytes(const cost_params_t *p, int64_t chunk_bytes);

/* What a ring step's delivery adds to its flow, from its last byte sent until the next step
 * may go on: the latency after the last step; after another, the part of the latency that
 * the rest of the chunk behind its first piece does not hide (a step sends its first piece
 * once the previous step's first piece is in). */
int64_t cost_allreduce_step_gap_ns(const cost_params_t *p, int64_t chunk_bytes, int last);

/* SFB bytes one worker sends to one peer per iteration: K(M+N) values at the wire precision
 * (K: tokens of a linear layer, batch x positions). */
int64_t cost_sfb_peer_bytes(const cost_params_t *p, int64_t k, int64_t m, int64_t n);

/* Bytes of one value on the wire: p->wire_bytes, or 4 when it is 0. */
int cost_value_bytes(const cost_params_t *p);

/* The whole layer with method m: PS moves weights+biases; SFB broadcasts the weights' factors
 * and sends biases through PS (concurrently: time is the larger); all-reduce moves both. */
cost_t cost_layer(const cost_params_t *p, const cost_tensor_t *t, sync_method_t m);

/* Whether method m can sync this layer (SFB needs an FC layer; none needs one worker). */
bool cost_method_allowed(const cost_params_t *p, const cost_tensor_t *t, sync_method_t m);

/* The cheapest allowed method among those in mask (bit 1<<SYNC_x), by predicted time; ties
 * go to SFB, then PS (the paper's "SFB iff <="). With one worker: SYNC_NONE. */
/* The local steps of a node for method m: the bytes the local reduce (or SFB's gather) and
 * the local broadcast move over the interconnect, and their time together. Without host
 * staging: D - 1 devices' shares device to device (zeros when D <= 1). With it: each of the
 * D devices copies its gradient (SFB: its factors) out, and the synced values (PS: the
 * parameters, all-reduce: the reduced gradient, SFB: the peers' factors) back in; nothing
 * for a method that does not sync (one node). */
int64_t cost_local(const cost_params_t *p, const cost_tensor_t *t, sync_method_t m,
                   int64_t *reduce_bytes, int64_t *bcast_bytes);

sync_method_t cost_choose(const cost_params_t *p, const cost_tensor_t *t, unsigned mask);

/* The paper's BestScheme for an M x N FC layer: SFB iff 2K(P1-1)(M+N) <= 2MN(P1+P2-2)/P2. */
sync_method_t cost_best_scheme_bytes(int64_t m, int64_t n, int batch, int p1, int p2);

#endif
