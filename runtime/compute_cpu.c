/* compute_cpu: the CPU backend on OpenBLAS. "Device" memory is host memory (64-byte aligned
 * for the vector units); sgemm/saxpy/sscal go to cblas; im2col, col2im and the SGD update are
 * plain loops written so that the inner loop is contiguous.
 *
 * Threads: OpenBLAS keeps one global pool. compute_cpu_ctx_new() sets its size once:
 * OPENBLAS_NUM_THREADS from the environment if set (OpenBLAS itself read it), else the
 * requested count, else the number of online CPUs.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "runtime/compute.h"


typedef struct {
    int threads;
} cpu_ctx_t;

void *compute_cpu_ctx_new(int threads)
{
    cpu_ctx_t *c = xcalloc(1, sizeof *c);
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (env && atoi(env) > 0) {
        threads = atoi(env);
    } else {
        if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (threads <= 0) threads = 1;
        openblas_set_num_threads(threads);
    }
    c->threads = threads;
    return c;
}

static void cpu_destroy(void *ctx) { free(ctx); }

static void *cpu_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (!p) die("out of memory allocating %zu bytes", bytes);
    memset(p, 0, rounded);
    return p;
}

static void cpu_release(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static void cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes) memmove(dst, src, bytes);
}

static void cpu_zero(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    if (bytes) memset(p, 0, bytes);
}

static void cpu_sync(void *ctx) { (void)ctx; }

static void cpu_sgemm(void *ctx, bool ta, bool tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc)
{
    (void)ctx;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_saxpy(void *ctx, int64_t n, float alpha, const float *x, float *y)
{
    (void)ctx;
    /* cblas takes int lengths: split long vectors. */
    while (n > 0) {
        int chunk = n > (1 << 30) ? (1 << 30) : (int)n;
        cblas_saxpy(chunk, alpha, x, 1, y, 1);
        x += chunk, y += chunk, n -= chunk;
    }
}

static void cpu_sscal(void *ctx, int64_t n, float alpha, float *x)
{
    (void)ctx;
    while (n > 0) {
        int chunk = n > (1 << 30) ? (1 << 30) : (int)n;
        cblas_sscal(chunk, alpha, x, 1);
        x += chunk, n -= chunk;
    }
}

/* Row r of col is (channel ci, kernel offset ki, kj); column is the output pixel. For each
 * row the output row oy reads input row iy = oy*sh - ph + ki: a strided copy with zero
 * fill at the borders. */
static void cpu_im2col(void *ctx, const float *x, int c, int h, int w, int kh, int kw, int ph,
                       int pw, int sh, int sw, int oh, int ow, float *col)
{
    (void)ctx;
    for (int ci = 0; ci < c; ci++) {
        const float *xc = x + (int64_t)ci * h * w;
        for (int ki = 0; ki < kh; ki++) {
            for (int kj = 0; kj < kw; kj++) {
                float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * sh - ph + ki;
                    float *out = row + (int64_t)oy * ow;
                    if (iy < 0 || iy >= h) {
                        memset(out, 0, (size_t)ow * sizeof(float));
                        continue;
                    }
                    const float *xr = xc + (int64_t)iy * w;
                    if (sw == 1) {
                        int ix0 = -pw + kj;
                        int ox_lo = ix0 < 0 ? -ix0 : 0;
                        int ox_hi = w - ix0 < ow ? w - ix0 : ow; /* exclusive */
                        if (ox_hi < ox_lo) ox_hi = ox_lo;
                        for (int ox = 0; ox < ox_lo; ox++) out[ox] = 0.0f;
                        if (ox_hi > ox_lo)
                            memcpy(out + ox_lo, xr + ix0 + ox_lo,
                                   (size_t)(ox_hi - ox_lo) * sizeof(float));
                        for (int ox = ox_hi; ox < ow; ox++) out[ox] = 0.0f;
                    } else {
                        for (int ox = 0; ox < ow; ox++) {
                            int ix = ox * sw - pw + kj;
                            out[ox] = (ix >= 0 && ix < w) ? xr[ix] : 0.0f;
                        }
                    }
                }
            }
        }
    }
}

static void cpu_col2im(void *ctx, const float *col, int c, int h, int w, int kh, int kw, int ph,
                       int pw, int sh, int sw, int oh, int ow, float *x)
{
    (void)ctx;
    for (int ci = 0; ci < c; ci++) {
        float *xc = x + (int64_t)ci * h * w;
        for (int ki = 0; ki < kh; ki++) {
            for (int kj = 0; kj < kw; kj++) {
                const float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * sh - ph + ki;
                    if (iy < 0 || iy >= h) continue;
                    float *xr = xc + (int64_t)iy * w;
                    const float *in = row + (int64_t)oy * ow;
                    for (int ox = 0; ox < ow; ox++) {
                        int ix = ox * sw - pw + kj;
                        if (ix >= 0 && ix < w) xr[ix] += in[ox];
                    }
                }
            }
        }
    }
}

static void cpu_sgd_update(void *ctx, int64_t n, float lr, float momentum, float weight_decay,
                           float *w, const float *g, float *h)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) {
        h[i] = momentum * h[i] + lr * (g[i] + weight_decay * w[i]);
        w[i] -= h[i];
    }
}

const compute_ops_t compute_cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .sgemm = cpu_sgemm,
    .saxpy = cpu_saxpy,
    .sscal = cpu_sscal,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .sgd_update = cpu_sgd_update,
};
