/* compute: the one interface between the layers and a compute device (CPU through OpenBLAS,
 * GPU through cuBLAS). Layers, the solver and the profiler call these primitives and never a
 * BLAS or CUDA function directly, so the backend is chosen in one place: compute_new().
 *
 * Buffers: compute_alloc() returns device memory for the backend (host memory for the CPU
 * backend); compute_upload()/compute_download() move bytes between host and device. All
 * matrices are row-major, as in cblas with CblasRowMajor.
 *
 * Invariants: a compute_t is used by one thread at a time; the CPU backend never touches
 * CUDA; the CUDA backend is a separately linked shared object (libposeidon_cuda.so) that
 * only compute.c loads, on the first request for it, so nothing else maps CUDA libraries.
 */
#ifndef POSEIDON_COMPUTE_H
#define POSEIDON_COMPUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { COMPUTE_CPU, COMPUTE_CUDA } compute_kind_t;

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
} compute_ops_t;

typedef struct {
    compute_kind_t kind;
    const compute_ops_t *ops;
    void *ctx;
} compute_t;

/* "cpu" or "cuda" -> kind; returns 0, or -1 for another string. */
int compute_kind_parse(const char *s, compute_kind_t *kind);
const char *compute_kind_name(compute_kind_t kind);

/* Whether a backend can run here. false with the reason in why (e.g. "built without CUDA",
 * "no CUDA device: <driver message>"). */
bool compute_available(compute_kind_t kind, char *why, size_t whylen);

/* A backend of this kind. threads: BLAS threads for the CPU backend (0: the number of online
 * CPUs, unless OPENBLAS_NUM_THREADS is set, which then wins). Returns NULL with the reason in
 * err when the backend cannot run here. Free with compute_destroy(). */
compute_t *compute_new(compute_kind_t kind, int threads, char *err, size_t errlen);
void compute_destroy(compute_t **cp);

/* Thin wrappers, so call sites read like BLAS calls. */
static inline float *compute_alloc_floats(compute_t *c, int64_t n)
{
    return (float *)c->ops->alloc(c->ctx, (size_t)n * sizeof(float));
}
static inline void compute_release(compute_t *c, void *p) { c->ops->release(c->ctx, p); }
static inline void compute_sgemm(compute_t *c, bool ta, bool tb, int m, int n, int k,
                                 float alpha, const float *a, int lda, const float *b, int ldb,
                                 float beta, float *cm, int ldc)
{
    c->ops->sgemm(c->ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cm, ldc);
}

/* The CPU backend's entry points; only compute.c refers to them (and to the CUDA ones,
 * which it declares itself). */
extern const compute_ops_t compute_cpu_ops;
void *compute_cpu_ctx_new(int threads);

#endif
