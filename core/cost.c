#include "cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static const char *const s_names[SYNC_METHOD_COUNT] = {"none", "ps", "sfb", "allreduce"};

const char *sync_method_name(sync_method_t m)
{
    ASSERT(m >= 0 && m < SYNC_METHOD_COUNT, "bad sync method %d", m);
    return s_names[m];
}

static int64_t xfer_ns(const cost_params_t *p, int64_t bytes)
{
    ASSERT(p->bw_Bps > 0, "bandwidth must be positive");
    return bytes > 0 ? llround((double)bytes / p->bw_Bps * 1e9) : 0;
}

int cost_racks(const cost_params_t *p)
{
    int S = p->nodes_per_rack, P = p->workers;
    return S > 0 && S < P && P % S == 0 ? P / S : 1;
}

/* Time of bytes through one rack link (0 with one rack). */
static int64_t rack_ns(const cost_params_t *p, int64_t bytes)
{
    if (cost_racks(p) <= 1 || bytes <= 0) return 0;
    ASSERT(p->rack_Bps > 0, "racks without rack bandwidth");
    return llround((double)bytes / p->rack_Bps * 1e9);
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static const char *const s_place_names[KV_PLACE_COUNT] = {"least_loaded", "round_robin"};

const char *kv_place_name(kv_place_t k)
{
    ASSERT(k >= 0 && k < KV_PLACE_COUNT, "bad KV placement %d", k);
    return s_place_names[k];
}

int kv_place_parse(const char *name, kv_place_t *k)
{
    for (int i = 0; i < KV_PLACE_COUNT; i++)
        if (!strcmp(name, s_place_names[i])) {
            *k = (kv_place_t)i;
            return 0;
        }
    return -1;
}

int cost_kv_next_shard(kv_place_t k, const int64_t *load, int shards, int64_t block)
{
    ASSERT(shards >= 1, "%d shards", shards);
    if (k == KV_PLACE_ROUND_ROBIN) return (int)(block % shards);
    int best = 0;
    for (int s = 1; s < shards; s++)
        if (load[s] < load[best]) best = s;
    return best;
}

int cost_value_bytes(const cost_params_t *p) { return p->wire_bytes > 0 ? p->wire_bytes : 4; }

int64_t cost_ps_blocks(const cost_params_t *p, int64_t bytes)
{
    if (bytes <= 0) return 0;
    if (p->kv_block_bytes > 0) return (bytes + p->kv_block_bytes - 1) / p->kv_block_bytes;
    int w = cost_value_bytes(p);
    int64_t elems = (bytes + w - 1) / w;
    return elems < p->shards ? elems : p->shards;
}

/* Even split: this shard's position in the tensor's rotation, which starts at block0. */
static int64_t rotation_pos(const cost_params_t *p, int64_t block0, int shard)
{
    int64_t P2 = p->shards;
    return ((shard - block0) % P2 + P2) % P2;
}

static int64_t even_piece_bytes(const cost_params_t *p, int64_t bytes, int64_t r)
{
    /* Even split in whole values; the first (elems % P2) positions hold one more. */
    int w = cost_value_bytes(p);
    int64_t elems = bytes / w, P2 = p->shards;
    int64_t b = (elems / P2 + (r < elems % P2 ? 1 : 0)) * w;
    if (r == 0) b += bytes % w; /* partial values never occur in a plan; keep the sum exact */
    return b;
}

int64_t cost_ps_block_bytes(const cost_params_t *p, int64_t bytes, int64_t i)
{
    int64_t nb = cost_ps_blocks(p, bytes);
    ASSERT(i >= 0 && i < nb, "block %lld of %lld", (long long)i, (long long)nb);
    if (p->kv_block_bytes <= 0) return even_piece_bytes(p, bytes, i);
    int64_t B = p->kv_block_bytes;
    return i < nb - 1 ? B : bytes - (nb - 1) * B;
}

int cost_ps_block_shard(const cost_params_t *p, int64_t bytes, int64_t block0, int64_t i)
{
    ASSERT(i >= 0 && i < cost_ps_blocks(p, bytes), "block %lld", (long long)i);
    if (p->kv_block_bytes > 0 && p->block_shard) return p->block_shard[block0 + i];
    return (int)((block0 + i) % p->shards);
}

int64_t cost_ps_shard_bytes(const cost_params_t *p, int64_t bytes, int64_t block0, int shard)
{
    ASSERT(shard >= 0 && shard < p->shards, "shard %d of %d", shard, p->shards);
    if (bytes <= 0) return 0;
    int64_t P2 = p->shards, r = rotation_pos(p, block0, shard);
    if (p->kv_block_bytes <= 0) return r < cost_ps_blocks(p, bytes) ? even_piece_bytes(p, bytes, r) : 0;
    int64_t nb = cost_ps_blocks(p, bytes), b = 0;
    if (p->block_shard) {
        for (int64_t i = 0; i < nb; i++)
            if (p->block_shard[block0 + i] == shard) b += cost_ps_block_bytes(p, bytes, i);
        return b;
    }
    if (r >= nb) return 0;
    int64_t B = p->kv_block_bytes;
    b = ((nb - 1 - r) / P2 + 1) * B;
    if ((nb - 1) % P2 == r) b -= nb * B - bytes; /* the last, shorter block is here */
    return b;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int cost_ps_pieces(const cost_params_t *p, int64_t bytes, int64_t block0, int *shard,
                   int64_t *piece_bytes)
{
    int64_t nb = cost_ps_blocks(p, bytes);
    int n = 0;
    if (nb == 0) return 0;
    if (p->kv_block_bytes > 0 && p->block_shard) {
        /* the distinct shards of the tensor's blocks, ascending */
        for (int64_t i = 0; i < nb && n < p->shards; i++) {
            int s = p->block_shard[block0 + i];
            int seen = 0;
            for (int j = 0; j < n && !seen; j++) seen = shard[j] == s;
            if (!seen) shard[n++] = s;
        }
        qsort(shard, (size_t)n, sizeof *shard, cmp_int);
    } else {
        /* a rotation of min(blocks, P2) shards from block0 mod P2, listed ascending */
        int64_t P2 = p->shards, h = nb < P2 ? nb : P2, start = block0 % P2;
        int64_t wrapped = start + h > P2 ? start + h - P2 : 0;
        for (int64_t s = 0; s < wrapped; s++) shard[n++] = (int)s;
        for (int64_t s = start; s < start + h - wrapped; s++) shard[n++] = (int)s;
    }
    for (int j = 0; j < n; j++) piece_bytes[j] = cost_ps_shard_bytes(p, bytes, block0, shard[j]);
    return n;
}

cost_t cost_ps(const cost_params_t *p, int64_t bytes, int64_t block0)
{
    cost_t c = {0};
    int P1 = p->workers, P2 = p->shards;
    ASSERT(P1 >= 1 && P2 >= 1 && P2 <= P1, "P1 %d, P2 %d", P1, P2);
    if (P1 == 1 || bytes <= 0) return c;
    int64_t push = 0, bmax = 0;
    if (P1 > P2) {
        c.worker_sent = c.worker_recv = bytes;
        push = bytes;
    }
    int64_t nb = cost_ps_blocks(p, bytes);
    int cap = (int)(nb < P2 ? nb : P2);
    int *shard = xcalloc((size_t)cap, sizeof *shard);
    int64_t *piece = xcalloc((size_t)cap, sizeof *piece);
    int holders = cost_ps_pieces(p, bytes, block0, shard, piece);
    /* Only holders differ from zero; a non-holder colocated node just sends its gradient. */
    if (holders < P2) {
        if (bytes > c.node_sent) c.node_sent = c.node_recv = bytes;
        if (bytes > push) push = bytes;
    }
    for (int i = 0; i < holders; i++) {
        int64_t b = piece[i];
        if (b > bmax) bmax = b;
        int64_t node = (bytes - b) + (int64_t)(P1 - 1) * b;
        if (node > c.node_sent) c.node_sent = c.node_recv = node;
        int64_t ph = bytes - b > (int64_t)(P1 - 1) * b ? bytes - b : (int64_t)(P1 - 1) * b;
        if (ph > push) push = ph;
    }
    /* the busiest rack link of a phase: S (bytes - held_q) one way, held_q (P - S) the other */
    int64_t rack_phase = 0;
    int R = cost_racks(p);
    for (int q = 0; R > 1 && q < R; q++) {
        int64_t S = p->nodes_per_rack, held = 0;
        for (int i = 0; i < holders; i++) held += shard[i] / S == q ? piece[i] : 0;
        int64_t out = S * (bytes - held), in = held * (P1 - S);
        rack_phase = max64(rack_phase, max64(out, in));
        c.rack_sent = max64(c.rack_sent, out + in);
    }
    free(shard);
    free(piece);
    c.server_sent = c.server_recv = (int64_t)P1 * bmax;
    int64_t apply = p->server_Bps > 0 ? llround((double)P1 * bmax / p->server_Bps * 1e9) : 0;
    c.time_ns = 2 * (p->lat_ns + max64(xfer_ns(p, push), rack_ns(p, rack_phase))) + apply;
    return c;
}

int64_t cost_sfb_peer_bytes(const cost_params_t *p, int64_t k, int64_t m, int64_t n)
{
    return k * (m + n) * cost_value_bytes(p);
}

int64_t cost_sfb_k(const cost_params_t *p, const cost_tensor_t *t)
{
    return (int64_t)p->batch * (t->rows > 0 ? t->rows : 1);
}

cost_t cost_sfb_rows(const cost_params_t *p, int64_t rows, int64_t m, int64_t n)
{
    cost_t c = {0};
    int P1 = p->workers;
    if (P1 == 1) return c;
    int64_t k = (int64_t)p->batch * rows;
    int64_t b = (int64_t)(P1 - 1) * cost_sfb_peer_bytes(p, k, m, n);
    c.worker_sent = c.worker_recv = b;
    c.node_sent = c.node_recv = b;
    int64_t recon = 0;
    if (p->gemm_flops > 0)
        recon = llround(2.0 * (double)k * (double)m * (double)n * (P1 - 1) / p->gemm_flops * 1e9);
    int64_t S = p->nodes_per_rack;
    if (cost_racks(p) > 1) c.rack_sent = S * (P1 - S) * cost_sfb_peer_bytes(p, k, m, n);
    c.time_ns = p->lat_ns + max64(xfer_ns(p, b), rack_ns(p, c.rack_sent)) + recon;
    return c;
}

cost_t cost_sfb(const cost_params_t *p, int64_t m, int64_t n) { return cost_sfb_rows(p, 1, m, n); }

int cost_allreduce_steps(int nodes) { return nodes <= 1 ? 0 : 2 * (nodes - 1); }

int64_t cost_allreduce_chunk_bytes(int nodes, int64_t bytes)
{
    if (nodes <= 1 || bytes <= 0) return 0;
    return (bytes + nodes - 1) / nodes;
}

int64_t cost_allreduce_bytes(int nodes, int64_t bytes)
{
    return (int64_t)cost_allreduce_steps(nodes) * cost_allreduce_chunk_bytes(nodes, bytes);
}

int64_t cost_allreduce_piece_bytes(const cost_params_t *p, int64_t chunk_bytes)
{
    int64_t vb = cost_value_bytes(p), values = (chunk_bytes + vb - 1) / vb;
    int64_t piece = (values + COST_RING_PIPELINE_DEPTH - 1) / COST_RING_PIPELINE_DEPTH;
    if (piece < COST_RING_PIECE_MIN_VALUES) piece = COST_RING_PIECE_MIN_VALUES;
    if (piece > COST_RING_PIECE_MAX_VALUES) piece = COST_RING_PIECE_MAX_VALUES;
    return piece * vb < chunk_bytes ? piece * vb : chunk_bytes;
}

int64_t cost_allreduce_step_gap_ns(const cost_params_t *p, int64_t chunk_bytes, int last)
{
    if (last) return p->lat_ns;
    int64_t piece = cost_allreduce_piece_bytes(p, chunk_bytes);
    int64_t behind = max64(xfer_ns(p, chunk_bytes), rack_ns(p, chunk_bytes)) -
                     max64(xfer_ns(p, piece), rack_ns(p, piece));
    return max64(0, p->lat_ns - behind);
}

cost_t cost_allreduce(const cost_params_t *p, int64_t bytes)
{
    cost_t c = {0};
    int P = p->workers;
    if (P == 1 || bytes <= 0) return c;
    int64_t b = cost_allreduce_bytes(P, bytes);
    c.worker_sent = c.worker_recv = c.node_sent = c.node_recv = b;
    /* 2(P-1) dependent steps: a node forwards a piece of a chunk only once it has arrived
     * from its predecessor, so a step pays what of the latency its chunk does not hide (the
     * runtime's pipelined ring, runtime/sync/allreduce.c, as the simulator executes it) */
    int64_t chunk = cost_allreduce_chunk_bytes(P, bytes);
    int64_t step_ns = max64(xfer_ns(p, chunk), rack_ns(p, chunk)), S = cost_allreduce_steps(P);
    c.time_ns = S * step_ns + (S - 1) * cost_allreduce_step_gap_ns(p, chunk, 0) +
                cost_allreduce_step_gap_ns(p, chunk, 1);
    if (cost_racks(p) > 1) c.rack_sent = b; /* one chunk per step leaves each rack */
    return c;
}

bool cost_method_allowed(const cost_params_t *p, const cost_tensor_t *t, sync_method_t m)
{
    if (p->workers == 1) return m == SYNC_NONE;
    switch (m) {
    case SYNC_NONE: return false;
    case SYNC_PS:
    case SYNC_ALLREDUCE: return true;
    case SYNC_SFB: return t->m > 0 && t->n > 0;
    default: return false;
    }
}

static cost_t add_max(cost_t a, cost_t b)
{
    cost_t c = {a.worker_sent + b.worker_sent, a.worker_recv + b.worker_recv,
                a.server_sent + b.server_sent, a.server_recv + b.server_recv,
                a.node_sent + b.node_sent,     a.node_recv + b.node_recv,
                a.time_ns > b.time_ns ? a.time_ns : b.time_ns, a.rack_sent + b.rack_sent};
    return c;
}

int64_t cost_local(const cost_params_t *p, const cost_tensor_t *t, sync_method_t m,
                   int64_t *reduce_bytes, int64_t *bcast_bytes)
{
    *reduce_bytes = *bcast_bytes = 0;
    int d = p->devices > 1 ? p->devices : 1;
    int64_t all = t->weight_bytes + t->bias_bytes;
    int64_t factors = cost_sfb_peer_bytes(p, cost_sfb_k(p, t), t->m, t->n); /* a node's */
    if (p->host_staging) {
        if (m == SYNC_NONE) return 0;
        int64_t own = m == SYNC_SFB ? factors / d + t->bias_bytes : all;
        /* SFB: every device but itself, of every node */
        int64_t back = m == SYNC_SFB ? ((int64_t)p->workers * d - 1) * (own - t->bias_bytes) +
                                           t->bias_bytes
                                     : all;
        *reduce_bytes = (int64_t)d * own;
        *bcast_bytes = (int64_t)d * back;
        ASSERT(p->intra_Bps > 0, "host staging without an interconnect");
        return 2 * p->intra_lat_ns +
               llround((double)(*reduce_bytes + *bcast_bytes) / p->intra_Bps * 1e9);
    }
    if (d <= 1) return 0; /* SYNC_NONE (one node): the devices still reduce and broadcast */
    if (m == SYNC_SFB) /* the other devices' factors, and their biases' gradients */
        *reduce_bytes = (int64_t)(d - 1) * (factors / d + t->bias_bytes);
    else
        *reduce_bytes = (int64_t)(d - 1) * all;
    *bcast_bytes = (int64_t)(d - 1) * all;
    ASSERT(p->intra_Bps > 0, "a node of %d devices without an interconnect", d);
    return 2 * p->intra_lat_ns +
           llround((double)(*reduce_bytes + *bcast_bytes) / p->intra_Bps * 1e9);
}

static cost_t cost_network(const cost_params_t *p, const cost_tensor_t *t, sync_method_t m)
{
    cost_t zero = {0};
    int64_t all = t->weight_bytes + t->bias_bytes;
    switch (m) {
    case SYNC_NONE: return zero;
    case SYNC_PS: return cost_ps(p, all, t->block0);
    case SYNC_ALLREDUCE: return cost_allreduce(p, all);
    case SYNC_SFB: {
        cost_t s = cost_sfb_rows(p, t->rows > 0 ? t->rows : 1, t->m, t->n);
        return t->bias_bytes > 0 ? add_max(s, cost_ps(p, t->bias_bytes, t->block0)) : s;
    }
    default: ASSERT(0, "bad sync method %d", m);
    }
    return zero;
}

cost_t cost_layer(const cost_params_t *p, const cost_tensor_t *t, sync_method_t m)
{
    cost_t c = cost_network(p, t, m);
    int64_t r, b;
    c.time_ns += cost_local(p, t, m, &r, &b);
    return c;
}

sync_method_t cost_choose(const cost_params_t *p, const cost_tensor_t *t, unsigned mask)
{
    if (p->workers == 1) return SYNC_NONE;
    /* Preference order for ties: SFB, PS, all-reduce. */
    static const sync_method_t order[] = {SYNC_SFB, SYNC_PS, SYNC_ALLREDUCE};
    sync_method_t best = SYNC_NONE;
    int64_t best_ns = INT64_MAX;
    for (int i = 0; i < 3; i++) {
        sync_method_t m = order[i];
        if (!(mask & (1u << m)) || !cost_method_allowed(p, t, m)) continue;
        int64_t ns = cost_layer(p, t, m).time_ns;
        if (ns < best_ns) {
            best = m;
            best_ns = ns;
        }
    }
    if (best == SYNC_NONE) best = SYNC_PS; /* nothing in the mask fits: PS always can */
    return best;
}

sync_method_t cost_best_scheme_bytes(int64_t m, int64_t n, int batch, int p1, int p2)
{
    /* 2K(P1-1)(M+N) <= 2MN(P1+P2-2)/P2, multiplied through by P2/2 to stay in integers. */
    int64_t lhs = (int64_t)batch * (p1 - 1) * (m + n) * p2;
    int64_t rhs = m * n * (int64_t)(p1 + p2 - 2);
    return lhs <= rhs ? SYNC_SFB : SYNC_PS;
}
