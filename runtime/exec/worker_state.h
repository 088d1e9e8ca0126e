/* worker_state: the state of one rank of a training job, shared by the files of the worker
 * and by no other: the job's set-up and teardown (runtime/exec/worker.c: data, net, plan,
 * sockets, rendezvous; worker_new / worker_destroy) and the plan's executor
 * (runtime/exec/worker_exec.c: the device threads and one thread per sync op, which only walk
 * the plan's ops and edges), and below both the helpers they share: the rank's buffers
 * (worker_buffers.c), its exchanges through the coordinator (worker_coord.c) and its state on
 * disk (worker_ckpt.c). Calls go worker.c -> worker_exec.c -> the helpers, never back up. The
 * set-up fills everything before worker_exec_run(); the executor owns the dependency
 * counters, the wake lists and the report state while it runs.
 */
#ifndef POSEIDON_WORKER_STATE_H
#define POSEIDON_WORKER_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/model.h"
#include "core/plan.h"
#include "core/trace.h"
#include "core/unit_times.h"
#include "runtime/transport/comm.h"
#include "runtime/compute/compute.h"
#include "runtime/transport/coord.h"
#include "runtime/exec/data.h"
#include "runtime/exec/job_checkpoint.h"
#include "runtime/transport/launch.h"
#include "runtime/compute/nnet.h"
#include "runtime/sync/ps.h"
#include "runtime/compute/solver.h"
#include "runtime/exec/worker.h"

typedef struct {
    int64_t offset, count; /* floats in the arena */
    bool is_bias;          /* no weight decay (as the single-worker solver) */
    int layer;
} wk_entry_t;

typedef struct {
    int layer;                 /* model layer of the unit's parameters, -1: none */
    int64_t ps_off, ps_count;  /* range synced through the PS (0 floats: none) */
    int64_t w_off, w_count;    /* SFB: the weights; all-reduce and a node's own update (one
                                  node of several devices): the whole layer */
    int m, n;                  /* SFB: outputs x inputs */
    int k;                     /* SFB: factor rows, batch x the layer's positions (tokens) */
    float **gslot;             /* S slots: the PS range's gradient */
    int64_t ar_off;            /* all-reduce: where the gradient sits in its bucket's buffer */
    float **ar_slot;           /* S slots: the gradient's place in its bucket's buffer; a
                                  node's own update: a buffer of its own */
    float **u_slot, **v_slot;  /* S slots: own factors, (K, m) and (K, n) */
    float **stash;             /* S slots: world x K x (m + n), every rank's factors */
    float *gsum;               /* SFB: the rebuilt weight gradient (m, n) */
    pthread_mutex_t lock;      /* the unit's parameters: compute thread vs. syncers */
    /* Where device d's BWD leaves its gradient, per slot ([d][s]; NULL where the unit has
     * none): the PS range, the all-reduce range, the factors (k_dev rows each). Device 0's
     * are the node's buffers above (its factors the first k_dev rows); the local reduce adds
     * (gathers) the other devices' into them. */
    float ***dev_g, ***dev_w, ***dev_u, ***dev_v;
    int k_dev;                 /* SFB: factor rows of one device; k = devices x k_dev */
    /* [d][s]: the end of device d's copies out of its BWD into slot s (its backend's event;
     * NULL under emulated compute). The LREDUCE waits for them: on a GPU the copies run on
     * the copy-out stream while the backward goes on below. */
    compute_event_t ***copied;
} wk_unit_t;

/* Whether unit un has parameters and no network sync but a local reduce: one node of several
 * devices, whose reduced gradient the node applies itself (the update a lone worker makes
 * after its backward), before the local broadcast. */
static inline bool wk_unit_updates_locally(const plan_unit_t *un)
{
    return un->layer >= 0 && un->method == SYNC_NONE && un->op_lreduce >= 0;
}

/* One device of the node (three levels, core/plan.h): its own replica of the net on its own
 * compute backend, run by its own thread through the plan's FWD/BWD ops. A compute op's
 * instance on the node completes when every device has run it. Device 0 is the node's
 * replica: its parameters are the ones the syncers write (worker_t.params) and its gradient
 * buffers the node's; the local broadcast copies the synced parameters into the others. */
typedef struct {
    worker_t *w;
    int index;                 /* d: global worker rank x devices + d of world x devices */
    compute_t *compute;        /* device 0: worker_t.compute */
    nnet_t *net;               /* device 0: worker_t.net; NULL under emulated compute */
    float *params;             /* its replica's parameters (device 0: worker_t.params) */
    pthread_mutex_t *locks;    /* devices > 0, per unit: its parameters, compute vs. the local
                                  broadcast (device 0 uses the units' locks) */
    compute_event_t *loaded;   /* staged: the end of the LBCAST's copy in (under intra_mu) */
    /* Emulated compute: the op's start and the previous op's intended end. An op whose
     * dependencies were met before that end starts at it, not when the thread woke (~0.1-1
     * ms later on a loaded host): a pass is ~100 sleeps, and their lateness summed was ~8%
     * of an emulated GoogLeNet iteration. */
    int64_t emu_start_ns, emu_end_ns;
} wk_device_t;

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

struct worker {
    const worker_config_t *cfg;
    const experiment_t *job;   /* &cfg->job */
    solver_config_t solver;
    launch_env_t env;
    int rank, world;
    int devices;               /* per node: device threads, each with a replica */
    /* The devices are GPUs (their buffers are not host memory): the node's parameters are a
     * pinned host copy (params) that the syncers update as on the CPU; each BWD copies its
     * gradient (factors) out into pinned slots on the copy-out stream, the plan's LREDUCE
     * waits for those copies, and its LBCAST copies the synced parameters into every
     * device's replica (the cluster's host_staging ops, core/plan.h). */
    bool staged;
    int replicas;              /* world x devices: the gradients every update averages */
    wk_device_t *dev;          /* devices of them */
    /* the node's compute op in flight: devices that ran it, the first one's start */
    int *dev_ran;              /* per op, under mu */
    int64_t *dev_t0_ns;        /* per op, under mu */
    /* Emulated compute, under mu: the latest intended end of the devices' shares of the op
     * in flight (per op), and of the node's last completed compute op. The next op of the
     * chain starts there, not when the last device's thread woke (see wk_device_t). */
    int64_t *dev_emu_end_ns;
    int64_t emu_node_end_ns;
    pthread_mutex_t intra_mu;  /* RES_INTRA: one local reduce or broadcast at a time */
    int n_slots;               /* buffers per unit: 1 + staleness (core/plan.h) */
    int64_t iterations, steps; /* the run's, and per epoch */
    model_t model;
    plan_t plan;
    bool plan_built;
    bool emulate;
    /* tensor_scale S (emulated compute only; runtime/exec/worker_scale.c): every exchanged
     * tensor S times smaller, on links S times slower. Per model layer, the weights and
     * biases this rank holds; NULL at S = 1 (the model's). */
    int scale;
    int64_t *layer_w, *layer_b;

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
    /* precision = fp16's loss scaling (core/plan.h, "Loss scaling"), under mu: the scale the
     * next backward multiplies the loss gradient by and the good steps since it last changed;
     * per slot (iteration t at t % n_slots): an inf or NaN seen among t's gradients so far,
     * and VERDICT(t)'s ruling, the scale t's backward used (its updates divide by it) and
     * whether the step is skipped. Every node sees the same sums and factors, so every node
     * rules alike. */
    float ls_scale;
    int64_t ls_good;
    int64_t ls_ruled;          /* iterations VERDICT has ruled on (the shard asks) */
    bool *ls_bad, *ls_skip, *ls_vote; /* ls_vote: this rank's own PS gradients (its VOTE) */
    float *ls_used;
    /* VOTE's thread: the votes of the next iteration that came before this one's were all
     * in, per rank (0: none, else 1 + the vote) */
    unsigned char *ls_early;
    int ls_inject_op;          /* overflow_at: the op whose gradient gets the inf; -1: none */

    coord_server_t *cs;
    coord_client_t *cl;
    comm_t *probe_comm;
    comm_t **ucomm;
    struct sendq *sync_sq;     /* send_order = layer: orders all the rank sends, per peer:
                                * the shard, the PS mux, every ucomm (sendq.h) */
    ps_layout_t layout;
    ps_server_t *ps;
    char **ps_eps;
    struct comm_mux *ps_mux; /* the PUSH and PULL syncers' one connection per shard */

    compute_t *compute, *ucompute;
    /* Staged: the SFB update's operands on ucompute's device (a GPU's: the peers' factors go
     * there, the rebuilt gradient comes back), the largest unit's size, used under
     * update_mu: world x k x (m + n) and m x n floats. NULL otherwise (the update reads the
     * stash in place). */
    float *ustash, *ugsum;
    nnet_t *net;
    dataset_t train, test;
    bool have_data;
    unit_times_t times;        /* emulated compute: per unit, at this rank's speed */
    /* CPU seconds of this process (every thread: compute, syncers, shard, ZeroMQ I/O) and
     * the clock when iteration 1's first op could start: start-up and the warm-up iteration 0
     * (connections, first touches of buffers) are excluded from the
     * steady-state CPU logged at the end (experiments/validate.sh reads it) */
    double cpu1_s;
    int64_t cpu1_ns;
    char summary[160];         /* this rank's steady-state line, logged after the final barrier */

    trace_t *trace;
    pthread_mutex_t trace_mu;
    int64_t t0_ns;
    bool t0_shared;            /* t0_ns is rank 0's: one clock with every rank on its host */
    /* Arrivals at this rank's shard (its thread only), per (pushing rank, unit): the blocks of
     * the push of `iteration` seen so far; when all of the unit's blocks on this shard are in,
     * one trace row records them (see push_arrived). */
    wk_arrival_t *arrivals;    /* world x units */
    int *unit_shard_blocks;    /* per unit: its blocks on this rank's shard */

    /* Checkpoints (runtime/exec/job_checkpoint.h). The compute thread takes one before FWD of an
     * iteration K: it sets quiescing and sleeps on quiesce_cv (mark_done wakes it) until
     * every op this rank runs has completed its instances < K. */
    int64_t t_start;           /* the first iteration this run executes: K when resumed */
    int64_t ckpt_last;         /* the newest complete checkpoint's iteration; -1: none */
    /* The newest complete checkpoints this run resumed from or took, oldest first: at most
     * keep_checkpoints of them, the ones that stay (worker_ckpt_kept) */
    int64_t *ckpt_kept;
    int n_kept;
    int64_t barrier_next;      /* the id of the next coordinator barrier (the start's is 0) */
    float *shard_snapshot;     /* n_params: this shard's blocks at the checkpoint, zeros
                                * elsewhere; NULL without checkpoints */
    bool quiescing;            /* under mu */
    pthread_cond_t quiesce_cv;
    /* Under mu: a checkpoint is being taken, and the time all checkpoints took so far. A
     * wait for a dependency does not time out during a checkpoint, and its bound is extended
     * by the checkpoints' time: writing the files may take longer than timeout_ms. */
    bool ckpt_busy;
    int64_t ckpt_paused_ns;
    /* A stop asked by a signal (SIGTERM to any rank, coord_client_request_stop): every rank
     * learns it through the coordinator, and the checkpoint after which the ranks found that
     * one of them had heard it sets stop_at to its iteration: no instance of stop_at or later
     * runs, waits for one end, and the run ends there (INT64_MAX: no stop). */
    _Atomic int64_t stop_at;

    /* rank 0's report state (its devices' threads, under mu; device 0 reports) */
    FILE *csv;
    double loss_sum;
    int64_t loss_n, correct, report_t0_ns, report_iter0;
};

typedef struct {
    worker_t *w;
    int op;
} wk_arg_t;

/* Whether this rank executes instances of the op (compute, worker-side syncs, PULL's receive
 * side) rather than the shards (APPLY). */
static inline bool worker_op_runs_here(const plan_op_t *po)
{
    return po->res == RES_COMPUTE || po->place == PLACE_WORKERS || po->kind == OP_PULL;
}

/* The name of unit u: its parameter layer's (or its first layer's). */
static inline const char *worker_unit_name(const worker_t *w, int u)
{
    const plan_unit_t *un = &w->plan.units[u];
    return w->model.layers[un->layer >= 0 ? un->layer : un->first].name;
}

/* ---- the coordinator's exchanges (runtime/exec/worker_coord.c) ---- */

/* Every rank's line of text, gathered through the coordinator (one broadcast per rank, ids
 * id0 .. id0 + world - 1, each waited for up to timeout_ms): world malloc'ed strings in a
 * malloc'ed array. A failure ends the job (coord_client_fail). The calling thread owns the
 * coordinator client meanwhile. */
char **worker_allgather(worker_t *w, int64_t id0, const char *line, int timeout_ms);
void worker_allgather_free(worker_t *w, char **tab);

/* Rank 0's description of the job (model, scheme, batch, seed, ...) against this rank's
 * (coordinator broadcast 0): a rank that runs another job ends the job. */
void worker_same_job_check(worker_t *w, int timeout_ms);

/* The zero of the trace clocks (coordinator broadcast 2). CLOCK_MONOTONIC is one clock for
 * every process of a host, so ranks on rank 0's host take rank 0's time just before the
 * start barrier: rows of different ranks (a push and its arrival at another shard) then
 * compare directly, and no row starts before zero. Returns that time, or 0 on another host
 * (clocks unrelated: the rank keeps its own start). */
int64_t worker_time_base(worker_t *w, int timeout_ms);

/* ---- the rank's state on disk (runtime/exec/worker_ckpt.c) ---- */

/* Checkpoint k is complete (taken, or resumed from): it joins the kept ones, and the oldest
 * beyond keep_checkpoints leaves them. Returns the oldest that stays. */
int64_t worker_ckpt_kept(worker_t *w, int64_t k);

/* The header of this rank's checkpoint file of iteration k (runtime/exec/job_checkpoint.h):
 * what a file must say to be resumed by this job; the report accumulators zero. */
job_ckpt_header_t worker_ckpt_header(const worker_t *w, int64_t k);

/* This rank's state as its checkpoint file holds it (runtime/exec/job_checkpoint.h): the node's
 * arrays and each device's layer state in place, and an RNG buffer per device of
 * h->rng_bytes (malloc'ed: worker_ckpt_state_free). Staged (GPUs), each device's layer state
 * is a host copy, brought from its GPU. */
job_ckpt_state_t worker_ckpt_state(worker_t *w, const job_ckpt_header_t *h);
void worker_ckpt_state_free(const worker_t *w, job_ckpt_state_t *st);

/* Staged: the node's parameters and each device's layer state in st to every device's
 * replica, waiting until they are there (a resumed job's start). */
void worker_params_to_devices(worker_t *w, const job_ckpt_state_t *st);

/* --resume DIR (the plan is built): rank 0 chooses the newest complete checkpoint and tells
 * the others; each rank loads its own file (parameters, momentum, its shard's values, layer
 * and dropout state, rank 0's report state) and starts at its iteration. 0, or 2 when any
 * rank's file is not of this job or is damaged: every rank returns 2, rank 0 with the first
 * such rank's reason in msg ("--resume: ..."), the others with msg untouched. */
int worker_resume(worker_t *w, char *msg, size_t msglen);

/* A resumed job's CSV: the rows of the killed run after the checkpoint (iteration > k) go,
 * so that the resumed run's rows follow the checkpoint's as the uninterrupted run's did.
 * The file is rewritten beside itself and renamed over. 0, or -1 with errno set. */
int worker_csv_keep_rows_to(const char *path, int64_t k);

/* PREFIX.<rank>: the node's parameters; with several devices also PREFIX.<rank>.<d>, the
 * replica of device d > 0 (the local broadcast's copy). Staged, each file is what the
 * device's replica holds (copied from the GPU). 0, or -1. */
int worker_write_params(const worker_t *w, const char *prefix);

/* SIGTERM (a scheduler's preemption) asks the job to stop after its next checkpoint, not at
 * once: worker_stop_signal_install sets the handler (a job that checkpoints), and
 * worker_stop_signalled is true once the signal came. */
void worker_stop_signal_install(void);
bool worker_stop_signalled(void);

/* ---- the rank's buffers (runtime/exec/worker_buffers.c) ---- */

/* Parameter entries in arena order (weights, then biases, per layer with parameters), and
 * the per-layer offsets. 0, or -1 with the reason in err: the net's arena is laid out
 * otherwise. */
int worker_entries_build(worker_t *w, char *err, size_t errlen);

/* A buffer the devices' gradients or factors are copied into (count floats, zeroed): pinned
 * host memory when they are GPUs, so that the copies run beside the compute. */
float *worker_stage_buf(worker_t *w, int64_t count);
void worker_stage_free(worker_t *w, void *p);

/* The plan is built: every unit's ranges, slots, factor and stash buffers, the devices'
 * own buffers and copy events, the all-reduce buckets (worker_units_free frees them, any
 * stage of the build). */
void worker_units_build(worker_t *w);
void worker_units_free(worker_t *w);

/* The PS layout the plan describes (after worker_units_build). */
void worker_layout_from_plan(worker_t *w);

/* ---- tensors S times smaller (runtime/exec/worker_scale.c) ---- */

/* Bytes of one value on the wire: the plan's byte counts are at the wire precision (4 at
 * fp32, 2 at bf16 and fp16), the rank's buffers are fp32 whatever it is. */
int64_t worker_value_bytes(const worker_t *w);

/* The floats this rank holds of a tensor of `bytes` (at the wire precision) at full size:
 * bytes / V at S = 1 (V = worker_value_bytes), else bytes / VS rounded up, at least 1 (a
 * block or chunk still travels as one message). */
int64_t worker_scaled_floats(const worker_t *w, int64_t bytes);

/* A dimension of an SFB layer (outputs, inputs, factor rows) scaled by sqrt(S), rounded up,
 * at least 1: weights m x n and factors k x (m + n) both shrink S-fold. */
int worker_scaled_dim(const worker_t *w, int64_t x);

/* What a send queue (send_order layer or fair) holds per connection, scaled as the tensors
 * are, so that it holds the same share of a message as at full size (at least
 * SENDQ_SLICE_MIN_BYTES): the plan's slice / S, a multiple of 4; and the sockets' send
 * buffer, SENDQ_SOCKET_BUFFER_BYTES / S. */
size_t worker_slice_bytes(const worker_t *w);
size_t worker_send_buffer_bytes(const worker_t *w);

/* The floats of a PS range whose plan tensor is `bytes`: its KV blocks (as many as the
 * plan's, on the same shards), each scaled (worker_scaled_floats). */
int64_t worker_scaled_ps_floats(const worker_t *w, int64_t bytes);

/* S > 1, the plan is built: each layer's weights and biases scaled as its unit syncs them
 * (layer_w, layer_b), and the parameter entries rebuilt on them. */
void worker_scale_layers(worker_t *w);


/* ---- precision = fp16's loss scaling (runtime/exec/worker_loss_scale.c) ---- */

/* The scale at job.train.loss_scale_init, the rulings' slots, the op that overflow_at
 * injects into (the plan is built); fini frees them. */
void worker_ls_init(worker_t *w);
void worker_ls_fini(worker_t *w);
/* Whether the plan scales the loss (it has a VERDICT: precision = fp16). */
bool worker_ls_on(const worker_t *w);
/* The scale the next backward multiplies the loss gradient by (1 when not on). Under BSP the
 * backward of t runs after every update of t - 1, so after VERDICT(t - 1): every node reads
 * the same. */
float worker_ls_scale(worker_t *w);
/* overflow_at: an inf into g[0] when (op, t) is the sync the key names on this rank. */
void worker_ls_inject(worker_t *w, int op, int64_t t, float *g);
/* Iteration t's gradients g (n floats, as every node has them) are in: an inf or a NaN among
 * them skips the step. */
void worker_ls_note(worker_t *w, int64_t t, const float *g, int64_t n);
/* This rank's own gradients g of iteration t, as it pushes them to the shards: an inf or a
 * NaN at the wire precision goes into its VOTE. */
void worker_ls_note_own(worker_t *w, int64_t t, const float *g, int64_t n);
/* VOTE(t): this rank's vote to every other rank, and theirs of t received (a vote from an
 * unknown rank, for an iteration not in flight, a second one or a malformed one is refused
 * with a log naming the peer); a bad one makes t's verdict bad. A failure ends the job. */
void worker_ls_vote(worker_t *w, int64_t t);
/* VERDICT(t): every gradient of t is noted; the ruling, and the scale moves (the colocated
 * shard, waiting for it, is told). */
void worker_ls_verdict(worker_t *w, int64_t t);
/* The colocated shard's question (ps_server_config_t.ready): 1 apply iteration t, 0 skip
 * it, -1 VERDICT(t) has not ruled yet. arg: the worker. */
int worker_shard_ready(void *arg, int64_t t);
/* An update of iteration t: whether to take it, and *unscale = 1 / the scale t's backward
 * used (1 when not on). */
bool worker_ls_step(worker_t *w, int64_t t, float *unscale);

/* ---- the executor (runtime/exec/worker_exec.c) ---- */

/* The wake lists and condition variables of the plan's ops (the plan is built). */
void worker_exec_init(worker_t *w);
void worker_exec_fini(worker_t *w);

/* Runs the job's iterations: the compute thread and a thread per worker-side sync op, until
 * every op has run its last instance; then rank 0's final report row. A failure ends the
 * process through the coordinator (coord_client_fail). */
void worker_exec_run(worker_t *w);

/* The colocated PS shard's callbacks (runtime/sync/ps.h): the solver step on the sum of the
 * workers' pushes, and the arrival of a push (the trace's PUSH ends). arg: the worker. */
void worker_shard_update(void *arg, float *params, const float *grad_sum, size_t count,
                         uint64_t offset, int64_t t);
void worker_push_arrived(void *arg, int peer, uint64_t offset, int64_t t, int64_t recv_ns);

#endif
