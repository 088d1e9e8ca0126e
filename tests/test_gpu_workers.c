/* GPU workers in distributed training. Each device copies a layer's gradient (SFB: its
 * factors) out to pinned host memory as its backward ends, on the backend's copy-out stream;
 * the plan's host-staging ops execute them (cluster.host_staging: LREDUCE waits for the
 * copies, LBCAST copies the synced parameters back into every replica). On the CPU the same
 * ops run as memcpy, and BSP still computes what one worker computes on the union of the
 * batches; on a GPU (SKIP without one) 2 workers, and 2 nodes x 2 devices where the host has
 * two GPUs, match that reference within the GPU tolerance. A checkpoint of a net on a GPU
 * reads back bit for bit on the CPU, and a distributed job resumed from its checkpoint ends
 * as the job that never stopped (CPU devices run as GPU ones in CI). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "runtime/exec/checkpoint.h"
#include "runtime/compute/compute.h"
#include "runtime/compute/nnet.h"
#include "runtime/compute/solver.h"
#include "runtime/exec/worker.h"
#include "tests/bsp_ref.h"
#include "tests/exp_fixture.h"
#include "tests/test.h"

#define GW_N 512 /* synthetic samples: 2 nodes x 2 devices x 8 x 16 */

/* cuBLAS sums in another order than OpenBLAS: a GPU run is held to the tolerance of the GPU
 * layer tests (tests/test_cuda_net.c), not to the CPU runs' */
static double gpu_worst_error(const float *a, const float *b, int64_t n, int64_t *at)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1e-5 + 1e-3 * fabs((double)b[i]));
        if (!(e <= worst)) worst = e, *at = i; /* NaN counts as worst */
    }
    return worst;
}

/* The job of the staging tests: the BSP equivalence tests' MLP job through host memory. */
static void gw_config(worker_config_t *c, const char *scheme, int devices, compute_kind_t kind,
                      const char *out)
{
    bsp_mlp_config(c, scheme, GW_N, out);
    c->device = kind;
    fixture_set(&c->job, "cluster.devices_per_node=%d", devices);
    fixture_set(&c->job, "cluster.interconnect=pcie4");
    fixture_set(&c->job, "cluster.host_staging=yes");
}

/* Runs the job on `nodes` ranks and checks it: every replica of every node (PREFIX.r and
 * PREFIX.r.d) equals rank 0's bit for bit; rank 0 is within the tolerance (the CPU runs' for
 * the CPU, the GPU's for a GPU) of one worker on the union of the nodes x devices batches;
 * the parameters moved; a corrupted one is caught. */
static void gw_run_and_check(const char *scheme, int nodes, int devices, compute_kind_t kind,
                             bool stage_cpu)
{
    char out[600], what[160];
    snprintf(out, sizeof out, "%s/gw-%s-%d-%d-%s%s", test_tmpdir(), scheme, nodes, devices,
             compute_kind_name(kind), stage_cpu ? "-staged" : "");
    snprintf(what, sizeof what, "%s on %d nodes x %d %s devices, %s", scheme, nodes, devices,
             compute_kind_name(kind),
             kind != COMPUTE_CPU || stage_cpu ? "replicas apart from the node's parameters"
                                              : "staging ops in memory");
    worker_config_t c;
    gw_config(&c, scheme, devices, kind, out);
    c.stage_cpu = stage_cpu;
    int rc = bsp_launch(&c, nodes);
    REQUIRE(rc == 0, "%s: job exited %d", what, rc);
    int64_t n, n0, at = 0;
    float *ref = bsp_reference(&c, nodes * devices, c.job.iterations, &n);
    float *r0 = bsp_read_node_replicas(out, nodes, devices, n, what);
    double (*err_of)(const float *, const float *, int64_t, int64_t *) =
        kind == COMPUTE_CPU ? bsp_worst_error : gpu_worst_error;
    double worst = err_of(r0, ref, n, &at);
    CHECK(worst <= 1.0, "%s: parameter %lld is %.9g, one worker %.9g (%.2f x tol)", what,
          (long long)at, r0[at], ref[at], worst);
    float *init = bsp_reference(&c, nodes * devices, 0, &n0);
    CHECK(err_of(r0, init, n, &at) > 10.0, "%s: parameters did not move", what);
    free(init);
    r0[n / 2] += 1e-2f + 1e-1f * fabsf(r0[n / 2]);
    CHECK(err_of(r0, ref, n, &at) > 1.0 && at == n / 2, "%s: a corrupted parameter went unseen",
          what);
    printf("%s: worst parameter at %.3f of the tolerance\n", what, worst);
    free(r0);
    free(ref);
}

/* The control flow of a GPU worker on CPU devices: every BWD copies out through the
 * backend with an event, the LREDUCE of every synced layer waits for it, the LBCAST copies
 * back. SFB (factors, and the biases through the PS) on 2 x 2 devices run as a GPU node runs
 * them (the node's parameters a host copy, every replica, device 0's too, written only by
 * the LBCAST); the all-reduce on one device per node with the staging ops in memory; one
 * node of two devices run as GPU ones. */
TEST(gpu_workers_cpu_host_staging_bsp_equals_one_worker)
{
    gw_run_and_check("hybrid", 2, 2, COMPUTE_CPU, true);
    gw_run_and_check("allreduce+wfbp", 2, 1, COMPUTE_CPU, false);
    /* one node of 2 devices: no network sync, the node's LREDUCE updates its parameters */
    gw_run_and_check("hybrid", 1, 2, COMPUTE_CPU, true);
}

/* The GPUs here, counted apart: the jobs fork their ranks from this process, and CUDA does
 * not survive a fork. */
static int cuda_devices_or_skip(int need)
{
    char why[1024];
    int n = compute_device_count_apart(COMPUTE_CUDA, why, sizeof why);
    if (n == 0) SKIP("cuda backend: %s", why);
    if (n < need) SKIP("the GPU job of 2 devices per node needs 2 GPUs, this host has %d", n);
    return n;
}

/* 2 GPU workers (one GPU each where the host has two; sharing one otherwise), each scheme. */
TEST(gpu_workers_on_gpus_bsp_equals_one_worker)
{
    cuda_devices_or_skip(1);
    gw_run_and_check("ps+wfbp", 2, 1, COMPUTE_CUDA, false);
    gw_run_and_check("sfb+wfbp", 2, 1, COMPUTE_CUDA, false);
    gw_run_and_check("allreduce+wfbp", 2, 1, COMPUTE_CUDA, false);
}

/* 2 nodes x 2 devices, device thread d on GPU d: the local reduce of two GPUs' copies. */
TEST(gpu_workers_on_gpus_two_devices_per_node)
{
    cuda_devices_or_skip(2);
    gw_run_and_check("hybrid", 2, 2, COMPUTE_CUDA, false);
}

/* A job of 10 iterations straight, against one that checkpoints every 3 and stops at 8,
 * resumed from the checkpoint of 6: the resume reads the node's parameters into host memory
 * and copies them (and the layer state) into every replica. Bit for bit on the CPU; within
 * the GPU tolerance on a GPU. */
static void gw_resume_case(compute_kind_t kind, bool stage_cpu, int devices)
{
    const char *d = test_tmpdir();
    char straight[600], resumed[600], ck[600], what[96];
    snprintf(what, sizeof what, "2 nodes x %d %s devices%s, resumed", devices,
             compute_kind_name(kind), stage_cpu ? " run as GPU ones" : "");
    snprintf(straight, sizeof straight, "%s/rs-straight-%s", d, compute_kind_name(kind));
    snprintf(resumed, sizeof resumed, "%s/rs-resumed-%s", d, compute_kind_name(kind));
    snprintf(ck, sizeof ck, "%s/rs-ck-%s", d, compute_kind_name(kind));
    worker_config_t c;
    gw_config(&c, "hybrid", devices, kind, straight);
    c.stage_cpu = stage_cpu;
    fixture_set(&c.job, "iterations=10");
    REQUIRE(bsp_launch(&c, 2) == 0, "%s: the straight run failed", what);
    c.params_out = resumed;
    fixture_set(&c.job, "iterations=8");
    c.checkpoint_dir = ck;
    c.checkpoint_every = 3;
    REQUIRE(bsp_launch(&c, 2) == 0, "%s: the run that checkpoints failed", what);
    fixture_set(&c.job, "iterations=10");
    c.resume_dir = ck;
    REQUIRE(bsp_launch(&c, 2) == 0, "%s: the resumed run failed", what);
    int64_t n = 0, at = 0;
    float *init = bsp_reference(&c, 2, 0, &n);
    for (int r = 0; r < 2 * devices; r++) { /* every replica: PREFIX.rank, PREFIX.rank.d */
        char sp[700], rp[700];
        snprintf(sp, sizeof sp, "%s.%d", straight, r / devices);
        snprintf(rp, sizeof rp, "%s.%d", resumed, r / devices);
        float *a = r % devices ? bsp_read_params(sp, r % devices, n)
                               : bsp_read_params(straight, r / devices, n);
        float *b = r % devices ? bsp_read_params(rp, r % devices, n)
                               : bsp_read_params(resumed, r / devices, n);
        REQUIRE(a && b, "%s: replica %d wrote no parameters", what, r);
        if (kind == COMPUTE_CPU)
            CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0,
                  "%s: replica %d ends other than the straight run", what, r);
        else
            CHECK(gpu_worst_error(b, a, n, &at) <= 1.0,
                  "%s: replica %d: parameter %lld is %.9g, straight %.9g", what, r, (long long)at,
                  b[at], a[at]);
        CHECK(gpu_worst_error(a, init, n, &at) > 10.0, "%s: parameters did not move", what);
        free(a);
        free(b);
    }
    free(init);
}

TEST(gpu_workers_cpu_staged_checkpoint_resumes)
{
    gw_resume_case(COMPUTE_CPU, true, 2);
}

TEST(gpu_workers_on_gpus_checkpoint_resumes)
{
    cuda_devices_or_skip(1);
    gw_resume_case(COMPUTE_CUDA, false, 1);
}

/* A net trained on the GPU: its checkpoint (parameters, momentum, layer state from the
 * device) loads on the CPU bit for bit, and back onto a GPU. */
TEST(gpu_workers_on_gpus_checkpoint_reads_back_on_the_cpu)
{
    cuda_devices_or_skip(1);
    char err[1024], path[600];
    snprintf(path, sizeof path, "%s/gpu.ckpt", test_tmpdir());
    model_t m;
    REQUIRE(model_load(&m, "models/lenet.net", err, sizeof err) == 0, "%s", err);
    compute_t *gpu = compute_new(COMPUTE_CUDA, 1, err, sizeof err);
    compute_t *cpu = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(gpu && cpu, "%s", err);
    nnet_t *g = nnet_new(&m, 4, gpu, 1, err, sizeof err), *h = nnet_new(&m, 4, cpu, 1, err, sizeof err);
    REQUIRE(g && h, "%s", err);
    solver_config_t sc = {.lr = 0.01, .momentum = 0.9, .policy = LR_FIXED};
    solver_t *sg = solver_new(&sc, nnet_arena(g)), *sh = solver_new(&sc, nnet_arena(h));
    solver_init_params(&m, nnet_arena(g), INIT_AUTO, 1);
    for (int64_t i = 0; i < 4 * nnet_out_count(g, 0); i++) nnet_input(g)[i] = (float)(i % 7) * 0.1f;
    for (int i = 0; i < 4; i++) nnet_labels(g)[i] = i;
    nnet_forward(g);
    nnet_backward(g);
    solver_step(sg, 0);
    checkpoint_meta_t meta = {.epoch = 1, .iter = 1, .seed = 1}, got;
    REQUIRE(checkpoint_save(path, &m, nnet_arena(g), solver_history(sg), NULL, 0, &meta, err,
                            sizeof err) == 0, "%s", err);
    REQUIRE(checkpoint_load(path, &m, nnet_arena(h), solver_history(sh), NULL, 0, &got, err,
                            sizeof err) == 0, "%s", err);
    int64_t n = nnet_arena(g)->count;
    float *dev = malloc((size_t)n * sizeof *dev);
    compute_download(gpu, dev, nnet_arena(g)->params, (size_t)n * sizeof *dev);
    CHECK(memcmp(dev, nnet_arena(h)->params, (size_t)n * sizeof *dev) == 0,
          "the CPU read other parameters than the GPU wrote");
    compute_download(gpu, dev, solver_history(sg), (size_t)n * sizeof *dev);
    CHECK(memcmp(dev, solver_history(sh), (size_t)n * sizeof *dev) == 0,
          "the CPU read another momentum than the GPU wrote");
    /* and back onto a GPU net */
    nnet_t *g2 = nnet_new(&m, 4, gpu, 1, err, sizeof err);
    solver_t *sg2 = solver_new(&sc, nnet_arena(g2));
    REQUIRE(checkpoint_load(path, &m, nnet_arena(g2), solver_history(sg2), NULL, 0, &got, err,
                            sizeof err) == 0, "%s", err);
    compute_download(gpu, dev, nnet_arena(g2)->params, (size_t)n * sizeof *dev);
    CHECK(memcmp(dev, nnet_arena(h)->params, (size_t)n * sizeof *dev) == 0,
          "a GPU net read other parameters than were written");
    free(dev);
    solver_destroy(&sg2);
    nnet_destroy(&g2);
    solver_destroy(&sg);
    solver_destroy(&sh);
    nnet_destroy(&g);
    nnet_destroy(&h);
    compute_destroy(&gpu);
    compute_destroy(&cpu);
    model_fini(&m);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Bad input and a missing GPU: one line each, naming the remedy. */
TEST(gpu_workers_bad_input_is_one_line)
{
    char out[8192];
    const char *base = "--insecure --job-out none --model models/mlp.net --data synthetic "
                       "--no-eval --iterations 2";
    int rc = test_run(out, sizeof out, "%s/poseidon train --workers 2 --device gpu %s 2>&1",
                      test_build_dir(), base);
    CHECK(rc == 2 && strstr(out, "--device is cpu or cuda") && count_lines(out) == 1,
          "rc %d: %s", rc, out);
    char why[1024];
    if (compute_available(COMPUTE_CUDA, why, sizeof why)) return; /* the rest needs no GPU */
    rc = test_run(out, sizeof out, "%s/poseidon train --workers 2 --device cuda %s 2>&1",
                  test_build_dir(), base);
    CHECK(rc == 1 && strstr(out, "--device cuda: ") && strstr(out, "--device cpu") &&
              count_lines(out) == 1,
          "rc %d: %s", rc, out);
}
