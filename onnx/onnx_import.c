/* onnx_import: ONNX graph -> .net text. See onnx_import.h for what maps and why.
 *
 * The graph is walked once in node order (ONNX requires topological order). Every tensor
 * name becomes a value: data flowing out of an emitted layer (with its full ONNX shape,
 * batch first), a parameter (declared dimensions only), a constant (small integer or real
 * data, e.g. a Reshape's target), or a graph input not yet read. A graph input becomes an
 * `input` layer when a node reads it as data, and a parameter when a node reads it as a
 * weight. Shapes are inferred here, per operator, so a mismatch is reported against the
 * ONNX node rather than against a line of generated text.
 */
#include "onnx/onnx_import.h"

#include "onnx/onnx_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/infile.h"

#define FILE_BYTES_MAX ((size_t)1 << 31) /* protobuf's own limit on a message */
#define DIM_MAX ONNX_DIM_MAX
#define ELEMS_MAX ONNX_ELEMS_MAX
#define MACS_MAX ONNX_MACS_MAX
#define CONST_VALUES_MAX ONNX_CONST_VALUES_MAX

/* ---- convolution and pooling geometry -------------------------------------------------- */

typedef struct {
    int64_t kh, kw, sh, sw, ph, pw;
    bool ceil;
} window_t;

/* The plane of image data: H and W of (N,C,H,W), 1 and L of (N,C,L) (a 1-D signal is a
 * plane of one row, so Conv1d is a conv with a 1xK kernel); with a pending Pad's rows and
 * columns when padded is true. */
static void plane_hw(const val_t *x, bool padded, int64_t *h, int64_t *w)
{
    *h = x->rank == 4 ? x->dims[2] : 1;
    *w = x->dims[x->rank - 1];
    if (!padded) {
        *h -= x->pad[0] + x->pad[2];
        *w -= x->pad[1] + x->pad[3];
    }
}

/* ONNX dims of image data like x with c channels and an oh x ow plane; returns the rank. */
static int plane_dims(const val_t *x, int64_t c, int64_t oh, int64_t ow, int64_t *dims)
{
    dims[0] = x->dims[0];
    dims[1] = c;
    if (x->rank == 3) {
        dims[2] = ow;
        return 3;
    }
    dims[2] = oh;
    dims[3] = ow;
    return 4;
}

/* Reads a window attribute of one value per spatial axis (1 for (N,C,L), 2 for (N,C,H,W))
 * into out[0..1] as height then width, a 1-D axis being the width of a plane of height 1.
 * Absent: out is left as it is. */
static int window_ints(imp_t *im, const Onnx__NodeProto *n, const char *name, int spatial,
                       int64_t *out, bool *got_any)
{
    int64_t v[2];
    int got;
    if (ox_attr_ints(im, n, name, spatial, v, 2, &got)) return -1;
    if (got_any) *got_any = got > 0;
    if (!got) return 0;
    if (spatial == 1) out[1] = v[0];
    else memcpy(out, v, sizeof v);
    return 0;
}

/* Kernel (from kernel_shape or the weight), strides, symmetric pads including a folded Pad,
 * auto_pad, dilations of a Conv or pool node reading x, (N,C,H,W) or (N,C,L). */
static int window_read(imp_t *im, const Onnx__NodeProto *n, const val_t *x, int64_t kh,
                       int64_t kw, window_t *w)
{
    int spatial = x->rank - 2;
    bool got;
    int64_t k[2] = {kh, kw};
    if (window_ints(im, n, "kernel_shape", spatial, k, &got)) return -1;
    if (spatial == 1 && got) k[0] = 1;
    if (got && kh > 0 && (k[0] != kh || k[1] != kw))
        return ox_node_fail(im, n, "kernel_shape %" PRId64 "x%" PRId64
                         " differs from the weight's %" PRId64 "x%" PRId64, k[0], k[1], kh, kw);
    kh = k[0];
    kw = k[1];
    if (kh < 1 || kw < 1 || kh > DIM_MAX || kw > DIM_MAX)
        return ox_node_fail(im, n, "kernel_shape (%d values from 1 to %" PRId64 ") is missing or "
                         "out of range", spatial, DIM_MAX);
    w->kh = kh;
    w->kw = kw;
    int64_t st[2] = {1, 1};
    if (window_ints(im, n, "strides", spatial, st, NULL)) return -1;
    w->sh = st[0];
    w->sw = st[1];
    if (w->sh < 1 || w->sw < 1 || w->sh > DIM_MAX || w->sw > DIM_MAX)
        return ox_node_fail(im, n, "strides must be from 1 to %" PRId64, DIM_MAX);
    int64_t dil[2] = {1, 1};
    if (window_ints(im, n, "dilations", spatial, dil, NULL)) return -1;
    if (dil[0] != 1 || dil[1] != 1)
        return ox_node_fail(im, n, "dilations %" PRId64 "x%" PRId64 ": dilated windows do not map "
                         "(conv and pool have none)", dil[0], dil[1]);
    int64_t pads[4] = {0, 0, 0, 0}, v[4]; /* top, left, bottom, right */
    int n_pads;
    if (ox_attr_ints(im, n, "pads", 2 * spatial, v, 4, &n_pads)) return -1;
    if (n_pads && spatial == 1) {
        pads[1] = v[0];
        pads[3] = v[1];
    } else if (n_pads)
        memcpy(pads, v, sizeof pads);
    char ap[32];
    if (ox_attr_string(im, n, "auto_pad", "NOTSET", ap, sizeof ap)) return -1;
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        if (n_pads) return ox_node_fail(im, n, "both pads and auto_pad=%s", ap);
        int64_t in[2], kk[2] = {kh, kw}, s[2] = {w->sh, w->sw};
        plane_hw(x, true, &in[0], &in[1]);
        for (int i = 0; i < 2; i++) {
            int64_t out = (in[i] + s[i] - 1) / s[i];
            int64_t total = (out - 1) * s[i] + kk[i] - in[i];
            if (total < 0) total = 0;
            pads[i] = total / 2;
            pads[i + 2] = total - total / 2;
            if (!strcmp(ap, "SAME_LOWER")) {
                pads[i + 2] = total / 2;
                pads[i] = total - total / 2;
            }
        }
    } else if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
        return ox_node_fail(im, n, "auto_pad '%s' is not an ONNX value", ap);
    for (int i = 0; i < 4; i++) {
        if (pads[i] < 0 || pads[i] > DIM_MAX)
            return ox_node_fail(im, n, "pads must be from 0 to %" PRId64, DIM_MAX);
        pads[i] += x->pad[i];
    }
    if (pads[0] != pads[2] || pads[1] != pads[3]) {
        if (spatial == 1)
            return ox_node_fail(im, n, "asymmetric padding (start %" PRId64 ", end %" PRId64
                                "): conv and pool pad both ends alike", pads[1], pads[3]);
        return ox_node_fail(im, n, "asymmetric padding (top %" PRId64 ", left %" PRId64
                         ", bottom %" PRId64 ", right %" PRId64 "): conv and pool pad both sides "
                         "of each axis alike", pads[0], pads[1], pads[2], pads[3]);
    }
    w->ph = pads[0];
    w->pw = pads[1];
    return 0;
}

/* Output size along one axis; in ceil mode the last window must start inside the input or
 * its left padding (PyTorch's and ONNX's rule, and the .net pool's). */
static int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t pad, bool ceil_mode)
{
    int64_t span = in + 2 * pad - k;
    if (span < 0) return 0;
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + pad) out--;
    return out;
}

/* ---- operators ------------------------------------------------------------------------- */

static int op_conv(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *x = ox_in_data_pad(im, n, 0, true);
    if (!x) return -1;
    if ((x->rank != 4 && x->rank != 3) || !ox_data_is_layer_shaped(im, x))
        return ox_node_fail(im, n, "only 2-D convolutions of (N,C,H,W) data and 1-D ones of "
                            "(N,C,L) map to conv");
    val_t *w = ox_in_weight(im, n, 1, x->rank, true);
    if (!w) return -1;
    int64_t group;
    if (ox_attr_int(im, n, "group", 1, &group)) return -1;
    int64_t m = w->dims[0], c = x->dims[1];
    if (group < 1 || group > DIM_MAX || w->dims[1] * group != c || m % group) {
        char b[96];
        ox_dims_str(w->rank, w->dims, b, sizeof b);
        return ox_node_fail(im, n, "weight '%s' (%s) does not fit %" PRId64 " input channels in %"
                            PRId64 " groups", w->name, b, c, group);
    }
    bool bias = ox_has_input(n, 2);
    if (bias) {
        val_t *b = ox_in_weight(im, n, 2, 1, true);
        if (!b) return -1;
        if (b->dims[0] != m)
            return ox_node_fail(im, n, "bias '%s' has %" PRId64 " values for %" PRId64 " channels",
                             b->name, b->dims[0], m);
    }
    window_t win;
    int64_t kh = x->rank == 4 ? w->dims[2] : 1, h, wd;
    if (window_read(im, n, x, kh, w->dims[x->rank - 1], &win)) return -1;
    plane_hw(x, false, &h, &wd);
    int64_t oh = window_out(h, win.kh, win.sh, win.ph, false);
    int64_t ow = window_out(wd, win.kw, win.sw, win.pw, false);
    if (oh < 1 || ow < 1)
        return ox_node_fail(im, n, "kernel %" PRId64 "x%" PRId64 " larger than the padded input",
                         win.kh, win.kw);
    if (ox_mul_sat(ox_mul_sat(oh, ow), ox_dims_count(w->rank, w->dims)) > MACS_MAX)
        return ox_node_fail(im, n, "more than %" PRId64 " multiply-adds per sample", MACS_MAX);
    int64_t dims[4];
    int rank = plane_dims(x, m, oh, ow, dims);
    out_layer_t *l = ox_emit(im, n, "conv", &x, 1, rank, dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys,
             "out=%" PRId64 " kernel=%" PRId64 "x%" PRId64 " stride=%" PRId64 "x%" PRId64
             " pad=%" PRId64 "x%" PRId64 " groups=%" PRId64,
             m, win.kh, win.kw, win.sh, win.sw, win.ph, win.pw, group);
    l->bias = bias;
    return 0;
}

static int op_pool(imp_t *im, const Onnx__NodeProto *n, const char *op)
{
    val_t *x = ox_in_data_pad(im, n, 0, true);
    if (!x) return -1;
    if ((x->rank != 4 && x->rank != 3) || !ox_data_is_layer_shaped(im, x))
        return ox_node_fail(im, n, "only 2-D pooling of (N,C,H,W) data and 1-D of (N,C,L) map "
                            "to pool");
    if (ox_outputs_unused_from(im, n, 1)) return -1;
    window_t win;
    if (window_read(im, n, x, 0, 0, &win)) return -1;
    int64_t ceil_mode;
    if (ox_attr_int(im, n, "ceil_mode", 0, &ceil_mode)) return -1;
    if (win.ph >= win.kh || win.pw >= win.kw)
        return ox_node_fail(im, n, "padding %" PRId64 "x%" PRId64 " not smaller than the window",
                         win.ph, win.pw);
    int64_t h, wd;
    plane_hw(x, false, &h, &wd);
    int64_t oh = window_out(h, win.kh, win.sh, win.ph, ceil_mode != 0);
    int64_t ow = window_out(wd, win.kw, win.sw, win.pw, ceil_mode != 0);
    if (oh < 1 || ow < 1) return ox_node_fail(im, n, "window larger than the padded input");
    if (ox_mul_sat(ox_mul_sat(x->dims[1], ox_mul_sat(oh, ow)), win.kh * win.kw) > MACS_MAX)
        return ox_node_fail(im, n, "more than %" PRId64 " window operations per sample", MACS_MAX);
    int64_t dims[4];
    int rank = plane_dims(x, x->dims[1], oh, ow, dims);
    out_layer_t *l = ox_emit(im, n, "pool", &x, 1, rank, dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys,
             "op=%s kernel=%" PRId64 "x%" PRId64 " stride=%" PRId64 "x%" PRId64 " pad=%" PRId64
             "x%" PRId64 " ceil=%d", op, win.kh, win.kw, win.sh, win.sw, win.ph, win.pw,
             ceil_mode != 0);
    return 0;
}

static int op_global_pool(imp_t *im, const Onnx__NodeProto *n, const char *op)
{
    val_t *x = ox_in_data(im, n, 0);
    if (!x) return -1;
    if ((x->rank != 4 && x->rank != 3) || !ox_data_is_layer_shaped(im, x))
        return ox_node_fail(im, n, "only (N,C,H,W) or (N,C,L) data maps to a global pool");
    int64_t dims[4];
    int rank = plane_dims(x, x->dims[1], 1, 1, dims);
    out_layer_t *l = ox_emit(im, n, "pool", &x, 1, rank, dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "op=%s global=1", op);
    return 0;
}

static int op_batchnorm(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *x = ox_in_data(im, n, 0);
    if (!x) return -1;
    if (x->rank < 2 || x->rank > 4 || !ox_data_is_layer_shaped(im, x))
        return ox_node_fail(im, n, "only (N,C,H,W), (N,C,L) or (N,C) data maps to batchnorm");
    int64_t c = x->dims[1];
    for (size_t k = 1; k <= 4; k++) {
        val_t *p = ox_in_weight(im, n, k, 1, k <= 2); /* scale, shift learn; mean, var do not */
        if (!p) return -1;
        if (p->dims[0] != c)
            return ox_node_fail(im, n, "'%s' has %" PRId64 " values for %" PRId64 " channels",
                             p->name, p->dims[0], c);
    }
    if (ox_outputs_unused_from(im, n, 1)) return -1;
    double eps, momentum;
    if (ox_attr_float(im, n, "epsilon", 1e-5, &eps) || ox_attr_float(im, n, "momentum", 0.9, &momentum))
        return -1;
    if (!(eps >= 0 && eps <= 1) || !(momentum >= 0 && momentum <= 1))
        return ox_node_fail(im, n, "epsilon %g or momentum %g outside [0, 1]", eps, momentum);
    out_layer_t *l = ox_emit(im, n, "batchnorm", &x, 1, x->rank, x->dims);
    if (!l) return -1;
    /* ONNX's momentum weighs the running statistic, the .net's (PyTorch's) the new one */
    snprintf(l->keys, sizeof l->keys, "eps=%.7g momentum=%.7g", eps, 1 - momentum);
    return 0;
}

static int op_unary(imp_t *im, const Onnx__NodeProto *n, const char *type)
{
    val_t *x = ox_in_data(im, n, 0);
    if (!x) return -1;
    return ox_emit(im, n, type, &x, 1, x->rank, x->dims) ? 0 : -1;
}

static int op_lrn(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *x = ox_in_data(im, n, 0);
    if (!x) return -1;
    if (x->rank != 4 || !ox_data_is_layer_shaped(im, x))
        return ox_node_fail(im, n, "only (N,C,H,W) data maps to lrn");
    int64_t size;
    double alpha, beta, bias;
    if (ox_attr_int(im, n, "size", 0, &size) || ox_attr_float(im, n, "alpha", 1e-4, &alpha) ||
        ox_attr_float(im, n, "beta", 0.75, &beta) || ox_attr_float(im, n, "bias", 1.0, &bias))
        return -1;
    if (size < 1 || size % 2 == 0 || size > INT_MAX)
        return ox_node_fail(im, n, "size %" PRId64 ": lrn windows are odd and at least 1", size);
    if (!(alpha >= 0 && beta >= 0 && bias >= 0))
        return ox_node_fail(im, n, "negative alpha, beta or bias");
    out_layer_t *l = ox_emit(im, n, "lrn", &x, 1, 4, x->dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "size=%" PRId64 " alpha=%.7g beta=%.7g k=%.7g", size,
             alpha, beta, bias);
    return 0;
}

static int op_dropout(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *x = ox_in_data(im, n, 0);
    if (!x) return -1;
    if (ox_outputs_unused_from(im, n, 1)) return -1;
    double ratio = 0.5;
    if (im->opset < 12) {
        if (ox_attr_float(im, n, "ratio", 0.5, &ratio)) return -1;
    } else if (ox_has_input(n, 1)) {
        val_t *r = &im->vals[ox_val_find(im, n->input[1])];
        if (r->kind != VAL_CONST || r->n_values != 1)
            return ox_node_fail(im, n, "the ratio '%s' must be a constant scalar", r->name);
        ratio = r->reals ? r->reals[0] : (double)r->ints[0];
    }
    if (!(ratio >= 0 && ratio < 1)) return ox_node_fail(im, n, "ratio %g outside [0, 1)", ratio);
    out_layer_t *l = ox_emit(im, n, "dropout", &x, 1, x->rank, x->dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "ratio=%.7g", ratio);
    return 0;
}

static int op_concat(imp_t *im, const Onnx__NodeProto *n)
{
    int64_t axis;
    if (ox_attr_int(im, n, "axis", 1, &axis)) return -1;
    if (n->n_input < 1) return ox_node_fail(im, n, "no inputs");
    if (n->n_input > MODEL_MAX_INPUTS)
        return ox_node_fail(im, n, "%zu inputs (a concat takes at most %d)", n->n_input,
                         MODEL_MAX_INPUTS);
    val_t *ins[MODEL_MAX_INPUTS];
    for (size_t k = 0; k < n->n_input; k++)
        if (!(ins[k] = ox_in_data(im, n, k))) return -1;
    if (n->n_input == 1) /* a concatenation of one (DenseNet's first layer): the same data */
        return ox_data_define(im, n, 0, ins[0]->layer, ins[0]->rank, ins[0]->dims);
    int rank = ins[0]->rank;
    if (axis < 0) axis += rank;
    if (axis != 1 || rank < 2 || rank > 4)
        return ox_node_fail(im, n, "concatenation along axis %" PRId64 " of rank-%d data: only the "
                         "channels (axis 1) of (N,C,H,W), (N,C,L) or (N,F) map to concat", axis,
                         rank);
    int64_t dims[ONNX_RANK_MAX];
    memcpy(dims, ins[0]->dims, sizeof dims);
    dims[1] = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        const val_t *v = ins[k];
        if (v->rank != rank || !ox_data_is_layer_shaped(im, v))
            return ox_node_fail(im, n, "input '%s' is not laid out like the first", v->name);
        for (int d = 0; d < rank; d++)
            if (d != 1 && v->dims[d] != ins[0]->dims[d])
                return ox_node_fail(im, n, "input '%s' differs in dimension %d", v->name, d);
        dims[1] += v->dims[1];
    }
    return ox_emit(im, n, "concat", ins, (int)n->n_input, rank, dims) ? 0 : -1;
}

/* Add/Sum of data of one shape -> add; Add of a bias vector right after a MatMul-made fc
 * -> that fc's bias. */
static int op_add(imp_t *im, const Onnx__NodeProto *n)
{
    if (n->n_input < 2 || n->n_input > MODEL_MAX_INPUTS)
        return ox_node_fail(im, n, "%zu inputs (2 to %d map)", n->n_input, MODEL_MAX_INPUTS);
    for (size_t k = 0; k < n->n_input && n->n_input == 2; k++) {
        if (!ox_has_input(n, k)) continue;
        val_t *b = &im->vals[ox_val_find(im, n->input[k])];
        if (b->kind != VAL_PARAM && b->kind != VAL_CONST && b->kind != VAL_INPUT) continue;
        val_t *x = ox_in_data(im, n, 1 - k);
        if (!x) return -1;
        out_layer_t *l = &im->layers[x->layer];
        if (strcmp(l->type, "fc") || l->bias != 0 || strcmp(l->op, "MatMul") || x->uses != 1)
            return ox_node_fail(im, n, "adds parameter '%s' to '%s': a parameter maps only as the "
                             "bias of the MatMul just before", b->name, x->name);
        if (!(b = ox_in_weight(im, n, k, -1, true))) return -1;
        if (ox_dims_count(b->rank, b->dims) != l->shape.c || b->dims[b->rank - 1] != l->shape.c)
            return ox_node_fail(im, n, "bias '%s' does not have the %d outputs of '%s'", b->name,
                             l->shape.c, l->name);
        l->bias = 1;
        return ox_data_define(im, n, 0, x->layer, x->rank, x->dims);
    }
    val_t *ins[MODEL_MAX_INPUTS];
    for (size_t k = 0; k < n->n_input; k++) {
        if (!(ins[k] = ox_in_data(im, n, k))) return -1;
        const shape_t a = im->layers[ins[k]->layer].shape, b = im->layers[ins[0]->layer].shape;
        if (ins[k]->rank != ins[0]->rank ||
            memcmp(ins[k]->dims, ins[0]->dims, ins[0]->rank * sizeof(int64_t)) || a.c != b.c ||
            a.h != b.h || a.w != b.w)
            return ox_node_fail(im, n, "adds '%s' and '%s' of different shapes: only element-wise "
                             "sums of equal shapes map to add", ins[0]->name, ins[k]->name);
    }
    return ox_emit(im, n, "add", ins, (int)n->n_input, ins[0]->rank, ins[0]->dims) ? 0 : -1;
}

/* Gemm: A (N,K) data, B a weight, C an optional bias -> fc. */
static int op_gemm(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *a = ox_in_data(im, n, 0);
    if (!a) return -1;
    int64_t trans_a, trans_b;
    if (ox_attr_int(im, n, "transA", 0, &trans_a) || ox_attr_int(im, n, "transB", 0, &trans_b))
        return -1;
    if (trans_a || a->rank != 2)
        return ox_node_fail(im, n, "only (N,K) data times a weight maps to fc");
    val_t *b = ox_in_weight(im, n, 1, 2, true);
    if (!b) return -1;
    int64_t k = trans_b ? b->dims[1] : b->dims[0], out = trans_b ? b->dims[0] : b->dims[1];
    if (k != a->dims[1])
        return ox_node_fail(im, n, "weight '%s' expects %" PRId64 " inputs, the data has %" PRId64,
                         b->name, k, a->dims[1]);
    bool bias = ox_has_input(n, 2);
    if (bias) {
        val_t *c = ox_in_weight(im, n, 2, -1, true);
        if (!c) return -1;
        if (ox_dims_count(c->rank, c->dims) != out || c->dims[c->rank - 1] != out)
            return ox_node_fail(im, n, "bias '%s' does not have %" PRId64 " values", c->name, out);
    }
    int64_t dims[2] = {a->dims[0], out};
    out_layer_t *l = ox_emit(im, n, "fc", &a, 1, 2, dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "out=%" PRId64, out);
    l->bias = bias;
    return 0;
}

static int op_matmul(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *a = ox_in_data(im, n, 0);
    if (!a) return -1;
    if (a->rank != 2) {
        char b[96];
        ox_dims_str(a->rank, a->dims, b, sizeof b);
        return ox_node_fail(im, n, "data of shape %s: only (N,K) data times a weight maps to fc",
                         b);
    }
    val_t *b = ox_in_weight(im, n, 1, 2, true);
    if (!b) return -1;
    if (b->dims[0] != a->dims[1])
        return ox_node_fail(im, n, "weight '%s' expects %" PRId64 " inputs, the data has %" PRId64,
                         b->name, b->dims[0], a->dims[1]);
    int64_t dims[2] = {a->dims[0], b->dims[1]};
    out_layer_t *l = ox_emit(im, n, "fc", &a, 1, 2, dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "out=%" PRId64, b->dims[1]);
    l->bias = 0; /* an Add of a bias may follow */
    return 0;
}

/* Flatten, Reshape to (N, -1), Identity: the same layer seen with another ONNX shape. */
int ox_alias_data(imp_t *im, const Onnx__NodeProto *n, val_t *x, int rank,
                      const int64_t *dims)
{
    if (ox_dims_count(rank, dims) != ox_dims_count(x->rank, x->dims))
        return ox_node_fail(im, n, "changes the element count");
    return ox_data_define(im, n, 0, x->layer, rank, dims);
}

static int op_flatten(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *x = ox_in_data(im, n, 0);
    if (!x) return -1;
    int64_t axis;
    if (ox_attr_int(im, n, "axis", 1, &axis)) return -1;
    if (axis < 0) axis += x->rank;
    if (axis != 1)
        return ox_node_fail(im, n, "axis %" PRId64 ": only flattening all but the batch maps", axis);
    int64_t dims[2] = {x->dims[0], ox_dims_count(x->rank - 1, x->dims + 1)};
    return ox_alias_data(im, n, x, 2, dims);
}

static int op_reshape(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *x = ox_in_data(im, n, 0);
    if (!x) return -1;
    int rank;
    int64_t dims[ONNX_RANK_MAX];
    if (ox_reshape_dims(im, n, x, &rank, dims)) return -1;
    if (rank != 2 || dims[0] != x->dims[0]) {
        char b[96];
        ox_dims_str(rank, dims, b, sizeof b);
        return ox_node_fail(im, n, "reshape to %s: only flattening all but the batch maps", b);
    }
    return ox_alias_data(im, n, x, rank, dims);
}

/* Whether an Identity of x makes a weight of its own. PyTorch's exporter merges initializers
 * of equal values (in eval mode: an untrained network's zero biases, unit scales, the zero
 * biases of the convolutions it folded batch norms into) and writes each merged one as an
 * Identity of the first (`b.bias = Identity(a.bias)`), whereas a parameter truly shared
 * (one module called twice, a tied head) is read by its one name, with no Identity. So an
 * Identity of a declared weight (an initializer, or a graph input not yet read as data) is a
 * copy that the layer reading it owns, as PyTorch's own model owns both parameters; sharing
 * is still judged on weights read by one name, or through Transpose or Expand. */
static bool weight_copy(const val_t *x)
{
    if (x->source) return false; /* an alias made by Transpose, Expand or another Identity */
    if (x->kind == VAL_PARAM) return true;
    if (x->kind == VAL_CONST) return x->initializer && x->reals;
    return x->kind == VAL_INPUT;
}

static int op_identity(imp_t *im, const Onnx__NodeProto *n)
{
    if (!ox_has_input(n, 0) || n->n_output < 1) return ox_node_fail(im, n, "needs one input and output");
    val_t *x = &im->vals[ox_val_find(im, n->input[0])]; /* a graph input stays undecided */
    val_t *y = &im->vals[ox_val_find(im, n->output[0])];
    val_t *src = x->source ? x->source : x;
    const char *name = y->name;
    int uses = y->uses;
    int64_t *ints = NULL;
    double *reals = NULL;
    if (x->ints) {
        ints = xmalloc(x->n_values * sizeof *ints);
        memcpy(ints, x->ints, x->n_values * sizeof *ints);
    }
    if (x->reals) {
        reals = xmalloc(x->n_values * sizeof *reals);
        memcpy(reals, x->reals, x->n_values * sizeof *reals);
    }
    *y = *x;
    y->name = name;
    y->uses = uses;
    y->ints = ints;
    y->reals = reals;
    y->source = x->kind == VAL_DATA ? NULL : src;
    if (weight_copy(x)) { /* a tensor of its own, declared here: no owner yet */
        y->source = NULL;
        y->owner_node = NULL;
        y->tied_node = NULL;
        y->embed_layer = -1;
    }
    return 0;
}

static int op_pad(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *x = ox_in_data_pad(im, n, 0, true);
    if (!x) return -1;
    char mode[32];
    if (ox_attr_string(im, n, "mode", "constant", mode, sizeof mode)) return -1;
    if (strcmp(mode, "constant"))
        return ox_node_fail(im, n, "mode '%s': only constant padding folds into a Conv or pool",
                         mode);
    int64_t pads[2 * ONNX_RANK_MAX];
    int got;
    if (im->opset < 11) {
        if (ox_attr_ints(im, n, "pads", -1, pads, 2 * ONNX_RANK_MAX, &got)) return -1;
    } else {
        val_t *p = ox_in_ints(im, n, 1);
        if (!p) return -1;
        got = (int)(p->n_values <= 2 * ONNX_RANK_MAX ? p->n_values : 0);
        for (int i = 0; i < got; i++) pads[i] = p->ints[i];
    }
    if ((x->rank != 4 && x->rank != 3) || got != 2 * x->rank)
        return ox_node_fail(im, n, "only padding (N,C,H,W) data with 8 amounts or (N,C,L) data "
                            "with 6 maps");
    int r = x->rank;
    if (pads[0] || pads[1] || pads[r] || pads[r + 1])
        return ox_node_fail(im, n, "pads the batch or channel dimension");
    int64_t add[4] = {0, 0, 0, 0}; /* top, left, bottom, right; a signal is one row */
    const int at4[4] = {2, 3, 6, 7}, at3[4] = {-1, 2, -1, 5};
    for (int i = 0; i < 4; i++) {
        int at = r == 4 ? at4[i] : at3[i];
        if (at < 0) continue;
        if (pads[at] < 0 || pads[at] > DIM_MAX)
            return ox_node_fail(im, n, "negative or huge pads");
        add[i] = pads[at];
        if (x->pad[i] + add[i] > DIM_MAX)
            return ox_node_fail(im, n, "pads add up beyond %" PRId64, DIM_MAX);
    }
    val_t *y = &im->vals[ox_val_find(im, n->output[0])];
    const char *name = y->name;
    int uses = y->uses;
    *y = *x;
    y->name = name;
    y->uses = uses;
    for (int i = 0; i < 4; i++) y->pad[i] += add[i];
    if (r == 4) y->dims[2] += add[0] + add[2];
    y->dims[r - 1] += add[1] + add[3];
    y->pad_node = ox_node_name(n);
    return 0;
}

static int op_constant(imp_t *im, const Onnx__NodeProto *n)
{
    if (n->n_output < 1 || n->n_attribute != 1 || !n->attribute[0]->name)
        return ox_node_fail(im, n, "expected one output and one value attribute");
    val_t *y = &im->vals[ox_val_find(im, n->output[0])];
    const Onnx__AttributeProto *a = n->attribute[0];
    if (!strcmp(a->name, "value") && a->t) return ox_tensor_read(im, "constant", a->t, y);
    y->kind = VAL_CONST;
    y->dims_known = true;
    if (!strcmp(a->name, "value_int") || !strcmp(a->name, "value_float")) {
        y->rank = 0;
        y->n_values = 1;
        if (a->name[6] == 'i') {
            y->ints = xmalloc(sizeof *y->ints);
            y->ints[0] = a->i;
        } else {
            y->reals = xmalloc(sizeof *y->reals);
            y->reals[0] = a->f;
        }
        return 0;
    }
    if (!strcmp(a->name, "value_ints") || !strcmp(a->name, "value_floats")) {
        size_t k = a->name[6] == 'i' ? a->n_ints : a->n_floats;
        y->rank = 1;
        y->dims[0] = (int64_t)k;
        y->n_values = (int64_t)k;
        if (a->name[6] == 'i') {
            y->ints = xcalloc(k ? k : 1, sizeof *y->ints);
            for (size_t i = 0; i < k; i++) y->ints[i] = a->ints[i];
        } else {
            y->reals = xcalloc(k ? k : 1, sizeof *y->reals);
            for (size_t i = 0; i < k; i++) y->reals[i] = a->floats[i];
        }
        return 0;
    }
    return ox_node_fail(im, n, "constant attribute '%s' does not map", a->name);
}

/* A Softmax whose output leaves the graph is the classifier's: it becomes the loss. */
static int op_softmax(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *x = ox_in_data(im, n, 0);
    if (!x) return -1;
    bool graph_output = false;
    for (size_t i = 0; i < im->g->n_output; i++)
        if (im->g->output[i]->name && n->n_output && !strcmp(im->g->output[i]->name, n->output[0]))
            graph_output = true;
    int64_t axis;
    if (ox_attr_int(im, n, "axis", im->opset < 13 ? 1 : -1, &axis)) return -1;
    if (axis < 0) axis += x->rank;
    if (!graph_output || x->rank != 2 || axis != 1 ||
        im->vals[ox_val_find(im, n->output[0])].uses != 1)
        return ox_node_fail(im, n, "only a Softmax over the classes of (N,F) logits, as the graph's "
                         "output, maps (to softmax_loss)");
    int64_t dims[2] = {x->dims[0], 1};
    out_layer_t *l = ox_emit(im, n, "softmax_loss", &x, 1, 2, dims);
    if (!l) return -1;
    im->vals[ox_val_find(im, n->output[0])].from_softmax = true;
    return 0;
}

static int map_node(imp_t *im, const Onnx__NodeProto *n)
{
    const char *op = ox_node_op(n);
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx"))
        return ox_node_fail(im, n, "operator of domain '%s': only the default ONNX domain maps",
                         n->domain);
    int done = ox_fold(im, n);
    if (!done) done = ox_seq_channels_last(im, n);
    if (!done) done = ox_seq_node(im, n);
    if (!done) done = ox_zoo_node(im, n);
    if (done) return done < 0 ? -1 : 0;
    if (!strcmp(op, "Conv")) return op_conv(im, n);
    if (!strcmp(op, "MaxPool")) return op_pool(im, n, "max");
    if (!strcmp(op, "AveragePool")) return op_pool(im, n, "avg");
    if (!strcmp(op, "GlobalAveragePool")) return op_global_pool(im, n, "avg");
    if (!strcmp(op, "GlobalMaxPool")) return op_global_pool(im, n, "max");
    if (!strcmp(op, "BatchNormalization")) return op_batchnorm(im, n);
    if (!strcmp(op, "Relu")) return op_unary(im, n, "relu");
    if (!strcmp(op, "LRN")) return op_lrn(im, n);
    if (!strcmp(op, "Dropout")) return op_dropout(im, n);
    if (!strcmp(op, "Concat")) return op_concat(im, n);
    if (!strcmp(op, "Add") || !strcmp(op, "Sum")) return op_add(im, n);
    if (!strcmp(op, "Gemm")) return op_gemm(im, n);
    if (!strcmp(op, "MatMul")) return op_matmul(im, n);
    if (!strcmp(op, "Flatten")) return op_flatten(im, n);
    if (!strcmp(op, "Reshape")) return op_reshape(im, n);
    if (!strcmp(op, "Identity")) return op_identity(im, n);
    if (!strcmp(op, "Pad")) return op_pad(im, n);
    if (!strcmp(op, "Constant")) return op_constant(im, n);
    if (!strcmp(op, "Softmax")) return op_softmax(im, n);
    return ox_node_fail(im, n, "operator %s maps to no layer type", op);
}

/* ---- the graph ------------------------------------------------------------------------- */

static int graph_values(imp_t *im)
{
    const Onnx__GraphProto *g = im->g;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !t->name[0]) return ox_imp_fail(im, "an initializer has no name");
        int k = ox_val_add(im, t->name, VAL_PARAM);
        if (k < 0) return ox_imp_fail(im, "initializer '%s' defined twice", t->name);
        im->vals[k].initializer = true;
        if (ox_tensor_read(im, "initializer", t, &im->vals[k])) return -1;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi->name || !vi->name[0]) return ox_imp_fail(im, "a graph input has no name");
        if (ox_val_find(im, vi->name) >= 0) continue; /* an initializer's declaration */
        int k = ox_val_add(im, vi->name, VAL_INPUT);
        if (ox_type_dims(im, "input", vi->type, &im->vals[k])) return -1;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_output; k++) {
            if (!n->output[k][0]) continue;
            if (ox_val_add(im, n->output[k], VAL_UNDEFINED) < 0)
                return ox_node_fail(im, n, "output '%s' is defined twice", n->output[k]);
        }
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++) {
            if (!n->input[k][0]) continue;
            int v = ox_val_find(im, n->input[k]);
            if (v < 0)
                return ox_node_fail(im, n, "reads '%s', which no node, input or initializer "
                                 "defines", n->input[k]);
            im->vals[v].uses++;
        }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        const char *name = g->output[i]->name;
        int v = name ? ox_val_find(im, name) : -1;
        if (v < 0) return ox_imp_fail(im, "graph output '%s' is made by no node", name ? name : "");
        im->vals[v].uses++;
    }
    return 0;
}

static int graph_map(imp_t *im)
{
    const Onnx__GraphProto *g = im->g;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        int swin = ox_swin_node(im, i); /* a node of a Swin region claimed earlier */
        if (swin < 0) return -1;
        if (swin) continue;
        for (size_t k = 0; k < n->n_input; k++)
            if (n->input[k][0] && im->vals[ox_val_find(im, n->input[k])].kind == VAL_UNDEFINED)
                return ox_node_fail(im, n, "reads '%s' before the node that makes it (the graph "
                                 "is not in topological order)", n->input[k]);
        if (map_node(im, n) || ox_swin_claim(im, i)) return -1;
        for (size_t k = 0; k < n->n_output; k++)
            if (n->output[k][0] && im->vals[ox_val_find(im, n->output[k])].kind == VAL_UNDEFINED &&
                im->vals[ox_val_find(im, n->output[k])].uses > 0)
                return ox_node_fail(im, n, "output %zu ('%s') is read but has no mapping", k,
                                 n->output[k]);
    }
    if (g->n_output == 0) return ox_imp_fail(im, "the graph has no outputs");
    for (int i = 0; i < im->n_layers; i++) /* a packed projection is read in parts only */
        for (int k = 0; k < im->layers[i].n_in; k++)
            if (im->layers[im->layers[i].in[k]].split)
                return ox_imp_fail(im, "node '%s' reads the whole of projection '%s', which other "
                                   "nodes read in parts", im->layers[i].node,
                                   im->layers[im->layers[i].in[k]].node);
    for (size_t i = 0; i < g->n_output; i++) {
        val_t *v = &im->vals[ox_val_find(im, g->output[i]->name)];
        if (v->kind != VAL_DATA)
            return ox_imp_fail(im, "graph output '%s' is not computed by a layer", v->name);
        if (v->from_softmax) continue;
        int seq = ox_seq_output(im, v);
        if (seq < 0) return -1;
        if (seq) continue;
        if (v->pad_node)
            return ox_imp_fail(im, "graph output '%s' is padded by Pad '%s' (maps only before a "
                            "Conv or pool)", v->name, v->pad_node);
        char fallback[MODEL_NAME_MAX];
        snprintf(fallback, sizeof fallback, "loss%s%.80s", g->n_output > 1 ? "_" : "",
                 g->n_output > 1 ? v->name : "");
        out_layer_t *l = ox_layer_add(im, "softmax_loss", NULL, fallback);
        l->op = "objective";
        l->node = v->name;
        l->shape = (shape_t){1, 1, 1};
        l->n_in = 1;
        l->in[0] = v->layer;
    }
    return 0;
}

/* A growing string for the .net text. */
typedef struct {
    char *s;
    size_t n, cap;
} text_t;

static void text_add(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(text_t *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
        va_end(ap);
        ASSERT(k >= 0, "vsnprintf failed");
        if ((size_t)k < t->cap - t->n) {
            t->n += (size_t)k;
            return;
        }
        t->cap = 2 * t->cap + (size_t)k + 1;
        t->s = xrealloc(t->s, t->cap);
    }
}

/* Text from the file (node names, operator, producer) as a comment of the .net: printable
 * ASCII only, so that it neither ends the comment's line nor puts bytes the .net parser
 * refuses into it, and at most 120 characters. */
static const char *comment(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    for (; s && *s && o + 1 < len && o < 120; s++)
        buf[o++] = (unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f ? *s : '?';
    buf[o] = '\0';
    return buf;
}

static char *graph_text(const imp_t *im)
{
    text_t t = {.cap = 4096 + (size_t)im->n_layers * 256};
    t.s = xmalloc(t.cap);
    t.s[0] = '\0';
    const Onnx__ModelProto *m = im->model;
    char c1[128], c2[128], c3[128];
    text_add(&t, "# imported from %s (ONNX IR %" PRId64 ", opset %" PRId64 ", producer %s %s)\n"
             "# by `poseidon model import`; each line names the ONNX node it maps\n",
             comment(im->path, c1, sizeof c1), m->ir_version, im->opset,
             comment(m->producer_name ? m->producer_name : "?", c2, sizeof c2),
             comment(m->producer_version, c3, sizeof c3));
    for (int pass = 0; pass < 2; pass++) /* inputs first: the .net's first layer is one */
        for (int i = 0; i < im->n_layers; i++) {
            const out_layer_t *l = &im->layers[i];
            bool input = !strcmp(l->type, "input") || !strcmp(l->type, "tokens");
            if ((pass == 0) != input || l->split) continue;
            text_add(&t, "%s %s", l->type, l->name);
            if (l->keys[0]) text_add(&t, " %s", l->keys);
            if (l->bias >= 0) text_add(&t, " bias=%d", l->bias);
            if (l->tie >= 0) text_add(&t, " tie=%s", im->layers[l->tie].name);
            for (int k = 0; k < l->n_in; k++)
                text_add(&t, "%s%s", k ? "," : " in=", im->layers[l->in[k]].name);
            text_add(&t, "   # %s %s\n", comment(l->op, c1, sizeof c1),
                     comment(l->node, c2, sizeof c2));
        }
    return t.s;
}

static void imp_free(imp_t *im)
{
    for (int i = 0; i < im->n_vals; i++) {
        free(im->vals[i].ints);
        free(im->vals[i].reals);
    }
    free(im->vals);
    free(im->ix_key);
    free(im->ix_val);
    free(im->layers);
    ox_swin_free(im);
    if (im->model) onnx__model_proto__free_unpacked(im->model, NULL);
}

/* Imports into *im (left for the caller to check against the parsed model). */
static int import_run(imp_t *im, const uint8_t *buf, size_t len, char **net_text)
{
    *net_text = NULL;
    im->model = onnx__model_proto__unpack(NULL, len, buf);
    if (!im->model)
        return ox_imp_fail(im, "not an ONNX model (protobuf decoding failed: the file is truncated "
                        "or in another format)");
    const Onnx__ModelProto *m = im->model;
    if (!m->has_ir_version || !m->graph || m->n_opset_import == 0)
        return ox_imp_fail(im, "not an ONNX model (no %s)", !m->has_ir_version ? "IR version"
                        : !m->graph ? "graph" : "operator set");
    im->g = m->graph;
    im->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if ((!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx")) && o->has_version)
            im->opset = o->version;
    }
    if (im->opset < 0) return ox_imp_fail(im, "no operator set of the default ONNX domain");
    if (im->opset < ONNX_OPSET_MIN || im->opset > ONNX_OPSET_MAX)
        return ox_imp_fail(im, "operator set %" PRId64 " of the default ONNX domain is not supported "
                        "(%d to %d are)", im->opset, ONNX_OPSET_MIN, ONNX_OPSET_MAX);
    if (im->opts)
        for (int i = 0; i < im->opts->n_shapes; i++) {
            bool found = false;
            for (size_t k = 0; k < im->g->n_input; k++)
                if (im->g->input[k]->name &&
                    !strcmp(im->g->input[k]->name, im->opts->shapes[i].name))
                    found = true;
            if (!found)
                return ox_imp_fail(im, "--input-shape names '%s', which is not a graph input",
                                im->opts->shapes[i].name);
        }
    if (graph_values(im) || graph_map(im)) return -1;
    *net_text = graph_text(im);
    return 0;
}

int onnx_import_buffer(const char *path, const uint8_t *buf, size_t len,
                       const onnx_import_opts_t *opts, char **net_text, char *err, size_t errlen)
{
    imp_t im = {.path = path, .err = err, .errlen = errlen, .opts = opts};
    int rc = import_run(&im, buf, len, net_text);
    imp_free(&im);
    return rc;
}

/* Reads the whole file; returns NULL with the error set. */
static uint8_t *file_read(const char *path, size_t *len, char *err, size_t errlen)
{
    char *buf;
    if (infile_read(path, FILE_BYTES_MAX, &buf, len, err, errlen) == INFILE_BIG)
        snprintf(err, errlen, "%s: larger than 2 GiB, the most a protobuf message holds", path);
    return (uint8_t *)buf;
}

int onnx_import_file(const char *path, const onnx_import_opts_t *opts, char **net_text,
                     char *err, size_t errlen)
{
    size_t len;
    uint8_t *buf = file_read(path, &len, err, errlen);
    if (!buf) return -1;
    int rc = onnx_import_buffer(path, buf, len, opts, net_text, err, errlen);
    free(buf);
    return rc;
}

int onnx_model_load(model_t *m, const char *path, const onnx_import_opts_t *opts,
                    char **net_text, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (net_text) *net_text = NULL;
    size_t len;
    uint8_t *buf = file_read(path, &len, err, errlen);
    if (!buf) return -1;
    imp_t im = {.path = path, .err = err, .errlen = errlen, .opts = opts};
    char *text;
    int rc = import_run(&im, buf, len, &text);
    free(buf);
    if (rc) {
        imp_free(&im);
        return -1;
    }
    char perr[1024];
    if (model_parse(m, path, text, strlen(text), perr, sizeof perr)) {
        /* the importer checked every shape; the parser disagreeing is the importer's bug */
        snprintf(err, errlen, "%s: the imported description does not parse (%s)", path, perr);
        rc = -1;
    }
    /* The parser keeps the layers' order only up to a topological sort: match by name. */
    for (int i = 0; !rc && i < im.n_layers; i++) {
        const out_layer_t *o = &im.layers[i];
        if (o->split) continue;
        int k = model_find(m, o->name);
        ASSERT(k >= 0, "imported layer %s missing after parsing", o->name);
        shape_t s = m->layers[k].out_shape;
        if (strcmp(o->type, "softmax_loss") &&
            (s.c != o->shape.c || s.h != o->shape.h || s.w != o->shape.w)) {
            char a[48], b[48];
            snprintf(err, errlen, "%s: node '%s' (%s): the layer's shape %s differs from the "
                     "graph's %s", path, o->node, o->op, shape_str(s, a, sizeof a),
                     shape_str(o->shape, b, sizeof b));
            rc = -1;
        }
    }
    if (!rc && m->total_params != im.learnable) {
        snprintf(err, errlen, "%s: the layers hold %" PRId64 " parameters but the graph's "
                 "weights %" PRId64, path, m->total_params, im.learnable);
        rc = -1;
    }
    imp_free(&im);
    if (rc) {
        ox_printable(err);
        model_fini(m);
        free(text);
        return -1;
    }
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
    size_t nl = strlen(m->name);
    if (nl > 5 && !strcmp(m->name + nl - 5, ".onnx")) m->name[nl - 5] = '\0';
    if (net_text) *net_text = text;
    else free(text);
    return 0;
}

bool onnx_path_is_onnx(const char *path)
{
    size_t n = strlen(path);
    return n >= 5 && !strcmp(path + n - 5, ".onnx");
}

int onnx_shape_arg_parse(const char *arg, onnx_shape_arg_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof out->name) {
        snprintf(err, errlen, "--input-shape '%s': expected NAME=DIMS, e.g. input=1x3x224x224",
                 arg);
        return -1;
    }
    memcpy(out->name, arg, eq - arg);
    out->name[eq - arg] = '\0';
    const char *s = eq + 1;
    while (*s) {
        if (out->rank == ONNX_RANK_MAX) {
            snprintf(err, errlen, "--input-shape '%s': at most %d dimensions", arg, ONNX_RANK_MAX);
            return -1;
        }
        char *end;
        errno = 0;
        long long d = strtoll(s, &end, 10);
        if (end == s || errno || d < 1 || d > DIM_MAX || (*end && *end != 'x') ||
            (*end == 'x' && !end[1])) {
            snprintf(err, errlen, "--input-shape '%s': dimensions are integers from 1 to %" PRId64
                     " joined by 'x'", arg, DIM_MAX);
            return -1;
        }
        out->dims[out->rank++] = d;
        s = *end ? end + 1 : end;
    }
    if (!out->rank) {
        snprintf(err, errlen, "--input-shape '%s': no dimensions", arg);
        return -1;
    }
    return 0;
}
