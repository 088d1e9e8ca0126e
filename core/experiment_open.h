/* experiment_open: what a command does first with an experiment file — load it, apply the
 * --set overrides and check them together, print the banner (seed, arguments, commit) and
 * load the model. `poseidon plan` and `poseidon sim` open their job so, and a report opens
 * the job a trace ran the same way, so both see the same experiment. */
#ifndef POSEIDON_EXPERIMENT_OPEN_H
#define POSEIDON_EXPERIMENT_OPEN_H

#include "core/experiment.h"
#include "core/model.h"

/* argv (argc entries): the command line the banner names; NULL: no banner (a report opening
 * the job of a trace, under its own command's banner). Returns 0 with *e and *m filled (free
 * m with model_fini), or 1 after printing the error (file:line) on stderr: the exit code
 * for the command. */
int experiment_open(int argc, char **argv, const char *path, const char *const *sets,
                    int n_sets, experiment_t *e, model_t *m);

#endif
