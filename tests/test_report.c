/* poseidon report: the trace join of `compare` on small hand-written traces (values worked
 * out by hand), its rejection of a malformed trace, and the plot files of `speedup`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "tests/exp_fixture.h"

TEST(report_compare_joins_on_node_iteration_op_layer)
{
    const char *d = test_tmpdir();
    char sim[512], real[512], csv[512], out[4096];
    snprintf(sim, sizeof sim, "%s/sim.csv", d);
    snprintf(real, sizeof real, "%s/real.csv", d);
    snprintf(csv, sizeof csv, "%s/cmp.csv", d);
    /* iteration 0 is skipped; the FWD rows of (0,1,c1) and (1,1,c1) join; the sim's BWD of
     * node 1 has no real twin; APPLY is two blocks summed on the real side */
    fixture_write_file(sim, "node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns\n"
                    "0,0,FWD,c1,-1,0,0,999000000\n"
                    "0,1,FWD,c1,-1,0,0,2000000\n"
                    "1,1,FWD,c1,-1,0,0,4000000\n"
                    "1,1,BWD,c1,-1,0,0,1000000\n"
                    "0,1,APPLY,c1,-1,40,0,3000000\n");
    fixture_write_file(real, "node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns\n"
                     "0,0,FWD,c1,-1,0,0,1000\n"
                     "1,1,FWD,c1,-1,0,100,5000100\n"
                     "0,1,FWD,c1,-1,0,0,3000000\n"
                     "0,1,APPLY,c1,-1,20,0,1000000\n"
                     "0,1,APPLY,c1,-1,20,5,1000005\n");
    int rc = test_run(out, sizeof out, "%s/poseidon report compare %s %s --csv %s", test_build_dir(),
                      sim, real, csv);
    REQUIRE(rc == 0, "exit %d: %s", rc, out);
    FILE *f = fopen(csv, "r");
    REQUIRE(f, "no %s", csv);
    char line[256];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        char op[16];
        int joined, so, ro;
        double p, m, e;
        if (sscanf(line, "%15[^,],%d,%lf,%lf,%lf,%d,%d", op, &joined, &p, &m, &e, &so, &ro) != 7)
            continue;
        if (!strcmp(op, "FWD")) { /* predicted (2+4)/2 = 3 ms, measured (3+5)/2 = 4 ms */
            seen++;
            CHECK_EQ_I64(joined, 2);
            CHECK_NEAR(p, 3.0, 1e-9, 0);
            CHECK_NEAR(m, 4.0, 1e-9, 0);
            CHECK_NEAR(e, -0.25, 1e-9, 0);
            CHECK_EQ_I64(so, 0);
            CHECK_EQ_I64(ro, 0);
        } else if (!strcmp(op, "BWD")) {
            seen++;
            CHECK_EQ_I64(joined, 0);
            CHECK_EQ_I64(so, 1);
        } else if (!strcmp(op, "APPLY")) { /* 3 ms against 1 + 1 ms */
            seen++;
            CHECK_EQ_I64(joined, 1);
            CHECK_NEAR(m, 2.0, 1e-9, 0);
            CHECK_NEAR(e, 0.5, 1e-9, 0);
        }
    }
    fclose(f);
    CHECK_EQ_I64(seen, 3);

    /* a row whose end precedes its start: bad input, named by file and line */
    fixture_write_file(real, "node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns\n"
                     "0,1,FWD,c1,-1,0,10,5\n");
    rc = test_run(out, sizeof out, "%s/poseidon report compare %s %s", test_build_dir(), sim, real);
    CHECK(rc == 2, "exit %d for a malformed trace", rc);
    CHECK(strstr(out, "real.csv:2:") != NULL, "message names the line: %s", out);
}

TEST(report_speedup_writes_png_and_svg)
{
    char out[4096];
    if (test_run(out, sizeof out, "command -v gnuplot") != 0) SKIP("gnuplot not installed");
    const char *d = test_tmpdir();
    char sim[512], prefix[512], path[600];
    snprintf(sim, sizeof sim, "%s/sim.csv", d);
    snprintf(prefix, sizeof prefix, "%s/speedup", d);
    fixture_write_file(sim, "model,nodes,gbps,scheme,consistency,batch,iter_s,images_per_s,speedup,"
                    "sent_MB_per_node,recv_MB_per_node,compute_idle,comm_hidden,"
                    "predicted_sync_s,layers_ps,layers_sfb,layers_allreduce,events,wall_s\n"
                    "m,1,10,ps,bsp,32,1,32,1,0,0,0,1,0,0,0,0,10,0\n"
                    "m,2,10,ps,bsp,32,1.2,53.3,1.667,0,0,0,1,0,0,0,0,10,0\n"
                    "m,1,10,hybrid,bsp,32,1,32,1,0,0,0,1,0,0,0,0,10,0\n"
                    "m,2,10,hybrid,bsp,32,1.05,61,1.905,0,0,0,1,0,0,0,0,10,0\n");
    int rc = test_run(out, sizeof out, "%s/poseidon report speedup %s --out %s", test_build_dir(),
                      sim, prefix);
    REQUIRE(rc == 0, "exit %d: %s", rc, out);
    snprintf(path, sizeof path, "%s.png", prefix);
    CHECK(access(path, R_OK) == 0, "no %s", path);
    snprintf(path, sizeof path, "%s.svg", prefix);
    CHECK(access(path, R_OK) == 0, "no %s", path);
    /* not a simulator CSV: refused */
    fixture_write_file(sim, "a,b\n1,2\n");
    rc = test_run(out, sizeof out, "%s/poseidon report speedup %s --out %s", test_build_dir(), sim,
                  prefix);
    CHECK(rc == 2, "exit %d for a CSV without the simulator's header", rc);
}

TEST(report_train_plots_either_training_csv)
{
    char out[4096];
    if (test_run(out, sizeof out, "command -v gnuplot") != 0) SKIP("gnuplot not installed");
    const char *d = test_tmpdir();
    char csv[512], prefix[512], path[600];
    snprintf(csv, sizeof csv, "%s/train.csv", d);
    /* the single-worker form, then the distributed one (rows without evaluation too) */
    const char *forms[] = {"epoch,loss,train_acc,test_acc,images_per_s\n"
                           "1,0.47,0.83,0.88,900\n2,0.32,0.89,0.89,910\n",
                           "epoch,iteration,loss,train_acc,test_acc,images_per_s,seconds\n"
                           "0.5,100,0.60,0.78,,800,5\n1.000,200,0.47,0.83,0.88,820,10\n"};
    for (int i = 0; i < 2; i++) {
        fixture_write_file(csv, forms[i]);
        snprintf(prefix, sizeof prefix, "%s/sub/train%d", d, i);
        int rc = test_run(out, sizeof out, "%s/poseidon report train %s --out %s",
                          test_build_dir(), csv, prefix);
        CHECK(rc == 0, "form %d: exit %d: %s", i, rc, out);
        snprintf(path, sizeof path, "%s.png", prefix);
        CHECK(access(path, R_OK) == 0, "no %s", path);
    }
    /* a row that is not a training row: file:line */
    fixture_write_file(csv, "epoch,loss,train_acc,test_acc,images_per_s\n1,0.4,0.8,0.8,9\nx\n");
    int rc = test_run(out, sizeof out, "%s/poseidon report train %s --out %s 2>&1",
                      test_build_dir(), csv, prefix);
    CHECK(rc == 2 && strstr(out, "train.csv:3:"), "exit %d: %s", rc, out);
}
