/* Precision keys (core/precision.h): the arithmetic and wire precisions of a job, every
 * refused value and pair named with its file and line, the written job carrying both; the
 * plan counting every exchange at the wire precision (exactly half at bf16), the device's
 * per-precision peaks, profiles that say their precision, and a hybrid choice that changes
 * with the wire. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/kvfile.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/unit_times.h"
#include "sim/simrun.h"
#include "tests/exp_fixture.h"
#include "tests/test.h"

/* Load text as an experiment; returns experiment_load's result with err. */
static int load_text(experiment_t *e, const char *text, char *path, size_t pathlen, char *err,
                     size_t errlen)
{
    snprintf(path, pathlen, "%s/p.exp", test_tmpdir());
    fixture_write_file(path, text);
    return experiment_load(e, path, err, errlen);
}

TEST(precision_keys_default_to_fp32_and_take_every_allowed_pair)
{
    static const char *const names[] = {"fp32", "bf16", "fp16"};
    experiment_t *e = xmalloc(sizeof *e);
    char path[600], err[2048], extra[128];
    REQUIRE(load_text(e, fixture_exp_text("lenet", ""), path, sizeof path, err, sizeof err) == 0,
            "%s", err);
    CHECK(e->precision == PRECISION_FP32 && e->wire_precision == PRECISION_FP32, "defaults");
    for (int a = 0; a < 3; a++)
        for (int w = 0; w < 3; w++) {
            snprintf(extra, sizeof extra, "precision = %s\nwire_precision = %s\n", names[a],
                     names[w]);
            int rc = load_text(e, fixture_exp_text("lenet", extra), path, sizeof path, err,
                               sizeof err);
            int allowed = w != PRECISION_FP16 || a == PRECISION_FP16;
            CHECK(rc == (allowed ? 0 : -1), "precision %s, wire %s: rc %d (%s)", names[a],
                  names[w], rc, rc ? err : "");
            if (rc == 0)
                CHECK(e->precision == (precision_t)a && e->wire_precision == (precision_t)w,
                      "%s/%s read as %d/%d", names[a], names[w], e->precision,
                      e->wire_precision);
        }
    free(e);
}

/* Every refused value and pair: one line naming the key, the file and line, what is allowed. */
TEST(precision_refused_values_and_pairs_name_key_file_and_line)
{
    static const struct {
        const char *extra;
        int line;          /* of the experiment text: 2 fixture lines come first */
        const char *want;  /* in the message after "PATH:LINE: " */
    } cases[] = {
        {"precision = fp8\n", 3, "expected precision = fp32 | bf16 | fp16, got 'fp8'"},
        {"wire_precision = FP16\n", 3, "expected wire_precision = fp32 | bf16 | fp16, got 'FP16'"},
        {"wire_precision = \n", 3, "expected wire_precision = fp32 | bf16 | fp16"},
        {"wire_precision = fp16\n", 3,
         "expected wire_precision = fp32 | bf16 with precision = fp32"},
        {"precision = bf16\nbatch = 8\nwire_precision = fp16\n", 5,
         "expected wire_precision = fp32 | bf16 with precision = bf16"},
        {"wire_precision = fp16\nprecision = bf16\n", 4,
         "expected wire_precision = fp32 | bf16 with precision = bf16"},
    };
    experiment_t *e = xmalloc(sizeof *e);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[600], err[2048], prefix[700];
        int rc = load_text(e, fixture_exp_text("lenet", cases[i].extra), path, sizeof path, err,
                           sizeof err);
        snprintf(prefix, sizeof prefix, "%s:%d: ", path, cases[i].line);
        CHECK(rc == -1, "case %zu accepted", i);
        CHECK(!strncmp(err, prefix, strlen(prefix)) && strstr(err, cases[i].want) &&
                  !strchr(err, '\n'),
              "case %zu: '%s', expected '%s%s...'", i, err, prefix, cases[i].want);
    }
    /* on the command line: the override that made the pair is named */
    char path[600], err[2048];
    REQUIRE(load_text(e, fixture_exp_text("lenet", "precision = bf16\n"), path, sizeof path, err,
                      sizeof err) == 0, "%s", err);
    REQUIRE(experiment_override(e, "wire_precision=fp16", err, sizeof err) == 0, "%s", err);
    CHECK(experiment_check_overrides(e, err, sizeof err) == -1 &&
              !strncmp(err, "--set: expected wire_precision = fp32 | bf16 with precision = bf16",
                       66),
          "override: %s", err);
    CHECK(experiment_override(e, "precision=half", err, sizeof err) == -1 &&
              !strcmp(err, "--set: expected precision = fp32 | bf16 | fp16, got 'half'"),
          "bad override: %s", err);
    REQUIRE(experiment_override(e, "precision=fp16", err, sizeof err) == 0, "%s", err);
    CHECK(experiment_check_overrides(e, err, sizeof err) == 0, "fp16 / fp16: %s", err);
    free(e);
}

/* An experiment on models/NET.net (exp_fixture's cluster, then extra), its model, and the
 * cluster and plan options of its first configuration. */
static void load_job(experiment_t *e, model_t *m, cluster_t *c, plan_opts_t *po, const char *net,
                     const char *extra)
{
    fixture_load_exp(e, m, fixture_exp_text(net, extra));
    job_config(e, 0, NULL, c, po);
}

TEST(precision_written_job_carries_both_keys)
{
    experiment_t e;
    model_t m;
    cluster_t c;
    plan_opts_t po;
    load_job(&e, &m, &c, &po, "lenet",
             "precision = fp16\nwire_precision = bf16\nsweep_nodes = 4\n");
    CHECK(po.precision == PRECISION_FP16 && po.wire_precision == PRECISION_BF16, "plan options");
    char path[600], err[2048];
    snprintf(path, sizeof path, "%s/run.exp", test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    REQUIRE(experiment_write(&e, 0, &c, NULL, f) == 0);
    fclose(f);
    char *text = kv_read_file(path);
    REQUIRE(text);
    CHECK(strstr(text, "\nprecision = fp16\n") && strstr(text, "\nwire_precision = bf16\n"),
          "written:\n%s", text);
    free(text);
    experiment_t *back = xmalloc(sizeof *back);
    REQUIRE(experiment_load(back, path, err, sizeof err) == 0, "%s", err);
    CHECK(back->precision == PRECISION_FP16 && back->wire_precision == PRECISION_BF16,
          "read back %d/%d", back->precision, back->wire_precision);
    free(back);
    model_fini(&m);
}

/* The plan of (m, c, po) at wire precision w. */
static void plan_at(plan_t *p, const model_t *m, const cluster_t *c, plan_opts_t po,
                    precision_t w)
{
    char err[1024];
    po.wire_precision = w;
    REQUIRE(plan_build_opts(p, m, c, &po, err, sizeof err) == 0, "%s", err);
}

/* Byte counts of b (bf16) that are not exactly half of a's (fp32): units (PS, SFB, ring,
 * local steps), buckets, ops, every flow of every instance, the shards' pieces. Adds the
 * non-zero counts compared to *compared; the first mismatch is described in first. */
static int half_mismatches(const plan_t *a, const plan_t *b, int *compared, char *first,
                           size_t len)
{
    int bad = 0;
    first[0] = 0;
    if (a->n_units != b->n_units || a->n_ops != b->n_ops || a->n_pieces != b->n_pieces ||
        a->n_buckets != b->n_buckets) {
        snprintf(first, len, "the plans differ in shape");
        return 1;
    }
#define HALF(x, y)                                                                          \
    do {                                                                                    \
        if ((x) != 2 * (y) && !bad++)                                                       \
            snprintf(first, len, "%s = %lld at fp32, %lld at bf16", #x, (long long)(x),     \
                     (long long)(y));                                                       \
        *compared += (x) > 0;                                                               \
    } while (0)
    for (int u = 0; u < a->n_units; u++) {
        const plan_unit_t *x = &a->units[u], *y = &b->units[u];
        bad += x->method != y->method;
        HALF(x->tensor.weight_bytes, y->tensor.weight_bytes);
        HALF(x->tensor.bias_bytes, y->tensor.bias_bytes);
        HALF(x->ps_bytes, y->ps_bytes);
        HALF(x->sfb_peer_bytes, y->sfb_peer_bytes);
        HALF(x->ar_bytes, y->ar_bytes);
        HALF(x->ar_chunk_bytes, y->ar_chunk_bytes);
        HALF(x->lreduce_bytes, y->lreduce_bytes);
        HALF(x->lbcast_bytes, y->lbcast_bytes);
    }
    for (int k = 0; k < a->n_buckets; k++) {
        HALF(a->buckets[k].bytes, b->buckets[k].bytes);
        HALF(a->buckets[k].ar_chunk_bytes, b->buckets[k].ar_chunk_bytes);
    }
    for (int i = 0; i < a->n_pieces; i++) HALF(a->pieces[i].bytes, b->pieces[i].bytes);
    for (int o = 0; o < a->n_ops; o++) {
        HALF(a->ops[o].bytes, b->ops[o].bytes);
        for (int node = 0; node < a->workers; node++) {
            if (!plan_has_instance(a, o, node)) continue;
            int nd = plan_n_dests(a, o, node);
            bad += nd != plan_n_dests(b, o, node);
            for (int i = 0; i < nd; i++) {
                int64_t x, y;
                plan_dest(a, o, node, i, &x);
                plan_dest(b, o, node, i, &y);
                HALF(x, y);
            }
        }
    }
#undef HALF
    return bad;
}

/* Each scheme at fp32 and bf16 on the wire: every exchange moves exactly half the bytes —
 * PS pushes and pulls (even split and whole-tensor KV blocks), SFB factors, ring chunks,
 * all-reduce buckets, local reduces and broadcasts of a node of two devices. */
TEST(precision_plan_bytes_at_bf16_are_half_of_fp32)
{
    experiment_t e;
    model_t m;
    fixture_load_exp(&e, &m, fixture_exp_text("lenet", "sweep_nodes = 4\n"));
    static const char *const schemes[] = {"ps+wfbp", "sfb+wfbp", "allreduce+wfbp"};
    static const int64_t kv[] = {0, KV_BLOCK_WHOLE_TENSOR};
    int compared = 0;
    for (int d = 1; d <= 2; d++)
        for (size_t s = 0; s < 3; s++)
            for (size_t k = 0; k < 2; k++) {
                cluster_t c;
                plan_opts_t po;
                job_config(&e, 0, NULL, &c, &po);
                c.devices_per_node = d;
                if (d > 1) REQUIRE(interconnect_preset(&c, "pcie3") == 0);
                REQUIRE(scheme_parse(schemes[s], &po.scheme) == 0);
                po.kv_block_bytes = kv[k];
                po.allreduce_bucket_bytes = s == 2 && k ? 1 << 20 : 0; /* buckets, once */
                plan_t a, b;
                plan_at(&a, &m, &c, po, PRECISION_FP32);
                plan_at(&b, &m, &c, po, PRECISION_BF16);
                char first[256];
                int bad = half_mismatches(&a, &b, &compared, first, sizeof first);
                CHECK(bad == 0, "%s, %d devices, kv %lld: %d counts not half; %s", schemes[s],
                      d, (long long)kv[k], bad, first);
                /* the check can fail: one byte more is seen */
                if (s == 0 && k == 0 && d == 1) {
                    int dummy = 0;
                    b.units[1].ps_bytes++;
                    CHECK(half_mismatches(&a, &b, &dummy, first, sizeof first) == 1,
                          "a corrupted count passed");
                    b.units[1].ps_bytes--;
                }
                plan_fini(&a);
                plan_fini(&b);
            }
    CHECK(compared > 500, "only %d byte counts compared", compared);
    model_fini(&m);
}

/* The presets' half peaks (vendor dense peaks; 0 reads as fp32's), and the device model's
 * compute time at bf16 on an h100: FLOP-bound, it scales with the peak ratio. */
TEST(precision_device_peaks_scale_the_compute_time)
{
    device_t d;
    REQUIRE(device_preset(&d, "h100") == 0);
    CHECK(device_peak_flops(&d, PRECISION_FP32) == 67e12, "h100 fp32");
    CHECK(device_peak_flops(&d, PRECISION_BF16) == 989.4e12, "h100 bf16");
    CHECK(device_peak_flops(&d, PRECISION_FP16) == 989.4e12, "h100 fp16");
    device_t t;
    REQUIRE(device_preset(&t, "titanx-maxwell") == 0);
    CHECK(device_peak_flops(&t, PRECISION_BF16) == 6.6e12 &&
              device_peak_flops(&t, PRECISION_FP16) == 6.6e12, "no faster halves on Maxwell");

    experiment_t e;
    model_t m;
    fixture_load_exp(&e, &m, fixture_exp_text("vgg19", "cluster.device = h100\n"
                                                        "cluster.mem_gbps = 1e9\n"
                                                        "cluster.launch_us = 0\n"));
    int fc6 = model_find(&m, "fc6");
    REQUIRE(fc6 >= 0);
    for (int bwd = 0; bwd < 2; bwd++) {
        int64_t f32 = unit_times_layer_ns_at(&e.cluster.device, &m.layers[fc6], 32, bwd,
                                             PRECISION_FP32);
        int64_t b16 = unit_times_layer_ns_at(&e.cluster.device, &m.layers[fc6], 32, bwd,
                                             PRECISION_BF16);
        CHECK_NEAR((double)f32 / (double)b16, 989.4 / 67, 0, 1e-4);
        CHECK_EQ_I64(f32, unit_times_layer_ns(&e.cluster.device, &m.layers[fc6], 32, bwd));
    }
    model_fini(&m);
}

/* A profile says its precision in a comment line; none reads as fp32. One of the job's
 * precision is used as it is, one of another is scaled by the device's peak ratio; an
 * unknown precision is refused with its line. */
TEST(precision_profiles_carry_their_precision)
{
    experiment_t e;
    model_t m;
    fixture_load_exp(&e, &m, fixture_exp_text("lenet", "cluster.device = h100\n"));
    char rows[1024] = "", path[600], err[1024];
    for (int i = 0; i < m.n_layers; i++)
        if (m.layers[i].type != LAYER_INPUT)
            snprintf(rows + strlen(rows), sizeof rows - strlen(rows), "%s,32,989400,1978800\n",
                     m.layers[i].name);
    snprintf(path, sizeof path, "%s/p.csv", test_tmpdir());
    static const struct {
        const char *head;
        precision_t job;
        double scale; /* of the times read */
    } cases[] = {
        {"", PRECISION_FP32, 1},
        {"# precision = bf16\n", PRECISION_BF16, 1},
        {"# precision = fp32\n", PRECISION_BF16, 67 / 989.4},
        {"# measured on a test\n", PRECISION_FP16, 67 / 989.4},
        {"# precision = bf16\nlayer,batch,fwd_ns,bwd_ns\n", PRECISION_FP32, 989.4 / 67},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text, "%s%s", cases[i].head, rows);
        fixture_write_file(path, text);
        cluster_t c;
        plan_opts_t po;
        job_config(&e, 0, NULL, &c, &po);
        po.precision = cases[i].job;
        plan_t p;
        REQUIRE(plan_build_opts(&p, &m, &c, &po, err, sizeof err) == 0, "%s", err);
        unit_times_t t;
        REQUIRE(unit_times_profile(&t, &p, path, err, sizeof err) == 0, "case %zu: %s", i, err);
        int layers = p.units[0].last - p.units[0].first; /* unit 0 holds the input too */
        CHECK_EQ_I64(t.fwd_ns[0], layers * llround(989400 * cases[i].scale));
        CHECK_EQ_I64(t.bwd_ns[0], layers * llround(1978800 * cases[i].scale));
        unit_times_fini(&t);
        plan_fini(&p);
    }
    char text[2048];
    snprintf(text, sizeof text, "# a profile\n# precision = fp8\n%s", rows);
    fixture_write_file(path, text);
    plan_t p;
    cluster_t c;
    plan_opts_t po;
    job_config(&e, 0, NULL, &c, &po);
    REQUIRE(plan_build_opts(&p, &m, &c, &po, err, sizeof err) == 0, "%s", err);
    unit_times_t t;
    CHECK(unit_times_profile(&t, &p, path, err, sizeof err) == -1, "fp8 accepted");
    char want[700];
    snprintf(want, sizeof want, "%s:2: expected # precision = fp32 | bf16 | fp16", path);
    CHECK(!strcmp(err, want), "'%s'", err);
    plan_fini(&p);
    model_fini(&m);
}

/* A choice that moves with the wire (scripts/precision_sweep.sh): VGG19 on 8 Titan X nodes at
 * 40 GbE, hybrid3. A ring pays 2(P-1) latencies and PS two, so once bf16 halves the bytes,
 * conv1.2 (37k parameters) is cheaper through PS than around the ring. */
TEST(precision_wire_changes_a_hybrid3_choice)
{
    experiment_t e;
    model_t m;
    cluster_t c;
    plan_opts_t po;
    load_job(&e, &m, &c, &po, "vgg19",
             "sweep_nodes = 8\nsweep_gbps = 40\nsweep_schemes = hybrid3\n");
    int layer = model_find(&m, "conv1.2/conv");
    REQUIRE(layer >= 0);
    sync_method_t got[2];
    for (int w = 0; w < 2; w++) {
        plan_t p;
        plan_at(&p, &m, &c, po, w ? PRECISION_BF16 : PRECISION_FP32);
        got[w] = SYNC_NONE;
        for (int u = 0; u < p.n_units; u++)
            if (p.units[u].layer == layer) got[w] = p.units[u].method;
        plan_fini(&p);
    }
    CHECK(got[0] == SYNC_ALLREDUCE && got[1] == SYNC_PS, "conv1.2: %s at fp32, %s at bf16",
          sync_method_name(got[0]), sync_method_name(got[1]));
    model_fini(&m);
}

/* The simulator moves the plan's bytes: each scheme of one method sends and receives exactly
 * half per node with bf16 on the wire (a hybrid may choose other methods at bf16). */
TEST(precision_simulator_moves_half_the_bytes_at_bf16)
{
    experiment_t e;
    model_t m;
    fixture_load_exp(&e, &m, fixture_exp_text("lenet", "sweep_nodes = 4\nkv_block_mb = 0\n"
                                                        "sweep_schemes = ps,ps+wfbp,"
                                                        "sfb+wfbp,allreduce+wfbp\n"));
    for (int i = 0; i < experiment_config_count(&e); i++) {
        double sent[2], recv[2];
        for (int w = 0; w < 2; w++) {
            e.wire_precision = w ? PRECISION_BF16 : PRECISION_FP32;
            cluster_t c;
            simrun_out_t o;
            char err[1024];
            REQUIRE(simrun_config(&e, &m, i, &c, NULL, &o, err, sizeof err) == 0, "%s", err);
            sent[w] = o.r.sent_bytes_per_node;
            recv[w] = o.r.recv_bytes_per_node;
        }
        CHECK(sent[0] > 0 && sent[0] == 2 * sent[1] && recv[0] == 2 * recv[1],
              "config %d: sent %.0f / %.0f, received %.0f / %.0f bytes per node", i, sent[0],
              sent[1], recv[0], recv[1]);
    }
    model_fini(&m);
}
