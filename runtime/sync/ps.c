#include "runtime/sync/ps.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/cost.h"
#include "core/half.h"
#include "core/log.h"
#include "core/vec.h"
#include "runtime/transport/comm.h"
#include "runtime/transport/reject_log.h"
#include "runtime/transport/clock.h"
#include "runtime/transport/sendq.h"
#include "runtime/transport/slice.h"
#include "runtime/sync/wire.h"

/* ---------------------------------------------------------------- layout */

static int cmp_block(const void *a, const void *b)
{
    const ps_block_t *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int ps_layout_build(ps_layout_t *l, const ps_range_t *ranges, int n_ranges, size_t block_floats,
                    int n_shards)
{
    memset(l, 0, sizeof *l);
    if (block_floats == 0 || block_floats > UINT32_MAX || n_shards < 1) {
        log_error("ps layout: block of %zu floats over %d shards", block_floats, n_shards);
        return -1;
    }
    int cap = 0;
    for (int i = 0; i < n_ranges; i++) cap += (int)((ranges[i].count + block_floats - 1) / block_floats);
    l->blocks = xcalloc((size_t)cap + 1, sizeof *l->blocks);
    int64_t *load = xcalloc((size_t)n_shards, sizeof *load);
    for (int i = 0; i < n_ranges; i++)
        for (uint64_t o = 0; o < ranges[i].count; o += block_floats) {
            uint64_t n = ranges[i].count - o < block_floats ? ranges[i].count - o : block_floats;
            int best = cost_kv_next_shard(KV_PLACE_LEAST_LOADED, load, n_shards, l->n_blocks);
            load[best] += (int64_t)n;
            l->blocks[l->n_blocks++] =
                (ps_block_t){.offset = ranges[i].offset + o, .count = (uint32_t)n,
                             .shard = best, .range = i};
        }
    free(load);
    qsort(l->blocks, (size_t)l->n_blocks, sizeof *l->blocks, cmp_block);
    for (int b = 1; b < l->n_blocks; b++)
        if (l->blocks[b - 1].offset + l->blocks[b - 1].count > l->blocks[b].offset) {
            log_error("ps layout: ranges overlap at float offset %llu",
                      (unsigned long long)l->blocks[b].offset);
            ps_layout_fini(l);
            return -1;
        }
    l->n_shards = n_shards;
    return 0;
}

void ps_layout_fini(ps_layout_t *l)
{
    free(l->blocks);
    memset(l, 0, sizeof *l);
}

int ps_layout_find(const ps_layout_t *l, uint64_t offset)
{
    int lo = 0, hi = l->n_blocks - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (l->blocks[mid].offset == offset) return mid;
        if (l->blocks[mid].offset < offset) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* ---------------------------------------------------------------- server */

typedef struct pull_req {
    int peer;
    unsigned char rid[32]; /* the asking connection: a rank may have several clients */
    size_t rid_len;
    int64_t t;
    int32_t layer;
    struct pull_req *next;
} pull_req_t;

typedef struct {
    const ps_block_t *b;
    comm_buf_t *values;     /* count floats; answers to pulls send it without a copy */
    comm_buf_t *wire;       /* wire precision not fp32: the values encoded at it, what the
                             * answers send instead (rewritten after each apply); else NULL */
    comm_msg_t *held;       /* (staleness + 1) slots x world, slot = t % (s + 1): each rank's
                             * push of iteration t, held (no copy) until every worker's is
                             * in, then summed in rank order into the lowest rank's payload:
                             * the sum, and so a whole run, does not depend on the order in
                             * which pushes arrive; held iff pushed[] is set */
    int *n_push;            /* per slot */
    unsigned char *pushed;  /* per slot x world */
    int64_t version;        /* iterations applied */
    pull_req_t *pulls;
} sblock_t;

struct ps_server {
    ps_server_config_t cfg;
    comm_t *comm;
    const char *local_endpoint; /* comm_bind_local's: this process's clients come there */
    int n;                  /* blocks of this shard */
    sblock_t *blk;          /* sorted by offset */
    pthread_mutex_t lock;
    pthread_cond_t applied;     /* broadcast after each round of applies (lock held) */
    pthread_t thread;
    atomic_int stop;
    atomic_ullong n_rejected;
    atomic_llong trace_zero_ns; /* 0: answers carry no stamp */
    sendq_t *sq;                /* the answers' queue: cfg.order, else the thread's own when
                                 * cfg.slice_bytes > 0 */
    slice_asm_t *sa;            /* sliced pushes coming in (the thread's) */
    comm_waker_t *kick;         /* ps_server_kick, a ruling came; or a slice of the shard's
                                   own queue left (sendq_notify) */
};

static sblock_t *server_block(ps_server_t *s, uint64_t offset)
{
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (s->blk[mid].b->offset == offset) return &s->blk[mid];
        if (s->blk[mid].b->offset < offset) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static void reject(ps_server_t *s, const comm_msg_t *m, const char *why)
{
    atomic_fetch_add(&s->n_rejected, 1);
    char source[48];
    snprintf(source, sizeof source, "ps shard %d/rank %d", s->cfg.shard, m->peer);
    reject_log(source, "ps shard %d: rejected %s from rank %d (iteration %lld, layer %d, "
               "offset %llu): %s", s->cfg.shard, msg_type_name(m->hdr.type), m->peer,
               (long long)m->hdr.iteration, m->hdr.layer, (unsigned long long)m->hdr.offset, why);
}

/* A queued answer has gone (or could not; in a shared queue maybe on another thread). */
static void answer_done(void *arg, const sendq_msg_t *m, int rc)
{
    const ps_server_t *s = arg;
    if (rc != 0)
        log_warn("ps shard %d: could not answer rank %d's pull of offset %llu", s->cfg.shard,
                 m->peer, (unsigned long long)m->hdr.offset);
    comm_buf_t *values = m->owner;
    comm_buf_release(&values);
}

static void answer(ps_server_t *s, sblock_t *k, int peer, const unsigned char *rid,
                   size_t rid_len, int32_t layer)
{
    comm_buf_t *values = k->wire ? k->wire : k->values;
    msg_header_t h = {.type = MSG_PS_VALUES, .layer = layer, .shard = (uint32_t)s->cfg.shard,
                      .iteration = k->version - 1, .offset = k->b->offset};
    int64_t zero = atomic_load(&s->trace_zero_ns);
    if (zero) { /* when these values start towards the worker: the start of its PULL row */
        h.stamp_ns = clock_now_ns() - zero;
        if (h.stamp_ns < 1) h.stamp_ns = 1;
    }
    if (s->sq) { /* the values as they are now: the queue's reference keeps them in flight
                  * until the last slice is out, so an apply meanwhile writes a copy */
        comm_buf_t *ref = comm_buf_ref(values);
        sendq_msg_t sm = {.peer = peer, .rid = rid, .rid_len = rid_len, .hdr = h,
                          .data = comm_buf_data(ref), .bytes = comm_buf_bytes(ref),
                          .priority = layer, .owner = ref};
        if (s->cfg.order) sendq_push_from(s->sq, s->comm, &sm, answer_done, s);
        else sendq_push(s->sq, &sm);
        return;
    }
    int rc = comm_send_buf(s->comm, peer, rid, rid_len, h, values);
    if (rc != 0)
        log_warn("ps shard %d: could not answer rank %d's pull of offset %llu", s->cfg.shard,
                 peer, (unsigned long long)k->b->offset);
}

static int pull_ready(const ps_server_t *s, const sblock_t *k, int64_t t)
{
    return k->version >= t + 1 - s->cfg.staleness;
}

static void serve_pulls(ps_server_t *s, sblock_t *k)
{
    pull_req_t **pp = &k->pulls;
    while (*pp) {
        pull_req_t *r = *pp;
        if (pull_ready(s, k, r->t)) {
            answer(s, k, r->peer, r->rid, r->rid_len, r->layer);
            *pp = r->next;
            free(r);
        } else {
            pp = &r->next;
        }
    }
}

/* A buffer that ZeroMQ is still sending to a puller is not written: *bp becomes a copy, and
 * the old buffer goes when that send is done. */
static void buf_own(comm_buf_t **bp)
{
    if (!comm_buf_in_flight(*bp)) return;
    comm_buf_t *fresh = comm_buf_new(comm_buf_bytes(*bp));
    memcpy(comm_buf_data(fresh), comm_buf_data(*bp), comm_buf_bytes(*bp));
    comm_buf_release(bp);
    *bp = fresh;
}

/* The wire precision is not fp32: the held pushes of one iteration (in[r]: rank r's is
 * there) decoded and summed in fp32, in rank order, and closed. Returns the sum (count
 * floats, malloc'ed: the caller frees it). */
static float *held_sum_decoded(ps_server_t *s, const sblock_t *k, comm_msg_t *held,
                               const unsigned char *in)
{
    float *acc = xcalloc((size_t)k->b->count + 1, sizeof(float));
    for (int r = 0; r < s->cfg.world; r++) {
        if (!in[r]) continue;
        wire_add(s->cfg.wire, acc, comm_msg_data(&held[r]), k->b->count);
        comm_msg_close(&held[r]);
    }
    return acc;
}

/* The held pushes of iteration `version` (slot sl) summed, in rank order, and closed: the
 * sum (count floats) in *acc; *first: the rank whose payload holds it (-1: malloc'ed). */
static float *held_sum(ps_server_t *s, sblock_t *k, int sl, int *first)
{
    comm_msg_t *held = &k->held[(size_t)sl * s->cfg.world];
    const unsigned char *in = &k->pushed[(size_t)sl * s->cfg.world];
    *first = -1;
    if (wire_encoded(s->cfg.wire)) return held_sum_decoded(s, k, held, in);
    float *acc = NULL;
    for (int r = 0; r < s->cfg.world; r++) {
        if (!in[r]) continue;
        if (*first < 0) {
            *first = r;
            acc = comm_msg_data_writable(&held[r]);
            continue;
        }
        const float *g = comm_msg_data(&held[r]);
        vec_add(acc, g, k->b->count);
        comm_msg_close(&held[r]);
    }
    return acc;
}

/* Applies every complete iteration of block k, in order, that its ruling allows (cfg.ready:
 * taken, or skipped with the values unchanged; one not ruled on yet waits for
 * ps_server_kick), then answers the pulls it can. */
static void apply_ready(ps_server_t *s, sblock_t *k)
{
    int slots = s->cfg.staleness + 1;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        int sl = (int)(k->version % slots);
        if (k->n_push[sl] < s->cfg.n_workers) break;
        int take = s->cfg.ready ? s->cfg.ready(s->cfg.ready_arg, k->version) : 1;
        if (take < 0) break;
        int first;
        float *acc = held_sum(s, k, sl, &first);
        if (take) {
            buf_own(&k->values);
            s->cfg.update(s->cfg.update_arg, comm_buf_data(k->values), acc, k->b->count,
                          k->b->offset, k->version);
            if (k->wire) {
                buf_own(&k->wire);
                half_encode(s->cfg.wire, comm_buf_data(k->wire), comm_buf_data(k->values),
                            k->b->count);
            }
        }
        if (first >= 0) comm_msg_close(&k->held[(size_t)sl * s->cfg.world + first]);
        else free(acc);
        memset(&k->pushed[(size_t)sl * s->cfg.world], 0, (size_t)s->cfg.world);
        k->n_push[sl] = 0;
        k->version++;
    }
    pthread_cond_broadcast(&s->applied);
    pthread_mutex_unlock(&s->lock);
    serve_pulls(s, k);
}

/* recv_ns: when comm_recv returned m (clock_now_ns clock). */
static void server_handle(ps_server_t *s, comm_msg_t *m, int64_t recv_ns)
{
    sblock_t *k = server_block(s, m->hdr.offset);
    if (!k) return reject(s, m, "offset is not the start of a block of this shard");
    int slots = s->cfg.staleness + 1;
    int64_t t = m->hdr.iteration;
    if (m->hdr.type == MSG_PS_PULL) {
        if (m->hdr.length) return reject(s, m, "pull with a payload");
        if (pull_ready(s, k, t)) return answer(s, k, m->peer, m->rid, m->rid_len, m->hdr.layer);
        pull_req_t *r = xcalloc(1, sizeof *r);
        *r = (pull_req_t){.peer = m->peer, .t = t, .layer = m->hdr.layer, .next = k->pulls};
        memcpy(r->rid, m->rid, m->rid_len);
        r->rid_len = m->rid_len;
        k->pulls = r;
        return;
    }
    if (m->hdr.type != MSG_PS_PUSH) return reject(s, m, "not a PS message");
    if (m->hdr.length != (uint64_t)k->b->count * (uint64_t)precision_bytes(s->cfg.wire))
        return reject(s, m, "length is not the block's");
    if (t < k->version) return reject(s, m, "iteration already applied");
    if (t > k->version + s->cfg.staleness) return reject(s, m, "beyond the staleness bound");
    int slot = (int)(t % slots);
    unsigned char *pushed = &k->pushed[(size_t)slot * s->cfg.world + m->peer];
    if (*pushed) return reject(s, m, "second push of this block for this iteration");
    *pushed = 1;
    if (s->cfg.on_push)
        s->cfg.on_push(s->cfg.on_push_arg, m->peer, k->b->offset, t, recv_ns);
    comm_msg_move(&k->held[(size_t)slot * s->cfg.world + m->peer], m);
    k->n_push[slot]++;
    apply_ready(s, k);
}

/* Every block's complete iterations that waited for their ruling (ps_server_kick). */
static void apply_all_ready(ps_server_t *s)
{
    for (int i = 0; i < s->n; i++) apply_ready(s, &s->blk[i]);
}

/* comm_recv, but rulings come too (ps_server_kick): each applies what waited for it, and a
 * wait ends at a message or a ruling. */
static int server_recv_or_kick(ps_server_t *s, comm_msg_t *m, int timeout_ms)
{
    for (int waited = 0;; waited = 1) {
        uint64_t n;
        if (read(comm_waker_fd(s->kick), &n, sizeof n) == (ssize_t)sizeof n) apply_all_ready(s);
        else if (errno != EAGAIN) die("eventfd read: %s", strerror(errno));
        int rc = comm_recv(s->comm, NULL, m, 0); /* one kept, or one on the sockets */
        if (rc != 0 || waited) return rc;
        rc = comm_wait_in(s->comm, comm_waker_fd(s->kick), timeout_ms);
        if (rc <= 0) return rc;
    }
}

static void *server_main(void *arg)
{
    ps_server_t *s = arg;
    int busy = 0;
    pthread_setname_np(pthread_self(), "ps shard");
    while (!atomic_load(&s->stop)) {
        comm_msg_t m;
        /* with answers queued, look again soon: a shared queue's releases wake no one, the
         * shard's own wake it (kick) */
        int wait_ms = !busy          ? 50
                      : s->cfg.order ? SENDQ_SHARED_POLL_MS
                                     : clock_host_ms(SENDQ_POLL_MS);
        bool kicked = s->cfg.ready || (s->sq && !s->cfg.order); /* rulings, or slices out */
        int rc = kicked ? server_recv_or_kick(s, &m, wait_ms)
                        : comm_recv(s->comm, NULL, &m, wait_ms);
        if (rc < 0) break;
        if (rc == 1 && m.hdr.type == MSG_SLICE) {
            comm_msg_t whole;
            char why[160];
            int got = slice_asm_take(s->sa, &m, &whole, why, sizeof why);
            if (got < 0) reject(s, &m, why); /* m's header stays readable once closed */
            if (got == 1) comm_msg_move(&m, &whole);
            else rc = 0;
        }
        if (rc == 1) {
            server_handle(s, &m, clock_now_ns());
            comm_msg_close(&m);
        }
        busy = s->sq ? sendq_pump(s->sq, s->comm) : 0;
    }
    return NULL;
}

ps_server_t *ps_server_new(const ps_server_config_t *cfg)
{
    ASSERT(cfg->update && cfg->layout && cfg->init, "ps server config incomplete");
    ASSERT(cfg->staleness >= 0 && cfg->n_workers >= 1 && cfg->n_workers <= cfg->world,
           "staleness %d, %d workers of %d", cfg->staleness, cfg->n_workers, cfg->world);
    comm_t *c = comm_new("ps", cfg->shard, cfg->world, cfg->bind, 5000);
    if (!c) return NULL;
    if (cfg->conn_cap > 0) comm_set_connection_cap(c, cfg->conn_cap);
    ps_server_t *s = xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    s->comm = c;
    s->local_endpoint = comm_bind_local(c);
    s->sa = slice_asm_new(comm_max_payload());
    if (cfg->order) s->sq = cfg->order;
    else if (cfg->slice_bytes) {
        s->sq = sendq_new(cfg->slice_bytes, 5000, answer_done, s);
        if (cfg->turns) sendq_take_turns(s->sq);
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->applied, NULL);
    if (!(s->kick = comm_waker_new())) die("ps shard %d: no eventfd", cfg->shard);
    if (s->sq && !cfg->order) sendq_notify(s->sq, s->kick); /* a slice out wakes it */
    const ps_layout_t *l = cfg->layout;
    for (int b = 0; b < l->n_blocks; b++) s->n += l->blocks[b].shard == cfg->shard;
    s->blk = xcalloc((size_t)s->n + 1, sizeof *s->blk);
    int slots = cfg->staleness + 1, i = 0;
    for (int b = 0; b < l->n_blocks; b++) {
        const ps_block_t *pb = &l->blocks[b];
        if (pb->shard != cfg->shard) continue;
        sblock_t *k = &s->blk[i++];
        k->b = pb;
        k->version = cfg->start_version;
        k->values = comm_buf_new((size_t)pb->count * sizeof(float));
        memcpy(comm_buf_data(k->values), cfg->init + pb->offset, (size_t)pb->count * sizeof(float));
        if (wire_encoded(cfg->wire)) {
            k->wire = comm_buf_new((size_t)pb->count * (size_t)precision_bytes(cfg->wire));
            half_encode(cfg->wire, comm_buf_data(k->wire), cfg->init + pb->offset, pb->count);
        }
        k->held = xcalloc((size_t)slots * cfg->world, sizeof *k->held);
        k->n_push = xcalloc((size_t)slots, sizeof(int));
        k->pushed = xcalloc((size_t)slots * cfg->world, 1);
    }
    if (pthread_create(&s->thread, NULL, server_main, s) != 0) die("pthread_create");
    return s;
}

void ps_server_destroy(ps_server_t **sp)
{
    if (!sp || !*sp) return;
    ps_server_t *s = *sp;
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    if (s->cfg.order) sendq_drop(s->cfg.order, s->comm); /* the rank's, not the shard's */
    else sendq_destroy(&s->sq);
    slice_asm_destroy(&s->sa);
    comm_destroy(&s->comm);
    comm_waker_release(&s->kick); /* its fd closes once ZeroMQ has let go of every answer */
    for (int i = 0; i < s->n; i++) {
        sblock_t *k = &s->blk[i];
        while (k->pulls) {
            pull_req_t *r = k->pulls;
            k->pulls = r->next;
            free(r);
        }
        comm_buf_release(&k->values);
        comm_buf_release(&k->wire);
        for (int sl = 0; sl < s->cfg.staleness + 1; sl++)
            for (int r = 0; r < s->cfg.world; r++)
                if (k->pushed[(size_t)sl * s->cfg.world + r])
                    comm_msg_close(&k->held[(size_t)sl * s->cfg.world + r]);
        free(k->held);
        free(k->n_push);
        free(k->pushed);
    }
    free(s->blk);
    pthread_cond_destroy(&s->applied);
    pthread_mutex_destroy(&s->lock);
    free(s);
    *sp = NULL;
}

const char *ps_server_endpoint(const ps_server_t *s) { return comm_endpoint(s->comm); }
const char *ps_server_local_endpoint(const ps_server_t *s) { return s->local_endpoint; }
void ps_server_set_trace_zero(ps_server_t *s, int64_t zero_ns)
{
    atomic_store(&s->trace_zero_ns, zero_ns);
}
uint64_t ps_server_n_rejected(ps_server_t *s) { return atomic_load(&s->n_rejected); }

void ps_server_copy_values(ps_server_t *s, float *arena)
{
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->n; i++)
        memcpy(arena + s->blk[i].b->offset, comm_buf_data(s->blk[i].values),
               (size_t)s->blk[i].b->count * sizeof(float));
    pthread_mutex_unlock(&s->lock);
}

int ps_server_snapshot(ps_server_t *s, int64_t version, float *arena, int timeout_ms)
{
    struct timespec deadline; /* on the host's clock: the cluster's timeout x K */
    int host_ms = clock_host_ms(timeout_ms);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += host_ms / 1000;
    deadline.tv_nsec += (long)(host_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) deadline.tv_sec++, deadline.tv_nsec -= 1000000000;
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    for (int i = 0; i < s->n && rc == 0; i++) {
        while (s->blk[i].version < version && rc == 0)
            if (pthread_cond_timedwait(&s->applied, &s->lock, &deadline) == ETIMEDOUT &&
                s->blk[i].version < version) {
                log_error("ps shard %d: block at float offset %llu applied %lld iterations, "
                          "not %lld, within %d ms", s->cfg.shard,
                          (unsigned long long)s->blk[i].b->offset,
                          (long long)s->blk[i].version, (long long)version, timeout_ms);
                rc = -1;
            }
        if (rc == 0 && s->blk[i].version > version) {
            log_error("ps shard %d: block at float offset %llu is at version %lld, past the "
                      "snapshot's %lld", s->cfg.shard, (unsigned long long)s->blk[i].b->offset,
                      (long long)s->blk[i].version, (long long)version);
            rc = -1;
        }
    }
    for (int i = 0; i < s->n && rc == 0; i++)
        memcpy(arena + s->blk[i].b->offset, comm_buf_data(s->blk[i].values),
               (size_t)s->blk[i].b->count * sizeof(float));
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void ps_server_kick(ps_server_t *s)
{
    uint64_t one = 1;
    if (write(comm_waker_fd(s->kick), &one, sizeof one) < 0 && errno != EAGAIN)
        die("eventfd write: %s", strerror(errno));
}
