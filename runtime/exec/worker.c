/* worker: one rank's job set-up and teardown (worker_new / worker_destroy): data, net, plan,
 * buffers, the colocated PS shard, sockets and the rendezvous, as named steps in order; the
 * plan's executor is runtime/exec/worker_exec.c, the state both share
 * runtime/exec/worker_state.h (which names the helpers below them). */
#include "runtime/exec/worker_state.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "core/job.h"
#include "core/log.h"
#include "core/plan.h"
#include "core/trace.h"
#include "core/trace_merge.h"
#include "core/unit_times.h"
#include "runtime/transport/comm.h"
#include "runtime/compute/compute.h"
#include "runtime/transport/conn_cap.h"
#include "runtime/transport/coord.h"
#include "runtime/exec/data.h"
#include "runtime/exec/job_checkpoint.h"
#include "runtime/exec/restart.h"
#include "runtime/transport/launch.h"
#include "runtime/compute/nnet.h"
#include "runtime/transport/probe.h"
#include "runtime/transport/sendq.h"
#include "runtime/sync/ps.h"
#include "runtime/exec/train.h"
#include "core/outfile.h"
#include "runtime/transport/clock.h"

void worker_config_init(worker_config_t *c)
{
    memset(c, 0, sizeof *c);
    experiment_defaults(&c->job);
    c->init = INIT_AUTO;
    c->evaluate = true;
    c->threads = 1;
    c->timeout_ms = 60000;
}

int64_t worker_iterations(const experiment_t *job, int64_t steps)
{
    return job->train.epochs > 0 ? (int64_t)job->train.epochs * steps : job->iterations;
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

/* "rank R: " before the reason already in err. */
static void err_of_rank(const worker_t *w, char *err, size_t errlen)
{
    char *why = xstrdup(err);
    snprintf(err, errlen, "rank %d: %s", w->rank, why);
    free(why);
}

/* A rank with its locks and the job's fixed numbers, nothing else yet. */
static worker_t *worker_alloc(const worker_config_t *cfg)
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
    w->ckpt_kept = xcalloc((size_t)w->job->train.keep_checkpoints + 1, sizeof *w->ckpt_kept);
    w->devices = w->job->cluster.devices_per_node;
    w->n_slots = w->job->staleness + 1;
    w->emulate = w->job->train.compute == COMPUTE_MODE_EMULATE;
    w->scale = w->job->train.tensor_scale;
    return w;
}

/* The job against the launcher's environment (this rank's identity, the number of ranks),
 * the device it asks for, its model and its keys. 0, or -1 with the reason in err. */
/* The job's time dilation K, checked against the emulated links' (emucluster.sh -k K sets
 * EMU_TIME_DILATION), becomes this process's clock (runtime/transport/clock.h). Only emulated
 * compute can run K times slower. 0, or -1 with the reason in err. */
static int dilation_setup(const experiment_t *job, char *err, size_t errlen)
{
    int k = job->train.time_dilation;
    const char *links = getenv("EMU_TIME_DILATION");
    if (links && atoi(links) != k) {
        snprintf(err, errlen, "the emulated links are dilated %s times (emucluster.sh -k) but "
                              "the job's time_dilation is %d: run it with --set "
                              "time_dilation=%s", links, k, links);
        return -1;
    }
    if (k > 1 && job->train.compute != COMPUTE_MODE_EMULATE) {
        snprintf(err, errlen, "time_dilation = %d needs compute = emulate (with a profile): "
                              "real compute cannot run %d times slower", k, k);
        return -1;
    }
    clock_set_dilation(k);
    if (k > 1) log_info("time dilation %d: links, compute and timers run %d times slower; "
                        "every time reported is the cluster's", k, k);
    return 0;
}

/* The job's tensor_scale S against the emulated links' (emucluster.sh -s S sets
 * EMU_TENSOR_SCALE): only emulated compute, whose values nobody reads, can send S times
 * fewer of them; a checkpoint would hold the scaled arrays, so none is taken or resumed.
 * 0, or -1 with the reason in err. */
static int scale_check(const worker_t *w, char *err, size_t errlen)
{
    int s = w->scale;
    const char *links = getenv("EMU_TENSOR_SCALE");
    if ((links && atoi(links) != s) || (!links && s > 1 && getenv("EMU_TIME_DILATION"))) {
        snprintf(err, errlen, "the emulated links are scaled %s times (emucluster.sh -s) but "
                              "the job's tensor_scale is %d: run both with the same S",
                 links ? links : "1", s);
        return -1;
    }
    if (s > 1 && !w->emulate) {
        snprintf(err, errlen, "tensor_scale = %d needs compute = emulate: real compute "
                              "computes the full-size tensors", s);
        return -1;
    }
    if (s > 1 && (w->cfg->checkpoint_dir || w->cfg->resume_dir)) {
        snprintf(err, errlen, "tensor_scale = %d: checkpoints would hold tensors %d times "
                              "smaller than the model's; run without --checkpoint-dir and "
                              "--resume", s, s);
        return -1;
    }
    if (s > 1) log_info("tensor scale %d: every exchanged tensor %d times smaller on links %d "
                        "times slower; the plan and every time reported are the full-size "
                        "cluster's", s, s, s);
    return 0;
}

static int job_check(worker_t *w, char *err, size_t errlen)
{
    const worker_config_t *cfg = w->cfg;
    const experiment_t *job = w->job;
    if (dilation_setup(job, err, errlen) || scale_check(w, err, errlen)) return -1;
    if (launch_env_detect(&w->env, err, errlen)) return -1;
    w->rank = w->env.rank;
    w->world = w->env.world;
    w->replicas = w->world * w->devices;
    if (experiment_config_count(job) != 1) {
        snprintf(err, errlen, "the job has %d configurations (sweep_nodes, sweep_gbps, "
                              "sweep_schemes); a run executes one", experiment_config_count(job));
        return -1;
    }
    if (job->nodes[0] != w->world) {
        if (w->devices > 1 && w->world == job->nodes[0] * w->devices)
            snprintf(err, errlen, "the job is for %d nodes x %d devices, run as one rank per "
                                  "node (%d ranks, each runs %d device threads); the launcher "
                                  "started %d ranks, one per device", job->nodes[0], w->devices,
                     job->nodes[0], w->devices, w->world);
        else
            snprintf(err, errlen, "the job is for %d nodes, the launcher started %d ranks (one "
                                  "rank per node)", job->nodes[0], w->world);
        return -1;
    }
    const char *dev = compute_kind_name(cfg->device);
    if ((cfg->device != COMPUTE_CPU || cfg->stage_cpu) && !w->emulate) {
        if (!job->cluster.host_staging) {
            /* the plan's copies through host memory are what a GPU worker executes */
            snprintf(err, errlen, "--device %s needs cluster.host_staging = yes (the plan's "
                                  "copies of each layer between the GPU and host memory)", dev);
            return -1;
        }
        if (w->world == 1 && w->devices == 1) {
            /* no sync, so no copies in the plan: the single-worker trainer's loop */
            snprintf(err, errlen, "--device %s on one worker: run poseidon train --model FILE "
                                  "--device %s (the single-worker trainer)", dev, dev);
            return -1;
        }
    }
    if (model_load(&w->model, job->model_path, err, errlen)) return -1;
    if (transport_security_install(&cfg->security, &w->env, err, errlen)) {
        err_of_rank(w, err, errlen);
        return -1;
    }
    return 0;
}

/* The devices: a compute backend and a replica of the net each (device 0's are the node's),
 * identical initial values on every replica; the SFB update's backend; the parameter
 * entries. 0, or -1 with the reason in err. */
static int devices_setup(worker_t *w, char *err, size_t errlen)
{
    const worker_config_t *cfg = w->cfg;
    const experiment_t *job = w->job;
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
        if (!(dv->compute = compute_new_on(cfg->device, cfg->threads, gpu, err, errlen))) {
            char *why = xstrdup(err);
            snprintf(err, errlen, "rank %d: --device %s: %s", w->rank,
                     compute_kind_name(cfg->device), why);
            free(why);
            return -1;
        }
        /* precision = bf16 | fp16: the products in half on a GPU (the CPU stays fp32); the
         * SFB update's rebuild below is a sum, kept in fp32 */
        compute_set_gemm_precision(dv->compute, job->precision);
        if (!(dv->net = nnet_new(&w->model, job->batch, dv->compute, seed, err, errlen)))
            return -1;
        /* identical initial values on every replica: the same seed */
        solver_init_params(&w->model, nnet_arena(dv->net), cfg->init, job->seed);
    }
    w->compute = w->dev[0].compute;
    w->net = w->dev[0].net;
    w->staged = w->compute && (!compute_is_host(w->compute) || cfg->stage_cpu);
    /* the SFB update's GEMMs: on the GPU of device 0 when the devices are GPUs (a backend of
     * its own: the update thread never shares the device thread's stream) */
    if (!(w->ucompute = compute_new_on(w->staged ? w->compute->kind : COMPUTE_CPU, cfg->threads,
                                       w->env.local_rank * w->devices, err, errlen)))
        return -1;
    return worker_entries_build(w, err, errlen);
}

/* The node's parameters (a host copy when staged, else device 0's arena), every device's
 * view of its replica, the momentum, the checkpoints' snapshot and their stop signal. */
static void params_setup(worker_t *w)
{
    const worker_config_t *cfg = w->cfg;
    if (w->staged) { /* the node's parameters in host memory, as device 0 starts */
        w->params = worker_stage_buf(w, w->n_params + 1);
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
    if (cfg->checkpoint_dir && cfg->checkpoint_every > 0) worker_stop_signal_install();
}

/* Every rank's endpoints out of the rendezvous table: eps[r][0] the probe's, eps[r][1 + u]
 * unit u's. */
static char ***endpoints_parse(worker_t *w, char **tab, int n_units)
{
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
        /* its host's connections count against no flood (conn_cap.h's budget) */
        char host[64] = "";
        if (sscanf(eps[r][0], "tcp://%63[^:]:", host) == 1) conn_cap_trust(host);
    }
    return eps;
}

static void endpoints_free(const worker_t *w, char ***eps)
{
    for (int r = 0; r < w->world; r++) {
        for (int k = 0; k <= n_units_of(&w->model); k++) free(eps[r][k]);
        free(eps[r]);
    }
    free(eps);
}

/* This rank's sockets (the probe's, one per unit) bound on bind, the rendezvous, and the
 * check that every rank runs rank 0's job (waited for up to join_ms): every rank's
 * endpoints (endpoints_parse; endpoints_free). A failure ends the job. */
static char ***endpoints_exchange(worker_t *w, const char *bind, int join_ms)
{
    int n_units = n_units_of(&w->model), to = w->cfg->timeout_ms;
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
    worker_same_job_check(w, join_ms);
    return endpoints_parse(w, tab, n_units);
}

/* The link probe: rank 0 measures the link to rank 1 and tells everyone, so that every rank
 * builds the plan from the same numbers. A zero result when the job does not probe (one
 * host, or one rank). A failure ends the job. */
static probe_result_t link_probe(worker_t *w, char ***eps)
{
    const experiment_t *job = w->job;
    int to = w->cfg->timeout_ms;
    probe_result_t pr = {0};
    char local[64] = "";
    bool one_host = launch_local_addr(w->env.master_addr, local, sizeof local) == 0 &&
                    (!strncmp(local, "127.", 4) || !strcmp(local, "::1"));
    bool probe = job->train.probe == PROBE_YES || (job->train.probe == PROBE_AUTO && !one_host);
    if (!probe || w->world <= 1) return pr;
    if (w->rank <= 1) comm_connect(w->probe_comm, 1 - w->rank, eps[1 - w->rank][0]);
    coord_client_progress(w->cl, -1, -1, "the link probe");
    /* six bulk messages: with two, ZeroMQ could hand both over at once and the time
     * between their arrivals said nothing (loopback "measured" 971 GB/s) */
    if (probe_links(w->probe_comm, 20, job->train.probe_bytes, 6, &pr, to))
        coord_client_fail(w->cl, "link probe between ranks 0 and 1 failed");
    /* links S times slower stand for the full-size cluster's (tensor_scale) */
    pr.bw_Bps *= w->scale;
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
    return pr;
}

/* The plan, from the job and the probed link (cl and po: the cluster and the options it was
 * built on); rank 0 writes the job it runs (job_out); the executor's dependency state. A
 * failure ends the job. */
static void plan_setup(worker_t *w, const probe_result_t *pr, cluster_t *cl, plan_opts_t *po)
{
    const worker_config_t *cfg = w->cfg;
    char err[1024];
    job_link_t link = {.bw_Bps = pr->bw_Bps, .lat_ns = pr->lat_ns};
    job_config(w->job, 0, &link, cl, po);
    if (plan_build_opts(&w->plan, &w->model, cl, po, err, sizeof err))
        coord_client_fail(w->cl, "%s", err);
    if (w->rank == 0 && cfg->job_out && write_job(w, cl, cfg->job_out))
        coord_client_fail(w->cl, "cannot write the job to %s: %s", cfg->job_out,
                          strerror(errno));
    w->plan_built = true;
    ASSERT(w->plan.n_units == n_units_of(&w->model), "plan has %d units, expected %d",
           w->plan.n_units, n_units_of(&w->model));
    /* an SFB layer's gradient is rebuilt from every rank's factors: no replica forms its own */
    for (int u = 0; u < w->plan.n_units && !w->emulate; u++)
        if (w->plan.units[u].method == SYNC_SFB)
            for (int d = 0; d < w->devices; d++)
                nnet_set_weight_grad(w->dev[d].net, w->plan.units[u].layer, false);
    w->done = xcalloc((size_t)w->plan.n_ops, sizeof *w->done);
    worker_exec_init(w);
}

/* Rank 0's account of the plan in the log: its hash, the connection caps, the link it was
 * planned on, each unit's method, and (print_plan) the plan's table. */
static void plan_log(const worker_t *w, const probe_result_t *pr, const cluster_t *cl,
                     const plan_opts_t *po)
{
    char sb[64];
    log_info("plan hash %016llx", (unsigned long long)plan_hash(&w->plan));
    log_info("connections: per host at most %d to the coordinator, %d to a PS shard or any "
             "other socket (more are ended when accepted); beyond %d in all, the newest of the "
             "host without ranks that holds the most", conn_cap_for(2 * w->world),
             conn_cap_for(w->world), conn_cap_budget());
    log_info("link probe: %.1f MB/s, %.1f us one-way; planned on %.1f MB/s, %.1f us "
             "(job_link_settle); plan: %s on %d workers, %d shards",
             pr->bw_Bps / 1e6, pr->lat_ns / 1e3, cl->nic_Bps * cl->nic_efficiency / 1e6,
             cl->lat_ns / 1e3, scheme_name(po->scheme, sb, sizeof sb), w->plan.workers,
             w->plan.shards);
    if (w->plan.precision != PRECISION_FP32 || w->plan.wire_precision != PRECISION_FP32)
        log_info("precision %s, wire precision %s: gradients, parameters and factors are "
                 "sent at %d bytes a value and summed in fp32; the arithmetic is fp32 "
                 "(docs/precision.md)",
                 precision_name(w->plan.precision), precision_name(w->plan.wire_precision),
                 precision_bytes(w->plan.wire_precision));
    for (int u = 0; u < w->plan.n_units; u++)
        if (w->plan.units[u].layer >= 0)
            log_info("  unit %d %-12s %s", u, worker_unit_name(w, u),
                     sync_method_name(w->plan.units[u].method));
    if (w->cfg->print_plan) { /* one write: the other ranks' lines do not cut into it */
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

/* Emulated compute: the simulator's unit times (core/unit_times.h: the job's profile, or
 * without one the cluster's device model), at this rank's speed: a
 * `speed = NODE:FACTOR` line slows (or speeds) its emulated compute as in the simulator;
 * straggler_sigma's and jitter_sigma's random draws are the simulator's alone. */
static void emulated_times(worker_t *w, const cluster_t *cl)
{
    char err[1024];
    if (!w->job->profile_path[0]) /* no profile: the cluster's device model, as simulated */
        unit_times_device(&w->times, &w->plan);
    else if (unit_times_profile(&w->times, &w->plan, w->job->profile_path, err, sizeof err))
        coord_client_fail(w->cl, "%s", err);
    double speed = cluster_node_speed(cl, w->rank);
    for (int u = 0; u < n_units_of(&w->model); u++) {
        w->times.fwd_ns[u] = unit_times_at_speed(w->times.fwd_ns[u], speed);
        w->times.bwd_ns[u] = unit_times_at_speed(w->times.bwd_ns[u], speed);
    }
}

/* Staged: the SFB update's operands on its device, for the largest SFB unit. */
static void update_operands(worker_t *w)
{
    if (!w->staged) return;
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

/* The colocated PS shard (ranks below the plan's shards), bound on bind, with the trace's
 * arrival state; then every rank's shard endpoint. A failure ends the job. */
static void shard_start(worker_t *w, const char *bind)
{
    const worker_config_t *cfg = w->cfg;
    int n_units = n_units_of(&w->model);
    /* before the PS sockets (sendq.h); arrival order keeps the system's */
    bool queued = w->plan.send_order != SEND_ORDER_ARRIVAL;
    comm_set_send_buffer(queued ? (int)worker_send_buffer_bytes(w) : 0);
    /* send_order = layer: one order per peer for everything the rank sends (the shard's
     * answers, the PS mux's pushes and pulls, SFB's factors, the rings' chunks) */
    if (w->plan.send_order == SEND_ORDER_LAYER)
        w->sync_sq = sendq_new_shared(worker_slice_bytes(w), cfg->timeout_ms);
    if (w->rank < w->plan.shards) {
        ps_server_config_t pc = {.shard = w->rank, .n_workers = w->world, .world = w->world,
                                 .bind = bind, .layout = &w->layout,
                                 .init = w->t_start > 0 ? w->shard_snapshot : w->params,
                                 .start_version = w->t_start,
                                 .staleness = w->job->staleness, .update = worker_shard_update,
                                 .update_arg = w,
                                 .on_push = cfg->trace_prefix ? worker_push_arrived : NULL,
                                 .on_push_arg = w,
                                 .conn_cap = conn_cap_for(w->world),
                                 .slice_bytes = w->plan.slice_bytes ? worker_slice_bytes(w) : 0,
                                 .turns = w->plan.send_order == SEND_ORDER_FAIR,
                                 .order = w->sync_sq,
                                 .wire = w->plan.wire_precision,
                                 /* fp16: an iteration's applies wait for its verdict */
                                 .ready = worker_ls_on(w) ? worker_shard_ready : NULL,
                                 .ready_arg = w};
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
    if (w->ps) { /* this rank reaches its own shard within the process */
        free(w->ps_eps[w->rank]);
        w->ps_eps[w->rank] = xstrdup(ps_server_local_endpoint(w->ps));
    }
}

/* Logs where this rank listens (for operators, and the test that sends garbage to them),
 * and connects each SFB unit's socket to every peer and each bucket's to its ring's right
 * neighbour. */
static void peers_connect(worker_t *w, char ***eps)
{
    int n_units = n_units_of(&w->model);
    log_info("rank %d endpoint: PS shard %s", w->rank, w->ps ? ps_server_endpoint(w->ps) : "-");
    for (int u = 0; u < n_units; u++)
        if (w->plan.units[u].method == SYNC_SFB || owns_bucket(&w->plan, u))
            log_info("rank %d endpoint: %s of %s %s", w->rank,
                     sync_method_name(w->plan.units[u].method), worker_unit_name(w, u),
                     comm_endpoint(w->ucomm[u]));
    /* fp16's loss-scaling votes go to every peer over the probe's socket, idle since the
     * probe */
    if (w->plan.units[0].op_vote >= 0) {
        log_info("rank %d endpoint: loss-scaling votes %s", w->rank,
                 comm_endpoint(w->probe_comm));
        for (int r = 0; r < w->world; r++)
            if (r != w->rank) comm_connect(w->probe_comm, r, eps[r][0]);
    }
    /* under fair only the PS sockets (the shard's, the mux's) take turns: the rings and SFB
     * send first in, first out, and a small kernel buffer would only slow them */
    bool fair = w->plan.send_order == SEND_ORDER_FAIR;
    if (fair) comm_set_send_buffer(0);
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
    if (fair) comm_set_send_buffer((int)worker_send_buffer_bytes(w));
    /* send_order = layer: SFB's and the rings' sends in the rank's order (shard_start) */
    if (w->sync_sq)
        for (int u = 0; u < n_units; u++) comm_set_order(w->ucomm[u], w->sync_sq);
}

/* The rank's trace, and rank 0's report table: the CSV (a resumed job's continued from its
 * checkpoint) and the header on stdout. A failure ends the job. */
static void outputs_open(worker_t *w)
{
    const worker_config_t *cfg = w->cfg;
    if (cfg->trace_prefix) {
        char pre[1100], err[1024];
        snprintf(pre, sizeof pre, "%s-rank%d", cfg->trace_prefix, w->rank);
        if (!(w->trace = trace_open(pre, err, sizeof err))) coord_client_fail(w->cl, "%s", err);
    }
    if (w->rank != 0) return;
    const char *hdr = "epoch,iteration,loss,train_acc,test_acc,images_per_s,seconds";
    if (cfg->csv_path) {
        /* a resumed job continues the table of the run it resumes from its checkpoint's
         * iteration on; a new file gets a header */
        if (w->t_start > 0 && worker_csv_keep_rows_to(cfg->csv_path, w->t_start))
            coord_client_fail(w->cl, "%s: cannot rewrite: %s", cfg->csv_path, strerror(errno));
        if (!(w->csv = outfile_open(cfg->csv_path, w->t_start > 0 ? "a" : "w")))
            coord_client_fail(w->cl, "%s: cannot open: %s", cfg->csv_path, strerror(errno));
        /* the file names the plan that made each row (plan_hash, as the log and the
         * written job do) */
        if (ftell(w->csv) == 0) fprintf(w->csv, "%s,plan\n", hdr);
    }
    printf("%s\n", hdr);
    fflush(stdout);
}

/* The start barrier (waited for up to join_ms), and the clocks the run measures from. */
static void start_barrier(worker_t *w, int join_ms)
{
    int64_t shared_t0_ns = worker_time_base(w, join_ms);
    if (coord_client_barrier(w->cl, 0, join_ms))
        coord_client_fail(w->cl, "not every rank reached the start barrier");
    w->barrier_next = 1;
    w->report_t0_ns = clock_now_ns();
    w->t0_ns = shared_t0_ns ? shared_t0_ns : w->report_t0_ns;
    w->t0_shared = shared_t0_ns != 0;
    /* the shard stamps its answers on the trace clock only where every rank of its host
     * reads the same one: PULL rows then start when the values left the shard */
    if (w->ps && w->trace && w->t0_shared) ps_server_set_trace_zero(w->ps, w->t0_ns);
}

/* Up to the coordinator: the job checked, the data, the devices and their replicas, the
 * parameters. 0, 2 (bad input) or 1 (a set-up failure), the reason in err. */
static int local_setup(worker_t *w, char *err, size_t errlen)
{
    const experiment_t *job = w->job;
    if (job_check(w, err, errlen)) return 2;
    log_info("rank %d of %d (%s), pid %d, master %s:%d", w->rank, w->world,
             launch_source_name(w->env.source), (int)getpid(), w->env.master_addr,
             w->env.master_port);
    /* compute and data, before anything else can wait on this rank */
    if (!w->emulate) {
        if (data_setup(w, err, errlen)) {
            err_of_rank(w, err, errlen);
            return 2;
        }
        w->steps = (w->train.n / w->replicas) / job->batch;
    } else {
        w->steps = job->train.synthetic_n / w->replicas / job->batch;
        if (w->steps < 1) w->steps = 1;
    }
    if (devices_setup(w, err, errlen)) return 1;
    w->iterations = worker_iterations(job, w->steps);
    w->solver = train_solver_config(job, w->steps, w->iterations);
    /* no peer may send more than this job ever sends in one message */
    size_t max_payload = largest_message(w);
    comm_set_max_payload(max_payload);
    if (w->rank == 0)
        log_info("transport: %s; a frame over %.1f MB ends its connection",
                 comm_trusted_fabric() ? "the job's keys only; data unencrypted (--trusted-fabric)"
                 : comm_keyring()      ? "CURVE, the job's keys only"
                                       : "plain TCP (--insecure)",
                 max_payload / 1e6);
    return 0;
}

worker_t *worker_new(const worker_config_t *cfg, int *rc, char *err, size_t errlen)
{
    err[0] = '\0';
    worker_t *w = worker_alloc(cfg);
    if ((*rc = local_setup(w, err, errlen))) {
        worker_destroy(&w);
        return NULL;
    }
    /* coordinator, endpoints, rendezvous; from here on a failure ends the job through it */
    coord_config_t cc = coord_config_default();
    if ((w->rank == 0 && !(w->cs = coord_server_new(&w->env, cc))) ||
        !(w->cl = coord_client_new(&w->env, cc, NULL))) {
        *rc = 1;
        worker_destroy(&w);
        return NULL;
    }
    if (cfg->checkpoint_dir) {
        char path[4200];
        restart_last_words_path(path, sizeof path, cfg->checkpoint_dir);
        coord_client_last_words(w->cl, path);
    }
    char addr[64], bind[128];
    if (launch_local_addr(w->env.master_addr, addr, sizeof addr))
        coord_client_fail(w->cl, "no route to the master %s", w->env.master_addr);
    snprintf(bind, sizeof bind, "tcp://%s:*", addr);
    char ***eps = endpoints_exchange(w, bind, cc.join_ms);
    probe_result_t pr = link_probe(w, eps);
    cluster_t cl;
    plan_opts_t po;
    plan_setup(w, &pr, &cl, &po);
    /* the parameters once the plan is known: scaled tensors follow its blocks and methods */
    if (w->scale > 1) worker_scale_layers(w);
    params_setup(w);
    if (cfg->resume_dir && (*rc = worker_resume(w, err, errlen))) {
        endpoints_free(w, eps);
        worker_destroy(&w);
        return NULL;
    }
    /* a fresh job starts from an empty checkpoint directory (the command line refused one
     * holding a complete checkpoint): what a run killed before its first one left goes */
    if (w->rank == 0 && cfg->checkpoint_dir && !cfg->resume_dir) {
        job_ckpt_prune(cfg->checkpoint_dir, -1, -1);
        restart_forget(cfg->checkpoint_dir);
    }
    if (w->rank == 0) plan_log(w, &pr, &cl, &po);
    if (w->emulate) emulated_times(w, &cl);
    worker_units_build(w);
    worker_layout_from_plan(w);
    update_operands(w);
    shard_start(w, bind);
    peers_connect(w, eps);
    endpoints_free(w, eps);
    outputs_open(w);
    start_barrier(w, cc.join_ms);
    return w;
}

void worker_finish(worker_t *w)
{
    const worker_config_t *cfg = w->cfg;
    char err[1024];
    if (cfg->params_out && worker_write_params(w, cfg->params_out))
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
    sendq_destroy(&w->sync_sq);
    comm_destroy(&w->probe_comm);
    coord_server_destroy(&w->cs);
    if (w->csv) fclose(w->csv);
    worker_units_free(w);
    ps_layout_fini(&w->layout);
    free(w->done);
    if (w->plan_built) plan_fini(&w->plan);
    unit_times_fini(&w->times);
    free(w->arrivals);
    free(w->unit_shard_blocks);
    if (w->staged) worker_stage_free(w, w->params);
    else if (!w->net) free(w->params);
    free(w->hist_local);
    free(w->hist_server);
    free(w->shard_snapshot);
    free(w->ckpt_kept);
    free(w->zeros);
    free(w->layer_off);
    free(w->entries);
    free(w->layer_w);
    free(w->layer_b);
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
    char err[9000];
    worker_t *w = worker_new(cfg, &rc, err, sizeof err);
    if (!w) {
        if (err[0]) fprintf(stderr, "poseidon train: %s\n", err);
        return rc;
    }
    if (w->rank == 0) restart_record(cfg, (long long)w->t_start);
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
    const char *resume = cfg->resume_dir;
    int rc, max = cfg->job.train.max_restarts;
    char why[256];
    for (int done = 0;; done++) {
        rc = launch_local_why(n, launch_free_port(), 15000, run_local_rank, cfg, why, sizeof why);
        if (!restart_wanted(rc, done, max)) break;
        restart_prepare(cfg, done + 1, max, why);
    }
    cfg->resume_dir = resume;
    cfg->security.keys = given;
    keyring_destroy(&keys);
    return rc;
}
