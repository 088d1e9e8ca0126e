/* SFB for sequences: a linear layer's sufficient factors have one row per token (batch x
 * positions), so the cost model and the plan count tokens, and hybrid picks SFB only while
 * it moves fewer bytes than PS: the paper's rule with K = batch x S. */
#include <stdio.h>
#include <string.h>

#include "core/cluster.h"
#include "core/cost.h"
#include "core/model.h"
#include "core/plan.h"
#include "test.h"

static int seq_model(model_t *m, int seq)
{
    char text[512], err[512];
    snprintf(text, sizeof text,
             "tokens ids seq=%d vocab=100\nembed e vocab=100 dim=512\n"
             "linear fc out=2048\ngelu g\nlinear fc2 out=512\n"
             "linear head out=100 bias=0 tie=e\nseq_loss loss\n", seq);
    int rc = model_parse(m, "seq.net", text, strlen(text), err, sizeof err);
    if (rc) fprintf(stderr, "    %s\n", err);
    return rc;
}

TEST(seq_plan_sfb_counts_tokens_and_hybrid_follows_the_byte_rule)
{
    const int batch = 4, nodes = 16;
    const int seqs[] = {1, 8, 32, 64, 128, 512};
    int sfb_seen = 0, ps_seen = 0;
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
        model_t m;
        REQUIRE(seq_model(&m, seqs[i]) == 0);
        cluster_t c;
        cluster_init(&c);
        c.nodes = nodes;
        c.nic_Bps = 1e9;
        c.lat_ns = 0;
        c.device.peak_flops = 1e30; /* reconstruction free: the time rule is the byte rule */
        plan_t p;
        char err[512];
        REQUIRE(plan_build(&p, &m, &c, (scheme_t){SCHEME_HYBRID, true}, 0, batch, 0, err,
                           sizeof err) == 0, "%s", err);
        for (int u = 0; u < p.n_units; u++) {
            const plan_unit_t *un = &p.units[u];
            const layer_t *l = &m.layers[un->layer];
            if (l->type == LAYER_EMBED) {
                CHECK(un->cost_ns[SYNC_SFB] < 0, "embed: SFB not allowed");
                continue;
            }
            if (strcmp(l->name, "fc")) continue;
            int64_t tokens = (int64_t)batch * seqs[i];
            CHECK_EQ_I64(un->tensor.rows, seqs[i]);
            CHECK_EQ_I64(un->tensor.m, 2048);
            CHECK_EQ_I64(un->tensor.n, 512);
            sync_method_t want = cost_best_scheme_bytes(2048, 512, (int)tokens, nodes, nodes);
            CHECK(un->method == want, "S %d: %s, the byte rule says %s", seqs[i],
                  sync_method_name(un->method), sync_method_name(want));
            if (un->method == SYNC_SFB) {
                sfb_seen++;
                CHECK_EQ_I64(un->sfb_peer_bytes, tokens * (2048 + 512) * 4);
            } else {
                ps_seen++;
            }
        }
        /* the tied head has no parameters of its own: no unit of its own */
        for (int u = 0; u < p.n_units; u++)
            CHECK(strcmp(m.layers[p.units[u].layer].name, "head"), "head has a unit");
        plan_fini(&p);
        model_fini(&m);
    }
    CHECK(sfb_seen > 0 && ps_seen > 0, "SFB at short sequences, PS at long: %d, %d", sfb_seen,
          ps_seen);
}

/* The SFB cost of a linear layer is that of an fc layer over batch x S samples. */
TEST(seq_plan_sfb_cost_is_fc_over_tokens)
{
    cost_params_t p = {.workers = 8, .shards = 8, .batch = 4, .bw_Bps = 1e9, .lat_ns = 1000,
                       .gemm_flops = 1e12};
    cost_params_t q = p;
    q.batch = 4 * 64;
    cost_tensor_t t = {.m = 768, .n = 768, .rows = 64, .weight_bytes = 768 * 768 * 4};
    cost_t a = cost_layer(&p, &t, SYNC_SFB), b = cost_sfb(&q, 768, 768);
    CHECK_EQ_I64(a.time_ns, b.time_ns);
    CHECK_EQ_I64(a.worker_sent, b.worker_sent);
    CHECK_EQ_I64(a.worker_sent, 7LL * 256 * (768 + 768) * 4);
}
