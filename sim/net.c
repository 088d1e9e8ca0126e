#include "net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* One entity: a single flow (dst >= 0) or a broadcast (dst == NET_DST_ALL) of `mult` flows:
 * to every node but src and the nodes in ex (split off into single flows). */
typedef struct {
    int src, dst;
    int mult;        /* flows it stands for: 1, or nodes - 1 - nex for a broadcast */
    int nex, cap_ex;
    int *ex;         /* owned */
    double rem;      /* bytes left per flow at n->last_ns */
    double rate;     /* bytes/s per flow */
    int64_t fin_ns;
    int64_t bytes;
    int64_t tag;
} ent_t;

typedef struct {
    double share;
    int r;
} rheap_t;

/* Resources: send side of node s is s, receive side of node d is N + d, the class of plain
 * receive sides is 2N, the core 2N + 1. */
struct net {
    int nodes;
    double nic_Bps, core_Bps;
    ent_t *f;
    int64_t n, cap;
    int64_t last_ns;
    int dirty;
    int64_t next_ns;
    int64_t recomputes;
    /* scratch for the rate computation, indexed by resource; only touched ones are reset */
    int64_t *cnt;    /* send: unfrozen flows; receive: unfrozen single flows in minus the
                        unfrozen broadcasts the node itself sends (the broadcasts of others
                        are counted once, globally, in bu) */
    double *used;    /* capacity taken by frozen entities (receive: same split as cnt) */
    int64_t *adjn, *start, *fill;
    char *mark;
    char *in_level;  /* resources saturating at the current level */
    int *level;
    int *touched;
    int64_t *adj;
    int64_t adj_cap;
    char *frozen;
    int64_t *bl;     /* unfrozen broadcasts (lazily compacted) */
    int64_t nbl;
    int64_t *ov;     /* single flows split off during this computation, maybe unfrozen */
    int64_t nov;
    int nlevel_scan; /* touched resources of the current computation */
    int64_t ent_cap; /* capacity of frozen and bl */
    rheap_t *heap;
    int64_t heap_cap;
    /* global terms of the current computation */
    int64_t bu;      /* unfrozen broadcasts */
    double fb;       /* sum of the rates of frozen broadcasts */
    int64_t core_cnt;
    double core_used;
    int64_t left;
};

net_t *net_new(int nodes, double nic_Bps, double core_Bps)
{
    ASSERT(nodes >= 1 && nic_Bps > 0, "nodes %d, nic %g", nodes, nic_Bps);
    net_t *n = xcalloc(1, sizeof *n);
    n->nodes = nodes;
    n->nic_Bps = nic_Bps;
    n->core_Bps = core_Bps > 0 ? core_Bps : 0;
    n->next_ns = INT64_MAX;
    size_t R = 2 * (size_t)nodes + 2;
    n->cnt = xcalloc(R, sizeof *n->cnt);
    n->used = xcalloc(R, sizeof *n->used);
    n->adjn = xcalloc(R, sizeof *n->adjn);
    n->start = xcalloc(R, sizeof *n->start);
    n->fill = xcalloc(R, sizeof *n->fill);
    n->mark = xcalloc(R, 1);
    n->in_level = xcalloc(R, 1);
    n->level = xcalloc(R, sizeof *n->level);
    n->touched = xcalloc(R, sizeof *n->touched);
    n->heap_cap = (int64_t)R;
    n->heap = xcalloc(R, sizeof *n->heap);
    return n;
}

void net_destroy(net_t **np)
{
    if (!np || !*np) return;
    net_t *n = *np;
    for (int64_t i = 0; i < n->n; i++) free(n->f[i].ex);
    free(n->f);
    free(n->cnt);
    free(n->used);
    free(n->adjn);
    free(n->start);
    free(n->fill);
    free(n->mark);
    free(n->in_level);
    free(n->level);
    free(n->touched);
    free(n->adj);
    free(n->frozen);
    free(n->bl);
    free(n->ov);
    free(n->heap);
    free(n);
    *np = NULL;
}

/* Drain every entity at its current rate up to now. */
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

static void push_ent(net_t *n, int64_t now, ent_t e)
{
    advance(n, now);
    if (n->n == n->cap) {
        n->cap = n->cap ? 2 * n->cap : 1024;
        n->f = xrealloc(n->f, (size_t)n->cap * sizeof *n->f);
    }
    n->f[n->n++] = e;
    n->dirty = 1;
}

void net_add(net_t *n, int64_t now, int src, int dst, int64_t bytes, int64_t tag)
{
    ASSERT(src >= 0 && src < n->nodes && dst >= 0 && dst < n->nodes && src != dst,
           "flow %d -> %d", src, dst);
    ASSERT(bytes > 0, "empty flow");
    push_ent(n, now, (ent_t){src, dst, 1, 0, 0, NULL, (double)bytes, 0, INT64_MAX, bytes, tag});
}

void net_add_bcast(net_t *n, int64_t now, int src, int64_t bytes, int64_t tag)
{
    ASSERT(src >= 0 && src < n->nodes && n->nodes >= 2, "broadcast from %d of %d", src,
           n->nodes);
    ASSERT(bytes > 0, "empty broadcast");
    push_ent(n, now,
             (ent_t){src, NET_DST_ALL, n->nodes - 1, 0, 0, NULL, (double)bytes, 0, INT64_MAX,
                     bytes, tag});
}

int net_dirty(const net_t *n) { return n->dirty; }
int64_t net_next_ns(const net_t *n) { return n->next_ns; }
int64_t net_active(const net_t *n) { return n->n; }
int64_t net_recomputes(const net_t *n) { return n->recomputes; }

static void heap_push(net_t *n, int64_t *hn, double share, int r)
{
    if (*hn == n->heap_cap) {
        n->heap_cap *= 2;
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

/* The fair share resource r would give each of its unfrozen flows; INFINITY when none
 * crosses it. */
static double share_of(const net_t *n, int r)
{
    int N = n->nodes;
    double rem;
    int64_t c;
    if (r < N) {
        rem = n->nic_Bps - n->used[r];
        c = n->cnt[r];
    } else if (r < 2 * N) {
        rem = n->nic_Bps - n->fb - n->used[r];
        c = n->bu + n->cnt[r];
    } else if (r == 2 * N) {
        rem = n->nic_Bps - n->fb;
        c = n->bu;
    } else {
        rem = n->core_Bps - n->core_used;
        c = n->core_cnt;
    }
    if (c <= 0) return INFINITY;
    return (rem > 0 ? rem : 0) / (double)c;
}

static void freeze(net_t *n, int64_t i, double x)
{
    int N = n->nodes;
    ent_t *e = &n->f[i];
    n->frozen[i] = 1;
    n->left--;
    e->rate = x;
    n->cnt[e->src] -= e->mult;
    n->used[e->src] += x * e->mult;
    if (e->dst >= 0) {
        n->cnt[N + e->dst]--;
        n->used[N + e->dst] += x;
    } else {
        /* leaves the global terms; the receive sides it does not cross (its sender's, those
         * split off) never counted it */
        n->bu--;
        n->fb += x;
        n->cnt[N + e->src]++;
        n->used[N + e->src] -= x;
        for (int k = 0; k < e->nex; k++) {
            n->cnt[N + e->ex[k]]++;
            n->used[N + e->ex[k]] -= x;
        }
    }
    n->core_cnt -= e->mult;
    n->core_used += x * e->mult;
}

/* Whether broadcast g has a flow into d. */
static int crosses(const ent_t *g, int d)
{
    if (g->src == d) return 0;
    for (int k = 0; k < g->nex; k++)
        if (g->ex[k] == d) return 0;
    return 1;
}

/* Split broadcast i's flow into d off into a single flow (unfrozen, same tag and remaining
 * bytes; the broadcast excludes d from then on). No load changes: d carries one broadcast
 * fewer and one single more, the sender and the core the same flows. Returns its index. */
static int64_t split_one(net_t *n, int64_t i, int d)
{
    if (n->n == n->cap) {
        n->cap *= 2;
        n->f = xrealloc(n->f, (size_t)n->cap * sizeof *n->f);
    }
    if (n->ent_cap < n->cap) {
        n->ent_cap = n->cap;
        n->frozen = xrealloc(n->frozen, (size_t)n->ent_cap);
        n->bl = xrealloc(n->bl, (size_t)n->ent_cap * sizeof *n->bl);
        n->ov = xrealloc(n->ov, (size_t)n->ent_cap * sizeof *n->ov);
    }
    ent_t *g = &n->f[i];
    ASSERT(g->mult > 1, "broadcast from %d split down to nothing", g->src);
    if (g->nex == g->cap_ex) {
        g->cap_ex = g->cap_ex ? 2 * g->cap_ex : 4;
        g->ex = xrealloc(g->ex, (size_t)g->cap_ex * sizeof *g->ex);
    }
    g->ex[g->nex++] = d;
    g->mult--;
    int64_t j = n->n++;
    n->f[j] = (ent_t){g->src, d, 1, 0, 0, NULL, g->rem, 0, INT64_MAX, g->bytes, g->tag};
    n->frozen[j] = 0;
    n->left++;
    return j;
}

/* Freeze every flow crossing a resource of the level (level[0..nl)) at x. A broadcast that
 * also crosses receive sides outside the level keeps those flows rising: either its flows into
 * the level's receive sides are split off and frozen, or (when its plain flows freeze) its
 * flows into the other special receive sides are split off unfrozen. */
static void freeze_level(net_t *n, int nl, double x, int64_t special)
{
    int N = n->nodes, plain = 2 * N, core = 2 * N + 1;
    int64_t level_recv = 0;
    for (int k = 0; k < nl; k++) {
        n->in_level[n->level[k]] = 1;
        level_recv += n->level[k] >= N && n->level[k] < 2 * N;
    }
    if (n->in_level[core]) {
        for (int64_t i = 0; i < n->n; i++)
            if (!n->frozen[i]) freeze(n, i, x);
        n->nbl = 0;
    }
    for (int k = 0; k < nl; k++) {
        int r = n->level[k];
        if (r >= 2 * N) continue;
        for (int64_t a = n->start[r]; a < n->start[r] + n->adjn[r]; a++)
            if (!n->frozen[n->adj[a]]) freeze(n, n->adj[a], x);
        for (int64_t a = 0; a < n->nov; a++) {
            const ent_t *e = &n->f[n->ov[a]];
            if (!n->frozen[n->ov[a]] && (r < N ? e->src == r : e->dst == r - N))
                freeze(n, n->ov[a], x);
        }
    }
    int plain_cross = special < N, plain_in = n->in_level[plain];
    int64_t w = 0, nbl = n->nbl;
    for (int64_t k = 0; k < nbl; k++) {
        int64_t i = n->bl[k];
        if (n->frozen[i]) continue;
        const ent_t *g = &n->f[i];
        if (n->in_level[g->src]) {
            freeze(n, i, x);
            continue;
        }
        /* special receive sides it crosses: all touched ones but its sender's and excluded */
        int64_t crossed = special - 1 - g->nex;
        int64_t crossed_in = level_recv - n->in_level[N + g->src];
        for (int e = 0; e < g->nex; e++) crossed_in -= n->in_level[N + g->ex[e]];
        if (crossed_in == 0 && !(plain_cross && plain_in)) {
            n->bl[w++] = i; /* untouched by this level */
            continue;
        }
        if (crossed_in == crossed && (plain_in || !plain_cross)) {
            freeze(n, i, x); /* all its flows saturate here */
            continue;
        }
        if (plain_cross && plain_in) {
            /* its plain flows freeze; those into special receive sides outside the level
             * keep rising as singles */
            for (int t = 0; t < n->nlevel_scan; t++) {
                int r = n->touched[t];
                if (r < N || r >= 2 * N || n->in_level[r] || !crosses(&n->f[i], r - N))
                    continue;
                int64_t j = split_one(n, i, r - N);
                n->ov[n->nov++] = j;
            }
            freeze(n, i, x);
            continue;
        }
        /* its flows into the level's receive sides freeze; the rest keeps rising */
        for (int t = 0; t < nl; t++) {
            int r = n->level[t];
            if (r < N || r >= 2 * N || !crosses(&n->f[i], r - N)) continue;
            freeze(n, split_one(n, i, r - N), x);
        }
        n->bl[w++] = i;
    }
    n->nbl = w;
    for (int k = 0; k < nl; k++) n->in_level[n->level[k]] = 0;
}

static void touch_res(net_t *n, int r, int *nt)
{
    if (n->mark[r]) return;
    n->mark[r] = 1;
    n->touched[(*nt)++] = r;
    n->cnt[r] = 0;
    n->used[r] = 0;
    n->adjn[r] = 0;
}

void net_recompute(net_t *n, int64_t now)
{
    advance(n, now);
    n->dirty = 0;
    n->recomputes++;
    n->next_ns = INT64_MAX;
    if (n->n == 0) return;
    int N = n->nodes;
    if (n->ent_cap < n->cap) {
        n->ent_cap = n->cap;
        n->frozen = xrealloc(n->frozen, (size_t)n->ent_cap);
        n->bl = xrealloc(n->bl, (size_t)n->ent_cap * sizeof *n->bl);
        n->ov = xrealloc(n->ov, (size_t)n->ent_cap * sizeof *n->ov);
    }
    if (n->adj_cap < 2 * n->n) {
        n->adj_cap = 2 * n->cap;
        n->adj = xrealloc(n->adj, (size_t)n->adj_cap * sizeof *n->adj);
    }
    /* Loads of the touched resources, and CSR adjacency: entities by sender, single flows by
     * receiver. Broadcasts are listed once in bl. */
    int nt = 0;
    n->bu = 0;
    n->fb = 0;
    n->nbl = 0;
    n->nov = 0;
    n->core_cnt = 0;
    n->core_used = 0;
    for (int64_t i = 0; i < n->n; i++) {
        const ent_t *e = &n->f[i];
        touch_res(n, e->src, &nt);
        n->cnt[e->src] += e->mult;
        n->adjn[e->src]++;
        if (e->dst >= 0) {
            touch_res(n, N + e->dst, &nt);
            n->cnt[N + e->dst]++;
            n->adjn[N + e->dst]++;
        } else {
            /* a broadcast does not cross its own sender's or its excluded receive sides */
            touch_res(n, N + e->src, &nt);
            n->cnt[N + e->src]--;
            for (int k = 0; k < e->nex; k++) {
                touch_res(n, N + e->ex[k], &nt);
                n->cnt[N + e->ex[k]]--;
            }
            n->bu++;
            n->bl[n->nbl++] = i;
        }
        n->core_cnt += e->mult;
    }
    n->nlevel_scan = nt;
    int64_t acc = 0, special = 0;
    for (int k = 0; k < nt; k++) {
        int r = n->touched[k];
        n->start[r] = n->fill[r] = acc;
        acc += n->adjn[r];
        special += r >= N;
    }
    for (int64_t i = 0; i < n->n; i++) {
        const ent_t *e = &n->f[i];
        n->adj[n->fill[e->src]++] = i;
        if (e->dst >= 0) n->adj[n->fill[N + e->dst]++] = i;
    }
    ASSERT(n->n > 0, "no entities");
    memset(n->frozen, 0, (size_t)n->n);
    n->left = n->n;

    /* Progressive filling: the resource with the smallest fair share freezes its flows at
     * that share. Shares only grow as flows freeze, so stale heap entries are re-pushed. */
    int64_t hn = 0;
    for (int k = 0; k < nt; k++) {
        double s = share_of(n, n->touched[k]);
        if (s < INFINITY) heap_push(n, &hn, s, n->touched[k]);
    }
    int plain = 2 * N, core = 2 * N + 1;
    n->in_level[plain] = n->in_level[core] = 0;
    if (n->bu > 0 && special < N) heap_push(n, &hn, share_of(n, plain), plain);
    if (n->core_Bps > 0) heap_push(n, &hn, share_of(n, core), core);
    while (hn > 0 && n->left > 0) {
        rheap_t top = heap_pop(n, &hn);
        double share = share_of(n, top.r);
        if (share == INFINITY) continue;
        if (share > top.share * (1 + 1e-12)) {
            heap_push(n, &hn, share, top.r);
            continue;
        }
        /* Every resource saturating at this level, together: in an all-to-all every NIC
         * saturates at once, and broadcasts then freeze whole instead of being split. */
        double lim = share * (1 + 1e-12);
        int nl = 0;
        n->level[nl++] = top.r;
        while (hn > 0 && n->heap[0].share <= lim) {
            rheap_t t2 = heap_pop(n, &hn);
            double s2 = share_of(n, t2.r);
            if (s2 == INFINITY) continue;
            if (s2 > lim) heap_push(n, &hn, s2, t2.r);
            else n->level[nl++] = t2.r;
        }
        freeze_level(n, nl, share, special);
    }
    for (int k = 0; k < nt; k++) n->mark[n->touched[k]] = 0;
    for (int64_t i = 0; i < n->n; i++) {
        ent_t *f = &n->f[i];
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
            fn(arg, n->f[i].tag, n->f[i].src, n->f[i].dst, n->f[i].bytes, n->f[i].ex,
               n->f[i].nex);
            free(n->f[i].ex);
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
