/* train_args: what `poseidon train`'s command line says, read once (cli/cmd_train.c) for both
 * of its runners: the job (an experiment: a file, `--set` and the shorthand flags, each of
 * which sets one key) and how this process runs it. A job of one node with one device, run
 * outside a launcher, trains in this process (runtime/exec/train_one); any other is run by
 * the distributed workers (cli/cmd_train_dist.c, runtime/exec/worker). */
#ifndef POSEIDON_CLI_TRAIN_ARGS_H
#define POSEIDON_CLI_TRAIN_ARGS_H

#include <stdbool.h>

#include "runtime/exec/worker.h"

typedef struct {
    worker_config_t cfg;     /* the job, and the options the workers read */
    const char *exp_path;    /* EXPERIMENT, or NULL */
    int workers;             /* --workers N; 0: not given */
    bool launched;           /* ranks from a launcher's environment (mpirun, srun, RANK) */
    bool dist;               /* the distributed workers run it: --workers, a launcher, or
                                more than one node or device */
    const char *checkpoint;  /* --checkpoint FILE (one worker) */
    const char *resume;      /* --resume: a FILE (one worker) or a DIR (distributed) */
    const char *dist_only;   /* the first option given that only the workers have, or NULL */
    char job_out[1024];      /* where the job is written; "none": nowhere */
} train_args_t;

/* The distributed runner of args (whose job was read and checked as one job): the checks
 * only it needs, then worker_run_local or worker_run. Returns the exit code. */
int train_dist_run(train_args_t *args, int argc, char **argv);

#endif
