/* job: the one place where a configuration of an experiment becomes what an executor runs —
 * the cluster and the plan options — for the simulator (sim/simrun, `poseidon plan`) and the
 * runtime (runtime/exec/worker) alike. A real run adds what it measured at start-up (the link
 * probe), and writes the experiment it executed (experiment_write with the cluster returned
 * here), so `poseidon sim` on that file builds the same plan and predicts that run.
 *
 * The rules, all here: the sweep's nodes, bandwidth and scheme (experiment_config: shards
 * capped at the nodes, speed lines of nodes beyond the size dropped); a measured link
 * replaces the NIC's bandwidth (efficiency 1: the probe measured goodput) and latency; the
 * plan options are the experiment's scheme, consistency, batch, KV blocks and placement,
 * all-reduce buckets, the arithmetic and wire precisions, and the send order and slice.
 */
#ifndef POSEIDON_JOB_H
#define POSEIDON_JOB_H

#include <stdint.h>

#include "cluster.h"
#include "experiment.h"
#include "plan.h"

/* A local reduce or broadcast between two CPU devices of one node, in the host's memory:
 * ~7 GB/s for large layers and ~60 us per op, measured from the LREDUCE rows of a GoogLeNet
 * run of 2 nodes x 2 devices on the 2-core development machine (docs/validation.md, "Nodes
 * of two devices"); a job can name its own (cluster.intra_gbps, intra_latency_us). */
#define JOB_HOST_MEMORY_GBPS 56.0
#define JOB_HOST_MEMORY_LAT_US 60.0

/* What a real run measured between two of its nodes (runtime/transport/probe). */
typedef struct {
    double bw_Bps;  /* goodput per direction, bytes/s; 0: nothing measured */
    int64_t lat_ns; /* one-way latency */
} job_link_t;

/* The link a plan is built on, from a measured one: a probe is noisy (on loopback it moved
 * 4x between runs, and a hybrid plan with it), and the plan must not follow the noise. Each
 * figure is held against the cluster's description: within a factor of 4 of the described
 * goodput (nic_gbps x nic_efficiency) or latency, the description stands; beyond, the
 * measurement rounded to the nearest power of 2 (bandwidth in Gbit/s, latency in
 * microseconds), in log scale. A latency of 0 stays 0. */
job_link_t job_link_settle(const cluster_t *described, job_link_t measured);

/* Configuration `config` of e (0 <= config < experiment_config_count(e)), on the measured
 * link when link is non-NULL with bw_Bps > 0 (settled by job_link_settle): fills the cluster
 * and the plan options. */
void job_config(const experiment_t *e, int config, const job_link_t *link, cluster_t *c,
                plan_opts_t *po);

/* A CPU node's devices are threads that share the host's memory: their "interconnect" is a
 * copy within that memory, JOB_HOST_MEMORY_GBPS per direction and JOB_HOST_MEMORY_LAT_US per
 * transfer. Sets c's intra link (intra_Bps, intra_lat_ns; no preset name, so a written job
 * carries intra_gbps and intra_latency_us and the simulator plans on the same link) when c
 * has none; a given interconnect stands. */
void job_host_memory_link(cluster_t *c);

#endif
