#include "evq.h"

#include <stdlib.h>

#include "check.h"

struct evq {
    event_t *h;
    int64_t n, cap;
    uint64_t seq;
};

static inline int before(const event_t *x, const event_t *y)
{
    if (x->t_ns != y->t_ns) return x->t_ns < y->t_ns;
    if (x->prio != y->prio) return x->prio < y->prio;
    return x->seq < y->seq;
}

evq_t *evq_new(void) { return xcalloc(1, sizeof(evq_t)); }

void evq_destroy(evq_t **qp)
{
    if (!qp || !*qp) return;
    free((*qp)->h);
    free(*qp);
    *qp = NULL;
}

void evq_push(evq_t *q, int64_t t_ns, int32_t prio, int32_t type, int32_t a, int32_t b, int32_t c,
              int32_t d)
{
    ASSERT(t_ns >= 0, "event at negative time %lld", (long long)t_ns);
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 1024;
        q->h = xrealloc(q->h, (size_t)q->cap * sizeof *q->h);
    }
    event_t e = {t_ns, q->seq++, prio, type, a, b, c, d};
    int64_t i = q->n++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!before(&e, &q->h[parent])) break;
        q->h[i] = q->h[parent];
        i = parent;
    }
    q->h[i] = e;
}

int evq_pop(evq_t *q, event_t *e)
{
    if (q->n == 0) return 0;
    *e = q->h[0];
    event_t last = q->h[--q->n];
    int64_t i = 0;
    for (;;) {
        int64_t l = 2 * i + 1;
        if (l >= q->n) break;
        int64_t m = l + 1 < q->n && before(&q->h[l + 1], &q->h[l]) ? l + 1 : l;
        if (!before(&q->h[m], &last)) break;
        q->h[i] = q->h[m];
        i = m;
    }
    if (q->n > 0) q->h[i] = last;
    return 1;
}

int64_t evq_peek_time(const evq_t *q) { return q->n ? q->h[0].t_ns : INT64_MAX; }
int64_t evq_size(const evq_t *q) { return q->n; }
uint64_t evq_pushed(const evq_t *q) { return q->seq; }
