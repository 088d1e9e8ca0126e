#include "rates.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

/* A member's entry in its group's heap: the group clock at which it finishes. */
typedef struct {
    double key;
    int64_t m;
} mkey_t;

typedef struct {
    double rate;     /* bytes/s per flow of every member */
    double clock;    /* bytes per flow moved since the group began, at t_ns */
    int64_t t_ns;
    int64_t fin;     /* finish time of its first member; INT64_MAX: none */
    mkey_t *h;       /* members, a heap by key */
    int64_t n, cap;
    int64_t hpos;    /* place in the heap of groups, -1: none */
    int64_t stamp;   /* the computation that last counted its votes */
    int32_t cand, votes; /* the level most of its noted members froze at (majority vote) */
    int64_t noted;   /* its members noted in this computation */
    int32_t in_use;
} group_t;

typedef struct {
    int64_t fin;
    int32_t g;
} gkey_t;

/* Consecutive notes of members of one group at one level (most of a list freezes at one
 * level, and most of a level's members were in one group before): notes[start..+count). */
typedef struct {
    int64_t start, count;
    int32_t g, level;
} run_t;

struct rates {
    group_t *g;
    int32_t ng, gcap;     /* groups handed out so far, room */
    int32_t *gfree;
    int32_t nfree, live_groups;
    /* per member */
    int64_t cap;
    int32_t *grp;         /* its group, -1: none */
    int64_t *pos;         /* place in its group's heap */
    double *rem0, *v0;    /* bytes left when it joined, the group's clock then */
    int64_t *t0;          /* when it joined */
    /* the heap of groups by the finish time of their first member */
    gkey_t *heap;
    int64_t nheap, heap_cap;
    /* the current computation */
    int64_t stamp;
    double *lv_x;
    int32_t *lv_grp;
    int32_t lv_cap;
    int64_t *notes;       /* the members noted, in order */
    int64_t nnotes, notes_cap;
    run_t *runs;
    int64_t nruns, runs_cap;
    int32_t *voted;       /* the groups that got votes, in the order of their first vote */
    int64_t nvoted, voted_cap;
    int64_t moves;
};

rates_t *rates_new(void)
{
    rates_t *r = xcalloc(1, sizeof *r);
    r->stamp = 1;
    return r;
}

void rates_destroy(rates_t **rp)
{
    if (!rp || !*rp) return;
    rates_t *r = *rp;
    for (int32_t a = 0; a < r->ng; a++) free(r->g[a].h);
    free(r->g), free(r->gfree), free(r->grp), free(r->pos), free(r->rem0), free(r->v0);
    free(r->t0);
    free(r->heap), free(r->lv_x), free(r->lv_grp), free(r->notes), free(r->runs), free(r->voted);
    free(r);
    *rp = NULL;
}

void rates_reserve(rates_t *r, int64_t cap)
{
    if (cap <= r->cap) return;
    r->grp = xrealloc(r->grp, (size_t)cap * sizeof *r->grp);
    r->pos = xrealloc(r->pos, (size_t)cap * sizeof *r->pos);
    r->rem0 = xrealloc(r->rem0, (size_t)cap * sizeof *r->rem0);
    r->v0 = xrealloc(r->v0, (size_t)cap * sizeof *r->v0);
    r->t0 = xrealloc(r->t0, (size_t)cap * sizeof *r->t0);
    for (int64_t i = r->cap; i < cap; i++) r->grp[i] = -1;
    r->cap = cap;
}

/* llround(x) for 0 <= x < 2^62 without the library call: x - trunc(x) is exact, so halves
 * round up as llround rounds them. */
static inline int64_t round_ns(double x)
{
    if (!(x < 4.6e18)) return llround(x);
    int64_t i = (int64_t)x;
    return x - (double)i >= 0.5 ? i + 1 : i;
}

/* ---- the heap of groups ---- */

static inline void gh_place(rates_t *r, int64_t k, gkey_t x)
{
    r->heap[k] = x;
    r->g[x.g].hpos = k;
}

static void gh_up(rates_t *r, int64_t k, gkey_t x)
{
    while (k > 0) {
        int64_t p = (k - 1) / 2;
        if (r->heap[p].fin <= x.fin) break;
        gh_place(r, k, r->heap[p]);
        k = p;
    }
    gh_place(r, k, x);
}

static void gh_down(rates_t *r, int64_t k, gkey_t x)
{
    for (;;) {
        int64_t l = 2 * k + 1, m = l;
        if (l >= r->nheap) break;
        if (l + 1 < r->nheap && r->heap[l + 1].fin < r->heap[l].fin) m = l + 1;
        if (r->heap[m].fin >= x.fin) break;
        gh_place(r, k, r->heap[m]);
        k = m;
    }
    gh_place(r, k, x);
}

static void gh_fix(rates_t *r, int64_t k, gkey_t x)
{
    if (k > 0 && x.fin < r->heap[(k - 1) / 2].fin) gh_up(r, k, x);
    else gh_down(r, k, x);
}

/* ---- a group's heap of members ---- */

static inline int mk_before(mkey_t a, mkey_t b)
{
    return a.key < b.key || (a.key == b.key && a.m < b.m);
}

static inline void mh_place(rates_t *r, group_t *G, int64_t k, mkey_t x)
{
    G->h[k] = x;
    r->pos[x.m] = k;
}

static void mh_up(rates_t *r, group_t *G, int64_t k, mkey_t x)
{
    while (k > 0) {
        int64_t p = (k - 1) / 2;
        if (!mk_before(x, G->h[p])) break;
        mh_place(r, G, k, G->h[p]);
        k = p;
    }
    mh_place(r, G, k, x);
}

static void mh_down(rates_t *r, group_t *G, int64_t k, mkey_t x)
{
    for (;;) {
        int64_t l = 2 * k + 1, m = l;
        if (l >= G->n) break;
        if (l + 1 < G->n && mk_before(G->h[l + 1], G->h[l])) m = l + 1;
        if (!mk_before(G->h[m], x)) break;
        mh_place(r, G, k, G->h[m]);
        k = m;
    }
    mh_place(r, G, k, x);
}

/* ---- groups ---- */

/* G's clock at t >= its time. */
static inline double clock_at(const group_t *G, int64_t t)
{
    return t == G->t_ns ? G->clock : G->clock + G->rate * ((double)(t - G->t_ns) * 1e-9);
}

/* Member i's finish time in its group G: from the later of its joining and G's last change,
 * its bytes left then at G's rate. A member that joined after the change gets its bytes at
 * joining exactly (the clock then is computed as it was at the join), so a group that
 * gains members does not re-time the others. */
static inline int64_t fin_in(const group_t *G, const rates_t *r, int64_t i)
{
    int64_t t = r->t0[i] > G->t_ns ? r->t0[i] : G->t_ns;
    int64_t d = round_ns((r->rem0[i] - (clock_at(G, t) - r->v0[i])) / G->rate * 1e9);
    return t + (d > 0 ? d : 0);
}

/* G's first member's finish time, and G's place in the heap of groups, after a change. */
static void refresh(rates_t *r, int32_t g)
{
    group_t *G = &r->g[g];
    int64_t fin = G->n > 0 ? fin_in(G, r, G->h[0].m) : INT64_MAX;
    if (fin == G->fin && (G->hpos >= 0) == (fin != INT64_MAX)) return;
    G->fin = fin;
    if (fin == INT64_MAX) {
        if (G->hpos >= 0) {
            int64_t k = G->hpos;
            G->hpos = -1;
            gkey_t last = r->heap[--r->nheap];
            if (k < r->nheap) gh_fix(r, k, last);
        }
        return;
    }
    gkey_t x = {fin, g};
    if (G->hpos >= 0) {
        gh_fix(r, G->hpos, x);
        return;
    }
    if (r->nheap == r->heap_cap) {
        r->heap_cap = r->heap_cap ? 2 * r->heap_cap : 256;
        r->heap = xrealloc(r->heap, (size_t)r->heap_cap * sizeof *r->heap);
    }
    gh_up(r, r->nheap++, x);
}

static int32_t group_new(rates_t *r, double x, int64_t now)
{
    int32_t g;
    if (r->nfree > 0) {
        g = r->gfree[--r->nfree];
    } else {
        if (r->ng == r->gcap) {
            r->gcap = r->gcap ? 2 * r->gcap : 64;
            r->g = xrealloc(r->g, (size_t)r->gcap * sizeof *r->g);
            r->gfree = xrealloc(r->gfree, (size_t)r->gcap * sizeof *r->gfree);
        }
        g = r->ng++;
        r->g[g] = (group_t){.h = NULL, .cap = 0};
    }
    ASSERT(x > 0, "a level of rate %g", x);
    group_t *G = &r->g[g];
    G->rate = x;
    G->clock = 0;
    G->t_ns = now;
    G->fin = INT64_MAX;
    G->n = 0;
    G->hpos = -1;
    G->stamp = 0;
    G->in_use = 1;
    r->live_groups++;
    return g;
}

static void set_rate(rates_t *r, int32_t g, double x, int64_t now)
{
    group_t *G = &r->g[g];
    if (x == G->rate) return;
    ASSERT(x > 0, "a level of rate %g", x);
    G->clock = clock_at(G, now);
    G->t_ns = now;
    G->rate = x;
    refresh(r, g);
}

/* Member i, with bytes left, joins group g at now. */
static void join(rates_t *r, int32_t g, int64_t i, double bytes, int64_t now)
{
    group_t *G = &r->g[g];
    if (G->n == G->cap) {
        G->cap = G->cap ? 2 * G->cap : 4;
        G->h = xrealloc(G->h, (size_t)G->cap * sizeof *G->h);
    }
    r->grp[i] = g;
    r->rem0[i] = bytes;
    r->v0[i] = clock_at(G, now);
    r->t0[i] = now;
    mh_up(r, G, G->n++, (mkey_t){r->v0[i] + bytes, i});
    refresh(r, g);
}

/* Member i leaves its group (it keeps no rate); an empty group is freed. */
static void leave(rates_t *r, int64_t i)
{
    int32_t g = r->grp[i];
    if (g < 0) return;
    group_t *G = &r->g[g];
    int64_t k = r->pos[i];
    r->grp[i] = -1;
    mkey_t last = G->h[--G->n];
    if (k < G->n) {
        if (k > 0 && mk_before(last, G->h[(k - 1) / 2])) mh_up(r, G, k, last);
        else mh_down(r, G, k, last);
    }
    refresh(r, g);
    if (G->n == 0) {
        G->in_use = 0;
        r->gfree[r->nfree++] = g;
        r->live_groups--;
    }
}

/* ---- members ---- */

void rates_start(rates_t *r, int64_t i, double bytes)
{
    ASSERT(i >= 0 && i < r->cap, "member %lld of %lld", (long long)i, (long long)r->cap);
    r->grp[i] = -1;
    r->rem0[i] = bytes;
    r->v0[i] = 0;
    r->t0[i] = 0;
}

void rates_copy(rates_t *r, int64_t j, int64_t i)
{
    int32_t g = r->grp[i];
    if (g < 0) {
        rates_start(r, j, r->rem0[i]);
        return;
    }
    group_t *G = &r->g[g];
    if (G->n == G->cap) {
        G->cap = 2 * G->cap;
        G->h = xrealloc(G->h, (size_t)G->cap * sizeof *G->h);
    }
    /* the same bytes at the same clock: the same finish, whatever happens to the group */
    r->grp[j] = g;
    r->rem0[j] = r->rem0[i];
    r->v0[j] = r->v0[i];
    r->t0[j] = r->t0[i];
    mh_up(r, G, G->n++, (mkey_t){G->h[r->pos[i]].key, j});
    refresh(r, g);
}

void rates_drop(rates_t *r, int64_t i) { leave(r, i); }

double rates_rate(const rates_t *r, int64_t i) { return r->grp[i] >= 0 ? r->g[r->grp[i]].rate : 0; }

double rates_left(const rates_t *r, int64_t i, int64_t now)
{
    if (r->grp[i] < 0) return r->rem0[i];
    const group_t *G = &r->g[r->grp[i]];
    double left = r->rem0[i] - (clock_at(G, now) - r->v0[i]);
    return left > 0 ? left : 0;
}

int64_t rates_fin(const rates_t *r, int64_t i)
{
    return r->grp[i] >= 0 ? fin_in(&r->g[r->grp[i]], r, i) : INT64_MAX;
}

int64_t rates_next(const rates_t *r) { return r->nheap > 0 ? r->heap[0].fin : INT64_MAX; }

int64_t rates_due(rates_t *r, int64_t now)
{
    if (r->nheap == 0 || r->heap[0].fin > now) return -1;
    group_t *G = &r->g[r->heap[0].g];
    int64_t i = G->h[0].m;
    leave(r, i);
    return i;
}

int64_t rates_groups(const rates_t *r) { return r->live_groups; }
int64_t rates_moves(const rates_t *r) { return r->moves; }

/* ---- a computation ---- */

void rates_level(rates_t *r, int32_t L, double x)
{
    if (L >= r->lv_cap) {
        int32_t cap = r->lv_cap ? 2 * r->lv_cap : 16;
        while (cap <= L) cap *= 2;
        r->lv_x = xrealloc(r->lv_x, (size_t)cap * sizeof *r->lv_x);
        r->lv_grp = xrealloc(r->lv_grp, (size_t)cap * sizeof *r->lv_grp);
        r->lv_cap = cap;
    }
    r->lv_x[L] = x;
    r->lv_grp[L] = -1;
}

/* Room for k more notes and as many runs. */
static void notes_reserve(rates_t *r, int64_t k)
{
    if (r->nnotes + k > r->notes_cap) {
        int64_t cap = r->notes_cap ? 2 * r->notes_cap : 1024;
        while (cap < r->nnotes + k) cap *= 2;
        r->notes = xrealloc(r->notes, (size_t)cap * sizeof *r->notes);
        r->notes_cap = cap;
    }
    if (r->nruns + k > r->runs_cap) {
        int64_t cap = r->runs_cap ? 2 * r->runs_cap : 256;
        while (cap < r->nruns + k) cap *= 2;
        r->runs = xrealloc(r->runs, (size_t)cap * sizeof *r->runs);
        r->runs_cap = cap;
    }
}

void rates_note_many(rates_t *r, const int64_t *ms, int64_t k, int32_t L)
{
    if (k <= 0) return;
    notes_reserve(r, k);
    /* the open run in locals: most notes extend it (one level, mostly one group) */
    int64_t nruns = r->nruns, nnotes = r->nnotes, *notes = r->notes;
    const int32_t *grp = r->grp;
    run_t *runs = r->runs;
    int32_t g = nruns > 0 && runs[nruns - 1].level == L ? runs[nruns - 1].g : INT32_MIN;
    /* a run's count is set when it closes (notes are contiguous: its end less its start),
     * not kept in memory at every note */
    for (int64_t a = 0; a < k; a++) {
        int64_t i = ms[a];
        int32_t gi = grp[i];
        if (gi != g) {
            if (nruns > 0) runs[nruns - 1].count = nnotes - runs[nruns - 1].start;
            runs[nruns++] = (run_t){nnotes, 0, gi, L};
            g = gi;
        }
        notes[nnotes++] = i;
    }
    runs[nruns - 1].count = nnotes - runs[nruns - 1].start;
    r->nruns = nruns;
    r->nnotes = nnotes;
}

void rates_note(rates_t *r, int64_t i, int32_t L) { rates_note_many(r, &i, 1, L); }

void rates_apply(rates_t *r, int64_t now)
{
    int64_t stamp = ++r->stamp;
    r->nvoted = 0;
    /* each group's level: the one most of its noted members froze at (Boyer-Moore's
     * majority vote, a run of c notes counting c) */
    for (int64_t a = 0; a < r->nruns; a++) {
        const run_t *u = &r->runs[a];
        if (u->g < 0) continue;
        group_t *G = &r->g[u->g];
        int32_t c = (int32_t)u->count;
        if (G->stamp != stamp) {
            G->stamp = stamp;
            G->cand = u->level;
            G->votes = c;
            G->noted = 0;
            if (r->nvoted == r->voted_cap) {
                r->voted_cap = r->voted_cap ? 2 * r->voted_cap : 64;
                r->voted = xrealloc(r->voted, (size_t)r->voted_cap * sizeof *r->voted);
            }
            r->voted[r->nvoted++] = u->g;
        } else if (G->cand == u->level) {
            G->votes += c;
        } else if (G->votes >= c) {
            G->votes -= c;
        } else {
            G->cand = u->level;
            G->votes = c - G->votes;
        }
        G->noted += c;
    }
    /* a level takes the first group that chose it, with the level's rate */
    for (int64_t a = 0; a < r->nvoted; a++) {
        int32_t g = r->voted[a], L = r->g[g].cand;
        /* a group is one level of an earlier computation: redone, all of it froze again */
        ASSERT(r->g[g].noted == r->g[g].n, "group %d: %lld of its %lld members froze", g,
               (long long)r->g[g].noted, (long long)r->g[g].n);
        if (r->lv_grp[L] >= 0) continue;
        r->lv_grp[L] = g;
        set_rate(r, g, r->lv_x[L], now);
    }
    /* the rest move to their level's group (a group is freed only when its last member
     * leaves, so a run's group is still the one its members are in) */
    for (int64_t a = 0; a < r->nruns; a++) {
        const run_t *u = &r->runs[a];
        int32_t L = u->level;
        if (u->g >= 0 && u->g == r->lv_grp[L]) continue;
        if (r->lv_grp[L] < 0) r->lv_grp[L] = group_new(r, r->lv_x[L], now);
        for (int64_t k = u->start; k < u->start + u->count; k++) {
            int64_t i = r->notes[k];
            double left = rates_left(r, i, now);
            r->moves += r->grp[i] >= 0;
            leave(r, i);
            join(r, r->lv_grp[L], i, left, now);
        }
    }
    r->nnotes = 0;
    r->nruns = 0;
}

int rates_check(const rates_t *r, const char *live, const char *rated, int64_t n, char *err,
                size_t errlen)
{
    int64_t groups = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t g = r->grp[i];
        if (!live[i]) continue;
        if (g < 0) {
            if (rated[i]) {
                snprintf(err, errlen, "member %lld has no rate", (long long)i);
                return -1;
            }
            continue;
        }
        const group_t *G = &r->g[g];
        if (g >= r->ng || !G->in_use || r->pos[i] < 0 || r->pos[i] >= G->n ||
            G->h[r->pos[i]].m != i) {
            snprintf(err, errlen, "member %lld not in its group %d", (long long)i, g);
            return -1;
        }
    }
    for (int32_t g = 0; g < r->ng; g++) {
        const group_t *G = &r->g[g];
        if (!G->in_use) continue;
        groups++;
        if (G->n == 0 || !(G->rate > 0)) {
            snprintf(err, errlen, "group %d: %lld members, rate %g", g, (long long)G->n, G->rate);
            return -1;
        }
        for (int64_t k = 0; k < G->n; k++) {
            int64_t m = G->h[k].m;
            if (m < 0 || m >= n || !live[m] || r->grp[m] != g) {
                snprintf(err, errlen, "group %d lists member %lld, not its own", g, (long long)m);
                return -1;
            }
            if (k > 0 && mk_before(G->h[k], G->h[(k - 1) / 2])) {
                snprintf(err, errlen, "group %d: members out of order", g);
                return -1;
            }
            if (G->h[k].key != r->v0[m] + r->rem0[m]) {
                snprintf(err, errlen, "group %d: member %lld's key stale", g, (long long)m);
                return -1;
            }
        }
        if (G->fin != fin_in(G, r, G->h[0].m) || G->hpos < 0 || G->hpos >= r->nheap ||
            r->heap[G->hpos].g != g || r->heap[G->hpos].fin != G->fin) {
            snprintf(err, errlen, "group %d: finish time %lld stale or not in the heap", g,
                     (long long)G->fin);
            return -1;
        }
    }
    for (int64_t k = 1; k < r->nheap; k++)
        if (r->heap[k].fin < r->heap[(k - 1) / 2].fin) {
            snprintf(err, errlen, "heap of groups out of order");
            return -1;
        }
    if (groups != r->nheap || groups != r->live_groups) {
        snprintf(err, errlen, "%lld groups, %lld in the heap, %d counted", (long long)groups,
                 (long long)r->nheap, r->live_groups);
        return -1;
    }
    return 0;
}
