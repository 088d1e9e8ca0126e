/* The job: one configuration of an experiment becomes a cluster and plan options in one
 * place (core/job.h), and the experiment a run writes reads back as exactly that job. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/kvfile.h"
#include "core/model.h"
#include "core/plan.h"
#include "tests/exp_fixture.h"
#include "tests/test.h"

/* Fields of two clusters that differ (the file path aside), as text; "" when none. */
static void cluster_diff(const cluster_t *a, const cluster_t *b, char *out, size_t len)
{
    out[0] = 0;
#define FIELD(f, fmt)                                                                           \
    if (a->f != b->f)                                                                           \
    snprintf(out + strlen(out), len - strlen(out), " " #f " " fmt " != " fmt, a->f, b->f)
    FIELD(nodes, "%d");
    FIELD(devices_per_node, "%d");
    FIELD(nic_Bps, "%.17g");
    FIELD(nic_efficiency, "%.17g");
    FIELD(lat_ns, "%" PRId64);
    FIELD(core_Bps, "%.17g");
    FIELD(intra_Bps, "%.17g");
    FIELD(intra_lat_ns, "%" PRId64);
    FIELD(host_staging, "%d");
    FIELD(ps_shards, "%d");
    FIELD(server_Bps, "%.17g");
    FIELD(device.peak_flops, "%.17g");
    FIELD(device.mem_Bps, "%.17g");
    FIELD(device.eff_conv, "%.17g");
    FIELD(device.eff_fc, "%.17g");
    FIELD(device.launch_ns, "%" PRId64);
    FIELD(device.peak_bf16_flops, "%.17g");
    FIELD(device.peak_fp16_flops, "%.17g");
    FIELD(straggler_sigma, "%.17g");
    FIELD(jitter_sigma, "%.17g");
    FIELD(n_speed, "%d");
    FIELD(nodes_per_rack, "%d");
    FIELD(rack_uplink_Bps, "%.17g");
    FIELD(oversubscription, "%.17g");
    FIELD(n_nic, "%d");
#undef FIELD
    if (strcmp(a->device.name, b->device.name))
        snprintf(out + strlen(out), len - strlen(out), " device %s != %s", a->device.name,
                 b->device.name);
    for (int i = 0; i < a->n_nic && i < b->n_nic; i++)
        if (a->nic_first[i] != b->nic_first[i] || a->nic_last[i] != b->nic_last[i] ||
            a->nic_line_Bps[i] != b->nic_line_Bps[i])
            snprintf(out + strlen(out), len - strlen(out), " nic_gbps_node line %d", i);
    for (int i = 0; i < a->n_speed && i < b->n_speed; i++)
        if (a->speed_node[i] != b->speed_node[i] || a->speed_factor[i] != b->speed_factor[i])
            snprintf(out + strlen(out), len - strlen(out), " speed line %d", i);
}

/* plan_print's text of the plan of (m, c, po). Owned by the caller. */
static char *plan_text(const model_t *m, const cluster_t *c, const plan_opts_t *po)
{
    plan_t p;
    char err[1024];
    REQUIRE(plan_build_opts(&p, m, c, po, err, sizeof err) == 0, "%s", err);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    REQUIRE(f);
    plan_print(&p, f, 1);
    fclose(f);
    plan_fini(&p);
    return buf;
}

/* An experiment on GoogLeNet and the 40 GbE Titan X cluster, then `extra`. */
static const char *job_text(const char *extra)
{
    return fixture_exp_text("googlenet", extra);
}

TEST(job_config_takes_the_sweep_point_and_the_measured_link)
{
    experiment_t e;
    model_t m;
    fixture_load_exp(&e, &m, job_text("sweep_nodes = 2,4\nsweep_gbps = 10\n"
                                      "sweep_schemes = ps,allreduce+wfbp\n"
                                      "allreduce_bucket_mb = 2\n"));
    cluster_t c;
    plan_opts_t po;
    /* configuration 3: scheme-major, then gbps, then nodes -> allreduce+wfbp on 4 nodes */
    job_config(&e, 3, NULL, &c, &po);
    CHECK_EQ_I64(c.nodes, 4);
    CHECK(c.nic_Bps == 10e9 / 8, "nic %g", c.nic_Bps);
    CHECK(po.scheme.base == SCHEME_ALLREDUCE && po.scheme.wfbp, "scheme");
    CHECK_EQ_I64(po.allreduce_bucket_bytes, 2 << 20);
    CHECK_EQ_I64(po.batch, e.batch);
    CHECK_EQ_I64(po.kv_block_bytes, e.kv_block_bytes);
    double eff = c.nic_efficiency;
    CHECK(eff == e.cluster.nic_efficiency, "efficiency");
    /* a measured link replaces bandwidth (as goodput) and latency, settled
     * (job_link_settle), nothing else */
    job_link_t link = {.bw_Bps = 117.25e6, .lat_ns = 3 * c.lat_ns};
    cluster_t cm;
    job_config(&e, 3, &link, &cm, &po);
    job_link_t settled = job_link_settle(&c, link);
    CHECK(cm.nic_Bps == settled.bw_Bps && cm.nic_efficiency == 1.0 && cm.lat_ns == settled.lat_ns,
          "link not applied: %g %g %lld", cm.nic_Bps, cm.nic_efficiency, (long long)cm.lat_ns);
    CHECK(cm.nic_Bps == 125e6 && cm.lat_ns == c.lat_ns, "settled to %g B/s, %lld ns", cm.nic_Bps,
          (long long)cm.lat_ns);
    cm.nic_Bps = c.nic_Bps;
    cm.nic_efficiency = c.nic_efficiency;
    cm.lat_ns = c.lat_ns;
    char diff[1024];
    cluster_diff(&c, &cm, diff, sizeof diff);
    CHECK(!diff[0], "the link changed more:%s", diff);
    model_fini(&m);
}

TEST(job_written_experiment_reads_back_the_same_job)
{
    experiment_t e;
    model_t m;
    fixture_load_exp(&e, &m, job_text(
                     "sweep_nodes = 3,5\nsweep_schemes = hybrid,ps+wfbp\nconsistency = ssp:2\n"
                     "kv_block_mb = 0.3\nkv_placement = round_robin\nallreduce_bucket_mb = 1.5\n"
                     "hybrid_rule = layer\n"
                     "iterations = 7\nwarmup = 2\nseed = 99\ndata = synthetic\nlr = 0.123\n"
                     "cluster.straggler_sigma = 0.07\ncluster.speed = 1:0.8\n"
                     "cluster.speed = 4:0.6\ncluster.peak_tflops = 1.7\ncluster.core_gbps = 33.3\n"
                     "cluster.devices_per_node = 2\ncluster.intra_gbps = 97.3\n"
                     "cluster.intra_latency_us = 3.3\ncluster.host_staging = yes\n"
                     "cluster.nodes_per_rack = 1\ncluster.oversubscription = 2.5\n"
                     "cluster.nic_gbps_node = 1-2:7.3\ncluster.nic_gbps_node = 0:11\n"));
    /* a probe's odd figures, as a real run would have them */
    job_link_t link = {.bw_Bps = 117254913.73, .lat_ns = 48311};
    for (int i = 0; i < experiment_config_count(&e); i++) {
        cluster_t c;
        plan_opts_t po;
        job_config(&e, i, &link, &c, &po);
        char path[600], err[2048];
        snprintf(path, sizeof path, "%s/run%d.exp", test_tmpdir(), i);
        FILE *f = fopen(path, "w");
        REQUIRE(f);
        REQUIRE(experiment_write(&e, i, &c, "a test run\nsecond line", f) == 0);
        fclose(f);

        experiment_t *back = xmalloc(sizeof *back);
        REQUIRE(experiment_load(back, path, err, sizeof err) == 0, "%s", err);
        CHECK_EQ_I64(experiment_config_count(back), 1);
        cluster_t c2;
        plan_opts_t po2;
        job_config(back, 0, NULL, &c2, &po2);
        char diff[2048];
        cluster_diff(&c, &c2, diff, sizeof diff);
        CHECK(!diff[0], "config %d: the cluster read back differs:%s", i, diff);
        CHECK(po.scheme.base == po2.scheme.base && po.scheme.wfbp == po2.scheme.wfbp &&
                  po.staleness == po2.staleness && po.batch == po2.batch &&
                  po.kv_block_bytes == po2.kv_block_bytes &&
                  po.allreduce_bucket_bytes == po2.allreduce_bucket_bytes &&
                  po.kv_placement == po2.kv_placement && po.hybrid_rule == po2.hybrid_rule &&
                  po.hybrid_rule == HYBRID_RULE_LAYER,
              "config %d: plan options differ", i);
        CHECK(back->iterations == 7 && back->warmup == 2 && back->seed == 99 &&
                  back->train.lr == 0.123 && !strcmp(back->train.data, "synthetic"),
              "config %d: job keys differ", i);
        char *a = plan_text(&m, &c, &po), *b = plan_text(&m, &c2, &po2);
        CHECK(!strcmp(a, b), "config %d: the plans differ", i);
        free(a);
        free(b);

        /* the comparison can fail: one changed digit of the bandwidth is seen */
        char *text = kv_read_file(path);
        REQUIRE(text);
        char *at = strstr(text, "cluster.nic_gbps = ");
        REQUIRE(at);
        at += strlen("cluster.nic_gbps = ");
        *at = *at == '9' ? '8' : (char)(*at + 1);
        fixture_write_file(path, text);
        free(text);
        REQUIRE(experiment_load(back, path, err, sizeof err) == 0, "%s", err);
        job_config(back, 0, NULL, &c2, &po2);
        cluster_diff(&c, &c2, diff, sizeof diff);
        CHECK(strstr(diff, "nic_Bps") != NULL, "config %d: a corrupted bandwidth was not seen", i);
        free(back);
    }
    model_fini(&m);
}

TEST(job_overrides_use_the_keys_units)
{
    /* the shorthand flags of poseidon train are these overrides: MB, not bytes; 'tensor' */
    experiment_t e;
    experiment_defaults(&e);
    char err[1024];
    REQUIRE(experiment_override_as(&e, "kv_block_mb=tensor", "--kv-block-mb", err, sizeof err) == 0,
            "%s", err);
    CHECK(e.kv_block_bytes == KV_BLOCK_WHOLE_TENSOR, "tensor");
    REQUIRE(experiment_override_as(&e, "kv_block_mb=0.5", "--kv-block-mb", err, sizeof err) == 0);
    CHECK_EQ_I64(e.kv_block_bytes, 512 << 10);
    REQUIRE(experiment_override_as(&e, "allreduce_bucket_mb=2", "--bucket-mb", err, sizeof err) == 0);
    CHECK_EQ_I64(e.allreduce_bucket_bytes, 2 << 20);
    CHECK(experiment_override_as(&e, "batch=0", "--batch", err, sizeof err) == -1, "batch 0");
    CHECK(!strncmp(err, "--batch: expected batch", 23), "message names the flag: %s", err);
    REQUIRE(experiment_override_as(&e, "cluster.nodes=6", "--workers", err, sizeof err) == 0);
    CHECK(e.nodes[0] == 6 && e.n_nodes == 1, "the node sweep follows the cluster: %d", e.nodes[0]);
    CHECK_EQ_I64(e.batch, 32); /* one default batch, the simulator's */
    CHECK(experiment_check_overrides(&e, err, sizeof err) == -1 && strstr(err, "model"),
          "a job without a model: %s", err);
}

/* The probe's noise does not reach the plan: within 4x of the description, the description;
 * beyond, the nearest power of 2 (Gbit/s from 1, microseconds from 1); so measurements
 * within a factor of sqrt(2) of a grid point give one link. */
TEST(job_link_settle_holds_noise_against_the_description)
{
    cluster_t d;
    memset(&d, 0, sizeof d);
    d.nic_Bps = 10e9 / 8;
    d.nic_efficiency = 0.9;
    d.lat_ns = 20000;
    double goodput = d.nic_Bps * d.nic_efficiency;
    job_link_t s = job_link_settle(&d, (job_link_t){.bw_Bps = goodput * 3.5, .lat_ns = 70000});
    CHECK(s.bw_Bps == goodput && s.lat_ns == 20000, "within 4x: %g %lld", s.bw_Bps,
          (long long)s.lat_ns);
    s = job_link_settle(&d, (job_link_t){.bw_Bps = goodput / 3.9, .lat_ns = 5100});
    CHECK(s.bw_Bps == goodput && s.lat_ns == 20000, "within 4x below: %g %lld", s.bw_Bps,
          (long long)s.lat_ns);
    /* beyond (on a 40 GbE description): 180..354 MB/s -> 250 MB/s (2 Gbit/s); 1.3 ms -> 1.024 ms */
    d.nic_Bps = 40e9 / 8;
    for (double mbs = 180; mbs < 354; mbs += 29) {
        s = job_link_settle(&d, (job_link_t){.bw_Bps = mbs * 1e6, .lat_ns = 1300000});
        CHECK(s.bw_Bps == 250e6 && s.lat_ns == 1024000, "%g MB/s -> %g, %lld ns", mbs,
              s.bw_Bps, (long long)s.lat_ns);
    }
    s = job_link_settle(&d, (job_link_t){.bw_Bps = 400e9 / 8, .lat_ns = 0});
    CHECK(s.bw_Bps == 512e9 / 8 && s.lat_ns == 0, "400 Gbit/s -> %g, %lld", s.bw_Bps,
          (long long)s.lat_ns);
}
