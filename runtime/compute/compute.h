/* compute: the one interface between the layers and a compute device (CPU through OpenBLAS,
 * GPU through cuBLAS). Layers, the solver and the profiler call these primitives and never a
 * BLAS or CUDA function directly, so the backend is chosen in one place: compute_new().
 *
 * Buffers: compute_alloc() returns device memory for the backend (host memory for the CPU
 * backend); compute_upload()/compute_download() move bytes between host and device. All
 * matrices are row-major, as in cblas with CblasRowMajor.
 *
 * Staging (a GPU worker of a distributed job): host_alloc() gives pinned host memory;
 * download_async() copies device -> pinned host on a copy-out stream, after the work already
 * enqueued on the compute stream, and returns at once; upload_async() copies pinned host ->
 * device on a copy-in stream; events mark the end of either (event_wait blocks until then)
 * and time the compute stream (event_record, event_elapsed_ns). The CPU backend implements
 * them with plain memcpy and the wall clock, so the CPU runs the same control flow.
 *
 * Invariants: a compute_t is used by one thread at a time, except that upload_async,
 * event_wait and host_alloc/host_release may be called from other threads (the syncers of a
 * distributed worker) while it computes; the CPU backend never touches CUDA; the CUDA backend is a separately linked shared object (libposeidon_cuda.so) that
 * only compute.c loads, on the first request for it, so nothing else maps CUDA libraries.
 */
#ifndef POSEIDON_COMPUTE_H
#define POSEIDON_COMPUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/precision.h"
#include "runtime/compute/kernels_elementwise.h"
#include "runtime/compute/kernels_window.h"

typedef enum { COMPUTE_CPU, COMPUTE_CUDA } compute_kind_t;

/* A point in a backend's work (a CUDA event; the CPU backend's clock reading). */
typedef struct compute_event compute_event_t;

/* The primitives a backend implements; ctx is the backend's own state. */
typedef struct {
    const char *name;
    void (*destroy)(void *ctx);
    void *(*alloc)(void *ctx, size_t bytes); /* zero-filled; dies on exhaustion */
    void (*release)(void *ctx, void *p);
    void (*upload)(void *ctx, void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(void *ctx, void *dst_host, const void *src_dev, size_t bytes);
    void (*copy)(void *ctx, void *dst_dev, const void *src_dev, size_t bytes);
    void (*zero)(void *ctx, void *p, size_t bytes);
    void (*sync)(void *ctx);
    /* C (m,n) = alpha * op(A) (m,k) * op(B) (k,n) + beta * C; row-major, leading dims. */
    void (*sgemm)(void *ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c,
                  int ldc);
    void (*saxpy)(void *ctx, int64_t n, float alpha, const float *x, float *y); /* y += a x */
    void (*sscal)(void *ctx, int64_t n, float alpha, float *x);                 /* x *= a */
    /* One image (c,h,w) to columns (c*kh*kw, oh*ow), zero padding outside the image. */
    void (*im2col)(void *ctx, const float *x, int c, int h, int w, int kh, int kw, int ph,
                   int pw, int sh, int sw, int oh, int ow, float *col);
    /* The adjoint of im2col: ADDS the columns back into the image x (c,h,w). */
    void (*col2im)(void *ctx, const float *col, int c, int h, int w, int kh, int kw, int ph,
                   int pw, int sh, int sw, int oh, int ow, float *x);
    /* SGD with momentum (Caffe's form): h = mom*h + lr*(g + wd*w); w -= h. */
    void (*sgd_update)(void *ctx, int64_t n, float lr, float momentum, float weight_decay,
                       float *w, const float *g, float *h);
    /* Pinned host memory, zero-filled (dies on exhaustion): what the asynchronous copies read
     * and write (the CPU backend: aligned host memory). */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_release)(void *ctx, void *p);
    compute_event_t *(*event_new)(void *ctx);
    void (*event_destroy)(void *ctx, compute_event_t *ev);
    /* ev marks the work enqueued on the compute stream so far */
    void (*event_record)(void *ctx, compute_event_t *ev);
    /* blocks the calling thread until the work ev marks is done */
    void (*event_wait)(void *ctx, compute_event_t *ev);
    /* nanoseconds from a to b, both recorded (waits for b) */
    int64_t (*event_elapsed_ns)(void *ctx, compute_event_t *a, compute_event_t *b);
    /* device -> pinned host on the copy-out stream, ordered after the work enqueued on the
     * compute stream so far; done (unless NULL) marks the copy's end. Returns at once. */
    void (*download_async)(void *ctx, void *dst_host, const void *src_dev, size_t bytes,
                           compute_event_t *done);
    /* pinned host -> device on the copy-in stream; done marks its end. The caller waits for
     * done before it enqueues work that reads dst. Returns at once. */
    void (*upload_async)(void *ctx, void *dst_dev, const void *src_host, size_t bytes,
                         compute_event_t *done);
    /* work enqueued on the compute stream from now on waits for every copy out issued so far
     * (the buffers they read may then be overwritten); the host does not wait */
    void (*order_after_copies_out)(void *ctx);
    /* the calling thread's calls go to this backend's device (CUDA keeps the current device
     * per thread): a thread that computes on a GPU it did not create calls this first */
    void (*bind_thread)(void *ctx);
    /* the precision the matrix products (sgemm) read their operands at from now on: fp32
     * (the default), or bf16 / fp16 (rounded to nearest even, fp32 accumulation and output:
     * a GPU's tensor cores); the CPU backend computes in fp32 whatever it is told */
    void (*set_gemm_precision)(void *ctx, precision_t p);
    /* Last, so that the CUDA backend's positional initialiser (C++) leaves them NULL: */
    /* Optional (NULL: the caller uses im2col and GEMM): y (batch, o, k->oh, k->ow) = the
     * convolution of x (batch, c, k->h, k->w) with w (o, c/groups, k->kh, k->kw), plus b[o]
     * unless b is NULL; false, with nothing done, for a shape it does not take. */
    bool (*conv_forward)(void *ctx, const ke_window_t *k, int batch, int c, int o, int groups,
                         const float *w, const float *b, const float *x, float *y);
    /* Optional (NULL: the caller uses im2col, GEMM and col2im): dx (batch, c, k->h, k->w) +=
     * the input gradient of the convolution with filters w (o, c/groups, k->kh, k->kw), given
     * dy (batch, o, k->oh, k->ow); false, with nothing done, for a shape it does not take. */
    bool (*conv_data_grad)(void *ctx, const ke_window_t *k, int batch, int c, int o, int groups,
                           const float *w, const float *dy, float *dx);
    /* Optional, the same for the filters' gradient: dw (o, c/groups, k->kh, k->kw) = its sum
     * over the batch, given x and dy; false, with nothing done, for a shape it does not take. */
    bool (*conv_weight_grad)(void *ctx, const ke_window_t *k, int batch, int c, int o,
                             int groups, const float *x, const float *dy, float *dw);
    /* Optional (NULL: count calls of sgemm, in order): count products C_i = alpha op(A_i)
     * op(B_i) + beta C_i with X_i = X + i * stride_x, as one call (a grouped convolution's
     * groups: one launch on a GPU instead of one per group). */
    void (*sgemm_strided)(void *ctx, bool trans_a, bool trans_b, int m, int n, int k,
                          float alpha, const float *a, int lda, int64_t stride_a,
                          const float *b, int ldb, int64_t stride_b, float beta, float *c,
                          int ldc, int64_t stride_c, int count);
} compute_ops_t;

/* The layers' operations beyond BLAS, on the backend's buffers, so that a network runs with
 * every buffer on the device and no per-layer trip through host memory. Shapes are plain
 * numbers; "planes" are the batch x channels images of h x w pixels (NCHW). Functions named
 * *_add and every backward ADD into their output; the rest overwrite. The CPU backend
 * (compute_cpu_layers.c) and the CUDA backend (compute_cuda_layers.cu) both compute each
 * element with the bodies of kernels_elementwise.h. Integer buffers (argmax, labels) are
 * backend memory too (compute_alloc() bytes). */
typedef struct {
    void (*fill)(void *ctx, int64_t n, float v, float *x); /* x[i] = v */
    /* rows x count floats: dst[r*dst_stride + j] = src[r*src_stride + j] (a src_stride of 0
     * repeats one row); add_rows adds instead */
    void (*copy_rows)(void *ctx, int64_t rows, int64_t count, float *dst, int64_t dst_stride,
                      const float *src, int64_t src_stride);
    void (*add_rows)(void *ctx, int64_t rows, int64_t count, float *dst, int64_t dst_stride,
                     const float *src, int64_t src_stride);
    /* y[j] = sum over r < rows of x[r*stride + j], j < m, added in row order from 0 */
    void (*sum_rows)(void *ctx, int64_t rows, int64_t m, const float *x, int64_t stride,
                     float *y);
    /* y (batch, c, p) += b[channel] */
    void (*bias_planes)(void *ctx, int batch, int c, int64_t p, const float *b, float *y);
    /* db[ch] += the sum of dy over the p pixels of channel ch, sample by sample */
    void (*bias_planes_grad)(void *ctx, int batch, int c, int64_t p, const float *dy,
                             float *db);
    void (*relu)(void *ctx, int64_t n, const float *x, float *y);
    void (*relu_grad_add)(void *ctx, int64_t n, const float *x, const float *dy, float *dx);
    void (*mul)(void *ctx, int64_t n, const float *x, const float *m, float *y); /* y = x*m */
    void (*mul_add)(void *ctx, int64_t n, const float *x, const float *m, float *y);
    void (*add)(void *ctx, int64_t n, const float *x, float *y); /* y += x */
    /* planes x (h, w) -> planes x (oh, ow); max pooling records the input index of each
     * maximum in argmax (ints, -1 for an empty window) */
    void (*pool_forward)(void *ctx, const ke_window_t *k, int64_t planes, bool avg,
                         const float *x, float *y, int *argmax);
    void (*pool_backward)(void *ctx, const ke_window_t *k, int64_t planes, bool avg,
                          const float *dy, const int *argmax, float *dx);
    /* LRN across channels of (batch, c, p); keeps scale for the backward; scratch: c*p */
    void (*lrn_forward)(void *ctx, int batch, int c, int64_t p, int size, double alpha,
                        double beta, double k, const float *x, float *scale, float *y);
    void (*lrn_backward)(void *ctx, int batch, int c, int64_t p, int size, double alpha,
                         double beta, const float *x, const float *scale, const float *y,
                         const float *dy, float *scratch, float *dx);
    /* batch norm per channel of (batch, c, p): training uses the batch's statistics (kept in
     * mean/invstd, running averages updated), evaluation the running ones; shift may be NULL */
    void (*bn_forward)(void *ctx, int batch, int c, int64_t p, bool train, double eps,
                       float momentum, const float *x, const float *g, const float *shift,
                       float *run_mean, float *run_var, float *mean, float *invstd,
                       float *xhat, float *y);
    /* dg (and db unless NULL) overwritten; dx (unless NULL) added to */
    void (*bn_backward)(void *ctx, int batch, int c, int64_t p, bool train, double eps,
                        const float *g, const float *run_var, const float *invstd,
                        const float *xhat, const float *dy, float *dg, float *db, float *dx);
    /* per row of k classes: prob = softmax(x); returns the sum of -log prob[label] over rows
     * with a label >= 0 (labels: ints, already checked to be < k) */
    double (*softmax_xent_forward)(void *ctx, int64_t rows, int k, const float *x,
                                   const int *labels, float *prob);
    void (*softmax_xent_backward)(void *ctx, int64_t rows, int k, const float *prob,
                                  const int *labels, float scale, float *dx);
    /* attention: rows of s scores, row r is position r % s (causal: sees j <= r % s) */
    void (*softmax_rows)(void *ctx, int64_t rows, int s, bool causal, float *p);
    void (*dsoftmax_rows)(void *ctx, int64_t rows, int s, const float *p, float *d);
    /* out (tokens, dim) = rows ids[t] of w (vocab, dim); ids are floats holding integers;
     * returns the number of ids outside [0, vocab) (their rows are left as they were) */
    int64_t (*embed_forward)(void *ctx, int64_t tokens, const float *ids, const float *w,
                             int vocab, int dim, float *out);
    void (*embed_backward)(void *ctx, int64_t tokens, const float *ids, const float *dout,
                           int dim, float *dw); /* dw += scattered rows */
    /* per sample: y (cols, rows) = x (rows, cols) transposed; with add, y += */
    void (*transpose)(void *ctx, int batch, int rows, int cols, const float *x, float *y,
                      bool add);
    void (*layernorm_forward)(void *ctx, int64_t tokens, int dim, double eps, const float *x,
                              const float *g, const float *b, float *out, float *xhat,
                              float *invstd);
    /* dg, db overwritten; dx (unless NULL) added to */
    void (*layernorm_backward)(void *ctx, int64_t tokens, int dim, const float *dout,
                               const float *g, const float *xhat, const float *invstd,
                               float *dg, float *db, float *dx);
    void (*gelu_forward)(void *ctx, int64_t n, bool tanh_approx, const float *x, float *y);
    void (*gelu_backward)(void *ctx, int64_t n, bool tanh_approx, const float *x,
                          const float *dy, float *dx);
    void (*tanh_forward)(void *ctx, int64_t n, const float *x, float *y);
    void (*tanh_backward)(void *ctx, int64_t n, const float *y, const float *dy, float *dx);
    /* act (fn: KE_ACT_*, a and b its parameters, kernels_elementwise.h) */
    void (*act_forward)(void *ctx, int64_t n, int fn, double a, double b, const float *x,
                        float *y);
    void (*act_backward)(void *ctx, int64_t n, int fn, double a, double b, const float *x,
                         const float *dy, float *dx);
    /* rows of p values times one factor each: y[r*p + j] = x[r*p + j] * s[r] */
    void (*mul_rows)(void *ctx, int64_t rows, int64_t p, const float *x, const float *s,
                     float *y);
    /* its backward: dx[r*p + j] += dy * s[r], ds[r] += sum over j of dy * x (either NULL) */
    void (*mul_rows_grad)(void *ctx, int64_t rows, int64_t p, const float *x, const float *s,
                          const float *dy, float *dx, float *ds);
    /* channel shuffle of (batch, groups * per_group, p): channel g*per_group + j of x goes to
     * channel j*groups + g of y (with add, y +=); its inverse swaps groups and per_group */
    void (*shuffle_channels)(void *ctx, int batch, int groups, int per_group, int64_t p,
                             const float *x, float *y, bool add);
    /* y[j] += the sum over r < rows of x[r*stride + j], j < m, added to y in row order */
    void (*sum_rows_add)(void *ctx, int64_t rows, int64_t m, const float *x, int64_t stride,
                         float *y);
    /* The Swin layers' steps besides their GEMMs (window_attn.c sequences them; g:
     * kernels_window.h). One sample: xw (P, D) = the windows of x (H*W, D), padding zeros. */
    void (*win_partition)(void *ctx, const ke_swin_t *g, const float *x, float *xw);
    /* the windows back: x[src(t)] = yw[t] (with add, +=) for every position t that is not
     * padding */
    void (*win_reverse)(void *ctx, const ke_swin_t *g, const float *yw, float *x, bool add);
    /* per window and head, from qkv (P, 3D: Q, K, V): p (nw, heads, N, N) = the softmax of
     * Q K^T / sqrt(dh) + the table's bias + the shift's mask; o (P, D) = p V */
    void (*win_attn_forward)(void *ctx, const ke_swin_t *g, const float *qkv,
                             const float *table, float *p, float *o);
    /* its backward from do_ (P, D): dqkv (P, 3D) overwritten, dtable added to */
    void (*win_attn_backward)(void *ctx, const ke_swin_t *g, const float *qkv, const float *p,
                              const float *do_, float *dqkv, float *dtable);
    /* patchmerge of (batch, h*w, dim): y (batch, ceil(h/2)*ceil(w/2), 4 dim) = each 2x2
     * block's four positions side by side (kernels_window.h's order), padding zeros */
    void (*patch_merge)(void *ctx, int batch, int h, int w, int dim, const float *x, float *y);
    /* dx += dy put back in place (the padding's gradient dropped) */
    void (*patch_merge_grad)(void *ctx, int batch, int h, int w, int dim, const float *dy,
                             float *dx);
} compute_layer_ops_t;

typedef struct {
    compute_kind_t kind;
    const compute_ops_t *ops;
    const compute_layer_ops_t *layers;
    void *ctx;
} compute_t;

/* Whether the backend's buffers are host memory (the CPU backend's). */
static inline bool compute_is_host(const compute_t *c) { return c->kind == COMPUTE_CPU; }

/* "cpu" or "cuda" -> kind; returns 0, or -1 for another string. */
int compute_kind_parse(const char *s, compute_kind_t *kind);
const char *compute_kind_name(compute_kind_t kind);

/* Whether a backend can run here. false with the reason in why (e.g. "built without CUDA",
 * "no CUDA device: <driver message>"). */
bool compute_available(compute_kind_t kind, char *why, size_t whylen);

/* How many devices of this kind this machine has (visible ones: CUDA_VISIBLE_DEVICES
 * applies): 1 for the CPU; 0 for CUDA with the reason in why when none can be used. */
int compute_device_count(compute_kind_t kind, char *why, size_t whylen);

/* The same, counted in a child process: this process does not initialise CUDA, which does
 * not survive a fork, so it may still fork workers that use the GPU (launch_local). Call it
 * while the process has one thread. */
int compute_device_count_apart(compute_kind_t kind, char *why, size_t whylen);

/* A backend of this kind. threads: BLAS threads for the CPU backend (0: the number of online
 * CPUs, unless OPENBLAS_NUM_THREADS is set, which then wins). Returns NULL with the reason in
 * err when the backend cannot run here. Free with compute_destroy(). */
compute_t *compute_new(compute_kind_t kind, int threads, char *err, size_t errlen);
/* The same on a chosen device: GPU number `device` modulo the visible ones (after
 * CUDA_VISIBLE_DEVICES); -1: LOCAL_RANK modulo the visible ones, as compute_new(). The CPU
 * backend ignores it. */
compute_t *compute_new_on(compute_kind_t kind, int threads, int device, char *err,
                          size_t errlen);
void compute_destroy(compute_t **cp);

/* Thin wrappers, so call sites read like BLAS calls. */
static inline float *compute_alloc_floats(compute_t *c, int64_t n)
{
    return (float *)c->ops->alloc(c->ctx, (size_t)n * sizeof(float));
}
static inline void compute_release(compute_t *c, void *p) { c->ops->release(c->ctx, p); }
static inline void compute_set_gemm_precision(compute_t *c, precision_t p)
{
    c->ops->set_gemm_precision(c->ctx, p);
}
static inline void compute_sgemm(compute_t *c, bool ta, bool tb, int m, int n, int k,
                                 float alpha, const float *a, int lda, const float *b, int ldb,
                                 float beta, float *cm, int ldc)
{
    c->ops->sgemm(c->ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cm, ldc);
}

static inline void compute_sgemm_strided(compute_t *c, bool ta, bool tb, int m, int n, int k,
                                         float alpha, const float *a, int lda, int64_t stride_a,
                                         const float *b, int ldb, int64_t stride_b, float beta,
                                         float *cm, int ldc, int64_t stride_c, int count)
{
    if (count > 1 && c->ops->sgemm_strided) {
        c->ops->sgemm_strided(c->ctx, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb,
                              stride_b, beta, cm, ldc, stride_c, count);
        return;
    }
    for (int i = 0; i < count; i++)
        c->ops->sgemm(c->ctx, ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b,
                      ldb, beta, cm + i * stride_c, ldc);
}

static inline void *compute_host_alloc(compute_t *c, size_t bytes)
{
    return c->ops->host_alloc(c->ctx, bytes);
}
static inline void compute_host_release(compute_t *c, void *p) { c->ops->host_release(c->ctx, p); }
static inline compute_event_t *compute_event_new(compute_t *c) { return c->ops->event_new(c->ctx); }
static inline void compute_event_destroy(compute_t *c, compute_event_t **ev)
{
    if (*ev) c->ops->event_destroy(c->ctx, *ev);
    *ev = NULL;
}
static inline void compute_event_record(compute_t *c, compute_event_t *ev)
{
    c->ops->event_record(c->ctx, ev);
}
static inline void compute_event_wait(compute_t *c, compute_event_t *ev)
{
    c->ops->event_wait(c->ctx, ev);
}
static inline int64_t compute_event_elapsed_ns(compute_t *c, compute_event_t *a,
                                               compute_event_t *b)
{
    return c->ops->event_elapsed_ns(c->ctx, a, b);
}
static inline void compute_download_async(compute_t *c, void *dst_host, const void *src_dev,
                                          size_t bytes, compute_event_t *done)
{
    c->ops->download_async(c->ctx, dst_host, src_dev, bytes, done);
}
static inline void compute_upload_async(compute_t *c, void *dst_dev, const void *src_host,
                                        size_t bytes, compute_event_t *done)
{
    c->ops->upload_async(c->ctx, dst_dev, src_host, bytes, done);
}
static inline void compute_order_after_copies_out(compute_t *c)
{
    c->ops->order_after_copies_out(c->ctx);
}
static inline void compute_bind_thread(compute_t *c) { c->ops->bind_thread(c->ctx); }
static inline void compute_download(compute_t *c, void *dst_host, const void *src_dev,
                                    size_t bytes)
{
    c->ops->download(c->ctx, dst_host, src_dev, bytes);
}
static inline void compute_upload(compute_t *c, void *dst_dev, const void *src_host,
                                  size_t bytes)
{
    c->ops->upload(c->ctx, dst_dev, src_host, bytes);
}

/* The CPU backend's entry points; only compute.c refers to them (and to the CUDA ones,
 * which it declares itself). */
extern const compute_ops_t compute_cpu_ops;
extern const compute_layer_ops_t compute_cpu_layer_ops;
void *compute_cpu_ctx_new(int threads);

#endif
