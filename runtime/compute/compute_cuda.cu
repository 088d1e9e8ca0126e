/* compute_cuda: the GPU backend: GEMM and level-1 BLAS on cuBLAS, im2col, col2im and the SGD
 * update as CUDA kernels (one launch each), memory, and the messages that say why a GPU
 * cannot be used. Exports plain C; compute.c is the only caller. The layer kernels are in
 * compute_cuda_layers.cu; the checks and the context in compute_cuda.h.
 *
 * Row-major products are computed as the column-major product of the transposes:
 * C^T = B^T A^T.
 */
#include <string.h>

#include "runtime/compute/compute_cuda.h"

/* Why no GPU can be used, as one line naming the remedy: no driver, a driver older than the
 * runtime this backend was built with, or no device. Returns the number of devices. */
extern "C" int compute_cuda_device_count(char *why, size_t whylen)
{
    int n = 0, driver = 0, runtime = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0) return n;
    cudaGetLastError(); /* clear the error for later calls */
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (!why || !whylen) return 0;
    if (driver == 0)
        snprintf(why, whylen,
                 "no NVIDIA driver on this machine (%s): install the NVIDIA driver, or run "
                 "with --device cpu", cudaGetErrorString(e));
    else if (e == cudaErrorInsufficientDriver || driver < runtime)
        snprintf(why, whylen,
                 "the NVIDIA driver supports CUDA %d.%d but this build's runtime is CUDA %d.%d: "
                 "update the driver, or rebuild with an older toolkit (make NVCC=...)",
                 driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    else
        snprintf(why, whylen,
                 "no CUDA device: %s (CUDA_VISIBLE_DEVICES=%s): check nvidia-smi, or run with "
                 "--device cpu", e == cudaSuccess ? "the driver sees none" : cudaGetErrorString(e),
                 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
    return 0;
}

/* The device: `wanted` modulo the visible devices (a distributed worker's choice: its local
 * rank, or its device thread's index), or for -1 LOCAL_RANK (set by torchrun, mpirun wrappers
 * and Slurm setups that start one process per GPU) modulo the visible devices, else 0.
 * CUDA_VISIBLE_DEVICES, applied by the runtime, already narrows what is visible. */
static int choose_device(int wanted)
{
    int n = 0;
    CUDA_CHECK(cudaGetDeviceCount(&n));
    int r = wanted;
    if (r < 0) {
        const char *lr = getenv("LOCAL_RANK");
        r = lr && *lr ? atoi(lr) : 0;
    }
    return n > 0 && r > 0 ? r % n : 0;
}

extern "C" void *compute_cuda_ctx_new(int wanted)
{
    cuda_ctx_t *c = (cuda_ctx_t *)calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "poseidon: out of memory\n");
        exit(1);
    }
    c->device = choose_device(wanted);
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamCreate(&c->stream));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->copy_out, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->copy_in, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->out_fence, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->out_last, cudaEventDisableTiming));
    CUBLAS_CHECK(cublasCreate(&c->blas));
    CUBLAS_CHECK(cublasSetStream(c->blas, c->stream));
    return c;
}

/* The device's name and the runtime's version, for profiles and logs. */
extern "C" void compute_cuda_describe(void *ctx, char *out, size_t outlen)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    cudaDeviceProp p;
    int runtime = 0, driver = 0;
    CUDA_CHECK(cudaGetDeviceProperties(&p, c->device));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    snprintf(out, outlen, "%s (device %d, sm_%d%d, %.1f GiB, CUDA runtime %d.%d, driver %d.%d)",
             p.name, c->device, p.major, p.minor, p.totalGlobalMem / 1073741824.0,
             runtime / 1000, runtime % 1000 / 10, driver / 1000, driver % 1000 / 10);
}

static void cu_destroy(void *ctx)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    cuda_device_scope on(c->device);
    CUBLAS_CHECK(cublasDestroy(c->blas));
    if (c->scratch) CUDA_CHECK(cudaFree(c->scratch));
    if (c->half_a) CUDA_CHECK(cudaFree(c->half_a));
    if (c->half_b) CUDA_CHECK(cudaFree(c->half_b));
    if (c->host_rows) CUDA_CHECK(cudaFreeHost(c->host_rows));
    CUDA_CHECK(cudaStreamSynchronize(c->copy_out));
    CUDA_CHECK(cudaStreamSynchronize(c->copy_in));
    CUDA_CHECK(cudaEventDestroy(c->out_fence));
    CUDA_CHECK(cudaEventDestroy(c->out_last));
    CUDA_CHECK(cudaStreamDestroy(c->copy_out));
    CUDA_CHECK(cudaStreamDestroy(c->copy_in));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
}

void *cuda_alloc_or_die(size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        fprintf(stderr,
                "poseidon: out of GPU memory: %.1f MiB more were asked for, %.1f of %.1f MiB "
                "are free: lower --batch (activations grow with it), or use a GPU with more "
                "memory\n",
                bytes / 1048576.0, free_b / 1048576.0, total_b / 1048576.0);
        exit(1);
    }
    CUDA_CHECK(e);
    return p;
}

void *cuda_scratch(cuda_ctx_t *c, size_t bytes)
{
    if (bytes > c->scratch_bytes) {
        if (c->scratch) CUDA_CHECK(cudaFree(c->scratch));
        c->scratch = cuda_alloc_or_die(bytes);
        c->scratch_bytes = bytes;
    }
    return c->scratch;
}

static void *cu_alloc(void *ctx, size_t bytes)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    cuda_device_scope on(c->device);
    void *p = cuda_alloc_or_die(bytes);
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, c->stream));
    return p;
}

static void cu_release(void *ctx, void *p)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    if (!p) return;
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    CUDA_CHECK(cudaFree(p));
}

/* Uploads from pageable memory return once the source is staged, so the caller may reuse it. */
static void cu_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    if (!bytes) return;
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
}

static void cu_download(void *ctx, void *dst, const void *src, size_t bytes)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    if (!bytes) return;
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

static void cu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    if (!bytes || dst == src) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}

static void cu_zero(void *ctx, void *p, size_t bytes)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, c->stream));
}

static void cu_sync(void *ctx)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

/* ---- staging: pinned host memory, the copy streams, events ----------------------------
 * A distributed worker's device thread issues the copies out (after each layer's backward)
 * and its syncer threads wait for them and issue the copies in; every entry point here sets
 * the device first, since CUDA's current device is per thread. */

struct compute_event {
    cudaEvent_t e;
};

static void *cu_host_alloc(void *ctx, size_t bytes)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    void *p = NULL;
    cuda_device_scope on(c->device);
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
        fprintf(stderr, "poseidon: out of pinned host memory: %.1f MiB were asked for: lower "
                        "--batch or the staleness (each slot of a layer's gradient is pinned)\n",
                bytes / 1048576.0);
        exit(1);
    }
    CUDA_CHECK(e);
    memset(p, 0, bytes);
    return p;
}

static void cu_host_release(void *ctx, void *p)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    if (!p) return;
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaFreeHost(p));
}

/* Blocking sync: a syncer thread that waits for a copy sleeps instead of spinning on a core
 * the other threads need. Timing stays enabled for the profiler. */
static compute_event_t *cu_event_new(void *ctx)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    compute_event_t *ev = (compute_event_t *)calloc(1, sizeof *ev);
    if (!ev) {
        fprintf(stderr, "poseidon: out of memory\n");
        exit(1);
    }
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaEventCreateWithFlags(&ev->e, cudaEventBlockingSync));
    return ev;
}

static void cu_event_destroy(void *ctx, compute_event_t *ev)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaEventDestroy(ev->e));
    free(ev);
}

static void cu_event_record(void *ctx, compute_event_t *ev)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    CUDA_CHECK(cudaEventRecord(ev->e, c->stream));
}

static void cu_event_wait(void *ctx, compute_event_t *ev)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaEventSynchronize(ev->e));
}

static int64_t cu_event_elapsed_ns(void *ctx, compute_event_t *a, compute_event_t *b)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    float ms = 0;
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaEventSynchronize(b->e));
    CUDA_CHECK(cudaEventElapsedTime(&ms, a->e, b->e));
    return (int64_t)((double)ms * 1e6 + 0.5);
}

/* The copy-out stream waits (on the GPU) for the compute stream's work so far: the backward
 * that wrote src; the device thread goes on with the layers below at once. */
static void cu_download_async(void *ctx, void *dst, const void *src, size_t bytes,
                              compute_event_t *done)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    cuda_device_scope on(c->device);
    CUDA_CHECK(cudaEventRecord(c->out_fence, c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(c->copy_out, c->out_fence, 0));
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->copy_out));
    CUDA_CHECK(cudaEventRecord(c->out_last, c->copy_out));
    c->out_any = true;
    if (done) CUDA_CHECK(cudaEventRecord(done->e, c->copy_out));
}

static void cu_upload_async(void *ctx, void *dst, const void *src, size_t bytes,
                            compute_event_t *done)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    cuda_device_scope on(c->device);
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->copy_in));
    if (done) CUDA_CHECK(cudaEventRecord(done->e, c->copy_in));
}

static void cu_order_after_copies_out(void *ctx)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    if (c->out_any) CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->out_last, 0));
}

static void cu_set_gemm_precision(void *ctx, precision_t p)
{
    ((cuda_ctx_t *)ctx)->gemm_precision = p;
}

static void cu_bind_thread(void *ctx)
{
    cuda_ctx_t *c = (cuda_ctx_t *)ctx;
    CUDA_CHECK(cudaSetDevice(c->device));
}

static void cu_sgemm(void *ctx, bool ta, bool tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc)
{
    cuda_ctx_t *cc = (cuda_ctx_t *)ctx;
    if (m == 0 || n == 0) return;
    if (cc->gemm_precision != PRECISION_FP32 && k > 0) {
        cuda_gemm_half(cc, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    CUBLAS_CHECK(cublasSgemm(cc->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                             ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda,
                             &beta, c, ldc));
}

static void cu_sgemm_strided(void *ctx, bool ta, bool tb, int m, int n, int k, float alpha,
                             const float *a, int lda, int64_t stride_a, const float *b, int ldb,
                             int64_t stride_b, float beta, float *c, int ldc, int64_t stride_c,
                             int count)
{
    cuda_ctx_t *cc = (cuda_ctx_t *)ctx;
    if (m == 0 || n == 0 || count <= 0) return;
    if (cc->gemm_precision != PRECISION_FP32 && k > 0) { /* the half path, a product a call */
        for (int i = 0; i < count; i++)
            cuda_gemm_half(cc, ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b,
                           ldb, beta, c + i * stride_c, ldc);
        return;
    }
    /* row-major as cu_sgemm: column-major C^T = B^T A^T, B first */
    CUBLAS_CHECK(cublasSgemmStridedBatched(cc->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                                           ldb, stride_b, a, lda, stride_a, &beta, c, ldc,
                                           stride_c, count));
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
    ke_sgd(&w[i], g[i], &h[i], lr, momentum, weight_decay);
}

static void cu_im2col(void *ctx, const float *x, int c, int h, int w, int kh, int kw, int ph,
                      int pw, int sh, int sw, int oh, int ow, float *col)
{
    cudaStream_t st = ((cuda_ctx_t *)ctx)->stream;
    int64_t n = (int64_t)c * kh * kw * oh * ow;
    if (n == 0) return;
    k_im2col<<<blocks_for(n), s_threads, 0, st>>>(x, c, h, w, kh, kw, ph, pw, sh, sw, oh, ow, col);
    LAUNCH_CHECK();
}

static void cu_col2im(void *ctx, const float *col, int c, int h, int w, int kh, int kw, int ph,
                      int pw, int sh, int sw, int oh, int ow, float *x)
{
    cudaStream_t st = ((cuda_ctx_t *)ctx)->stream;
    int64_t n = (int64_t)c * h * w;
    if (n == 0) return;
    k_col2im<<<blocks_for(n), s_threads, 0, st>>>(col, c, h, w, kh, kw, ph, pw, sh, sw, oh, ow, x);
    LAUNCH_CHECK();
}

static void cu_sgd_update(void *ctx, int64_t n, float lr, float momentum, float weight_decay,
                          float *w, const float *g, float *h)
{
    cudaStream_t st = ((cuda_ctx_t *)ctx)->stream;
    if (n == 0) return;
    k_sgd_update<<<blocks_for(n), s_threads, 0, st>>>(n, lr, momentum, weight_decay, w, g, h);
    LAUNCH_CHECK();
}

extern "C" const compute_ops_t compute_cuda_ops = {
    "cuda",      cu_destroy, cu_alloc, cu_release, cu_upload,    cu_download, cu_copy,
    cu_zero,     cu_sync,    cu_sgemm, cu_saxpy,   cu_sscal,     cu_im2col,   cu_col2im,
    cu_sgd_update, cu_host_alloc, cu_host_release, cu_event_new, cu_event_destroy,
    cu_event_record, cu_event_wait, cu_event_elapsed_ns, cu_download_async, cu_upload_async,
    cu_order_after_copies_out, cu_bind_thread, cu_set_gemm_precision,
    NULL, NULL, NULL, /* conv_forward, conv_data_grad, conv_weight_grad: im2col and GEMM */
    cu_sgemm_strided,
};
