/* All-reduce buckets (gradient fusion, core/plan.h): with the bucket size 0 the plan is one
 * ring per unit; with B > 0 the buckets are the backward-order packing the plan promises
 * (members, bytes, ring sizes, cost, dependencies); the simulator runs a fused ring in the
 * closed-form time and never moves more flows; and the runtime, whose bucket's ring runs over
 * one buffer holding the members' gradients, still computes under BSP what one worker
 * computes on the combined batch. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cost.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/trace.h"
#include "runtime/compute/compute.h"
#include "runtime/exec/data.h"
#include "runtime/transport/launch.h"
#include "runtime/compute/nnet.h"
#include "runtime/compute/solver.h"
#include "runtime/exec/worker.h"
#include "sim/sim.h"
#include "sim/simrun.h"
#include "test.h"
#include "tests/bsp_ref.h"
#include "tests/exp_fixture.h"
#include "tests/trace_edges.h"

#define MB (1 << 20)

/* ------------------------------------------------------------------------ helpers */

static void parse_net(model_t *m, const char *name, const char *text)
{
    char err[512];
    REQUIRE(model_parse(m, name, text, strlen(text), err, sizeof err) == 0, "%s", err);
}

static void load_net(model_t *m, const char *path)
{
    char err[512];
    REQUIRE(model_load(m, path, err, sizeof err) == 0, "%s", err);
}

static cluster_t cluster_of(int nodes, double gbps, int64_t lat_ns)
{
    cluster_t c;
    cluster_init(&c);
    c.nodes = nodes;
    c.nic_Bps = gbps * 1e9 / 8;
    c.lat_ns = lat_ns;
    return c;
}

/* A plan by the given hybrid rule (the per-layer one where a test needs a known mix) */
static void build_rule(plan_t *p, const model_t *m, const cluster_t *c, const char *scheme,
                       int staleness, int64_t kv_block_bytes, int64_t bucket_bytes,
                       hybrid_rule_t rule)
{
    plan_opts_t o = {.staleness = staleness, .batch = 8, .kv_block_bytes = kv_block_bytes,
                     .allreduce_bucket_bytes = bucket_bytes, .hybrid_rule = rule};
    REQUIRE(scheme_parse(scheme, &o.scheme) == 0, "%s", scheme);
    char err[512];
    REQUIRE(plan_build_opts(p, m, c, &o, err, sizeof err) == 0, "%s", err);
}

static void build(plan_t *p, const model_t *m, const cluster_t *c, const char *scheme,
                  int staleness, int64_t kv_block_bytes, int64_t bucket_bytes)
{
    build_rule(p, m, c, scheme, staleness, kv_block_bytes, bucket_bytes, HYBRID_RULE_ITERATION);
}

static int n_deps_on(const plan_t *p, int op, int on, dep_scope_t sc, int back)
{
    int n = 0;
    for (int k = 0; k < p->ops[op].n_deps; k++) {
        const plan_dep_t *d = &p->deps[p->ops[op].dep_first + k];
        n += d->op == on && d->scope == sc && d->iter_back == back;
    }
    return n;
}

static int64_t unit_bytes(const plan_unit_t *u)
{
    return u->tensor.weight_bytes + u->tensor.bias_bytes;
}

static int count_ops(const plan_t *p, op_kind_t k)
{
    int n = 0;
    for (int o = 0; o < p->n_ops; o++) n += p->ops[o].kind == k;
    return n;
}

/* Everything plan.h says of the buckets, checked against an independent walk: backward
 * order, all-reduce units only (others skipped), a bucket closes at >= B bytes. */
static void check_buckets(const plan_t *p, const char *what)
{
    int U = p->n_units, P = p->workers, back = 1 + p->staleness;
    int expect_bucket = -1, n_expected = 0;
    int64_t open_bytes = 0;
    int *want = malloc((size_t)U * sizeof *want);
    for (int u = U - 1; u >= 0; u--) {
        want[u] = -1;
        if (p->units[u].method != SYNC_ALLREDUCE) continue;
        if (expect_bucket < 0) expect_bucket = n_expected++, open_bytes = 0;
        want[u] = expect_bucket;
        open_bytes += unit_bytes(&p->units[u]);
        if (open_bytes >= p->allreduce_bucket_bytes) expect_bucket = -1;
    }
    CHECK_EQ_I64(p->n_buckets, n_expected);
    CHECK_EQ_I64(count_ops(p, OP_ALLREDUCE), p->n_buckets);
    for (int u = 0; u < U; u++) {
        CHECK(p->units[u].bucket == want[u], "%s: unit %d in bucket %d, expected %d", what, u,
              p->units[u].bucket, want[u]);
        if (p->units[u].bucket < 0)
            CHECK(p->units[u].op_allreduce == -1, "%s: unit %d has a ring", what, u);
    }
    free(want);
    for (int b = 0; b < p->n_buckets; b++) {
        const plan_bucket_t *bk = &p->buckets[b];
        int members = 0;
        int64_t bytes = 0;
        for (int u = 0; u < U; u++) {
            if (p->units[u].bucket != b) continue;
            REQUIRE(u >= bk->first && u <= bk->last, "%s: unit %d outside bucket %d", what, u, b);
            members++;
            bytes += unit_bytes(&p->units[u]);
            CHECK(p->units[u].op_allreduce == bk->op, "%s: unit %d's ring", what, u);
            /* the next FWD of every member waits for the bucket's ring (WFBP: its own) */
            if (p->scheme.wfbp)
                CHECK(n_deps_on(p, p->units[u].op_fwd, bk->op, DEP_RECV, back) == 1,
                      "%s: FWD of unit %d does not wait for bucket %d once", what, u, b);
        }
        CHECK(p->units[bk->first].bucket == b && p->units[bk->last].bucket == b,
              "%s: bucket %d's ends", what, b);
        CHECK_EQ_I64(members, bk->n_units);
        CHECK_EQ_I64(bytes, bk->bytes);
        if (b + 1 < p->n_buckets) { /* closed as soon as it held B: not one unit later */
            CHECK(bk->bytes >= p->allreduce_bucket_bytes, "%s: bucket %d closed early", what, b);
            if (p->allreduce_bucket_bytes > 0)
                CHECK(bk->bytes - unit_bytes(&p->units[bk->first]) < p->allreduce_bucket_bytes,
                      "%s: bucket %d closed late", what, b);
            else
                CHECK(bk->n_units == 1, "%s: bucket %d fused with fusion off", what, b);
            CHECK(p->buckets[b + 1].last < bk->first, "%s: buckets %d, %d not in backward order",
                  what, b, b + 1);
        }
        /* the ring: one op of the lowest member, 2(P-1) steps of ceil(bytes / P) */
        const plan_op_t *op = &p->ops[bk->op];
        CHECK(op->kind == OP_ALLREDUCE && op->unit == bk->first, "%s: bucket %d's op", what, b);
        CHECK_EQ_I64(op->steps, 2 * (P - 1));
        CHECK_EQ_I64(bk->ar_chunk_bytes, (bk->bytes + P - 1) / P);
        CHECK_EQ_I64(op->bytes, (int64_t)2 * (P - 1) * bk->ar_chunk_bytes);
        CHECK_EQ_I64(bk->cost_ns, cost_allreduce(&p->cost, bk->bytes).time_ns);
        for (int n = 0; n < P; n++) {
            int64_t by = 0;
            int right = (n + 1) % P, dest = plan_dest(p, bk->op, n, 0, &by);
            CHECK(plan_n_dests(p, bk->op, n) == 1 && dest == right && by == bk->ar_chunk_bytes,
                  "%s: bucket %d's flow from node %d", what, b, n);
            CHECK_EQ_I64(plan_n_sources(p, bk->op, n), 1);
        }
        /* ready when its lowest member's gradient is (WFBP), else after the last BWD */
        int trigger = p->scheme.wfbp ? p->units[bk->first].op_bwd : p->units[0].op_bwd;
        CHECK(op->n_deps == 1 && n_deps_on(p, bk->op, trigger, DEP_LOCAL, 0) == 1,
              "%s: bucket %d's trigger", what, b);
        if (!p->scheme.wfbp)
            CHECK(n_deps_on(p, p->units[0].op_fwd, bk->op, DEP_RECV, back) == 1,
                  "%s: FWD 0 does not wait for bucket %d once", what, b);
    }
    /* the cost model's sync time counts each bucket once, with its own ring */
    int64_t sync = 0;
    for (int u = 0; u < U; u++)
        if (p->units[u].method != SYNC_NONE && p->units[u].method != SYNC_ALLREDUCE)
            sync += p->units[u].cost_ns[p->units[u].method];
    for (int b = 0; b < p->n_buckets; b++) sync += p->buckets[b].cost_ns;
    CHECK_EQ_I64(plan_predicted_sync_ns(p), sync);
}

/* ----------------------------------------------------------------------- the plan */

/* Three FC layers: a 100 -> 100 (40,400 bytes), b 100 -> 100 (40,400), c 100 -> 10 (4,040). */
static const char *s_abc = "input data shape=100x1x1\n"
                           "fc a out=100\nrelu r1\nfc b out=100\nrelu r2\nfc c out=10\n"
                           "softmax_loss loss\n";

static bool same_op(const plan_op_t *a, const plan_op_t *b)
{
    return a->id == b->id && a->kind == b->kind && a->unit == b->unit && a->place == b->place &&
           a->res == b->res && a->bytes == b->bytes && a->flops == b->flops &&
           a->priority == b->priority && a->dep_first == b->dep_first &&
           a->n_deps == b->n_deps && a->steps == b->steps;
}

TEST(bucket_plan_size_zero_is_one_ring_per_unit)
{
    const char *nets[] = {"models/googlenet.net", "models/mlp.net", "models/resnet-152.net"};
    const char *schemes[] = {"allreduce+wfbp", "allreduce", "hybrid3"};
    for (int i = 0; i < 3; i++) {
        model_t m;
        load_net(&m, nets[i]);
        for (int s = 0; s < 3; s++)
            for (int ssp = 0; ssp <= 2; ssp += 2) {
                cluster_t c = cluster_of(8, 1, 50000);
                plan_t p, q;
                build(&p, &m, &c, schemes[s], ssp, 4 * MB, 0);
                char err[256];
                REQUIRE(plan_build(&q, &m, &c, p.scheme, ssp, 8, 4 * MB, err, sizeof err) == 0);
                char what[128];
                snprintf(what, sizeof what, "%s %s ssp %d", m.name, schemes[s], ssp);
                check_buckets(&p, what);
                /* plan_build is the unfused plan, op for op and dep for dep */
                REQUIRE(p.n_ops == q.n_ops && p.n_deps == q.n_deps, "%s", what);
                for (int o = 0; o < p.n_ops; o++)
                    CHECK(same_op(&p.ops[o], &q.ops[o]), "%s: op %d", what, o);
                for (int d = 0; d < p.n_deps; d++)
                    CHECK(p.deps[d].op == q.deps[d].op && p.deps[d].scope == q.deps[d].scope &&
                              p.deps[d].iter_back == q.deps[d].iter_back,
                          "%s: dep %d", what, d);
                /* one ring per all-reduce unit, its own: the unit's bytes and chunk */
                int n_ar = 0, prev_op = -1;
                for (int u = 0; u < p.n_units; u++) {
                    const plan_unit_t *un = &p.units[u];
                    if (un->method != SYNC_ALLREDUCE) continue;
                    n_ar++;
                    const plan_bucket_t *bk = &p.buckets[un->bucket];
                    CHECK(bk->n_units == 1 && bk->first == u && bk->last == u, "%s", what);
                    const plan_op_t *op = &p.ops[un->op_allreduce];
                    CHECK(op->unit == u && op->bytes == un->ar_bytes && op->priority == u,
                          "%s: unit %d's ring", what, u);
                    CHECK_EQ_I64(bk->ar_chunk_bytes, un->ar_chunk_bytes);
                    CHECK_EQ_I64(bk->cost_ns, un->cost_ns[SYNC_ALLREDUCE]);
                    CHECK(un->op_allreduce > prev_op, "%s: rings not in unit order", what);
                    prev_op = un->op_allreduce;
                }
                CHECK_EQ_I64(p.n_buckets, n_ar);
                if (s < 2) CHECK_EQ_I64(n_ar, p.n_units);
                plan_fini(&p);
                plan_fini(&q);
            }
        model_fini(&m);
    }
}

TEST(bucket_plan_packs_units_in_backward_order)
{
    model_t m;
    parse_net(&m, "abc.net", s_abc);
    cluster_t c = cluster_of(4, 1, 20000);
    plan_t p;
    /* B = 40 KiB: c (4,040) + b (40,400) = 44,440 >= B closes bucket 0; a alone (under B) */
    build(&p, &m, &c, "allreduce+wfbp", 0, 0, 40 << 10);
    REQUIRE(p.n_units == 3 && p.n_buckets == 2, "units %d, buckets %d", p.n_units, p.n_buckets);
    CHECK(p.units[2].bucket == 0 && p.units[1].bucket == 0 && p.units[0].bucket == 1, "members");
    CHECK(p.buckets[0].first == 1 && p.buckets[0].last == 2 && p.buckets[0].n_units == 2, "b0");
    CHECK(p.buckets[1].first == 0 && p.buckets[1].last == 0 && p.buckets[1].n_units == 1, "b1");
    CHECK_EQ_I64(p.buckets[0].bytes, 44440);
    CHECK_EQ_I64(p.buckets[1].bytes, 40400);
    CHECK_EQ_I64(p.buckets[0].ar_chunk_bytes, 11110); /* 44,440 / 4 */
    CHECK_EQ_I64(p.ops[p.buckets[0].op].bytes, 6 * 11110);
    /* bucket 0's ring waits for b's BWD, the later of its members' */
    CHECK(n_deps_on(&p, p.buckets[0].op, p.units[1].op_bwd, DEP_LOCAL, 0) == 1, "trigger");
    CHECK(n_deps_on(&p, p.units[2].op_fwd, p.buckets[0].op, DEP_RECV, 1) == 1, "FWD c");
    CHECK(n_deps_on(&p, p.units[1].op_fwd, p.buckets[0].op, DEP_RECV, 1) == 1, "FWD b");
    CHECK(n_deps_on(&p, p.units[0].op_fwd, p.buckets[1].op, DEP_RECV, 1) == 1, "FWD a");
    CHECK_EQ_I64(p.n_ops, 3 + 3 + 2);
    /* cost: the ring formula on the bucket's bytes, 6 (20 us + 11,110 B / 125 MB/s) */
    CHECK_EQ_I64(p.buckets[0].cost_ns, 6 * (20000 + 88880));
    check_buckets(&p, "abc 40K");
    plan_fini(&p);

    /* one byte under 44,440: still closes at b; B = 44,441: a joins too */
    build(&p, &m, &c, "allreduce+wfbp", 0, 0, 44440);
    CHECK_EQ_I64(p.n_buckets, 2);
    plan_fini(&p);
    build(&p, &m, &c, "allreduce+wfbp", 2, 0, 44441);
    REQUIRE(p.n_buckets == 1 && p.buckets[0].n_units == 3, "buckets %d", p.n_buckets);
    CHECK(n_deps_on(&p, p.buckets[0].op, p.units[0].op_bwd, DEP_LOCAL, 0) == 1, "trigger a");
    for (int u = 0; u < 3; u++) /* SSP(2): 3 iterations back */
        CHECK(n_deps_on(&p, p.units[u].op_fwd, p.buckets[0].op, DEP_RECV, 3) == 1, "fwd %d", u);
    check_buckets(&p, "abc ssp 44441");
    plan_fini(&p);

    /* no overlap: the ring after the last BWD; FWD 0 waits for it once */
    build(&p, &m, &c, "allreduce", 0, 0, 1 << 30);
    REQUIRE(p.n_buckets == 1);
    CHECK(n_deps_on(&p, p.units[0].op_fwd, p.buckets[0].op, DEP_RECV, 1) == 1, "FWD 0 once");
    int fwd0_deps = p.ops[p.units[0].op_fwd].n_deps;
    CHECK(fwd0_deps == 2, "FWD 0 has %d deps (previous BWD 0 and the ring)", fwd0_deps);
    check_buckets(&p, "abc none");
    plan_fini(&p);
    model_fini(&m);
}

/* c1 and c3 by all-reduce, c2 by PS between them, f1 and f2 by SFB (hybrid3 by the per-layer
 * rule at 1 Gbit/s, 8 KiB KV blocks, batch 8, on 2 and 4 nodes): a bucket skips over c2. c2's
 * 32 KB split evenly over the shards is as fast by PS as by the ring on 2 nodes (ties go to
 * PS) and faster on 4, where its ring steps are too short to hide their latency; c1 and c3
 * fit one KV block, so PS would send them whole to one shard. */
static const char *s_mix = "input data shape=1x12x12\n"
                           "conv c1 out=32 kernel=5 pad=2\nrelu r1\n"
                           "conv c2 out=16 kernel=4 bias=0\nrelu r2\n"
                           "conv c3 out=64 kernel=1\nrelu r3\n"
                           "fc f1 out=32\nrelu r4\nfc f2 out=10\nsoftmax_loss loss\n";

TEST(bucket_plan_skips_units_synced_otherwise)
{
    model_t m;
    parse_net(&m, "mix.net", s_mix);
    for (int nodes = 2; nodes <= 4; nodes += 2) {
        cluster_t c = cluster_of(nodes, 1, 20000);
        plan_t p;
        build_rule(&p, &m, &c, "hybrid3", 0, 8 << 10, MB, HYBRID_RULE_LAYER);
        const sync_method_t want[5] = {SYNC_ALLREDUCE, SYNC_PS, SYNC_ALLREDUCE, SYNC_SFB,
                                       SYNC_SFB};
        for (int u = 0; u < 5; u++)
            REQUIRE(p.units[u].method == want[u], "%d nodes: unit %d syncs by %s", nodes, u,
                    sync_method_name(p.units[u].method));
        REQUIRE(p.n_buckets == 1, "%d buckets", p.n_buckets);
        CHECK(p.buckets[0].first == 0 && p.buckets[0].last == 2 && p.buckets[0].n_units == 2,
              "c3 and c1 share a bucket across c2");
        CHECK(p.units[1].bucket == -1 && p.units[1].op_push >= 0, "c2 stays PS");
        check_buckets(&p, "mix hybrid3");
        plan_fini(&p);
    }
    model_fini(&m);
}

TEST(bucket_plan_every_size_on_real_networks)
{
    const char *nets[] = {"models/googlenet.net", "models/inception-v3.net",
                          "models/resnet-152.net", "models/alexnet.net"};
    const double mbs[] = {0, 0.25, 1, 4, 25, 1000};
    const char *schemes[] = {"allreduce+wfbp", "allreduce", "hybrid3"};
    for (int i = 0; i < 4; i++) {
        model_t m;
        load_net(&m, nets[i]);
        for (int s = 0; s < 3; s++)
            for (int nodes = 2; nodes <= 8; nodes *= 2) {
                int64_t prev_flows = INT64_MAX;
                int prev_buckets = 1 << 30;
                for (int k = 0; k < 6; k++) {
                    cluster_t c = cluster_of(nodes, 1, 50000);
                    plan_t p;
                    build(&p, &m, &c, schemes[s], 0, 4 * MB, llround(mbs[k] * MB));
                    char what[160];
                    snprintf(what, sizeof what, "%s %s %d nodes %g MB", m.name, schemes[s],
                             nodes, mbs[k]);
                    check_buckets(&p, what);
                    /* a larger bucket never means more rings, nor more flows */
                    int64_t flows = plan_flows_per_iteration(&p);
                    CHECK(p.n_buckets <= prev_buckets && flows <= prev_flows,
                          "%s: %d buckets, %lld flows; smaller buckets gave %d, %lld", what,
                          p.n_buckets, (long long)flows, prev_buckets, (long long)prev_flows);
                    if (mbs[k] == 1000 && strcmp(schemes[s], "hybrid3"))
                        CHECK_EQ_I64(p.n_buckets, 1);
                    prev_flows = flows;
                    prev_buckets = p.n_buckets;
                    plan_fini(&p);
                }
            }
        model_fini(&m);
    }
}

/* ------------------------------------------------------------------ the simulator */

/* f1 1024 -> 256 (1 MiB), f2 256 -> 256 (256 KiB), no biases; fixed compute times. */
static const char *s_two_fc = "input data shape=1024x1x1\nfc f1 out=256 bias=0\n"
                              "fc f2 out=256 bias=0\nsoftmax_loss loss\n";

/* One iteration of the two-FC network on `nodes` nodes at 1 GB/s (one byte per ns) and 7 us
 * per message; *p keeps the plan. */
static sim_result_t run_two_fc(const model_t *m, int nodes, int64_t bucket_bytes, plan_t *p)
{
    cluster_t c = cluster_of(nodes, 8, 7000);
    build(p, m, &c, "allreduce+wfbp", 0, 0, bucket_bytes);
    REQUIRE(p->n_units == 2, "units %d", p->n_units);
    int64_t fwd[2] = {1000, 500}, bwd[2] = {1500, 2000};
    unit_times_t tm = {2, fwd, bwd, 1e12};
    sim_opts_t o = {.iterations = 1, .seed = 1};
    sim_result_t r;
    sim_run(p, &tm, &o, &r);
    return r;
}

TEST(bucket_sim_two_fc_closed_form)
{
    const int64_t b1 = 1 << 20, b2 = 1 << 18;
    model_t m;
    parse_net(&m, "two-fc.net", s_two_fc);
    for (int P = 2; P <= 5; P++) {
        plan_t fused, apart;
        /* FWD 1000 + 500, BWD f2 2000 then f1 1500: the fused ring starts at 5000, alone,
         * 2(P-1) dependent steps of ceil((b1 + b2) / P), pipelined: only the last one's
         * latency shows (the chunks are far longer than a latency) */
        sim_result_t r = run_two_fc(&m, P, b1 + b2, &fused);
        REQUIRE(fused.n_buckets == 1 && fused.buckets[0].n_units == 2, "one bucket");
        int64_t chunk = (b1 + b2 + P - 1) / P;
        CHECK_EQ_I64(r.makespan_ns, 5000 + 2 * (P - 1) * chunk + 7000);
        CHECK_EQ_I64(fused.buckets[0].cost_ns, r.makespan_ns - 5000);
        CHECK_EQ_I64(plan_flows_per_iteration(&fused), (int64_t)P * 2 * (P - 1));
        CHECK_NEAR(r.sent_bytes_per_node, 2.0 * (P - 1) * chunk, 0, 1e-12);
        /* a bucket of f2 alone (B = its bytes) is the unfused plan */
        sim_result_t r0 = run_two_fc(&m, P, 0, &apart);
        plan_t exact;
        sim_result_t rb = run_two_fc(&m, P, b2, &exact);
        CHECK_EQ_I64(exact.n_buckets, 2);
        CHECK_EQ_I64(rb.makespan_ns, r0.makespan_ns);
        CHECK_EQ_I64(plan_flows_per_iteration(&apart), 2 * plan_flows_per_iteration(&fused));
        CHECK(r.events < r0.events, "%d nodes: fused %llu events, unfused %llu", P,
              (unsigned long long)r.events, (unsigned long long)r0.events);
        printf("two fc layers, %d nodes: fused %lld ns (closed form), unfused %lld ns\n", P,
               (long long)r.makespan_ns, (long long)r0.makespan_ns);
        plan_fini(&fused);
        plan_fini(&apart);
        plan_fini(&exact);
    }
    model_fini(&m);
}

TEST(bucket_experiment_key)
{
    char cwd[512], text[2048], err[2048];
    REQUIRE(getcwd(cwd, sizeof cwd));
    experiment_t e;
    model_t m;
    snprintf(text, sizeof text, "model = %s/models/mlp.net\ncluster = %s/experiments/clusters/"
                                "emu-veth.cluster\nallreduce_bucket_mb = 2.5\n", cwd, cwd);
    fixture_load_exp(&e, &m, text);
    CHECK_EQ_I64(e.allreduce_bucket_bytes, 5 * MB / 2);
    CHECK(experiment_override(&e, "allreduce_bucket_mb=0", err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(e.allreduce_bucket_bytes, 0);
    CHECK(experiment_override(&e, "allreduce_bucket_mb=-1", err, sizeof err) == -1, "negative");
    CHECK(strstr(err, "allreduce_bucket_mb"), "%s", err);
    model_fini(&m);
    /* a bad value names the file and line */
    snprintf(text, sizeof text, "%s/bad.exp", test_tmpdir());
    FILE *f = fopen(text, "w");
    REQUIRE(f);
    fprintf(f, "model = x.net\n# fusion\nallreduce_bucket_mb = lots\n");
    fclose(f);
    CHECK(experiment_load(&e, text, err, sizeof err) == -1, "bad value accepted");
    CHECK(strstr(err, "bad.exp:3:") && strstr(err, "allreduce_bucket_mb"), "%s", err);
    CHECK(strstr(experiment_keys_help(), "allreduce_bucket_mb"), "not in the key help");
}

/* GoogLeNet, 8 Titan X nodes at 1 Gbit/s (experiments/googlenet.exp's cluster): the fused
 * plans against the unfused one. Without overlap every ring starts after the last BWD and
 * FWD 0 waits for all of them: fusing cannot be slower. With WFBP a bucket starts only when
 * its last member's gradient is ready and the last bucket holds the next forward back, so
 * large buckets lose overlap; 1 MB buckets must cost no more than 1%. */
TEST(bucket_sim_googlenet_8_nodes)
{
    char cwd[512], text[2048];
    REQUIRE(getcwd(cwd, sizeof cwd));
    snprintf(text, sizeof text, "model = %s/models/googlenet.net\ncluster = %s/experiments/"
                                "clusters/titanx-40gbe.cluster\nbatch = 32\niterations = 4\n",
             cwd, cwd);
    experiment_t e;
    model_t m;
    fixture_load_exp(&e, &m, text);
    const double mbs[] = {0, 1, 4, 25};
    const char *schemes[] = {"allreduce", "allreduce+wfbp"};
    for (int s = 0; s < 2; s++) {
        int64_t iter0 = 0;
        uint64_t events0 = 0;
        for (int k = 0; k < 4; k++) {
            fixture_one_config(&e, 8, 1, schemes[s]);
            scheme_t sc = e.schemes[0];
            e.allreduce_bucket_bytes = llround(mbs[k] * MB);
            simrun_out_t o;
            cluster_t c;
            char err[1024];
            REQUIRE(simrun_config(&e, &m, 0, &c, NULL, &o, err, sizeof err) == 0, "%s", err);
            plan_opts_t po = {.scheme = sc, .batch = e.batch, .kv_block_bytes = e.kv_block_bytes,
                              .allreduce_bucket_bytes = e.allreduce_bucket_bytes};
            plan_t p;
            REQUIRE(plan_build_opts(&p, &m, &c, &po, err, sizeof err) == 0, "%s", err);
            printf("googlenet 8 nodes 1 Gbit/s %-15s bucket %4g MB: %2d rings, %5lld flows, "
                   "iteration %.3f ms, %llu events\n", schemes[s], mbs[k], p.n_buckets,
                   (long long)plan_flows_per_iteration(&p), o.r.iter_ns / 1e6,
                   (unsigned long long)o.r.events);
            if (k == 0) {
                iter0 = o.r.iter_ns;
                events0 = o.r.events;
                CHECK_EQ_I64(p.n_buckets, p.n_units);
            } else {
                CHECK(p.n_buckets < p.n_units, "%g MB fused nothing", mbs[k]);
                CHECK(o.r.events < events0, "%g MB: %llu events, unfused %llu", mbs[k],
                      (unsigned long long)o.r.events, (unsigned long long)events0);
                double tol = s == 0 ? 1e-3 : mbs[k] <= 1 ? 0.01 : INFINITY;
                CHECK(o.r.iter_ns <= iter0 * (1 + tol), "%s %g MB: %.3f ms, unfused %.3f ms",
                      schemes[s], mbs[k], o.r.iter_ns / 1e6, iter0 / 1e6);
            }
            plan_fini(&p);
        }
    }
    model_fini(&m);
}

/* -------------------------------------------------------------------- the runtime */

#define BT_BATCH 8
#define BT_STEPS 5

static void bt_config(worker_config_t *c, const char *model, const char *scheme,
                      int64_t bucket_bytes, const char *out)
{
    worker_config_init(c);
    experiment_t *j = &c->job;
    fixture_set(j, "scheme=%s", scheme);
    fixture_set(j, "model=%s", model);
    fixture_set(j, "data=synthetic");
    fixture_set(j, "synthetic_n=512");
    fixture_set(j, "batch=%d", BT_BATCH);
    fixture_set(j, "iterations=%d", BT_STEPS);
    fixture_set(j, "lr=0.05");
    fixture_set(j, "allreduce_bucket_mb=%.17g", (double)bucket_bytes / (1 << 20));
    REQUIRE(j->allreduce_bucket_bytes == bucket_bytes);
    c->evaluate = false;
    c->timeout_ms = 20000;
    c->params_out = out;
}

/* The ALLREDUCE rows of a merged trace for iteration t: count and summed bytes. */
static int bt_trace_rings(const char *path, int t, int64_t *bytes)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    int n = 0;
    *bytes = 0;
    while (fgets(line, sizeof line, f)) {
        trace_rec_t r;
        if (trace_rec_parse(line, &r) == 0 && r.node == 0 && r.iteration == t &&
            !strcmp(r.op, "ALLREDUCE")) {
            n++;
            *bytes += r.bytes;
        }
    }
    fclose(f);
    return n;
}

/* BSP on `world` workers with buckets of bucket_bytes computes, bit-identically on every
 * rank, what one worker computes on the combined batch; the plan the ranks ran had the
 * expected rings (the trace: one ALLREDUCE row per bucket). */
static void bt_case(const char *model, const char *scheme, int world, int64_t bucket_bytes,
                    const char *cluster_text, int want_rings)
{
    char out[600], trace[600], merged[700], clu[600];
    snprintf(out, sizeof out, "%s/p-%d-%lld", test_tmpdir(), world, (long long)bucket_bytes);
    snprintf(trace, sizeof trace, "%s/tr-%d-%lld", test_tmpdir(), world,
             (long long)bucket_bytes);
    snprintf(merged, sizeof merged, "%s.csv", trace);
    worker_config_t c;
    bt_config(&c, model, scheme, bucket_bytes, out);
    c.trace_prefix = trace;
    if (cluster_text) { /* a fixed cost model (no probe) and the per-layer rule: hybrid3's
                           methods are known (see s_mix) */
        snprintf(clu, sizeof clu, "%s/bt.cluster", test_tmpdir());
        FILE *f = fopen(clu, "w");
        REQUIRE(f);
        fputs(cluster_text, f);
        fclose(f);
        fixture_set(&c.job, "cluster=%s", clu);
        fixture_set(&c.job, "probe=no");
        fixture_set(&c.job, "kv_block_mb=0.03125"); /* 32 KB */
        fixture_set(&c.job, "hybrid_rule=layer");
    }
    int rc = bsp_launch(&c, world);
    REQUIRE(rc == 0, "%s, %d workers, bucket %lld: job exited %d", scheme, world,
            (long long)bucket_bytes, rc);
    int64_t ring_bytes = 0;
    int rings = bt_trace_rings(merged, 1, &ring_bytes);
    CHECK(rings == want_rings, "%s, %d workers, bucket %lld B: %d rings in iteration 1, "
          "expected %d", scheme, world, (long long)bucket_bytes, rings, want_rings);
    char what[128];
    snprintf(what, sizeof what, "%s on %d workers, buckets of %lld B", scheme, world,
             (long long)bucket_bytes);
    /* the ranks waited for every local edge of the plan (its ops and deps do not depend on
     * the probed link when the methods are fixed) */
    if (cluster_text || !strcmp(scheme, "allreduce+wfbp")) {
        model_t m;
        plan_t p;
        cluster_t cl;
        plan_opts_t po;
        char err[1024];
        REQUIRE(model_load(&m, c.job.model_path, err, sizeof err) == 0, "%s", err);
        job_config(&c.job, 0, NULL, &cl, &po);
        REQUIRE(plan_build_opts(&p, &m, &cl, &po, err, sizeof err) == 0, "%s", err);
        int checked = 0;
        CHECK_EQ_I64(trace_edge_violations(&p, merged, true, 0, what, &checked), 0);
        CHECK(checked > 0, "%s: no edge checked", what);
        plan_fini(&p);
        model_fini(&m);
    }
    double worst = bsp_check_run(&c, out, world, BT_STEPS, what);
    printf("%s: %d rings (%lld bytes/node), worst parameter at %.3f of the tolerance\n", what,
           rings, (long long)ring_bytes, worst);
}

TEST(bucket_worker_allreduce_equals_one_worker)
{
    /* mlp: fc1 803,840 B, fc2 131,584 B, fc3 5,160 B. 100 KiB: {fc3, fc2}, {fc1}; 1 MiB: all
     * three in one ring */
    bt_case("models/mlp.net", "allreduce+wfbp", 2, 100 << 10, NULL, 2);
    bt_case("models/mlp.net", "allreduce+wfbp", 4, 100 << 10, NULL, 2);
    bt_case("models/mlp.net", "allreduce+wfbp", 4, MB, NULL, 1);
}

TEST(bucket_worker_hybrid3_equals_one_worker)
{
    /* c1 and c3 in one bucket across c2 (PS); f1 and f2 by SFB (see s_mix) */
    char net[600];
    snprintf(net, sizeof net, "%s/mix.net", test_tmpdir());
    FILE *f = fopen(net, "w");
    REQUIRE(f);
    fputs(s_mix, f);
    fclose(f);
    bt_case(net, "hybrid3", 2, MB, "nic_gbps = 1\nlatency_us = 20\n", 1);
    bt_case(net, "hybrid3", 4, MB, "nic_gbps = 1\nlatency_us = 20\n", 1);
}
