/* worker_exec: the plan's executor of one rank (runtime/exec/worker_state.h). A compute thread
 * runs FWD/BWD in op-array order; every worker-side sync op has a thread that runs its
 * instances in iteration order once their plan dependencies are met (the only waits there
 * are: core/plan.h states them), and moves bytes through ps/sfb/allreduce. */
#include "runtime/exec/worker_state.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/sync/allreduce.h"
#include "runtime/exec/job_checkpoint.h"
#include "runtime/sync/sfb.h"
#include "runtime/sync/wire.h"
#include "core/vec.h"
#include "runtime/exec/train.h"
#include "runtime/transport/clock.h"
#include "runtime/transport/comm_mux.h"

static int unit_layer(const worker_t *w, int u)
{
    const plan_unit_t *un = &w->plan.units[u];
    return un->layer >= 0 ? un->layer : un->first;
}

/* A trace row of op instance (op, t) as node `node` ran it (core/trace.h). */
static void wk_trace_node(worker_t *w, int node, int op, int64_t t, int peer, int64_t bytes,
                          int64_t t0, int64_t t1)
{
    if (!w->trace) return;
    const plan_op_t *po = &w->plan.ops[op];
    trace_lane_t lane = po->res == RES_COMPUTE  ? TRACE_LANE_COMPUTE
                        : po->res == RES_NET    ? TRACE_LANE_NET
                        : po->res == RES_SERVER ? TRACE_LANE_SERVER
                        : po->res == RES_INTRA  ? TRACE_LANE_INTRA
                                                : TRACE_LANE_UPDATE;
    trace_row_t r = {node, (int)t, op_kind_name(po->kind), worker_unit_name(w, po->unit), peer,
                     bytes, t0 - w->t0_ns, t1 - w->t0_ns, lane};
    pthread_mutex_lock(&w->trace_mu);
    trace_write(w->trace, &r);
    pthread_mutex_unlock(&w->trace_mu);
}

static void wk_trace(worker_t *w, int op, int64_t t, int peer, int64_t bytes, int64_t t0,
                     int64_t t1)
{
    wk_trace_node(w, w->rank, op, t, peer, bytes, t0, t1);
}

/* ------------------------------------------------------------------- dependencies */

void worker_exec_init(worker_t *w)
{
    atomic_init(&w->stop_at, INT64_MAX);
    const plan_t *p = &w->plan;
    int n = p->n_ops;
    w->op_cv = xcalloc((size_t)n, sizeof *w->op_cv);
    w->op_efd = xcalloc((size_t)n, sizeof *w->op_efd);
    for (int op = 0; op < n; op++) {
        pthread_cond_init(&w->op_cv[op], NULL);
        w->op_efd[op] = -1;
        if (p->ops[op].kind == OP_SFB &&
            (w->op_efd[op] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
            die("eventfd: %s", strerror(errno));
    }
    w->n_op_cv = n;
    w->dev_ran = xcalloc((size_t)n, sizeof *w->dev_ran);
    w->dev_t0_ns = xcalloc((size_t)n, sizeof *w->dev_t0_ns);
    w->dev_emu_end_ns = xcalloc((size_t)n, sizeof *w->dev_emu_end_ns);
    int *cnt = xcalloc((size_t)n + 1, sizeof *cnt);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* counts -> offsets; cnt becomes the fill cursor */
            w->wake_first = xcalloc((size_t)n + 1, sizeof *w->wake_first);
            for (int op = 0; op < n; op++) w->wake_first[op + 1] = w->wake_first[op] + cnt[op];
            w->wake = xcalloc((size_t)w->wake_first[n] + 1, sizeof *w->wake);
            memcpy(cnt, w->wake_first, (size_t)n * sizeof *cnt);
        }
        for (int i = 0; i < n; i++) {
            const plan_op_t *po = &p->ops[i];
            for (int d = 0; d < po->n_deps; d++) {
                int j = p->deps[po->dep_first + d].op;
                if (pass == 0) cnt[j]++;
                else w->wake[cnt[j]++] = i;
            }
            /* a push wakes the receive side of its unit's pull (WAIT_OWN_PUSH) */
            int pull = po->kind == OP_PUSH ? p->units[po->unit].op_pull : -1;
            if (pull >= 0) {
                if (pass == 0) cnt[i]++;
                else w->wake[cnt[i]++] = pull;
            }
        }
    }
    free(cnt);
    worker_ls_init(w);
}

static bool deps_met(const worker_t *w, int op, int64_t t)
{
    const plan_op_t *po = &w->plan.ops[op];
    for (int d = 0; d < po->n_deps; d++) {
        const plan_dep_t *dp = &w->plan.deps[po->dep_first + d];
        int64_t need = t - dp->iter_back;
        if (need >= 0 && w->done[dp->op] <= need) return false;
    }
    return true;
}

/* The deps of (op, t) on ops that are not compute: its parameters are in place. */
static bool sync_deps_met(const worker_t *w, int op, int64_t t)
{
    const plan_op_t *po = &w->plan.ops[op];
    for (int d = 0; d < po->n_deps; d++) {
        const plan_dep_t *dp = &w->plan.deps[po->dep_first + d];
        int64_t need = t - dp->iter_back;
        if (w->plan.ops[dp->op].res != RES_COMPUTE && need >= 0 && w->done[dp->op] <= need)
            return false;
    }
    return true;
}

/* What a thread waits for: the plan's dependencies of an instance (every wait of an op's
 * execution, the reuse of its buffers included: core/plan.h), the syncs of its parameters
 * alone (the report's evaluation), or this rank's own push (the receive side of a PULL asks
 * the shards once the push is out; the plan's PULL waits for APPLY, which waits for it). */
typedef enum { WAIT_DEPS, WAIT_SYNC_DEPS, WAIT_OWN_PUSH } wait_kind_t;

static bool wait_ready(const worker_t *w, wait_kind_t k, int op, int64_t t)
{
    const plan_op_t *po = &w->plan.ops[op];
    const plan_unit_t *un = &w->plan.units[po->unit];
    switch (k) {
    case WAIT_DEPS: return deps_met(w, op, t);
    case WAIT_SYNC_DEPS: return sync_deps_met(w, op, t);
    case WAIT_OWN_PUSH: return w->done[un->op_push] > t;
    }
    return false;
}

/* Blocks until the condition holds; a wait longer than the timeout ends the job, naming the
 * iteration, the layer and what it waited for. With a comm c (the op has an eventfd, see
 * worker_t.op_efd), the thread waits in comm_stash_until on c instead of on the op's
 * condition: what peers send on c meanwhile is taken off the sockets as it arrives. */
/* How often a waiting thread wakes to look at its deadline. Every event it waits for (a
 * completion, a stop) signals it, so this bounds only how late a timeout is noticed. At 100
 * ms, the ranks of a 32-node GoogLeNet hybrid run dilated 72 times spent 26.2 CPU-seconds
 * per iteration (0.60 of a 2-core host) mostly waking their ~130 waiting threads; at 1 s,
 * 12.6 (0.29). */
#define WAIT_CHECK_MS 1000

static void wait_for_on(worker_t *w, wait_kind_t k, int op, int64_t t, comm_t *c)
{
    const plan_op_t *po = &w->plan.ops[op];
    ASSERT(!c || w->op_efd[op] >= 0, "op %d waits on a comm without an eventfd", op);
    int64_t deadline = clock_now_ns() + (int64_t)w->cfg->timeout_ms * 1000000;
    pthread_mutex_lock(&w->mu);
    int64_t paused0 = w->ckpt_paused_ns;
    while (!wait_ready(w, k, op, t) && t < atomic_load(&w->stop_at)) {
        if (clock_now_ns() > deadline + (w->ckpt_paused_ns - paused0) && !w->ckpt_busy) {
            pthread_mutex_unlock(&w->mu);
            coord_client_fail(w->cl, "%s of layer %s, iteration %lld: %s not met within %d ms",
                              op_kind_name(po->kind), worker_unit_name(w, po->unit), (long long)t,
                              k == WAIT_DEPS        ? "its plan dependencies"
                              : k == WAIT_SYNC_DEPS ? "the syncs of its parameters"
                                                    : "its own push",
                              w->cfg->timeout_ms);
        }
        if (c) {
            /* a completion after the check above leaves the eventfd readable: no wake-up
             * is lost between the unlock and the poll */
            pthread_mutex_unlock(&w->mu);
            if (comm_stash_until(c, w->op_efd[op], WAIT_CHECK_MS) < 0)
                coord_client_fail(w->cl, "%s of layer %s, iteration %lld: receive failed",
                                  op_kind_name(po->kind), worker_unit_name(w, po->unit), (long long)t);
            uint64_t n;
            if (read(w->op_efd[op], &n, sizeof n) < 0 && errno != EAGAIN)
                die("eventfd read: %s", strerror(errno));
            pthread_mutex_lock(&w->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += WAIT_CHECK_MS / 1000;
        pthread_cond_timedwait(&w->op_cv[op], &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
}

static void wait_for(worker_t *w, wait_kind_t k, int op, int64_t t)
{
    wait_for_on(w, k, op, t, NULL);
}

static void mark_done(worker_t *w, int op, int64_t t)
{
    pthread_mutex_lock(&w->mu);
    ASSERT(w->done[op] == t, "op %d: instance %lld done after %lld", op, (long long)t,
           (long long)w->done[op]);
    w->done[op] = t + 1;
    if (w->quiescing) pthread_cond_broadcast(&w->quiesce_cv);
    for (int i = w->wake_first[op]; i < w->wake_first[op + 1]; i++) {
        pthread_cond_broadcast(&w->op_cv[w->wake[i]]);
        uint64_t one = 1;
        if (w->op_efd[w->wake[i]] >= 0 && write(w->op_efd[w->wake[i]], &one, sizeof one) < 0 &&
            errno != EAGAIN)
            die("eventfd write: %s", strerror(errno));
    }
    pthread_mutex_unlock(&w->mu);
}

static void progress(worker_t *w, int op, int64_t t, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    coord_client_progress(w->cl, t, unit_layer(w, w->plan.ops[op].unit), what);
}

/* ------------------------------------------------------------------------ updates */

/* SGD with momentum over arena range [off, off + count): p, g, h point at the range's first
 * float; g is scaled by `scale` (1 / replicas: the mean over the combined batch). The same
 * arithmetic as the single-worker solver (compute_cpu's sgd_update), entry by entry so that
 * biases get no weight decay. */
static void sgd_range(const worker_t *w, int64_t off, int64_t count, float *p, const float *g,
                      float *h, float scale, int64_t t)
{
    const solver_config_t *sc = &w->solver;
    float lr = (float)solver_lr(sc, t), mom = (float)sc->momentum;
    for (int e = 0; e < w->n_entries; e++) {
        const wk_entry_t *en = &w->entries[e];
        int64_t a = en->offset > off ? en->offset : off;
        int64_t b = en->offset + en->count < off + count ? en->offset + en->count : off + count;
        if (a >= b) continue;
        float wd = en->is_bias ? 0.0f : (float)sc->weight_decay;
        int64_t i = a - off;
        vec_sgd_momentum(p + i, g + i, h + i, b - a, scale, lr, mom, wd);
    }
}

static int entry_layer(const worker_t *w, uint64_t offset)
{
    for (int e = 0; e < w->n_entries; e++)
        if ((int64_t)offset >= w->entries[e].offset &&
            (int64_t)offset < w->entries[e].offset + w->entries[e].count)
            return w->entries[e].layer;
    return -1;
}

/* The PS shard's update (APPLY): the sum over workers of one block's gradients. */
void worker_shard_update(void *arg, float *params, const float *grad_sum, size_t count,
                         uint64_t offset, int64_t t)
{
    worker_t *w = arg;
    int64_t t0 = clock_now_ns();
    float unscale; /* fp16: the shard applies only what VERDICT(t) took (worker_shard_ready) */
    worker_ls_step(w, t, &unscale);
    sgd_range(w, (int64_t)offset, (int64_t)count, params, grad_sum, w->hist_server + offset,
              1.0f / (float)w->replicas * unscale, t);
    if (w->emulate) { /* the full-size block's apply on the cluster's server: the model's */
        const cluster_t *c = &w->plan.cluster;
        double full = (double)count * worker_value_bytes(w) * w->scale * w->plan.workers;
        if (c->server_Bps > 0) clock_sleep_until_ns(t0 + llround(full / c->server_Bps * 1e9));
    }
    if (w->trace) {
        int l = entry_layer(w, offset);
        for (int u = 0; u < w->plan.n_units; u++)
            if (w->plan.units[u].layer == l && w->plan.units[u].op_apply >= 0)
                wk_trace(w, w->plan.units[u].op_apply, t, -1,
                         (int64_t)count * worker_value_bytes(w) * w->scale, t0, clock_now_ns());
    }
}

/* The shard's on_push (trace runs only): rank `peer`'s block of a unit arrived at this
 * shard. Once every block of the unit on this shard has arrived for the iteration, one PUSH
 * row records them: node = the pushing rank, peer = this shard, bytes = what arrived here,
 * start .. end = first .. last arrival. The merge (core/trace_merge) ends the pushing rank's own
 * PUSH row at the last of these arrivals at shards other than its own. A push's blocks for
 * one iteration come in order on one connection before any of the next iteration's, so one
 * record per (rank, unit) is enough. */
void worker_push_arrived(void *arg, int peer, uint64_t offset, int64_t t, int64_t recv_ns)
{
    worker_t *w = arg;
    int b = ps_layout_find(&w->layout, offset);
    ASSERT(b >= 0, "push of float offset %llu is not a block", (unsigned long long)offset);
    int u = w->layout.blocks[b].range;
    ASSERT(w->plan.units[u].op_push >= 0, "unit %d has PS blocks but no PUSH", u);
    wk_arrival_t *a = &w->arrivals[(size_t)peer * w->plan.n_units + u];
    if (a->iteration != t) *a = (wk_arrival_t){.iteration = t, .first_ns = recv_ns};
    a->blocks++;
    a->bytes += (int64_t)w->layout.blocks[b].count * worker_value_bytes(w);
    a->last_ns = recv_ns;
    if (a->blocks == w->unit_shard_blocks[u]) {
        if (w->scale > 1) a->bytes = plan_shard_bytes(&w->plan, u, w->rank); /* full size */
        wk_trace_node(w, peer, w->plan.units[u].op_push, t, w->rank, a->bytes, a->first_ns,
                      a->last_ns);
        a->iteration = -1;
    }
}

/* ----------------------------------------------------------------------- compute */

/* The parameters of unit u on device dv: its lock (device 0's are the node's: the units'). */
static pthread_mutex_t *device_lock(worker_t *w, wk_device_t *dv, int u)
{
    return dv->index == 0 ? &w->units[u].lock : &dv->locks[u];
}

/* Device dv's share of compute op (op, t): its own batch through its own replica; after a
 * BWD its gradient (or its factors) goes to its buffers, the node's for device 0. */
static void compute_op(worker_t *w, wk_device_t *dv, int op, int64_t t)
{
    const plan_op_t *po = &w->plan.ops[op];
    int u = po->unit, d = dv->index;
    const plan_unit_t *un = &w->plan.units[u];
    wk_unit_t *wu = &w->units[u];
    int s = (int)(t % w->n_slots);
    if (w->emulate) {
        dv->emu_end_ns =
            dv->emu_start_ns + (po->kind == OP_FWD ? w->times.fwd_ns[u] : w->times.bwd_ns[u]);
        clock_sleep_until_ns(dv->emu_end_ns);
        return;
    }
    nnet_t *net = dv->net;
    pthread_mutex_t *lock = device_lock(w, dv, u);
    if (po->kind == OP_FWD) {
        if (u == 0) { /* device d of node r is global worker r x devices + d */
            /* a GPU may still be copying the last iteration's gradients and factors out:
             * what the pass writes from here on waits for those copies (the host does not) */
            compute_order_after_copies_out(dv->compute);
            int *order = xmalloc((size_t)w->job->batch * sizeof *order);
            worker_batch_order(w->train.n, w->rank * w->devices + d, w->replicas, w->job->batch,
                               t, w->job->seed, w->job->train.shuffle, order);
            data_gather(&w->train, order, w->job->batch, nnet_input(net), nnet_labels(net));
            free(order);
        }
        pthread_mutex_lock(lock);
        for (int l = un->first; l <= un->last; l++) nnet_forward_layer(net, l);
        pthread_mutex_unlock(lock);
        if (un->last == w->model.n_layers - 1 && w->rank == 0) {
            double loss = 0;
            for (int l = 0; l < w->model.n_layers; l++)
                if (layer_is_loss(&w->model.layers[l])) loss += nnet_layer_loss(net, l);
            int correct = nnet_count_correct(net);
            pthread_mutex_lock(&w->mu);
            w->loss_sum += loss;
            w->loss_n++;
            w->correct += correct;
            pthread_mutex_unlock(&w->mu);
        }
        return;
    }
    if (u == w->plan.n_units - 1) {
        nnet_set_loss_scale(net, worker_ls_scale(w)); /* fp16; else 1 */
        nnet_backward_begin(net);
    }
    pthread_mutex_lock(lock);
    for (int l = un->last; l >= (un->first > 1 ? un->first : 1); l--)
        nnet_backward_layer(net, l);
    pthread_mutex_unlock(lock);
    /* the gradient leaves the net now: the next FWD/BWD may overwrite it mid-sync */
    const float *grads = nnet_arena(net)->grads;
    if (un->method == SYNC_NONE && un->layer >= 0 && !wk_unit_updates_locally(un)) {
        /* one worker (nothing to sync): the update follows the backward here, as the
         * single-worker trainer's does */
        int64_t off = w->layer_off[un->layer], count = w->model.layers[un->layer].params;
        pthread_mutex_lock(lock);
        sgd_range(w, off, count, dv->params + off, grads + off, w->hist_local + off, 1.0f, t);
        pthread_mutex_unlock(lock);
    }
    /* Copies out through the backend: on a GPU they go on its copy-out stream, after this
     * backward, and the thread goes on with the layers below at once (the LREDUCE of the
     * unit waits for `done`); on the CPU they are memcpy. */
    compute_t *c = dv->compute;
    compute_event_t *done = wu->copied ? wu->copied[d][s] : NULL;
    if (wu->ps_count)
        compute_download_async(c, wu->dev_g[d][s], grads + wu->ps_off,
                               (size_t)wu->ps_count * 4, done);
    if (un->method == SYNC_ALLREDUCE || wk_unit_updates_locally(un))
        compute_download_async(c, wu->dev_w[d][s], grads + wu->w_off, (size_t)wu->w_count * 4,
                               done);
    if (un->method == SYNC_SFB) {
        const float *x, *dy;
        int in, out;
        nnet_fc_factors(net, un->layer, &x, &dy, &in, &out);
        ASSERT(in == wu->n && out == wu->m, "fc %s: %dx%d, plan %dx%d", worker_unit_name(w, u), out,
               in, wu->m, wu->n);
        compute_download_async(c, wu->dev_u[d][s], dy, (size_t)wu->k_dev * wu->m * 4, done);
        compute_download_async(c, wu->dev_v[d][s], x, (size_t)wu->k_dev * wu->n * 4, done);
    }
}

static void report(worker_t *w, int64_t t, bool final);

/* Whether compute op (op, t) could start now but for the compute chain (the node's previous
 * compute op, which with several devices may still run on another one). */
static bool compute_ready(worker_t *w, int op, int64_t t)
{
    pthread_mutex_lock(&w->mu);
    bool ok = wait_ready(w, WAIT_SYNC_DEPS, op, t);
    pthread_mutex_unlock(&w->mu);
    return ok;
}

/* user + system CPU seconds of this process */
static double process_cpu_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0.0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* the peak resident memory of this process, MB (what tensor_scale is for) */
static double process_peak_rss_mb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? 0.0 : (double)ru.ru_maxrss / 1024.0;
}

/* ----------------------------------------------------------------- checkpoints */

/* Coordinator ids of a checkpoint's exchanges: one broadcast per rank and iteration */
#define CKPT_GATHER_ID0 (1LL << 41)
#define CKPT_SPACE_ID0 (1LL << 42)

/* Before rank files of checkpoint k are written: whether this rank's disk has room for the
 * files of every rank that writes to it (those of its host whose directory is on the same
 * file system: a local job's all share one), said before the disk fills rather than by a
 * write that fails half-way. The room is measured before the exchange, which no rank leaves
 * before every rank has measured, so no rank's file is counted twice; the ranks of one disk
 * judge it by the same numbers and agree. A shortage ends the job with one line. */
static void checkpoint_space(worker_t *w, int64_t k, int64_t bytes)
{
    char dir[4200], host[256] = "", line[400], err[4800], what[160];
    job_ckpt_iter_dir(dir, sizeof dir, w->cfg->checkpoint_dir, k);
    int64_t room = 0;
    uint64_t fsid = 0;
    if (job_ckpt_disk_free(dir, &room, &fsid, err, sizeof err))
        coord_client_fail(w->cl, "rank %d: %s", w->rank, err);
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    snprintf(line, sizeof line, "%lld %lld %llx %.200s", (long long)bytes, (long long)room,
             (unsigned long long)fsid, host);
    char **tab = worker_allgather(w, CKPT_SPACE_ID0 + k * (int64_t)w->world, line,
                                  w->cfg->timeout_ms);
    int64_t total = 0, least = room;
    int sharing = 0;
    const char *mine = strchr(strchr(line, ' ') + 1, ' '); /* " FSID HOST" */
    for (int r = 0; r < w->world; r++) {
        long long b, free_r;
        const char *rest = strchr(tab[r], ' ');
        rest = rest ? strchr(rest + 1, ' ') : NULL;
        if (sscanf(tab[r], "%lld %lld", &b, &free_r) != 2 || !rest || strcmp(rest, mine))
            continue;
        total += b, sharing++;
        if (free_r < least) least = free_r;
    }
    worker_allgather_free(w, tab);
    snprintf(what, sizeof what, "the checkpoint of iteration %lld (%d rank file%s of %.1f MB)",
             (long long)k, sharing, sharing == 1 ? "" : "s", bytes / 1e6);
    if (job_ckpt_space_check(dir, least, total, what, err, sizeof err))
        coord_client_fail(w->cl, "rank %d: %s", w->rank, err);
}

static bool checkpoint_due(const worker_t *w, int64_t t)
{
    int64_t every = w->cfg->checkpoint_every;
    return w->cfg->checkpoint_dir && every > 0 && t > w->t_start && t < w->iterations &&
           t % every == 0;
}

/* Blocks until every op this rank runs has completed its instances < k. No instance of k
 * starts meanwhile: each waits, through the plan, for a FWD or BWD of k. */
static void quiesce(worker_t *w, int64_t k)
{
    int64_t deadline = clock_now_ns() + (int64_t)w->cfg->timeout_ms * 1000000;
    pthread_mutex_lock(&w->mu);
    w->quiescing = true;
    for (int op = 0; op < w->plan.n_ops; op++) {
        if (!worker_op_runs_here(&w->plan.ops[op])) continue;
        while (w->done[op] < k) {
            if (clock_now_ns() > deadline) {
                pthread_mutex_unlock(&w->mu);
                coord_client_fail(w->cl, "checkpoint of iteration %lld: %s of layer %s has "
                                  "completed %lld iterations after %d ms",
                                  (long long)k, op_kind_name(w->plan.ops[op].kind),
                                  worker_unit_name(w, w->plan.ops[op].unit),
                                  (long long)w->done[op], w->cfg->timeout_ms);
            }
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000000;
            if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&w->quiesce_cv, &w->mu, &ts);
        }
    }
    w->quiescing = false;
    pthread_mutex_unlock(&w->mu);
}

/* Rank 0, every rank's file of checkpoint h->iter written: COMPLETE from their records in
 * tab ("BYTES CHECKSUM STOP", worker_allgather's). A failure ends the job. */
static void complete_write(worker_t *w, const job_ckpt_header_t *h, char **tab, const char *what)
{
    char err[2048];
    job_ckpt_complete_t c = {.iter = h->iter, .world = w->world, .devices = w->devices,
                             .plan_hash = h->plan_hash, .seed = h->seed};
    snprintf(c.model, sizeof c.model, "%s", h->model);
    c.files = xcalloc((size_t)w->world, sizeof *c.files);
    for (int r = 0; r < w->world; r++) {
        long long bytes;
        unsigned long long sum;
        if (sscanf(tab[r], "%lld %16llx", &bytes, &sum) != 2)
            coord_client_fail(w->cl, "%s: malformed record from rank %d", what, r);
        c.files[r] = (job_ckpt_file_t){bytes, sum};
    }
    c.keys = job_ckpt_job_keys(w->job);
    int rc = job_ckpt_write_complete(w->cfg->checkpoint_dir, &c, err, sizeof err);
    job_ckpt_complete_free(&c);
    if (rc) coord_client_fail(w->cl, "%s", err);
}

/* Under mu: the run stops before iteration k; every thread waiting for an instance of k or
 * later is released (its condition and, for a thread waiting on sockets, its eventfd). */
static void stop_at_set(worker_t *w, int64_t k)
{
    atomic_store(&w->stop_at, k);
    for (int op = 0; op < w->n_op_cv; op++) {
        pthread_cond_broadcast(&w->op_cv[op]);
        uint64_t one = 1;
        if (w->op_efd[op] >= 0 && write(w->op_efd[op], &one, sizeof one) < 0 && errno != EAGAIN)
            die("eventfd write: %s", strerror(errno));
    }
}

/* The checkpoint of iteration k (runtime/exec/job_checkpoint.h), before FWD of k: this rank
 * quiesces, its shard reaches version k, it writes its file; once every rank's is written
 * (a gather of their sizes and checksums through the coordinator) rank 0 writes COMPLETE,
 * and after a barrier each rank removes what the two newest checkpoints no longer need. A
 * failure ends the job. */
static void checkpoint_take(worker_t *w, int64_t k)
{
    const char *dir = w->cfg->checkpoint_dir;
    char what[96], err[2048];
    snprintf(what, sizeof what, "the checkpoint of iteration %lld", (long long)k);
    coord_client_progress(w->cl, k, -1, what);
    quiesce(w, k);
    snprintf(what, sizeof what, "writing the checkpoint of iteration %lld", (long long)k);
    coord_client_progress(w->cl, k, -1, what); /* the syncers' last word was their wait */
    int64_t t0 = clock_now_ns();
    pthread_mutex_lock(&w->mu);
    w->ckpt_busy = true;
    pthread_mutex_unlock(&w->mu);
    if (w->ps && ps_server_snapshot(w->ps, k, w->shard_snapshot, w->cfg->timeout_ms))
        coord_client_fail(w->cl, "%s: the PS shard did not reach version %lld", what,
                          (long long)k);
    job_ckpt_header_t h = worker_ckpt_header(w, k);
    checkpoint_space(w, k, job_ckpt_rank_bytes(&h));
    h.loss_sum = w->loss_sum;
    h.loss_n = w->loss_n;
    h.correct = w->correct;
    h.report_iter0 = w->report_iter0;
    pthread_mutex_lock(&w->mu); /* VERDICT(k - 1) has ruled: the scale of k's backward */
    h.loss_scale = w->ls_scale;
    h.loss_scale_good = w->ls_good;
    pthread_mutex_unlock(&w->mu);
    /* the other devices wait at the top of iteration k (device_main): their nets are still */
    job_ckpt_state_t st = worker_ckpt_state(w, &h);
    for (int d = 0; d < w->devices; d++)
        if (w->dev[d].net) nnet_rng_state_save(w->dev[d].net, d == 0 ? st.rng : st.dev_rng[d - 1]);
    char path[4200];
    job_ckpt_rank_path(path, sizeof path, dir, k, w->rank);
    job_ckpt_file_t mine;
    int rc = job_ckpt_write_rank(path, &h, &st, &mine, err, sizeof err);
    worker_ckpt_state_free(w, &st);
    if (rc) coord_client_fail(w->cl, "%s", err);
    int64_t t1 = clock_now_ns();
    log_info("rank %d: checkpoint of iteration %lld: %s, %.1f MB in %.1f ms", w->rank,
             (long long)k, path, mine.bytes / 1e6, (t1 - t0) * 1e-6);

    char line[64];
    snprintf(line, sizeof line, "%lld %016llx %d", (long long)mine.bytes,
             (unsigned long long)mine.checksum, coord_client_stop_requested(w->cl) ? 1 : 0);
    /* the other ranks write as many bytes: wait for them as for a disk of 10 MB/s */
    int64_t slow_ms = w->cfg->timeout_ms + mine.bytes / 10000;
    int wait_ms = slow_ms > (1 << 30) ? (1 << 30) : (int)slow_ms;
    char **tab = worker_allgather(w, CKPT_GATHER_ID0 + k * (int64_t)w->world, line, wait_ms);
    if (w->rank == 0) complete_write(w, &h, tab, what);
    /* every rank reads the same table: if one of them had heard a stop request, all stop
     * after this checkpoint */
    bool stop = false;
    for (int r = 0; r < w->world; r++) {
        const char *flag = strrchr(tab[r], ' ');
        stop |= flag && !strcmp(flag, " 1");
    }
    worker_allgather_free(w, tab);
    if (coord_client_barrier(w->cl, w->barrier_next++, wait_ms))
        coord_client_fail(w->cl, "%s: not every rank saw it complete", what);
    int64_t oldest = worker_ckpt_kept(w, k);
    if (w->rank == 0) {
        job_ckpt_prune(dir, k, oldest);
        log_info("checkpoint of iteration %lld complete: %s/iter-%lld (%d ranks, %.1f ms)",
                 (long long)k, dir, (long long)k, w->world, (clock_now_ns() - t0) * 1e-6);
    } else {
        job_ckpt_prune_rank(dir, w->rank, oldest);
    }
    pthread_mutex_lock(&w->mu);
    w->ckpt_last = k;
    pthread_cond_broadcast(&w->quiesce_cv); /* the other devices wait for it (device_main) */
    w->ckpt_busy = false;
    w->ckpt_paused_ns += clock_now_ns() - t0;
    if (stop) stop_at_set(w, k);
    pthread_mutex_unlock(&w->mu);
    if (stop && w->rank == 0)
        log_info("stopping after the checkpoint of iteration %lld (a rank was asked to stop by "
                 "a signal): resume with --resume %s", (long long)k, dir);
}

/* Device dv has run its share of compute op (op, t), from t0_ns until now. The node's
 * instance completes with the last device's share: one trace row for the node, from the
 * first device's start to the last one's end, and the op's dependents may go. */
static void device_ran(worker_t *w, wk_device_t *dv, int op, int64_t t, int64_t t0_ns)
{
    int64_t now = clock_now_ns();
    pthread_mutex_lock(&w->mu);
    bool first = w->dev_ran[op] == 0;
    if (first || t0_ns < w->dev_t0_ns[op]) w->dev_t0_ns[op] = t0_ns;
    if (first || dv->emu_end_ns > w->dev_emu_end_ns[op]) w->dev_emu_end_ns[op] = dv->emu_end_ns;
    bool last = ++w->dev_ran[op] == w->devices;
    if (last) {
        w->dev_ran[op] = 0;
        t0_ns = w->dev_t0_ns[op];
        w->emu_node_end_ns = w->dev_emu_end_ns[op];
    }
    pthread_mutex_unlock(&w->mu);
    if (!last) return;
    wk_trace(w, op, t, -1, 0, t0_ns, now);
    mark_done(w, op, t);
}

/* A device other than the node's (0), at the top of iteration k: waits until device 0 has
 * taken the checkpoint of k, which saves this device's dropout state (nothing may draw from
 * it meanwhile) and may stop the run there. */
static void checkpoint_wait(worker_t *w, int64_t k)
{
    pthread_mutex_lock(&w->mu);
    while (w->ckpt_last < k) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&w->quiesce_cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
}

/* After a wait that is not the plan's (a checkpoint, a report), emulated compute goes on
 * from now: its next op must not be dated back to the chain's last end, as if the wait had
 * not been. */
static void emulated_chain_restart(worker_t *w)
{
    if (!w->emulate) return;
    int64_t now = clock_now_ns();
    pthread_mutex_lock(&w->mu);
    if (w->emu_node_end_ns < now) w->emu_node_end_ns = now;
    pthread_mutex_unlock(&w->mu);
}

/* A device's thread: the plan's compute ops in op-array order, iteration after iteration,
 * each once the node's instances it depends on have completed (on every device). Device 0
 * also takes the checkpoints and writes rank 0's report rows. */
static void *device_main(void *arg)
{
    wk_device_t *dv = arg;
    worker_t *w = dv->w;
    bool lead = dv->index == 0;
    char tname[16];
    snprintf(tname, sizeof tname, "device %d", dv->index);
    pthread_setname_np(pthread_self(), tname);
    if (dv->compute) compute_bind_thread(dv->compute); /* a GPU's calls go to its device */
    int64_t last_progress_ns = 0;
    for (int64_t t = w->t_start; t < w->iterations; t++) {
        if (lead && worker_stop_signalled()) coord_client_request_stop(w->cl);
        if (checkpoint_due(w, t)) {
            if (lead) checkpoint_take(w, t);
            else checkpoint_wait(w, t);
            emulated_chain_restart(w);
        }
        if (t >= atomic_load(&w->stop_at)) break;
        for (int op = 0; op < w->plan.n_ops; op++) {
            const plan_op_t *po = &w->plan.ops[op];
            if (po->res != RES_COMPUTE) continue;
            if (lead) progress(w, op, t, "%s: its plan dependencies", op_kind_name(po->kind));
            /* emulated: whether only the compute chain (the node's previous op, which may
             * still run on another device) was left to wait for */
            bool ready = w->emulate && compute_ready(w, op, t);
            wait_for(w, WAIT_DEPS, op, t);
            if (lead && t == w->t_start + 1 && !w->cpu1_ns) { /* iteration 0 is over */
                w->cpu1_s = process_cpu_s();
                w->cpu1_ns = clock_now_ns();
            }
            if (lead) progress(w, op, t, "%s computing", op_kind_name(po->kind));
            int64_t t0 = clock_now_ns();
            pthread_mutex_lock(&w->mu);
            int64_t prev_end = w->emu_node_end_ns; /* the chain's last op, every device's */
            pthread_mutex_unlock(&w->mu);
            dv->emu_start_ns = ready && prev_end > 0 && prev_end < t0 ? prev_end : t0;
            compute_op(w, dv, op, t);
            device_ran(w, dv, op, t, t0);
        }
        if (lead && w->rank == 0 && t + 1 < w->iterations) {
            int64_t every = w->cfg->report_every > 0 ? w->cfg->report_every : w->steps;
            if ((t + 1) % every == 0) {
                report(w, t, false);
                emulated_chain_restart(w);
            }
            else if (clock_now_ns() - last_progress_ns > 250000000) { /* a terminal only */
                last_progress_ns = clock_now_ns();
                log_progress("  iteration %lld of %lld", (long long)(t + 1),
                             (long long)w->iterations);
            }
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------------- syncers */

typedef struct {
    wk_unit_t *wu;
    int slot, k, world;
} stash_arg_t;

static void stash_factors(void *arg, int rank, const float *u, const float *v, size_t k,
                          size_t m, size_t n)
{
    stash_arg_t *a = arg;
    ASSERT((int)k == a->k && (int)m == a->wu->m && (int)n == a->wu->n,
           "factors of rank %d: %zux%zu, %zux%zu", rank, k, m, k, n);
    /* every rank's u stacked, then every rank's v: the rebuild is then one GEMM over all
     * ranks' rows, one pass over the gradient instead of one per rank */
    float *slot = a->wu->stash[a->slot];
    memcpy(slot + (size_t)rank * k * m, u, k * m * 4);
    memcpy(slot + (size_t)a->world * k * m + (size_t)rank * k * n, v, k * n * 4);
}

/* Blocks until every device's copies out of BWD(u) into slot s have landed in host memory
 * (a GPU's copy-out stream; at once on the CPU). */
static void copies_out_wait(worker_t *w, int u, int s)
{
    wk_unit_t *wu = &w->units[u];
    for (int d = 0; wu->copied && d < w->devices; d++)
        compute_event_wait(w->dev[d].compute, wu->copied[d][s]);
}

/* dst += another device's gradient src (n floats), in fp32: src rounded to the wire
 * precision first when it is not fp32 (what crossed the interconnect). */
static void device_add(precision_t wire, float *dst, const float *src, int64_t n)
{
    if (wire_encoded(wire)) {
        wire_add_rounded(wire, dst, src, (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

/* LREDUCE of unit u, iteration t, once its copies out have landed: the other devices'
 * gradients added into the node's (device 0's) buffers, in device order; SFB: their factors
 * gathered below the node's, device d's at rows d x k_dev, so the node's factors are its
 * devices' batches stacked. What crosses the interconnect is at the wire precision: the
 * other devices' gradients are rounded to it and added in fp32, their factors rounded. */
static void local_reduce(worker_t *w, int u, int64_t t)
{
    int s = (int)(t % w->n_slots);
    const plan_unit_t *un = &w->plan.units[u];
    wk_unit_t *wu = &w->units[u];
    precision_t wire = w->plan.wire_precision;
    for (int d = 1; d < w->devices; d++) {
        if (wu->ps_count) device_add(wire, wu->gslot[s], wu->dev_g[d][s], wu->ps_count);
        if (un->method == SYNC_ALLREDUCE || wk_unit_updates_locally(un))
            device_add(wire, wu->ar_slot[s], wu->dev_w[d][s], wu->w_count);
        if (un->method == SYNC_SFB) {
            size_t ku = (size_t)wu->k_dev * wu->m, kv = (size_t)wu->k_dev * wu->n;
            float *du = wu->u_slot[s] + (size_t)d * ku, *dv = wu->v_slot[s] + (size_t)d * kv;
            memcpy(du, wu->dev_u[d][s], ku * 4);
            memcpy(dv, wu->dev_v[d][s], kv * 4);
            wire_round(wire, du, ku);
            wire_round(wire, dv, kv);
        }
    }
    if (wk_unit_updates_locally(un) && un->op_update >= 0) { /* fp16: its UPDATE applies */
        worker_ls_inject(w, un->op_lreduce, t, wu->ar_slot[s]);
        worker_ls_note(w, t, wu->ar_slot[s], wu->w_count);
    } else if (wk_unit_updates_locally(un)) { /* one node: the mean over its devices, here */
        pthread_mutex_lock(&wu->lock);
        sgd_range(w, wu->w_off, wu->w_count, w->params + wu->w_off, wu->ar_slot[s],
                  w->hist_local + wu->w_off, 1.0f / (float)w->replicas, t);
        pthread_mutex_unlock(&wu->lock);
    }
}

/* LBCAST of unit u: the node's synced parameters of the unit (device 0's) copied into the
 * other devices' replicas, each under its lock (under SSP a device may be computing).
 * Staged, the node's parameters are host memory and go to every GPU's replica on its
 * copy-in stream; the op ends when they have landed, so the FWD that waits for it reads
 * them (under SSP a GPU may be computing meanwhile, as a CPU replica may read a pull's
 * blocks mid-way). */
static void local_broadcast(worker_t *w, int u)
{
    const plan_unit_t *un = &w->plan.units[u];
    if (un->layer < 0) return;
    int64_t off = w->layer_off[un->layer], count = w->model.layers[un->layer].params;
    if (w->layer_w) count = w->layer_w[un->layer] + w->layer_b[un->layer]; /* tensor_scale */
    pthread_mutex_lock(&w->units[u].lock);
    if (w->staged) { /* the device locks matter to CPU devices run this way (tests) */
        for (int d = 0; d < w->devices; d++) {
            wk_device_t *dv = &w->dev[d];
            if (d > 0) pthread_mutex_lock(&dv->locks[u]);
            compute_upload_async(dv->compute, nnet_arena(dv->net)->params + off, w->params + off,
                                 (size_t)count * 4, dv->loaded);
        }
        for (int d = 0; d < w->devices; d++) {
            compute_event_wait(w->dev[d].compute, w->dev[d].loaded);
            if (d > 0) pthread_mutex_unlock(&w->dev[d].locks[u]);
        }
        pthread_mutex_unlock(&w->units[u].lock);
        return;
    }
    for (int d = 1; d < w->devices; d++) {
        wk_device_t *dv = &w->dev[d];
        pthread_mutex_lock(&dv->locks[u]);
        memcpy(dv->params + off, w->params + off, (size_t)count * 4);
        pthread_mutex_unlock(&dv->locks[u]);
    }
    pthread_mutex_unlock(&w->units[u].lock);
}

/* One syncer thread: its op, its unit, and what it keeps across iterations. */
typedef struct {
    worker_t *w;
    int op, u, layer;
    const plan_op_t *po;
    const plan_unit_t *un;
    wk_unit_t *wu;
    const char *name;              /* the unit's */
    int to;                        /* ms, every wait of a transfer */
    ps_client_t *pc;               /* PUSH, PULL */
    ps_pull_times_t *from_shard;   /* PULL: per shard, the last pull's */
    int64_t *arrived_ns;           /* SFB: per rank, when its factors arrived */
} syncer_t;

/* The receive side of the shards' PULL of iteration t, once this rank's push is out: the
 * values after apply(t) into the parameters, and a trace row per shard. */
static void sync_pull(syncer_t *sy, int64_t t)
{
    worker_t *w = sy->w;
    wk_unit_t *wu = sy->wu;
    progress(w, sy->op, t, "PS pull of layer %s from the shards", sy->name);
    int64_t t0 = clock_now_ns();
    /* the shards answer a pull of iteration i at version >= i + 1 - staleness: ask
     * for t + s to get the values after apply(t), the plan's PULL(t) */
    if (ps_client_pull_from(sy->pc, t + w->job->staleness, sy->layer, (uint64_t)wu->ps_off,
                            (uint64_t)wu->ps_count, w->params, sy->from_shard))
        coord_client_fail(w->cl, "PS pull of layer %s timed out after %d ms", sy->name, sy->to);
    /* PULL is the shard's op (core/trace.h): a row per shard that sent this rank a
     * part, node = the shard, peer = this rank, from when the shard answered (its
     * stamp, on this rank's clock when the zero is shared; else from the request)
     * to when the last block arrived here; the merge joins the ranks' rows */
    for (int sh = 0; sh < w->layout.n_shards; sh++) {
        const ps_pull_times_t *f = &sy->from_shard[sh];
        if (!f->bytes) continue;
        int64_t start = f->first_stamp_ns && w->t0_shared ? w->t0_ns + f->first_stamp_ns : t0;
        int64_t bytes = w->scale > 1 ? plan_shard_bytes(&w->plan, sy->u, sh) : f->bytes;
        wk_trace_node(w, sh, sy->op, t, w->rank, bytes, start, f->last_recv_ns);
    }
}

/* PUSH of iteration t: slot s's gradient to the shards. Returns the bytes sent. */
static int64_t sync_push(syncer_t *sy, int64_t t, int s)
{
    wk_unit_t *wu = sy->wu;
    progress(sy->w, sy->op, t, "PS push of layer %s to the shards", sy->name);
    worker_ls_inject(sy->w, sy->op, t, wu->gslot[s]); /* fp16: its VOTE says what it sends */
    worker_ls_note_own(sy->w, t, wu->gslot[s], wu->ps_count);
    if (ps_client_push(sy->pc, t, sy->layer, (uint64_t)wu->ps_off, (uint64_t)wu->ps_count,
                       wu->gslot[s]) ||
        ps_client_wait_sent(sy->pc))
        coord_client_fail(sy->w->cl, "PS push of layer %s timed out after %d ms", sy->name,
                          sy->to);
    return sy->un->ps_bytes; /* the plan's: the full size under tensor_scale */
}

/* SFB of iteration t: slot s's factors to every peer, theirs into the stash. Returns the
 * group's bytes, as the plan counts them. */
static int64_t sync_sfb(syncer_t *sy, int64_t t, int s)
{
    worker_t *w = sy->w;
    wk_unit_t *wu = sy->wu;
    progress(w, sy->op, t, "SFB of layer %s with every peer", sy->name);
    stash_arg_t sa = {wu, s, wu->k, w->world};
    if (sfb_exchange_at(w->ucomm[sy->u], w->plan.wire_precision, t, sy->layer, wu->u_slot[s],
                        wu->v_slot[s], (size_t)wu->k, (size_t)wu->m, (size_t)wu->n,
                        stash_factors, &sa, sy->arrived_ns, sy->to))
        coord_client_fail(w->cl, "SFB of layer %s timed out after %d ms", sy->name, sy->to);
    /* every rank's factors, rounded as every rank has them */
    worker_ls_note(w, t, wu->stash[s], (int64_t)w->world * wu->k * (wu->m + wu->n));
    /* the arrival of each peer's factors here: node = that peer, peer = this
     * rank; the merge ends the peer's own SFB row at the last of them */
    for (int r = 0; r < w->world; r++)
        if (r != w->rank)
            wk_trace_node(w, r, sy->op, t, w->rank, sy->un->sfb_peer_bytes, sy->arrived_ns[r],
                          sy->arrived_ns[r]);
    return sy->un->sfb_peer_bytes * (w->world - 1);
}

/* UPDATE of iteration t: the weight gradient rebuilt from every rank's factors in stash slot
 * s, and the solver step on the node's parameters. */
static void sync_update(syncer_t *sy, int64_t t, int s)
{
    worker_t *w = sy->w;
    wk_unit_t *wu = sy->wu;
    progress(w, sy->op, t, "UPDATE of layer %s (rebuild from factors)", sy->name);
    float unscale;
    if (!worker_ls_step(w, t, &unscale)) return; /* fp16: the step is skipped */
    pthread_mutex_lock(&w->update_mu);
    int64_t t0 = clock_now_ns();
    size_t per = (size_t)wu->k * (size_t)(wu->m + wu->n);
    /* staged: every rank's factors to the update's device, the GEMMs there, the
     * rebuilt gradient back (the SGD below runs on the node's host parameters) */
    compute_t *uc = w->ucompute;
    const float *stash = wu->stash[s];
    float *gsum = wu->gsum;
    if (w->ustash) {
        compute_bind_thread(uc);
        compute_upload(uc, w->ustash, stash, (size_t)w->world * per * 4);
        stash = w->ustash;
        gsum = w->ugsum;
    }
    /* gsum (m, n) = sum over ranks r of dy_r^T (m, k) x_r (k, n) / replicas, k = the node's
     * devices x batch x tokens: the ranks' dy and x are stacked (stash_factors), so one
     * GEMM with world x k rows */
    int rows = w->world * wu->k;
    compute_sgemm(uc, true, false, wu->m, wu->n, rows, 1.0f / (float)w->replicas * unscale,
                  stash, wu->m,
                  stash + (size_t)rows * wu->m, wu->n, 0.0f, gsum, wu->n);
    if (w->ustash) /* waits for the GEMMs */
        compute_download(uc, wu->gsum, w->ugsum, (size_t)wu->m * wu->n * 4);
    pthread_mutex_lock(&wu->lock);
    sgd_range(w, wu->w_off, wu->w_count, w->params + wu->w_off, wu->gsum,
              w->hist_local + wu->w_off, 1.0f, t);
    pthread_mutex_unlock(&wu->lock);
    if (w->emulate && w->times.update_flops > 0) /* the full-size rebuild and step on the
                                                  * cluster's device: the model's UPDATE */
        clock_sleep_until_ns(t0 + llround(sy->po->flops / w->times.update_flops * 1e9));
    pthread_mutex_unlock(&w->update_mu);
}

/* UPDATE of iteration t of a unit that applies its own update on the node (fp16, core/plan.h
 * "Loss scaling"): its all-reduced or locally reduced gradient in slot s, unless the step is
 * skipped. */
static void sync_update_node(syncer_t *sy, int64_t t, int s)
{
    worker_t *w = sy->w;
    wk_unit_t *wu = sy->wu;
    progress(w, sy->op, t, "UPDATE of layer %s", sy->name);
    float unscale;
    if (!worker_ls_step(w, t, &unscale)) return;
    pthread_mutex_lock(&wu->lock);
    sgd_range(w, wu->w_off, wu->w_count, w->params + wu->w_off, wu->ar_slot[s],
              w->hist_local + wu->w_off, 1.0f / (float)w->replicas * unscale, t);
    pthread_mutex_unlock(&wu->lock);
}

/* ALLREDUCE of iteration t: one ring over the bucket's slot s, then each member's update as
 * unfused. Returns the op's bytes. */
static int64_t sync_allreduce(syncer_t *sy, int64_t t, int s)
{
    worker_t *w = sy->w;
    const plan_bucket_t *pb = &w->plan.buckets[sy->un->bucket];
    const wk_bucket_t *wb = &w->buckets[sy->un->bucket];
    progress(w, sy->op, t, "ring all-reduce of layer %s (bucket of %d layers)", sy->name,
             pb->n_units);
    /* scaled tensors: chunks S times smaller, so that a step sends as many messages */
    size_t chunk = (size_t)worker_scaled_floats(w, worker_value_bytes(w) *
                                                       (int64_t)ALLREDUCE_CHUNK_FLOATS_DEFAULT);
    worker_ls_inject(w, sy->op, t, wb->slot[s]);
    if (allreduce_sum_at(w->ucomm[sy->u], w->plan.wire_precision, t, sy->layer, wb->slot[s],
                         (size_t)wb->count, chunk, sy->to))
        coord_client_fail(w->cl, "all-reduce of layer %s (bucket of %d layers) timed out after "
                          "%d ms", sy->name, pb->n_units, sy->to);
    worker_ls_note(w, t, wb->slot[s], wb->count);
    if (sy->un->op_update >= 0) return sy->po->bytes; /* fp16: each member's UPDATE applies */
    for (int v = pb->first; v <= pb->last; v++) {
        if (w->plan.units[v].bucket != sy->un->bucket) continue;
        wk_unit_t *wv = &w->units[v];
        pthread_mutex_lock(&wv->lock);
        sgd_range(w, wv->w_off, wv->w_count, w->params + wv->w_off, wv->ar_slot[s],
                  w->hist_local + wv->w_off, 1.0f / (float)w->replicas, t);
        pthread_mutex_unlock(&wv->lock);
    }
    return sy->po->bytes;
}

/* LREDUCE or LBCAST of iteration t (slot s) over the node's devices, holding the
 * interconnect; *t0 becomes when it got it. Returns the op's bytes. */
static int64_t sync_local(syncer_t *sy, int64_t t, int s, int64_t *t0)
{
    worker_t *w = sy->w;
    const plan_op_t *po = sy->po;
    progress(w, sy->op, t, "local %s of layer %s over %d devices",
             po->kind == OP_LREDUCE ? "reduce" : "broadcast", sy->name, w->devices);
    /* a GPU's copies out run on its DMA engine while the backward goes on: not
     * waited for holding the interconnect, which a broadcast may need meanwhile */
    if (po->kind == OP_LREDUCE) copies_out_wait(w, sy->u, s);
    pthread_mutex_lock(&w->intra_mu); /* the interconnect: one at a time */
    *t0 = clock_now_ns();
    if (po->kind == OP_LREDUCE) local_reduce(w, sy->u, t);
    else local_broadcast(w, sy->u);
    /* emulated: the node's interconnect as the plan prices it, when the copy
     * in this host's memory was faster */
    if (w->emulate)
        clock_sleep_until_ns(*t0 + w->plan.cluster.intra_lat_ns +
                               llround((double)po->bytes / w->plan.cluster.intra_Bps * 1e9));
    pthread_mutex_unlock(&w->intra_mu);
    return po->bytes;
}

/* Instance t of a syncer's op other than PULL, its dependencies met, from *t0 (which a local
 * op moves to when it got the interconnect). Returns the bytes its trace row records. */
static int64_t sync_instance(syncer_t *sy, int64_t t, int64_t *t0)
{
    int s = (int)(t % sy->w->n_slots);
    switch (sy->po->kind) {
    case OP_PUSH: return sync_push(sy, t, s);
    case OP_SFB: return sync_sfb(sy, t, s);
    case OP_UPDATE:
        if (sy->un->method == SYNC_SFB) sync_update(sy, t, s);
        else sync_update_node(sy, t, s);
        return 0;
    case OP_VERDICT: worker_ls_verdict(sy->w, t); return 0;
    case OP_VOTE: worker_ls_vote(sy->w, t); return sy->po->bytes * (sy->w->world - 1);
    case OP_ALLREDUCE: return sync_allreduce(sy, t, s);
    case OP_LREDUCE:
    case OP_LBCAST: return sync_local(sy, t, s, t0);
    default: ASSERT(0, "op kind %s has no worker-side executor", op_kind_name(sy->po->kind));
    }
    return 0;
}

static void *sync_main(void *arg)
{
    wk_arg_t *a = arg;
    worker_t *w = a->w;
    int op = a->op;
    const plan_op_t *po = &w->plan.ops[op];
    syncer_t sy = {.w = w, .op = op, .u = po->unit, .layer = unit_layer(w, po->unit), .po = po,
                   .un = &w->plan.units[po->unit], .wu = &w->units[po->unit],
                   .name = worker_unit_name(w, po->unit), .to = w->cfg->timeout_ms};
    char tname[16]; /* what top -H and /proc/PID/task/N/comm show: the op and its unit */
    snprintf(tname, sizeof tname, "%.6s %d", op_kind_name(po->kind), po->unit);
    pthread_setname_np(pthread_self(), tname);
    if (po->kind == OP_PULL)
        sy.from_shard = xcalloc((size_t)w->layout.n_shards, sizeof *sy.from_shard);
    if (po->kind == OP_SFB) sy.arrived_ns = xcalloc((size_t)w->world, sizeof *sy.arrived_ns);
    if (po->kind == OP_PUSH || po->kind == OP_PULL) {
        sy.pc = ps_client_new_on(w->ps_mux, &w->layout, sy.to);
        /* Pulls write the parameters in place, a block at a time under the unit's lock, which
         * the compute thread holds while FWD/BWD read them. Under BSP the plan already keeps
         * them apart (FWD(u, t + 1) waits for PULL(u, t)); under SSP(s) FWD may run during the
         * pull and see some blocks of the newer values and some of the older ones, both
         * within the staleness bound, never a half-written block. */
        ps_client_set_arena_lock(sy.pc, &sy.wu->lock);
        ps_client_set_wire(sy.pc, w->plan.wire_precision);
    }
    for (int64_t t = w->t_start; t < w->iterations && t < atomic_load(&w->stop_at); t++) {
        if (po->kind == OP_PULL) {
            /* the receive side of the shards' PULL: asked once this rank's push is out */
            progress(w, op, t, "PULL of %s: its own push", sy.name);
            wait_for(w, WAIT_OWN_PUSH, op, t);
            if (t >= atomic_load(&w->stop_at)) break; /* the run stops before t */
            sync_pull(&sy, t);
            mark_done(w, op, t);
            continue;
        }
        progress(w, op, t, "%s of %s: its plan dependencies", op_kind_name(po->kind), sy.name);
        /* SFB listens on its comm while it waits: peers' factors that come before this
         * rank's backward are timed on arrival (their senders' trace rows end there) */
        wait_for_on(w, WAIT_DEPS, op, t, po->kind == OP_SFB ? w->ucomm[sy.u] : NULL);
        if (t >= atomic_load(&w->stop_at)) break; /* the run stops before t */
        int64_t t0 = clock_now_ns();
        int64_t bytes = sync_instance(&sy, t, &t0);
        wk_trace(w, op, t, -1, bytes, t0, clock_now_ns());
        mark_done(w, op, t);
    }
    ps_client_destroy(&sy.pc);
    free(sy.from_shard);
    free(sy.arrived_ns);
    return NULL;
}

/* ------------------------------------------------------------------------ reports */

static double evaluate(worker_t *w)
{
    for (int u = 0; u < w->plan.n_units; u++) pthread_mutex_lock(&w->units[u].lock);
    compute_bind_thread(w->compute); /* the final report's runs on the main thread */
    compute_order_after_copies_out(w->compute); /* its passes overwrite what they read */
    double acc = train_evaluate(w->net, &w->test);
    for (int u = w->plan.n_units - 1; u >= 0; u--) pthread_mutex_unlock(&w->units[u].lock);
    return acc;
}

static void report(worker_t *w, int64_t t, bool final)
{
    /* the evaluation reads the parameters as FWD of the next iteration will see them; without
     * one nothing waits, so that a report does not hold the next FWD back from each pull as
     * it arrives (the plan has no such wait) */
    bool evaluates = !w->emulate && w->cfg->evaluate;
    if (!final && evaluates)
        for (int u = 0; u < w->plan.n_units; u++)
            wait_for(w, WAIT_SYNC_DEPS, w->plan.units[u].op_fwd, t + 1);
    int64_t now = clock_now_ns();
    double secs = (double)(now - w->report_t0_ns) * 1e-9; /* evaluation time excluded */
    double images = (double)(t + 1 - w->report_iter0) * w->job->batch * w->replicas;
    double ips = secs > 0 ? images / secs : 0;
    double loss = w->loss_n ? w->loss_sum / (double)w->loss_n : 0;
    double train_acc = w->loss_n ? (double)w->correct / (double)(w->loss_n * w->job->batch) : 0;
    double acc = -1;
    if (evaluates) acc = evaluate(w);
    int64_t e1 = clock_now_ns();
    char row[256];
    if (w->emulate)
        snprintf(row, sizeof row, "%.3f,%lld,,,,%.1f,%.3f", (double)(t + 1) / (double)w->steps,
                 (long long)(t + 1), ips, (double)(e1 - w->t0_ns) * 1e-9);
    else {
        char accs[32] = "";
        if (acc >= 0) snprintf(accs, sizeof accs, "%.4f", acc);
        snprintf(row, sizeof row, "%.3f,%lld,%.6f,%.4f,%s,%.1f,%.3f",
                 (double)(t + 1) / (double)w->steps, (long long)(t + 1), loss, train_acc, accs,
                 ips, (double)(e1 - w->t0_ns) * 1e-9);
    }
    log_progress_end(); /* the row replaces the progress line */
    printf("%s\n", row);
    fflush(stdout);
    if (w->csv) {
        fprintf(w->csv, "%s,%016llx\n", row, (unsigned long long)plan_hash(&w->plan));
        fflush(w->csv);
    }
    w->loss_sum = 0;
    w->loss_n = w->correct = 0;
    w->report_iter0 = t + 1;
    w->report_t0_ns = e1;
}

/* ------------------------------------------------------------------------- setup */

void worker_exec_run(worker_t *w)
{
    int n_threads = 0;
    pthread_t *th = xcalloc((size_t)w->plan.n_ops + 1, sizeof *th);
    wk_arg_t *args = xcalloc((size_t)w->plan.n_ops + 1, sizeof *args);
    th = xrealloc(th, (size_t)(w->plan.n_ops + w->devices) * sizeof *th);
    for (int d = 0; d < w->devices; d++)
        if (pthread_create(&th[n_threads++], NULL, device_main, &w->dev[d])) die("pthread_create");
    for (int op = 0; op < w->plan.n_ops; op++) {
        const plan_op_t *po = &w->plan.ops[op];
        bool mine = worker_op_runs_here(po) && po->res != RES_COMPUTE;
        if (!mine) {
            ASSERT(po->kind == OP_APPLY || po->res == RES_COMPUTE,
                   "op %s placed on shards has no executor", op_kind_name(po->kind));
            continue;
        }
        if ((po->kind == OP_PUSH || po->kind == OP_PULL) && !w->ps_mux) {
            if (!(w->ps_mux = ps_client_mux_new(w->rank, w->world, &w->layout,
                                                (const char *const *)w->ps_eps,
                                                w->cfg->timeout_ms)))
                coord_client_fail(w->cl, "cannot connect to the PS shards");
            if (w->sync_sq) comm_mux_set_order(w->ps_mux, w->sync_sq); /* send_order */
            else if (w->plan.send_order == SEND_ORDER_FAIR)
                comm_mux_set_slices(w->ps_mux, worker_slice_bytes(w), true);
        }
        args[op] = (wk_arg_t){w, op};
        if (pthread_create(&th[n_threads++], NULL, sync_main, &args[op])) die("pthread_create");
    }
    for (int i = 0; i < n_threads; i++) pthread_join(th[i], NULL);
    comm_mux_destroy(&w->ps_mux);
    bool stopped = atomic_load(&w->stop_at) < w->iterations;
    if (stopped) w->iterations = atomic_load(&w->stop_at); /* the run ends there */
    if (w->iterations - w->t_start >= 2) /* iterations start+1 .. T-1: from the start of the
                                          * first one's first op to the end; logged after the
                                          * final barrier, below rank 0's last row */
        /* the host's wall time (the cluster's x K): CPU against it says how busy the host was */
        snprintf(w->summary, sizeof w->summary, "rank %d: steady_cpu_s %.3f wall_s %.3f "
                 "iterations %lld peak_rss_mb %.0f", w->rank, process_cpu_s() - w->cpu1_s,
                 (double)(clock_now_ns() - w->cpu1_ns) * 1e-9 * clock_dilation(),
                 (long long)(w->iterations - w->t_start - 1), process_peak_rss_mb());
    free(th);
    free(args);
    /* a stopped run has no final row: the resumed one writes the rows from the checkpoint on */
    if (w->rank == 0 && !stopped) report(w, w->iterations - 1, true);
}

void worker_exec_fini(worker_t *w)
{
    if (w->op_cv)
        for (int op = 0; op < w->n_op_cv; op++) {
            pthread_cond_destroy(&w->op_cv[op]);
            if (w->op_efd[op] >= 0) close(w->op_efd[op]);
        }
    free(w->op_cv);
    free(w->op_efd);
    free(w->wake_first);
    free(w->wake);
    free(w->dev_ran);
    free(w->dev_t0_ns);
    free(w->dev_emu_end_ns);
    worker_ls_fini(w);
    w->dev_emu_end_ns = NULL;
    w->dev_ran = NULL;
    w->dev_t0_ns = NULL;
    w->op_cv = NULL;
    w->op_efd = w->wake_first = w->wake = NULL;
}
