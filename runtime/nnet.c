/* nnet: see nnet.h. One file holds the per-layer forward and backward code, the layer contract
 * of Caffe (Jia et al. 2014): conv as im2col + GEMM per sample, pools with Caffe's window
 * rules, LRN across channels, batchnorm with batch statistics in training.
 *
 * Conv stays one GEMM per sample (not one over the whole batch's im2col matrix): a sample's
 * matrix fits in L2, the batch's does not, and with OpenBLAS on this machine's CPU the batched
 * GEMM was slower for LeNet's conv2 at batch 64 (forward 15.8 vs 13.5 ms, weight gradient
 * 23.4 vs 13.9 ms, one thread). */
#include "runtime/nnet.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/rng.h"
#include "runtime/seq_layers.h"
#include "runtime/vec.h"

typedef struct {
    float *out, *dout;       /* batch x out_count */
    int64_t out_count;       /* per sample (softmax_loss: in_count, the probabilities) */
    int64_t in_count;        /* per sample, of inputs[0] */
    float *w, *b, *dw, *db;  /* into the arena; NULL when absent */
    int kh, kw, sh, sw, ph, pw; /* pool: effective window (global resolved) */
    int *argmax;             /* max pool: batch x out_count input index (-1: none) */
    float *aux;              /* lrn: scale; dropout: mask; bn, layernorm: xhat; attention: P */
    float *aux2;             /* layernorm: invstd per token */
    int seq, dim;            /* sequence layers: positions and features of inputs[0] */
    bool add_dw;             /* embed read by a tied linear: its backward adds to dw */
    float *mean, *invstd;    /* bn: per channel, of the last training batch */
    float *run_mean, *run_var; /* bn: into arena state */
    double loss;             /* softmax_loss */
    rng_t *rng;              /* dropout */
    bool need_dx;            /* propagate to inputs */
} lstate_t;

struct nnet {
    const model_t *m;
    compute_t *c;
    int batch;
    arena_t arena;
    lstate_t *ls;
    int *labels;             /* batch x label_count */
    int label_count;         /* per sample: 1, or the positions of a seq_loss */
    float *col;              /* conv scratch: (C*kh*kw + 1) x P, the last row for the bias */
    int64_t col_count;
    float *wext;             /* conv scratch: W|b or dW|db, O x (K+1) */
    int64_t wext_count;
    bool train, frozen, input_grad;
};

static void *host_floats(nnet_t *n, int64_t count) { return compute_alloc_floats(n->c, count); }

nnet_t *nnet_new(const model_t *m, int batch, compute_t *c, uint64_t seed, char *err,
               size_t errlen)
{
    if (c->kind != COMPUTE_CPU) {
        snprintf(err, errlen,
                 "the %s backend runs GEMM, im2col and the update, but the layers' "
                 "element-wise loops need host memory: use --device cpu",
                 compute_kind_name(c->kind));
        return NULL;
    }
    if (batch < 1) {
        snprintf(err, errlen, "batch must be >= 1 (got %d)", batch);
        return NULL;
    }
    if (m->n_layers < 2 || !layer_is_input(&m->layers[0])) {
        snprintf(err, errlen, "%s: a network needs an input layer first", m->path);
        return NULL;
    }
    for (int i = 1; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        if (layer_is_input(l)) {
            snprintf(err, errlen, "%s:%d: the runtime takes one input layer ('%s' is a second)",
                     m->path, l->src_line, l->name);
            return NULL;
        }
        for (int k = 0; k < l->n_inputs; k++) {
            const layer_t *in = &m->layers[l->inputs[k]];
            if (layer_is_loss(in)) {
                snprintf(err, errlen, "%s:%d: layer '%s' reads the loss layer '%s'", m->path,
                         l->src_line, l->name, in->name);
                return NULL;
            }
        }
    }

    int label_count = 0, loss_kinds = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        if (!layer_is_loss(l)) continue;
        int want = l->type == LAYER_SEQ_LOSS ? l->in_shape.w : 1;
        loss_kinds |= l->type == LAYER_SEQ_LOSS ? 2 : 1;
        if ((label_count && want != label_count) || loss_kinds == 3) {
            snprintf(err, errlen, "%s:%d: loss '%s' wants %d labels per sample, an earlier loss "
                     "%d: the runtime takes one kind", m->path, l->src_line, l->name, want,
                     label_count);
            return NULL;
        }
        label_count = want;
    }
    if (!label_count) label_count = 1;

    nnet_t *n = xcalloc(1, sizeof *n);
    n->m = m;
    n->label_count = label_count;
    n->c = c;
    n->batch = batch;
    n->train = true;
    arena_init(&n->arena, m, c);
    n->ls = xcalloc((size_t)m->n_layers, sizeof *n->ls);
    n->labels = xcalloc((size_t)batch * label_count, sizeof *n->labels);
    for (int i = 0; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        lstate_t *s = &n->ls[i];
        s->in_count = i > 0 ? shape_count(m->layers[l->inputs[0]].out_shape) : 0;
        s->out_count = layer_is_loss(l) ? s->in_count : shape_count(l->out_shape);
        s->out = host_floats(n, s->out_count * batch);
        s->dout = host_floats(n, s->out_count * batch);
        s->need_dx = i > 0 && !layer_is_input(&m->layers[l->inputs[0]]);
        if (i > 0) {
            shape_t is = m->layers[l->inputs[0]].out_shape;
            s->seq = is.h * is.w;
            s->dim = is.c;
        }
        if (n->arena.layer_count[i] > 0) {
            int64_t off = n->arena.layer_offset[i];
            s->w = n->arena.params + off;
            s->dw = n->arena.grads + off;
            if (l->biases > 0) {
                s->b = s->w + l->weights;
                s->db = s->dw + l->weights;
            }
        }
        switch (l->type) {
        case LAYER_CONV: {
            int64_t k = (int64_t)l->in_shape.c * l->kernel_h * l->kernel_w;
            int64_t need = (k + 1) * l->out_shape.h * l->out_shape.w;
            if (need > n->col_count) n->col_count = need;
            int64_t wext = (int64_t)l->out * (k + 1);
            if (wext > n->wext_count) n->wext_count = wext;
            ASSERT(l->weights == (int64_t)l->out * (l->in_shape.c / l->groups) * l->kernel_h *
                                     l->kernel_w,
                   "conv '%s': weight count disagrees with the model", l->name);
            break;
        }
        case LAYER_FC:
            ASSERT(l->weights == (int64_t)l->out * s->in_count,
                   "fc '%s': weight count disagrees with the model", l->name);
            break;
        case LAYER_POOL:
            if (l->global) {
                s->kh = l->in_shape.h, s->kw = l->in_shape.w;
                s->sh = s->sw = 1;
                s->ph = s->pw = 0;
            } else {
                s->kh = l->kernel_h, s->kw = l->kernel_w;
                s->sh = l->stride_h, s->sw = l->stride_w;
                s->ph = l->pad_h, s->pw = l->pad_w;
            }
            if (l->pool == POOL_MAX)
                s->argmax = xcalloc((size_t)(s->out_count * batch), sizeof(int));
            break;
        case LAYER_LRN:
        case LAYER_DROPOUT:
            if (l->type == LAYER_LRN && s->out_count > n->col_count)
                n->col_count = s->out_count; /* lrn backward scratch: one sample */
            s->aux = host_floats(n, s->out_count * batch);
            if (l->type == LAYER_DROPOUT) s->rng = rng_new(seed, 0x64726f70ULL + (uint64_t)i);
            break;
        case LAYER_BATCHNORM: {
            int ch = l->out_shape.c;
            s->aux = host_floats(n, s->out_count * batch);
            s->mean = host_floats(n, ch);
            s->invstd = host_floats(n, ch);
            s->run_mean = n->arena.state + n->arena.state_offset[i];
            s->run_var = s->run_mean + ch;
            for (int k = 0; k < ch; k++) s->run_var[k] = 1.0f;
            break;
        }
        case LAYER_LINEAR:
            if (l->tied) { /* the embed's matrix; the embed's backward then adds to it */
                int64_t off = n->arena.layer_offset[l->tie_layer];
                s->w = n->arena.params + off;
                s->dw = n->arena.grads + off;
                n->ls[l->tie_layer].add_dw = true;
            }
            break;
        case LAYER_LAYERNORM:
            s->aux = host_floats(n, s->out_count * batch);
            s->aux2 = host_floats(n, (int64_t)s->seq * batch);
            break;
        case LAYER_ATTENTION: {
            int64_t ss = (int64_t)s->seq * s->seq;
            s->aux = host_floats(n, ss * l->heads * batch);
            if (ss > n->col_count) n->col_count = ss;
            break;
        }
        default:
            break;
        }
    }
    n->col = host_floats(n, n->col_count > 0 ? n->col_count : 1);
    n->wext = host_floats(n, n->wext_count > 0 ? n->wext_count : 1);
    return n;
}

void nnet_destroy(nnet_t **np)
{
    if (!np || !*np) return;
    nnet_t *n = *np;
    for (int i = 0; i < n->m->n_layers; i++) {
        lstate_t *s = &n->ls[i];
        compute_release(n->c, s->out);
        compute_release(n->c, s->dout);
        if (s->aux) compute_release(n->c, s->aux);
        if (s->mean) compute_release(n->c, s->mean);
        if (s->invstd) compute_release(n->c, s->invstd);
        if (s->aux2) compute_release(n->c, s->aux2);
        free(s->argmax);
        rng_destroy(&s->rng);
    }
    compute_release(n->c, n->col);
    compute_release(n->c, n->wext);
    arena_fini(&n->arena);
    free(n->ls);
    free(n->labels);
    free(n);
    *np = NULL;
}

const model_t *nnet_model(const nnet_t *n) { return n->m; }
arena_t *nnet_arena(nnet_t *n) { return &n->arena; }
int nnet_batch(const nnet_t *n) { return n->batch; }
float *nnet_input(nnet_t *n) { return n->ls[0].out; }
int *nnet_labels(nnet_t *n) { return n->labels; }
int nnet_label_count(const nnet_t *n) { return n->label_count; }
void nnet_set_train(nnet_t *n, bool train) { n->train = train; }
void nnet_set_dropout_frozen(nnet_t *n, bool frozen) { n->frozen = frozen; }
void nnet_set_input_grad(nnet_t *n, bool on)
{
    n->input_grad = on;
    for (int i = 1; i < n->m->n_layers; i++)
        n->ls[i].need_dx = on || !layer_is_input(&n->m->layers[n->m->layers[i].inputs[0]]);
}
float *nnet_output(nnet_t *n, int l) { return n->ls[l].out; }
float *nnet_doutput(nnet_t *n, int l) { return n->ls[l].dout; }
int64_t nnet_out_count(const nnet_t *n, int l) { return n->ls[l].out_count; }
double nnet_layer_loss(const nnet_t *n, int l) { return n->ls[l].loss; }

/* ---- convolution ---------------------------------------------------------------------- */

static bool conv_is_pointwise(const layer_t *l)
{
    return l->kernel_h == 1 && l->kernel_w == 1 && l->stride_h == 1 && l->stride_w == 1 &&
           l->pad_h == 0 && l->pad_w == 0;
}

/* Bias folded into the GEMM: with a row of ones appended to the im2col matrix (K+1 rows) and
 * the bias appended to each filter (W|b, O x (K+1)), one GEMM gives W col + b, and in the
 * backward one GEMM gives dW|db. This saves a separate read-modify-write pass over the
 * output, which for a layer with few input channels (LeNet's conv1: K = 25) is a large part of
 * the GEMM's own memory traffic. Used for ungrouped, non-pointwise convolutions with a bias;
 * the others add the bias in a loop. */
static bool conv_bias_fused(const layer_t *l, const lstate_t *s)
{
    return l->groups == 1 && !conv_is_pointwise(l) && s->b;
}

static void conv_im2col(nnet_t *n, const layer_t *l, const float *xb)
{
    n->c->ops->im2col(n->c->ctx, xb, l->in_shape.c, l->in_shape.h, l->in_shape.w, l->kernel_h,
                      l->kernel_w, l->pad_h, l->pad_w, l->stride_h, l->stride_w,
                      l->out_shape.h, l->out_shape.w, n->col);
}

static void conv_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int C = l->in_shape.c, H = l->in_shape.h, W = l->in_shape.w;
    int O = l->out, P = l->out_shape.h * l->out_shape.w, G = l->groups;
    int Cg = C / G, Og = O / G, K = Cg * l->kernel_h * l->kernel_w;
    bool pw = conv_is_pointwise(l);
    if (conv_bias_fused(l, s)) {
        float *wb = n->wext; /* (O, K+1): W | b */
        for (int o = 0; o < O; o++) {
            memcpy(wb + (int64_t)o * (K + 1), s->w + (int64_t)o * K, (size_t)K * sizeof(float));
            wb[(int64_t)o * (K + 1) + K] = s->b[o];
        }
        float *ones = n->col + (int64_t)K * P;
        for (int p = 0; p < P; p++) ones[p] = 1.0f;
        for (int b = 0; b < n->batch; b++) {
            conv_im2col(n, l, x + (int64_t)b * C * H * W);
            compute_sgemm(n->c, false, false, O, P, K + 1, 1.0f, wb, K + 1, n->col, P, 0.0f,
                          s->out + (int64_t)b * O * P, P);
        }
        return;
    }
    for (int b = 0; b < n->batch; b++) {
        const float *xb = x + (int64_t)b * C * H * W;
        float *yb = s->out + (int64_t)b * O * P;
        const float *col = xb;
        if (!pw) {
            conv_im2col(n, l, xb);
            col = n->col;
        }
        for (int g = 0; g < G; g++)
            compute_sgemm(n->c, false, false, Og, P, K, 1.0f, s->w + (int64_t)g * Og * K, K,
                          col + (int64_t)g * K * P, P, 0.0f, yb + (int64_t)g * Og * P, P);
        if (s->b)
            for (int o = 0; o < O; o++) vec_add_scalar(yb + (int64_t)o * P, s->b[o], P);
    }
}

static void conv_backward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x, float *dx)
{
    int C = l->in_shape.c, H = l->in_shape.h, W = l->in_shape.w;
    int O = l->out, P = l->out_shape.h * l->out_shape.w, G = l->groups;
    int Cg = C / G, Og = O / G, K = Cg * l->kernel_h * l->kernel_w;
    bool pw = conv_is_pointwise(l);
    bool fused = conv_bias_fused(l, s);
    if (fused) {
        float *ones = n->col + (int64_t)K * P;
        for (int p = 0; p < P; p++) ones[p] = 1.0f;
    } else if (s->db) {
        memset(s->db, 0, (size_t)O * sizeof(float));
    }
    for (int b = 0; b < n->batch; b++) {
        const float *xb = x + (int64_t)b * C * H * W;
        const float *dyb = s->dout + (int64_t)b * O * P;
        float beta = b == 0 ? 0.0f : 1.0f; /* the first sample overwrites, the rest add */
        const float *col = xb;
        if (!pw) {
            conv_im2col(n, l, xb);
            col = n->col;
        }
        if (fused) {
            /* dW|db (O, K+1) += dy (O,P) [col; 1]^T */
            compute_sgemm(n->c, false, true, O, K + 1, P, 1.0f, dyb, P, col, P, beta, n->wext,
                          K + 1);
        } else {
            if (s->db)
                for (int o = 0; o < O; o++) s->db[o] += vec_sum(dyb + (int64_t)o * P, P);
            for (int g = 0; g < G; g++)
                compute_sgemm(n->c, false, true, Og, K, P, 1.0f, dyb + (int64_t)g * Og * P, P,
                              col + (int64_t)g * K * P, P, beta, s->dw + (int64_t)g * Og * K,
                              K);
        }
        if (!dx) continue;
        float *dxb = dx + (int64_t)b * C * H * W;
        if (pw) {
            for (int g = 0; g < G; g++)
                compute_sgemm(n->c, true, false, K, P, Og, 1.0f, s->w + (int64_t)g * Og * K, K,
                              dyb + (int64_t)g * Og * P, P, 1.0f, dxb + (int64_t)g * K * P, P);
        } else {
            /* overwrites the first G*K rows of col; the ones row stays */
            for (int g = 0; g < G; g++)
                compute_sgemm(n->c, true, false, K, P, Og, 1.0f, s->w + (int64_t)g * Og * K, K,
                              dyb + (int64_t)g * Og * P, P, 0.0f, n->col + (int64_t)g * K * P,
                              P);
            n->c->ops->col2im(n->c->ctx, n->col, C, H, W, l->kernel_h, l->kernel_w, l->pad_h,
                              l->pad_w, l->stride_h, l->stride_w, l->out_shape.h,
                              l->out_shape.w, dxb);
        }
    }
    if (fused)
        for (int o = 0; o < O; o++) {
            memcpy(s->dw + (int64_t)o * K, n->wext + (int64_t)o * (K + 1),
                   (size_t)K * sizeof(float));
            s->db[o] = n->wext[(int64_t)o * (K + 1) + K];
        }
}

/* ---- fully connected: y (N,M) = x (N,K) W^T + b, W (M,K) ------------------------------ */

static void fc_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int N = n->batch, M = l->out, K = (int)s->in_count;
    compute_sgemm(n->c, false, true, N, M, K, 1.0f, x, K, s->w, K, 0.0f, s->out, M);
    if (s->b)
        for (int b = 0; b < N; b++) vec_add(s->out + (int64_t)b * M, s->b, M);
}

static void fc_backward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x, float *dx)
{
    int N = n->batch, M = l->out, K = (int)s->in_count;
    compute_sgemm(n->c, true, false, M, K, N, 1.0f, s->dout, M, x, K, 0.0f, s->dw, K);
    if (s->db) {
        memset(s->db, 0, (size_t)M * sizeof(float));
        for (int b = 0; b < N; b++) vec_add(s->db, s->dout + (int64_t)b * M, M);
    }
    if (dx) compute_sgemm(n->c, false, false, N, K, M, 1.0f, s->dout, M, s->w, K, 1.0f, dx, K);
}

/* ---- pooling (Caffe's PoolingLayer window rules) -------------------------------------- */

static void pool_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    /* Locals, not s->: as far as the compiler knows, the stores to argmax could alias the
     * window fields, so it would reload them for every output. */
    const int C = l->in_shape.c, H = l->in_shape.h, W = l->in_shape.w;
    const int OH = l->out_shape.h, OW = l->out_shape.w;
    const int kh = s->kh, kw = s->kw, sh = s->sh, sw = s->sw, ph = s->ph, pw = s->pw;
    const bool avg = l->pool == POOL_AVG;
    float *out = s->out;
    int *argmax = s->argmax;
    for (int b = 0; b < n->batch; b++)
        for (int ch = 0; ch < C; ch++) {
            const float *xp = x + ((int64_t)b * C + ch) * H * W;
            int64_t obase = ((int64_t)b * C + ch) * OH * OW;
            for (int oy = 0; oy < OH; oy++) {
                int hs = oy * sh - ph, he = hs + kh;
                int hp = he < H + ph ? he : H + ph; /* avg: the window clipped to the pad */
                int hs0 = hs < 0 ? 0 : hs, he0 = he < H ? he : H;
                for (int ox = 0; ox < OW; ox++) {
                    int ws = ox * sw - pw, we = ws + kw;
                    int ws0 = ws < 0 ? 0 : ws, we0 = we < W ? we : W;
                    int64_t o = obase + (int64_t)oy * OW + ox;
                    if (avg) {
                        int wp = we < W + pw ? we : W + pw;
                        int size = (hp - hs) * (wp - ws);
                        float sum = 0.0f;
                        for (int y = hs0; y < he0; y++)
                            for (int xx = ws0; xx < we0; xx++) sum += xp[y * W + xx];
                        out[o] = size > 0 ? sum / (float)size : 0.0f;
                    } else {
                        float best = -FLT_MAX;
                        int arg = -1;
                        for (int y = hs0; y < he0; y++)
                            for (int xx = ws0; xx < we0; xx++) {
                                float v = xp[y * W + xx];
                                bool gt = v > best;
                                best = gt ? v : best;
                                arg = gt ? y * W + xx : arg;
                            }
                        out[o] = arg >= 0 ? best : 0.0f;
                        argmax[o] = arg;
                    }
                }
            }
        }
}

static void pool_backward(nnet_t *n, const layer_t *l, lstate_t *s, float *dx)
{
    int C = l->in_shape.c, H = l->in_shape.h, W = l->in_shape.w;
    int OH = l->out_shape.h, OW = l->out_shape.w;
    for (int b = 0; b < n->batch; b++)
        for (int ch = 0; ch < C; ch++) {
            float *dxp = dx + ((int64_t)b * C + ch) * H * W;
            int64_t obase = ((int64_t)b * C + ch) * OH * OW;
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    int64_t o = obase + (int64_t)oy * OW + ox;
                    float dy = s->dout[o];
                    if (l->pool == POOL_MAX) {
                        if (s->argmax[o] >= 0) dxp[s->argmax[o]] += dy;
                        continue;
                    }
                    int hs = oy * s->sh - s->ph, ws = ox * s->sw - s->pw;
                    int he = hs + s->kh, we = ws + s->kw;
                    int hp = he < H + s->ph ? he : H + s->ph;
                    int wp = we < W + s->pw ? we : W + s->pw;
                    int size = (hp - hs) * (wp - ws);
                    hs = hs < 0 ? 0 : hs, ws = ws < 0 ? 0 : ws;
                    he = he < H ? he : H, we = we < W ? we : W;
                    if (size <= 0) continue;
                    float g = dy / (float)size;
                    for (int y = hs; y < he; y++)
                        for (int xx = ws; xx < we; xx++) dxp[y * W + xx] += g;
                }
        }
}

/* ---- LRN across channels (Caffe's LRNLayer, ACROSS_CHANNELS) ---------------------------
 * scale_c = k + alpha/size * sum_{c' in window(c)} x_c'^2,  y_c = x_c * scale_c^-beta,
 * window(c) = [c - (size-1)/2, c - (size-1)/2 + size - 1] clipped to the channels. */

/* scale^-beta. beta = 0.75 (AlexNet's and GoogLeNet's LRN, Krizhevsky et al. 2012) as
 * 1 / (sqrt(s) * sqrt(sqrt(s))): three square roots cost a fraction of powf, which made LRN
 * the slowest layer of AlexNet on the CPU. scale >= k > 0, so the roots are defined. */
static inline float lrn_pow(float scale, float beta)
{
    if (beta == 0.75f) {
        float r = sqrtf(scale);
        return 1.0f / (r * sqrtf(r));
    }
    return powf(scale, -beta);
}

static void lrn_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int C = l->in_shape.c, P = l->in_shape.h * l->in_shape.w, size = l->lrn_size;
    int pre = (size - 1) / 2;
    float a = (float)(l->lrn_alpha / size), k = (float)l->lrn_k, beta = (float)l->lrn_beta;
    for (int b = 0; b < n->batch; b++) {
        const float *xb = x + (int64_t)b * C * P;
        float *sc = s->aux + (int64_t)b * C * P, *yb = s->out + (int64_t)b * C * P;
        for (int c = 0; c < C; c++) {
            float *scp = sc + (int64_t)c * P;
            for (int p = 0; p < P; p++) scp[p] = 0.0f;
            int lo = c - pre < 0 ? 0 : c - pre, hi = c - pre + size - 1;
            if (hi > C - 1) hi = C - 1;
            for (int cc = lo; cc <= hi; cc++) {
                const float *xp = xb + (int64_t)cc * P;
                for (int p = 0; p < P; p++) scp[p] += xp[p] * xp[p];
            }
            const float *xp = xb + (int64_t)c * P;
            float *yp = yb + (int64_t)c * P;
            for (int p = 0; p < P; p++) {
                scp[p] = k + a * scp[p];
                yp[p] = xp[p] * lrn_pow(scp[p], beta);
            }
        }
    }
}

static void lrn_backward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x, float *dx)
{
    int C = l->in_shape.c, P = l->in_shape.h * l->in_shape.w, size = l->lrn_size;
    int pre = (size - 1) / 2;
    float beta = (float)l->lrn_beta, coef = (float)(2.0 * l->lrn_alpha * l->lrn_beta / size);
    float *ratio = n->col; /* C x P scratch: dy * y / scale */
    ASSERT(n->col_count >= (int64_t)C * P, "lrn scratch too small");
    for (int b = 0; b < n->batch; b++) {
        const float *xb = x + (int64_t)b * C * P, *sc = s->aux + (int64_t)b * C * P;
        const float *yb = s->out + (int64_t)b * C * P, *dyb = s->dout + (int64_t)b * C * P;
        float *dxb = dx + (int64_t)b * C * P;
        for (int64_t i = 0; i < (int64_t)C * P; i++) ratio[i] = dyb[i] * yb[i] / sc[i];
        for (int c = 0; c < C; c++) {
            /* channels c' whose window holds c: c' - pre <= c <= c' - pre + size - 1 */
            int lo = c + pre - size + 1 < 0 ? 0 : c + pre - size + 1;
            int hi = c + pre > C - 1 ? C - 1 : c + pre;
            const float *xp = xb + (int64_t)c * P, *scp = sc + (int64_t)c * P;
            const float *dyp = dyb + (int64_t)c * P;
            float *dxp = dxb + (int64_t)c * P;
            for (int p = 0; p < P; p++) {
                float acc = 0.0f;
                for (int cc = lo; cc <= hi; cc++) acc += ratio[(int64_t)cc * P + p];
                dxp[p] += dyp[p] * lrn_pow(scp[p], beta) - coef * xp[p] * acc;
            }
        }
    }
}

/* ---- batchnorm: per channel over (batch, H, W) ---------------------------------------- */

static void bn_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int C = l->in_shape.c, P = l->in_shape.h * l->in_shape.w, N = n->batch;
    double cnt = (double)N * P;
    float mom = (float)l->bn_momentum;
    for (int c = 0; c < C; c++) {
        float mean, invstd;
        if (n->train) {
            double sum = 0.0, sq = 0.0;
            for (int b = 0; b < N; b++) {
                const float *xp = x + ((int64_t)b * C + c) * P;
                for (int p = 0; p < P; p++) sum += xp[p], sq += (double)xp[p] * xp[p];
            }
            double m = sum / cnt, var = sq / cnt - m * m;
            if (var < 0) var = 0;
            mean = (float)m;
            invstd = (float)(1.0 / sqrt(var + l->bn_eps));
            s->mean[c] = mean;
            s->invstd[c] = invstd;
            /* running variance uses the unbiased estimate (as PyTorch's BatchNorm does) */
            double unbiased = cnt > 1 ? var * cnt / (cnt - 1) : var;
            s->run_mean[c] = (1 - mom) * s->run_mean[c] + mom * (float)m;
            s->run_var[c] = (1 - mom) * s->run_var[c] + mom * (float)unbiased;
        } else {
            mean = s->run_mean[c];
            invstd = (float)(1.0 / sqrt((double)s->run_var[c] + l->bn_eps));
        }
        float g = s->w[c], sh = s->b ? s->b[c] : 0.0f;
        for (int b = 0; b < N; b++) {
            int64_t base = ((int64_t)b * C + c) * P;
            for (int p = 0; p < P; p++) {
                float xh = (x[base + p] - mean) * invstd;
                s->aux[base + p] = xh;
                s->out[base + p] = g * xh + sh;
            }
        }
    }
}

static void bn_backward(nnet_t *n, const layer_t *l, lstate_t *s, float *dx)
{
    int C = l->in_shape.c, P = l->in_shape.h * l->in_shape.w, N = n->batch;
    double cnt = (double)N * P;
    for (int c = 0; c < C; c++) {
        double dg = 0.0, dbeta = 0.0;
        for (int b = 0; b < N; b++) {
            int64_t base = ((int64_t)b * C + c) * P;
            for (int p = 0; p < P; p++) {
                dg += (double)s->dout[base + p] * s->aux[base + p];
                dbeta += s->dout[base + p];
            }
        }
        s->dw[c] = (float)dg;
        if (s->db) s->db[c] = (float)dbeta;
        if (!dx) continue;
        float g = s->w[c];
        if (n->train) {
            float k = (float)(g * s->invstd[c] / cnt);
            for (int b = 0; b < N; b++) {
                int64_t base = ((int64_t)b * C + c) * P;
                for (int p = 0; p < P; p++)
                    dx[base + p] += k * ((float)cnt * s->dout[base + p] - (float)dbeta -
                                         s->aux[base + p] * (float)dg);
            }
        } else {
            float k = (float)(g / sqrt((double)s->run_var[c] + l->bn_eps));
            for (int b = 0; b < N; b++) {
                int64_t base = ((int64_t)b * C + c) * P;
                for (int p = 0; p < P; p++) dx[base + p] += k * s->dout[base + p];
            }
        }
    }
}

/* ---- softmax with cross-entropy -------------------------------------------------------- */

static void softmax_loss_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int K = (int)s->in_count, N = n->batch;
    double total = 0.0;
    for (int b = 0; b < N; b++) {
        const float *xb = x + (int64_t)b * K;
        float *pb = s->out + (int64_t)b * K;
        float mx = xb[0];
        for (int j = 1; j < K; j++) mx = xb[j] > mx ? xb[j] : mx;
        double z = 0.0;
        for (int j = 0; j < K; j++) z += exp((double)xb[j] - mx);
        for (int j = 0; j < K; j++) pb[j] = (float)(exp((double)xb[j] - mx) / z);
        int y = n->labels[b];
        ASSERT(y >= 0 && y < K, "label %d out of range for %d classes (layer %s)", y, K,
               l->name);
        total += -((double)xb[y] - mx - log(z));
    }
    s->loss = l->loss_weight * total / N;
}

static void softmax_loss_backward(nnet_t *n, const layer_t *l, lstate_t *s, float *dx)
{
    int K = (int)s->in_count, N = n->batch;
    float scale = (float)(l->loss_weight / N);
    for (int b = 0; b < N; b++) {
        const float *pb = s->out + (int64_t)b * K;
        float *d = dx + (int64_t)b * K;
        for (int j = 0; j < K; j++) d[j] += scale * (pb[j] - (j == n->labels[b] ? 1.0f : 0.0f));
    }
}

/* ---- linear: fc over the B*S tokens of a sequence -------------------------------------- */

static void linear_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int N = n->batch * s->seq, M = l->out, K = s->dim;
    compute_sgemm(n->c, false, true, N, M, K, 1.0f, x, K, s->w, K, 0.0f, s->out, M);
    if (s->b)
        for (int t = 0; t < N; t++) vec_add(s->out + (int64_t)t * M, s->b, M);
}

/* dW = dY^T X over the tokens, written: a tied linear runs before its embed's backward,
 * which then adds the embedding's own gradient (nnet_new sets add_dw). */
static void linear_backward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x, float *dx)
{
    int N = n->batch * s->seq, M = l->out, K = s->dim;
    compute_sgemm(n->c, true, false, M, K, N, 1.0f, s->dout, M, x, K, 0.0f, s->dw, K);
    if (s->db) {
        memset(s->db, 0, (size_t)M * sizeof(float));
        for (int t = 0; t < N; t++) vec_add(s->db, s->dout + (int64_t)t * M, M);
    }
    if (dx) compute_sgemm(n->c, false, false, N, K, M, 1.0f, s->dout, M, s->w, K, 1.0f, dx, K);
}

static float *input_out(nnet_t *n, const layer_t *l, int k) { return n->ls[l->inputs[k]].out; }

/* doutput of input k, or NULL when it needs none (a data layer, unless input_grad) */
static float *input_dout(nnet_t *n, const layer_t *l, int k)
{
    bool need = n->input_grad || !layer_is_input(&n->m->layers[l->inputs[k]]);
    return need ? n->ls[l->inputs[k]].dout : NULL;
}

/* ---- dispatch ------------------------------------------------------------------------- */

void nnet_forward_layer(nnet_t *n, int li)
{
    const layer_t *l = &n->m->layers[li];
    lstate_t *s = &n->ls[li];
    if (l->type == LAYER_INPUT) return;
    const float *x = n->ls[l->inputs[0]].out;
    int64_t total = s->out_count * n->batch;
    switch (l->type) {
    case LAYER_CONV: conv_forward(n, l, s, x); break;
    case LAYER_FC: fc_forward(n, l, s, x); break;
    case LAYER_RELU:
        vec_relu(s->out, x, total);
        break;
    case LAYER_POOL: pool_forward(n, l, s, x); break;
    case LAYER_LRN: lrn_forward(n, l, s, x); break;
    case LAYER_DROPOUT:
        if (!n->train) {
            memcpy(s->out, x, (size_t)total * sizeof(float));
            break;
        }
        if (!n->frozen) {
            float keep = (float)(1.0 / (1.0 - l->dropout_ratio));
            for (int64_t i = 0; i < total; i++)
                s->aux[i] = rng_uniform(s->rng) < l->dropout_ratio ? 0.0f : keep;
        }
        vec_mul(s->out, x, s->aux, total);
        break;
    case LAYER_BATCHNORM: bn_forward(n, l, s, x); break;
    case LAYER_CONCAT: {
        int64_t off = 0;
        for (int k = 0; k < l->n_inputs; k++) {
            const lstate_t *in = &n->ls[l->inputs[k]];
            for (int b = 0; b < n->batch; b++)
                memcpy(s->out + b * s->out_count + off, in->out + b * in->out_count,
                       (size_t)in->out_count * sizeof(float));
            off += in->out_count;
        }
        ASSERT(off == s->out_count, "concat '%s': inputs do not fill the output", l->name);
        break;
    }
    case LAYER_ADD:
        memcpy(s->out, x, (size_t)total * sizeof(float));
        for (int k = 1; k < l->n_inputs; k++)
            n->c->ops->saxpy(n->c->ctx, total, 1.0f, n->ls[l->inputs[k]].out, s->out);
        break;
    case LAYER_SOFTMAX_LOSS: softmax_loss_forward(n, l, s, x); break;
    case LAYER_TOKENS: break;
    case LAYER_EMBED:
        seq_embed_forward(x, (int64_t)n->batch * s->seq, s->w, l->vocab, l->out, s->out);
        break;
    case LAYER_POSEMBED: seq_posembed_forward(x, s->w, n->batch, s->seq, s->dim, s->out); break;
    case LAYER_CLSTOKEN: seq_clstoken_forward(x, s->w, n->batch, s->seq, s->dim, s->out); break;
    case LAYER_TO_SEQ: seq_to_seq_forward(x, n->batch, s->dim, s->seq, s->out); break;
    case LAYER_SELECT:
        seq_select_forward(x, n->batch, s->seq, s->dim, l->select_pos, s->out);
        break;
    case LAYER_LINEAR: linear_forward(n, l, s, x); break;
    case LAYER_LAYERNORM:
        seq_layernorm_forward(x, (int64_t)n->batch * s->seq, s->dim, l->bn_eps, s->w, s->b,
                              s->out, s->aux, s->aux2);
        break;
    case LAYER_GELU: seq_gelu_forward(x, total, l->gelu_tanh, s->out); break;
    case LAYER_TANH: seq_tanh_forward(x, total, s->out); break;
    case LAYER_ATTENTION:
        seq_attention_forward(n->c, x, input_out(n, l, 1), input_out(n, l, 2), n->batch, s->seq,
                              s->dim, l->heads, l->causal, s->aux, s->out);
        break;
    case LAYER_SEQ_LOSS: {
        int64_t tokens = (int64_t)n->batch * s->seq;
        s->loss = l->loss_weight *
                  seq_loss_forward(x, tokens, s->dim, n->labels, s->out) / (double)tokens;
        break;
    }
    default: ASSERT(0, "layer type %d has no forward", (int)l->type);
    }
}

void nnet_backward_begin(nnet_t *n)
{
    for (int i = 0; i < n->m->n_layers; i++)
        memset(n->ls[i].dout, 0, (size_t)(n->ls[i].out_count * n->batch) * sizeof(float));
}

void nnet_backward_layer(nnet_t *n, int li)
{
    const layer_t *l = &n->m->layers[li];
    lstate_t *s = &n->ls[li];
    if (l->type == LAYER_INPUT) return;
    const float *x = n->ls[l->inputs[0]].out;
    float *dx = s->need_dx ? n->ls[l->inputs[0]].dout : NULL;
    int64_t total = s->out_count * n->batch;
    switch (l->type) {
    case LAYER_CONV: conv_backward(n, l, s, x, dx); break;
    case LAYER_FC: fc_backward(n, l, s, x, dx); break;
    case LAYER_RELU:
        if (dx)
            vec_relu_grad_add(dx, x, s->dout, total);
        break;
    case LAYER_POOL:
        if (dx) pool_backward(n, l, s, dx);
        break;
    case LAYER_LRN:
        if (dx) lrn_backward(n, l, s, x, dx);
        break;
    case LAYER_DROPOUT:
        if (dx) {
            if (n->train)
                vec_mul_add(dx, s->dout, s->aux, total);
            else
                vec_add(dx, s->dout, total);
        }
        break;
    case LAYER_BATCHNORM: bn_backward(n, l, s, dx); break;
    case LAYER_CONCAT: {
        int64_t off = 0;
        for (int k = 0; k < l->n_inputs; k++) {
            lstate_t *in = &n->ls[l->inputs[k]];
            bool need = n->input_grad || n->m->layers[l->inputs[k]].type != LAYER_INPUT;
            if (need)
                for (int b = 0; b < n->batch; b++) {
                    float *d = in->dout + b * in->out_count;
                    const float *g = s->dout + b * s->out_count + off;
                    for (int64_t i = 0; i < in->out_count; i++) d[i] += g[i];
                }
            off += in->out_count;
        }
        break;
    }
    case LAYER_ADD:
        for (int k = 0; k < l->n_inputs; k++) {
            bool need = n->input_grad || n->m->layers[l->inputs[k]].type != LAYER_INPUT;
            if (need)
                n->c->ops->saxpy(n->c->ctx, total, 1.0f, s->dout, n->ls[l->inputs[k]].dout);
        }
        break;
    case LAYER_SOFTMAX_LOSS:
        if (dx) softmax_loss_backward(n, l, s, dx);
        break;
    case LAYER_TOKENS: break;
    case LAYER_EMBED: /* token ids have no gradient */
        if (!s->add_dw) memset(s->dw, 0, (size_t)l->weights * sizeof(float));
        seq_embed_backward(x, (int64_t)n->batch * s->seq, s->dout, l->out, s->dw);
        break;
    case LAYER_POSEMBED: seq_posembed_backward(s->dout, n->batch, s->seq, s->dim, s->dw, dx); break;
    case LAYER_CLSTOKEN: seq_clstoken_backward(s->dout, n->batch, s->seq, s->dim, s->dw, dx); break;
    case LAYER_TO_SEQ:
        if (dx) seq_to_seq_backward(s->dout, n->batch, s->dim, s->seq, dx);
        break;
    case LAYER_SELECT:
        if (dx) seq_select_backward(s->dout, n->batch, s->seq, s->dim, l->select_pos, dx);
        break;
    case LAYER_LINEAR: linear_backward(n, l, s, x, dx); break;
    case LAYER_LAYERNORM:
        seq_layernorm_backward(s->dout, (int64_t)n->batch * s->seq, s->dim, s->w, s->aux,
                               s->aux2, s->dw, s->db, dx);
        break;
    case LAYER_GELU:
        if (dx) seq_gelu_backward(x, s->dout, total, l->gelu_tanh, dx);
        break;
    case LAYER_TANH:
        if (dx) seq_tanh_backward(s->out, s->dout, total, dx);
        break;
    case LAYER_ATTENTION:
        seq_attention_backward(n->c, x, input_out(n, l, 1), input_out(n, l, 2), s->aux, s->dout,
                               n->batch, s->seq, s->dim, l->heads, input_dout(n, l, 0),
                               input_dout(n, l, 1), input_dout(n, l, 2), n->col);
        break;
    case LAYER_SEQ_LOSS:
        if (dx) {
            int64_t tokens = (int64_t)n->batch * s->seq;
            seq_loss_backward(s->out, tokens, s->dim, n->labels,
                              (float)(l->loss_weight / (double)tokens), dx);
        }
        break;
    default: ASSERT(0, "layer type %d has no backward", (int)l->type);
    }
}

double nnet_forward(nnet_t *n)
{
    double loss = 0.0;
    for (int i = 0; i < n->m->n_layers; i++) {
        nnet_forward_layer(n, i);
        if (layer_is_loss(&n->m->layers[i])) loss += n->ls[i].loss;
    }
    return loss;
}

void nnet_backward(nnet_t *n)
{
    nnet_backward_begin(n);
    for (int i = n->m->n_layers - 1; i >= 1; i--) nnet_backward_layer(n, i);
}

int nnet_count_correct(const nnet_t *n)
{
    int last = -1;
    for (int i = 0; i < n->m->n_layers; i++)
        if (layer_is_loss(&n->m->layers[i])) last = i;
    ASSERT(last >= 0, "no loss layer");
    const lstate_t *s = &n->ls[last];
    /* a seq_loss's rows are tokens (classes: its input's features) */
    int64_t rows = (int64_t)n->batch * n->label_count;
    int64_t classes = n->m->layers[last].type == LAYER_SEQ_LOSS ? s->dim : s->out_count;
    int64_t correct = 0;
    for (int64_t b = 0; b < rows; b++) {
        const float *p = s->out + b * classes;
        int arg = 0;
        for (int j = 1; j < classes; j++)
            if (p[j] > p[arg]) arg = j;
        correct += arg == n->labels[b];
    }
    /* per sample: the fraction of its tokens predicted, summed (rounded) */
    return (int)((correct + n->label_count / 2) / n->label_count);
}

void nnet_fc_factors(nnet_t *n, int l, const float **x, const float **dy, int *in_units,
                    int *out_units)
{
    const layer_t *ly = &n->m->layers[l];
    ASSERT(layer_sf_rows(ly) > 0, "layer '%s' has no sufficient factors", ly->name);
    *x = n->ls[ly->inputs[0]].out;
    *dy = n->ls[l].dout;
    *in_units = ly->type == LAYER_LINEAR ? n->ls[l].dim : (int)n->ls[l].in_count;
    *out_units = ly->out;
}

size_t nnet_rng_state_bytes(const nnet_t *n)
{
    size_t bytes = 0;
    for (int i = 0; i < n->m->n_layers; i++)
        if (n->ls[i].rng) bytes += rng_state_bytes(n->ls[i].rng);
    return bytes;
}

void nnet_rng_state_save(const nnet_t *n, void *out)
{
    unsigned char *p = out;
    for (int i = 0; i < n->m->n_layers; i++)
        if (n->ls[i].rng) {
            rng_state_save(n->ls[i].rng, p);
            p += rng_state_bytes(n->ls[i].rng);
        }
}

void nnet_rng_state_restore(nnet_t *n, const void *in)
{
    const unsigned char *p = in;
    for (int i = 0; i < n->m->n_layers; i++)
        if (n->ls[i].rng) {
            rng_state_restore(n->ls[i].rng, p);
            p += rng_state_bytes(n->ls[i].rng);
        }
}
