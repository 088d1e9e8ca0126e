/* The PS client (runtime/sync/ps.h): pushes and pulls of whole blocks, through a port of a
 * comm mux, so that every client of a rank shares its one connection per shard. */
#include "runtime/sync/ps.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/half.h"
#include "core/log.h"
#include "runtime/sync/wire.h"
#include "runtime/transport/clock.h"
#include "runtime/transport/comm_mux.h"

struct ps_client {
    comm_mux_t *own_mux; /* ps_client_new's; NULL when the mux is shared */
    comm_mux_port_t *port;
    const ps_layout_t *layout;
    int timeout_ms;
    comm_tracker_t tracker;
    pthread_mutex_t *arena_lock; /* NULL: none */
    precision_t wire;
    void *packed;                /* wire precision not fp32: the last push encoded, sent
                                    without a copy (held until ZeroMQ releases it) */
    size_t packed_cap;           /* bytes */
};

void ps_client_set_wire(ps_client_t *c, precision_t wire) { c->wire = wire; }

void ps_client_set_arena_lock(ps_client_t *c, pthread_mutex_t *lock) { c->arena_lock = lock; }

comm_mux_t *ps_client_mux_new(int rank, int world, const ps_layout_t *layout,
                              const char *const *endpoints, int timeout_ms)
{
    ASSERT(layout->n_shards <= world, "%d shards for %d ranks", layout->n_shards, world);
    /* a distinct channel per mux (routing id "ps<k>:<rank>"), so that two muxes of one
     * process (tests run several ranks in one) do not collide at a shard */
    static atomic_int s_n_muxes;
    char name[16];
    snprintf(name, sizeof name, "ps%d", atomic_fetch_add(&s_n_muxes, 1) % 100000);
    const char **eps = xcalloc((size_t)world, sizeof *eps);
    for (int s = 0; s < layout->n_shards; s++) eps[s] = endpoints[s];
    comm_mux_t *m = comm_mux_new(name, rank, world, eps, timeout_ms);
    free(eps);
    return m;
}

ps_client_t *ps_client_new_on(comm_mux_t *mux, const ps_layout_t *layout, int timeout_ms)
{
    ps_client_t *c = xcalloc(1, sizeof *c);
    c->port = comm_mux_port_new(mux);
    c->layout = layout;
    c->timeout_ms = timeout_ms;
    comm_tracker_init(&c->tracker);
    return c;
}

ps_client_t *ps_client_new(int rank, int world, const ps_layout_t *layout,
                           const char *const *endpoints, int timeout_ms)
{
    comm_mux_t *m = ps_client_mux_new(rank, world, layout, endpoints, timeout_ms);
    if (!m) return NULL;
    ps_client_t *c = ps_client_new_on(m, layout, timeout_ms);
    c->own_mux = m;
    return c;
}

void ps_client_destroy(ps_client_t **cp)
{
    if (!cp || !*cp) return;
    ps_client_t *c = *cp;
    if (comm_tracker_wait(&c->tracker, c->timeout_ms) != 0)
        die("ps client: ZeroMQ still holds pushed buffers after %d ms", c->timeout_ms);
    comm_mux_port_destroy(&c->port);
    comm_mux_destroy(&c->own_mux);
    free(c->packed);
    free(c);
    *cp = NULL;
}

/* Block indices covering exactly [offset, offset + count). */
static void span(const ps_client_t *c, uint64_t offset, uint64_t count, int *first, int *last)
{
    int b = ps_layout_find(c->layout, offset);
    ASSERT(b >= 0, "float offset %llu is not a block start", (unsigned long long)offset);
    *first = b;
    uint64_t end = offset + count;
    while (b < c->layout->n_blocks && c->layout->blocks[b].offset + c->layout->blocks[b].count < end)
        b++;
    ASSERT(b < c->layout->n_blocks &&
               c->layout->blocks[b].offset + c->layout->blocks[b].count == end,
           "range [%llu, %llu) does not end on a block boundary", (unsigned long long)offset,
           (unsigned long long)end);
    *last = b;
}

int ps_client_push(ps_client_t *c, int64_t t, int layer, uint64_t offset, uint64_t count,
                   const float *grads)
{
    int first, last;
    span(c, offset, count, &first, &last);
    size_t vb = (size_t)precision_bytes(c->wire);
    const unsigned char *src = (const unsigned char *)grads;
    if (wire_encoded(c->wire)) { /* the previous push's encoding may still be on its way */
        if (comm_tracker_wait(&c->tracker, c->timeout_ms) != 0) return -1;
        if (count * vb > c->packed_cap) {
            free(c->packed);
            c->packed_cap = count * vb;
            c->packed = xmalloc(c->packed_cap);
        }
        half_encode(c->wire, c->packed, grads, count);
        src = c->packed;
    }
    for (int b = first; b <= last; b++) {
        const ps_block_t *pb = &c->layout->blocks[b];
        msg_header_t h = {.type = MSG_PS_PUSH, .layer = layer, .shard = (uint32_t)pb->shard,
                          .iteration = t, .offset = pb->offset};
        size_t bytes = (size_t)pb->count * vb;
        if (comm_mux_send(c->port, pb->shard, h, src + (pb->offset - offset) * vb, bytes,
                          &c->tracker) != 0) {
            log_error("ps client: push of iteration %lld layer %d to shard %d failed",
                      (long long)t, layer, pb->shard);
            return -1;
        }
    }
    return 0;
}

int ps_client_pull(ps_client_t *c, int64_t t, int layer, uint64_t offset, uint64_t count,
                   float *arena)
{
    return ps_client_pull_from(c, t, layer, offset, count, arena, NULL);
}

/* Copies one answer into the arena and notes its shard's times; 0, or -1 for values that
 * were not asked for (logged, dropped). */
static int values_take(ps_client_t *c, comm_msg_t *g, int first, int last, float *arena,
                       ps_pull_times_t *per_shard)
{
    int b = ps_layout_find(c->layout, g->hdr.offset);
    if (b < first || b > last || g->peer != c->layout->blocks[b].shard ||
        comm_msg_bytes(g) != c->layout->blocks[b].count * (size_t)precision_bytes(c->wire)) {
        log_warn("ps client: dropped values for offset %llu from rank %d: not asked",
                 (unsigned long long)g->hdr.offset, g->peer);
        return -1;
    }
    if (c->arena_lock) pthread_mutex_lock(c->arena_lock);
    if (wire_encoded(c->wire))
        half_decode(c->wire, arena + g->hdr.offset, comm_msg_data(g),
                    c->layout->blocks[b].count);
    else
        memcpy(arena + g->hdr.offset, comm_msg_data(g), comm_msg_bytes(g));
    if (c->arena_lock) pthread_mutex_unlock(c->arena_lock);
    if (per_shard) {
        ps_pull_times_t *ps = &per_shard[g->peer];
        ps->bytes += (int64_t)comm_msg_bytes(g);
        if (g->hdr.stamp_ns && (!ps->first_stamp_ns || g->hdr.stamp_ns < ps->first_stamp_ns))
            ps->first_stamp_ns = g->hdr.stamp_ns;
        if (g->recv_ns > ps->last_recv_ns) ps->last_recv_ns = g->recv_ns;
    }
    return 0;
}

int ps_client_pull_from(ps_client_t *c, int64_t t, int layer, uint64_t offset, uint64_t count,
                        float *arena, ps_pull_times_t *per_shard)
{
    if (per_shard)
        for (int s = 0; s < c->layout->n_shards; s++)
            per_shard[s] = (ps_pull_times_t){0, 0, 0};
    int first, last;
    span(c, offset, count, &first, &last);
    comm_match_t m = COMM_MATCH_ANY;
    m.type = MSG_PS_VALUES;
    m.layer = layer;
    comm_mux_expect(c->port, &m);
    for (int b = first; b <= last; b++) {
        const ps_block_t *pb = &c->layout->blocks[b];
        msg_header_t h = {.type = MSG_PS_PULL, .layer = layer, .shard = (uint32_t)pb->shard,
                          .iteration = t, .offset = pb->offset};
        if (comm_mux_send(c->port, pb->shard, h, NULL, 0, NULL) != 0) return -1;
    }
    int64_t deadline = clock_now_ns() + (int64_t)c->timeout_ms * 1000000;
    for (int got = 0; got < last - first + 1;) {
        int left_ms = (int)((deadline - clock_now_ns()) / 1000000);
        comm_msg_t g;
        if (left_ms <= 0 || comm_mux_recv(c->port, &g, left_ms) != 1) {
            log_error("ps client: pull of iteration %lld layer %d: %d of %d blocks after %d ms",
                      (long long)t, layer, got, last - first + 1, c->timeout_ms);
            return -1;
        }
        got += values_take(c, &g, first, last, arena, per_shard) == 0;
        comm_msg_close(&g);
    }
    return ps_client_wait_sent(c);
}

int ps_client_wait_sent(ps_client_t *c)
{
    if (comm_tracker_wait(&c->tracker, c->timeout_ms) != 0) return -1;
    return comm_mux_failed(c->port);
}
