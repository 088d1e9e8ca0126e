#include "sim/sendorder.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"

typedef struct {
    int op, t, prio;
    int64_t seq;   /* queue order, for ties */
    int64_t left;  /* bytes not yet sent */
} omsg_t;

typedef struct {
    int n, cap;
    omsg_t *m;      /* by (prio, seq): the next to send first */
    int cur;        /* index of the message whose slice is in flight; -1: idle */
    int64_t flight; /* its bytes */
} conn_t;

struct sendorder {
    int nodes;
    int64_t slice_bytes;
    int64_t seq;
    int64_t queued; /* messages on the connections, the ring queue's not counted */
    conn_t **conn;  /* [src * nodes + dst], NULL until used */
    conn_t ring;    /* the ring connections' queue while they are alike (sendorder_ring_join) */
};

sendorder_t *sendorder_new(int nodes, int64_t slice_bytes)
{
    ASSERT(nodes >= 1 && slice_bytes > 0, "%d nodes, slice %lld", nodes, (long long)slice_bytes);
    sendorder_t *q = xcalloc(1, sizeof *q);
    q->nodes = nodes;
    q->slice_bytes = slice_bytes;
    q->conn = xcalloc((size_t)nodes * (size_t)nodes, sizeof *q->conn);
    q->ring.cur = -1;
    return q;
}

void sendorder_destroy(sendorder_t **qp)
{
    if (!qp || !*qp) return;
    sendorder_t *q = *qp;
    for (int64_t i = 0; i < (int64_t)q->nodes * q->nodes; i++)
        if (q->conn[i]) {
            ASSERT(q->conn[i]->n == 0, "connection %lld ended with %d messages queued",
                   (long long)i, q->conn[i]->n);
            free(q->conn[i]->m);
            free(q->conn[i]);
        }
    ASSERT(q->ring.n == 0, "the ring queue ended with %d messages", q->ring.n);
    free(q->ring.m);
    free(q->conn);
    free(q);
    *qp = NULL;
}

static conn_t *conn_of(sendorder_t *q, int src, int dst)
{
    ASSERT(src >= 0 && src < q->nodes && dst >= 0 && dst < q->nodes && src != dst,
           "connection %d -> %d", src, dst);
    conn_t **k = &q->conn[(int64_t)src * q->nodes + dst];
    if (!*k) {
        *k = xcalloc(1, sizeof **k);
        (*k)->cur = -1;
    }
    return *k;
}

/* Message m into k at its place by (prio, seq); the one in flight keeps its index current. */
static void conn_insert(conn_t *k, omsg_t m)
{
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 4;
        k->m = xrealloc(k->m, (size_t)k->cap * sizeof *k->m);
    }
    int i = k->n;
    while (i > 0 && (k->m[i - 1].prio > m.prio ||
                     (k->m[i - 1].prio == m.prio && k->m[i - 1].seq > m.seq)))
        i--;
    memmove(k->m + i + 1, k->m + i, (size_t)(k->n - i) * sizeof *k->m);
    k->m[i] = m;
    k->n++;
    if (k->cur >= i) k->cur++;
}

static int conn_next(conn_t *k, int64_t slice_bytes, int *op, int *t, int64_t *bytes)
{
    if (k->cur >= 0 || k->n == 0) return 0;
    const omsg_t *m = &k->m[0];
    k->cur = 0;
    k->flight = m->left < slice_bytes ? m->left : slice_bytes;
    *op = m->op, *t = m->t, *bytes = k->flight;
    return 1;
}

static int conn_slice_done(conn_t *k, int *op, int *t)
{
    ASSERT(k->cur >= 0, "a connection had no slice in flight");
    omsg_t *m = &k->m[k->cur];
    m->left -= k->flight;
    int last = m->left == 0;
    if (last) {
        *op = m->op, *t = m->t;
        k->n--;
        memmove(k->m + k->cur, k->m + k->cur + 1, (size_t)(k->n - k->cur) * sizeof *k->m);
    }
    k->cur = -1;
    return last;
}

int sendorder_push(sendorder_t *q, int src, int dst, int op, int t, int prio, int64_t bytes)
{
    ASSERT(bytes > 0, "empty message of op %d", op);
    conn_t *k = conn_of(q, src, dst);
    conn_insert(k, (omsg_t){op, t, prio, q->seq++, bytes});
    q->queued++;
    return k->cur < 0;
}

int sendorder_next(sendorder_t *q, int src, int dst, int *op, int *t, int64_t *bytes)
{
    return conn_next(conn_of(q, src, dst), q->slice_bytes, op, t, bytes);
}

int sendorder_slice_done(sendorder_t *q, int src, int dst, int *op, int *t)
{
    conn_t *k = conn_of(q, src, dst);
    ASSERT(k->cur >= 0, "connection %d -> %d had no slice in flight", src, dst);
    int last = conn_slice_done(k, op, t);
    q->queued -= last;
    return last;
}

/* The ring connection of node v: v -> v + 1 mod nodes. */
static conn_t *ring_conn(sendorder_t *q, int v) { return conn_of(q, v, (v + 1) % q->nodes); }

int sendorder_ring_alike(sendorder_t *q)
{
    int N = q->nodes;
    if (N < 2) return 0;
    const conn_t *k0 = ring_conn(q, 0);
    if (k0->n == 0 || k0->cur >= 0 || q->queued != (int64_t)N * k0->n) return 0;
    for (int v = 1; v < N; v++) {
        const conn_t *k = ring_conn(q, v);
        if (k->n != k0->n || k->cur >= 0) return 0;
        for (int i = 0; i < k0->n; i++) {
            const omsg_t *a = &k0->m[i], *b = &k->m[i];
            if (a->op != b->op || a->t != b->t || a->prio != b->prio || a->left != b->left)
                return 0;
        }
    }
    return k0->n;
}

void sendorder_ring_msg(sendorder_t *q, int i, int *op, int *t)
{
    const conn_t *k0 = ring_conn(q, 0);
    ASSERT(i >= 0 && i < k0->n, "message %d of %d", i, k0->n);
    *op = k0->m[i].op, *t = k0->m[i].t;
}

void sendorder_ring_join(sendorder_t *q)
{
    int N = q->nodes, n = ring_conn(q, 0)->n;
    const conn_t *k0 = ring_conn(q, 0);
    for (int i = 0; i < n; i++) conn_insert(&q->ring, k0->m[i]); /* node 0's order stands */
    for (int v = 0; v < N; v++) ring_conn(q, v)->n = 0;
    q->queued -= (int64_t)N * n;
}

void sendorder_ring_split(sendorder_t *q)
{
    conn_t *r = &q->ring;
    int64_t flying = r->cur >= 0 ? r->m[r->cur].seq : -1;
    for (int v = 0; v < q->nodes; v++) {
        conn_t *k = ring_conn(q, v);
        ASSERT(k->cur < 0, "ring connection %d busy beside the ring queue", v);
        for (int i = 0; i < r->n; i++) conn_insert(k, r->m[i]);
        for (int i = 0; flying >= 0 && i < k->n; i++)
            if (k->m[i].seq == flying) k->cur = i, k->flight = r->flight;
    }
    q->queued += (int64_t)q->nodes * r->n;
    r->n = 0;
    r->cur = -1;
}

int sendorder_ring_push(sendorder_t *q, int op, int t, int prio, int64_t bytes)
{
    ASSERT(bytes > 0, "empty message of op %d", op);
    conn_insert(&q->ring, (omsg_t){op, t, prio, q->seq++, bytes});
    return q->ring.cur < 0;
}

int sendorder_ring_next(sendorder_t *q, int *op, int *t, int64_t *bytes)
{
    return conn_next(&q->ring, q->slice_bytes, op, t, bytes);
}

int sendorder_ring_slice_done(sendorder_t *q, int *op, int *t)
{
    return conn_slice_done(&q->ring, op, t);
}
