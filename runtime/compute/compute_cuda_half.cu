/* compute_cuda_half: the CUDA backend's matrix products at half precision (set_gemm_precision:
 * precision = bf16 or fp16, as torch.amp's autocast runs them). The operands are rounded to
 * the half format, to nearest even (what core/half.h does on the host), into two scratch
 * buffers of the context; cublasGemmEx multiplies them on the tensor cores, accumulates in
 * fp32 and writes C in fp32 (the master weights and every sum stay fp32). fp16's range ends
 * at 65504: a larger operand becomes inf and the loss scaling's verdict skips the step.
 *
 * The scratch buffers grow to the largest operands and are reused by every product of the
 * stream: kernels and GEMMs of one stream run in order, so a conversion never overwrites
 * what an earlier product still reads (and cudaFree, when a buffer grows, waits for the
 * device). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "runtime/compute/compute_cuda.h"

template <typename T> __device__ T to_half(float x);
template <> __device__ __nv_bfloat16 to_half<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}
template <> __device__ __half to_half<__half>(float x) { return __float2half_rn(x); }

/* y[i] = x[i] rounded, over the span of a matrix with its leading dimension */
template <typename T> __global__ void k_round(int64_t n, const float *x, T *y)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = to_half<T>(x[i]);
}

/* The floats a row-major matrix of rows x cols with leading dimension ld spans. */
static int64_t span_of(int rows, int cols, int ld)
{
    return rows > 0 && cols > 0 ? (int64_t)(rows - 1) * ld + cols : 0;
}

/* *buf (of *bytes) with room for n halves, grown (the contents are not kept). */
static void *half_buf(void **buf, size_t *bytes, int64_t n)
{
    size_t want = (size_t)(n > 0 ? n : 1) * 2;
    if (*bytes < want) {
        if (*buf) CUDA_CHECK(cudaFree(*buf));
        *buf = cuda_alloc_or_die(want);
        *bytes = want;
    }
    return *buf;
}

template <typename T>
static const void *rounded(cuda_ctx_t *c, void **buf, size_t *bytes, const float *x, int64_t n)
{
    T *y = (T *)half_buf(buf, bytes, n);
    if (n > 0) {
        k_round<T><<<blocks_for(n), s_threads, 0, c->stream>>>(n, x, y);
        LAUNCH_CHECK();
    }
    return y;
}

void cuda_gemm_half(cuda_ctx_t *c, bool ta, bool tb, int m, int n, int k, float alpha,
                    const float *a, int lda, const float *b, int ldb, float beta, float *cm,
                    int ldc)
{
    bool bf = c->gemm_precision == PRECISION_BF16;
    int64_t na = ta ? span_of(k, m, lda) : span_of(m, k, lda);
    int64_t nb = tb ? span_of(n, k, ldb) : span_of(k, n, ldb);
    const void *ah = bf ? rounded<__nv_bfloat16>(c, &c->half_a, &c->half_a_bytes, a, na)
                        : rounded<__half>(c, &c->half_a, &c->half_a_bytes, a, na);
    const void *bh = bf ? rounded<__nv_bfloat16>(c, &c->half_b, &c->half_b_bytes, b, nb)
                        : rounded<__half>(c, &c->half_b, &c->half_b_bytes, b, nb);
    cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_16F;
    /* row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets B first (as cu_sgemm) */
    CUBLAS_CHECK(cublasGemmEx(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, bh, t, ldb, ah,
                              t, lda, &beta, cm, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT_TENSOR_OP));
}
