#include "runtime/transport/coord.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/transport/comm.h"
#include "runtime/transport/conn_cap.h"
#include "runtime/transport/clock.h"
#include "runtime/transport/reject_log.h"

#define TEXT_MAX 512

coord_config_t coord_config_default(void)
{
    coord_config_t c = {.heartbeat_ms = 250, .dead_ms = 60000, .join_ms = 30000,
                        .stall_ms = 30000};
    const char *v = getenv("POSEIDON_HEARTBEAT_MS");
    if (v && atoi(v) > 0) c.heartbeat_ms = atoi(v);
    v = getenv("POSEIDON_DEAD_MS");
    if (v && atoi(v) > 0) c.dead_ms = atoi(v);
    v = getenv("POSEIDON_STALL_MS");
    if (v && atoi(v) > 0) c.stall_ms = atoi(v);
    return c;
}

/* The key of the rate limit of the coordinator's warnings about rank r's messages (a
 * stranger under --insecure speaks as any rank). */
static const char *s_reject_source(int r)
{
    static _Thread_local char src[48];
    snprintf(src, sizeof src, "coordinator/rank %d", r);
    return src;
}

static int64_t ms_since(int64_t t_ns) { return (clock_now_ns() - t_ns) / 1000000; }

/* ---------------------------------------------------------------- coordinator */

typedef struct {
    unsigned char main_rid[32], hb_rid[32];
    size_t main_rid_len, hb_rid_len;
    char *line;             /* registration */
    int64_t last_beat_ns;   /* 0: never */
    int64_t longest_gap_ns; /* the longest time between two of its beats so far */
    int hb_fd;              /* the file descriptor its beats come on (-1: unknown) */
    int64_t cut_ns;         /* when that connection closed with no beat since; 0: open */
    int64_t iteration;
    int layer;
    char text[TEXT_MAX];    /* "node\nwhat" from its last beat */
    int64_t still_since_ns; /* when its position (iteration, layer, text) last moved */
    int64_t stall_told_ns;  /* when its current stall was last reported; 0: not yet */
    int bye;
} rank_state_t;

struct coord_server {
    comm_t *comm;
    coord_config_t cfg;
    int world;
    rank_state_t *ranks;
    int n_registered, n_bye;
    int64_t barrier_id;
    int barrier_n;
    int64_t start_ns;
    atomic_int stop, done;
    int stop_requested; /* a rank asked the job to stop (SIGTERM); told in every ack */
    pthread_t thread;
};

static void node_of(const rank_state_t *r, int rank, char *out, size_t len)
{
    const char *nl = strchr(r->text, '\n');
    if (r->last_beat_ns && nl)
        snprintf(out, len, "node %.*s (rank %d)", (int)(nl - r->text), r->text, rank);
    else snprintf(out, len, "rank %d", rank);
}

static void server_abort(coord_server_t *s, int dead, const char *why)
{
    rank_state_t *d = &s->ranks[dead];
    char node[300], text[TEXT_MAX + 400];
    node_of(d, dead, node, sizeof node);
    const char *nl = strchr(d->text, '\n');
    if (d->last_beat_ns)
        snprintf(text, sizeof text, "%s %s (it last reported iteration %lld, layer %d%s%s)",
                 node, why, (long long)d->iteration, d->layer, nl && nl[1] ? ", waiting on " : "",
                 nl && nl[1] ? nl + 1 : "");
    else snprintf(text, sizeof text, "%s %s", node, why);
    log_error("coordinator: %s: aborting the job", text);
    for (int q = s->world - 1; q >= 0; q--) { /* rank 0, which hosts us, last */
        rank_state_t *r = &s->ranks[q];
        if (q == dead || r->bye || !r->hb_rid_len) continue;
        comm_send_rid(s->comm, r->hb_rid, r->hb_rid_len,
                      (msg_header_t){.type = MSG_ABORT, .layer = -1, .iteration = -1,
                                     .shard = (uint32_t)dead},
                      text, strlen(text));
    }
}

/* Rank r's line for the rendezvous; once every rank's is in, the table of all of them to
 * each (MSG_PEERS). */
static void server_register(coord_server_t *s, comm_msg_t *m, msg_header_t ok)
{
    int r = m->peer;
    rank_state_t *st = &s->ranks[r];
    size_t n = comm_msg_bytes(m);
    if (!m->rid_len) return;
    memcpy(st->main_rid, m->rid, m->rid_len);
    st->main_rid_len = m->rid_len;
    if (!st->line) s->n_registered++;
    free(st->line);
    st->line = xmalloc(n + 1);
    memcpy(st->line, comm_msg_data(m), n);
    st->line[n] = '\0';
    if (memchr(st->line, '\n', n)) {
        reject_log(s_reject_source(r), "coordinator: registration of rank %d holds a newline: "
                                       "dropped", r);
        free(st->line);
        st->line = NULL;
        s->n_registered--;
        return;
    }
    if (s->n_registered < s->world) return;
    size_t total = 0;
    for (int q = 0; q < s->world; q++) total += strlen(s->ranks[q].line) + 1;
    char *table = xmalloc(total + 1), *p = table;
    for (int q = 0; q < s->world; q++) p += sprintf(p, "%s\n", s->ranks[q].line);
    ok.type = MSG_PEERS;
    for (int q = 0; q < s->world; q++)
        comm_send_rid(s->comm, s->ranks[q].main_rid, s->ranks[q].main_rid_len, ok, table, total);
    free(table);
}

/* A rank's heartbeat: its liveness, what it says it waits for, its stop request; answered
 * with whether the job is to stop. */
static void server_heartbeat(coord_server_t *s, comm_msg_t *m, msg_header_t ok)
{
    int r = m->peer;
    rank_state_t *st = &s->ranks[r];
    const char *data = comm_msg_data(m);
    size_t n = comm_msg_bytes(m);
    memcpy(st->hb_rid, m->rid, m->rid_len);
    st->hb_rid_len = m->rid_len;
    int64_t now = clock_now_ns(), gap = st->last_beat_ns ? now - st->last_beat_ns : 0;
    /* a loaded host delays beats: say so each time the record grows past 4 intervals,
     * so the margin left before dead_ms can be judged from the log */
    if (gap > st->longest_gap_ns) {
        st->longest_gap_ns = gap;
        if (gap > 4 * (int64_t)s->cfg.heartbeat_ms * 1000000)
            log_info("coordinator: rank %d's heartbeat came %.2f s after the one before "
                     "(beats every %.2f s, dead after %.1f s of silence)", r, gap * 1e-9,
                     s->cfg.heartbeat_ms / 1e3, s->cfg.dead_ms / 1e3);
    }
    st->last_beat_ns = now;
    st->hb_fd = m->src_fd;
    st->cut_ns = 0; /* beats again: a connection that closed was replaced */
    n = n < TEXT_MAX - 1 ? n : TEXT_MAX - 1;
    if (!st->still_since_ns || st->iteration != (int64_t)m->hdr.iteration ||
        st->layer != (int)m->hdr.layer || strncmp(st->text, data, n) || st->text[n]) {
        st->still_since_ns = st->last_beat_ns;
        st->stall_told_ns = 0;
    }
    st->iteration = m->hdr.iteration;
    st->layer = m->hdr.layer;
    memcpy(st->text, data, n);
    st->text[n] = '\0';
    if (m->hdr.shard == 1 && !s->stop_requested) {
        s->stop_requested = 1;
        log_info("coordinator: rank %d asks the job to stop (a signal): every rank stops "
                 "after the next checkpoint", r);
    }
    ok.type = MSG_HEARTBEAT_ACK;
    ok.shard = (uint32_t)s->stop_requested;
    /* the rank silent longest (but the one beating), so that a rank whose own wait times
     * out can name the rank it waits on rather than only its own wait */
    ok.layer = -1;
    for (int q = 0; q < s->world; q++) {
        const rank_state_t *x = &s->ranks[q];
        if (q == r || x->bye || !x->last_beat_ns) continue;
        int64_t silent = ms_since(x->last_beat_ns);
        if (silent > 4 * (int64_t)s->cfg.heartbeat_ms && (uint64_t)silent > ok.offset)
            ok.layer = q, ok.offset = (uint64_t)silent;
    }
    comm_send_rid(s->comm, m->rid, m->rid_len, ok, NULL, 0);
}

static void server_handle(coord_server_t *s, comm_msg_t *m)
{
    int r = m->peer;
    rank_state_t *st = &s->ranks[r];
    msg_header_t ok = {.layer = -1, .iteration = m->hdr.iteration};
    switch (m->hdr.type) {
    case MSG_REGISTER: server_register(s, m, ok); break;
    case MSG_BARRIER:
        if (m->hdr.iteration != s->barrier_id) {
            reject_log(s_reject_source(r), "coordinator: rank %d at barrier %lld while barrier "
                       "%lld is open: dropped", r, (long long)m->hdr.iteration,
                       (long long)s->barrier_id);
            break;
        }
        memcpy(st->main_rid, m->rid, m->rid_len);
        st->main_rid_len = m->rid_len;
        if (++s->barrier_n == s->world) {
            ok.type = MSG_BARRIER_OK;
            for (int q = 0; q < s->world; q++)
                comm_send_rid(s->comm, s->ranks[q].main_rid, s->ranks[q].main_rid_len, ok,
                              NULL, 0);
            s->barrier_n = 0;
            s->barrier_id++;
        }
        break;
    case MSG_BLOB:
        ok.type = MSG_BLOB;
        ok.shard = (uint32_t)r;
        for (int q = 0; q < s->world; q++)
            if (q != r && s->ranks[q].main_rid_len)
                comm_send_rid(s->comm, s->ranks[q].main_rid, s->ranks[q].main_rid_len, ok,
                              comm_msg_data(m), comm_msg_bytes(m));
        break;
    case MSG_HEARTBEAT: server_heartbeat(s, m, ok); break;
    case MSG_BYE:
        if (!st->bye) s->n_bye++;
        st->bye = 1;
        /* acknowledged, so the rank knows its goodbye arrived before it exits (unsent
         * messages die with a process) and does not count as dead when it closes */
        ok.type = MSG_BYE;
        comm_send_rid(s->comm, m->rid, m->rid_len, ok, NULL, 0);
        break;
    default:
        reject_log(s_reject_source(r), "coordinator: unexpected %s from rank %d: dropped",
                   msg_type_name(m->hdr.type), r);
    }
}

/* A stall report for every live rank whose position has not moved for stall_ms (again
 * every stall_ms while it lasts): who waits, on what, since when. */
static void report_stalls(coord_server_t *s)
{
    if (s->cfg.stall_ms <= 0) return; /* reports off */
    for (int q = 0; q < s->world; q++) {
        rank_state_t *r = &s->ranks[q];
        if (r->bye || !r->still_since_ns || ms_since(r->still_since_ns) < s->cfg.stall_ms)
            continue;
        if (r->stall_told_ns && ms_since(r->stall_told_ns) < s->cfg.stall_ms) continue;
        r->stall_told_ns = clock_now_ns();
        char node[128];
        node_of(r, q, node, sizeof node);
        const char *what = strchr(r->text, '\n');
        what = what && what[1] ? what + 1 : "its next step";
        int64_t silent = ms_since(r->last_beat_ns);
        if (silent > 4 * (int64_t)s->cfg.heartbeat_ms)
            log_warn("stall: %s has sent no heartbeat for %.1f s (dead after %.1f s); it last "
                     "waited on %s (iteration %lld)",
                     node, (double)silent / 1e3, s->cfg.dead_ms / 1e3, what,
                     (long long)r->iteration);
        else
            log_warn("stall: %s has waited %.1f s on %s (iteration %lld); alive (heartbeats)",
                     node, (double)ms_since(r->still_since_ns) / 1e3, what,
                     (long long)r->iteration);
    }
}

/* How long a closed connection may go without a beat on a new one before its rank counts
 * as gone: ZeroMQ reconnects within its reconnect interval (100 ms), and the next beat follows
 * within heartbeat_ms. */
static int cut_grace_ms(const coord_config_t *cfg) { return 2 * cfg->heartbeat_ms + 500; }

/* How long a process may not have run (stopped, starved of CPU) before the time is not
 * counted against the ranks it could not hear meanwhile. */
static int64_t paused_ns(const coord_config_t *cfg)
{
    int64_t ms = 4 * (int64_t)cfg->heartbeat_ms;
    return (ms > 1000 ? ms : 1000) * 1000000;
}

/* The coordinator's own process (rank 0) did not run for gap_ns: whatever the ranks said
 * meanwhile waits unread, so their silence in that time is its own, not theirs. Says so
 * (rank 0 is the rank that went silent) and moves every rank's clocks on by the gap. */
static void server_paused(coord_server_t *s, int64_t gap_ns)
{
    char node[300];
    node_of(&s->ranks[0], 0, node, sizeof node);
    log_warn("stall: %s, which hosts the coordinator, did not run for %.1f s (stopped, or "
             "starved of CPU): the other ranks' silence in that time is its own", node,
             gap_ns * 1e-9);
    for (int q = 0; q < s->world; q++) {
        rank_state_t *r = &s->ranks[q];
        if (r->last_beat_ns) r->last_beat_ns += gap_ns;
        if (r->cut_ns) r->cut_ns += gap_ns;
        if (r->still_since_ns) r->still_since_ns += gap_ns;
    }
}

/* Every message waiting (the first waited for up to first_ms): after a pause the ranks'
 * beats are all read before anyone is judged by the time of their last. -1 when the socket
 * failed. */
static int server_drain(coord_server_t *s, int first_ms)
{
    for (int i = 0; i < 100000; i++) {
        comm_msg_t m;
        int rc = comm_recv(s->comm, NULL, &m, i == 0 ? first_ms : 0);
        if (rc < 0) return -1;
        if (rc != 1) return 0;
        server_handle(s, &m);
        comm_msg_close(&m);
    }
    return 0;
}

/* Notes the ranks whose heartbeat connection just closed. A beat that the connection
 * delivered before it closed may still wait in the socket, and read after the cut it would
 * undo it (a beat clears the cut: its connection was replaced), so that the rank, gone,
 * would be judged only after dead_ms: what the socket holds is read first. ZeroMQ queues a
 * connection's messages before it tells of its end, so they are there to read. -1 when the
 * socket failed. */
static int note_closed(coord_server_t *s)
{
    int fds[64];
    int n = comm_closed_connections(s->comm, fds, 64);
    if (n > 0 && server_drain(s, 0) < 0) return -1;
    for (int i = 0; i < n; i++)
        for (int q = 0; q < s->world; q++) {
            rank_state_t *r = &s->ranks[q];
            if (!r->bye && r->last_beat_ns && r->hb_fd == fds[i] && !r->cut_ns)
                r->cut_ns = clock_now_ns();
        }
    return 0;
}

/* The time since *last_ns when it is longer than a pause (this process did not run), else
 * 0; *last_ns becomes now. Called at least every heartbeat_ms by a thread that runs. */
static int64_t pause_since(int64_t *last_ns, const coord_config_t *cfg)
{
    int64_t now = clock_now_ns(), gap = now - *last_ns;
    *last_ns = now;
    return gap > paused_ns(cfg) ? gap : 0;
}

static void *server_main(void *arg)
{
    coord_server_t *s = arg;
    int64_t last_ns = clock_now_ns();
    pthread_setname_np(pthread_self(), "coordinator");
    while (!atomic_load(&s->stop) && s->n_bye < s->world) {
        if (server_drain(s, 50) < 0) break;
        int64_t gap = pause_since(&last_ns, &s->cfg);
        if (gap) {
            /* ZeroMQ's I/O thread was stopped too: give it a moment to read what the
             * sockets hold, and read it, before the ranks are judged */
            usleep(100000);
            server_paused(s, gap);
            if (server_drain(s, 50) < 0) break;
            pause_since(&last_ns, &s->cfg);
        }
        if (note_closed(s) < 0) break;
        int dead = -1;
        const char *why = NULL;
        char buf[128];
        for (int q = 0; q < s->world && dead < 0; q++) {
            rank_state_t *r = &s->ranks[q];
            if (r->bye) continue;
            if (r->cut_ns && ms_since(r->cut_ns) > cut_grace_ms(&s->cfg)) {
                snprintf(buf, sizeof buf, "closed its connection (its process ended, or its "
                         "host dropped it) %lld ms ago and did not come back",
                         (long long)ms_since(r->cut_ns));
                dead = q, why = buf;
            } else if (r->last_beat_ns && ms_since(r->last_beat_ns) > s->cfg.dead_ms) {
                snprintf(buf, sizeof buf, "sent no heartbeat for %lld ms",
                         (long long)ms_since(r->last_beat_ns));
                dead = q, why = buf;
            } else if (!r->last_beat_ns && ms_since(s->start_ns) > s->cfg.join_ms) {
                snprintf(buf, sizeof buf, "never joined within %d ms", s->cfg.join_ms);
                dead = q, why = buf;
            }
        }
        if (dead >= 0) {
            server_abort(s, dead, why);
            break;
        }
        report_stalls(s);
    }
    atomic_store(&s->done, 1);
    return NULL;
}

coord_server_t *coord_server_new(const launch_env_t *env, coord_config_t cfg)
{
    /* on the interface the ranks reach the master by (loopback for a local job), not on
     * every interface of the host */
    char addr[64], ep[128];
    if (launch_local_addr(env->master_addr, addr, sizeof addr) != 0) return NULL;
    snprintf(ep, sizeof ep, "tcp://%s:%d", addr, env->master_port);
    comm_t *c = comm_new_control("coord", 0, env->world, ep, 2000);
    if (!c) return NULL;
    conn_cap_trust(addr); /* the ranks on rank 0's host come from it */
    coord_server_t *s = xcalloc(1, sizeof *s);
    s->comm = c;
    s->cfg = cfg;
    s->world = env->world;
    s->ranks = xcalloc((size_t)env->world, sizeof *s->ranks);
    for (int q = 0; q < env->world; q++) s->ranks[q].hb_fd = -1;
    /* every rank, all on one host at most, holds two connections: main and heartbeats */
    comm_set_connection_cap(c, conn_cap_for(2 * env->world));
    comm_watch_connections(c);
    s->start_ns = clock_now_ns();
    if (pthread_create(&s->thread, NULL, server_main, s) != 0) die("pthread_create");
    return s;
}

void coord_server_destroy(coord_server_t **sp)
{
    if (!sp || !*sp) return;
    coord_server_t *s = *sp;
    int64_t t0 = clock_now_ns();
    while (!atomic_load(&s->done) && ms_since(t0) < s->cfg.dead_ms) usleep(10000);
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    comm_destroy(&s->comm);
    for (int q = 0; q < s->world; q++) free(s->ranks[q].line);
    free(s->ranks);
    free(s);
    *sp = NULL;
}

/* ---------------------------------------------------------------- client */

struct coord_client {
    launch_env_t env;
    coord_config_t cfg;
    comm_t *main, *hb;
    char node[300];
    char **table;
    pthread_mutex_t lock; /* what */
    char what[256];
    atomic_llong iteration;
    atomic_int layer;
    atomic_int stop;
    atomic_int stop_asked, stop_heard; /* this rank asks the job to stop; the coordinator
                                        * said some rank did */
    atomic_int silent_rank;   /* from the last ack: the rank silent longest (-1: none) */
    atomic_llong silent_ms;   /* and for how long, when the ack was sent */
    pthread_t thread;
    int wake_fd;              /* eventfd: the heartbeat thread's stop, at once (not at the
                               * next beat, which under dilation is K x heartbeat_ms away) */
    int64_t barrier_next;
    char last_words[4200]; /* where the abort line is also appended; "" for nowhere */
};

const char *coord_client_node(const coord_client_t *c) { return c->node; }

void coord_client_request_stop(coord_client_t *c) { atomic_store(&c->stop_asked, 1); }

bool coord_client_stop_requested(coord_client_t *c)
{
    return atomic_load(&c->stop_asked) || atomic_load(&c->stop_heard);
}

void coord_client_progress(coord_client_t *c, int64_t iteration, int layer, const char *what)
{
    atomic_store(&c->iteration, iteration);
    atomic_store(&c->layer, layer);
    pthread_mutex_lock(&c->lock);
    snprintf(c->what, sizeof c->what, "%s", what ? what : "");
    pthread_mutex_unlock(&c->lock);
}

static void where(coord_client_t *c, char *out, size_t len)
{
    pthread_mutex_lock(&c->lock);
    snprintf(out, len, "node %s (rank %d): iteration %lld, layer %d%s%s", c->node, c->env.rank,
             (long long)atomic_load(&c->iteration), atomic_load(&c->layer),
             c->what[0] ? ", waiting on " : "", c->what);
    pthread_mutex_unlock(&c->lock);
}

void coord_client_last_words(coord_client_t *c, const char *path)
{
    snprintf(c->last_words, sizeof c->last_words, "%s", path ? path : "");
}

/* "rank R\tLINE" appended to the last-words file: opened only now, so a file removed or
 * replaced meanwhile (a fresh job's prune) is not written through a stale descriptor.
 * Never a symbolic link; nothing to do when the directory is not on this host. */
static void last_words(const coord_client_t *c, const char *line)
{
    if (!c->last_words[0]) return;
    int fd = open(c->last_words, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "rank %d\t%s\n", c->env.rank, line);
    if (n >= (int)sizeof buf) n = sizeof buf - 1, buf[n - 1] = '\n';
    if (write(fd, buf, (size_t)n) != n) { /* best effort: stderr has the line anyway */ }
    close(fd);
}

/* "poseidon: WHERE: LEAD<message>" on stderr, then the abort exit. */
static _Noreturn void fail_with(coord_client_t *c, const char *lead, const char *fmt, va_list ap)
{
    char w[700], msg[512];
    where(c, w, sizeof w);
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "poseidon: %s: %s%s\n", w, lead, msg);
    fflush(NULL);
    char line[1800];
    snprintf(line, sizeof line, "%s: %s%s", w, lead, msg);
    last_words(c, line);
    _exit(COORD_EXIT_ABORT);
}

void coord_client_fail(coord_client_t *c, const char *fmt, ...)
{
    /* a wait of this rank timed out: when the coordinator last saw a rank silent, that rank
     * is the likelier cause, and it leads the line */
    char lead[160] = "";
    int q = atomic_load(&c->silent_rank);
    if (q >= 0)
        snprintf(lead, sizeof lead, "rank %d has sent no heartbeat for %.1f s (stopped, or its "
                 "host is gone); here, ", q, (double)atomic_load(&c->silent_ms) / 1e3);
    va_list ap;
    va_start(ap, fmt);
    fail_with(c, lead, fmt, ap);
}

/* This rank's last line when rank 0's coordinator is gone, then the abort exit. */
static _Noreturn void coordinator_gone(coord_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static _Noreturn void coordinator_gone(coord_client_t *c, const char *fmt, ...)
{
    char lead[320];
    snprintf(lead, sizeof lead, "job aborted: the coordinator (node %s, rank 0) ",
             c->env.master_addr);
    va_list ap;
    va_start(ap, fmt);
    fail_with(c, lead, fmt, ap);
}

static void *client_beat(void *arg)
{
    coord_client_t *c = arg;
    int64_t last_ack = clock_now_ns(), cut_ns = 0, last_ns = last_ack;
    uint64_t cut_connects = 0; /* the connections made when the cut was read */
    pthread_setname_np(pthread_self(), "heartbeat");
    while (!atomic_load(&c->stop)) {
        char text[TEXT_MAX];
        pthread_mutex_lock(&c->lock);
        int n = snprintf(text, sizeof text, "%s\n%s", c->node, c->what);
        pthread_mutex_unlock(&c->lock);
        if (n >= (int)sizeof text) n = sizeof text - 1;
        comm_send(c->hb, 0,
                  (msg_header_t){.type = MSG_HEARTBEAT, .iteration = atomic_load(&c->iteration),
                                 .layer = atomic_load(&c->layer),
                                 .shard = (uint32_t)atomic_load(&c->stop_asked)},
                  text, (size_t)n, NULL);
        int64_t t_next = clock_now_ns() + (int64_t)c->cfg.heartbeat_ms * 1000000;
        for (;;) {
            int left_ms = (int)((t_next - clock_now_ns()) / 1000000);
            if (left_ms <= 0 || atomic_load(&c->stop)) break;
            comm_msg_t m;
            int got = comm_recv(c->hb, NULL, &m, 0);
            if (got == 0 && comm_wait_in(c->hb, c->wake_fd, left_ms) == 1)
                got = comm_recv(c->hb, NULL, &m, 0);
            /* this process did not run (stopped): the coordinator's silence meanwhile is
             * this rank's own */
            int64_t gap = pause_since(&last_ns, &c->cfg);
            last_ack += gap;
            if (cut_ns) cut_ns += gap;
            if (got != 1) continue;
            if (m.hdr.type == MSG_HEARTBEAT_ACK) {
                last_ack = clock_now_ns();
                /* an answer the closed connection delivered before it closed (read after
                 * its close) does not undo the cut; one over a new connection does */
                if (cut_ns && comm_dealer_connects(c->hb, NULL) > cut_connects) cut_ns = 0;
                if (m.hdr.shard == 1) atomic_store(&c->stop_heard, 1);
                int q = m.hdr.layer;
                atomic_store(&c->silent_rank, q >= 0 && q < c->env.world ? q : -1);
                atomic_store(&c->silent_ms, (long long)m.hdr.offset);
            }
            if (m.hdr.type == MSG_ABORT) {
                char w[700];
                where(c, w, sizeof w);
                fprintf(stderr, "poseidon: %s: job aborted: %.*s\n", w,
                        (int)comm_msg_bytes(&m), (const char *)comm_msg_data(&m));
                fflush(NULL);
                char line[1800];
                snprintf(line, sizeof line, "%s: job aborted: %.*s", w,
                         (int)comm_msg_bytes(&m), (const char *)comm_msg_data(&m));
                last_words(c, line);
                /* give ZeroMQ's I/O thread a moment: rank 0's coordinator may still be
                 * flushing ABORTs to the others */
                usleep(300000);
                _exit(COORD_EXIT_ABORT);
            }
            comm_msg_close(&m);
        }
        int fd;
        if (comm_closed_connections(c->hb, &fd, 1) > 0 && !cut_ns) {
            cut_ns = clock_now_ns();
            comm_dealer_connects(c->hb, &cut_connects);
        }
        if (!atomic_load(&c->stop) && cut_ns && ms_since(cut_ns) > cut_grace_ms(&c->cfg))
            coordinator_gone(c, "closed its connection %lld ms ago (its process ended, or its "
                                "host dropped it)", (long long)ms_since(cut_ns));
        if (!atomic_load(&c->stop) && ms_since(last_ack) > c->cfg.dead_ms)
            coordinator_gone(c, "did not answer for %lld ms", (long long)ms_since(last_ack));
    }
    return NULL;
}

coord_client_t *coord_client_new(const launch_env_t *env, coord_config_t cfg, const char *node)
{
    coord_client_t *c = xcalloc(1, sizeof *c);
    c->env = *env;
    c->cfg = cfg;
    pthread_mutex_init(&c->lock, NULL);
    atomic_init(&c->iteration, -1);
    atomic_init(&c->layer, -1);
    atomic_init(&c->silent_rank, -1);
    if (node) snprintf(c->node, sizeof c->node, "%s", node);
    else {
        char host[128] = "?", addr[64] = "?";
        gethostname(host, sizeof host);
        host[sizeof host - 1] = '\0';
        launch_local_addr(env->master_addr, addr, sizeof addr);
        snprintf(c->node, sizeof c->node, "%s/%s", host, addr);
    }
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s:%d", env->master_addr, env->master_port);
    /* peers of a client: only the coordinator, as "rank 0" of its channel */
    c->main = comm_new_control("coord", env->rank, env->world, NULL, 2000);
    c->hb = comm_new_control("hb", env->rank, env->world, NULL, 2000);
    if (c->hb) comm_watch_connections(c->hb);
    if (comm_connect(c->main, 0, ep) || comm_connect(c->hb, 0, ep)) {
        comm_destroy(&c->main);
        comm_destroy(&c->hb);
        free(c);
        return NULL;
    }
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ASSERT(c->wake_fd >= 0, "eventfd: %s", strerror(errno));
    if (pthread_create(&c->thread, NULL, client_beat, c) != 0) die("pthread_create");
    return c;
}

void coord_client_destroy(coord_client_t **cp)
{
    if (!cp || !*cp) return;
    coord_client_t *c = *cp;
    if (c->table) /* a final barrier: nobody leaves while another may still need it */
        if (coord_client_barrier(c, c->barrier_next, c->cfg.join_ms) != 0)
            coord_client_fail(c, "final barrier timed out");
    atomic_store(&c->stop, 1);
    uint64_t one = 1;
    while (write(c->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {}
    pthread_join(c->thread, NULL);
    close(c->wake_fd);
    /* goodbye until acknowledged (a few tries, 1.5 s at most): a process that exits with
     * its goodbye unsent would be taken for a dead rank once its connection closes */
    comm_match_t bye = COMM_MATCH_ANY;
    bye.type = MSG_BYE;
    for (int attempt = 0; attempt < 3; attempt++) {
        comm_send(c->hb, 0, (msg_header_t){.type = MSG_BYE, .layer = -1, .iteration = -1}, NULL,
                  0, NULL);
        comm_msg_t m;
        if (comm_recv(c->hb, &bye, &m, 500) == 1) {
            comm_msg_close(&m);
            break;
        }
    }
    comm_destroy(&c->main);
    comm_destroy(&c->hb);
    if (c->table)
        for (int q = 0; q < c->env.world; q++) free(c->table[q]);
    free(c->table);
    pthread_mutex_destroy(&c->lock);
    free(c);
    *cp = NULL;
}

char **coord_client_rendezvous(coord_client_t *c, const char *line)
{
    ASSERT(!strchr(line, '\n'), "registration line holds a newline");
    coord_client_progress(c, -1, -1, "rendezvous");
    if (comm_send(c->main, 0, (msg_header_t){.type = MSG_REGISTER, .layer = -1, .iteration = -1},
                  line, strlen(line), NULL) != 0)
        return NULL;
    comm_match_t m = COMM_MATCH_ANY;
    m.type = MSG_PEERS;
    comm_msg_t g;
    if (comm_recv(c->main, &m, &g, c->cfg.join_ms) != 1) {
        log_error("rank %d: rendezvous: not every rank registered within %d ms", c->env.rank,
                  c->cfg.join_ms);
        return NULL;
    }
    size_t n = comm_msg_bytes(&g);
    char *text = xmalloc(n + 1);
    memcpy(text, comm_msg_data(&g), n);
    text[n] = '\0';
    comm_msg_close(&g);
    c->table = xcalloc((size_t)c->env.world, sizeof *c->table);
    char *p = text;
    for (int q = 0; q < c->env.world; q++) {
        char *nl = p ? strchr(p, '\n') : NULL;
        if (!nl) {
            log_error("rank %d: rendezvous table has fewer than %d lines", c->env.rank,
                      c->env.world);
            free(text);
            return NULL;
        }
        *nl = '\0';
        c->table[q] = xstrdup(p);
        p = nl + 1;
    }
    free(text);
    coord_client_progress(c, -1, -1, NULL);
    return c->table;
}

int coord_client_barrier(coord_client_t *c, int64_t id, int timeout_ms)
{
    ASSERT(id == c->barrier_next, "barrier %lld out of order (next is %lld)", (long long)id,
           (long long)c->barrier_next);
    c->barrier_next++;
    if (comm_send(c->main, 0, (msg_header_t){.type = MSG_BARRIER, .layer = -1, .iteration = id},
                  NULL, 0, NULL) != 0)
        return -1;
    comm_match_t m = COMM_MATCH_ANY;
    m.type = MSG_BARRIER_OK;
    m.iteration = id;
    comm_msg_t g;
    if (comm_recv(c->main, &m, &g, timeout_ms) != 1) return -1;
    comm_msg_close(&g);
    return 0;
}

int coord_client_bcast(coord_client_t *c, int root, int64_t id, void **data, size_t *bytes,
                       int timeout_ms)
{
    if (c->env.rank == root)
        return comm_send(c->main, 0,
                         (msg_header_t){.type = MSG_BLOB, .layer = -1, .iteration = id}, *data,
                         *bytes, NULL);
    comm_match_t m = COMM_MATCH_ANY;
    m.type = MSG_BLOB;
    m.iteration = id;
    m.shard = root;
    comm_msg_t g;
    if (comm_recv(c->main, &m, &g, timeout_ms) != 1) return -1;
    *bytes = comm_msg_bytes(&g);
    *data = xmalloc(*bytes);
    if (*bytes) memcpy(*data, comm_msg_data(&g), *bytes);
    comm_msg_close(&g);
    return 0;
}
