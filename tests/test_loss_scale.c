/* precision = fp16's dynamic loss scaling (core/plan.h, "Loss scaling";
 * runtime/exec/worker_loss_scale.c): the keys and their refusals; the plan's VERDICT and the
 * updates that wait for it under fp16 and under no other precision; the simulator's
 * iteration under fp16 no faster than under bf16; and through the command line, a step with
 * an inf in one rank's gradient skipped on every rank (every replica's parameters as if the
 * iteration had not run, bit for bit), the scale halved on every rank, the next step taken,
 * the scale growing after its interval, and fp16 with an fp32 wire training exactly as fp32
 * (the scale is a power of two). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/model.h"
#include "core/plan.h"
#include "runtime/sync/vote.h"
#include "sim/simrun.h"
#include "tests/exp_fixture.h"
#include "tests/test.h"

/* ------------------------------------------------------------------------ the keys */

TEST(loss_scale_keys_default_and_refuse_bad_values)
{
    experiment_t *e = xmalloc(sizeof *e);
    model_t m;
    fixture_load_exp(e, &m, fixture_exp_text("lenet", ""));
    CHECK(e->train.loss_scale_init == 65536 && e->train.loss_scale_growth_interval == 2000 &&
              e->train.overflow_rank == -1,
          "defaults %g %lld %d", e->train.loss_scale_init,
          (long long)e->train.loss_scale_growth_interval, e->train.overflow_rank);
    static const struct {
        const char *kv, *want;
    } bad[] = {
        {"loss_scale_init=1000", "expected loss_scale_init = a power of two from 1 to 16777216"},
        {"loss_scale_init=0.5", "expected loss_scale_init = a power of two"},
        {"loss_scale_init=33554432", "expected loss_scale_init = a power of two"},
        {"loss_scale_growth_interval=0", "expected loss_scale_growth_interval = an integer"},
        {"overflow_at=3", "expected overflow_at = RANK:ITERATION"},
        {"overflow_at=1:-2", "expected overflow_at = RANK:ITERATION"},
    };
    char err[2048];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(experiment_override(e, bad[i].kv, err, sizeof err) == -1 &&
                  strstr(err, bad[i].want) && !strchr(err, '\n'),
              "%s: '%s'", bad[i].kv, err);
    }
    REQUIRE(experiment_override(e, "loss_scale_init=1024", err, sizeof err) == 0, "%s", err);
    REQUIRE(experiment_override(e, "overflow_at=2:7", err, sizeof err) == 0, "%s", err);
    CHECK(e->train.loss_scale_init == 1024 && e->train.overflow_rank == 2 &&
              e->train.overflow_iter == 7, "set");
    model_fini(&m);
    free(e);
}

/* ------------------------------------------------------------------------ the plan */

static void plan_of(plan_t *p, model_t *m, const char *extra)
{
    experiment_t *e = xmalloc(sizeof *e);
    cluster_t c;
    plan_opts_t po;
    char err[1024];
    fixture_load_exp(e, m, fixture_exp_text("lenet", extra));
    job_config(e, 0, NULL, &c, &po);
    REQUIRE(plan_build_opts(p, m, &c, &po, err, sizeof err) == 0, "%s", err);
    free(e);
}

static int n_kind(const plan_t *p, op_kind_t k)
{
    int n = 0;
    for (int o = 0; o < p->n_ops; o++) n += p->ops[o].kind == k;
    return n;
}

/* Whether op o has a dependency on op `on` of scope sc at iteration t - back. */
static bool has_dep(const plan_t *p, int o, int on, dep_scope_t sc, int back)
{
    for (int d = 0; d < p->ops[o].n_deps; d++) {
        const plan_dep_t *dp = &p->deps[p->ops[o].dep_first + d];
        if (dp->op == on && dp->scope == sc && dp->iter_back == back) return true;
    }
    return false;
}

/* Under fp16, one VERDICT waits for every ring, SFB and the last backward, and every update
 * (all-reduce members, SFB's, a lone node's) waits for it; at bf16 none of that exists. */
TEST(loss_scale_plan_defers_every_update_to_the_verdict_under_fp16_only)
{
    static const char *const setups[] = {
        "sweep_nodes = 4\nsweep_schemes = allreduce+wfbp\nallreduce_bucket_mb = 0.1\n",
        "sweep_nodes = 4\nsweep_schemes = sfb+wfbp\n",
        "sweep_nodes = 1\ncluster.devices_per_node = 2\ncluster.interconnect = pcie4\n",
    };
    for (size_t i = 0; i < sizeof setups / sizeof setups[0]; i++) {
        char extra[512];
        model_t m;
        plan_t p;
        snprintf(extra, sizeof extra, "%sprecision = bf16\nwire_precision = bf16\n", setups[i]);
        plan_of(&p, &m, extra);
        int updates_bf16 = n_kind(&p, OP_UPDATE);
        CHECK(n_kind(&p, OP_VERDICT) == 0 && p.units[0].op_verdict < 0, "%zu: a verdict at bf16",
              i);
        uint64_t h = plan_hash(&p);
        plan_fini(&p);
        model_fini(&m);
        snprintf(extra, sizeof extra, "%sprecision = fp16\nwire_precision = fp16\n", setups[i]);
        plan_of(&p, &m, extra);
        CHECK(plan_hash(&p) != h, "%zu: the same plan under fp16", i);
        REQUIRE(n_kind(&p, OP_VERDICT) == 1, "%zu: %d verdicts", i, n_kind(&p, OP_VERDICT));
        int v = p.units[0].op_verdict, updates = 0;
        CHECK(has_dep(&p, v, p.units[0].op_bwd, DEP_LOCAL, 0) && has_dep(&p, v, v, DEP_LOCAL, 1),
              "%zu: the verdict's own deps", i);
        for (int u = 0; u < p.n_units; u++) {
            const plan_unit_t *un = &p.units[u];
            CHECK(un->op_verdict == v, "%zu: unit %d's verdict", i, u);
            if (un->op_allreduce >= 0)
                CHECK(has_dep(&p, v, un->op_allreduce, DEP_RECV, 0), "%zu: ring of %d", i, u);
            if (un->op_sfb >= 0) CHECK(has_dep(&p, v, un->op_sfb, DEP_RECV, 0), "%zu: sfb %d", i, u);
            if (un->op_lreduce >= 0)
                CHECK(has_dep(&p, v, un->op_lreduce, DEP_LOCAL, 0), "%zu: lreduce %d", i, u);
            bool applies_here = un->method == SYNC_ALLREDUCE || un->method == SYNC_SFB ||
                                (un->method == SYNC_NONE && un->layer >= 0);
            if (!applies_here) continue;
            REQUIRE(un->op_update >= 0, "%zu: unit %d has no UPDATE", i, u);
            updates++;
            CHECK(has_dep(&p, un->op_update, v, DEP_LOCAL, 0), "%zu: UPDATE of %d", i, u);
            /* the next forward waits for the update (through the local broadcast) */
            int fwd_on = un->op_lbcast >= 0 ? un->op_lbcast : un->op_fwd;
            CHECK(un->op_lbcast >= 0 ? has_dep(&p, un->op_lbcast, un->op_update, DEP_LOCAL, 0)
                                     : has_dep(&p, fwd_on, un->op_update, DEP_LOCAL, 1),
                  "%zu: unit %d's parameters do not wait for its UPDATE", i, u);
        }
        CHECK(updates > updates_bf16 || (updates == updates_bf16 && updates > 0 && i == 1),
              "%zu: %d updates at fp16, %d at bf16", i, updates, updates_bf16);
        plan_fini(&p);
        model_fini(&m);
    }
}

/* With PS units every worker votes to every other, the verdict waits for the votes, every
 * shard's APPLY for its node's verdict, and the first backward for the previous verdict. */
TEST(loss_scale_plan_has_the_votes_under_fp16_with_the_ps)
{
    static const char *const schemes[] = {"ps", "ps+wfbp", "sfb+wfbp", "hybrid", "hybrid3"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        char extra[256];
        model_t m;
        plan_t p;
        snprintf(extra, sizeof extra, "sweep_nodes = 4\nsweep_schemes = %s\nkv_block_mb = 0\n"
                 "precision = fp16\nwire_precision = fp16\n", schemes[i]);
        plan_of(&p, &m, extra);
        int v = p.units[0].op_verdict, vote = p.units[0].op_vote, U = p.n_units;
        bool ps = false;
        for (int u = 0; u < U; u++) ps |= p.units[u].ps_bytes > 0;
        REQUIRE(v >= 0, "%s: no verdict", schemes[i]);
        CHECK(has_dep(&p, p.units[U - 1].op_bwd, v, DEP_LOCAL, 1), "%s: first BWD", schemes[i]);
        CHECK((vote >= 0) == ps && n_kind(&p, OP_VOTE) == (ps ? 1 : 0), "%s: votes", schemes[i]);
        if (vote >= 0) {
            CHECK(has_dep(&p, v, vote, DEP_RECV, 0) && plan_n_sources(&p, vote, 1) == 3 &&
                      plan_n_dests(&p, vote, 2) == 3, "%s: the votes' pattern", schemes[i]);
            int64_t bytes;
            CHECK(plan_dest(&p, vote, 0, 0, &bytes) == 1 && bytes == PLAN_VOTE_BYTES,
                  "%s: a vote's bytes", schemes[i]);
        }
        for (int u = 0; u < U; u++) {
            const plan_unit_t *un = &p.units[u];
            if (un->op_apply >= 0)
                CHECK(has_dep(&p, un->op_apply, v, DEP_LOCAL, 0), "%s: APPLY of %d", schemes[i], u);
            if (un->op_push >= 0)
                CHECK(has_dep(&p, vote, un->op_push, DEP_LOCAL, 0), "%s: PUSH of %d", schemes[i], u);
        }
        plan_fini(&p);
        model_fini(&m);
        /* at bf16 none of it */
        snprintf(extra, sizeof extra, "sweep_nodes = 4\nsweep_schemes = %s\nkv_block_mb = 0\n"
                 "precision = bf16\n", schemes[i]);
        plan_of(&p, &m, extra);
        CHECK(n_kind(&p, OP_VOTE) == 0 && n_kind(&p, OP_VERDICT) == 0, "%s at bf16", schemes[i]);
        plan_fini(&p);
        model_fini(&m);
    }
}

/* What the network sends as a vote counts only if it is one: from another rank of the job,
 * one byte of 0 or 1, of the iteration collected or the next. */
TEST(loss_scale_votes_from_the_network_are_judged)
{
    static const unsigned char one = 1, two = 2, pair[2] = {0, 1};
    msg_header_t h = {.type = MSG_LS_VOTE, .layer = -1, .iteration = 5, .length = 1};
    int vote = -1;
    const char *why;
    CHECK(vote_judge(4, 0, 5, &h, 2, &one, 1, &vote, &why) == 0 && vote == 1, "a good vote");
    h.iteration = 6;
    CHECK(vote_judge(4, 0, 5, &h, 3, &one, 1, &vote, &why) == 1, "a vote of the next iteration");
    static const struct {
        int64_t iteration;
        int peer;
        const void *data;
        size_t bytes, length;
        const char *want;
    } bad[] = {
        {5, 4, &one, 1, 1, "not from another rank"},  /* no such rank */
        {5, -1, &one, 1, 1, "not from another rank"},
        {5, 0, &one, 1, 1, "not from another rank"},  /* itself */
        {5, 1, &two, 1, 1, "malformed"},
        {5, 1, pair, 2, 2, "malformed"},
        {5, 1, NULL, 0, 0, "malformed"},
        {4, 1, &one, 1, 1, "iteration not in flight"},
        {7, 1, &one, 1, 1, "iteration not in flight"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        h.iteration = bad[i].iteration;
        h.length = bad[i].length;
        why = NULL;
        CHECK(vote_judge(4, 0, 5, &h, bad[i].peer, bad[i].data, bad[i].bytes, &vote, &why) == -1 &&
                  why && strstr(why, bad[i].want),
              "case %zu: %s", i, why ? why : "accepted");
    }
    h = (msg_header_t){.type = MSG_SFB_U, .iteration = 5, .length = 1};
    CHECK(vote_judge(4, 0, 5, &h, 1, &one, 1, &vote, &why) == -1, "another type counted");
}

/* The deferral costs overlap the simulator prices: VGG19's all-reduce on 8 nodes at 1 GbE is
 * slower under fp16 than under bf16 with the same wire (the same bytes: the ring of fc6 ends
 * after conv1.1's, and the first layers' next forward now waits for it), and LeNet's is no
 * faster. */
TEST(loss_scale_sim_prices_the_deferred_updates)
{
    static const char *const nets[] = {"lenet", "vgg19"};
    for (int n = 0; n < 2; n++) {
        experiment_t *e = xmalloc(sizeof *e);
        model_t m;
        fixture_load_exp(e, &m, fixture_exp_text(nets[n], "sweep_nodes = 8\nsweep_gbps = 1\n"
                                                          "sweep_schemes = allreduce+wfbp\n"
                                                          "iterations = 4\n"));
        int64_t it[2];
        for (int k = 0; k < 2; k++) {
            e->precision = k ? PRECISION_FP16 : PRECISION_BF16;
            e->wire_precision = e->precision;
            cluster_t c;
            simrun_out_t o;
            char err[1024];
            REQUIRE(simrun_config(e, &m, 0, &c, NULL, &o, err, sizeof err) == 0, "%s", err);
            it[k] = o.r.iter_ns;
        }
        CHECK(it[1] >= it[0], "%s: fp16 %lld ns < bf16 %lld ns", nets[n], (long long)it[1],
              (long long)it[0]);
        if (n == 1)
            CHECK(it[1] > it[0], "vgg19: the deferral cost nothing (%lld ns)", (long long)it[1]);
        model_fini(&m);
        free(e);
    }
}

/* ------------------------------------------------------------------ the runtime */

#define LS_OUT 65536

/* LeNet on synthetic data over `nodes` x `devices` with `scheme`, fp16 on the wire, the
 * scale starting at 64 (this job's gradients never overflow at it), `extra` appended. */
static int ls_run_scheme(char *out, const char *scheme, int nodes, int devices,
                         const char *extra)
{
    return test_run(out, LS_OUT,
                    "%s/poseidon train --workers %d --devices-per-node %d --model "
                    "models/lenet.net --scheme %s --data synthetic --synthetic-n 384 "
                    "--batch 8 --lr 0.05 --no-eval --no-probe --insecure --job-out none "
                    "--report-every 1 --timeout-ms 30000 --kv-block-mb 0.25 "
                    "--set cluster.interconnect=pcie4 --set precision=fp16 "
                    "--set wire_precision=fp16 --set loss_scale_init=64 %s",
                    test_build_dir(), nodes, devices, scheme, extra);
}

static int ls_run(char *out, int nodes, int devices, const char *extra)
{
    return ls_run_scheme(out, "allreduce+wfbp", nodes, devices, extra);
}

static int ls_same(const char *a, const char *b)
{
    char out[256];
    return test_run(out, sizeof out, "cmp -s %s %s", a, b) == 0;
}

/* Whether every rank of `nodes` logged `what` ("rank R: " before it). */
static bool every_rank_said(const char *out, int nodes, const char *what)
{
    for (int r = 0; r < nodes; r++) {
        char line[300];
        snprintf(line, sizeof line, "rank %d: %s", r, what);
        if (!strstr(out, line)) return false;
    }
    return true;
}

/* An inf in rank `rank`'s gradient at iteration 3: the run of 4 iterations ends where the run
 * of 3 without it ended, on every replica; every rank halves the scale; a 5th iteration is
 * taken, and the replicas stay identical. */
static void ls_overflow_scheme(const char *scheme, int nodes, int devices, int rank)
{
    static char out[LS_OUT];
    const char *d = test_tmpdir();
    char extra[700];
    snprintf(extra, sizeof extra, "--iterations 3 --params-out %s/three", d);
    int rc = ls_run_scheme(out, scheme, nodes, devices, extra);
    REQUIRE(rc == 0, "3 iterations exited %d:\n%s", rc, out);
    CHECK(!strstr(out, "skipped"), "%s: a step skipped without an inf:\n%s", scheme, out);
    snprintf(extra, sizeof extra, "--iterations 4 --params-out %s/four --set overflow_at=%d:3", d,
             rank);
    rc = ls_run_scheme(out, scheme, nodes, devices, extra);
    REQUIRE(rc == 0, "4 iterations exited %d:\n%s", rc, out);
    CHECK(every_rank_said(out, nodes, "iteration 3: inf or NaN in the gradients: step skipped, "
                                      "loss scale 64 -> 32"),
          "not every rank skipped iteration 3 and halved the scale:\n%s", out);
    snprintf(extra, sizeof extra, "--iterations 5 --params-out %s/five --set overflow_at=%d:3", d,
             rank);
    rc = ls_run_scheme(out, scheme, nodes, devices, extra);
    REQUIRE(rc == 0, "5 iterations exited %d:\n%s", rc, out);
    CHECK(!strstr(out, "iteration 4: inf"), "iteration 4 skipped too:\n%s", out);
    for (int r = 0; r < nodes; r++)
        for (int dv = 0; dv < devices; dv++) {
            char a[600], b[600], c[600], z[600], sfx[32] = "";
            if (dv > 0) snprintf(sfx, sizeof sfx, ".%d", dv);
            snprintf(a, sizeof a, "%s/three.%d%s", d, r, sfx);
            snprintf(b, sizeof b, "%s/four.%d%s", d, r, sfx);
            snprintf(c, sizeof c, "%s/five.%d%s", d, r, sfx);
            snprintf(z, sizeof z, "%s/five.0", d);
            CHECK(ls_same(a, b), "rank %d device %d: the skipped step changed the parameters",
                  r, dv);
            CHECK(!ls_same(b, c), "rank %d device %d: the step after the skip was not taken",
                  r, dv);
            CHECK(ls_same(c, z), "rank %d device %d differs from rank 0", r, dv);
        }
}

static void ls_overflow_case(int nodes, int devices, int rank)
{
    ls_overflow_scheme("allreduce+wfbp", nodes, devices, rank);
}

TEST(loss_scale_overflow_skips_the_step_allreduce) { ls_overflow_case(3, 1, 1); }
TEST(loss_scale_overflow_skips_the_step_allreduce_two_devices) { ls_overflow_case(2, 2, 1); }
TEST(loss_scale_overflow_skips_the_step_one_node_two_devices) { ls_overflow_case(1, 2, 0); }
/* through the PS: every shard skips the apply of the step one worker's vote condemned */
TEST(loss_scale_overflow_skips_the_step_ps) { ls_overflow_scheme("ps", 3, 1, 2); }
TEST(loss_scale_overflow_skips_the_step_ps_wfbp) { ls_overflow_scheme("ps+wfbp", 3, 1, 1); }
TEST(loss_scale_overflow_skips_the_step_sfb) { ls_overflow_scheme("sfb+wfbp", 3, 1, 1); }
TEST(loss_scale_overflow_skips_the_step_hybrid) { ls_overflow_scheme("hybrid", 3, 1, 0); }
TEST(loss_scale_overflow_skips_the_step_hybrid3) { ls_overflow_scheme("hybrid3", 3, 1, 1); }
TEST(loss_scale_overflow_skips_the_step_hybrid_two_devices)
{
    ls_overflow_scheme("hybrid", 2, 2, 1);
}

/* The scale doubles after every `interval` good steps, on every rank alike. */
TEST(loss_scale_grows_after_its_interval)
{
    static char out[LS_OUT];
    int rc = ls_run(out, 3, 1, "--iterations 5 --set loss_scale_growth_interval=2");
    REQUIRE(rc == 0, "exited %d:\n%s", rc, out);
    CHECK(every_rank_said(out, 3, "iteration 1: 2 good steps: loss scale 64 -> 128") &&
              every_rank_said(out, 3, "iteration 3: 2 good steps: loss scale 128 -> 256"),
          "no growth at iterations 1 and 3 on every rank:\n%s", out);
    CHECK(!strstr(out, "iteration 2: 2 good") && !strstr(out, "iteration 4: 2 good"),
          "grew between intervals:\n%s", out);
}

/* Scaling by a power of two and dividing by it again changes no bit: fp16 arithmetic (the
 * CPU computes in fp32) with an fp32 wire ends with fp32's parameters. */
TEST(loss_scale_fp16_with_an_fp32_wire_trains_as_fp32)
{
    static char out[LS_OUT];
    const char *d = test_tmpdir();
    char cmd[1000];
    snprintf(cmd, sizeof cmd,
             "%s/poseidon train --workers 3 --model models/lenet.net --scheme allreduce+wfbp "
             "--data synthetic --synthetic-n 384 --batch 8 --lr 0.05 --no-eval --no-probe "
             "--insecure --job-out none --timeout-ms 30000 --iterations 6",
             test_build_dir());
    int rc = test_run(out, LS_OUT, "%s --params-out %s/fp32", cmd, d);
    REQUIRE(rc == 0, "fp32 exited %d:\n%s", rc, out);
    rc = test_run(out, LS_OUT, "%s --params-out %s/fp16 --set precision=fp16", cmd, d);
    REQUIRE(rc == 0, "fp16 exited %d:\n%s", rc, out);
    for (int r = 0; r < 3; r++) {
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/fp32.%d", d, r);
        snprintf(b, sizeof b, "%s/fp16.%d", d, r);
        CHECK(ls_same(a, b), "rank %d: fp16 with an fp32 wire is not fp32", r);
    }
}
