#include "tests/exp_fixture.h"

#include <stdio.h>

#include "tests/test.h"

void fixture_load_exp(experiment_t *e, model_t *m, const char *text)
{
    char path[600], err[2048];
    snprintf(path, sizeof path, "%s/x.exp", test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    REQUIRE(experiment_load(e, path, err, sizeof err) == 0, "%s", err);
    REQUIRE(model_load(m, e->model_path, err, sizeof err) == 0, "%s", err);
}
