/* Profile tests: the CSV `poseidon profile` writes is the one the simulator reads, layer for
 * layer, and the timings it holds are sane (every layer timed, GEMM layers with a bare-GEMM
 * comparison). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cluster.h"
#include "core/model.h"
#include "core/plan.h"
#include "runtime/profile.h"
#include "sim/compute.h"
#include "test.h"

static const char *s_net = "input data shape=2x8x8\nconv c1 out=4 kernel=3 pad=1\nrelu r1\n"
                           "pool p1 op=max kernel=2 stride=2\nfc f1 out=5\n"
                           "softmax_loss loss in=f1\n";

TEST(test_profile_csv_reads_back_in_simulator)
{
    char err[512];
    model_t m;
    REQUIRE(model_parse(&m, "tiny.net", s_net, strlen(s_net), err, sizeof err) == 0, "%s", err);
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c, "%s", err);
    int batch = 4;
    profile_row_t *rows = calloc((size_t)m.n_layers, sizeof *rows);
    REQUIRE(profile_run(&m, batch, 1, 3, c, 7, rows, err, sizeof err) == 0, "%s", err);
    for (int l = 1; l < m.n_layers; l++) {
        CHECK(rows[l].fwd_ns > 0);
        CHECK(rows[l].bwd_ns > 0);
        bool gemm = m.layers[l].type == LAYER_CONV || m.layers[l].type == LAYER_FC;
        CHECK(gemm ? rows[l].gemm_fwd_ns > 0 && rows[l].gemm_bwd_ns > 0
                   : rows[l].gemm_fwd_ns == 0 && rows[l].gemm_bwd_ns == 0);
    }

    char path[] = "/tmp/poseidon-profile-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp failed");
    FILE *f = fdopen(fd, "w");
    profile_write_csv(f, &m, batch, rows, false);
    fclose(f);

    /* one node of one device at the profile's batch: unit times are the profile's sums */
    cluster_t cl;
    cluster_init(&cl);
    cl.nodes = 1;
    cl.devices_per_node = 1;
    plan_t p;
    REQUIRE(plan_build(&p, &m, &cl, (scheme_t){SCHEME_PS, true}, 0, batch, 0, err, sizeof err) ==
                0,
            "%s", err);
    sim_times_t t;
    int rc = sim_times_profile(&t, &p, path, err, sizeof err);
    CHECK(rc == 0);
    if (rc) fprintf(stderr, "%s\n", err);
    if (rc == 0) {
        int64_t fwd = 0, bwd = 0, want_fwd = 0, want_bwd = 0;
        for (int u = 0; u < t.n_units; u++) fwd += t.fwd_ns[u], bwd += t.bwd_ns[u];
        for (int l = 1; l < m.n_layers; l++) want_fwd += rows[l].fwd_ns, want_bwd += rows[l].bwd_ns;
        CHECK(fwd == want_fwd);
        CHECK(bwd == want_bwd);
        sim_times_fini(&t);
    }
    plan_fini(&p);
    unlink(path);
    free(rows);
    compute_destroy(&c);
    model_fini(&m);
}
