/* simrun: one simulated configuration from an experiment — build the plan (core/), get the
 * per-unit compute times (profile or device model), run the simulator, return the result.
 * Shared by `poseidon sim`, the tests and the benchmark so that all three run the same path.
 */
#ifndef POSEIDON_SIMRUN_H
#define POSEIDON_SIMRUN_H

#include <stddef.h>

#include "experiment.h"
#include "model.h"
#include "sim.h"
#include "trace.h"

typedef struct {
    scheme_t scheme;           /* the configuration's */
    sim_result_t r;
    int64_t predicted_sync_ns; /* the cost model's sum over layers (plan_predicted_sync_ns) */
    int n_ps, n_sfb, n_ar;     /* units per method chosen */
    double wall_s;             /* host time of the simulation */
} simrun_out_t;

/* Simulate configuration `config` of the experiment (core/job.h makes its cluster and plan
 * options; *c receives the cluster). Returns 0, or -1 with a message in err (bad profile). */
int simrun_config(const experiment_t *e, const model_t *m, int config, cluster_t *c,
                  trace_t *trace, simrun_out_t *out, char *err, size_t errlen);

/* CSV header and row of `poseidon sim --csv` (speedup given by the caller). */
void simrun_csv_header(FILE *f);
void simrun_csv_row(FILE *f, const experiment_t *e, const model_t *m, const cluster_t *c,
                    scheme_t s, const simrun_out_t *o, double speedup);

#endif
