#include "net.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rates.h"

/* One entity: a single flow src -> dst; a "multi" of `mult` flows between a hub node and
 * its leaves (every node of one rack, every node with one rack, but the hub and the nodes in
 * its set): a broadcast's part (hub = src, leaves receive) or a gather's (hub = dst, leaves
 * send); or a "fan": the same with the leaves listed in its set (mult of them, in one rack).
 * Every flow of a multi or fan crosses its hub resource and the same rack links (ent_links);
 * a single flow crossing racks is listed at its NIC sides as LIST_WHOLE, so that freezing it
 * goes through freeze(), which knows rack links. Fans are made only by splitting: the flows
 * of a multi (or fan) that saturate at one level of a rate computation leave it together, as
 * one fan, so they keep one rate and one remaining size and finish at one instant — one
 * entity and one finish event, where one single flow per leaf would cost as many of each.
 *
 * Entities live in slots that keep their index for their whole life (a finished one's slot is
 * reused); `seq` numbers them in creation order, which is the order every pass over them
 * takes (the order of the floating-point sums, of the finish callbacks). What a rate
 * computation starts from is kept across computations and changed only by the entity that
 * starts, ends or splits: each resource's list of entities (in creation order), the loads,
 * which resources anything crosses, the multis excluding each resource, and a heap of finish
 * times. A computation then costs the progressive filling alone, not a rebuild over every
 * entity and every excluded node; and the filling itself starts at the lowest level an end
 * since the last one can alter, from what each level logged (start_at_level), so it redoes
 * the levels above that one only. An entity's rate, remaining bytes and finish time are
 * its level's (sim/rates.h): freezing it notes its level, and the computation ends by giving
 * each level its rate. */
#define FAN (-2)
/* A ring step's src and dst (net_add_ring; below any SCOPE): N flows v -> v + 1 mod N, outside every kept
 * structure while it lives (below, "Ring steps"). */
#define RING INT32_MIN
/* A multi's field for its leaves: SCOPE(q) = -3 - q, the leaves being the nodes of rack q
 * (every node when there is one rack). */
#define SCOPE(q) (-3 - (q))
typedef struct {
    int src, dst;    /* single: both; broadcast: src, dst = SCOPE(rack of its leaves);
                        gather: dst, src = SCOPE(...); fan out: src, dst = FAN; fan in: dst,
                        src = FAN (so the kind needs no field of its own) */
    int mult;        /* flows it stands for: 1; rack size - (hub in it) - nset for a multi;
                        nset for a fan */
    int nset;
    int *set;        /* owned; room for ex_room(nset): multi: the nodes it excludes; fan: its
                        leaves */
    int64_t seq;     /* creation order; -1: a free slot */
} ent_t;
/* What only the finish callback reads, in an array beside the entities. */
typedef struct {
    int64_t bytes;
    int64_t tag;
} ent_cold_t;
/* the passes over entities stream one cache line per entity */
_Static_assert(sizeof(ent_t) <= 64, "entity larger than a cache line");

static inline int is_single(const ent_t *e) { return e->src >= 0 && e->dst >= 0; }
static inline int is_fan(const ent_t *e) { return e->src == FAN || e->dst == FAN; }
static inline int is_ring(const ent_t *e) { return e->src == RING; }
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

/* A level's index in its tag (struct net's lv_tag). */
#define LV_MASK ((int64_t)0xffffff)

/* An entity due to finish (net_finish). */
typedef struct {
    int64_t seq, slot;
} due_t;

/* `other` of a list entry: a single flow's resource on the other side, or one of these. */
enum { LIST_WHOLE = -1, LIST_FAN_LEAF = -2, LIST_DEAD = -3 };

/* A list of entities in creation order (seq ascending), so an entry is found by bisection.
 * Entries of entities that finished or left the list are marked dead and squeezed out once
 * they are half of it. */
typedef struct {
    int64_t seq;
    int32_t slot;
    int32_t other;
} lent_t;
typedef struct {
    lent_t *v;
    int64_t len, cap, dead;
} rlist_t;

/* Resources: send side of node s is s, receive side of node d is N + d; with R > 1 racks
 * the uplink of rack q is 2N + q and its downlink 2N + R + q (L = 2R rack links, L = 0 with
 * one rack); the class of plain send sides of rack q is 2N + L + 2q, of its plain receive
 * sides 2N + L + 2q + 1; the core 2N + L + 2R. With one rack this is the numbering of a
 * single switch: 2N, 2N + 1 the classes, 2N + 2 the core. Side 0 is send, 1 is receive: a
 * broadcast's hub is on side 0 and its leaves on side 1, a gather the reverse. The "kept"
 * resources (lists, loads, references) are the NIC sides and the rack links, [0, 2N + L). */
struct net {
    int nodes;
    int whole;       /* multis are never split (net_set_whole) */
    double nic_Bps, core_Bps; /* nic_Bps: the rate of a NIC side not given its own */
    int racks, rack_size, links; /* R, nodes per rack (N when R = 1), L */
    double rack_Bps; /* each rack link, per direction */
    double *side_Bps; /* [2N] each NIC side's rate */
    int *side_cls;   /* [2N] each NIC side's class: 2 x its rack + its side */
    char *pinned;    /* [N] a node whose NIC rate is not nic_Bps: its sides are always
                        referenced, so never in a plain class (whose sides share one rate) */
    ent_t *f;        /* [cap] slots */
    ent_cold_t *cold; /* [cap], slot i's in cold[i] */
    int64_t cap, used_slots; /* slots [0, used_slots) were handed out at least once */
    int64_t *free_slots;
    int64_t nfree;
    int64_t live;    /* entities */
    int64_t next_seq;
    int64_t last_ns;
    int dirty;
    int computing;   /* inside net_recompute: lists are not squeezed */
    int64_t next_ns;
    int64_t recomputes;
    /* kept across computations */
    rlist_t *list;   /* [2N]: the entities crossing each NIC side: single flows by sender and
                        by receiver, multis and fans by hub, fans by leaf */
    rlist_t *exl;    /* [2N]: multis excluding the resource (any order; entries whose seq no
                        longer matches their slot are dead) */
    rlist_t order;   /* every entity */
    rlist_t multis;  /* every multi */
    int64_t *base;   /* [2N + L] the computation's starting cnt (see cnt) */
    int64_t *mu_base, core_base; /* mu_base [2R]: see mu */
    int32_t *ref;    /* [2N + L] how many entities cross, exclude or are hubs at it (and 1
                        for a pinned node's side): touched when > 0 */
    int *touched;    /* the touched resources, any order */
    int *tpos;       /* [2N + L] place in touched, -1 when not touched */
    int ntouched;
    int64_t *special; /* [2R]: touched NIC sides of rack q and side s, at 2q + s */
    rates_t *rt;     /* each entity's rate, bytes left and finish time, one per level of
                        the last computation that gave it a rate (sim/rates.h) */
    due_t *due;      /* scratch of net_finish */
    int64_t due_cap;
    /* scratch for the rate computation, indexed by resource */
    int64_t *cnt;    /* unfrozen flows crossing it, counted locally: singles, hub weights,
                        minus the unfrozen multis whose leaves are on its side but that do
                        not cross it (the multis of a side are counted once, globally, in mu) */
    double *used;    /* capacity taken by frozen entities (same split as cnt) */
    int64_t *lcnt;   /* [resource]: the length of its list when the computation started (the
                        entities split off since are reached through ov) */
    char *in_level;  /* resources saturating at the current level */
    int *level;
    /* The levels of the computations so far, kept so that the next one starts at the first
     * level a change can alter (net_recompute): level L of the current chain has the tag
     * lv_tag[L] = epoch << 24 | L (-1: not valid; epochs are unique); entity i froze with
     * the tag fz[i] (0: never), so it is frozen while lv_tag[fz[i] & LV_MASK] == fz[i]
     * (one load per entity). At each level's start the global terms are kept; a resource's
     * terms are logged in hist the first time a level changes them, as its deficit
     * base - cnt (which the entities frozen before stay the only part of, whatever starts
     * or ends later) and its used. */
    int64_t nlv, lv_cap;
    int64_t *lv_tag, *lv_frozen, *lv_core_def, *lv_mu_def; /* lv_mu_def, lv_fm: [lv_cap x 2R] */
    double *lv_core_used, *lv_fm;
    int64_t epoch, cur_tag;
    int32_t cur_lv;
    int64_t *fz;
    int64_t *hstamp; /* [2N + L] the tag of the level that last logged the resource */
    struct hist {
        int64_t def;
        double used;
        int32_t r, lv;
    } *hist;
    int64_t nhist, hist_cap;
    int64_t *dfin;   /* [2N + L] base - cnt at the end of the last computation */
    int64_t redo;    /* the first level a change since the last computation can alter */
    int from_scratch; /* net_set_from_scratch */
    int64_t restarts; /* computations that kept some levels */
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
    int64_t levels;  /* levels of every computation so far */
    int32_t *exin;   /* [entity]: its excluded resources in the level exin_at (a count of
                        another level reads as 0, so none is cleared) */
    int64_t *exin_at;
    char *mark2;     /* [resource] scratch of freeze_level and split_off */
    int *leafbuf;    /* [node] scratch: the leaves being split off */
    int64_t *noted;  /* [entity] the entities frozen at the current level, in order, handed to
                        rates_note_many at its end (one call, not one per entity) */
    int64_t nnoted;
    int64_t ent_cap; /* capacity of fz, ml, exin, exin_at, seen and noted */
    rheap_t *heap;
    int64_t heap_cap;
    /* global terms of the current computation, per rack q and side s at 2q + s */
    int64_t *mu;     /* [2R] unfrozen multis with leaves on side s of rack q */
    double *fm;      /* [2R] sum of the rates of frozen multis with leaves there */
    int64_t *level_side; /* [2R] scratch of freeze_level: the level's NIC sides there */
    int64_t core_cnt;
    double core_used;
    int64_t left;
    /* ring steps kept whole (net_add_ring), in creation order; none while live > 0 */
    int64_t *ring;
    int64_t nring, ring_cap;
    int npinned;     /* nodes with a NIC rate of their own: no ring step is kept whole */
    /* The grouped model keeps ring steps whole beside other entities: every live step
     * crosses each NIC side and rack link once and the core N times, so it is a global term
     * of every resource's share, frozen at the first level (below, "Ring steps"). */
    int64_t ring_cnt; /* ring steps not frozen in this computation */
    double ring_used; /* what the frozen ones take of each NIC side and rack link */
    /* The last level of a computation (its top) freezes every entity left, and what it
     * changes of the terms (cnt, used, the global ones) is read by no later level and by no
     * later computation (each starts at or below it, from the logs and dfin, which hold the
     * terms as they were before it). A level taken to be the top (the level at which the
     * last computation ended) is first done "fast": entities frozen and noted, no term
     * changed or logged; if it is not the top after all (an entity stays unfrozen, or one
     * would have to be split), it is undone and done in full. */
    int fast;        /* the current level is being done fast */
    int fast_failed; /* ... and turned out not to be the top */
    int64_t last_top; /* the top level of the last computation; -1: none */
    int no_fast_top;  /* net_set_fast_top(n, 0) */
    int64_t fast_tops; /* levels done fast that were the top */
    int64_t *ml_save; /* ml before a fast level, [ent_cap] */
};

static int leaf_side(const ent_t *e) { return hub_sends(e) ? 1 : 0; }
static int hub_node(const ent_t *e) { return hub_sends(e) ? e->src : e->dst; }
/* A multi's hub resource: the broadcast's sender's send side, the gather's receive side. */
static int hub_res(const net_t *n, const ent_t *e)
{
    return hub_sends(e) ? e->src : n->nodes + e->dst;
}
static inline int rack_of(const net_t *n, int v) { return n->racks > 1 ? v / n->rack_size : 0; }
/* The rack of a multi's or fan's leaves. */
static inline int scope_of(const net_t *n, const ent_t *e)
{
    if (n->racks <= 1) return 0;
    if (is_fan(e)) return rack_of(n, e->set[0]);
    return SCOPE(0) - (hub_sends(e) ? e->dst : e->src);
}
/* The plain class (and the global terms' index) of NIC side r < 2N: 2 x its rack + its side. */
static inline int side_class(const net_t *n, int r) { return n->side_cls[r]; }
/* The rack links every flow of entity e crosses: 0, or 2 in out[] (the sending rack's
 * uplink, the receiving rack's downlink). The one-switch case stays inline and costs a
 * branch on the hot paths. */
static int ent_links_racks(const net_t *n, const ent_t *e, int out[2]);
static inline int ent_links(const net_t *n, const ent_t *e, int out[2])
{
    return n->racks <= 1 ? 0 : ent_links_racks(n, e, out);
}
static int ent_links_racks(const net_t *n, const ent_t *e, int out[2])
{
    int qs, qd;
    if (is_single(e)) {
        qs = rack_of(n, e->src), qd = rack_of(n, e->dst);
    } else {
        int qh = rack_of(n, hub_node(e)), q = scope_of(n, e);
        qs = hub_sends(e) ? qh : q;
        qd = hub_sends(e) ? q : qh;
    }
    if (qs == qd) return 0;
    out[0] = 2 * n->nodes + qs;
    out[1] = 2 * n->nodes + n->racks + qd;
    return 2;
}
static int class_res(const net_t *n, int cls) { return 2 * n->nodes + n->links + cls; }
static int core_res(const net_t *n) { return 2 * n->nodes + n->links + 2 * n->racks; }
/* A NIC side or rack link that only ring steps cross (grouped model, ring_cnt > 0). */
static int ring_res(const net_t *n) { return core_res(n) + 1; }

net_t *net_new(int nodes, double nic_Bps, double core_Bps)
{
    return net_new_racks(nodes, nic_Bps, core_Bps, 0, 0);
}

net_t *net_new_racks(int nodes, double nic_Bps, double core_Bps, int nodes_per_rack,
                     double rack_Bps)
{
    ASSERT(nodes >= 1 && nic_Bps > 0, "nodes %d, nic %g", nodes, nic_Bps);
    ASSERT(nodes_per_rack >= 0, "%d nodes per rack", nodes_per_rack);
    net_t *n = xcalloc(1, sizeof *n);
    n->rt = rates_new();
    n->nodes = nodes;
    n->nic_Bps = nic_Bps;
    n->core_Bps = core_Bps > 0 ? core_Bps : 0;
    n->next_ns = INT64_MAX;
    n->redo = 0;
    n->last_top = -1;
    n->racks = 1;
    n->rack_size = nodes;
    if (nodes_per_rack > 0 && nodes_per_rack < nodes) {
        ASSERT(nodes % nodes_per_rack == 0 && rack_Bps > 0,
               "%d nodes in racks of %d, rack links of %g B/s", nodes, nodes_per_rack, rack_Bps);
        n->racks = nodes / nodes_per_rack;
        n->rack_size = nodes_per_rack;
        n->links = 2 * n->racks;
        n->rack_Bps = rack_Bps;
    }
    size_t K = 2 * (size_t)nodes + (size_t)n->links, C = 2 * (size_t)n->racks;
    size_t R = K + C + 2; /* and ring_res() */
    n->side_Bps = xcalloc(2 * (size_t)nodes, sizeof *n->side_Bps);
    n->side_cls = xcalloc(2 * (size_t)nodes, sizeof *n->side_cls);
    for (int r = 0; r < 2 * nodes; r++)
        n->side_cls[r] = 2 * rack_of(n, r % nodes) + (r >= nodes);
    for (size_t r = 0; r < 2 * (size_t)nodes; r++) n->side_Bps[r] = nic_Bps;
    n->pinned = xcalloc((size_t)nodes, 1);
    n->mu_base = xcalloc(C, sizeof *n->mu_base);
    n->special = xcalloc(C, sizeof *n->special);
    n->mu = xcalloc(C, sizeof *n->mu);
    n->fm = xcalloc(C, sizeof *n->fm);
    n->level_side = xcalloc(C, sizeof *n->level_side);
    n->list = xcalloc(K, sizeof *n->list);
    n->exl = xcalloc(K, sizeof *n->exl);
    n->base = xcalloc(K, sizeof *n->base);
    n->ref = xcalloc(K, sizeof *n->ref);
    n->touched = xcalloc(K, sizeof *n->touched);
    n->tpos = xcalloc(K, sizeof *n->tpos);
    for (size_t r = 0; r < K; r++) n->tpos[r] = -1;
    n->cnt = xcalloc(R, sizeof *n->cnt);
    n->used = xcalloc(R, sizeof *n->used);
    n->lcnt = xcalloc(R, sizeof *n->lcnt);
    n->in_level = xcalloc(R, 1);
    n->level = xcalloc(R, sizeof *n->level);
    n->ovhead = xcalloc(R, sizeof *n->ovhead);
    n->mark2 = xcalloc(R, 1);
    n->leafbuf = xcalloc((size_t)nodes, sizeof *n->leafbuf);
    for (size_t r = 0; r < R; r++) n->ovhead[r] = -1;
    n->heap_cap = (int64_t)R;
    n->heap = xcalloc(R, sizeof *n->heap);
    n->hstamp = xcalloc(K, sizeof *n->hstamp);
    n->dfin = xcalloc(K, sizeof *n->dfin);
    n->lv_cap = 16;
    n->lv_tag = xcalloc((size_t)n->lv_cap, sizeof *n->lv_tag);
    memset(n->lv_tag, 0xff, (size_t)n->lv_cap * sizeof *n->lv_tag);
    n->lv_frozen = xcalloc((size_t)n->lv_cap, sizeof *n->lv_frozen);
    n->lv_core_def = xcalloc((size_t)n->lv_cap, sizeof *n->lv_core_def);
    n->lv_core_used = xcalloc((size_t)n->lv_cap, sizeof *n->lv_core_used);
    n->lv_mu_def = xcalloc((size_t)n->lv_cap * C, sizeof *n->lv_mu_def);
    n->lv_fm = xcalloc((size_t)n->lv_cap * C, sizeof *n->lv_fm);
    return n;
}

void net_destroy(net_t **np)
{
    if (!np || !*np) return;
    net_t *n = *np;
    for (int64_t i = 0; i < n->used_slots; i++)
        if (n->f[i].seq >= 0) free(n->f[i].set);
    for (int r = 0; r < 2 * n->nodes + n->links; r++) free(n->list[r].v), free(n->exl[r].v);
    free(n->side_Bps);
    free(n->side_cls);
    free(n->pinned);
    free(n->mu_base);
    free(n->special);
    free(n->mu);
    free(n->fm);
    free(n->level_side);
    free(n->list);
    free(n->exl);
    free(n->order.v);
    free(n->multis.v);
    free(n->base);
    free(n->ref);
    free(n->touched);
    free(n->tpos);
    rates_destroy(&n->rt);
    free(n->due);
    free(n->free_slots);
    free(n->f);
    free(n->cnt);
    free(n->used);
    free(n->lcnt);
    free(n->in_level);
    free(n->level);
    free(n->fz);
    free(n->hstamp);
    free(n->hist);
    free(n->dfin);
    free(n->lv_tag);
    free(n->lv_frozen);
    free(n->lv_core_def);
    free(n->lv_core_used);
    free(n->lv_mu_def);
    free(n->lv_fm);
    free(n->ml);
    free(n->ovhead);
    free(n->ov);
    free(n->seen);
    free(n->exin);
    free(n->exin_at);
    free(n->noted);
    free(n->ml_save);
    free(n->mark2);
    free(n->leafbuf);
    free(n->heap);
    free(n->cold);
    free(n->ring);
    free(n);
    *np = NULL;
}

/* Move the network's time to now. Entities drain lazily: each keeps its remaining bytes at
 * the instant its rate last changed. */
static void advance(net_t *n, int64_t now)
{
    ASSERT(now >= n->last_ns, "network time going back: %lld < %lld", (long long)now,
           (long long)n->last_ns);
    n->last_ns = now;
}

/* ---- lists ---- */

static void rl_push(rlist_t *l, int64_t seq, int64_t slot, int other)
{
    if (l->len == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->len++] = (lent_t){seq, (int32_t)slot, other};
}

/* Drop the dead entries (marked, or, where by_seq, whose slot holds another entity now). */
static void rl_squeeze(const net_t *n, rlist_t *l, int by_seq)
{
    int64_t w = 0;
    for (int64_t a = 0; a < l->len; a++) {
        lent_t x = l->v[a];
        if (x.other == LIST_DEAD || (by_seq && n->f[x.slot].seq != x.seq)) continue;
        l->v[w++] = x;
    }
    l->len = w;
    l->dead = 0;
}

static void rl_note_dead(const net_t *n, rlist_t *l, int by_seq)
{
    /* squeezed once an eighth is dead: a NIC side's list is read by every computation that
     * saturates it, and at 1,024 nodes the dead entries were 15% of the entries read */
    l->dead++;
    if (!n->computing && 8 * l->dead > l->len + 16) rl_squeeze(n, l, by_seq);
}

/* Mark the entry of entity seq in the (seq-ordered) list dead. */
static void rl_kill(const net_t *n, rlist_t *l, int64_t seq)
{
    int64_t lo = 0, hi = l->len;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (l->v[mid].seq < seq) lo = mid + 1;
        else hi = mid;
    }
    ASSERT(lo < l->len && l->v[lo].seq == seq && l->v[lo].other != LIST_DEAD,
           "entity %lld missing from a list", (long long)seq);
    l->v[lo].other = LIST_DEAD;
    rl_note_dead(n, l, 0);
}

/* ---- what the computations start from ---- */

/* One more (d = 1) or one fewer (d = -1) entity touching kept resource r < 2N + L. */
static void res_ref(net_t *n, int r, int d)
{
    int32_t before = n->ref[r];
    n->ref[r] += d;
    ASSERT(n->ref[r] >= 0, "resource %d referenced %d times", r, n->ref[r]);
    if (before == 0 && n->ref[r] > 0) {
        n->tpos[r] = n->ntouched;
        n->touched[n->ntouched++] = r;
        if (r < 2 * n->nodes) n->special[side_class(n, r)]++;
    } else if (before > 0 && n->ref[r] == 0) {
        int p = n->tpos[r], last = n->touched[--n->ntouched];
        n->touched[p] = last;
        n->tpos[last] = p;
        n->tpos[r] = -1;
        if (r < 2 * n->nodes) n->special[side_class(n, r)]--;
    }
}

/* Enter entity i (new, or just split off) in every kept structure. */
static void register_ent(net_t *n, int64_t i)
{
    int N = n->nodes;
    const ent_t *e = &n->f[i];
    rl_push(&n->order, e->seq, i, 0);
    n->live++;
    n->core_base += e->mult;
    int lk[2], nlk = ent_links(n, e, lk);
    for (int a = 0; a < nlk; a++) {
        n->base[lk[a]] += e->mult;
        res_ref(n, lk[a], 1);
        rl_push(&n->list[lk[a]], e->seq, i, LIST_WHOLE);
    }
    if (is_single(e)) {
        /* a single crossing racks is frozen through freeze() (its rack links) */
        n->base[e->src]++;
        res_ref(n, e->src, 1);
        rl_push(&n->list[e->src], e->seq, i, nlk ? LIST_WHOLE : N + e->dst);
        n->base[N + e->dst]++;
        res_ref(n, N + e->dst, 1);
        rl_push(&n->list[N + e->dst], e->seq, i, nlk ? LIST_WHOLE : e->src);
        return;
    }
    int h = hub_res(n, e), off = leaf_side(e) * N;
    n->base[h] += e->mult;
    res_ref(n, h, 1);
    rl_push(&n->list[h], e->seq, i, LIST_WHOLE);
    if (is_fan(e)) {
        for (int k = 0; k < e->nset; k++) {
            int r = off + e->set[k];
            n->base[r]++;
            res_ref(n, r, 1);
            rl_push(&n->list[r], e->seq, i, LIST_FAN_LEAF);
        }
        return;
    }
    /* a multi does not cross its hub node's (when in its rack) or its excluded leaf-side
     * resources */
    int q = scope_of(n, e);
    if (rack_of(n, hub_node(e)) == q) {
        n->base[off + hub_node(e)]--;
        res_ref(n, off + hub_node(e), 1);
    }
    for (int k = 0; k < e->nset; k++) {
        int r = off + e->set[k];
        n->base[r]--;
        res_ref(n, r, 1);
        rl_push(&n->exl[r], e->seq, i, 0);
    }
    n->mu_base[2 * q + leaf_side(e)]++;
    rl_push(&n->multis, e->seq, i, 0);
}

/* Take finished entity i out of every kept structure. */
static void unregister_ent(net_t *n, int64_t i)
{
    int N = n->nodes;
    const ent_t *e = &n->f[i];
    rl_kill(n, &n->order, e->seq);
    n->live--;
    n->core_base -= e->mult;
    int lk[2], nlk = ent_links(n, e, lk);
    for (int a = 0; a < nlk; a++) {
        n->base[lk[a]] -= e->mult;
        res_ref(n, lk[a], -1);
        rl_kill(n, &n->list[lk[a]], e->seq);
    }
    if (is_single(e)) {
        n->base[e->src]--;
        res_ref(n, e->src, -1);
        rl_kill(n, &n->list[e->src], e->seq);
        n->base[N + e->dst]--;
        res_ref(n, N + e->dst, -1);
        rl_kill(n, &n->list[N + e->dst], e->seq);
        return;
    }
    int h = hub_res(n, e), off = leaf_side(e) * N;
    n->base[h] -= e->mult;
    res_ref(n, h, -1);
    rl_kill(n, &n->list[h], e->seq);
    if (is_fan(e)) {
        for (int k = 0; k < e->nset; k++) {
            int r = off + e->set[k];
            n->base[r]--;
            res_ref(n, r, -1);
            rl_kill(n, &n->list[r], e->seq);
        }
        return;
    }
    int q = scope_of(n, e);
    if (rack_of(n, hub_node(e)) == q) {
        n->base[off + hub_node(e)]++;
        res_ref(n, off + hub_node(e), -1);
    }
    for (int k = 0; k < e->nset; k++) {
        int r = off + e->set[k];
        n->base[r]++;
        res_ref(n, r, -1);
        n->exl[r].dead++; /* found by its seq no longer matching the slot's */
    }
    n->mu_base[2 * q + leaf_side(e)]--;
    rl_kill(n, &n->multis, e->seq);
}

/* The exclusion lists of a finished multi, squeezed where half dead (after its slot was
 * freed, so that its entries read as dead). */
static void squeeze_exl(net_t *n, const int *set, int nset, int off)
{
    for (int k = 0; k < nset; k++) {
        rlist_t *l = &n->exl[off + set[k]];
        if (2 * l->dead > l->len + 16) rl_squeeze(n, l, 1);
    }
}

/* ---- entities ---- */

static void grow_ent_scratch(net_t *n)
{
    if (n->ent_cap >= n->cap) return;
    n->ent_cap = n->cap;
    n->fz = xrealloc(n->fz, (size_t)n->ent_cap * sizeof *n->fz);
    n->ml = xrealloc(n->ml, (size_t)n->ent_cap * sizeof *n->ml);
    n->seen = xrealloc(n->seen, (size_t)n->ent_cap * sizeof *n->seen);
    n->exin = xrealloc(n->exin, (size_t)n->ent_cap * sizeof *n->exin);
    n->exin_at = xrealloc(n->exin_at, (size_t)n->ent_cap * sizeof *n->exin_at);
    n->noted = xrealloc(n->noted, (size_t)n->ent_cap * sizeof *n->noted);
    n->ml_save = xrealloc(n->ml_save, (size_t)n->ent_cap * sizeof *n->ml_save);
}

/* A slot for a new entity (its fields are the caller's to fill). */
static int64_t new_slot(net_t *n)
{
    int64_t i;
    if (n->nfree > 0) {
        i = n->free_slots[--n->nfree];
    } else {
        if (n->used_slots == n->cap) {
            n->cap = n->cap ? 2 * n->cap : 1024;
            n->f = xrealloc(n->f, (size_t)n->cap * sizeof *n->f);
            n->cold = xrealloc(n->cold, (size_t)n->cap * sizeof *n->cold);
            n->free_slots = xrealloc(n->free_slots, (size_t)n->cap * sizeof *n->free_slots);
            rates_reserve(n->rt, n->cap);
        }
        i = n->used_slots++;
    }
    ASSERT(i <= INT32_MAX, "%lld entity slots", (long long)i);
    grow_ent_scratch(n);
    n->fz[i] = 0; /* no level's tag: unfrozen */
    n->seen[i] = 0;
    n->exin[i] = 0;
    n->exin_at[i] = 0;
    return i;
}

/* A change since the last computation (an entity started, ended) alters no level below k. */
static void redo_from(net_t *n, int64_t k)
{
    if (k < n->redo) n->redo = k;
}

static void rings_expand(net_t *n);

static void push_ent(net_t *n, int64_t now, ent_t e, int64_t bytes, int64_t tag)
{
    advance(n, now);
    if (n->nring > 0 && !n->whole) rings_expand(n);
    int64_t i = new_slot(n);
    e.seq = n->next_seq++;
    rates_start(n->rt, i, (double)bytes);
    n->cold[i] = (ent_cold_t){bytes, tag};
    n->f[i] = e;
    register_ent(n, i);
    redo_from(n, 0);
    n->dirty = 1;
}

void net_add(net_t *n, int64_t now, int src, int dst, int64_t bytes, int64_t tag)
{
    ASSERT(src >= 0 && src < n->nodes && dst >= 0 && dst < n->nodes && src != dst,
           "flow %d -> %d", src, dst);
    ASSERT(bytes > 0, "empty flow");
    push_ent(n, now, (ent_t){.src = src, .dst = dst, .mult = 1}, bytes, tag);
}

/* A broadcast or gather is one multi per rack its leaves are in (every flow of a rack's
 * part crosses the same rack links), in rack order. */
int net_add_bcast(net_t *n, int64_t now, int src, int64_t bytes, int64_t tag)
{
    ASSERT(src >= 0 && src < n->nodes && n->nodes >= 2, "broadcast from %d of %d", src,
           n->nodes);
    ASSERT(bytes > 0, "empty broadcast");
    int parts = 0;
    for (int q = 0; q < n->racks; q++) {
        int mult = n->rack_size - (rack_of(n, src) == q);
        if (mult == 0) continue;
        push_ent(n, now, (ent_t){.src = src, .dst = SCOPE(q), .mult = mult}, bytes, tag);
        parts++;
    }
    return parts;
}

int net_add_gather(net_t *n, int64_t now, int dst, int64_t bytes, int64_t tag, const int *ex,
                   int nex)
{
    ASSERT(dst >= 0 && dst < n->nodes && nex >= 0 && nex <= n->nodes - 2,
           "gather to %d of %d excluding %d", dst, n->nodes, nex);
    ASSERT(bytes > 0, "empty gather");
    for (int k = 0; k < nex; k++)
        ASSERT(ex[k] >= 0 && ex[k] < n->nodes && ex[k] != dst, "gather excludes %d", ex[k]);
    int parts = 0;
    for (int q = 0; q < n->racks; q++) {
        int nq = 0;
        for (int k = 0; k < nex; k++) nq += rack_of(n, ex[k]) == q;
        int mult = n->rack_size - (rack_of(n, dst) == q) - nq;
        if (mult <= 0) continue;
        int *cp = NULL;
        if (nq > 0) {
            cp = xcalloc((size_t)ex_room(nq), sizeof *cp);
            nq = 0;
            for (int k = 0; k < nex; k++)
                if (rack_of(n, ex[k]) == q) cp[nq++] = ex[k];
        }
        push_ent(n, now,
                 (ent_t){.src = SCOPE(q), .dst = dst, .mult = mult, .nset = nq, .set = cp},
                 bytes, tag);
        parts++;
    }
    ASSERT(parts > 0, "gather to %d from no node", dst);
    return parts;
}

void net_set_node_nic(net_t *n, int node, double nic_Bps)
{
    ASSERT(node >= 0 && node < n->nodes && nic_Bps > 0, "NIC of node %d at %g B/s", node,
           nic_Bps);
    ASSERT(n->live == 0 && n->next_seq == 0, "NIC rate set after flows started");
    int N = n->nodes, pin = nic_Bps != n->nic_Bps;
    n->side_Bps[node] = n->side_Bps[N + node] = nic_Bps;
    if (pin != n->pinned[node]) {
        res_ref(n, node, pin ? 1 : -1);
        res_ref(n, N + node, pin ? 1 : -1);
        n->pinned[node] = (char)pin;
        n->npinned += pin ? 1 : -1;
    }
}

void net_set_whole(net_t *n, int whole)
{
    n->whole = whole != 0;
    /* ring steps kept whole beside other entities are the grouped model's alone */
    if (!n->whole && n->nring > 0 && n->live > 0) rings_expand(n);
    redo_from(n, 0);
}

int net_dirty(const net_t *n) { return n->dirty; }
int64_t net_next_ns(const net_t *n) { return n->next_ns; }
int64_t net_active(const net_t *n) { return n->live + n->nring; }
int64_t net_recomputes(const net_t *n) { return n->recomputes; }
int64_t net_restarts(const net_t *n) { return n->restarts; }
void net_set_from_scratch(net_t *n, int on) { n->from_scratch = on != 0; }
void net_set_fast_top(net_t *n, int on) { n->no_fast_top = on == 0; }
int64_t net_fast_tops(const net_t *n) { return n->fast_tops; }

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
static inline double share_of(const net_t *n, int r)
{
    int N = n->nodes, K = 2 * N + n->links;
    double rem;
    int64_t c;
    /* ring steps kept whole beside other entities (0 otherwise: x - 0 is x, bit for bit) */
    double ru = n->ring_used;
    int64_t rc = n->ring_cnt;
    if (r < 2 * N) {
        int cls = side_class(n, r);
        rem = n->side_Bps[r] - n->fm[cls] - n->used[r] - ru;
        c = n->mu[cls] + n->cnt[r] + rc;
    } else if (r < K) {
        rem = n->rack_Bps - n->used[r] - ru;
        c = n->cnt[r] + rc;
    } else if (r < K + 2 * n->racks) {
        int cls = r - K;
        rem = n->nic_Bps - n->fm[cls] - ru;
        c = n->mu[cls] + rc;
    } else if (r == K + 2 * n->racks) {
        rem = n->core_Bps - n->core_used;
        c = n->core_cnt;
    } else {
        /* the least share of a NIC side or rack link carrying ring steps alone */
        if (rc <= 0) return INFINITY;
        double x = (n->nic_Bps - ru) / (double)rc;
        if (n->racks > 1 && (n->rack_Bps - ru) / (double)rc < x) x = (n->rack_Bps - ru) / (double)rc;
        return x > 0 ? x : 0;
    }
    if (c <= 0) return INFINITY;
    return (rem > 0 ? rem : 0) / (double)c;
}

/* Entity j froze in the current chain of levels (at a level kept from an earlier computation
 * or in this one). */
static inline int is_frozen(const net_t *n, int64_t j)
{
    return n->lv_tag[n->fz[j] & LV_MASK] == n->fz[j];
}

static inline void mark_frozen(net_t *n, int64_t j) { n->fz[j] = n->cur_tag; }

/* Kept resource r's terms are about to change at this level: log them the first time. */
static inline void hist(net_t *n, int r)
{
    if (n->hstamp[r] == n->cur_tag) return;
    n->hstamp[r] = n->cur_tag;
    if (n->nhist == n->hist_cap) {
        n->hist_cap = n->hist_cap ? 2 * n->hist_cap : 1024;
        n->hist = xrealloc(n->hist, (size_t)n->hist_cap * sizeof *n->hist);
    }
    n->hist[n->nhist++] = (struct hist){n->base[r] - n->cnt[r], n->used[r], r, n->cur_lv};
}

/* Entity i froze at the current level: its rate is the level's (rates_apply gives it at the
 * end of the computation, as one change per level). Noted at the level's end (each entity
 * freezes once per computation, so the buffer holds at most every slot). */
static inline void note_level(net_t *n, int64_t i) { n->noted[n->nnoted++] = i; }

/* freeze()'s terms of the rack links entity e crosses. */
static void freeze_links(net_t *n, const ent_t *e, double x)
{
    int lk[2], nlk = ent_links(n, e, lk);
    for (int a = 0; a < nlk; a++) {
        hist(n, lk[a]);
        n->cnt[lk[a]] -= e->mult;
        n->used[lk[a]] += x * e->mult;
    }
}

/* cnt += dc and used += dx at the leaf-side resources off + set[0..k) (a fan's leaves, a
 * multi's excluded nodes), logged first. In locals: a store through cnt could otherwise be
 * any int64 field of n, reloaded at every leaf. (used - x and used + (-x) are one IEEE
 * operation.) */
static void leaves_add(net_t *n, int off, const int *set, int k, int64_t dc, double dx)
{
    int64_t *cnt = n->cnt, tag = n->cur_tag;
    const int64_t *hstamp = n->hstamp;
    double *used = n->used;
    for (int a = 0; a < k; a++) {
        int r = off + set[a];
        if (hstamp[r] != tag) hist(n, r);
        cnt[r] += dc;
        used[r] += dx;
    }
}

static void freeze(net_t *n, int64_t i, double x)
{
    int N = n->nodes;
    ent_t *e = &n->f[i];
    mark_frozen(n, i);
    n->left--;
    note_level(n, i);
    if (n->fast) return; /* the top: no term is read again */
    if (n->racks > 1) freeze_links(n, e, x);
    if (is_single(e)) {
        hist(n, e->src);
        hist(n, N + e->dst);
        n->cnt[e->src]--;
        n->used[e->src] += x;
        n->cnt[N + e->dst]--;
        n->used[N + e->dst] += x;
    } else if (is_fan(e)) {
        int off = leaf_side(e) * N, h = hub_res(n, e);
        hist(n, h);
        n->cnt[h] -= e->mult;
        n->used[h] += x * e->mult;
        leaves_add(n, off, e->set, e->nset, -1, x);
    } else {
        /* leaves the global terms; the leaf-side resources it does not cross (its hub node's,
         * those excluded) never counted it */
        int side = leaf_side(e), off = side * N, h = hub_res(n, e), cls = side, hub_in = 1;
        if (n->racks > 1) {
            int q = scope_of(n, e);
            cls = 2 * q + side;
            hub_in = rack_of(n, hub_node(e)) == q;
        }
        hist(n, h);
        n->cnt[h] -= e->mult;
        n->used[h] += x * e->mult;
        n->mu[cls]--;
        n->fm[cls] += x;
        if (hub_in) {
            hist(n, off + hub_node(e));
            n->cnt[off + hub_node(e)]++;
            n->used[off + hub_node(e)] -= x;
        }
        leaves_add(n, off, e->set, e->nset, 1, -x);
    }
    /* the core's terms matter only where it is a resource (a dependency chain through
     * every freeze otherwise) */
    if (n->core_Bps > 0) {
        n->core_cnt -= e->mult;
        n->core_used += x * e->mult;
    }
}

static void fan_level(net_t *n, int64_t j, double x);

/* true when a resource every flow of multi or fan e crosses (its hub, its rack links) is in
 * the level. */
static inline int whole_in_level(const net_t *n, const ent_t *e)
{
    if (n->racks <= 1) return n->in_level[hub_res(n, e)];
    int lk[2], nlk = ent_links(n, e, lk);
    return n->in_level[hub_res(n, e)] || (nlk && (n->in_level[lk[0]] || n->in_level[lk[1]]));
}

/* Freeze every unfrozen entity of resource r's list at x (a fan listed at one of its leaves:
 * the flows of it that the level holds). The same updates as freeze() in the same order, with
 * r's own terms kept in registers: every single flow of the list updates them, a chain
 * through memory otherwise. The list is read by index: a split made on the way may move it.
 * `core` (whether the core is a resource) and `fast` (the level is done fast: entities frozen
 * and noted, no term changed; it stops where fast_failed is set) are constants of each copy
 * (freeze_list), so the loop over the list carries no test of them. */
static inline __attribute__((always_inline)) void freeze_list_as(net_t *n, int r, double x,
                                                                 const int core, const int fast)
{
    if (!fast) hist(n, r);
    double ur = n->used[r];
    const rlist_t *L = &n->list[r];
    /* the arrays in locals: the stores through cnt and used would otherwise make the
     * compiler reload every field of n at each entry */
    int64_t *fz = n->fz, *cnt = n->cnt, *noted = n->noted;
    const int64_t *lv_tag = n->lv_tag, *hstamp = n->hstamp, tag = n->cur_tag;
    double *used = n->used;
    /* the single flows frozen here are counted by their notes: since `mark` (the notes then,
     * with r's count cr0), r's count is cr0 less the notes made since */
    int64_t nn = n->nnoted, mark = nn, cr0 = cnt[r], inline_frozen = 0;
    const lent_t *v = L->v;
    for (int64_t a = 0, len = n->lcnt[r]; a < len; a++) {
        lent_t l = v[a];
        int64_t j = l.slot;
        if (l.other == LIST_DEAD) continue;
        int64_t t = fz[j];
        if (lv_tag[t & LV_MASK] == t) continue; /* frozen (is_frozen) */
        if (l.other < 0) {
            if (!fast) used[r] = ur, cnt[r] = cr0 - (nn - mark);
            inline_frozen += nn - mark;
            n->nnoted = nn;
            if (l.other == LIST_FAN_LEAF) fan_level(n, j, x);
            else freeze(n, j, x);
            if (fast && n->fast_failed) return; /* the level is undone */
            /* a split may have grown the entity arrays and moved the list */
            fz = n->fz, noted = n->noted, nn = n->nnoted, v = L->v;
            mark = nn;
            ur = used[r];
            cr0 = cnt[r];
            continue;
        }
        fz[j] = tag; /* mark_frozen */
        noted[nn++] = j; /* note_level */
        if (fast) continue;
        int other = l.other;
        if (hstamp[other] != tag) hist(n, other);
        ur += x;
        cnt[other]--;
        used[other] += x;
        if (core) {
            n->core_cnt -= 1;
            n->core_used += x;
        }
    }
    n->nnoted = nn;
    if (!fast) used[r] = ur, cnt[r] = cr0 - (nn - mark);
    n->left -= inline_frozen + (nn - mark);
}

static void freeze_list(net_t *n, int r, double x)
{
    if (n->fast) freeze_list_as(n, r, x, 0, 1);
    else if (n->core_Bps > 0) freeze_list_as(n, r, x, 1, 0);
    else freeze_list_as(n, r, x, 0, 0);
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
    int64_t j = new_slot(n);
    ent_t *g = &n->f[i];
    ASSERT(k >= 1 && k < g->mult, "splitting %d of the %d flows at node %d", k, g->mult,
           hub_node(g));
    int off = leaf_side(g) * N, hres = hub_res(n, g);
    int hub = hub_node(g), sends = hub_sends(g);
    /* the same state as i's: remaining bytes, rate (until this computation sets it) */
    ent_t e = {.mult = k, .seq = n->next_seq++};
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
    n->f[j] = e;
    n->cold[j] = n->cold[i];
    /* the new entity enters first, so no resource is left untouched on the way */
    register_ent(n, j);
    rates_copy(n->rt, j, i);
    if (is_fan(g)) {
        for (int a = 0; a < k; a++) n->mark2[off + leaves[a]] = 1;
        int w = 0;
        for (int a = 0; a < g->nset; a++) {
            int r = off + g->set[a];
            if (!n->mark2[r]) {
                g->set[w++] = g->set[a];
                continue;
            }
            n->base[r]--;
            res_ref(n, r, -1);
            rl_kill(n, &n->list[r], g->seq);
        }
        for (int a = 0; a < k; a++) n->mark2[off + leaves[a]] = 0;
        ASSERT(w == g->nset - k, "fan at node %d split at nodes it does not reach", hub_node(g));
        g->nset = w;
    } else {
        set_reserve(&g->set, g->nset, k);
        memcpy(g->set + g->nset, leaves, (size_t)k * sizeof *leaves);
        g->nset += k;
        for (int a = 0; a < k; a++) {
            int r = off + leaves[a];
            n->base[r]--;
            res_ref(n, r, 1);
            rl_push(&n->exl[r], g->seq, i, 0);
        }
    }
    int lk[2], nlk = ent_links(n, g, lk); /* the new entity's too */
    for (int a = 0; a < nlk; a++) n->base[lk[a]] -= k;
    g->mult -= k;
    n->base[hres] -= k;
    n->core_base -= k;
    n->left++;
    if (rising) {
        ov_put(n, hres, j);
        for (int a = 0; a < nlk; a++) ov_put(n, lk[a], j);
        for (int a = 0; a < k; a++) ov_put(n, off + leaves[a], j);
    }
    return j;
}

/* Fan j meets the level: it freezes whole at x when its hub or all its leaves are in the
 * level, else its flows at the level's leaves freeze, as one fan, and the rest keeps
 * rising. Met once per level (it is listed at each of its leaves). */
static void fan_level(net_t *n, int64_t j, double x)
{
    if (is_frozen(n, j) || n->seen[j] == n->levels) return;
    n->seen[j] = n->levels;
    const ent_t *e = &n->f[j];
    if (whole_in_level(n, e)) {
        freeze(n, j, x);
        return;
    }
    int off = leaf_side(e) * n->nodes, k = 0;
    for (int a = 0; a < e->nset; a++)
        if (n->in_level[off + e->set[a]]) n->leafbuf[k++] = e->set[a];
    if (k == e->nset) freeze(n, j, x);
    else if (n->fast) n->fast_failed = 1; /* part of it keeps rising: not the top */
    else if (k > 0) freeze(n, split_off(n, j, n->leafbuf, k, 0), x);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Count in exin the excluded resources of the live multis at the level's NIC sides. */
static void level_exclusions(net_t *n, int nl)
{
    int N = n->nodes;
    for (int k = 0; k < nl; k++) {
        int r = n->level[k];
        if (r >= 2 * N) continue;
        const rlist_t *l = &n->exl[r];
        for (int64_t a = 0; a < l->len; a++) {
            lent_t x = l->v[a];
            if (n->f[x.slot].seq != x.seq) continue;
            if (n->exin_at[x.slot] != n->levels) {
                n->exin_at[x.slot] = n->levels;
                n->exin[x.slot] = 0;
            }
            n->exin[x.slot]++;
        }
    }
}

/* Multi i meets the level partly (freeze_level): split it. rest_rises: its flows at the
 * special resources outside the level leave it as one fan, still rising, and the multi
 * freezes; else its flows at the level's resources leave it as one fan, frozen, and the
 * multi keeps rising. Returns whether the multi froze. */
static int split_multi(net_t *n, int64_t i, int nl, double x, int rest_rises)
{
    const ent_t *g = &n->f[i];
    int N = n->nodes, S = n->rack_size, off = leaf_side(g) * N, hub = hub_node(g);
    int q = scope_of(n, g), lo = off + q * S, hi = lo + S, m = 0;
    /* the leaf-side resources it does not cross */
    n->mark2[off + hub] = 1;
    for (int e = 0; e < g->nset; e++) n->mark2[off + g->set[e]] = 1;
    if (rest_rises) {
        for (int t = 0; t < n->ntouched; t++) {
            int r = n->touched[t];
            if (r >= lo && r < hi && !n->in_level[r] && !n->mark2[r]) n->leafbuf[m++] = r - off;
        }
        qsort(n->leafbuf, (size_t)m, sizeof *n->leafbuf, cmp_int); /* a fixed order */
    } else {
        for (int t = 0; t < nl; t++) {
            int r = n->level[t];
            if (r >= lo && r < hi && !n->mark2[r]) n->leafbuf[m++] = r - off;
        }
    }
    n->mark2[off + hub] = 0;
    for (int e = 0; e < g->nset; e++) n->mark2[off + g->set[e]] = 0;
    ASSERT(m > 0, "multi at node %d: nothing to split", hub);
    int64_t j = split_off(n, i, n->leafbuf, m, rest_rises);
    freeze(n, rest_rises ? i : j, x);
    return rest_rises;
}

/* Freeze every flow crossing a resource of the level (level[0..nl)) at x. A multi that also
 * crosses leaf-side resources outside the level keeps those flows rising: either its flows
 * into the level's resources leave it as one fan, frozen, or (when its plain flows freeze,
 * or most of its flows are in the level) its flows at the other special resources of its
 * leaf side leave it as one fan, still rising, and the multi freezes. Done fast (n->fast),
 * it stops at the first entity that shows the level is not the top and returns 0, with the
 * entities it froze marked with the level's tag and nothing noted (freeze_top undoes it);
 * returns 1 otherwise. */
static int freeze_level(net_t *n, int nl, double x)
{
    int N = n->nodes, K = 2 * N + n->links, core = core_res(n), S = n->rack_size;
    n->levels++;
    int64_t *level_side = n->level_side;
    for (int k = 0; k < nl; k++) {
        n->in_level[n->level[k]] = 1;
        if (n->level[k] < 2 * N) level_side[side_class(n, n->level[k])]++;
    }
    if (n->in_level[core]) {
        /* every entity, in creation order (those split off on the way included) */
        for (int64_t a = 0; a < n->order.len; a++) {
            lent_t o = n->order.v[a];
            if (o.other != LIST_DEAD && !is_frozen(n, o.slot)) freeze(n, o.slot, x);
        }
        n->nml = 0;
    }
    for (int k = 0; k < nl; k++) {
        int r = n->level[k];
        if (r >= K) continue;
        freeze_list(n, r, x);
        if (n->fast_failed) goto out;
        for (int64_t a = n->ovhead[r]; a >= 0; a = n->ov[a].next) {
            int64_t j = n->ov[a].j;
            if (is_frozen(n, j)) continue;
            if (is_fan(&n->f[j])) fan_level(n, j, x);
            else freeze(n, j, x);
            if (n->fast_failed) goto out;
        }
    }
    /* a multi's excluded resources in the level (a split made in this computation only
     * excludes a resource that saturated with it, or the multi froze) */
    int64_t w = 0, nml = n->nml;
    if (nml > 0) level_exclusions(n, nl); /* only the unfrozen multis read them */
    for (int64_t k = 0; k < nml; k++) {
        int64_t i = n->ml[k];
        if (is_frozen(n, i)) continue;
        const ent_t *g = &n->f[i];
        int side = leaf_side(g), off = side * N, hub = hub_node(g), q = scope_of(n, g);
        int cls = 2 * q + side, hub_in = rack_of(n, hub) == q;
        if (whole_in_level(n, g)) {
            freeze(n, i, x);
            continue;
        }
        int plain_cross = n->special[cls] < S, plain_in = n->in_level[class_res(n, cls)];
        /* special leaf-side resources of its rack it crosses: all touched ones but its hub
         * node's and those excluded */
        int64_t crossed = n->special[cls] - hub_in - g->nset;
        int64_t exin = n->exin_at[i] == n->levels ? n->exin[i] : 0;
        int64_t crossed_in = level_side[cls] - (hub_in && n->in_level[off + hub]) - exin;
        if (crossed_in == 0 && !(plain_cross && plain_in)) {
            n->ml[w++] = i; /* untouched by this level */
            if (n->fast) {
                n->fast_failed = 1; /* it keeps rising: not the top */
                goto out;
            }
            continue;
        }
        if (n->whole || (crossed_in == crossed && (plain_in || !plain_cross))) {
            freeze(n, i, x); /* all its flows saturate here, or it moves as one */
            continue;
        }
        if (n->fast) {
            n->fast_failed = 1; /* it splits: not the top */
            goto out;
        }
        int rest_rises = plain_in || (!plain_cross && 2 * crossed_in >= crossed);
        if (!split_multi(n, i, nl, x, rest_rises)) n->ml[w++] = i;
    }
    n->nml = w;
    if (n->fast && n->left > 0) n->fast_failed = 1; /* an entity keeps rising */
out:
    if (!n->fast_failed) rates_note_many(n->rt, n->noted, n->nnoted, n->cur_lv);
    n->nnoted = 0;
    for (int k = 0; k < nl; k++) {
        n->in_level[n->level[k]] = 0;
        if (n->level[k] < 2 * N) level_side[side_class(n, n->level[k])] = 0;
    }
    return !n->fast_failed;
}

/* Level L of the chain starts: a new epoch, and the global terms as they stand. */
static void level_begin(net_t *n, double share)
{
    int64_t L = n->nlv, C = 2 * n->racks;
    if (L == n->lv_cap) {
        int64_t cap = 2 * n->lv_cap;
        n->lv_tag = xrealloc(n->lv_tag, (size_t)cap * sizeof *n->lv_tag);
        memset(n->lv_tag + n->lv_cap, 0xff, (size_t)(cap - n->lv_cap) * sizeof *n->lv_tag);
        n->lv_frozen = xrealloc(n->lv_frozen, (size_t)cap * sizeof *n->lv_frozen);
        n->lv_core_def = xrealloc(n->lv_core_def, (size_t)cap * sizeof *n->lv_core_def);
        n->lv_core_used = xrealloc(n->lv_core_used, (size_t)cap * sizeof *n->lv_core_used);
        n->lv_mu_def = xrealloc(n->lv_mu_def, (size_t)(cap * C) * sizeof *n->lv_mu_def);
        n->lv_fm = xrealloc(n->lv_fm, (size_t)(cap * C) * sizeof *n->lv_fm);
        n->lv_cap = cap;
    }
    ASSERT(L <= LV_MASK, "%lld levels", (long long)L);
    n->lv_tag[L] = n->cur_tag = ++n->epoch << 24 | L;
    n->cur_lv = (int32_t)L;
    n->lv_frozen[L] = n->live - n->left;
    n->lv_core_def[L] = n->core_base - n->core_cnt;
    n->lv_core_used[L] = n->core_used;
    for (int64_t c = 0; c < C; c++) {
        n->lv_mu_def[L * C + c] = n->mu_base[c] - n->mu[c];
        n->lv_fm[L * C + c] = n->fm[c];
    }
    n->nlv = L + 1;
    rates_level(n->rt, (int32_t)L, share);
}

/* Where the computation starts: level k of the chain, with every level below it as it was.
 * Every entity that froze below k is still there, unchanged (a change since starts at or
 * above its level), so what those entities take of each resource (used, and base - cnt) is
 * what the level logged; the rest of cnt is the current base. k = 0: from scratch. Returns
 * the count of touched resources with a finite share, placed in heap[0..) (not yet a heap):
 * one pass over the touched resources sets each one's terms and reads its share. */
static int64_t start_at_level(net_t *n, int64_t k)
{
    int nt = n->ntouched, C = 2 * n->racks;
    for (int64_t L = k; L < n->nlv; L++) n->lv_tag[L] = -1;
    if (k == 0) {
        for (int c = 0; c < C; c++) {
            n->mu[c] = n->mu_base[c];
            n->fm[c] = 0;
        }
        /* ring steps beside other entities (grouped model): each crosses the core N times */
        n->ring_cnt = n->whole && n->live > 0 ? n->nring : 0;
        n->ring_used = 0;
        n->core_cnt = n->core_base + (int64_t)n->nodes * n->ring_cnt;
        n->core_used = 0;
        n->left = n->live;
        n->nhist = 0;
    } else {
        /* a resource no level from k on changed ended the last computation as it stood at k;
         * the others as first logged at or above k (the log is in level order). Its deficit
         * goes through dfin, which the computation's end sets again for every touched
         * resource. */
        while (n->nhist > 0 && n->hist[n->nhist - 1].lv >= k) {
            struct hist h = n->hist[--n->nhist];
            n->dfin[h.r] = h.def;
            n->used[h.r] = h.used;
        }
        for (int c = 0; c < C; c++) {
            n->mu[c] = n->mu_base[c] - n->lv_mu_def[k * C + c];
            n->fm[c] = n->lv_fm[k * C + c];
        }
        n->core_cnt = n->core_base - n->lv_core_def[k];
        n->core_used = n->lv_core_used[k];
        n->left = n->live - n->lv_frozen[k];
    }
    n->nlv = k;
    int64_t hn = 0;
    for (int a = 0; a < nt; a++) {
        int r = n->touched[a];
        if (k == 0) {
            n->cnt[r] = n->base[r];
            n->used[r] = 0;
        } else {
            n->cnt[r] = n->base[r] - n->dfin[r];
        }
        n->lcnt[r] = n->list[r].len;
        n->ovhead[r] = -1;
        double sh = share_of(n, r);
        if (sh < INFINITY) n->heap[hn++] = (rheap_t){sh, r};
    }
    n->nml = 0;
    for (int64_t a = 0; a < n->multis.len; a++) {
        lent_t m = n->multis.v[a];
        if (m.other != LIST_DEAD && !is_frozen(n, m.slot)) n->ml[n->nml++] = m.slot;
    }
    n->nov = 0;
    return hn;
}

/* ---- Ring steps ----
 * One step of a ring all-reduce started by every node at one instant with the same bytes is
 * N flows v -> v + 1 mod N. While nothing else is in the network they are all alike: every
 * NIC side carries one flow of each live ring step (k of them), every rack link one, the core
 * N each; so the progressive filling over the flows freezes them all at its first level, the
 * smallest of the NIC sides' nic/k, the rack links' rack_Bps/k and the core's
 * core_Bps/(N k), unless a rack link saturates alone below the NIC sides (then the flows
 * crossing racks get less). Such a step is kept as one entity of weight N, outside the kept
 * structures, and the computation is those three shares: O(steps), not O(N x steps). The
 * first entity of another kind, a rack link below the NIC sides, or a NIC of its own rate
 * turns every ring step into its N single flows (same tag, bytes left and group), and the
 * model goes on per flow.
 * The grouped model (net_set_whole) keeps ring steps whole beside other entities too, as it
 * keeps broadcasts whole: a step's flows move at one rate, the smallest fair share among the
 * resources they cross, and since a step crosses every NIC side and rack link (and the core
 * N times), that is the first level of every computation. Its load is a global term of each
 * resource's share (ring_cnt unfrozen steps, ring_used taken by the frozen), plus one
 * resource for the NIC sides and rack links no other entity crosses (ring_res); a ring
 * change redoes the computation from its first level, so a kept level finds the steps frozen
 * as they were. Not exact: a step beside a PS shard's gather moves at the shard's share. */

int net_ring_whole(const net_t *n) { return n->npinned == 0 && (n->live == 0 || n->whole); }

int net_add_ring(net_t *n, int64_t now, int64_t bytes, int64_t tag)
{
    int N = n->nodes;
    ASSERT(N >= 2 && bytes > 0, "ring step of %lld bytes over %d nodes", (long long)bytes, N);
    if (!net_ring_whole(n)) {
        for (int v = 0; v < N; v++) net_add(n, now, v, (v + 1) % N, bytes, tag);
        return 0;
    }
    advance(n, now);
    int64_t i = new_slot(n);
    rates_start(n->rt, i, (double)bytes);
    n->cold[i] = (ent_cold_t){bytes, tag};
    n->f[i] = (ent_t){.src = RING, .dst = RING, .mult = N, .seq = n->next_seq++};
    if (n->nring == n->ring_cap) {
        n->ring_cap = n->ring_cap ? 2 * n->ring_cap : 16;
        n->ring = xrealloc(n->ring, (size_t)n->ring_cap * sizeof *n->ring);
    }
    n->ring[n->nring++] = i;
    redo_from(n, 0);
    n->dirty = 1;
    return 1;
}

/* Every ring step into its N single flows, in ring order, each with the step's bytes left
 * and in its group (so with its rate and finish until the next computation). */
static void rings_expand(net_t *n)
{
    int N = n->nodes;
    for (int64_t a = 0; a < n->nring; a++) {
        int64_t i = n->ring[a];
        for (int v = 0; v < N; v++) {
            int64_t j = new_slot(n);
            n->f[j] = (ent_t){.src = v, .dst = (v + 1) % N, .mult = 1, .seq = n->next_seq++};
            n->cold[j] = n->cold[i];
            register_ent(n, j);
            rates_copy(n->rt, j, i);
        }
        rates_drop(n->rt, i);
        n->f[i].seq = -1;
        n->free_slots[n->nfree++] = i;
    }
    n->nring = 0;
    redo_from(n, 0);
    n->dirty = 1;
}

/* The computation when only ring steps live (the first level of the per-flow filling);
 * false when they would not all freeze there (they are expanded then). */
static int rings_recompute(net_t *n, int64_t now)
{
    double k = (double)n->nring, x = n->nic_Bps / k, nic = x;
    if (n->racks > 1 && n->rack_Bps / k < x) x = n->rack_Bps / k;
    double core = n->core_Bps > 0 ? n->core_Bps / ((double)n->nodes * k) : INFINITY;
    if (core < x) x = core;
    double lim = x * (1 + 1e-12);
    /* the grouped model moves every flow at the least share, the rack links' too */
    if (!n->whole && !(nic <= lim || core <= lim)) return 0;
    /* no kept level: the next computation starts from scratch (and with no other entity
     * there is nothing else to reset; start_at_level costs O(racks)) */
    if (n->nlv > 0) start_at_level(n, 0);
    rates_level(n->rt, 0, x);
    for (int64_t a = 0; a < n->nring; a++) rates_note(n->rt, n->ring[a], 0);
    rates_apply(n->rt, now);
    n->next_ns = rates_next(n->rt);
    n->redo = INT64_MAX;
    return 1;
}

/* The grouped model's ring steps freeze at the first level, at x (see "Ring steps"). */
static void rings_freeze(net_t *n, double x)
{
    n->ring_used = x * (double)n->ring_cnt;
    if (n->core_Bps > 0) {
        int64_t flows = (int64_t)n->nodes * n->ring_cnt;
        n->core_cnt -= flows;
        n->core_used += x * (double)flows;
    }
    for (int64_t a = 0; a < n->nring; a++) note_level(n, n->ring[a]);
    n->ring_cnt = 0;
}

/* The current level, taken to be the computation's top: done fast (see struct net's
 * `fast`), and where it is not the top, undone and done in full. Undoing it: the level
 * begins again (a new tag, so the entities the fast pass froze read unfrozen), with the
 * count of unfrozen entities and the unfrozen multis as they were; the fast pass changed
 * no term, split nothing and noted nothing. */
static void freeze_top(net_t *n, int nl, double x)
{
    int64_t left = n->left, nml = n->nml;
    memcpy(n->ml_save, n->ml, (size_t)nml * sizeof *n->ml);
    n->fast = 1;
    n->fast_failed = 0;
    int top = freeze_level(n, nl, x);
    n->fast = 0;
    n->fast_failed = 0;
    n->fast_tops += top;
    if (top) return;
    n->left = left;
    n->nml = nml;
    memcpy(n->ml, n->ml_save, (size_t)nml * sizeof *n->ml);
    n->nlv = n->cur_lv;
    level_begin(n, x);
    freeze_level(n, nl, x);
}

void net_recompute(net_t *n, int64_t now)
{
    advance(n, now);
    n->recomputes++;
    if (n->nring > 0 && n->live == 0 && rings_recompute(n, now)) {
        n->dirty = 0;
        return;
    }
    if (n->nring > 0 && !n->whole) rings_expand(n);
    n->dirty = 0;
    n->next_ns = INT64_MAX;
    if (n->live == 0) {
        /* nothing to rate; drop the kept levels, once (it costs O(racks)) */
        if (n->nlv > 0) start_at_level(n, 0);
        n->redo = INT64_MAX;
        return;
    }
    n->computing = 1;
    /* Levels below the lowest one a change touched stand: a flow that ended froze at its
     * level, so no resource it crossed saturated below it, and without it those resources
     * saturate no sooner; an arrival may lower any level (redo 0). */
    int64_t k = n->redo < n->nlv && !n->from_scratch ? n->redo : 0;
    n->restarts += k > 0;
    /* Progressive filling: the resource with the smallest fair share freezes its flows at
     * that share. Shares only grow as flows freeze, so stale heap entries are re-pushed. */
    int64_t hn = start_at_level(n, k);
    n->redo = INT64_MAX;
    int nt = n->ntouched;
    heap_build(n, hn);
    int core = core_res(n);
    for (int c = 0; c < 2 * n->racks; c++) {
        n->in_level[class_res(n, c)] = 0;
        if (n->mu[c] > 0 && n->special[c] < n->rack_size)
            heap_push(n, &hn, share_of(n, class_res(n, c)), class_res(n, c));
    }
    n->in_level[core] = 0;
    if (n->core_Bps > 0) heap_push(n, &hn, share_of(n, core), core);
    n->in_level[ring_res(n)] = 0;
    if (n->ring_cnt > 0) heap_push(n, &hn, share_of(n, ring_res(n)), ring_res(n));
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
        level_begin(n, share);
        if (n->ring_cnt > 0) rings_freeze(n, share);
        if (n->cur_lv == n->last_top && !n->whole && !n->no_fast_top) freeze_top(n, nl, share);
        else freeze_level(n, nl, share);
    }
    n->last_top = n->nlv - 1;
    n->computing = 0;
    ASSERT(n->left == 0, "%lld entities got no rate", (long long)n->left);
    for (int a = 0; a < nt; a++) {
        int r = n->touched[a];
        n->dfin[r] = n->base[r] - n->cnt[r];
    }
    rates_apply(n->rt, now);
    n->next_ns = rates_next(n->rt);
}

static int cmp_seq(const void *a, const void *b)
{
    int64_t x = ((const due_t *)a)->seq, y = ((const due_t *)b)->seq;
    return (x > y) - (x < y);
}

int net_finish(net_t *n, int64_t now, net_finish_fn fn, void *arg)
{
    advance(n, now);
    /* the entities due, taken off the heap, then called back in creation order */
    int64_t done = 0;
    for (int64_t i; (i = rates_due(n->rt, now)) >= 0;) {
        if (done == n->due_cap) {
            n->due_cap = n->due_cap ? 2 * n->due_cap : 16;
            n->due = xrealloc(n->due, (size_t)n->due_cap * sizeof *n->due);
        }
        n->due[done++] = (due_t){n->f[i].seq, i};
    }
    due_t *due = n->due;
    if (done > 1) qsort(due, (size_t)done, sizeof *due, cmp_seq);
    for (int64_t k = 0; k < done; k++) {
        int64_t i = due[k].slot;
        ent_t *e = &n->f[i];
        const ent_cold_t *c = &n->cold[i];
        if (is_ring(e)) {
            fn(arg, c->tag, NET_RING, NET_RING, c->bytes, NULL, 0);
            e = &n->f[i];
            int64_t w = 0;
            for (int64_t a = 0; a < n->nring; a++)
                if (n->ring[a] != i) n->ring[w++] = n->ring[a];
            n->nring = w;
            redo_from(n, 0);
            e->seq = -1;
            n->free_slots[n->nfree++] = i;
            continue;
        }
        if (is_fan(e)) {
            /* its flows finish as the single flows they were split off as */
            for (int a = 0; a < e->nset; a++) {
                int leaf = e->set[a];
                fn(arg, c->tag, hub_sends(e) ? e->src : leaf, hub_sends(e) ? leaf : e->dst,
                   c->bytes, NULL, 0);
            }
        } else if (is_single(e)) {
            fn(arg, c->tag, e->src, e->dst, c->bytes, NULL, 0);
        } else {
            /* a multi: every node (of its rack) but the hub and those excluded */
            int leaves = n->racks > 1 ? NET_RACK(scope_of(n, e)) : NET_DST_ALL;
            fn(arg, c->tag, hub_sends(e) ? e->src : leaves, hub_sends(e) ? leaves : e->dst,
               c->bytes, e->set, e->nset);
        }
        e = &n->f[i]; /* the callback may have added entities */
        redo_from(n, is_frozen(n, i) ? n->fz[i] & LV_MASK : 0);
        unregister_ent(n, i);
        int was_multi = !is_single(e) && !is_fan(e);
        e->seq = -1;
        if (was_multi) squeeze_exl(n, e->set, e->nset, leaf_side(e) * n->nodes);
        free(e->set);
        e->set = NULL;
        n->free_slots[n->nfree++] = i;
    }
    if (done) {
        n->dirty = 1;
        n->next_ns = INT64_MAX;
    }
    return (int)done;
}

/* Append the flows entity e stands for (their senders and receivers) to fs/fd; returns how
 * many, or -1 when its set contradicts its kind (a leaf that is the hub, or repeated). */
static int64_t list_flows(const net_t *n, const ent_t *e, int *fs, int *fd, char *seen)
{
    if (is_single(e)) {
        fs[0] = e->src, fd[0] = e->dst;
        return 1;
    }
    if (is_ring(e)) {
        for (int v = 0; v < n->nodes; v++) fs[v] = v, fd[v] = (v + 1) % n->nodes;
        return n->nodes;
    }
    int N = n->nodes, hub = hub_node(e), sends = hub_sends(e);
    int64_t k = 0, bad = e->nset == 0 && is_fan(e);
    if (bad) return -1;
    int q = scope_of(n, e);
    memset(seen, 0, (size_t)N);
    for (int a = 0; a < e->nset; a++) {
        int v = e->set[a];
        bad |= v < 0 || v >= N || v == hub || seen[v] || rack_of(n, v) != q;
        if (v >= 0 && v < N) seen[v] = 1;
    }
    if (bad || q < 0 || q >= n->racks) return -1;
    for (int v = 0; v < N; v++) {
        if (v == hub || rack_of(n, v) != q || seen[v] != is_fan(e)) continue;
        fs[k] = sends ? hub : v;
        fd[k] = sends ? v : hub;
        k++;
    }
    return k;
}

/* The resources flow src -> dst crosses in net_verify_maxmin's numbering (send side src,
 * receive side N + dst, rack links 2N + ..., the core 2N + L); returns how many. */
static int flow_res(const net_t *n, int src, int dst, int out[5])
{
    int N = n->nodes, k = 0;
    out[k++] = src;
    out[k++] = N + dst;
    if (n->racks > 1 && rack_of(n, src) != rack_of(n, dst)) {
        out[k++] = 2 * N + rack_of(n, src);
        out[k++] = 2 * N + n->racks + rack_of(n, dst);
    }
    out[k++] = 2 * N + n->links;
    return k;
}

int net_verify_maxmin(const net_t *n, double rel_tol, char *err, size_t errlen)
{
    int N = n->nodes, R = 2 * N + n->links + 1;
    int64_t F = 0;
    for (int64_t i = 0; i < n->used_slots; i++)
        if (n->f[i].seq >= 0) F += n->f[i].mult;
    int *fs = xcalloc((size_t)F + 1, sizeof *fs), *fd = xcalloc((size_t)F + 1, sizeof *fd);
    int64_t *fe = xcalloc((size_t)F + 1, sizeof *fe), *cnt = xcalloc((size_t)R, sizeof *cnt);
    double *rate = xcalloc((size_t)F + 1, sizeof *rate), *cap = xcalloc((size_t)R, sizeof *cap);
    char *done = xcalloc((size_t)F + 1, 1), *seen = xcalloc((size_t)N, 1), *sat = xcalloc((size_t)R, 1);
    int64_t k = 0;
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < n->used_slots; i++) {
        const ent_t *e = &n->f[i];
        if (e->seq < 0) continue;
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
     * rack links, the core) is full, freeze the flows crossing it, repeat. Resources filling
     * at the same rate freeze in one step. Capacities are the configured ones, not the
     * kept state's. */
    for (int r = 0; r < 2 * N; r++) cap[r] = n->side_Bps[r];
    for (int r = 2 * N; r < 2 * N + n->links; r++) cap[r] = n->rack_Bps;
    cap[R - 1] = n->core_Bps > 0 ? n->core_Bps : INFINITY;
    int fr[5];
    for (int64_t left = F; rc == 0 && left > 0;) {
        memset(cnt, 0, (size_t)R * sizeof *cnt);
        for (int64_t f = 0; f < F; f++)
            if (!done[f])
                for (int a = 0, m = flow_res(n, fs[f], fd[f], fr); a < m; a++) cnt[fr[a]]++;
        double best = INFINITY;
        for (int r = 0; r < R; r++)
            if (cnt[r] > 0 && cap[r] / (double)cnt[r] < best) best = cap[r] / (double)cnt[r];
        ASSERT(best < INFINITY, "no resource limits %lld flows", (long long)left);
        for (int r = 0; r < R; r++)
            sat[r] = cnt[r] > 0 && cap[r] / (double)cnt[r] <= best * (1 + 1e-12);
        for (int64_t f = 0; f < F; f++) {
            if (done[f]) continue;
            int m = flow_res(n, fs[f], fd[f], fr), hit = 0;
            for (int a = 0; a < m; a++) hit |= sat[fr[a]];
            if (!hit) continue;
            done[f] = 1, rate[f] = best, left--;
            for (int a = 0; a < m; a++) cap[fr[a]] -= best;
        }
    }
    for (int64_t f = 0; rc == 0 && f < F; f++) {
        double got = rates_rate(n->rt, fe[f]);
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

int net_verify_feasible(const net_t *n, double rel_tol, char *err, size_t errlen)
{
    int N = n->nodes, R = 2 * N + n->links + 1, fr[5];
    double *load = xcalloc((size_t)R, sizeof *load), *cap = xcalloc((size_t)R, sizeof *cap);
    int *fs = xcalloc((size_t)N, sizeof *fs), *fd = xcalloc((size_t)N, sizeof *fd);
    char *seen = xcalloc((size_t)N, 1);
    int rc = 0;
    for (int r = 0; r < 2 * N; r++) cap[r] = n->side_Bps[r];
    for (int r = 2 * N; r < R - 1; r++) cap[r] = n->rack_Bps;
    cap[R - 1] = n->core_Bps > 0 ? n->core_Bps : INFINITY;
    for (int64_t i = 0; rc == 0 && i < n->used_slots; i++) {
        const ent_t *e = &n->f[i];
        if (e->seq < 0) continue;
        int64_t m = list_flows(n, e, fs, fd, seen);
        double rate = rates_rate(n->rt, i);
        if (m != e->mult || !(rate > 0)) {
            snprintf(err, errlen, "entity %lld (%d -> %d): %lld flows of %d, rate %g",
                     (long long)i, e->src, e->dst, (long long)m, e->mult, rate);
            rc = -1;
        }
        for (int64_t f = 0; rc == 0 && f < m; f++)
            for (int a = 0, k = flow_res(n, fs[f], fd[f], fr); a < k; a++) load[fr[a]] += rate;
    }
    for (int r = 0; rc == 0 && r < R; r++)
        if (load[r] > cap[r] * (1 + rel_tol)) {
            snprintf(err, errlen, "resource %d carries %.9g B/s of %.9g", r, load[r], cap[r]);
            rc = -1;
        }
    free(load), free(cap), free(fs), free(fd), free(seen);
    return rc;
}

/* The kept structures as rebuilt from the live entities by net_check_kept()'s steps: loads,
 * references and exclusions per resource [R], multis and touched NIC sides per class [C]. */
typedef struct {
    int64_t *base, *cur, *nex; /* cur: the position reached in each resource's list */
    int32_t *ref;
    int64_t *mu, *special;
    int64_t core, live, last_seq, mpos, touched;
} kept_t;

/* net_check_kept()'s steps: on a mismatch they say which in err and return -1. */
#define KEPT_FAIL(...)                                                                     \
    do {                                                                                   \
        snprintf(err, errlen, __VA_ARGS__);                                                \
        return -1;                                                                         \
    } while (0)

/* The next live entry of resource r's list must be (seq, slot, other). */
static int kept_next(const net_t *n, kept_t *k, int r, const ent_t *e, int64_t i, int oth,
                     char *err, size_t errlen)
{
    const rlist_t *L = &n->list[r];
    int64_t *cur = k->cur;
    while (cur[r] < L->len && L->v[cur[r]].other == LIST_DEAD) cur[r]++;
    if (cur[r] >= L->len || L->v[cur[r]].seq != e->seq || L->v[cur[r]].slot != i ||
        L->v[cur[r]].other != oth)
        KEPT_FAIL("resource %d: entity %lld missing or out of place in its list", r,
                  (long long)e->seq);
    cur[r]++;
    return 0;
}

#define KEPT_NEXT(r, e, i, oth)                                                            \
    do {                                                                                   \
        if (kept_next(n, k, r, e, i, oth, err, errlen) < 0) return -1;                     \
    } while (0)

/* One live entity e in slot i: its loads and references, its place in its resources' lists
 * and (a multi) in the multis. */
static int kept_entity(const net_t *n, kept_t *k, const ent_t *e, int64_t i, char *err,
                       size_t errlen)
{
    int N = n->nodes;
    int64_t *base = k->base;
    int32_t *ref = k->ref;
    int lk[2], nlk = ent_links(n, e, lk);
    for (int a = 0; a < nlk; a++) {
        base[lk[a]] += e->mult, ref[lk[a]]++;
        KEPT_NEXT(lk[a], e, i, LIST_WHOLE);
    }
    if (is_single(e)) {
        base[e->src]++, ref[e->src]++, base[N + e->dst]++, ref[N + e->dst]++;
        KEPT_NEXT(e->src, e, i, nlk ? LIST_WHOLE : N + e->dst);
        KEPT_NEXT(N + e->dst, e, i, nlk ? LIST_WHOLE : e->src);
        return 0;
    }
    if (!is_fan(e) && (scope_of(n, e) < 0 || scope_of(n, e) >= n->racks))
        KEPT_FAIL("multi %lld: leaves in rack %d of %d", (long long)e->seq, scope_of(n, e),
                  n->racks);
    int h = hub_res(n, e), off = leaf_side(e) * N;
    base[h] += e->mult, ref[h]++;
    KEPT_NEXT(h, e, i, LIST_WHOLE);
    if (is_fan(e)) {
        for (int j = 0; j < e->nset; j++) {
            int r = off + e->set[j];
            base[r]++, ref[r]++;
            KEPT_NEXT(r, e, i, LIST_FAN_LEAF);
        }
        return 0;
    }
    int q = scope_of(n, e);
    if (rack_of(n, hub_node(e)) == q) base[off + hub_node(e)]--, ref[off + hub_node(e)]++;
    for (int j = 0; j < e->nset; j++) {
        int r = off + e->set[j];
        base[r]--, ref[r]++, k->nex[r]++;
    }
    k->mu[2 * q + leaf_side(e)]++;
    while (k->mpos < n->multis.len && n->multis.v[k->mpos].other == LIST_DEAD) k->mpos++;
    if (k->mpos >= n->multis.len || n->multis.v[k->mpos].seq != e->seq)
        KEPT_FAIL("multi %lld missing from the multis", (long long)e->seq);
    k->mpos++;
    return 0;
}

/* The entity list in creation order, every live slot in it; then the multis per class and
 * the core load against the kept ones. */
static int kept_entities(const net_t *n, kept_t *k, char *err, size_t errlen)
{
    for (int64_t a = 0; a < n->order.len; a++) {
        lent_t o = n->order.v[a];
        if (o.other == LIST_DEAD) continue;
        int64_t i = o.slot;
        const ent_t *e = &n->f[i];
        if (e->seq != o.seq || e->seq <= k->last_seq)
            KEPT_FAIL("entity list out of creation order at %lld", (long long)o.seq);
        k->last_seq = e->seq;
        k->live++;
        k->core += e->mult;
        if (kept_entity(n, k, e, i, err, errlen) < 0) return -1;
    }
    for (int64_t i = 0; i < n->used_slots; i++) k->live -= n->f[i].seq >= 0 && !is_ring(&n->f[i]);
    if (k->live != 0 || k->last_seq >= n->next_seq)
        KEPT_FAIL("%lld slots in use that the entity list lacks", (long long)-k->live);
    for (; k->mpos < n->multis.len; k->mpos++)
        if (n->multis.v[k->mpos].other != LIST_DEAD) KEPT_FAIL("a finished multi still listed");
    for (int c = 0; c < 2 * n->racks; c++)
        if (k->mu[c] != n->mu_base[c])
            KEPT_FAIL("class %d: %lld multis, kept %lld", c, (long long)k->mu[c],
                      (long long)n->mu_base[c]);
    if (k->core != n->core_base)
        KEPT_FAIL("core load %lld, kept %lld", (long long)k->core, (long long)n->core_base);
    return 0;
}

/* Resource r: its load, references, touched mark, dead entries, no strangers left in its
 * list, and its exclusions (each live entry a multi that excludes r, as many as there are). */
static int kept_resource(const net_t *n, kept_t *k, int r, char *err, size_t errlen)
{
    int N = n->nodes;
    if (k->base[r] != n->base[r] || k->ref[r] != n->ref[r])
        KEPT_FAIL("resource %d: load %lld and %d references, kept %lld and %d", r,
                  (long long)k->base[r], k->ref[r], (long long)n->base[r], n->ref[r]);
    if ((k->ref[r] > 0) != (n->tpos[r] >= 0) ||
        (n->tpos[r] >= 0 && (n->tpos[r] >= n->ntouched || n->touched[n->tpos[r]] != r)))
        KEPT_FAIL("resource %d: touched set wrong", r);
    k->touched += k->ref[r] > 0;
    if (r < 2 * N) k->special[side_class(n, r)] += k->ref[r] > 0;
    const rlist_t *L = &n->list[r];
    int64_t dead = 0, *cur = k->cur;
    for (int64_t a = 0; a < L->len; a++) dead += L->v[a].other == LIST_DEAD;
    for (; cur[r] < L->len; cur[r]++)
        if (L->v[cur[r]].other != LIST_DEAD) KEPT_FAIL("resource %d lists a stranger", r);
    if (dead != L->dead) KEPT_FAIL("resource %d: %lld dead entries, counted %lld", r,
                                   (long long)dead, (long long)L->dead);
    int64_t got = 0;
    for (int64_t a = 0; a < n->exl[r].len; a++) {
        lent_t x = n->exl[r].v[a];
        const ent_t *g = &n->f[x.slot];
        if (g->seq != x.seq) continue;
        got++;
        int has = 0;
        for (int j = 0; j < g->nset; j++) has |= leaf_side(g) * N + g->set[j] == r;
        if (is_single(g) || is_fan(g) || !has)
            KEPT_FAIL("resource %d: listed as excluded by %lld, which crosses it", r,
                      (long long)g->seq);
    }
    if (got != k->nex[r]) KEPT_FAIL("resource %d excluded by %lld multis, listed %lld", r,
                                    (long long)k->nex[r], (long long)got);
    return 0;
}

/* Every resource, then the touched count and the touched NIC sides per class. */
static int kept_resources(const net_t *n, kept_t *k, char *err, size_t errlen)
{
    int R = 2 * n->nodes + n->links;
    for (int r = 0; r < R; r++)
        if (kept_resource(n, k, r, err, errlen) < 0) return -1;
    if (k->touched != n->ntouched)
        KEPT_FAIL("%lld touched resources, kept %d", (long long)k->touched, n->ntouched);
    for (int c = 0; c < 2 * n->racks; c++)
        if (k->special[c] != n->special[c])
            KEPT_FAIL("class %d: %lld touched NIC sides, kept %lld", c, (long long)k->special[c],
                      (long long)n->special[c]);
    return 0;
}

/* Every live entity's rate and finish time (after a computation, every one has a rate), and
 * the earliest is next_ns. */
static int kept_rates(const net_t *n, char *err, size_t errlen)
{
    char *covered = xcalloc((size_t)n->used_slots + 1, 1); /* the live slots */
    char *unrated = xcalloc((size_t)n->used_slots + 1, 1); /* none must have a rate */
    for (int64_t i = 0; i < n->used_slots; i++) covered[i] = n->f[i].seq >= 0;
    int rc = rates_check(n->rt, covered, n->dirty ? unrated : covered, n->used_slots, err, errlen);
    free(covered), free(unrated);
    if (rc < 0) return -1;
    if (!n->dirty && n->next_ns != rates_next(n->rt))
        KEPT_FAIL("next finish %lld, earliest entity %lld", (long long)n->next_ns,
                  (long long)rates_next(n->rt));
    return 0;
}
#undef KEPT_FAIL
#undef KEPT_NEXT

/* The kept structures rebuilt from the live entities: compare (see net.h). */
int net_check_kept(const net_t *n, char *err, size_t errlen)
{
    int N = n->nodes, R = 2 * N + n->links, C = 2 * n->racks;
    kept_t k = {.last_seq = -1};
    k.base = xcalloc((size_t)R, sizeof *k.base);
    k.cur = xcalloc((size_t)R, sizeof *k.cur);
    k.nex = xcalloc((size_t)R, sizeof *k.nex);
    k.ref = xcalloc((size_t)R, sizeof *k.ref);
    k.mu = xcalloc((size_t)C, sizeof *k.mu);
    k.special = xcalloc((size_t)C, sizeof *k.special);
    for (int v = 0; v < N; v++)
        if (n->pinned[v]) k.ref[v]++, k.ref[N + v]++;
    int rc = -1;
    if (kept_entities(n, &k, err, errlen) == 0 && kept_resources(n, &k, err, errlen) == 0 &&
        kept_rates(n, err, errlen) == 0)
        rc = 0;
    free(k.base), free(k.cur), free(k.nex), free(k.ref), free(k.mu), free(k.special);
    return rc;
}
