/* The CPU backend's convolution kernels against a naive loop in double: the Winograd
 * F(2x2, 5x5) path and its F(5x5, 2x2) weight gradient (conv_wino.c), and the data gradient as a convolution of dy
 * (conv_cpu_data_grad), over shapes that hit their edges: odd output sizes (half tiles), no
 * padding and the widest, one sample, chunks of samples that end mid-way, groups through the
 * sample strides, adding to the output. And a check that the comparison can fail. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "runtime/compute/conv_cpu.h"
#include "runtime/compute/conv_wino.h"
#include "test.h"

typedef struct {
    int batch, c, h, w, o, kh, kw, ph, pw;
} cshape_t;

static float *rnd(rng_t *r, int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(2 * rng_uniform(r) - 1);
    return p;
}

static int out_h(const cshape_t *s) { return s->h + 2 * s->ph - s->kh + 1; }
static int out_w(const cshape_t *s) { return s->w + 2 * s->pw - s->kw + 1; }

/* y (batch, o, oh, ow) = the stride-1 cross-correlation of x with wt (o, c, kh, kw) + bias */
static double *naive_conv(const cshape_t *s, const float *x, const float *wt, const float *bias)
{
    int oh = out_h(s), ow = out_w(s);
    double *y = calloc((size_t)s->batch * s->o * oh * ow, sizeof *y);
    for (int b = 0; b < s->batch; b++)
        for (int o = 0; o < s->o; o++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    double a = bias ? bias[o] : 0.0;
                    for (int c = 0; c < s->c; c++)
                        for (int ki = 0; ki < s->kh; ki++)
                            for (int kj = 0; kj < s->kw; kj++) {
                                int iy = oy - s->ph + ki, ix = ox - s->pw + kj;
                                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w) continue;
                                a += (double)wt[((o * s->c + c) * s->kh + ki) * s->kw + kj] *
                                     x[((b * s->c + c) * s->h + iy) * s->w + ix];
                            }
                    y[((b * s->o + o) * oh + oy) * ow + ox] = a;
                }
    return y;
}

/* Elements of got off ref by more than 1e-4 (1 + |ref|) + 1e-5 mag (mag: the sum of the
 * magnitudes of the terms that make ref, or NULL); prints the worst. A float sum of many terms
 * errs in proportion to their magnitudes, not to the sum's. */
static int64_t count_off(const char *what, const float *got, const double *ref,
                         const double *mag, int64_t n)
{
    int64_t bad = 0, worst = -1;
    double worst_excess = -DBL_MAX;
    for (int64_t i = 0; i < n; i++) {
        double tol = 1e-4 + 1e-4 * fabs(ref[i]) + (mag ? 1e-5 * mag[i] : 0.0);
        double excess = fabs(got[i] - ref[i]) - tol;
        if (excess > 0) bad++;
        if (excess > worst_excess) worst_excess = excess, worst = i;
    }
    if (bad)
        fprintf(stderr, "    %s: %lld of %lld off; worst [%lld]: got %.9g, want %.9g\n", what,
                (long long)bad, (long long)n, (long long)worst, got[worst], ref[worst]);
    return bad;
}

/* Winograd with x and y one group of a twice-wider layer (sample strides 2c*h*w and
 * 2o*oh*ow), overwriting with a bias and then adding without one. corrupt: change one output
 * before comparing (the checker must then fail). Returns the elements out of tolerance. */
static int64_t check_wino(rng_t *r, const cshape_t *s, bool corrupt)
{
    int oh = out_h(s), ow = out_w(s);
    int64_t xs = 2LL * s->c * s->h * s->w, ys = 2LL * s->o * oh * ow;
    float *x = rnd(r, s->batch * xs), *wt = rnd(r, (int64_t)s->o * s->c * 25);
    float *bias = rnd(r, s->o), *y = rnd(r, s->batch * ys);
    float *x1 = malloc((size_t)s->batch * s->c * s->h * s->w * sizeof *x1);
    for (int b = 0; b < s->batch; b++)
        memcpy(x1 + (int64_t)b * s->c * s->h * s->w, x + b * xs,
               (size_t)s->c * s->h * s->w * sizeof *x1);
    double *ref = naive_conv(s, x1, wt, bias);
    conv_wino_scratch_t ws = {0};
    conv_wino_shape_t sh = {.batch = s->batch, .c = s->c, .h = s->h, .w = s->w, .o = s->o,
                            .oh = oh, .ow = ow, .ph = s->ph, .pw = s->pw, .x_stride = xs,
                            .y_stride = ys};
    conv_wino_run(&ws, &sh, wt, bias, x, false, y);
    conv_wino_run(&ws, &sh, wt, NULL, x, true, y); /* y = 2 conv + bias */
    int64_t per = (int64_t)s->o * oh * ow, n = s->batch * per, bad;
    float *got = malloc((size_t)n * sizeof *got);
    for (int b = 0; b < s->batch; b++) {
        memcpy(got + b * per, y + b * ys, (size_t)per * sizeof *got);
        for (int64_t i = 0; i < per; i++)
            ref[b * per + i] = 2 * ref[b * per + i] - bias[i / (oh * ow)];
    }
    if (corrupt) got[n / 2] += 0.01f;
    bad = count_off("winograd", got, ref, NULL, n);
    conv_wino_scratch_fini(&ws);
    free(x), free(x1), free(wt), free(bias), free(y), free(ref), free(got);
    return bad;
}

TEST(test_conv_kernels_winograd_matches_naive)
{
    rng_t *r = rng_new(11, 0);
    static const cshape_t shapes[] = {
        {1, 8, 7, 5, 3, 5, 5, 2, 2},    /* odd output: half tiles on both axes */
        {3, 9, 14, 14, 16, 5, 5, 2, 2}, /* LeNet conv2-like, 3 samples */
        {2, 8, 9, 6, 4, 5, 5, 0, 0},    /* no padding */
        {2, 8, 4, 4, 5, 5, 5, 4, 4},    /* the widest padding */
        {7, 8, 8, 8, 6, 5, 5, 2, 1},    /* chunks of 16 samples: one, part filled */
        {20, 8, 8, 9, 2, 5, 5, 2, 2},   /* a second chunk that ends mid-way */
        {1, 8, 5, 5, 1, 5, 5, 0, 0},    /* one output pixel */
        {2, 9, 6, 7, 3, 5, 5, 1, 2},    /* 27 filters: a last group of 3 */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        CHECK(check_wino(r, &shapes[i], false) == 0, "shape %zu", i);
    rng_destroy(&r);
}

/* The filters' gradient by Winograd, dW[o][c][ki][kj] = sum of dy[b][o][oy][ox] *
 * x[b][c][oy - ph + ki][ox - pw + kj], with x and dy one group of a twice-wider layer. */
static int64_t check_wino_weight_grad(rng_t *r, const cshape_t *s)
{
    int oh = out_h(s), ow = out_w(s);
    int64_t xs = 2LL * s->c * s->h * s->w, ys = 2LL * s->o * oh * ow;
    int64_t nw = (int64_t)s->o * s->c * 25;
    float *x = rnd(r, s->batch * xs), *dy = rnd(r, s->batch * ys), *dw = rnd(r, nw);
    double *ref = calloc((size_t)nw, sizeof *ref), *mag = calloc((size_t)nw, sizeof *mag);
    for (int b = 0; b < s->batch; b++)
        for (int o = 0; o < s->o; o++)
            for (int c = 0; c < s->c; c++)
                for (int ki = 0; ki < 5; ki++)
                    for (int kj = 0; kj < 5; kj++)
                        for (int oy = 0; oy < oh; oy++)
                            for (int ox = 0; ox < ow; ox++) {
                                int iy = oy - s->ph + ki, ix = ox - s->pw + kj;
                                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w) continue;
                                double t = (double)dy[b * ys + (o * oh + oy) * ow + ox] *
                                           x[b * xs + (c * s->h + iy) * s->w + ix];
                                ref[((o * s->c + c) * 5 + ki) * 5 + kj] += t;
                                mag[((o * s->c + c) * 5 + ki) * 5 + kj] += fabs(t);
                            }
    conv_wino_scratch_t ws = {0};
    conv_wino_shape_t sh = {.batch = s->batch, .c = s->c, .h = s->h, .w = s->w, .o = s->o,
                            .oh = oh, .ow = ow, .ph = s->ph, .pw = s->pw, .x_stride = xs,
                            .y_stride = ys};
    conv_wino_weight_grad(&ws, &sh, x, dy, dw);
    int64_t bad = count_off("winograd weight gradient", dw, ref, mag, nw);
    conv_wino_scratch_fini(&ws);
    free(x), free(dy), free(dw), free(ref), free(mag);
    return bad;
}

TEST(test_conv_kernels_winograd_weight_grad_matches_naive)
{
    rng_t *r = rng_new(14, 0);
    static const cshape_t shapes[] = {
        {1, 8, 7, 5, 3, 5, 5, 2, 2},  /* odd output: half blocks of dy */
        {3, 9, 14, 14, 6, 5, 5, 2, 2}, /* 54 filters: a last group of 2 */
        {2, 8, 9, 6, 4, 5, 5, 0, 0},  /* no padding */
        {2, 8, 4, 4, 5, 5, 5, 4, 4},  /* the widest padding */
        {20, 8, 8, 9, 2, 5, 5, 2, 2}, /* two chunks, the second part filled */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        CHECK(check_wino_weight_grad(r, &shapes[i]) == 0, "shape %zu", i);
    rng_destroy(&r);
}

/* dx by conv_cpu_data_grad against the adjoint of the naive convolution:
 * dx[c][iy][ix] = sum of wt[o][c][ki][kj] dy[o][oy][ox] over iy = oy - ph + ki. */
static int64_t check_data_grad(rng_t *r, const cshape_t *s, int groups)
{
    int oh = out_h(s), ow = out_w(s), cg = s->c / groups, og = s->o / groups;
    int64_t nx = (int64_t)s->batch * s->c * s->h * s->w;
    float *wt = rnd(r, (int64_t)s->o * cg * s->kh * s->kw);
    float *dy = rnd(r, (int64_t)s->batch * s->o * oh * ow), *dx = rnd(r, nx);
    double *ref = malloc((size_t)nx * sizeof *ref);
    for (int64_t i = 0; i < nx; i++) ref[i] = dx[i];
    for (int b = 0; b < s->batch; b++)
        for (int o = 0; o < s->o; o++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++)
                    for (int ci = 0; ci < cg; ci++)
                        for (int ki = 0; ki < s->kh; ki++)
                            for (int kj = 0; kj < s->kw; kj++) {
                                int iy = oy - s->ph + ki, ix = ox - s->pw + kj;
                                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w) continue;
                                int c = (o / og) * cg + ci;
                                ref[((b * s->c + c) * s->h + iy) * s->w + ix] +=
                                    (double)wt[((o * cg + ci) * s->kh + ki) * s->kw + kj] *
                                    dy[((b * s->o + o) * oh + oy) * ow + ox];
                            }
    conv_cpu_scratch_t cs = {0};
    ke_window_t k = {.h = s->h, .w = s->w, .oh = oh, .ow = ow, .kh = s->kh, .kw = s->kw,
                     .sh = 1, .sw = 1, .ph = s->ph, .pw = s->pw};
    int64_t bad = -1;
    if (conv_cpu_data_grad(&cs, &k, s->batch, s->c, s->o, groups, wt, dy, dx))
        bad = count_off("data gradient", dx, ref, NULL, nx);
    conv_cpu_scratch_fini(&cs);
    free(wt), free(dy), free(dx), free(ref);
    return bad;
}

TEST(test_conv_kernels_data_grad_matches_naive)
{
    rng_t *r = rng_new(12, 0);
    /* 5x5 with 8+ output channels: by Winograd; the rest by im2col of dy and a GEMM */
    CHECK(check_data_grad(r, &(cshape_t){2, 8, 14, 14, 8, 5, 5, 2, 2}, 1) == 0);
    CHECK(check_data_grad(r, &(cshape_t){1, 8, 7, 6, 16, 5, 5, 2, 2}, 2) == 0);
    CHECK(check_data_grad(r, &(cshape_t){3, 4, 9, 8, 4, 5, 5, 0, 0}, 1) == 0);
    CHECK(check_data_grad(r, &(cshape_t){2, 6, 7, 7, 6, 3, 3, 1, 1}, 3) == 0);
    CHECK(check_data_grad(r, &(cshape_t){1, 3, 6, 5, 2, 3, 2, 2, 1}, 1) == 0);
    CHECK(check_data_grad(r, &(cshape_t){2, 16, 6, 6, 16, 5, 5, 4, 4}, 1) == 0);
    rng_destroy(&r);
}

TEST(test_conv_kernels_data_grad_declines_other_shapes)
{
    conv_cpu_scratch_t cs = {0};
    float wt[9] = {0}, dy[16] = {0}, dx[64] = {0};
    /* stride 2; padding as wide as the kernel */
    ke_window_t s2 = {.h = 8, .w = 8, .oh = 4, .ow = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2,
                      .ph = 1, .pw = 1};
    ke_window_t wide = {.h = 2, .w = 2, .oh = 6, .ow = 6, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                        .ph = 3, .pw = 3};
    CHECK(!conv_cpu_data_grad(&cs, &s2, 1, 1, 1, 1, wt, dy, dx));
    CHECK(!conv_cpu_data_grad(&cs, &wide, 1, 1, 1, 1, wt, dy, dx));
    /* more output channels than input ones, 3x3: col2im is the faster way */
    ke_window_t more = {.h = 4, .w = 4, .oh = 4, .ow = 4, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                        .ph = 1, .pw = 1};
    CHECK(!conv_cpu_data_grad(&cs, &more, 1, 1, 2, 1, wt, dy, dx));
    conv_cpu_scratch_fini(&cs);
}

TEST(test_conv_kernels_checker_can_fail)
{
    rng_t *r = rng_new(13, 0);
    CHECK(check_wino(r, &(cshape_t){1, 8, 7, 5, 3, 5, 5, 2, 2}, true) == 1);
    rng_destroy(&r);
}
