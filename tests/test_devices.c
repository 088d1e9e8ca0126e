/* Three levels in the plan and the simulator: a node of D devices computes D batches in
 * parallel, reduces their gradients over its interconnect before the network sync and
 * broadcasts the result after it (core/plan.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/trace.h"
#include "sim/simrun.h"
#include "test.h"
#include "tests/exp_fixture.h"
#include "tests/trace_edges.h"

/* Images per second of configuration 0 of e. */
static double dev_images_per_s(const experiment_t *e, const model_t *m)
{
    simrun_out_t o;
    cluster_t c;
    char err[1024];
    REQUIRE(simrun_config(e, m, 0, &c, NULL, &o, err, sizeof err) == 0, "%s", err);
    return o.r.images_per_s;
}

/* Simulates configuration 0 of e with a trace at `name` in the test's folder; the trace
 * CSV's path in csv. */
static void dev_sim_trace(const experiment_t *e, const model_t *m, const char *name, char *csv,
                          size_t csv_len)
{
    char prefix[600], err[1024];
    snprintf(prefix, sizeof prefix, "%s/%s", test_tmpdir(), name);
    snprintf(csv, csv_len, "%s.csv", prefix);
    trace_t *tr = trace_open(prefix, err, sizeof err);
    REQUIRE(tr, "%s", err);
    simrun_out_t o;
    cluster_t c;
    REQUIRE(simrun_config(e, m, 0, &c, tr, &o, err, sizeof err) == 0, "%s", err);
    trace_close(&tr);
}

TEST(devices_local_steps_take_latency_plus_bytes_over_the_interconnect)
{
    /* one node of 4 devices at 8 Gbit/s (one byte per ns), 5 us: each unit's local reduce
     * moves 3 copies of its tensor, and so does its broadcast; nothing else syncs */
    experiment_t e;
    model_t m;
    fixture_load_exp(&e, &m, fixture_exp_text("mlp", "batch = 8\niterations = 2\n"
                                                     "cluster.devices_per_node = 4\n"
                                                     "cluster.intra_gbps = 8\n"
                                                     "cluster.intra_latency_us = 5\n"));
    fixture_one_config(&e, 1, 0, "hybrid");
    char csv[700], err[1024];
    dev_sim_trace(&e, &m, "dev", csv, sizeof csv);
    cluster_t c;
    FILE *f = fopen(csv, "r");
    REQUIRE(f, "no %s", csv);
    char line[1024];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        trace_rec_t r;
        if (trace_rec_parse(line, &r) != 0) continue;
        if (strcmp(r.op, "LREDUCE") && strcmp(r.op, "LBCAST")) continue;
        int li = model_find(&m, r.layer);
        REQUIRE(li >= 0, "%s", r.layer);
        int64_t want = 3 * (m.layers[li].weights + m.layers[li].biases) * 4;
        n++;
        if (r.bytes != want || r.t_end_ns - r.t_start_ns != 5000 + want) {
            bad++;
            printf("%s %s: %lld bytes in %lld ns, want %lld in %lld\n", r.op, r.layer,
                   (long long)r.bytes, (long long)(r.t_end_ns - r.t_start_ns), (long long)want,
                   (long long)(5000 + want));
        }
    }
    fclose(f);
    CHECK_EQ_I64(n, 3 * 2 * 2); /* 3 layers x (reduce, broadcast) x 2 iterations */
    CHECK_EQ_I64(bad, 0);
    /* both executors' edges: the simulated trace waits for every local edge of the plan */
    plan_opts_t po;
    plan_t p;
    job_config(&e, 0, NULL, &c, &po);
    REQUIRE(plan_build_opts(&p, &m, &c, &po, err, sizeof err) == 0, "%s", err);
    int checked = 0;
    CHECK_EQ_I64(trace_edge_violations(&p, csv, false, 0, "devices", &checked), 0);
    CHECK(checked > 0, "no edge checked");
    plan_fini(&p);
    model_fini(&m);
}

TEST(devices_four_per_node_give_four_times_the_node_throughput)
{
    /* VGG19 on 8 nodes at 40 GbE over NVLink: a node of 4 devices runs at ~4x one device's
     * images/s (the network and the interconnect hide under the backward pass); over PCIe 3
     * with 8 devices and 10 GbE the local steps and the network show */
    experiment_t e;
    model_t m;
    fixture_load_exp(&e, &m, fixture_exp_text("vgg19", "batch = 32\niterations = 3\n"));
    fixture_one_config(&e, 8, 40, "hybrid");
    double one = dev_images_per_s(&e, &m);
    fixture_set(&e, "cluster.devices_per_node=4");
    fixture_set(&e, "cluster.interconnect=nvlink4");
    double four = dev_images_per_s(&e, &m);
    CHECK(four / one > 3.9 && four / one <= 4.0 + 1e-9, "4 devices: %.3fx", four / one);
    fixture_set(&e, "cluster.devices_per_node=8");
    fixture_set(&e, "cluster.interconnect=pcie3");
    fixture_one_config(&e, 8, 10, "allreduce+wfbp");
    double eight = dev_images_per_s(&e, &m);
    CHECK(eight / one < 7.0, "8 devices over PCIe 3 at 10 GbE all-reduce: %.3fx", eight / one);
    /* and one device per node is the one-level plan: no local op */
    fixture_set(&e, "cluster.devices_per_node=1");
    plan_opts_t po;
    cluster_t c;
    plan_t p;
    char err[1024];
    job_config(&e, 0, NULL, &c, &po);
    REQUIRE(plan_build_opts(&p, &m, &c, &po, err, sizeof err) == 0, "%s", err);
    int local = 0;
    for (int o = 0; o < p.n_ops; o++) local += p.ops[o].res == RES_INTRA;
    CHECK_EQ_I64(local, 0);
    plan_fini(&p);
    model_fini(&m);
}

/* Host staging (GPU nodes that sync from host memory): per unit, every device copies its
 * gradient out over the interconnect after its backward and gets the synced values back
 * before its next forward. 2 nodes of 1 device, PS: each copy moves the unit's tensor, in
 * latency + bytes / rate; all-reduce the same; SFB copies its factors out and the peer's
 * back; one node (nothing syncs) copies nothing. */
TEST(devices_host_staging_copies_each_unit_out_and_back)
{
    static const struct {
        const char *scheme;
        int nodes;
    } cases[] = {{"ps+wfbp", 2}, {"allreduce+wfbp", 2}, {"sfb+wfbp", 2}, {"ps+wfbp", 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        experiment_t e;
        model_t m;
        fixture_load_exp(&e, &m, fixture_exp_text("mlp", "batch = 8\niterations = 2\n"
                                                         "cluster.host_staging = yes\n"
                                                         "cluster.intra_gbps = 8\n"
                                                         "cluster.intra_latency_us = 5\n"));
        fixture_one_config(&e, cases[k].nodes, 0, cases[k].scheme);
        char name[32], csv[700], err[1024];
        snprintf(name, sizeof name, "st%zu", k);
        dev_sim_trace(&e, &m, name, csv, sizeof csv);
        cluster_t c;
        plan_opts_t po;
        plan_t p;
        job_config(&e, 0, NULL, &c, &po);
        REQUIRE(plan_build_opts(&p, &m, &c, &po, err, sizeof err) == 0, "%s", err);
        FILE *f = fopen(csv, "r");
        REQUIRE(f, "no %s", csv);
        char line[1024];
        int n = 0, bad = 0;
        while (fgets(line, sizeof line, f)) {
            trace_rec_t r;
            if (trace_rec_parse(line, &r) != 0) continue;
            bool out = !strcmp(r.op, "LREDUCE"), in = !strcmp(r.op, "LBCAST");
            if (!out && !in) continue;
            int li = model_find(&m, r.layer);
            REQUIRE(li >= 0, "%s", r.layer);
            int64_t all = (m.layers[li].weights + m.layers[li].biases) * 4, want = all;
            if (!strcmp(cases[k].scheme, "sfb+wfbp")) { /* K = 8 rows of (m + n) floats */
                int64_t factors = 8 * (m.layers[li].out_shape.c + m.layers[li].in_shape.c *
                                       m.layers[li].in_shape.h * m.layers[li].in_shape.w) * 4;
                const plan_unit_t *un = NULL;
                for (int u = 0; u < p.n_units; u++)
                    if (p.units[u].layer == li) un = &p.units[u];
                REQUIRE(un);
                if (un->method == SYNC_SFB) want = factors + m.layers[li].biases * 4;
            }
            n++;
            if (r.bytes != want || r.t_end_ns - r.t_start_ns != 5000 + want) {
                bad++;
                printf("%s %s %s: %lld bytes in %lld ns, want %lld in %lld\n", cases[k].scheme,
                       r.op, r.layer, (long long)r.bytes, (long long)(r.t_end_ns - r.t_start_ns),
                       (long long)want, (long long)(5000 + want));
            }
        }
        fclose(f);
        /* 3 layers x (out, in) x 2 iterations on each node; none on one node */
        CHECK_EQ_I64(n, cases[k].nodes > 1 ? 3 * 2 * 2 * cases[k].nodes : 0);
        CHECK_EQ_I64(bad, 0);
        int checked = 0;
        CHECK_EQ_I64(trace_edge_violations(&p, csv, false, 0, "staging", &checked), 0);
        plan_fini(&p);
        model_fini(&m);
    }
}
