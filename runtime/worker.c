#include "runtime/worker.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
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
#include "runtime/allreduce.h"
#include "runtime/comm.h"
#include "runtime/compute.h"
#include "runtime/coord.h"
#include "runtime/data.h"
#include "runtime/emulate.h"
#include "runtime/launch.h"
#include "runtime/nnet.h"
#include "runtime/probe.h"
#include "runtime/ps.h"
#include "runtime/sfb.h"
#include "runtime/train.h"
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

/* ------------------------------------------------------------------------------ state */

typedef struct {
    int64_t offset, count; /* floats in the arena */
    bool is_bias;          /* no weight decay (as the single-worker solver) */
    int layer;
} wk_entry_t;

typedef struct {
    int layer;                 /* model layer of the unit's parameters, -1: none */
    int64_t ps_off, ps_count;  /* range synced through the PS (0 floats: none) */
    int64_t w_off, w_count;    /* SFB: the weights; all-reduce: the whole layer */
    int m, n;                  /* SFB: outputs x inputs */
    float **gslot;             /* S slots: the PS range's gradient */
    int64_t ar_off;            /* all-reduce: where the gradient sits in its bucket's buffer */
    float **ar_slot;           /* S slots: the gradient's place in its bucket's buffer */
    float **u_slot, **v_slot;  /* S slots: own factors, (K, m) and (K, n) */
    float **stash;             /* S slots: world x K x (m + n), every rank's factors */
    float *gsum;               /* SFB: the rebuilt weight gradient (m, n) */
    pthread_mutex_t lock;      /* the unit's parameters: compute thread vs. syncers */
} wk_unit_t;

/* An all-reduce bucket's buffer: its members' gradients back to back, in unit order, one
 * ring over the whole of it (core/plan.h). The BWD of each member copies its gradient out of
 * the net straight into its place here (the copy an unfused unit makes into a buffer of its
 * own), so fusion costs no packing or unpacking: the ring runs over one contiguous buffer and
 * each member's update reads its own range of it. */
typedef struct {
    int64_t count;             /* floats */
    float **slot;              /* S slots of count floats */
} wk_bucket_t;

typedef struct {
    int64_t iteration, bytes, first_ns, last_ns;
    int blocks;
} wk_arrival_t;

typedef struct worker {
    const worker_config_t *cfg;
    const experiment_t *job;   /* &cfg->job */
    solver_config_t solver;
    launch_env_t env;
    int rank, world, S;
    int64_t T, steps;
    model_t model;
    plan_t plan;
    bool plan_built;
    bool emulate;

    int64_t n_params;
    int n_entries;
    wk_entry_t *entries;       /* by offset */
    int64_t *layer_off;        /* per model layer */
    float *params;             /* the replica's parameters (arena layout); pulls write them
                                * block by block under the unit's lock */
    float *hist_local, *hist_server; /* momentum of worker-side and shard-side updates */
    float *zeros;              /* emulated gradients and factors: never written */
    wk_unit_t *units;
    wk_bucket_t *buckets;      /* per plan bucket */

    pthread_mutex_t mu;
    int64_t *done;             /* per op: instances completed on this rank */
    /* Per op, the condition its waiters sleep on, and (CSR: wake[wake_first[op] ..
     * wake_first[op + 1])) the ops whose waits can end when `op` completes: its dependents
     * in the plan, and for a PUSH its unit's PULL (WAIT_OWN_PUSH). One shared
     * condition woke every syncer thread (two per unit) at every completion: on a
     * GoogLeNet-size plan that is ~10^4 wake-ups per iteration, enough to saturate a small
     * machine and delay the emulated compute. */
    pthread_cond_t *op_cv;     /* n_op_cv of them */
    int n_op_cv;
    int *wake_first, *wake;
    /* Per op, an eventfd that mark_done signals along with op_cv, for the ops whose thread
     * waits in comm_stash_until rather than on the condition (SFB: it keeps taking peers'
     * factors off its sockets while it waits, so that their arrival times are true); -1
     * for the others. */
    int *op_efd;
    pthread_mutex_t update_mu; /* RES_UPDATE: one at a time per node */

    coord_server_t *cs;
    coord_client_t *cl;
    comm_t *probe_comm;
    comm_t **ucomm;
    ps_layout_t layout;
    ps_server_t *ps;
    char **ps_eps;

    compute_t *compute, *ucompute;
    nnet_t *net;
    dataset_t train, test;
    bool have_data;
    unit_times_t times;        /* emulated compute: per unit, at this rank's speed */
    /* Emulated compute (compute thread only): the op's start and the previous op's intended
     * end. An op whose dependencies were met before that end starts at it, not when the
     * thread woke (~0.1-1 ms later on a loaded host): a pass is ~100 sleeps, and their
     * lateness summed was ~8% of an emulated GoogLeNet iteration. */
    int64_t emu_start_ns, emu_end_ns;
    /* CPU seconds of this process (every thread: compute, syncers, shard, ZeroMQ I/O) and
     * the clock when iteration 1's first op could start: start-up and the warm-up iteration 0
     * (connections, first touches of buffers) are excluded from the
     * steady-state CPU logged at the end (experiments/validate.sh reads it) */
    double cpu1_s;
    int64_t cpu1_ns;

    trace_t *trace;
    pthread_mutex_t trace_mu;
    int64_t t0_ns;
    bool t0_shared;            /* t0_ns is rank 0's: one clock with every rank on its host */
    /* Arrivals at this rank's shard (its thread only), per (pushing rank, unit): the blocks of
     * the push of `iteration` seen so far; when all of the unit's blocks on this shard are in,
     * one trace row records them (see push_arrived). */
    wk_arrival_t *arrivals;    /* world x units */
    int *unit_shard_blocks;    /* per unit: its blocks on this rank's shard */

    /* rank 0's report state (compute thread only) */
    FILE *csv;
    double loss_sum;
    int64_t loss_n, correct, report_t0_ns, report_iter0;
} worker_t;

typedef struct {
    worker_t *w;
    int op;
} wk_arg_t;

static const char *unit_name(const worker_t *w, int u)
{
    const plan_unit_t *un = &w->plan.units[u];
    return w->model.layers[un->layer >= 0 ? un->layer : un->first].name;
}

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
                                                : TRACE_LANE_UPDATE;
    trace_row_t r = {node, (int)t, op_kind_name(po->kind), unit_name(w, po->unit), peer,
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

/* Fills op_cv and the wake lists (see worker_t) from the plan. */
static void wake_lists_build(worker_t *w)
{
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
static void wait_for_on(worker_t *w, wait_kind_t k, int op, int64_t t, comm_t *c)
{
    const plan_op_t *po = &w->plan.ops[op];
    ASSERT(!c || w->op_efd[op] >= 0, "op %d waits on a comm without an eventfd", op);
    int64_t deadline = comm_now_ns() + (int64_t)w->cfg->timeout_ms * 1000000;
    pthread_mutex_lock(&w->mu);
    while (!wait_ready(w, k, op, t)) {
        if (comm_now_ns() > deadline) {
            pthread_mutex_unlock(&w->mu);
            coord_client_fail(w->cl, "%s of layer %s, iteration %lld: %s not met within %d ms",
                              op_kind_name(po->kind), unit_name(w, po->unit), (long long)t,
                              k == WAIT_DEPS ? "its plan dependencies" : "a free buffer",
                              w->cfg->timeout_ms);
        }
        if (c) {
            /* a completion after the check above leaves the eventfd readable: no wake-up
             * is lost between the unlock and the poll */
            pthread_mutex_unlock(&w->mu);
            if (comm_stash_until(c, w->op_efd[op], 100) < 0)
                coord_client_fail(w->cl, "%s of layer %s, iteration %lld: receive failed",
                                  op_kind_name(po->kind), unit_name(w, po->unit), (long long)t);
            uint64_t n;
            if (read(w->op_efd[op], &n, sizeof n) < 0 && errno != EAGAIN)
                die("eventfd read: %s", strerror(errno));
            pthread_mutex_lock(&w->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
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
 * float; g is scaled by `scale` (1 / workers: the mean over the combined batch). The same
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
        for (int64_t i = a - off; i < b - off; i++) {
            float gi = g[i] * scale;
            h[i] = mom * h[i] + lr * (gi + wd * p[i]);
            p[i] -= h[i];
        }
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
static void shard_update(void *arg, float *params, const float *grad_sum, size_t count,
                         uint64_t offset, int64_t t)
{
    worker_t *w = arg;
    int64_t t0 = comm_now_ns();
    sgd_range(w, (int64_t)offset, (int64_t)count, params, grad_sum, w->hist_server + offset,
              1.0f / (float)w->world, t);
    if (w->trace) {
        int l = entry_layer(w, offset);
        for (int u = 0; u < w->plan.n_units; u++)
            if (w->plan.units[u].layer == l && w->plan.units[u].op_apply >= 0)
                wk_trace(w, w->plan.units[u].op_apply, t, -1, (int64_t)count * 4, t0,
                         comm_now_ns());
    }
}

/* The shard's on_push (trace runs only): rank `peer`'s block of a unit arrived at this
 * shard. Once every block of the unit on this shard has arrived for the iteration, one PUSH
 * row records them: node = the pushing rank, peer = this shard, bytes = what arrived here,
 * start .. end = first .. last arrival. The merge (core/trace_merge) ends the pushing rank's own
 * PUSH row at the last of these arrivals at shards other than its own. A push's blocks for
 * one iteration come in order on one connection before any of the next iteration's, so one
 * record per (rank, unit) is enough. */
static void push_arrived(void *arg, int peer, uint64_t offset, int64_t t, int64_t recv_ns)
{
    worker_t *w = arg;
    int b = ps_layout_find(&w->layout, offset);
    ASSERT(b >= 0, "push of float offset %llu is not a block", (unsigned long long)offset);
    int u = w->layout.blocks[b].range;
    ASSERT(w->plan.units[u].op_push >= 0, "unit %d has PS blocks but no PUSH", u);
    wk_arrival_t *a = &w->arrivals[(size_t)peer * w->plan.n_units + u];
    if (a->iteration != t) *a = (wk_arrival_t){.iteration = t, .first_ns = recv_ns};
    a->blocks++;
    a->bytes += (int64_t)w->layout.blocks[b].count * 4;
    a->last_ns = recv_ns;
    if (a->blocks == w->unit_shard_blocks[u]) {
        wk_trace_node(w, peer, w->plan.units[u].op_push, t, w->rank, a->bytes, a->first_ns,
                      a->last_ns);
        a->iteration = -1;
    }
}

/* ----------------------------------------------------------------------- compute */

static void compute_op(worker_t *w, int op, int64_t t)
{
    const plan_op_t *po = &w->plan.ops[op];
    int u = po->unit;
    const plan_unit_t *un = &w->plan.units[u];
    wk_unit_t *wu = &w->units[u];
    int s = (int)(t % w->S);
    if (w->emulate) {
        w->emu_end_ns =
            w->emu_start_ns + (po->kind == OP_FWD ? w->times.fwd_ns[u] : w->times.bwd_ns[u]);
        emulate_sleep_until_ns(w->emu_end_ns);
        return;
    }
    if (po->kind == OP_FWD) {
        if (u == 0) {
            int *order = xmalloc((size_t)w->job->batch * sizeof *order);
            worker_batch_order(w->train.n, w->rank, w->world, w->job->batch, t, w->job->seed,
                               w->job->train.shuffle, order);
            data_gather(&w->train, order, w->job->batch, nnet_input(w->net),
                        nnet_labels(w->net));
            free(order);
        }
        pthread_mutex_lock(&wu->lock);
        for (int l = un->first; l <= un->last; l++) nnet_forward_layer(w->net, l);
        pthread_mutex_unlock(&wu->lock);
        if (un->last == w->model.n_layers - 1 && w->rank == 0) {
            for (int l = 0; l < w->model.n_layers; l++)
                if (w->model.layers[l].type == LAYER_SOFTMAX_LOSS)
                    w->loss_sum += nnet_layer_loss(w->net, l);
            w->loss_n++;
            w->correct += nnet_count_correct(w->net);
        }
        return;
    }
    if (u == w->plan.n_units - 1) nnet_backward_begin(w->net);
    pthread_mutex_lock(&wu->lock);
    for (int l = un->last; l >= (un->first > 1 ? un->first : 1); l--)
        nnet_backward_layer(w->net, l);
    pthread_mutex_unlock(&wu->lock);
    /* the gradient leaves the net now: the next FWD/BWD may overwrite it mid-sync */
    const float *grads = nnet_arena(w->net)->grads;
    if (wu->ps_count) memcpy(wu->gslot[s], grads + wu->ps_off, (size_t)wu->ps_count * 4);
    if (un->method == SYNC_ALLREDUCE)
        memcpy(wu->ar_slot[s], grads + wu->w_off, (size_t)wu->w_count * 4);
    if (un->method == SYNC_SFB) {
        const float *x, *dy;
        int in, out;
        nnet_fc_factors(w->net, un->layer, &x, &dy, &in, &out);
        ASSERT(in == wu->n && out == wu->m, "fc %s: %dx%d, plan %dx%d", unit_name(w, u), out,
               in, wu->m, wu->n);
        memcpy(wu->u_slot[s], dy, (size_t)w->job->batch * wu->m * 4);
        memcpy(wu->v_slot[s], x, (size_t)w->job->batch * wu->n * 4);
    }
}

static void report(worker_t *w, int64_t t, bool final);

/* Whether compute op (op, t) could start now without waiting. */
static bool compute_ready(worker_t *w, int op, int64_t t)
{
    pthread_mutex_lock(&w->mu);
    bool ok = wait_ready(w, WAIT_DEPS, op, t);
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

static void *compute_main(void *arg)
{
    worker_t *w = arg;
    for (int64_t t = 0; t < w->T; t++) {
        for (int op = 0; op < w->plan.n_ops; op++) {
            const plan_op_t *po = &w->plan.ops[op];
            if (po->res != RES_COMPUTE) continue;
            progress(w, op, t, "%s: its plan dependencies", op_kind_name(po->kind));
            bool ready = w->emulate && compute_ready(w, op, t);
            wait_for(w, WAIT_DEPS, op, t);
            if (t == 1 && !w->cpu1_ns) { /* iteration 0's values are in: it is over */
                w->cpu1_s = process_cpu_s();
                w->cpu1_ns = comm_now_ns();
            }
            progress(w, op, t, "%s computing", op_kind_name(po->kind));
            int64_t t0 = comm_now_ns();
            w->emu_start_ns = ready && w->emu_end_ns > 0 && w->emu_end_ns < t0 ? w->emu_end_ns : t0;
            compute_op(w, op, t);
            wk_trace(w, op, t, -1, 0, t0, comm_now_ns());
            mark_done(w, op, t);
        }
        if (w->rank == 0 && t + 1 < w->T) {
            int64_t every = w->cfg->report_every > 0 ? w->cfg->report_every : w->steps;
            if ((t + 1) % every == 0) report(w, t, false);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------------- syncers */

typedef struct {
    wk_unit_t *wu;
    int slot, k;
} stash_arg_t;

static void stash_factors(void *arg, int rank, const float *u, const float *v, size_t k,
                          size_t m, size_t n)
{
    stash_arg_t *a = arg;
    ASSERT((int)k == a->k && (int)m == a->wu->m && (int)n == a->wu->n,
           "factors of rank %d: %zux%zu, %zux%zu", rank, k, m, k, n);
    float *dst = a->wu->stash[a->slot] + (size_t)rank * k * (m + n);
    memcpy(dst, u, k * m * 4);
    memcpy(dst + k * m, v, k * n * 4);
}

static void *sync_main(void *arg)
{
    wk_arg_t *a = arg;
    worker_t *w = a->w;
    int op = a->op;
    const plan_op_t *po = &w->plan.ops[op];
    int u = po->unit, layer = unit_layer(w, u);
    const plan_unit_t *un = &w->plan.units[u];
    wk_unit_t *wu = &w->units[u];
    const char *name = unit_name(w, u);
    int K = w->job->batch, to = w->cfg->timeout_ms;
    ps_client_t *pc = NULL;
    ps_pull_times_t *from_shard = NULL;
    int64_t *arrived_ns = NULL;
    if (po->kind == OP_PULL)
        from_shard = xcalloc((size_t)w->layout.n_shards, sizeof *from_shard);
    if (po->kind == OP_SFB) arrived_ns = xcalloc((size_t)w->world, sizeof *arrived_ns);
    if (po->kind == OP_PUSH || po->kind == OP_PULL) {
        pc = ps_client_new(w->rank, w->world, &w->layout, (const char *const *)w->ps_eps, to);
        if (!pc) coord_client_fail(w->cl, "cannot connect to the PS shards");
        /* Pulls write the parameters in place, a block at a time under the unit's lock, which
         * the compute thread holds while FWD/BWD read them. Under BSP the plan already keeps
         * them apart (FWD(u, t + 1) waits for PULL(u, t)); under SSP(s) FWD may run during the
         * pull and see some blocks of the newer values and some of the older ones, both
         * within the staleness bound, never a half-written block. */
        ps_client_set_arena_lock(pc, &wu->lock);
    }
    for (int64_t t = 0; t < w->T; t++) {
        int s = (int)(t % w->S);
        int64_t t0, bytes = 0;
        if (po->kind == OP_PULL) {
            /* the receive side of the shards' PULL: asked once this rank's push is out */
            progress(w, op, t, "PULL of %s: its own push", name);
            wait_for(w, WAIT_OWN_PUSH, op, t);
            progress(w, op, t, "PS pull of layer %s from the shards", name);
            t0 = comm_now_ns();
            /* the shards answer a pull of iteration i at version >= i + 1 - staleness: ask
             * for t + s to get the values after apply(t), the plan's PULL(t) */
            if (ps_client_pull_from(pc, t + w->job->staleness, layer, (uint64_t)wu->ps_off,
                                    (uint64_t)wu->ps_count, w->params, from_shard))
                coord_client_fail(w->cl, "PS pull of layer %s timed out after %d ms", name, to);
            /* PULL is the shard's op (core/trace.h): a row per shard that sent this rank a
             * part, node = the shard, peer = this rank, from when the shard answered (its
             * stamp, on this rank's clock when the zero is shared; else from the request)
             * to when the last block arrived here; the merge joins the ranks' rows */
            for (int sh = 0; sh < w->layout.n_shards; sh++) {
                const ps_pull_times_t *f = &from_shard[sh];
                if (!f->bytes) continue;
                int64_t start = f->first_stamp_ns && w->t0_shared ? w->t0_ns + f->first_stamp_ns
                                                                  : t0;
                wk_trace_node(w, sh, op, t, w->rank, f->bytes, start, f->last_recv_ns);
            }
            mark_done(w, op, t);
            continue;
        } else {
            progress(w, op, t, "%s of %s: its plan dependencies", op_kind_name(po->kind), name);
            /* SFB listens on its comm while it waits: peers' factors that come before this
             * rank's backward are timed on arrival (their senders' trace rows end there) */
            comm_t *listen = po->kind == OP_SFB ? w->ucomm[u] : NULL;
            wait_for_on(w, WAIT_DEPS, op, t, listen);
            t0 = comm_now_ns();
            switch (po->kind) {
            case OP_PUSH:
                progress(w, op, t, "PS push of layer %s to the shards", name);
                if (ps_client_push(pc, t, layer, (uint64_t)wu->ps_off, (uint64_t)wu->ps_count,
                                   wu->gslot[s]) ||
                    ps_client_wait_sent(pc))
                    coord_client_fail(w->cl, "PS push of layer %s timed out after %d ms", name,
                                      to);
                bytes = wu->ps_count * 4;
                break;
            case OP_SFB: {
                progress(w, op, t, "SFB of layer %s with every peer", name);
                stash_arg_t sa = {wu, s, K};
                if (sfb_exchange(w->ucomm[u], t, layer, wu->u_slot[s], wu->v_slot[s],
                                 (size_t)K, (size_t)wu->m, (size_t)wu->n, stash_factors, &sa,
                                 arrived_ns, to))
                    coord_client_fail(w->cl, "SFB of layer %s timed out after %d ms", name, to);
                /* the arrival of each peer's factors here: node = that peer, peer = this
                 * rank; the merge ends the peer's own SFB row at the last of them */
                for (int r = 0; r < w->world; r++)
                    if (r != w->rank)
                        wk_trace_node(w, r, op, t, w->rank, un->sfb_peer_bytes, arrived_ns[r],
                                      arrived_ns[r]);
                bytes = un->sfb_peer_bytes * (w->world - 1); /* the group's, as the plan's */
                break;
            }
            case OP_UPDATE: {
                progress(w, op, t, "UPDATE of layer %s (rebuild from factors)", name);
                pthread_mutex_lock(&w->update_mu);
                size_t per = (size_t)K * (size_t)(wu->m + wu->n);
                for (int r = 0; r < w->world; r++) {
                    const float *f = wu->stash[s] + (size_t)r * per;
                    /* gsum (m, n) += dy_r^T (m, K) x_r (K, n) / workers */
                    compute_sgemm(w->ucompute, true, false, wu->m, wu->n, K,
                                  1.0f / (float)w->world, f, wu->m, f + (size_t)K * wu->m,
                                  wu->n, r ? 1.0f : 0.0f, wu->gsum, wu->n);
                }
                pthread_mutex_lock(&wu->lock);
                sgd_range(w, wu->w_off, wu->w_count, w->params + wu->w_off, wu->gsum,
                          w->hist_local + wu->w_off, 1.0f, t);
                pthread_mutex_unlock(&wu->lock);
                pthread_mutex_unlock(&w->update_mu);
                break;
            }
            case OP_ALLREDUCE: {
                /* one ring over the bucket's buffer, then each member's update as unfused */
                const plan_bucket_t *pb = &w->plan.buckets[un->bucket];
                const wk_bucket_t *wb = &w->buckets[un->bucket];
                progress(w, op, t, "ring all-reduce of layer %s (bucket of %d layers)", name,
                         pb->n_units);
                if (allreduce_sum(w->ucomm[u], t, layer, wb->slot[s], (size_t)wb->count,
                                  ALLREDUCE_CHUNK_FLOATS_DEFAULT, to))
                    coord_client_fail(w->cl, "all-reduce of layer %s (bucket of %d layers) "
                                      "timed out after %d ms", name, pb->n_units, to);
                for (int v = pb->first; v <= pb->last; v++) {
                    if (w->plan.units[v].bucket != un->bucket) continue;
                    wk_unit_t *wv = &w->units[v];
                    pthread_mutex_lock(&wv->lock);
                    sgd_range(w, wv->w_off, wv->w_count, w->params + wv->w_off, wv->ar_slot[s],
                              w->hist_local + wv->w_off, 1.0f / (float)w->world, t);
                    pthread_mutex_unlock(&wv->lock);
                }
                bytes = po->bytes;
                break;
            }
            default: ASSERT(0, "op kind %s has no worker-side executor", op_kind_name(po->kind));
            }
        }
        wk_trace(w, op, t, -1, bytes, t0, comm_now_ns());
        mark_done(w, op, t);
    }
    ps_client_destroy(&pc);
    free(from_shard);
    free(arrived_ns);
    return NULL;
}

/* ------------------------------------------------------------------------ reports */

static double evaluate(worker_t *w)
{
    for (int u = 0; u < w->plan.n_units; u++) pthread_mutex_lock(&w->units[u].lock);
    double acc = train_evaluate(w->net, &w->test);
    for (int u = w->plan.n_units - 1; u >= 0; u--) pthread_mutex_unlock(&w->units[u].lock);
    return acc;
}

static void report(worker_t *w, int64_t t, bool final)
{
    if (!final) /* parameters as FWD of the next iteration will see them */
        for (int u = 0; u < w->plan.n_units; u++)
            wait_for(w, WAIT_SYNC_DEPS, w->plan.units[u].op_fwd, t + 1);
    int64_t now = comm_now_ns();
    double secs = (double)(now - w->report_t0_ns) * 1e-9; /* evaluation time excluded */
    double images = (double)(t + 1 - w->report_iter0) * w->job->batch * w->world;
    double ips = secs > 0 ? images / secs : 0;
    double loss = w->loss_n ? w->loss_sum / (double)w->loss_n : 0;
    double train_acc = w->loss_n ? (double)w->correct / (double)(w->loss_n * w->job->batch) : 0;
    double acc = -1;
    if (!w->emulate && w->cfg->evaluate) acc = evaluate(w);
    int64_t e1 = comm_now_ns();
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
    printf("%s\n", row);
    fflush(stdout);
    if (w->csv) {
        fprintf(w->csv, "%s\n", row);
        fflush(w->csv);
    }
    w->loss_sum = 0;
    w->loss_n = w->correct = 0;
    w->report_iter0 = t + 1;
    w->report_t0_ns = e1;
}

/* ------------------------------------------------------------------------- setup */

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

static void units_build(worker_t *w)
{
    const plan_t *p = &w->plan;
    int K = w->job->batch, S = w->S;
    w->units = xcalloc((size_t)p->n_units, sizeof *w->units);
    int64_t zmax = 1;
    for (int u = 0; u < p->n_units; u++) {
        const plan_unit_t *un = &p->units[u];
        wk_unit_t *wu = &w->units[u];
        pthread_mutex_init(&wu->lock, NULL);
        wu->layer = un->layer;
        if (un->layer < 0 || un->method == SYNC_NONE) continue;
        const layer_t *ly = &w->model.layers[un->layer];
        int64_t off = w->layer_off[un->layer];
        switch (un->method) {
        case SYNC_PS: wu->ps_off = off, wu->ps_count = ly->params; break;
        case SYNC_SFB:
            wu->ps_off = off + ly->weights, wu->ps_count = ly->biases;
            wu->w_off = off, wu->w_count = ly->weights;
            wu->m = (int)un->tensor.m, wu->n = (int)un->tensor.n;
            ASSERT((int64_t)wu->m * wu->n == ly->weights, "fc %s: %d x %d != %lld weights",
                   ly->name, wu->m, wu->n, (long long)ly->weights);
            break;
        case SYNC_ALLREDUCE: wu->w_off = off, wu->w_count = ly->params; break;
        default: break;
        }
        ASSERT(wu->ps_count * 4 == un->ps_bytes, "unit %d: PS range %lld floats, plan %lld bytes",
               u, (long long)wu->ps_count, (long long)un->ps_bytes);
        if (wu->ps_count > zmax) zmax = wu->ps_count;
        if ((int64_t)K * wu->m > zmax) zmax = (int64_t)K * wu->m;
        if ((int64_t)K * wu->n > zmax) zmax = (int64_t)K * wu->n;
    }
    if (w->emulate) w->zeros = xcalloc((size_t)zmax, sizeof(float));
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
        for (int s = 0; s < S; s++) wb->slot[s] = xcalloc((size_t)wb->count, 4);
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
                wu->gslot[s] = w->emulate ? w->zeros : xcalloc((size_t)wu->ps_count, 4);
            if (un->bucket >= 0) wu->ar_slot[s] = w->buckets[un->bucket].slot[s] + wu->ar_off;
            if (un->method == SYNC_SFB) {
                wu->u_slot[s] = w->emulate ? w->zeros : xcalloc((size_t)K * wu->m, 4);
                wu->v_slot[s] = w->emulate ? w->zeros : xcalloc((size_t)K * wu->n, 4);
                wu->stash[s] = xcalloc((size_t)w->world * K * (wu->m + wu->n), 4);
            }
        }
        if (un->method == SYNC_SFB) wu->gsum = xcalloc((size_t)wu->m * wu->n, 4);
    }
}

static void units_free(worker_t *w)
{
    if (!w->units) return;
    for (int u = 0; u < w->plan.n_units; u++) {
        wk_unit_t *wu = &w->units[u];
        for (int s = 0; s < w->S; s++) {
            if (!w->emulate) {
                free(wu->gslot[s]);
                free(wu->u_slot[s]);
                free(wu->v_slot[s]);
            }
            free(wu->stash[s]);
        }
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
        for (int s = 0; s < w->S && w->buckets[b].slot; s++) free(w->buckets[b].slot[s]);
        free(w->buckets[b].slot);
    }
    free(w->buckets);
    w->buckets = NULL;
}

static int data_setup(worker_t *w, char *err, size_t errlen)
{
    const experiment_t *j = w->job;
    const experiment_train_t *c = &j->train;
    const model_t *m = &w->model;
    if (!strcmp(c->data, "fashion-mnist")) {
        if (data_load_fashion_mnist(c->data_dir[0] ? c->data_dir : NULL, &w->train, &w->test,
                                    err, errlen))
            return -1;
    } else if (!strcmp(c->data, "synthetic")) {
        int classes = 1;
        for (int i = 0; i < m->n_layers; i++)
            if (m->layers[i].type == LAYER_SOFTMAX_LOSS)
                classes = (int)shape_count(m->layers[m->layers[i].inputs[0]].out_shape);
        data_synthetic(&w->train, m->layers[0].out_shape, classes, c->synthetic_n, j->seed);
        data_synthetic(&w->test, m->layers[0].out_shape, classes, 256, j->seed + 1);
    } else {
        snprintf(err, errlen, "data is fashion-mnist or synthetic, not '%s'", c->data);
        return -1;
    }
    w->have_data = true;
    if (c->limit > 0 && c->limit < w->train.n) data_truncate(&w->train, c->limit);
    if (train_check_model(m, &w->train, err, errlen)) return -1;
    if (w->train.n / w->world < j->batch) {
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

/* Every rank's line of text, gathered by one broadcast per rank through the coordinator. */
static char **allgather(worker_t *w, int64_t id0, const char *line)
{
    char **tab = xcalloc((size_t)w->world, sizeof *tab);
    for (int r = 0; r < w->world; r++) {
        void *data = (void *)line;
        size_t n = strlen(line) + 1;
        if (coord_client_bcast(w->cl, r, id0 + r, &data, &n, w->cfg->timeout_ms) != 0)
            coord_client_fail(w->cl, "no endpoints from rank %d", r);
        tab[r] = r == w->rank ? xstrdup(line) : data;
        if (r != w->rank && (n == 0 || tab[r][n - 1] != '\0'))
            coord_client_fail(w->cl, "malformed endpoints from rank %d", r);
    }
    return tab;
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

/* One row of a rank's trace CSV, as the merge reads it. */
static int write_params(const worker_t *w, const char *prefix)
{
    char path[1100];
    snprintf(path, sizeof path, "%s.%d", prefix, w->rank);
    FILE *f = outfile_open(path, "wb");
    if (!f) return -1;
    size_t n = fwrite(w->params, sizeof(float), (size_t)w->n_params, f);
    return (fclose(f) || n != (size_t)w->n_params) ? -1 : 0;
}

/* The experiment this run executes, for `poseidon sim` to predict it: the job with the
 * cluster the plan was built on (the probe's link included). */
static int write_job(const worker_t *w, const cluster_t *cl, const char *path)
{
    FILE *f = outfile_open(path, "w");
    if (!f) return -1;
    experiment_t *run = xmalloc(sizeof *run);
    *run = *w->job;
    run->iterations = (int)w->T;
    run->train.epochs = 0;
    if (run->warmup >= run->iterations) run->warmup = run->iterations > 1 ? run->iterations - 1 : 1;
    char comment[512];
    snprintf(comment, sizeof comment,
             "The job a run of poseidon %s executed on %d ranks (written by rank 0):\n"
             "poseidon sim on this file predicts that run.", log_commit(), w->world);
    int rc = experiment_write(run, 0, cl, comment, f);
    free(run);
    if (fclose(f)) rc = -1;
    return rc;
}

int worker_run(const worker_config_t *cfg)
{
    /* Received payloads are fresh buffers of up to a KV block (4 MB) each: with glibc's
     * defaults each one is a new mmap whose pages the kernel zeroes on first touch, which
     * cost a quarter of the CPU of a 2-worker run. Kept in the heap, they are reused. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    worker_t W, *w = &W;
    memset(w, 0, sizeof *w);
    w->cfg = cfg;
    w->job = &cfg->job;
    const experiment_t *job = w->job;
    w->solver = worker_solver_config(job);
    char err[1024];
    int rc = 1;
    if (launch_env_detect(&w->env, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s\n", err);
        return 2;
    }
    w->rank = w->env.rank;
    w->world = w->env.world;
    w->S = job->staleness + 1;
    w->emulate = job->train.compute == COMPUTE_MODE_EMULATE;
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->update_mu, NULL);
    pthread_mutex_init(&w->trace_mu, NULL);
    if (experiment_config_count(job) != 1) {
        fprintf(stderr, "poseidon train: the job has %d configurations (sweep_nodes, sweep_gbps, "
                        "sweep_schemes); a run executes one\n", experiment_config_count(job));
        return 2;
    }
    if (job->nodes[0] != w->world) {
        fprintf(stderr, "poseidon train: the job is for %d nodes, the launcher started %d "
                        "ranks\n", job->nodes[0], w->world);
        return 2;
    }
    if (job->cluster.devices_per_node != 1) {
        fprintf(stderr, "poseidon train: the runtime runs one device per node; the job's "
                        "cluster has devices_per_node = %d\n", job->cluster.devices_per_node);
        return 2;
    }
    if (model_load(&w->model, job->model_path, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s\n", err);
        return 2;
    }
    int to = cfg->timeout_ms;
    log_info("rank %d of %d (%s), master %s:%d", w->rank, w->world,
             launch_source_name(w->env.source), w->env.master_addr, w->env.master_port);

    /* compute and data, before anything else can wait on this rank */
    if (!w->emulate) {
        if (data_setup(w, err, sizeof err)) {
            fprintf(stderr, "poseidon train: rank %d: %s\n", w->rank, err);
            rc = 2;
            goto out;
        }
        w->steps = (w->train.n / w->world) / job->batch;
        if (!(w->compute = compute_new(COMPUTE_CPU, cfg->threads, err, sizeof err)) ||
            !(w->net = nnet_new(&w->model, job->batch, w->compute, job->seed + (uint64_t)w->rank,
                                err, sizeof err))) {
            fprintf(stderr, "poseidon train: %s\n", err);
            goto out;
        }
        /* identical initial values on every rank: the same seed */
        solver_init_params(&w->model, nnet_arena(w->net), cfg->init, job->seed);
    } else {
        w->steps = job->train.synthetic_n / w->world / job->batch;
        if (w->steps < 1) w->steps = 1;
    }
    if (!(w->ucompute = compute_new(COMPUTE_CPU, cfg->threads, err, sizeof err))) {
        fprintf(stderr, "poseidon train: %s\n", err);
        goto out;
    }
    if (entries_build(w, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s\n", err);
        goto out;
    }
    w->T = worker_iterations(job, w->steps);
    if (w->net) w->params = nnet_arena(w->net)->params;
    else w->params = xcalloc((size_t)w->n_params + 1, sizeof(float));
    w->hist_local = xcalloc((size_t)w->n_params + 1, sizeof(float));
    w->hist_server = xcalloc((size_t)w->n_params + 1, sizeof(float));

    /* coordinator, endpoints, rendezvous */
    coord_config_t cc = coord_config_default();
    if (w->rank == 0 && !(w->cs = coord_server_new(&w->env, cc))) goto out;
    if (!(w->cl = coord_client_new(&w->env, cc, NULL))) goto out;
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
    size_t pos = (size_t)snprintf(line, line_cap, "%s", comm_endpoint(w->probe_comm));
    for (int u = 0; u < n_units; u++) {
        char name[16];
        snprintf(name, sizeof name, "u%d", u);
        if (!(w->ucomm[u] = comm_new(name, w->rank, w->world, bind, to)))
            coord_client_fail(w->cl, "cannot bind %s", bind);
        pos += (size_t)snprintf(line + pos, line_cap - pos, " %s", comm_endpoint(w->ucomm[u]));
    }
    char **tab = coord_client_rendezvous(w->cl, line);
    free(line);
    if (!tab) coord_client_fail(w->cl, "rendezvous failed");
    {
        /* every rank must run the same job: rank 0's description against this rank's */
        char desc[1400], sb[64];
        snprintf(desc, sizeof desc, "model=%.100s scheme=%s ssp=%d batch=%d T=%lld kv=%lld "
                                    "bucket=%lld seed=%llu compute=%d data=%.100s",
                 w->model.name, scheme_name(job->schemes[0], sb, sizeof sb), job->staleness,
                 job->batch, (long long)w->T, (long long)job->kv_block_bytes,
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
    if (job->train.probe && w->world > 1) {
        if (w->rank <= 1) comm_connect(w->probe_comm, 1 - w->rank, eps[1 - w->rank][0]);
        coord_client_progress(w->cl, -1, -1, "the link probe");
        if (probe_links(w->probe_comm, 20, job->train.probe_bytes, 2, &pr, to))
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
    wake_lists_build(w);
    if (w->rank == 0) {
        char sb[64];
        log_info("link probe: %.1f MB/s, %.1f us one-way; plan: %s on %d workers, %d shards",
                 pr.bw_Bps / 1e6, pr.lat_ns / 1e3, scheme_name(po.scheme, sb, sizeof sb),
                 w->plan.workers, w->plan.shards);
        for (int u = 0; u < w->plan.n_units; u++)
            if (w->plan.units[u].layer >= 0)
                log_info("  unit %d %-12s %s", u, unit_name(w, u),
                         sync_method_name(w->plan.units[u].method));
        if (cfg->print_plan) plan_print(&w->plan, stderr, 0);
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

    /* the colocated PS shard, then everyone's shard endpoint */
    if (w->rank < w->plan.shards) {
        ps_server_config_t pc = {.shard = w->rank, .n_workers = w->world, .world = w->world,
                                 .bind = bind, .layout = &w->layout, .init = w->params,
                                 .staleness = job->staleness, .update = shard_update,
                                 .update_arg = w,
                                 .on_push = cfg->trace_prefix ? push_arrived : NULL,
                                 .on_push_arg = w};
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
    w->ps_eps = allgather(w, 10, w->ps ? ps_server_endpoint(w->ps) : "-");
    /* where this rank listens (for operators, and the test that sends garbage to them) */
    log_info("rank %d endpoint: PS shard %s", w->rank, w->ps ? ps_server_endpoint(w->ps) : "-");
    for (int u = 0; u < n_units; u++)
        if (w->plan.units[u].method == SYNC_SFB || owns_bucket(&w->plan, u))
            log_info("rank %d endpoint: %s of %s %s", w->rank,
                     sync_method_name(w->plan.units[u].method), unit_name(w, u),
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
            if (!(w->csv = outfile_open(cfg->csv_path, "w")))
                coord_client_fail(w->cl, "%s: cannot open: %s", cfg->csv_path, strerror(errno));
            fprintf(w->csv, "%s\n", hdr);
        }
        printf("%s\n", hdr);
        fflush(stdout);
    }
    int64_t shared_t0_ns = share_time_base(w, cc.join_ms);
    if (coord_client_barrier(w->cl, 0, cc.join_ms))
        coord_client_fail(w->cl, "not every rank reached the start barrier");

    /* run: the compute thread, one thread per worker-side sync op */
    w->report_t0_ns = comm_now_ns();
    w->t0_ns = shared_t0_ns ? shared_t0_ns : w->report_t0_ns;
    w->t0_shared = shared_t0_ns != 0;
    /* the shard stamps its answers on the trace clock only where every rank of its host
     * reads the same one: PULL rows then start when the values left the shard */
    if (w->ps && w->trace && w->t0_shared) ps_server_set_trace_zero(w->ps, w->t0_ns);
    int n_threads = 0;
    pthread_t *th = xcalloc((size_t)w->plan.n_ops + 1, sizeof *th);
    wk_arg_t *args = xcalloc((size_t)w->plan.n_ops + 1, sizeof *args);
    if (pthread_create(&th[n_threads++], NULL, compute_main, w)) die("pthread_create");
    for (int op = 0; op < w->plan.n_ops; op++) {
        const plan_op_t *po = &w->plan.ops[op];
        bool mine = (po->place == PLACE_WORKERS && po->res != RES_COMPUTE) || po->kind == OP_PULL;
        if (!mine) {
            ASSERT(po->kind == OP_APPLY || po->res == RES_COMPUTE,
                   "op %s placed on shards has no executor", op_kind_name(po->kind));
            continue;
        }
        args[op] = (wk_arg_t){w, op};
        if (pthread_create(&th[n_threads++], NULL, sync_main, &args[op])) die("pthread_create");
    }
    for (int i = 0; i < n_threads; i++) pthread_join(th[i], NULL);
    if (w->T >= 2) /* iterations 1 .. T-1: from the start of 1's first op to the end */
        log_info("rank %d: steady_cpu_s %.3f wall_s %.3f iterations %lld", w->rank,
                 process_cpu_s() - w->cpu1_s, (double)(comm_now_ns() - w->cpu1_ns) * 1e-9,
                 (long long)(w->T - 1));
    free(th);
    free(args);
    if (w->rank == 0) report(w, w->T - 1, true);
    if (cfg->params_out && write_params(w, cfg->params_out))
        coord_client_fail(w->cl, "cannot write %s.%d", cfg->params_out, w->rank);
    trace_close(&w->trace);
    coord_client_progress(w->cl, w->T, -1, "the final barrier");
    coord_client_destroy(&w->cl); /* final barrier: shards serve until everyone is done */
    if (w->ps && ps_server_n_rejected(w->ps))
        log_warn("rank %d: the PS shard rejected %llu messages", w->rank,
                 (unsigned long long)ps_server_n_rejected(w->ps));
    if (w->rank == 0 && cfg->trace_prefix &&
        trace_merge_ranks(cfg->trace_prefix, w->world, err, sizeof err))
        log_warn("trace: %s", err);
    rc = 0;
out:
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
    if (!w->net) free(w->params);
    free(w->hist_local);
    free(w->hist_server);
    free(w->zeros);
    free(w->layer_off);
    free(w->entries);
    nnet_destroy(&w->net);
    compute_destroy(&w->compute);
    compute_destroy(&w->ucompute);
    if (w->have_data) {
        data_fini(&w->train);
        data_fini(&w->test);
    }
    model_fini(&w->model);
    pthread_mutex_destroy(&w->mu);
    if (w->op_cv)
        for (int op = 0; op < w->n_op_cv; op++) {
            pthread_cond_destroy(&w->op_cv[op]);
            if (w->op_efd[op] >= 0) close(w->op_efd[op]);
        }
    free(w->op_cv);
    free(w->op_efd);
    free(w->wake_first);
    free(w->wake);
    pthread_mutex_destroy(&w->update_mu);
    pthread_mutex_destroy(&w->trace_mu);
    return rc;
}
