/* profile: per-layer forward and backward time of a network on this machine's device, the
 * costs the simulator reads (models/profiles/<model>-<device>-b<batch>.csv).
 *
 * Each layer's FWD and BWD is timed on its own (the same entry points a plan executor runs),
 * on synthetic data, after warm-up passes; the result is the median over repeats. Times come
 * from the backend's events (compute.h): CUDA events on the GPU's stream, so a GPU's layer is
 * timed by the GPU and the host never waits inside a pass; the clock on the CPU. For conv
 * and fc layers the bare GEMMs of the same shapes (and the same activation footprint) are
 * timed in the same repeat, right after the layers, so that the cost of everything around the
 * GEMM (im2col, bias, col2im) is visible even on a machine whose load changes over time.
 */
#ifndef POSEIDON_PROFILE_H
#define POSEIDON_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/model.h"
#include "runtime/compute/compute.h"

typedef struct {
    int64_t fwd_ns, bwd_ns;            /* median over repeats, whole batch */
    int64_t gemm_fwd_ns, gemm_bwd_ns;  /* conv/fc: bare sgemm of the same shapes; else 0 */
} profile_row_t;

/* Times every layer of m at this batch size; rows has m->n_layers entries (the input layer's
 * are 0). Returns 0, or -1 with err when the net cannot be built. */
int profile_run(const model_t *m, int batch, int warmup, int repeats, compute_t *c,
                uint64_t seed, profile_row_t *rows, char *err, size_t errlen);

/* CSV: header "layer,batch,fwd_ns,bwd_ns", one row per layer but the input, as the one
 * reader (core/unit_times.c) reads it; measured at a half precision (prec), a first line
 * "# precision = bf16" (or fp16) says so. With detail, five more columns follow:
 * type,params,fwd_flops,gemm_fwd_ns,gemm_bwd_ns (FLOPs for the whole batch), for people and
 * benchmarks; the reader skips them. */
void profile_write_csv(FILE *f, const model_t *m, int batch, const profile_row_t *rows,
                       precision_t prec, bool detail);

#endif
