/* compute_cpu: the CPU backend on OpenBLAS. "Device" memory is host memory (64-byte aligned
 * for the vector units); sgemm/saxpy/sscal go to cblas; im2col, col2im and the SGD update are
 * loops whose inner loop is contiguous and runs on runtime/compute/vec.h's short vectors.
 *
 * Threads: OpenBLAS keeps one global pool. compute_cpu_ctx_new() sets its size once:
 * OPENBLAS_NUM_THREADS from the environment if set (OpenBLAS itself read it), else the
 * requested count, else the number of online CPUs.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "runtime/compute/compute.h"
#include "runtime/compute/vec.h"


typedef struct {
    int threads;
    float *pad;          /* im2col/col2im scratch: one zero-padded image */
    int64_t pad_count;
} cpu_ctx_t;

/* The scratch for a padded image of count floats, grown as needed (one thread uses a ctx). */
static float *cpu_pad_scratch(cpu_ctx_t *c, int64_t count)
{
    if (count > c->pad_count) {
        free(c->pad);
        c->pad = xmalloc((size_t)count * sizeof(float));
        c->pad_count = count;
    }
    return c->pad;
}

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

static void cpu_destroy(void *ctx)
{
    free(((cpu_ctx_t *)ctx)->pad);
    free(ctx);
}

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


static void cpu_sgemm(void *ctx, bool ta, bool tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc)
{
    (void)ctx;
    /* beta = 0: zero C here and let OpenBLAS add (beta = 1). Its own beta pass
     * (sgemm_beta) is a scalar loop, 4-7% of CIFAR-10 quick's training step in perf; memset
     * is several times faster, and 0 + x = x, so C is the same bit for bit (but for the sign
     * of a zero, which nothing reads). */
    if (beta == 0.0f && m > 0 && n > 0) {
        if (ldc == n) memset(c, 0, (size_t)m * n * sizeof(float));
        else
            for (int i = 0; i < m; i++) memset(c + (int64_t)i * ldc, 0, (size_t)n * sizeof(float));
        beta = 1.0f;
    }
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

/* The output columns ox whose input column ix = ox*sw - pw + kj lies inside [0, w):
 * [*lo, *hi). Computing the range once per row keeps the inner loops free of branches. */
static void col_range(int w, int pw, int sw, int kj, int ow, int *lo, int *hi)
{
    int first = pw - kj; /* smallest ox*sw with ix >= 0 */
    int l = first <= 0 ? 0 : (first + sw - 1) / sw;
    int last = w - 1 + pw - kj; /* largest ox*sw with ix < w */
    int h = last < 0 ? 0 : last / sw + 1;
    if (h > ow) h = ow;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Stride 1: copy the image once into a zero-padded scratch, after which every row of col is
 * oh runs of ow consecutive floats, with no border tests or zero fills. Per-run overhead is
 * what im2col costs on small images (LeNet's conv2: runs of 14 floats); measured there at
 * batch 64, 3.5 ms per batch with border tests, 1.3 ms this way. */
static void im2col_stride1(cpu_ctx_t *cc, const float *x, int c, int h, int w, int kh, int kw,
                           int ph, int pw, int oh, int ow, float *col)
{
    int hp = h + 2 * ph, wp = w + 2 * pw;
    float *xp = cpu_pad_scratch(cc, (int64_t)c * hp * wp);
    memset(xp, 0, (size_t)c * hp * wp * sizeof(float));
    for (int ci = 0; ci < c; ci++)
        for (int y = 0; y < h; y++)
            memcpy(xp + ((int64_t)ci * hp + y + ph) * wp + pw, x + ((int64_t)ci * h + y) * w,
                   (size_t)w * sizeof(float));
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < kh; ki++)
            for (int kj = 0; kj < kw; kj++) {
                float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                const float *src = xp + ((int64_t)ci * hp + ki) * wp + kj;
                for (int oy = 0; oy < oh; oy++)
                    vec_copy(row + (int64_t)oy * ow, src + (int64_t)oy * wp, ow);
            }
}

/* The adjoint of im2col_stride1: accumulate into a zero-padded scratch, then add its interior
 * to x. */
static void col2im_stride1(cpu_ctx_t *cc, const float *col, int c, int h, int w, int kh,
                           int kw, int ph, int pw, int oh, int ow, float *x)
{
    int hp = h + 2 * ph, wp = w + 2 * pw;
    float *xp = cpu_pad_scratch(cc, (int64_t)c * hp * wp);
    memset(xp, 0, (size_t)c * hp * wp * sizeof(float));
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < kh; ki++)
            for (int kj = 0; kj < kw; kj++) {
                const float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                float *dst = xp + ((int64_t)ci * hp + ki) * wp + kj;
                for (int oy = 0; oy < oh; oy++)
                    vec_add(dst + (int64_t)oy * wp, row + (int64_t)oy * ow, ow);
            }
    for (int ci = 0; ci < c; ci++)
        for (int y = 0; y < h; y++)
            vec_add(x + ((int64_t)ci * h + y) * w, xp + ((int64_t)ci * hp + y + ph) * wp + pw, w);
}

/* Whether the padded stride-1 path applies: every window lies inside the padded image
 * (true for the output sizes model_infer computes without ceil rounding). */
static bool stride1_fits(int h, int w, int kh, int kw, int ph, int pw, int sh, int sw, int oh,
                         int ow)
{
    return sh == 1 && sw == 1 && oh + kh - 1 <= h + 2 * ph && ow + kw - 1 <= w + 2 * pw;
}

/* Row r of col is (channel ci, kernel offset ki, kj); column is the output pixel. For each
 * row the output row oy reads input row iy = oy*sh - ph + ki: a strided copy with zero
 * fill at the borders; the general path, for strides above 1. */
static void cpu_im2col(void *ctx, const float *x, int c, int h, int w, int kh, int kw, int ph,
                       int pw, int sh, int sw, int oh, int ow, float *col)
{
    if (stride1_fits(h, w, kh, kw, ph, pw, sh, sw, oh, ow)) {
        im2col_stride1((cpu_ctx_t *)ctx, x, c, h, w, kh, kw, ph, pw, oh, ow, col);
        return;
    }
    for (int ci = 0; ci < c; ci++) {
        const float *xc = x + (int64_t)ci * h * w;
        for (int ki = 0; ki < kh; ki++) {
            for (int kj = 0; kj < kw; kj++) {
                float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                int lo, hi;
                col_range(w, pw, sw, kj, ow, &lo, &hi);
                int ix0 = kj - pw;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * sh - ph + ki;
                    float *out = row + (int64_t)oy * ow;
                    if (iy < 0 || iy >= h) {
                        memset(out, 0, (size_t)ow * sizeof(float));
                        continue;
                    }
                    const float *xr = xc + (int64_t)iy * w;
                    for (int ox = 0; ox < lo; ox++) out[ox] = 0.0f;
                    if (sw == 1 && hi > lo)
                        vec_copy(out + lo, xr + ix0 + lo, hi - lo);
                    else if (sw != 1)
                        for (int ox = lo; ox < hi; ox++) out[ox] = xr[ox * sw + ix0];
                    for (int ox = hi; ox < ow; ox++) out[ox] = 0.0f;
                }
            }
        }
    }
}

static void cpu_col2im(void *ctx, const float *col, int c, int h, int w, int kh, int kw, int ph,
                       int pw, int sh, int sw, int oh, int ow, float *x)
{
    if (stride1_fits(h, w, kh, kw, ph, pw, sh, sw, oh, ow)) {
        col2im_stride1((cpu_ctx_t *)ctx, col, c, h, w, kh, kw, ph, pw, oh, ow, x);
        return;
    }
    for (int ci = 0; ci < c; ci++) {
        float *xc = x + (int64_t)ci * h * w;
        for (int ki = 0; ki < kh; ki++) {
            for (int kj = 0; kj < kw; kj++) {
                const float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                int lo, hi;
                col_range(w, pw, sw, kj, ow, &lo, &hi);
                int ix0 = kj - pw;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * sh - ph + ki;
                    if (iy < 0 || iy >= h) continue;
                    float *xr = xc + (int64_t)iy * w;
                    const float *in = row + (int64_t)oy * ow;
                    if (sw == 1 && hi > lo)
                        vec_add(xr + ix0 + lo, in + lo, hi - lo);
                    else if (sw != 1)
                        for (int ox = lo; ox < hi; ox++) xr[ox * sw + ix0] += in[ox];
                }
            }
        }
    }
}

static void cpu_sgd_update(void *ctx, int64_t n, float lr, float momentum, float weight_decay,
                           float *w, const float *g, float *h)
{
    (void)ctx;
    /* the same arithmetic as the scalar loop below, four lanes at a time */
    const vec_f4 mom = {momentum, momentum, momentum, momentum}, rate = {lr, lr, lr, lr};
    const vec_f4 wd = {weight_decay, weight_decay, weight_decay, weight_decay};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vec_f4 wv = vec_load(w + i);
        vec_f4 hv = mom * vec_load(h + i) + rate * (vec_load(g + i) + wd * wv);
        vec_store(h + i, hv);
        vec_store(w + i, wv - hv);
    }
    for (; i < n; i++) {
        h[i] = momentum * h[i] + lr * (g[i] + weight_decay * w[i]);
        w[i] -= h[i];
    }
}

/* ---- staging and events: the CPU computes synchronously, so a copy is done when the call
 * returns and an event is the clock's reading when it was recorded ---- */

struct compute_event {
    int64_t t_ns; /* CLOCK_MONOTONIC at the record */
};

static int64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void cpu_host_release(void *ctx, void *p) { cpu_release(ctx, p); }

static compute_event_t *cpu_event_new(void *ctx)
{
    (void)ctx;
    return xcalloc(1, sizeof(compute_event_t));
}

static void cpu_event_destroy(void *ctx, compute_event_t *ev)
{
    (void)ctx;
    free(ev);
}

static void cpu_event_record(void *ctx, compute_event_t *ev)
{
    (void)ctx;
    ev->t_ns = cpu_now_ns();
}

static void cpu_event_wait(void *ctx, compute_event_t *ev)
{
    (void)ctx;
    (void)ev;
}

static int64_t cpu_event_elapsed_ns(void *ctx, compute_event_t *a, compute_event_t *b)
{
    (void)ctx;
    return b->t_ns - a->t_ns;
}

static void cpu_copy_async(void *ctx, void *dst, const void *src, size_t bytes,
                           compute_event_t *done)
{
    cpu_copy(ctx, dst, src, bytes);
    if (done) cpu_event_record(ctx, done);
}

static void cpu_nothing(void *ctx) { (void)ctx; }

const compute_ops_t compute_cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_nothing,
    .sgemm = cpu_sgemm,
    .saxpy = cpu_saxpy,
    .sscal = cpu_sscal,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .sgd_update = cpu_sgd_update,
    .host_alloc = cpu_alloc,
    .host_release = cpu_host_release,
    .event_new = cpu_event_new,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_elapsed_ns = cpu_event_elapsed_ns,
    .download_async = cpu_copy_async,
    .upload_async = cpu_copy_async,
    .order_after_copies_out = cpu_nothing,
    .bind_thread = cpu_nothing,
};
