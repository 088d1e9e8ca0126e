#include "runtime/sync/allreduce.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/half.h"
#include "core/vec.h"
#include "core/log.h"
#include "runtime/sync/wire.h"
#include "runtime/transport/sendq.h"

/* Segment s of W: [seg_lo(s), seg_lo(s+1)). */
static size_t seg_lo(size_t count, int w, int s) { return count * (size_t)s / (size_t)w; }

/* What this rank's sends still read of buf: the zero-copy chunks until ZeroMQ releases them
 * (tr), or under the comm's send order (q = comm_order) the chunks queued by layer with
 * every other unit's traffic until they are out (t), with the copies encoded for them. */
typedef struct {
    comm_tracker_t tr;
    sendq_t *q;
    sendq_ticket_t t;
    void **packed;
    int n_packed, cap_packed;
} ring_out_t;

/* send_seg under the send order: the segment's chunks (encoded first when the wire is)
 * queued at once with the layer as their priority; they go while this rank receives
 * (sendq_recv). */
static void send_seg_ordered(comm_t *c, precision_t wire, int type, int step, int64_t it,
                             int layer, const float *buf, size_t lo, size_t hi, size_t chunk,
                             ring_out_t *o)
{
    int right = (comm_rank(c) + 1) % comm_n_peers(c);
    int n_chunks = hi > lo ? (int)((hi - lo + chunk - 1) / chunk) : 1;
    sendq_msg_t *msgs = xcalloc((size_t)n_chunks, sizeof *msgs);
    for (int i = 0; i < n_chunks; i++) {
        size_t o_at = lo + (size_t)i * chunk, n = hi - o_at < chunk ? hi - o_at : chunk;
        msg_header_t h = {.type = (uint16_t)type, .layer = layer, .shard = (uint32_t)step,
                          .iteration = it, .offset = o_at};
        const void *data = buf + o_at;
        if (wire_encoded(wire)) {
            if (o->n_packed == o->cap_packed) {
                o->cap_packed = o->cap_packed ? 2 * o->cap_packed : 16;
                o->packed = xrealloc(o->packed, (size_t)o->cap_packed * sizeof *o->packed);
            }
            data = o->packed[o->n_packed++] = wire_pack(wire, buf + o_at, n);
        }
        msgs[i] = (sendq_msg_t){.peer = right, .hdr = h, .data = data,
                                .bytes = n * (size_t)precision_bytes(wire), .priority = layer};
    }
    sendq_post(o->q, c, msgs, n_chunks, &o->t);
    free(msgs);
}

/* Waits until the ordered chunks are out and frees their copies. 0, or -1 when one failed
 * (logged by the queue). */
static int ordered_wait(comm_t *c, ring_out_t *o)
{
    if (!o->q) return 0;
    int rc = sendq_wait(o->q, c, &o->t);
    o->t = (sendq_ticket_t){0, 0};
    for (int i = 0; i < o->n_packed; i++) free(o->packed[i]);
    o->n_packed = 0;
    return rc;
}

/* Sends segment [lo, hi) to the right neighbour in chunks: the floats themselves at fp32
 * (without a copy, tracked in o), else encoded at the wire precision (a copy); under the
 * comm's send order, queued (send_seg_ordered). */
static int send_seg(comm_t *c, precision_t wire, int type, int step, int64_t it, int layer,
                    const float *buf, size_t lo, size_t hi, size_t chunk, ring_out_t *o)
{
    if (o->q) {
        send_seg_ordered(c, wire, type, step, it, layer, buf, lo, hi, chunk, o);
        return 0;
    }
    comm_tracker_t *tr = &o->tr;
    int right = (comm_rank(c) + 1) % comm_n_peers(c);
    for (size_t o = lo; o < hi || o == lo; o += chunk) {
        size_t n = hi - o < chunk ? hi - o : chunk;
        msg_header_t h = {.type = (uint16_t)type, .layer = layer, .shard = (uint32_t)step,
                          .iteration = it, .offset = o};
        int rc;
        if (wire_encoded(wire)) {
            void *packed = wire_pack(wire, buf + o, n);
            rc = comm_send(c, right, h, packed, n * (size_t)precision_bytes(wire), NULL);
            free(packed);
        } else {
            rc = comm_send(c, right, h, buf + o, n * sizeof(float), tr);
        }
        if (rc != 0) return -1;
        if (hi == lo) break;
    }
    return 0;
}

/* Where recv_seg passes each chunk on once it holds it (the pipelined ring): as step of
 * type to the right neighbour, after rounding it to the wire precision (round: the segment is
 * complete here and this rank is its owner). type 0: nowhere. */
typedef struct {
    int type, step, round;
} ring_fwd_t;

/* Receives segment [lo, hi) of step from the left neighbour; adds (reduce, in fp32) or
 * copies, decoding from the wire precision; then forwards each chunk as fwd says. */
static int recv_seg(comm_t *c, precision_t wire, int type, int step, int64_t it, int layer,
                    float *buf, size_t lo, size_t hi, int add, ring_fwd_t fwd, ring_out_t *o,
                    int timeout_ms)
{
    int left = (comm_rank(c) + comm_n_peers(c) - 1) % comm_n_peers(c);
    size_t got = 0, want = hi - lo;
    int msgs = 0;
    while (got < want || (want == 0 && msgs == 0)) {
        comm_match_t m = COMM_MATCH_ANY;
        m.type = type;
        m.peer = left;
        m.iteration = it;
        m.layer = layer;
        m.shard = step;
        comm_msg_t g;
        if (sendq_recv(o->q, c, &o->t, &m, &g, timeout_ms) != 1) {
            log_error("allreduce: rank %d waited %d ms for %s step %d of iteration %lld layer "
                      "%d from rank %d",
                      comm_rank(c), timeout_ms, msg_type_name(type), step, (long long)it, layer,
                      left);
            return -1;
        }
        msgs++;
        size_t n = comm_msg_bytes(&g) / (size_t)precision_bytes(wire);
        if (g.hdr.offset < lo || g.hdr.offset + n > hi) {
            log_warn("allreduce: rank %d dropped a chunk [%llu, +%zu) outside [%zu, %zu)",
                     comm_rank(c), (unsigned long long)g.hdr.offset, n, lo, hi);
            comm_msg_close(&g);
            continue;
        }
        const float *src = comm_msg_data(&g);
        float *dst = buf + g.hdr.offset;
        if (wire_encoded(wire) && add)
            wire_add(wire, dst, src, n);
        else if (wire_encoded(wire))
            half_decode(wire, dst, src, n);
        else if (add)
            vec_add(dst, src, (int64_t)n);
        else if (n) memcpy(dst, src, n * sizeof(float));
        got += n;
        size_t at = g.hdr.offset;
        comm_msg_close(&g);
        if (fwd.round && wire_encoded(wire)) wire_round(wire, dst, n);
        if (fwd.type && send_seg(c, wire, fwd.type, fwd.step, it, layer, buf, at, at + n, n ? n : 1,
                                 o))
            return -1;
    }
    return 0;
}

/* One phase of the ring, w - 1 steps: at step k this rank sends segment (r + shift - k) mod w
 * to its right and receives segment (r + shift - 1 - k) mod w from its left, added into buf
 * (add) or copied over it. 0, or -1 on a timeout. */
static int ring_phase(comm_t *c, precision_t wire, int type, int shift, int add,
                      int64_t iteration, int layer, float *buf, size_t count,
                      size_t chunk_floats, ring_out_t *o, int timeout_ms)
{
    int w = comm_n_peers(c), r = comm_rank(c), rc = 0;
    for (int k = 0; k < w - 1 && !rc; k++) {
        int s_send = ((r + shift - k) % w + w) % w, s_recv = ((r + shift - 1 - k) % w + w) % w;
        if (send_seg(c, wire, type, k, iteration, layer, buf, seg_lo(count, w, s_send),
                     seg_lo(count, w, s_send + 1), chunk_floats, o))
            rc = -1;
        else
            rc = recv_seg(c, wire, type, k, iteration, layer, buf, seg_lo(count, w, s_recv),
                          seg_lo(count, w, s_recv + 1), add, (ring_fwd_t){0, 0, 0}, o,
                          timeout_ms);
    }
    return rc;
}

/* The ring pipelined: a chunk goes on to the right as soon as it has arrived from the left and
 * been added (or copied), instead of once its whole segment has, so that a link does not idle
 * between steps. Step k sends what step k - 1 received: only step 0's segment is sent up
 * front. The sums and their order are ring_phase's. Segments go in at least
 * ALLREDUCE_PIPELINE_DEPTH chunks. */
/* Step k of the 2(w - 1) in one count: its message type (the reduce-scatter's, then the
 * all-gather's) and its step within that phase. */
static ring_fwd_t ring_step(int w, int k)
{
    return k < w - 1 ? (ring_fwd_t){MSG_AR_REDUCE, k, 0}
                     : (ring_fwd_t){MSG_AR_GATHER, k - (w - 1), 0};
}

static int ring_pipelined(comm_t *c, precision_t wire, int64_t it, int layer, float *buf,
                          size_t count, size_t chunk, ring_out_t *o, int timeout_ms)
{
    int w = comm_n_peers(c), r = comm_rank(c), steps = 2 * (w - 1);
    size_t piece = (count / (size_t)w + ALLREDUCE_PIPELINE_DEPTH - 1) / ALLREDUCE_PIPELINE_DEPTH;
    size_t least = chunk / ALLREDUCE_PIPELINE_MIN_DIV;
    if (piece < least) piece = least;
    if (piece > chunk) piece = chunk;
    if (piece == 0) piece = 1;
    if (send_seg(c, wire, MSG_AR_REDUCE, 0, it, layer, buf, seg_lo(count, w, r),
                 seg_lo(count, w, r + 1), piece, o))
        return -1;
    for (int k = 0; k < steps; k++) {
        ring_fwd_t in = ring_step(w, k), fwd = {0, 0, 0};
        int gather = in.type == MSG_AR_GATHER;
        /* reduce-scatter step k receives segment r - 1 - k, all-gather step j segment r - j */
        int s_recv = (((gather ? r - in.step : r - 1 - k) % w) + w) % w;
        if (k + 1 < steps) fwd = ring_step(w, k + 1);
        fwd.round = k == w - 2; /* the reduce-scatter's last step completes the segment */
        if (recv_seg(c, wire, in.type, in.step, it, layer, buf, seg_lo(count, w, s_recv),
                     seg_lo(count, w, s_recv + 1), !gather, fwd, o, timeout_ms))
            return -1;
    }
    return 0;
}

int allreduce_sum(comm_t *c, int64_t iteration, int layer, float *buf, size_t count,
                  size_t chunk_floats, int timeout_ms)
{
    return allreduce_sum_at(c, PRECISION_FP32, iteration, layer, buf, count, chunk_floats,
                            timeout_ms);
}

int allreduce_sum_at(comm_t *c, precision_t wire, int64_t iteration, int layer, float *buf,
                     size_t count, size_t chunk_floats, int timeout_ms)
{
    int w = comm_n_peers(c), r = comm_rank(c);
    if (w == 1) return 0;
    ASSERT(chunk_floats > 0, "chunk of 0 floats");
    ring_out_t o = {.q = comm_order(c)};
    comm_tracker_init(&o.tr);
    if (!o.q) {
        /* a chunk's region is overwritten only by the all-gather, which it reached only after
         * the right neighbour had it: one wait, at the end */
        int rc = ring_pipelined(c, wire, iteration, layer, buf, count, chunk_floats, &o,
                                timeout_ms);
        if (comm_tracker_wait(&o.tr, timeout_ms))
            die("allreduce: rank %d: a sent chunk was not released within %d ms", r, timeout_ms);
        free(o.packed);
        return rc;
    }
    /* reduce-scatter: after step k, segment (r - k - 1) mod w holds k + 2 contributions */
    int rc = ring_phase(c, wire, MSG_AR_REDUCE, 0, 1, iteration, layer, buf, count, chunk_floats, &o,
                        timeout_ms);
    /* the all-gather overwrites segments sent above without a copy: wait for their release */
    if (!rc && comm_tracker_wait(&o.tr, timeout_ms)) rc = -1;
    if (!rc && ordered_wait(c, &o)) rc = -1;
    /* all-gather: rank r owns the complete segment (r + 1) mod w; it keeps what the others
     * will decode of it, so that every replica holds the same values */
    if (!rc && wire_encoded(wire))
        wire_round(wire, buf + seg_lo(count, w, (r + 1) % w),
                   seg_lo(count, w, (r + 1) % w + 1) - seg_lo(count, w, (r + 1) % w));
    if (!rc)
        rc = ring_phase(c, wire, MSG_AR_GATHER, 1, 0, iteration, layer, buf, count, chunk_floats, &o,
                        timeout_ms);
    if (comm_tracker_wait(&o.tr, timeout_ms)) {
        /* ZeroMQ still owns a pointer into buf: returning would let the caller free it */
        die("allreduce: rank %d: a sent chunk was not released within %d ms", r, timeout_ms);
    }
    if (ordered_wait(c, &o)) rc = -1; /* the queue reads buf until then */
    free(o.packed);
    return rc;
}
