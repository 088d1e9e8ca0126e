#include "runtime/transport/sendq.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/transport/clock.h"
#include "runtime/transport/slice.h"

typedef struct item {
    sendq_msg_t m;
    sendq_done_fn done;   /* the queue's, or the one sendq_push_from was given */
    void *done_arg;
    unsigned char rid[32];
    uint32_t seq;         /* the slices' message number on its connection */
    size_t sent;          /* payload bytes handed to ZeroMQ */
    struct item *next;
} item_t;

typedef struct conn {
    int peer;
    unsigned char rid[32];
    size_t rid_len;
    uint32_t next_seq;
    item_t *head;         /* ascending (priority, push order) */
    comm_buf_t *held[SENDQ_WINDOW]; /* slices in ZeroMQ's hands */
    int n_held;
    int64_t full_since_ns; /* when the window last filled; 0: not full */
    struct conn *next;
} conn_t;

struct sendq {
    size_t slice_bytes;
    int64_t stall_ns;
    sendq_done_fn done;
    void *arg;
    conn_t *conns;
    bool turns;            /* sendq_take_turns: round robin by slice, priorities ignored */
    comm_waker_t *notify;  /* sendq_notify: woken at each slice's release; NULL none */
    bool shared;           /* sendq_new_shared: the fields below */
    pthread_mutex_t lock;  /* everything above */
    pthread_cond_t moved;  /* a message finished: another thread's may lead now */
};

sendq_t *sendq_new(size_t slice_bytes, int stall_ms, sendq_done_fn done, void *arg)
{
    ASSERT(slice_bytes >= SENDQ_SLICE_MIN_BYTES, "slice of %zu bytes", slice_bytes);
    sendq_t *q = xcalloc(1, sizeof *q);
    *q = (sendq_t){.slice_bytes = slice_bytes, .stall_ns = (int64_t)stall_ms * 1000000,
                   .done = done, .arg = arg};
    return q;
}

void sendq_take_turns(sendq_t *q)
{
    ASSERT(!q->shared && !q->conns, "send queue: turns set on a shared or used queue");
    q->turns = true;
}

void sendq_notify(sendq_t *q, comm_waker_t *w)
{
    ASSERT(!q->shared, "send queue: a notification on a shared queue");
    q->notify = w;
}

/* Drops the head of k's queue, telling its owner rc. */
static void finish_head(sendq_t *q, conn_t *k, int rc)
{
    item_t *it = k->head;
    k->head = it->next;
    it->done(it->done_arg, &it->m, rc);
    free(it);
    if (q->shared) pthread_cond_broadcast(&q->moved); /* another thread's may lead now */
}

static void conn_forget_held(conn_t *k)
{
    for (int i = 0; i < k->n_held; i++) comm_buf_release(&k->held[i]);
    k->n_held = 0;
    k->full_since_ns = 0;
}

void sendq_destroy(sendq_t **qp)
{
    if (!qp || !*qp) return;
    sendq_t *q = *qp;
    for (conn_t *k = q->conns, *next; k; k = next) {
        next = k->next;
        while (k->head) finish_head(q, k, -1);
        conn_forget_held(k);
        free(k);
    }
    if (q->shared) {
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->moved);
    }
    free(q);
    *qp = NULL;
}

/* m's connection: its peer and routing id, or in a shared queue its peer alone (the link
 * that every thread's connections to that peer share). */
static conn_t *conn_of(sendq_t *q, const sendq_msg_t *m)
{
    ASSERT(m->rid_len <= sizeof q->conns->rid, "routing id of %zu bytes", m->rid_len);
    size_t rid_len = q->shared ? 0 : m->rid_len;
    for (conn_t *k = q->conns; k; k = k->next)
        if (k->peer == m->peer && k->rid_len == rid_len &&
            (!rid_len || !memcmp(k->rid, m->rid, rid_len)))
            return k;
    conn_t *k = xcalloc(1, sizeof *k);
    k->peer = m->peer;
    k->rid_len = rid_len;
    if (rid_len) memcpy(k->rid, m->rid, rid_len);
    k->next = q->conns;
    q->conns = k;
    return k;
}

static void push_item(sendq_t *q, const sendq_msg_t *m, sendq_done_fn done, void *done_arg)
{
    conn_t *k = conn_of(q, m);
    item_t *it = xcalloc(1, sizeof *it);
    it->m = *m;
    it->done = done;
    it->done_arg = done_arg;
    if (m->rid_len) memcpy(it->rid, m->rid, m->rid_len);
    it->m.rid = it->rid;
    it->seq = k->next_seq++;
    item_t **pp = &k->head;
    while (*pp && (q->turns || (*pp)->m.priority <= m->priority)) pp = &(*pp)->next;
    it->next = *pp;
    *pp = it;
}

void sendq_push(sendq_t *q, const sendq_msg_t *m)
{
    ASSERT(!q->shared, "sendq_push on a shared queue");
    push_item(q, m, q->done, q->arg);
}

/* Hands ZeroMQ buf (bytes of payload) with header h for m's connection on c; keeps it in
 * k's window while ZeroMQ holds it. 0 or -1 as comm_send. */
static int hand_over(sendq_t *q, comm_t *c, conn_t *k, const sendq_msg_t *m, msg_header_t h,
                     comm_buf_t *buf)
{
    if (q->notify) comm_buf_notify(buf, q->notify);
    int rc = comm_send_buf(c, m->peer, m->rid, m->rid_len, h, buf);
    if (rc == 0 && comm_buf_in_flight(buf)) k->held[k->n_held++] = buf;
    else comm_buf_release(&buf);
    return rc;
}

/* Sends the next piece of k's head: the whole message when it is small, else its next
 * slice. 0, or -1 when the comm refused it. */
static int send_next(sendq_t *q, comm_t *c, conn_t *k)
{
    item_t *it = k->head;
    const sendq_msg_t *m = &it->m;
    if (m->comm) c = m->comm;
    if (m->bytes == 0)
        return m->rid_len ? comm_send_rid(c, m->rid, m->rid_len, m->hdr, NULL, 0)
                          : comm_send(c, m->peer, m->hdr, NULL, 0, NULL);
    if (m->bytes <= q->slice_bytes) {
        comm_buf_t *buf = comm_buf_new_tracked(m->bytes);
        memcpy(comm_buf_data(buf), m->data, m->bytes);
        it->sent = m->bytes;
        return hand_over(q, c, k, m, m->hdr, buf);
    }
    size_t piece = m->bytes - it->sent < q->slice_bytes ? m->bytes - it->sent : q->slice_bytes;
    comm_buf_t *buf = comm_buf_new_tracked(SLICE_HEADER_BYTES + piece);
    unsigned char *b = comm_buf_data(buf);
    slice_encode(&(slice_info_t){.type = m->hdr.type, .seq = it->seq, .total = m->bytes,
                                 .at = it->sent},
                 b);
    memcpy(b + SLICE_HEADER_BYTES, (const unsigned char *)m->data + it->sent, piece);
    msg_header_t h = m->hdr;
    h.type = MSG_SLICE;
    it->sent += piece;
    return hand_over(q, c, k, m, h, buf);
}

/* Lets go of the slices ZeroMQ has released; fails k's queue when its window has been
 * full for stall_ns. */
static void reap(sendq_t *q, conn_t *k)
{
    int n = 0;
    for (int i = 0; i < k->n_held; i++) {
        if (comm_buf_in_flight(k->held[i])) k->held[n++] = k->held[i];
        else comm_buf_release(&k->held[i]);
    }
    k->n_held = n;
    if (n < SENDQ_WINDOW) {
        k->full_since_ns = 0;
        return;
    }
    int64_t now = clock_now_ns();
    if (!k->full_since_ns) k->full_since_ns = now;
    if (now - k->full_since_ns < q->stall_ns || !k->head) return;
    log_error("send queue: the window to rank %d has not moved for %lld ms: its queued "
              "messages fail", k->peer, (long long)(q->stall_ns / 1000000));
    while (k->head) finish_head(q, k, -1);
    conn_forget_held(k);
}

/* Whether c may send k's head: its own queue's, or in a shared queue its own message. */
static bool may_send(const conn_t *k, const comm_t *c)
{
    return k->head && (!k->head->m.comm || k->head->m.comm == c);
}

/* Whether c has a message in k's queue (a shared queue's: c's thread must come back). */
static bool has_own(const conn_t *k, const comm_t *c)
{
    for (const item_t *it = k->head; it; it = it->next)
        if (it->m.comm == c) return true;
    return false;
}

/* Taking turns: k's head, a slice of it just sent, goes behind the rest. */
static void next_turn(conn_t *k)
{
    item_t *it = k->head;
    if (!it->next) return;
    k->head = it->next;
    item_t *last = k->head;
    while (last->next) last = last->next;
    last->next = it;
    it->next = NULL;
}

/* sendq_pump with the lock held (a shared queue's). */
static int pump_locked(sendq_t *q, comm_t *c)
{
    int busy = 0;
    for (conn_t *k = q->conns; k; k = k->next) {
        reap(q, k);
        while (may_send(k, c) && k->n_held < SENDQ_WINDOW) {
            if (send_next(q, c, k) != 0) finish_head(q, k, -1);
            else if (k->head->sent == k->head->m.bytes) finish_head(q, k, 0);
            else if (q->turns) next_turn(k);
        }
        busy |= q->shared ? has_own(k, c) : k->head != NULL || k->n_held > 0;
    }
    return busy;
}

int sendq_pump(sendq_t *q, comm_t *c)
{
    if (!q->shared) return pump_locked(q, c);
    pthread_mutex_lock(&q->lock);
    int busy = pump_locked(q, c);
    pthread_mutex_unlock(&q->lock);
    return busy;
}

/* ---------------------------------------------------------------- shared */

static void ticket_done(void *arg, const sendq_msg_t *m, int rc)
{
    (void)arg;
    sendq_ticket_t *t = m->owner;
    t->left--;
    if (rc) t->rc = -1;
}

sendq_t *sendq_new_shared(size_t slice_bytes, int stall_ms)
{
    sendq_t *q = sendq_new(slice_bytes, stall_ms, ticket_done, NULL);
    q->shared = true;
    pthread_mutex_init(&q->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->moved, &ca);
    pthread_condattr_destroy(&ca);
    return q;
}

/* Waits until a message finishes or SENDQ_SHARED_POLL_MS pass: ZeroMQ's release of a slice
 * wakes no one here, so the window is looked at again that often (as comm_mux's thread
 * does with a shared queue). */
static void wait_moved(sendq_t *q)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)SENDQ_SHARED_POLL_MS * 1000000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    int e = pthread_cond_timedwait(&q->moved, &q->lock, &ts);
    ASSERT(e == 0 || e == ETIMEDOUT, "send queue wait: error %d", e);
}

void sendq_post(sendq_t *q, comm_t *c, const sendq_msg_t *msgs, int n, sendq_ticket_t *t)
{
    ASSERT(q->shared, "sendq_post on a queue of one thread");
    pthread_mutex_lock(&q->lock);
    t->left += n;
    for (int i = 0; i < n; i++) {
        sendq_msg_t m = msgs[i];
        m.rid = NULL, m.rid_len = 0, m.owner = t, m.comm = c;
        push_item(q, &m, ticket_done, NULL);
    }
    pump_locked(q, c);
    pthread_mutex_unlock(&q->lock);
}

int sendq_progress(sendq_t *q, comm_t *c, const sendq_ticket_t *t)
{
    pthread_mutex_lock(&q->lock);
    if (t->left > 0) pump_locked(q, c);
    int busy = t->left > 0;
    pthread_mutex_unlock(&q->lock);
    return busy;
}

int sendq_wait(sendq_t *q, comm_t *c, sendq_ticket_t *t)
{
    pthread_mutex_lock(&q->lock);
    while (t->left > 0) {
        pump_locked(q, c);
        if (t->left > 0) wait_moved(q);
    }
    pthread_mutex_unlock(&q->lock);
    return t->rc;
}

int sendq_recv(sendq_t *q, comm_t *c, const sendq_ticket_t *t, const comm_match_t *m,
               comm_msg_t *out, int timeout_ms)
{
    if (!q) return comm_recv(c, m, out, timeout_ms);
    int64_t end_ns = clock_now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        int busy = sendq_progress(q, c, t);
        int64_t left_ms = (end_ns - clock_now_ns()) / 1000000;
        if (left_ms < 0) left_ms = 0;
        int rc = comm_recv(c, m, out, busy && left_ms > 1 ? 1 : (int)left_ms);
        if (rc != 0 || left_ms == 0) return rc;
    }
}

int sendq_send(sendq_t *q, comm_t *c, const sendq_msg_t *msgs, int n)
{
    sendq_ticket_t t = {0, 0};
    sendq_post(q, c, msgs, n, &t);
    return sendq_wait(q, c, &t);
}

void sendq_push_from(sendq_t *q, comm_t *c, const sendq_msg_t *m, sendq_done_fn done,
                     void *arg)
{
    ASSERT(q->shared, "sendq_push_from on a queue of one thread");
    sendq_msg_t own = *m;
    own.comm = c;
    pthread_mutex_lock(&q->lock);
    push_item(q, &own, done, arg);
    pthread_mutex_unlock(&q->lock);
}

void sendq_drop(sendq_t *q, comm_t *c)
{
    ASSERT(q->shared, "sendq_drop on a queue of one thread");
    pthread_mutex_lock(&q->lock);
    for (conn_t *k = q->conns; k; k = k->next)
        for (item_t **pp = &k->head; *pp;) {
            item_t *it = *pp;
            if (it->m.comm != c) {
                pp = &it->next;
                continue;
            }
            *pp = it->next;
            it->done(it->done_arg, &it->m, -1);
            free(it);
        }
    pthread_cond_broadcast(&q->moved);
    pthread_mutex_unlock(&q->lock);
}

int sendq_n_queued(sendq_t *q)
{
    if (q->shared) pthread_mutex_lock(&q->lock);
    int n = 0;
    for (const conn_t *k = q->conns; k; k = k->next)
        for (const item_t *it = k->head; it; it = it->next) n++;
    if (q->shared) pthread_mutex_unlock(&q->lock);
    return n;
}
