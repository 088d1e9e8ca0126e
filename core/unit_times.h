/* unit_times: how long each plan unit's FWD and BWD take on one node, for the node's batch —
 * from a measured profile CSV (the one reader of the format `poseidon profile` writes:
 * layer,batch,fwd_ns,bwd_ns) or from a device model (FLOPs over peak x efficiency of the
 * layer's type, or the bytes the layer touches over memory bandwidth for layers without
 * GEMMs, whichever is longer, plus a launch overhead per layer and pass). The simulator and
 * the runtime's emulated compute both take their times from here.
 *
 * Profile CSV: '#' comments and blank lines anywhere, an optional header `layer,...` before
 * the first row, then one
 * row per layer but the input: layer,batch,fwd_ns,bwd_ns, and any further columns after a
 * comma (poseidon profile --detail) unread. Every layer must have exactly one row; a row
 * measured at another batch is scaled linearly (a first-order model); a time must lie in
 * [0, 1e15] ns, so that a whole run of them sums within int64 nanoseconds.
 *
 * Precision. The device model computes at the plan's arithmetic precision: its peak
 * (device_peak_flops: bf16 and fp16 on tensor cores where the device has them) and
 * activations of that precision's size. A profile says what it measured in a comment line
 * `# precision = fp32 | bf16 | fp16` before its first row (none: fp32, as `poseidon profile`
 * measures); a profile of the plan's precision is used as it is, one of another precision is
 * scaled by the device's peak ratio (an fp32 profile of an h100 job at bf16: x 67 / 989.4).
 *
 * These are the times at speed 1: an executor divides them by the node's speed
 * (cluster_node_speed); the simulator also multiplies by its noise.
 */
#ifndef POSEIDON_UNIT_TIMES_H
#define POSEIDON_UNIT_TIMES_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "model.h"
#include "plan.h"

#define UNIT_TIMES_MAX_NS 1000000000000000LL /* 1e15 ns: 11.6 days per layer and pass */

typedef struct {
    int n_units;
    int64_t *fwd_ns;        /* per unit, owned */
    int64_t *bwd_ns;
    double update_flops;    /* FLOP/s of UPDATE ops (SFB reconstruction GEMMs) */
} unit_times_t;

/* Time of one layer for `batch` samples on device d (bwd: 0 forward, 1 backward), in fp32;
 * unit_times_layer_ns_at: at arithmetic precision prec. */
int64_t unit_times_layer_ns(const device_t *d, const layer_t *l, int batch, int bwd);
int64_t unit_times_layer_ns_at(const device_t *d, const layer_t *l, int batch, int bwd,
                               precision_t prec);

/* Per-unit times from the device model of the plan's cluster. */
void unit_times_device(unit_times_t *t, const plan_t *p);

/* Per-unit times from a profile CSV, at the plan's per-device batch. Returns
 * 0, or -1 with "file:line: expected ..." in err. */
int unit_times_profile(unit_times_t *t, const plan_t *p, const char *path, char *err,
                       size_t errlen);

/* ns at a node of speed factor `speed` (0.5: half as fast), rounded to the nanosecond. */
int64_t unit_times_at_speed(int64_t ns, double speed);

void unit_times_fini(unit_times_t *t);

#endif
