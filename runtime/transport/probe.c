#include "runtime/transport/probe.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/transport/clock.h"

/* Message kinds of the probe, in the MSG_TEST header's shard field. */
enum { PROBE_PING = 1, PROBE_PONG, PROBE_BULK, PROBE_ACK };

static int probe_recv(comm_t *c, int peer, int kind, int64_t it, comm_msg_t *g, int timeout_ms)
{
    comm_match_t m = COMM_MATCH_ANY;
    m.type = MSG_TEST;
    m.peer = peer;
    m.shard = kind;
    m.iteration = it;
    if (comm_recv(c, &m, g, timeout_ms) == 1) return 0;
    log_error("probe: rank %d waited %d ms for message %d (iteration %lld) from rank %d",
              comm_rank(c), timeout_ms, kind, (long long)it, peer);
    return -1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int probe_links(comm_t *c, int pings, int64_t bulk_bytes, int rounds, probe_result_t *out,
                int timeout_ms)
{
    memset(out, 0, sizeof *out);
    int r = comm_rank(c);
    if (comm_n_peers(c) < 2 || r > 1) return 0;
    ASSERT(pings >= 1 && rounds >= 1 && bulk_bytes >= 4, "probe of %d pings, %d x %lld bytes",
           pings, rounds, (long long)bulk_bytes);
    int peer = 1 - r;
    uint64_t word = 0;
    comm_msg_t g;
    if (r == 1) { /* the echo side */
        for (int i = 0; i < pings; i++) {
            if (probe_recv(c, peer, PROBE_PING, i, &g, timeout_ms)) return -1;
            comm_msg_close(&g);
            msg_header_t h = {.type = MSG_TEST, .layer = -1, .shard = PROBE_PONG, .iteration = i};
            if (comm_send(c, peer, h, &word, sizeof word, NULL)) return -1;
        }
        /* the ACK carries how long the messages after the first took to arrive */
        int64_t first_ns = 0, span_ns = 0;
        for (int i = 0; i < rounds; i++) {
            if (probe_recv(c, peer, PROBE_BULK, i, &g, timeout_ms)) return -1;
            comm_msg_close(&g);
            int64_t now = clock_now_ns();
            if (i == 0) first_ns = now;
            span_ns = now - first_ns;
        }
        msg_header_t h = {.type = MSG_TEST, .layer = -1, .shard = PROBE_ACK, .iteration = 0};
        return comm_send(c, peer, h, &span_ns, sizeof span_ns, NULL) ? -1 : 0;
    }
    int64_t *rtt = xcalloc((size_t)pings, sizeof *rtt);
    int rc = -1;
    for (int i = 0; i < pings; i++) {
        int64_t t0 = clock_now_ns();
        msg_header_t h = {.type = MSG_TEST, .layer = -1, .shard = PROBE_PING, .iteration = i};
        if (comm_send(c, peer, h, &word, sizeof word, NULL)) goto out;
        if (probe_recv(c, peer, PROBE_PONG, i, &g, timeout_ms)) goto out;
        comm_msg_close(&g);
        rtt[i] = clock_now_ns() - t0;
    }
    qsort(rtt, (size_t)pings, sizeof *rtt, cmp_i64);
    int64_t rtt_ns = rtt[pings / 2];
    char *bulk = xcalloc((size_t)bulk_bytes, 1);
    comm_tracker_t tr;
    comm_tracker_init(&tr);
    int64_t t0 = clock_now_ns();
    int ok = 1;
    for (int i = 0; i < rounds && ok; i++) {
        msg_header_t h = {.type = MSG_TEST, .layer = -1, .shard = PROBE_BULK, .iteration = i};
        ok = comm_send(c, peer, h, bulk, (size_t)bulk_bytes, &tr) == 0;
    }
    if (ok && probe_recv(c, peer, PROBE_ACK, 0, &g, timeout_ms) == 0) {
        int64_t dt = clock_now_ns() - t0 - rtt_ns, span_ns = 0;
        if (comm_msg_bytes(&g) == sizeof span_ns) memcpy(&span_ns, comm_msg_data(&g), sizeof span_ns);
        comm_msg_close(&g);
        if (dt < 1) dt = 1;
        out->lat_ns = rtt_ns / 2;
        out->bulk_bytes = bulk_bytes * rounds;
        out->pings = pings;
        /* the steady rate: messages 2..rounds, back to back behind the first, arrive at the
         * link's rate; the first one's head start (a shaper's burst allowance: 256 KB of a
         * 4 MB message on emucluster.sh's tbf read +2%; TCP's start) stays out of it */
        if (rounds >= 2 && span_ns > 0)
            out->bw_Bps = (double)(bulk_bytes * (rounds - 1)) / ((double)span_ns * 1e-9);
        else
            out->bw_Bps = (double)out->bulk_bytes / ((double)dt * 1e-9);
        rc = 0;
    }
    if (comm_tracker_wait(&tr, timeout_ms)) die("probe: bulk buffer not released in %d ms", timeout_ms);
    free(bulk);
out:
    free(rtt);
    return rc;
}
