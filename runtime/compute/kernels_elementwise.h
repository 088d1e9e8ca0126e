/* kernels_elementwise: the layers' per-element and per-row arithmetic, written once and
 * called by both the CPU loops (compute_cpu_layers.c, seq_layers.c, compute_cpu.c) and the
 * CUDA kernels (compute_cuda_layers.cu), so that the arithmetic a GPU runs is tested on any
 * machine by the CPU tests.
 *
 * Each function is `static inline`; under nvcc KE_FN adds `__host__ __device__`. They take
 * plain values and pointers, touch no global state, and allocate nothing. The CPU results
 * are those the layers computed before these bodies existed, bit for bit (the build compiles
 * C11 without FP contraction, and the bodies keep the operations and their order). A GPU
 * differs only where nvcc contracts a*b+c into one FMA.
 */
#ifndef POSEIDON_KERNELS_ELEMENTWISE_H
#define POSEIDON_KERNELS_ELEMENTWISE_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define KE_FN static inline __host__ __device__
#else
#define KE_FN static inline
#endif

/* ---- ReLU, dropout, SGD ------------------------------------------------------------------ */

KE_FN float ke_relu(float x) { return x > 0.0f ? x : 0.0f; }
/* the gradient through a ReLU whose input was x */
KE_FN float ke_relu_grad(float x, float dy) { return x > 0.0f ? dy : 0.0f; }

/* Inverted dropout: a uniform draw u in [0,1) drops with probability ratio, else scales by
 * keep = 1/(1-ratio); the forward is x * mask, the backward dy * mask. */
KE_FN float ke_dropout_mask(double u, double ratio, float keep) { return u < ratio ? 0.0f : keep; }

/* Caffe's SGD with momentum: h = mom*h + lr*(g + wd*w); w -= h. */
KE_FN void ke_sgd(float *w, float g, float *h, float lr, float momentum, float weight_decay)
{
    float hv = momentum * *h + lr * (g + weight_decay * *w);
    *h = hv;
    *w -= hv;
}

/* ---- pooling windows (Caffe's PoolingLayer rules) ---------------------------------------- */

typedef struct {
    int h, w;          /* input plane */
    int oh, ow;        /* output plane */
    int kh, kw, sh, sw, ph, pw;
} ke_window_t;

/* The window of output (oy, ox) clipped to the image: rows [*y0, *y1), columns [*x0, *x1).
 * Returns the divisor of average pooling: the window clipped to the padded image. */
KE_FN int ke_pool_window(const ke_window_t *k, int oy, int ox, int *y0, int *y1, int *x0,
                         int *x1)
{
    int hs = oy * k->sh - k->ph, he = hs + k->kh;
    int ws = ox * k->sw - k->pw, we = ws + k->kw;
    int hp = he < k->h + k->ph ? he : k->h + k->ph;
    int wp = we < k->w + k->pw ? we : k->w + k->pw;
    *y0 = hs < 0 ? 0 : hs, *y1 = he < k->h ? he : k->h;
    *x0 = ws < 0 ? 0 : ws, *x1 = we < k->w ? we : k->w;
    return (hp - hs) * (wp - ws);
}

/* Max over the window of output (oy, ox) of plane xp; *arg: the input index (y*w + x) of the
 * first maximum, -1 for an empty window (whose output is 0). */
KE_FN float ke_pool_max_at(const float *xp, const ke_window_t *k, int oy, int ox, int *arg)
{
    int y0, y1, x0, x1;
    ke_pool_window(k, oy, ox, &y0, &y1, &x0, &x1);
    float best = -FLT_MAX;
    int a = -1;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            float v = xp[y * k->w + x];
            int gt = v > best;
            best = gt ? v : best;
            a = gt ? y * k->w + x : a;
        }
    *arg = a;
    return a >= 0 ? best : 0.0f;
}

/* Mean over the window of output (oy, ox), the divisor counting the padding. */
KE_FN float ke_pool_avg_at(const float *xp, const ke_window_t *k, int oy, int ox)
{
    int y0, y1, x0, x1;
    int size = ke_pool_window(k, oy, ox, &y0, &y1, &x0, &x1);
    float sum = 0.0f;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) sum += xp[y * k->w + x];
    return size > 0 ? sum / (float)size : 0.0f;
}

/* ---- LRN across channels (Caffe's LRNLayer) ----------------------------------------------
 * scale = k + alpha/size * sum of x^2 over the window of channels; y = x * scale^-beta. */

/* scale^-beta. beta = 0.75 (AlexNet's and GoogLeNet's LRN, Krizhevsky et al. 2012) as
 * 1 / (sqrt(s) * sqrt(sqrt(s))): three square roots cost a fraction of powf, which made LRN
 * the slowest layer of AlexNet on the CPU. scale >= k > 0, so the roots are defined. */
KE_FN float ke_lrn_pow(float scale, float beta)
{
    if (beta == 0.75f) {
        float r = sqrtf(scale);
        return 1.0f / (r * sqrtf(r));
    }
    return powf(scale, -beta);
}

/* sumsq: the sum of x^2 over the window (added in channel order, from 0); a = alpha/size */
KE_FN float ke_lrn_scale(float sumsq, float a, float k) { return k + a * sumsq; }
KE_FN float ke_lrn_out(float x, float scale, float beta) { return x * ke_lrn_pow(scale, beta); }
/* backward: the ratio dy*y/scale each channel contributes to its window's neighbours */
KE_FN float ke_lrn_ratio(float dy, float y, float scale) { return dy * y / scale; }
/* dx of one element; acc: the sum of the ratios over the channels whose window holds it;
 * coef = 2*alpha*beta/size */
KE_FN float ke_lrn_dx(float dy, float x, float scale, float beta, float coef, float acc)
{
    return dy * ke_lrn_pow(scale, beta) - coef * x * acc;
}

/* ---- batch norm, per channel ----------------------------------------------------------- */

/* From the channel's sum and sum of squares over cnt values (double): its mean and 1/std,
 * and the running averages updated (the variance's unbiased estimate, as PyTorch does). */
KE_FN void ke_bn_stats(double sum, double sq, double cnt, double eps, float momentum,
                       float *mean, float *invstd, float *run_mean, float *run_var)
{
    double m = sum / cnt, var = sq / cnt - m * m;
    if (var < 0) var = 0;
    *mean = (float)m;
    *invstd = (float)(1.0 / sqrt(var + eps));
    double unbiased = cnt > 1 ? var * cnt / (cnt - 1) : var;
    *run_mean = (1 - momentum) * *run_mean + momentum * (float)m;
    *run_var = (1 - momentum) * *run_var + momentum * (float)unbiased;
}

KE_FN float ke_bn_invstd_eval(float run_var, double eps)
{
    return (float)(1.0 / sqrt((double)run_var + eps));
}
KE_FN float ke_bn_xhat(float x, float mean, float invstd) { return (x - mean) * invstd; }
KE_FN float ke_bn_out(float g, float xhat, float shift) { return g * xhat + shift; }
/* training dx; k = g*invstd/cnt, and the channel's sums dbeta = sum dy, dg = sum dy*xhat */
KE_FN float ke_bn_dx_train(float k, float cnt, float dy, float dbeta, float xhat, float dg)
{
    return k * (cnt * dy - dbeta - xhat * dg);
}

/* ---- softmax with cross-entropy, one row of K classes ------------------------------------ */

/* prob = softmax(x); returns -log prob[label] (in double), or 0 when label < 0 (ignored). */
KE_FN double ke_softmax_xent_row(const float *x, int K, int label, float *prob)
{
    float mx = x[0];
    for (int j = 1; j < K; j++) mx = x[j] > mx ? x[j] : mx;
    double z = 0.0;
    for (int j = 0; j < K; j++) z += exp((double)x[j] - mx);
    for (int j = 0; j < K; j++) prob[j] = (float)(exp((double)x[j] - mx) / z);
    if (label < 0) return 0.0;
    return -((double)x[label] - mx - log(z));
}

/* the cross-entropy's gradient at one class: scale * (prob - onehot) */
KE_FN float ke_xent_grad(float prob, int is_label, float scale)
{
    return scale * (prob - (is_label ? 1.0f : 0.0f));
}

/* dx += scale * (prob - onehot(label)); nothing for label < 0 */
KE_FN void ke_softmax_xent_grad_row(const float *prob, int K, int label, float scale, float *dx)
{
    if (label < 0) return;
    for (int j = 0; j < K; j++) dx[j] += ke_xent_grad(prob[j], j == label, scale);
}

/* ---- attention's softmax rows ------------------------------------------------------------ */

/* row[0..last] = softmax(row[0..last]) in place; row[last+1..S) = 0 (causal masking). */
KE_FN void ke_softmax_row_masked(float *row, int S, int last)
{
    float mx = row[0];
    for (int j = 1; j <= last; j++) mx = row[j] > mx ? row[j] : mx;
    double z = 0;
    for (int j = 0; j <= last; j++) z += exp((double)row[j] - mx);
    for (int j = 0; j <= last; j++) row[j] = (float)(exp((double)row[j] - mx) / z);
    for (int j = last + 1; j < S; j++) row[j] = 0.0f;
}

/* The softmax backward of one row in place: d = p * (d - sum(p*d)). */
KE_FN void ke_dsoftmax_row(const float *p, float *d, int S)
{
    double dot = 0;
    for (int j = 0; j < S; j++) dot += (double)p[j] * d[j];
    for (int j = 0; j < S; j++) d[j] = p[j] * (float)(d[j] - dot);
}

/* ---- layer norm, one token of D features -------------------------------------------------- */

KE_FN void ke_layernorm_row(const float *x, int dim, double eps, const float *g, const float *b,
                            float *out, float *xhat, float *invstd)
{
    double sum = 0, sq = 0;
    for (int d = 0; d < dim; d++) sum += x[d];
    double mean = sum / dim;
    for (int d = 0; d < dim; d++) sq += (x[d] - mean) * (x[d] - mean);
    float is = (float)(1.0 / sqrt(sq / dim + eps));
    *invstd = is;
    for (int d = 0; d < dim; d++) {
        float h = (float)(x[d] - mean) * is;
        xhat[d] = h;
        out[d] = g[d] * h + b[d];
    }
}

/* dx += invstd/D (D dxhat - sum dxhat - xhat sum(dxhat xhat)), dxhat = dy * g */
KE_FN void ke_layernorm_dx_row(const float *dy, const float *h, const float *g, float invstd,
                               int dim, float *dx)
{
    double sum_dh = 0, sum_dh_h = 0;
    for (int d = 0; d < dim; d++) {
        double dh = (double)dy[d] * g[d];
        sum_dh += dh;
        sum_dh_h += dh * h[d];
    }
    double k = (double)invstd / dim;
    for (int d = 0; d < dim; d++)
        dx[d] += (float)(k * (dim * (double)dy[d] * g[d] - sum_dh - h[d] * sum_dh_h));
}

/* ---- GELU and tanh ------------------------------------------------------------------------ */

#define KE_SQRT_2_OVER_PI 0.7978845608028654
#define KE_GELU_C 0.044715
#define KE_INV_SQRT_2PI 0.3989422804014327
#define KE_SQRT1_2 0.70710678118654752440

/* x * Phi(x) (erf), or GPT-2's 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
KE_FN float ke_gelu(float x, int tanh_approx)
{
    double v = x;
    return tanh_approx
               ? (float)(0.5 * v * (1 + tanh(KE_SQRT_2_OVER_PI * (v + KE_GELU_C * v * v * v))))
               : (float)(0.5 * v * (1 + erf(v * KE_SQRT1_2)));
}

/* dGELU/dx at x, times dy */
KE_FN float ke_gelu_grad(float x, float dy, int tanh_approx)
{
    double v = x, d;
    if (tanh_approx) {
        double u = KE_SQRT_2_OVER_PI * (v + KE_GELU_C * v * v * v);
        double t = tanh(u);
        d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * KE_SQRT_2_OVER_PI * (1 + 3 * KE_GELU_C * v * v);
    } else {
        d = 0.5 * (1 + erf(v * KE_SQRT1_2)) + v * exp(-0.5 * v * v) * KE_INV_SQRT_2PI;
    }
    return (float)(d * dy);
}

/* tanh's gradient from its output y */
KE_FN float ke_tanh_grad(float y, float dy) { return dy * (1 - y * y); }

/* ---- the activations of act (core/model.h act_t) ----------------------------------------- */

/* fn: the act_t's value, a and b its parameters (clip: lo, hi; hardsigmoid and hardswish:
 * alpha, beta). Computed in double, as GELU, so both backends round once. */
enum { KE_ACT_SIGMOID, KE_ACT_SILU, KE_ACT_HARDSIGMOID, KE_ACT_HARDSWISH, KE_ACT_CLIP };

/* sum of a[j] * b[j], j < n, in index order, accumulated in double (mul's gate gradient) */
KE_FN float ke_dot_rows(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += (double)a[j] * b[j];
    return (float)s;
}

KE_FN double ke_sigmoid(double v) { return 1 / (1 + exp(-v)); }

KE_FN float ke_act(int fn, double a, double b, float x)
{
    double v = x, h = a * v + b;
    h = h < 0 ? 0 : h > 1 ? 1 : h;
    switch (fn) {
    case KE_ACT_SIGMOID: return (float)ke_sigmoid(v);
    case KE_ACT_SILU: return (float)(v * ke_sigmoid(v));
    case KE_ACT_HARDSIGMOID: return (float)h;
    case KE_ACT_HARDSWISH: return (float)(v * h);
    default: return (float)(v < a ? a : v > b ? b : v); /* clip */
    }
}

/* the gradient through act at input x, times dy; at a kink the side PyTorch takes (a clamp
 * passes no gradient at its bounds) */
KE_FN float ke_act_grad(int fn, double a, double b, float x, float dy)
{
    double v = x, d, u = a * v + b;
    bool inside = u > 0 && u < 1;
    switch (fn) {
    case KE_ACT_SIGMOID: {
        double s = ke_sigmoid(v);
        d = s * (1 - s);
        break;
    }
    case KE_ACT_SILU: {
        double s = ke_sigmoid(v);
        d = s + v * s * (1 - s);
        break;
    }
    case KE_ACT_HARDSIGMOID: d = inside ? a : 0; break;
    case KE_ACT_HARDSWISH: d = inside ? u + v * a : u >= 1 ? 1 : 0; break;
    default: d = v > a && v < b ? 1 : 0; break; /* clip */
    }
    return (float)(d * dy);
}

#endif
