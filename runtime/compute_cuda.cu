/* compute_cuda: the GPU backend on cuBLAS, with im2col, col2im and the SGD update also
 * expressed as cuBLAS calls. Exports plain C; compute.c is the only caller.
 *
 * Every CUDA runtime call goes through CUDA_CHECK and every cuBLAS call through CUBLAS_CHECK:
 * on failure they print file:line, the library's message and a hint, then exit 1. Row-major
 * products are computed as the column-major product of the transposes: C^T = B^T A^T.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "runtime/compute.h"
}

#define CUDA_CHECK(call)                                                                   \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr,                                                                \
                    "%s:%d: CUDA error: %s (%s)\n  hint: check nvidia-smi, the driver "    \
                    "version and CUDA_VISIBLE_DEVICES; use --device cpu to run without a " \
                    "GPU\n",                                                               \
                    __FILE__, __LINE__, cudaGetErrorString(e_), #call);                    \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define CUBLAS_CHECK(call)                                                                 \
    do {                                                                                   \
        cublasStatus_t s_ = (call);                                                        \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
            fprintf(stderr,                                                                \
                    "%s:%d: cuBLAS error %d (%s)\n  hint: a bad leading dimension or an "  \
                    "out-of-memory device; rerun with CUDA_LAUNCH_BLOCKING=1\n",           \
                    __FILE__, __LINE__, (int)s_, #call);                                   \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

typedef struct {
    cublasHandle_t blas;
} cuda_ctx_t;

extern "C" int compute_cuda_device_count(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (why && whylen) snprintf(why, whylen, "no CUDA device: %s", cudaGetErrorString(e));
        cudaGetLastError(); /* clear the sticky error for later calls */
        return 0;
    }
    if (n == 0 && why && whylen) snprintf(why, whylen, "no CUDA device: the driver sees none");
    return n;
}

extern "C" void *compute_cuda_ctx_new(void)
{
    cuda_ctx_t *c = (cuda_ctx_t *)calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "poseidon: out of memory\n");
        exit(1);
    }
    CUDA_CHECK(cudaSetDevice(0));
    CUBLAS_CHECK(cublasCreate(&c->blas));
    return c;
}

static void cu_destroy(void *ctx)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    CUBLAS_CHECK(cublasDestroy(c->blas));
    free(c);
}

static void *cu_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemset(p, 0, bytes ? bytes : 1));
    return p;
}

static void cu_release(void *ctx, void *p)
{
    (void)ctx;
    if (p) CUDA_CHECK(cudaFree(p));
}

static void cu_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

static void cu_download(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

static void cu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

static void cu_zero(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    CUDA_CHECK(cudaMemset(p, 0, bytes));
}

static void cu_sync(void *ctx)
{
    (void)ctx;
    CUDA_CHECK(cudaDeviceSynchronize());
}

static void cu_sgemm(void *ctx, bool ta, bool tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc)
{
    cuda_ctx_t *cc = (cuda_ctx_t *)ctx;
    CUBLAS_CHECK(cublasSgemm(cc->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                             ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda,
                             &beta, c, ldc));
}

static void cu_saxpy(void *ctx, int64_t n, float alpha, const float *x, float *y)
{
    cuda_ctx_t *cc = (cuda_ctx_t *)ctx;
    while (n > 0) {
        int chunk = n > (1 << 30) ? (1 << 30) : (int)n;
        CUBLAS_CHECK(cublasSaxpy(cc->blas, chunk, &alpha, x, 1, y, 1));
        x += chunk, y += chunk, n -= chunk;
    }
}

static void cu_sscal(void *ctx, int64_t n, float alpha, float *x)
{
    cuda_ctx_t *cc = (cuda_ctx_t *)ctx;
    while (n > 0) {
        int chunk = n > (1 << 30) ? (1 << 30) : (int)n;
        CUBLAS_CHECK(cublasSscal(cc->blas, chunk, &alpha, x, 1));
        x += chunk, n -= chunk;
    }
}

/* im2col and col2im without custom kernels: one strided cuBLAS copy (or axpy) per kernel
 * offset and output row. A __global__ kernel would need one launch instead of c*kh*kw*oh,
 * but nvcc's launch stubs pull in the C++ runtime (libstdc++), which the C link of the
 * project does not carry. */
static void cu_im2col(void *ctx, const float *x, int c, int h, int w, int kh, int kw, int ph,
                      int pw, int sh, int sw, int oh, int ow, float *col)
{
    cuda_ctx_t *cc = (cuda_ctx_t *)ctx;
    CUDA_CHECK(cudaMemset(col, 0, (size_t)c * kh * kw * oh * ow * sizeof(float)));
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < kh; ki++)
            for (int kj = 0; kj < kw; kj++) {
                float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                /* output columns whose input column ox*sw - pw + kj lies in [0, w) */
                int lo = 0;
                while (lo < ow && lo * sw - pw + kj < 0) lo++;
                int hi = ow;
                while (hi > lo && (hi - 1) * sw - pw + kj >= w) hi--;
                if (hi <= lo) continue;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * sh - ph + ki;
                    if (iy < 0 || iy >= h) continue;
                    const float *src = x + ((int64_t)ci * h + iy) * w + lo * sw - pw + kj;
                    CUBLAS_CHECK(cublasScopy(cc->blas, hi - lo, src, sw,
                                             row + (int64_t)oy * ow + lo, 1));
                }
            }
}

static void cu_col2im(void *ctx, const float *col, int c, int h, int w, int kh, int kw, int ph,
                      int pw, int sh, int sw, int oh, int ow, float *x)
{
    cuda_ctx_t *cc = (cuda_ctx_t *)ctx;
    const float one = 1.0f;
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < kh; ki++)
            for (int kj = 0; kj < kw; kj++) {
                const float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                int lo = 0;
                while (lo < ow && lo * sw - pw + kj < 0) lo++;
                int hi = ow;
                while (hi > lo && (hi - 1) * sw - pw + kj >= w) hi--;
                if (hi <= lo) continue;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * sh - ph + ki;
                    if (iy < 0 || iy >= h) continue;
                    float *dst = x + ((int64_t)ci * h + iy) * w + lo * sw - pw + kj;
                    CUBLAS_CHECK(cublasSaxpy(cc->blas, hi - lo, &one,
                                             row + (int64_t)oy * ow + lo, 1, dst, sw));
                }
            }
}

/* Caffe's SGD with momentum from cuBLAS level-1 calls: h = mom*h + lr*g + lr*wd*w; w -= h. */
static void cu_sgd_update(void *ctx, int64_t n, float lr, float momentum, float weight_decay,
                          float *w, const float *g, float *h)
{
    cu_sscal(ctx, n, momentum, h);
    cu_saxpy(ctx, n, lr, g, h);
    if (weight_decay != 0.0f) cu_saxpy(ctx, n, lr * weight_decay, w, h);
    cu_saxpy(ctx, n, -1.0f, h, w);
}

extern "C" const compute_ops_t compute_cuda_ops = {
    "cuda",      cu_destroy, cu_alloc, cu_release, cu_upload,    cu_download, cu_copy,
    cu_zero,     cu_sync,    cu_sgemm, cu_saxpy,   cu_sscal,     cu_im2col,   cu_col2im,
    cu_sgd_update,
};
