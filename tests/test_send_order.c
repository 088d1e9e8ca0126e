/* Send order keys (core/plan.h): send_order and slice_bytes read, refused with one line that
 * names the key and what is allowed, written with the job only when not the default; the
 * plan records them, and an arrival plan keeps the hash it had before the keys existed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/model.h"
#include "core/plan.h"
#include "tests/exp_fixture.h"
#include "tests/test.h"

static int load_text(experiment_t *e, const char *text, char *err, size_t errlen)
{
    char path[600];
    snprintf(path, sizeof path, "%s/so.exp", test_tmpdir());
    fixture_write_file(path, text);
    return experiment_load(e, path, err, errlen);
}

TEST(send_order_keys_default_read_and_refuse)
{
    experiment_t *e = xmalloc(sizeof *e);
    char err[2048];
    REQUIRE(load_text(e, fixture_exp_text("lenet", ""), err, sizeof err) == 0, "%s", err);
    CHECK(e->send_order == SEND_ORDER_ARRIVAL, "default %d", e->send_order);
    CHECK_EQ_I64(e->slice_bytes, 0); /* the order's own */
    REQUIRE(load_text(e, fixture_exp_text("lenet", "send_order = layer\nslice_bytes = 65536\n"),
                      err, sizeof err) == 0, "%s", err);
    CHECK(e->send_order == SEND_ORDER_LAYER, "read %d", e->send_order);
    CHECK_EQ_I64(e->slice_bytes, 65536);
    REQUIRE(load_text(e, fixture_exp_text("lenet", "send_order = fair\n"), err, sizeof err) == 0,
            "%s", err);
    CHECK(e->send_order == SEND_ORDER_FAIR, "read %d", e->send_order);
    static const struct {
        const char *extra, *want;
    } bad[] = {
        {"send_order = priority\n", "expected send_order = arrival | layer | fair, got 'priority'"},
        {"slice_bytes = 65532\n", "expected slice_bytes = a multiple of 4 from 65536 to"},
        {"slice_bytes = 65537\n", "expected slice_bytes = a multiple of 4 from 65536 to"},
        {"slice_bytes = 1MB\n", "expected slice_bytes = a multiple of 4 from 65536 to"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(load_text(e, fixture_exp_text("lenet", bad[i].extra), err, sizeof err) == -1,
              "case %zu accepted", i);
        CHECK(strstr(err, bad[i].want) && !strchr(err, '\n'), "case %zu: %s", i, err);
    }
    free(e);
}

/* The plan of a job: arrival has no slice and the hash of a plan built without the keys;
 * layer records the slice and changes the hash (a run and its prediction must agree on it). */
TEST(send_order_plan_records_order_and_slice)
{
    experiment_t *e = xmalloc(sizeof *e);
    char err[2048];
    REQUIRE(load_text(e, fixture_exp_text("lenet", "scheme = ps+wfbp\n"), err, sizeof err) == 0,
            "%s", err);
    model_t m;
    REQUIRE(model_load(&m, e->model_path, err, sizeof err) == 0, "%s", err);
    cluster_t c;
    plan_opts_t po;
    job_config(e, 0, NULL, &c, &po);
    plan_t a, bare, l;
    REQUIRE(plan_build_opts(&a, &m, &c, &po, err, sizeof err) == 0, "%s", err);
    plan_opts_t none = po;
    none.send_order = SEND_ORDER_ARRIVAL;
    none.slice_bytes = 0;
    REQUIRE(plan_build_opts(&bare, &m, &c, &none, err, sizeof err) == 0, "%s", err);
    CHECK(plan_hash(&a) == plan_hash(&bare), "arrival changed the hash");
    CHECK_EQ_I64(a.slice_bytes, 0);
    po.send_order = SEND_ORDER_LAYER;
    REQUIRE(plan_build_opts(&l, &m, &c, &po, err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(l.slice_bytes, PLAN_SLICE_BYTES_DEFAULT);
    CHECK(plan_hash(&l) != plan_hash(&a), "layer kept the arrival hash");
    for (int u = 0; u < l.n_units; u++) /* the next forward pass needs unit 0 first */
        if (l.units[u].op_push >= 0) CHECK_EQ_I64(l.ops[l.units[u].op_push].priority, u);
    plan_t f; /* fair: its own default slice, and a hash of its own */
    po.send_order = SEND_ORDER_FAIR;
    REQUIRE(plan_build_opts(&f, &m, &c, &po, err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(f.slice_bytes, PLAN_SLICE_BYTES_FAIR_DEFAULT);
    CHECK(plan_hash(&f) != plan_hash(&a) && plan_hash(&f) != plan_hash(&l), "fair kept a hash");
    plan_fini(&f);
    plan_fini(&a);
    plan_fini(&bare);
    plan_fini(&l);
    model_fini(&m);
    free(e);
}
