/* experiment: a job and the sweeps around it — what `poseidon plan`, `poseidon sim` and
 * `poseidon train` all run. A job is a model, a cluster, a synchronisation scheme,
 * consistency, per-node batch, iterations, KV blocks and their placement, all-reduce buckets,
 * the arithmetic and wire precisions (core/precision.h) and a seed; training adds its data,
 * compute (real or emulated), solver and link probe keys, which the simulator reads and
 * ignores. The sweeps (nodes, bandwidths, schemes) make the
 * configurations a report iterates over; a real run executes exactly one of them.
 *
 * An experiment file is `key = value` lines with '#' comments (keys in experiment_keys_help());
 * relative paths are resolved against the experiment file's folder. `cluster = FILE` loads a
 * cluster file (`cluster = defaults`: cluster_init's values) and later `cluster.KEY = VALUE`
 * lines change one of its keys, so a file can hold a whole cluster (experiment_write() writes
 * one so). The same keys come from the command line (`--set KEY=VALUE`, and the shorthand
 * flags of `poseidon train`), in the same units. Errors are "file:line: expected ...".
 *
 * core/job.h turns one configuration, plus what a real run measured, into the cluster and
 * plan options that both executors build their plan from.
 *
 * Invariants after experiment_load(): batch >= 1, iterations >= 1, staleness >= 0, the
 * cluster is loaded, every sweep list has at least one entry (the base value when the file
 * gives none).
 */
#ifndef POSEIDON_EXPERIMENT_H
#define POSEIDON_EXPERIMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "cost.h"
#include "hybrid.h"
#include "plan.h"
#include "precision.h"
#include "scheme.h"

#define EXPERIMENT_MAX_SWEEP 64

/* A KV block larger than any tensor: every tensor is one block, so the tensors are dealt out
 * whole, round-robin, over the shards (`kv_block_mb = tensor`): TensorFlow's default
 * variable placement over PS tasks (replica_device_setter). */
#define KV_BLOCK_WHOLE_TENSOR ((int64_t)1 << 50)

/* How the simulator's network shares bandwidth (sim/net.h): exact per-flow max-min, or with
 * broadcasts and gathers kept whole (the grouped model, an option); auto, the default, is
 * exact at every size. */
typedef enum { NET_MODEL_AUTO, NET_MODEL_EXACT, NET_MODEL_WHOLE } net_model_t;
const char *net_model_name(net_model_t m);
/* The model that runs on a cluster of `nodes` (auto resolved). */
net_model_t net_model_for(net_model_t m, int nodes);

/* How a real run computes forward and backward: for real, or by sleeping the profiled
 * per-layer times (`profile`) while all communication stays real. */
typedef enum { COMPUTE_MODE_REAL, COMPUTE_MODE_EMULATE } compute_mode_t;

/* The keys only a real run reads (poseidon train); the simulator ignores them. */
/* The link probe: auto measures only when the ranks span hosts (master not on loopback): on
 * one host the "link" is the host's memory and CPU, whose speed under load moved the probe
 * 3x between runs and a hybrid plan with it, and says nothing of a cluster. */
typedef enum { PROBE_AUTO, PROBE_YES, PROBE_NO } probe_mode_t;

/* The learning-rate policy (runtime/compute/solver.h): fixed; step, lr x gamma^floor(t /
 * step); poly, lr x (1 - t / T)^power, reaching 0 at the last iteration T. */
typedef enum { EXP_LR_FIXED, EXP_LR_STEP, EXP_LR_POLY } exp_lr_policy_t;
/* The weights' initialisation: auto (He before a ReLU, else Xavier), Xavier or He. */
typedef enum { EXP_INIT_AUTO, EXP_INIT_XAVIER, EXP_INIT_HE } exp_init_t;

typedef struct {
    int epochs;                /* > 0: epochs over the training data instead of `iterations` */
    char data[32];             /* "fashion-mnist", "fortunes" or "synthetic" */
    char data_dir[512];        /* IDX files; empty: the Debian package's folder */
    int synthetic_n;           /* synthetic training samples, all ranks together */
    int limit;                 /* > 0: only the first `limit` training samples */
    bool shuffle;              /* reshuffle each rank's partition every epoch */
    compute_mode_t compute;
    double lr, momentum, weight_decay; /* SGD; weight decay on weights, not biases */
    exp_lr_policy_t lr_policy;
    double lr_gamma;           /* step: the rate's factor every lr_step iterations */
    int64_t lr_step;           /* step: iterations per decay; 0: two epochs */
    double lr_power;           /* poly: the exponent */
    exp_init_t init;
    int sample;                /* after training, characters the model writes (a text
                                  model on one worker); 0: none */
    probe_mode_t probe;        /* measure the links at start-up; the plan uses the result */
    int64_t probe_bytes;       /* bulk bytes of the probe */
    int time_dilation;         /* K >= 1: the run stands for a cluster K times faster (links
                                  at rate / K, emulated compute K times longer); every time
                                  it measures and reports is divided by K (runtime/transport/
                                  clock.h); the simulator ignores it */
    int tensor_scale;          /* S >= 1, emulated compute only: every exchanged tensor S
                                  times smaller on links S times slower (runtime/exec/
                                  worker_scale.c); the simulator ignores it */
    int keep_checkpoints;      /* a job's newest checkpoints kept (>= 1) */
    int max_restarts;          /* a failed job restarts from its newest complete checkpoint
                                  at most this many times (runtime/exec/restart.h) */
    /* precision = fp16's dynamic loss scaling (torch.amp's GradScaler): the first scale, a
     * power of two (exact: scaling changes no bit of a gradient that neither overflows nor
     * underflows), and the good steps in a row after which it doubles */
    double loss_scale_init;
    int64_t loss_scale_growth_interval;
    /* tests of the loss scaling: an inf in rank overflow_rank's gradient at iteration
     * overflow_iter (-1: never) */
    int overflow_rank;
    int64_t overflow_iter;
} experiment_train_t;

typedef struct {
    char path[512];
    char name[128];            /* file name without folder and ".exp" */
    char model_path[512];
    char cluster_path[512];
    char profile_path[512];    /* measured per-layer CSV; empty: the device model */
    cluster_t cluster;
    scheme_t scheme;
    int staleness;             /* SSP s; 0 is BSP */
    int batch;                 /* images per worker per iteration */
    int iterations;            /* simulated iterations */
    int warmup;                /* the first iterations, left out of the measured time; 1 <=
                                  warmup < iterations (unless iterations == 1) */
    uint64_t seed;
    int64_t kv_block_bytes;    /* KV-store block; 0 splits each tensor evenly over shards;
                                  KV_BLOCK_WHOLE_TENSOR puts each tensor whole on one shard */
    int64_t allreduce_bucket_bytes; /* all-reduce fusion bucket (core/plan.h); 0: none */
    kv_place_t kv_placement;   /* KV block to shard policy (core/cost.h) */
    hybrid_rule_t hybrid_rule; /* how hybrid and hybrid3 choose (core/hybrid.h) */
    net_model_t net_model;
    precision_t precision;      /* arithmetic: fp32, or bf16 / fp16 with fp32 master weights */
    precision_t wire_precision; /* what every exchange sends (core/precision.h) */
    send_order_t send_order;    /* how transfers sharing a link are ordered (core/plan.h) */
    int64_t slice_bytes;        /* send_order layer: the slice (core/plan.h) */
    char precision_at[600];     /* "file:line" (or "--set") of the later of the two keys; ""
                                   when neither was given: where a refused pair is named */
    experiment_train_t train;
    bool cluster_given;        /* a `cluster =` line (or --set cluster=) was read */

    int n_nodes;
    int nodes[EXPERIMENT_MAX_SWEEP];
    int n_gbps;
    double gbps[EXPERIMENT_MAX_SWEEP];
    int n_schemes;
    scheme_t schemes[EXPERIMENT_MAX_SWEEP];
} experiment_t;

/* Defaults: scheme hybrid, BSP, batch 32, 5 iterations (1 of them warm-up), seed 1, 4 MB KV blocks
 * (Poseidon-TF's default, POSEIDON.md §4), no all-reduce fusion, network model auto, fp32
 * arithmetic and wire;
 * training: Fashion-MNIST, shuffled, real compute, SGD lr 0.01, momentum 0.9, weight decay
 * 5e-4, a fixed rate (step: gamma 0.1 every two epochs; poly: power 1), auto initialisation,
 * no sample, the link probe on with 4 MB, two checkpoints kept, no restarts. No model and no
 * cluster yet. */
void experiment_init(experiment_t *e);

/* An experiment without a file: experiment_init() on the default cluster (cluster_init), its
 * sweeps set to that cluster's values; a model must come from an override. */
void experiment_defaults(experiment_t *e);

/* Parse an experiment file and the cluster file it names. Returns 0, or -1 with
 * "file:line: expected ..." in err. */
int experiment_load(experiment_t *e, const char *path, char *err, size_t errlen);
int experiment_parse(experiment_t *e, const char *path, const char *text, char *err,
                     size_t errlen);

/* Apply one key = value, as on a file line (used by --set on the command line too). */
int experiment_set(experiment_t *e, const char *key, const char *val, const char *where,
                   char *err, size_t errlen);

/* A command-line override "key=value" (an experiment key) or "cluster.key=value" (a cluster
 * key, applied to the loaded cluster). Returns 0, or -1 with "--set: expected ..." in err
 * (experiment_override_as: "WHERE: expected ...", for a flag that stands for the key). */
int experiment_override(experiment_t *e, const char *kv, char *err, size_t errlen);
int experiment_override_as(experiment_t *e, const char *kv, const char *where, char *err,
                           size_t errlen);
/* After the overrides: the keys that constrain each other (warmup < iterations, the pair of
 * precisions), which one override alone cannot judge, and a model. Returns 0, or -1 with
 * "--set: expected ..." (the pair of precisions: where the later of the two was given) in
 * err. */
int experiment_check_overrides(const experiment_t *e, char *err, size_t errlen);

/* Write configuration `config` of e as a complete experiment file of its own: absolute
 * paths, every job and training key, and the cluster c inline (`cluster = defaults`, then
 * every `cluster.KEY` line; c is the cluster the run executed, core/job.h), with single-value
 * sweeps. Loading it back gives the same job: the same cluster, plan options and iterations.
 * `comment` (may be NULL) opens the file as '#' lines. Returns 0, or -1 with errno set. */
int experiment_write(const experiment_t *e, int config, const cluster_t *c, const char *comment,
                     FILE *f);

/* The sweep's configurations: count = nodes x gbps x schemes, ordered scheme-major, then
 * gbps, then nodes. experiment_config() fills the cluster and scheme of configuration i. */
int experiment_config_count(const experiment_t *e);
void experiment_config(const experiment_t *e, int i, cluster_t *c, scheme_t *s);

/* The one-node baseline of a sweep's speedups: e with one node, the first bandwidth and
 * scheme, and no per-node speed factors (no communication, so one run serves every
 * configuration). */
void experiment_baseline(const experiment_t *e, experiment_t *base);

const char *experiment_keys_help(void);

#endif
