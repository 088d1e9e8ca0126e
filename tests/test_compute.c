/* Compute backend tests: the CPU primitives against naive loops, im2col/col2im adjointness,
 * and the CUDA backend against the CPU one where a device exists (SKIP otherwise). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "runtime/compute/compute.h"
#include "core/vec.h"
#include "test.h"
#include "tests/gpu_fixture.h"

static float *rnd(rng_t *r, int64_t n)
{
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(2 * rng_uniform(r) - 1);
    return p;
}

TEST(test_compute_cpu_sgemm_all_transposes)
{
    char err[256];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c, "%s", err);
    rng_t *r = rng_new(3, 0);
    int m = 5, n = 7, k = 4, ld_pad = 3;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? m : k) + ld_pad, ldb = (tb ? k : n) + ld_pad, ldc = n + ld_pad;
            float *a = rnd(r, (ta ? k : m) * lda), *b = rnd(r, (tb ? n : k) * ldb);
            float *cm = rnd(r, m * ldc), *c0 = malloc((size_t)m * ldc * sizeof *c0);
            memcpy(c0, cm, (size_t)m * ldc * sizeof *c0);
            compute_sgemm(c, ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, cm, ldc);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double s = 0;
                    for (int p = 0; p < k; p++)
                        s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                             (tb ? b[j * ldb + p] : b[p * ldb + j]);
                    CHECK_NEAR(cm[i * ldc + j], 0.5 * s + 2.0 * c0[i * ldc + j], 1e-5, 1e-5);
                }
            free(a), free(b), free(cm), free(c0);
        }
    rng_destroy(&r);
    compute_destroy(&c);
}

/* im2col against the definition, and col2im as its adjoint: <im2col x, y> = <x, col2im y>,
 * over shapes that exercise every border case: stride 1 (the vectorised path) and 2, padding
 * wider than the kernel (whole rows and columns of zeros), rectangular kernels. */
static int check_im2col(compute_t *c, rng_t *r, int C, int H, int W, int kh, int kw, int ph,
                        int pw, int sh, int sw)
{
    int oh = (H + 2 * ph - kh) / sh + 1, ow = (W + 2 * pw - kw) / sw + 1;
    int64_t nc = (int64_t)C * kh * kw * oh * ow;
    float *x = rnd(r, C * H * W), *col = malloc((size_t)nc * sizeof *col), *y = rnd(r, nc);
    float *back = calloc((size_t)C * H * W, sizeof *back);
    int bad = 0;
    c->ops->im2col(c->ctx, x, C, H, W, kh, kw, ph, pw, sh, sw, oh, ow, col);
    for (int ci = 0; ci < C; ci++)
        for (int ki = 0; ki < kh; ki++)
            for (int kj = 0; kj < kw; kj++)
                for (int oy = 0; oy < oh; oy++)
                    for (int ox = 0; ox < ow; ox++) {
                        int iy = oy * sh - ph + ki, ix = ox * sw - pw + kj;
                        float want = iy >= 0 && iy < H && ix >= 0 && ix < W
                                         ? x[(ci * H + iy) * W + ix]
                                         : 0.0f;
                        bad += col[(((ci * kh + ki) * kw + kj) * oh + oy) * ow + ox] != want;
                    }
    c->ops->col2im(c->ctx, y, C, H, W, kh, kw, ph, pw, sh, sw, oh, ow, back);
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < nc; i++) lhs += (double)col[i] * y[i];
    for (int i = 0; i < C * H * W; i++) rhs += (double)x[i] * back[i];
    if (fabs(lhs - rhs) > 1e-4 + 1e-5 * fabs(lhs)) bad++;
    if (bad)
        fprintf(stderr, "im2col C%d H%d W%d k%dx%d p%dx%d s%dx%d: %d mismatches\n", C, H, W, kh,
                kw, ph, pw, sh, sw, bad);
    free(x), free(col), free(y), free(back);
    return bad;
}

TEST(test_compute_cpu_im2col_col2im)
{
    char err[256];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    rng_t *r = rng_new(4, 0);
    CHECK(check_im2col(c, r, 2, 6, 5, 3, 2, 1, 1, 2, 1) == 0);
    CHECK(check_im2col(c, r, 3, 14, 14, 5, 5, 2, 2, 1, 1) == 0);
    CHECK(check_im2col(c, r, 2, 9, 11, 3, 3, 1, 1, 2, 2) == 0);
    CHECK(check_im2col(c, r, 1, 4, 5, 2, 2, 3, 3, 1, 1) == 0);
    CHECK(check_im2col(c, r, 2, 7, 8, 3, 4, 4, 5, 3, 2) == 0);
    CHECK(check_im2col(c, r, 3, 11, 11, 11, 11, 0, 0, 4, 4) == 0);
    rng_destroy(&r);
    compute_destroy(&c);
}

/* The short-vector helpers against their plain loops, at every length around the vector
 * width (so the scalar tails run too). */
TEST(test_compute_vec_helpers_match_loops)
{
    rng_t *r = rng_new(9, 0);
    for (int n = 0; n <= 11; n++) {
        float *x = rnd(r, n + 1), *m = rnd(r, n + 1), *y0 = rnd(r, n + 1);
        float *y = malloc((size_t)(n + 1) * sizeof *y);
        int bad = 0;
        vec_relu(y, x, n);
        for (int i = 0; i < n; i++) bad += y[i] != (x[i] > 0.0f ? x[i] : 0.0f);
        memcpy(y, y0, (size_t)n * sizeof *y);
        vec_relu_grad_add(y, x, m, n);
        for (int i = 0; i < n; i++) bad += y[i] != y0[i] + (x[i] > 0.0f ? m[i] : 0.0f);
        memcpy(y, y0, (size_t)n * sizeof *y);
        vec_add(y, x, n);
        for (int i = 0; i < n; i++) bad += y[i] != y0[i] + x[i];
        memcpy(y, y0, (size_t)n * sizeof *y);
        vec_add_scalar(y, 0.5f, n);
        for (int i = 0; i < n; i++) bad += y[i] != y0[i] + 0.5f;
        vec_mul(y, x, m, n);
        for (int i = 0; i < n; i++) bad += y[i] != x[i] * m[i];
        memcpy(y, y0, (size_t)n * sizeof *y);
        vec_mul_add(y, x, m, n);
        for (int i = 0; i < n; i++) bad += y[i] != y0[i] + x[i] * m[i];
        vec_copy(y, x, n);
        for (int i = 0; i < n; i++) bad += y[i] != x[i];
        double sum = 0;
        for (int i = 0; i < n; i++) sum += x[i];
        bad += fabs(vec_sum(x, n) - sum) > 1e-5;
        CHECK(bad == 0);
        free(x), free(m), free(y0), free(y);
    }
    rng_destroy(&r);
}

TEST(test_compute_cpu_sgd_update)
{
    char err[256];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, h[2] = {0.1f, 0.0f};
    c->ops->sgd_update(c->ctx, 2, 0.1f, 0.9f, 0.01f, w, g, h);
    /* h = 0.9 h + 0.1 (g + 0.01 w); w -= h */
    CHECK_NEAR(h[0], 0.9 * 0.1 + 0.1 * (0.5 + 0.01), 1e-7, 1e-6);
    CHECK_NEAR(w[0], 1.0 - (0.09 + 0.051), 1e-7, 1e-6);
    CHECK_NEAR(h[1], 0.1 * (0.25 - 0.02), 1e-7, 1e-6);
    CHECK_NEAR(w[1], -2.0 - 0.023, 1e-7, 1e-6);
    compute_destroy(&c);
}

TEST(test_compute_kind_parse)
{
    compute_kind_t k;
    CHECK(compute_kind_parse("cpu", &k) == 0 && k == COMPUTE_CPU);
    CHECK(compute_kind_parse("cuda", &k) == 0 && k == COMPUTE_CUDA);
    CHECK(compute_kind_parse("tpu", &k) == -1);
    char why[256];
    CHECK(compute_available(COMPUTE_CPU, why, sizeof why));
}

/* Whether this process has mapped a library whose name contains `name`. */
static int maps_library(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    REQUIRE(f, "no /proc/self/maps");
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f)) found |= strstr(line, name) != NULL;
    fclose(f);
    return found;
}

TEST(compute_cpu_and_the_simulator_map_no_cuda)
{
    /* the CUDA backend is loaded only when asked for: a CPU backend (and so a simulation,
     * which uses none) maps neither the CUDA runtime nor cuBLAS */
    char err[256];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c, "%s", err);
    CHECK(!maps_library("libcudart") && !maps_library("libcublas"), "CUDA mapped by a CPU run");
    compute_destroy(&c);
}

TEST(compute_cuda_backend_missing_is_a_message)
{
    setenv("POSEIDON_CUDA_LIB", "/nonexistent/libposeidon_cuda.so", 1);
    char why[1024];
    CHECK(!compute_available(COMPUTE_CUDA, why, sizeof why), "a missing backend is available");
    CHECK(strstr(why, "/nonexistent/libposeidon_cuda.so: not built"), "why: %s", why);
    char err[1024];
    CHECK(compute_new(COMPUTE_CUDA, 1, err, sizeof err) == NULL && strstr(err, "not built"),
          "compute_new: %s", err);
}

/* The CUDA backend computes what the CPU backend computes. */
TEST(test_compute_cuda_matches_cpu)
{
    char why[256];
    if (!compute_available(COMPUTE_CUDA, why, sizeof why)) SKIP("cuda backend: %s", why);
    char err[256];
    compute_t *cpu = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    compute_t *gpu = compute_new(COMPUTE_CUDA, 0, err, sizeof err);
    REQUIRE(gpu, "%s", err);
    rng_t *r = rng_new(5, 0);
    int m = 33, n = 17, k = 29;
    float *a = rnd(r, m * k), *b = rnd(r, n * k), *cc = rnd(r, m * n);
    float *ga = compute_alloc_floats(gpu, m * k), *gb = compute_alloc_floats(gpu, n * k);
    float *gc = compute_alloc_floats(gpu, m * n);
    gpu->ops->upload(gpu->ctx, ga, a, (size_t)m * k * 4);
    gpu->ops->upload(gpu->ctx, gb, b, (size_t)n * k * 4);
    gpu->ops->upload(gpu->ctx, gc, cc, (size_t)m * n * 4);
    compute_sgemm(cpu, false, true, m, n, k, 1.0f, a, k, b, k, 0.5f, cc, n);
    compute_sgemm(gpu, false, true, m, n, k, 1.0f, ga, k, gb, k, 0.5f, gc, n);
    float *back = malloc((size_t)m * n * 4);
    gpu->ops->download(gpu->ctx, back, gc, (size_t)m * n * 4);
    for (int i = 0; i < m * n; i++) CHECK_NEAR(back[i], cc[i], 1e-4, 1e-4);
    /* im2col + col2im */
    int C = 3, H = 7, W = 6, kh = 3, kw = 3, oh = 4, ow = 3; /* pad 1, stride 2 */
    int64_t nc = (int64_t)C * kh * kw * oh * ow;
    float *x = rnd(r, C * H * W), *col = malloc((size_t)nc * 4), *gcol_h = malloc((size_t)nc * 4);
    float *gx = compute_alloc_floats(gpu, C * H * W), *gcol = compute_alloc_floats(gpu, nc);
    gpu->ops->upload(gpu->ctx, gx, x, (size_t)C * H * W * 4);
    cpu->ops->im2col(cpu->ctx, x, C, H, W, kh, kw, 1, 1, 2, 2, oh, ow, col);
    gpu->ops->im2col(gpu->ctx, gx, C, H, W, kh, kw, 1, 1, 2, 2, oh, ow, gcol);
    gpu->ops->download(gpu->ctx, gcol_h, gcol, (size_t)nc * 4);
    for (int64_t i = 0; i < nc; i++) CHECK(gcol_h[i] == col[i]);
    cpu->ops->col2im(cpu->ctx, col, C, H, W, kh, kw, 1, 1, 2, 2, oh, ow, x);
    gpu->ops->col2im(gpu->ctx, gcol, C, H, W, kh, kw, 1, 1, 2, 2, oh, ow, gx);
    float *xb = malloc((size_t)C * H * W * 4);
    gpu->ops->download(gpu->ctx, xb, gx, (size_t)C * H * W * 4);
    for (int i = 0; i < C * H * W; i++) CHECK_NEAR(xb[i], x[i], 1e-5, 1e-5);
    /* the SGD update kernel against the CPU loop (a tail that is not a multiple of a block) */
    int64_t ns = 1000;
    float *w = rnd(r, ns), *g = rnd(r, ns), *h = rnd(r, ns), *wb = malloc((size_t)ns * 4);
    float *gw = compute_alloc_floats(gpu, ns), *gg = compute_alloc_floats(gpu, ns);
    float *gh = compute_alloc_floats(gpu, ns);
    gpu->ops->upload(gpu->ctx, gw, w, (size_t)ns * 4);
    gpu->ops->upload(gpu->ctx, gg, g, (size_t)ns * 4);
    gpu->ops->upload(gpu->ctx, gh, h, (size_t)ns * 4);
    cpu->ops->sgd_update(cpu->ctx, ns, 0.1f, 0.9f, 0.01f, w, g, h);
    gpu->ops->sgd_update(gpu->ctx, ns, 0.1f, 0.9f, 0.01f, gw, gg, gh);
    gpu->ops->download(gpu->ctx, wb, gw, (size_t)ns * 4);
    for (int64_t i = 0; i < ns; i++) CHECK_NEAR(wb[i], w[i], 1e-6, 1e-5);
    compute_release(gpu, gw), compute_release(gpu, gg), compute_release(gpu, gh);
    free(w), free(g), free(h), free(wb);
    compute_release(gpu, ga), compute_release(gpu, gb), compute_release(gpu, gc);
    compute_release(gpu, gx), compute_release(gpu, gcol);
    free(a), free(b), free(cc), free(back), free(x), free(col), free(gcol_h), free(xb);
    rng_destroy(&r);
    compute_destroy(&gpu);
    compute_destroy(&cpu);
}

/* The staging operations of a distributed GPU worker on backend c: a copy in, work on the
 * compute stream, a copy out that must see all of that work (it is ordered after it), the
 * buffer overwritten once the compute stream is ordered after the copy out (the copy keeps
 * what it read), and events that time the compute stream. */
static void staging_round_trip(compute_t *c, const char *name)
{
    int64_t n = 1 << 18;
    size_t bytes = (size_t)n * sizeof(float);
    float *in = compute_host_alloc(c, bytes), *out = compute_host_alloc(c, bytes);
    for (int64_t i = 0; i < n; i++) CHECK(out[i] == 0.0f, "%s: pinned memory not zeroed", name);
    for (int64_t i = 0; i < n; i++) in[i] = (float)(i % 1000) * 0.5f;
    float *dev = compute_alloc_floats(c, n);
    compute_event_t *loaded = compute_event_new(c), *copied = compute_event_new(c);
    compute_event_t *t0 = compute_event_new(c), *t1 = compute_event_new(c);
    compute_upload_async(c, dev, in, bytes, loaded);
    compute_event_wait(c, loaded);
    compute_event_record(c, t0);
    for (int k = 0; k < 20; k++) c->ops->sscal(c->ctx, n, 1.25f, dev); /* x 1.25^20 */
    compute_event_record(c, t1);
    compute_download_async(c, out, dev, bytes, copied);
    compute_order_after_copies_out(c);
    c->layers->fill(c->ctx, n, -1.0f, dev); /* after the copy: it must not see this */
    compute_event_wait(c, copied);
    double f = pow(1.25, 20);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(out[i] - in[i] * f) > 1e-5 * (1 + fabs(in[i] * f))) bad++;
    CHECK(bad == 0, "%s: %lld of %lld values copied out differ from the work before the copy",
          name, (long long)bad, (long long)n);
    int64_t ns = compute_event_elapsed_ns(c, t0, t1);
    CHECK(ns >= 0, "%s: the compute stream's time went backwards (%lld ns)", name, (long long)ns);
    c->ops->sync(c->ctx);
    compute_download(c, out, dev, bytes);
    CHECK(out[0] == -1.0f && out[n - 1] == -1.0f, "%s: the work after the copy did not run",
          name);
    compute_event_destroy(c, &loaded);
    compute_event_destroy(c, &copied);
    compute_event_destroy(c, &t0);
    compute_event_destroy(c, &t1);
    CHECK(loaded == NULL, "%s: the event pointer was not cleared", name);
    compute_release(c, dev);
    compute_host_release(c, in);
    compute_host_release(c, out);
}

TEST(compute_cpu_staging_copies_and_events)
{
    char err[256];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c, "%s", err);
    staging_round_trip(c, "cpu");
    compute_destroy(&c);
}

TEST(compute_cuda_staging_copies_and_events)
{
    char why[256];
    if (!compute_available(COMPUTE_CUDA, why, sizeof why)) SKIP("cuda backend: %s", why);
    char err[256];
    compute_t *c = compute_new_on(COMPUTE_CUDA, 0, 0, err, sizeof err);
    REQUIRE(c, "%s", err);
    staging_round_trip(c, "cuda");
    compute_destroy(&c);
}

/* Counted in a child process (so that a launcher can still fork GPU workers), the devices
 * and the reason are the ones this process finds itself. */
TEST(compute_device_count_apart_agrees)
{
    char why[1024], why_apart[1024];
    CHECK(compute_device_count_apart(COMPUTE_CPU, why_apart, sizeof why_apart) == 1);
    int apart = compute_device_count_apart(COMPUTE_CUDA, why_apart, sizeof why_apart);
    int here = compute_device_count(COMPUTE_CUDA, why, sizeof why);
    CHECK(apart == here, "%d devices apart, %d here", apart, here);
    CHECK(!strcmp(why, why_apart), "why apart: '%s', here: '%s'", why_apart, why);
    CHECK(here > 0 || why[0], "no device and no reason");
}

/* The groups' products as one call (a grouped convolution's): on the GPU one strided batched
 * product, against the CPU's loop of single products, with every transpose */
TEST(test_compute_cuda_sgemm_strided_matches_the_loop)
{
    compute_t *gpu = gpu_or_skip();
    char err[256];
    compute_t *cpu = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(cpu, "%s", err);
    rng_t *r = rng_new(11, 0);
    int m = 5, n = 36, k = 9, G = 7; /* depthwise-like: small products, many groups */
    int64_t sa = m * k + 3, sb = k * n + 2, sc = m * n + 1, na = G * sa, nb = G * sb, nc = G * sc;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        int lda = ta ? m : k, ldb = tb ? k : n;
        float *a = rnd(r, (int)na), *b = rnd(r, (int)nb), *c = rnd(r, (int)nc);
        float *ga = compute_alloc_floats(gpu, na), *gb = compute_alloc_floats(gpu, nb),
              *gc = compute_alloc_floats(gpu, nc);
        gpu->ops->upload(gpu->ctx, ga, a, (size_t)na * 4);
        gpu->ops->upload(gpu->ctx, gb, b, (size_t)nb * 4);
        gpu->ops->upload(gpu->ctx, gc, c, (size_t)nc * 4);
        compute_sgemm_strided(cpu, ta, tb, m, n, k, 0.5f, a, lda, sa, b, ldb, sb, 0.25f, c, n,
                              sc, G);
        compute_sgemm_strided(gpu, ta, tb, m, n, k, 0.5f, ga, lda, sa, gb, ldb, sb, 0.25f, gc,
                              n, sc, G);
        float *back = malloc((size_t)nc * 4);
        gpu->ops->download(gpu->ctx, back, gc, (size_t)nc * 4);
        for (int64_t i = 0; i < nc; i++) CHECK_NEAR(back[i], c[i], 1e-4, 1e-4);
        compute_release(gpu, ga), compute_release(gpu, gb), compute_release(gpu, gc);
        free(a), free(b), free(c), free(back);
    }
    rng_destroy(&r);
    compute_destroy(&gpu);
    compute_destroy(&cpu);
}
