#include "net.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

/* One entity: a single flow src -> dst; a "multi" of `mult` flows between a hub node and
 * its leaves (every node but the hub and the nodes in its set): a broadcast (hub = src,
 * leaves receive) or a gather (hub = dst, leaves send); or a "fan": the same with the leaves
 * listed in its set (mult of them). Fans are made only by splitting: the flows of a multi (or
 * fan) that saturate at one level of a rate computation leave it together, as one fan, so
 * they keep one rate and one remaining size and finish at one instant — one entity and one
 * finish event, where one single flow per leaf would cost as many of each. */
#define FAN (-2)
typedef struct {
    int src, dst;    /* single: both; broadcast: src, dst = NET_DST_ALL; gather: dst,
                        src = NET_SRC_ALL; fan out: src, dst = FAN; fan in: dst, src = FAN
                        (so the kind needs no field of its own) */
    int mult;        /* flows it stands for: 1; nodes - 1 - nset for a multi; nset for a fan */
    int nset;
    int *set;        /* owned; room for ex_room(nset): multi: the nodes it excludes; fan: its
                        leaves */
    double rem;      /* bytes left per flow at t0_ns */
    double rate;     /* bytes/s per flow, since t0_ns (0: not computed yet) */
    int64_t t0_ns;   /* when its rate last changed: an entity whose rate a computation
                        leaves as it was is not touched again (rem, fin_ns stay) */
    int64_t fin_ns;
} ent_t;
/* What only the finish callback reads, in an array beside the entities. */
typedef struct {
    int64_t bytes;
    int64_t tag;
} ent_cold_t;
/* the passes over every entity stream one cache line per entity */
_Static_assert(sizeof(ent_t) <= 64, "entity larger than a cache line");

static inline int is_single(const ent_t *e) { return e->src >= 0 && e->dst >= 0; }
static inline int is_fan(const ent_t *e) { return e->src == FAN || e->dst == FAN; }
/* broadcast or fan out: the hub sends */
static inline int hub_sends(const ent_t *e) { return e->dst < 0; }

/* The room of an ex list of k > 0 entries: the next power of two, at least 4. */
static int ex_room(int k)
{
    int r = 4;
    while (r < k) r *= 2;
    return r;
}

typedef struct {
    double share;
    int r;
} rheap_t;

enum { LIST_WHOLE = -1, LIST_FAN_LEAF = -2 };

/* Resources: send side of node s is s, receive side of node d is N + d, the class of plain
 * send sides is 2N, of plain receive sides 2N + 1, the core 2N + 2. Side 0 is send, 1 is
 * receive: a broadcast's hub is on side 0 and its leaves on side 1, a gather the reverse. */
struct net {
    int nodes;
    int whole;       /* multis are never split (net_set_whole) */
    double nic_Bps, core_Bps;
    ent_t *f;
    ent_cold_t *cold; /* [cap], entity i's in cold[i] */
    int64_t n, cap;
    int64_t last_ns;
    int dirty;
    int64_t next_ns;
    int64_t recomputes;
    /* scratch for the rate computation, indexed by resource; only touched ones are reset */
    int64_t *cnt;    /* unfrozen flows crossing it, counted locally: singles, hub weights,
                        minus the unfrozen multis whose leaves are on its side but that do
                        not cross it (the multis of a side are counted once, globally, in mu) */
    double *used;    /* capacity taken by frozen entities (same split as cnt) */
    int64_t *lstart, *lcnt; /* [resource]: its run in lent: the entities listed at it, in
                               index order: single flows by sender and by receiver, multis by
                               hub (contiguous, so a level's freeze streams through memory) */
    char *mark;
    char *in_level;  /* resources saturating at the current level */
    int *level;
    int *touched;
    struct lent {
        int64_t j;   /* entity */
        int other;   /* a single flow's resource on the other side; LIST_WHOLE for a multi or
                        fan at its hub, LIST_FAN_LEAF for a fan at one of its leaves */
    } *lent;         /* [2 * entities]: the lists of all resources, one run each */
    int64_t lent_cap;
    char *frozen;
    int64_t *ml;     /* unfrozen multis (lazily compacted) */
    int64_t nml;
    /* entities split off during this computation that are still rising, listed at each of
     * their resources: ovhead[resource] starts a chain through ov */
    int64_t *ovhead;
    struct ovl {
        int64_t j, next;
    } *ov;
    int64_t nov, ov_cap;
    int64_t *seen;   /* [entity]: the last level that split it (a fan is met once per leaf) */
    int64_t levels;
    int64_t *exn, *exstart; /* [resource]: multis excluding it (their ex lists, inverted) */
    int64_t *exl;
    int64_t exl_cap;
    int32_t *exin;   /* [entity]: its excluded resources in the current level */
    char *mark2;     /* [resource] scratch of freeze_level and split_off */
    int *leafbuf;    /* [node] scratch: the leaves being split off */
    int ntouched;
    int64_t ent_cap; /* capacity of frozen, ml, exin and seen */
    rheap_t *heap;
    int64_t heap_cap;
    /* global terms of the current computation, per side */
    int64_t mu[2];   /* unfrozen multis with leaves on the side */
    double fm[2];    /* sum of the rates of frozen multis with leaves on the side */
    int64_t special[2]; /* touched resources of the side */
    int64_t core_cnt;
    double core_used;
    int64_t left;
};

static int leaf_side(const ent_t *e) { return hub_sends(e) ? 1 : 0; }
static int hub_node(const ent_t *e) { return hub_sends(e) ? e->src : e->dst; }
/* A multi's hub resource: the broadcast's sender's send side, the gather's receive side. */
static int hub_res(const net_t *n, const ent_t *e)
{
    return hub_sends(e) ? e->src : n->nodes + e->dst;
}

net_t *net_new(int nodes, double nic_Bps, double core_Bps)
{
    ASSERT(nodes >= 1 && nic_Bps > 0, "nodes %d, nic %g", nodes, nic_Bps);
    net_t *n = xcalloc(1, sizeof *n);
    n->nodes = nodes;
    n->nic_Bps = nic_Bps;
    n->core_Bps = core_Bps > 0 ? core_Bps : 0;
    n->next_ns = INT64_MAX;
    size_t R = 2 * (size_t)nodes + 3;
    n->cnt = xcalloc(R, sizeof *n->cnt);
    n->used = xcalloc(R, sizeof *n->used);
    n->lstart = xcalloc(R, sizeof *n->lstart);
    n->lcnt = xcalloc(R, sizeof *n->lcnt);
    n->mark = xcalloc(R, 1);
    n->in_level = xcalloc(R, 1);
    n->level = xcalloc(R, sizeof *n->level);
    n->touched = xcalloc(R, sizeof *n->touched);
    n->ovhead = xcalloc(R, sizeof *n->ovhead);
    n->exn = xcalloc(R, sizeof *n->exn);
    n->exstart = xcalloc(R, sizeof *n->exstart);
    n->mark2 = xcalloc(R, 1);
    n->leafbuf = xcalloc((size_t)nodes, sizeof *n->leafbuf);
    for (size_t r = 0; r < R; r++) n->ovhead[r] = -1;
    n->heap_cap = (int64_t)R;
    n->heap = xcalloc(R, sizeof *n->heap);
    return n;
}

void net_destroy(net_t **np)
{
    if (!np || !*np) return;
    net_t *n = *np;
    for (int64_t i = 0; i < n->n; i++) free(n->f[i].set);
    free(n->f);
    free(n->cnt);
    free(n->used);
    free(n->lstart);
    free(n->lcnt);
    free(n->mark);
    free(n->in_level);
    free(n->level);
    free(n->touched);
    free(n->lent);
    free(n->frozen);
    free(n->ml);
    free(n->ovhead);
    free(n->ov);
    free(n->seen);
    free(n->exn);
    free(n->exstart);
    free(n->exl);
    free(n->exin);
    free(n->mark2);
    free(n->leafbuf);
    free(n->heap);
    free(n->cold);
    free(n);
    *np = NULL;
}

/* Move the network's time to now. Entities drain lazily: each keeps its remaining bytes at
 * the instant its rate last changed (rem_now). */
static void advance(net_t *n, int64_t now)
{
    ASSERT(now >= n->last_ns, "network time going back: %lld < %lld", (long long)now,
           (long long)n->last_ns);
    n->last_ns = now;
}

static void grow_ents(net_t *n)
{
    if (n->n < n->cap) return;
    n->cap = n->cap ? 2 * n->cap : 1024;
    n->f = xrealloc(n->f, (size_t)n->cap * sizeof *n->f);
    n->cold = xrealloc(n->cold, (size_t)n->cap * sizeof *n->cold);
}

static void push_ent(net_t *n, int64_t now, ent_t e, int64_t bytes, int64_t tag)
{
    advance(n, now);
    grow_ents(n);
    e.rem = (double)bytes;
    e.rate = 0;
    e.t0_ns = now;
    e.fin_ns = INT64_MAX;
    n->cold[n->n] = (ent_cold_t){bytes, tag};
    n->f[n->n++] = e;
    n->dirty = 1;
}

void net_add(net_t *n, int64_t now, int src, int dst, int64_t bytes, int64_t tag)
{
    ASSERT(src >= 0 && src < n->nodes && dst >= 0 && dst < n->nodes && src != dst,
           "flow %d -> %d", src, dst);
    ASSERT(bytes > 0, "empty flow");
    push_ent(n, now, (ent_t){.src = src, .dst = dst, .mult = 1}, bytes, tag);
}

void net_add_bcast(net_t *n, int64_t now, int src, int64_t bytes, int64_t tag)
{
    ASSERT(src >= 0 && src < n->nodes && n->nodes >= 2, "broadcast from %d of %d", src,
           n->nodes);
    ASSERT(bytes > 0, "empty broadcast");
    push_ent(n, now, (ent_t){.src = src, .dst = NET_DST_ALL, .mult = n->nodes - 1}, bytes,
             tag);
}

void net_add_gather(net_t *n, int64_t now, int dst, int64_t bytes, int64_t tag, const int *ex,
                    int nex)
{
    ASSERT(dst >= 0 && dst < n->nodes && nex >= 0 && nex <= n->nodes - 2,
           "gather to %d of %d excluding %d", dst, n->nodes, nex);
    ASSERT(bytes > 0, "empty gather");
    int *cp = NULL;
    if (nex > 0) {
        cp = xcalloc((size_t)ex_room(nex), sizeof *cp);
        for (int k = 0; k < nex; k++) {
            ASSERT(ex[k] >= 0 && ex[k] < n->nodes && ex[k] != dst, "gather excludes %d", ex[k]);
            cp[k] = ex[k];
        }
    }
    push_ent(n, now,
             (ent_t){.src = NET_SRC_ALL, .dst = dst, .mult = n->nodes - 1 - nex, .nset = nex,
                     .set = cp},
             bytes, tag);
}

void net_set_whole(net_t *n, int whole) { n->whole = whole != 0; }

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

/* Put `last` at the place of heap entry i (whose subtrees are heaps) and move it down. */
static void heap_sift_down(net_t *n, int64_t *hn, int64_t i, rheap_t last)
{
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
}

static rheap_t heap_pop(net_t *n, int64_t *hn)
{
    rheap_t top = n->heap[0], last = n->heap[--(*hn)];
    heap_sift_down(n, hn, 0, last);
    return top;
}

/* Make heap[0..hn) a heap in O(hn): the order on (share, resource) is total, so it pops as
 * one built by pushes would. */
static void heap_build(net_t *n, int64_t hn)
{
    for (int64_t i = hn / 2 - 1; i >= 0; i--) heap_sift_down(n, &hn, i, n->heap[i]);
}

/* The fair share resource r would give each of its unfrozen flows; INFINITY when none
 * crosses it. */
static double share_of(const net_t *n, int r)
{
    int N = n->nodes;
    double rem;
    int64_t c;
    if (r < 2 * N) {
        int side = r >= N;
        rem = n->nic_Bps - n->fm[side] - n->used[r];
        c = n->mu[side] + n->cnt[r];
    } else if (r < 2 * N + 2) {
        int side = r - 2 * N;
        rem = n->nic_Bps - n->fm[side];
        c = n->mu[side];
    } else {
        rem = n->core_Bps - n->core_used;
        c = n->core_cnt;
    }
    if (c <= 0) return INFINITY;
    return (rem > 0 ? rem : 0) / (double)c;
}

/* llround(x) for 0 <= x < 2^62, without the library call (a tenth of a recomputation went
 * there): x - trunc(x) is exact, so halves round up exactly as llround rounds them. */
static inline int64_t round_ns(double x)
{
    if (!(x < 4.6e18)) return llround(x);
    int64_t i = (int64_t)x;
    return x - (double)i >= 0.5 ? i + 1 : i;
}

/* Give entity e its rate x at this computation (time n->last_ns). Where x is the rate it
 * had, nothing changes: its remaining bytes and finish time stay as computed when that rate
 * was set (so they carry no rounding from the events in between). Otherwise its bytes are
 * drained to now at the old rate and its finish time follows from the new one. */
static inline void set_rate(net_t *n, ent_t *e, double x)
{
    if (x != e->rate) {
        ASSERT(x > 0, "flow %d -> %d got no bandwidth", e->src, e->dst);
        if (e->rate > 0) {
            e->rem -= e->rate * ((double)(n->last_ns - e->t0_ns) * 1e-9);
            if (e->rem < 0) e->rem = 0;
        }
        e->t0_ns = n->last_ns;
        e->rate = x;
        int64_t d = round_ns(e->rem / x * 1e9);
        e->fin_ns = n->last_ns + (d > 0 ? d : 0);
    }
    if (e->fin_ns < n->next_ns) n->next_ns = e->fin_ns;
}

static void freeze(net_t *n, int64_t i, double x)
{
    int N = n->nodes;
    ent_t *e = &n->f[i];
    n->frozen[i] = 1;
    n->left--;
    set_rate(n, e, x);
    if (is_single(e)) {
        n->cnt[e->src]--;
        n->used[e->src] += x;
        n->cnt[N + e->dst]--;
        n->used[N + e->dst] += x;
    } else if (is_fan(e)) {
        int off = leaf_side(e) * N, h = hub_res(n, e);
        n->cnt[h] -= e->mult;
        n->used[h] += x * e->mult;
        for (int k = 0; k < e->nset; k++) {
            n->cnt[off + e->set[k]]--;
            n->used[off + e->set[k]] += x;
        }
    } else {
        /* leaves the global terms; the leaf-side resources it does not cross (its hub node's,
         * those excluded) never counted it */
        int side = leaf_side(e), off = side * N, h = hub_res(n, e);
        n->cnt[h] -= e->mult;
        n->used[h] += x * e->mult;
        n->mu[side]--;
        n->fm[side] += x;
        n->cnt[off + hub_node(e)]++;
        n->used[off + hub_node(e)] -= x;
        for (int k = 0; k < e->nset; k++) {
            n->cnt[off + e->set[k]]++;
            n->used[off + e->set[k]] -= x;
        }
    }
    /* the core's terms matter only where it is a resource (a dependency chain through
     * every freeze otherwise) */
    if (n->core_Bps > 0) {
        n->core_cnt -= e->mult;
        n->core_used += x * e->mult;
    }
}

static void fan_level(net_t *n, int64_t j, double x);

/* Freeze every unfrozen entity of resource r's list at x (a fan listed at one of its leaves:
 * the flows of it that the level holds). The same updates as freeze() in the same order, with
 * r's own terms kept in registers: every single flow of the list updates them, a chain
 * through memory otherwise. */
static void freeze_list(net_t *n, int r, double x)
{
    double ur = n->used[r];
    int64_t cr = n->cnt[r], nf = 0;
    const struct lent *l = n->lent + n->lstart[r], *lend = l + n->lcnt[r];
    for (; l < lend; l++) {
        int64_t j = l->j;
        if (n->frozen[j]) continue;
        if (l->other < 0) {
            n->used[r] = ur;
            n->cnt[r] = cr;
            if (l->other == LIST_FAN_LEAF) fan_level(n, j, x);
            else freeze(n, j, x);
            ur = n->used[r];
            cr = n->cnt[r];
            continue;
        }
        ent_t *e = &n->f[j];
        n->frozen[j] = 1;
        nf++;
        set_rate(n, e, x);
        int other = l->other;
        cr--;
        ur += x;
        n->cnt[other]--;
        n->used[other] += x;
        if (n->core_Bps > 0) {
            n->core_cnt -= 1;
            n->core_used += x;
        }
    }
    n->used[r] = ur;
    n->cnt[r] = cr;
    n->left -= nf;
}

static void grow_ent_scratch(net_t *n)
{
    if (n->ent_cap >= n->cap) return;
    n->ent_cap = n->cap;
    n->frozen = xrealloc(n->frozen, (size_t)n->ent_cap);
    n->ml = xrealloc(n->ml, (size_t)n->ent_cap * sizeof *n->ml);
    n->seen = xrealloc(n->seen, (size_t)n->ent_cap * sizeof *n->seen);
    n->exin = xrealloc(n->exin, (size_t)n->ent_cap * sizeof *n->exin);
}

/* List entity j at resource r for the rest of this computation. */
static void ov_put(net_t *n, int r, int64_t j)
{
    if (n->nov == n->ov_cap) {
        n->ov_cap = n->ov_cap ? 2 * n->ov_cap : 1024;
        n->ov = xrealloc(n->ov, (size_t)n->ov_cap * sizeof *n->ov);
    }
    n->ov[n->nov] = (struct ovl){j, n->ovhead[r]};
    n->ovhead[r] = n->nov++;
}

/* Room for add more nodes in a set of nset (a set's room is at least ex_room(nset)). */
static void set_reserve(int **set, int nset, int add)
{
    int room = nset > 0 ? ex_room(nset) : 0;
    if (nset + add > room) *set = xrealloc(*set, (size_t)ex_room(nset + add) * sizeof **set);
}

/* Move the flows of multi or fan i at leaves[0..k) (distinct leaves of it, fewer than all)
 * into a new entity: a single flow when k is 1, else a fan, with i's tag and remaining
 * bytes. A multi excludes them from then on, a fan drops them from its set. No load changes:
 * the same flows cross the same resources. `rising`: the new entity stays unfrozen, so it is
 * listed at its resources for the rest of the computation. Returns its index. */
static int64_t split_off(net_t *n, int64_t i, const int *leaves, int k, int rising)
{
    int N = n->nodes;
    grow_ents(n);
    grow_ent_scratch(n);
    ent_t *g = &n->f[i];
    ASSERT(k >= 1 && k < g->mult, "splitting %d of the %d flows at node %d", k, g->mult,
           hub_node(g));
    int off = leaf_side(g) * N, hres = hub_res(n, g);
    if (is_fan(g)) {
        for (int a = 0; a < k; a++) n->mark2[off + leaves[a]] = 1;
        int w = 0;
        for (int a = 0; a < g->nset; a++)
            if (!n->mark2[off + g->set[a]]) g->set[w++] = g->set[a];
        for (int a = 0; a < k; a++) n->mark2[off + leaves[a]] = 0;
        ASSERT(w == g->nset - k, "fan at node %d split at nodes it does not reach", hub_node(g));
        g->nset = w;
    } else {
        set_reserve(&g->set, g->nset, k);
        memcpy(g->set + g->nset, leaves, (size_t)k * sizeof *leaves);
        g->nset += k;
    }
    g->mult -= k;
    int hub = hub_node(g), sends = hub_sends(g);
    /* the same state as i's: remaining bytes, rate (until this computation sets it) */
    ent_t e = {.mult = k, .rem = g->rem, .rate = g->rate, .t0_ns = g->t0_ns, .fin_ns = g->fin_ns};
    if (k == 1) {
        e.src = sends ? hub : leaves[0];
        e.dst = sends ? leaves[0] : hub;
    } else {
        e.src = sends ? hub : FAN;
        e.dst = sends ? FAN : hub;
        e.nset = k;
        e.set = xcalloc((size_t)ex_room(k), sizeof *e.set);
        memcpy(e.set, leaves, (size_t)k * sizeof *leaves);
    }
    int64_t j = n->n++;
    n->f[j] = e;
    n->cold[j] = n->cold[i];
    n->frozen[j] = 0;
    n->seen[j] = 0;
    n->left++;
    if (rising) {
        ov_put(n, hres, j);
        for (int a = 0; a < k; a++) ov_put(n, off + leaves[a], j);
    }
    return j;
}

/* Fan j meets the level: it freezes whole at x when its hub or all its leaves are in the
 * level, else its flows at the level's leaves freeze, as one fan, and the rest keeps
 * rising. Met once per level (it is listed at each of its leaves). */
static void fan_level(net_t *n, int64_t j, double x)
{
    if (n->frozen[j] || n->seen[j] == n->levels) return;
    n->seen[j] = n->levels;
    const ent_t *e = &n->f[j];
    if (n->in_level[hub_res(n, e)]) {
        freeze(n, j, x);
        return;
    }
    int off = leaf_side(e) * n->nodes, k = 0;
    for (int a = 0; a < e->nset; a++)
        if (n->in_level[off + e->set[a]]) n->leafbuf[k++] = e->set[a];
    if (k == e->nset) freeze(n, j, x);
    else if (k > 0) freeze(n, split_off(n, j, n->leafbuf, k, 0), x);
}

/* Freeze every flow crossing a resource of the level (level[0..nl)) at x. A multi that also
 * crosses leaf-side resources outside the level keeps those flows rising: either its flows
 * into the level's resources leave it as one fan, frozen, or (when its plain flows freeze,
 * or most of its flows are in the level) its flows at the other special resources of its
 * leaf side leave it as one fan, still rising, and the multi freezes. */
static void freeze_level(net_t *n, int nl, double x)
{
    int N = n->nodes, core = 2 * N + 2;
    n->levels++;
    int64_t level_side[2] = {0, 0};
    for (int k = 0; k < nl; k++) {
        n->in_level[n->level[k]] = 1;
        if (n->level[k] < 2 * N) level_side[n->level[k] >= N]++;
    }
    if (n->in_level[core]) {
        for (int64_t i = 0; i < n->n; i++)
            if (!n->frozen[i]) freeze(n, i, x);
        n->nml = 0;
    }
    for (int k = 0; k < nl; k++) {
        int r = n->level[k];
        if (r >= 2 * N) continue;
        freeze_list(n, r, x);
        for (int64_t a = n->ovhead[r]; a >= 0; a = n->ov[a].next) {
            int64_t j = n->ov[a].j;
            if (n->frozen[j]) continue;
            if (is_fan(&n->f[j])) fan_level(n, j, x);
            else freeze(n, j, x);
        }
    }
    /* a multi's excluded resources in the level, from the inverted lists (built at the start
     * of the computation: a split made later only excludes a resource that saturated with
     * it, or the multi froze) */
    for (int k = 0; k < nl; k++) {
        int r = n->level[k];
        if (r >= 2 * N) continue;
        for (int64_t a = n->exstart[r]; a < n->exstart[r] + n->exn[r]; a++) n->exin[n->exl[a]]++;
    }
    int64_t w = 0, nml = n->nml;
    for (int64_t k = 0; k < nml; k++) {
        int64_t i = n->ml[k];
        if (n->frozen[i]) continue;
        const ent_t *g = &n->f[i];
        int side = leaf_side(g), off = side * N, hub = hub_node(g);
        if (n->in_level[hub_res(n, g)]) {
            freeze(n, i, x);
            continue;
        }
        int plain_cross = n->special[side] < N, plain_in = n->in_level[2 * N + side];
        /* special leaf-side resources it crosses: all touched ones but its hub node's and
         * those excluded */
        int64_t crossed = n->special[side] - 1 - g->nset;
        int64_t crossed_in = level_side[side] - n->in_level[off + hub] - n->exin[i];
        if (crossed_in == 0 && !(plain_cross && plain_in)) {
            n->ml[w++] = i; /* untouched by this level */
            continue;
        }
        if (n->whole || (crossed_in == crossed && (plain_in || !plain_cross))) {
            freeze(n, i, x); /* all its flows saturate here, or it moves as one */
            continue;
        }
        /* the leaf-side resources it does not cross */
        n->mark2[off + hub] = 1;
        for (int e = 0; e < g->nset; e++) n->mark2[off + g->set[e]] = 1;
        int m = 0, rest_rises = plain_in || (!plain_cross && 2 * crossed_in >= crossed);
        if (rest_rises) {
            /* its flows at special resources outside the level keep rising, as one fan;
             * the multi freezes with the rest */
            for (int t = 0; t < n->ntouched; t++) {
                int r = n->touched[t];
                if (r >= off && r < off + N && !n->in_level[r] && !n->mark2[r])
                    n->leafbuf[m++] = r - off;
            }
        } else {
            /* its flows at the level's resources freeze, as one fan; the rest keeps rising */
            for (int t = 0; t < nl; t++) {
                int r = n->level[t];
                if (r >= off && r < off + N && !n->mark2[r]) n->leafbuf[m++] = r - off;
            }
        }
        n->mark2[off + hub] = 0;
        for (int e = 0; e < g->nset; e++) n->mark2[off + g->set[e]] = 0;
        ASSERT(m > 0, "multi at node %d: nothing to split", hub);
        int64_t j = split_off(n, i, n->leafbuf, m, rest_rises);
        if (rest_rises) {
            freeze(n, i, x);
        } else {
            freeze(n, j, x);
            n->ml[w++] = i;
        }
    }
    n->nml = w;
    for (int k = 0; k < nl; k++) {
        int r = n->level[k];
        n->in_level[r] = 0;
        if (r >= 2 * N) continue;
        for (int64_t a = n->exstart[r]; a < n->exstart[r] + n->exn[r]; a++) n->exin[n->exl[a]] = 0;
    }
}

static void touch_res_first(net_t *n, int r)
{
    n->mark[r] = 1;
    n->touched[n->ntouched++] = r;
    n->cnt[r] = 0;
    n->used[r] = 0;
    n->lcnt[r] = 0;
    n->ovhead[r] = -1;
    n->exn[r] = 0;
}

/* Put entity j in the next place of (touched) resource r's run; lstart[r] then ends the run
 * and is moved back to its start once every entity is in place. */
static inline void list_put(net_t *n, int r, int64_t j, int other)
{
    n->lent[n->lstart[r]++] = (struct lent){j, other};
}

/* Inlined check: most calls find the resource already touched. */
static inline void touch_res(net_t *n, int r)
{
    if (!n->mark[r]) touch_res_first(n, r);
}

void net_recompute(net_t *n, int64_t now)
{
    advance(n, now);
    n->dirty = 0;
    n->recomputes++;
    n->next_ns = INT64_MAX;
    if (n->n == 0) return;
    int N = n->nodes;
    grow_ent_scratch(n);
    /* Loads of the touched resources, and the lists of entities per resource: single flows
     * by sender and by receiver, multis by hub, fans by hub and by leaf. Multis are listed
     * once more in ml. */
    n->ntouched = 0;
    n->mu[0] = n->mu[1] = 0;
    n->fm[0] = n->fm[1] = 0;
    n->nml = 0;
    n->core_cnt = 0;
    n->core_used = 0;
    for (int64_t i = 0; i < n->n; i++) {
        const ent_t *e = &n->f[i];
        if (is_single(e)) {
            touch_res(n, e->src);
            n->cnt[e->src]++;
            n->lcnt[e->src]++;
            touch_res(n, N + e->dst);
            n->cnt[N + e->dst]++;
            n->lcnt[N + e->dst]++;
        } else if (is_fan(e)) {
            int h = hub_res(n, e), off = leaf_side(e) * N;
            touch_res(n, h);
            n->cnt[h] += e->mult;
            n->lcnt[h]++;
            for (int k = 0; k < e->nset; k++) {
                touch_res(n, off + e->set[k]);
                n->cnt[off + e->set[k]]++;
                n->lcnt[off + e->set[k]]++;
            }
        } else {
            int h = hub_res(n, e), off = leaf_side(e) * N;
            touch_res(n, h);
            n->cnt[h] += e->mult;
            n->lcnt[h]++;
            /* a multi does not cross its hub node's or its excluded leaf-side resources */
            touch_res(n, off + hub_node(e));
            n->cnt[off + hub_node(e)]--;
            for (int k = 0; k < e->nset; k++) {
                touch_res(n, off + e->set[k]);
                n->cnt[off + e->set[k]]--;
            }
            n->mu[leaf_side(e)]++;
            n->ml[n->nml++] = i;
        }
        n->core_cnt += e->mult;
        n->seen[i] = 0;
    }
    n->nov = 0;
    n->levels = 0;
    int nt = n->ntouched;
    int64_t acc = 0;
    for (int k = 0; k < nt; k++) {
        int r = n->touched[k];
        n->lstart[r] = acc;
        acc += n->lcnt[r];
    }
    if (n->lent_cap < acc) {
        n->lent_cap = 2 * acc;
        n->lent = xrealloc(n->lent, (size_t)n->lent_cap * sizeof *n->lent);
    }
    for (int64_t i = 0; i < n->n; i++) {
        const ent_t *e = &n->f[i];
        if (is_single(e)) {
            list_put(n, e->src, i, N + e->dst);
            list_put(n, N + e->dst, i, e->src);
        } else {
            list_put(n, hub_res(n, e), i, LIST_WHOLE);
            if (is_fan(e)) {
                int off = leaf_side(e) * N;
                for (int k = 0; k < e->nset; k++) list_put(n, off + e->set[k], i, LIST_FAN_LEAF);
            }
        }
    }
    for (int k = 0; k < nt; k++) n->lstart[n->touched[k]] -= n->lcnt[n->touched[k]];
    n->special[0] = n->special[1] = 0;
    for (int k = 0; k < nt; k++) n->special[n->touched[k] >= N]++;
    int64_t nexall = 0;
    for (int64_t k = 0; k < n->nml; k++) {
        const ent_t *e = &n->f[n->ml[k]];
        for (int x = 0; x < e->nset; x++) n->exn[leaf_side(e) * N + e->set[x]]++;
        nexall += e->nset;
        n->exin[n->ml[k]] = 0;
    }
    if (n->exl_cap < nexall) {
        n->exl_cap = 2 * nexall;
        n->exl = xrealloc(n->exl, (size_t)n->exl_cap * sizeof *n->exl);
    }
    acc = 0;
    for (int k = 0; k < nt; k++) {
        int r = n->touched[k];
        n->exstart[r] = acc;
        acc += n->exn[r];
        n->exn[r] = 0;
    }
    for (int64_t k = 0; k < n->nml; k++) {
        const ent_t *e = &n->f[n->ml[k]];
        for (int x = 0; x < e->nset; x++) {
            int r = leaf_side(e) * N + e->set[x];
            n->exl[n->exstart[r] + n->exn[r]++] = n->ml[k];
        }
    }
    ASSERT(n->n > 0, "no entities");
    memset(n->frozen, 0, (size_t)n->n);
    n->left = n->n;

    /* Progressive filling: the resource with the smallest fair share freezes its flows at
     * that share. Shares only grow as flows freeze, so stale heap entries are re-pushed. */
    int64_t hn = 0;
    for (int k = 0; k < nt; k++) {
        double s = share_of(n, n->touched[k]);
        if (s < INFINITY) n->heap[hn++] = (rheap_t){s, n->touched[k]};
    }
    heap_build(n, hn);
    int core = 2 * N + 2;
    for (int side = 0; side < 2; side++) {
        n->in_level[2 * N + side] = 0;
        if (n->mu[side] > 0 && n->special[side] < N)
            heap_push(n, &hn, share_of(n, 2 * N + side), 2 * N + side);
    }
    n->in_level[core] = 0;
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
         * saturates at once, and multis then freeze whole instead of being split. */
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
        freeze_level(n, nl, share);
    }
    for (int k = 0; k < nt; k++) n->mark[n->touched[k]] = 0;
    /* every entity froze, so set_rate gave each its finish time and next_ns their minimum */
    ASSERT(n->left == 0, "%lld entities got no rate", (long long)n->left);
}

int net_finish(net_t *n, int64_t now, net_finish_fn fn, void *arg)
{
    advance(n, now);
    int done = 0;
    /* Walk in index order, compacting: the callback order is deterministic. */
    int64_t w = 0;
    for (int64_t i = 0; i < n->n; i++) {
        const ent_t *e = &n->f[i];
        const ent_cold_t *c = &n->cold[i];
        if (e->fin_ns <= now) {
            if (is_fan(e)) {
                /* its flows finish as the single flows they were split off as */
                for (int k = 0; k < e->nset; k++) {
                    int leaf = e->set[k];
                    fn(arg, c->tag, hub_sends(e) ? e->src : leaf, hub_sends(e) ? leaf : e->dst,
                       c->bytes, NULL, 0);
                }
            } else {
                fn(arg, c->tag, e->src, e->dst, c->bytes, e->set, e->nset);
            }
            free(e->set);
            done++;
        } else {
            if (w != i) n->f[w] = n->f[i], n->cold[w] = n->cold[i];
            w++;
        }
    }
    n->n = w;
    if (done) {
        n->dirty = 1;
        n->next_ns = INT64_MAX;
    }
    return done;
}

/* Append the flows entity e stands for (their senders and receivers) to fs/fd; returns how
 * many, or -1 when its set contradicts its kind (a leaf that is the hub, or repeated). */
static int64_t list_flows(const net_t *n, const ent_t *e, int *fs, int *fd, char *seen)
{
    if (is_single(e)) {
        fs[0] = e->src, fd[0] = e->dst;
        return 1;
    }
    int N = n->nodes, hub = hub_node(e), sends = hub_sends(e);
    int64_t k = 0, bad = 0;
    memset(seen, 0, (size_t)N);
    for (int a = 0; a < e->nset; a++) {
        int v = e->set[a];
        bad |= v < 0 || v >= N || v == hub || seen[v];
        if (v >= 0 && v < N) seen[v] = 1;
    }
    if (bad) return -1;
    for (int v = 0; v < N; v++) {
        if (v == hub || seen[v] != is_fan(e)) continue;
        fs[k] = sends ? hub : v;
        fd[k] = sends ? v : hub;
        k++;
    }
    return k;
}

int net_verify_maxmin(const net_t *n, double rel_tol, char *err, size_t errlen)
{
    int N = n->nodes, R = 2 * N + 1;
    int64_t F = 0;
    for (int64_t i = 0; i < n->n; i++) F += n->f[i].mult;
    int *fs = xcalloc((size_t)F + 1, sizeof *fs), *fd = xcalloc((size_t)F + 1, sizeof *fd);
    int64_t *fe = xcalloc((size_t)F + 1, sizeof *fe), *cnt = xcalloc((size_t)R, sizeof *cnt);
    double *rate = xcalloc((size_t)F + 1, sizeof *rate), *cap = xcalloc((size_t)R, sizeof *cap);
    char *done = xcalloc((size_t)F + 1, 1), *seen = xcalloc((size_t)N, 1), *sat = xcalloc((size_t)R, 1);
    int64_t k = 0;
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < n->n; i++) {
        const ent_t *e = &n->f[i];
        int64_t m = k + e->mult <= F ? list_flows(n, e, fs + k, fd + k, seen) : -1;
        if (m != e->mult) {
            snprintf(err, errlen, "entity %lld (%d -> %d) stands for %d flows, its set for %lld",
                     (long long)i, e->src, e->dst, e->mult, (long long)m);
            rc = -1;
            break;
        }
        for (int64_t a = k; a < k + m; a++) fe[a] = i;
        k += m;
    }
    /* Progressive filling over the flows one by one, the textbook definition: raise every
     * unfrozen flow's rate together until a resource (send side s, receive side N + d, the
     * core 2N) is full, freeze the flows crossing it, repeat. Resources filling at the same
     * rate freeze in one step. */
    for (int r = 0; r < 2 * N; r++) cap[r] = n->nic_Bps;
    cap[2 * N] = n->core_Bps > 0 ? n->core_Bps : INFINITY;
    for (int64_t left = F; rc == 0 && left > 0;) {
        memset(cnt, 0, (size_t)R * sizeof *cnt);
        for (int64_t f = 0; f < F; f++)
            if (!done[f]) cnt[fs[f]]++, cnt[N + fd[f]]++, cnt[2 * N]++;
        double best = INFINITY;
        for (int r = 0; r < R; r++)
            if (cnt[r] > 0 && cap[r] / (double)cnt[r] < best) best = cap[r] / (double)cnt[r];
        ASSERT(best < INFINITY, "no resource limits %lld flows", (long long)left);
        for (int r = 0; r < R; r++)
            sat[r] = cnt[r] > 0 && cap[r] / (double)cnt[r] <= best * (1 + 1e-12);
        for (int64_t f = 0; f < F; f++)
            if (!done[f] && (sat[fs[f]] || sat[N + fd[f]] || sat[2 * N])) {
                done[f] = 1, rate[f] = best, left--;
                cap[fs[f]] -= best, cap[N + fd[f]] -= best, cap[2 * N] -= best;
            }
    }
    for (int64_t f = 0; rc == 0 && f < F; f++) {
        double got = n->f[fe[f]].rate;
        if (fabs(got - rate[f]) > rel_tol * rate[f]) {
            snprintf(err, errlen, "flow %d -> %d gets %.9g B/s, per-flow max-min gives %.9g",
                     fs[f], fd[f], got, rate[f]);
            rc = -1;
        }
    }
    free(fs), free(fd), free(fe), free(cnt), free(rate), free(cap), free(done), free(seen),
        free(sat);
    return rc;
}
