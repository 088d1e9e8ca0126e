/* worker_buffers: the memory of one rank (runtime/exec/worker_state.h): the parameter
 * entries of its arena, each unit's gradient and factor slots (1 + staleness of them, so that
 * a sync in flight reads a copy the next backward does not overwrite), the devices' own
 * buffers, the all-reduce buckets, and the PS layout the plan describes. */
#include "runtime/exec/worker_state.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"

static int cmp_block(const void *a, const void *b)
{
    const ps_block_t *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

void worker_layout_from_plan(worker_t *w)
{
    const plan_t *p = &w->plan;
    int cap = 0;
    for (int u = 0; u < p->n_units; u++) /* the full-size tensor's blocks (tensor_scale) */
        cap += (int)cost_ps_blocks(&p->cost, w->units[u].ps_count ? p->units[u].ps_bytes : 0);
    ps_layout_t *l = &w->layout;
    l->blocks = xcalloc((size_t)cap + 1, sizeof *l->blocks);
    l->n_shards = p->shards;
    int64_t *mine = xcalloc((size_t)p->shards, sizeof *mine);
    for (int u = 0; u < p->n_units; u++) {
        const wk_unit_t *wu = &w->units[u];
        /* the plan's blocks of the full-size tensor, each holding its scaled floats */
        int64_t bytes = wu->ps_count ? p->units[u].ps_bytes : 0, block0 = p->units[u].tensor.block0;
        int64_t nb = cost_ps_blocks(&p->cost, bytes), off = wu->ps_off;
        memset(mine, 0, (size_t)p->shards * sizeof *mine);
        for (int64_t i = 0; i < nb; i++) {
            int shard = cost_ps_block_shard(&p->cost, bytes, block0, i);
            int64_t b = cost_ps_block_bytes(&p->cost, bytes, i), f = worker_scaled_floats(w, b);
            l->blocks[l->n_blocks++] =
                (ps_block_t){.offset = (uint64_t)off, .count = (uint32_t)f, .shard = shard,
                             .range = u};
            off += f;
            mine[shard] += b;
        }
        ASSERT(off == wu->ps_off + wu->ps_count, "unit %d: blocks end at %lld, range at %lld", u,
               (long long)off, (long long)(wu->ps_off + wu->ps_count));
        for (int s = 0; s < p->shards; s++) /* the same bytes per shard as the plan */
            ASSERT(mine[s] == plan_shard_bytes(p, u, s),
                   "unit %d shard %d: %lld bytes, the plan says %lld", u, s, (long long)mine[s],
                   (long long)plan_shard_bytes(p, u, s));
    }
    free(mine);
    qsort(l->blocks, (size_t)l->n_blocks, sizeof *l->blocks, cmp_block);
}

int worker_entries_build(worker_t *w, char *err, size_t errlen)
{
    const model_t *m = &w->model;
    w->layer_off = xcalloc((size_t)m->n_layers, sizeof *w->layer_off);
    w->entries = xcalloc((size_t)2 * m->n_layers + 1, sizeof *w->entries);
    int64_t off = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const layer_t *ly = &m->layers[l];
        /* scaled tensors (worker_scale.c): the layer's scaled sizes */
        int64_t nw = w->layer_w ? w->layer_w[l] : ly->weights;
        int64_t nb = w->layer_b ? w->layer_b[l] : ly->biases;
        w->layer_off[l] = off;
        if (nw > 0) w->entries[w->n_entries++] = (wk_entry_t){off, nw, false, l};
        off += nw;
        if (nb > 0) w->entries[w->n_entries++] = (wk_entry_t){off, nb, true, l};
        off += nb;
    }
    w->n_params = off;
    if (!w->net) return 0;
    const arena_t *a = nnet_arena(w->net);
    bool same = a->count == off && a->n_entries == w->n_entries;
    for (int e = 0; same && e < w->n_entries; e++)
        same = a->entries[e].offset == w->entries[e].offset &&
               a->entries[e].count == w->entries[e].count &&
               a->entries[e].is_bias == w->entries[e].is_bias &&
               a->entries[e].layer == w->entries[e].layer;
    if (!same) {
        snprintf(err, errlen, "%s: the net's parameter arena is not laid out as weights then "
                              "biases per layer", m->path);
        return -1;
    }
    return 0;
}

float *worker_stage_buf(worker_t *w, int64_t count)
{
    return w->staged ? compute_host_alloc(w->dev[0].compute, (size_t)count * sizeof(float))
                     : xcalloc((size_t)count, sizeof(float));
}

void worker_stage_free(worker_t *w, void *p)
{
    if (w->staged && p) compute_host_release(w->dev[0].compute, p);
    else free(p);
}

/* Unit u's ranges in the arena: its PS range, its weights (SFB, all-reduce, a local
 * update) and the SFB factors' shape. Returns the most floats one of its buffers holds. */
static int64_t unit_ranges(worker_t *w, int u)
{
    const plan_unit_t *un = &w->plan.units[u];
    wk_unit_t *wu = &w->units[u];
    int K = w->job->batch * w->devices;
    pthread_mutex_init(&wu->lock, NULL);
    wu->layer = un->layer;
    if (un->layer < 0 || (un->method == SYNC_NONE && !wk_unit_updates_locally(un))) return 0;
    const layer_t *ly = &w->model.layers[un->layer];
    /* the sizes this rank holds: the model's, or S times smaller (worker_scale.c) */
    int64_t off = w->layer_off[un->layer];
    int64_t weights = w->layer_w ? w->layer_w[un->layer] : ly->weights;
    int64_t params = weights + (w->layer_b ? w->layer_b[un->layer] : ly->biases);
    if (wk_unit_updates_locally(un)) wu->w_off = off, wu->w_count = params;
    switch (un->method) {
    case SYNC_PS: wu->ps_off = off, wu->ps_count = params; break;
    case SYNC_SFB: {
        int64_t rows = un->tensor.rows > 0 ? un->tensor.rows : 1;
        wu->ps_off = off + weights, wu->ps_count = params - weights;
        wu->w_off = off, wu->w_count = weights;
        wu->m = worker_scaled_dim(w, un->tensor.m), wu->n = worker_scaled_dim(w, un->tensor.n);
        wu->k_dev = worker_scaled_dim(w, w->job->batch * rows);
        wu->k = wu->k_dev * w->devices;
        ASSERT(w->scale > 1 || wu->k == K * rows, "fc %s: %d factor rows, expected %lld",
               ly->name, wu->k, (long long)(K * rows));
        ASSERT((int64_t)wu->m * wu->n == weights, "fc %s: %d x %d != %lld weights",
               ly->name, wu->m, wu->n, (long long)weights);
        break;
    }
    case SYNC_ALLREDUCE: wu->w_off = off, wu->w_count = params; break;
    default: break;
    }
    ASSERT(wu->ps_count == worker_scaled_ps_floats(w, un->ps_bytes),
           "unit %d: PS range %lld floats, plan %lld bytes", u, (long long)wu->ps_count,
           (long long)un->ps_bytes);
    int64_t most = wu->ps_count;
    if ((int64_t)wu->k * wu->m > most) most = (int64_t)wu->k * wu->m;
    if ((int64_t)wu->k * wu->n > most) most = (int64_t)wu->k * wu->n;
    if (wu->w_count > most) most = wu->w_count;
    return most;
}

/* The all-reduce buckets: members in unit order, back to back (after unit_ranges). */
static void buckets_build(worker_t *w)
{
    const plan_t *p = &w->plan;
    w->buckets = xcalloc((size_t)p->n_buckets + 1, sizeof *w->buckets);
    for (int u = 0; u < p->n_units; u++) {
        int b = p->units[u].bucket;
        if (b < 0) continue;
        w->units[u].ar_off = w->buckets[b].count;
        w->buckets[b].count += w->units[u].w_count;
    }
    for (int b = 0; b < p->n_buckets; b++) {
        wk_bucket_t *wb = &w->buckets[b];
        ASSERT(w->scale > 1 || wb->count * worker_value_bytes(w) == p->buckets[b].bytes,
               "bucket %d: %lld floats, plan %lld bytes", b, (long long)wb->count,
               (long long)p->buckets[b].bytes);
        wb->slot = xcalloc((size_t)w->n_slots, sizeof(float *));
        for (int s = 0; s < w->n_slots; s++) wb->slot[s] = worker_stage_buf(w, wb->count);
    }
}

/* The node's slots of unit u: its PS gradient, its all-reduce range (or a buffer of its own
 * for a local update), its SFB factors and the stash of every rank's. fake_node: emulated
 * with one device, the gradients and factors are the shared zeros. */
static void unit_slots(worker_t *w, int u, bool fake_node)
{
    const plan_unit_t *un = &w->plan.units[u];
    wk_unit_t *wu = &w->units[u];
    int S = w->n_slots;
    wu->gslot = xcalloc((size_t)S, sizeof(float *));
    wu->ar_slot = xcalloc((size_t)S, sizeof(float *));
    wu->u_slot = xcalloc((size_t)S, sizeof(float *));
    wu->v_slot = xcalloc((size_t)S, sizeof(float *));
    wu->stash = xcalloc((size_t)S, sizeof(float *));
    int64_t ku = (int64_t)wu->k * wu->m, kv = (int64_t)wu->k * wu->n;
    for (int s = 0; s < S; s++) {
        if (wu->ps_count)
            wu->gslot[s] = fake_node ? w->zeros : worker_stage_buf(w, wu->ps_count);
        if (un->bucket >= 0) wu->ar_slot[s] = w->buckets[un->bucket].slot[s] + wu->ar_off;
        if (wk_unit_updates_locally(un)) wu->ar_slot[s] = worker_stage_buf(w, wu->w_count);
        if (un->method == SYNC_SFB) {
            wu->u_slot[s] = fake_node ? w->zeros : worker_stage_buf(w, ku);
            wu->v_slot[s] = fake_node ? w->zeros : worker_stage_buf(w, kv);
            wu->stash[s] = xcalloc((size_t)w->world * wu->k * (wu->m + wu->n), 4);
        }
    }
    if (un->method == SYNC_SFB) wu->gsum = xcalloc((size_t)wu->m * wu->n, 4);
}

/* Unit u's buffers per device (device 0's are the node's slots) and, unless emulated, the
 * events of each device's copies out. */
static void unit_device_buffers(worker_t *w, int u)
{
    const plan_unit_t *un = &w->plan.units[u];
    wk_unit_t *wu = &w->units[u];
    int S = w->n_slots, D = w->devices;
    wu->dev_g = xcalloc((size_t)D, sizeof *wu->dev_g);
    wu->dev_w = xcalloc((size_t)D, sizeof *wu->dev_w);
    wu->dev_u = xcalloc((size_t)D, sizeof *wu->dev_u);
    wu->dev_v = xcalloc((size_t)D, sizeof *wu->dev_v);
    for (int d = 0; d < D; d++) {
        wu->dev_g[d] = xcalloc((size_t)S, sizeof(float *));
        wu->dev_w[d] = xcalloc((size_t)S, sizeof(float *));
        wu->dev_u[d] = xcalloc((size_t)S, sizeof(float *));
        wu->dev_v[d] = xcalloc((size_t)S, sizeof(float *));
        for (int s = 0; s < S; s++) {
            if (d == 0) {
                wu->dev_g[0][s] = wu->gslot[s];
                wu->dev_w[0][s] = wu->ar_slot[s];
                wu->dev_u[0][s] = wu->u_slot[s];
                wu->dev_v[0][s] = wu->v_slot[s];
                continue;
            }
            if (wu->ps_count)
                wu->dev_g[d][s] = w->emulate ? w->zeros : worker_stage_buf(w, wu->ps_count);
            if (un->bucket >= 0 || wk_unit_updates_locally(un))
                wu->dev_w[d][s] = w->emulate ? w->zeros : worker_stage_buf(w, wu->w_count);
            if (un->method == SYNC_SFB) {
                int64_t ku = (int64_t)wu->k_dev * wu->m, kv = (int64_t)wu->k_dev * wu->n;
                wu->dev_u[d][s] = w->emulate ? w->zeros : worker_stage_buf(w, ku);
                wu->dev_v[d][s] = w->emulate ? w->zeros : worker_stage_buf(w, kv);
            }
        }
    }
    if (w->emulate) return;
    wu->copied = xcalloc((size_t)D, sizeof *wu->copied);
    for (int d = 0; d < D; d++) {
        wu->copied[d] = xcalloc((size_t)S, sizeof *wu->copied[d]);
        for (int s = 0; s < S; s++) wu->copied[d][s] = compute_event_new(w->dev[d].compute);
    }
}

void worker_units_build(worker_t *w)
{
    const plan_t *p = &w->plan;
    w->units = xcalloc((size_t)p->n_units, sizeof *w->units);
    int64_t zmax = 1;
    for (int u = 0; u < p->n_units; u++) {
        int64_t most = unit_ranges(w, u);
        if (most > zmax) zmax = most;
    }
    /* emulated gradients are never read for their values: the node's own buffers are the
     * zeros too, unless a local reduce writes into them */
    bool fake_node = w->emulate && w->devices == 1;
    if (w->emulate) w->zeros = xcalloc((size_t)zmax, sizeof(float));
    for (int d = 1; d < w->devices; d++) {
        w->dev[d].locks = xcalloc((size_t)p->n_units, sizeof *w->dev[d].locks);
        for (int u = 0; u < p->n_units; u++) pthread_mutex_init(&w->dev[d].locks[u], NULL);
    }
    buckets_build(w);
    for (int u = 0; u < p->n_units; u++) {
        unit_slots(w, u, fake_node);
        unit_device_buffers(w, u);
    }
}

void worker_units_free(worker_t *w)
{
    if (!w->units) return;
    bool fake_node = w->emulate && w->devices == 1;
    for (int u = 0; u < w->plan.n_units; u++) {
        wk_unit_t *wu = &w->units[u];
        for (int s = 0; s < w->n_slots; s++) {
            if (!fake_node) {
                worker_stage_free(w, wu->gslot[s]);
                worker_stage_free(w, wu->u_slot[s]);
                worker_stage_free(w, wu->v_slot[s]);
            }
            if (wk_unit_updates_locally(&w->plan.units[u])) worker_stage_free(w, wu->ar_slot[s]);
            free(wu->stash[s]);
        }
        for (int d = 0; wu->dev_g && d < w->devices; d++) {
            for (int s = 0; d > 0 && !w->emulate && s < w->n_slots; s++) {
                worker_stage_free(w, wu->dev_g[d][s]);
                worker_stage_free(w, wu->dev_w[d][s]);
                worker_stage_free(w, wu->dev_u[d][s]);
                worker_stage_free(w, wu->dev_v[d][s]);
            }
            for (int s = 0; wu->copied && s < w->n_slots; s++)
                compute_event_destroy(w->dev[d].compute, &wu->copied[d][s]);
            if (wu->copied) free(wu->copied[d]);
            free(wu->dev_g[d]);
            free(wu->dev_w[d]);
            free(wu->dev_u[d]);
            free(wu->dev_v[d]);
        }
        free(wu->copied);
        free(wu->dev_g);
        free(wu->dev_w);
        free(wu->dev_u);
        free(wu->dev_v);
        free(wu->gslot);
        free(wu->ar_slot);
        free(wu->u_slot);
        free(wu->v_slot);
        free(wu->stash);
        free(wu->gsum);
        pthread_mutex_destroy(&wu->lock);
    }
    free(w->units);
    w->units = NULL;
    for (int b = 0; b < w->plan.n_buckets; b++) {
        for (int s = 0; s < w->n_slots && w->buckets[b].slot; s++)
            worker_stage_free(w, w->buckets[b].slot[s]);
        free(w->buckets[b].slot);
    }
    free(w->buckets);
    w->buckets = NULL;
}
