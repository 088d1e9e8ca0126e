#include "sim/sendorder.h"

#include <stdlib.h>

#include "core/check.h"

typedef struct {
    int op, t, prio;
    int64_t seq;   /* queue order, for ties */
    int64_t left;  /* bytes not yet sent */
} omsg_t;

typedef struct {
    int n, cap;
    omsg_t *m;
    int cur;        /* index of the message whose slice is in flight; -1: idle */
    int64_t flight; /* its bytes */
} conn_t;

struct sendorder {
    int nodes;
    int64_t slice_bytes;
    int64_t seq;
    conn_t **conn;  /* [src * nodes + dst], NULL until used */
};

sendorder_t *sendorder_new(int nodes, int64_t slice_bytes)
{
    ASSERT(nodes >= 1 && slice_bytes > 0, "%d nodes, slice %lld", nodes, (long long)slice_bytes);
    sendorder_t *q = xcalloc(1, sizeof *q);
    q->nodes = nodes;
    q->slice_bytes = slice_bytes;
    q->conn = xcalloc((size_t)nodes * (size_t)nodes, sizeof *q->conn);
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

int sendorder_push(sendorder_t *q, int src, int dst, int op, int t, int prio, int64_t bytes)
{
    ASSERT(bytes > 0, "empty message of op %d", op);
    conn_t *k = conn_of(q, src, dst);
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 4;
        k->m = xrealloc(k->m, (size_t)k->cap * sizeof *k->m);
    }
    k->m[k->n++] = (omsg_t){op, t, prio, q->seq++, bytes};
    return k->cur < 0;
}

int sendorder_next(sendorder_t *q, int src, int dst, int *op, int *t, int64_t *bytes)
{
    conn_t *k = conn_of(q, src, dst);
    if (k->cur >= 0 || k->n == 0) return 0;
    int best = 0;
    for (int i = 1; i < k->n; i++)
        if (k->m[i].prio < k->m[best].prio ||
            (k->m[i].prio == k->m[best].prio && k->m[i].seq < k->m[best].seq))
            best = i;
    omsg_t *m = &k->m[best];
    k->cur = best;
    k->flight = m->left < q->slice_bytes ? m->left : q->slice_bytes;
    *op = m->op, *t = m->t, *bytes = k->flight;
    return 1;
}

int sendorder_slice_done(sendorder_t *q, int src, int dst, int *op, int *t)
{
    conn_t *k = conn_of(q, src, dst);
    ASSERT(k->cur >= 0, "connection %d -> %d had no slice in flight", src, dst);
    omsg_t *m = &k->m[k->cur];
    m->left -= k->flight;
    int last = m->left == 0;
    if (last) {
        *op = m->op, *t = m->t;
        k->m[k->cur] = k->m[--k->n]; /* order is by (prio, seq), not by place */
    }
    k->cur = -1;
    return last;
}
