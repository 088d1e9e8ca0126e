/* Three levels in the runtime: a rank per node runs D device threads, each with its own
 * replica and batch; the node reduces their gradients in memory (LREDUCE), syncs once and
 * broadcasts the result to every replica (LBCAST). BSP on N nodes x D devices computes what
 * one worker computes on the union of the N x D batches, for every scheme, and every replica
 * of every node ends bit-identical; a traced run's local rows are the plan's (bytes, the
 * interconnect's time under emulation) and its edges hold; bad input is one line. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/job.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/trace.h"
#include "runtime/exec/worker.h"
#include "tests/bsp_ref.h"
#include "tests/exp_fixture.h"
#include "tests/test.h"
#include "tests/trace_edges.h"

#define DV_N 576 /* synthetic samples: 2 nodes x 3 devices x 8 x 12, 3 x 2 x 8 x 12 */

static void dv_config(worker_config_t *c, const char *scheme, int devices, const char *out)
{
    bsp_mlp_config(c, scheme, DV_N, out);
    fixture_set(&c->job, "cluster.devices_per_node=%d", devices);
    fixture_set(&c->job, "cluster.interconnect=pcie4");
}

/* The checks of bsp_check_run, for ranks that each hold `devices` replicas: every replica of
 * every node equals rank 0's node parameters bit for bit; those are within the tolerance of
 * one worker on the union of the nodes x devices batches; they moved; and a corrupted value
 * is caught. */
static void dv_check(const worker_config_t *c, const char *out, int nodes, int devices,
                     const char *what)
{
    int64_t n, n0, at = 0;
    float *ref = bsp_reference(c, nodes * devices, c->job.iterations, &n);
    float *r0 = bsp_read_node_replicas(out, nodes, devices, n, what);
    double worst = bsp_worst_error(r0, ref, n, &at);
    CHECK(worst <= 1.0, "%s: parameter %lld is %.9g, one worker %.9g (%.2f x tol)", what,
          (long long)at, r0[at], ref[at], worst);
    float *init = bsp_reference(c, nodes * devices, 0, &n0);
    CHECK(bsp_worst_error(r0, init, n, &at) > 100.0, "%s: parameters did not move", what);
    free(init);
    /* the union matters: one worker on the nodes' batches alone (devices ignored) differs */
    float *fewer = bsp_reference(c, nodes, c->job.iterations, &n0);
    CHECK(bsp_worst_error(r0, fewer, n, &at) > 1.0, "%s: as if one device per node", what);
    free(fewer);
    r0[n / 2] += 1e-3f + 1e-2f * fabsf(r0[n / 2]);
    CHECK(bsp_worst_error(r0, ref, n, &at) > 1.0 && at == n / 2,
          "%s: a corrupted parameter went unseen", what);
    printf("%s: worst parameter at %.3f of the tolerance\n", what, worst);
    free(r0);
    free(ref);
}

static void dv_bsp_case(const char *scheme, int nodes, int devices)
{
    char out[600], what[128];
    snprintf(out, sizeof out, "%s/p-%d-%d", test_tmpdir(), nodes, devices);
    snprintf(what, sizeof what, "%s on %d nodes x %d devices", scheme, nodes, devices);
    worker_config_t c;
    dv_config(&c, scheme, devices, out);
    int rc = bsp_launch(&c, nodes);
    REQUIRE(rc == 0, "%s: job exited %d", what, rc);
    dv_check(&c, out, nodes, devices, what);
}

TEST(devices_runtime_bsp_ps_equals_one_worker)
{
    dv_bsp_case("ps", 2, 2);
    dv_bsp_case("ps+wfbp", 2, 3);
}

TEST(devices_runtime_bsp_sfb_equals_one_worker)
{
    /* the node's factors are its devices' stacked: K = devices x batch rows */
    dv_bsp_case("sfb+wfbp", 2, 2);
    dv_bsp_case("sfb+wfbp", 3, 2);
}

TEST(devices_runtime_bsp_allreduce_equals_one_worker)
{
    dv_bsp_case("allreduce+wfbp", 2, 2);
    dv_bsp_case("allreduce", 3, 2); /* no overlap: every sync after the last BWD */
}

TEST(devices_runtime_bsp_hybrid_equals_one_worker)
{
    dv_bsp_case("hybrid", 2, 2);
    dv_bsp_case("hybrid3", 2, 3);
}

TEST(devices_runtime_one_node_equals_one_worker)
{
    /* one node: no network sync in the plan; the local reduce, the node's own update of the
     * mean and the local broadcast are the whole sync, whatever the scheme */
    dv_bsp_case("ps", 1, 2);
    dv_bsp_case("ps+wfbp", 1, 3);
    dv_bsp_case("sfb+wfbp", 1, 2);
    dv_bsp_case("allreduce+wfbp", 1, 2);
    dv_bsp_case("hybrid3", 1, 2);
}

TEST(devices_runtime_bucketed_allreduce_equals_one_worker)
{
    /* one ring over a bucket of several units, each reduced locally first */
    char out[600];
    snprintf(out, sizeof out, "%s/bk", test_tmpdir());
    worker_config_t c;
    dv_config(&c, "allreduce+wfbp", 2, out);
    fixture_set(&c.job, "allreduce_bucket_mb=64");
    REQUIRE(bsp_launch(&c, 2) == 0);
    dv_check(&c, out, 2, 2, "allreduce in one bucket on 2 nodes x 2 devices");
}

TEST(devices_runtime_ssp_replicas_agree)
{
    /* SSP(2): devices may compute while a local broadcast writes their replica (under its
     * lock); after the last broadcast every replica holds the node's values */
    char out[600];
    snprintf(out, sizeof out, "%s/ssp", test_tmpdir());
    worker_config_t c;
    dv_config(&c, "ps+wfbp", 2, out);
    fixture_set(&c.job, "consistency=ssp:2");
    fixture_set(&c.job, "iterations=12");
    REQUIRE(bsp_launch(&c, 2) == 0);
    int64_t n = 235146; /* models/mlp.net */
    float *r0 = bsp_read_params(out, 0, n);
    REQUIRE(r0);
    int finite = 1;
    for (int64_t i = 0; i < n; i++) finite &= isfinite(r0[i]) != 0;
    CHECK(finite, "non-finite parameters under SSP(2)");
    for (int r = 0; r < 2; r++)
        for (int d = 0; d < 2; d++) {
            char pre[700];
            snprintf(pre, sizeof pre, "%s.%d", out, r);
            float *p = d == 0 ? bsp_read_params(out, r, n) : bsp_read_params(pre, d, n);
            REQUIRE(p, "rank %d device %d", r, d);
            CHECK(memcmp(p, r0, (size_t)n * sizeof *p) == 0, "rank %d device %d differs", r, d);
            free(p);
        }
    free(r0);
}

TEST(devices_runtime_trace_local_rows_and_edges)
{
    /* 2 nodes x 2 devices, emulated compute, an interconnect of 8 Gbit/s (a byte per ns) and
     * 100 us: every unit's LREDUCE and LBCAST row per node and iteration, with the plan's
     * bytes, lasting at least the interconnect's time; one compute row per node, op and
     * iteration (the node's instance spans its devices); every local edge of the plan holds
     * in the merged trace, and the walk can fail */
    const int nodes = 2, T = 6;
    char prof[600], trace[600], merged[700], err[1024];
    snprintf(prof, sizeof prof, "%s/mlp.csv", test_tmpdir());
    snprintf(trace, sizeof trace, "%s/tr", test_tmpdir());
    snprintf(merged, sizeof merged, "%s.csv", trace);
    fixture_write_file(prof, "layer,batch,fwd_ns,bwd_ns\nfc1,8,1000000,2000000\nrelu1,8,0,0\n"
                             "fc2,8,1000000,2000000\nrelu2,8,0,0\nfc3,8,500000,1000000\n"
                             "loss,8,0,0\n");
    worker_config_t c;
    dv_config(&c, "hybrid3", 2, NULL);
    fixture_set(&c.job, "compute=emulate");
    fixture_set(&c.job, "profile=%s", prof);
    fixture_set(&c.job, "iterations=%d", T);
    fixture_set(&c.job, "cluster.intra_gbps=8");
    fixture_set(&c.job, "cluster.intra_latency_us=100");
    fixture_set(&c.job, "probe=no");
    c.trace_prefix = trace;
    REQUIRE(bsp_launch(&c, nodes) == 0);

    experiment_t e = c.job;
    model_t m;
    REQUIRE(model_load(&m, e.model_path, err, sizeof err) == 0, "%s", err);
    cluster_t cl;
    plan_opts_t po;
    plan_t p;
    job_config(&e, 0, NULL, &cl, &po);
    REQUIRE(plan_build_opts(&p, &m, &cl, &po, err, sizeof err) == 0, "%s", err);
    int checked = 0;
    CHECK_EQ_I64(trace_edge_violations(&p, merged, true, 0, "real", &checked), 0);
    CHECK(checked > 10 * T, "only %d edges checked", checked);
    CHECK_EQ_I64(trace_edge_violations(&p, merged, true, checked / 2, "moved", &checked), 1);

    FILE *f = fopen(merged, "r");
    REQUIRE(f, "no merged trace %s", merged);
    int n_local[2] = {0, 0}, n_fwd = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        trace_rec_t r;
        if (trace_rec_parse(line, &r) != 0) continue;
        if (!strcmp(r.op, "FWD")) n_fwd++;
        int k = !strcmp(r.op, "LREDUCE") ? 0 : !strcmp(r.op, "LBCAST") ? 1 : -1;
        if (k < 0) continue;
        n_local[k]++;
        int u = -1;
        for (int i = 0; i < p.n_units; i++)
            if (p.units[i].layer >= 0 && !strcmp(m.layers[p.units[i].layer].name, r.layer)) u = i;
        REQUIRE(u >= 0, "%s row of layer %s", r.op, r.layer);
        int64_t want = k == 0 ? p.units[u].lreduce_bytes : p.units[u].lbcast_bytes;
        CHECK_EQ_I64(r.bytes, want);
        int64_t ns = 100000 + want; /* latency + bytes at a byte per ns */
        CHECK(r.t_end_ns - r.t_start_ns >= ns, "%s of %s, node %d, iteration %d: %lld ns, the "
              "interconnect takes %lld", r.op, r.layer, r.node, r.iteration,
              (long long)(r.t_end_ns - r.t_start_ns), (long long)ns);
    }
    fclose(f);
    CHECK_EQ_I64(n_local[0], nodes * T * 3); /* the mlp's 3 units */
    CHECK_EQ_I64(n_local[1], nodes * T * 3);
    CHECK_EQ_I64(n_fwd, nodes * T * 3);
    plan_fini(&p);
    model_fini(&m);
}

/* poseidon train with args: its exit status, and its output's lines that start with
 * "poseidon train:" (the error lines) in *lines. */
static int dv_train(char *out, size_t outlen, int *lines, const char *args)
{
    int rc = test_run(out, outlen, "%s/poseidon train --insecure --job-out none --model "
                      "models/mlp.net --data synthetic --no-eval %s 2>&1",
                      test_build_dir(), args);
    *lines = 0;
    for (const char *s = out; (s = strstr(s, "poseidon train:")); s++) (*lines)++;
    return rc;
}

TEST(devices_runtime_bad_input_is_one_line)
{
    char out[8192];
    int lines;
    /* 2 nodes x 64 devices x batch 8 need 1024 samples */
    int rc = dv_train(out, sizeof out, &lines, "--workers 2 --devices-per-node 64 --batch 8 "
                      "--synthetic-n 512 --iterations 2 --set cluster.interconnect=pcie4");
    CHECK(rc == 2 && lines == 1 && strstr(out, "devices_per_node = 64"), "rc %d, %d lines: %s",
          rc, lines, out);
    /* no interconnect for 2 devices in a file (on the command line, CPU devices take the
     * host's memory for one) */
    char exp[700];
    snprintf(exp, sizeof exp, "%s/job.exp", test_tmpdir());
    char model[PATH_MAX];
    REQUIRE(realpath("models/mlp.net", model));
    char text[PATH_MAX + 256];
    snprintf(text, sizeof text, "model = %s\ndata = synthetic\nbatch = 8\niterations = 2\n"
                                "cluster = defaults\ncluster.nodes = 2\n"
                                "cluster.devices_per_node = 2\n", model);
    fixture_write_file(exp, text);
    rc = test_run(out, sizeof out, "%s/poseidon train %s --insecure --job-out none 2>&1",
                  test_build_dir(), exp);
    lines = 0;
    for (const char *s = out; (s = strstr(s, "poseidon train:")); s++) lines++;
    CHECK(rc == 2 && lines == 1 && strstr(out, "interconnect"), "rc %d, %d lines: %s", rc, lines,
          out);
    /* a launcher that started one rank per device: 2 nodes x 2 devices, 4 ranks */
    snprintf(text, sizeof text, "model = %s\ndata = synthetic\nbatch = 8\niterations = 2\n"
                                "cluster = defaults\ncluster.nodes = 2\n"
                                "cluster.devices_per_node = 2\n"
                                "cluster.interconnect = pcie4\n", model);
    fixture_write_file(exp, text);
    rc = test_run(out, sizeof out, "RANK=3 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "
                  "%s/poseidon train %s --insecure --job-out none 2>&1", test_build_dir(), exp);
    lines = 0;
    for (const char *s = out; (s = strstr(s, "poseidon train:")); s++) lines++;
    CHECK(rc == 2 && lines == 1 && strstr(out, "2 nodes x 2 devices") &&
              strstr(out, "one rank per node"), "rc %d, %d lines: %s", rc, lines, out);
}
