#include "runtime/sync/sfb.h"

#include <stdlib.h>

#include "core/check.h"
#include "core/half.h"
#include "core/log.h"
#include "runtime/sync/wire.h"
#include "runtime/transport/sendq.h"

static int recv_factor(comm_t *c, int type, int peer, int64_t it, int layer, size_t cols,
                       size_t vbytes, comm_msg_t *g, int timeout_ms)
{
    comm_match_t m = COMM_MATCH_ANY;
    m.type = type;
    m.peer = peer;
    m.iteration = it;
    m.layer = layer;
    for (;;) {
        if (comm_recv(c, &m, g, timeout_ms) != 1) {
            log_error("sfb: rank %d waited %d ms for %s of iteration %lld layer %d from rank %d",
                      comm_rank(c), timeout_ms, msg_type_name(type), (long long)it, layer, peer);
            return -1;
        }
        if (comm_msg_bytes(g) % (cols * vbytes) == 0) return 0;
        log_warn("sfb: rank %d dropped %s from rank %d: %zu bytes is not rows of %zu values",
                 comm_rank(c), msg_type_name(type), peer, comm_msg_bytes(g), cols);
        comm_msg_close(g);
    }
}

int sfb_exchange(comm_t *c, int64_t iteration, int layer, const float *u, const float *v,
                 size_t k, size_t m, size_t n, sfb_factor_fn fn, void *arg,
                 int64_t *arrived_ns, int timeout_ms)
{
    return sfb_exchange_at(c, PRECISION_FP32, iteration, layer, u, v, k, m, n, fn, arg,
                           arrived_ns, timeout_ms);
}

/* Sends U (ub bytes) and V (vb bytes) to every peer: as they come, without a copy (tr), or
 * under the comm's send order (comm_set_order) by layer with every other unit's traffic,
 * returning once they are out. 0, or -1 (logged). */
static int send_factors(comm_t *c, int64_t iteration, int layer, const void *u, size_t ub,
                        const void *v, size_t vb, comm_tracker_t *tr)
{
    int w = comm_n_peers(c), r = comm_rank(c), n = 0;
    sendq_msg_t msgs[2 * w];
    for (int p = 0; p < w; p++) {
        if (p == r) continue;
        msg_header_t h = {.type = MSG_SFB_U, .layer = layer, .iteration = iteration,
                          .shard = (uint32_t)p};
        if (comm_order(c)) {
            msgs[n++] = (sendq_msg_t){.peer = p, .hdr = h, .data = u, .bytes = ub,
                                      .priority = layer};
            h.type = MSG_SFB_V;
            msgs[n++] = (sendq_msg_t){.peer = p, .hdr = h, .data = v, .bytes = vb,
                                      .priority = layer};
            continue;
        }
        int rc = comm_send(c, p, h, u, ub, tr);
        h.type = MSG_SFB_V;
        if (!rc) rc = comm_send(c, p, h, v, vb, tr);
        if (rc) {
            log_error("sfb: rank %d could not send factors to rank %d", r, p);
            return -1;
        }
    }
    if (n && sendq_send(comm_order(c), c, msgs, n)) {
        log_error("sfb: rank %d could not send the factors of layer %d", r, layer);
        return -1;
    }
    return 0;
}

/* A factor as fn sees it: the floats of the message at fp32, else decoded into *tmp
 * (malloc'ed, the caller frees it). */
static const float *factor_values(precision_t wire, const void *data, size_t n, float **tmp)
{
    if (!wire_encoded(wire)) return data;
    *tmp = xmalloc(n * sizeof(float) + 1);
    half_decode(wire, *tmp, data, n);
    return *tmp;
}

int sfb_exchange_at(comm_t *c, precision_t wire, int64_t iteration, int layer, const float *u,
                    const float *v, size_t k, size_t m, size_t n, sfb_factor_fn fn, void *arg,
                    int64_t *arrived_ns, int timeout_ms)
{
    int w = comm_n_peers(c), r = comm_rank(c);
    size_t vb = (size_t)precision_bytes(wire);
    comm_tracker_t tr;
    comm_tracker_init(&tr);
    /* encoded, the factors are sent as the peers decode them and this rank's own term is
     * rebuilt from the same rounded values: every replica sums the same terms */
    void *su = wire_encoded(wire) ? wire_pack(wire, u, k * m) : (void *)u;
    void *sv = wire_encoded(wire) ? wire_pack(wire, v, k * n) : (void *)v;
    int rc = send_factors(c, iteration, layer, su, k * m * vb, sv, k * n * vb, &tr);
    for (int p = 0; p < w && !rc; p++) {
        float *tu = NULL, *tv = NULL;
        if (p == r) {
            if (arrived_ns) arrived_ns[p] = 0;
            fn(arg, r, factor_values(wire, su, k * m, &tu), factor_values(wire, sv, k * n, &tv),
               k, m, n);
            free(tu);
            free(tv);
            continue;
        }
        comm_msg_t gu, gv;
        if (recv_factor(c, MSG_SFB_U, p, iteration, layer, m, vb, &gu, timeout_ms)) {
            rc = -1;
            break;
        }
        if (recv_factor(c, MSG_SFB_V, p, iteration, layer, n, vb, &gv, timeout_ms)) {
            comm_msg_close(&gu);
            rc = -1;
            break;
        }
        if (arrived_ns) arrived_ns[p] = gu.recv_ns > gv.recv_ns ? gu.recv_ns : gv.recv_ns;
        size_t ku = comm_msg_bytes(&gu) / (m * vb);
        size_t kv = comm_msg_bytes(&gv) / (n * vb);
        if (ku != kv) {
            log_error("sfb: rank %d got U of %zu rows but V of %zu rows from rank %d", r, ku, kv,
                      p);
            rc = -1;
        } else {
            fn(arg, p, factor_values(wire, comm_msg_data(&gu), ku * m, &tu),
               factor_values(wire, comm_msg_data(&gv), kv * n, &tv), ku, m, n);
            free(tu);
            free(tv);
        }
        comm_msg_close(&gu);
        comm_msg_close(&gv);
    }
    if (comm_tracker_wait(&tr, timeout_ms))
        die("sfb: rank %d: sent factors not released within %d ms", r, timeout_ms);
    if (wire_encoded(wire)) {
        free(su);
        free(sv);
    }
    return rc;
}
