/* compute_cuda: the GPU backend: GEMM and level-1 BLAS on cuBLAS, im2col, col2im and the SGD
 * update as CUDA kernels (one launch each). Exports plain C; compute.c is the only caller.
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

/* ---- kernels ----------------------------------------------------------------------------
 * One thread per output element, grid-stride loops (so any size fits a bounded grid), no
 * atomics: col2im gathers, per image element, the column entries that read it (Caffe's
 * col2im_gpu_kernel, Jia et al. 2014), so results do not depend on scheduling. Every launch
 * is followed by CUDA_CHECK(cudaGetLastError()). */

static const int s_threads = 256;

static unsigned int blocks_for(int64_t n)
{
    int64_t b = (n + s_threads - 1) / s_threads;
    if (b < 1) b = 1;
    return (unsigned int)(b > 65535 ? 65535 : b);
}

#define GRID_STRIDE(i, n)                                                                  \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
         i += (int64_t)blockDim.x * gridDim.x)

__global__ void k_im2col(const float *x, int c, int h, int w, int kh, int kw, int ph, int pw,
                         int sh, int sw, int oh, int ow, float *col)
{
    int64_t n = (int64_t)c * kh * kw * oh * ow;
    GRID_STRIDE(i, n)
    {
        int ox = (int)(i % ow);
        int64_t t = i / ow;
        int oy = (int)(t % oh);
        t /= oh;
        int kj = (int)(t % kw);
        t /= kw;
        int ki = (int)(t % kh);
        int ci = (int)(t / kh);
        int iy = oy * sh - ph + ki, ix = ox * sw - pw + kj;
        col[i] = iy >= 0 && iy < h && ix >= 0 && ix < w ? x[((int64_t)ci * h + iy) * w + ix]
                                                        : 0.0f;
    }
}

/* x[ci, iy, ix] += sum over kernel offsets (ki, kj) whose output pixel (oy, ox) exists:
 * oy = (iy + ph - ki) / sh exactly, ox = (ix + pw - kj) / sw exactly. */
__global__ void k_col2im(const float *col, int c, int h, int w, int kh, int kw, int ph, int pw,
                         int sh, int sw, int oh, int ow, float *x)
{
    int64_t n = (int64_t)c * h * w;
    GRID_STRIDE(i, n)
    {
        int ix = (int)(i % w);
        int iy = (int)((i / w) % h);
        int ci = (int)(i / ((int64_t)w * h));
        float sum = 0.0f;
        for (int ki = 0; ki < kh; ki++) {
            int ty = iy + ph - ki;
            if (ty < 0 || ty % sh) continue;
            int oy = ty / sh;
            if (oy >= oh) continue;
            for (int kj = 0; kj < kw; kj++) {
                int tx = ix + pw - kj;
                if (tx < 0 || tx % sw) continue;
                int ox = tx / sw;
                if (ox >= ow) continue;
                sum += col[((((int64_t)ci * kh + ki) * kw + kj) * oh + oy) * ow + ox];
            }
        }
        x[i] += sum;
    }
}

/* Caffe's SGD with momentum: h = mom*h + lr*(g + wd*w); w -= h. */
__global__ void k_sgd_update(int64_t n, float lr, float momentum, float weight_decay, float *w,
                             const float *g, float *h)
{
    GRID_STRIDE(i, n)
    {
        float hv = momentum * h[i] + lr * (g[i] + weight_decay * w[i]);
        h[i] = hv;
        w[i] -= hv;
    }
}

static void cu_im2col(void *ctx, const float *x, int c, int h, int w, int kh, int kw, int ph,
                      int pw, int sh, int sw, int oh, int ow, float *col)
{
    (void)ctx;
    int64_t n = (int64_t)c * kh * kw * oh * ow;
    if (n == 0) return;
    k_im2col<<<blocks_for(n), s_threads>>>(x, c, h, w, kh, kw, ph, pw, sh, sw, oh, ow, col);
    CUDA_CHECK(cudaGetLastError());
}

static void cu_col2im(void *ctx, const float *col, int c, int h, int w, int kh, int kw, int ph,
                      int pw, int sh, int sw, int oh, int ow, float *x)
{
    (void)ctx;
    int64_t n = (int64_t)c * h * w;
    if (n == 0) return;
    k_col2im<<<blocks_for(n), s_threads>>>(col, c, h, w, kh, kw, ph, pw, sh, sw, oh, ow, x);
    CUDA_CHECK(cudaGetLastError());
}

static void cu_sgd_update(void *ctx, int64_t n, float lr, float momentum, float weight_decay,
                          float *w, const float *g, float *h)
{
    (void)ctx;
    if (n == 0) return;
    k_sgd_update<<<blocks_for(n), s_threads>>>(n, lr, momentum, weight_decay, w, g, h);
    CUDA_CHECK(cudaGetLastError());
}

extern "C" const compute_ops_t compute_cuda_ops = {
    "cuda",      cu_destroy, cu_alloc, cu_release, cu_upload,    cu_download, cu_copy,
    cu_zero,     cu_sync,    cu_sgemm, cu_saxpy,   cu_sscal,     cu_im2col,   cu_col2im,
    cu_sgd_update,
};
