#include "hybrid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Passes of one-unit flips, at most; each costs at most 2 x units evaluations, and a pass
 * that changes nothing ends the search. */
#define HYBRID_MAX_PASSES 8

static const char *const s_rule_names[HYBRID_RULE_COUNT] = {"iteration", "layer"};

const char *hybrid_rule_name(hybrid_rule_t r)
{
    ASSERT(r >= 0 && r < HYBRID_RULE_COUNT, "bad hybrid rule %d", r);
    return s_rule_names[r];
}

int hybrid_rule_parse(const char *name, hybrid_rule_t *r)
{
    for (int i = 0; i < HYBRID_RULE_COUNT; i++)
        if (!strcmp(name, s_rule_names[i])) {
            *r = (hybrid_rule_t)i;
            return 0;
        }
    return -1;
}

/* Each shard's PS bytes, accumulated tensor by tensor in block order. Even splits and
 * round-robin blocks are circular ranges of shards (a difference array, O(1) per tensor);
 * least-loaded blocks go one by one to the top of a heap ordered by (bytes, shard), which is
 * cost_kv_next_shard()'s choice (the fewest bytes, ties to the lowest shard). */
typedef struct {
    const cost_params_t *p;
    kv_place_t placement;
    int shards;
    int64_t all;   /* added to every shard */
    int64_t *diff; /* [shards + 1] */
    int64_t *load; /* [shards]: least-loaded blocks */
    int *heap;     /* [shards]: shard ids, a min-heap on (load, id) */
} shard_loads_t;

static int heap_before(const shard_loads_t *s, int a, int b)
{
    return s->load[a] < s->load[b] || (s->load[a] == s->load[b] && a < b);
}

static void heap_sift_down(shard_loads_t *s, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->shards && heap_before(s, s->heap[l], s->heap[m])) m = l;
        if (r < s->shards && heap_before(s, s->heap[r], s->heap[m])) m = r;
        if (m == i) return;
        int t = s->heap[i];
        s->heap[i] = s->heap[m];
        s->heap[m] = t;
        i = m;
    }
}

static void loads_reset(shard_loads_t *s)
{
    s->all = 0;
    memset(s->diff, 0, (size_t)(s->shards + 1) * sizeof *s->diff);
    memset(s->load, 0, (size_t)s->shards * sizeof *s->load);
    for (int i = 0; i < s->shards; i++) s->heap[i] = i; /* equal loads: ordered by id */
}

/* v more bytes on the len shards from start on, wrapping around. */
static void range_add(shard_loads_t *s, int64_t start, int64_t len, int64_t v)
{
    if (len <= 0 || v == 0) return;
    int64_t P2 = s->shards, end = start + len;
    s->diff[start] += v;
    if (end <= P2) {
        s->diff[end] -= v;
    } else {
        s->diff[P2] -= v;
        s->diff[0] += v;
        s->diff[end - P2] -= v;
    }
}

/* The PS tensor of `bytes` from global block block0, as the plan places it (core/cost.c). */
static void loads_add_tensor(shard_loads_t *s, int64_t bytes, int64_t block0)
{
    const cost_params_t *p = s->p;
    int64_t P2 = s->shards, nb = cost_ps_blocks(p, bytes);
    if (nb == 0) return;
    if (p->kv_block_bytes <= 0) { /* even split over min(elems, P2) shards from block0 */
        int w = cost_value_bytes(p);
        int64_t elems = bytes / w, start = block0 % P2;
        s->all += elems / P2 * w;
        range_add(s, start, elems % P2, w);
        range_add(s, start, 1, bytes % w);
        return;
    }
    int64_t B = p->kv_block_bytes, last = bytes - (nb - 1) * B;
    if (s->placement == KV_PLACE_ROUND_ROBIN) { /* block g on shard g mod P2 */
        s->all += nb / P2 * B;
        range_add(s, block0 % P2, nb % P2, B);
        range_add(s, (block0 + nb - 1) % P2, 1, last - B);
        return;
    }
    for (int64_t i = 0; i < nb; i++) {
        int top = s->heap[0];
        s->load[top] += i < nb - 1 ? B : last;
        heap_sift_down(s, 0);
    }
}

static int64_t loads_max(const shard_loads_t *s)
{
    int64_t run = 0, most = 0;
    for (int i = 0; i < s->shards; i++) {
        run += s->diff[i];
        int64_t b = s->all + run + s->load[i];
        if (b > most) most = b;
    }
    return most;
}

/* The busiest rack link's bytes of the iteration's PS traffic, t bytes in all (pushes and
 * pulls, each rack's shards holding held_q of them): rack q's uplink carries its S workers'
 * pieces for shards outside, S (t - held_q), and what its shards serve to the P - S workers
 * outside, held_q (P - S); its downlink the mirror image, as much (core/cost.h). Shard i
 * lives on node i, in rack i / S. 0 with one rack. */
static int64_t loads_rack_max(const shard_loads_t *s, int64_t t)
{
    const cost_params_t *p = s->p;
    int R = cost_racks(p);
    if (R <= 1) return 0;
    int64_t S = p->nodes_per_rack, P = p->workers, run = 0, most = 0;
    for (int q = 0, i = 0; q < R; q++) {
        int64_t held = 0;
        for (; i < s->shards && i / S == q; i++) {
            run += s->diff[i];
            held += s->all + run + s->load[i];
        }
        int64_t b = S * (t - held) + held * (P - S);
        if (b > most) most = b;
    }
    return most;
}

/* Bytes through PS of a unit synced by m: everything, the biases under SFB, none else. */
static int64_t unit_ps_bytes(const cost_tensor_t *t, sync_method_t m)
{
    if (m == SYNC_PS) return t->weight_bytes + t->bias_bytes;
    if (m == SYNC_SFB) return t->bias_bytes;
    return 0;
}

/* Time of `units` (bytes, FLOPs) at per_s a second; 0 when the rate is 0 (free). */
static int64_t ns_of(double units, double per_s)
{
    return per_s > 0 ? llround(units / per_s * 1e9) : 0;
}

/* The unit alone with its PS pieces spread evenly (no KV blocks): what no placement makes
 * faster, as cost_layer() prices it; -1 when m is not allowed. */
static int64_t unit_chain_ns(const cost_params_t *p, const cost_tensor_t *t, sync_method_t m)
{
    if (!cost_method_allowed(p, t, m)) return -1;
    cost_params_t even = *p;
    even.kv_block_bytes = 0;
    even.block_shard = NULL;
    return cost_layer(&even, t, m).time_ns;
}

/* The search's state: the shard loads, and each unit's chain per method (fixed). */
typedef struct {
    const hybrid_units_t *h;
    shard_loads_t loads;
    int64_t (*chain_ns)[SYNC_METHOD_COUNT]; /* [n_units]; NULL: priced on the fly */
} search_t;

static hybrid_cost_t cost_with(search_t *st, const sync_method_t *method)
{
    const hybrid_units_t *h = st->h;
    const cost_params_t *p = h->cost;
    shard_loads_t *s = &st->loads;
    hybrid_cost_t c = {0};
    int64_t spread = 0, block = 0; /* every node's bytes apart from its own shard's */
    int64_t ps_total = 0, rack_other = 0; /* PS bytes; SFB and ring bytes per rack link */
    double update_flops = 0;
    int64_t S = p->nodes_per_rack, P1 = p->workers;
    loads_reset(s);
    for (int u = 0; u < h->n_units; u++) {
        const cost_tensor_t *t = &h->tensor[u];
        sync_method_t m = method[u];
        if (m == SYNC_NONE) continue;
        int64_t ps = unit_ps_bytes(t, m);
        loads_add_tensor(s, ps, block);
        block += cost_ps_blocks(p, ps);
        spread += ps; /* pushes to the other shards, pulls from them */
        ps_total += ps;
        if (m == SYNC_SFB) {
            int64_t k = cost_sfb_k(p, t), peer = cost_sfb_peer_bytes(p, k, t->m, t->n);
            spread += (P1 - 1) * peer;
            rack_other += S * (P1 - S) * peer; /* S workers' factors to the P1 - S outside */
            update_flops += 2.0 * (double)k * (double)t->m * (double)t->n * (p->workers - 1);
        }
        if (m == SYNC_ALLREDUCE) { /* the ring leaves each rack once a step, as a NIC */
            int64_t ring = cost_allreduce_bytes(p->workers, t->weight_bytes + t->bias_bytes);
            spread += ring;
            rack_other += ring;
        }
        int64_t r, b;
        c.local_ns += cost_local(p, t, m, &r, &b);
        int64_t chain = st->chain_ns ? st->chain_ns[u][m] : unit_chain_ns(p, t, m);
        ASSERT(chain >= 0, "unit %d: %s not allowed", u, sync_method_name(m));
        c.sum_ns += chain;
        if (chain > c.slowest_ns) c.slowest_ns = chain;
    }
    /* A shard node sends each of its pieces to the P1 - 1 other workers and pushes the rest
     * of each tensor; it receives as much. A node that holds no shard has only `spread`. */
    c.shard_bytes = loads_max(s);
    c.nic_bytes = spread + (int64_t)(p->workers - 2) * c.shard_bytes;
    c.nic_ns = ns_of((double)c.nic_bytes, p->bw_Bps);
    c.server_ns = ns_of((double)p->workers * (double)c.shard_bytes, p->server_Bps);
    c.update_ns = ns_of(update_flops, p->gemm_flops);
    if (cost_racks(p) > 1) {
        c.rack_bytes = loads_rack_max(s, ps_total) + rack_other;
        c.rack_ns = ns_of((double)c.rack_bytes, p->rack_Bps);
    }
    const int64_t load[] = {c.nic_ns, c.server_ns, c.update_ns, c.local_ns, c.rack_ns};
    for (size_t i = 0; i < sizeof load / sizeof load[0]; i++)
        if (load[i] > c.load_ns) c.load_ns = load[i];
    c.bound_ns = c.load_ns > c.slowest_ns ? c.load_ns : c.slowest_ns;
    return c;
}

static void search_init(search_t *st, const hybrid_units_t *h)
{
    ASSERT(h->cost->workers >= 2 && h->cost->shards >= 1, "%d workers, %d shards",
           h->cost->workers, h->cost->shards);
    *st = (search_t){.h = h};
    shard_loads_t *s = &st->loads;
    *s = (shard_loads_t){.p = h->cost, .placement = h->placement, .shards = h->cost->shards};
    s->diff = xcalloc((size_t)s->shards + 1, sizeof *s->diff);
    s->load = xcalloc((size_t)s->shards, sizeof *s->load);
    s->heap = xcalloc((size_t)s->shards, sizeof *s->heap);
}

static void search_fini(search_t *st)
{
    free(st->loads.diff);
    free(st->loads.load);
    free(st->loads.heap);
    free(st->chain_ns);
}

hybrid_cost_t hybrid_cost(const hybrid_units_t *h, const sync_method_t *method)
{
    search_t st;
    search_init(&st, h);
    hybrid_cost_t c = cost_with(&st, method);
    search_fini(&st);
    return c;
}

int hybrid_cost_less(const hybrid_cost_t *a, const hybrid_cost_t *b)
{
    if (a->bound_ns != b->bound_ns) return a->bound_ns < b->bound_ns;
    if (a->load_ns != b->load_ns) return a->load_ns < b->load_ns;
    return a->sum_ns < b->sum_ns;
}

void hybrid_choose(const hybrid_units_t *h, unsigned mask, sync_method_t *method)
{
    int n = h->n_units;
    search_t st;
    search_init(&st, h);
    st.chain_ns = xcalloc((size_t)n, sizeof *st.chain_ns);
    for (int u = 0; u < n; u++)
        for (int m = 0; m < SYNC_METHOD_COUNT; m++)
            st.chain_ns[u][m] = method[u] == SYNC_NONE || !(mask & (1u << m))
                                    ? -1
                                    : unit_chain_ns(h->cost, &h->tensor[u], (sync_method_t)m);
    sync_method_t *cand = xcalloc((size_t)n, sizeof *cand);
    sync_method_t *per_layer = xcalloc((size_t)n, sizeof *per_layer);
    memcpy(per_layer, method, (size_t)n * sizeof *method);
    hybrid_cost_t best = cost_with(&st, method), layer_cost = best;
    /* one scheme for every unit: PS, SFB where a unit allows it (else PS), all-reduce */
    static const sync_method_t singles[] = {SYNC_PS, SYNC_SFB, SYNC_ALLREDUCE};
    for (size_t k = 0; k < sizeof singles / sizeof singles[0]; k++) {
        if (!(mask & (1u << singles[k]))) continue;
        for (int u = 0; u < n; u++)
            cand[u] = method[u] == SYNC_NONE            ? SYNC_NONE
                      : st.chain_ns[u][singles[k]] >= 0 ? singles[k]
                                                        : SYNC_PS;
        hybrid_cost_t c = cost_with(&st, cand);
        if (hybrid_cost_less(&c, &best)) {
            best = c;
            memcpy(method, cand, (size_t)n * sizeof *method);
        }
    }
    /* flip one unit at a time while that lowers the cost; ties keep the current method */
    static const sync_method_t order[] = {SYNC_SFB, SYNC_PS, SYNC_ALLREDUCE};
    for (int pass = 0; pass < HYBRID_MAX_PASSES; pass++) {
        int changed = 0;
        for (int u = 0; u < n; u++) {
            if (method[u] == SYNC_NONE) continue;
            for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
                sync_method_t was = method[u], m = order[k];
                if (m == was || st.chain_ns[u][m] < 0) continue;
                method[u] = m;
                hybrid_cost_t c = cost_with(&st, method);
                if (hybrid_cost_less(&c, &best)) {
                    best = c;
                    changed = 1;
                } else {
                    method[u] = was;
                }
            }
        }
        if (!changed) break;
    }
    if (best.bound_ns * (100 + HYBRID_CLEAR_GAIN_PCT) >= layer_cost.bound_ns * 100)
        memcpy(method, per_layer, (size_t)n * sizeof *method);
    free(per_layer);
    free(cand);
    search_fini(&st);
}
