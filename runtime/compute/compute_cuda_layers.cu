/* compute_cuda_layers: the CUDA backend's layer operations (compute_layer_ops_t). Each
 * kernel computes its elements with the bodies of kernels_elementwise.h, the same code the
 * CPU backend runs, so the arithmetic is tested on every machine; the kernels only choose
 * which thread computes what.
 *
 * Threads: one per output element, except where one element needs a whole row (softmax,
 * layer norm: one thread per row, calling the row body) or a whole channel (batch norm and
 * the conv bias gradient: one block per channel, reduced in shared memory, in double where
 * the CPU sums in double). Backward passes that the CPU scatters (pooling) gather instead,
 * visiting the outputs in the CPU's order, so no atomics and no scheduling-dependent sums;
 * the one exception is the embedding's gradient (atomicAdd into the rows of repeated ids).
 * Every launch is followed by LAUNCH_CHECK().
 */
#include "runtime/compute/compute_cuda.h"
#include "runtime/compute/kernels_elementwise.h"

/* ---- data movement and biases ------------------------------------------------------------ */

__global__ void k_fill(int64_t n, float v, float *x)
{
    GRID_STRIDE(i, n) x[i] = v;
}

__global__ void k_rows(int64_t rows, int64_t count, float *dst, int64_t ds, const float *src,
                       int64_t ss, bool add)
{
    GRID_STRIDE(i, rows * count)
    {
        int64_t r = i / count, j = i % count;
        float v = src[r * ss + j];
        float *o = &dst[r * ds + j];
        *o = add ? *o + v : v;
    }
}

/* one thread per column, rows added in order from 0 (the CPU's order) */
__global__ void k_sum_rows(int64_t rows, int64_t m, const float *x, int64_t stride, float *y)
{
    GRID_STRIDE(j, m)
    {
        float acc = 0.0f;
        for (int64_t r = 0; r < rows; r++) acc += x[r * stride + j];
        y[j] = acc;
    }
}

__global__ void k_bias_planes(int64_t n, int c, int64_t p, const float *b, float *y)
{
    GRID_STRIDE(i, n) y[i] += b[(i / p) % c];
}

/* one block per channel */
__global__ void k_bias_planes_grad(int batch, int c, int64_t p, const float *dy, float *db)
{
    __shared__ float part[256];
    int ch = blockIdx.x;
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < (int64_t)batch * p; i += blockDim.x)
        acc += dy[((i / p) * c + ch) * p + i % p];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) db[ch] += part[0];
}

static void cu_fill(void *ctx, int64_t n, float v, float *x) { LAUNCH(k_fill, n, n, v, x); }

static void cu_copy_rows(void *ctx, int64_t rows, int64_t count, float *dst, int64_t ds,
                         const float *src, int64_t ss)
{
    LAUNCH(k_rows, rows * count, rows, count, dst, ds, src, ss, false);
}

static void cu_add_rows(void *ctx, int64_t rows, int64_t count, float *dst, int64_t ds,
                        const float *src, int64_t ss)
{
    LAUNCH(k_rows, rows * count, rows, count, dst, ds, src, ss, true);
}

static void cu_sum_rows(void *ctx, int64_t rows, int64_t m, const float *x, int64_t stride,
                        float *y)
{
    LAUNCH(k_sum_rows, m, rows, m, x, stride, y);
}

static void cu_bias_planes(void *ctx, int batch, int c, int64_t p, const float *b, float *y)
{
    int64_t n = (int64_t)batch * c * p;
    LAUNCH(k_bias_planes, n, n, c, p, b, y);
}

static void cu_bias_planes_grad(void *ctx, int batch, int c, int64_t p, const float *dy,
                                float *db)
{
    if (c == 0) return;
    k_bias_planes_grad<<<c, 256, 0, CTX->stream>>>(batch, c, p, dy, db);
    LAUNCH_CHECK();
}

/* ---- element-wise -------------------------------------------------------------------------- */

__global__ void k_relu(int64_t n, const float *x, float *y) { GRID_STRIDE(i, n) y[i] = ke_relu(x[i]); }
__global__ void k_relu_grad_add(int64_t n, const float *x, const float *dy, float *dx)
{
    GRID_STRIDE(i, n) dx[i] += ke_relu_grad(x[i], dy[i]);
}
__global__ void k_mul(int64_t n, const float *x, const float *m, float *y, bool add)
{
    GRID_STRIDE(i, n) y[i] = add ? y[i] + x[i] * m[i] : x[i] * m[i];
}
__global__ void k_add(int64_t n, const float *x, float *y) { GRID_STRIDE(i, n) y[i] += x[i]; }
__global__ void k_gelu(int64_t n, int t, const float *x, float *y)
{
    GRID_STRIDE(i, n) y[i] = ke_gelu(x[i], t);
}
__global__ void k_gelu_grad(int64_t n, int t, const float *x, const float *dy, float *dx)
{
    GRID_STRIDE(i, n) dx[i] += ke_gelu_grad(x[i], dy[i], t);
}
__global__ void k_tanh(int64_t n, const float *x, float *y) { GRID_STRIDE(i, n) y[i] = tanhf(x[i]); }
__global__ void k_tanh_grad(int64_t n, const float *y, const float *dy, float *dx)
{
    GRID_STRIDE(i, n) dx[i] += ke_tanh_grad(y[i], dy[i]);
}

static void cu_relu(void *ctx, int64_t n, const float *x, float *y) { LAUNCH(k_relu, n, n, x, y); }
static void cu_relu_grad_add(void *ctx, int64_t n, const float *x, const float *dy, float *dx)
{
    LAUNCH(k_relu_grad_add, n, n, x, dy, dx);
}
static void cu_mul(void *ctx, int64_t n, const float *x, const float *m, float *y)
{
    LAUNCH(k_mul, n, n, x, m, y, false);
}
static void cu_mul_add(void *ctx, int64_t n, const float *x, const float *m, float *y)
{
    LAUNCH(k_mul, n, n, x, m, y, true);
}
static void cu_add(void *ctx, int64_t n, const float *x, float *y) { LAUNCH(k_add, n, n, x, y); }
static void cu_gelu_forward(void *ctx, int64_t n, bool t, const float *x, float *y)
{
    LAUNCH(k_gelu, n, n, (int)t, x, y);
}
static void cu_gelu_backward(void *ctx, int64_t n, bool t, const float *x, const float *dy,
                             float *dx)
{
    LAUNCH(k_gelu_grad, n, n, (int)t, x, dy, dx);
}
static void cu_tanh_forward(void *ctx, int64_t n, const float *x, float *y)
{
    LAUNCH(k_tanh, n, n, x, y);
}
static void cu_tanh_backward(void *ctx, int64_t n, const float *y, const float *dy, float *dx)
{
    LAUNCH(k_tanh_grad, n, n, y, dy, dx);
}

/* ---- act, mul, shuffle ------------------------------------------------------------------- */

__global__ void k_act(int64_t n, int fn, double a, double b, const float *x, float *y)
{
    GRID_STRIDE(i, n) y[i] = ke_act(fn, a, b, x[i]);
}
__global__ void k_act_grad(int64_t n, int fn, double a, double b, const float *x,
                           const float *dy, float *dx)
{
    GRID_STRIDE(i, n) dx[i] += ke_act_grad(fn, a, b, x[i], dy[i]);
}
__global__ void k_mul_rows(int64_t n, int64_t p, const float *x, const float *s, float *y)
{
    GRID_STRIDE(i, n) y[i] = x[i] * s[i / p];
}
__global__ void k_mul_rows_dx(int64_t n, int64_t p, const float *s, const float *dy, float *dx)
{
    GRID_STRIDE(i, n) dx[i] += dy[i] * s[i / p];
}
/* one thread per row, summing in index order as the CPU does */
__global__ void k_mul_rows_ds(int64_t rows, int64_t p, const float *x, const float *dy,
                              float *ds)
{
    GRID_STRIDE(r, rows) ds[r] += ke_dot_rows(dy + r * p, x + r * p, p);
}
__global__ void k_shuffle(int64_t n, int groups, int per_group, int64_t p, const float *x,
                          float *y, bool add)
{
    int64_t c = (int64_t)groups * per_group;
    GRID_STRIDE(i, n)
    {
        int64_t q = i % p, ch = (i / p) % c, b = i / (p * c);
        int64_t j = ch / groups, g = ch % groups; /* y's channel j*groups + g */
        float v = x[(b * c + g * per_group + j) * p + q];
        y[i] = add ? y[i] + v : v;
    }
}

static void cu_act_forward(void *ctx, int64_t n, int fn, double a, double b, const float *x,
                           float *y)
{
    LAUNCH(k_act, n, n, fn, a, b, x, y);
}
static void cu_act_backward(void *ctx, int64_t n, int fn, double a, double b, const float *x,
                            const float *dy, float *dx)
{
    LAUNCH(k_act_grad, n, n, fn, a, b, x, dy, dx);
}
static void cu_mul_rows(void *ctx, int64_t rows, int64_t p, const float *x, const float *s,
                        float *y)
{
    int64_t n = rows * p;
    LAUNCH(k_mul_rows, n, n, p, x, s, y);
}
static void cu_mul_rows_grad(void *ctx, int64_t rows, int64_t p, const float *x,
                             const float *s, const float *dy, float *dx, float *ds)
{
    int64_t n = rows * p;
    if (dx) LAUNCH(k_mul_rows_dx, n, n, p, s, dy, dx);
    if (ds) LAUNCH(k_mul_rows_ds, rows, rows, p, x, dy, ds);
}
static void cu_shuffle_channels(void *ctx, int batch, int groups, int per_group, int64_t p,
                                const float *x, float *y, bool add)
{
    int64_t n = (int64_t)batch * groups * per_group * p;
    LAUNCH(k_shuffle, n, n, groups, per_group, p, x, y, add);
}

/* ---- pooling ------------------------------------------------------------------------------ */

__global__ void k_pool_forward(ke_window_t k, int64_t n, bool avg, const float *x, float *y,
                               int *argmax)
{
    int64_t out_plane = (int64_t)k.oh * k.ow;
    GRID_STRIDE(i, n)
    {
        int64_t pl = i / out_plane;
        int oy = (int)(i % out_plane / k.ow), ox = (int)(i % k.ow);
        const float *xp = x + pl * k.h * k.w;
        if (avg) y[i] = ke_pool_avg_at(xp, &k, oy, ox);
        else y[i] = ke_pool_max_at(xp, &k, oy, ox, &argmax[i]);
    }
}

/* Per input element: the outputs whose window holds it, in the CPU's (oy, ox) order, added
 * to dx one at a time as the CPU's scatter adds them. */
__global__ void k_pool_backward(ke_window_t k, int64_t n, bool avg, const float *dy,
                                const int *argmax, float *dx)
{
    int64_t in_plane = (int64_t)k.h * k.w, out_plane = (int64_t)k.oh * k.ow;
    GRID_STRIDE(i, n)
    {
        int64_t pl = i / in_plane;
        int idx = (int)(i % in_plane), iy = idx / k.w, ix = idx % k.w;
        int ty = iy + k.ph - k.kh + 1, tx = ix + k.pw - k.kw + 1;
        int oy0 = ty <= 0 ? 0 : (ty + k.sh - 1) / k.sh, oy1 = (iy + k.ph) / k.sh;
        int ox0 = tx <= 0 ? 0 : (tx + k.sw - 1) / k.sw, ox1 = (ix + k.pw) / k.sw;
        if (oy1 > k.oh - 1) oy1 = k.oh - 1;
        if (ox1 > k.ow - 1) ox1 = k.ow - 1;
        float v = dx[i];
        const float *dyp = dy + pl * out_plane;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                int64_t o = (int64_t)oy * k.ow + ox;
                if (!avg) {
                    if (argmax[pl * out_plane + o] == idx) v += dyp[o];
                    continue;
                }
                int y0, y1, x0, x1;
                int size = ke_pool_window(&k, oy, ox, &y0, &y1, &x0, &x1);
                if (size > 0) v += dyp[o] / (float)size;
            }
        dx[i] = v;
    }
}

static void cu_pool_forward(void *ctx, const ke_window_t *k, int64_t planes, bool avg,
                            const float *x, float *y, int *argmax)
{
    int64_t n = planes * k->oh * k->ow;
    LAUNCH(k_pool_forward, n, *k, n, avg, x, y, argmax);
}

static void cu_pool_backward(void *ctx, const ke_window_t *k, int64_t planes, bool avg,
                             const float *dy, const int *argmax, float *dx)
{
    int64_t n = planes * k->h * k->w;
    LAUNCH(k_pool_backward, n, *k, n, avg, dy, argmax, dx);
}

/* ---- LRN ----------------------------------------------------------------------------------- */

/* per element: the window's sum of squares in channel order from 0, as the CPU adds it */
__global__ void k_lrn_forward(int64_t n, int C, int64_t P, int size, float a, float k,
                              float beta, const float *x, float *scale, float *y)
{
    int pre = (size - 1) / 2;
    GRID_STRIDE(i, n)
    {
        int64_t b = i / (C * P), p = i % P;
        int c = (int)(i / P % C);
        int lo = c - pre < 0 ? 0 : c - pre, hi = c - pre + size - 1;
        if (hi > C - 1) hi = C - 1;
        float sum = 0.0f;
        for (int cc = lo; cc <= hi; cc++) {
            float v = x[(b * C + cc) * P + p];
            sum += v * v;
        }
        float sc = ke_lrn_scale(sum, a, k);
        scale[i] = sc;
        y[i] = ke_lrn_out(x[i], sc, beta);
    }
}

__global__ void k_lrn_ratio(int64_t n, const float *dy, const float *y, const float *scale,
                            float *ratio)
{
    GRID_STRIDE(i, n) ratio[i] = ke_lrn_ratio(dy[i], y[i], scale[i]);
}

__global__ void k_lrn_dx(int64_t n, int C, int64_t P, int size, float beta, float coef,
                         const float *x, const float *scale, const float *dy,
                         const float *ratio, float *dx)
{
    int pre = (size - 1) / 2;
    GRID_STRIDE(i, n)
    {
        int64_t b = i / (C * P), p = i % P;
        int c = (int)(i / P % C);
        int lo = c + pre - size + 1 < 0 ? 0 : c + pre - size + 1;
        int hi = c + pre > C - 1 ? C - 1 : c + pre;
        float acc = 0.0f;
        for (int cc = lo; cc <= hi; cc++) acc += ratio[(b * C + cc) * P + p];
        dx[i] += ke_lrn_dx(dy[i], x[i], scale[i], beta, coef, acc);
    }
}

static void cu_lrn_forward(void *ctx, int batch, int C, int64_t P, int size, double alpha,
                           double beta, double k, const float *x, float *scale, float *y)
{
    int64_t n = (int64_t)batch * C * P;
    LAUNCH(k_lrn_forward, n, n, C, P, size, (float)(alpha / size), (float)k, (float)beta, x,
           scale, y);
}

/* The ratios of the whole batch go to the context's scratch (the net's is one sample). */
static void cu_lrn_backward(void *ctx, int batch, int C, int64_t P, int size, double alpha,
                            double beta, const float *x, const float *scale, const float *y,
                            const float *dy, float *scratch, float *dx)
{
    (void)scratch;
    int64_t n = (int64_t)batch * C * P;
    if (n == 0) return;
    float *ratio = (float *)cuda_scratch(CTX, (size_t)n * sizeof(float));
    LAUNCH(k_lrn_ratio, n, n, dy, y, scale, ratio);
    LAUNCH(k_lrn_dx, n, n, C, P, size, (float)beta, (float)(2.0 * alpha * beta / size), x, scale,
           dy, ratio, dx);
}

/* ---- batch norm ---------------------------------------------------------------------------- */

/* Block reduction of two doubles; thread 0 gets the totals. */
__device__ static void block_sum2(double *a, double *b)
{
    __shared__ double sa[256], sb[256];
    sa[threadIdx.x] = *a, sb[threadIdx.x] = *b;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sa[threadIdx.x] += sa[threadIdx.x + s];
            sb[threadIdx.x] += sb[threadIdx.x + s];
        }
        __syncthreads();
    }
    *a = sa[0], *b = sb[0];
}

/* one block per channel: sum and sum of squares in double, then the statistics */
__global__ void k_bn_stats(int N, int C, int64_t P, double eps, float mom, const float *x,
                           float *run_mean, float *run_var, float *mean, float *invstd)
{
    int c = blockIdx.x;
    double sum = 0, sq = 0;
    for (int64_t i = threadIdx.x; i < (int64_t)N * P; i += blockDim.x) {
        float v = x[((i / P) * C + c) * P + i % P];
        sum += v, sq += (double)v * v;
    }
    block_sum2(&sum, &sq);
    if (threadIdx.x == 0)
        ke_bn_stats(sum, sq, (double)N * P, eps, mom, &mean[c], &invstd[c], &run_mean[c],
                    &run_var[c]);
}

__global__ void k_bn_apply(int64_t n, int C, int64_t P, bool train, double eps, const float *x,
                           const float *g, const float *shift, const float *run_mean,
                           const float *run_var, const float *mean, const float *invstd,
                           float *xhat, float *y)
{
    GRID_STRIDE(i, n)
    {
        int c = (int)(i / P % C);
        float m = train ? mean[c] : run_mean[c];
        float is = train ? invstd[c] : ke_bn_invstd_eval(run_var[c], eps);
        float xh = ke_bn_xhat(x[i], m, is);
        xhat[i] = xh;
        y[i] = ke_bn_out(g[c], xh, shift ? shift[c] : 0.0f);
    }
}

/* one block per channel: dg = sum dy*xhat, dbeta = sum dy (double); kept as floats in sums */
__global__ void k_bn_grad_sums(int N, int C, int64_t P, const float *dy, const float *xhat,
                               float *dg, float *db, float *sums)
{
    int c = blockIdx.x;
    double sdg = 0, sdb = 0;
    for (int64_t i = threadIdx.x; i < (int64_t)N * P; i += blockDim.x) {
        int64_t at = ((i / P) * C + c) * P + i % P;
        sdg += (double)dy[at] * xhat[at];
        sdb += dy[at];
    }
    block_sum2(&sdg, &sdb);
    if (threadIdx.x == 0) {
        dg[c] = (float)sdg;
        if (db) db[c] = (float)sdb;
        sums[2 * c] = (float)sdg;
        sums[2 * c + 1] = (float)sdb;
    }
}

__global__ void k_bn_dx(int64_t n, int C, int64_t P, bool train, double eps, double cnt,
                        const float *g, const float *run_var, const float *invstd,
                        const float *xhat, const float *dy, const float *sums, float *dx)
{
    GRID_STRIDE(i, n)
    {
        int c = (int)(i / P % C);
        if (train) {
            float k = (float)(g[c] * invstd[c] / cnt);
            dx[i] += ke_bn_dx_train(k, (float)cnt, dy[i], sums[2 * c + 1], xhat[i], sums[2 * c]);
        } else {
            float k = (float)(g[c] / sqrt((double)run_var[c] + eps));
            dx[i] += k * dy[i];
        }
    }
}

static void cu_bn_forward(void *ctx, int N, int C, int64_t P, bool train, double eps, float mom,
                          const float *x, const float *g, const float *shift, float *run_mean,
                          float *run_var, float *mean, float *invstd, float *xhat, float *y)
{
    if (C == 0) return;
    if (train) {
        k_bn_stats<<<C, 256, 0, CTX->stream>>>(N, C, P, eps, mom, x, run_mean, run_var, mean,
                                               invstd);
        LAUNCH_CHECK();
    }
    int64_t n = (int64_t)N * C * P;
    LAUNCH(k_bn_apply, n, n, C, P, train, eps, x, g, shift, run_mean, run_var, mean, invstd,
           xhat, y);
}

static void cu_bn_backward(void *ctx, int N, int C, int64_t P, bool train, double eps,
                           const float *g, const float *run_var, const float *invstd,
                           const float *xhat, const float *dy, float *dg, float *db, float *dx)
{
    if (C == 0) return;
    float *sums = (float *)cuda_scratch(CTX, (size_t)C * 2 * sizeof(float));
    k_bn_grad_sums<<<C, 256, 0, CTX->stream>>>(N, C, P, dy, xhat, dg, db, sums);
    LAUNCH_CHECK();
    if (!dx) return;
    int64_t n = (int64_t)N * C * P;
    LAUNCH(k_bn_dx, n, n, C, P, train, eps, (double)N * P, g, run_var, invstd, xhat, dy, sums,
           dx);
}

/* ---- softmax with cross-entropy, attention rows -------------------------------------------- */

__global__ void k_softmax_xent(int64_t rows, int k, const float *x, const int *labels,
                               float *prob, double *loss)
{
    GRID_STRIDE(r, rows) loss[r] = ke_softmax_xent_row(x + r * k, k, labels[r], prob + r * k);
}

__global__ void k_xent_grad(int64_t n, int k, const float *prob, const int *labels, float scale,
                            float *dx)
{
    GRID_STRIDE(i, n)
    {
        int label = labels[i / k];
        if (label >= 0) dx[i] += ke_xent_grad(prob[i], (int)(i % k) == label, scale);
    }
}

__global__ void k_softmax_rows(int64_t rows, int s, bool causal, float *p)
{
    GRID_STRIDE(r, rows) ke_softmax_row_masked(p + r * s, s, causal ? (int)(r % s) : s - 1);
}

__global__ void k_dsoftmax_rows(int64_t rows, int s, const float *p, float *d)
{
    GRID_STRIDE(r, rows) ke_dsoftmax_row(p + r * s, d + r * s, s);
}

/* The per-row losses come back and are summed on the host in row order, as the CPU sums. */
static double cu_softmax_xent_forward(void *ctx, int64_t rows, int k, const float *x,
                                      const int *labels, float *prob)
{
    if (rows == 0) return 0.0;
    cuda_ctx_t *c = CTX;
    size_t bytes = (size_t)rows * sizeof(double);
    double *loss = (double *)cuda_scratch(c, bytes);
    LAUNCH(k_softmax_xent, rows, rows, k, x, labels, prob, loss);
    if (bytes > c->host_rows_bytes) {
        if (c->host_rows) CUDA_CHECK(cudaFreeHost(c->host_rows));
        CUDA_CHECK(cudaMallocHost((void **)&c->host_rows, bytes));
        c->host_rows_bytes = bytes;
    }
    CUDA_CHECK(cudaMemcpyAsync(c->host_rows, loss, bytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++) total += c->host_rows[r];
    return total;
}

static void cu_softmax_xent_backward(void *ctx, int64_t rows, int k, const float *prob,
                                     const int *labels, float scale, float *dx)
{
    int64_t n = rows * k;
    LAUNCH(k_xent_grad, n, n, k, prob, labels, scale, dx);
}

static void cu_softmax_rows(void *ctx, int64_t rows, int s, bool causal, float *p)
{
    LAUNCH(k_softmax_rows, rows, rows, s, causal, p);
}

static void cu_dsoftmax_rows(void *ctx, int64_t rows, int s, const float *p, float *d)
{
    LAUNCH(k_dsoftmax_rows, rows, rows, s, p, d);
}

/* ---- sequences ----------------------------------------------------------------------------- */

__global__ void k_embed(int64_t n, int vocab, int dim, const float *ids, const float *w,
                        float *out, unsigned long long *bad)
{
    GRID_STRIDE(i, n)
    {
        int64_t t = i / dim;
        float f = ids[t];
        int id = (int)f;
        if (!((float)id == f && id >= 0 && id < vocab)) {
            if (i % dim == 0) atomicAdd(bad, 1ULL);
            continue;
        }
        out[i] = w[(int64_t)id * dim + i % dim];
    }
}

__global__ void k_embed_grad(int64_t n, int dim, const float *ids, const float *dout, float *dw)
{
    GRID_STRIDE(i, n) atomicAdd(&dw[(int64_t)ids[i / dim] * dim + i % dim], dout[i]);
}

__global__ void k_transpose(int64_t n, int rows, int cols, const float *x, float *y, bool add)
{
    int64_t per = (int64_t)rows * cols;
    GRID_STRIDE(i, n)
    {
        /* i indexes y: sample b, y row c (of cols), column r (of rows) */
        int64_t b = i / per, at = i % per;
        int c = (int)(at / rows), r = (int)(at % rows);
        float v = x[b * per + (int64_t)r * cols + c];
        y[i] = add ? y[i] + v : v;
    }
}

__global__ void k_layernorm(int64_t tokens, int dim, double eps, const float *x, const float *g,
                            const float *b, float *out, float *xhat, float *invstd)
{
    GRID_STRIDE(t, tokens)
    ke_layernorm_row(x + t * dim, dim, eps, g, b, out + t * dim, xhat + t * dim, &invstd[t]);
}

/* one thread per feature, tokens in order (the CPU's order) */
__global__ void k_layernorm_param_grad(int64_t tokens, int dim, const float *dout,
                                       const float *xhat, float *dg, float *db)
{
    GRID_STRIDE(d, dim)
    {
        float sg = 0.0f, sb = 0.0f;
        for (int64_t t = 0; t < tokens; t++) {
            sg += dout[t * dim + d] * xhat[t * dim + d];
            sb += dout[t * dim + d];
        }
        dg[d] = sg;
        db[d] = sb;
    }
}

__global__ void k_layernorm_dx(int64_t tokens, int dim, const float *dout, const float *g,
                               const float *xhat, const float *invstd, float *dx)
{
    GRID_STRIDE(t, tokens)
    ke_layernorm_dx_row(dout + t * dim, xhat + t * dim, g, invstd[t], dim, dx + t * dim);
}

static int64_t cu_embed_forward(void *ctx, int64_t tokens, const float *ids, const float *w,
                                int vocab, int dim, float *out)
{
    int64_t n = tokens * dim;
    if (n == 0) return 0;
    cuda_ctx_t *c = CTX;
    unsigned long long *bad = (unsigned long long *)cuda_scratch(c, sizeof *bad), host = 0;
    CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof *bad, c->stream));
    LAUNCH(k_embed, n, n, vocab, dim, ids, w, out, bad);
    CUDA_CHECK(cudaMemcpyAsync(&host, bad, sizeof host, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return (int64_t)host;
}

static void cu_embed_backward(void *ctx, int64_t tokens, const float *ids, const float *dout,
                              int dim, float *dw)
{
    int64_t n = tokens * dim;
    LAUNCH(k_embed_grad, n, n, dim, ids, dout, dw);
}

static void cu_transpose(void *ctx, int batch, int rows, int cols, const float *x, float *y,
                         bool add)
{
    int64_t n = (int64_t)batch * rows * cols;
    LAUNCH(k_transpose, n, n, rows, cols, x, y, add);
}

static void cu_layernorm_forward(void *ctx, int64_t tokens, int dim, double eps, const float *x,
                                 const float *g, const float *b, float *out, float *xhat,
                                 float *invstd)
{
    LAUNCH(k_layernorm, tokens, tokens, dim, eps, x, g, b, out, xhat, invstd);
}

static void cu_layernorm_backward(void *ctx, int64_t tokens, int dim, const float *dout,
                                  const float *g, const float *xhat, const float *invstd,
                                  float *dg, float *db, float *dx)
{
    LAUNCH(k_layernorm_param_grad, dim, tokens, dim, dout, xhat, dg, db);
    if (dx) LAUNCH(k_layernorm_dx, tokens, tokens, dim, dout, g, xhat, invstd, dx);
}

extern "C" const compute_layer_ops_t compute_cuda_layer_ops = {
    cu_fill,
    cu_copy_rows,
    cu_add_rows,
    cu_sum_rows,
    cu_bias_planes,
    cu_bias_planes_grad,
    cu_relu,
    cu_relu_grad_add,
    cu_mul,
    cu_mul_add,
    cu_add,
    cu_pool_forward,
    cu_pool_backward,
    cu_lrn_forward,
    cu_lrn_backward,
    cu_bn_forward,
    cu_bn_backward,
    cu_softmax_xent_forward,
    cu_softmax_xent_backward,
    cu_softmax_rows,
    cu_dsoftmax_rows,
    cu_embed_forward,
    cu_embed_backward,
    cu_transpose,
    cu_layernorm_forward,
    cu_layernorm_backward,
    cu_gelu_forward,
    cu_gelu_backward,
    cu_tanh_forward,
    cu_tanh_backward,
    cu_act_forward,
    cu_act_backward,
    cu_mul_rows,
    cu_mul_rows_grad,
    cu_shuffle_channels,
    cu_sum_rows_add,
    cu_win_partition,
    cu_win_reverse,
    cu_win_attn_forward,
    cu_win_attn_backward,
    cu_patch_merge,
    cu_patch_merge_grad,
};
