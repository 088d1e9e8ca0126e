/* The matrix products at half precision (precision = bf16 | fp16 on a GPU: cublasGemmEx on
 * the tensor cores, compute_cuda_half.cu) against a reference made here: the operands rounded
 * to the half format on the host (core/half.h, to nearest even), the products summed in
 * double. A GPU's fp32 accumulation differs from that by float rounding only, far less than
 * the rounding of the operands, which the fp32 product does not have: the check tells a
 * product of rounded operands from one that was not rounded (the harness test shows it on the
 * CPU, which computes in fp32 whatever it is told). Without a GPU the GPU tests say SKIP. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/half.h"
#include "core/model.h"
#include "core/rng.h"
#include "runtime/compute/compute.h"
#include "runtime/compute/nnet.h"
#include "runtime/compute/solver.h"
#include "test.h"
#include "tests/gpu_fixture.h"

/* op(X) element (i, j) of a row-major X with leading dimension ld, transposed or not */
static float at(const float *x, bool t, int ld, int i, int j)
{
    return t ? x[j * ld + i] : x[i * ld + j];
}

static float rounded(precision_t p, float x)
{
    if (p == PRECISION_FP32) return x;
    return p == PRECISION_BF16 ? half_bf16_to_f32(half_bf16_from_f32(x))
                               : half_fp16_to_f32(half_fp16_from_f32(x));
}

typedef struct {
    int m, n, k;
    bool ta, tb;
} gemm_shape_t;

/* C = 0.5 op(A) op(B) + 0.25 C0 on backend c at precision p; returns the elements farther
 * from the rounded-operand reference than 1e-5 of the sum of |terms| (+ 1e-6), printing the
 * worst. */
static int gemm_misses(compute_t *c, precision_t p, gemm_shape_t s)
{
    int ra = s.ta ? s.k : s.m, ca = s.ta ? s.m : s.k, rb = s.tb ? s.n : s.k,
        cb = s.tb ? s.k : s.n;
    int lda = ca + 3, ldb = cb + 5, ldc = s.n + 2; /* leading dimensions past the columns */
    size_t na = (size_t)ra * lda, nb = (size_t)rb * ldb, nc = (size_t)s.m * ldc;
    float *a = malloc(na * 4), *b = malloc(nb * 4), *c0 = malloc(nc * 4), *got = malloc(nc * 4);
    rng_t *rng = rng_new(7, 1);
    for (size_t i = 0; i < na; i++) a[i] = (float)rng_gaussian(rng, 1.0);
    for (size_t i = 0; i < nb; i++) b[i] = (float)rng_gaussian(rng, 1.0);
    for (size_t i = 0; i < nc; i++) c0[i] = (float)rng_gaussian(rng, 1.0);
    float *da = compute_alloc_floats(c, (int64_t)na), *db = compute_alloc_floats(c, (int64_t)nb),
          *dc = compute_alloc_floats(c, (int64_t)nc);
    c->ops->upload(c->ctx, da, a, na * 4);
    c->ops->upload(c->ctx, db, b, nb * 4);
    c->ops->upload(c->ctx, dc, c0, nc * 4);
    compute_set_gemm_precision(c, p);
    compute_sgemm(c, s.ta, s.tb, s.m, s.n, s.k, 0.5f, da, lda, db, ldb, 0.25f, dc, ldc);
    compute_set_gemm_precision(c, PRECISION_FP32);
    c->ops->download(c->ctx, got, dc, nc * 4);
    int miss = 0;
    double worst = 0, worst_got = 0, worst_want = 0;
    for (int i = 0; i < s.m; i++)
        for (int j = 0; j < s.n; j++) {
            double sum = 0, mag = 0;
            for (int q = 0; q < s.k; q++) {
                double t = (double)rounded(p, at(a, s.ta, lda, i, q)) *
                           rounded(p, at(b, s.tb, ldb, q, j));
                sum += t, mag += fabs(t);
            }
            double want = 0.5 * sum + 0.25 * c0[i * ldc + j];
            double err = fabs(got[i * ldc + j] - want), tol = 1e-5 * (0.5 * mag + 1) + 1e-6;
            if (!(err <= tol)) miss++;
            if (!(err <= worst)) worst = err, worst_got = got[i * ldc + j], worst_want = want;
        }
    if (miss)
        fprintf(stderr, "    %s %dx%dx%d ta %d tb %d: %d of %d off; worst %.9g against %.9g\n",
                precision_name(p), s.m, s.n, s.k, s.ta, s.tb, miss, s.m * s.n, worst_got,
                worst_want);
    compute_release(c, da), compute_release(c, db), compute_release(c, dc);
    rng_destroy(&rng);
    free(a), free(b), free(c0), free(got);
    return miss;
}

static const gemm_shape_t s_shapes[] = {
    {37, 45, 130, false, false}, {37, 45, 130, true, false},
    {37, 45, 130, false, true},  {64, 16, 256, true, true},
};

TEST(test_cuda_half_gemm_rounds_operands_and_sums_in_fp32)
{
    compute_t *g = gpu_or_skip();
    for (size_t i = 0; i < sizeof s_shapes / sizeof *s_shapes; i++) {
        CHECK(gemm_misses(g, PRECISION_BF16, s_shapes[i]) == 0, "bf16, shape %zu", i);
        CHECK(gemm_misses(g, PRECISION_FP16, s_shapes[i]) == 0, "fp16, shape %zu", i);
    }
    /* back at fp32, the products are fp32 ones again (no rounded operands, no TF32) */
    CHECK(gemm_misses(g, PRECISION_FP32, s_shapes[0]) == 0);
    compute_destroy(&g);
}

/* fp16 ends at 65504: a larger operand is inf on the tensor cores, and so is the product,
 * which the loss scaling's verdict then sees */
TEST(test_cuda_half_fp16_overflow_is_inf)
{
    compute_t *g = gpu_or_skip();
    float a[2] = {70000.0f, 1.0f}, b[2] = {1.0f, 1.0f}, c = 0;
    float *da = compute_alloc_floats(g, 2), *db = compute_alloc_floats(g, 2),
          *dc = compute_alloc_floats(g, 1);
    g->ops->upload(g->ctx, da, a, sizeof a);
    g->ops->upload(g->ctx, db, b, sizeof b);
    compute_set_gemm_precision(g, PRECISION_FP16);
    compute_sgemm(g, false, false, 1, 1, 2, 1.0f, da, 2, db, 1, 0.0f, dc, 1);
    g->ops->download(g->ctx, &c, dc, sizeof c);
    CHECK(isinf(c), "70000 x 1 + 1 at fp16 gave %g", c);
    compute_set_gemm_precision(g, PRECISION_BF16); /* bf16 has fp32's range */
    compute_sgemm(g, false, false, 1, 1, 2, 1.0f, da, 2, db, 1, 0.0f, dc, 1);
    g->ops->download(g->ctx, &c, dc, sizeof c);
    CHECK(c == 70145.0f, "70000 x 1 + 1 at bf16 gave %g, not 70144 + 1", c);
    compute_release(g, da), compute_release(g, db), compute_release(g, dc);
    compute_destroy(&g);
}

/* The check itself, on the CPU (which computes in fp32 whatever it is told): products of
 * unrounded operands miss the rounded reference, at both formats */
TEST(test_cuda_half_harness_on_cpu)
{
    char err[256];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c, "%s", err);
    CHECK(gemm_misses(c, PRECISION_BF16, s_shapes[0]) > 0, "an fp32 product passed as bf16");
    CHECK(gemm_misses(c, PRECISION_FP16, s_shapes[1]) > 0, "an fp32 product passed as fp16");
    compute_destroy(&c);
}

/* Parameters of the GPU's net (brought back) farther from the CPU's than 1e-3 + 2% */
static int params_apart(compute_t *g, const arena_t *ag, const arena_t *ac)
{
    float *got = malloc((size_t)ac->count * sizeof *got);
    g->ops->download(g->ctx, got, ag->params, (size_t)ac->count * sizeof *got);
    int bad = 0;
    for (int64_t i = 0; i < ac->count; i++)
        if (!(fabs(got[i] - ac->params[i]) <= 1e-3 + 0.02 * fabs(ac->params[i]))) bad++;
    free(got);
    return bad;
}

/* LeNet as shipped, three SGD steps with the products at bf16 on backend g and at fp32 on the
 * CPU from the same parameters and batches: each step's loss within 2%, and all but 0.1% of
 * the parameters within 1e-3 + 2% (on an H200, 75 of 1,663,370 were past that bound: the
 * rounding of large gradients' operands). The loss's scratch grows between the products, as
 * in training. Returns the misses. */
static int lenet_bf16_misses(compute_t *g, float corrupt)
{
    char err[256];
    model_t m;
    REQUIRE(model_load(&m, "models/lenet.net", err, sizeof err) == 0 &&
                model_infer(&m, err, sizeof err) == 0, "%s", err);
    int batch = 16, bad = 0;
    compute_t *cpu = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(cpu, "%s", err);
    nnet_t *nc = nnet_new(&m, batch, cpu, 5, err, sizeof err);
    nnet_t *ng = nnet_new(&m, batch, g, 5, err, sizeof err);
    REQUIRE(nc && ng, "%s", err);
    arena_t *ac = nnet_arena(nc), *ag = nnet_arena(ng);
    solver_init_params(&m, ac, INIT_AUTO, 9);
    solver_init_params(&m, ag, INIT_AUTO, 9);
    if (corrupt != 0) { /* every parameter off: the comparison must see it */
        float *w = malloc((size_t)ac->count * sizeof *w);
        g->ops->download(g->ctx, w, ag->params, (size_t)ac->count * sizeof *w);
        for (int64_t i = 0; i < ac->count; i++) w[i] *= 1 + corrupt;
        g->ops->upload(g->ctx, ag->params, w, (size_t)ac->count * sizeof *w);
        free(w);
    }
    solver_config_t sc = {.lr = 0.005, .momentum = 0.9, .policy = LR_FIXED};
    solver_t *sc_cpu = solver_new(&sc, ac), *sc_gpu = solver_new(&sc, ag);
    compute_set_gemm_precision(g, PRECISION_BF16);
    rng_t *r = rng_new(17, 0);
    for (int step = 0; step < 3; step++) {
        float *xc = nnet_input(nc), *xg = nnet_input(ng);
        for (int64_t i = 0; i < nnet_out_count(nc, 0) * batch; i++)
            xc[i] = xg[i] = (float)rng_gaussian(r, 1);
        int *lc = nnet_labels(nc), *lg = nnet_labels(ng);
        for (int i = 0; i < batch; i++) lc[i] = lg[i] = (int)rng_uint(r, 10);
        double loss_c = nnet_forward(nc), loss_g = nnet_forward(ng);
        if (!(fabs(loss_g - loss_c) <= 0.02 * fabs(loss_c))) {
            fprintf(stderr, "    step %d: loss at bf16 %.6g, at fp32 %.6g\n", step, loss_g, loss_c);
            bad++;
        }
        nnet_backward(nc);
        nnet_backward(ng);
        solver_step(sc_cpu, step);
        solver_step(sc_gpu, step);
    }
    int apart = params_apart(g, ag, ac);
    if (apart) fprintf(stderr, "    %d of %lld parameters apart\n", apart, (long long)ac->count);
    if (apart <= ac->count / 1000) apart = 0;
    compute_set_gemm_precision(g, PRECISION_FP32);
    rng_destroy(&r);
    solver_destroy(&sc_cpu), solver_destroy(&sc_gpu);
    nnet_destroy(&ng), nnet_destroy(&nc);
    compute_destroy(&cpu);
    model_fini(&m);
    return bad + apart;
}

TEST(test_cuda_half_lenet_steps_at_bf16_follow_fp32)
{
    compute_t *g = gpu_or_skip();
    CHECK(lenet_bf16_misses(g, 0) == 0);
    compute_destroy(&g);
}

/* The same check with a second CPU backend in the GPU's place (it computes fp32 whatever it
 * is told, so nothing is apart), and parameters 10% off that it must see: the harness runs
 * without a GPU */
TEST(test_cuda_half_lenet_harness_on_cpu)
{
    char err[256];
    compute_t *c2 = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c2, "%s", err);
    CHECK(lenet_bf16_misses(c2, 0) == 0);
    CHECK(lenet_bf16_misses(c2, 0.1f) > 0, "a weight 10 percent off passed");
    compute_destroy(&c2);
}
