/* compute_cuda.h: what the CUDA backend's two translation units share (compute_cuda.cu: BLAS,
 * memory, errors; compute_cuda_layers.cu: the layer kernels; compute_cuda_window.cu: the Swin
 * layers' kernels). Included by .cu files only.
 *
 * Every CUDA runtime call goes through CUDA_CHECK and every cuBLAS call through CUBLAS_CHECK:
 * on failure they print file:line, the library's message and a hint, then exit 1. Every
 * kernel launch is followed by LAUNCH_CHECK(), which checks cudaGetLastError(). Kernels run
 * on the context's stream, one thread per output element in grid-stride loops.
 */
#ifndef POSEIDON_COMPUTE_CUDA_H
#define POSEIDON_COMPUTE_CUDA_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "core/precision.h"
#include "runtime/compute/compute.h"
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

#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

/* GPU `device` current for the calling thread until the end of the scope, then the thread's
 * previous one again: the entry points that other threads call (a worker's syncers copying
 * in and out, the set-up thread allocating for several GPUs, a checkpoint reading every
 * device's state) leave the calling thread's own GPU as it was. */
struct cuda_device_scope {
    int prev;
    explicit cuda_device_scope(int device) : prev(-1)
    {
        CUDA_CHECK(cudaGetDevice(&prev));
        if (prev != device) CUDA_CHECK(cudaSetDevice(device));
    }
    ~cuda_device_scope()
    {
        int now = -1;
        if (cudaGetDevice(&now) == cudaSuccess && now != prev) cudaSetDevice(prev);
    }
};

typedef struct {
    int device;
    cublasHandle_t blas;
    cudaStream_t stream;     /* every kernel, copy and GEMM of this context */
    cudaStream_t copy_out;   /* download_async: device -> pinned host, beside the kernels */
    cudaStream_t copy_in;    /* upload_async: pinned host -> device, beside both */
    cudaEvent_t out_fence;   /* download_async: where on `stream` the copy-out starts */
    cudaEvent_t out_last;    /* the end of the last copy out issued */
    bool out_any;            /* out_last was recorded */
    void *scratch;           /* grown on demand: per-row losses, reductions, LRN ratios */
    size_t scratch_bytes;
    double *host_rows;       /* pinned: per-row losses brought back */
    size_t host_rows_bytes;
    precision_t gemm_precision; /* the products' operands (compute_cuda_half.cu): fp32 default */
    void *half_a, *half_b;   /* their rounded operands, grown on demand */
    size_t half_a_bytes, half_b_bytes;
} cuda_ctx_t;

/* C = alpha op(A) op(B) + beta C as cu_sgemm, with A and B rounded to c->gemm_precision (bf16
 * or fp16) on the tensor cores, fp32 accumulation and output (compute_cuda_half.cu). */
void cuda_gemm_half(cuda_ctx_t *c, bool ta, bool tb, int m, int n, int k, float alpha,
                    const float *a, int lda, const float *b, int ldb, float beta, float *cm,
                    int ldc);

/* Scratch of at least bytes on the device (the previous contents are lost). */
void *cuda_scratch(cuda_ctx_t *c, size_t bytes);
/* cudaMalloc that names the batch as the remedy when the device is full. */
void *cuda_alloc_or_die(size_t bytes);

/* The Swin layers' operations (compute_cuda_window.cu), for compute_cuda_layers.cu's table. */
extern "C" {
void cu_sum_rows_add(void *ctx, int64_t rows, int64_t m, const float *x, int64_t stride,
                     float *y);
void cu_win_partition(void *ctx, const ke_swin_t *g, const float *x, float *xw);
void cu_win_reverse(void *ctx, const ke_swin_t *g, const float *yw, float *x, bool add);
void cu_win_attn_forward(void *ctx, const ke_swin_t *g, const float *qkv, const float *table,
                         float *p, float *o);
void cu_win_attn_backward(void *ctx, const ke_swin_t *g, const float *qkv, const float *p,
                          const float *dO, float *dqkv, float *dtable);
void cu_patch_merge(void *ctx, int batch, int h, int w, int dim, const float *x, float *y);
void cu_patch_merge_grad(void *ctx, int batch, int h, int w, int dim, const float *dy,
                         float *dx);
}

static const int s_threads = 256;

static inline unsigned int blocks_for(int64_t n)
{
    int64_t b = (n + s_threads - 1) / s_threads;
    if (b < 1) b = 1;
    return (unsigned int)(b > 65535 ? 65535 : b);
}

#define GRID_STRIDE(i, n)                                                                  \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
         i += (int64_t)blockDim.x * gridDim.x)

/* The layer operations' launch: kernel over n elements (none for n <= 0) on the stream of
 * the context `ctx` in scope, checked. */
#define CTX ((cuda_ctx_t *)ctx)
#define LAUNCH(kernel, n, ...)                                                             \
    do {                                                                                   \
        if ((n) > 0) {                                                                     \
            kernel<<<blocks_for(n), s_threads, 0, CTX->stream>>>(__VA_ARGS__);             \
            LAUNCH_CHECK();                                                                \
        }                                                                                  \
    } while (0)

#endif
