/* compute_cpu: the CPU backend on OpenBLAS. "Device" memory is host memory (64-byte aligned
 * for the vector units); sgemm/saxpy/sscal go to cblas; the convolution kernels are in
 * conv_cpu.c; the SGD update is a loop on core/vec.h's short vectors.
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
#include "runtime/compute/conv_cpu.h"
#include "core/vec.h"


typedef struct {
    int threads;
    conv_cpu_scratch_t conv; /* im2col, col2im and data-gradient scratch */
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

static void cpu_destroy(void *ctx)
{
    conv_cpu_scratch_fini(&((cpu_ctx_t *)ctx)->conv);
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

static void cpu_im2col(void *ctx, const float *x, int c, int h, int w, int kh, int kw, int ph,
                       int pw, int sh, int sw, int oh, int ow, float *col)
{
    conv_cpu_im2col(&((cpu_ctx_t *)ctx)->conv, x, c, h, w, kh, kw, ph, pw, sh, sw, oh, ow, col);
}

static void cpu_col2im(void *ctx, const float *col, int c, int h, int w, int kh, int kw, int ph,
                       int pw, int sh, int sw, int oh, int ow, float *x)
{
    conv_cpu_col2im(&((cpu_ctx_t *)ctx)->conv, col, c, h, w, kh, kw, ph, pw, sh, sw, oh, ow, x);
}

static bool cpu_conv_forward(void *ctx, const ke_window_t *k, int batch, int c, int o,
                             int groups, const float *w, const float *b, const float *x, float *y)
{
    return conv_cpu_forward(&((cpu_ctx_t *)ctx)->conv, k, batch, c, o, groups, w, b, x, y);
}

static bool cpu_conv_weight_grad(void *ctx, const ke_window_t *k, int batch, int c, int o,
                                 int groups, const float *x, const float *dy, float *dw)
{
    return conv_cpu_weight_grad(&((cpu_ctx_t *)ctx)->conv, k, batch, c, o, groups, x, dy, dw);
}

static bool cpu_conv_data_grad(void *ctx, const ke_window_t *k, int batch, int c, int o,
                               int groups, const float *w, const float *dy, float *dx)
{
    return conv_cpu_data_grad(&((cpu_ctx_t *)ctx)->conv, k, batch, c, o, groups, w, dy, dx);
}

static void cpu_sgd_update(void *ctx, int64_t n, float lr, float momentum, float weight_decay,
                           float *w, const float *g, float *h)
{
    (void)ctx;
    vec_sgd_momentum(w, g, h, n, 1.0f, lr, momentum, weight_decay);
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

/* The CPU has no half arithmetic worth its conversions: precision = bf16 or fp16 computes in
 * fp32 here (docs/precision.md), the wire and the plan being the parts that change. */
static void cpu_gemm_in_fp32(void *ctx, precision_t p)
{
    (void)ctx;
    (void)p;
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
    .sync = cpu_nothing,
    .sgemm = cpu_sgemm,
    .saxpy = cpu_saxpy,
    .sscal = cpu_sscal,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .conv_forward = cpu_conv_forward,
    .conv_data_grad = cpu_conv_data_grad,
    .conv_weight_grad = cpu_conv_weight_grad,
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
    .set_gemm_precision = cpu_gemm_in_fp32,
};
