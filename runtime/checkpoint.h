/* checkpoint: a replica's training state in one file: parameters, momentum history, layer
 * state (BN running statistics), epoch, iteration and seed, tagged with the model's name and
 * sizes and closed by a checksum.
 *
 * Writes are atomic: the file is written beside the target as PATH.tmp, fsync'ed, renamed
 * over PATH and the directory fsync'ed, so a crash leaves the old checkpoint or the new one,
 * never a torn one.
 */
#ifndef POSEIDON_CHECKPOINT_H
#define POSEIDON_CHECKPOINT_H

#include <stdint.h>

#include "core/model.h"
#include "runtime/arena.h"

typedef struct {
    int64_t epoch;   /* epochs completed */
    int64_t iter;    /* iterations completed */
    uint64_t seed;
} checkpoint_meta_t;

/* 0, or -1 with "PATH: reason" in err. */
int checkpoint_save(const char *path, const model_t *m, const arena_t *a, const float *history,
                    const checkpoint_meta_t *meta, char *err, size_t errlen);

/* Loads into a and history (arena->count floats); the file must be for a model of the same
 * name and sizes. 0, or -1 with "PATH: reason" in err (a and history are then unchanged
 * only if the header was rejected). */
int checkpoint_load(const char *path, const model_t *m, arena_t *a, float *history,
                    checkpoint_meta_t *meta, char *err, size_t errlen);

#endif
