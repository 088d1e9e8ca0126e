/* ps: a sharded parameter server over one flat float arena, cut into KV blocks.
 *
 * Layout: the arena's parameter ranges (one per layer, {offset, count} from the arena's
 * table) are cut into blocks of at most block_floats (default PS_BLOCK_BYTES_DEFAULT = 4 MB,
 * as in Poseidon-TF); a block never straddles two ranges, so syncing layer l touches only
 * layer l's blocks. Each block goes to the least-loaded shard so far (by floats; ties to
 * the lowest shard): deterministic, so every process computes the same layout. Shards are
 * colocated: shard s is served by a thread of the process of rank s (n_shards <= world).
 *
 * Server (one shard): owns the values of its blocks. Per block and iteration t it sums the
 * pushes of all n_workers workers (one per worker; a second is rejected), then calls the
 * update callback once with the sum (the solver plugs in here: it sees the block's offset so
 * it can index its own state, e.g. momentum), in iteration order. version(block) = number of
 * iterations applied. A pull for iteration t is answered once version >= t + 1 - staleness,
 * with the values as they are then: staleness 0 is BSP (a pull for t waits for t's apply);
 * staleness s is SSP(s). Copies per block and iteration: none on the push side (the first
 * worker's message is kept and the others are added into it) and none on the pull side
 * (the values go to ZeroMQ by reference; an update while a send still holds them writes a
 * fresh copy instead). A push for t > version + s breaks the bound (the worker skipped
 * its pull) and is rejected with a log, as is any push that is not exactly one of this
 * shard's blocks. Pull of iteration -1: the current (initial) values.
 *
 * Wire precision (runtime/sync/wire.h; fp32 unless set): pushes and pulls carry each block's
 * values encoded at it, 2 bytes a value at bf16 and fp16. The shard decodes every worker's
 * push, sums them in fp32 (in rank order, as at fp32), applies the sum to its fp32 values
 * (the master weights: snapshots and copies are of them) and answers pulls with those values
 * encoded, so every worker receives the same rounded values. At fp32 nothing is encoded and
 * the messages are the floats themselves, as before wire precisions existed.
 *
 * Client: pushes a range (whole blocks) of gradients to the blocks' shards and pulls a range
 * of values into the replica's arena. Everything it waits for is bounded by its timeout;
 * -1 means the caller reports (coord_client_fail names iteration and layer).
 */
#ifndef POSEIDON_PS_H
#define POSEIDON_PS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/precision.h"

#define PS_BLOCK_BYTES_DEFAULT (4u << 20)

typedef struct {
    uint64_t offset, count; /* floats */
} ps_range_t;

typedef struct {
    uint64_t offset; /* floats, in the arena */
    uint32_t count;  /* floats */
    int shard;
    int range;       /* index of the range (layer) it belongs to */
} ps_block_t;

typedef struct {
    int n_blocks, n_shards;
    ps_block_t *blocks; /* sorted by offset */
} ps_layout_t;

/* Cuts ranges into blocks of at most block_floats and assigns shards. Ranges must not
 * overlap. 0, or -1 (logged) on bad input. */
int ps_layout_build(ps_layout_t *l, const ps_range_t *ranges, int n_ranges, size_t block_floats,
                    int n_shards);
void ps_layout_fini(ps_layout_t *l);
/* Index of the block starting at offset, or -1. */
int ps_layout_find(const ps_layout_t *l, uint64_t offset);

/* params: this shard's values of one block, to update in place with grad_sum (the sum over
 * workers of their gradients for the block at iteration). */
typedef void (*ps_update_fn)(void *arg, float *params, const float *grad_sum, size_t count,
                             uint64_t offset, int64_t iteration);

/* Called on the shard's thread for every push it accepts (before any apply it completes):
 * peer = the pushing rank, offset = the block's, recv_ns = clock_now_ns() when the shard took
 * it from the socket. For traces: when a rank's bytes reached this shard. */
typedef void (*ps_push_fn)(void *arg, int peer, uint64_t offset, int64_t iteration,
                           int64_t recv_ns);

typedef struct {
    int shard;                 /* == rank of this process */
    int n_workers;             /* P1: pushes per block per iteration (any ranks, one each) */
    int world;                 /* ranks that may talk to it */
    const char *bind;          /* e.g. "tcp://10.0.0.2:*" */
    const ps_layout_t *layout; /* shared, outlives the server */
    const float *init;         /* the whole arena's initial values (read at creation) */
    int64_t start_version;     /* iterations already applied to init (a resumed job's
                                  checkpoint iteration; 0 for a fresh one) */
    int staleness;             /* 0: BSP */
    ps_update_fn update;
    void *update_arg;
    ps_push_fn on_push;        /* optional */
    void *on_push_arg;
    int conn_cap;              /* TCP connections one host may hold open to the shard
                                  (comm_set_connection_cap); 0: no cap */
    size_t slice_bytes;        /* send_order = layer (core/plan.h): answers go by layer, the
                                  lowest first, in slices of this (runtime/transport/sendq.h);
                                  0: each as soon as it is ready */
    bool turns;                /* send_order = fair: the answers queued for one worker take
                                  turns, a slice each (sendq_take_turns), not layers */
    struct sendq *order;       /* send_order = layer: the rank's shared send queue
                                  (sendq_new_shared, outliving the server), in whose order
                                  per peer the answers go with the rank's other sends;
                                  NULL: a queue of the shard's own (slice_bytes) */
    precision_t wire;          /* what pushes and pulls carry (fp32 when 0) */
    /* precision = fp16's loss scaling (core/plan.h): whether iteration t, all its pushes in,
     * is applied (1), skipped with the values unchanged (0; its version still counts), or
     * not ruled on yet (-1: it waits, and ps_server_kick says when to ask again). Called on
     * the shard's thread. NULL: every iteration is applied. */
    int (*ready)(void *arg, int64_t t);
    void *ready_arg;
} ps_server_config_t;

typedef struct ps_server ps_server_t;

/* Starts the shard's thread. NULL (logged) if the bind fails. */
ps_server_t *ps_server_new(const ps_server_config_t *cfg);
void ps_server_destroy(ps_server_t **sp);
const char *ps_server_endpoint(const ps_server_t *s);
/* The shard's endpoint for clients of its own process (comm_bind_local): the rank's pushes
 * to and pulls from its colocated shard go there, not over TCP and CURVE. */
const char *ps_server_local_endpoint(const ps_server_t *s);
/* Copies this shard's block values into arena (same offsets). Thread-safe. */
void ps_server_copy_values(ps_server_t *s, float *arena);
/* A consistent snapshot for a checkpoint: waits until every block of the shard has applied
 * exactly `version` iterations and copies their values into arena (same offsets). The
 * caller quiesced the job: no rank pushes for iteration `version` before the snapshot is
 * taken. 0, or -1 after timeout_ms, or (logged) if a block is already past version. */
int ps_server_snapshot(ps_server_t *s, int64_t version, float *arena, int timeout_ms);
/* A ruling came: the shard asks cfg.ready again for the iterations waiting on it.
 * Thread-safe. */
void ps_server_kick(ps_server_t *s);
/* Messages it rejected (bad, duplicate, out of the staleness bound). */
uint64_t ps_server_n_rejected(ps_server_t *s);
/* From now on every answer to a pull carries stamp_ns = clock_now_ns() - zero_ns (>= 1):
 * when the shard handed that block's values to ZeroMQ, on the clock of the job's trace
 * (zero_ns: its zero; runtime/exec/worker.c). Before the call, or with zero_ns = 0, answers
 * carry no stamp. Thread-safe. */
void ps_server_set_trace_zero(ps_server_t *s, int64_t zero_ns);

typedef struct ps_client ps_client_t;

/* A client belongs to one thread; a rank may have several (one per syncer thread). They
 * talk to the shards through a comm mux (runtime/transport/comm_mux.h): clients made with
 * ps_client_new_on share one, and so one connection per shard, whatever their number;
 * ps_client_new makes a client with a mux of its own. endpoints[s]: shard s's endpoint.
 * A shared mux outlives its clients (comm_mux_destroy after the last ps_client_destroy). */
struct comm_mux;
struct comm_mux *ps_client_mux_new(int rank, int world, const ps_layout_t *layout,
                                   const char *const *endpoints, int timeout_ms);
ps_client_t *ps_client_new_on(struct comm_mux *mux, const ps_layout_t *layout, int timeout_ms);
ps_client_t *ps_client_new(int rank, int world, const ps_layout_t *layout,
                           const char *const *endpoints, int timeout_ms);
void ps_client_destroy(ps_client_t **cp);
/* Pushes and pulls of this client carry values at wire (fp32 until set), as the shards'
 * (ps_server_config_t.wire) do. */
void ps_client_set_wire(ps_client_t *c, precision_t wire);

/* Sends the gradients of [offset, offset + count) (whole blocks) for iteration t. grads is
 * sent without a copy: leave it untouched until the next ps_client_pull or
 * ps_client_wait_sent returns. layer: carried in headers and logs. 0 or -1. */
int ps_client_push(ps_client_t *c, int64_t t, int layer, uint64_t offset, uint64_t count,
                   const float *grads);
/* Fetches the values of [offset, offset + count) for iteration t into arena (same
 * offsets). 0, or -1 after the timeout. */
int ps_client_pull(ps_client_t *c, int64_t t, int layer, uint64_t offset, uint64_t count,
                   float *arena);
/* What one shard sent to one pull: the trace's PULL rows are per shard. */
typedef struct {
    int64_t bytes;          /* 0: the shard holds none of the range */
    int64_t first_stamp_ns; /* the earliest stamp_ns of its answers (its trace clock; see
                               ps_server_set_trace_zero), 0 when they carried none */
    int64_t last_recv_ns;   /* when its last block was taken from the socket (clock_now_ns) */
} ps_pull_times_t;

/* ps_client_pull that also fills per_shard[s] for every shard s (layout->n_shards entries;
 * per_shard may be NULL). */
int ps_client_pull_from(ps_client_t *c, int64_t t, int layer, uint64_t offset, uint64_t count,
                        float *arena, ps_pull_times_t *per_shard);
/* Pulls of this client write each arriving block into the arena holding *lock (NULL: no
 * lock), so a reader of the arena that takes the same lock never sees a half-written block.
 * The lock must outlive the client. */
void ps_client_set_arena_lock(ps_client_t *c, pthread_mutex_t *lock);
/* Waits until ZeroMQ released every pushed buffer. 0, or -1 after the timeout or when a
 * push could not be sent. */
int ps_client_wait_sent(ps_client_t *c);

#endif
