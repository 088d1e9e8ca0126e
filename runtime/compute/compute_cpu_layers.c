/* compute_cpu_layers: the CPU backend's layer operations (compute_layer_ops_t) on host
 * arrays. Each element is computed by the shared bodies of kernels_elementwise.h; the loops
 * around them keep the order that makes the inner loop contiguous (pooling and LRN walk a
 * plane at a time, batch norm a channel at a time). ReLU, dropout and the adds run on
 * core/vec.h's short vectors, whose results equal the scalar bodies bit for bit (tests:
 * test_kernels_*).
 */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "runtime/compute/compute.h"
#include "runtime/compute/kernels_elementwise.h"
#include "core/vec.h"

static void cpu_fill(void *ctx, int64_t n, float v, float *x)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) x[i] = v;
}

static void cpu_copy_rows(void *ctx, int64_t rows, int64_t count, float *dst, int64_t dst_stride,
                          const float *src, int64_t src_stride)
{
    (void)ctx;
    for (int64_t r = 0; r < rows; r++)
        memmove(dst + r * dst_stride, src + r * src_stride, (size_t)count * sizeof(float));
}

static void cpu_add_rows(void *ctx, int64_t rows, int64_t count, float *dst, int64_t dst_stride,
                         const float *src, int64_t src_stride)
{
    (void)ctx;
    for (int64_t r = 0; r < rows; r++) vec_add(dst + r * dst_stride, src + r * src_stride, count);
}

static void cpu_sum_rows(void *ctx, int64_t rows, int64_t m, const float *x, int64_t stride,
                         float *y)
{
    (void)ctx;
    memset(y, 0, (size_t)m * sizeof(float));
    for (int64_t r = 0; r < rows; r++) vec_add(y, x + r * stride, m);
}

static void cpu_bias_planes(void *ctx, int batch, int c, int64_t p, const float *b, float *y)
{
    (void)ctx;
    for (int i = 0; i < batch; i++)
        for (int ch = 0; ch < c; ch++) vec_add_scalar(y + ((int64_t)i * c + ch) * p, b[ch], p);
}

static void cpu_bias_planes_grad(void *ctx, int batch, int c, int64_t p, const float *dy,
                                 float *db)
{
    (void)ctx;
    for (int i = 0; i < batch; i++)
        for (int ch = 0; ch < c; ch++) db[ch] += vec_sum(dy + ((int64_t)i * c + ch) * p, p);
}

static void cpu_relu(void *ctx, int64_t n, const float *x, float *y)
{
    (void)ctx;
    vec_relu(y, x, n);
}

static void cpu_relu_grad_add(void *ctx, int64_t n, const float *x, const float *dy, float *dx)
{
    (void)ctx;
    vec_relu_grad_add(dx, x, dy, n);
}

static void cpu_mul(void *ctx, int64_t n, const float *x, const float *m, float *y)
{
    (void)ctx;
    vec_mul(y, x, m, n);
}

static void cpu_mul_add(void *ctx, int64_t n, const float *x, const float *m, float *y)
{
    (void)ctx;
    vec_mul_add(y, x, m, n);
}

static void cpu_add(void *ctx, int64_t n, const float *x, float *y)
{
    (void)ctx;
    vec_add(y, x, n);
}

/* ---- pooling --------------------------------------------------------------------------
 * Most windows lie wholly inside the image (all of LeNet's; all but the last row and column
 * of a ceil-rounded pool): for those the loops below skip ke_pool_window's clipping and read
 * the window with a fixed row stride, and for the common 2x2 and 3x3 windows with constant
 * bounds the compiler unrolls. Same visiting order and comparisons as ke_pool_max_at and
 * ke_pool_avg_at, so the results and argmax are identical; the border windows use those. */

/* The outputs [*lo, *hi) along one axis whose window [o*s - p, o*s - p + k) lies in [0, n). */
static void pool_inner_range(int n, int k, int s, int p, int on, int *lo, int *hi)
{
    int l = p <= 0 ? 0 : (p + s - 1) / s;
    int h = n + p - k < 0 ? 0 : (n + p - k) / s + 1;
    if (h > on) h = on;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Max over a kh x kw window at xp (row stride w) whose first element is input index base. */
static inline float pool_max_inner(const float *xp, int w, int kh, int kw, int base, int *arg)
{
    float best = -FLT_MAX;
    int a = -1;
    for (int y = 0; y < kh; y++)
        for (int x = 0; x < kw; x++) {
            /* without branches: on activations of random sign a branch here mispredicts
             * about half the time (GCC 12 at -O2 branched on the index's select) */
            float v = xp[y * w + x];
            int gt = v > best;
            best = gt ? v : best;
            a += (base + y * w + x - a) & -gt;
        }
    *arg = a;
    return a >= 0 ? best : 0.0f;
}

static inline float pool_avg_inner(const float *xp, int w, int kh, int kw)
{
    float sum = 0.0f;
    for (int y = 0; y < kh; y++)
        for (int x = 0; x < kw; x++) sum += xp[y * w + x];
    return sum / (float)(kh * kw);
}

/* Four adjacent inner windows at once, one per lane (lane j: the window at xp + j*sw), in
 * the scalar loops' order and with their comparisons, so each lane's result is theirs; four
 * independent chains instead of one serial chain of compares per output. */
static inline void pool_inner4(const float *xp, int w, int sw, int kh, int kw, int base,
                               bool avg, float *y, int *arg)
{
    const vec_f4 zero = {0, 0, 0, 0};
    vec_f4 best = {-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX}, sum = zero;
    vec_i4 a = {-1, -1, -1, -1};
    const vec_i4 lane = {0, sw, 2 * sw, 3 * sw};
    for (int yy = 0; yy < kh; yy++)
        for (int xx = 0; xx < kw; xx++) {
            const float *p = xp + yy * w + xx;
            vec_f4 v = {p[0], p[sw], p[2 * sw], p[3 * sw]};
            if (avg) {
                sum += v;
                continue;
            }
            vec_i4 gt = v > best;
            best = (vec_f4)(((vec_i4)v & gt) | ((vec_i4)best & ~gt));
            vec_i4 idx = (vec_i4){0, 0, 0, 0} + (base + yy * w + xx) + lane;
            a = (idx & gt) | (a & ~gt);
        }
    if (avg) {
        vec_store(y, sum / (float)(kh * kw));
        return;
    }
    vec_i4 found = a >= (vec_i4){0, 0, 0, 0};
    vec_store(y, (vec_f4)((vec_i4)best & found));
    memcpy(arg, &a, sizeof a);
}

/* One output row's inner windows, [lo, hi); kh and kw constant where the caller inlines it. */
static inline void pool_row_inner(const float *xp, const ke_window_t *k, int oy, int lo, int hi,
                                  bool avg, int kh, int kw, float *y, int *argmax)
{
    int iy = oy * k->sh - k->ph;
    int ox = lo;
    for (; ox + 4 <= hi; ox += 4) {
        int base = iy * k->w + ox * k->sw - k->pw;
        pool_inner4(xp + base, k->w, k->sw, kh, kw, base, avg, y + ox,
                    avg ? NULL : argmax + ox);
    }
    for (; ox < hi; ox++) {
        int base = iy * k->w + ox * k->sw - k->pw;
        if (avg) y[ox] = pool_avg_inner(xp + base, k->w, kh, kw);
        else y[ox] = pool_max_inner(xp + base, k->w, kh, kw, base, &argmax[ox]);
    }
}

/* One plane: border windows through the shared bodies, inner ones through pool_row_inner. */
static void pool_plane_forward(const float *xp, const ke_window_t *k, bool avg, float *y,
                               int *argmax)
{
    int ylo, yhi, xlo, xhi;
    pool_inner_range(k->h, k->kh, k->sh, k->ph, k->oh, &ylo, &yhi);
    pool_inner_range(k->w, k->kw, k->sw, k->pw, k->ow, &xlo, &xhi);
    for (int oy = 0; oy < k->oh; oy++) {
        float *yr = y + (int64_t)oy * k->ow;
        int *ar = avg ? NULL : argmax + (int64_t)oy * k->ow;
        bool inner_row = oy >= ylo && oy < yhi;
        int lo = inner_row ? xlo : k->ow, hi = inner_row ? xhi : k->ow;
        for (int ox = 0; ox < k->ow; ox++) {
            if (ox == lo) {
                if (k->kh == 2 && k->kw == 2) pool_row_inner(xp, k, oy, lo, hi, avg, 2, 2, yr, ar);
                else if (k->kh == 3 && k->kw == 3)
                    pool_row_inner(xp, k, oy, lo, hi, avg, 3, 3, yr, ar);
                else pool_row_inner(xp, k, oy, lo, hi, avg, k->kh, k->kw, yr, ar);
                ox = hi - 1;
                continue;
            }
            if (avg) yr[ox] = ke_pool_avg_at(xp, k, oy, ox);
            else yr[ox] = ke_pool_max_at(xp, k, oy, ox, &ar[ox]);
        }
    }
}

static void cpu_pool_forward(void *ctx, const ke_window_t *k, int64_t planes, bool avg,
                             const float *x, float *y, int *argmax)
{
    (void)ctx;
    /* a local copy: as far as the compiler knows, the stores to argmax could alias *k, so it
     * would reload the window for every output */
    const ke_window_t kw = *k;
    const int64_t in_plane = (int64_t)kw.h * kw.w, out_plane = (int64_t)kw.oh * kw.ow;
    for (int64_t pl = 0; pl < planes; pl++)
        pool_plane_forward(x + pl * in_plane, &kw, avg, y + pl * out_plane,
                           avg ? NULL : argmax + pl * out_plane);
}

/* Scatter: each output adds its gradient to the inputs it read (max: its argmax). */
static void cpu_pool_backward(void *ctx, const ke_window_t *k, int64_t planes, bool avg,
                              const float *dy, const int *argmax, float *dx)
{
    (void)ctx;
    const ke_window_t kw = *k;
    const int64_t in_plane = (int64_t)kw.h * kw.w, out_plane = (int64_t)kw.oh * kw.ow;
    if (!avg) {
        for (int64_t pl = 0; pl < planes; pl++) {
            float *dxp = dx + pl * in_plane;
            const float *dyp = dy + pl * out_plane;
            const int *ap = argmax + pl * out_plane;
            for (int64_t o = 0; o < out_plane; o++)
                if (ap[o] >= 0) dxp[ap[o]] += dyp[o];
        }
        return;
    }
    /* average: outputs in row-major order as before (overlapping windows add to dx in the
     * same order); an inner window skips the clipping */
    int ylo, yhi, xlo, xhi;
    pool_inner_range(kw.h, kw.kh, kw.sh, kw.ph, kw.oh, &ylo, &yhi);
    pool_inner_range(kw.w, kw.kw, kw.sw, kw.pw, kw.ow, &xlo, &xhi);
    for (int64_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * in_plane;
        int64_t obase = pl * out_plane;
        for (int oy = 0; oy < kw.oh; oy++)
            for (int ox = 0; ox < kw.ow; ox++) {
                int64_t o = obase + (int64_t)oy * kw.ow + ox;
                int y0, y1, x0, x1, size;
                if (oy >= ylo && oy < yhi && ox >= xlo && ox < xhi) {
                    y0 = oy * kw.sh - kw.ph, y1 = y0 + kw.kh;
                    x0 = ox * kw.sw - kw.pw, x1 = x0 + kw.kw;
                    size = kw.kh * kw.kw;
                } else {
                    size = ke_pool_window(&kw, oy, ox, &y0, &y1, &x0, &x1);
                    if (size <= 0) continue;
                }
                float g = dy[o] / (float)size;
                for (int yy = y0; yy < y1; yy++)
                    for (int xx = x0; xx < x1; xx++) dxp[yy * kw.w + xx] += g;
            }
    }
}

/* ---- LRN across channels -------------------------------------------------------------- */

static void cpu_lrn_forward(void *ctx, int batch, int C, int64_t P, int size, double alpha,
                            double beta_d, double k_d, const float *x, float *scale, float *y)
{
    (void)ctx;
    int pre = (size - 1) / 2;
    float a = (float)(alpha / size), k = (float)k_d, beta = (float)beta_d;
    for (int b = 0; b < batch; b++) {
        const float *xb = x + (int64_t)b * C * P;
        float *sc = scale + (int64_t)b * C * P, *yb = y + (int64_t)b * C * P;
        for (int c = 0; c < C; c++) {
            float *scp = sc + (int64_t)c * P;
            for (int64_t p = 0; p < P; p++) scp[p] = 0.0f;
            int lo = c - pre < 0 ? 0 : c - pre, hi = c - pre + size - 1;
            if (hi > C - 1) hi = C - 1;
            for (int cc = lo; cc <= hi; cc++) {
                const float *xp = xb + (int64_t)cc * P;
                for (int64_t p = 0; p < P; p++) scp[p] += xp[p] * xp[p];
            }
            const float *xp = xb + (int64_t)c * P;
            float *yp = yb + (int64_t)c * P;
            for (int64_t p = 0; p < P; p++) {
                scp[p] = ke_lrn_scale(scp[p], a, k);
                yp[p] = ke_lrn_out(xp[p], scp[p], beta);
            }
        }
    }
}

static void cpu_lrn_backward(void *ctx, int batch, int C, int64_t P, int size, double alpha,
                             double beta_d, const float *x, const float *scale, const float *y,
                             const float *dy, float *ratio, float *dx)
{
    (void)ctx;
    int pre = (size - 1) / 2;
    float beta = (float)beta_d, coef = (float)(2.0 * alpha * beta_d / size);
    for (int b = 0; b < batch; b++) {
        const float *xb = x + (int64_t)b * C * P, *sc = scale + (int64_t)b * C * P;
        const float *yb = y + (int64_t)b * C * P, *dyb = dy + (int64_t)b * C * P;
        float *dxb = dx + (int64_t)b * C * P;
        for (int64_t i = 0; i < (int64_t)C * P; i++) ratio[i] = ke_lrn_ratio(dyb[i], yb[i], sc[i]);
        for (int c = 0; c < C; c++) {
            /* channels c' whose window holds c: c' - pre <= c <= c' - pre + size - 1 */
            int lo = c + pre - size + 1 < 0 ? 0 : c + pre - size + 1;
            int hi = c + pre > C - 1 ? C - 1 : c + pre;
            const float *xp = xb + (int64_t)c * P, *scp = sc + (int64_t)c * P;
            const float *dyp = dyb + (int64_t)c * P;
            float *dxp = dxb + (int64_t)c * P;
            for (int64_t p = 0; p < P; p++) {
                float acc = 0.0f;
                for (int cc = lo; cc <= hi; cc++) acc += ratio[(int64_t)cc * P + p];
                dxp[p] += ke_lrn_dx(dyp[p], xp[p], scp[p], beta, coef, acc);
            }
        }
    }
}

/* ---- batch norm ----------------------------------------------------------------------- */

static void cpu_bn_forward(void *ctx, int N, int C, int64_t P, bool train, double eps,
                           float mom, const float *x, const float *g, const float *shift,
                           float *run_mean, float *run_var, float *mean_out, float *invstd_out,
                           float *xhat, float *y)
{
    (void)ctx;
    double cnt = (double)N * P;
    for (int c = 0; c < C; c++) {
        float mean, invstd;
        if (train) {
            double sum = 0.0, sq = 0.0;
            for (int b = 0; b < N; b++) {
                const float *xp = x + ((int64_t)b * C + c) * P;
                for (int64_t p = 0; p < P; p++) sum += xp[p], sq += (double)xp[p] * xp[p];
            }
            ke_bn_stats(sum, sq, cnt, eps, mom, &mean, &invstd, &run_mean[c], &run_var[c]);
            mean_out[c] = mean;
            invstd_out[c] = invstd;
        } else {
            mean = run_mean[c];
            invstd = ke_bn_invstd_eval(run_var[c], eps);
        }
        float gc = g[c], sh = shift ? shift[c] : 0.0f;
        for (int b = 0; b < N; b++) {
            int64_t base = ((int64_t)b * C + c) * P;
            for (int64_t p = 0; p < P; p++) {
                float xh = ke_bn_xhat(x[base + p], mean, invstd);
                xhat[base + p] = xh;
                y[base + p] = ke_bn_out(gc, xh, sh);
            }
        }
    }
}

static void cpu_bn_backward(void *ctx, int N, int C, int64_t P, bool train, double eps,
                            const float *g, const float *run_var, const float *invstd,
                            const float *xhat, const float *dy, float *dg, float *db, float *dx)
{
    (void)ctx;
    double cnt = (double)N * P;
    for (int c = 0; c < C; c++) {
        double sdg = 0.0, sdb = 0.0;
        for (int b = 0; b < N; b++) {
            int64_t base = ((int64_t)b * C + c) * P;
            for (int64_t p = 0; p < P; p++) {
                sdg += (double)dy[base + p] * xhat[base + p];
                sdb += dy[base + p];
            }
        }
        dg[c] = (float)sdg;
        if (db) db[c] = (float)sdb;
        if (!dx) continue;
        if (train) {
            float k = (float)(g[c] * invstd[c] / cnt);
            for (int b = 0; b < N; b++) {
                int64_t base = ((int64_t)b * C + c) * P;
                for (int64_t p = 0; p < P; p++)
                    dx[base + p] += ke_bn_dx_train(k, (float)cnt, dy[base + p], (float)sdb,
                                                   xhat[base + p], (float)sdg);
            }
        } else {
            float k = (float)(g[c] / sqrt((double)run_var[c] + eps));
            for (int b = 0; b < N; b++) {
                int64_t base = ((int64_t)b * C + c) * P;
                for (int64_t p = 0; p < P; p++) dx[base + p] += k * dy[base + p];
            }
        }
    }
}

/* ---- softmax with cross-entropy ------------------------------------------------------- */

static double cpu_softmax_xent_forward(void *ctx, int64_t rows, int k, const float *x,
                                       const int *labels, float *prob)
{
    (void)ctx;
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++)
        total += ke_softmax_xent_row(x + r * k, k, labels[r], prob + r * k);
    return total;
}

static void cpu_softmax_xent_backward(void *ctx, int64_t rows, int k, const float *prob,
                                      const int *labels, float scale, float *dx)
{
    (void)ctx;
    for (int64_t r = 0; r < rows; r++)
        ke_softmax_xent_grad_row(prob + r * k, k, labels[r], scale, dx + r * k);
}

static void cpu_softmax_rows(void *ctx, int64_t rows, int s, bool causal, float *p)
{
    (void)ctx;
    for (int64_t r = 0; r < rows; r++)
        ke_softmax_row_masked(p + r * s, s, causal ? (int)(r % s) : s - 1);
}

static void cpu_dsoftmax_rows(void *ctx, int64_t rows, int s, const float *p, float *d)
{
    (void)ctx;
    for (int64_t r = 0; r < rows; r++) ke_dsoftmax_row(p + r * s, d + r * s, s);
}

/* ---- sequences ------------------------------------------------------------------------ */

static int64_t cpu_embed_forward(void *ctx, int64_t tokens, const float *ids, const float *w,
                                 int vocab, int dim, float *out)
{
    (void)ctx;
    int64_t bad = 0;
    for (int64_t t = 0; t < tokens; t++) {
        int id = (int)ids[t];
        if (!((float)id == ids[t] && id >= 0 && id < vocab)) {
            bad++;
            continue;
        }
        memcpy(out + t * dim, w + (int64_t)id * dim, (size_t)dim * sizeof(float));
    }
    return bad;
}

static void cpu_embed_backward(void *ctx, int64_t tokens, const float *ids, const float *dout,
                               int dim, float *dw)
{
    (void)ctx;
    for (int64_t t = 0; t < tokens; t++) {
        float *row = dw + (int64_t)ids[t] * dim;
        const float *g = dout + t * dim;
        for (int d = 0; d < dim; d++) row[d] += g[d];
    }
}

static void cpu_transpose(void *ctx, int batch, int rows, int cols, const float *x, float *y,
                          bool add)
{
    (void)ctx;
    int64_t n = (int64_t)rows * cols;
    for (int b = 0; b < batch; b++)
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) {
                float v = x[b * n + (int64_t)r * cols + c];
                float *o = &y[b * n + (int64_t)c * rows + r];
                *o = add ? *o + v : v;
            }
}

static void cpu_layernorm_forward(void *ctx, int64_t tokens, int dim, double eps, const float *x,
                                  const float *g, const float *b, float *out, float *xhat,
                                  float *invstd)
{
    (void)ctx;
    for (int64_t t = 0; t < tokens; t++)
        ke_layernorm_row(x + t * dim, dim, eps, g, b, out + t * dim, xhat + t * dim, &invstd[t]);
}

static void cpu_layernorm_backward(void *ctx, int64_t tokens, int dim, const float *dout,
                                   const float *g, const float *xhat, const float *invstd,
                                   float *dg, float *db, float *dx)
{
    (void)ctx;
    memset(dg, 0, (size_t)dim * sizeof(float));
    memset(db, 0, (size_t)dim * sizeof(float));
    for (int64_t t = 0; t < tokens; t++) {
        const float *dy = dout + t * dim, *h = xhat + t * dim;
        for (int d = 0; d < dim; d++) {
            dg[d] += dy[d] * h[d];
            db[d] += dy[d];
        }
        if (dx) ke_layernorm_dx_row(dy, h, g, invstd[t], dim, dx + t * dim);
    }
}

static void cpu_gelu_forward(void *ctx, int64_t n, bool tanh_approx, const float *x, float *y)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) y[i] = ke_gelu(x[i], tanh_approx);
}

static void cpu_gelu_backward(void *ctx, int64_t n, bool tanh_approx, const float *x,
                              const float *dy, float *dx)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) dx[i] += ke_gelu_grad(x[i], dy[i], tanh_approx);
}

static void cpu_tanh_forward(void *ctx, int64_t n, const float *x, float *y)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}

static void cpu_tanh_backward(void *ctx, int64_t n, const float *y, const float *dy, float *dx)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) dx[i] += ke_tanh_grad(y[i], dy[i]);
}

static void cpu_act_forward(void *ctx, int64_t n, int fn, double a, double b, const float *x,
                            float *y)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) y[i] = ke_act(fn, a, b, x[i]);
}

static void cpu_act_backward(void *ctx, int64_t n, int fn, double a, double b, const float *x,
                             const float *dy, float *dx)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++) dx[i] += ke_act_grad(fn, a, b, x[i], dy[i]);
}

static void cpu_mul_rows(void *ctx, int64_t rows, int64_t p, const float *x, const float *s,
                         float *y)
{
    (void)ctx;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < p; j++) y[r * p + j] = x[r * p + j] * s[r];
}

static void cpu_mul_rows_grad(void *ctx, int64_t rows, int64_t p, const float *x,
                              const float *s, const float *dy, float *dx, float *ds)
{
    (void)ctx;
    for (int64_t r = 0; r < rows; r++) {
        const float *dyr = dy + r * p, *xr = x + r * p;
        if (dx)
            for (int64_t j = 0; j < p; j++) dx[r * p + j] += dyr[j] * s[r];
        if (ds) ds[r] += ke_dot_rows(dyr, xr, p);
    }
}

static void cpu_shuffle_channels(void *ctx, int batch, int groups, int per_group, int64_t p,
                                 const float *x, float *y, bool add)
{
    (void)ctx;
    int64_t c = (int64_t)groups * per_group;
    for (int b = 0; b < batch; b++)
        for (int g = 0; g < groups; g++)
            for (int j = 0; j < per_group; j++) {
                const float *src = x + (b * c + (int64_t)g * per_group + j) * p;
                float *dst = y + (b * c + (int64_t)j * groups + g) * p;
                for (int64_t q = 0; q < p; q++) dst[q] = add ? dst[q] + src[q] : src[q];
            }
}

static void cpu_sum_rows_add(void *ctx, int64_t rows, int64_t m, const float *x,
                             int64_t stride, float *y)
{
    (void)ctx;
    for (int64_t r = 0; r < rows; r++) vec_add(y, x + r * stride, m);
}

/* ---- the Swin layers (kernels_window.h) ---------------------------------------------------- */

static void cpu_win_partition(void *ctx, const ke_swin_t *g, const float *x, float *xw)
{
    (void)ctx;
    size_t row = (size_t)g->D * sizeof *xw;
    for (int64_t t = 0; t < g->P; t++) {
        int64_t s = ke_swin_src(g, t);
        if (s >= 0) memcpy(xw + t * g->D, x + s * g->D, row);
        else memset(xw + t * g->D, 0, row);
    }
}

static void cpu_win_reverse(void *ctx, const ke_swin_t *g, const float *yw, float *x, bool add)
{
    (void)ctx;
    int D = g->D;
    for (int64_t t = 0; t < g->P; t++) {
        int64_t s = ke_swin_src(g, t);
        if (s < 0) continue;
        if (add)
            for (int k = 0; k < D; k++) x[s * D + k] += yw[t * D + k];
        else memcpy(x + s * D, yw + t * D, (size_t)D * sizeof *x);
    }
}

/* The region labels of window wi's positions (kernels_window.h) into lab (N). */
static void window_labels(const ke_swin_t *g, int wi, int *lab)
{
    for (int i = 0; i < g->N; i++) lab[i] = ke_swin_label(g, (int64_t)wi * g->N + i);
}

static void cpu_win_attn_forward(void *ctx, const ke_swin_t *g, const float *qkv,
                                 const float *table, float *pr, float *o)
{
    (void)ctx;
    int N = g->N, D = g->D, dh = g->dh;
    bool masked = g->sh || g->sw;
    float scale = (float)(1.0 / sqrt((double)dh));
    int *lab = xmalloc((size_t)N * sizeof *lab);
    for (int wi = 0; wi < g->nw; wi++) {
        window_labels(g, wi, lab);
        for (int h = 0; h < g->heads; h++) {
            float *p = pr + ((int64_t)wi * g->heads + h) * N * N;
            const float *base = qkv + (int64_t)wi * N * 3 * D + h * dh;
            for (int i = 0; i < N; i++) {
                const float *q = base + (int64_t)i * 3 * D;
                float *pi = p + (int64_t)i * N;
                for (int j = 0; j < N; j++) {
                    const float *k = base + (int64_t)j * 3 * D + D;
                    float s = 0;
                    for (int e = 0; e < dh; e++) s += q[e] * k[e];
                    s = s * scale + table[(int64_t)ke_swin_rel(g, i, j) * g->heads + h];
                    if (masked && lab[i] != lab[j]) s -= 100.0f;
                    pi[j] = s;
                }
                ke_swin_softmax_row(pi, N);
                float *oi = o + ((int64_t)wi * N + i) * D + h * dh;
                memset(oi, 0, (size_t)dh * sizeof *oi);
                for (int j = 0; j < N; j++) {
                    const float *v = base + (int64_t)j * 3 * D + 2 * D;
                    for (int e = 0; e < dh; e++) oi[e] += pi[j] * v[e];
                }
            }
        }
    }
    free(lab);
}

/* One row i of one window and head: dV += P^T dO, then through the softmax (ds: a row of N)
 * into dQ, dK and the table. */
static void win_attn_row_backward(const ke_swin_t *g, int i, int h, const float *pi,
                                  const float *base, const float *doi, float *dbase,
                                  float *dtable, float *ds)
{
    int N = g->N, D = g->D, dh = g->dh;
    float scale = (float)(1.0 / sqrt((double)dh));
    for (int j = 0; j < N; j++) {
        const float *v = base + (int64_t)j * 3 * D + 2 * D;
        float *dv = dbase + (int64_t)j * 3 * D + 2 * D, dp = 0;
        for (int e = 0; e < dh; e++) {
            dp += doi[e] * v[e];
            dv[e] += pi[j] * doi[e];
        }
        ds[j] = dp;
    }
    ke_swin_dsoftmax_row(pi, ds, N);
    const float *q = base + (int64_t)i * 3 * D;
    float *dq = dbase + (int64_t)i * 3 * D;
    for (int j = 0; j < N; j++) {
        float dsj = ds[j];
        dtable[(int64_t)ke_swin_rel(g, i, j) * g->heads + h] += dsj;
        const float *k = base + (int64_t)j * 3 * D + D;
        float *dk = dbase + (int64_t)j * 3 * D + D;
        for (int e = 0; e < dh; e++) {
            dq[e] += scale * dsj * k[e];
            dk[e] += scale * dsj * q[e];
        }
    }
}

static void cpu_win_attn_backward(void *ctx, const ke_swin_t *g, const float *qkv,
                                  const float *pr, const float *dO, float *dqkv, float *dtable)
{
    (void)ctx;
    int N = g->N, D = g->D, dh = g->dh;
    memset(dqkv, 0, (size_t)(g->P * 3 * D) * sizeof *dqkv);
    float *ds = xmalloc((size_t)N * sizeof *ds);
    for (int wi = 0; wi < g->nw; wi++)
        for (int h = 0; h < g->heads; h++) {
            const float *p = pr + ((int64_t)wi * g->heads + h) * N * N;
            int64_t off = (int64_t)wi * N * 3 * D + h * dh;
            for (int i = 0; i < N; i++)
                win_attn_row_backward(g, i, h, p + (int64_t)i * N, qkv + off,
                                      dO + ((int64_t)wi * N + i) * D + h * dh, dqkv + off,
                                      dtable, ds);
        }
    free(ds);
}

/* Forward: y = the merged x (padding zeros). Backward: dx += dy put back in place (the
 * padding's gradient dropped). The same walk over the merged parts. */
static void patch_merge_walk(int batch, int H, int W, int dim, bool backward, const float *from,
                             float *to)
{
    int H2 = (H + 1) / 2, W2 = (W + 1) / 2;
    for (int bi = 0; bi < batch; bi++)
        for (int y2 = 0; y2 < H2; y2++)
            for (int x2 = 0; x2 < W2; x2++)
                for (int k = 0; k < 4; k++) {
                    int y = 2 * y2 + ke_patch_dy(k), x = 2 * x2 + ke_patch_dx(k);
                    int64_t part = (((int64_t)bi * H2 + y2) * W2 + x2) * 4 * dim + k * dim;
                    int64_t pos = (((int64_t)bi * H + y) * W + x) * dim;
                    bool inside = y < H && x < W;
                    if (backward && inside)
                        for (int e = 0; e < dim; e++) to[pos + e] += from[part + e];
                    else if (!backward && inside)
                        memcpy(to + part, from + pos, (size_t)dim * sizeof *to);
                    else if (!backward)
                        memset(to + part, 0, (size_t)dim * sizeof *to);
                }
}

static void cpu_patch_merge(void *ctx, int batch, int h, int w, int dim, const float *x,
                            float *y)
{
    (void)ctx;
    patch_merge_walk(batch, h, w, dim, false, x, y);
}

static void cpu_patch_merge_grad(void *ctx, int batch, int h, int w, int dim, const float *dy,
                                 float *dx)
{
    (void)ctx;
    patch_merge_walk(batch, h, w, dim, true, dy, dx);
}

const compute_layer_ops_t compute_cpu_layer_ops = {
    .fill = cpu_fill,
    .copy_rows = cpu_copy_rows,
    .add_rows = cpu_add_rows,
    .sum_rows = cpu_sum_rows,
    .bias_planes = cpu_bias_planes,
    .bias_planes_grad = cpu_bias_planes_grad,
    .relu = cpu_relu,
    .relu_grad_add = cpu_relu_grad_add,
    .mul = cpu_mul,
    .mul_add = cpu_mul_add,
    .add = cpu_add,
    .pool_forward = cpu_pool_forward,
    .pool_backward = cpu_pool_backward,
    .lrn_forward = cpu_lrn_forward,
    .lrn_backward = cpu_lrn_backward,
    .bn_forward = cpu_bn_forward,
    .bn_backward = cpu_bn_backward,
    .softmax_xent_forward = cpu_softmax_xent_forward,
    .softmax_xent_backward = cpu_softmax_xent_backward,
    .softmax_rows = cpu_softmax_rows,
    .dsoftmax_rows = cpu_dsoftmax_rows,
    .embed_forward = cpu_embed_forward,
    .embed_backward = cpu_embed_backward,
    .transpose = cpu_transpose,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .tanh_forward = cpu_tanh_forward,
    .tanh_backward = cpu_tanh_backward,
    .act_forward = cpu_act_forward,
    .act_backward = cpu_act_backward,
    .mul_rows = cpu_mul_rows,
    .mul_rows_grad = cpu_mul_rows_grad,
    .shuffle_channels = cpu_shuffle_channels,
    .sum_rows_add = cpu_sum_rows_add,
    .win_partition = cpu_win_partition,
    .win_reverse = cpu_win_reverse,
    .win_attn_forward = cpu_win_attn_forward,
    .win_attn_backward = cpu_win_attn_backward,
    .patch_merge = cpu_patch_merge,
    .patch_merge_grad = cpu_patch_merge_grad,
};
