/* train_one: a job of one node with one device, run in this process without a plan, sockets
 * or shards: the training loop of runtime/exec/train.h over the job's data (train_data_load,
 * the distributed workers' switch too), solver (train_solver_config) and initialisation. It
 * prints a row per epoch (epoch,loss,train_acc,test_acc,images_per_s), keeps an atomic
 * checkpoint file, resumes from one, and writes the job it ran, which `poseidon sim`
 * simulates and `poseidon train` runs again.
 *
 * The job counts epochs (epochs > 0) or iterations; a job that counts iterations ends with a
 * partial epoch when they are not a whole number of epochs (its row is that epoch's).
 */
#ifndef POSEIDON_TRAIN_ONE_H
#define POSEIDON_TRAIN_ONE_H

#include "core/experiment.h"
#include "runtime/compute/compute.h"

/* The job and how this process runs it; every pointer may be NULL (nothing of that kind). */
typedef struct {
    const experiment_t *job;    /* one node, one device */
    compute_kind_t device;
    int threads;                /* BLAS threads; 0: every CPU */
    const char *csv_path;       /* the rows, appended to when resuming */
    const char *checkpoint;     /* written after every epoch */
    const char *resume;         /* a checkpoint file to start from */
    const char *resume_changed; /* keys the job may change on the resume (job_ckpt_keys_check) */
    const char *job_out;        /* where the job it ran is written */
} train_one_config_t;

/* Runs the job. Returns the process exit code: 0, or 1 after printing what failed (the model,
 * the data, the device, a file). */
int train_one_run(const train_one_config_t *c);

#endif
