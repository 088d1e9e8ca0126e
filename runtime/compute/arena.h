/* arena: a replica's parameters and gradients, each in one flat float array, with a table of
 * {name, offset, count} entries built from the model. A layer's parameters (weights, then
 * biases) are one contiguous range, so a PS shard or a per-layer sync is an offset range and
 * a checkpoint is one write.
 *
 * Also holds the layers' non-learned state (batchnorm running mean and variance), which is
 * saved with a checkpoint but never synchronised.
 *
 * Invariants: entries are in model order and tile [0, count) without gaps; layer_offset[l] /
 * layer_count[l] cover the entries of layer l (count 0 for a layer without parameters).
 */
#ifndef POSEIDON_ARENA_H
#define POSEIDON_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/model.h"
#include "runtime/compute/compute.h"

typedef struct {
    char name[MODEL_NAME_MAX + 8]; /* "<layer>.weight" or "<layer>.bias" */
    int layer;                     /* index in model_t.layers */
    int64_t offset, count;         /* in floats */
    bool is_bias;                  /* biases and BN shifts: no weight decay */
} arena_entry_t;

typedef struct {
    compute_t *compute;            /* not owned; params/grads/state are its buffers */
    float *params, *grads;         /* count floats each */
    int64_t count;
    float *state;                  /* state_count floats (BN running mean, then variance) */
    int64_t state_count;
    int n_entries;
    arena_entry_t *entries;
    int n_layers;
    int64_t *layer_offset, *layer_count;   /* per model layer, in floats */
    int64_t *state_offset, *state_len;     /* per model layer, into state */
} arena_t;

/* Lay out the parameters of every layer of m (m must have been through model_infer()).
 * Buffers are zero-filled, allocated on c. Never fails (dies on exhaustion). */
void arena_init(arena_t *a, const model_t *m, compute_t *c);
void arena_fini(arena_t *a);

/* Index of the entry with this name, or -1. */
int arena_find(const arena_t *a, const char *name);

#endif
