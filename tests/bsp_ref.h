/* bsp_ref: what the distributed-training tests compare against — one worker trained on the
 * union of the N workers' batches — and the parameters each rank writes. Shared by
 * tests/test_worker.c and tests/test_bucket.c. */
#ifndef POSEIDON_TESTS_BSP_REF_H
#define POSEIDON_TESTS_BSP_REF_H

#include <stdint.h>

#include "runtime/exec/worker.h"

/* The job the equivalence tests run: models/mlp.net on n synthetic samples, batch 8, 5
 * steps, 64 KB KV blocks (several blocks per layer, on every shard), lr 0.05, no evaluation,
 * 20 s timeout, each rank's parameters to out.RANK. */
void bsp_mlp_config(worker_config_t *c, const char *scheme, int n, const char *out);

/* Run the job of c on `world` local ranks (its cluster's nodes set to world). Returns the
 * job's exit code (launch_local). */
int bsp_launch(worker_config_t *c, int world);

/* One worker on the union of the `world` workers' batches for `steps` steps (the same batch
 * order as the ranks): its parameters (malloc'ed), their count in *count. */
float *bsp_reference(const worker_config_t *c, int world, int64_t steps, int64_t *count);

/* The n parameters rank wrote to PREFIX.RANK, or NULL (missing or short file). */
float *bsp_read_params(const char *prefix, int rank, int64_t n);

/* Rank 0's n parameters (malloc'ed) from a run of `nodes` ranks of `devices` replicas each
 * (device 0 of rank r writes PREFIX.r, device d > 0 PREFIX.r.d), after checking that every
 * replica of every node is bit-identical to them; `what` names the run in messages. */
float *bsp_read_node_replicas(const char *prefix, int nodes, int devices, int64_t n,
                              const char *what);

/* Worst |a - b| / (2e-6 + 1e-4 |b|) over n values and where (NaN counts as worst); <= 1 is
 * the tolerance of the BSP equivalence tests. */
double bsp_worst_error(const float *a, const float *b, int64_t n, int64_t *at);

/* The checks every BSP equivalence test makes on a finished run that wrote its parameters to
 * PREFIX.RANK after `steps` steps: every rank is bit-identical to rank 0; rank 0 is within
 * the tolerance of bsp_reference(); the parameters moved from their initial values; and a
 * corrupted parameter is seen (the comparison can fail). `what` names the run in messages.
 * Returns the worst error, as a fraction of the tolerance. */
double bsp_check_run(const worker_config_t *c, const char *prefix, int world, int64_t steps,
                     const char *what);

#endif
