/* Cluster and experiment files: values, defaults, sweeps, and each class of bad input
 * reported with its file and line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/experiment.h"
#include "test.h"
#include "tests/exp_fixture.h"

TEST(cluster_parses_keys_comments_and_defaults)
{
    const char *text = "# a cluster\n"
                       "nodes = 16   # trailing comment\n"
                       "\n"
                       "nic_gbps = 10\n"
                       "nic_efficiency = 0.5\n"
                       "latency_us = 2.5\n"
                       "device = k20\n"
                       "speed = 3:0.5\n"
                       "ps_shards = 4\n";
    cluster_t c;
    char err[512];
    REQUIRE(cluster_parse(&c, "c.cluster", text, err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(c.nodes, 16);
    CHECK_EQ_I64(c.devices_per_node, 1);
    CHECK_NEAR(c.nic_Bps, 10e9 / 8, 0, 1e-12);
    CHECK_NEAR(cluster_nic_Bps(&c), 0.5 * 10e9 / 8, 0, 1e-12);
    CHECK_EQ_I64(c.lat_ns, 2500);
    CHECK(!strcmp(c.device.name, "k20"), "device %s", c.device.name);
    CHECK_NEAR(c.device.peak_flops, 3.52e12, 0, 1e-12);
    CHECK_NEAR(cluster_node_speed(&c, 3), 0.5, 0, 0);
    CHECK_NEAR(cluster_node_speed(&c, 2), 1.0, 0, 0);
    CHECK_EQ_I64(cluster_shards(&c), 4);
    cluster_t d;
    REQUIRE(cluster_parse(&d, "d.cluster", "", err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(d.nodes, 1);
    CHECK_EQ_I64(cluster_shards(&d), 1);
    CHECK(!strcmp(d.device.name, "titanx-maxwell"), "default device %s", d.device.name);
}

static void expect_cluster_error(const char *text, const char *where, const char *what)
{
    cluster_t c;
    char err[512] = "";
    int rc = cluster_parse(&c, "bad.cluster", text, err, sizeof err);
    CHECK(rc == -1, "accepted: %s", text);
    CHECK(strstr(err, where) != NULL, "'%s' does not name %s", err, where);
    CHECK(strstr(err, what) != NULL, "'%s' does not say %s", err, what);
}

TEST(cluster_errors_name_file_and_line)
{
    expect_cluster_error("nodes = 4\n\nbogus = 1\n", "bad.cluster:3:", "unknown key 'bogus'");
    expect_cluster_error("nodes = four\n", "bad.cluster:1:", "expected nodes");
    expect_cluster_error("nodes = 0\n", "bad.cluster:1:", "expected nodes");
    expect_cluster_error("# c\nnic_gbps 40\n", "bad.cluster:2:", "expected key = value");
    expect_cluster_error("nic_gbps = -1\n", "bad.cluster:1:", "expected nic_gbps");
    expect_cluster_error("device = tpu\n", "bad.cluster:1:", "expected device");
    expect_cluster_error("nic_efficiency = 1.5\n", "bad.cluster:1:", "nic_efficiency");
    expect_cluster_error("speed = 3\n", "bad.cluster:1:", "NODE:FACTOR");
    expect_cluster_error("nodes = 2\nps_shards = 3\n", "bad.cluster:2:", "ps_shards <= nodes");
    expect_cluster_error("nodes = 2\nspeed = 5:0.5\n", "bad.cluster:2:", "speed node");
    /* racks: the layout names its own line, wherever nodes is set */
    expect_cluster_error("nodes_per_rack = 3\nnodes = 8\n", "bad.cluster:1:",
                         "expected nodes_per_rack dividing the 8 nodes, got 3");
    expect_cluster_error("nodes = 8\nnodes_per_rack = -1\n", "bad.cluster:2:",
                         "expected nodes_per_rack");
    expect_cluster_error("nodes = 8\nrack_uplink_gbps = 10\noversubscription = 4\n",
                         "bad.cluster:3:", "rack_uplink_gbps or oversubscription, not both");
    expect_cluster_error("oversubscription = 4\nrack_uplink_gbps = 10\n", "bad.cluster:2:",
                         "not both");
    expect_cluster_error("oversubscription = 0.5\n", "bad.cluster:1:",
                         "expected oversubscription = a number from 1 to 10000");
    expect_cluster_error("rack_uplink_gbps = 0\n", "bad.cluster:1:", "expected rack_uplink_gbps");
    expect_cluster_error("nic_gbps_node = 3\n", "bad.cluster:1:", "NODE:GBPS or FIRST-LAST:GBPS");
    expect_cluster_error("nic_gbps_node = 3-1:10\n", "bad.cluster:1:", "FIRST <= LAST");
    expect_cluster_error("nic_gbps_node = 1:0\n", "bad.cluster:1:", "Gbit/s from 0.001");
    expect_cluster_error("nodes = 4\nnic_gbps_node = 2-4:10\n", "bad.cluster:2:",
                         "expected nic_gbps_node lines for nodes below 4, got node 4");
}

TEST(cluster_racks_and_per_node_nics)
{
    char err[512];
    cluster_t c;
    /* 32 nodes, 8 per rack, 10 GbE at 90%: the uplink from the ratio is 8 x 10 / 4 Gbit/s */
    REQUIRE(cluster_parse(&c, "r.cluster",
                          "nodes = 32\nnic_gbps = 10\nnic_efficiency = 0.9\nnodes_per_rack = 8\n"
                          "oversubscription = 4\nnic_gbps_node = 5:40\nnic_gbps_node = 8-11:1\n",
                          err, sizeof err) == 0,
            "%s", err);
    CHECK_EQ_I64(cluster_racks(&c), 4);
    CHECK_NEAR(cluster_rack_Bps(&c), 8 * 10e9 / 8 * 0.9 / 4, 0, 1e-12);
    CHECK_NEAR(cluster_node_nic_Bps(&c, 5), 40e9 / 8 * 0.9, 0, 1e-12);
    CHECK_NEAR(cluster_node_nic_Bps(&c, 4), 10e9 / 8 * 0.9, 0, 1e-12);
    for (int n = 8; n <= 11; n++) CHECK_NEAR(cluster_node_nic_Bps(&c, n), 1e9 / 8 * 0.9, 0, 1e-12);
    CHECK_NEAR(cluster_node_nic_Bps(&c, 12), 10e9 / 8 * 0.9, 0, 1e-12);
    /* written and read back: the same keys */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f);
    CHECK(cluster_write(&c, f, "") == 0);
    fclose(f);
    cluster_t d;
    REQUIRE(cluster_parse(&d, "w.cluster", buf, err, sizeof err) == 0, "%s\n%s", err, buf);
    CHECK_EQ_I64(d.nodes_per_rack, 8);
    CHECK_NEAR(d.oversubscription, 4, 0, 0);
    CHECK_EQ_I64(d.n_nic, 2);
    CHECK_NEAR(cluster_node_nic_Bps(&d, 9), cluster_node_nic_Bps(&c, 9), 0, 0);
    CHECK_NEAR(cluster_rack_Bps(&d), cluster_rack_Bps(&c), 0, 0);
    free(buf);
    /* an uplink given in Gbit/s; no ratio and no uplink: ratio 1; a cluster no larger than a
     * rack is one switch */
    REQUIRE(cluster_parse(&c, "u.cluster", "nodes = 16\nnodes_per_rack = 4\nrack_uplink_gbps = 25\n",
                          err, sizeof err) == 0, "%s", err);
    CHECK_NEAR(cluster_rack_Bps(&c), 25e9 / 8, 0, 1e-12);
    REQUIRE(cluster_parse(&c, "o.cluster", "nodes = 16\nnodes_per_rack = 4\n", err, sizeof err) == 0,
            "%s", err);
    CHECK_NEAR(cluster_rack_Bps(&c), 4 * 40e9 / 8, 0, 1e-12);
    REQUIRE(cluster_parse(&c, "s.cluster", "nodes = 4\nnodes_per_rack = 8\n", err, sizeof err) == 0,
            "%s", err);
    CHECK_EQ_I64(cluster_racks(&c), 1);
    CHECK_NEAR(cluster_rack_Bps(&c), 0, 0, 0);
    /* without the keys nothing is written */
    cluster_init(&c);
    buf = NULL;
    f = open_memstream(&buf, &len);
    REQUIRE(f);
    CHECK(cluster_write(&c, f, "") == 0);
    fclose(f);
    CHECK(!strstr(buf, "rack") && !strstr(buf, "nic_gbps_node"), "%s", buf);
    free(buf);
}

TEST(scheme_names_round_trip)
{
    const char *names[] = {"ps", "ps+wfbp", "sfb", "sfb+wfbp", "allreduce", "allreduce+wfbp",
                           "hybrid", "hybrid+none", "hybrid3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        scheme_t s;
        char buf[64];
        REQUIRE(scheme_parse(names[i], &s) == 0, "%s", names[i]);
        CHECK(!strcmp(scheme_name(s, buf, sizeof buf), names[i]), "%s -> %s", names[i], buf);
    }
    scheme_t s;
    CHECK(scheme_parse("hybrid+wfbp", &s) == 0 && s.base == SCHEME_HYBRID && s.wfbp, "");
    CHECK(scheme_parse("ps+fast", &s) == -1, "bad overlap accepted");
    CHECK(scheme_parse("gossip", &s) == -1, "bad base accepted");
}

TEST(experiment_resolves_paths_and_sweeps)
{
    char dir[512], cpath[600], epath[600], err[1024];
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(cpath, sizeof cpath, "%s/c.cluster", dir);
    snprintf(epath, sizeof epath, "%s/e.exp", dir);
    fixture_write_file(cpath, "nodes = 8\nnic_gbps = 40\n");
    fixture_write_file(epath, "model = m.net\ncluster = c.cluster\nconsistency = ssp:2\nbatch = 16\n"
                      "sweep_nodes = 1, 2,4\nsweep_gbps = 40,10\n"
                      "sweep_schemes = ps,hybrid\n");
    experiment_t e;
    REQUIRE(experiment_load(&e, epath, err, sizeof err) == 0, "%s", err);
    char want[700];
    snprintf(want, sizeof want, "%s/m.net", dir);
    CHECK(!strcmp(e.model_path, want), "model path %s", e.model_path);
    CHECK(!strcmp(e.name, "e"), "name %s", e.name);
    CHECK_EQ_I64(e.staleness, 2);
    CHECK_EQ_I64(e.batch, 16);
    CHECK_EQ_I64(e.kv_block_bytes, 4 << 20);
    CHECK_EQ_I64(experiment_config_count(&e), 12);
    cluster_t c;
    scheme_t s;
    experiment_config(&e, 0, &c, &s);
    CHECK(c.nodes == 1 && c.nic_Bps == 40e9 / 8 && s.base == SCHEME_PS, "config 0");
    experiment_config(&e, 11, &c, &s);
    CHECK(c.nodes == 4 && c.nic_Bps == 10e9 / 8 && s.base == SCHEME_HYBRID, "config 11");
    REQUIRE(experiment_override(&e, "cluster.latency_us=7", err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(e.cluster.lat_ns, 7000);
    CHECK(experiment_override(&e, "batch=0", err, sizeof err) == -1, "batch=0 accepted");
    /* warmup and iterations are judged together, after all overrides, in either order */
    REQUIRE(experiment_override(&e, "warmup=6", err, sizeof err) == 0, "%s", err);
    REQUIRE(experiment_override(&e, "iterations=8", err, sizeof err) == 0, "%s", err);
    CHECK(experiment_check_overrides(&e, err, sizeof err) == 0, "%s", err);
    REQUIRE(experiment_override(&e, "iterations=6", err, sizeof err) == 0, "%s", err);
    CHECK(experiment_check_overrides(&e, err, sizeof err) == -1 &&
              strstr(err, "--set: expected warmup < iterations"),
          "warmup 6 of 6 iterations: '%s'", err);
    CHECK(strstr(err, "--set") != NULL, "%s", err);

    /* Without sweeps, the base values make one configuration. */
    fixture_write_file(epath, "model = m.net\ncluster = c.cluster\nscheme = ps+wfbp\n");
    REQUIRE(experiment_load(&e, epath, err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(experiment_config_count(&e), 1);
    experiment_config(&e, 0, &c, &s);
    CHECK(c.nodes == 8 && s.base == SCHEME_PS && s.wfbp, "base config");
}

TEST(experiment_errors_name_file_and_line)
{
    char epath[600], err[1024];
    snprintf(epath, sizeof epath, "%s/e.exp", test_tmpdir());
    struct {
        const char *text, *where, *what;
    } cases[] = {
        {"model = m.net\nscheme = gossip\n", "e.exp:2:", "expected scheme"},
        {"model = m.net\nconsistency = async\n", "e.exp:2:", "expected consistency"},
        {"sweep_nodes = 1,x\n", "e.exp:1:", "expected sweep_nodes"},
        {"cluster = c.cluster\n", "e.exp:1:", "expected a 'model = FILE' line"},
        {"model = m.net\n\n\ncluster = nowhere.cluster\n", "e.exp:4:", "nowhere.cluster"},
        {"model = m.net\nbatch = -3\n", "e.exp:2:", "expected batch"},
        {"model = m.net\nwarmup = 0\n", "e.exp:2:", "expected warmup"},
        {"model = m.net\ncluster = c.cluster\niterations = 3\nwarmup = 3\n", "e.exp:4:",
         "expected warmup < iterations"},
        {"color = blue\n", "e.exp:1:", "unknown key 'color'"},
        {"model = m.net\ncluster.nodes = 4\ncluster = c.cluster\n", "e.exp:2:",
         "expected a 'cluster = FILE' line before 'cluster.nodes'"},
        {"model = m.net\ncluster = c.cluster\ncluster.nic_gbps = fast\n", "e.exp:3:",
         "expected nic_gbps"},
        {"model = m.net\ncluster = defaults\ncluster.ps_shards = 3\n", "e.exp:3:",
         "expected cluster ps_shards <= nodes"},
        {"model = m.net\ncluster = defaults\ncompute = gpu\n", "e.exp:3:", "expected compute"},
        {"model = m.net\ndata = imagenet\n", "e.exp:2:", "expected data"},
        {"model = m.net\nshuffle = maybe\n", "e.exp:2:", "expected shuffle = yes | no"},
        {"model = m.net\nprobe_bytes = 2\n", "e.exp:2:", "expected probe_bytes"},
        /* values the simulator cannot represent over a run are refused where they are read */
        {"model = m.net\ncluster = c.cluster\ncluster.latency_us = 1e300\n", "e.exp:3:",
         "expected latency_us = a number from 0 to 1e+07"},
        {"model = m.net\ncluster = c.cluster\ncluster.jitter_sigma = 50\n", "e.exp:3:",
         "expected jitter_sigma"},
        {"model = m.net\ncluster = c.cluster\ncluster.peak_tflops = 1e-9\n", "e.exp:3:",
         "expected peak_tflops"},
        {"model = m.net\ncluster = c.cluster\ncluster.core_gbps = 1e-9\n", "e.exp:3:",
         "expected core_gbps = 0 or a number"},
        {"model = m.net\ncluster = c.cluster\ncluster.nic_gbps = 1e308\n", "e.exp:3:",
         "expected nic_gbps"},
        {"model = m.net\ncluster = c.cluster\ncluster.speed = 1:0\n", "e.exp:3:",
         "factor from 0.001 to 1000"},
        {"model = m.net\ncluster = c.cluster\ncluster.speed = 9:2\n", "e.exp:3:",
         "expected speed lines for nodes below 2 (the most nodes run), got node 9"},
        {"model = m.net\ncluster = c.cluster\ncluster.devices_per_node = 2\n", "e.exp:3:",
         "expected an interconnect for devices_per_node = 2"},
        {"model = m.net\ncluster = c.cluster\ncluster.interconnect = ethernet\n", "e.exp:3:",
         "expected interconnect = pcie3"},
        {"model = m.net\ncluster = c.cluster\nsweep_nodes = 2,6\ncluster.nodes_per_rack = 4\n",
         "e.exp:4:", "expected nodes_per_rack dividing the 6 nodes, got 4"},
        {"model = m.net\ncluster = c.cluster\ncluster.nic_gbps_node = 0-2:10\n", "e.exp:3:",
         "expected nic_gbps_node lines for nodes below 2 (the most nodes run), got node 2"},
        {"model = m.net\ncluster = c.cluster\nbatch = 4\nbatch = 8\n", "e.exp:4:",
         "expected each key once, got 'batch' again (first at line 3)"},
    };
    char cpath[600];
    snprintf(cpath, sizeof cpath, "%s/c.cluster", test_tmpdir());
    fixture_write_file(cpath, "nodes = 2\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fixture_write_file(epath, cases[i].text);
        experiment_t e;
        err[0] = 0;
        CHECK(experiment_load(&e, epath, err, sizeof err) == -1, "accepted: %s", cases[i].text);
        CHECK(strstr(err, cases[i].where) && strstr(err, cases[i].what), "case %zu: '%s'", i, err);
    }
}
