#include "runtime/sync/sfb.h"

#include <stdlib.h>

#include "core/check.h"
#include "core/log.h"

static int recv_factor(comm_t *c, int type, int peer, int64_t it, int layer, size_t cols,
                       comm_msg_t *g, int timeout_ms)
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
        if (comm_msg_bytes(g) % (cols * sizeof(float)) == 0) return 0;
        log_warn("sfb: rank %d dropped %s from rank %d: %zu bytes is not rows of %zu floats",
                 comm_rank(c), msg_type_name(type), peer, comm_msg_bytes(g), cols);
        comm_msg_close(g);
    }
}

int sfb_exchange(comm_t *c, int64_t iteration, int layer, const float *u, const float *v,
                 size_t k, size_t m, size_t n, sfb_factor_fn fn, void *arg,
                 int64_t *arrived_ns, int timeout_ms)
{
    int w = comm_n_peers(c), r = comm_rank(c);
    comm_tracker_t tr;
    comm_tracker_init(&tr);
    int rc = 0;
    for (int p = 0; p < w && !rc; p++) {
        if (p == r) continue;
        msg_header_t h = {.type = MSG_SFB_U, .layer = layer, .iteration = iteration,
                          .shard = (uint32_t)p};
        if (comm_send(c, p, h, u, k * m * sizeof(float), &tr) != 0) rc = -1;
        h.type = MSG_SFB_V;
        if (!rc && comm_send(c, p, h, v, k * n * sizeof(float), &tr) != 0) rc = -1;
        if (rc) log_error("sfb: rank %d could not send factors to rank %d", r, p);
    }
    for (int p = 0; p < w && !rc; p++) {
        if (p == r) {
            if (arrived_ns) arrived_ns[p] = 0;
            fn(arg, r, u, v, k, m, n);
            continue;
        }
        comm_msg_t gu, gv;
        if (recv_factor(c, MSG_SFB_U, p, iteration, layer, m, &gu, timeout_ms)) {
            rc = -1;
            break;
        }
        if (recv_factor(c, MSG_SFB_V, p, iteration, layer, n, &gv, timeout_ms)) {
            comm_msg_close(&gu);
            rc = -1;
            break;
        }
        if (arrived_ns) arrived_ns[p] = gu.recv_ns > gv.recv_ns ? gu.recv_ns : gv.recv_ns;
        size_t ku = comm_msg_bytes(&gu) / (m * sizeof(float));
        size_t kv = comm_msg_bytes(&gv) / (n * sizeof(float));
        if (ku != kv) {
            log_error("sfb: rank %d got U of %zu rows but V of %zu rows from rank %d", r, ku, kv,
                      p);
            rc = -1;
        } else {
            fn(arg, p, comm_msg_data(&gu), comm_msg_data(&gv), ku, m, n);
        }
        comm_msg_close(&gu);
        comm_msg_close(&gv);
    }
    if (comm_tracker_wait(&tr, timeout_ms))
        die("sfb: rank %d: sent factors not released within %d ms", r, timeout_ms);
    return rc;
}
