/* poseidon report: the trace join of `compare` on small hand-written traces (values worked
 * out by hand), its rejection of a malformed trace, the plot files of `speedup`; the critical
 * path of a trace (core/critpath.h), `timeline`, and every plot kind rendered from the
 * fixtures in tests/data without a gnuplot warning; the reports' CSV reader (columns by name,
 * reports/csv.h) and every subcommand's --help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/critpath.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/trace.h"
#include "core/trace_read.h"
#include "reports/csv.h"
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

/* Rows of a hand-written trace (the fields as a CSV line each). */
static int parse_rows(const char *const *lines, int n, trace_rec_t *rows)
{
    for (int i = 0; i < n; i++)
        if (trace_rec_parse(lines[i], &rows[i]) != 0) return -1;
    return 0;
}

TEST(critpath_rows_follows_the_latest_end_before_each_start)
{
    /* node 1's forward and backward are the longer chain into the push; node 0's backward
     * ends at 30, after node 1's push began at 20, so it cannot be its predecessor */
    const char *lines[] = {
        "0,0,FWD,a,-1,0,0,10",    "0,0,BWD,a,-1,0,10,30",  "1,0,FWD,a,-1,0,0,12",
        "1,0,BWD,a,-1,0,12,20",   "1,0,PUSH,a,0,8,20,50",  "0,0,APPLY,a,-1,0,50,55",
        "0,0,PULL,a,-1,8,55,70",  "0,1,FWD,a,-1,0,75,80",
    };
    trace_rec_t rows[8];
    REQUIRE(parse_rows(lines, 8, rows) == 0, "fixture rows");
    int *path, before;
    int n = critpath_rows(rows, 8, 0, &path, &before);
    int want[] = {2, 3, 4, 5, 6};
    CHECK_EQ_I64(n, 5);
    for (int i = 0; i < n && i < 5; i++) CHECK_EQ_I64(path[i], want[i]);
    CHECK_EQ_I64(before, -1);
    free(path);
    /* iteration 1 is one op, which waited for the PULL of iteration 0 */
    n = critpath_rows(rows, 8, 1, &path, &before);
    CHECK_EQ_I64(n, 1);
    CHECK_EQ_I64(path[0], 7);
    CHECK_EQ_I64(before, 6);
    free(path);
    n = critpath_rows(rows, 8, 5, &path, &before);
    CHECK_EQ_I64(n, 0);
    free(path);
}

/* The plan of tests/data/report_job.exp, which the fixture traces ran. */
static void fixture_job_plan(plan_t *p, model_t *m)
{
    experiment_t e;
    char err[2048];
    REQUIRE(experiment_load(&e, "tests/data/report_job.exp", err, sizeof err) == 0, "%s", err);
    REQUIRE(model_load(m, e.model_path, err, sizeof err) == 0, "%s", err);
    cluster_t c;
    plan_opts_t po;
    job_config(&e, 0, NULL, &c, &po);
    REQUIRE(plan_build_opts(p, m, &c, &po, err, sizeof err) == 0, "%s", err);
}

TEST(critpath_plan_walks_the_edges_of_a_simulated_iteration)
{
    plan_t p;
    model_t m;
    fixture_job_plan(&p, &m);
    trace_rec_t *rows;
    char read_err[1200];
    int n = trace_file_read("tests/data/report_trace_sim.csv", 1, &rows, read_err,
                            sizeof read_err);
    REQUIRE(n > 100, "fixture trace: %d rows: %s", n, n < 0 ? read_err : "");
    int *path, before;
    char err[512];
    int len = critpath_plan(&p, rows, n, 1, &path, &before, err, sizeof err);
    REQUIRE(len > 4, "path of %d ops: %s", len, len < 0 ? err : "");
    /* it ends with the iteration's last op, and in virtual time each op starts the moment
     * the op it waited for ends: no gap anywhere along the path */
    int64_t last = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].iteration == 1 && rows[i].t_end_ns > last) last = rows[i].t_end_ns;
    CHECK_EQ_I64(rows[path[len - 1]].t_end_ns, last);
    for (int i = 1; i < len; i++) {
        CHECK_EQ_I64(rows[path[i - 1]].t_end_ns, rows[path[i]].t_start_ns);
        CHECK_EQ_I64(rows[path[i]].iteration, 1);
    }
    /* the first forward waited for the previous iteration's sync of its layer */
    REQUIRE(before >= 0, "no predecessor before the iteration");
    CHECK_EQ_I64(rows[before].iteration, 0);
    CHECK(!strcmp(rows[path[0]].op, "FWD"), "path starts with %s", rows[path[0]].op);
    CHECK_EQ_I64(rows[before].t_end_ns, rows[path[0]].t_start_ns);
    free(path);
    /* a row the plan does not have: refused, not walked */
    snprintf(rows[3].layer, sizeof rows[3].layer, "no_such_layer");
    len = critpath_plan(&p, rows, n, 1, &path, &before, err, sizeof err);
    CHECK(len == -1 && strstr(err, "not an op of the plan"), "got %d: %s", len, err);
    free(path);
    free(rows);
    plan_fini(&p);
    model_fini(&m);
}

/* Runs a report command; it must exit 0 with no gnuplot warning, and the files named must
 * be non-empty images (PNG magic, or an <svg> element with drawing in it). */
static void render_ok(const char *what, const char *cmd, const char *const *files, int n_files)
{
    char out[16384];
    int rc = test_run(out, sizeof out, "%s 2>&1", cmd);
    CHECK(rc == 0, "%s: exit %d: %s", what, rc, out);
    CHECK(!strcasestr(out, "warning"), "%s: gnuplot warned: %s", what, out);
    for (int i = 0; i < n_files; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f) {
            CHECK(0, "%s: no %s", what, files[i]);
            continue;
        }
        static char buf[1 << 20];
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        int png = strstr(files[i], ".png") != NULL;
        if (png) {
            CHECK(len > 2000 && !memcmp(buf, "\x89PNG", 4), "%s: %s is not a drawn PNG (%zu bytes)",
                  what, files[i], len);
        } else {
            int shapes = 0;
            for (const char *s = buf; (s = strstr(s, "<path")); s++) shapes++;
            CHECK(strstr(buf, "<svg") && shapes > 5, "%s: %s has %d paths", what, files[i],
                  shapes);
        }
    }
}

TEST(report_renders_every_plot_kind_from_fixtures)
{
    char out[256];
    if (test_run(out, sizeof out, "command -v gnuplot") != 0) SKIP("gnuplot not installed");
    const char *d = test_tmpdir(), *b = test_build_dir();
    char cmd[2048], f1[600], f2[600];
    const char *files[2] = {f1, f2};
    struct {
        const char *what, *gp, *csv, *extra;
    } scripts[] = {
        {"speedup.gp", "reports/speedup.gp", "tests/data/report_scaling.csv", "name='vgg19'"},
        {"bandwidth.gp", "reports/bandwidth.gp", "tests/data/report_bandwidth.csv",
         "name='vgg19-22k'"},
        {"validate.gp", "reports/validate.gp", "tests/data/report_validate.csv", "x=1"},
        {"fat_thin.gp", "reports/fat_thin.gp", "tests/data/report_fat_thin.csv", "model='vgg19'"},
        {"racks.gp", "reports/racks.gp", "tests/data/report_racks.csv", "model='vgg19'"},
    };
    for (int i = 0; i < (int)(sizeof scripts / sizeof scripts[0]); i++) {
        snprintf(f1, sizeof f1, "%s/gp%d.png", d, i);
        snprintf(f2, sizeof f2, "%s/gp%d.svg", d, i);
        snprintf(cmd, sizeof cmd, "gnuplot -e \"csv='%s'; out='%s/gp%d'; %s\" %s", scripts[i].csv,
                 d, i, scripts[i].extra, scripts[i].gp);
        render_ok(scripts[i].what, cmd, files, 2);
    }
    snprintf(f1, sizeof f1, "%s/speedup.png", d);
    snprintf(f2, sizeof f2, "%s/speedup.svg", d);
    snprintf(cmd, sizeof cmd, "%s/poseidon report speedup tests/data/report_scaling.csv --out %s/speedup",
             b, d);
    render_ok("report speedup", cmd, files, 2);
    snprintf(f1, sizeof f1, "%s/train.png", d);
    snprintf(f2, sizeof f2, "%s/train.svg", d);
    snprintf(cmd, sizeof cmd, "%s/poseidon report train tests/data/report_train.csv --out %s/train",
             b, d);
    render_ok("report train", cmd, files, 2);
    snprintf(f1, sizeof f1, "%s/tl.png", d);
    snprintf(cmd, sizeof cmd, "%s/poseidon report timeline tests/data/report_trace_real.csv "
             "--nodes 1 -o %s", b, f1);
    render_ok("report timeline", cmd, files, 1);
    snprintf(f1, sizeof f1, "%s/tl2.svg", d);
    snprintf(cmd, sizeof cmd, "%s/poseidon report timeline tests/data/report_trace_sim.csv "
             "--compare tests/data/report_trace_real.csv --job tests/data/report_job.exp -o %s",
             b, f1);
    render_ok("report timeline --compare", cmd, files, 1);
}

TEST(report_timeline_lists_the_ops_that_differ_most)
{
    char out[16384];
    if (test_run(out, sizeof out, "command -v gnuplot") != 0) SKIP("gnuplot not installed");
    const char *d = test_tmpdir();
    char sim[512], real[512], png[512];
    snprintf(sim, sizeof sim, "%s/sim.csv", d);
    snprintf(real, sizeof real, "%s/real.csv", d);
    snprintf(png, sizeof png, "%s/tl.png", d);
    /* the BWD differs by 7 ms, the FWD by 1, the PUSH not at all */
    fixture_write_file(sim, "node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns\n"
                            "0,0,FWD,c1,-1,0,0,2000000\n0,0,BWD,c1,-1,0,2000000,5000000\n"
                            "0,0,PUSH,c1,1,40,5000000,6000000\n1,0,FWD,c1,-1,0,0,2000000\n");
    fixture_write_file(real, "node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns\n"
                             "0,0,FWD,c1,-1,0,100,3000100\n0,0,BWD,c1,-1,0,3000100,13000100\n"
                             "0,0,PUSH,c1,1,40,13000100,14000100\n1,0,FWD,c1,-1,0,0,2000000\n");
    int rc = test_run(out, sizeof out, "%s/poseidon report timeline %s --compare %s -o %s 2>&1",
                      test_build_dir(), sim, real, png);
    REQUIRE(rc == 0, "exit %d: %s", rc, out);
    const char *bwd = strstr(out, "    0 BWD"), *fwd = strstr(out, "    0 FWD");
    REQUIRE(bwd && fwd, "no difference table: %s", out);
    CHECK(bwd < fwd, "BWD (7 ms apart) must come before FWD (1 ms): %s", out);
    CHECK(strstr(bwd, "-7.000") != NULL, "BWD difference: %s", bwd);
    /* the critical path of the first: FWD, BWD, PUSH of node 0 */
    CHECK(strstr(out, "critical path (trace rows) of 3 ops: FWD 1/2.000 ms BWD 1/3.000 ms "
                      "PUSH 1/1.000 ms") != NULL, "%s", out);
    /* bad input: a node list naming a node the trace lacks, a malformed row */
    rc = test_run(out, sizeof out, "%s/poseidon report timeline %s --nodes 0-4 -o %s 2>&1",
                  test_build_dir(), sim, png);
    CHECK(rc == 2 && strstr(out, "node 4 is not in the trace"), "exit %d: %s", rc, out);
    fixture_write_file(real, "node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns\n"
                             "0,0,FWD,c1,-1,0,10,5\n");
    rc = test_run(out, sizeof out, "%s/poseidon report timeline %s -o %s 2>&1", test_build_dir(),
                  real, png);
    CHECK(rc == 2 && strstr(out, "real.csv:2:"), "exit %d: %s", rc, out);
}

TEST(report_every_subcommand_answers_help)
{
    const char *subs[] = {"speedup", "train", "compare", "timeline", "html"};
    char out[8192], want[64];
    for (int i = 0; i < 5; i++) {
        snprintf(want, sizeof want, "usage: poseidon report %s", subs[i]);
        for (int h = 0; h < 2; h++) {
            int rc = test_run(out, sizeof out, "%s/poseidon report %s %s 2>/dev/null",
                              test_build_dir(), subs[i], h ? "-h" : "--help");
            CHECK(rc == 0 && strstr(out, want), "report %s %s: exit %d: %s", subs[i],
                  h ? "-h" : "--help", rc, out);
        }
    }
    /* an unknown option or a missing value is still refused */
    int rc = test_run(out, sizeof out, "%s/poseidon report html --bogus x 2>&1", test_build_dir());
    CHECK(rc == 2 && strstr(out, "unknown option '--bogus'"), "exit %d: %s", rc, out);
    rc = test_run(out, sizeof out, "%s/poseidon report timeline t.csv --iteration 2>&1",
                  test_build_dir());
    CHECK(rc == 2 && strstr(out, "--iteration needs a value"), "exit %d: %s", rc, out);
    /* after "--" every argument is positional, each once: the two traces, read (and missing) */
    rc = test_run(out, sizeof out, "%s/poseidon report compare -- /nonexistent/-s.csv r.csv 2>&1",
                  test_build_dir());
    CHECK(rc == 2 && strstr(out, "/nonexistent/-s.csv: cannot read"), "exit %d: %s", rc, out);
}

TEST(report_csv_reads_columns_by_name)
{
    const char *d = test_tmpdir();
    char path[512], v[CSV_VALUE_MAX];
    snprintf(path, sizeof path, "%s/moved.csv", d);
    /* speedup and gbps where no writer put them before; a short last row */
    fixture_write_file(path, "model,nodes,speedup,scheme,gbps\n"
                             "m,1,1.0,ps,10\nm,2,1.9,ps,40\nm,4,3.5,hybrid,40\nm,8\n");
    csv_t c;
    REQUIRE(csv_open(&c, path) == 0, "cannot open %s", path);
    int k_speedup = csv_column(&c, "speedup"), k_gbps = csv_column(&c, "gbps");
    CHECK_EQ_I64(k_speedup, 2);
    CHECK_EQ_I64(k_gbps, 4);
    CHECK_EQ_I64(csv_column(&c, "images_per_s"), -1);
    REQUIRE(csv_next(&c) && csv_next(&c), "rows");
    CHECK(csv_get(&c, k_speedup, v, sizeof v) == 0 && !strcmp(v, "1.9"), "speedup '%s'", v);
    CHECK(csv_get(&c, k_gbps, v, sizeof v) == 0 && !strcmp(v, "40"), "gbps '%s'", v);
    CHECK_EQ_I64(c.line_no, 3);
    REQUIRE(csv_next(&c) && csv_next(&c), "rows");
    CHECK(csv_get(&c, k_gbps, v, sizeof v) == -1, "a field past the row's end: '%s'", v);
    CHECK(!csv_next(&c), "past the last row");
    csv_close(&c);
    /* distinct values by name: the short row has no gbps and is skipped */
    CHECK_EQ_I64(csv_distinct_count(path, "gbps"), 2);
    CHECK_EQ_I64(csv_distinct_count(path, "nodes"), 4);
    CHECK_EQ_I64(csv_distinct_count(path, "no_such_column"), 0);
}
