#include "runtime/transport/link_watch.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/transport/clock.h"
#include "runtime/transport/zmq_check.h"
#include "runtime/transport/zpoll.h"

#define WATCHED_EVENTS                                                                     \
    (ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |                       \
     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

typedef struct {
    void *pair;          /* receives the socket monitor's events */
    zpoll_t pz;          /* the pair, as link_watch_report looks at it */
    int peer;
    int64_t last_log_ns; /* 0: never logged */
    int held;            /* events since the last line */
    uint16_t held_event; /* the one said: the latest failed handshake, else the drop */
    char endpoint[128];
} watched_t;

struct link_watch {
    char what[96];
    watched_t *w;
    int n;
};

link_watch_t *link_watch_new(const char *what)
{
    link_watch_t *lw = xcalloc(1, sizeof *lw);
    snprintf(lw->what, sizeof lw->what, "%s", what);
    return lw;
}

void link_watch_destroy(link_watch_t **lwp)
{
    if (!lwp || !*lwp) return;
    link_watch_t *lw = *lwp;
    for (int i = 0; i < lw->n; i++) zmq_close(lw->w[i].pair);
    free(lw->w);
    free(lw);
    *lwp = NULL;
}

void link_watch_add(link_watch_t *lw, void *ctx, void *sock, int peer)
{
    static atomic_int next_id;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://link-watch-%d-%d", (int)getpid(),
             atomic_fetch_add(&next_id, 1));
    ZMQ_CHECK(zmq_socket_monitor(sock, ep, WATCHED_EVENTS), "zmq_socket_monitor");
    void *pair = zmq_socket(ctx, ZMQ_PAIR);
    if (!pair) zmq_check_fail(__FILE__, __LINE__, "zmq_socket(PAIR)", "fd limit?");
    ZMQ_CHECK(zmq_connect(pair, ep), "connect to a socket monitor");
    lw->w = xrealloc(lw->w, (size_t)(lw->n + 1) * sizeof *lw->w);
    lw->w[lw->n] = (watched_t){.pair = pair, .peer = peer};
    zpoll_init(&lw->w[lw->n++].pz, pair);
}

static const char *event_text(uint16_t e)
{
    switch (e) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        return "its handshake failed: the peer refused this rank's credentials (another "
               "job's keys, or the peer's ZAP handler says why in its log)";
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        return "its handshake failed: a protocol error (the peer speaks another security "
               "mechanism or is not a rank of this job)";
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        return "its handshake failed (timed out on a loaded host, or the peer closed it, e.g. "
               "its key is not the one this rank expects)";
    default: return "it dropped";
    }
}

/* One event off w's monitor: 1 (event and endpoint set), 0 when none is waiting. */
static int next_event(watched_t *w, uint16_t *event)
{
    unsigned char ev[6];
    int got = zmq_recv(w->pair, ev, sizeof ev, ZMQ_DONTWAIT);
    if (got < 0) {
        zpoll_drained(&w->pz);
        return 0;
    }
    int more = 0;
    size_t len = sizeof more;
    zmq_getsockopt(w->pair, ZMQ_RCVMORE, &more, &len);
    if (more) { /* the endpoint, as a second frame */
        /* zmq_recv returns the frame's whole length, which may exceed what it wrote */
        int cap = (int)sizeof w->endpoint - 1;
        int n = zmq_recv(w->pair, w->endpoint, (size_t)cap, 0);
        if (n < 0) n = 0;
        w->endpoint[n > cap ? cap : n] = '\0';
    }
    memcpy(event, ev, 2);
    return got == 6;
}

int link_watch_report(link_watch_t *lw)
{
    int total = 0;
    int64_t now = clock_now_ns();
    /* one poll(2) says which monitors may have events (zpoll.h), where reading each of them
     * cost two system calls at every turn of the caller's loop */
    zpoll_t *zs[lw->n + 1];
    for (int i = 0; i < lw->n; i++) zs[i] = &lw->w[i].pz;
    bool unused;
    zpoll_wait(zs, lw->n, -1, 0, &unused);
    for (int i = 0; i < lw->n; i++) {
        watched_t *w = &lw->w[i];
        uint16_t e;
        while (w->pz.maybe && next_event(w, &e)) {
            total++;
            w->held++;
            /* a failed handshake ends in a drop too: the handshake says why */
            if (e != ZMQ_EVENT_DISCONNECTED || !w->held_event) w->held_event = e;
        }
        if (!w->held) continue;
        if (w->last_log_ns && now - w->last_log_ns < (int64_t)LINK_WATCH_INTERVAL_MS * 1000000)
            continue;
        if (w->held == 1)
            log_warn("%s: the connection to rank %d (%s): %s; ZeroMQ retries it", lw->what,
                     w->peer, w->endpoint, event_text(w->held_event));
        else
            log_warn("%s: the connection to rank %d (%s): %d events since the last line, the "
                     "worst: %s; ZeroMQ retries it", lw->what, w->peer, w->endpoint, w->held,
                     event_text(w->held_event));
        w->held = 0;
        w->held_event = 0;
        w->last_log_ns = now;
    }
    return total;
}
