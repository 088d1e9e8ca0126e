#include "core/experiment_open.h"

#include <stdio.h>

#include "core/log.h"

int experiment_open(int argc, char **argv, const char *path, const char *const *sets,
                    int n_sets, experiment_t *e, model_t *m)
{
    char err[2048];
    if (experiment_load(e, path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    for (int i = 0; i < n_sets; i++)
        if (experiment_override(e, sets[i], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    if (experiment_check_overrides(e, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (argv) log_banner(argc, argv, e->seed);
    if (model_load(m, e->model_path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    return 0;
}
