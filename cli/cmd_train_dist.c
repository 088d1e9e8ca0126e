/* poseidon train's distributed runner: a job (read by cli/cmd_train.c) of more than one node
 * or device, or under a launcher, or --workers N. Each rank runs runtime/exec/worker (the
 * plan built by core/, executed for real over ZeroMQ). Outside a launcher the job's nodes are
 * forked here as a local job; otherwise the rank comes from the launcher's environment
 * (mpirun, srun, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT by hand). Rank 0 prints the
 * report rows on stdout and writes the experiment it ran. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/train_args.h"
#include "core/log.h"
#include "runtime/exec/job_checkpoint.h"
#include "runtime/exec/restart.h"
#include "runtime/exec/train.h"
#include "runtime/exec/worker.h"

/* Whether paths a and b name one existing directory. */
static bool same_dir(const char *a, const char *b)
{
    struct stat x, y;
    if (stat(a, &x) || stat(b, &y)) return !strcmp(a, b);
    return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The checkpoint flags together: --checkpoint-every goes with a directory (--resume's by
 * default), --resume needs a complete checkpoint, and a job writes into a directory that
 * holds no other run's checkpoint (its pruning would mix the two). 0, or -1 (printed). */
static int check_checkpoint_flags(worker_config_t *c)
{
    char err[8800];
    if (c->checkpoint_every && !c->checkpoint_dir) c->checkpoint_dir = c->resume_dir;
    if (c->checkpoint_every && !c->checkpoint_dir) {
        fprintf(stderr, "poseidon train: --checkpoint-every needs --checkpoint-dir DIR\n");
        return -1;
    }
    if (c->checkpoint_dir && !c->checkpoint_every) {
        fprintf(stderr, "poseidon train: --checkpoint-dir needs --checkpoint-every K\n");
        return -1;
    }
    int64_t k;
    if (c->resume_dir && job_ckpt_newest(c->resume_dir, &k, err, sizeof err)) {
        fprintf(stderr, "poseidon train: --resume: %s\n", err);
        return -1;
    }
    if (c->resume_dir) { /* what can be told before any rank starts (the plan cannot) */
        char path[4200], model[MODEL_NAME_MAX];
        job_ckpt_complete_path(path, sizeof path, c->resume_dir, k);
        const char *base = strrchr(c->job.model_path, '/');
        /* the model's name as model_load makes it: the file name without ".net" */
        snprintf(model, sizeof model, "%.95s", base ? base + 1 : c->job.model_path);
        char *dot = strstr(model, ".net");
        if (dot && dot[4] == '\0') *dot = '\0';
        job_ckpt_complete_t done;
        int rc = job_ckpt_read_complete(path, &done, NULL, err, sizeof err);
        if (rc == 0) {
            rc = job_ckpt_check_complete(&done, path, model, c->job.nodes[0],
                                         c->job.cluster.devices_per_node, c->job.seed, 0,
                                         c->job.train.epochs > 0 ? 0 : c->job.iterations, err,
                                         sizeof err);
            char *keys = job_ckpt_job_keys(&c->job);
            if (rc == 0)
                rc = job_ckpt_keys_check(path, done.keys, keys, c->resume_changed, err, sizeof err);
            free(keys);
            job_ckpt_complete_free(&done);
        }
        if (rc) {
            fprintf(stderr, "poseidon train: --resume: %s\n", err);
            return -1;
        }
    }
    if (c->checkpoint_dir && (!c->resume_dir || !same_dir(c->checkpoint_dir, c->resume_dir)) &&
        job_ckpt_newest(c->checkpoint_dir, &k, err, sizeof err) == 0) {
        fprintf(stderr, "poseidon train: --checkpoint-dir: %s holds the checkpoint of "
                        "iteration %lld of another run: resume it (--resume %s) or choose "
                        "another directory\n", c->checkpoint_dir, (long long)k,
                c->checkpoint_dir);
        return -1;
    }
    return 0;
}

/* Under a launcher with max_restarts: whether this start is a restart (restart_launched).
 * 0, or -1 when its restarts are spent (printed). */
static int restarted(worker_config_t *c)
{
    char err[8800];
    if (restart_launched(c, err, sizeof err) == 0) return 0;
    fprintf(stderr, "poseidon train: --max-restarts: %s\n", err);
    return -1;
}

/* The checks of a distributed job that one worker does not need: how the options and keys
 * fit the workers, said once here rather than by every rank. 0, or the exit code (printed). */
static int check_dist(train_args_t *a)
{
    worker_config_t *c = &a->cfg;
    const experiment_t *job = &c->job;
    char err[2048];
    if (a->checkpoint) {
        fprintf(stderr, "poseidon train: --checkpoint FILE is for one worker; a distributed "
                        "job checkpoints with --checkpoint-dir DIR --checkpoint-every K\n");
        return 2;
    }
    if (job->train.sample > 0) {
        fprintf(stderr, "poseidon train: sample runs on one worker (a job of one node and one "
                        "device); the distributed workers print no sample\n");
        return 2;
    }
    if (c->security.insecure && c->security.keys_dir) {
        fprintf(stderr, "poseidon train: --keys and --insecure: choose one\n");
        return 2;
    }
    if (job->kv_block_bytes % 4) {
        fprintf(stderr, "poseidon train: kv_block_mb must be a whole number of 4-byte words\n");
        return 2;
    }
    int d = job->cluster.devices_per_node, n = job->train.synthetic_n;
    if (job->train.limit > 0 && job->train.limit < n) n = job->train.limit;
    if (d > 1 && !strcmp(job->train.data, "synthetic") &&
        job->train.compute != COMPUTE_MODE_EMULATE && n / (job->nodes[0] * d) < job->batch) {
        fprintf(stderr, "poseidon train: %d training samples over %d nodes x %d devices: "
                        "fewer than a batch of %d per device (devices_per_node = %d is more "
                        "than the data allows)\n", n, job->nodes[0], d, job->batch, d);
        return 2;
    }
    /* counted apart: the ranks are forked from here, and CUDA does not survive a fork */
    if (c->device != COMPUTE_CPU && a->workers > 0 && job->train.compute != COMPUTE_MODE_EMULATE &&
        compute_device_count_apart(c->device, err, sizeof err) < 1) {
        fprintf(stderr, "poseidon train: --device %s: %s\n", compute_kind_name(c->device), err);
        return 1;
    }
    return 0;
}

int train_dist_run(train_args_t *a, int argc, char **argv)
{
    worker_config_t *c = &a->cfg;
    c->init = train_init_kind(&c->job);
    c->resume_dir = a->resume;
    if (!a->launched && a->workers == 0) a->workers = c->job.nodes[0]; /* a local job */
    int rc = check_dist(a);
    if (rc) return rc;
    if (c->checkpoint_every && !c->checkpoint_dir) c->checkpoint_dir = c->resume_dir;
    if (a->launched && restarted(c)) return 2;
    if (check_checkpoint_flags(c)) return 2;
    c->job_out = strcmp(a->job_out, "none") ? a->job_out : NULL;
    log_banner(argc, argv, c->job.seed);
    return a->workers > 0 ? worker_run_local(c, a->workers) : worker_run(c);
}
