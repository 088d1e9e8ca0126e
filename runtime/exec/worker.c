/* worker: one rank's job set-up and teardown (worker_new / worker_destroy): data, net, plan,
 * buffers, the colocated PS shard, sockets and the rendezvous; the plan's executor is
 * runtime/exec/worker_exec.c, the state both share runtime/exec/worker_state.h. */
#include "runtime/exec/worker_state.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include "core/check.h"
#include "core/job.h"
#include "core/log.h"
#include "core/plan.h"
#include "core/rng.h"
#include "core/trace.h"
#include "core/trace_merge.h"
#include "core/unit_times.h"
#include "runtime/sync/allreduce.h"
#include "runtime/transport/comm.h"
#include "runtime/compute/compute.h"
#include "runtime/transport/conn_cap.h"
#include "runtime/transport/coord.h"
#include "runtime/exec/data.h"
#include "runtime/exec/job_checkpoint.h"
#include "runtime/exec/emulate.h"
#include "runtime/transport/launch.h"
#include "runtime/compute/nnet.h"
#include "runtime/transport/probe.h"
#include "runtime/sync/ps.h"
#include "runtime/sync/sfb.h"
#include "runtime/exec/train.h"
#include "core/outfile.h"

void worker_config_init(worker_config_t *c)
{
    memset(c, 0, sizeof *c);
    experiment_defaults(&c->job);
    c->init = INIT_AUTO;
    c->evaluate = true;
    c->threads = 1;
    c->timeout_ms = 60000;
}

solver_config_t worker_solver_config(const experiment_t *job)
{
    return (solver_config_t){.lr = job->train.lr, .momentum = job->train.momentum,
                             .weight_decay = job->train.weight_decay, .policy = LR_FIXED,
                             .gamma = 0.1, .power = 1.0};
}

int64_t worker_iterations(const experiment_t *job, int64_t steps)
{
    return job->train.epochs > 0 ? (int64_t)job->train.epochs * steps : job->iterations;
}

int worker_batch_order(int n, int rank, int world, int batch, int64_t t, uint64_t seed,
                       bool shuffle, int *order)
{
    int steps = (n / world) / batch;
    ASSERT(steps >= 1, "%d samples over %d workers: no batch of %d", n, world, batch);
    int b, e;
    data_partition(n, rank, world, &b, &e);
    int64_t epoch = t / steps, i = t % steps;
    int *all = xmalloc((size_t)(e - b) * sizeof *all);
    rng_t *r = shuffle ? rng_new(seed, 100 + (uint64_t)epoch * 4096 + (uint64_t)rank) : NULL;
    data_order(all, b, e, r);
    rng_destroy(&r);
    memcpy(order, all + i * batch, (size_t)batch * sizeof *order);
    free(all);
    return steps;
}

static int cmp_block(const void *a, const void *b)
{
    const ps_block_t *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The PS layout the plan describes: unit u's PS tensor is cut into cost_ps_blocks() blocks,
 * block i on the plan's shard for it (kv_block_shard, plan_dest), so that every byte goes
 * where the plan and the simulator say it goes. */
static void layout_from_plan(worker_t *w)
{
    const plan_t *p = &w->plan;
    int cap = 0;
    for (int u = 0; u < p->n_units; u++)
        cap += (int)cost_ps_blocks(&p->cost, w->units[u].ps_count * 4);
    ps_layout_t *l = &w->layout;
    l->blocks = xcalloc((size_t)cap + 1, sizeof *l->blocks);
    l->n_shards = p->shards;
    int64_t *mine = xcalloc((size_t)p->shards, sizeof *mine);
    for (int u = 0; u < p->n_units; u++) {
        const wk_unit_t *wu = &w->units[u];
        int64_t bytes = wu->ps_count * 4, block0 = p->units[u].tensor.block0;
        int64_t nb = cost_ps_blocks(&p->cost, bytes), off = wu->ps_off;
        memset(mine, 0, (size_t)p->shards * sizeof *mine);
        for (int64_t i = 0; i < nb; i++) {
            int shard = cost_ps_block_shard(&p->cost, bytes, block0, i);
            int64_t b = cost_ps_block_bytes(&p->cost, bytes, i);
            l->blocks[l->n_blocks++] =
                (ps_block_t){.offset = (uint64_t)off, .count = (uint32_t)(b / 4), .shard = shard,
                             .range = u};
            off += b / 4;
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

/* Parameter entries in arena order (weights, then biases, per layer with parameters). */
static int entries_build(worker_t *w, char *err, size_t errlen)
{
    const model_t *m = &w->model;
    w->layer_off = xcalloc((size_t)m->n_layers, sizeof *w->layer_off);
    w->entries = xcalloc((size_t)2 * m->n_layers + 1, sizeof *w->entries);
    int64_t off = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const layer_t *ly = &m->layers[l];
        w->layer_off[l] = off;
        if (ly->weights > 0) w->entries[w->n_entries++] = (wk_entry_t){off, ly->weights, false, l};
        off += ly->weights;
        if (ly->biases > 0) w->entries[w->n_entries++] = (wk_entry_t){off, ly->biases, true, l};
        off += ly->biases;
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

/* The PS clients of a rank, each with a connection to every shard: one per PUSH and per
 * PULL syncer (runtime/exec/worker_exec.c). */
static int ps_clients_per_rank(const worker_t *w)
{
    int n = 0;
    for (int op = 0; op < w->plan.n_ops; op++)
        n += w->plan.ops[op].kind == OP_PUSH || w->plan.ops[op].kind == OP_PULL;
    return n;
}

/* A buffer the devices' gradients or factors are copied into (count floats, zeroed): pinned
 * host memory when they are GPUs, so that the copies run beside the compute. */
static float *stage_buf(worker_t *w, int64_t count)
{
    return w->staged ? compute_host_alloc(w->dev[0].compute, (size_t)count * sizeof(float))
                     : xcalloc((size_t)count, sizeof(float));
}

static void stage_free(worker_t *w, void *p)
{
    if (w->staged && p) compute_host_release(w->dev[0].compute, p);
    else free(p);
}

static void units_build(worker_t *w)
{
    const plan_t *p = &w->plan;
    int K = w->job->batch * w->devices, S = w->n_slots, D = w->devices;
    w->units = xcalloc((size_t)p->n_units, sizeof *w->units);
    int64_t zmax = 1;
    for (int u = 0; u < p->n_units; u++) {
        const plan_unit_t *un = &p->units[u];
        wk_unit_t *wu = &w->units[u];
        pthread_mutex_init(&wu->lock, NULL);
        wu->layer = un->layer;
        if (un->layer < 0 || (un->method == SYNC_NONE && !wk_unit_updates_locally(un))) continue;
        const layer_t *ly = &w->model.layers[un->layer];
        int64_t off = w->layer_off[un->layer];
        if (wk_unit_updates_locally(un)) wu->w_off = off, wu->w_count = ly->params;
        switch (un->method) {
        case SYNC_PS: wu->ps_off = off, wu->ps_count = ly->params; break;
        case SYNC_SFB:
            wu->ps_off = off + ly->weights, wu->ps_count = ly->biases;
            wu->w_off = off, wu->w_count = ly->weights;
            wu->m = (int)un->tensor.m, wu->n = (int)un->tensor.n;
            wu->k_dev = (int)(w->job->batch * (un->tensor.rows > 0 ? un->tensor.rows : 1));
            wu->k = (int)(K * (un->tensor.rows > 0 ? un->tensor.rows : 1));
            ASSERT((int64_t)wu->m * wu->n == ly->weights, "fc %s: %d x %d != %lld weights",
                   ly->name, wu->m, wu->n, (long long)ly->weights);
            break;
        case SYNC_ALLREDUCE: wu->w_off = off, wu->w_count = ly->params; break;
        default: break;
        }
        ASSERT(wu->ps_count * 4 == un->ps_bytes, "unit %d: PS range %lld floats, plan %lld bytes",
               u, (long long)wu->ps_count, (long long)un->ps_bytes);
        if (wu->ps_count > zmax) zmax = wu->ps_count;
        if ((int64_t)wu->k * wu->m > zmax) zmax = (int64_t)wu->k * wu->m;
        if ((int64_t)wu->k * wu->n > zmax) zmax = (int64_t)wu->k * wu->n;
        if (wu->w_count > zmax) zmax = wu->w_count;
    }
    /* emulated gradients are never read for their values: the node's own buffers are the
     * zeros too, unless a local reduce writes into them */
    bool fake_node = w->emulate && D == 1;
    if (w->emulate) w->zeros = xcalloc((size_t)zmax, sizeof(float));
    for (int d = 1; d < D; d++) {
        w->dev[d].locks = xcalloc((size_t)p->n_units, sizeof *w->dev[d].locks);
        for (int u = 0; u < p->n_units; u++) pthread_mutex_init(&w->dev[d].locks[u], NULL);
    }
    /* all-reduce buckets: members in unit order, back to back */
    w->buckets = xcalloc((size_t)p->n_buckets + 1, sizeof *w->buckets);
    for (int u = 0; u < p->n_units; u++) {
        int b = p->units[u].bucket;
        if (b < 0) continue;
        w->units[u].ar_off = w->buckets[b].count;
        w->buckets[b].count += w->units[u].w_count;
    }
    for (int b = 0; b < p->n_buckets; b++) {
        wk_bucket_t *wb = &w->buckets[b];
        ASSERT(wb->count * 4 == p->buckets[b].bytes, "bucket %d: %lld floats, plan %lld bytes",
               b, (long long)wb->count, (long long)p->buckets[b].bytes);
        wb->slot = xcalloc((size_t)S, sizeof(float *));
        for (int s = 0; s < S; s++) wb->slot[s] = stage_buf(w, wb->count);
    }
    for (int u = 0; u < p->n_units; u++) {
        const plan_unit_t *un = &p->units[u];
        wk_unit_t *wu = &w->units[u];
        wu->gslot = xcalloc((size_t)S, sizeof(float *));
        wu->ar_slot = xcalloc((size_t)S, sizeof(float *));
        wu->u_slot = xcalloc((size_t)S, sizeof(float *));
        wu->v_slot = xcalloc((size_t)S, sizeof(float *));
        wu->stash = xcalloc((size_t)S, sizeof(float *));
        for (int s = 0; s < S; s++) {
            if (wu->ps_count)
                wu->gslot[s] = fake_node ? w->zeros : stage_buf(w, wu->ps_count);
            if (un->bucket >= 0) wu->ar_slot[s] = w->buckets[un->bucket].slot[s] + wu->ar_off;
            if (wk_unit_updates_locally(un)) wu->ar_slot[s] = stage_buf(w, wu->w_count);
            if (un->method == SYNC_SFB) {
                wu->u_slot[s] = fake_node ? w->zeros : stage_buf(w, (int64_t)wu->k * wu->m);
                wu->v_slot[s] = fake_node ? w->zeros : stage_buf(w, (int64_t)wu->k * wu->n);
                wu->stash[s] = xcalloc((size_t)w->world * wu->k * (wu->m + wu->n), 4);
            }
        }
        if (un->method == SYNC_SFB) wu->gsum = xcalloc((size_t)wu->m * wu->n, 4);
        /* the devices' own buffers; device 0's are the node's */
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
                    wu->dev_g[d][s] = w->emulate ? w->zeros : stage_buf(w, wu->ps_count);
                if (un->bucket >= 0 || wk_unit_updates_locally(un))
                    wu->dev_w[d][s] = w->emulate ? w->zeros : stage_buf(w, wu->w_count);
                if (un->method == SYNC_SFB) {
                    int64_t ku = (int64_t)wu->k_dev * wu->m, kv = (int64_t)wu->k_dev * wu->n;
                    wu->dev_u[d][s] = w->emulate ? w->zeros : stage_buf(w, ku);
                    wu->dev_v[d][s] = w->emulate ? w->zeros : stage_buf(w, kv);
                }
            }
        }
        if (w->emulate) continue;
        wu->copied = xcalloc((size_t)D, sizeof *wu->copied);
        for (int d = 0; d < D; d++) {
            wu->copied[d] = xcalloc((size_t)S, sizeof *wu->copied[d]);
            for (int s = 0; s < S; s++) wu->copied[d][s] = compute_event_new(w->dev[d].compute);
        }
    }
}

static void units_free(worker_t *w)
{
    if (!w->units) return;
    bool fake_node = w->emulate && w->devices == 1;
    for (int u = 0; u < w->plan.n_units; u++) {
        wk_unit_t *wu = &w->units[u];
        for (int s = 0; s < w->n_slots; s++) {
            if (!fake_node) {
                stage_free(w, wu->gslot[s]);
                stage_free(w, wu->u_slot[s]);
                stage_free(w, wu->v_slot[s]);
            }
            if (wk_unit_updates_locally(&w->plan.units[u])) stage_free(w, wu->ar_slot[s]);
            free(wu->stash[s]);
        }
        for (int d = 0; wu->dev_g && d < w->devices; d++) {
            for (int s = 0; d > 0 && !w->emulate && s < w->n_slots; s++) {
                stage_free(w, wu->dev_g[d][s]);
                stage_free(w, wu->dev_w[d][s]);
                stage_free(w, wu->dev_u[d][s]);
                stage_free(w, wu->dev_v[d][s]);
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
            stage_free(w, w->buckets[b].slot[s]);
        free(w->buckets[b].slot);
    }
    free(w->buckets);
    w->buckets = NULL;
}

static int data_setup(worker_t *w, char *err, size_t errlen)
{
    const experiment_t *j = w->job;
    const model_t *m = &w->model;
    if (train_data_load(j, m, &w->train, &w->test, err, errlen)) return -1;
    w->have_data = true;
    if (train_check_model(m, &w->train, err, errlen)) return -1;
    if (w->train.n / w->replicas < j->batch) {
        if (w->devices > 1)
            snprintf(err, errlen, "%d training samples over %d nodes x %d devices: fewer than a "
                                  "batch of %d per device (devices_per_node = %d is more than "
                                  "the data allows)", w->train.n, w->world, w->devices, j->batch,
                     w->devices);
        else
            snprintf(err, errlen, "%d training samples over %d workers: fewer than a batch of %d "
                                  "per worker", w->train.n, w->world, j->batch);
        return -1;
    }
    return 0;
}

/* The zero of the trace clocks. CLOCK_MONOTONIC is one clock for every process of a host, so
 * ranks on rank 0's host take rank 0's time just before the start barrier: rows of
 * different ranks (a push and its arrival at another shard) then compare directly, and no
 * row starts before zero. Returns that time, or 0 on another host (clocks unrelated: the
 * rank keeps its own start). */
static int64_t share_time_base(worker_t *w, int timeout_ms)
{
    struct {
        char host[64];
        int64_t t0_ns;
    } tb = {.t0_ns = comm_now_ns()}, mine;
    gethostname(tb.host, sizeof tb.host - 1);
    mine = tb;
    void *data = &tb;
    size_t n = sizeof tb;
    if (coord_client_bcast(w->cl, 0, 2, &data, &n, timeout_ms) != 0)
        coord_client_fail(w->cl, "no time base from rank 0");
    if (w->rank == 0) return tb.t0_ns;
    int64_t t0 = 0;
    if (n == sizeof tb) {
        memcpy(&tb, data, sizeof tb);
        tb.host[sizeof tb.host - 1] = '\0';
        if (!strcmp(tb.host, mine.host)) t0 = tb.t0_ns;
    }
    free(data);
    return t0;
}

char **worker_allgather(worker_t *w, int64_t id0, const char *line, int timeout_ms)
{
    char **tab = xcalloc((size_t)w->world, sizeof *tab);
    for (int r = 0; r < w->world; r++) {
        void *data = (void *)line;
        size_t n = strlen(line) + 1;
        if (coord_client_bcast(w->cl, r, id0 + r, &data, &n, timeout_ms) != 0)
            coord_client_fail(w->cl, "no line from rank %d (broadcast %lld)", r,
                              (long long)(id0 + r));
        tab[r] = r == w->rank ? xstrdup(line) : data;
        if (r != w->rank && (n == 0 || tab[r][n - 1] != '\0'))
            coord_client_fail(w->cl, "malformed line from rank %d (broadcast %lld)", r,
                              (long long)(id0 + r));
    }
    return tab;
}

void worker_allgather_free(worker_t *w, char **tab)
{
    if (!tab) return;
    for (int r = 0; r < w->world; r++) free(tab[r]);
    free(tab);
}

bool worker_op_runs_here(const plan_op_t *po)
{
    return po->res == RES_COMPUTE || po->place == PLACE_WORKERS || po->kind == OP_PULL;
}

/* Whether unit u runs an all-reduce bucket's ring (on its comm): the bucket's op is u's. */
static bool owns_bucket(const plan_t *p, int u)
{
    int b = p->units[u].bucket;
    return b >= 0 && p->buckets[b].first == u;
}

static int n_units_of(const model_t *m)
{
    int n = 0;
    for (int i = 0; i < m->n_layers; i++) n += layer_has_params(&m->layers[i]);
    return n ? n : 1;
}

/* PREFIX.<rank>: the node's parameters; with several devices also PREFIX.<rank>.<d>, the
 * replica of device d > 0 (the local broadcast's copy). Staged, each file is what the
 * device's replica holds (copied from the GPU). 0, or -1. */
static int write_params(const worker_t *w, const char *prefix)
{
    float *copy = w->staged ? xmalloc((size_t)w->n_params * sizeof(float) + 1) : NULL;
    int rc = 0;
    for (int d = 0; d < w->devices && rc == 0; d++) {
        char path[1100];
        if (d == 0) snprintf(path, sizeof path, "%s.%d", prefix, w->rank);
        else snprintf(path, sizeof path, "%s.%d.%d", prefix, w->rank, d);
        const float *p = w->dev[d].params;
        if (copy) {
            compute_download(w->dev[d].compute, copy, nnet_arena(w->dev[d].net)->params,
                             (size_t)w->n_params * sizeof(float));
            p = copy;
        }
        FILE *f = outfile_open(path, "wb");
        if (!f) rc = -1;
        else if (fwrite(p, sizeof(float), (size_t)w->n_params, f) != (size_t)w->n_params)
            rc = -1, fclose(f);
        else if (fclose(f)) rc = -1;
    }
    free(copy);
    return rc;
}

void worker_params_to_devices(worker_t *w, const job_ckpt_state_t *st)
{
    if (!w->staged) return;
    for (int d = 0; d < w->devices; d++) {
        wk_device_t *dv = &w->dev[d];
        arena_t *a = nnet_arena(dv->net);
        const float *state = d == 0 ? st->state : st->dev_state[d - 1];
        compute_upload(dv->compute, a->params, w->params, (size_t)w->n_params * sizeof(float));
        compute_upload(dv->compute, a->state, state, (size_t)a->state_count * sizeof(float));
        dv->compute->ops->sync(dv->compute->ctx);
    }
}

/* The experiment this run executes, for `poseidon sim` to predict it: the job with the
 * cluster the plan was built on (the probe's link included). */
static int write_job(const worker_t *w, const cluster_t *cl, const char *path)
{
    FILE *f = outfile_open(path, "w");
    if (!f) return -1;
    experiment_t *run = xmalloc(sizeof *run);
    *run = *w->job;
    run->iterations = (int)w->iterations;
    run->train.epochs = 0;
    run->train.probe = PROBE_NO; /* the link it measured is in the cluster below */
    if (run->warmup >= run->iterations) run->warmup = run->iterations > 1 ? run->iterations - 1 : 1;
    char comment[512];
    snprintf(comment, sizeof comment,
             "The job a run of poseidon %s executed on %d ranks (written by rank 0):\n"
             "poseidon sim on this file predicts that run; poseidon train on it runs the\n"
             "same plan again (plan hash %016llx; the cluster holds the link it planned with).",
             log_commit(), w->world, (unsigned long long)plan_hash(&w->plan));
    int rc = experiment_write(run, 0, cl, comment, f);
    free(run);
    if (fclose(f)) rc = -1;
    return rc;
}

/* Everything up to the start barrier: the data, the net, the plan (from the job and the
 * link probe), the buffers, the colocated shard, every socket, and the rendezvous with the
 * other ranks. Returns the rank ready to run, or NULL with *rc = 2 (bad input: the job, its
 * files, the launcher's environment) or 1 (a set-up failure), the message printed. A failure
 * after the coordinator is up ends the whole job through it instead. */
static int64_t elements(shape_t s) { return (int64_t)s.c * s.h * s.w; }

/* A bound on every payload of this job: a PS block, an all-reduce chunk or bucket holds at
 * most all the parameters; a layer's sufficient factors are at most batch x (its input +
 * its output); the probe's bulk message; the rendezvous table of every rank's endpoints.
 * Plus a margin for headers and text. A peer that announces more is cut off unread. */
static size_t largest_message(const worker_t *w)
{
    const model_t *m = &w->model;
    int64_t most = 4 * m->total_params;
    for (int l = 0; l < m->n_layers; l++) {
        const layer_t *ly = &m->layers[l];
        if (ly->params == 0) continue;
        int64_t factors = 4 * (int64_t)w->job->batch * w->devices *
                          (elements(ly->in_shape) + elements(ly->out_shape));
        if (factors > most) most = factors;
    }
    if (w->job->train.probe_bytes > most) most = w->job->train.probe_bytes;
    int64_t table = (int64_t)w->world * (n_units_of(m) + 2) * 300;
    if (table > most) most = table;
    most += 1 << 20;
    return most > (int64_t)MSG_MAX_PAYLOAD_BYTES ? MSG_MAX_PAYLOAD_BYTES : (size_t)most;
}

/* A resumed job's CSV: the rows of the killed run after the checkpoint (iteration > k) go,
 * so that the resumed run's rows follow the checkpoint's as the uninterrupted run's did.
 * The file is rewritten beside itself and renamed over. 0, or -1 with errno set. */
static int csv_keep_rows_to(const char *path, int64_t k)
{
    FILE *in = fopen(path, "r");
    if (!in) return errno == ENOENT ? 0 : -1;
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return -1;
    }
    char line[1024];
    bool first = true;
    while (fgets(line, sizeof line, in)) {
        double epoch;
        long long it;
        /* the header, and any line that is not a row, stays */
        bool row = !first && sscanf(line, "%lf,%lld,", &epoch, &it) == 2;
        if (!row || it <= k) fputs(line, out);
        first = false;
    }
    fclose(in);
    if (fclose(out) || rename(tmp, path)) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

/* Coordinator broadcast ids of the resume (the endpoints' are 10 + rank) */
#define RESUME_BCAST_ID (1LL << 40)
#define RESUME_STATUS_ID0 ((1LL << 40) + 16)

job_ckpt_header_t worker_ckpt_header(const worker_t *w, int64_t iter)
{
    job_ckpt_header_t h;
    memset(&h, 0, sizeof h);
    snprintf(h.model, sizeof h.model, "%s", w->model.name);
    h.n_params = w->n_params;
    h.state_count = w->net ? nnet_arena(w->net)->state_count : 0;
    h.rng_bytes = w->net ? (int64_t)nnet_rng_state_bytes(w->net) : 0;
    h.world = w->world;
    h.devices = w->devices;
    h.rank = w->rank;
    h.plan_hash = plan_hash(&w->plan);
    h.seed = w->job->seed;
    h.iter = iter;
    return h;
}

job_ckpt_state_t worker_ckpt_state(worker_t *w, const job_ckpt_header_t *h)
{
    job_ckpt_state_t st = {.params = w->params, .hist_local = w->hist_local,
                           .hist_server = w->hist_server, .shard_values = w->shard_snapshot};
    st.rng = xcalloc((size_t)h->rng_bytes + 1, 1);
    st.state = w->net ? nnet_arena(w->net)->state : NULL;
    if (w->devices > 1) {
        st.dev_state = xcalloc((size_t)w->devices - 1, sizeof *st.dev_state);
        st.dev_rng = xcalloc((size_t)w->devices - 1, sizeof *st.dev_rng);
    }
    for (int d = 1; d < w->devices; d++) {
        nnet_t *net = w->dev[d].net;
        st.dev_state[d - 1] = net ? nnet_arena(net)->state : NULL;
        st.dev_rng[d - 1] = xcalloc((size_t)h->rng_bytes + 1, 1);
    }
    for (int d = 0; w->staged && d < w->devices; d++) { /* a GPU's state, copied to the host */
        const arena_t *a = nnet_arena(w->dev[d].net);
        float *host = xcalloc((size_t)a->state_count + 1, sizeof(float));
        compute_download(w->dev[d].compute, host, a->state, (size_t)a->state_count * sizeof(float));
        if (d == 0) st.state = host;
        else st.dev_state[d - 1] = host;
    }
    return st;
}

void worker_ckpt_state_free(const worker_t *w, job_ckpt_state_t *st)
{
    for (int d = 0; w->staged && d < w->devices; d++)
        free(d == 0 ? st->state : st->dev_state[d - 1]);
    free(st->rng);
    for (int d = 1; d < w->devices; d++) free(st->dev_rng[d - 1]);
    free(st->dev_rng);
    free(st->dev_state);
    memset(st, 0, sizeof *st);
}

/* Rank 0: the newest complete checkpoint in dir as its COMPLETE text, after checking that it
 * is of this job; NULL with one line in err. */
static char *resume_choose(const worker_t *w, const char *dir, char *err, size_t errlen)
{
    int64_t k;
    if (job_ckpt_newest(dir, &k, err, errlen)) return NULL;
    char path[4200];
    job_ckpt_complete_path(path, sizeof path, dir, k);
    job_ckpt_complete_t c;
    char *text = NULL;
    if (job_ckpt_read_complete(path, &c, &text, err, errlen)) return NULL;
    job_ckpt_header_t h = worker_ckpt_header(w, k);
    if (c.iter != k)
        snprintf(err, errlen, "%s: says iteration %lld, its directory %lld", path,
                 (long long)c.iter, (long long)k);
    else if (job_ckpt_check_complete(&c, path, h.model, w->world, w->devices, h.seed,
                                     h.plan_hash,
                                     w->iterations, err, errlen) == 0) {
        free(c.files);
        return text;
    }
    free(c.files);
    free(text);
    return NULL;
}

/* --resume DIR: rank 0 chooses the newest complete checkpoint and tells the others; each
 * rank loads its own file (parameters, momentum, its shard's values, layer and dropout
 * state, rank 0's report state) and starts at its iteration. 0, or 2 when any rank's file
 * is not of this job or is damaged: rank 0 prints the first such rank's reason, and every
 * rank returns 2. */
static int resume_setup(worker_t *w)
{
    const char *dir = w->cfg->resume_dir;
    char err[8800] = "";
    char *text = NULL;
    if (w->rank == 0 && !(text = resume_choose(w, dir, err, sizeof err))) {
        size_t n = strlen(err) + 2;
        text = xmalloc(n);
        snprintf(text, n, "!%s", err);
    }
    void *blob = text;
    size_t n = text ? strlen(text) + 1 : 0;
    if (coord_client_bcast(w->cl, 0, RESUME_BCAST_ID, &blob, &n, w->cfg->timeout_ms))
        coord_client_fail(w->cl, "no checkpoint choice from rank 0");
    if (w->rank != 0) {
        text = blob;
        if (n == 0 || text[n - 1] != '\0') coord_client_fail(w->cl, "malformed checkpoint choice");
    }
    if (text[0] == '!') {
        if (w->rank == 0) fprintf(stderr, "poseidon train: --resume: %s\n", text + 1);
        free(text);
        return 2;
    }
    job_ckpt_complete_t c;
    if (job_ckpt_complete_parse(text, "rank 0's checkpoint choice", &c, err, sizeof err))
        coord_client_fail(w->cl, "%s", err);
    free(text);
    int64_t k = c.iter;
    job_ckpt_header_t want = worker_ckpt_header(w, k), got;
    job_ckpt_state_t st = worker_ckpt_state(w, &want);
    char path[4200];
    job_ckpt_rank_path(path, sizeof path, dir, k, w->rank);
    err[0] = '\0';
    if (c.world != w->world)
        snprintf(err, sizeof err, "COMPLETE lists %d ranks, the job has %d", c.world, w->world);
    else
        job_ckpt_read_rank(path, &want, &c.files[w->rank], &st, &got, err, sizeof err);
    free(c.files);
    /* every rank's verdict, so that all go on or all stop */
    char **tab = worker_allgather(w, RESUME_STATUS_ID0, err, w->cfg->timeout_ms);
    int bad = -1;
    for (int r = 0; r < w->world && bad < 0; r++)
        if (tab[r][0]) bad = r;
    if (bad >= 0 && w->rank == 0)
        fprintf(stderr, "poseidon train: --resume: rank %d: %s\n", bad, tab[bad]);
    worker_allgather_free(w, tab);
    if (bad >= 0) {
        worker_ckpt_state_free(w, &st);
        return 2;
    }
    /* every replica: the node's parameters (the checkpoint's LBCAST of K - 1 had made them
     * equal), its own dropout state; GPUs: what was read is in host memory, and goes to
     * every device from there with each one's layer state */
    worker_params_to_devices(w, &st);
    for (int d = 0; d < w->devices; d++) {
        wk_device_t *dv = &w->dev[d];
        if (d > 0 && !w->staged) memcpy(dv->params, w->params, (size_t)w->n_params * sizeof(float));
        if (dv->net) nnet_rng_state_restore(dv->net, d == 0 ? st.rng : st.dev_rng[d - 1]);
    }
    worker_ckpt_state_free(w, &st);
    w->loss_sum = got.loss_sum;
    w->loss_n = got.loss_n;
    w->correct = got.correct;
    w->report_iter0 = got.report_iter0;
    w->t_start = w->ckpt_last = k;
    for (int op = 0; op < w->plan.n_ops; op++) w->done[op] = k;
    if (w->rank == 0) {
        log_info("resumed from %s/iter-%lld: every rank starts at iteration %lld", dir,
                 (long long)k, (long long)k);
        job_ckpt_prune(dir, -1, k); /* checkpoints the killed run left unfinished */
    }
    return 0;
}

static volatile sig_atomic_t s_stop_signal;
static void on_stop_signal(int sig)
{
    (void)sig;
    s_stop_signal = 1;
}
bool worker_stop_signalled(void) { return s_stop_signal != 0; }

worker_t *worker_new(const worker_config_t *cfg, int *rc)
{
    worker_t *w = xcalloc(1, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->update_mu, NULL);
    pthread_mutex_init(&w->trace_mu, NULL);
    pthread_mutex_init(&w->intra_mu, NULL);
    pthread_cond_init(&w->quiesce_cv, NULL);
    w->ckpt_last = -1;
    w->cfg = cfg;
    w->job = &cfg->job;
    const experiment_t *job = w->job;
    w->solver = worker_solver_config(job);
    char err[1024];
    if (launch_env_detect(&w->env, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s\n", err);
        goto bad_input;
    }
    w->rank = w->env.rank;
    w->world = w->env.world;
    w->devices = job->cluster.devices_per_node;
    w->replicas = w->world * w->devices;
    w->n_slots = job->staleness + 1;
    w->emulate = job->train.compute == COMPUTE_MODE_EMULATE;
    if (experiment_config_count(job) != 1) {
        fprintf(stderr, "poseidon train: the job has %d configurations (sweep_nodes, sweep_gbps, "
                        "sweep_schemes); a run executes one\n", experiment_config_count(job));
        goto bad_input;
    }
    if (job->nodes[0] != w->world) {
        if (w->devices > 1 && w->world == job->nodes[0] * w->devices)
            fprintf(stderr, "poseidon train: the job is for %d nodes x %d devices, run as one "
                            "rank per node (%d ranks, each runs %d device threads); the "
                            "launcher started %d ranks, one per device\n", job->nodes[0],
                    w->devices, job->nodes[0], w->devices, w->world);
        else
            fprintf(stderr, "poseidon train: the job is for %d nodes, the launcher started %d "
                            "ranks (one rank per node)\n", job->nodes[0], w->world);
        goto bad_input;
    }
    if ((cfg->device != COMPUTE_CPU || cfg->stage_cpu) && !w->emulate) {
        if (!job->cluster.host_staging) {
            /* the plan's copies through host memory are what a GPU worker executes */
            fprintf(stderr, "poseidon train: --device %s needs cluster.host_staging = yes (the "
                            "plan's copies of each layer between the GPU and host memory)\n",
                    compute_kind_name(cfg->device));
            goto bad_input;
        }
        if (w->world == 1 && w->devices == 1) {
            /* no sync, so no copies in the plan: the single-worker trainer's loop */
            fprintf(stderr, "poseidon train: --device %s on one worker: run poseidon train "
                            "--model FILE --device %s (the single-worker trainer)\n",
                    compute_kind_name(cfg->device), compute_kind_name(cfg->device));
            goto bad_input;
        }
    }
    if (model_load(&w->model, job->model_path, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s\n", err);
        goto bad_input;
    }
    if (transport_security_install(&cfg->security, &w->env, err, sizeof err)) {
        fprintf(stderr, "poseidon train: rank %d: %s\n", w->rank, err);
        goto bad_input;
    }
    int to = cfg->timeout_ms;
    log_info("rank %d of %d (%s), pid %d, master %s:%d", w->rank, w->world,
             launch_source_name(w->env.source), (int)getpid(), w->env.master_addr,
             w->env.master_port);

    /* compute and data, before anything else can wait on this rank */
    if (!w->emulate) {
        if (data_setup(w, err, sizeof err)) {
            fprintf(stderr, "poseidon train: rank %d: %s\n", w->rank, err);
            goto bad_input;
        }
        w->steps = (w->train.n / w->replicas) / job->batch;
    } else {
        w->steps = job->train.synthetic_n / w->replicas / job->batch;
        if (w->steps < 1) w->steps = 1;
    }
    /* the devices: a compute backend and a replica each (device 0's are the node's) */
    w->dev = xcalloc((size_t)w->devices, sizeof *w->dev);
    for (int d = 0; d < w->devices; d++) {
        wk_device_t *dv = &w->dev[d];
        dv->w = w;
        dv->index = d;
        if (w->emulate) continue;
        /* dropout's stream: one per global worker, rank x devices + d */
        uint64_t seed = job->seed + (uint64_t)w->rank * (uint64_t)w->devices + (uint64_t)d;
        /* a GPU each: the rank's share of its host's GPUs, device thread d the d-th */
        int gpu = w->env.local_rank * w->devices + d;
        if (!(dv->compute = compute_new_on(cfg->device, cfg->threads, gpu, err, sizeof err))) {
            fprintf(stderr, "poseidon train: rank %d: --device %s: %s\n", w->rank,
                    compute_kind_name(cfg->device), err);
            goto fail;
        }
        if (!(dv->net = nnet_new(&w->model, job->batch, dv->compute, seed, err, sizeof err))) {
            fprintf(stderr, "poseidon train: %s\n", err);
            goto fail;
        }
        /* identical initial values on every replica: the same seed */
        solver_init_params(&w->model, nnet_arena(dv->net), cfg->init, job->seed);
    }
    w->compute = w->dev[0].compute;
    w->net = w->dev[0].net;
    w->staged = w->compute && (!compute_is_host(w->compute) || cfg->stage_cpu);
    /* the SFB update's GEMMs: on the GPU of device 0 when the devices are GPUs (a backend of
     * its own: the update thread never shares the device thread's stream) */
    if (!(w->ucompute = compute_new_on(w->staged ? w->compute->kind : COMPUTE_CPU, cfg->threads,
                                       w->env.local_rank * w->devices, err, sizeof err))) {
        fprintf(stderr, "poseidon train: %s\n", err);
        goto fail;
    }
    if (entries_build(w, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s\n", err);
        goto fail;
    }
    w->iterations = worker_iterations(job, w->steps);
    if (w->staged) { /* the node's parameters in host memory, as device 0 starts */
        w->params = stage_buf(w, w->n_params + 1);
        compute_download(w->compute, w->params, nnet_arena(w->net)->params,
                         (size_t)w->n_params * sizeof(float));
    } else if (w->net) {
        w->params = nnet_arena(w->net)->params;
    } else {
        w->params = xcalloc((size_t)w->n_params + 1, sizeof(float));
    }
    for (int d = 0; d < w->devices; d++) {
        wk_device_t *dv = &w->dev[d];
        dv->params = d == 0 ? w->params
                     : w->staged ? NULL /* on the GPU: nnet_arena(dv->net)->params */
                     : dv->net ? nnet_arena(dv->net)->params
                               : xcalloc((size_t)w->n_params + 1, sizeof(float));
        if (w->staged) dv->loaded = compute_event_new(dv->compute);
    }
    w->hist_local = xcalloc((size_t)w->n_params + 1, sizeof(float));
    w->hist_server = xcalloc((size_t)w->n_params + 1, sizeof(float));
    if (cfg->checkpoint_dir || cfg->resume_dir)
        w->shard_snapshot = xcalloc((size_t)w->n_params + 1, sizeof(float));
    if (cfg->checkpoint_dir && cfg->checkpoint_every > 0) {
        /* a scheduler's SIGTERM (preemption): stop after the next checkpoint, not at once */
        struct sigaction sa = {.sa_handler = on_stop_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
    }

    /* no peer may send more than this job ever sends in one message */
    size_t max_payload = largest_message(w);
    comm_set_max_payload(max_payload);
    if (w->rank == 0)
        log_info("transport: %s; a frame over %.1f MB ends its connection",
                 comm_keyring() ? "CURVE, the job's keys only" : "plain TCP (--insecure)",
                 max_payload / 1e6);

    /* coordinator, endpoints, rendezvous */
    coord_config_t cc = coord_config_default();
    if (w->rank == 0 && !(w->cs = coord_server_new(&w->env, cc))) goto fail;
    if (!(w->cl = coord_client_new(&w->env, cc, NULL))) goto fail;
    char addr[64], bind[128];
    if (launch_local_addr(w->env.master_addr, addr, sizeof addr))
        coord_client_fail(w->cl, "no route to the master %s", w->env.master_addr);
    snprintf(bind, sizeof bind, "tcp://%s:*", addr);
    int n_units = n_units_of(&w->model);
    w->probe_comm = comm_new("pb", w->rank, w->world, bind, to);
    w->ucomm = xcalloc((size_t)n_units, sizeof *w->ucomm);
    size_t line_cap = (size_t)(n_units + 2) * 300;
    char *line = xmalloc(line_cap);
    if (!w->probe_comm) coord_client_fail(w->cl, "cannot bind %s", bind);
    /* each peer connects once to the probe's and to each unit's socket */
    comm_set_connection_cap(w->probe_comm, conn_cap_for(w->world));
    size_t pos = (size_t)snprintf(line, line_cap, "%s", comm_endpoint(w->probe_comm));
    for (int u = 0; u < n_units; u++) {
        char name[16];
        snprintf(name, sizeof name, "u%d", u);
        if (!(w->ucomm[u] = comm_new(name, w->rank, w->world, bind, to)))
            coord_client_fail(w->cl, "cannot bind %s", bind);
        comm_set_connection_cap(w->ucomm[u], conn_cap_for(w->world));
        pos += (size_t)snprintf(line + pos, line_cap - pos, " %s", comm_endpoint(w->ucomm[u]));
    }
    char **tab = coord_client_rendezvous(w->cl, line);
    free(line);
    if (!tab) coord_client_fail(w->cl, "rendezvous failed");
    {
        /* every rank must run the same job: rank 0's description against this rank's */
        char desc[1400], sb[64];
        snprintf(desc, sizeof desc, "model=%.100s scheme=%s ssp=%d batch=%d devices=%d T=%lld "
                                    "kv=%lld bucket=%lld seed=%llu compute=%d data=%.100s",
                 w->model.name, scheme_name(job->schemes[0], sb, sizeof sb), job->staleness,
                 job->batch, w->devices, (long long)w->iterations, (long long)job->kv_block_bytes,
                 (long long)job->allreduce_bucket_bytes,
                 (unsigned long long)job->seed, (int)job->train.compute,
                 w->emulate ? "-" : job->train.data);
        void *blob = desc;
        size_t n = strlen(desc) + 1;
        if (coord_client_bcast(w->cl, 0, 0, &blob, &n, cc.join_ms))
            coord_client_fail(w->cl, "no job description from rank 0");
        if (w->rank != 0) {
            int same = n == strlen(desc) + 1 && !memcmp(blob, desc, n);
            if (!same) coord_client_fail(w->cl, "rank 0 runs '%.*s', this rank '%s'", (int)n,
                                         (char *)blob, desc);
            free(blob);
        }
    }
    /* eps[r][0]: probe; eps[r][1 + u]: unit u */
    char ***eps = xcalloc((size_t)w->world, sizeof *eps);
    for (int r = 0; r < w->world; r++) {
        eps[r] = xcalloc((size_t)n_units + 1, sizeof **eps);
        char *save = NULL, *copy = xstrdup(tab[r]);
        int k = 0;
        for (char *tok = strtok_r(copy, " ", &save); tok && k <= n_units;
             tok = strtok_r(NULL, " ", &save))
            eps[r][k++] = xstrdup(tok);
        free(copy);
        if (k != n_units + 1)
            coord_client_fail(w->cl, "rank %d registered %d endpoints, expected %d", r, k,
                              n_units + 1);
    }

    /* the link probe: rank 0 measures, everyone builds the plan from the same numbers */
    probe_result_t pr = {0};
    char local[64] = "";
    bool one_host = launch_local_addr(w->env.master_addr, local, sizeof local) == 0 &&
                    (!strncmp(local, "127.", 4) || !strcmp(local, "::1"));
    bool probe = job->train.probe == PROBE_YES || (job->train.probe == PROBE_AUTO && !one_host);
    if (probe && w->world > 1) {
        if (w->rank <= 1) comm_connect(w->probe_comm, 1 - w->rank, eps[1 - w->rank][0]);
        coord_client_progress(w->cl, -1, -1, "the link probe");
        /* six bulk messages: with two, ZeroMQ could hand both over at once and the time
         * between their arrivals said nothing (loopback "measured" 971 GB/s) */
        if (probe_links(w->probe_comm, 20, job->train.probe_bytes, 6, &pr, to))
            coord_client_fail(w->cl, "link probe between ranks 0 and 1 failed");
        char txt[128];
        snprintf(txt, sizeof txt, "%.17g %lld", pr.bw_Bps, (long long)pr.lat_ns);
        void *blob = txt;
        size_t n = strlen(txt) + 1;
        if (coord_client_bcast(w->cl, 0, 1, &blob, &n, to))
            coord_client_fail(w->cl, "no probe result from rank 0");
        long long lat = 0;
        if (w->rank != 0) {
            if (sscanf(blob, "%lg %lld", &pr.bw_Bps, &lat) != 2)
                coord_client_fail(w->cl, "malformed probe result from rank 0");
            pr.lat_ns = lat;
            free(blob);
        }
    }
    cluster_t cl;
    plan_opts_t po;
    job_link_t link = {.bw_Bps = pr.bw_Bps, .lat_ns = pr.lat_ns};
    job_config(job, 0, &link, &cl, &po);
    if (plan_build_opts(&w->plan, &w->model, &cl, &po, err, sizeof err))
        coord_client_fail(w->cl, "%s", err);
    if (w->rank == 0 && cfg->job_out && write_job(w, &cl, cfg->job_out))
        coord_client_fail(w->cl, "cannot write the job to %s: %s", cfg->job_out,
                          strerror(errno));
    w->plan_built = true;
    ASSERT(w->plan.n_units == n_units, "plan has %d units, expected %d", w->plan.n_units,
           n_units);
    w->done = xcalloc((size_t)w->plan.n_ops, sizeof *w->done);
    worker_exec_init(w);
    if (cfg->resume_dir && (*rc = resume_setup(w))) {
        worker_destroy(&w);
        return NULL;
    }
    /* a fresh job starts from an empty checkpoint directory (the command line refused one
     * holding a complete checkpoint): what a run killed before its first one left goes */
    if (w->rank == 0 && cfg->checkpoint_dir && !cfg->resume_dir)
        job_ckpt_prune(cfg->checkpoint_dir, -1, -1);
    if (w->rank == 0) {
        char sb[64];
        log_info("plan hash %016llx", (unsigned long long)plan_hash(&w->plan));
        log_info("connections: per host at most %d to the coordinator, %d to a PS shard, %d to "
                 "another socket (more are ended when accepted)", conn_cap_for(2 * w->world),
                 conn_cap_for(w->world * ps_clients_per_rank(w)), conn_cap_for(w->world));
        log_info("link probe: %.1f MB/s, %.1f us one-way; planned on %.1f MB/s, %.1f us "
                 "(job_link_settle); plan: %s on %d workers, %d shards",
                 pr.bw_Bps / 1e6, pr.lat_ns / 1e3, cl.nic_Bps * cl.nic_efficiency / 1e6,
                 cl.lat_ns / 1e3, scheme_name(po.scheme, sb, sizeof sb), w->plan.workers,
                 w->plan.shards);
        for (int u = 0; u < w->plan.n_units; u++)
            if (w->plan.units[u].layer >= 0)
                log_info("  unit %d %-12s %s", u, worker_unit_name(w, u),
                         sync_method_name(w->plan.units[u].method));
        if (cfg->print_plan) { /* one write: the other ranks' lines do not cut into it */
            char *text = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&text, &len);
            if (!f) die("open_memstream: %s", strerror(errno));
            plan_print(&w->plan, f, 0);
            fclose(f);
            log_block(text, len);
            free(text);
        }
    }
    if (w->emulate) {
        /* the simulator's unit times (core/unit_times.h), at this rank's speed: a `speed =
         * NODE:FACTOR` line slows (or speeds) its emulated compute as in the simulator;
         * straggler_sigma's and jitter_sigma's random draws are the simulator's alone */
        if (unit_times_profile(&w->times, &w->plan, job->profile_path, err, sizeof err))
            coord_client_fail(w->cl, "%s", err);
        double speed = cluster_node_speed(&cl, w->rank);
        for (int u = 0; u < n_units; u++) {
            w->times.fwd_ns[u] = unit_times_at_speed(w->times.fwd_ns[u], speed);
            w->times.bwd_ns[u] = unit_times_at_speed(w->times.bwd_ns[u], speed);
        }
    }
    units_build(w);
    layout_from_plan(w);
    if (w->staged) { /* the SFB update's operands on its device */
        int64_t stash = 0, gsum = 0;
        for (int u = 0; u < w->plan.n_units; u++) {
            const wk_unit_t *wu = &w->units[u];
            if (w->plan.units[u].method != SYNC_SFB) continue;
            int64_t a = (int64_t)w->world * wu->k * (wu->m + wu->n), b = (int64_t)wu->m * wu->n;
            if (a > stash) stash = a;
            if (b > gsum) gsum = b;
        }
        if (gsum > 0) {
            w->ustash = compute_alloc_floats(w->ucompute, stash);
            w->ugsum = compute_alloc_floats(w->ucompute, gsum);
        }
    }

    /* the colocated PS shard, then everyone's shard endpoint */
    if (w->rank < w->plan.shards) {
        ps_server_config_t pc = {.shard = w->rank, .n_workers = w->world, .world = w->world,
                                 .bind = bind, .layout = &w->layout,
                                 .init = w->t_start > 0 ? w->shard_snapshot : w->params,
                                 .start_version = w->t_start,
                                 .staleness = job->staleness, .update = worker_shard_update,
                                 .update_arg = w,
                                 .on_push = cfg->trace_prefix ? worker_push_arrived : NULL,
                                 .on_push_arg = w,
                                 .conn_cap = conn_cap_for(w->world * ps_clients_per_rank(w))};
        if (cfg->trace_prefix) {
            w->arrivals = xcalloc((size_t)w->world * n_units, sizeof *w->arrivals);
            for (int i = 0; i < w->world * n_units; i++) w->arrivals[i].iteration = -1;
            w->unit_shard_blocks = xcalloc((size_t)n_units, sizeof *w->unit_shard_blocks);
            for (int b = 0; b < w->layout.n_blocks; b++)
                if (w->layout.blocks[b].shard == w->rank)
                    w->unit_shard_blocks[w->layout.blocks[b].range]++;
        }
        if (!(w->ps = ps_server_new(&pc))) coord_client_fail(w->cl, "cannot bind the PS shard");
    }
    w->ps_eps = worker_allgather(w, 10, w->ps ? ps_server_endpoint(w->ps) : "-",
                                 cfg->timeout_ms);
    /* where this rank listens (for operators, and the test that sends garbage to them) */
    log_info("rank %d endpoint: PS shard %s", w->rank, w->ps ? ps_server_endpoint(w->ps) : "-");
    for (int u = 0; u < n_units; u++)
        if (w->plan.units[u].method == SYNC_SFB || owns_bucket(&w->plan, u))
            log_info("rank %d endpoint: %s of %s %s", w->rank,
                     sync_method_name(w->plan.units[u].method), worker_unit_name(w, u),
                     comm_endpoint(w->ucomm[u]));
    for (int u = 0; u < n_units; u++) {
        sync_method_t m = w->plan.units[u].method;
        if (m == SYNC_SFB)
            for (int r = 0; r < w->world; r++)
                if (r != w->rank) comm_connect(w->ucomm[u], r, eps[r][1 + u]);
        if (owns_bucket(&w->plan, u) && w->world > 1) { /* the bucket's ring */
            int right = (w->rank + 1) % w->world;
            comm_connect(w->ucomm[u], right, eps[right][1 + u]);
        }
    }
    for (int r = 0; r < w->world; r++) {
        for (int k = 0; k <= n_units; k++) free(eps[r][k]);
        free(eps[r]);
    }
    free(eps);

    if (cfg->trace_prefix) {
        char pre[1100];
        snprintf(pre, sizeof pre, "%s-rank%d", cfg->trace_prefix, w->rank);
        if (!(w->trace = trace_open(pre, err, sizeof err))) coord_client_fail(w->cl, "%s", err);
    }
    if (w->rank == 0) {
        const char *hdr = "epoch,iteration,loss,train_acc,test_acc,images_per_s,seconds";
        if (cfg->csv_path) {
            /* a resumed job continues the table of the run it resumes from its checkpoint's
             * iteration on; a new file gets a header */
            if (w->t_start > 0 && csv_keep_rows_to(cfg->csv_path, w->t_start))
                coord_client_fail(w->cl, "%s: cannot rewrite: %s", cfg->csv_path,
                                  strerror(errno));
            if (!(w->csv = outfile_open(cfg->csv_path, w->t_start > 0 ? "a" : "w")))
                coord_client_fail(w->cl, "%s: cannot open: %s", cfg->csv_path, strerror(errno));
            /* the file names the plan that made each row (plan_hash, as the log and the
             * written job do) */
            if (ftell(w->csv) == 0) fprintf(w->csv, "%s,plan\n", hdr);
        }
        printf("%s\n", hdr);
        fflush(stdout);
    }
    int64_t shared_t0_ns = share_time_base(w, cc.join_ms);
    if (coord_client_barrier(w->cl, 0, cc.join_ms))
        coord_client_fail(w->cl, "not every rank reached the start barrier");
    w->barrier_next = 1;

    /* run: the compute thread, one thread per worker-side sync op */
    w->report_t0_ns = comm_now_ns();
    w->t0_ns = shared_t0_ns ? shared_t0_ns : w->report_t0_ns;
    w->t0_shared = shared_t0_ns != 0;
    /* the shard stamps its answers on the trace clock only where every rank of its host
     * reads the same one: PULL rows then start when the values left the shard */
    if (w->ps && w->trace && w->t0_shared) ps_server_set_trace_zero(w->ps, w->t0_ns);
    return w;
bad_input:
    *rc = 2;
    worker_destroy(&w);
    return NULL;
fail:
    *rc = 1;
    worker_destroy(&w);
    return NULL;
}

void worker_finish(worker_t *w)
{
    const worker_config_t *cfg = w->cfg;
    char err[1024];
    if (cfg->params_out && write_params(w, cfg->params_out))
        coord_client_fail(w->cl, "cannot write %s.%d", cfg->params_out, w->rank);
    trace_close(&w->trace);
    coord_client_progress(w->cl, w->iterations, -1, "the final barrier");
    coord_client_destroy(&w->cl); /* final barrier: shards serve until everyone is done */
    if (w->summary[0]) log_info("%s", w->summary); /* after rank 0's last row */
    if (w->ps && ps_server_n_rejected(w->ps))
        log_warn("rank %d: the PS shard rejected %llu messages", w->rank,
                 (unsigned long long)ps_server_n_rejected(w->ps));
    if (w->rank == 0 && cfg->trace_prefix &&
        trace_merge_ranks(cfg->trace_prefix, w->world, err, sizeof err))
        log_warn("trace: %s", err);
}

void worker_destroy(worker_t **wp)
{
    worker_t *w = *wp;
    if (!w) return;
    if (w->cl) coord_client_destroy(&w->cl);
    ps_server_destroy(&w->ps);
    if (w->ps_eps)
        for (int r = 0; r < w->world; r++) free(w->ps_eps[r]);
    free(w->ps_eps);
    if (w->ucomm)
        for (int u = 0; u < n_units_of(&w->model); u++) comm_destroy(&w->ucomm[u]);
    free(w->ucomm);
    comm_destroy(&w->probe_comm);
    coord_server_destroy(&w->cs);
    if (w->csv) fclose(w->csv);
    units_free(w);
    ps_layout_fini(&w->layout);
    free(w->done);
    if (w->plan_built) plan_fini(&w->plan);
    unit_times_fini(&w->times);
    free(w->arrivals);
    free(w->unit_shard_blocks);
    if (w->staged) stage_free(w, w->params);
    else if (!w->net) free(w->params);
    free(w->hist_local);
    free(w->hist_server);
    free(w->shard_snapshot);
    free(w->zeros);
    free(w->layer_off);
    free(w->entries);
    for (int d = 0; w->dev && d < w->devices; d++) {
        wk_device_t *dv = &w->dev[d];
        if (d > 0 && !dv->net) free(dv->params);
        if (dv->loaded) compute_event_destroy(dv->compute, &dv->loaded);
        if (dv->locks)
            for (int u = 0; u < n_units_of(&w->model); u++) pthread_mutex_destroy(&dv->locks[u]);
        free(dv->locks);
        nnet_destroy(&dv->net);
        compute_destroy(&dv->compute);
    }
    free(w->dev);
    w->net = NULL; /* device 0's */
    w->compute = NULL;
    if (w->ustash) compute_release(w->ucompute, w->ustash);
    if (w->ugsum) compute_release(w->ucompute, w->ugsum);
    compute_destroy(&w->ucompute);
    if (w->have_data) {
        data_fini(&w->train);
        data_fini(&w->test);
    }
    model_fini(&w->model);
    pthread_mutex_destroy(&w->mu);
    worker_exec_fini(w);
    pthread_mutex_destroy(&w->update_mu);
    pthread_mutex_destroy(&w->trace_mu);
    pthread_mutex_destroy(&w->intra_mu);
    pthread_cond_destroy(&w->quiesce_cv);
    free(w);
    *wp = NULL;
}

int worker_run(const worker_config_t *cfg)
{
    /* Received payloads are fresh buffers of up to a KV block (4 MB) each: with glibc's
     * defaults each one is a new mmap whose pages the kernel zeroes on first touch, which
     * cost a quarter of the CPU of a 2-worker run. Kept in the heap, they are reused. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    int rc;
    worker_t *w = worker_new(cfg, &rc);
    if (!w) return rc;
    worker_exec_run(w);
    worker_finish(w);
    worker_destroy(&w);
    return 0;
}

static int run_local_rank(int rank, void *arg)
{
    (void)rank;
    return worker_run(arg);
}

int worker_run_local(worker_config_t *cfg, int n)
{
    keyring_t *keys = NULL;
    const keyring_t *given = cfg->security.keys;
    if (!given && !cfg->security.insecure && !cfg->security.keys_dir) {
        char err[256];
        if (!(keys = keyring_generate(n, err, sizeof err))) {
            fprintf(stderr, "poseidon train: %s (--insecure runs without encryption)\n", err);
            return 1;
        }
        cfg->security.keys = keys;
    }
    int rc = launch_local(n, launch_free_port(), 15000, run_local_rank, cfg);
    cfg->security.keys = given;
    keyring_destroy(&keys);
    return rc;
}
