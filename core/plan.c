#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

static const char *const s_kind_names[OP_KIND_COUNT] = {
    "FWD", "BWD", "PUSH", "APPLY", "PULL", "SFB", "UPDATE", "ALLREDUCE", "LREDUCE", "LBCAST",
    "VERDICT", "VOTE"};

const char *op_kind_name(op_kind_t k)
{
    ASSERT(k >= 0 && k < OP_KIND_COUNT, "bad op kind %d", k);
    return s_kind_names[k];
}

const char *send_order_name(send_order_t s)
{
    return s == SEND_ORDER_LAYER ? "layer" : s == SEND_ORDER_FAIR ? "fair" : "arrival";
}

int send_order_parse(const char *text, send_order_t *out)
{
    if (!strcmp(text, "arrival")) *out = SEND_ORDER_ARRIVAL;
    else if (!strcmp(text, "layer")) *out = SEND_ORDER_LAYER;
    else if (!strcmp(text, "fair")) *out = SEND_ORDER_FAIR;
    else return -1;
    return 0;
}

int64_t send_order_slice_bytes(send_order_t s, int64_t given)
{
    if (s == SEND_ORDER_ARRIVAL) return 0;
    if (given > 0) return given;
    return s == SEND_ORDER_FAIR ? PLAN_SLICE_BYTES_FAIR_DEFAULT : PLAN_SLICE_BYTES_DEFAULT;
}

static unsigned scheme_mask(scheme_base_t b)
{
    switch (b) {
    case SCHEME_PS: return 1u << SYNC_PS;
    case SCHEME_SFB: return 1u << SYNC_SFB;
    case SCHEME_ALLREDUCE: return 1u << SYNC_ALLREDUCE;
    case SCHEME_HYBRID: return 1u << SYNC_PS | 1u << SYNC_SFB;
    case SCHEME_HYBRID3: return 1u << SYNC_PS | 1u << SYNC_SFB | 1u << SYNC_ALLREDUCE;
    default: ASSERT(0, "bad scheme base %d", b);
    }
    return 0;
}

typedef struct {
    plan_t *p;
    int cap_ops, cap_deps;
} builder_t;

static int add_op(builder_t *b, op_kind_t kind, int unit, op_place_t place, op_resource_t res,
                  int64_t bytes, double flops, int priority)
{
    plan_t *p = b->p;
    if (p->n_ops == b->cap_ops) {
        b->cap_ops = b->cap_ops ? 2 * b->cap_ops : 64;
        p->ops = xrealloc(p->ops, (size_t)b->cap_ops * sizeof *p->ops);
    }
    int id = p->n_ops++;
    p->ops[id] = (plan_op_t){id, kind, unit, place, res, bytes, flops, priority, 0, 0, 1};
    return id;
}

static void add_dep(builder_t *b, int op, int on, dep_scope_t scope, int back)
{
    plan_t *p = b->p;
    ASSERT(on >= 0 && on < p->n_ops, "dependency on missing op %d", on);
    ASSERT(scope != DEP_LOCAL || p->ops[op].place == p->ops[on].place ||
               p->ops[on].place == PLACE_WORKERS,
           "local dependency across placements (%s on %s)", op_kind_name(p->ops[op].kind),
           op_kind_name(p->ops[on].kind));
    if (p->n_deps == b->cap_deps) {
        b->cap_deps = b->cap_deps ? 2 * b->cap_deps : 128;
        p->deps = xrealloc(p->deps, (size_t)b->cap_deps * sizeof *p->deps);
    }
    p->deps[p->n_deps++] = (plan_dep_t){on, scope, back};
    p->ops[op].n_deps++;
}

/* add_dep, unless op already has that dependency (the members of an all-reduce bucket share
 * its op: FWD 0 without WFBP waits for it once). op's deps are the last ones added. */
static void add_dep_once(builder_t *b, int op, int on, dep_scope_t scope, int back)
{
    const plan_t *p = b->p;
    for (int d = p->ops[op].dep_first; d < p->n_deps; d++)
        if (p->deps[d].op == on && p->deps[d].scope == scope && p->deps[d].iter_back == back)
            return;
    add_dep(b, op, on, scope, back);
}

/* The deps that say "unit u's parameters of iteration t - back are in place". */
static void add_sync_deps(builder_t *b, int op, const plan_unit_t *u, int back)
{
    if (u->op_pull >= 0) add_dep(b, op, u->op_pull, DEP_RECV, back);
    if (u->op_update >= 0) add_dep(b, op, u->op_update, DEP_LOCAL, back);
    if (u->op_allreduce >= 0) add_dep_once(b, op, u->op_allreduce, DEP_RECV, back);
}

/* The deps that say "unit u's parameters of iteration t - back are on every device": its
 * local broadcast on a node of several devices, else its sync. */
static void add_params_deps(builder_t *b, int op, const plan_unit_t *u, int back)
{
    if (u->op_lbcast >= 0) add_dep(b, op, u->op_lbcast, DEP_LOCAL, back);
    else add_sync_deps(b, op, u, back);
}

/* Cut the all-reduce units into buckets (plan.h): backward order, skipping units synced
 * otherwise; a bucket closes once it holds >= B bytes (B = 0: every unit alone). */
static void buckets_build(plan_t *p)
{
    p->buckets = xcalloc((size_t)p->n_units, sizeof *p->buckets);
    int open = -1;
    for (int u = p->n_units - 1; u >= 0; u--) {
        plan_unit_t *un = &p->units[u];
        un->bucket = -1;
        if (un->method != SYNC_ALLREDUCE) continue;
        if (open < 0) {
            open = p->n_buckets++;
            p->buckets[open] = (plan_bucket_t){.first = u, .last = u, .op = -1};
        }
        plan_bucket_t *bk = &p->buckets[open];
        un->bucket = open;
        bk->first = u;
        bk->n_units++;
        bk->bytes += un->tensor.weight_bytes + un->tensor.bias_bytes;
        if (bk->bytes >= p->allreduce_bucket_bytes) open = -1;
    }
    for (int k = 0; k < p->n_buckets; k++) {
        plan_bucket_t *bk = &p->buckets[k];
        bk->ar_bytes = cost_allreduce_bytes(p->workers, bk->bytes);
        bk->ar_chunk_bytes = cost_allreduce_chunk_bytes(p->workers, bk->bytes);
        bk->cost_ns = cost_allreduce(&p->cost, bk->bytes).time_ns;
    }
}

/* The KV block table under construction: each shard's bytes so far (committed units). */
typedef struct {
    plan_t *p;
    int64_t *load;
    int64_t cap;
    int64_t *scratch;
} kv_table_t;

static void kv_reserve(kv_table_t *kv, int64_t n)
{
    plan_t *p = kv->p;
    if (n <= kv->cap) return;
    kv->cap = n > 2 * kv->cap ? n : 2 * kv->cap;
    p->kv_block_shard = xrealloc(p->kv_block_shard, (size_t)kv->cap * sizeof *p->kv_block_shard);
    p->cost.block_shard = p->kv_block_shard;
}

/* Place a tensor of `bytes` from global block block0 as if it were committed, so the cost
 * model can price PS for it; the committed loads are left as they were. */
static void kv_preview(kv_table_t *kv, int64_t block0, int64_t bytes)
{
    plan_t *p = kv->p;
    int64_t nb = cost_ps_blocks(&p->cost, bytes);
    kv_reserve(kv, block0 + nb);
    if (!kv->scratch) kv->scratch = xcalloc((size_t)p->shards, sizeof *kv->scratch);
    memcpy(kv->scratch, kv->load, (size_t)p->shards * sizeof *kv->scratch);
    for (int64_t i = 0; i < nb; i++) {
        int s = cost_kv_next_shard(p->kv_placement, kv->scratch, p->shards, block0 + i);
        p->kv_block_shard[block0 + i] = s;
        kv->scratch[s] += cost_ps_block_bytes(&p->cost, bytes, i);
    }
}

/* Commit the unit's PS tensor (its first blocks are where kv_preview put them). */
static void kv_commit(kv_table_t *kv, int64_t block0, int64_t bytes)
{
    plan_t *p = kv->p;
    int64_t nb = cost_ps_blocks(&p->cost, bytes);
    for (int64_t i = 0; i < nb; i++)
        kv->load[p->kv_block_shard[block0 + i]] += cost_ps_block_bytes(&p->cost, bytes, i);
}

/* Every unit's shards and bytes, ascending by shard: what PUSH, APPLY and PULL walk. */
static void pieces_build(plan_t *p)
{
    int64_t total = 0;
    for (int u = 0; u < p->n_units; u++) {
        int64_t nb = cost_ps_blocks(&p->cost, p->units[u].ps_bytes);
        total += nb < p->shards ? nb : p->shards;
    }
    ASSERT(total < INT32_MAX, "%lld PS pieces", (long long)total);
    p->pieces = xcalloc((size_t)total + 1, sizeof *p->pieces);
    int *shard = xcalloc((size_t)p->shards, sizeof *shard);
    int64_t *bytes = xcalloc((size_t)p->shards, sizeof *bytes);
    for (int u = 0; u < p->n_units; u++) {
        plan_unit_t *un = &p->units[u];
        un->piece0 = p->n_pieces;
        un->n_pieces = cost_ps_pieces(&p->cost, un->ps_bytes, un->tensor.block0, shard, bytes);
        for (int i = 0; i < un->n_pieces; i++)
            p->pieces[p->n_pieces++] = (plan_piece_t){shard[i], bytes[i]};
    }
    free(shard);
    free(bytes);
}

/* Each unit's tensor, each method's time alone, its method (forced[u] when given, else the
 * per-layer choice among mask: cost_choose) and its KV blocks: PS tensors take global blocks
 * in unit order. Called again with forced methods, it starts over. */
static void units_assign(plan_t *p, const model_t *m, unsigned mask, const sync_method_t *forced)
{
    kv_table_t kv = {.p = p};
    if (p->cost.kv_block_bytes > 0) kv.load = xcalloc((size_t)p->shards, sizeof *kv.load);
    int64_t block = 0;
    for (int u = 0; u < p->n_units; u++) {
        plan_unit_t *un = &p->units[u];
        for (int j = 0; j < SYNC_METHOD_COUNT; j++) un->cost_ns[j] = -1;
        un->method = SYNC_NONE;
        un->ps_bytes = un->sfb_peer_bytes = un->ar_bytes = un->ar_chunk_bytes = 0;
        if (un->layer < 0) continue;
        const layer_t *l = &m->layers[un->layer];
        cost_tensor_t t = {0};
        if (layer_sf_rows(l) > 0) { /* fc, or a linear layer over rows positions */
            t.m = l->out_shape.c;
            t.n = l->type == LAYER_FC ? shape_count(l->in_shape) : l->in_shape.c;
            t.rows = layer_sf_rows(l);
        }
        t.weight_bytes = l->weights * cost_value_bytes(&p->cost); /* at the wire precision */
        t.bias_bytes = l->biases * cost_value_bytes(&p->cost);
        t.block0 = block;
        if (kv.load) kv_preview(&kv, block, t.weight_bytes + t.bias_bytes);
        for (int j = 0; j < SYNC_METHOD_COUNT; j++)
            if (cost_method_allowed(&p->cost, &t, (sync_method_t)j))
                un->cost_ns[j] = cost_layer(&p->cost, &t, (sync_method_t)j).time_ns;
        un->method = forced ? forced[u] : cost_choose(&p->cost, &t, mask);
        un->tensor = t;
        switch (un->method) {
        case SYNC_PS: un->ps_bytes = t.weight_bytes + t.bias_bytes; break;
        case SYNC_SFB:
            un->ps_bytes = t.bias_bytes;
            un->sfb_peer_bytes = cost_sfb_peer_bytes(&p->cost, cost_sfb_k(&p->cost, &t), t.m, t.n);
            break;
        case SYNC_ALLREDUCE:
            un->ar_bytes = cost_allreduce_bytes(p->workers, t.weight_bytes + t.bias_bytes);
            un->ar_chunk_bytes =
                cost_allreduce_chunk_bytes(p->workers, t.weight_bytes + t.bias_bytes);
            break;
        default: break;
        }
        if (kv.load) kv_commit(&kv, block, un->ps_bytes);
        block += cost_ps_blocks(&p->cost, un->ps_bytes);
    }
    free(kv.load);
    free(kv.scratch);
}

/* What the iteration-wide choice (core/hybrid.h) reads of the units built so far. */
static hybrid_units_t units_for_hybrid(const plan_t *p, cost_tensor_t *tensor,
                                       sync_method_t *method)
{
    for (int u = 0; u < p->n_units; u++) {
        tensor[u] = p->units[u].tensor;
        method[u] = p->units[u].method;
    }
    return (hybrid_units_t){.cost = &p->cost, .placement = p->kv_placement,
                            .n_units = p->n_units, .tensor = tensor};
}

/* hybrid and hybrid3: replace the per-layer choice by the cheapest assignment for the
 * iteration as a whole (hybrid_choose), and rebuild the units with it if it differs. */
static void units_choose_for_iteration(plan_t *p, const model_t *m, unsigned mask)
{
    int n = p->n_units;
    cost_tensor_t *tensor = xcalloc((size_t)n, sizeof *tensor);
    sync_method_t *method = xcalloc((size_t)n, sizeof *method);
    int changed = 0;
    hybrid_units_t h = units_for_hybrid(p, tensor, method);
    hybrid_choose(&h, mask, method);
    for (int u = 0; u < n; u++) changed |= method[u] != p->units[u].method;
    if (changed) units_assign(p, m, mask, method);
    free(tensor);
    free(method);
}

hybrid_cost_t plan_iteration_cost(const plan_t *p)
{
    hybrid_cost_t c = {0};
    if (p->workers < 2) return c;
    int n = p->n_units;
    cost_tensor_t *tensor = xcalloc((size_t)n, sizeof *tensor);
    sync_method_t *method = xcalloc((size_t)n, sizeof *method);
    hybrid_units_t h = units_for_hybrid(p, tensor, method);
    c = hybrid_cost(&h, method);
    free(tensor);
    free(method);
    return c;
}

static double range_flops(const model_t *m, int first, int last, int bwd)
{
    double f = 0;
    for (int i = first; i <= last; i++)
        f += (double)(bwd ? m->layers[i].bwd_flops : m->layers[i].fwd_flops);
    return f;
}

int plan_build(plan_t *p, const model_t *m, const cluster_t *c, scheme_t scheme, int staleness,
               int batch, int64_t kv_block_bytes, char *err, size_t errlen)
{
    plan_opts_t o = {.scheme = scheme, .staleness = staleness, .batch = batch,
                     .kv_block_bytes = kv_block_bytes};
    return plan_build_opts(p, m, c, &o, err, errlen);
}

/* The plan's header fields and the cost model's parameters from the cluster. */
static void plan_setup(plan_t *p, const model_t *m, const cluster_t *c, const plan_opts_t *o)
{
    p->allreduce_bucket_bytes = o->allreduce_bucket_bytes;
    p->kv_placement = o->kv_placement;
    p->hybrid_rule = o->hybrid_rule;
    p->precision = o->precision;
    p->wire_precision = o->wire_precision;
    p->send_order = o->send_order;
    p->slice_bytes = send_order_slice_bytes(o->send_order, o->slice_bytes);
    p->model = m;
    p->cluster = *c;
    p->scheme = o->scheme;
    p->staleness = o->staleness;
    p->batch = o->batch;
    p->workers = c->nodes;
    p->shards = cluster_shards(c);
    /* with per-node NICs, a phase ends with the slowest node's */
    double slowest_Bps = cluster_nic_Bps(c);
    for (int n = 0; c->n_nic > 0 && n < c->nodes; n++)
        if (cluster_node_nic_Bps(c, n) < slowest_Bps) slowest_Bps = cluster_node_nic_Bps(c, n);
    p->cost = (cost_params_t){
        .workers = p->workers,
        .shards = p->shards,
        .batch = o->batch * c->devices_per_node,
        .kv_block_bytes = o->kv_block_bytes,
        .bw_Bps = slowest_Bps,
        .nodes_per_rack = cluster_racks(c) > 1 ? c->nodes_per_rack : 0,
        .rack_Bps = cluster_rack_Bps(c),
        .lat_ns = c->lat_ns,
        .server_Bps = c->server_Bps,
        .gemm_flops = device_peak_flops(&c->device, o->precision) * c->device.eff_fc,
        .devices = c->devices_per_node,
        .intra_Bps = c->intra_Bps,
        .intra_lat_ns = c->intra_lat_ns,
        .host_staging = c->host_staging,
        .wire_bytes = precision_bytes(o->wire_precision),
    };
}

/* Units: one per parameter layer; layers before the first one join unit 0. */
static void plan_units(plan_t *p, const model_t *m)
{
    int n_param = 0;
    for (int i = 0; i < m->n_layers; i++) n_param += layer_has_params(&m->layers[i]);
    p->n_units = n_param ? n_param : 1;
    p->units = xcalloc((size_t)p->n_units, sizeof *p->units);
    int k = 0;
    for (int i = 0; i < m->n_layers; i++) {
        if (!layer_has_params(&m->layers[i])) continue;
        p->units[k].layer = i;
        p->units[k].first = k == 0 ? 0 : i;
        if (k > 0) p->units[k - 1].last = i - 1;
        k++;
    }
    if (n_param == 0) p->units[0] = (plan_unit_t){.layer = -1, .first = 0};
    p->units[p->n_units - 1].last = m->n_layers - 1;
}

/* Compute ops in program order: FWD 0..U-1, BWD U-1..0. */
static void plan_compute_ops(builder_t *b, const model_t *m)
{
    plan_t *p = b->p;
    int U = p->n_units;
    double nb = (double)p->batch; /* each device computes its own batch, in parallel */
    for (int u = 0; u < U; u++) {
        plan_unit_t *un = &p->units[u];
        un->op_fwd = add_op(b, OP_FWD, u, PLACE_WORKERS, RES_COMPUTE, 0,
                            nb * range_flops(m, un->first, un->last, 0), 0);
        un->op_bwd = un->op_push = un->op_apply = un->op_pull = -1;
        un->op_sfb = un->op_update = un->op_allreduce = -1;
        un->op_lreduce = un->op_lbcast = un->op_verdict = un->op_vote = -1;
    }
    for (int u = U - 1; u >= 0; u--) {
        plan_unit_t *un = &p->units[u];
        un->op_bwd = add_op(b, OP_BWD, u, PLACE_WORKERS, RES_COMPUTE, 0,
                            nb * range_flops(m, un->first, un->last, 1), 0);
    }
}

/* Whether unit u applies its own update on the node after an all-reduce or a local reduce
 * (not SFB's UPDATE, a shard's APPLY, or a lone worker's update after its backward). */
static bool unit_updates_on_node(const plan_unit_t *un)
{
    return un->layer >= 0 &&
           (un->method == SYNC_ALLREDUCE || (un->method == SYNC_NONE && un->op_lreduce >= 0));
}

/* precision = fp16 on more than one replica: the node's VERDICT and, for each unit that
 * applies its update on the node, an UPDATE of its own after it (plan.h, "Loss scaling"). */
static void plan_verdict_ops(builder_t *b)
{
    plan_t *p = b->p;
    if (p->precision != PRECISION_FP16 || (p->workers < 2 && p->cluster.devices_per_node < 2))
        return;
    int verdict = add_op(b, OP_VERDICT, 0, PLACE_WORKERS, RES_UPDATE, 0, 0, 0), vote = -1;
    for (int u = 0; u < p->n_units && p->workers > 1 && vote < 0; u++)
        if (p->units[u].ps_bytes > 0)
            vote = add_op(b, OP_VOTE, 0, PLACE_WORKERS, RES_NET, PLAN_VOTE_BYTES, 0, 0);
    for (int u = 0; u < p->n_units; u++) {
        plan_unit_t *un = &p->units[u];
        un->op_verdict = verdict;
        un->op_vote = vote;
        if (unit_updates_on_node(un))
            un->op_update = add_op(b, OP_UPDATE, u, PLACE_WORKERS, RES_UPDATE, 0, 0, u);
    }
}

/* VERDICT's deps: every gradient of the iteration on the node (plan.h, "Loss scaling"). */
static void plan_verdict_deps(builder_t *b, int o)
{
    plan_t *p = b->p;
    add_dep(b, o, p->units[0].op_bwd, DEP_LOCAL, 0);
    for (int u = 0; u < p->n_units; u++) {
        const plan_unit_t *un = &p->units[u];
        if (un->op_lreduce >= 0) add_dep(b, o, un->op_lreduce, DEP_LOCAL, 0);
        if (un->op_sfb >= 0) add_dep(b, o, un->op_sfb, DEP_RECV, 0);
        if (un->op_allreduce >= 0) add_dep_once(b, o, un->op_allreduce, DEP_RECV, 0);
    }
    if (p->units[0].op_vote >= 0) add_dep(b, o, p->units[0].op_vote, DEP_RECV, 0);
    add_dep(b, o, o, DEP_LOCAL, 1);
}

/* VOTE's deps: every gradient of the iteration on the node checked as it was pushed. */
static void plan_vote_deps(builder_t *b, int o)
{
    plan_t *p = b->p;
    add_dep(b, o, p->units[0].op_bwd, DEP_LOCAL, 0);
    for (int u = 0; u < p->n_units; u++)
        if (p->units[u].op_push >= 0) add_dep(b, o, p->units[u].op_push, DEP_LOCAL, 0);
    add_dep(b, o, o, DEP_LOCAL, 1);
}

/* Each unit's sync ops (local reduce, PS, SFB, its bucket's all-reduce), then the local
 * broadcasts after them. */
static void plan_sync_ops(builder_t *b)
{
    plan_t *p = b->p;
    const cluster_t *c = &p->cluster;
    int U = p->n_units;
    for (int u = 0; u < U; u++) {
        plan_unit_t *un = &p->units[u];
        /* local steps: the devices' reduce and broadcast, or the copies through host
         * memory (host_staging; none for a unit that does not sync) */
        bool staged = c->host_staging && un->method != SYNC_NONE;
        if ((c->devices_per_node > 1 || staged) && un->layer >= 0) {
            cost_local(&p->cost, &un->tensor, un->method, &un->lreduce_bytes, &un->lbcast_bytes);
            un->op_lreduce = add_op(b, OP_LREDUCE, u, PLACE_WORKERS, RES_INTRA,
                                    un->lreduce_bytes, 0, u);
        }
        if (un->method == SYNC_NONE) continue;
        if (un->ps_bytes > 0) {
            un->op_push = add_op(b, OP_PUSH, u, PLACE_WORKERS, RES_NET, un->ps_bytes, 0, u);
            un->op_apply = add_op(b, OP_APPLY, u, PLACE_SHARDS, RES_SERVER, un->ps_bytes, 0, u);
            un->op_pull = add_op(b, OP_PULL, u, PLACE_SHARDS, RES_NET, un->ps_bytes, 0, u);
        }
        if (un->method == SYNC_SFB) {
            un->op_sfb = add_op(b, OP_SFB, u, PLACE_WORKERS, RES_NET, un->sfb_peer_bytes, 0, u);
            double recon = 2.0 * (double)cost_sfb_k(&p->cost, &un->tensor) *
                           (double)un->tensor.m * (double)un->tensor.n *
                           (p->workers - 1);
            un->op_update = add_op(b, OP_UPDATE, u, PLACE_WORKERS, RES_UPDATE, 0, recon, u);
        }
        /* a bucket's op belongs to its lowest unit, whose BWD completes the bucket */
        plan_bucket_t *bk = un->bucket >= 0 ? &p->buckets[un->bucket] : NULL;
        if (bk && bk->first == u) {
            bk->op = add_op(b, OP_ALLREDUCE, u, PLACE_WORKERS, RES_NET, bk->ar_bytes, 0, u);
            p->ops[bk->op].steps = cost_allreduce_steps(p->workers);
        }
    }
    for (int u = 0; u < U; u++)
        if (p->units[u].bucket >= 0) p->units[u].op_allreduce = p->buckets[p->units[u].bucket].op;
    plan_verdict_ops(b);
    for (int u = 0; u < U; u++) /* the local broadcast, after the unit's sync */
        if (p->units[u].op_lreduce >= 0)
            p->units[u].op_lbcast = add_op(b, OP_LBCAST, u, PLACE_WORKERS, RES_INTRA,
                                           p->units[u].lbcast_bytes, 0, u);
}

/* The compute ops' dependencies: the previous layer's op, and the parameters they read
 * (per unit with WFBP, all of them before the first FWD without). */
static void plan_compute_deps(builder_t *b, int o, int back)
{
    plan_t *p = b->p;
    plan_op_t *op = &p->ops[o];
    plan_unit_t *un = &p->units[op->unit];
    int U = p->n_units;
    if (op->kind == OP_FWD) {
        if (op->unit > 0) add_dep(b, o, p->units[op->unit - 1].op_fwd, DEP_LOCAL, 0);
        else add_dep(b, o, p->units[0].op_bwd, DEP_LOCAL, 1);
        if (p->scheme.wfbp) add_params_deps(b, o, un, back);
        else if (op->unit == 0)
            for (int u = 0; u < U; u++) add_params_deps(b, o, &p->units[u], back);
        return;
    }
    if (op->unit == U - 1) add_dep(b, o, un->op_fwd, DEP_LOCAL, 0);
    else add_dep(b, o, p->units[op->unit + 1].op_bwd, DEP_LOCAL, 0);
    /* fp16: the backward scales the loss by the scale the previous verdict left */
    if (op->unit == U - 1 && un->op_verdict >= 0) add_dep(b, o, un->op_verdict, DEP_LOCAL, 1);
    /* the gradient buffer it fills was read by the syncs of iteration t - back */
    if (un->op_push >= 0) add_dep(b, o, un->op_push, DEP_LOCAL, back);
    if (un->op_sfb >= 0) add_dep(b, o, un->op_sfb, DEP_LOCAL, back);
    if (un->op_allreduce >= 0) add_dep(b, o, un->op_allreduce, DEP_LOCAL, back);
    if (un->op_lreduce >= 0) add_dep(b, o, un->op_lreduce, DEP_LOCAL, back);
    /* fp16: the deferred update reads the gradient buffer */
    if (un->op_update >= 0 && un->method != SYNC_SFB) add_dep(b, o, un->op_update, DEP_LOCAL, back);
}

/* Op o's dependencies (contiguous per op). */
static void plan_op_deps(builder_t *b, int o, int back)
{
    plan_t *p = b->p;
    plan_op_t *op = &p->ops[o];
    plan_unit_t *un = &p->units[op->unit];
    op->dep_first = p->n_deps;
    int trigger = p->scheme.wfbp ? un->op_bwd : p->units[0].op_bwd;
    /* what the network sync waits for: the local reduce on a node of several devices */
    int sync_trigger = un->op_lreduce >= 0 ? un->op_lreduce : trigger;
    switch (op->kind) {
    case OP_FWD:
    case OP_BWD: plan_compute_deps(b, o, back); break;
    case OP_PUSH: add_dep(b, o, sync_trigger, DEP_LOCAL, 0); break;
    case OP_APPLY:
        add_dep(b, o, un->op_push, DEP_RECV, 0);
        add_dep(b, o, o, DEP_LOCAL, 1); /* a shard applies iterations in order */
        if (un->op_verdict >= 0) add_dep(b, o, un->op_verdict, DEP_LOCAL, 0); /* fp16 */
        break;
    case OP_PULL: add_dep(b, o, un->op_apply, DEP_LOCAL, 0); break;
    case OP_SFB:
        add_dep(b, o, sync_trigger, DEP_LOCAL, 0);
        /* the peers' factors it receives go where UPDATE(t - back) read theirs */
        add_dep(b, o, un->op_update, DEP_LOCAL, back);
        break;
    case OP_UPDATE:
        if (un->method == SYNC_SFB) {
            add_dep(b, o, un->op_sfb, DEP_RECV, 0);
            add_dep(b, o, un->op_bwd, DEP_LOCAL, 0);
        } else if (un->op_allreduce >= 0) {
            add_dep(b, o, un->op_allreduce, DEP_RECV, 0);
        } else {
            add_dep(b, o, un->op_lreduce, DEP_LOCAL, 0);
        }
        if (un->op_verdict >= 0) add_dep(b, o, un->op_verdict, DEP_LOCAL, 0);
        add_dep(b, o, o, DEP_LOCAL, 1);
        break;
    case OP_VERDICT: plan_verdict_deps(b, o); break;
    case OP_VOTE: plan_vote_deps(b, o); break;
    /* no barrier: each step waits for its predecessor's chunk (see plan.h) */
    case OP_ALLREDUCE:
        if (un->op_lreduce < 0) {
            add_dep(b, o, trigger, DEP_LOCAL, 0);
            break;
        }
        /* every member's local reduce (the bucket's ring runs over all of them) */
        for (int v = 0; v < p->n_units; v++)
            if (p->units[v].op_allreduce == o) add_dep(b, o, p->units[v].op_lreduce, DEP_LOCAL, 0);
        break;
    case OP_LREDUCE: add_dep(b, o, trigger, DEP_LOCAL, 0); break;
    case OP_LBCAST:
        if (un->method == SYNC_NONE && un->op_update < 0)
            add_dep(b, o, un->op_lreduce, DEP_LOCAL, 0);
        else add_sync_deps(b, o, un, 0);
        break;
    default: ASSERT(0, "bad op kind %d", op->kind);
    }
}

int plan_build_opts(plan_t *p, const model_t *m, const cluster_t *c, const plan_opts_t *o,
                    char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (m->n_layers < 1) {
        snprintf(err, errlen, "%s: expected a model with layers", m->path);
        return -1;
    }
    ASSERT(o->batch >= 1 && o->staleness >= 0, "batch %d, staleness %d", o->batch, o->staleness);
    ASSERT(o->allreduce_bucket_bytes >= 0, "bucket of %lld bytes",
           (long long)o->allreduce_bucket_bytes);
    plan_setup(p, m, c, o);
    plan_units(p, m);

    /* Choose each unit's method: layer by layer, then (hybrid) for the whole iteration. */
    unsigned mask = scheme_mask(o->scheme.base);
    units_assign(p, m, mask, NULL);
    if (o->hybrid_rule == HYBRID_RULE_ITERATION && (mask & (1u << SYNC_PS)) &&
        (mask & (1u << SYNC_SFB)) && p->workers > 1)
        units_choose_for_iteration(p, m, mask);
    pieces_build(p);
    buckets_build(p);

    /* Ops: compute in program order, then each unit's sync ops; then their dependencies. */
    builder_t b = {p, 0, 0};
    plan_compute_ops(&b, m);
    plan_sync_ops(&b);
    int back = 1 + o->staleness;
    for (int op = 0; op < p->n_ops; op++) plan_op_deps(&b, op, back);
    return 0;
}

void plan_fini(plan_t *p)
{
    free(p->kv_block_shard);
    free(p->pieces);
    free(p->buckets);
    free(p->units);
    free(p->ops);
    free(p->deps);
    memset(p, 0, sizeof *p);
}

static const plan_unit_t *unit_of(const plan_t *p, int op)
{
    ASSERT(op >= 0 && op < p->n_ops, "op %d of %d", op, p->n_ops);
    return &p->units[p->ops[op].unit];
}

int64_t plan_shard_bytes(const plan_t *p, int unit, int shard)
{
    const plan_unit_t *u = &p->units[unit];
    const plan_piece_t *pc = p->pieces + u->piece0;
    int lo = 0, hi = u->n_pieces - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (pc[mid].shard == shard) return pc[mid].bytes;
        if (pc[mid].shard < shard) lo = mid + 1;
        else hi = mid - 1;
    }
    return 0;
}

int plan_has_instance(const plan_t *p, int op, int node)
{
    if (node < 0 || node >= p->workers) return 0;
    if (p->ops[op].place == PLACE_WORKERS) return 1;
    return plan_shard_bytes(p, p->ops[op].unit, node) > 0;
}

int plan_n_instances(const plan_t *p, int op)
{
    if (p->ops[op].place == PLACE_WORKERS) return p->workers;
    return unit_of(p, op)->n_pieces;
}

int plan_n_dests(const plan_t *p, int op, int node)
{
    const plan_unit_t *u = unit_of(p, op);
    switch (p->ops[op].kind) {
    case OP_PUSH: return u->n_pieces;
    case OP_PULL: return p->workers;
    case OP_SFB:
    case OP_VOTE: return p->workers - 1;
    case OP_ALLREDUCE: return 1;
    default: (void)node; return 0;
    }
}

int plan_dest(const plan_t *p, int op, int node, int i, int64_t *bytes)
{
    const plan_unit_t *u = unit_of(p, op);
    ASSERT(i >= 0 && i < plan_n_dests(p, op, node), "dest %d of op %d", i, op);
    switch (p->ops[op].kind) {
    case OP_PUSH:
        *bytes = p->pieces[u->piece0 + i].bytes;
        return p->pieces[u->piece0 + i].shard;
    case OP_PULL:
        *bytes = plan_shard_bytes(p, p->ops[op].unit, node);
        return i;
    case OP_SFB: *bytes = u->sfb_peer_bytes; return i < node ? i : i + 1;
    case OP_VOTE: *bytes = PLAN_VOTE_BYTES; return i < node ? i : i + 1;
    case OP_ALLREDUCE:
        *bytes = p->buckets[u->bucket].ar_chunk_bytes;
        return (node + 1) % p->workers;
    default: ASSERT(0, "op %d is not a transfer", op);
    }
    return -1;
}

int plan_dest_broadcast(const plan_t *p, int op, int node, int64_t *bytes, int *self)
{
    const plan_unit_t *u = unit_of(p, op);
    switch (p->ops[op].kind) {
    case OP_PULL: /* destinations 0..workers-1 (every node), one piece each */
        *bytes = plan_shard_bytes(p, p->ops[op].unit, node);
        *self = 1;
        return p->workers >= 2;
    case OP_SFB: /* every node but the sender */
    case OP_VOTE:
        *bytes = p->ops[op].kind == OP_SFB ? u->sfb_peer_bytes : PLAN_VOTE_BYTES;
        *self = 0;
        return p->workers >= 2;
    default: return 0;
    }
}

int plan_n_sources(const plan_t *p, int op, int node)
{
    const plan_unit_t *u = unit_of(p, op);
    switch (p->ops[op].kind) {
    case OP_PUSH: return plan_has_instance(p, u->op_apply, node) ? p->workers : 0;
    case OP_PULL: return u->n_pieces;
    case OP_SFB:
    case OP_VOTE: return p->workers - 1;
    case OP_ALLREDUCE: return 1;
    default: return 0;
    }
}

int64_t plan_predicted_sync_ns(const plan_t *p)
{
    int64_t t = 0;
    for (int u = 0; u < p->n_units; u++)
        if (p->units[u].method != SYNC_NONE && p->units[u].method != SYNC_ALLREDUCE)
            t += p->units[u].cost_ns[p->units[u].method];
    for (int k = 0; k < p->n_buckets; k++) t += p->buckets[k].cost_ns;
    return t;
}

int64_t plan_flows_per_iteration(const plan_t *p)
{
    int64_t flows = 0;
    for (int o = 0; o < p->n_ops; o++) {
        if (p->ops[o].res != RES_NET) continue;
        for (int n = 0; n < p->workers; n++) {
            if (!plan_has_instance(p, o, n)) continue;
            int64_t bytes;
            int self;
            if (plan_dest_broadcast(p, o, n, &bytes, &self)) { /* every other node */
                flows += (int64_t)(p->workers - 1) * p->ops[o].steps;
                continue;
            }
            for (int i = 0; i < plan_n_dests(p, o, n); i++)
                if (plan_dest(p, o, n, i, &bytes) != n) flows += p->ops[o].steps;
        }
    }
    return flows;
}

static uint64_t fnv(uint64_t h, int64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (uint64_t)(v >> (8 * i)) & 0xff;
        h *= 1099511628211ULL;
    }
    return h;
}

uint64_t plan_hash(const plan_t *p)
{
    uint64_t h = 14695981039346656037ULL;
    int64_t head[] = {p->workers, p->shards, p->batch, p->staleness, p->scheme.base,
                      p->scheme.wfbp, p->n_units, p->n_ops, p->n_deps, p->n_buckets,
                      p->n_pieces};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) h = fnv(h, head[i]);
    for (int u = 0; u < p->n_units; u++) {
        const plan_unit_t *un = &p->units[u];
        h = fnv(fnv(fnv(fnv(fnv(h, un->layer), un->first), un->last), un->method), un->bucket);
    }
    for (int o = 0; o < p->n_ops; o++) {
        const plan_op_t *op = &p->ops[o];
        h = fnv(fnv(fnv(fnv(h, op->kind), op->unit), op->place), op->res);
        h = fnv(fnv(fnv(fnv(h, op->bytes), op->steps), op->priority), op->n_deps);
    }
    for (int d = 0; d < p->n_deps; d++)
        h = fnv(fnv(fnv(h, p->deps[d].op), p->deps[d].scope), p->deps[d].iter_back);
    for (int i = 0; i < p->n_pieces; i++) h = fnv(fnv(h, p->pieces[i].shard), p->pieces[i].bytes);
    /* folded in only when it changes what runs, so that every arrival plan keeps its hash */
    if (p->send_order != SEND_ORDER_ARRIVAL) h = fnv(fnv(h, p->send_order), p->slice_bytes);
    return h;
}

/* The footer line of the iteration's cost (core/hybrid.h): all units' syncs together. */
static void plan_print_iteration_cost(const plan_t *p, FILE *f)
{
    if (p->workers < 2) return;
    hybrid_cost_t c = plan_iteration_cost(p);
    int hybrid = p->scheme.base == SCHEME_HYBRID || p->scheme.base == SCHEME_HYBRID3;
    fprintf(f, "# all units together: the busiest node sends %.1f MB (%.3f ms at its NIC), "
               "the busiest shard holds %.1f MB; sync bound %.3f ms%s%s\n",
            c.nic_bytes / 1e6, c.nic_ns / 1e6, c.shard_bytes / 1e6, c.bound_ns / 1e6,
            hybrid ? "; hybrid rule: " : "", hybrid ? hybrid_rule_name(p->hybrid_rule) : "");
}

/* The column header (csv) or the header lines and columns (text); local: the local steps'
 * columns, racks: each method's bytes through the busiest uplink. */
static void plan_print_header(const plan_t *p, FILE *f, int csv, int local, int racks)
{
    char sb[64];
    scheme_name(p->scheme, sb, sizeof sb);
    if (csv) {
        fprintf(f, "unit,layer,type,params,method,ps_bytes,ps_ns,sfb_bytes,sfb_ns,"
                   "allreduce_bytes,allreduce_ns,bucket%s%s%s\n",
                local ? ",lreduce_bytes,lbcast_bytes" : "",
                racks ? ",ps_rack_bytes,sfb_rack_bytes,allreduce_rack_bytes" : "",
                p->send_order == SEND_ORDER_LAYER ? ",send_priority,slice_bytes" : "");
        return;
    }
    fprintf(f, "# %s on %d nodes (%d shards), %.3g Gbit/s, batch %d, scheme %s, %s, "
               "all-reduce buckets of %.6g MB\n",
            p->model->name, p->workers, p->shards, p->cost.bw_Bps * 8 / 1e9, p->batch, sb,
            p->staleness ? "ssp" : "bsp", p->allreduce_bucket_bytes / (double)(1 << 20));
    if (p->precision != PRECISION_FP32 || p->wire_precision != PRECISION_FP32)
        fprintf(f, "# precision %s%s, wire precision %s: every byte count is at %d bytes a "
                   "value\n",
                precision_name(p->precision),
                p->precision != PRECISION_FP32 ? " (fp32 master weights)" : "",
                precision_name(p->wire_precision), precision_bytes(p->wire_precision));
    if (local)
        fprintf(f, "# %d devices per node, batch %d each, over %s (%.4g Gbit/s, %.3g us): "
                   "per unit a local reduce and a local broadcast (bytes over the "
                   "interconnect); each method's time counts them\n",
                p->cluster.devices_per_node, p->batch,
                p->cluster.interconnect[0] ? p->cluster.interconnect : "the interconnect",
                p->cluster.intra_Bps * 8 / 1e9, p->cluster.intra_lat_ns / 1e3);
    if (racks)
        fprintf(f, "# %d racks of %d nodes, uplinks of %.4g Gbit/s per direction "
                   "(oversubscription %.3g): *_uplink = bytes through the busiest rack "
                   "uplink; each method's time counts the busier of NIC and uplink\n",
                cost_racks(&p->cost), p->cost.nodes_per_rack, p->cost.rack_Bps * 8 / 1e9,
                p->cost.nodes_per_rack * p->cost.bw_Bps / p->cost.rack_Bps);
    if (p->units[0].op_verdict >= 0)
        fprintf(f, "# loss scaling (fp16): every update of an iteration waits for its VERDICT, "
                   "every gradient of the iteration in and checked for inf and NaN (a step "
                   "with one is skipped on every node)%s\n",
                p->units[0].op_vote >= 0 ? "; each worker's VOTE (1 byte) goes to every other, "
                                           "and the shards' applies wait for the verdict too"
                                         : "");
    if (p->send_order == SEND_ORDER_LAYER)
        fprintf(f, "# send order layer: transfers cut into slices of %lld bytes; on each link "
                   "the slice of the lowest send_prio goes first\n",
                (long long)p->slice_bytes);
    if (p->send_order == SEND_ORDER_FAIR)
        fprintf(f, "# send order fair: transfers cut into slices of %lld bytes; the messages "
                   "queued on a connection take turns, a slice each (the simulator shares "
                   "each link among them max-min, as under arrival)\n",
                (long long)p->slice_bytes);
    fprintf(f, "%-4s %-28s %-8s %12s %-9s %14s %10s %14s %10s %14s %10s %6s%s%s%s\n", "unit",
            "layer", "type", "params", "method", "ps_bytes/node", "ps_ms", "sfb_bytes/node",
            "sfb_ms", "ar_bytes/node", "ar_ms", "bucket",
            local ? "  lreduce_bytes   lbcast_bytes" : "",
            racks ? "      ps_uplink     sfb_uplink      ar_uplink" : "",
            p->send_order == SEND_ORDER_LAYER ? " send_prio" : "");
}

/* The send priority of unit u's network sync (its bucket's under all-reduce); -1: none. */
static int unit_send_priority(const plan_t *p, int u)
{
    const plan_unit_t *un = &p->units[u];
    int op = un->op_push >= 0 ? un->op_push : un->op_sfb >= 0 ? un->op_sfb : un->op_allreduce;
    return op >= 0 ? p->ops[op].priority : -1;
}

/* Unit u's row: each method's bytes per node and time (-1 or "-" where not priced), its
 * bucket, its local steps' bytes, its uplink bytes per method, its send priority (send
 * order layer). */
static void plan_print_unit(const plan_t *p, FILE *f, int u, int csv, int local, int racks)
{
    const plan_unit_t *un = &p->units[u];
    const layer_t *l = &p->model->layers[un->layer];
    int64_t by[SYNC_METHOD_COUNT] = {0}, up[SYNC_METHOD_COUNT] = {0};
    for (int j = SYNC_PS; j < SYNC_METHOD_COUNT; j++)
        if (un->cost_ns[j] >= 0) {
            cost_t c = cost_layer(&p->cost, &un->tensor, (sync_method_t)j);
            by[j] = c.node_sent + c.node_recv;
            up[j] = c.rack_sent;
        }
    if (csv) {
        fprintf(f, "%d,%s,%s,%lld,%s", u, l->name, layer_type_name(l->type),
                (long long)l->params, sync_method_name(un->method));
        for (int j = SYNC_PS; j < SYNC_METHOD_COUNT; j++)
            fprintf(f, ",%lld,%lld", (long long)(un->cost_ns[j] >= 0 ? by[j] : -1),
                    (long long)un->cost_ns[j]);
        fprintf(f, ",%d", un->bucket);
        if (local)
            fprintf(f, ",%lld,%lld", (long long)un->lreduce_bytes, (long long)un->lbcast_bytes);
        for (int j = SYNC_PS; racks && j < SYNC_METHOD_COUNT; j++)
            fprintf(f, ",%lld", (long long)(un->cost_ns[j] >= 0 ? up[j] : -1));
        if (p->send_order == SEND_ORDER_LAYER)
            fprintf(f, ",%d,%lld", unit_send_priority(p, u), (long long)p->slice_bytes);
        fputc('\n', f);
        return;
    }
    fprintf(f, "%-4d %-28s %-8s %12lld %-9s", u, l->name, layer_type_name(l->type),
            (long long)l->params, sync_method_name(un->method));
    for (int j = SYNC_PS; j < SYNC_METHOD_COUNT; j++) {
        if (un->cost_ns[j] < 0) fprintf(f, " %14s %10s", "-", "-");
        else fprintf(f, " %14lld %10.3f", (long long)by[j], un->cost_ns[j] / 1e6);
    }
    if (un->bucket >= 0) fprintf(f, " %6d", un->bucket);
    else fprintf(f, " %6s", "-");
    if (local)
        fprintf(f, " %14lld %14lld", (long long)un->lreduce_bytes, (long long)un->lbcast_bytes);
    for (int j = SYNC_PS; racks && j < SYNC_METHOD_COUNT; j++) {
        if (un->cost_ns[j] < 0) fprintf(f, " %14s", "-");
        else fprintf(f, " %14lld", (long long)up[j]);
    }
    if (p->send_order == SEND_ORDER_LAYER) fprintf(f, " %9d", unit_send_priority(p, u));
    fputc('\n', f);
}

/* The footer lines on buckets of several units and on how the PS bytes spread over the
 * shards. */
static void plan_print_buckets_shards(const plan_t *p, FILE *f)
{
    int ar_units = 0, fused = 0;
    for (int u = 0; u < p->n_units; u++) ar_units += p->units[u].bucket >= 0;
    for (int k = 0; k < p->n_buckets; k++) fused += p->buckets[k].n_units > 1;
    if (fused) {
        fprintf(f, "# %d all-reduce buckets for %d units; those with several units:\n",
                p->n_buckets, ar_units);
        for (int k = 0; k < p->n_buckets; k++) {
            const plan_bucket_t *bk = &p->buckets[k];
            if (bk->n_units < 2) continue;
            fprintf(f, "#   bucket %d: %d units, %s .. %s, %lld bytes, %lld bytes/node, %.3f ms\n",
                    k, bk->n_units, p->model->layers[p->units[bk->last].layer].name,
                    p->model->layers[p->units[bk->first].layer].name, (long long)bk->bytes,
                    (long long)(2 * bk->ar_bytes), bk->cost_ns / 1e6);
        }
    }
    if (p->n_pieces > 0 && p->shards > 1) {
        int64_t *held = xcalloc((size_t)p->shards, sizeof *held), total = 0;
        int busiest = 0;
        for (int i = 0; i < p->n_pieces; i++) {
            held[p->pieces[i].shard] += p->pieces[i].bytes;
            total += p->pieces[i].bytes;
        }
        for (int s = 1; s < p->shards; s++)
            if (held[s] > held[busiest]) busiest = s;
        fprintf(f, "# PS: %lld bytes over %d shards (%s), the busiest (shard %d) holds %.1f%%\n",
                (long long)total, p->shards,
                p->cost.kv_block_bytes > 0 ? kv_place_name(p->kv_placement) : "even split",
                busiest, 100.0 * (double)held[busiest] / (double)total);
        free(held);
    }
}

void plan_print(const plan_t *p, FILE *f, int csv)
{
    int local = p->cluster.devices_per_node > 1 || p->cluster.host_staging; /* local steps' columns */
    int racks = cost_racks(&p->cost) > 1; /* each method's bytes through the busiest uplink */
    plan_print_header(p, f, csv, local, racks);
    for (int u = 0; u < p->n_units; u++)
        if (p->units[u].layer >= 0) plan_print_unit(p, f, u, csv, local, racks);
    if (csv) return;
    plan_print_buckets_shards(p, f);
    fprintf(f, "# network flows per iteration (all nodes): %lld\n",
            (long long)plan_flows_per_iteration(p));
    fprintf(f, "# predicted sync time per iteration (sum over layers, no overlap): %.3f ms\n",
            plan_predicted_sync_ns(p) / 1e6);
    plan_print_iteration_cost(p, f);
    fprintf(f, "# plan hash: %016llx\n", (unsigned long long)plan_hash(p));
}
