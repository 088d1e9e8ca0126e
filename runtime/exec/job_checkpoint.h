/* job_checkpoint: the files of a distributed job's coordinated checkpoints, and the directory
 * that holds them.
 *
 * A checkpoint of iteration K (every rank stopped before FWD of K, every op of iterations
 * < K complete, every PS shard at version K) is a directory DIR/iter-<K> with one file per
 * rank, rank-<R>.ckpt, and a COMPLETE file that rank 0 writes once every rank's file is
 * written: only a directory with COMPLETE is a checkpoint. Every file is written atomically
 * with a checksum (runtime/exec/checkpoint.h), so a job killed at any moment leaves whole
 * checkpoints and directories without COMPLETE, never a torn file that passes for one.
 *
 * A rank's file: a header (the model, sizes, world, devices per node, rank, the plan's hash,
 * K, seed, rank 0's report accumulators), then the node's parameters, the momentum of the
 * worker-side and shard-side updates, the shard's own block values (arena-sized: the shard's
 * blocks at their offsets, zeros elsewhere), then per device (0 first) its replica's layer
 * state and dropout RNG state. At K every device's replica holds the node's parameters (the
 * local broadcasts of K - 1 are done), and its data position is K: the parameters are saved
 * once. COMPLETE is text (K, world, devices per node, plan hash, model, seed, each rank
 * file's size and checksum, then "keys" and the job's keys, one "key = value" a line, so
 * that a resume can tell which of them changed) closed by the same checksum as every
 * checkpoint file.
 */
#ifndef POSEIDON_JOB_CHECKPOINT_H
#define POSEIDON_JOB_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/experiment.h"
#include "core/model.h"

/* What a rank's file says about itself; a loader compares it with the job it runs. */
typedef struct {
    char model[MODEL_NAME_MAX];
    int64_t n_params, state_count, rng_bytes;
    int world, rank;
    int devices;               /* per node: replicas whose state the file holds (>= 1) */
    uint64_t plan_hash, seed;
    int64_t iter;              /* K: iterations completed */
    /* rank 0's report accumulators since its last row */
    double loss_sum;
    int64_t loss_n, correct, report_iter0;
    /* precision = fp16: the loss scale the backward of iteration iter uses and the good steps
     * in a row before it (the same on every rank; unused at other precisions) */
    double loss_scale;
    int64_t loss_scale_good;
} job_ckpt_header_t;

/* The state of one rank: arrays of the header's sizes (n_params floats each, state_count
 * floats, rng_bytes bytes); owned by the caller. state and rng are device 0's; dev_state and
 * dev_rng hold devices 1 .. devices - 1's at [d - 1] (NULL with one device). */
typedef struct {
    float *params, *hist_local, *hist_server, *shard_values;
    float *state;
    void *rng;
    float **dev_state;
    void **dev_rng;
} job_ckpt_state_t;

/* One rank file as COMPLETE records it. */
typedef struct {
    int64_t bytes;
    uint64_t checksum;         /* the file's last 8 bytes */
} job_ckpt_file_t;

/* DIR/iter-K, DIR/iter-K/rank-R.ckpt and DIR/iter-K/COMPLETE into out. */
void job_ckpt_iter_dir(char *out, size_t n, const char *dir, int64_t iter);
void job_ckpt_rank_path(char *out, size_t n, const char *dir, int64_t iter, int rank);
void job_ckpt_complete_path(char *out, size_t n, const char *dir, int64_t iter);

/* Writes a rank's file atomically and returns what COMPLETE records of it in *file. 0, or
 * -1 with "PATH: reason" in err. */
int job_ckpt_write_rank(const char *path, const job_ckpt_header_t *h,
                        const job_ckpt_state_t *s, job_ckpt_file_t *file, char *err,
                        size_t errlen);

/* Loads a rank's file into s, after checking that it is the one COMPLETE names (*file: its
 * size and checksum) and that its header matches *want (model and sizes, world, rank, plan
 * hash, seed, iteration); *got receives the header (its report accumulators). 0, or -1 with
 * one line "PATH: reason" in err (a file of another job, truncated, appended to, corrupt). */
int job_ckpt_read_rank(const char *path, const job_ckpt_header_t *want,
                       const job_ckpt_file_t *file, job_ckpt_state_t *s,
                       job_ckpt_header_t *got, char *err, size_t errlen);

/* What COMPLETE holds. */
typedef struct {
    int64_t iter;
    int world;
    int devices;               /* per node */
    uint64_t plan_hash, seed;
    char model[MODEL_NAME_MAX];
    job_ckpt_file_t *files;    /* world of them; malloc'ed by job_ckpt_read_complete */
    char *keys;                /* the job's keys (job_ckpt_job_keys), malloc'ed; NULL in a
                                  checkpoint written before they were recorded */
} job_ckpt_complete_t;

/* Frees what parsing c malloc'ed (files, keys); accepts a zeroed c. */
void job_ckpt_complete_free(job_ckpt_complete_t *c);

/* The keys of job e that COMPLETE records ("key = value" lines as experiment_write writes
 * them, without the cluster's: the world, devices and plan are compared on their own). A
 * malloc'ed string. */
char *job_ckpt_job_keys(const experiment_t *e);

/* Whether a checkpoint with keys `was` (COMPLETE's; NULL: not recorded, nothing to compare)
 * may be resumed by a job with keys `now`: every key must be equal but those that do not
 * change what the resumed iterations compute (the iteration count, the simulator's and the
 * probe's keys, timing-only keys, the initialisation, restarts and kept checkpoints) and
 * those the plan's hash already judges (scheme, KV blocks, buckets), and those the user
 * lets change (`changed`: "KEY,KEY,..." or "all"; NULL for none). 0, or -1 with one line
 * "PATH: ..." naming every key that differs, both values, and how to resume anyway. */
int job_ckpt_keys_check(const char *path, const char *was, const char *now, const char *changed,
                        char *err, size_t errlen);

/* COMPLETE as text (the bytes before its checksum): a malloc'ed string. */
char *job_ckpt_complete_text(const job_ckpt_complete_t *c);
/* Parses that text. 0, or -1 with "what: reason" in err; c->files is malloc'ed on success. */
int job_ckpt_complete_parse(const char *text, const char *what, job_ckpt_complete_t *c,
                            char *err, size_t errlen);
/* Writes DIR/iter-K/COMPLETE atomically. 0, or -1 with "PATH: reason" in err. */
int job_ckpt_write_complete(const char *dir, const job_ckpt_complete_t *c, char *err,
                            size_t errlen);
/* Reads and checks the COMPLETE file at path into c (c->files malloc'ed); its text, the same
 * malloc'ed, in *text when text is not NULL. 0, or -1 with "PATH: reason" in err. */
int job_ckpt_read_complete(const char *path, job_ckpt_complete_t *c, char **text, char *err,
                           size_t errlen);

/* Whether checkpoint c (its COMPLETE at path) can be resumed by a job of this model, world
 * size, devices per node, seed, plan (plan_hash 0: not known yet) and iteration count (0: not
 * known yet): 0, or -1 with one line "PATH: reason" in err. */
int job_ckpt_check_complete(const job_ckpt_complete_t *c, const char *path, const char *model,
                            int world, int devices, uint64_t seed, uint64_t plan_hash,
                            int64_t iterations, char *err, size_t errlen);

/* The newest iteration K for which DIR/iter-K/COMPLETE exists: 0 with *iter = K; -1 when
 * there is none (or DIR cannot be read), with "DIR: reason" in err. */
int job_ckpt_newest(const char *dir, int64_t *iter, char *err, size_t errlen);

/* Rank 0, after COMPLETE of iteration `current`: removes every DIR/iter-J with J < `oldest`
 * (the oldest checkpoint kept: keep_checkpoints of them stay, the newest) and every
 * incomplete one with J < current. With current = -1: every iter-J with J > oldest
 * (checkpoints a killed run left after the one a job resumes from). Logs what it removed. */
void job_ckpt_prune(const char *dir, int64_t current, int64_t oldest);

/* Rank 0, resuming from checkpoint k: removes the complete checkpoints before k beyond the
 * keep - 1 newest of them, so that the resumed job holds at most `keep` (the next write
 * needs room beside them), logging what it removed. */
void job_ckpt_prune_resumed(const char *dir, int64_t k, int keep);

/* Any other rank, after the same COMPLETE: removes its own rank-R.ckpt (and a stale .tmp)
 * from every DIR/iter-J with J < oldest, and the directory once empty: on a node that does
 * not share DIR with rank 0, its own files are the only ones it holds. */
void job_ckpt_prune_rank(const char *dir, int rank, int64_t oldest);

/* The bytes of a rank's file with header h (what job_ckpt_write_rank writes). */
int64_t job_ckpt_rank_bytes(const job_ckpt_header_t *h);

/* The room left on dir's file system (made if missing; statvfs: the bytes an unprivileged
 * writer may use) in *free_bytes, and the file system's id in *fsid. 0, or -1 with "DIR:
 * reason" in err. */
int job_ckpt_disk_free(const char *dir, int64_t *free_bytes, uint64_t *fsid, char *err,
                       size_t errlen);

/* Whether free_bytes (job_ckpt_disk_free's, measured before anyone wrote) hold `bytes` more
 * with a margin of 1% and 1 MB. 0, or -1 with one line "DIR: ..." in err saying how much is
 * free and how much `what` needs. */
int job_ckpt_space_check(const char *dir, int64_t free_bytes, int64_t bytes, const char *what,
                         char *err, size_t errlen);

#endif
