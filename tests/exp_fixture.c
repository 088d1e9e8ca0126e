#include "tests/exp_fixture.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "tests/test.h"

void fixture_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

const char *fixture_exp_text(const char *net, const char *extra)
{
    static char buf[4096];
    char cwd[512];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    snprintf(buf, sizeof buf,
             "model = %s/models/%s.net\ncluster = %s/experiments/clusters/titanx-40gbe.cluster\n"
             "%s", cwd, net, cwd, extra);
    return buf;
}

void fixture_load_exp(experiment_t *e, model_t *m, const char *text)
{
    char path[600], err[2048];
    snprintf(path, sizeof path, "%s/x.exp", test_tmpdir());
    fixture_write_file(path, text);
    REQUIRE(experiment_load(e, path, err, sizeof err) == 0, "%s", err);
    REQUIRE(model_load(m, e->model_path, err, sizeof err) == 0, "%s", err);
}

void fixture_one_config(experiment_t *e, int nodes, double gbps, const char *scheme)
{
    e->n_nodes = e->n_gbps = e->n_schemes = 1;
    e->nodes[0] = nodes;
    e->gbps[0] = gbps > 0 ? gbps : e->cluster.nic_Bps * 8 / 1e9;
    if (scheme) REQUIRE(scheme_parse(scheme, &e->schemes[0]) == 0, "%s", scheme);
    else e->schemes[0] = e->scheme;
}

void fixture_set(experiment_t *e, const char *fmt, ...)
{
    char kv[1200], err[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kv, sizeof kv, fmt, ap);
    va_end(ap);
    REQUIRE(experiment_override(e, kv, err, sizeof err) == 0, "%s: %s", kv, err);
}
