/* experiment_open: what `poseidon plan` and `poseidon sim` do first — load an experiment file,
 * apply the --set overrides, print the banner (seed, arguments, commit) and load the model. */
#ifndef POSEIDON_CLI_EXPERIMENT_OPEN_H
#define POSEIDON_CLI_EXPERIMENT_OPEN_H

#include "core/experiment.h"
#include "core/model.h"

/* Returns 0 with *e and *m filled (free m with model_fini), or 1 after printing the error
 * (file:line) on stderr: the exit code for the command. */
int experiment_open(int argc, char **argv, const char *path, const char *const *sets,
                    int n_sets, experiment_t *e, model_t *m);

#endif
