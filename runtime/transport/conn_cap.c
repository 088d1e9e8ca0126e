#include "runtime/transport/conn_cap.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/transport/zmq_check.h"
#include "runtime/transport/zpoll.h"
#include "runtime/transport/reject_log.h"

#define CLOSED_KEEP 1024
#define RECHECK_MS 1000
/* reconnections: the least margin over a job's own connections (see conn_cap_for) */
#define MARGIN_MIN 16

typedef struct {
    int fd;
    struct sockaddr_storage peer;
    char host[NI_MAXHOST];
} conn_t;

struct conn_cap {
    void *pair;               /* receives the listener's monitor events (guard thread) */
    zpoll_t pz;               /* the pair, as the guard thread waits on it */
    char what[48];
    int listen_port;          /* the listener's TCP port; 0: not TCP */
    atomic_int per_host;
    _Atomic uint64_t refused;
    atomic_int live;
    conn_t *conns;            /* guard thread: the live TCP connections */
    int n_conns, cap_conns;
    pthread_mutex_t mu;       /* the closed descriptors */
    bool keep_closed;
    int closed[CLOSED_KEEP];
    int n_closed;
    bool gone;                /* under s_mu: unwatched, the guard thread frees it */
    conn_cap_t *next;
};

static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static conn_cap_t *s_watches;
static bool s_started;

/* The process's budget: live TCP connections of every watch together, per remote host
 * (guard thread only), and the hosts the budget never ends (under s_mu). */
typedef struct {
    char host[64];
    int n;
} host_count_t;
static host_count_t *s_hosts;
static int s_n_hosts, s_room_hosts, s_total, s_budget;
static char (*s_trusted)[64];
static int s_n_trusted;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The port of a TCP endpoint "tcp://ADDR:PORT", 0 for another transport. */
static int endpoint_port(const char *ep)
{
    if (strncmp(ep, "tcp://", 6)) return 0;
    const char *colon = strrchr(ep, ':');
    return colon ? atoi(colon + 1) : 0;
}

static int sockaddr_port(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)a)->sin_port);
    if (a->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
    return 0;
}

static bool same_peer(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family || sockaddr_port(a) != sockaddr_port(b)) return false;
    if (a->ss_family == AF_INET)
        return !memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                       &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr));
    return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                   &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
}

/* fd's TCP peer into *peer when fd is a connection accepted by w's listener: 0, else -1 (the
 * connection ended and the descriptor is closed, or now another socket's). */
static int accepted_peer(const conn_cap_t *w, int fd, struct sockaddr_storage *peer)
{
    socklen_t len = sizeof *peer;
    memset(peer, 0, sizeof *peer);
    if (getpeername(fd, (struct sockaddr *)peer, &len) != 0) return -1;
    if (peer->ss_family != AF_INET && peer->ss_family != AF_INET6) return -1;
    struct sockaddr_storage local;
    len = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &len) != 0) return -1;
    if (w->listen_port && sockaddr_port(&local) != w->listen_port) return -1;
    return 0;
}

/* Whether fd still is the connection that c records. */
static bool still_same(const conn_cap_t *w, const conn_t *c)
{
    struct sockaddr_storage now;
    return accepted_peer(w, c->fd, &now) == 0 && same_peer(&now, &c->peer);
}

/* host's entry in the process's counts (made with 0 when missing and make is set), or
 * NULL. Guard thread. */
static host_count_t *host_count(const char *host, bool make)
{
    for (int i = 0; i < s_n_hosts; i++)
        if (!strcmp(s_hosts[i].host, host)) return &s_hosts[i];
    if (!make) return NULL;
    if (s_n_hosts == s_room_hosts) {
        s_room_hosts = s_room_hosts ? 2 * s_room_hosts : 64;
        s_hosts = xrealloc(s_hosts, (size_t)s_room_hosts * sizeof *s_hosts);
    }
    host_count_t *h = &s_hosts[s_n_hosts++];
    snprintf(h->host, sizeof h->host, "%s", host);
    h->n = 0;
    return h;
}

static void host_add(const char *host, int d)
{
    host_count_t *h = host_count(host, d > 0);
    if (!h) return;
    h->n += d;
    s_total += d;
    if (h->n <= 0) *h = s_hosts[--s_n_hosts];
}

static void forget(conn_cap_t *w, int i)
{
    host_add(w->conns[i].host, -1);
    w->conns[i] = w->conns[--w->n_conns];
    atomic_fetch_sub(&w->live, 1);
}

static bool trusted(const char *host)
{
    pthread_mutex_lock(&s_mu);
    bool yes = false;
    for (int i = 0; i < s_n_trusted && !yes; i++) yes = !strcmp(s_trusted[i], host);
    pthread_mutex_unlock(&s_mu);
    return yes;
}

/* Over the process's budget: ends the newest connection of the untrusted host that holds
 * the most (a flood spread over many hosts, each under its cap), and says so. Guard
 * thread. */
static void budget_enforce(void)
{
    if (s_budget <= 0 || s_total <= s_budget) return;
    host_count_t *most = NULL;
    for (int i = 0; i < s_n_hosts; i++)
        if ((!most || s_hosts[i].n > most->n) && !trusted(s_hosts[i].host)) most = &s_hosts[i];
    if (!most) return;
    char host[64];
    snprintf(host, sizeof host, "%s", most->host);
    int held = most->n, hosts = s_n_hosts, total = s_total;
    conn_cap_t *victim_w = NULL;
    int victim = -1;
    pthread_mutex_lock(&s_mu);
    for (conn_cap_t *w = s_watches; w; w = w->next) {
        if (w->gone) continue;
        for (int i = w->n_conns - 1; i >= 0 && !victim_w; i--)
            if (!strcmp(w->conns[i].host, host)) victim_w = w, victim = i;
        if (victim_w) break;
    }
    pthread_mutex_unlock(&s_mu);
    if (!victim_w) return;
    conn_t c = victim_w->conns[victim];
    forget(victim_w, victim); /* counted no more: its end's event finds no record */
    if (!still_same(victim_w, &c)) return;
    shutdown(c.fd, SHUT_RDWR);
    atomic_fetch_add(&victim_w->refused, 1);
    reject_log("the process's connections", "%s: ended a connection from %s: this process "
               "holds %d connections from %d hosts, its budget is %d (POSEIDON_CONN_BUDGET), "
               "and %s holds the most (%d): a flood of connections from many hosts?",
               victim_w->what, host, total, hosts, s_budget, host, held);
}

static int find_fd(const conn_cap_t *w, int fd)
{
    for (int i = 0; i < w->n_conns; i++)
        if (w->conns[i].fd == fd) return i;
    return -1;
}

static void on_accepted(conn_cap_t *w, int fd)
{
    conn_t c = {.fd = fd};
    if (accepted_peer(w, fd, &c.peer)) return; /* already gone: its end's event follows */
    if (getnameinfo((struct sockaddr *)&c.peer, sizeof c.peer, c.host, sizeof c.host, NULL, 0,
                    NI_NUMERICHOST))
        snprintf(c.host, sizeof c.host, "?");
    int old = find_fd(w, fd); /* an end whose event was lost */
    if (old >= 0) forget(w, old);
    int from_host = 1;
    for (int i = 0; i < w->n_conns; i++) from_host += !strcmp(w->conns[i].host, c.host);
    if (w->n_conns == w->cap_conns) {
        w->cap_conns = w->cap_conns ? 2 * w->cap_conns : 64;
        w->conns = xrealloc(w->conns, (size_t)w->cap_conns * sizeof *w->conns);
    }
    w->conns[w->n_conns++] = c;
    atomic_fetch_add(&w->live, 1);
    host_add(c.host, 1);
    int cap = atomic_load(&w->per_host);
    /* counted until ZeroMQ has seen the end and closed the descriptor */
    if (cap > 0 && from_host > cap && still_same(w, &c)) {
        shutdown(fd, SHUT_RDWR);
        atomic_fetch_add(&w->refused, 1);
        reject_log(c.host, "%s: refused a connection from %s: %d open from that host, at most "
                   "%d (POSEIDON_CONN_CAP)", w->what, c.host, from_host, cap);
        return;
    }
    budget_enforce();
}

static void on_closed(conn_cap_t *w, int fd, bool disconnected)
{
    int i = find_fd(w, fd);
    if (i >= 0) forget(w, i);
    if (!disconnected) return;
    pthread_mutex_lock(&w->mu);
    if (w->keep_closed) {
        if (w->n_closed == CLOSED_KEEP) {
            memmove(w->closed, w->closed + 1, (CLOSED_KEEP - 1) * sizeof *w->closed);
            w->n_closed--;
        }
        w->closed[w->n_closed++] = fd;
    }
    pthread_mutex_unlock(&w->mu);
}

/* Every event waiting on w's monitor: [uint16 event, uint32 value] then the endpoint.
 * false once ZeroMQ's context is gone. */
static bool drain(conn_cap_t *w)
{
    for (;;) {
        unsigned char ev[6];
        int got = zmq_recv(w->pair, ev, sizeof ev, ZMQ_DONTWAIT);
        if (got < 0) {
            zpoll_drained(&w->pz);
            return zmq_errno() != ETERM;
        }
        int more = 0;
        size_t len = sizeof more;
        while (zmq_getsockopt(w->pair, ZMQ_RCVMORE, &more, &len) == 0 && more) {
            char skip[256];
            zmq_recv(w->pair, skip, sizeof skip, 0);
            len = sizeof more;
        }
        if (got != 6) continue;
        uint16_t event;
        uint32_t value;
        memcpy(&event, ev, 2);
        memcpy(&value, ev + 2, 4);
        if (event == ZMQ_EVENT_ACCEPTED) on_accepted(w, (int)value);
        else if (event == ZMQ_EVENT_DISCONNECTED) on_closed(w, (int)value, true);
        else if (event == ZMQ_EVENT_CLOSED) on_closed(w, (int)value, false);
    }
}

/* Drops the records whose descriptor is no longer their connection (an event was lost). */
static void recheck(conn_cap_t *w)
{
    for (int i = w->n_conns - 1; i >= 0; i--)
        if (!still_same(w, &w->conns[i])) forget(w, i);
}

static void watch_free(conn_cap_t *w)
{
    for (int i = 0; i < w->n_conns; i++) host_add(w->conns[i].host, -1);
    zmq_close(w->pair);
    pthread_mutex_destroy(&w->mu);
    free(w->conns);
    free(w);
}

static void *guard_main(void *arg)
{
    (void)arg;
    zpoll_t **items = NULL;
    conn_cap_t **ws = NULL;
    int room = 0;
    int64_t recheck_at = now_ms() + RECHECK_MS;
    for (;;) {
        pthread_mutex_lock(&s_mu);
        int n = 0;
        for (conn_cap_t **pp = &s_watches; *pp;) {
            conn_cap_t *w = *pp;
            if (w->gone) {
                *pp = w->next;
                watch_free(w);
                continue;
            }
            if (n == room) {
                room = room ? 2 * room : 16;
                items = xrealloc(items, (size_t)room * sizeof *items);
                ws = xrealloc(ws, (size_t)room * sizeof *ws);
            }
            ws[n] = w;
            items[n++] = &w->pz;
            pp = &w->next;
        }
        pthread_mutex_unlock(&s_mu);
        /* a watch made meanwhile is polled from the next round on (its events wait) */
        if (n == 0) {
            usleep(100000);
            continue;
        }
        /* each monitor is asked only when its descriptor fired (zpoll.h): zmq_poll asked
         * all of them, a rank's ~60 listeners, ten times a second */
        bool live = true;
        for (int i = 0; i < n && live; i++)
            if (items[i]->maybe) live = drain(ws[i]);
        bool unused;
        if (!live || (zpoll_wait(items, n, -1, 100, &unused) < 0 && errno != EINTR)) break;
        if (now_ms() >= recheck_at) {
            for (int i = 0; i < n; i++) recheck(ws[i]);
            recheck_at = now_ms() + RECHECK_MS;
        }
    }
    free(items);
    free(ws);
    return NULL;
}

/* The whole number 0..max in the environment variable name, or -1 when it is not set; a
 * value that is not one ends the process, saying it expects `what`. */
static int env_count(const char *name, long max, const char *what)
{
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 0 || n > max)
        die("%s=%s: expected %s, a whole number from 0 (none) to %ld", name, v, what, max);
    return (int)n;
}

/* POSEIDON_CONN_BUDGET, or half the descriptor limit (at least 64). */
static int budget_default(void)
{
    int n = env_count("POSEIDON_CONN_BUDGET", 10000000,
                      "the TCP connections this process may hold open to its listening sockets");
    if (n >= 0) return n;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 1 << 20;
    long half = (long)(rl.rlim_cur / 2);
    return half < 64 ? 64 : half > (1 << 20) ? 1 << 20 : (int)half;
}

void conn_cap_trust(const char *host)
{
    pthread_mutex_lock(&s_mu);
    bool known = false;
    for (int i = 0; i < s_n_trusted && !known; i++) known = !strcmp(s_trusted[i], host);
    if (!known) {
        s_trusted = xrealloc(s_trusted, (size_t)(s_n_trusted + 1) * sizeof *s_trusted);
        snprintf(s_trusted[s_n_trusted++], sizeof *s_trusted, "%s", host);
    }
    pthread_mutex_unlock(&s_mu);
}

int conn_cap_budget(void)
{
    pthread_mutex_lock(&s_mu);
    if (!s_started && !s_budget) s_budget = budget_default();
    int b = s_budget;
    pthread_mutex_unlock(&s_mu);
    return b;
}

conn_cap_t *conn_cap_watch(void *ctx, void *listener, const char *what, int per_host)
{
    static atomic_int next_id;
    conn_cap_t *w = xcalloc(1, sizeof *w);
    snprintf(w->what, sizeof w->what, "%s", what);
    atomic_init(&w->per_host, per_host > 0 ? per_host : 0);
    pthread_mutex_init(&w->mu, NULL);
    char ep[256];
    size_t len = sizeof ep;
    ZMQ_CHECK(zmq_getsockopt(listener, ZMQ_LAST_ENDPOINT, ep, &len), "LAST_ENDPOINT");
    w->listen_port = endpoint_port(ep);
    snprintf(ep, sizeof ep, "inproc://conn-cap-%d-%d", (int)getpid(),
             atomic_fetch_add(&next_id, 1));
    ZMQ_CHECK(zmq_socket_monitor(listener, ep, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                                                   ZMQ_EVENT_CLOSED),
              "zmq_socket_monitor");
    w->pair = zmq_socket(ctx, ZMQ_PAIR);
    if (!w->pair) zmq_check_fail(__FILE__, __LINE__, "zmq_socket(PAIR)", "fd limit?");
    /* no limit on queued events: a dropped DISCONNECTED would leave a count behind until
     * the next check */
    int unlimited = 0;
    ZMQ_CHECK(zmq_setsockopt(w->pair, ZMQ_RCVHWM, &unlimited, sizeof unlimited), "RCVHWM");
    ZMQ_CHECK(zmq_connect(w->pair, ep), "connect to a socket monitor");
    zpoll_init(&w->pz, w->pair);
    pthread_mutex_lock(&s_mu); /* hands the PAIR to the guard thread (a memory barrier) */
    w->next = s_watches;
    s_watches = w;
    if (!s_started) {
        if (!s_budget) s_budget = budget_default();
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, guard_main, NULL)) die("pthread_create");
        pthread_attr_destroy(&at);
        s_started = true;
    }
    pthread_mutex_unlock(&s_mu);
    return w;
}

void conn_cap_set(conn_cap_t *w, int per_host) { atomic_store(&w->per_host, per_host > 0 ? per_host : 0); }

void conn_cap_keep_closed(conn_cap_t *w)
{
    pthread_mutex_lock(&w->mu);
    w->keep_closed = true;
    pthread_mutex_unlock(&w->mu);
}

int conn_cap_closed(conn_cap_t *w, int *fds, int max)
{
    pthread_mutex_lock(&w->mu);
    int n = w->n_closed < max ? w->n_closed : max;
    memcpy(fds, w->closed, (size_t)n * sizeof *fds);
    memmove(w->closed, w->closed + n, (size_t)(w->n_closed - n) * sizeof *w->closed);
    w->n_closed -= n;
    pthread_mutex_unlock(&w->mu);
    return n;
}

uint64_t conn_cap_refused(const conn_cap_t *w) { return atomic_load(&w->refused); }
int conn_cap_live(const conn_cap_t *w) { return atomic_load(&w->live); }

void conn_cap_unwatch(conn_cap_t **wp)
{
    if (!wp || !*wp) return;
    pthread_mutex_lock(&s_mu);
    (*wp)->gone = true;
    pthread_mutex_unlock(&s_mu);
    *wp = NULL;
}

int conn_cap_for(int legit)
{
    int cap = env_count("POSEIDON_CONN_CAP", 1000000,
                        "the connections one host may hold open to a socket");
    if (cap >= 0) return cap;
    int margin = legit / 4 > MARGIN_MIN ? legit / 4 : MARGIN_MIN;
    return legit + margin;
}
