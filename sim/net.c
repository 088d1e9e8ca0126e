#include "net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct {
    int src, dst;
    double rem;      /* bytes left at n->last_ns */
    double rate;     /* bytes/s */
    int64_t fin_ns;
    int64_t bytes;
    int64_t tag;
} flow_t;

typedef struct {
    double share;
    int r;
} rheap_t;

struct net {
    int nodes;
    double nic_Bps, core_Bps;
    flow_t *f;
    int64_t n, cap;
    int64_t last_ns;
    int dirty;
    int64_t next_ns;
    int64_t recomputes;
    /* scratch for the rate computation, resources: out 0..N-1, in N..2N-1, core 2N */
    double *rcap;
    int64_t *rcnt, *start, *fill;
    int64_t *adj;
    char *frozen;
    rheap_t *heap;
    int64_t heap_cap;
    int64_t adj_cap;
};

net_t *net_new(int nodes, double nic_Bps, double core_Bps)
{
    ASSERT(nodes >= 1 && nic_Bps > 0, "nodes %d, nic %g", nodes, nic_Bps);
    net_t *n = xcalloc(1, sizeof *n);
    n->nodes = nodes;
    n->nic_Bps = nic_Bps;
    n->core_Bps = core_Bps > 0 ? core_Bps : 0;
    n->next_ns = INT64_MAX;
    int R = 2 * nodes + 1;
    n->rcap = xcalloc((size_t)R, sizeof *n->rcap);
    n->rcnt = xcalloc((size_t)R, sizeof *n->rcnt);
    n->start = xcalloc((size_t)R + 1, sizeof *n->start);
    n->fill = xcalloc((size_t)R, sizeof *n->fill);
    return n;
}

void net_destroy(net_t **np)
{
    if (!np || !*np) return;
    net_t *n = *np;
    free(n->f);
    free(n->rcap);
    free(n->rcnt);
    free(n->start);
    free(n->fill);
    free(n->adj);
    free(n->frozen);
    free(n->heap);
    free(n);
    *np = NULL;
}

/* Drain every flow at its current rate up to now. */
static void advance(net_t *n, int64_t now)
{
    ASSERT(now >= n->last_ns, "network time going back: %lld < %lld", (long long)now,
           (long long)n->last_ns);
    if (now == n->last_ns) return;
    double dt = (double)(now - n->last_ns) * 1e-9;
    for (int64_t i = 0; i < n->n; i++) {
        n->f[i].rem -= n->f[i].rate * dt;
        if (n->f[i].rem < 0) n->f[i].rem = 0;
    }
    n->last_ns = now;
}

void net_add(net_t *n, int64_t now, int src, int dst, int64_t bytes, int64_t tag)
{
    ASSERT(src >= 0 && src < n->nodes && dst >= 0 && dst < n->nodes && src != dst,
           "flow %d -> %d", src, dst);
    ASSERT(bytes > 0, "empty flow");
    advance(n, now);
    if (n->n == n->cap) {
        n->cap = n->cap ? 2 * n->cap : 1024;
        n->f = xrealloc(n->f, (size_t)n->cap * sizeof *n->f);
    }
    n->f[n->n++] = (flow_t){src, dst, (double)bytes, 0, INT64_MAX, bytes, tag};
    n->dirty = 1;
}

int net_dirty(const net_t *n) { return n->dirty; }
int64_t net_next_ns(const net_t *n) { return n->next_ns; }
int64_t net_active(const net_t *n) { return n->n; }
int64_t net_recomputes(const net_t *n) { return n->recomputes; }

static void heap_push(net_t *n, int64_t *hn, double share, int r)
{
    if (*hn == n->heap_cap) {
        n->heap_cap = n->heap_cap ? 2 * n->heap_cap : 1024;
        n->heap = xrealloc(n->heap, (size_t)n->heap_cap * sizeof *n->heap);
    }
    int64_t i = (*hn)++;
    rheap_t e = {share, r};
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        /* ties by resource index keep the result independent of push order */
        if (n->heap[p].share < e.share || (n->heap[p].share == e.share && n->heap[p].r < e.r))
            break;
        n->heap[i] = n->heap[p];
        i = p;
    }
    n->heap[i] = e;
}

static rheap_t heap_pop(net_t *n, int64_t *hn)
{
    rheap_t top = n->heap[0], last = n->heap[--(*hn)];
    int64_t i = 0;
    for (;;) {
        int64_t l = 2 * i + 1;
        if (l >= *hn) break;
        int64_t m = l;
        if (l + 1 < *hn && (n->heap[l + 1].share < n->heap[l].share ||
                            (n->heap[l + 1].share == n->heap[l].share &&
                             n->heap[l + 1].r < n->heap[l].r)))
            m = l + 1;
        if (last.share < n->heap[m].share ||
            (last.share == n->heap[m].share && last.r < n->heap[m].r))
            break;
        n->heap[i] = n->heap[m];
        i = m;
    }
    if (*hn > 0) n->heap[i] = last;
    return top;
}

void net_recompute(net_t *n, int64_t now)
{
    advance(n, now);
    n->dirty = 0;
    n->recomputes++;
    n->next_ns = INT64_MAX;
    if (n->n == 0) return;
    int N = n->nodes, R = 2 * N + (n->core_Bps > 0);
    int core = 2 * N;
    /* Adjacency: flows by send side, then by receive side (CSR over resources). */
    memset(n->rcnt, 0, (size_t)(2 * N + 1) * sizeof *n->rcnt);
    for (int64_t i = 0; i < n->n; i++) {
        n->rcnt[n->f[i].src]++;
        n->rcnt[N + n->f[i].dst]++;
    }
    n->start[0] = 0;
    for (int r = 0; r < 2 * N; r++) n->start[r + 1] = n->start[r] + n->rcnt[r];
    if (n->adj_cap < 2 * n->n) {
        n->adj_cap = 2 * n->cap;
        n->adj = xrealloc(n->adj, (size_t)n->adj_cap * sizeof *n->adj);
        n->frozen = xrealloc(n->frozen, (size_t)n->cap);
    }
    memcpy(n->fill, n->start, (size_t)(2 * N) * sizeof *n->fill);
    for (int64_t i = 0; i < n->n; i++) {
        n->adj[n->fill[n->f[i].src]++] = i;
        n->adj[n->fill[N + n->f[i].dst]++] = i;
    }
    memset(n->frozen, 0, (size_t)n->n);
    for (int r = 0; r < 2 * N; r++) n->rcap[r] = n->nic_Bps;
    if (R > 2 * N) {
        n->rcap[core] = n->core_Bps;
        n->rcnt[core] = n->n;
    }
    /* Progressive filling: the resource with the smallest fair share freezes its flows at
     * that share. Shares only grow as flows freeze, so stale heap entries are re-pushed. */
    int64_t hn = 0;
    for (int r = 0; r < R; r++)
        if (n->rcnt[r] > 0) heap_push(n, &hn, n->rcap[r] / (double)n->rcnt[r], r);
    int64_t left = n->n;
    while (hn > 0 && left > 0) {
        rheap_t top = heap_pop(n, &hn);
        int r = top.r;
        if (n->rcnt[r] == 0) continue;
        double share = (n->rcap[r] > 0 ? n->rcap[r] : 0) / (double)n->rcnt[r];
        if (share > top.share * (1 + 1e-12)) {
            heap_push(n, &hn, share, r);
            continue;
        }
        int64_t a = r == core ? 0 : n->start[r], b = r == core ? n->n : n->start[r + 1];
        for (int64_t k = a; k < b; k++) {
            int64_t i = r == core ? k : n->adj[k];
            if (n->frozen[i]) continue;
            n->frozen[i] = 1;
            left--;
            flow_t *f = &n->f[i];
            f->rate = share;
            int rs = f->src, rd = N + f->dst;
            n->rcap[rs] -= share;
            n->rcnt[rs]--;
            n->rcap[rd] -= share;
            n->rcnt[rd]--;
            if (R > 2 * N) {
                n->rcap[core] -= share;
                n->rcnt[core]--;
            }
        }
    }
    for (int64_t i = 0; i < n->n; i++) {
        flow_t *f = &n->f[i];
        ASSERT(f->rate > 0, "flow %d -> %d got no bandwidth", f->src, f->dst);
        int64_t d = llround(f->rem / f->rate * 1e9);
        f->fin_ns = now + (d > 0 ? d : 0);
        if (f->fin_ns < n->next_ns) n->next_ns = f->fin_ns;
    }
}

int net_finish(net_t *n, int64_t now, net_finish_fn fn, void *arg)
{
    advance(n, now);
    /* Flows due within the slack finish now, together: rounding in the drained bytes would
     * otherwise spread flows that are meant to end at one instant over a few nanoseconds,
     * each costing a rate recomputation. */
    int64_t due = now + NET_FINISH_SLACK_NS;
    int done = 0;
    /* Walk in index order, compacting: the callback order is deterministic. */
    int64_t w = 0;
    for (int64_t i = 0; i < n->n; i++) {
        if (n->f[i].fin_ns <= due) {
            fn(arg, n->f[i].tag, n->f[i].src, n->f[i].dst, n->f[i].bytes);
            done++;
        } else {
            n->f[w++] = n->f[i];
        }
    }
    n->n = w;
    if (done) {
        n->dirty = 1;
        n->next_ns = INT64_MAX;
    }
    return done;
}
