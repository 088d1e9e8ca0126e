/* conv_cpu: see conv_cpu.h.
 *
 * The data gradient, dx = W^T dy scattered back by col2im in Caffe's form, is here a
 * convolution of dy, padded by kh-1-ph, with each filter flipped in both axes and the roles
 * of input and output channels swapped:
 *   dx[c][iy][ix] = sum over o, ki, kj of W[o][c][ki][kj] * dy[o][iy + ph - ki][ix + pw - kj].
 * For 5x5 filters that convolution goes to conv_wino.c like a forward pass. Otherwise it is
 * one im2col of dy and one GEMM per sample whose product is added straight into dx (beta = 1),
 * where Caffe's form writes a (C*kh*kw, P) column matrix, zeroes it first and then reads it
 * again in col2im; the GEMM has C rows and an inner dimension of O*kh*kw, the shape of a
 * forward convolution. That wins where O <= C (AlexNet's conv4 and conv5, fastest of 15 at
 * 8 samples: 21.6 vs 22.1 ms, 14.3 vs 14.6 ms) and loses where O > C (its conv3: 29.2 vs
 * 28.7 ms; LeNet's conv2 without Winograd: 20.5 vs 17.7 ms), so Caffe's form stays there.
 */
#include "runtime/compute/conv_cpu.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/vec.h"

void conv_cpu_scratch_fini(conv_cpu_scratch_t *s)
{
    conv_wino_buf_fini(&s->pad);
    conv_wino_buf_fini(&s->col);
    conv_wino_buf_fini(&s->wflip);
    conv_wino_scratch_fini(&s->wino);
}

/* The output columns ox whose input column ix = ox*sw - pw + kj lies inside [0, w):
 * [*lo, *hi). Computing the range once per row keeps the inner loops free of branches. */
static void col_range(int w, int pw, int sw, int kj, int ow, int *lo, int *hi)
{
    int first = pw - kj; /* smallest ox*sw with ix >= 0 */
    int l = first <= 0 ? 0 : (first + sw - 1) / sw;
    int last = w - 1 + pw - kj; /* largest ox*sw with ix < w */
    int h = last < 0 ? 0 : last / sw + 1;
    if (h > ow) h = ow;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* The scratch for c planes of hp x wp, zeroed. */
static float *pad_zeroed(conv_cpu_scratch_t *cs, int c, int hp, int wp)
{
    float *xp = conv_wino_buf_get(&cs->pad, (int64_t)c * hp * wp);
    memset(xp, 0, (size_t)c * hp * wp * sizeof(float));
    return xp;
}

/* Stride 1: copy the image once into a zero-padded scratch, after which every row of col is
 * oh runs of ow consecutive floats, with no border tests or zero fills. Per-run overhead is
 * what im2col costs on small images (LeNet's conv2: runs of 14 floats); measured there at
 * batch 64, 3.5 ms per batch with border tests, 1.3 ms this way. */
static void im2col_stride1(conv_cpu_scratch_t *cs, const float *x, int c, int h, int w, int kh,
                           int kw, int ph, int pw, int oh, int ow, float *col)
{
    int hp = h + 2 * ph, wp = w + 2 * pw;
    float *xp = pad_zeroed(cs, c, hp, wp);
    for (int ci = 0; ci < c; ci++)
        for (int y = 0; y < h; y++)
            memcpy(xp + ((int64_t)ci * hp + y + ph) * wp + pw, x + ((int64_t)ci * h + y) * w,
                   (size_t)w * sizeof(float));
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < kh; ki++)
            for (int kj = 0; kj < kw; kj++) {
                float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                const float *src = xp + ((int64_t)ci * hp + ki) * wp + kj;
                for (int oy = 0; oy < oh; oy++)
                    vec_copy(row + (int64_t)oy * ow, src + (int64_t)oy * wp, ow);
            }
}

/* The adjoint of im2col_stride1: accumulate into a zero-padded scratch, then add its interior
 * to x. */
static void col2im_stride1(conv_cpu_scratch_t *cs, const float *col, int c, int h, int w, int kh,
                           int kw, int ph, int pw, int oh, int ow, float *x)
{
    int hp = h + 2 * ph, wp = w + 2 * pw;
    float *xp = pad_zeroed(cs, c, hp, wp);
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < kh; ki++)
            for (int kj = 0; kj < kw; kj++) {
                const float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                float *dst = xp + ((int64_t)ci * hp + ki) * wp + kj;
                for (int oy = 0; oy < oh; oy++)
                    vec_add(dst + (int64_t)oy * wp, row + (int64_t)oy * ow, ow);
            }
    for (int ci = 0; ci < c; ci++)
        for (int y = 0; y < h; y++)
            vec_add(x + ((int64_t)ci * h + y) * w, xp + ((int64_t)ci * hp + y + ph) * wp + pw, w);
}

/* Whether the padded stride-1 path applies: every window lies inside the padded image
 * (true for the output sizes model_infer computes without ceil rounding). */
static bool stride1_fits(int h, int w, int kh, int kw, int ph, int pw, int sh, int sw, int oh,
                         int ow)
{
    return sh == 1 && sw == 1 && oh + kh - 1 <= h + 2 * ph && ow + kw - 1 <= w + 2 * pw;
}

/* Row r of col is (channel ci, kernel offset ki, kj); column is the output pixel. For each
 * row the output row oy reads input row iy = oy*sh - ph + ki: a strided copy with zero
 * fill at the borders; the general path, for strides above 1. */
void conv_cpu_im2col(conv_cpu_scratch_t *cs, const float *x, int c, int h, int w, int kh, int kw,
                     int ph, int pw, int sh, int sw, int oh, int ow, float *col)
{
    if (stride1_fits(h, w, kh, kw, ph, pw, sh, sw, oh, ow)) {
        im2col_stride1(cs, x, c, h, w, kh, kw, ph, pw, oh, ow, col);
        return;
    }
    for (int ci = 0; ci < c; ci++) {
        const float *xc = x + (int64_t)ci * h * w;
        for (int ki = 0; ki < kh; ki++) {
            for (int kj = 0; kj < kw; kj++) {
                float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                int lo, hi;
                col_range(w, pw, sw, kj, ow, &lo, &hi);
                int ix0 = kj - pw;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * sh - ph + ki;
                    float *out = row + (int64_t)oy * ow;
                    if (iy < 0 || iy >= h) {
                        memset(out, 0, (size_t)ow * sizeof(float));
                        continue;
                    }
                    const float *xr = xc + (int64_t)iy * w;
                    for (int ox = 0; ox < lo; ox++) out[ox] = 0.0f;
                    if (sw == 1 && hi > lo)
                        vec_copy(out + lo, xr + ix0 + lo, hi - lo);
                    else if (sw != 1)
                        for (int ox = lo; ox < hi; ox++) out[ox] = xr[ox * sw + ix0];
                    for (int ox = hi; ox < ow; ox++) out[ox] = 0.0f;
                }
            }
        }
    }
}

void conv_cpu_col2im(conv_cpu_scratch_t *cs, const float *col, int c, int h, int w, int kh,
                     int kw, int ph, int pw, int sh, int sw, int oh, int ow, float *x)
{
    if (stride1_fits(h, w, kh, kw, ph, pw, sh, sw, oh, ow)) {
        col2im_stride1(cs, col, c, h, w, kh, kw, ph, pw, oh, ow, x);
        return;
    }
    for (int ci = 0; ci < c; ci++) {
        float *xc = x + (int64_t)ci * h * w;
        for (int ki = 0; ki < kh; ki++) {
            for (int kj = 0; kj < kw; kj++) {
                const float *row = col + ((int64_t)(ci * kh + ki) * kw + kj) * oh * ow;
                int lo, hi;
                col_range(w, pw, sw, kj, ow, &lo, &hi);
                int ix0 = kj - pw;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * sh - ph + ki;
                    if (iy < 0 || iy >= h) continue;
                    float *xr = xc + (int64_t)iy * w;
                    const float *in = row + (int64_t)oy * ow;
                    if (sw == 1 && hi > lo)
                        vec_add(xr + ix0 + lo, in + lo, hi - lo);
                    else if (sw != 1)
                        for (int ox = lo; ox < hi; ox++) xr[ox * sw + ix0] += in[ox];
                }
            }
        }
    }
}

bool conv_cpu_forward(conv_cpu_scratch_t *cs, const ke_window_t *k, int batch, int c, int o,
                      int groups, const float *wt, const float *bias, const float *x, float *y)
{
    int cg = c / groups, og = o / groups;
    if (!conv_wino_suits(cg, k->kh, k->kw, k->sh, k->sw, k->ph, k->pw)) return false;
    int64_t hw = (int64_t)k->h * k->w, ohw = (int64_t)k->oh * k->ow;
    conv_wino_shape_t sh = {.batch = batch, .c = cg, .h = k->h, .w = k->w, .o = og,
                            .oh = k->oh, .ow = k->ow, .ph = k->ph, .pw = k->pw,
                            .x_stride = c * hw, .y_stride = o * ohw};
    for (int g = 0; g < groups; g++)
        conv_wino_run(&cs->wino, &sh, wt + (int64_t)g * og * cg * k->kh * k->kw,
                      bias ? bias + (int64_t)g * og : NULL, x + g * cg * hw, false,
                      y + g * og * ohw);
    return true;
}

bool conv_cpu_weight_grad(conv_cpu_scratch_t *cs, const ke_window_t *k, int batch, int c, int o,
                          int groups, const float *x, const float *dy, float *dw)
{
    int cg = c / groups, og = o / groups;
    if (!conv_wino_suits(cg, k->kh, k->kw, k->sh, k->sw, k->ph, k->pw)) return false;
    int64_t hw = (int64_t)k->h * k->w, ohw = (int64_t)k->oh * k->ow;
    conv_wino_shape_t sh = {.batch = batch, .c = cg, .h = k->h, .w = k->w, .o = og,
                            .oh = k->oh, .ow = k->ow, .ph = k->ph, .pw = k->pw,
                            .x_stride = c * hw, .y_stride = o * ohw};
    for (int g = 0; g < groups; g++)
        conv_wino_weight_grad(&cs->wino, &sh, x + g * cg * hw, dy + g * og * ohw,
                              dw + (int64_t)g * og * cg * k->kh * k->kw);
    return true;
}

/* Whether the data gradient is a stride-1 convolution of dy: the transposed padding
 * kh-1-ph is not negative and brings dy (oh, ow) back to (h, w). */
static bool data_grad_fits(const ke_window_t *k)
{
    return k->sh == 1 && k->sw == 1 && k->ph < k->kh && k->pw < k->kw &&
           k->oh + k->kh - 1 - 2 * k->ph == k->h && k->ow + k->kw - 1 - 2 * k->pw == k->w;
}

/* wf (groups, cg, og*kh*kw): wf[g][ci][(oi*kh + ki)*kw + kj] =
 * wt[g*og + oi][ci][kh-1-ki][kw-1-kj]; a window of kh*kw taps reversed is both axes flipped.
 * Per group, the filters of the convolution that maps dy's og channels to dx's cg. */
static void filters_flip(const float *wt, int groups, int cg, int og, int kk, float *wf)
{
    int64_t kd = (int64_t)og * kk;
    for (int g = 0; g < groups; g++)
        for (int ci = 0; ci < cg; ci++)
            for (int oi = 0; oi < og; oi++) {
                const float *src = wt + ((int64_t)(g * og + oi) * cg + ci) * kk;
                float *dst = wf + ((int64_t)g * cg + ci) * kd + (int64_t)oi * kk;
                for (int t = 0; t < kk; t++) dst[t] = src[kk - 1 - t];
            }
}

bool conv_cpu_data_grad(conv_cpu_scratch_t *cs, const ke_window_t *k, int batch, int c, int o,
                        int groups, const float *wt, const float *dy, float *dx)
{
    if (!data_grad_fits(k)) return false;
    int cg = c / groups, og = o / groups, kk = k->kh * k->kw;
    int tph = k->kh - 1 - k->ph, tpw = k->kw - 1 - k->pw; /* the transposed padding */
    bool wino = conv_wino_suits(og, k->kh, k->kw, 1, 1, tph, tpw);
    if (!wino && o > c) return false;
    int kd = og * kk; /* the inner dimension: (output channel, ki, kj) of a group */
    int64_t hw = (int64_t)k->h * k->w, ohw = (int64_t)k->oh * k->ow;
    float *wf = conv_wino_buf_get(&cs->wflip, (int64_t)c * kd);
    filters_flip(wt, groups, cg, og, kk, wf);
    if (wino) {
        conv_wino_shape_t sh = {.batch = batch, .c = og, .h = k->oh, .w = k->ow, .o = cg,
                                .oh = k->h, .ow = k->w, .ph = tph, .pw = tpw,
                                .x_stride = o * ohw, .y_stride = c * hw};
        for (int g = 0; g < groups; g++)
            conv_wino_run(&cs->wino, &sh, wf + (int64_t)g * cg * kd, NULL, dy + g * og * ohw,
                          true, dx + g * cg * hw);
        return true;
    }
    float *col = conv_wino_buf_get(&cs->col, (int64_t)kd * hw);
    for (int b = 0; b < batch; b++)
        for (int g = 0; g < groups; g++) {
            const float *dyg = dy + ((int64_t)b * o + (int64_t)g * og) * ohw;
            float *dxg = dx + ((int64_t)b * c + (int64_t)g * cg) * hw;
            conv_cpu_im2col(cs, dyg, og, k->oh, k->ow, k->kh, k->kw, tph, tpw, 1, 1, k->h, k->w,
                            col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cg, (int)hw, kd, 1.0f,
                        wf + (int64_t)g * cg * kd, kd, col, (int)hw, 1.0f, dxg, (int)hw);
        }
    return true;
}
