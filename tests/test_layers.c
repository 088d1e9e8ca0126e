/* Layer tests: every layer's forward against a naive double reference on random inputs, every
 * backward against central finite differences of that double reference, and a proof that the
 * comparison catches a corrupted value.
 *
 * The harness tests one layer `l` of a small model: it runs the net up to l, recomputes l's
 * output in double from l's inputs and parameters, then compares the gradients of
 * J = sum(out * R) (R random; for a loss layer J is the loss) with finite differences of J
 * taken through the double reference. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/model.h"
#include "core/rng.h"
#include "runtime/compute/compute.h"
#include "runtime/compute/nnet.h"
#include "runtime/compute/window_attn.h"
#include "test.h"

/* ---- comparison ------------------------------------------------------------------------ */

/* Number of elements with |got - ref| > atol + rtol |ref|; prints the worst one. */
static int compare(const char *what, const float *got, const double *ref, int64_t n,
                   double atol, double rtol)
{
    int bad = 0;
    int64_t worst = -1;
    double worst_excess = -DBL_MAX;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]), tol = atol + rtol * fabs(ref[i]);
        if (!(err <= tol)) bad++;
        double excess = isnan(err) ? DBL_MAX : err - tol;
        if (excess > worst_excess) worst_excess = excess, worst = i;
    }
    if (bad)
        fprintf(stderr, "    %s: %d of %lld elements out of tolerance; worst [%lld]: got %.9g, "
                        "ref %.9g (atol %g, rtol %g)\n",
                what, bad, (long long)n, (long long)worst, got[worst], ref[worst], atol, rtol);
    return bad;
}

/* ---- the double reference -------------------------------------------------------------- */

typedef struct {
    const model_t *m;
    const layer_t *l;
    int batch;
    const double *in[MODEL_MAX_INPUTS]; /* per input: batch x count */
    int64_t in_count[MODEL_MAX_INPUTS];
    const double *w, *b;
    const double *mask;                 /* dropout */
    const double *run_mean, *run_var;   /* batchnorm eval */
    const int *labels;
    bool train;
} ref_t;

/* act in double, from its definition (PyTorch's): sigmoid, x sigmoid(x), clamps */
static double ref_act(const layer_t *l, double v)
{
    double h = fmin(fmax(l->act_a * v + l->act_b, 0), 1);
    switch (l->act) {
    case ACT_SIGMOID: return 1 / (1 + exp(-v));
    case ACT_SILU: return v / (1 + exp(-v));
    case ACT_HARDSIGMOID: return h;
    case ACT_HARDSWISH: return v * h;
    case ACT_CLIP: return fmin(fmax(v, l->act_a), l->act_b);
    }
    return NAN;
}

/* act, mul, slice, shuffle, to_image, scale */
/* winattn in double, from torchvision's shifted_window_attention written out: pad, roll,
 * windows, Q K V, scores plus the gathered bias and the shift mask, softmax, O, projection,
 * windows back, roll back, crop. */
static void ref_winattn(const ref_t *r, double *out)
{
    const layer_t *l = r->l;
    int H = l->image_h, W = l->image_w, win = l->window, N = win * win, D = l->in_shape.c;
    int heads = l->heads, dh = D / heads;
    int pH = (H + win - 1) / win * win, pW = (W + win - 1) / win * win;
    int sh = win >= pH ? 0 : l->shift, sw = win >= pW ? 0 : l->shift;
    const double *wqkv = r->w, *wp = r->w + 3 * D * D, *table = wp + D * D;
    double *qkv = malloc((size_t)pH * pW * 3 * D * sizeof *qkv), *o = malloc((size_t)D * sizeof *o);
    double *p = malloc((size_t)N * sizeof *p);
    int *lab = malloc((size_t)pH * pW * sizeof *lab);
    for (int y = 0; y < pH; y++) /* regions of the rolled plane, as torchvision's slices */
        for (int x = 0; x < pW; x++) {
            int a = !sh ? 0 : y < pH - win ? 0 : y < pH - sh ? 1 : 2;
            int b = !sw ? 0 : x < pW - win ? 0 : x < pW - sw ? 1 : 2;
            lab[y * pW + x] = 3 * a + b;
        }
    for (int bi = 0; bi < r->batch; bi++) {
        const double *xb = r->in[0] + (int64_t)bi * H * W * D;
        for (int y = 0; y < pH; y++) /* Q K V of the rolled, padded plane */
            for (int x = 0; x < pW; x++) {
                int sy = (y + sh) % pH, sx = (x + sw) % pW;
                for (int f = 0; f < 3 * D; f++) {
                    double s = r->b ? r->b[f] : 0;
                    for (int e = 0; e < D && sy < H && sx < W; e++)
                        s += wqkv[f * D + e] * xb[((int64_t)sy * W + sx) * D + e];
                    qkv[((int64_t)y * pW + x) * 3 * D + f] = s;
                }
            }
        for (int y = 0; y < pH; y++)
            for (int x = 0; x < pW; x++) {
                int sy = (y + sh) % pH, sx = (x + sw) % pW, i = (y % win) * win + x % win;
                int y0 = y / win * win, x0 = x / win * win;
                const double *q = qkv + ((int64_t)y * pW + x) * 3 * D;
                for (int h = 0; h < heads; h++) {
                    double mx = -DBL_MAX, z = 0;
                    for (int j = 0; j < N; j++) {
                        int yj = y0 + j / win, xj = x0 + j % win;
                        const double *k = qkv + ((int64_t)yj * pW + xj) * 3 * D + D;
                        double s = 0;
                        for (int e = 0; e < dh; e++) s += q[h * dh + e] * k[h * dh + e];
                        int rel = (i / win - j / win + win - 1) * (2 * win - 1) +
                                  (i % win - j % win + win - 1);
                        s = s / sqrt((double)dh) + table[rel * heads + h];
                        if ((sh || sw) && lab[y * pW + x] != lab[yj * pW + xj]) s -= 100;
                        p[j] = s;
                        mx = s > mx ? s : mx;
                    }
                    for (int j = 0; j < N; j++) z += (p[j] = exp(p[j] - mx));
                    for (int e = 0; e < dh; e++) {
                        double s = 0;
                        for (int j = 0; j < N; j++) {
                            int yj = y0 + j / win, xj = x0 + j % win;
                            s += p[j] / z * qkv[((int64_t)yj * pW + xj) * 3 * D + 2 * D + h * dh + e];
                        }
                        o[h * dh + e] = s;
                    }
                }
                if (sy >= H || sx >= W) continue; /* padding: cropped */
                for (int f = 0; f < D; f++) {
                    double s = r->b ? r->b[3 * D + f] : 0;
                    for (int e = 0; e < D; e++) s += wp[f * D + e] * o[e];
                    out[(int64_t)bi * H * W * D + ((int64_t)sy * W + sx) * D + f] = s;
                }
            }
    }
    free(qkv);
    free(o);
    free(p);
    free(lab);
}

/* patchmerge in double: torchvision's _patch_merging_pad */
static void ref_patchmerge(const ref_t *r, double *out)
{
    const layer_t *l = r->l;
    int H = l->image_h, W = l->image_w, D = l->in_shape.c, H2 = (H + 1) / 2, W2 = (W + 1) / 2;
    const int dy[4] = {0, 1, 0, 1}, dx[4] = {0, 0, 1, 1};
    for (int bi = 0; bi < r->batch; bi++)
        for (int y = 0; y < H2; y++)
            for (int x = 0; x < W2; x++)
                for (int k = 0; k < 4; k++)
                    for (int e = 0; e < D; e++) {
                        int sy = 2 * y + dy[k], sx = 2 * x + dx[k];
                        out[(((int64_t)bi * H2 + y) * W2 + x) * 4 * D + k * D + e] =
                            sy < H && sx < W ? r->in[0][(((int64_t)bi * H + sy) * W + sx) * D + e] : 0;
                    }
}

static double ref_zoo(const ref_t *r, double *out)
{
    const layer_t *l = r->l;
    int B = r->batch;
    shape_t is = l->in_shape;
    int64_t ic = r->in_count[0], P = (int64_t)is.h * is.w, oc = shape_count(l->out_shape);
    const double *x = r->in[0];
    switch (l->type) {
    case LAYER_ACT:
        for (int64_t i = 0; i < B * ic; i++) out[i] = ref_act(l, x[i]);
        return 0;
    case LAYER_MUL: /* s per element, or per channel of each sample */
        for (int64_t i = 0; i < B * ic; i++)
            out[i] = x[i] * (r->in_count[1] == ic ? r->in[1][i] : r->in[1][i / P]);
        return 0;
    case LAYER_SLICE:
        for (int b = 0; b < B; b++)
            for (int64_t i = 0; i < oc; i++) out[b * oc + i] = x[b * ic + l->slice_from * P + i];
        return 0;
    case LAYER_TO_IMAGE: /* (p, c) -> (c, p) */
        for (int b = 0; b < B; b++)
            for (int c = 0; c < is.c; c++)
                for (int64_t p = 0; p < is.w; p++)
                    out[b * oc + c * is.w + p] = x[b * ic + p * is.c + c];
        return 0;
    case LAYER_SCALE:
        for (int64_t i = 0; i < B * ic; i++) out[i] = x[i] * r->w[(i % ic) / P];
        return 0;
    case LAYER_SHUFFLE: { /* PyTorch: view (G, C/G), transpose to (C/G, G), flatten */
        int G = l->groups, per = is.c / G;
        for (int b = 0; b < B; b++)
            for (int c = 0; c < is.c; c++)
                for (int64_t q = 0; q < P; q++)
                    out[b * ic + ((int64_t)(c % per) * G + c / per) * P + q] = x[b * ic + c * P + q];
        return 0;
    }
    case LAYER_WINATTN:
        ref_winattn(r, out);
        return 0;
    case LAYER_PATCHMERGE:
        ref_patchmerge(r, out);
        return 0;
    default:
        break;
    }
    ASSERT(0, "no reference for layer type %d", (int)l->type);
}

/* Output of the layer (batch x out_count) into out; returns the loss for a loss layer. */
static double ref_forward(const ref_t *r, double *out)
{
    const layer_t *l = r->l;
    int B = r->batch;
    shape_t is = l->in_shape, os = l->out_shape;
    int64_t ic = r->in_count[0], oc = shape_count(os);
    const double *x = r->in[0];
    switch (l->type) {
    case LAYER_CONV: {
        int G = l->groups, Cg = is.c / G, Og = l->out / G;
        for (int b = 0; b < B; b++)
            for (int o = 0; o < l->out; o++)
                for (int oy = 0; oy < os.h; oy++)
                    for (int ox = 0; ox < os.w; ox++) {
                        double s = r->b ? r->b[o] : 0.0;
                        int g = o / Og;
                        for (int ci = 0; ci < Cg; ci++)
                            for (int ki = 0; ki < l->kernel_h; ki++)
                                for (int kj = 0; kj < l->kernel_w; kj++) {
                                    int iy = oy * l->stride_h - l->pad_h + ki;
                                    int ix = ox * l->stride_w - l->pad_w + kj;
                                    if (iy < 0 || iy >= is.h || ix < 0 || ix >= is.w) continue;
                                    s += x[((int64_t)(b * is.c + g * Cg + ci) * is.h + iy) * is.w +
                                           ix] *
                                         r->w[((int64_t)(o * Cg + ci) * l->kernel_h + ki) *
                                                  l->kernel_w +
                                              kj];
                                }
                        out[((int64_t)(b * l->out + o) * os.h + oy) * os.w + ox] = s;
                    }
        return 0;
    }
    case LAYER_FC:
        for (int b = 0; b < B; b++)
            for (int j = 0; j < l->out; j++) {
                double s = r->b ? r->b[j] : 0.0;
                for (int64_t k = 0; k < ic; k++) s += x[b * ic + k] * r->w[j * ic + k];
                out[b * l->out + j] = s;
            }
        return 0;
    case LAYER_RELU:
        for (int64_t i = 0; i < B * ic; i++) out[i] = x[i] > 0 ? x[i] : 0;
        return 0;
    case LAYER_DROPOUT:
        for (int64_t i = 0; i < B * ic; i++) out[i] = r->train ? x[i] * r->mask[i] : x[i];
        return 0;
    case LAYER_POOL:
        for (int b = 0; b < B; b++)
            for (int c = 0; c < is.c; c++)
                for (int oy = 0; oy < os.h; oy++)
                    for (int ox = 0; ox < os.w; ox++) {
                        /* Caffe: avg divides by the window clipped to the padded input */
                        int hs = oy * l->stride_h - l->pad_h, ws = ox * l->stride_w - l->pad_w;
                        int he = hs + l->kernel_h, we = ws + l->kernel_w;
                        int area = ((he < is.h + l->pad_h ? he : is.h + l->pad_h) - hs) *
                                   ((we < is.w + l->pad_w ? we : is.w + l->pad_w) - ws);
                        double best = -DBL_MAX, sum = 0;
                        for (int y = hs; y < he; y++)
                            for (int xx = ws; xx < we; xx++) {
                                if (y < 0 || y >= is.h || xx < 0 || xx >= is.w) continue;
                                double v = x[((int64_t)(b * is.c + c) * is.h + y) * is.w + xx];
                                sum += v;
                                best = v > best ? v : best;
                            }
                        out[((int64_t)(b * is.c + c) * os.h + oy) * os.w + ox] =
                            l->pool == POOL_MAX ? best : sum / area;
                    }
        return 0;
    case LAYER_LRN: {
        int P = is.h * is.w, pre = (l->lrn_size - 1) / 2;
        for (int b = 0; b < B; b++)
            for (int c = 0; c < is.c; c++)
                for (int p = 0; p < P; p++) {
                    double sq = 0;
                    for (int cc = c - pre; cc < c - pre + l->lrn_size; cc++)
                        if (cc >= 0 && cc < is.c) {
                            double v = x[((int64_t)b * is.c + cc) * P + p];
                            sq += v * v;
                        }
                    double scale = l->lrn_k + l->lrn_alpha / l->lrn_size * sq;
                    int64_t i = ((int64_t)b * is.c + c) * P + p;
                    out[i] = x[i] * pow(scale, -l->lrn_beta);
                }
        return 0;
    }
    case LAYER_BATCHNORM: {
        int P = is.h * is.w;
        for (int c = 0; c < is.c; c++) {
            double mean = 0, var = 0;
            if (r->train) {
                for (int b = 0; b < B; b++)
                    for (int p = 0; p < P; p++) mean += x[((int64_t)b * is.c + c) * P + p];
                mean /= (double)B * P;
                for (int b = 0; b < B; b++)
                    for (int p = 0; p < P; p++) {
                        double d = x[((int64_t)b * is.c + c) * P + p] - mean;
                        var += d * d;
                    }
                var /= (double)B * P;
            } else {
                mean = r->run_mean[c], var = r->run_var[c];
            }
            for (int b = 0; b < B; b++)
                for (int p = 0; p < P; p++) {
                    int64_t i = ((int64_t)b * is.c + c) * P + p;
                    out[i] = r->w[c] * (x[i] - mean) / sqrt(var + l->bn_eps) + r->b[c];
                }
        }
        return 0;
    }
    case LAYER_CONCAT:
        for (int b = 0; b < B; b++) {
            int64_t off = 0;
            for (int k = 0; k < l->n_inputs; k++) {
                for (int64_t i = 0; i < r->in_count[k]; i++)
                    out[b * oc + off + i] = r->in[k][b * r->in_count[k] + i];
                off += r->in_count[k];
            }
        }
        return 0;
    case LAYER_ADD:
        for (int64_t i = 0; i < B * oc; i++) {
            out[i] = 0;
            for (int k = 0; k < l->n_inputs; k++) out[i] += r->in[k][i];
        }
        return 0;
    case LAYER_SOFTMAX_LOSS: {
        double loss = 0;
        for (int b = 0; b < B; b++) {
            double mx = -DBL_MAX, z = 0;
            for (int64_t j = 0; j < ic; j++) mx = x[b * ic + j] > mx ? x[b * ic + j] : mx;
            for (int64_t j = 0; j < ic; j++) z += exp(x[b * ic + j] - mx);
            for (int64_t j = 0; j < ic; j++) out[b * ic + j] = exp(x[b * ic + j] - mx) / z;
            loss += -(x[b * ic + r->labels[b]] - mx - log(z));
        }
        return l->loss_weight * loss / B;
    }
    case LAYER_TOKENS: return 0;
    case LAYER_EMBED:
        for (int64_t t = 0; t < (int64_t)B * is.w; t++)
            for (int d = 0; d < l->out; d++)
                out[t * l->out + d] = r->w[(int64_t)x[t] * l->out + d];
        return 0;
    case LAYER_POSEMBED:
        for (int b = 0; b < B; b++)
            for (int64_t i = 0; i < ic; i++) out[b * ic + i] = x[b * ic + i] + r->w[i];
        return 0;
    case LAYER_CLSTOKEN:
        for (int b = 0; b < B; b++)
            for (int64_t i = 0; i < oc; i++)
                out[b * oc + i] = i < is.c ? r->w[i] : x[b * ic + i - is.c];
        return 0;
    case LAYER_TO_SEQ: /* (c, p) -> (p, c) */
        for (int b = 0; b < B; b++)
            for (int c = 0; c < is.c; c++)
                for (int p = 0; p < is.h * is.w; p++)
                    out[b * oc + (int64_t)p * is.c + c] = x[b * ic + (int64_t)c * is.h * is.w + p];
        return 0;
    case LAYER_SELECT:
        for (int b = 0; b < B; b++)
            for (int c = 0; c < is.c; c++) out[b * oc + c] = x[b * ic + (int64_t)l->select_pos * is.c + c];
        return 0;
    case LAYER_LINEAR:
        for (int64_t t = 0; t < (int64_t)B * is.w; t++)
            for (int o = 0; o < l->out; o++) {
                double s = r->b ? r->b[o] : 0;
                for (int i = 0; i < is.c; i++) s += x[t * is.c + i] * r->w[(int64_t)o * is.c + i];
                out[t * l->out + o] = s;
            }
        return 0;
    case LAYER_LAYERNORM:
        for (int64_t t = 0; t < (int64_t)B * is.w; t++) {
            const double *xt = x + t * is.c;
            double mean = 0, var = 0;
            for (int d = 0; d < is.c; d++) mean += xt[d] / is.c;
            for (int d = 0; d < is.c; d++) var += (xt[d] - mean) * (xt[d] - mean) / is.c;
            for (int d = 0; d < is.c; d++)
                out[t * is.c + d] = r->w[d] * (xt[d] - mean) / sqrt(var + l->bn_eps) + r->b[d];
        }
        return 0;
    case LAYER_GELU:
        for (int64_t i = 0; i < B * ic; i++) {
            double v = x[i];
            out[i] = l->gelu_tanh
                         ? 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                         : v * 0.5 * erfc(-v / sqrt(2.0));
        }
        return 0;
    case LAYER_TANH:
        for (int64_t i = 0; i < B * ic; i++) out[i] = tanh(x[i]);
        return 0;
    case LAYER_ATTENTION: {
        int S = is.w, D = is.c, H = l->heads, dh = D / H;
        double *p = malloc((size_t)S * sizeof *p);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < S; i++) {
                    int last = l->causal ? i : S - 1;
                    double mx = -DBL_MAX, z = 0;
                    for (int j = 0; j <= last; j++) {
                        double s = 0;
                        for (int e = 0; e < dh; e++)
                            s += r->in[0][b * ic + (int64_t)i * D + h * dh + e] *
                                 r->in[1][b * ic + (int64_t)j * D + h * dh + e];
                        p[j] = s / sqrt((double)dh);
                        mx = p[j] > mx ? p[j] : mx;
                    }
                    for (int j = 0; j <= last; j++) z += (p[j] = exp(p[j] - mx));
                    for (int e = 0; e < dh; e++) {
                        double s = 0;
                        for (int j = 0; j <= last; j++)
                            s += p[j] / z * r->in[2][b * ic + (int64_t)j * D + h * dh + e];
                        out[b * ic + (int64_t)i * D + h * dh + e] = s;
                    }
                }
        free(p);
        return 0;
    }
    case LAYER_SEQ_LOSS: {
        int V = is.c;
        int64_t T = (int64_t)B * is.w;
        double loss = 0;
        for (int64_t t = 0; t < T; t++) {
            const double *xt = x + t * V;
            double mx = -DBL_MAX, z = 0;
            for (int j = 0; j < V; j++) mx = xt[j] > mx ? xt[j] : mx;
            for (int j = 0; j < V; j++) z += exp(xt[j] - mx);
            for (int j = 0; j < V; j++) out[t * V + j] = exp(xt[j] - mx) / z;
            loss += -(xt[r->labels[t]] - mx - log(z));
        }
        return l->loss_weight * loss / T;
    }
    default:
        return ref_zoo(r, out);
    }
    ASSERT(0, "no reference for layer type %d", (int)l->type);
}

/* ---- the harness ----------------------------------------------------------------------- */

typedef struct {
    int batch;
    bool train;
    double fwd_atol, bwd_atol, bwd_rtol;
    float param_lo, param_hi;
    bool corrupt_output; /* for the can-fail test */
} case_opts_t;

static double *to_double(const float *f, int64_t n)
{
    double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}

static double objective(ref_t *r, const double *R, double *out, int64_t n_out)
{
    double loss = ref_forward(r, out);
    if (layer_is_loss(r->l)) return loss;
    double j = 0;
    for (int64_t i = 0; i < n_out; i++) j += out[i] * R[i];
    return j;
}

/* FD of J with respect to v[idx] (v is one of the reference's inputs, modified in place). */
static double fd(ref_t *r, double *v, int64_t idx, const double *R, double *out, int64_t n_out)
{
    const double h = 1e-5;
    double keep = v[idx];
    v[idx] = keep + h;
    double jp = objective(r, R, out, n_out);
    v[idx] = keep - h;
    double jm = objective(r, R, out, n_out);
    v[idx] = keep;
    return (jp - jm) / (2 * h);
}

/* Checks FD on up to 48 coordinates of v, chosen at random, against the analytic grad g. */
static int check_grad(const char *what, ref_t *r, double *v, const float *g, int64_t n,
                      const double *R, double *out, int64_t n_out, rng_t *rng,
                      const case_opts_t *o)
{
    int64_t m = n < 48 ? n : 48;
    float *got = malloc((size_t)m * sizeof *got);
    double *ref = malloc((size_t)m * sizeof *ref);
    for (int64_t k = 0; k < m; k++) {
        int64_t idx = n <= 48 ? k : (int64_t)rng_uint(rng, (uint64_t)n);
        got[k] = g[idx];
        ref[k] = fd(r, v, idx, R, out, n_out);
    }
    int bad = compare(what, got, ref, m, o->bwd_atol, o->bwd_rtol);
    free(got);
    free(ref);
    return bad;
}

/* Runs the forward and backward checks for layer `lname` of the model text; returns the
 * number of failed comparisons. */
static int check_layer(const char *text, const char *lname, const case_opts_t *o, uint64_t seed)
{
    char err[512];
    model_t m;
    if (model_parse(&m, "test.net", text, strlen(text), err, sizeof err)) {
        fprintf(stderr, "    %s\n", err);
        return 1;
    }
    int li = model_find(&m, lname);
    ASSERT(li > 0, "no layer %s", lname);
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    nnet_t *n = nnet_new(&m, o->batch, c, seed, err, sizeof err);
    ASSERT(n, "%s", err);
    nnet_set_input_grad(n, true);
    nnet_set_train(n, o->train);
    rng_t *rng = rng_new(seed, 7);
    const layer_t *l = &m.layers[li];
    arena_t *a = nnet_arena(n);
    for (int64_t i = 0; i < a->count; i++)
        a->params[i] = o->param_lo + (o->param_hi - o->param_lo) * (float)rng_uniform(rng);
    for (int64_t i = 0; i < a->state_count; i++) /* BN running stats: mean, var > 0 */
        a->state[i] = 0.5f + (float)rng_uniform(rng);
    float *x0 = nnet_input(n);
    for (int64_t i = 0; i < nnet_out_count(n, 0) * o->batch; i++)
        x0[i] = m.layers[0].type == LAYER_TOKENS /* token ids */
                    ? (float)rng_uint(rng, (uint64_t)m.layers[0].vocab)
                    : (float)(2 * rng_uniform(rng) - 1);
    int64_t classes = l->type == LAYER_SOFTMAX_LOSS ? nnet_out_count(n, li)
                      : l->type == LAYER_SEQ_LOSS  ? l->in_shape.c
                                                   : 1;
    for (int b = 0; b < o->batch * nnet_label_count(n); b++)
        nnet_labels(n)[b] = (int)rng_uint(rng, (uint64_t)classes);
    for (int i = 1; i <= li; i++) nnet_forward_layer(n, i);
    nnet_set_dropout_frozen(n, true);

    ref_t r = {.m = &m, .l = l, .batch = o->batch, .labels = nnet_labels(n), .train = o->train};
    double *ins[MODEL_MAX_INPUTS] = {0};
    for (int k = 0; k < l->n_inputs; k++) {
        r.in_count[k] = nnet_out_count(n, l->inputs[k]);
        ins[k] = to_double(nnet_output(n, l->inputs[k]), r.in_count[k] * o->batch);
        r.in[k] = ins[k];
    }
    /* a tied linear's weight is its embed's matrix, and so is its gradient */
    int64_t nw = l->tied ? m.layers[l->tie_layer].weights : l->weights, nb = l->biases;
    int64_t woff = a->layer_offset[l->tied ? l->tie_layer : li];
    double *w = nw ? to_double(a->params + woff, nw) : NULL;
    double *bb = nb ? to_double(a->params + a->layer_offset[li] + nw, nb) : NULL;
    r.w = w, r.b = bb;
    double *state = to_double(a->state, a->state_count);
    r.run_mean = state + a->state_offset[li];
    r.run_var = r.run_mean + l->out_shape.c;
    int64_t n_out = nnet_out_count(n, li) * o->batch;
    double *mask = NULL;
    if (l->type == LAYER_DROPOUT) { /* the mask the net drew, read back from its output */
        mask = malloc((size_t)n_out * sizeof *mask);
        const float *y = nnet_output(n, li);
        for (int64_t i = 0; i < n_out; i++)
            mask[i] = y[i] == 0.0f ? 0.0 : 1.0 / (1.0 - l->dropout_ratio);
        r.mask = mask;
    }
    /* the output of a loss layer's reference is the probabilities, like the net's */
    double *out = malloc((size_t)n_out * sizeof *out);
    int bad = 0;
    double loss_ref = ref_forward(&r, out);
    float *got = nnet_output(n, li);
    if (o->corrupt_output) got[n_out / 2] += 0.01f;
    bad += compare("forward", got, out, n_out, o->fwd_atol, o->fwd_atol) != 0;
    if (layer_is_loss(l))
        CHECK_NEAR(nnet_layer_loss(n, li), loss_ref, 1e-5, 1e-5);

    /* backward: dout = R, then BWD(l) alone */
    double *R = malloc((size_t)n_out * sizeof *R);
    for (int64_t i = 0; i < n_out; i++) R[i] = 2 * rng_uniform(rng) - 1;
    nnet_backward_begin(n);
    float *dy = nnet_doutput(n, li);
    for (int64_t i = 0; i < n_out; i++) dy[i] = (float)R[i];
    nnet_backward_layer(n, li);
    for (int k = 0; k < l->n_inputs && l->type != LAYER_EMBED; k++) { /* ids: no gradient */
        char what[64];
        snprintf(what, sizeof what, "d input %d", k);
        bad += check_grad(what, &r, ins[k], nnet_doutput(n, l->inputs[k]),
                          r.in_count[k] * o->batch, R, out, n_out, rng, o) != 0;
    }
    if (w)
        bad += check_grad("d weight", &r, w, a->grads + woff, nw, R, out, n_out, rng, o) != 0;
    if (bb)
        bad += check_grad("d bias", &r, bb, a->grads + a->layer_offset[li] + nw, nb, R, out,
                          n_out, rng, o) != 0;
    for (int k = 0; k < l->n_inputs; k++) free(ins[k]);
    free(w);
    free(bb);
    free(state);
    free(mask);
    free(out);
    free(R);
    rng_destroy(&rng);
    nnet_destroy(&n);
    compute_destroy(&c);
    model_fini(&m);
    return bad;
}

static const case_opts_t s_default = {.batch = 3,
                                      .train = true,
                                      .fwd_atol = 1e-4,
                                      .bwd_atol = 2e-3,
                                      .bwd_rtol = 2e-3,
                                      .param_lo = -1,
                                      .param_hi = 1};

#define LAYER_CASE(test_name, text, lname)                                                  \
    TEST(test_name) { CHECK(check_layer(text, lname, &s_default, 11) == 0); }

LAYER_CASE(test_layers_conv_grouped_strided,
           "input data shape=4x7x7\nconv c out=6 kernel=3 stride=2 pad=1 groups=2\n", "c")
LAYER_CASE(test_layers_conv_rect_nobias,
           "input data shape=3x6x5\nconv c out=4 kernel=3x2 pad=1x0 bias=0\n", "c")
/* ungrouped with a bias: the bias folded into the GEMM (nnet.c conv_bias_fused) */
LAYER_CASE(test_layers_conv_bias_fused_same_pad,
           "input data shape=3x6x7\nconv c out=5 kernel=5 pad=2\n", "c")
LAYER_CASE(test_layers_conv_bias_fused_strided,
           "input data shape=2x7x6\nconv c out=4 kernel=3x2 stride=2x1 pad=1\n", "c")
LAYER_CASE(test_layers_conv_pointwise, "input data shape=5x4x4\nconv c out=3 kernel=1\n", "c")
/* 5x5, stride 1, 8+ input channels: the CPU backend's Winograd forward (conv_wino.c); its
 * data gradient by Winograd where the layer has 8+ output channels (a group's), else as an
 * im2col of dy */
LAYER_CASE(test_layers_conv_winograd_same_pad,
           "input data shape=8x7x6\nconv c out=6 kernel=5 pad=2\n", "c")
LAYER_CASE(test_layers_conv_winograd_grouped,
           "input data shape=16x6x7\nconv c out=16 kernel=5 pad=2 groups=2 bias=0\n", "c")
LAYER_CASE(test_layers_conv_winograd_no_pad,
           "input data shape=8x7x8\nconv c out=8 kernel=5\n", "c")
LAYER_CASE(test_layers_conv_winograd_rect_pad,
           "input data shape=9x5x6\nconv c out=10 kernel=5 pad=3x1\n", "c")
TEST(test_layers_conv_winograd_batch1)
{
    case_opts_t o = s_default;
    o.batch = 1;
    CHECK(check_layer("input data shape=8x7x7\nconv c out=8 kernel=5 pad=2\n", "c", &o, 11) == 0);
}
LAYER_CASE(test_layers_fc, "input data shape=3x2x2\nfc f out=7\n", "f")
LAYER_CASE(test_layers_fc_nobias, "input data shape=9x1x1\nfc f out=4 bias=0\n", "f")
LAYER_CASE(test_layers_relu, "input data shape=2x3x3\nrelu r\n", "r")
LAYER_CASE(test_layers_pool_max_ceil,
           "input data shape=2x7x7\npool p op=max kernel=3 stride=2 ceil=1\n", "p")
LAYER_CASE(test_layers_pool_max_pad,
           "input data shape=2x6x6\npool p op=max kernel=3 stride=2 pad=1\n", "p")
LAYER_CASE(test_layers_pool_avg_pad_ceil,
           "input data shape=2x6x6\npool p op=avg kernel=3 stride=2 pad=1 ceil=1\n", "p")
LAYER_CASE(test_layers_pool_global_avg, "input data shape=3x5x4\npool p op=avg global=1\n", "p")
LAYER_CASE(test_layers_pool_global_max, "input data shape=3x5x4\npool p op=max global=1\n", "p")
LAYER_CASE(test_layers_lrn,
           "input data shape=7x3x3\nlrn n size=5 alpha=0.5 beta=0.75 k=2\n", "n")
LAYER_CASE(test_layers_lrn_size3, "input data shape=4x2x2\nlrn n size=3 alpha=1 beta=0.6\n",
           "n")
LAYER_CASE(test_layers_dropout, "input data shape=4x5x5\ndropout d ratio=0.3\n", "d")
LAYER_CASE(test_layers_batchnorm_train, "input data shape=3x4x4\nbatchnorm bn\n", "bn")
LAYER_CASE(test_layers_batchnorm_fc, "input data shape=6x1x1\nbatchnorm bn eps=0.001\n", "bn")
LAYER_CASE(test_layers_concat,
           "input data shape=2x3x3\nrelu a\nconv b in=data out=3 kernel=1\n"
           "concat cat in=a,b\n",
           "cat")
LAYER_CASE(test_layers_add,
           "input data shape=2x3x3\nrelu a\nconv b in=data out=2 kernel=1\n"
           "conv c in=data out=2 kernel=3 pad=1\nadd s in=a,b,c\n",
           "s")
LAYER_CASE(test_layers_softmax_loss, "input data shape=10x1x1\nsoftmax_loss loss weight=0.5\n",
           "loss")

/* Sequence layers: a D x 1 x S input made a sequence by to_seq (itself checked first). */
#define SEQ_IN "input data shape=6x1x5\nto_seq s\n"
LAYER_CASE(test_layers_to_seq, "input data shape=3x2x4\nto_seq s\n", "s")
LAYER_CASE(test_layers_embed,
           "tokens ids seq=5 vocab=7\nembed e vocab=9 dim=4\n", "e")
LAYER_CASE(test_layers_posembed, SEQ_IN "posembed p max=8\n", "p")
LAYER_CASE(test_layers_clstoken, SEQ_IN "clstoken c\n", "c")
LAYER_CASE(test_layers_select, SEQ_IN "select first pos=3\n", "first")
LAYER_CASE(test_layers_linear, SEQ_IN "linear l out=4\n", "l")
LAYER_CASE(test_layers_linear_nobias, SEQ_IN "linear l out=7 bias=0\n", "l")
LAYER_CASE(test_layers_linear_tied,
           "tokens ids seq=5 vocab=7\nembed e vocab=7 dim=4\nrelu r\n"
           "linear head out=7 bias=0 tie=e\n", "head")
LAYER_CASE(test_layers_layernorm, SEQ_IN "layernorm ln eps=0.001\n", "ln")
LAYER_CASE(test_layers_gelu_erf, SEQ_IN "gelu g\n", "g")
LAYER_CASE(test_layers_gelu_tanh, SEQ_IN "gelu g approx=tanh\n", "g")
LAYER_CASE(test_layers_tanh, SEQ_IN "tanh t\n", "t")
LAYER_CASE(test_layers_attention,
           SEQ_IN "linear q out=6\nlinear k out=6 in=s\nrelu v in=s\n"
           "attention a heads=2 in=q,k,v\n", "a")
LAYER_CASE(test_layers_attention_causal,
           SEQ_IN "linear q out=6\nlinear k out=6 in=s\nrelu v in=s\n"
           "attention a heads=3 causal=1 in=q,k,v\n", "a")
LAYER_CASE(test_layers_seq_loss, SEQ_IN "seq_loss loss weight=0.5\n", "loss")

/* The layers of today's image networks (act, mul, slice, shuffle). The inputs are in
 * [-1, 1): act's clamps are stretched so that their bounds fall inside. */
LAYER_CASE(test_layers_act_sigmoid, "input data shape=2x3x3\nact a fn=sigmoid\n", "a")
LAYER_CASE(test_layers_act_silu, "input data shape=2x3x3\nact a fn=silu\n", "a")
LAYER_CASE(test_layers_act_hardsigmoid,
           "input data shape=2x3x3\nact a fn=hardsigmoid alpha=1.5 beta=0.5\n", "a")
LAYER_CASE(test_layers_act_hardswish,
           "input data shape=2x3x3\nact a fn=hardswish alpha=1.5 beta=0.5\n", "a")
LAYER_CASE(test_layers_act_clip, "input data shape=2x3x3\nact a fn=clip min=-0.5 max=0.5\n",
           "a")
LAYER_CASE(test_layers_mul_gate,
           "input data shape=3x4x4\npool g op=avg global=1\nact s fn=sigmoid\n"
           "mul m in=data,s\n", "m")
LAYER_CASE(test_layers_mul_same_shape,
           "input data shape=2x3x3\nact s fn=sigmoid\nmul m in=data,s\n", "m")
LAYER_CASE(test_layers_slice, "input data shape=5x2x3\nslice s from=1 out=3\n", "s")
LAYER_CASE(test_layers_shuffle, "input data shape=6x2x2\nshuffle s groups=2\n", "s")
LAYER_CASE(test_layers_shuffle_3, "input data shape=6x1x3\nshuffle s groups=3\n", "s")
LAYER_CASE(test_layers_to_image, "input data shape=3x2x4\nto_seq s\nto_image i h=2 w=4\n", "i")
LAYER_CASE(test_layers_scale, "input data shape=3x2x5\nscale k\n", "k")
/* Swin: a 5x6 plane (padded to 6x6 by windows of 3, shifted by 1: the mask's regions on
 * both axes), a 2x2 plane smaller than its window (padded, no shift), patch merging of odd
 * sides */
#define PLANE_IN(c, h, w) "input data shape=" #c "x" #h "x" #w "\nto_seq s\n"
LAYER_CASE(test_layers_winattn_shifted,
           PLANE_IN(4, 5, 6) "winattn a h=5 w=6 window=3 shift=1 heads=2 bias=1\n", "a")
LAYER_CASE(test_layers_winattn_small_nobias,
           PLANE_IN(4, 2, 2) "winattn a h=2 w=2 window=3 shift=1 heads=1 bias=0\n", "a")
LAYER_CASE(test_layers_patchmerge, PLANE_IN(3, 3, 5) "patchmerge m h=3 w=5\n", "m")

/* A whole decoder with a tied output layer: backward against finite differences of the
 * net's own forward (in double accumulation), every parameter of a few layers checked. */
TEST(test_layers_decoder_net_fd)
{
    const char *text = "tokens ids seq=6 vocab=11\nembed e vocab=11 dim=8\nposembed p\n"
                       "layernorm ln\nlinear q out=8\nlinear k out=8 in=ln\nlinear v out=8 in=ln\n"
                       "attention a heads=2 causal=1 in=q,k,v\nlinear o out=8\nadd r in=o,p\n"
                       "gelu g\nlinear head out=11 bias=0 tie=e\nseq_loss loss\n";
    char err[256];
    model_t m;
    REQUIRE(model_parse(&m, "d.net", text, strlen(text), err, sizeof err) == 0, "%s", err);
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    nnet_t *n = nnet_new(&m, 2, c, 1, err, sizeof err);
    REQUIRE(n, "%s", err);
    REQUIRE(nnet_label_count(n) == 6);
    rng_t *rng = rng_new(4, 1);
    arena_t *a = nnet_arena(n);
    for (int64_t i = 0; i < a->count; i++) a->params[i] = (float)rng_gaussian(rng, 0.5);
    for (int i = 0; i < 12; i++) {
        nnet_input(n)[i] = (float)rng_uint(rng, 11);
        nnet_labels(n)[i] = (int)rng_uint(rng, 11);
    }
    nnet_forward(n);
    nnet_backward(n);
    float *g = malloc((size_t)a->count * sizeof *g);
    memcpy(g, a->grads, (size_t)a->count * sizeof *g);
    int bad = 0;
    for (int k = 0; k < 60; k++) {
        int64_t i = (int64_t)rng_uint(rng, (uint64_t)a->count);
        float keep = a->params[i];
        const float h = 1e-2f;
        a->params[i] = keep + h;
        double jp = nnet_forward(n);
        a->params[i] = keep - h;
        double jm = nnet_forward(n);
        a->params[i] = keep;
        double fdv = (jp - jm) / (2.0 * h);
        if (fabs(fdv - g[i]) > 2e-3 + 2e-2 * fabs(fdv)) {
            fprintf(stderr, "    param %lld: backward %.6g, finite difference %.6g\n",
                    (long long)i, g[i], fdv);
            bad++;
        }
    }
    CHECK(bad == 0, "%d of 60 parameters disagree", bad);
    free(g);
    rng_destroy(&rng);
    nnet_destroy(&n);
    compute_destroy(&c);
    model_fini(&m);
}

TEST(test_layers_batchnorm_eval)
{
    case_opts_t o = s_default;
    o.train = false;
    CHECK(check_layer("input data shape=3x2x2\nbatchnorm bn\n", "bn", &o, 5) == 0);
}

TEST(test_layers_dropout_eval_is_identity)
{
    case_opts_t o = s_default;
    o.train = false;
    CHECK(check_layer("input data shape=4x5x5\ndropout d ratio=0.3\n", "d", &o, 5) == 0);
}

/* The comparison must catch one corrupted output element, or every check above is void. */
TEST(test_layers_checker_can_fail)
{
    case_opts_t o = s_default;
    o.corrupt_output = true;
    CHECK(check_layer("input data shape=4x7x7\nconv c out=6 kernel=3 pad=1\n", "c", &o, 3) == 1,
          "a corrupted output went unnoticed");
    /* and an FD comparison of a wrong gradient fails too */
    float got[2] = {1.0f, 2.0f};
    double ref[2] = {1.0, 2.01};
    CHECK(compare("corrupt", got, ref, 2, 1e-3, 1e-3) == 1);
}

/* Dropout drops about `ratio` of the elements, the same ones for the same seed. */
TEST(test_layers_dropout_rate_and_seed)
{
    const char *text = "input data shape=8x16x16\ndropout d ratio=0.3\n";
    char err[256];
    model_t m;
    REQUIRE(model_parse(&m, "d.net", text, strlen(text), err, sizeof err) == 0, "%s", err);
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    float *first = NULL;
    int64_t total = 0;
    for (int run = 0; run < 2; run++) {
        nnet_t *n = nnet_new(&m, 4, c, 99, err, sizeof err);
        total = nnet_out_count(n, 1) * 4;
        for (int64_t i = 0; i < total; i++) nnet_input(n)[i] = 1.0f;
        nnet_forward_layer(n, 1);
        int64_t dropped = 0;
        for (int64_t i = 0; i < total; i++) dropped += nnet_output(n, 1)[i] == 0.0f;
        CHECK_NEAR((double)dropped / total, 0.3, 0.02, 0);
        if (run == 0) {
            first = malloc((size_t)total * sizeof *first);
            memcpy(first, nnet_output(n, 1), (size_t)total * sizeof *first);
        } else {
            CHECK(memcmp(first, nnet_output(n, 1), (size_t)total * sizeof *first) == 0,
                  "same seed, different mask");
        }
        nnet_destroy(&n);
    }
    free(first);
    compute_destroy(&c);
    model_fini(&m);
}

/* A small conv + two FC net (batch 3) with random parameters, input and labels, ready for a
 * pass: the SFB tests' net. */
static const char *s_fc_net = "input data shape=1x6x6\nconv c1 out=3 kernel=3 pad=1\nrelu r1\n"
                              "fc f1 out=5\nrelu r2\nfc f2 out=4\nsoftmax_loss loss\n";

static nnet_t *fc_net_new(const model_t *m, compute_t *c)
{
    char err[256];
    nnet_t *n = nnet_new(m, 3, c, 1, err, sizeof err);
    REQUIRE(n, "%s", err);
    rng_t *rng = rng_new(1, 1);
    arena_t *a = nnet_arena(n);
    for (int64_t i = 0; i < a->count; i++) a->params[i] = (float)rng_gaussian(rng, 0.3);
    for (int64_t i = 0; i < 36 * 3; i++) nnet_input(n)[i] = (float)rng_uniform(rng);
    for (int b = 0; b < 3; b++) nnet_labels(n)[b] = b;
    rng_destroy(&rng);
    return n;
}

/* SFB's factors: an FC layer's weight gradient is dy^T x of what nnet_fc_factors returns */
TEST(test_layers_net_fc_factors)
{
    char err[256];
    model_t m;
    REQUIRE(model_parse(&m, "f.net", s_fc_net, strlen(s_fc_net), err, sizeof err) == 0, "%s",
            err);
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    nnet_t *n = fc_net_new(&m, c);
    arena_t *a = nnet_arena(n);
    nnet_forward(n);
    nnet_backward(n);
    int f2 = model_find(&m, "f2");
    const float *x, *dy;
    int in, out;
    nnet_fc_factors(n, f2, &x, &dy, &in, &out);
    CHECK_EQ_I64(in, 5);
    CHECK_EQ_I64(out, 4);
    const float *dw = a->grads + a->layer_offset[f2];
    for (int i = 0; i < out; i++)
        for (int j = 0; j < in; j++) {
            double s = 0;
            for (int b = 0; b < 3; b++) s += (double)dy[b * out + i] * x[b * in + j];
            CHECK_NEAR(dw[i * in + j], s, 1e-6, 1e-5);
        }
    nnet_destroy(&n);
    compute_destroy(&c);
    model_fini(&m);
}

/* An SFB layer's weight gradient left out (nnet_set_weight_grad): its dw keeps what it held,
 * and every other gradient (its bias's, the layers' below through dx) is the same, bit for
 * bit, as with it computed. */
TEST(test_layers_net_weight_grad_off_changes_nothing_else)
{
    char err[256];
    model_t m;
    REQUIRE(model_parse(&m, "f.net", s_fc_net, strlen(s_fc_net), err, sizeof err) == 0, "%s",
            err);
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    int f1 = model_find(&m, "f1");
    float *grads[2];
    int64_t count = 0;
    for (int off = 0; off < 2; off++) {
        nnet_t *n = fc_net_new(&m, c);
        arena_t *a = nnet_arena(n);
        for (int64_t i = 0; i < a->count; i++) a->grads[i] = 7.0f; /* the sentinel */
        if (off) nnet_set_weight_grad(n, f1, false);
        nnet_forward(n);
        nnet_backward(n);
        count = a->count;
        grads[off] = malloc((size_t)count * sizeof(float));
        memcpy(grads[off], a->grads, (size_t)count * sizeof(float));
        int64_t w0 = a->layer_offset[f1], w1 = w0 + m.layers[f1].weights;
        for (int64_t i = w0; i < w1; i++) {
            CHECK(grads[off][i] != 7.0f || off); /* computed when on */
            if (off) grads[0][i] = grads[1][i] = 7.0f; /* then compare the rest */
        }
        nnet_destroy(&n);
    }
    for (int64_t i = 0; i < count; i++) CHECK(memcmp(&grads[0][i], &grads[1][i], 4) == 0);
    free(grads[0]);
    free(grads[1]);
    compute_destroy(&c);
    model_fini(&m);
}

/* ---- Swin's layers against PyTorch ---------------------------------------------------- */

/* n floats of the next line of f (one line per tensor); NULL on a short line */
static float *read_floats(FILE *f, int64_t n)
{
    float *a = malloc((size_t)(n ? n : 1) * sizeof *a);
    for (int64_t i = 0; i < n; i++)
        if (fscanf(f, "%f", &a[i]) != 1) {
            free(a);
            return NULL;
        }
    return a;
}

/* Compares got with PyTorch's want; returns the comparison's failures. */
static int compare_floats(const char *what, const float *got, const float *want, int64_t n)
{
    double *ref = malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++) ref[i] = want[i];
    int bad = compare(what, got, ref, n, 1e-5, 1e-4);
    free(ref);
    return bad;
}

/* One winattn case of the file: the layer's output on PyTorch's weights and input against
 * ShiftedWindowAttention's (and, corrupted by 1e-3, caught). */
static void winattn_case(FILE *f, compute_t *c)
{
    int h, w, win, shift, heads, d;
    int got = fscanf(f, "%d %d %d %d %d %d", &h, &w, &win, &shift, &heads, &d);
    REQUIRE(got == 6, "a line of 6 sizes");
    char text[256], err[512];
    snprintf(text, sizeof text, "input data shape=%dx%dx%d\nto_seq s\nwinattn a h=%d w=%d "
             "window=%d shift=%d heads=%d bias=1\n", d, h, w, h, w, win, shift, heads);
    model_t m;
    REQUIRE(model_parse(&m, "pt.net", text, strlen(text), err, sizeof err) == 0, "%s", err);
    const layer_t *l = &m.layers[2];
    int64_t S = (int64_t)h * w * d;
    float *wt = read_floats(f, l->weights), *b = read_floats(f, l->biases);
    float *x = read_floats(f, S), *y = read_floats(f, S);
    REQUIRE(wt && b && x && y, "short case %dx%d", h, w);
    float *aux = malloc((size_t)winattn_aux_count(l) * sizeof *aux);
    float *out = malloc((size_t)S * sizeof *out);
    float *scratch = malloc((size_t)winattn_scratch_count(l) * sizeof *scratch);
    winattn_forward(c, l, 1, x, wt, b, aux, scratch, out);
    char what[64];
    snprintf(what, sizeof what, "winattn %dx%d window %d shift %d", h, w, win, shift);
    CHECK(compare_floats(what, out, y, S) == 0, "%s differs from PyTorch", what);
    out[S / 2] += 1e-3f;
    CHECK(compare_floats("corrupted on purpose", out, y, S) == 1, "a corrupted value passed");
    free(wt), free(b), free(x), free(y), free(aux), free(out), free(scratch);
    model_fini(&m);
}

/* winattn and patchmerge on the weights and inputs of torchvision's ShiftedWindowAttention
 * and _patch_merging_pad give PyTorch's outputs (tests/data/onnx/zoo_swin_layers.txt, written
 * by scripts/onnx_zoo.py --fixtures): padding, roll, bias table and mask as PyTorch has them. */
TEST(test_layers_winattn_patchmerge_match_pytorch)
{
    FILE *f = fopen("tests/data/onnx/zoo_swin_layers.txt", "r");
    REQUIRE(f, "cannot open tests/data/onnx/zoo_swin_layers.txt");
    char line[256];
    REQUIRE(fgets(line, sizeof line, f) && line[0] == '#', "no header line");
    int cases = 0, got = fscanf(f, "%d", &cases);
    REQUIRE(got == 1 && cases == 3, "expected 3 cases");
    char err[256];
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    for (int k = 0; k < cases; k++) winattn_case(f, c);
    layer_t l = {.image_h = 3, .image_w = 5}; /* (1,3,5,4) to (1,2,3,16) */
    float *x = read_floats(f, 3 * 5 * 4), *y = read_floats(f, 2 * 3 * 16), out[96];
    REQUIRE(x && y, "short patch merge");
    patchmerge_forward(c, &l, 1, 4, x, out);
    CHECK(compare_floats("patchmerge", out, y, 96) == 0, "patchmerge differs from PyTorch");
    free(x), free(y);
    compute_destroy(&c);
    fclose(f);
}
