/* restart: a job that survives its faults. With max_restarts = N (a job key, `poseidon train
 * --max-restarts N`), a job that fails (a rank killed or crashed, the job aborted: any exit
 * but 0, and 2, bad input, which a restart would only repeat) starts again from its newest
 * complete checkpoint (runtime/exec/job_checkpoint.h), at most N times, with one line per
 * restart naming the cause. Under BSP a restarted job ends with the parameters of the run
 * that never failed, bit for bit, as a resume does.
 *
 * A local job (`--workers N`) restarts in its launcher process: it forks the ranks again.
 * Under mpirun, srun or hand-started ranks the launcher starts the ranks again (the user's
 * loop, or the scheduler's requeue) with the same command line: a rank started with
 * max_restarts > 0 and a checkpoint directory that holds a complete checkpoint is a restart,
 * resumes from it, and rank 0 records it, with the cause the ranks left in DIR/last-failure,
 * in DIR/restarts once every rank has started; the N + 1st such start is refused. */
#ifndef POSEIDON_RESTART_H
#define POSEIDON_RESTART_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/exec/worker.h"

/* DIR/last-failure: where each rank appends the line it ended a failed run with
 * (coord_client_last_words), which names the cause; a restart reads it, so that its line
 * says why the run before ended, under any launcher. */
void restart_last_words_path(char *out, size_t n, const char *dir);
/* A fresh job's: removes DIR/last-failure left by an earlier job in the directory. */
void restart_forget(const char *dir);

/* Whether a job that ended with exit status rc after `done` restarts of at most max is
 * started again. */
bool restart_wanted(int rc, int done, int max);

/* Before restart i (1-based) of max of a local job: points cfg at the newest complete
 * checkpoint of its checkpoint directory (resume_dir), or at the one it was resumed from, or
 * at none (it starts over), and logs one line saying which and why: the ranks' last line
 * (DIR/last-failure), else the launcher's launcher_why. */
void restart_prepare(worker_config_t *cfg, int i, int max, const char *launcher_why);

/* A rank started by a launcher, before it runs (cfg's checkpoint flags read, resume_dir not
 * given by the user): when cfg asks for restarts and its checkpoint directory holds a
 * complete checkpoint, this start is a restart: resume_dir and restart_no are set. 0 (a
 * restart or not), or -1 with one line in err when the restarts are spent. */
int restart_launched(worker_config_t *cfg, char *err, size_t errlen);

/* Rank 0 of a restarted launched job, once every rank has started: logs the restart and
 * appends it to DIR/restarts (what restart_launched counts). Of a job resumed by hand: logs
 * the cause the run before left in the resumed directory's last-failure, if any. */
void restart_record(const worker_config_t *cfg, long long iter);

#endif
