/* Coordinated checkpoints of distributed jobs (runtime/exec/job_checkpoint.h), through the command
 * line: for each scheme, a job that checkpoints, stops after its checkpoint and is resumed
 * ends with the parameters of the job that never stopped, bit for bit, and its --csv holds
 * the same rows; the newest two checkpoints stay and no .tmp does; a resume refuses another
 * model, world size, plan or seed, a job whose keys differ (unless told so), and a rank file
 * that was appended to, cut or changed; a
 * fresh job refuses a directory that holds another run's checkpoint. LeNet has dropout: a
 * resume that did not restore each rank's dropout state would draw other masks. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/exec/job_checkpoint.h"
#include "tests/test.h"

#define CD_OUT 65536

/* The job: LeNet on synthetic data, fixed plan (no probe), loopback without keys; with
 * devices > 1, that many device threads per node over a PCIe 4 interconnect. */
static const char *cd_job_devices(const char *scheme, int world, int devices)
{
    static char job[800];
    snprintf(job, sizeof job,
             "%s/poseidon train --workers %d --model models/lenet.net --scheme %s --data "
             "synthetic --synthetic-n 384 --batch 8 --lr 0.05 --no-eval --no-probe --insecure "
             "--job-out none --kv-block-mb 0.25 --report-every 1 --timeout-ms 30000 "
             "--devices-per-node %d --set cluster.interconnect=pcie4",
             test_build_dir(), world, scheme, devices);
    return job;
}

static const char *cd_job(const char *scheme, int world)
{
    return cd_job_devices(scheme, world, 1);
}

/* The rows of a CSV without the two timing columns (images_per_s, seconds). */
static char *cd_rows(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *out = calloc(cap, 1), line[512];
    while (fgets(line, sizeof line, f)) {
        int commas = 0;
        for (char *p = line; *p; p++)
            if (*p == ',' && ++commas == 5) *p = '\0', p[1] = '\0';
        n += (size_t)snprintf(out + n, cap - n, "%s\n", strtok(line, "\n"));
    }
    fclose(f);
    return out;
}

static int cd_files_equal(const char *a, const char *b)
{
    char out[256];
    return test_run(out, sizeof out, "cmp -s %s %s", a, b) == 0;
}

/* The names in dir, sorted, space-separated (static buffer). */
static const char *cd_listing(const char *dir)
{
    static char buf[2048];
    char out[2048];
    test_run(out, sizeof out, "cd %s && find . -mindepth 1 | sort | tr '\\n' ' '", dir);
    snprintf(buf, sizeof buf, "%s", out);
    return buf;
}

/* What cd_listing shows of two whole checkpoints, of iterations a < b (static buffer). */
static const char *cd_want(int world, int a, int b)
{
    static char buf[2048];
    size_t n = 0;
    for (int i = 0; i < 2; i++) {
        int k = i ? b : a;
        n += (size_t)snprintf(buf + n, sizeof buf - n, "./iter-%d ./iter-%d/COMPLETE ", k, k);
        for (int r = 0; r < world; r++)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "./iter-%d/rank-%d.ckpt ", k, r);
    }
    return buf;
}

/* A job of T = 10 iterations straight, against one that checkpoints every 3 iterations and
 * stops at 8 (the checkpoint of 6 is its newest), resumed to 10 (checkpointing at 9); every
 * node runs `devices` device threads, and each replica's parameters are compared. extra:
 * more options of the job ("" for none). Returns what the resumed run printed. */
static const char *cd_resume_with(const char *scheme, int world, int devices, const char *extra)
{
    const char *d = test_tmpdir();
    static char out[CD_OUT];
    char job[1000];
    snprintf(job, sizeof job, "%s %s", cd_job_devices(scheme, world, devices), extra);
    int rc = test_run(out, sizeof out, "%s --iterations 10 --params-out %s/straight --csv "
                      "%s/straight.csv", job, d, d);
    REQUIRE(rc == 0, "%s: straight run exited %d:\n%s", scheme, rc, out);
    rc = test_run(out, sizeof out, "%s --iterations 8 --checkpoint-dir %s/ck --checkpoint-every 3 "
                  "--params-out %s/stopped --csv %s/resumed.csv", job, d, d, d);
    REQUIRE(rc == 0, "%s: first leg exited %d:\n%s", scheme, rc, out);
    CHECK(strstr(out, "checkpoint of iteration 6 complete"), "%s: no checkpoint at 6:\n%s",
          scheme, out);
    char ck[600];
    snprintf(ck, sizeof ck, "%s/ck", d);
    CHECK(!strcmp(cd_listing(ck), cd_want(world, 3, 6)), "%s: after the first leg: %s", scheme,
          cd_listing(ck));
    rc = test_run(out, sizeof out, "%s --iterations 10 --resume %s/ck --checkpoint-every 3 "
                  "--params-out %s/resumed --csv %s/resumed.csv", job, d, d, d);
    REQUIRE(rc == 0, "%s: resumed run exited %d:\n%s", scheme, rc, out);
    CHECK(strstr(out, "starts at iteration 6"), "%s: not resumed at 6:\n%s", scheme, out);
    for (int r = 0; r < world; r++)
        for (int dv = 0; dv < devices; dv++) { /* device d > 0's replica: PREFIX.RANK.D */
            char a[600], b[600], c[600], sfx[32] = "";
            if (dv > 0) snprintf(sfx, sizeof sfx, ".%d", dv);
            snprintf(a, sizeof a, "%s/straight.%d%s", d, r, sfx);
            snprintf(b, sizeof b, "%s/resumed.%d%s", d, r, sfx);
            snprintf(c, sizeof c, "%s/stopped.%d%s", d, r, sfx);
            CHECK(cd_files_equal(a, b), "%s: rank %d device %d's parameters differ from the "
                  "straight run's", scheme, r, dv);
            /* the comparison can fail: the stopped run's parameters are not the final ones */
            CHECK(!cd_files_equal(a, c), "%s: rank %d device %d: the run stopped at 8 ended "
                  "as at 10", scheme, r, dv);
        }
    /* the resumed table is the straight one: rows 1..6 of the first leg, 7..10 resumed (a
     * resume that started over would repeat rows; the first leg's 7 and 8 are gone) */
    char sp[600], rp[600];
    snprintf(sp, sizeof sp, "%s/straight.csv", d);
    snprintf(rp, sizeof rp, "%s/resumed.csv", d);
    char *s = cd_rows(sp), *r = cd_rows(rp);
    REQUIRE(s && r);
    CHECK(!strcmp(s, r), "%s: the tables differ:\nstraight:\n%s\nresumed:\n%s", scheme, s, r);
    CHECK(strstr(s, ",10,"), "%s: no row of iteration 10:\n%s", scheme, s);
    free(s);
    free(r);
    /* the two newest checkpoints stay, nothing else (no .tmp) */
    CHECK(!strcmp(cd_listing(ck), cd_want(world, 6, 9)), "%s: after the resumed run: %s", scheme,
          cd_listing(ck));
    return out;
}

static void cd_resume_devices(const char *scheme, int world, int devices)
{
    cd_resume_with(scheme, world, devices, "");
}

static void cd_resume_case(const char *scheme, int world)
{
    cd_resume_devices(scheme, world, 1);
}

TEST(ckpt_dist_ps_resumes_bit_exact) { cd_resume_case("ps", 2); }
TEST(ckpt_dist_sfb_resumes_bit_exact) { cd_resume_case("sfb+wfbp", 2); }
TEST(ckpt_dist_allreduce_resumes_bit_exact) { cd_resume_case("allreduce+wfbp", 3); }
TEST(ckpt_dist_hybrid_resumes_bit_exact) { cd_resume_case("hybrid", 2); }

/* At a bf16 wire: the shards' fp32 values and the replicas' pulled (rounded) ones both come
 * back. */
#define CD_BF16 "--set wire_precision=bf16"
TEST(ckpt_dist_bf16_ps_resumes_bit_exact) { cd_resume_with("ps", 2, 1, CD_BF16); }
TEST(ckpt_dist_bf16_sfb_resumes_bit_exact) { cd_resume_with("sfb+wfbp", 2, 1, CD_BF16); }
TEST(ckpt_dist_bf16_allreduce_resumes_bit_exact) { cd_resume_with("allreduce+wfbp", 3, 1, CD_BF16); }
TEST(ckpt_dist_bf16_hybrid_resumes_bit_exact) { cd_resume_with("hybrid", 2, 1, CD_BF16); }
TEST(ckpt_dist_bf16_devices_hybrid_resumes_bit_exact) { cd_resume_with("hybrid", 2, 2, CD_BF16); }

/* fp16 with loss scaling: the scale and the good steps before it come back. From 256 with
 * an interval of 4 this job's scale doubles at iterations 3 and 7 (all-reduce or hybrid): the checkpoint of 6 holds
 * 512 and 2 good steps, and the resumed run doubles at 7 only if both were kept (the
 * replicas might not show a scale that changes no bit of what they compute). */
#define CD_FP16 "--set precision=fp16 --set wire_precision=fp16 --set loss_scale_init=256 " \
                "--set loss_scale_growth_interval=4"
static void cd_fp16_case(const char *scheme, int world, int devices)
{
    const char *out = cd_resume_with(scheme, world, devices, CD_FP16);
    for (int r = 0; r < world; r++) {
        char want[160];
        snprintf(want, sizeof want, "rank %d: iteration 7: 4 good steps: loss scale 512 -> 1024",
                 r);
        CHECK(out && strstr(out, want), "no '%s' in the resumed run:\n%s", want, out);
    }
}
TEST(ckpt_dist_fp16_allreduce_resumes_bit_exact) { cd_fp16_case("allreduce+wfbp", 3, 1); }
TEST(ckpt_dist_fp16_devices_allreduce_resumes_bit_exact) { cd_fp16_case("allreduce+wfbp", 2, 2); }
/* the shards: their values at the checkpoint, and the applies that wait for the verdict */
TEST(ckpt_dist_fp16_hybrid_resumes_bit_exact) { cd_fp16_case("hybrid", 2, 1); }
TEST(ckpt_dist_fp16_devices_hybrid_resumes_bit_exact) { cd_fp16_case("hybrid", 2, 2); }

/* Two devices per node: each replica's dropout state is saved (LeNet draws masks on every
 * device) and the devices wait at the checkpoint; one node (its own update) too. */
TEST(ckpt_dist_devices_ps_resumes_bit_exact) { cd_resume_devices("ps", 2, 2); }
TEST(ckpt_dist_devices_sfb_resumes_bit_exact) { cd_resume_devices("sfb+wfbp", 2, 2); }
TEST(ckpt_dist_devices_allreduce_resumes_bit_exact) { cd_resume_devices("allreduce+wfbp", 2, 2); }
TEST(ckpt_dist_devices_hybrid_resumes_bit_exact) { cd_resume_devices("hybrid", 2, 2); }
TEST(ckpt_dist_devices_one_node_resumes_bit_exact) { cd_resume_devices("hybrid", 1, 2); }

/* Expects the resume of the checkpoint in ck by `job extra` to exit 2 naming `what`. */
static void cd_refused(const char *job, const char *ck, const char *extra, const char *what)
{
    static char out[CD_OUT];
    int rc = test_run(out, sizeof out, "%s --iterations 10 --resume %s %s", job, ck, extra);
    CHECK(rc == 2, "resume with '%s' exited %d:\n%s", extra, rc, out);
    CHECK(strstr(out, what), "resume with '%s': no '%s' in:\n%s", extra, what, out);
}

TEST(ckpt_dist_resume_refuses_another_job_or_a_damaged_file)
{
    const char *d = test_tmpdir();
    static char out[CD_OUT];
    char job[800], ck[600], copy[600];
    snprintf(job, sizeof job, "%s", cd_job("hybrid", 2));
    snprintf(ck, sizeof ck, "%s/ck", d);
    snprintf(copy, sizeof copy, "%s/copy", d);
    int rc = test_run(out, sizeof out, "%s --iterations 4 --checkpoint-dir %s "
                      "--checkpoint-every 3", job, ck);
    REQUIRE(rc == 0, "exit %d:\n%s", rc, out);
    cd_refused(job, ck, "--workers 3", "checkpoint of a 2-rank job, this job has 3 ranks");
    cd_refused(job, ck, "--devices-per-node 2",
               "checkpoint of 1 devices per node, this job has 2 (--devices-per-node)");
    cd_refused(job, ck, "--model models/mlp.net", "checkpoint of model 'lenet', this job runs 'mlp'");
    cd_refused(job, ck, "--scheme ps", "this job's plan is");
    cd_refused(job, ck, "--seed 7", "checkpoint of seed 1, this job's seed is 7");
    cd_refused(job, ck, "--iterations 3", "checkpoint after iteration 3, and this job runs 3");
    /* a key that changes the math, named with both values; only when asked for */
    cd_refused(job, ck, "--lr 0.5 --momentum 0.8",
               "differs from the checkpoint's in lr (0.05 in the checkpoint, 0.5 now), "
               "momentum (0.9 in the checkpoint, 0.8 now)");
    cd_refused(job, ck, "--lr 0.5 --momentum 0.8 --resume-changed momentum",
               "--resume-changed lr");
    rc = test_run(out, sizeof out, "%s --iterations 5 --resume %s --lr 0.5 --resume-changed "
                  "lr --warmup 2", job, ck);
    CHECK(rc == 0 && strstr(out, "starts at iteration 3"), "exit %d:\n%s", rc, out);
    /* a rank file appended to, in a copy of the checkpoint: every rank stops */
    rc = test_run(out, sizeof out, "cp -r %s %s && printf x >>%s/iter-3/rank-1.ckpt", ck, copy,
                  copy);
    REQUIRE(rc == 0, "%s", out);
    char what[800];
    snprintf(what, sizeof what, "rank 1: %s/iter-3/rank-1.ckpt: ", copy);
    cd_refused(job, copy, "", what);
    cd_refused(job, copy, "", "appended");
    /* a fresh job does not write into another run's checkpoints; --resume needs one */
    rc = test_run(out, sizeof out, "%s --iterations 4 --checkpoint-dir %s --checkpoint-every 3",
                  job, ck);
    CHECK(rc == 2 && strstr(out, "holds the checkpoint of iteration 3 of another run"),
          "exit %d:\n%s", rc, out);
    rc = test_run(out, sizeof out, "%s --iterations 4 --resume %s/empty", job, d);
    CHECK(rc == 2 && strstr(out, "--resume: ") && strstr(out, "/empty"), "exit %d:\n%s", rc,
          out);
}

/* A small rank file, written and read back through the module: a changed header is refused
 * naming what differs; a file appended to, cut, or with one byte changed is refused. */
TEST(ckpt_dist_rank_file_refuses_damage)
{
    char path[600], err[1024], out[512];
    snprintf(path, sizeof path, "%s/r.ckpt", test_tmpdir());
    job_ckpt_header_t h = {.model = "net", .n_params = 5, .state_count = 2, .rng_bytes = 3,
                           .world = 2, .devices = 1, .rank = 1, .plan_hash = 0x1234, .seed = 9, .iter = 4,
                           .loss_sum = 1.5, .loss_n = 2, .correct = 3, .report_iter0 = 4};
    float p[5] = {1, 2, 3, 4, 5}, hl[5] = {6}, hs[5] = {7}, sv[5] = {8}, st[2] = {9, 10};
    unsigned char rng[3] = {11, 12, 13};
    job_ckpt_state_t s = {p, hl, hs, sv, st, rng, NULL, NULL};
    job_ckpt_file_t rec;
    int sh;
    REQUIRE(job_ckpt_write_rank(path, &h, &s, &rec, err, sizeof err) == 0, "%s", err);
    float p2[5], hl2[5], hs2[5], sv2[5], st2[2];
    unsigned char rng2[3];
    job_ckpt_state_t back = {p2, hl2, hs2, sv2, st2, rng2, NULL, NULL};
    job_ckpt_header_t got;
    REQUIRE(job_ckpt_read_rank(path, &h, &rec, &back, &got, err, sizeof err) == 0, "%s", err);
    CHECK(!memcmp(p, p2, sizeof p) && !memcmp(st, st2, sizeof st) && !memcmp(rng, rng2, 3) &&
          hl2[0] == 6 && hs2[0] == 7 && sv2[0] == 8);
    CHECK(got.loss_sum == 1.5 && got.loss_n == 2 && got.correct == 3 && got.report_iter0 == 4);
    /* another job */
    job_ckpt_header_t want = h;
    want.plan_hash = 0x99;
    CHECK(job_ckpt_read_rank(path, &want, &rec, &back, &got, err, sizeof err) == -1 &&
          strstr(err, "checkpoint of plan 0000000000001234, this job's plan is 0000000000000099"),
          "%s", err);
    want = h, want.rank = 0;
    CHECK(job_ckpt_read_rank(path, &want, &rec, &back, &got, err, sizeof err) == -1 &&
          strstr(err, "the file of rank 1, read by rank 0"), "%s", err);
    want = h, want.n_params = 6;
    CHECK(job_ckpt_read_rank(path, &want, &rec, &back, &got, err, sizeof err) == -1 &&
          strstr(err, "checkpoint of model 'net' (5 parameters)"), "%s", err);
    /* damage: against COMPLETE's record, and against the file's own checksum */
    sh = test_run(out, sizeof out, "cp %s %s.orig && printf x >>%s", path, path, path);
    REQUIRE(sh == 0, "%s", out);
    CHECK(job_ckpt_read_rank(path, &h, &rec, &back, &got, err, sizeof err) == -1 &&
          strstr(err, "appended"), "%s", err);
    job_ckpt_file_t now;
    sh = test_run(out, sizeof out, "head -c -1 %s.orig >%s", path, path);
    REQUIRE(sh == 0, "%s", out);
    CHECK(job_ckpt_read_rank(path, &h, &rec, &back, &got, err, sizeof err) == -1 &&
          strstr(err, "truncated"), "%s", err);
    now = rec, now.bytes--;
    CHECK(job_ckpt_read_rank(path, &h, &now, &back, &got, err, sizeof err) == -1,
          "a cut file passed for whole");
    sh = test_run(out, sizeof out, "cp %s.orig %s && printf U | dd of=%s bs=1 seek=90 "
                     "conv=notrunc 2>/dev/null", path, path, path);
    REQUIRE(sh == 0, "%s", out);
    CHECK(job_ckpt_read_rank(path, &h, &rec, &back, &got, err, sizeof err) == -1 &&
          strstr(err, "checksum mismatch"), "%s", err);
    sh = test_run(out, sizeof out, "cp %s.orig %s", path, path);
    REQUIRE(sh == 0, "%s", out);
    CHECK(job_ckpt_read_rank(path, &h, &rec, &back, &got, err, sizeof err) == 0, "%s", err);
    remove(path);
    CHECK(job_ckpt_read_rank(path, &h, &rec, &back, &got, err, sizeof err) == -1 &&
          strstr(err, "cannot read"), "%s", err);
}

/* The COMPLETE text round-trips, and a malformed one is refused. */
TEST(ckpt_dist_complete_text_round_trips)
{
    job_ckpt_file_t files[3] = {{100, 0x1234}, {200, 0xffffffffffffffffULL}, {300, 0}};
    job_ckpt_complete_t c = {.iter = 42, .world = 3, .devices = 4, .plan_hash = 0xabcdef0123456789ULL,
                             .seed = 7, .model = "lenet small", .files = files};
    char *t = job_ckpt_complete_text(&c), err[256];
    job_ckpt_complete_t back;
    REQUIRE(job_ckpt_complete_parse(t, "x", &back, err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(back.iter, 42);
    CHECK_EQ_I64(back.world, 3);
    CHECK_EQ_I64(back.devices, 4);
    CHECK(back.plan_hash == c.plan_hash && back.seed == 7 && !strcmp(back.model, "lenet small"));
    for (int r = 0; r < 3; r++)
        CHECK(back.files[r].bytes == files[r].bytes && back.files[r].checksum == files[r].checksum,
              "rank %d", r);
    CHECK(!back.keys, "keys from a COMPLETE without them: %s", back.keys);
    job_ckpt_complete_free(&back);
    /* the job's keys round-trip, and only keys that change the math must be equal */
    c.keys = "lr = 0.1\nmomentum = 0.9\niterations = 10\n";
    char *tk = job_ckpt_complete_text(&c);
    REQUIRE(job_ckpt_complete_parse(tk, "x", &back, err, sizeof err) == 0, "%s", err);
    CHECK(back.keys && !strcmp(back.keys, c.keys), "keys back: %s", back.keys);
    CHECK(job_ckpt_keys_check("P", back.keys, "lr = 0.1\nmomentum = 0.9\niterations = 20\n",
                              NULL, err, sizeof err) == 0, "%s", err);
    CHECK(job_ckpt_keys_check("P", back.keys, "lr = 0.2\nmomentum = 0.9\nweight_decay = 0\n",
                              NULL, err, sizeof err) == -1 &&
              strstr(err, "P: ") && strstr(err, "lr (0.1 in the checkpoint, 0.2 now)") &&
              strstr(err, "weight_decay ((none) in the checkpoint, 0 now)") &&
              strstr(err, "--resume-changed lr,weight_decay"), "%s", err);
    CHECK(job_ckpt_keys_check("P", back.keys, "lr = 0.2\nmomentum = 0.9\n", "all", err,
                              sizeof err) == 0, "%s", err);
    job_ckpt_complete_free(&back);
    free(tk);
    c.keys = NULL;
    /* one rank's line missing, and a line too many */
    char *cut = strdup(t);
    *strstr(cut, "rank 2") = '\0';
    CHECK(job_ckpt_complete_parse(cut, "x", &back, err, sizeof err) == -1 &&
              strstr(err, "rank 2"), "%s", err);
    char more[2048];
    snprintf(more, sizeof more, "%srank 3 bytes 1 checksum 0\n", t);
    CHECK(job_ckpt_complete_parse(more, "x", &back, err, sizeof err) == -1, "accepted %s", more);
    free(cut);
    free(t);
}
