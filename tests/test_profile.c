/* Profile tests: the CSV `poseidon profile` writes is the one the simulator reads, layer for
 * layer, and the timings it holds are sane (every layer timed, GEMM layers with a bare-GEMM
 * comparison). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cluster.h"
#include "core/model.h"
#include "core/plan.h"
#include "runtime/exec/profile.h"
#include "core/unit_times.h"
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
    profile_write_csv(f, &m, batch, rows, PRECISION_FP32, false);
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
    unit_times_t t;
    int rc = unit_times_profile(&t, &p, path, err, sizeof err);
    CHECK(rc == 0);
    if (rc) fprintf(stderr, "%s\n", err);
    if (rc == 0) {
        int64_t fwd = 0, bwd = 0, want_fwd = 0, want_bwd = 0;
        for (int u = 0; u < t.n_units; u++) fwd += t.fwd_ns[u], bwd += t.bwd_ns[u];
        for (int l = 1; l < m.n_layers; l++) want_fwd += rows[l].fwd_ns, want_bwd += rows[l].bwd_ns;
        CHECK(fwd == want_fwd);
        CHECK(bwd == want_bwd);
        unit_times_fini(&t);
    }
    plan_fini(&p);
    unlink(path);
    free(rows);
    compute_destroy(&c);
    model_fini(&m);
}

TEST(unit_times_profile_reader_rejects_bad_rows)
{
    /* the one reader of the profile CSV (the simulator and emulated compute): every bad row
     * names its file and line; a good file is scaled to the plan's batch */
    char err[512];
    model_t m;
    REQUIRE(model_parse(&m, "tiny.net", s_net, strlen(s_net), err, sizeof err) == 0, "%s", err);
    cluster_t cl;
    cluster_init(&cl);
    plan_t p;
    REQUIRE(plan_build(&p, &m, &cl, (scheme_t){SCHEME_PS, true}, 0, 8, 0, err, sizeof err) == 0,
            "%s", err);
    /* a CRLF line and --detail's extra columns read like the rest */
    const char *rows = "c1,4,100,200\r\nr1,4,10,20\np1,4,10,20\nf1,4,50,60,7,8\nloss,4,1,1\n";
    struct {
        const char *text, *what;
    } cases[] = {
        {"layer,batch,fwd_ns,bwd_ns\nc1,4,100\n", ":2: expected layer,batch,fwd_ns,bwd_ns"},
        {"c1,4,100,-1\n", ":1: expected layer,batch"},
        {"c1,0,100,1\n", ":1: expected layer,batch"},
        {"c1,4,2000000000000000,1\n", ":1: expected layer,batch"},
        {"c1,4,100,200x\n", ":1: expected layer,batch"},
        {"nope,4,1,1\n", ":1: expected a layer of tiny, got 'nope'"},
        {"c1,4,100,200\nr1,4,1,1\nc1,4,7,7\n", ":3: expected one row per layer, got a second "
                                              "for 'c1' (the first at line 1)"},
        {"c1,4,100,200\n", "expected a row for layer 'r1'"},
    };
    char path[600];
    snprintf(path, sizeof path, "%s/prof.csv", test_tmpdir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(path, "w");
        REQUIRE(f);
        fputs(cases[i].text, f);
        fclose(f);
        unit_times_t t;
        err[0] = 0;
        CHECK(unit_times_profile(&t, &p, path, err, sizeof err) == -1, "case %zu accepted", i);
        CHECK(strstr(err, path) && strstr(err, cases[i].what), "case %zu: '%s'", i, err);
    }
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fprintf(f, "# measured elsewhere\nlayer,batch,fwd_ns,bwd_ns\n\n%s", rows);
    fclose(f);
    unit_times_t t;
    REQUIRE(unit_times_profile(&t, &p, path, err, sizeof err) == 0, "%s", err);
    int64_t fwd = 0, bwd = 0;
    for (int u = 0; u < t.n_units; u++) fwd += t.fwd_ns[u], bwd += t.bwd_ns[u];
    CHECK_EQ_I64(fwd, 2 * (100 + 10 + 10 + 50 + 1)); /* batch 4 -> 8 */
    CHECK_EQ_I64(bwd, 2 * (200 + 20 + 20 + 60 + 1));
    CHECK_EQ_I64(unit_times_at_speed(1000, 0.25), 4000);
    unit_times_fini(&t);
    plan_fini(&p);
    model_fini(&m);
}

/* On a GPU the layers are timed by CUDA events on its stream: every layer gets a time, and
 * a pass's layers together take no longer than the whole profile's wall time. */
TEST(profile_cuda_times_every_layer_with_events)
{
    char why[512];
    if (!compute_available(COMPUTE_CUDA, why, sizeof why)) SKIP("cuda backend: %s", why);
    char err[512];
    model_t m;
    REQUIRE(model_load(&m, "models/lenet.net", err, sizeof err) == 0, "%s", err);
    compute_t *c = compute_new(COMPUTE_CUDA, 1, err, sizeof err);
    REQUIRE(c, "%s", err);
    profile_row_t *rows = calloc((size_t)m.n_layers, sizeof *rows);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    REQUIRE(profile_run(&m, 32, 2, 5, c, 7, rows, err, sizeof err) == 0, "%s", err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    int64_t wall = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec), sum = 0;
    for (int l = 1; l < m.n_layers; l++) {
        CHECK(rows[l].fwd_ns > 0 && rows[l].bwd_ns > 0, "layer %s: %lld / %lld ns",
              m.layers[l].name, (long long)rows[l].fwd_ns, (long long)rows[l].bwd_ns);
        sum += rows[l].fwd_ns + rows[l].bwd_ns;
    }
    CHECK(sum < wall, "one pass's layers %lld ns, the 7 passes' wall time %lld ns",
          (long long)sum, (long long)wall);
    free(rows);
    compute_destroy(&c);
    model_fini(&m);
}

/* A profile measured at a half precision says so on its first line, and the simulator reads
 * it as what it is: at face value for a job of that precision. `poseidon profile` refuses a
 * half precision on the CPU (which computes in fp32) in one line. */
TEST(profile_at_bf16_says_so_and_reads_back_at_face_value)
{
    char err[512];
    model_t m;
    REQUIRE(model_parse(&m, "tiny.net", s_net, strlen(s_net), err, sizeof err) == 0, "%s", err);
    profile_row_t *rows = calloc((size_t)m.n_layers, sizeof *rows);
    int64_t want = 0;
    for (int l = 1; l < m.n_layers; l++) rows[l].fwd_ns = 1000 * l, want += 1000 * l;
    char path[600];
    snprintf(path, sizeof path, "%s/bf16.csv", test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    profile_write_csv(f, &m, 4, rows, PRECISION_BF16, false);
    fclose(f);
    char first[64] = "";
    f = fopen(path, "r");
    REQUIRE(f && fgets(first, sizeof first, f));
    fclose(f);
    CHECK(strcmp(first, "# precision = bf16\n") == 0, "first line '%s'", first);
    cluster_t cl;
    cluster_init(&cl);
    cl.nodes = 1;
    plan_t p;
    REQUIRE(plan_build(&p, &m, &cl, (scheme_t){SCHEME_PS, true}, 0, 4, 0, err, sizeof err) == 0,
            "%s", err);
    p.precision = PRECISION_BF16;
    unit_times_t t;
    REQUIRE(unit_times_profile(&t, &p, path, err, sizeof err) == 0, "%s", err);
    int64_t fwd = 0;
    for (int u = 0; u < t.n_units; u++) fwd += t.fwd_ns[u];
    CHECK(fwd == want, "%lld ns, not %lld", (long long)fwd, (long long)want);
    unit_times_fini(&t);
    plan_fini(&p);
    free(rows);
    model_fini(&m);
    char out[2048];
    int rc = test_run(out, sizeof out, "%s/poseidon profile --model models/lenet.net --batch 2 "
                      "--precision bf16 2>&1 | grep -v '^#'", test_build_dir());
    (void)rc;
    CHECK(strstr(out, "--precision bf16 needs --device cuda") &&
              strchr(out, '\n') == strrchr(out, '\n'),
          "%s", out);
}
