/* worker: the plan executor across real processes. BSP on N workers computes what one worker
 * computes on the N-times batch (the union of the workers' batches), for every scheme; SSP(0)
 * is BSP; under SSP(2) the ranks still end with the same PS values; emulated compute sleeps
 * the profiled time while moving real bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "runtime/comm.h"
#include "runtime/compute.h"
#include "runtime/data.h"
#include "runtime/launch.h"
#include "runtime/nnet.h"
#include "runtime/solver.h"
#include "runtime/worker.h"
#include "tests/test.h"

#define WT_BATCH 8
#define WT_STEPS 5
#define WT_N 512 /* synthetic samples: 4 workers x 8 x 16 */

static int wt_child(int rank, void *arg)
{
    (void)rank;
    return worker_run(arg);
}

static void wt_config(worker_config_t *c, const char *scheme, const char *out)
{
    worker_config_init(c);
    REQUIRE(scheme_parse(scheme, &c->scheme) == 0);
    c->model_path = "models/mlp.net";
    c->data = "synthetic";
    c->synthetic_n = WT_N;
    c->batch = WT_BATCH;
    c->iterations = WT_STEPS;
    c->evaluate = false;
    c->kv_block_bytes = 64 << 10; /* several blocks per layer, over every shard */
    c->timeout_ms = 20000;
    c->params_out = out;
    c->solver.lr = 0.05;
}

static float *wt_read(const char *prefix, int rank, int64_t n)
{
    char path[600];
    snprintf(path, sizeof path, "%s.%d", prefix, rank);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *p = malloc((size_t)n * sizeof *p);
    size_t got = fread(p, sizeof *p, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(p);
        return NULL;
    }
    return p;
}

/* One worker on the union of the N workers' batches, WT_STEPS steps: the parameters. */
static float *wt_reference(const worker_config_t *c, int world, int64_t *count)
{
    char err[512];
    model_t m;
    REQUIRE(model_load(&m, c->model_path, err, sizeof err) == 0, "%s", err);
    dataset_t d;
    data_synthetic(&d, m.layers[0].out_shape, 10, c->synthetic_n, c->seed);
    compute_t *cp = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(cp, "%s", err);
    nnet_t *net = nnet_new(&m, world * c->batch, cp, c->seed, err, sizeof err);
    REQUIRE(net, "%s", err);
    solver_t *s = solver_new(&c->solver, nnet_arena(net));
    solver_init_params(&m, nnet_arena(net), c->init, c->seed);
    int *order = malloc((size_t)world * c->batch * sizeof *order);
    for (int64_t t = 0; t < c->iterations; t++) {
        for (int r = 0; r < world; r++)
            worker_batch_order(d.n, r, world, c->batch, t, c->seed, c->shuffle,
                               order + r * c->batch);
        data_gather(&d, order, world * c->batch, nnet_input(net), nnet_labels(net));
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

/* Worst |a - b| / (atol + rtol |b|); <= 1 passes. */
static double wt_worst(const float *a, const float *b, int64_t n, int64_t *at)
{
    const double atol = 2e-6, rtol = 1e-4;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (atol + rtol * fabs((double)b[i]));
        if (!(e <= worst)) worst = e, *at = i; /* NaN counts as worst */
    }
    return worst;
}

static void wt_bsp_case(const char *scheme, int world, int staleness)
{
    char out[600];
    snprintf(out, sizeof out, "%s/p-%d-%d", test_tmpdir(), world, staleness);
    worker_config_t c;
    wt_config(&c, scheme, out);
    c.staleness = staleness;
    int rc = launch_local(world, launch_free_port(), 5000, wt_child, &c);
    REQUIRE(rc == 0, "%s on %d workers (ssp %d): job exited %d", scheme, world, staleness, rc);
    int64_t n;
    float *ref = wt_reference(&c, world, &n);
    float *r0 = wt_read(out, 0, n);
    REQUIRE(r0, "no parameters from rank 0");
    for (int r = 1; r < world; r++) { /* every replica ends bit-identical */
        float *p = wt_read(out, r, n);
        REQUIRE(p, "no parameters from rank %d", r);
        CHECK(memcmp(p, r0, (size_t)n * sizeof *p) == 0, "%s: rank %d differs from rank 0",
              scheme, r);
        free(p);
    }
    int64_t at = 0;
    double worst = wt_worst(r0, ref, n, &at);
    printf("%s on %d workers (ssp %d): worst parameter at %.3f of the tolerance\n", scheme, world,
           staleness, worst);
    CHECK(worst <= 1.0, "%s on %d workers: parameter %lld is %.9g, one worker %.9g (%.2f x tol)",
          scheme, world, (long long)at, r0[at], ref[at], worst);
    /* the run moved the parameters: not a comparison of two untouched inits */
    worker_config_t c0 = c;
    c0.iterations = 0;
    int64_t n0;
    float *init = wt_reference(&c0, world, &n0);
    CHECK(wt_worst(r0, init, n, &at) > 100.0, "%s: parameters did not move", scheme);
    free(init);
    /* the comparison can fail: one corrupted parameter is caught */
    r0[n / 2] += 1e-3f + 1e-2f * fabsf(r0[n / 2]);
    CHECK(wt_worst(r0, ref, n, &at) > 1.0 && at == n / 2, "a corrupted parameter went unseen");
    free(r0);
    free(ref);
}

TEST(worker_bsp_ps_equals_one_worker)
{
    wt_bsp_case("ps", 2, 0);
    wt_bsp_case("ps", 4, 0);
}

TEST(worker_bsp_sfb_equals_one_worker)
{
    wt_bsp_case("sfb+wfbp", 2, 0);
    wt_bsp_case("sfb+wfbp", 4, 0);
}

TEST(worker_bsp_allreduce_equals_one_worker)
{
    wt_bsp_case("allreduce+wfbp", 2, 0);
    wt_bsp_case("allreduce+wfbp", 4, 0);
}

TEST(worker_bsp_hybrid_equals_one_worker)
{
    wt_bsp_case("hybrid", 2, 0);
    wt_bsp_case("hybrid3", 4, 0);
}

TEST(worker_ssp0_equals_bsp)
{
    /* SSP(0) is the BSP plan: deps reach back one iteration, shards with staleness 0 */
    wt_bsp_case("ps+wfbp", 3, 0);
}

TEST(worker_ssp2_replicas_agree)
{
    char out[600];
    snprintf(out, sizeof out, "%s/ssp", test_tmpdir());
    worker_config_t c;
    wt_config(&c, "ps+wfbp", out);
    c.staleness = 2;
    c.iterations = 12;
    REQUIRE(launch_local(3, launch_free_port(), 5000, wt_child, &c) == 0);
    int64_t n = 235146; /* models/mlp.net */
    float *r0 = wt_read(out, 0, n);
    REQUIRE(r0);
    int finite = 1;
    for (int64_t i = 0; i < n; i++) finite &= isfinite(r0[i]) != 0;
    CHECK(finite, "non-finite parameters under SSP(2)");
    /* the last pull is of the values after the last apply: every replica holds them */
    for (int r = 1; r < 3; r++) {
        float *p = wt_read(out, r, n);
        REQUIRE(p);
        CHECK(memcmp(p, r0, (size_t)n * sizeof *p) == 0, "rank %d differs after SSP(2)", r);
        free(p);
    }
    free(r0);
}

TEST(worker_emulated_compute_sleeps_profile)
{
    char prof[600], out[600];
    snprintf(prof, sizeof prof, "%s/mlp.csv", test_tmpdir());
    snprintf(out, sizeof out, "%s/emu", test_tmpdir());
    FILE *f = fopen(prof, "w");
    REQUIRE(f);
    /* 10 ms of forward and 20 ms of backward per iteration at batch 8 (fc layers only) */
    fprintf(f, "layer,batch,fwd_ns,bwd_ns\nfc1,8,4000000,8000000\nrelu1,8,0,0\n"
               "fc2,8,4000000,8000000\nrelu2,8,0,0\nfc3,8,2000000,4000000\nloss,8,0,0\n");
    fclose(f);
    worker_config_t c;
    wt_config(&c, "hybrid3", out);
    c.compute = WORKER_COMPUTE_EMULATE;
    c.profile_path = prof;
    c.iterations = 10;
    int64_t t0 = comm_now_ns();
    REQUIRE(launch_local(2, launch_free_port(), 5000, wt_child, &c) == 0);
    double s = (comm_now_ns() - t0) * 1e-9;
    CHECK(s >= 10 * 0.030, "10 emulated iterations of 30 ms took %.3f s", s);
    CHECK(s < 20, "emulated run took %.1f s", s);
}
