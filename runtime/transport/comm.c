#include "runtime/transport/comm.h"

#include <errno.h>
#include <linux/futex.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "runtime/transport/conn_cap.h"
#include "runtime/transport/reject_log.h"
#include "runtime/transport/slice.h"
#include "runtime/transport/fabric_auth.h"
#include "runtime/transport/link_watch.h"
#include "runtime/transport/zap.h"
#include "runtime/transport/zmq_check.h"
#include "runtime/transport/zpoll.h"
#include "runtime/transport/clock.h"

/* Messages kept for a later matching receive. A bound guards against a peer that floods
 * us with traffic nobody waits for. */
#define COMM_STASH_MAX 65536

typedef struct stash_node {
    comm_msg_t msg;
    struct stash_node *next;
} stash_node_t;

typedef struct {
    void *dealer;
    zpoll_t dz;         /* the DEALER, as poll_in waits on it */
    char endpoint[256];
    bool local;         /* the DEALER goes to a ROUTER of this process (inproc) */
    unsigned char rid[256]; /* routing id of the peer's last connection to our ROUTER */
    size_t rid_len;
} peer_t;

struct comm {
    char name[16];
    int rank, n_peers, send_timeout_ms;
    uint64_t affinity;  /* ZeroMQ I/O threads its sockets may use (ZMQ_AFFINITY) */
    void *router;
    zpoll_t rz;         /* the ROUTER, as poll_in waits on it */
    char endpoint[256];
    char local_endpoint[64]; /* comm_bind_local's; "" when not bound */
    peer_t *peers;
    stash_node_t *stash_head, *stash_tail;
    int stash_n;
    bool watch;         /* comm_watch_connections: new DEALERs get a monitor too */
    link_watch_t *links; /* comm_watch_links: the DEALERs' troubles, logged */
    void **monitors;    /* PAIR sockets receiving the DEALERs' socket monitors' events */
    int n_monitors;
    int dealer_closes;       /* DEALER closes read from the monitors, not yet taken */
    uint64_t dealer_connects; /* DEALER connections made (reconnects too), read so far */
    uint64_t connects_at_close; /* dealer_connects when the last close was read */
    conn_cap_t *cap;    /* the ROUTER's monitor: its connections per host, its closes */
    uint64_t n_bad, bytes_sent, bytes_received;
    struct sendq *order; /* comm_set_order: kept for the senders, never called here */
    slice_asm_t *sa;     /* comm_set_order: sliced messages coming in */
};

static void *s_ctx;
static pid_t s_ctx_pid;
static pthread_mutex_t s_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static const keyring_t *s_keyring; /* set: every socket speaks CURVE */
static bool s_trusted_fabric;      /* and set: data sockets speak PLAIN (fabric_auth.h) */
static size_t s_max_payload = MSG_MAX_PAYLOAD_BYTES;
static atomic_int s_send_buffer; /* SO_SNDBUF of sockets made from now on; 0: the system's */

/* A send on sock (the ROUTER, or peer's DEALER) reads its pending commands, which can make
 * it readable without its descriptor saying so again (zpoll.h). */
static void touched(comm_t *c, void *sock, int peer)
{
    if (sock == c->router) zpoll_touch(&c->rz);
    else zpoll_touch(&c->peers[peer].dz);
}

void comm_set_keyring(const keyring_t *k)
{
    pthread_mutex_lock(&s_ctx_lock);
    ASSERT(!s_keyring || s_keyring == k, "the process's keyring is set once");
    s_keyring = k;
    pthread_mutex_unlock(&s_ctx_lock);
}

const keyring_t *comm_keyring(void) { return s_keyring; }

void comm_set_trusted_fabric(bool on)
{
    pthread_mutex_lock(&s_ctx_lock);
    ASSERT(!s_ctx, "the transport's mode is set before the first socket");
    s_trusted_fabric = on;
    pthread_mutex_unlock(&s_ctx_lock);
}

bool comm_trusted_fabric(void) { return s_keyring && s_trusted_fabric; }

void comm_set_send_buffer(int bytes)
{
    ASSERT(bytes >= 0, "send buffer %d", bytes);
    atomic_store(&s_send_buffer, bytes);
}

void comm_set_max_payload(size_t bytes)
{
    ASSERT(bytes > 0 && bytes <= MSG_MAX_PAYLOAD_BYTES, "max payload %zu", bytes);
    s_max_payload = bytes;
}

size_t comm_max_payload(void) { return s_max_payload; }

/* ZeroMQ receives every payload larger than its 8 KB batch into a fresh malloc of the
 * payload's size, and frees it when the reader closes the message. With glibc's defaults a
 * KV block (4 MB) is over the mmap threshold or, once freed, over the trim threshold: every
 * block came in through a fresh mmap (or a trimmed heap top), i.e. a page fault and a page
 * clear per 4 KB, which was a quarter of a receiver's CPU (perf record on
 * `comm-test --mode bench`). Raising both thresholds keeps freed blocks in the heap for the
 * next message. 32 MB is glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX);
 * the heap then holds at most the peak of blocks in flight, which the process needed anyway. */
static void keep_heap(void)
{
    if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, 256 << 20))
        log_debug("comm: mallopt refused; freed message buffers go back to the system");
}

void *comm_context(void)
{
    pthread_mutex_lock(&s_ctx_lock);
    if (s_ctx && s_ctx_pid != getpid())
        die("the ZeroMQ context was created before fork(); create it in the child "
            "(fork workers before any comm use)");
    if (!s_ctx) {
        s_ctx = zmq_ctx_new();
        if (!s_ctx) zmq_check_fail(__FILE__, __LINE__, "zmq_ctx_new()", "out of file descriptors?");
        /* Two I/O threads for data: one can saturate ~1 GB/s (ZeroMQ guide, ch. 2); the
         * second keeps a receive stream from starving a send stream on the same node. A
         * third serves only the control channels (comm_new_control), so that heartbeats
         * never wait behind megabytes of parameters in a busy I/O thread. */
        ZMQ_CHECK(zmq_ctx_set(s_ctx, ZMQ_IO_THREADS, 3), "zmq_ctx_set");
        /* A worker opens a DEALER per shard for each PUSH and PULL syncer (two per layer
         * with parameters) and a socket per unit: Inception-v3 on 4 nodes needs more than
         * ZeroMQ's default of 1023 sockets. Allow as many as the fd limit, raised to its
         * hard maximum. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
                getrlimit(RLIMIT_NOFILE, &rl);
            }
            int max_sockets = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
            if (max_sockets > 1023) ZMQ_CHECK(zmq_ctx_set(s_ctx, ZMQ_MAX_SOCKETS, max_sockets), "zmq_ctx_set");
        }
        s_ctx_pid = getpid();
        keep_heap();
    }
    /* before any CURVE server socket exists: libzmq asks the handler about each connection */
    if (s_keyring && zap_start(s_ctx, s_keyring, s_trusted_fabric) != 0)
        die("cannot start the ZAP handler");
    pthread_mutex_unlock(&s_ctx_lock);
    return s_ctx;
}

static void set_int(void *sock, int opt, int v, const char *what)
{
    ZMQ_CHECK(zmq_setsockopt(sock, opt, &v, sizeof v), what);
}

/* The largest frame a peer may send: a header plus the largest payload of this job; a peer
 * that announces more is disconnected by ZeroMQ before it is buffered. */
static void set_max_message(void *sock)
{
    int64_t max_bytes = (int64_t)s_max_payload + 4096;
    ZMQ_CHECK(zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_bytes, sizeof max_bytes), "MAXMSGSIZE");
}

static void set_key(void *sock, int opt, const uint8_t key[32], const char *what)
{
    ZMQ_CHECK(zmq_setsockopt(sock, opt, key, 32), what);
}

/* A secure process's server socket: CURVE with rank's secret key, connections admitted by
 * the ZAP handler. */
static void secure_server(void *sock, int rank)
{
    uint8_t secret[32];
    ASSERT(keyring_secret(s_keyring, rank, secret) == 0,
           "a socket of rank %d, whose secret key this process does not hold", rank);
    set_int(sock, ZMQ_CURVE_SERVER, 1, "CURVE_SERVER");
    /* a connection that has not proven a key within 10 s is closed: a stranger cannot park
     * connections (an fd and a session each) for ZeroMQ's default 30 s */
    set_int(sock, ZMQ_HANDSHAKE_IVL, 10000, "HANDSHAKE_IVL");
    set_key(sock, ZMQ_CURVE_SECRETKEY, secret, "CURVE_SECRETKEY");
    ZMQ_CHECK(zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "poseidon", 8), "ZAP_DOMAIN");
    memset(secret, 0, sizeof secret);
}

/* A secure process's connection from rank to peer: the peer must hold peer's secret key. */
static void secure_client(void *sock, int rank, int peer)
{
    uint8_t secret[32], public[32], server[32];
    ASSERT(keyring_secret(s_keyring, rank, secret) == 0 &&
               keyring_public(s_keyring, rank, public) == 0,
           "a socket of rank %d, whose secret key this process does not hold", rank);
    ASSERT(keyring_public(s_keyring, peer, server) == 0, "no key for peer %d", peer);
    set_key(sock, ZMQ_CURVE_SERVERKEY, server, "CURVE_SERVERKEY");
    set_key(sock, ZMQ_CURVE_PUBLICKEY, public, "CURVE_PUBLICKEY");
    set_key(sock, ZMQ_CURVE_SECRETKEY, secret, "CURVE_SECRETKEY");
    memset(secret, 0, sizeof secret);
}

/* A trusted-fabric data socket's server side: PLAIN, each connection's password checked
 * by the ZAP handler, which learns the server's rank from the domain. */
static void fabric_server(void *sock, int rank)
{
    char domain[32];
    int n = snprintf(domain, sizeof domain, "poseidon/%d", rank);
    set_int(sock, ZMQ_PLAIN_SERVER, 1, "PLAIN_SERVER");
    set_int(sock, ZMQ_HANDSHAKE_IVL, 10000, "HANDSHAKE_IVL");
    ZMQ_CHECK(zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, (size_t)n), "ZAP_DOMAIN");
}

/* A trusted-fabric data connection from rank to peer: rank's name and the pair's password. */
static void fabric_client(void *sock, int rank, int peer)
{
    char user[16], password[FABRIC_PASSWORD_LEN + 1];
    int n = snprintf(user, sizeof user, "%d", rank);
    ASSERT(fabric_password(s_keyring, rank, rank, peer, password) == 0,
           "no trusted-fabric password for rank %d to peer %d", rank, peer);
    ZMQ_CHECK(zmq_setsockopt(sock, ZMQ_PLAIN_USERNAME, user, (size_t)n), "PLAIN_USERNAME");
    ZMQ_CHECK(zmq_setsockopt(sock, ZMQ_PLAIN_PASSWORD, password, FABRIC_PASSWORD_LEN),
              "PLAIN_PASSWORD");
    memset(password, 0, sizeof password);
}

#define COMM_LISTEN_BACKLOG 65535

/* I/O thread 0 serves the control channels, threads 1 and 2 the data. */
#define AFFINITY_CONTROL 1u
#define AFFINITY_DATA 6u

static comm_t *comm_create(const char *name, int rank, int n_peers, const char *bind,
                           int send_timeout_ms, uint64_t affinity)
{
    ASSERT(name && strlen(name) < 16, "comm name '%s' too long", name ? name : "(null)");
    ASSERT(rank >= 0 && n_peers > 0 && rank < n_peers, "rank %d of %d", rank, n_peers);
    ASSERT(send_timeout_ms > 0, "send timeout %d", send_timeout_ms);
    comm_t *c = xcalloc(1, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rank = rank;
    c->n_peers = n_peers;
    c->send_timeout_ms = clock_host_ms(send_timeout_ms); /* a real wait: the cluster's ms x K */
    c->affinity = affinity;
    c->peers = xcalloc((size_t)n_peers, sizeof *c->peers);
    if (bind) {
        c->router = zmq_socket(comm_context(), ZMQ_ROUTER);
        if (!c->router) zmq_check_fail(__FILE__, __LINE__, "zmq_socket(ROUTER)", "fd limit?");
        ZMQ_CHECK(zmq_setsockopt(c->router, ZMQ_AFFINITY, &affinity, sizeof affinity),
                  "AFFINITY");
        if (atomic_load(&s_send_buffer) > 0)
            set_int(c->router, ZMQ_SNDBUF, atomic_load(&s_send_buffer), "SNDBUF");
        set_int(c->router, ZMQ_ROUTER_MANDATORY, 1, "ROUTER_MANDATORY");
        /* A peer that reconnects (its handshake outlasted HANDSHAKE_IVL on a loaded host)
         * comes back with its routing id while the ROUTER may still hold the old
         * connection's: by default ZeroMQ then keeps the new connection open but drops
         * everything it carries, and a 32-rank job waited forever for one rank's pushes.
         * The newer connection takes the id over instead. Under CURVE only a holder of the
         * job's keys gets this far (the id is exchanged after the handshake), and every
         * message is still checked against the rank its key authenticates. */
        set_int(c->router, ZMQ_ROUTER_HANDOVER, 1, "ROUTER_HANDOVER");
        /* Every peer connects at once when training starts; with ZeroMQ's default backlog
         * of 100 the kernel dropped most of those SYNs, and each dropped one cost its
         * sender a 1 s retransmission timeout in the first iteration. The kernel caps the
         * value at net.core.somaxconn. */
        set_int(c->router, ZMQ_BACKLOG, COMM_LISTEN_BACKLOG, "BACKLOG");
        set_int(c->router, ZMQ_LINGER, c->send_timeout_ms, "LINGER");
        set_int(c->router, ZMQ_SNDTIMEO, c->send_timeout_ms, "SNDTIMEO");
        set_max_message(c->router);
        if (s_keyring && s_trusted_fabric && affinity == AFFINITY_DATA) fabric_server(c->router, rank);
        else if (s_keyring) secure_server(c->router, rank);
        if (zmq_bind(c->router, bind) != 0) {
            log_error("comm %s rank %d: cannot bind %s: %s (port in use, or an address this "
                      "host does not have?)",
                      name, rank, bind, zmq_strerror(zmq_errno()));
            zmq_close(c->router);
            free(c->peers);
            free(c);
            return NULL;
        }
        size_t len = sizeof c->endpoint;
        ZMQ_CHECK(zmq_getsockopt(c->router, ZMQ_LAST_ENDPOINT, c->endpoint, &len),
                  "LAST_ENDPOINT");
        zpoll_init(&c->rz, c->router);
    }
    return c;
}

comm_t *comm_new(const char *name, int rank, int n_peers, const char *bind, int send_timeout_ms)
{
    return comm_create(name, rank, n_peers, bind, send_timeout_ms, AFFINITY_DATA);
}

comm_t *comm_new_control(const char *name, int rank, int n_peers, const char *bind,
                         int send_timeout_ms)
{
    return comm_create(name, rank, n_peers, bind, send_timeout_ms, AFFINITY_CONTROL);
}

static void drain_more(void *sock);

static void add_monitor(comm_t *c, void *sock)
{
    static atomic_int next_id;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://comm-monitor-%d-%d", (int)getpid(), atomic_fetch_add(&next_id, 1));
    ZMQ_CHECK(zmq_socket_monitor(sock, ep, ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECTED),
              "zmq_socket_monitor");
    void *pair = zmq_socket(comm_context(), ZMQ_PAIR);
    if (!pair) zmq_check_fail(__FILE__, __LINE__, "zmq_socket(PAIR)", "fd limit?");
    ZMQ_CHECK(zmq_connect(pair, ep), "connect to a socket monitor");
    c->monitors = xrealloc(c->monitors, (size_t)(c->n_monitors + 1) * sizeof *c->monitors);
    c->monitors[c->n_monitors++] = pair;
}

/* The ROUTER's watch (runtime/transport/conn_cap.h), made on first use. */
static conn_cap_t *router_watch(comm_t *c)
{
    ASSERT(c->router, "comm %s has no ROUTER", c->name);
    if (!c->cap) {
        char what[64];
        snprintf(what, sizeof what, "comm %s (rank %d)", c->name, c->rank);
        c->cap = conn_cap_watch(comm_context(), c->router, what, 0);
    }
    return c->cap;
}

void comm_watch_links(comm_t *c)
{
    if (c->links) return;
    char what[64];
    snprintf(what, sizeof what, "comm %s rank %d", c->name, c->rank);
    c->links = link_watch_new(what);
}

int comm_report_link_trouble(comm_t *c) { return c->links ? link_watch_report(c->links) : 0; }

void comm_watch_connections(comm_t *c)
{
    if (c->watch) return;
    c->watch = true;
    if (c->router) conn_cap_keep_closed(router_watch(c));
}

void comm_set_connection_cap(comm_t *c, int per_host)
{
    conn_cap_set(router_watch(c), per_host);
}

uint64_t comm_connections_refused(const comm_t *c)
{
    return c->cap ? conn_cap_refused(c->cap) : 0;
}

/* Reads every event the DEALERs' monitors hold into the counts. */
static void read_dealer_events(comm_t *c)
{
    for (int i = 0; i < c->n_monitors; i++) {
        for (;;) {
            /* an event: [uint16 event, uint32 value] then the endpoint */
            unsigned char ev[6];
            int got = zmq_recv(c->monitors[i], ev, sizeof ev, ZMQ_DONTWAIT);
            if (got < 0) break;
            drain_more(c->monitors[i]);
            uint16_t event;
            memcpy(&event, ev, 2);
            if (got != 6) continue;
            if (event == ZMQ_EVENT_DISCONNECTED)
                c->dealer_closes++, c->connects_at_close = c->dealer_connects;
            else if (event == ZMQ_EVENT_CONNECTED) c->dealer_connects++;
        }
    }
}

int comm_closed_connections(comm_t *c, int *fds, int max)
{
    int n = c->cap ? conn_cap_closed(c->cap, fds, max) : 0;
    read_dealer_events(c);
    for (; c->dealer_closes > 0 && n < max; c->dealer_closes--) fds[n++] = -1;
    return n;
}

uint64_t comm_dealer_connects(comm_t *c, uint64_t *at_last_close)
{
    read_dealer_events(c);
    if (at_last_close) *at_last_close = c->connects_at_close;
    return c->dealer_connects;
}

static void stash_clear(comm_t *c)
{
    while (c->stash_head) {
        stash_node_t *n = c->stash_head;
        c->stash_head = n->next;
        comm_msg_close(&n->msg);
        free(n);
    }
    c->stash_tail = NULL;
    c->stash_n = 0;
}

void comm_destroy(comm_t **cp)
{
    if (!cp || !*cp) return;
    comm_t *c = *cp;
    stash_clear(c);
    slice_asm_destroy(&c->sa);
    for (int i = 0; i < c->n_monitors; i++) zmq_close(c->monitors[i]);
    link_watch_destroy(&c->links);
    free(c->monitors);
    conn_cap_unwatch(&c->cap); /* before its listener closes */
    for (int i = 0; i < c->n_peers; i++)
        if (c->peers[i].dealer) zmq_close(c->peers[i].dealer);
    if (c->router) zmq_close(c->router);
    free(c->peers);
    free(c);
    *cp = NULL;
}

void comm_set_order(comm_t *c, struct sendq *q)
{
    c->order = q;
    if (q && !c->sa) c->sa = slice_asm_new(s_max_payload);
}

struct sendq *comm_order(const comm_t *c) { return c->order; }

const char *comm_endpoint(const comm_t *c) { return c->endpoint; }

const char *comm_bind_local(comm_t *c)
{
    static atomic_int next_id;
    ASSERT(c->router, "comm %s has no ROUTER", c->name);
    if (c->local_endpoint[0]) return c->local_endpoint;
    char ep[sizeof c->local_endpoint];
    snprintf(ep, sizeof ep, COMM_LOCAL_PREFIX "%s-%d-%d", c->name, c->rank,
             atomic_fetch_add(&next_id, 1));
    ZMQ_CHECK(zmq_bind(c->router, ep), "bind a process-local endpoint");
    memcpy(c->local_endpoint, ep, sizeof ep);
    return c->local_endpoint;
}
int comm_rank(const comm_t *c) { return c->rank; }
int comm_n_peers(const comm_t *c) { return c->n_peers; }
uint64_t comm_n_bad(const comm_t *c) { return c->n_bad; }
uint64_t comm_bytes_sent(const comm_t *c) { return c->bytes_sent; }
uint64_t comm_bytes_received(const comm_t *c) { return c->bytes_received; }

int comm_connect(comm_t *c, int peer, const char *endpoint)
{
    ASSERT(peer >= 0 && peer < c->n_peers, "peer %d of %d", peer, c->n_peers);
    peer_t *p = &c->peers[peer];
    if (p->dealer) {
        if (!strcmp(p->endpoint, endpoint)) return 0;
        zmq_close(p->dealer);
        p->dealer = NULL;
    }
    if (strlen(endpoint) >= sizeof p->endpoint) {
        log_error("comm %s: endpoint too long: %.40s...", c->name, endpoint);
        return -1;
    }
    void *s = zmq_socket(comm_context(), ZMQ_DEALER);
    if (!s) zmq_check_fail(__FILE__, __LINE__, "zmq_socket(DEALER)", "fd limit? (ulimit -n)");
    char rid[32];
    int n = snprintf(rid, sizeof rid, "%s:%d", c->name, c->rank);
    ZMQ_CHECK(zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, (size_t)n), "ROUTING_ID");
    ZMQ_CHECK(zmq_setsockopt(s, ZMQ_AFFINITY, &c->affinity, sizeof c->affinity), "AFFINITY");
    set_int(s, ZMQ_LINGER, c->send_timeout_ms, "LINGER");
    if (atomic_load(&s_send_buffer) > 0)
        set_int(s, ZMQ_SNDBUF, atomic_load(&s_send_buffer), "SNDBUF");
    set_int(s, ZMQ_SNDTIMEO, c->send_timeout_ms, "SNDTIMEO");
    set_max_message(s);
    /* in-process: no handshake, and no connection events to watch */
    bool local = !strncmp(endpoint, COMM_LOCAL_PREFIX, strlen(COMM_LOCAL_PREFIX));
    if (s_keyring && !local) {
        if (s_trusted_fabric && c->affinity == AFFINITY_DATA) fabric_client(s, c->rank, peer);
        else secure_client(s, c->rank, peer);
    }
    /* the monitor before the connection, so that it sees the first one made */
    if (c->watch && !local) add_monitor(c, s);
    if (zmq_connect(s, endpoint) != 0) {
        log_error("comm %s rank %d: cannot connect to peer %d at '%s': %s", c->name, c->rank,
                  peer, endpoint, zmq_strerror(zmq_errno()));
        if (c->watch && !local) zmq_close(c->monitors[--c->n_monitors]);
        zmq_close(s);
        return -1;
    }
    p->dealer = s;
    p->local = local;
    zpoll_init(&p->dz, s);
    snprintf(p->endpoint, sizeof p->endpoint, "%s", endpoint);
    if (c->links && !local) link_watch_add(c->links, comm_context(), s, peer);
    return 0;
}

void comm_tracker_init(comm_tracker_t *t) { atomic_init(&t->pending, 0); }

_Static_assert(sizeof(atomic_int) == sizeof(int), "the tracker's counter is a futex word");

/* The waiter sleeps on the counter itself (a futex) and the release that brings it to zero
 * wakes it: polling it every 200 us, as before, cost one wake-up per waiting thread each
 * time, and with a PUSH thread per layer that was most of the CPU of an emulated run. */
int comm_tracker_wait(comm_tracker_t *t, int timeout_ms)
{
    int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000;
    int v;
    while ((v = atomic_load(&t->pending)) > 0) {
        int64_t left_ns = deadline - clock_now_ns();
        if (left_ns <= 0) return -1;
        /* bounded by 10 ms: a missed wake-up costs at most that */
        if (left_ns > 10000000) left_ns = 10000000;
        struct timespec ts = {0, (long)left_ns};
        syscall(SYS_futex, (int *)&t->pending, FUTEX_WAIT_PRIVATE, v, &ts, NULL, 0);
    }
    return 0;
}

void comm_tracker_hold(comm_tracker_t *t) { atomic_fetch_add(&t->pending, 1); }

void comm_tracker_drop(comm_tracker_t *t)
{
    if (atomic_fetch_sub(&t->pending, 1) == 1)
        syscall(SYS_futex, (int *)&t->pending, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static void tracker_release(void *data, void *hint)
{
    (void)data;
    comm_tracker_drop(hint);
}

static int send_frames(comm_t *c, void *sock, int peer, msg_header_t hdr, const void *data,
                       size_t bytes, comm_tracker_t *tracker, comm_buf_t *buf);
static int send_via(comm_t *c, int peer, msg_header_t hdr, const void *data, size_t bytes,
                    comm_tracker_t *tracker, comm_buf_t *buf);

/* ---------------------------------------------------------------- shared buffers */

/* The header sits in front of the data, padded so that the data is COMM_BUF_ALIGN-aligned. */
struct comm_buf {
    atomic_int refs; /* the owner's reference plus one per message ZeroMQ has not released */
    size_t bytes;
    bool tracked;    /* comm_buf_new_tracked: no copy at any size */
    struct comm_waker *notify; /* comm_buf_notify: written at each release; NULL none */
};
#define COMM_BUF_ALIGN 64
_Static_assert(sizeof(struct comm_buf) <= COMM_BUF_ALIGN, "comm_buf header fits its padding");

comm_buf_t *comm_buf_new(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, COMM_BUF_ALIGN, COMM_BUF_ALIGN + (bytes ? bytes : 1)) != 0)
        die("out of memory (a %zu-byte message buffer)", bytes);
    comm_buf_t *b = p;
    atomic_init(&b->refs, 1);
    b->bytes = bytes;
    b->tracked = false;
    b->notify = NULL;
    return b;
}

comm_buf_t *comm_buf_new_tracked(size_t bytes)
{
    comm_buf_t *b = comm_buf_new(bytes);
    b->tracked = true;
    return b;
}

void *comm_buf_data(comm_buf_t *b) { return (unsigned char *)b + COMM_BUF_ALIGN; }
size_t comm_buf_bytes(const comm_buf_t *b) { return b->bytes; }

int comm_buf_in_flight(const comm_buf_t *b)
{
    /* acquire: pairs with the release in buf_unref, so the I/O thread's last read of the
     * data happens before the owner's next write */
    return atomic_load_explicit(&((comm_buf_t *)b)->refs, memory_order_acquire) > 1;
}

struct comm_waker {
    atomic_int refs;
    int fd;
};

comm_waker_t *comm_waker_new(void)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) {
        log_error("eventfd: %s", strerror(errno));
        return NULL;
    }
    comm_waker_t *w = xmalloc(sizeof *w);
    atomic_init(&w->refs, 1);
    w->fd = fd;
    return w;
}

int comm_waker_fd(const comm_waker_t *w) { return w->fd; }

static void waker_unref(comm_waker_t *w)
{
    if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) > 1) return;
    close(w->fd);
    free(w);
}

void comm_waker_release(comm_waker_t **wp)
{
    if (!wp || !*wp) return;
    waker_unref(*wp);
    *wp = NULL;
}

static void buf_unref(comm_buf_t *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) > 1) return;
    if (b->notify) waker_unref(b->notify);
    free(b);
}

void comm_buf_notify(comm_buf_t *b, comm_waker_t *w)
{
    if (w) atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
    if (b->notify) waker_unref(b->notify);
    b->notify = w;
}

comm_buf_t *comm_buf_ref(comm_buf_t *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void comm_buf_release(comm_buf_t **bp)
{
    if (!bp || !*bp) return;
    buf_unref(*bp);
    *bp = NULL;
}

static void buf_release(void *data, void *hint)
{
    (void)data;
    comm_buf_t *b = hint;
    comm_waker_t *w = b->notify;
    /* the waker outlives b's reference (b may go with it), and the wake comes after it, so
     * the woken thread sees the buffer released */
    if (w) atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
    buf_unref(b);
    if (!w) return;
    uint64_t one = 1;
    while (write(w->fd, &one, sizeof one) < 0 && errno == EINTR) {}
    waker_unref(w);
}

int comm_send_rid(comm_t *c, const unsigned char *rid, size_t rid_len, msg_header_t hdr,
                  const void *data, size_t bytes)
{
    ASSERT(c->router && rid_len > 0, "comm %s: send by routing id without a ROUTER", c->name);
    zpoll_touch(&c->rz);
    if (zmq_send(c->router, rid, rid_len, ZMQ_SNDMORE) < 0) {
        log_debug("comm %s: connection unreachable: %s", c->name, zmq_strerror(zmq_errno()));
        return -1;
    }
    return send_frames(c, c->router, -1, hdr, data, bytes, NULL, NULL);
}

int comm_send_buf(comm_t *c, int peer, const unsigned char *rid, size_t rid_len,
                  msg_header_t hdr, comm_buf_t *buf)
{
    if (!rid_len) return send_via(c, peer, hdr, comm_buf_data(buf), buf->bytes, NULL, buf);
    ASSERT(c->router, "comm %s: send by routing id without a ROUTER", c->name);
    zpoll_touch(&c->rz);
    if (zmq_send(c->router, rid, rid_len, ZMQ_SNDMORE) < 0) {
        log_debug("comm %s: connection unreachable: %s", c->name, zmq_strerror(zmq_errno()));
        return -1;
    }
    return send_frames(c, c->router, peer, hdr, comm_buf_data(buf), buf->bytes, NULL, buf);
}

int comm_send(comm_t *c, int peer, msg_header_t hdr, const void *data, size_t bytes,
              comm_tracker_t *tracker)
{
    return send_via(c, peer, hdr, data, bytes, tracker, NULL);
}

static int send_via(comm_t *c, int peer, msg_header_t hdr, const void *data, size_t bytes,
                    comm_tracker_t *tracker, comm_buf_t *buf)
{
    ASSERT(peer >= 0 && peer < c->n_peers, "peer %d of %d", peer, c->n_peers);
    ASSERT(bytes == 0 || data, "payload of %zu bytes without data", bytes);
    peer_t *p = &c->peers[peer];
    void *sock = p->dealer;
    if (!sock) {
        if (!c->router || !p->rid_len) {
            log_debug("comm %s: no route to peer %d", c->name, peer);
            return -1;
        }
        sock = c->router;
        zpoll_touch(&c->rz);
        if (zmq_send(sock, p->rid, p->rid_len, ZMQ_SNDMORE) < 0) {
            log_debug("comm %s: peer %d unreachable: %s", c->name, peer,
                      zmq_strerror(zmq_errno()));
            return -1;
        }
    }
    return send_frames(c, sock, peer, hdr, data, bytes, tracker, buf);
}

/* Whether sock is peer's DEALER to a ROUTER of this process. A payload handed over there
 * without a copy would be the receiver's to write (a shard sums pushes into the first one
 * that came), and the caller's memory is not: tracked sends to it are copied. */
static bool to_local(const comm_t *c, void *sock, int peer)
{
    return peer >= 0 && c->peers[peer].local && sock == c->peers[peer].dealer;
}

static int send_frames(comm_t *c, void *sock, int peer, msg_header_t hdr, const void *data,
                       size_t bytes, comm_tracker_t *tracker, comm_buf_t *buf)
{
    hdr.sender = (uint32_t)c->rank;
    hdr.length = bytes;
    touched(c, sock, peer);
    unsigned char wire[MSG_HEADER_BYTES];
    msg_encode(&hdr, wire);
    if (zmq_send(sock, wire, sizeof wire, bytes ? ZMQ_SNDMORE : 0) < 0) {
        log_debug("comm %s: send %s to peer %d: %s", c->name, msg_type_name(hdr.type), peer,
                  zmq_strerror(zmq_errno()));
        return -1;
    }
    if (bytes) {
        zmq_msg_t m;
        size_t zc_min = buf && buf->tracked ? COMM_BUF_TRACKED_MIN_BYTES : COMM_ZEROCOPY_MIN_BYTES;
        if (buf && bytes >= zc_min) {
            atomic_fetch_add_explicit(&buf->refs, 1, memory_order_relaxed);
            ZMQ_CHECK(zmq_msg_init_data(&m, (void *)data, bytes, buf_release, buf),
                      "zmq_msg_init_data");
        } else if (tracker && bytes >= COMM_ZEROCOPY_MIN_BYTES && !to_local(c, sock, peer)) {
            atomic_fetch_add(&tracker->pending, 1);
            ZMQ_CHECK(zmq_msg_init_data(&m, (void *)data, bytes, tracker_release, tracker),
                      "zmq_msg_init_data");
        } else {
            ZMQ_CHECK(zmq_msg_init_size(&m, bytes), "out of memory?");
            memcpy(zmq_msg_data(&m), data, bytes);
        }
        /* Later frames of a multipart message are queued with the first (atomic delivery),
         * so this does not block once the header frame went. */
        if (zmq_msg_send(&m, sock, 0) < 0) {
            log_debug("comm %s: payload to peer %d: %s", c->name, peer,
                      zmq_strerror(zmq_errno()));
            zmq_msg_close(&m);
            return -1;
        }
    }
    c->bytes_sent += bytes;
    return 0;
}

const void *comm_msg_data(const comm_msg_t *msg)
{
    return msg->has_payload ? zmq_msg_data((zmq_msg_t *)&msg->payload) : NULL;
}

void *comm_msg_data_writable(comm_msg_t *msg)
{
    return msg->has_payload ? zmq_msg_data(&msg->payload) : NULL;
}

void comm_msg_move(comm_msg_t *dst, comm_msg_t *src)
{
    dst->hdr = src->hdr;
    dst->peer = src->peer;
    dst->recv_ns = src->recv_ns;
    dst->has_payload = src->has_payload;
    memcpy(dst->rid, src->rid, sizeof src->rid);
    dst->rid_len = src->rid_len;
    if (src->has_payload) {
        zmq_msg_init(&dst->payload);
        zmq_msg_move(&dst->payload, &src->payload);
        zmq_msg_close(&src->payload);
        src->has_payload = 0;
    }
}

size_t comm_msg_bytes(const comm_msg_t *msg)
{
    return msg->has_payload ? zmq_msg_size((zmq_msg_t *)&msg->payload) : 0;
}

void comm_msg_close(comm_msg_t *msg)
{
    if (msg->has_payload) zmq_msg_close(&msg->payload);
    msg->has_payload = 0;
}

int comm_match_ok(const comm_match_t *m, const comm_msg_t *g)
{
    if (!m) return 1;
    return (m->type == COMM_ANY || m->type == g->hdr.type) &&
           (m->peer == COMM_ANY || m->peer == g->peer) &&
           (m->iteration == COMM_ANY || m->iteration == g->hdr.iteration) &&
           (m->layer == COMM_ANY || m->layer == g->hdr.layer) &&
           (m->shard == COMM_ANY || m->shard == (int64_t)g->hdr.shard) &&
           (m->offset == COMM_ANY || (uint64_t)m->offset == g->hdr.offset);
}

static void drain_more(void *sock)
{
    int more = 1;
    size_t len = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) == 0 && more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f);
            break;
        }
        zmq_msg_close(&f);
    }
}

static int has_more(void *sock)
{
    int more = 0;
    size_t len = sizeof more;
    if (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len) != 0) return 0;
    return more;
}

/* Printable form of a routing id (binary ids come from anonymous sockets). */
static void rid_print(const unsigned char *rid, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < outlen; i++) {
        if (rid[i] >= 32 && rid[i] < 127) out[o++] = (char)rid[i];
        else o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", rid[i]);
    }
    out[o] = '\0';
}

/* Parses "<name>:<rank>" with our channel name; -1 if it is not one. */
static int rid_rank(const comm_t *c, const unsigned char *rid, size_t n)
{
    size_t nl = strlen(c->name);
    if (n <= nl + 1 || n > nl + 11 || memcmp(rid, c->name, nl) != 0 || rid[nl] != ':') {
        /* Accept any channel name: the coordinator hears from several channels. */
        size_t i = n;
        while (i > 0 && rid[i - 1] != ':') i--;
        if (i == 0 || i == n) return -1;
        nl = i - 1;
    }
    long v = 0;
    for (size_t i = nl + 1; i < n; i++) {
        if (rid[i] < '0' || rid[i] > '9') return -1;
        v = v * 10 + (rid[i] - '0');
        if (v >= c->n_peers) return -1;
    }
    return (int)v;
}

/* Whether hf came over the in-process connection of this comm's own rank (comm_bind_local):
 * no key (user NULL) and no network address. Asked only of a message no key vouches for. */
static bool from_self(const comm_t *c, zmq_msg_t *hf, const char *user, int peer)
{
    return c->local_endpoint[0] && !user && peer == c->rank && !zmq_msg_gets(hf, "Peer-Address");
}

/* Whether the header frame hf, received on sock from `peer` (-1: a routing id of no rank),
 * is a header that rank sent over a connection of its own: 1 with it decoded into h, or 0
 * with the reason in why. */
static int header_check(comm_t *c, void *sock, zmq_msg_t *hf, int peer, msg_header_t *h,
                        char *why, size_t whylen)
{
    int authenticated = -1; /* the rank the ZAP handler admitted the connection as */
    const char *user = s_keyring && sock == c->router ? zmq_msg_gets(hf, "User-Id") : NULL;
    if (user && *user) authenticated = atoi(user);
    if (peer < 0) {
        snprintf(why, whylen, "routing id is not a rank of this job");
        return 0;
    }
    if (s_keyring && sock == c->router && authenticated != peer && !from_self(c, hf, user, peer)) {
        if (authenticated < 0)
            snprintf(why, whylen, "the connection holds no key, and its routing id says %d "
                     "(an in-process connection speaks only for rank %d)", peer, c->rank);
        else
            snprintf(why, whylen, "the connection's key is rank %d's, its routing id says %d",
                     authenticated, peer);
        return 0;
    }
    if (msg_decode(zmq_msg_data(hf), zmq_msg_size(hf), h, why, whylen) != 0) return 0;
    if ((int)h->sender != peer) {
        snprintf(why, whylen, "header claims sender %u but the connection is rank %d",
                 h->sender, peer);
        return 0;
    }
    return 1;
}

/* ZeroMQ may hand a large payload inside its receive buffer at any byte offset; float
 * readers need alignment, so such a payload is copied once into its own (malloc-aligned)
 * message. */
static void payload_align(zmq_msg_t *payload)
{
    if ((uintptr_t)zmq_msg_data(payload) % COMM_PAYLOAD_ALIGN == 0) return;
    zmq_msg_t a;
    ZMQ_CHECK(zmq_msg_init_size(&a, zmq_msg_size(payload)), "out of memory?");
    memcpy(zmq_msg_data(&a), zmq_msg_data(payload), zmq_msg_size(&a));
    zmq_msg_close(payload);
    zmq_msg_init(payload);
    zmq_msg_move(payload, &a);
    zmq_msg_close(&a);
}

/* The payload frame that header h announces, into out (aligned), and nothing after it: 1,
 * 0 with the reason in why (no payload, another size, extra frames), or -1 when ZeroMQ
 * failed. */
static int payload_recv(void *sock, const msg_header_t *h, comm_msg_t *out, char *why,
                        size_t whylen)
{
    if (h->length > 0) {
        if (!has_more(sock)) {
            snprintf(why, whylen, "header announces %llu payload bytes, none came",
                     (unsigned long long)h->length);
            return 0;
        }
        zmq_msg_init(&out->payload);
        if (zmq_msg_recv(&out->payload, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&out->payload);
            return -1;
        }
        out->has_payload = 1;
        payload_align(&out->payload);
        if (zmq_msg_size(&out->payload) != h->length) {
            snprintf(why, whylen, "payload of %zu bytes, header says %llu",
                     zmq_msg_size(&out->payload), (unsigned long long)h->length);
            return 0;
        }
    }
    if (has_more(sock)) {
        snprintf(why, whylen, "unexpected extra frames");
        return 0;
    }
    return 1;
}

/* Reads one whole message from sock. Returns 1 with out filled if valid, 0 if it was bad
 * (logged, dropped), 2 if the socket had nothing, -1 on a socket error. */
static int recv_one(comm_t *c, void *sock, int from_peer, comm_msg_t *out)
{
    unsigned char rid[256];
    size_t rid_len = 0;
    int peer = from_peer;
    if (sock == c->router) {
        int n = zmq_recv(sock, rid, sizeof rid, ZMQ_DONTWAIT);
        if (n < 0) return zmq_errno() == EAGAIN ? 2 : -1;
        rid_len = (size_t)n > sizeof rid ? sizeof rid : (size_t)n;
        peer = rid_rank(c, rid, rid_len);
    }
    zmq_msg_t hf;
    zmq_msg_init(&hf);
    if (zmq_msg_recv(&hf, sock, sock == c->router ? 0 : ZMQ_DONTWAIT) < 0) {
        int e = zmq_errno();
        zmq_msg_close(&hf);
        return e == EAGAIN ? 2 : -1;
    }
    int src_fd = sock == c->router ? zmq_msg_get(&hf, ZMQ_SRCFD) : -1;
    char why[160] = "";
    msg_header_t h;
    out->has_payload = 0;
    int ok = header_check(c, sock, &hf, peer, &h, why, sizeof why);
    if (ok) ok = payload_recv(sock, &h, out, why, sizeof why);
    /* who sent a bad message, said only then (formatting it for every message showed in
     * profiles); the address now: the metadata may go with the connection once the frame
     * is closed */
    char who[128] = "?", addr[64] = "address unknown";
    if (!ok) {
        if (sock == c->router) rid_print(rid, rid_len, who, sizeof who);
        else snprintf(who, sizeof who, "peer %d", from_peer);
        const char *a = zmq_msg_gets(&hf, "Peer-Address");
        if (a) snprintf(addr, sizeof addr, "%s", a);
    }
    zmq_msg_close(&hf);
    if (ok < 0) return -1;
    drain_more(sock);
    if (!ok) {
        comm_msg_close(out);
        c->n_bad++;
        char source[256];
        snprintf(source, sizeof source, "%s/%s/%s", c->name, who, addr);
        reject_log(source, "comm %s rank %d: dropped bad message from %s (%s): %s", c->name,
                   c->rank, who, addr, why);
        return 0;
    }
    out->rid_len = 0;
    if (sock == c->router && rid_len) { /* remember the way back to this peer */
        memcpy(c->peers[peer].rid, rid, rid_len);
        c->peers[peer].rid_len = rid_len;
        if (rid_len <= sizeof out->rid) {
            memcpy(out->rid, rid, rid_len);
            out->rid_len = rid_len;
        }
    }
    out->hdr = h;
    out->peer = peer;
    out->src_fd = src_fd;
    out->recv_ns = clock_now_ns();
    c->bytes_received += h.length;
    return 1;
}

static void stash_push(comm_t *c, comm_msg_t *m)
{
    stash_node_t *n = xcalloc(1, sizeof *n);
    comm_msg_move(&n->msg, m);
    if (c->stash_tail) c->stash_tail->next = n;
    else c->stash_head = n;
    c->stash_tail = n;
    c->stash_n++;
}

static int stash_take(comm_t *c, const comm_match_t *m, comm_msg_t *out)
{
    stash_node_t *prev = NULL;
    for (stash_node_t *n = c->stash_head; n; prev = n, n = n->next) {
        if (!comm_match_ok(m, &n->msg)) continue;
        if (prev) prev->next = n->next;
        else c->stash_head = n->next;
        if (c->stash_tail == n) c->stash_tail = prev;
        c->stash_n--;
        comm_msg_move(out, &n->msg);
        free(n);
        return 1;
    }
    return 0;
}

/* With slices taken (comm_set_order), a slice of a message goes into the reassembly: 1 with
 * g the whole message once its last piece is in, else 0 (kept, or refused and logged with
 * the peer). Any other message: 1, untouched. */
static int unslice(comm_t *c, comm_msg_t *g)
{
    if (g->hdr.type != MSG_SLICE || !c->sa) return 1;
    comm_msg_t whole;
    char why[160];
    int peer = g->peer;
    int rc = slice_asm_take(c->sa, g, &whole, why, sizeof why);
    if (rc < 0) {
        c->n_bad++;
        log_error("comm %s rank %d: refused a slice from rank %d: %s", c->name, c->rank, peer,
                  why);
    }
    if (rc != 1) return 0;
    comm_msg_move(g, &whole);
    return 1;
}

/* The comm's sockets, as poll_in waits on them; their count. */
static int poll_set(comm_t *c, zpoll_t **set, int *peer)
{
    int n = 0;
    if (c->router) {
        peer[n] = -1;
        set[n++] = &c->rz;
    }
    for (int i = 0; i < c->n_peers; i++)
        if (c->peers[i].dealer) {
            peer[n] = i;
            set[n++] = &c->peers[i].dz;
        }
    return n;
}

/* Reads what z's socket holds: 1 with *out a message matching m (more may wait), 0 once it
 * is empty, -1 on an error (logged). Other messages go to the stash; *kept says one did. */
static int drain(comm_t *c, zpoll_t *z, int from_peer, const comm_match_t *m, comm_msg_t *out,
                 bool *kept)
{
    int r = zpoll_readable(z);
    if (r <= 0) {
        if (r < 0) log_error("comm %s: socket state: %s", c->name, zmq_strerror(zmq_errno()));
        return r;
    }
    for (;;) {
        comm_msg_t g;
        r = recv_one(c, z->sock, from_peer, &g);
        if (r < 0) {
            log_error("comm %s: receive: %s", c->name, zmq_strerror(zmq_errno()));
            return -1;
        }
        if (r == 2) {
            zpoll_drained(z);
            return 0;
        }
        if (r == 0 || !unslice(c, &g)) continue;
        if (out && comm_match_ok(m, &g)) {
            *out = g;
            return 1;
        }
        if (c->stash_n >= COMM_STASH_MAX) {
            log_error("comm %s rank %d: %d unclaimed messages held; dropping %s from peer %d",
                      c->name, c->rank, c->stash_n, msg_type_name(g.hdr.type), g.peer);
            comm_msg_close(&g);
            return -1;
        }
        stash_push(c, &g);
        *kept = true;
    }
}

/* Polls the comm's sockets (and fd, when >= 0) until a message matching m arrives (1, out
 * filled; out NULL: every message is kept), fd is readable (2), or timeout_ms passes (0);
 * until_arrival also returns (3) once a message was kept. Messages not returned go to the
 * stash. -1 on an error (logged). The sockets are waited on as zpoll.h says: zmq_poll's
 * asking each of them at every call was most of a 16-rank job's CPU in its mux threads. */
static int poll_in(comm_t *c, const comm_match_t *m, int fd, comm_msg_t *out, int timeout_ms,
                   bool until_arrival)
{
    int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000;
    zpoll_t *set[1 + c->n_peers];
    int peer[1 + c->n_peers];
    int n = poll_set(c, set, peer);
    bool fd_ready = false;
    for (bool kept = false;;) {
        for (int i = 0; i < n; i++) {
            if (!set[i]->maybe) continue;
            int r = drain(c, set[i], peer[i], m, out, &kept);
            if (r != 0) return r;
        }
        if (out && stash_take(c, m, out)) return 1;
        if (fd_ready) return 2;
        if (until_arrival && kept) return 3;
        int64_t left_ns = deadline - clock_now_ns();
        if (left_ns < 0) left_ns = 0;
        if (!n && fd < 0) {
            if (left_ns == 0) return 0;
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        int rc = zpoll_wait(set, n, fd, (int)((left_ns + 999999) / 1000000), &fd_ready);
        if (rc < 0) {
            if (errno == EINTR) continue;
            log_error("comm %s: poll: %s", c->name, strerror(errno));
            return -1;
        }
        if (rc == 0 && left_ns == 0) return 0;
    }
}

int comm_recv(comm_t *c, const comm_match_t *m, comm_msg_t *out, int timeout_ms)
{
    out->has_payload = 0;
    if (stash_take(c, m, out)) return 1;
    return poll_in(c, m, -1, out, timeout_ms, false);
}

int comm_stash_until(comm_t *c, int fd, int timeout_ms)
{
    ASSERT(fd >= 0, "comm %s: no descriptor to wait for", c->name);
    int rc = poll_in(c, NULL, fd, NULL, timeout_ms, false);
    return rc == 2 ? 1 : rc;
}

int comm_wait_in(comm_t *c, int fd, int timeout_ms)
{
    int rc = poll_in(c, NULL, fd, NULL, timeout_ms, true);
    return rc == 2 ? 2 : rc == 3 ? 1 : rc;
}
