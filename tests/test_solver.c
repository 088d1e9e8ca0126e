/* Solver tests: learning-rate policies, the momentum/weight-decay update against a hand
 * computation (no decay on biases), seeded initialisation. */
#include <math.h>
#include <string.h>

#include "core/check.h"
#include "core/model.h"
#include "runtime/compute/arena.h"
#include "runtime/compute/compute.h"
#include "runtime/compute/solver.h"
#include "test.h"

TEST(test_solver_lr_policies)
{
    solver_config_t c = {.lr = 0.1, .policy = LR_FIXED};
    CHECK_NEAR(solver_lr(&c, 1000), 0.1, 0, 1e-12);
    c.policy = LR_STEP, c.gamma = 0.5, c.step_iters = 10;
    CHECK_NEAR(solver_lr(&c, 9), 0.1, 0, 1e-12);
    CHECK_NEAR(solver_lr(&c, 10), 0.05, 0, 1e-12);
    CHECK_NEAR(solver_lr(&c, 25), 0.025, 0, 1e-12);
    c.policy = LR_POLY, c.power = 2, c.max_iters = 100;
    CHECK_NEAR(solver_lr(&c, 50), 0.1 * 0.25, 0, 1e-12);
    CHECK_NEAR(solver_lr(&c, 100), 0.0, 1e-15, 0);
    lr_policy_t p;
    CHECK(solver_policy_parse("poly", &p) == 0 && p == LR_POLY);
    CHECK(solver_policy_parse("cosine", &p) == -1);
}

static void fc_model(model_t *m)
{
    const char *text = "input data shape=3x1x1\nfc f out=2\nsoftmax_loss loss\n";
    char err[256];
    ASSERT(model_parse(m, "s.net", text, strlen(text), err, sizeof err) == 0, "%s", err);
}

TEST(test_solver_momentum_and_decay)
{
    model_t m;
    fc_model(&m);
    char err[256];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    arena_t a;
    arena_init(&a, &m, c);
    CHECK_EQ_I64(a.count, 8);
    CHECK_EQ_I64(a.n_entries, 2);
    CHECK(!strcmp(a.entries[1].name, "f.bias") && a.entries[1].offset == 6);
    for (int i = 0; i < 8; i++) a.params[i] = 1.0f, a.grads[i] = 0.5f;
    solver_config_t cfg = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1, .policy = LR_FIXED};
    solver_t *s = solver_new(&cfg, &a);
    solver_step(s, 0);
    solver_step(s, 1);
    /* weight: h1 = 0.1*(0.5+0.1*1) = 0.06, w1 = 0.94; h2 = 0.054 + 0.1*(0.5+0.094) = 0.1134 */
    CHECK_NEAR(a.params[0], 0.94 - 0.1134, 1e-6, 1e-6);
    /* bias, no decay: h1 = 0.05, w1 = 0.95; h2 = 0.045 + 0.05 = 0.095 */
    CHECK_NEAR(a.params[7], 0.95 - 0.095, 1e-6, 1e-6);
    solver_destroy(&s);
    arena_fini(&a);
    compute_destroy(&c);
    model_fini(&m);
}

TEST(test_solver_init_seeded)
{
    const char *text = "input data shape=1x8x8\nconv c out=16 kernel=3\nrelu r\nfc f out=200\n"
                       "batchnorm bn\n";
    char err[256];
    model_t m;
    REQUIRE(model_parse(&m, "i.net", text, strlen(text), err, sizeof err) == 0, "%s", err);
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    arena_t a, b;
    arena_init(&a, &m, c);
    arena_init(&b, &m, c);
    solver_init_params(&m, &a, INIT_AUTO, 7);
    solver_init_params(&m, &b, INIT_AUTO, 7);
    CHECK(memcmp(a.params, b.params, (size_t)a.count * 4) == 0, "same seed, different init");
    solver_init_params(&m, &b, INIT_AUTO, 8);
    CHECK(memcmp(a.params, b.params, (size_t)a.count * 4) != 0, "seed ignored");
    /* conv feeds a ReLU: He, sd sqrt(2/9); fc does not: Xavier, |w| <= sqrt(3/fan_in) */
    const arena_entry_t *cw = &a.entries[arena_find(&a, "c.weight")];
    double sq = 0;
    for (int64_t i = 0; i < cw->count; i++)
        sq += (double)a.params[cw->offset + i] * a.params[cw->offset + i];
    CHECK_NEAR(sqrt(sq / cw->count), sqrt(2.0 / 9), 0, 0.15);
    const arena_entry_t *fw = &a.entries[arena_find(&a, "f.weight")];
    double lim = sqrt(3.0 / (16 * 6 * 6)), mx = 0;
    for (int64_t i = 0; i < fw->count; i++) mx = fmax(mx, fabs(a.params[fw->offset + i]));
    CHECK(mx <= lim && mx > 0.9 * lim, "max |w| %g, limit %g", mx, lim);
    const arena_entry_t *bs = &a.entries[arena_find(&a, "bn.weight")];
    const arena_entry_t *bb = &a.entries[arena_find(&a, "bn.bias")];
    CHECK(a.params[bs->offset] == 1.0f && a.params[bb->offset] == 0.0f);
    CHECK(a.entries[arena_find(&a, "c.bias")].is_bias);
    arena_fini(&a);
    arena_fini(&b);
    compute_destroy(&c);
    model_fini(&m);
}
