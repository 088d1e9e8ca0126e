/* worker: one rank of a distributed training job — it builds the plan with plan_build() from
 * (model, cluster, scheme, staleness, batch), exactly as the simulator does, and executes it
 * for real.
 *
 * Who runs what. A rank is a node. Each of its devices_per_node devices has a thread, a
 * replica of the net and a compute backend of its own, and runs the RES_COMPUTE ops (FWD/BWD
 * of each unit, layers units[u].first..last) in op-array order, iteration after iteration, on
 * its own batch (device d of rank r is global worker r x devices + d); the node's instance of
 * a compute op completes when every device has run it. With several devices the plan's
 * RES_INTRA ops, one at a time, combine them in memory: LREDUCE adds the devices' gradients
 * into device 0's (the node's) buffers, or stacks their SFB factors, before the node's one
 * network sync, and LBCAST copies the synced parameters into the other replicas (one node:
 * no network sync in the plan, LREDUCE also applies the mean of the reduced gradient to the
 * node's parameters, as a lone worker does after its backward; emulated
 * compute: each lasts at least the interconnect's time in the plan). Every other op the plan
 * places on workers (PUSH, SFB, UPDATE, ALLREDUCE; under fp16 VOTE and VERDICT) has a thread
 * of its own that runs the op's instances in iteration order as their dependencies are met;
 * a thread per PULL op receives
 * the updated values from the shards. The shard-side ops (APPLY, PULL's send) are the
 * colocated PS shard's thread (runtime/ps), whose update callback applies the solver to the
 * sum over nodes (divided by nodes x devices, every update's mean over the replicas). No policy lives here: which method syncs a unit, what waits for what,
 * comes from the plan's ops and deps; how an op moves bytes comes from ps/sfb/allreduce.
 *
 * Dependencies. Each op keeps the count of its completed instances on this rank (instances of
 * one op complete in iteration order, so a count is the whole state); instance (op, t) waits
 * until every dep (j, back) has count[j] > t - back. DEP_RECV on PULL/SFB/ALLREDUCE is met
 * when this rank's receive side finished; DEP_ALL (a ring all-reduce waits for every node's
 * backward) is met locally, the collective itself waiting for the other nodes. Waits are
 * bounded by timeout_ms; a peer that dies is reported by the coordinator's health check.
 *
 * SSP(s): the plan's deps reach back 1 + s iterations; the shards run with staleness s so
 * that they accept pushes up to s ahead, and a pull of iteration t asks for the values after
 * apply(t) (the plan's PULL(t)).
 *
 * Buffers. Gradients and SFB factors are copied out of the net when BWD(u) ends into one of
 * s + 1 slots per unit, because the next FWD/BWD may overwrite them while the sync of u is
 * still in flight; the plan's BWD(u, t) waits for the syncs of iteration t - s - 1 that read
 * the slot it refills, and SFB(u, t) for the UPDATE(u, t - s - 1) that read the stash slot its
 * peers' factors go to (core/plan.h): the executor enforces no wait of its own. The gradients of
 * the units of one all-reduce bucket are copied side by side into one slot of the bucket, over
 * which the bucket's single ring runs; each member's update then reads its own range. The
 * parameters of a unit are written by its syncers and read by the compute thread under a
 * per-unit lock.
 *
 * GPU devices (--device cuda; the job's cluster has host_staging, so the plan has a LREDUCE
 * and a LBCAST per synced unit even for one device): the copy out of BWD(u) is asynchronous,
 * on the GPU's copy-out stream into pinned slots, and LREDUCE(u) waits for it; the syncers
 * work on the node's parameters in pinned host memory exactly as on the CPU; LBCAST(u)
 * copies them into every GPU's replica and ends when they have landed, before FWD(u) of the
 * next iteration. The first FWD of an iteration orders the GPU's work after the copies out
 * of the previous one, so that under SSP a pass never overwrites what a copy still reads.
 *
 * Identity comes from the launcher's environment (launch_env_detect); rank 0 also runs the
 * coordinator. Returns the process exit code.
 */
#ifndef POSEIDON_WORKER_H
#define POSEIDON_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/experiment.h"
#include "runtime/compute/compute.h"
#include "runtime/compute/solver.h"
#include "runtime/transport/transport_security.h"

/* One rank's run: the job (what to run, the same description the simulator reads) and how
 * this process runs it. */
typedef struct {
    experiment_t job;          /* model, cluster, scheme, batch, iterations, ... and the
                                  training keys (core/experiment.h); one configuration */
    init_kind_t init;
    int64_t report_every;      /* iterations between report rows; 0: once per epoch */
    bool evaluate;             /* test accuracy at each report row (rank 0) */
    int threads;               /* BLAS threads per worker */
    compute_kind_t device;     /* each device thread's backend: cpu, or cuda (one GPU each:
                                  GPU LOCAL_RANK x devices + d modulo the visible ones);
                                  cuda needs cluster.host_staging = yes */
    bool stage_cpu;            /* tests: CPU devices run as GPU devices do (the node's
                                  parameters a host copy apart from every replica, which the
                                  LBCAST copies into), so that CI runs that path */
    int timeout_ms;            /* bound of every wait for a dependency or a peer */
    const char *csv_path;      /* rank 0: report rows */
    const char *trace_prefix;  /* PREFIX-rank<R>.csv/.json per rank; rank 0 merges PREFIX.csv */
    const char *params_out;    /* each rank writes its final parameters to PATH.<rank>, and
                                  device d > 0's replica to PATH.<rank>.<d> */
    const char *job_out;       /* rank 0 writes the experiment it ran here; NULL: none */
    bool print_plan;           /* rank 0 prints the plan's per-unit table */
    /* Coordinated checkpoints (runtime/exec/job_checkpoint.h): every checkpoint_every iterations
     * into checkpoint_dir (NULL or 0: none); resume_dir: start from the newest complete
     * checkpoint there (NULL: from iteration 0). */
    const char *checkpoint_dir;
    int64_t checkpoint_every;
    const char *resume_dir;
    const char *resume_changed; /* keys the job may change on a resume ("K,K,..." or "all",
                                  job_ckpt_keys_check); NULL: none */
    int restart_no;            /* > 0: this start of a launched job is that restart
                                  (runtime/exec/restart.h); rank 0 records it */
    transport_security_t security; /* the keys of the job's sockets (CURVE), or insecure */
} worker_config_t;

/* Defaults: the job of experiment_defaults() (no model yet), init auto, evaluation on, one
 * BLAS thread, 60 s timeout, no output files. */
void worker_config_init(worker_config_t *c);

/* Iterations the job runs on `world` ranks with `steps` steps per epoch: `iterations`, or
 * epochs x steps when the job counts epochs. */
int64_t worker_iterations(const experiment_t *job, int64_t steps);

/* One rank: opaque; runtime/exec/worker_state.h is its inside, shared by the set-up
 * (runtime/exec/worker.c), the executor (runtime/exec/worker_exec.c) and the helpers below
 * them (runtime/exec/worker_*.c). */
typedef struct worker worker_t;

/* Set up this process's rank of the job described by the environment (launch_env_detect)
 * up to the start barrier: the data, the net, the plan (from the job and the link probe),
 * the buffers, the colocated shard, every socket, and the rendezvous with the other ranks.
 * Returns it, or NULL with *rc = 2 for bad input (the job, its files, the launcher's
 * environment, a checkpoint to resume that is not of this job) or 1 for a set-up failure,
 * and the reason in err (one line; empty where there is nothing to add: the coordinator
 * reported it, or another rank does). A failure after the coordinator is up ends the whole
 * job through it instead (coord_client_fail). */
worker_t *worker_new(const worker_config_t *cfg, int *rc, char *err, size_t errlen);

/* After the executor ran (worker_exec_run): rank 0's outputs, the parameters, the trace,
 * the final barrier (shards serve until every rank is done), the merged trace. */
void worker_finish(worker_t *w);

/* Frees everything the rank holds (any stage of worker_new); accepts NULL, NULLs *wp. */
void worker_destroy(worker_t **wp);

/* worker_new (its reason printed as "poseidon train: ..."), the plan's execution,
 * worker_finish, worker_destroy. Returns 0 on success, 1 on a setup failure, 2 for bad
 * input; a failure of a peer exits with COORD_EXIT_ABORT. */
int worker_run(const worker_config_t *cfg);

/* A local job: forks n ranks (launch_local) that run worker_run(cfg), and again, from the
 * newest complete checkpoint, after a failure, up to the job's max_restarts times
 * (runtime/exec/restart.h). Unless cfg asks for --insecure or gives a keys directory, the
 * job's keys are made here, in memory, and the ranks inherit them. The exit status of the
 * last launch_local, or 1 if no keys could be made. */
int worker_run_local(worker_config_t *cfg, int n);

/* The training samples rank uses at iteration t: order[0..batch) of a set of n samples split
 * into world contiguous partitions, epoch t / steps with steps = (n / world) / batch,
 * reshuffled per epoch from (seed, epoch, rank) when shuffle is set. Returns steps. Exposed
 * so that a test can build the single-worker batch equal to the union of the workers'. */
int worker_batch_order(int n, int rank, int world, int batch, int64_t t, uint64_t seed,
                       bool shuffle, int *order);

#endif
