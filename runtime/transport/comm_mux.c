#include "runtime/transport/comm_mux.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/transport/clock.h"
#include "runtime/transport/sendq.h"
#include "runtime/transport/slice.h"

/* How long the mux thread waits on its sockets before it looks at its stop flag again; a
 * queued send or a stop wakes it at once through the eventfd. */
#define MUX_IDLE_MS 1000

typedef struct send_req {
    comm_mux_port_t *port;
    int peer;
    msg_header_t hdr;
    const void *data;
    size_t bytes;
    comm_tracker_t *tracker; /* NULL: data is the copy below, freed once sent */
    struct send_req *next;
} send_req_t;

typedef struct inbox_node {
    comm_msg_t msg;
    struct inbox_node *next;
} inbox_node_t;

struct comm_mux_port {
    comm_mux_t *mux;
    comm_match_t expect;
    bool expecting;
    inbox_node_t *head, *tail;
    pthread_cond_t arrived;
    atomic_int failed;
    atomic_int queued;        /* its sends not yet handed to the comm */
    comm_mux_port_t *next;
};

struct comm_mux {
    char name[16];
    comm_t *comm;             /* the mux thread's alone once it runs */
    pthread_t thread;
    comm_waker_t *waker;      /* its eventfd: a send was queued, a slice left, or stop */
    pthread_mutex_t lock;     /* the queue, the ports, their inboxes */
    send_req_t *queue_head, *queue_tail;
    comm_mux_port_t *ports;
    bool stop;
    size_t slice_bytes;       /* 0: sends in queue order; else through sq (under lock) */
    bool turns;               /* sq takes turns (sendq_take_turns), not layers */
    bool sent_any;            /* the mux thread has taken a send: slice_bytes is fixed */
    int send_timeout_ms;
    sendq_t *sq;              /* the mux thread's: made at its first sliced send */
    sendq_t *order;           /* comm_mux_set_order: the rank's shared queue (not owned) */
    slice_asm_t *sa;          /* the mux thread's: sliced messages coming in */
};

static void wake(comm_mux_t *m)
{
    uint64_t one = 1;
    while (write(comm_waker_fd(m->waker), &one, sizeof one) < 0 && errno == EINTR) {}
}

/* ---------------------------------------------------------------- the mux thread */

static void send_failed(comm_mux_t *m, const send_req_t *r)
{
    log_error("comm %s rank %d: send of %s (layer %d, iteration %lld) to rank %d failed "
              "or timed out", m->name, comm_rank(m->comm), msg_type_name(r->hdr.type),
              r->hdr.layer, (long long)r->hdr.iteration, r->peer);
    atomic_store(&r->port->failed, 1);
    pthread_mutex_lock(&m->lock);
    pthread_cond_broadcast(&r->port->arrived);
    pthread_mutex_unlock(&m->lock);
}

/* Lets r's payload go and r with it; the port may be gone right after. */
static void req_free(send_req_t *r)
{
    if (r->tracker) comm_tracker_drop(r->tracker);
    else free((void *)r->data);
    atomic_fetch_sub(&r->port->queued, 1);
    free(r);
}

static void send_one(comm_mux_t *m, send_req_t *r)
{
    if (!atomic_load(&r->port->failed) &&
        comm_send(m->comm, r->peer, r->hdr, r->data, r->bytes, r->tracker) != 0)
        send_failed(m, r);
    req_free(r);
}

static void sliced_done(void *arg, const sendq_msg_t *sm, int rc)
{
    send_req_t *r = sm->owner;
    if (rc) send_failed(arg, r);
    req_free(r);
}

/* Hands the queued messages to the comm: in queue order, or, with slices, to the send
 * queue, by priority (the header's layer: the one the next forward pass needs first is the
 * lowest) and what its windows allow. 1 while the send queue holds something. */
static int send_queued(comm_mux_t *m)
{
    pthread_mutex_lock(&m->lock);
    send_req_t *r = m->queue_head;
    m->queue_head = m->queue_tail = NULL;
    size_t slice_bytes = m->slice_bytes;
    if (r) m->sent_any = true;
    pthread_mutex_unlock(&m->lock);
    if (slice_bytes && !m->sq && !m->order) {
        m->sq = sendq_new(slice_bytes, m->send_timeout_ms, sliced_done, m);
        sendq_notify(m->sq, m->waker); /* a slice out wakes the thread */
        if (m->turns) sendq_take_turns(m->sq);
    }
    sendq_t *q = m->order ? m->order : m->sq;
    while (r) {
        send_req_t *next = r->next;
        sendq_msg_t sm = {.peer = r->peer, .hdr = r->hdr, .data = r->data, .bytes = r->bytes,
                          .priority = r->hdr.layer, .owner = r};
        if (!q) send_one(m, r);
        else if (atomic_load(&r->port->failed)) req_free(r);
        else if (m->order) sendq_push_from(m->order, m->comm, &sm, sliced_done, m);
        else sendq_push(m->sq, &sm);
        r = next;
    }
    return q ? sendq_pump(q, m->comm) : 0;
}

/* A sliced message's piece: 1 with g the whole message once its last piece is in, else 0
 * (kept, or refused and logged). */
static int unslice(comm_mux_t *m, comm_msg_t *g)
{
    comm_msg_t whole;
    char why[160];
    int peer = g->peer;
    int rc = slice_asm_take(m->sa, g, &whole, why, sizeof why);
    if (rc < 0)
        log_error("comm %s rank %d: refused a slice from rank %d: %s", m->name,
                  comm_rank(m->comm), peer, why);
    if (rc != 1) return 0;
    comm_msg_move(g, &whole);
    return 1;
}

/* Moves g to the port that expects it; 0 when none does. Called with the lock held. */
static int route(comm_mux_t *m, comm_msg_t *g)
{
    for (comm_mux_port_t *p = m->ports; p; p = p->next) {
        if (!p->expecting || !comm_match_ok(&p->expect, g)) continue;
        inbox_node_t *n = xcalloc(1, sizeof *n);
        comm_msg_move(&n->msg, g);
        if (p->tail) p->tail->next = n;
        else p->head = n;
        p->tail = n;
        pthread_cond_broadcast(&p->arrived);
        return 1;
    }
    return 0;
}

static void deliver_arrived(comm_mux_t *m)
{
    comm_match_t any = COMM_MATCH_ANY;
    comm_msg_t g;
    while (comm_recv(m->comm, &any, &g, 0) == 1) {
        if (g.hdr.type == MSG_SLICE && !unslice(m, &g)) continue;
        pthread_mutex_lock(&m->lock);
        int taken = route(m, &g);
        pthread_mutex_unlock(&m->lock);
        if (!taken) {
            log_warn("comm %s rank %d: dropped %s (layer %d, iteration %lld) from rank %d: "
                     "no thread waits for it", m->name, comm_rank(m->comm), msg_type_name(g.hdr.type),
                     g.hdr.layer, (long long)g.hdr.iteration, g.peer);
            comm_msg_close(&g);
        }
    }
}

static void *mux_main(void *arg)
{
    comm_mux_t *m = arg;
    char tname[16];
    snprintf(tname, sizeof tname, "mux %.11s", m->name);
    pthread_setname_np(pthread_self(), tname);
    for (;;) {
        int busy = send_queued(m);
        deliver_arrived(m);
        comm_report_link_trouble(m->comm);
        pthread_mutex_lock(&m->lock);
        bool done = m->stop && !m->queue_head && !busy;
        pthread_mutex_unlock(&m->lock);
        if (done) break;
        /* with slices waiting, look again soon: a shared queue's releases wake no one, the
         * mux's own queue's wake it */
        int wait_ms = !busy     ? MUX_IDLE_MS
                      : m->order ? SENDQ_SHARED_POLL_MS
                                 : clock_host_ms(SENDQ_POLL_MS);
        if (comm_wait_in(m->comm, comm_waker_fd(m->waker), wait_ms) == 2) {
            uint64_t n;
            while (read(comm_waker_fd(m->waker), &n, sizeof n) < 0 && errno == EINTR) {}
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- set-up */

comm_mux_t *comm_mux_new(const char *name, int rank, int n_peers, const char *const *endpoints,
                         int send_timeout_ms)
{
    comm_mux_t *m = xcalloc(1, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->comm = comm_new(name, rank, n_peers, NULL, send_timeout_ms);
    comm_watch_links(m->comm);
    for (int p = 0; p < n_peers; p++)
        if (endpoints[p] && comm_connect(m->comm, p, endpoints[p]) != 0) {
            comm_destroy(&m->comm);
            free(m);
            return NULL;
        }
    m->send_timeout_ms = send_timeout_ms;
    m->sa = slice_asm_new(comm_max_payload());
    m->waker = comm_waker_new();
    ASSERT(m->waker, "comm mux %s: no eventfd", name);
    pthread_mutex_init(&m->lock, NULL);
    ASSERT(pthread_create(&m->thread, NULL, mux_main, m) == 0, "pthread_create");
    return m;
}

void comm_mux_destroy(comm_mux_t **mp)
{
    if (!mp || !*mp) return;
    comm_mux_t *m = *mp;
    pthread_mutex_lock(&m->lock);
    ASSERT(!m->ports, "comm mux destroyed while a port is open");
    m->stop = true;
    pthread_mutex_unlock(&m->lock);
    wake(m);
    pthread_join(m->thread, NULL);
    sendq_destroy(&m->sq);
    slice_asm_destroy(&m->sa);
    comm_destroy(&m->comm);
    comm_waker_release(&m->waker); /* its fd closes once ZeroMQ has let go of every slice */
    pthread_mutex_destroy(&m->lock);
    free(m);
    *mp = NULL;
}

comm_mux_port_t *comm_mux_port_new(comm_mux_t *m)
{
    comm_mux_port_t *p = xcalloc(1, sizeof *p);
    p->mux = m;
    pthread_cond_init(&p->arrived, NULL);
    atomic_init(&p->failed, 0);
    atomic_init(&p->queued, 0);
    pthread_mutex_lock(&m->lock);
    p->next = m->ports;
    m->ports = p;
    pthread_mutex_unlock(&m->lock);
    return p;
}

void comm_mux_port_destroy(comm_mux_port_t **pp)
{
    if (!pp || !*pp) return;
    comm_mux_port_t *p = *pp;
    comm_mux_t *m = p->mux;
    /* its sends still queued (a pull's request waiting behind a window) go first: each is
     * sent, or fails within the send timeout */
    while (atomic_load(&p->queued) > 0) {
        wake(m);
        clock_sleep_until_ns(clock_now_ns() + 1000000);
    }
    pthread_mutex_lock(&m->lock);
    for (comm_mux_port_t **q = &m->ports; *q; q = &(*q)->next)
        if (*q == p) {
            *q = p->next;
            break;
        }
    pthread_mutex_unlock(&m->lock);
    while (p->head) {
        inbox_node_t *n = p->head;
        p->head = n->next;
        comm_msg_close(&n->msg);
        free(n);
    }
    pthread_cond_destroy(&p->arrived);
    free(p);
    *pp = NULL;
}

/* ---------------------------------------------------------------- the users' side */

int comm_mux_failed(const comm_mux_port_t *p) { return atomic_load(&p->failed) ? -1 : 0; }

int comm_mux_send(comm_mux_port_t *p, int peer, msg_header_t hdr, const void *data, size_t bytes,
                  comm_tracker_t *tracker)
{
    if (comm_mux_failed(p)) return -1;
    send_req_t *r = xcalloc(1, sizeof *r);
    *r = (send_req_t){.port = p, .peer = peer, .hdr = hdr, .bytes = bytes, .tracker = tracker};
    if (tracker) {
        comm_tracker_hold(tracker);
        r->data = data;
    } else if (bytes) {
        void *copy = xmalloc(bytes);
        memcpy(copy, data, bytes);
        r->data = copy;
    }
    comm_mux_t *m = p->mux;
    atomic_fetch_add(&p->queued, 1);
    pthread_mutex_lock(&m->lock);
    if (m->queue_tail) m->queue_tail->next = r;
    else m->queue_head = r;
    m->queue_tail = r;
    pthread_mutex_unlock(&m->lock);
    wake(m);
    return 0;
}

void comm_mux_set_slices(comm_mux_t *m, size_t slice_bytes, bool turns)
{
    pthread_mutex_lock(&m->lock);
    ASSERT(!m->sent_any, "comm mux %s: slices set after its first send", m->name);
    m->slice_bytes = slice_bytes;
    m->turns = turns;
    pthread_mutex_unlock(&m->lock);
}

void comm_mux_set_order(comm_mux_t *m, sendq_t *q)
{
    pthread_mutex_lock(&m->lock);
    ASSERT(!m->sent_any, "comm mux %s: send order set after its first send", m->name);
    m->order = q;
    pthread_mutex_unlock(&m->lock);
}

void comm_mux_expect(comm_mux_port_t *p, const comm_match_t *match)
{
    pthread_mutex_lock(&p->mux->lock);
    p->expect = *match;
    p->expecting = true;
    pthread_mutex_unlock(&p->mux->lock);
}

int comm_mux_recv(comm_mux_port_t *p, comm_msg_t *out, int timeout_ms)
{
    comm_mux_t *m = p->mux;
    int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000;
    pthread_mutex_lock(&m->lock);
    while (!p->head && !atomic_load(&p->failed)) {
        int64_t left_ns = deadline - clock_now_ns();
        if (left_ns <= 0) break;
        /* on the host's clock: a cluster's ns are K of the host's under dilation */
        int64_t host_ns = (int64_t)clock_host_ms((int)((left_ns + 999999) / 1000000)) * 1000000;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += host_ns / 1000000000;
        ts.tv_nsec += host_ns % 1000000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&p->arrived, &m->lock, &ts);
    }
    int rc = 0;
    if (p->head) {
        inbox_node_t *n = p->head;
        p->head = n->next;
        if (!p->head) p->tail = NULL;
        comm_msg_move(out, &n->msg);
        free(n);
        rc = 1;
    } else if (atomic_load(&p->failed)) {
        rc = -1;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}
