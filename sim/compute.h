/* compute: how long each unit's FWD and BWD take on one node, for the node's batch — from a
 * measured profile CSV (the format `poseidon profile` writes: layer,batch,fwd_ns,bwd_ns) or
 * from a device model (FLOPs over peak x efficiency of the layer's type, or the bytes the layer
 * touches over memory bandwidth for layers without GEMMs, whichever is longer, plus a launch
 * overhead per layer and pass).
 *
 * These are the times at speed 1; the simulator divides by node speed and multiplies by noise.
 */
#ifndef POSEIDON_SIM_COMPUTE_H
#define POSEIDON_SIM_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "model.h"
#include "plan.h"

typedef struct {
    int n_units;
    int64_t *fwd_ns;        /* per unit, owned */
    int64_t *bwd_ns;
    double update_flops;    /* FLOP/s of UPDATE ops (SFB reconstruction GEMMs) */
} sim_times_t;

/* Time of one layer for `batch` samples on device d (bwd: 0 forward, 1 backward). */
int64_t compute_layer_ns(const device_t *d, const layer_t *l, int batch, int bwd);

/* Per-unit times from the device model of the plan's cluster. */
void sim_times_device(sim_times_t *t, const plan_t *p);

/* Per-unit times from a profile CSV (header line, then layer,batch,fwd_ns,bwd_ns). Every layer
 * of the model must appear; a profile measured at another batch is scaled linearly. Returns 0,
 * or -1 with "file:line: expected ..." in err. */
int sim_times_profile(sim_times_t *t, const plan_t *p, const char *path, char *err,
                      size_t errlen);

void sim_times_fini(sim_times_t *t);

#endif
