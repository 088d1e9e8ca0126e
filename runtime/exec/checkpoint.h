/* checkpoint: training state in files that are whole or absent.
 *
 * A checkpoint file is a sequence of parts (a header first) closed by a checksum (FNV-1a 64
 * over every byte before it). Writes are atomic: the file is written beside the target as
 * PATH.tmp, fsync'ed, renamed over PATH and the directory fsync'ed, so a crash leaves the old
 * file or the new one, never a torn one. A reader rejects a file that is shorter than its
 * parts, longer (any trailing byte), or whose checksum differs.
 *
 * On top of it, one replica's state (the single-worker `poseidon train`): parameters,
 * momentum history, layer state (BN running statistics), the dropout layers' random state,
 * epoch, iteration, seed and the job's keys, tagged with the model's name and sizes. The distributed job's
 * checkpoints are in runtime/exec/job_checkpoint.h.
 */
#ifndef POSEIDON_CHECKPOINT_H
#define POSEIDON_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/model.h"
#include "runtime/compute/arena.h"

typedef struct {
    const void *data;
    size_t bytes;
} ckpt_part_t;

/* Writes the parts and their checksum to path atomically (parent directories made). 0, or
 * -1 with "PATH: reason" in err; no PATH.tmp is left behind either way. */
int ckpt_write(const char *path, const ckpt_part_t *parts, int n, char *err, size_t errlen);

/* Removes PATH.tmp left by a write that never finished (the process was killed mid-write),
 * logging it. */
void ckpt_remove_stale(const char *path);

/* The first bytes of every checkpoint file's header: what kind of file it is and the
 * version of its layout. */
typedef struct {
    char magic[8];
    uint32_t version, reserved;
} ckpt_tag_t;

typedef struct ckpt_reader ckpt_reader_t;
/* NULL with "PATH: reason" in err. */
ckpt_reader_t *ckpt_open(const char *path, char *err, size_t errlen);
/* The next bytes of the file; -1 when it ends before them (ckpt_close then says so). */
int ckpt_read(ckpt_reader_t *r, void *out, size_t bytes);
/* Checks the checksum and that nothing follows it, and closes. 0, or -1 with "PATH: reason"
 * in err (truncated, trailing bytes, checksum mismatch). */
int ckpt_close(ckpt_reader_t **rp, char *err, size_t errlen);

/* Opens path and reads its header (bytes of hdr, which starts with a ckpt_tag_t): the
 * reader, or NULL with "PATH: reason" in err when the file cannot be opened, is not a
 * poseidon `kind` (its magic) or is of another version than this build's. */
ckpt_reader_t *ckpt_open_tagged(const char *path, void *hdr, size_t bytes, const char *magic,
                                uint32_t version, const char *kind, char *err, size_t errlen);

/* Closes a reader whose file was refused (the caller says why), checking nothing. */
void ckpt_discard(ckpt_reader_t **rp);

typedef struct {
    int64_t epoch;   /* epochs completed */
    int64_t iter;    /* iterations completed */
    uint64_t seed;
    char *keys;      /* the job's keys (job_ckpt_job_keys), so that a resume can tell which
                        changed: written when not NULL; checkpoint_load malloc's it (NULL
                        when the file has none) */
} checkpoint_meta_t;

/* A replica: rng (rng_bytes, possibly 0) is the net's dropout state (nnet_rng_state_save);
 * history (the solver's) and the arena are the arena's backend memory, a GPU's included
 * (copied to the host to be written, and back once a file has been read whole). 0, or -1
 * with "PATH: reason" in err. */
int checkpoint_save(const char *path, const model_t *m, const arena_t *a, const float *history,
                    const void *rng, size_t rng_bytes, const checkpoint_meta_t *meta, char *err,
                    size_t errlen);

/* Loads into a, history (arena->count floats) and rng (rng_bytes); the file must be for a
 * model of the same name and sizes. 0, or -1 with "PATH: reason" in err (then a, history and
 * rng may hold part of the file). */
int checkpoint_load(const char *path, const model_t *m, arena_t *a, float *history, void *rng,
                    size_t rng_bytes, checkpoint_meta_t *meta, char *err, size_t errlen);

#endif
