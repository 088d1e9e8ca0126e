/* The element-wise bodies shared by the CPU loops and the CUDA kernels
 * (runtime/compute/kernels_elementwise.h) against naive double references, and the CPU backend's
 * layer operations that are pure data movement against plain loops. These run everywhere, so
 * the arithmetic a GPU executes is checked on every machine. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "runtime/compute/compute.h"
#include "runtime/compute/kernels_elementwise.h"
#include "core/vec.h"
#include "test.h"

static float *rnd(rng_t *r, int64_t n, double scale)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(scale * (2 * rng_uniform(r) - 1));
    return p;
}

/* |got - ref| <= atol + rtol |ref|, else a failure naming the element */
static int near(const char *what, int64_t i, double got, double ref, double atol, double rtol)
{
    if (fabs(got - ref) <= atol + rtol * fabs(ref)) return 0;
    test_fail(__FILE__, __LINE__, "%s[%lld]: got %.9g, ref %.9g", what, (long long)i, got, ref);
    return 1;
}

TEST(test_kernels_relu_dropout_sgd_match_the_cpu_loops)
{
    rng_t *r = rng_new(21, 0);
    int n = 23; /* a tail after the 4-lane vectors */
    float *x = rnd(r, n, 1), *dy = rnd(r, n, 1), *y = malloc(n * sizeof *y);
    float *dx = calloc(n, sizeof *dx);
    x[3] = 0.0f, x[4] = -0.0f;
    vec_relu(y, x, n);
    vec_relu_grad_add(dx, x, dy, n);
    for (int i = 0; i < n; i++) {
        CHECK(y[i] == ke_relu(x[i]) && y[i] == (x[i] > 0 ? x[i] : 0.0f), "relu [%d]", i);
        CHECK(dx[i] == ke_relu_grad(x[i], dy[i]), "relu grad [%d]", i);
    }
    CHECK(ke_dropout_mask(0.49, 0.5, 2.0f) == 0.0f && ke_dropout_mask(0.5, 0.5, 2.0f) == 2.0f);
    /* the SGD body is the CPU backend's update, bit for bit, and Caffe's formula */
    float *w = rnd(r, n, 1), *g = rnd(r, n, 1), *h = rnd(r, n, 1);
    float *w2 = malloc(n * sizeof *w2), *h2 = malloc(n * sizeof *h2);
    memcpy(w2, w, n * sizeof *w), memcpy(h2, h, n * sizeof *h);
    char err[128];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c, "%s", err);
    c->ops->sgd_update(c->ctx, n, 0.1f, 0.9f, 0.01f, w, g, h);
    for (int i = 0; i < n; i++) {
        double hv = 0.9 * h2[i] + 0.1 * (g[i] + 0.01 * w2[i]), wv = w2[i] - hv;
        ke_sgd(&w2[i], g[i], &h2[i], 0.1f, 0.9f, 0.01f);
        CHECK(w2[i] == w[i] && h2[i] == h[i], "sgd [%d]", i);
        near("sgd w", i, w2[i], wv, 1e-6, 1e-5);
    }
    compute_destroy(&c);
    free(x), free(dy), free(y), free(dx), free(w), free(g), free(h), free(w2), free(h2);
    rng_destroy(&r);
}

TEST(test_kernels_pool_windows)
{
    rng_t *r = rng_new(22, 0);
    /* 7x6 plane, 3x3 windows, stride 2, pad 1 (ceil rounding gives a window on the pad) */
    ke_window_t k = {.h = 7, .w = 6, .oh = 4, .ow = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2,
                     .ph = 1, .pw = 1};
    float *x = rnd(r, 42, 1);
    int bad = 0;
    for (int oy = 0; oy < k.oh; oy++)
        for (int ox = 0; ox < k.ow; ox++) {
            double best = -INFINITY, sum = 0;
            int arg = -1, size = 0;
            for (int i = 0; i < k.kh; i++)
                for (int j = 0; j < k.kw; j++) {
                    int yy = oy * k.sh - k.ph + i, xx = ox * k.sw - k.pw + j;
                    if (yy < k.h + k.ph && xx < k.w + k.pw) size++; /* inside the padded image */
                    if (yy < 0 || yy >= k.h || xx < 0 || xx >= k.w) continue;
                    sum += x[yy * k.w + xx];
                    if (x[yy * k.w + xx] > best) best = x[yy * k.w + xx], arg = yy * k.w + xx;
                }
            int got_arg;
            float mx = ke_pool_max_at(x, &k, oy, ox, &got_arg);
            bad += got_arg != arg || mx != (float)best;
            bad += near("avg", oy * k.ow + ox, ke_pool_avg_at(x, &k, oy, ox), sum / size, 1e-6,
                        1e-6);
        }
    CHECK(bad == 0);
    free(x);
    rng_destroy(&r);
}

/* The CPU pool op (inner windows on a fast path, border ones through the bodies) equals the
 * bodies at every output, bit for bit and argmax included, forward and backward, over
 * windows the fast path unrolls (2x2, 3x3) and others, with and without padding and ceil
 * rounding, on planes too small to have inner windows at all. */
TEST(test_kernels_cpu_pool_equals_bodies)
{
    static const int shapes[][8] = {/* h, w, kh, kw, sh, sw, ph, pw */
                                    {28, 28, 2, 2, 2, 2, 0, 0}, {14, 13, 2, 2, 2, 2, 0, 0},
                                    {32, 32, 3, 3, 2, 2, 0, 0}, {7, 7, 3, 3, 2, 2, 1, 1},
                                    {9, 11, 3, 2, 1, 3, 1, 0},  {2, 3, 3, 3, 2, 2, 1, 1},
                                    {6, 5, 5, 4, 1, 1, 2, 1}};
    rng_t *r = rng_new(24, 0);
    char err[128];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c, "%s", err);
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (int ceil_mode = 0; ceil_mode < 2; ceil_mode++) {
            const int *s = shapes[t];
            ke_window_t k = {.h = s[0], .w = s[1], .kh = s[2], .kw = s[3], .sh = s[4],
                             .sw = s[5], .ph = s[6], .pw = s[7]};
            int ry = ceil_mode ? k.sh - 1 : 0, rx = ceil_mode ? k.sw - 1 : 0;
            k.oh = (k.h + 2 * k.ph - k.kh + ry) / k.sh + 1;
            k.ow = (k.w + 2 * k.pw - k.kw + rx) / k.sw + 1;
            int planes = 3, in = k.h * k.w, on = k.oh * k.ow;
            float *x = rnd(r, (int64_t)planes * in, 1), *dy = rnd(r, (int64_t)planes * on, 1);
            x[1] = x[0]; /* a tie: the first maximum wins */
            float *y = malloc((size_t)planes * on * sizeof *y);
            float *dx = calloc((size_t)planes * in, sizeof *dx);
            float *ref = calloc((size_t)planes * in, sizeof *ref);
            int *arg = malloc((size_t)planes * on * sizeof *arg);
            int bad = 0;
            for (int avg = 0; avg < 2; avg++) {
                c->layers->pool_forward(c->ctx, &k, planes, avg, x, y, arg);
                memset(dx, 0, (size_t)planes * in * sizeof *dx);
                memset(ref, 0, (size_t)planes * in * sizeof *ref);
                c->layers->pool_backward(c->ctx, &k, planes, avg, dy, arg, dx);
                for (int p = 0; p < planes; p++)
                    for (int oy = 0; oy < k.oh; oy++)
                        for (int ox = 0; ox < k.ow; ox++) {
                            int o = p * on + oy * k.ow + ox, a = -1;
                            float want = avg ? ke_pool_avg_at(x + p * in, &k, oy, ox)
                                             : ke_pool_max_at(x + p * in, &k, oy, ox, &a);
                            bad += y[o] != want || (!avg && arg[o] != a);
                            int y0, y1, x0, x1;
                            int size = ke_pool_window(&k, oy, ox, &y0, &y1, &x0, &x1);
                            if (!avg && a >= 0) ref[p * in + a] += dy[o];
                            for (int yy = y0; avg && size > 0 && yy < y1; yy++)
                                for (int xx = x0; xx < x1; xx++)
                                    ref[p * in + yy * k.w + xx] += dy[o] / (float)size;
                        }
                for (int i = 0; i < planes * in; i++) bad += dx[i] != ref[i];
            }
            CHECK(bad == 0, "shape %zu ceil %d: %d outputs differ", t, ceil_mode, bad);
            free(x), free(dy), free(y), free(dx), free(ref), free(arg);
        }
    compute_destroy(&c);
    rng_destroy(&r);
}

TEST(test_kernels_lrn_bn_bodies)
{
    /* LRN: y = x (k + alpha/n sum x^2)^-beta, beta 0.75 through square roots and another */
    double sumsq = 3.25, alpha = 1e-4, k = 2.0;
    for (int t = 0; t < 2; t++) {
        double beta = t ? 0.6 : 0.75;
        float sc = ke_lrn_scale((float)sumsq, (float)(alpha / 5), (float)k);
        double ref = 0.7 * pow(k + alpha / 5 * sumsq, -beta);
        near("lrn", t, ke_lrn_out(0.7f, sc, (float)beta), ref, 1e-7, 1e-6);
    }
    /* BN statistics of {1, 2, 3, 6}: mean 3, var 3.5, unbiased 14/3 */
    float mean, invstd, rm = 0.5f, rv = 1.0f;
    ke_bn_stats(12, 50, 4, 1e-5, 0.1f, &mean, &invstd, &rm, &rv);
    near("bn mean", 0, mean, 3.0, 0, 1e-7);
    near("bn invstd", 0, invstd, 1 / sqrt(3.5 + 1e-5), 0, 1e-6);
    near("bn run_mean", 0, rm, 0.9 * 0.5 + 0.1 * 3, 0, 1e-6);
    near("bn run_var", 0, rv, 0.9 * 1 + 0.1 * 14.0 / 3, 0, 1e-6);
    near("bn xhat", 0, ke_bn_xhat(6, mean, invstd), 3 / sqrt(3.5 + 1e-5), 0, 1e-6);
    near("bn eval invstd", 0, ke_bn_invstd_eval(4.0f, 0), 0.5, 0, 1e-7);
}

TEST(test_kernels_softmax_rows)
{
    rng_t *r = rng_new(23, 0);
    int K = 13;
    float *x = rnd(r, K, 4), *p = malloc(K * sizeof *p), *d = calloc(K, sizeof *d);
    x[5] = 60.0f; /* large: the max shift keeps exp finite */
    double z = 0, mx = 60.0;
    for (int j = 0; j < K; j++) z += exp(x[j] - mx);
    double loss = ke_softmax_xent_row(x, K, 2, p);
    near("xent", 0, loss, -(x[2] - mx - log(z)), 1e-9, 1e-9);
    for (int j = 0; j < K; j++) near("prob", j, p[j], exp(x[j] - mx) / z, 1e-9, 1e-6);
    CHECK(ke_softmax_xent_row(x, K, -1, p) == 0.0, "an ignored label has no loss");
    ke_softmax_xent_grad_row(p, K, 2, 0.5f, d);
    for (int j = 0; j < K; j++) near("dxent", j, d[j], 0.5 * (p[j] - (j == 2)), 1e-9, 1e-6);
    /* causal row 3 of 8: softmax over [0, 3], zero after; its backward */
    int S = 8;
    float *row = rnd(r, S, 2), *orig = malloc(S * sizeof *orig), *g = rnd(r, S, 1);
    memcpy(orig, row, S * sizeof *row);
    ke_softmax_row_masked(row, S, 3);
    double zs = 0, m3 = orig[0];
    for (int j = 1; j <= 3; j++) m3 = orig[j] > m3 ? orig[j] : m3;
    for (int j = 0; j <= 3; j++) zs += exp(orig[j] - m3);
    for (int j = 0; j < S; j++) near("causal", j, row[j], j <= 3 ? exp(orig[j] - m3) / zs : 0, 1e-9, 1e-6);
    double dot = 0;
    for (int j = 0; j < S; j++) dot += (double)row[j] * g[j];
    float *dg = malloc(S * sizeof *dg);
    memcpy(dg, g, S * sizeof *g);
    ke_dsoftmax_row(row, dg, S);
    for (int j = 0; j < S; j++) near("dsoftmax", j, dg[j], row[j] * (g[j] - dot), 1e-9, 1e-6);
    free(x), free(p), free(d), free(row), free(orig), free(g), free(dg);
    rng_destroy(&r);
}

/* layer norm and GELU: forward against double formulas, backward against central finite
 * differences of the double forward */
static double gelu_ref(double v, int t)
{
    return t ? 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
             : 0.5 * v * (1 + erf(v / sqrt(2)));
}

static double layernorm_ref_j(const double *x, const float *g, const float *b, const double *w,
                              int D, double eps)
{
    double mean = 0, var = 0, j = 0;
    for (int d = 0; d < D; d++) mean += x[d] / D;
    for (int d = 0; d < D; d++) var += (x[d] - mean) * (x[d] - mean) / D;
    for (int d = 0; d < D; d++) j += w[d] * (g[d] * (x[d] - mean) / sqrt(var + eps) + b[d]);
    return j;
}

TEST(test_kernels_layernorm_gelu)
{
    rng_t *r = rng_new(24, 0);
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 9; i++) {
            double v = -4 + i;
            near("gelu", i, ke_gelu((float)v, t), gelu_ref(v, t), 1e-7, 1e-6);
            double h = 1e-5, fd = (gelu_ref(v + h, t) - gelu_ref(v - h, t)) / (2 * h);
            near("gelu grad", i, ke_gelu_grad((float)v, 1.0f, t), fd, 1e-6, 1e-5);
        }
    CHECK(ke_tanh_grad(0.5f, 2.0f) == 1.5f);
    int D = 11;
    double eps = 1e-5;
    float *x = rnd(r, D, 2), *g = rnd(r, D, 1), *b = rnd(r, D, 1), *w = rnd(r, D, 1);
    float *out = malloc(D * sizeof *out), *xh = malloc(D * sizeof *xh), *dx = calloc(D, sizeof *dx);
    float is;
    ke_layernorm_row(x, D, eps, g, b, out, xh, &is);
    double xd[16], wd[16];
    for (int d = 0; d < D; d++) xd[d] = x[d], wd[d] = w[d];
    double mean = 0, var = 0;
    for (int d = 0; d < D; d++) mean += xd[d] / D;
    for (int d = 0; d < D; d++) var += (xd[d] - mean) * (xd[d] - mean) / D;
    for (int d = 0; d < D; d++)
        near("layernorm", d, out[d], g[d] * (xd[d] - mean) / sqrt(var + eps) + b[d], 1e-6, 1e-5);
    ke_layernorm_dx_row(w, xh, g, is, D, dx); /* dy = w: the gradient of sum(w * out) */
    for (int d = 0; d < D; d++) {
        double h = 1e-6, keep = xd[d];
        xd[d] = keep + h;
        double jp = layernorm_ref_j(xd, g, b, wd, D, eps);
        xd[d] = keep - h;
        double jm = layernorm_ref_j(xd, g, b, wd, D, eps);
        xd[d] = keep;
        near("layernorm dx", d, dx[d], (jp - jm) / (2 * h), 1e-4, 1e-3);
    }
    free(x), free(g), free(b), free(w), free(out), free(xh), free(dx);
    rng_destroy(&r);
}

/* The comparison above can fail: a corrupted body result is caught. */
TEST(test_kernels_checker_can_fail)
{
    int before = 0;
    /* near() records a failure through test_fail, which this test must not keep: compare
     * by hand instead, with the same tolerance rule */
    double got = ke_gelu(1.0f, 0) * (1 + 1e-3), ref = gelu_ref(1.0, 0);
    before += !(fabs(got - ref) <= 1e-7 + 1e-6 * fabs(ref));
    CHECK(before == 1, "a 0.1%% error passed the GELU tolerance");
}

/* The CPU backend's data-movement operations against plain loops. */
TEST(test_kernels_cpu_layer_ops_move_data)
{
    char err[128];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c, "%s", err);
    const compute_layer_ops_t *lo = c->layers;
    rng_t *r = rng_new(25, 0);
    int B = 3, R = 4, C = 5;
    float *x = rnd(r, B * R * C, 1), *y = rnd(r, B * R * C, 1), *y0 = malloc(B * R * C * 4);
    memcpy(y0, y, B * R * C * 4);
    lo->transpose(c->ctx, B, R, C, x, y, true);
    int bad = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++) {
                int o = b * R * C + j * R + i;
                bad += y[o] != y0[o] + x[b * R * C + i * C + j];
            }
    /* sum_rows with a stride, in row order from 0 */
    float s[5];
    lo->sum_rows(c->ctx, B, 3, x, 7, s);
    for (int j = 0; j < 3; j++) bad += s[j] != (0.0f + x[j]) + x[7 + j] + x[14 + j];
    /* copy_rows with a source stride of 0 repeats one row; add_rows adds */
    memcpy(y, y0, B * R * C * 4);
    lo->copy_rows(c->ctx, B, 2, y + 1, 6, x, 0);
    for (int b = 0; b < B; b++) bad += y[1 + b * 6] != x[0] || y[2 + b * 6] != x[1];
    bad += y[0] != y0[0] || y[3] != y0[3];
    memcpy(y, y0, B * R * C * 4);
    lo->add_rows(c->ctx, 2, 3, y, 10, x + 1, 4);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) bad += y[i * 10 + j] != y0[i * 10 + j] + x[1 + i * 4 + j];
    /* conv bias and its gradient: per channel over the pixels */
    float db[2] = {1, 2};
    lo->bias_planes_grad(c->ctx, 3, 2, 10, x, db); /* 3 samples x 2 channels x 10 pixels */
    for (int ch = 0; ch < 2; ch++) {
        double ref = ch + 1;
        for (int b = 0; b < 3; b++)
            for (int p = 0; p < 10; p++) ref += x[(b * 2 + ch) * 10 + p];
        bad += near("bias grad", ch, db[ch], ref, 1e-6, 1e-6);
    }
    int64_t ids_bad = lo->embed_forward(c->ctx, 2, (float[]){1.0f, 2.5f}, x, 3, 4, y);
    bad += ids_bad != 1;
    CHECK(bad == 0);
    free(x), free(y), free(y0);
    rng_destroy(&r);
    compute_destroy(&c);
}
