/* cluster: the machines a plan runs on — node count, devices per node, NIC bandwidth (full
 * duplex, per direction; per node where lines give one) and latency, an optional switch core
 * limit, racks (nodes per rack and the rack uplink, given or as an oversubscription ratio),
 * parameter-server placement, the compute device, and per-node speed factors for
 * stragglers.
 *
 * A cluster file is text, one `key = value` per line, '#' starts a comment (keys listed in
 * cluster_keys_help()). Errors are "file:line: expected ...", never ignored.
 *
 * Invariants after cluster_load()/cluster_parse(): nodes >= 1, nic_Bps > 0, lat_ns >= 0,
 * 0 <= ps_shards <= nodes (0 means one shard per node, colocated: Poseidon's default),
 * speed[] has `nodes` entries (owned) or is NULL (all 1.0); devices_per_node > 1 has an
 * interconnect (intra_Bps > 0); nodes_per_rack is 0, or divides nodes, or is >= nodes (one
 * rack: one switch); at most one of rack_uplink_Bps and oversubscription is given.

 */
#ifndef POSEIDON_CLUSTER_H
#define POSEIDON_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvfile.h"
#include "precision.h"

#define CLUSTER_NAME_MAX 64
#define CLUSTER_MAX_SPEED 256 /* explicit `speed = NODE:FACTOR` lines */
#define CLUSTER_MAX_NIC 256   /* explicit `nic_gbps_node = NODES:GBPS` lines */

/* A compute device model: time of a layer = max(FLOPs / (peak * efficiency of its type),
 * bytes touched / memory bandwidth) + a fixed launch overhead. The peak is the one of the
 * job's arithmetic precision (device_peak_flops). */
typedef struct {
    char name[CLUSTER_NAME_MAX];
    double peak_flops;     /* FLOP/s, fp32 */
    double mem_Bps;        /* device memory bandwidth, bytes/s */
    double eff_conv;       /* fraction of peak reached by convolutions */
    double eff_fc;         /* fraction of peak reached by GEMMs of FC layers */
    int64_t launch_ns;     /* per layer and pass: kernel launch and framework overhead */
    double peak_bf16_flops; /* FLOP/s of bf16 products (fp32 accumulation), dense; 0: the
                               fp32 peak (no faster bf16 arithmetic) */
    double peak_fp16_flops; /* the same for fp16 */
} device_t;

typedef struct {
    char path[512];
    int nodes;                 /* machines; every node runs a worker */
    int devices_per_node;      /* D: devices of a node, each computing `batch` samples; the
                                  node reduces their gradients over its interconnect, syncs
                                  once on the network and broadcasts the result (plan.h) */
    double nic_Bps;            /* line rate of each NIC per direction, bytes/s */
    double nic_efficiency;     /* usable fraction of the line rate (TCP/IP and framing) */
    int64_t lat_ns;            /* one-way per-message latency */
    double core_Bps;           /* aggregate switch core capacity; 0 = non-blocking */
    double intra_Bps;          /* a node's interconnect between its devices (PCIe, NVLink),
                                  bytes/s per direction; 0 = none given (D = 1 needs none) */
    int64_t intra_lat_ns;      /* its per-transfer latency */
    bool host_staging;         /* gradients and synced values go through host memory over
                                  the interconnect (a GPU node's PCIe): a copy out after each
                                  backward, one back before the next forward (plan.h) */
    char interconnect[CLUSTER_NAME_MAX]; /* the preset it came from, or "" */
    int ps_shards;             /* P2; shards live on nodes 0..P2-1; 0 = one per node */
    double server_Bps;         /* bytes/s a PS shard applies; 0 = instantaneous */
    device_t device;
    double straggler_sigma;    /* lognormal sigma of a per-node speed drawn at start */
    double jitter_sigma;       /* lognormal sigma of per-op compute noise */
    int nodes_per_rack;        /* consecutive nodes sharing a rack switch; 0 = one switch */
    int rack_line;             /* the line that set nodes_per_rack (for messages), 0 = none */
    double rack_uplink_Bps;    /* line rate of a rack's uplink per direction, bytes/s; 0 =
                                  from oversubscription */
    double oversubscription;   /* a rack's NIC line rates over its uplink's; 0 = not given
                                  (1 when rack_uplink_Bps is not given either) */
    int n_nic;                 /* per-node NIC lines: nodes nic_first..nic_last at nic_line_Bps */
    int nic_first[CLUSTER_MAX_NIC], nic_last[CLUSTER_MAX_NIC];
    double nic_line_Bps[CLUSTER_MAX_NIC]; /* line rate per direction, bytes/s */
    int n_speed;               /* explicit speed lines */
    int speed_node[CLUSTER_MAX_SPEED];
    double speed_factor[CLUSTER_MAX_SPEED]; /* 0.5 = node computes at half speed */
} cluster_t;

/* Defaults: 1 node, 1 device, 40 GbE, 20 us, colocated shards, titanx-maxwell. */
void cluster_init(cluster_t *c);

/* Parse a cluster file. Returns 0, or -1 with "file:line: expected ..." in err. */
int cluster_load(cluster_t *c, const char *path, char *err, size_t errlen);
int cluster_parse(cluster_t *c, const char *path, const char *text, char *err, size_t errlen);

/* Apply one key=value (the same keys as the file; `where` names it in messages). */
int cluster_set(cluster_t *c, const char *key, const char *val, const char *where, char *err,
                size_t errlen);

/* devices_per_node > 1 needs an interconnect. Returns 0, or -1 with "WHERE: expected ..." */
int cluster_check_devices(const cluster_t *c, const char *where, char *err, size_t errlen);

/* Usable NIC bandwidth per direction, bytes/s: nic_Bps x nic_efficiency. */
double cluster_nic_Bps(const cluster_t *c);

/* Usable NIC bandwidth of one node per direction: its nic_gbps_node line's rate (the last
 * that names it) or nic_Bps, times nic_efficiency. */
double cluster_node_nic_Bps(const cluster_t *c, int node);

/* Racks of the cluster: nodes / nodes_per_rack, or 1 (no nodes_per_rack, or nodes <= it). */
int cluster_racks(const cluster_t *c);

/* Usable bandwidth of a rack's uplink (and downlink) per direction, bytes/s: rack_uplink_Bps,
 * or nodes_per_rack x nic_Bps / oversubscription, times nic_efficiency; 0 with one rack. */
double cluster_rack_Bps(const cluster_t *c);

/* nodes_per_rack divides nodes (or nodes <= nodes_per_rack: one rack). Returns 0, or -1 with
 * "WHERE: expected ..." (WHERE: the nodes_per_rack line where known, else `where`). */
int cluster_check_racks(const cluster_t *c, int nodes, const char *where, char *err,
                        size_t errlen);

/* Number of PS shards actually used (ps_shards or nodes). */
int cluster_shards(const cluster_t *c);

/* The configured speed factor of a node (1.0 unless a `speed` line names it). */
double cluster_node_speed(const cluster_t *c, int node);

/* Fill the interconnect from a preset name (pcie3, pcie4, pcie5, nvlink4). Returns 0 or -1. */
int interconnect_preset(cluster_t *c, const char *name);

/* Fill a device model from a preset name (titanx-maxwell, k20, h100). Returns 0 or -1. */
int device_preset(device_t *d, const char *name);

/* The device's peak FLOP/s at an arithmetic precision (a half peak of 0 reads as fp32's). */
double device_peak_flops(const device_t *d, precision_t p);

/* Write c as `PREFIXkey = value` lines (every key, a device's fields after its preset name)
 * that cluster_set() reads back into exactly the same values. Returns 0, or -1 when a write
 * failed (errno set). */
int cluster_write(const cluster_t *c, FILE *f, const char *prefix);

/* One line per key, for --help texts. */
const char *cluster_keys_help(void);

#endif
