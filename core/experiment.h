/* experiment: what to run — a model, a cluster, a synchronisation scheme, consistency,
 * per-node batch, iterations, seed — and the sweeps a report iterates over (nodes list,
 * bandwidth list, schemes list).
 *
 * An experiment file is `key = value` lines with '#' comments (keys in experiment_keys_help());
 * relative paths are resolved against the experiment file's folder. Errors are
 * "file:line: expected ...".
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

#include "cluster.h"
#include "cost.h"

/* How parameters are synchronised. A scheme is a base plus whether sync overlaps backward
 * (wait-free backprop). */
typedef enum {
    SCHEME_PS,        /* sharded parameter server for every layer */
    SCHEME_SFB,       /* FC weights by sufficient-factor broadcast, the rest by PS */
    SCHEME_ALLREDUCE, /* ring all-reduce for every layer */
    SCHEME_HYBRID,    /* Poseidon HybComm: per layer the cheaper of PS and SFB */
    SCHEME_HYBRID3,   /* per layer the cheapest of PS, SFB and all-reduce */
    SCHEME_BASE_COUNT
} scheme_base_t;

typedef struct {
    scheme_base_t base;
    bool wfbp;
} scheme_t;

/* "ps", "ps+wfbp", "sfb+wfbp", "allreduce+wfbp", "hybrid", "hybrid3" (and "X+none",
 * "X+wfbp" for any base). Bare ps/sfb/allreduce do not overlap; hybrid/hybrid3 do.
 * Returns 0 or -1. */
int scheme_parse(const char *s, scheme_t *out);

/* The canonical name (the short form when the overlap is the base's default). */
const char *scheme_name(scheme_t s, char *buf, size_t len);

#define EXPERIMENT_MAX_SWEEP 64

/* A KV block larger than any tensor: every tensor is one block, so the tensors are dealt out
 * whole, round-robin, over the shards (`kv_block_mb = tensor`): TensorFlow's default
 * variable placement over PS tasks (replica_device_setter). */
#define KV_BLOCK_WHOLE_TENSOR ((int64_t)1 << 50)

/* How the simulator's network shares bandwidth (sim/net.h): exact per-flow max-min, or with
 * broadcasts and gathers kept whole (faster on thousands of nodes); auto picks exact up to
 * NET_MODEL_AUTO_EXACT_NODES nodes. */
typedef enum { NET_MODEL_AUTO, NET_MODEL_EXACT, NET_MODEL_WHOLE } net_model_t;
#define NET_MODEL_AUTO_EXACT_NODES 512
const char *net_model_name(net_model_t m);
/* The model that runs on a cluster of `nodes` (auto resolved). */
net_model_t net_model_for(net_model_t m, int nodes);

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
    net_model_t net_model;

    int n_nodes;
    int nodes[EXPERIMENT_MAX_SWEEP];
    int n_gbps;
    double gbps[EXPERIMENT_MAX_SWEEP];
    int n_schemes;
    scheme_t schemes[EXPERIMENT_MAX_SWEEP];
} experiment_t;

/* Defaults: scheme hybrid, BSP, batch 32, 5 iterations (1 of them warm-up), seed 1, 4 MB KV blocks
 * (Poseidon-TF's default, POSEIDON.md §4), no all-reduce fusion, network model auto. */
void experiment_init(experiment_t *e);

/* Parse an experiment file and the cluster file it names. Returns 0, or -1 with
 * "file:line: expected ..." in err. */
int experiment_load(experiment_t *e, const char *path, char *err, size_t errlen);
int experiment_parse(experiment_t *e, const char *path, const char *text, char *err,
                     size_t errlen);

/* Apply one key = value, as on a file line (used by --set on the command line too). */
int experiment_set(experiment_t *e, const char *key, const char *val, const char *where,
                   char *err, size_t errlen);

/* A command-line override "key=value" (an experiment key) or "cluster.key=value" (a cluster
 * key, applied to the loaded cluster). Returns 0, or -1 with "--set: expected ..." in err. */
int experiment_override(experiment_t *e, const char *kv, char *err, size_t errlen);
/* After the overrides: the keys that constrain each other (warmup < iterations), which one
 * override alone cannot judge. Returns 0, or -1 with "--set: expected ..." in err. */
int experiment_check_overrides(const experiment_t *e, char *err, size_t errlen);

/* The sweep's configurations: count = nodes x gbps x schemes, ordered scheme-major, then
 * gbps, then nodes. experiment_config() fills the cluster and scheme of configuration i. */
int experiment_config_count(const experiment_t *e);
void experiment_config(const experiment_t *e, int i, cluster_t *c, scheme_t *s);

const char *experiment_keys_help(void);

#endif
