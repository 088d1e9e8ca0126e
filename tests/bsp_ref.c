#include "tests/bsp_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "runtime/compute/compute.h"
#include "runtime/exec/data.h"
#include "runtime/compute/nnet.h"
#include "runtime/transport/launch.h"
#include "runtime/compute/solver.h"
#include "runtime/exec/train.h"
#include "tests/exp_fixture.h"
#include "tests/test.h"

float *bsp_reference(const worker_config_t *c, int world, int64_t steps, int64_t *count)
{
    char err[512];
    model_t m;
    REQUIRE(model_load(&m, c->job.model_path, err, sizeof err) == 0, "%s", err);
    dataset_t d, unused;
    if (!strcmp(c->job.train.data, "fortunes")) { /* the ranks' text, the same windows */
        REQUIRE(data_load_text(c->job.train.data_dir[0] ? c->job.train.data_dir : NULL,
                               m.layers[0].out_shape.w, &d, &unused, err, sizeof err) == 0,
                "%s", err);
        data_fini(&unused);
    } else {
        data_synthetic(&d, m.layers[0].out_shape, 10, c->job.train.synthetic_n, c->job.seed);
    }
    compute_t *cp = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(cp, "%s", err);
    nnet_t *net = nnet_new(&m, world * c->job.batch, cp, c->job.seed, err, sizeof err);
    REQUIRE(net, "%s", err);
    int64_t per_epoch = d.n / world / c->job.batch; /* the workers' steps per epoch */
    solver_config_t sc = train_solver_config(&c->job, per_epoch > 0 ? per_epoch : 1, steps);
    solver_t *s = solver_new(&sc, nnet_arena(net));
    solver_init_params(&m, nnet_arena(net), c->init, c->job.seed);
    int *order = malloc((size_t)world * c->job.batch * sizeof *order);
    for (int64_t t = 0; t < steps; t++) {
        for (int r = 0; r < world; r++)
            worker_batch_order(d.n, r, world, c->job.batch, t, c->job.seed, c->job.train.shuffle,
                               order + r * c->job.batch);
        data_gather(&d, order, world * c->job.batch, nnet_input(net), nnet_labels(net));
        nnet_forward(net);
        nnet_backward(net);
        solver_step(s, t);
    }
    *count = nnet_arena(net)->count;
    float *p = malloc((size_t)*count * sizeof *p);
    memcpy(p, nnet_arena(net)->params, (size_t)*count * sizeof *p);
    free(order);
    solver_destroy(&s);
    nnet_destroy(&net);
    compute_destroy(&cp);
    data_fini(&d);
    model_fini(&m);
    return p;
}

float *bsp_read_params(const char *prefix, int rank, int64_t n)
{
    char path[700];
    snprintf(path, sizeof path, "%s.%d", prefix, rank);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *p = malloc((size_t)n * sizeof *p);
    size_t got = fread(p, sizeof *p, (size_t)n, f);
    fclose(f);
    if (got == (size_t)n) return p;
    free(p);
    return NULL;
}

double bsp_worst_error(const float *a, const float *b, int64_t n, int64_t *at)
{
    const double atol = 2e-6, rtol = 1e-4;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (atol + rtol * fabs((double)b[i]));
        if (!(e <= worst)) worst = e, *at = i; /* NaN counts as worst */
    }
    return worst;
}

float *bsp_read_node_replicas(const char *prefix, int nodes, int devices, int64_t n,
                              const char *what)
{
    float *r0 = bsp_read_params(prefix, 0, n);
    REQUIRE(r0, "%s: no parameters from rank 0", what);
    for (int r = 0; r < nodes; r++)
        for (int d = 0; d < devices; d++) {
            if (r == 0 && d == 0) continue;
            char pre[700];
            snprintf(pre, sizeof pre, "%s.%d", prefix, r);
            float *p = d == 0 ? bsp_read_params(prefix, r, n) : bsp_read_params(pre, d, n);
            REQUIRE(p, "%s: no parameters of rank %d device %d", what, r, d);
            CHECK(memcmp(p, r0, (size_t)n * sizeof *p) == 0,
                  "%s: rank %d device %d differs from rank 0", what, r, d);
            free(p);
        }
    return r0;
}

double bsp_check_run(const worker_config_t *c, const char *prefix, int world, int64_t steps,
                     const char *what)
{
    int64_t n, n0, at = 0;
    float *ref = bsp_reference(c, world, steps, &n);
    float *r0 = bsp_read_params(prefix, 0, n);
    REQUIRE(r0, "%s: no parameters from rank 0", what);
    for (int r = 1; r < world; r++) { /* every replica ends bit-identical */
        float *p = bsp_read_params(prefix, r, n);
        REQUIRE(p, "%s: no parameters from rank %d", what, r);
        CHECK(memcmp(p, r0, (size_t)n * sizeof *p) == 0, "%s: rank %d differs from rank 0",
              what, r);
        free(p);
    }
    double worst = bsp_worst_error(r0, ref, n, &at);
    CHECK(worst <= 1.0, "%s: parameter %lld is %.9g, one worker %.9g (%.2f x tol)", what,
          (long long)at, r0[at], ref[at], worst);
    /* the run moved the parameters: not a comparison of two untouched inits */
    float *init = bsp_reference(c, world, 0, &n0);
    CHECK(bsp_worst_error(r0, init, n, &at) > 100.0, "%s: parameters did not move", what);
    free(init);
    /* the comparison can fail: one corrupted parameter is caught */
    r0[n / 2] += 1e-3f + 1e-2f * fabsf(r0[n / 2]);
    CHECK(bsp_worst_error(r0, ref, n, &at) > 1.0 && at == n / 2,
          "%s: a corrupted parameter went unseen", what);
    free(r0);
    free(ref);
    return worst;
}

int bsp_launch(worker_config_t *c, int world)
{
    fixture_set(&c->job, "cluster.nodes=%d", world);
    return worker_run_local(c, world);
}

void bsp_mlp_config(worker_config_t *c, const char *scheme, int n, const char *out)
{
    worker_config_init(c);
    experiment_t *j = &c->job;
    fixture_set(j, "scheme=%s", scheme);
    fixture_set(j, "model=models/mlp.net");
    fixture_set(j, "data=synthetic");
    fixture_set(j, "synthetic_n=%d", n);
    fixture_set(j, "batch=8");
    fixture_set(j, "iterations=5");
    fixture_set(j, "kv_block_mb=0.0625");
    fixture_set(j, "lr=0.05");
    c->evaluate = false;
    c->timeout_ms = 20000;
    c->params_out = out;
}
