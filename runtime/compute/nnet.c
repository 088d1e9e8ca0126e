/* nnet: see nnet.h. One file holds the per-layer forward and backward code, the layer contract
 * of Caffe (Jia et al. 2014): conv as im2col + GEMM per sample, pools with Caffe's window
 * rules, LRN across channels, batchnorm with batch statistics in training.
 *
 * A backend may take a convolution's forward pass or input gradient over with a kernel of
 * its own (compute_ops_t conv_forward, conv_data_grad: the CPU backend's Winograd, conv_cpu.c)
 * for the shapes it takes; the rest, and the weight gradient, are im2col + GEMM.
 *
 * Conv stays one GEMM per sample (not one over the whole batch's im2col matrix): a sample's
 * matrix fits in L2, the batch's does not, and with OpenBLAS on this machine's CPU the batched
 * GEMM was slower for LeNet's conv2 at batch 64 (forward 15.8 vs 13.5 ms, weight gradient
 * 23.4 vs 13.9 ms, one thread). */
#include "runtime/compute/nnet.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/rng.h"
#include "runtime/compute/seq_layers.h"
#include "runtime/compute/window_attn.h"

typedef struct {
    float *out, *dout;       /* batch x out_count */
    int64_t out_count;       /* per sample (softmax_loss: in_count, the probabilities) */
    int64_t in_count;        /* per sample, of inputs[0] */
    float *w, *b, *dw, *db;  /* into the arena; NULL when absent */
    int kh, kw, sh, sw, ph, pw; /* pool: effective window (global resolved) */
    int *argmax;             /* max pool: batch x out_count input index (-1: none); backend */
    float *aux;              /* lrn: scale; dropout: mask; bn, layernorm: xhat; attention: P */
    float *aux2;             /* layernorm: invstd per token */
    int seq, dim;            /* sequence layers: positions and features of inputs[0] */
    bool add_dw;             /* embed read by a tied linear: its backward adds to dw */
    bool no_dw;              /* FC or linear: dw left alone (nnet_set_weight_grad) */
    float *mean, *invstd;    /* bn: per channel, of the last training batch */
    float *run_mean, *run_var; /* bn: into arena state */
    double loss;             /* softmax_loss */
    rng_t *rng;              /* dropout */
    bool need_dx;            /* propagate to inputs */
} lstate_t;

struct nnet {
    const model_t *m;
    compute_t *c;
    const compute_layer_ops_t *lo; /* c->layers */
    int batch;
    arena_t arena;
    lstate_t *ls;
    int *labels;             /* batch x label_count, host */
    int label_count;         /* per sample: 1, or the positions of a seq_loss */
    /* A backend whose buffers are not host memory: the caller fills host copies of the input
     * and labels, sent to the device before the next forward (staged); dropout masks are
     * drawn on the host (one RNG stream for both backends) and sent. */
    bool host;               /* compute_is_host(c) */
    float *input_host;       /* !host: batch x in_count, what nnet_input() returns */
    int *labels_dev;         /* !host: backend copy of labels; host: labels itself */
    bool staged;             /* input_host/labels changed since the last upload */
    float *host_tmp;         /* !host: masks and downloads, host_tmp_count floats */
    int64_t host_tmp_count;
    float *col;              /* conv scratch: (C*kh*kw + 1) x P, the last row for the bias */
    int64_t col_count;
    float *wext;             /* conv scratch: W|b or dW|db, O x (K+1) */
    int64_t wext_count;
    bool train, frozen, input_grad;
    float loss_scale;        /* the losses' output gradient times it (nnet_set_loss_scale) */
};

static float *dev_floats(nnet_t *n, int64_t count) { return compute_alloc_floats(n->c, count); }

/* What the runtime cannot run: a batch under 1, no input layer first or a second one, a
 * layer that reads a loss, losses that want different labels per sample. 0, with the labels
 * per sample in *label_count, or -1 with the reason in err. */
static int model_check(const model_t *m, int batch, int *label_count, char *err, size_t errlen)
{
    if (batch < 1) {
        snprintf(err, errlen, "batch must be >= 1 (got %d)", batch);
        return -1;
    }
    if (m->n_layers < 2 || !layer_is_input(&m->layers[0])) {
        snprintf(err, errlen, "%s: a network needs an input layer first", m->path);
        return -1;
    }
    for (int i = 1; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        if (layer_is_input(l)) {
            snprintf(err, errlen, "%s:%d: the runtime takes one input layer ('%s' is a second)",
                     m->path, l->src_line, l->name);
            return -1;
        }
        for (int k = 0; k < l->n_inputs; k++) {
            const layer_t *in = &m->layers[l->inputs[k]];
            if (layer_is_loss(in)) {
                snprintf(err, errlen, "%s:%d: layer '%s' reads the loss layer '%s'", m->path,
                         l->src_line, l->name, in->name);
                return -1;
            }
        }
    }
    int labels = 0, loss_kinds = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        if (!layer_is_loss(l)) continue;
        int want = l->type == LAYER_SEQ_LOSS ? l->in_shape.w : 1;
        loss_kinds |= l->type == LAYER_SEQ_LOSS ? 2 : 1;
        if ((labels && want != labels) || loss_kinds == 3) {
            snprintf(err, errlen, "%s:%d: loss '%s' wants %d labels per sample, an earlier loss "
                     "%d: the runtime takes one kind", m->path, l->src_line, l->name, want,
                     labels);
            return -1;
        }
        labels = want;
    }
    *label_count = labels ? labels : 1;
    return 0;
}

/* Layer i's state every type has: its sizes, its output and gradient buffers, and its
 * parameters' place in the arena. */
static void layer_state_common(nnet_t *n, int i)
{
    const model_t *m = n->m;
    const layer_t *l = &m->layers[i];
    lstate_t *s = &n->ls[i];
    s->in_count = i > 0 ? shape_count(m->layers[l->inputs[0]].out_shape) : 0;
    s->out_count = layer_is_loss(l) ? s->in_count : shape_count(l->out_shape);
    s->out = dev_floats(n, s->out_count * n->batch);
    s->dout = dev_floats(n, s->out_count * n->batch);
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
}

/* Layer i's state of its type: its scratch, its share of the shared scratch (col, wext,
 * host_tmp: the largest layer's), a dropout's random stream from seed. */
static void layer_state_typed(nnet_t *n, int i, uint64_t seed)
{
    const layer_t *l = &n->m->layers[i];
    lstate_t *s = &n->ls[i];
    int batch = n->batch;
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
            s->argmax = n->c->ops->alloc(n->c->ctx, (size_t)(s->out_count * batch) * sizeof(int));
        break;
    case LAYER_LRN:
    case LAYER_DROPOUT:
        if (l->type == LAYER_LRN && s->out_count > n->col_count)
            n->col_count = s->out_count; /* lrn backward scratch: one sample */
        s->aux = dev_floats(n, s->out_count * batch);
        if (l->type == LAYER_DROPOUT) {
            s->rng = rng_new(seed, 0x64726f70ULL + (uint64_t)i);
            if (s->out_count * batch > n->host_tmp_count) n->host_tmp_count = s->out_count * batch;
        }
        break;
    case LAYER_BATCHNORM: {
        int ch = l->out_shape.c;
        s->aux = dev_floats(n, s->out_count * batch);
        s->mean = dev_floats(n, ch);
        s->invstd = dev_floats(n, ch);
        s->run_mean = n->arena.state + n->arena.state_offset[i];
        s->run_var = s->run_mean + ch;
        n->lo->fill(n->c->ctx, ch, 1.0f, s->run_var);
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
        s->aux = dev_floats(n, s->out_count * batch);
        s->aux2 = dev_floats(n, (int64_t)s->seq * batch);
        break;
    case LAYER_WINATTN:
        s->aux = dev_floats(n, winattn_aux_count(l) * batch);
        if (winattn_scratch_count(l) > n->col_count) n->col_count = winattn_scratch_count(l);
        break;
    case LAYER_ATTENTION: {
        int64_t ss = (int64_t)s->seq * s->seq;
        s->aux = dev_floats(n, ss * l->heads * batch);
        if (ss > n->col_count) n->col_count = ss;
        break;
    }
    default:
        break;
    }
}

/* A device backend: host buffers for the input, the labels and the losses' copies back,
 * and the labels on the device. */
static void staging_init(nnet_t *n)
{
    const model_t *m = n->m;
    int64_t last_loss = 0;
    for (int i = 0; i < m->n_layers; i++)
        if (layer_is_loss(&m->layers[i])) last_loss = n->ls[i].out_count * n->batch;
    if (last_loss > n->host_tmp_count) n->host_tmp_count = last_loss;
    n->input_host = xcalloc((size_t)(n->ls[0].out_count * n->batch), sizeof(float));
    n->labels_dev =
        n->c->ops->alloc(n->c->ctx, (size_t)n->batch * n->label_count * sizeof(int));
    n->host_tmp = xcalloc((size_t)(n->host_tmp_count > 0 ? n->host_tmp_count : 1),
                          sizeof(float));
    n->staged = true;
}

nnet_t *nnet_new(const model_t *m, int batch, compute_t *c, uint64_t seed, char *err,
                 size_t errlen)
{
    int label_count;
    if (model_check(m, batch, &label_count, err, errlen))
        return NULL;
    nnet_t *n = xcalloc(1, sizeof *n);
    n->loss_scale = 1.0f;
    n->m = m;
    n->label_count = label_count;
    n->c = c;
    n->lo = c->layers;
    n->host = compute_is_host(c);
    n->batch = batch;
    n->train = true;
    arena_init(&n->arena, m, c);
    n->ls = xcalloc((size_t)m->n_layers, sizeof *n->ls);
    n->labels = xcalloc((size_t)batch * label_count, sizeof *n->labels);
    for (int i = 0; i < m->n_layers; i++) {
        layer_state_common(n, i);
        layer_state_typed(n, i, seed);
    }
    n->col = dev_floats(n, n->col_count > 0 ? n->col_count : 1);
    n->wext = dev_floats(n, n->wext_count > 0 ? n->wext_count : 1);
    if (n->host) n->labels_dev = n->labels;
    else staging_init(n);
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
        if (s->argmax) compute_release(n->c, s->argmax);
        rng_destroy(&s->rng);
    }
    compute_release(n->c, n->col);
    compute_release(n->c, n->wext);
    if (!n->host) {
        compute_release(n->c, n->labels_dev);
        free(n->input_host);
        free(n->host_tmp);
    }
    arena_fini(&n->arena);
    free(n->ls);
    free(n->labels);
    free(n);
    *np = NULL;
}

const model_t *nnet_model(const nnet_t *n) { return n->m; }
arena_t *nnet_arena(nnet_t *n) { return &n->arena; }
int nnet_batch(const nnet_t *n) { return n->batch; }
float *nnet_input(nnet_t *n)
{
    n->staged = true;
    return n->host ? n->ls[0].out : n->input_host;
}
int *nnet_labels(nnet_t *n)
{
    n->staged = true;
    return n->labels;
}
int nnet_label_count(const nnet_t *n) { return n->label_count; }
void nnet_set_train(nnet_t *n, bool train) { n->train = train; }
void nnet_set_dropout_frozen(nnet_t *n, bool frozen) { n->frozen = frozen; }
void nnet_set_loss_scale(nnet_t *n, float scale) { n->loss_scale = scale; }
void nnet_set_weight_grad(nnet_t *n, int l, bool on)
{
    const layer_t *ly = &n->m->layers[l];
    ASSERT((ly->type == LAYER_FC || ly->type == LAYER_LINEAR) && !ly->tied,
           "layer '%s': only an untied FC or linear layer can leave its weight gradient out",
           ly->name);
    n->ls[l].no_dw = !on;
}
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

static ke_window_t conv_window(const layer_t *l)
{
    return (ke_window_t){.h = l->in_shape.h, .w = l->in_shape.w, .oh = l->out_shape.h,
                         .ow = l->out_shape.w, .kh = l->kernel_h, .kw = l->kernel_w,
                         .sh = l->stride_h, .sw = l->stride_w, .ph = l->pad_h, .pw = l->pad_w};
}

/* The forward pass of the whole batch through the backend's own kernel, where it has one for
 * this shape (the CPU backend: Winograd for 5x5); false: the caller computes it. */
static bool conv_forward_by_backend(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    if (!n->c->ops->conv_forward) return false;
    ke_window_t k = conv_window(l);
    return n->c->ops->conv_forward(n->c->ctx, &k, n->batch, l->in_shape.c, l->out, l->groups,
                                   s->w, s->b, x, s->out);
}

/* The same for the input gradient (the CPU backend: stride 1, as a convolution of dy). */
static bool conv_data_grad_by_backend(nnet_t *n, const layer_t *l, lstate_t *s, float *dx)
{
    if (!n->c->ops->conv_data_grad) return false;
    ke_window_t k = conv_window(l);
    return n->c->ops->conv_data_grad(n->c->ctx, &k, n->batch, l->in_shape.c, l->out, l->groups,
                                     s->w, s->dout, dx);
}

static void conv_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int C = l->in_shape.c, H = l->in_shape.h, W = l->in_shape.w;
    int O = l->out, P = l->out_shape.h * l->out_shape.w, G = l->groups;
    int Cg = C / G, Og = O / G, K = Cg * l->kernel_h * l->kernel_w;
    bool pw = conv_is_pointwise(l);
    if (!pw && conv_forward_by_backend(n, l, s, x)) return;
    if (conv_bias_fused(l, s)) {
        float *wb = n->wext; /* (O, K+1): W | b */
        n->lo->copy_rows(n->c->ctx, O, K, wb, K + 1, s->w, K);
        n->lo->copy_rows(n->c->ctx, O, 1, wb + K, K + 1, s->b, 1);
        n->lo->fill(n->c->ctx, P, 1.0f, n->col + (int64_t)K * P);
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
        compute_sgemm_strided(n->c, false, false, Og, P, K, 1.0f, s->w, K, (int64_t)Og * K,
                              col, P, (int64_t)K * P, 0.0f, yb, P, (int64_t)Og * P, G);
    }
    if (s->b) n->lo->bias_planes(n->c->ctx, n->batch, O, P, s->b, s->out);
}

/* The same for the filters' gradient (the CPU backend: Winograd for 5x5). */
static bool conv_weight_grad_by_backend(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    if (!n->c->ops->conv_weight_grad) return false;
    ke_window_t k = conv_window(l);
    return n->c->ops->conv_weight_grad(n->c->ctx, &k, n->batch, l->in_shape.c, l->out,
                                       l->groups, x, s->dout, s->dw);
}

static void conv_backward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x, float *dx)
{
    int C = l->in_shape.c, H = l->in_shape.h, W = l->in_shape.w;
    int O = l->out, P = l->out_shape.h * l->out_shape.w, G = l->groups;
    int Cg = C / G, Og = O / G, K = Cg * l->kernel_h * l->kernel_w;
    bool pw = conv_is_pointwise(l);
    if (dx && !pw && conv_data_grad_by_backend(n, l, s, dx)) dx = NULL; /* done */
    bool dw_done = !pw && conv_weight_grad_by_backend(n, l, s, x);
    bool fused = !dw_done && conv_bias_fused(l, s);
    if (fused) n->lo->fill(n->c->ctx, P, 1.0f, n->col + (int64_t)K * P);
    for (int b = 0; b < n->batch && !(dw_done && !dx); b++) {
        const float *xb = x + (int64_t)b * C * H * W;
        const float *dyb = s->dout + (int64_t)b * O * P;
        float beta = b == 0 ? 0.0f : 1.0f; /* the first sample overwrites, the rest add */
        const float *col = xb;
        if (!pw && !dw_done) {
            conv_im2col(n, l, xb);
            col = n->col;
        }
        if (fused) {
            /* dW|db (O, K+1) += dy (O,P) [col; 1]^T */
            compute_sgemm(n->c, false, true, O, K + 1, P, 1.0f, dyb, P, col, P, beta, n->wext,
                          K + 1);
        } else if (!dw_done) {
            compute_sgemm_strided(n->c, false, true, Og, K, P, 1.0f, dyb, P, (int64_t)Og * P,
                                  col, P, (int64_t)K * P, beta, s->dw, K, (int64_t)Og * K, G);
        }
        if (!dx) continue;
        float *dxb = dx + (int64_t)b * C * H * W;
        if (pw) {
            compute_sgemm_strided(n->c, true, false, K, P, Og, 1.0f, s->w, K, (int64_t)Og * K,
                                  dyb, P, (int64_t)Og * P, 1.0f, dxb, P, (int64_t)K * P, G);
        } else {
            /* overwrites the first G*K rows of col; the ones row stays */
            compute_sgemm_strided(n->c, true, false, K, P, Og, 1.0f, s->w, K, (int64_t)Og * K,
                                  dyb, P, (int64_t)Og * P, 0.0f, n->col, P, (int64_t)K * P, G);
            n->c->ops->col2im(n->c->ctx, n->col, C, H, W, l->kernel_h, l->kernel_w, l->pad_h,
                              l->pad_w, l->stride_h, l->stride_w, l->out_shape.h,
                              l->out_shape.w, dxb);
        }
    }
    if (fused) {
        n->lo->copy_rows(n->c->ctx, O, K, s->dw, K, n->wext, K + 1);
        n->lo->copy_rows(n->c->ctx, O, 1, s->db, 1, n->wext + K, K + 1);
    } else if (s->db) {
        n->c->ops->zero(n->c->ctx, s->db, (size_t)O * sizeof(float));
        n->lo->bias_planes_grad(n->c->ctx, n->batch, O, P, s->dout, s->db);
    }
}

/* ---- fully connected: y (N,M) = x (N,K) W^T + b, W (M,K) ------------------------------ */

static void fc_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int N = n->batch, M = l->out, K = (int)s->in_count;
    compute_sgemm(n->c, false, true, N, M, K, 1.0f, x, K, s->w, K, 0.0f, s->out, M);
    if (s->b) n->lo->add_rows(n->c->ctx, N, M, s->out, M, s->b, 0);
}

static void fc_backward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x, float *dx)
{
    int N = n->batch, M = l->out, K = (int)s->in_count;
    if (!s->no_dw)
        compute_sgemm(n->c, true, false, M, K, N, 1.0f, s->dout, M, x, K, 0.0f, s->dw, K);
    if (s->db) n->lo->sum_rows(n->c->ctx, N, M, s->dout, M, s->db);
    if (dx) compute_sgemm(n->c, false, false, N, K, M, 1.0f, s->dout, M, s->w, K, 1.0f, dx, K);
}

/* ---- pooling, LRN, batch norm, softmax with cross-entropy: backend operations -------- */

static ke_window_t pool_window(const layer_t *l, const lstate_t *s)
{
    return (ke_window_t){.h = l->in_shape.h, .w = l->in_shape.w, .oh = l->out_shape.h,
                         .ow = l->out_shape.w, .kh = s->kh, .kw = s->kw, .sh = s->sh,
                         .sw = s->sw, .ph = s->ph, .pw = s->pw};
}

static void pool_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    ke_window_t k = pool_window(l, s);
    n->lo->pool_forward(n->c->ctx, &k, (int64_t)n->batch * l->in_shape.c, l->pool == POOL_AVG,
                        x, s->out, s->argmax);
}

static void pool_backward(nnet_t *n, const layer_t *l, lstate_t *s, float *dx)
{
    ke_window_t k = pool_window(l, s);
    n->lo->pool_backward(n->c->ctx, &k, (int64_t)n->batch * l->in_shape.c, l->pool == POOL_AVG,
                         s->dout, s->argmax, dx);
}

static void lrn_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    n->lo->lrn_forward(n->c->ctx, n->batch, l->in_shape.c, (int64_t)l->in_shape.h * l->in_shape.w,
                       l->lrn_size, l->lrn_alpha, l->lrn_beta, l->lrn_k, x, s->aux, s->out);
}

static void lrn_backward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x, float *dx)
{
    int64_t P = (int64_t)l->in_shape.h * l->in_shape.w;
    ASSERT(n->col_count >= l->in_shape.c * P, "lrn scratch too small");
    n->lo->lrn_backward(n->c->ctx, n->batch, l->in_shape.c, P, l->lrn_size, l->lrn_alpha,
                        l->lrn_beta, x, s->aux, s->out, s->dout, n->col, dx);
}

static void bn_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    n->lo->bn_forward(n->c->ctx, n->batch, l->in_shape.c, (int64_t)l->in_shape.h * l->in_shape.w,
                      n->train, l->bn_eps, (float)l->bn_momentum, x, s->w, s->b, s->run_mean,
                      s->run_var, s->mean, s->invstd, s->aux, s->out);
}

static void bn_backward(nnet_t *n, const layer_t *l, lstate_t *s, float *dx)
{
    n->lo->bn_backward(n->c->ctx, n->batch, l->in_shape.c, (int64_t)l->in_shape.h * l->in_shape.w,
                       n->train, l->bn_eps, s->w, s->run_var, s->invstd, s->aux, s->dout, s->dw,
                       s->db, dx);
}

/* The labels a loss of k classes reads are checked on the host, before any backend sees
 * them: -1 (ignored) only for a seq_loss. */
static void check_labels(const nnet_t *n, const layer_t *l, int64_t rows, int k)
{
    bool seq = l->type == LAYER_SEQ_LOSS;
    for (int64_t r = 0; r < rows; r++) {
        int y = n->labels[r];
        if (seq) ASSERT(y < k, "target %d outside a vocabulary of %d", y, k);
        else ASSERT(y >= 0 && y < k, "label %d out of range for %d classes (layer %s)", y, k,
                    l->name);
    }
}

static void softmax_loss_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int K = (int)s->in_count, N = n->batch;
    check_labels(n, l, N, K);
    double total = n->lo->softmax_xent_forward(n->c->ctx, N, K, x, n->labels_dev, s->out);
    s->loss = l->loss_weight * total / N;
}

static void softmax_loss_backward(nnet_t *n, const layer_t *l, lstate_t *s, float *dx)
{
    int K = (int)s->in_count, N = n->batch;
    float scale = (float)(l->loss_weight / N) * n->loss_scale;
    n->lo->softmax_xent_backward(n->c->ctx, N, K, s->out, n->labels_dev, scale, dx);
}

/* ---- linear: fc over the B*S tokens of a sequence -------------------------------------- */

static void linear_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    int N = n->batch * s->seq, M = l->out, K = s->dim;
    compute_sgemm(n->c, false, true, N, M, K, 1.0f, x, K, s->w, K, 0.0f, s->out, M);
    if (s->b) n->lo->add_rows(n->c->ctx, N, M, s->out, M, s->b, 0);
}

/* dW = dY^T X over the tokens, written: a tied linear runs before its embed's backward,
 * which then adds the embedding's own gradient (nnet_new sets add_dw). */
static void linear_backward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x, float *dx)
{
    int N = n->batch * s->seq, M = l->out, K = s->dim;
    if (!s->no_dw)
        compute_sgemm(n->c, true, false, M, K, N, 1.0f, s->dout, M, x, K, 0.0f, s->dw, K);
    if (s->db) n->lo->sum_rows(n->c->ctx, N, M, s->dout, M, s->db);
    if (dx) compute_sgemm(n->c, false, false, N, K, M, 1.0f, s->dout, M, s->w, K, 1.0f, dx, K);
}

static float *input_out(nnet_t *n, const layer_t *l, int k) { return n->ls[l->inputs[k]].out; }

/* doutput of input k, or NULL when it needs none (a data layer, unless input_grad) */
static float *input_dout(nnet_t *n, const layer_t *l, int k)
{
    bool need = n->input_grad || !layer_is_input(&n->m->layers[l->inputs[k]]);
    return need ? n->ls[l->inputs[k]].dout : NULL;
}

/* ---- act, mul, slice, shuffle, to_image, scale ------------------------------------------ */

/* act_t's function as kernels_elementwise.h numbers it */
static int act_kernel(act_t a)
{
    switch (a) {
    case ACT_SIGMOID: return KE_ACT_SIGMOID;
    case ACT_SILU: return KE_ACT_SILU;
    case ACT_HARDSIGMOID: return KE_ACT_HARDSIGMOID;
    case ACT_HARDSWISH: return KE_ACT_HARDSWISH;
    case ACT_CLIP: return KE_ACT_CLIP;
    }
    ASSERT(0, "bad act %d", (int)a);
    return -1;
}

/* mul's rows: one factor of s per plane (a C x 1 x 1 gate) or per element (s like x) */
static void mul_rows_of(const nnet_t *n, const layer_t *l, int64_t *rows, int64_t *p)
{
    const lstate_t *s = &n->ls[l->inputs[1]], *x = &n->ls[l->inputs[0]];
    *p = s->out_count == x->out_count ? 1 : (int64_t)l->in_shape.h * l->in_shape.w;
    *rows = x->out_count / *p * n->batch;
}

static void zoo_forward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x)
{
    void *ctx = n->c->ctx;
    const compute_layer_ops_t *lo = n->lo;
    int64_t total = s->out_count * n->batch, plane = (int64_t)l->in_shape.h * l->in_shape.w;
    switch (l->type) {
    case LAYER_ACT:
        lo->act_forward(ctx, total, act_kernel(l->act), l->act_a, l->act_b, x, s->out);
        break;
    case LAYER_MUL: {
        int64_t rows, p;
        mul_rows_of(n, l, &rows, &p);
        lo->mul_rows(ctx, rows, p, x, input_out(n, l, 1), s->out);
        break;
    }
    case LAYER_SLICE:
        lo->copy_rows(ctx, n->batch, s->out_count, s->out, s->out_count,
                      x + (int64_t)l->slice_from * plane, s->in_count);
        break;
    case LAYER_SHUFFLE:
        lo->shuffle_channels(ctx, n->batch, l->groups, l->in_shape.c / l->groups, plane, x,
                             s->out, false);
        break;
    case LAYER_TO_IMAGE: /* B x S x D -> B x D x S */
        lo->transpose(ctx, n->batch, s->seq, s->dim, x, s->out, false);
        break;
    case LAYER_SCALE: /* each sample's channels times w */
        for (int b = 0; b < n->batch; b++)
            lo->mul_rows(ctx, l->in_shape.c, plane, x + b * s->in_count, s->w,
                         s->out + b * s->out_count);
        break;
    default: ASSERT(0, "layer type %d has no forward", (int)l->type);
    }
}

/* dx NULL: input 0 needs no gradient */
static void zoo_backward(nnet_t *n, const layer_t *l, lstate_t *s, const float *x, float *dx)
{
    void *ctx = n->c->ctx;
    const compute_layer_ops_t *lo = n->lo;
    int64_t total = s->out_count * n->batch, plane = (int64_t)l->in_shape.h * l->in_shape.w;
    switch (l->type) {
    case LAYER_ACT:
        if (dx)
            lo->act_backward(ctx, total, act_kernel(l->act), l->act_a, l->act_b, x, s->dout,
                             dx);
        break;
    case LAYER_MUL: {
        int64_t rows, p;
        mul_rows_of(n, l, &rows, &p);
        lo->mul_rows_grad(ctx, rows, p, x, input_out(n, l, 1), s->dout, dx,
                          input_dout(n, l, 1));
        break;
    }
    case LAYER_SLICE:
        if (dx)
            lo->add_rows(ctx, n->batch, s->out_count, dx + (int64_t)l->slice_from * plane,
                         s->in_count, s->dout, s->out_count);
        break;
    case LAYER_SHUFFLE: /* the inverse shuffle, added */
        if (dx)
            lo->shuffle_channels(ctx, n->batch, l->in_shape.c / l->groups, l->groups, plane,
                                 s->dout, dx, true);
        break;
    case LAYER_TO_IMAGE:
        if (dx) lo->transpose(ctx, n->batch, s->dim, s->seq, s->dout, dx, true);
        break;
    case LAYER_SCALE: /* dw summed over the batch, sample by sample */
        n->c->ops->zero(ctx, s->dw, (size_t)l->weights * sizeof(float));
        for (int b = 0; b < n->batch; b++)
            lo->mul_rows_grad(ctx, l->in_shape.c, plane, x + b * s->in_count, s->w,
                              s->dout + b * s->out_count, dx ? dx + b * s->in_count : NULL,
                              s->dw);
        break;
    default: ASSERT(0, "layer type %d has no backward", (int)l->type);
    }
}

/* ---- dispatch ------------------------------------------------------------------------- */

/* A backend without host memory gets the input and labels the caller staged. */
static void upload_staged(nnet_t *n)
{
    if (n->host || !n->staged) return;
    n->c->ops->upload(n->c->ctx, n->ls[0].out, n->input_host,
                      (size_t)(n->ls[0].out_count * n->batch) * sizeof(float));
    n->c->ops->upload(n->c->ctx, n->labels_dev, n->labels,
                      (size_t)n->batch * n->label_count * sizeof(int));
    n->staged = false;
}

/* Draws the layer's dropout mask (keep = 1/(1-ratio) or 0 per element) on the host, from the
 * layer's RNG, so both backends draw the same masks, and puts it in s->aux. */
static void dropout_draw(nnet_t *n, const layer_t *l, lstate_t *s, int64_t total)
{
    float keep = (float)(1.0 / (1.0 - l->dropout_ratio));
    float *mask = n->host ? s->aux : n->host_tmp;
    for (int64_t i = 0; i < total; i++)
        mask[i] = ke_dropout_mask(rng_uniform(s->rng), l->dropout_ratio, keep);
    if (!n->host) n->c->ops->upload(n->c->ctx, s->aux, mask, (size_t)total * sizeof(float));
}

void nnet_forward_layer(nnet_t *n, int li)
{
    const layer_t *l = &n->m->layers[li];
    lstate_t *s = &n->ls[li];
    upload_staged(n);
    if (l->type == LAYER_INPUT) return;
    const float *x = n->ls[l->inputs[0]].out;
    int64_t total = s->out_count * n->batch;
    void *ctx = n->c->ctx;
    const compute_layer_ops_t *lo = n->lo;
    switch (l->type) {
    case LAYER_CONV: conv_forward(n, l, s, x); break;
    case LAYER_FC: fc_forward(n, l, s, x); break;
    case LAYER_RELU: lo->relu(ctx, total, x, s->out); break;
    case LAYER_POOL: pool_forward(n, l, s, x); break;
    case LAYER_LRN: lrn_forward(n, l, s, x); break;
    case LAYER_DROPOUT:
        if (!n->train) {
            n->c->ops->copy(ctx, s->out, x, (size_t)total * sizeof(float));
            break;
        }
        if (!n->frozen) dropout_draw(n, l, s, total);
        lo->mul(ctx, total, x, s->aux, s->out);
        break;
    case LAYER_BATCHNORM: bn_forward(n, l, s, x); break;
    case LAYER_CONCAT: {
        int64_t off = 0;
        for (int k = 0; k < l->n_inputs; k++) {
            const lstate_t *in = &n->ls[l->inputs[k]];
            lo->copy_rows(ctx, n->batch, in->out_count, s->out + off, s->out_count, in->out,
                          in->out_count);
            off += in->out_count;
        }
        ASSERT(off == s->out_count, "concat '%s': inputs do not fill the output", l->name);
        break;
    }
    case LAYER_ADD:
        n->c->ops->copy(ctx, s->out, x, (size_t)total * sizeof(float));
        for (int k = 1; k < l->n_inputs; k++)
            n->c->ops->saxpy(ctx, total, 1.0f, n->ls[l->inputs[k]].out, s->out);
        break;
    case LAYER_SOFTMAX_LOSS: softmax_loss_forward(n, l, s, x); break;
    case LAYER_TOKENS: break;
    case LAYER_EMBED: {
        int64_t bad = lo->embed_forward(ctx, (int64_t)n->batch * s->seq, x, s->w, l->vocab,
                                        l->out, s->out);
        if (bad) die("layer '%s': %lld token ids outside [0, %d)", l->name, (long long)bad,
                     l->vocab);
        break;
    }
    case LAYER_POSEMBED: /* out = x + p[position] */
        n->c->ops->copy(ctx, s->out, x, (size_t)total * sizeof(float));
        lo->add_rows(ctx, n->batch, (int64_t)s->seq * s->dim, s->out, (int64_t)s->seq * s->dim,
                     s->w, 0);
        break;
    case LAYER_CLSTOKEN: { /* position 0 is w, then x */
        int64_t seqn = (int64_t)s->seq * s->dim;
        lo->copy_rows(ctx, n->batch, s->dim, s->out, seqn + s->dim, s->w, 0);
        lo->copy_rows(ctx, n->batch, seqn, s->out + s->dim, seqn + s->dim, x, seqn);
        break;
    }
    case LAYER_TO_SEQ: /* B x C x P -> B x P x C */
        lo->transpose(ctx, n->batch, s->dim, s->seq, x, s->out, false);
        break;
    case LAYER_SELECT:
        lo->copy_rows(ctx, n->batch, s->dim, s->out, s->dim, x + (int64_t)l->select_pos * s->dim,
                      (int64_t)s->seq * s->dim);
        break;
    case LAYER_LINEAR: linear_forward(n, l, s, x); break;
    case LAYER_LAYERNORM:
        lo->layernorm_forward(ctx, (int64_t)n->batch * s->seq, s->dim, l->bn_eps, x, s->w, s->b,
                              s->out, s->aux, s->aux2);
        break;
    case LAYER_GELU: lo->gelu_forward(ctx, total, l->gelu_tanh, x, s->out); break;
    case LAYER_TANH: lo->tanh_forward(ctx, total, x, s->out); break;
    case LAYER_WINATTN:
        winattn_forward(n->c, l, n->batch, x, s->w, s->b, s->aux, n->col, s->out);
        break;
    case LAYER_PATCHMERGE: patchmerge_forward(n->c, l, n->batch, s->dim, x, s->out); break;
    case LAYER_ATTENTION:
        seq_attention_forward(n->c, x, input_out(n, l, 1), input_out(n, l, 2), n->batch, s->seq,
                              s->dim, l->heads, l->causal, s->aux, s->out);
        break;
    case LAYER_SEQ_LOSS: {
        int64_t tokens = (int64_t)n->batch * s->seq;
        check_labels(n, l, tokens, s->dim);
        s->loss = l->loss_weight *
                  lo->softmax_xent_forward(ctx, tokens, s->dim, x, n->labels_dev, s->out) /
                  (double)tokens;
        break;
    }
    default: zoo_forward(n, l, s, x); break;
    }
}

void nnet_backward_begin(nnet_t *n)
{
    for (int i = 0; i < n->m->n_layers; i++)
        n->c->ops->zero(n->c->ctx, n->ls[i].dout,
                        (size_t)(n->ls[i].out_count * n->batch) * sizeof(float));
}

/* CONCAT and ADD: the output's gradient added into each input's (an input layer's only when
 * the net computes the input's gradient). */
static void merge_backward(nnet_t *n, const layer_t *l, lstate_t *s)
{
    void *ctx = n->c->ctx;
    int64_t off = 0;
    for (int k = 0; k < l->n_inputs; k++) {
        lstate_t *in = &n->ls[l->inputs[k]];
        bool need = n->input_grad || n->m->layers[l->inputs[k]].type != LAYER_INPUT;
        if (l->type == LAYER_CONCAT) {
            if (need)
                n->lo->add_rows(ctx, n->batch, in->out_count, in->dout, in->out_count,
                                s->dout + off, s->out_count);
            off += in->out_count;
        } else if (need) {
            n->c->ops->saxpy(ctx, s->out_count * n->batch, 1.0f, s->dout, in->dout);
        }
    }
}

/* The sequence layers that move positions: POSEMBED, CLSTOKEN, TO_SEQ, SELECT (dx NULL: the
 * input needs no gradient). */
static void position_backward(nnet_t *n, const layer_t *l, lstate_t *s, float *dx)
{
    void *ctx = n->c->ctx;
    const compute_layer_ops_t *lo = n->lo;
    int64_t seqn = (int64_t)s->seq * s->dim;
    switch (l->type) {
    case LAYER_POSEMBED: /* dp = sum over the batch of dout; dx += dout */
        lo->sum_rows(ctx, n->batch, seqn, s->dout, seqn, s->dw);
        if (dx) lo->add(ctx, s->out_count * n->batch, s->dout, dx);
        break;
    case LAYER_CLSTOKEN: /* dw = sum over the batch of dout at position 0; dx += the rest */
        lo->sum_rows(ctx, n->batch, s->dim, s->dout, seqn + s->dim, s->dw);
        if (dx) lo->add_rows(ctx, n->batch, seqn, dx, seqn, s->dout + s->dim, seqn + s->dim);
        break;
    case LAYER_TO_SEQ:
        if (dx) lo->transpose(ctx, n->batch, s->seq, s->dim, s->dout, dx, true);
        break;
    case LAYER_SELECT:
        if (dx)
            lo->add_rows(ctx, n->batch, s->dim, dx + (int64_t)l->select_pos * s->dim, seqn,
                         s->dout, s->dim);
        break;
    default: ASSERT(0, "layer type %d moves no positions", (int)l->type);
    }
}

void nnet_backward_layer(nnet_t *n, int li)
{
    const layer_t *l = &n->m->layers[li];
    lstate_t *s = &n->ls[li];
    if (l->type == LAYER_INPUT) return;
    const float *x = n->ls[l->inputs[0]].out;
    float *dx = s->need_dx ? n->ls[l->inputs[0]].dout : NULL;
    int64_t total = s->out_count * n->batch;
    void *ctx = n->c->ctx;
    const compute_layer_ops_t *lo = n->lo;
    switch (l->type) {
    case LAYER_CONV: conv_backward(n, l, s, x, dx); break;
    case LAYER_FC: fc_backward(n, l, s, x, dx); break;
    case LAYER_RELU:
        if (dx) lo->relu_grad_add(ctx, total, x, s->dout, dx);
        break;
    case LAYER_POOL:
        if (dx) pool_backward(n, l, s, dx);
        break;
    case LAYER_LRN:
        if (dx) lrn_backward(n, l, s, x, dx);
        break;
    case LAYER_DROPOUT:
        if (dx) {
            if (n->train) lo->mul_add(ctx, total, s->dout, s->aux, dx);
            else lo->add(ctx, total, s->dout, dx);
        }
        break;
    case LAYER_BATCHNORM: bn_backward(n, l, s, dx); break;
    case LAYER_CONCAT:
    case LAYER_ADD: merge_backward(n, l, s); break;
    case LAYER_SOFTMAX_LOSS:
        if (dx) softmax_loss_backward(n, l, s, dx);
        break;
    case LAYER_TOKENS: break;
    case LAYER_EMBED: /* token ids have no gradient */
        if (!s->add_dw) n->c->ops->zero(ctx, s->dw, (size_t)l->weights * sizeof(float));
        lo->embed_backward(ctx, (int64_t)n->batch * s->seq, x, s->dout, l->out, s->dw);
        break;
    case LAYER_POSEMBED:
    case LAYER_CLSTOKEN:
    case LAYER_TO_SEQ:
    case LAYER_SELECT: position_backward(n, l, s, dx); break;
    case LAYER_LINEAR: linear_backward(n, l, s, x, dx); break;
    case LAYER_LAYERNORM:
        lo->layernorm_backward(ctx, (int64_t)n->batch * s->seq, s->dim, s->dout, s->w, s->aux,
                               s->aux2, s->dw, s->db, dx);
        break;
    case LAYER_GELU:
        if (dx) lo->gelu_backward(ctx, total, l->gelu_tanh, x, s->dout, dx);
        break;
    case LAYER_TANH:
        if (dx) lo->tanh_backward(ctx, total, s->out, s->dout, dx);
        break;
    case LAYER_WINATTN:
        winattn_backward(n->c, l, n->batch, s->w, s->b, s->aux, s->dout, n->col, s->dw, s->db,
                         dx);
        break;
    case LAYER_PATCHMERGE:
        if (dx) patchmerge_backward(n->c, l, n->batch, s->dim, s->dout, dx);
        break;
    case LAYER_ATTENTION:
        seq_attention_backward(n->c, x, input_out(n, l, 1), input_out(n, l, 2), s->aux, s->dout,
                               n->batch, s->seq, s->dim, l->heads, input_dout(n, l, 0),
                               input_dout(n, l, 1), input_dout(n, l, 2), n->col);
        break;
    case LAYER_SEQ_LOSS:
        if (dx) {
            int64_t tokens = (int64_t)n->batch * s->seq;
            lo->softmax_xent_backward(ctx, tokens, s->dim, s->out, n->labels_dev,
                                      (float)(l->loss_weight / (double)tokens) * n->loss_scale,
                                      dx);
        }
        break;
    default: zoo_backward(n, l, s, x, dx); break;
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
    const float *prob = s->out;
    if (!n->host) {
        n->c->ops->download(n->c->ctx, n->host_tmp, s->out,
                            (size_t)(s->out_count * n->batch) * sizeof(float));
        prob = n->host_tmp;
    }
    int64_t correct = 0;
    for (int64_t b = 0; b < rows; b++) {
        const float *p = prob + b * classes;
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
