/* cmd_sim_jobs: a sweep's configurations on several cores. Tasks 0..n-1 run in `jobs` forked
 * processes, each taking the next task not yet taken (a counter in shared memory, so a
 * process that drew a small configuration goes on to the next), and the parent hands each
 * task's output to emit() in task order, as soon as it and every task before it are done:
 * the output is the one a loop over the tasks writes, whatever the order they finish in.
 * Processes, not threads: each configuration builds its own plan and simulator, and the
 * simulator installs a process-wide ASSERT context (core/check.h).
 */
#ifndef POSEIDON_CMD_SIM_JOBS_H
#define POSEIDON_CMD_SIM_JOBS_H

#include <stddef.h>
#include <stdio.h>

/* Runs task i in a child, writing what it outputs to out; returns 0, or -1 after printing
 * its error on stderr. */
typedef int (*sim_jobs_task_fn)(int i, FILE *out, void *arg);
/* Takes task i's output in the parent. */
typedef void (*sim_jobs_emit_fn)(int i, const char *buf, size_t len, void *arg);

/* The cores this process may run on (its CPU affinity; 1 when unknown). */
int sim_jobs_cores(void);

/* Runs the n tasks in min(jobs, n) processes. Returns 0 when every task returned 0; else -1
 * after emitting the outputs of the tasks before the first that failed (the others are
 * stopped), or after a line saying which process died. */
int sim_jobs_run(int n, int jobs, sim_jobs_task_fn task, sim_jobs_emit_fn emit, void *arg);

#endif
