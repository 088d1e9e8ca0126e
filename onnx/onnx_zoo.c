/* onnx_zoo: the operators of today's image networks (torchvision's MobileNets, EfficientNets,
 * RegNets, MnasNets, ShuffleNets) mapped to the act, mul, pool, slice and shuffle layers.
 *
 * PyTorch exports some of their modules as several nodes, which map back to one layer:
 *   SiLU       Mul(x, Sigmoid(x))                         -> act fn=silu
 *   Hardswish  Mul(x, HardSigmoid(x)) (opsets below 14)   -> act fn=hardswish
 *   SE gate    Mul(x, s), s of shape (N,C,1,1)            -> mul in=x,s
 *   mean       ReduceMean over the plane (x.mean([2, 3])) -> pool op=avg global=1
 *   chunk      Split, or Slice, of the channels           -> slice, one per part
 *   shuffle    Reshape (N,G,C/G,H,W), Transpose, Reshape  -> shuffle groups=G
 * The folds need the Sigmoid's (HardSigmoid's) output to be read by the Mul alone, so that the
 * layer that computed it can become the product.
 */
#include "onnx/onnx_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- activations ----------------------------------------------------------------------- */

static int act_emit(imp_t *im, const Onnx__NodeProto *n, val_t *x, const char *keys)
{
    out_layer_t *l = ox_emit(im, n, "act", &x, 1, x->rank, x->dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "%s", keys);
    return 1;
}

/* A bound of Clip: an input from opset 11 (absent or empty: none), an attribute before. */
static int clip_bound(imp_t *im, const Onnx__NodeProto *n, int k, const char *attr,
                      double *v, bool *given)
{
    *given = false;
    if (im->opset < 11) {
        *given = ox_attr_find(n, attr) != NULL;
        return ox_attr_float(im, n, attr, 0, v);
    }
    if (!ox_has_input(n, (size_t)k)) return 0;
    const val_t *b = &im->vals[ox_val_find(im, n->input[k])];
    if (!ox_const_scalar(b, v))
        return ox_node_fail(im, n, "its %s '%s' is not a constant scalar", attr, b->name);
    *given = true;
    return 0;
}

/* Clip(x, lo, hi) -> act fn=clip (ReLU6 is the default bounds); Clip(x, 0) -> relu */
static int op_clip(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    double lo, hi;
    bool has_lo, has_hi;
    if (clip_bound(im, n, 1, "min", &lo, &has_lo) || clip_bound(im, n, 2, "max", &hi, &has_hi))
        return -1;
    if (has_lo && lo == 0 && !has_hi)
        return ox_emit(im, n, "relu", &x, 1, x->rank, x->dims) ? 1 : -1;
    if (!has_lo || !has_hi || !(lo <= hi) || fabs(lo) > 1e9 || fabs(hi) > 1e9)
        return ox_node_fail(im, n, "a Clip maps to act fn=clip with both bounds, finite and "
                            "ordered");
    char keys[96] = "fn=clip";
    if (lo != 0 || hi != 6) snprintf(keys, sizeof keys, "fn=clip min=%.9g max=%.9g", lo, hi);
    return act_emit(im, n, x, keys);
}

/* HardSigmoid(alpha, beta); PyTorch's (1/6, 1/2) are act's defaults, which a Mul may fold */
static int op_hardsigmoid(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    double alpha, beta;
    if (ox_attr_float(im, n, "alpha", 0.2, &alpha) || ox_attr_float(im, n, "beta", 0.5, &beta))
        return -1;
    char keys[96] = "fn=hardsigmoid";
    if (fabs(alpha - 1.0 / 6) > 1e-7 || beta != 0.5)
        snprintf(keys, sizeof keys, "fn=hardsigmoid alpha=%.9g beta=%.9g", alpha, beta);
    return act_emit(im, n, x, keys);
}

/* ---- products -------------------------------------------------------------------------- */

/* Mul(x, f(x)) where f's act layer reads x and only this Mul reads f: that layer becomes
 * silu or hardswish. Returns 1 when folded, 0 when not this pattern. */
static int fold_self_gate(imp_t *im, const Onnx__NodeProto *n, val_t *x, val_t *f)
{
    out_layer_t *l = &im->layers[f->layer];
    if (f->uses != 1 || strcmp(l->type, "act") || l->n_in != 1 || l->in[0] != x->layer ||
        x->rank != f->rank || memcmp(x->dims, f->dims, x->rank * sizeof *x->dims))
        return 0;
    const char *to = !strcmp(l->keys, "fn=sigmoid")       ? "fn=silu"
                     : !strcmp(l->keys, "fn=hardsigmoid") ? "fn=hardswish"
                                                          : NULL;
    if (!to) return 0;
    snprintf(l->keys, sizeof l->keys, "%s", to);
    l->op = !strcmp(to, "fn=silu") ? "Mul(x,Sigmoid(x))" : "Mul(x,HardSigmoid(x))";
    return ox_data_define(im, n, 0, f->layer, x->rank, x->dims) ? -1 : 1;
}

/* Mul of two data values: x times a (N,C,1,1) gate, or of one shape -> mul */
static int op_mul(imp_t *im, const Onnx__NodeProto *n, val_t *a, val_t *b)
{
    int folded = fold_self_gate(im, n, a, b);
    if (!folded) folded = fold_self_gate(im, n, b, a);
    if (folded) return folded;
    if (!ox_data_is_layer_shaped(im, a) || !ox_data_is_layer_shaped(im, b))
        return ox_node_fail(im, n, "a product of data laid out otherwise than its layers");
    bool a_gate = a->rank == 4 && a->dims[2] == 1 && a->dims[3] == 1;
    val_t *ins[2] = {a, b};
    if (a_gate && !(b->rank == 4 && b->dims[2] == 1 && b->dims[3] == 1)) {
        ins[0] = b;
        ins[1] = a;
    }
    val_t *x = ins[0], *s = ins[1];
    bool same = x->rank == s->rank && !memcmp(x->dims, s->dims, x->rank * sizeof *x->dims);
    bool gate = x->rank == 4 && s->rank == 4 && s->dims[0] == x->dims[0] &&
                s->dims[1] == x->dims[1] && s->dims[2] == 1 && s->dims[3] == 1;
    if (!same && !gate)
        return ox_node_fail(im, n, "multiplies '%s' by '%s': only data of one shape, or (N,C,H,W) "
                            "data by an (N,C,1,1) gate, map to mul", a->name, b->name);
    return ox_emit(im, n, "mul", ins, 2, x->rank, x->dims) ? 1 : -1;
}

/* ReduceMean over the plane of (N,C,H,W) data -> a global average pool */
static int op_reduce_mean(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    int64_t axes[ONNX_RANK_MAX], keep;
    int got;
    if (ox_attr_ints(im, n, "axes", -1, axes, ONNX_RANK_MAX, &got) ||
        ox_attr_int(im, n, "keepdims", 1, &keep))
        return -1;
    for (int i = 0; i < got; i++)
        if (axes[i] < 0) axes[i] += x->rank;
    bool plane = got == 2 && ((axes[0] == 2 && axes[1] == 3) || (axes[0] == 3 && axes[1] == 2));
    if (x->rank != 4 || !plane || !ox_data_is_layer_shaped(im, x))
        return ox_node_fail(im, n, "only a mean over the plane (axes 2 and 3) of (N,C,H,W) data "
                            "maps (to a global average pool)");
    int64_t dims[4] = {x->dims[0], x->dims[1], 1, 1};
    out_layer_t *l = ox_emit(im, n, "pool", &x, 1, keep ? 4 : 2, dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "op=avg global=1");
    return 1;
}

/* ---- channels -------------------------------------------------------------------------- */

/* Output k of n: channels [from, from + count) of x -> slice */
static int slice_emit(imp_t *im, const Onnx__NodeProto *n, size_t k, val_t *x, int64_t from,
                      int64_t count)
{
    int64_t dims[ONNX_RANK_MAX];
    memcpy(dims, x->dims, sizeof dims);
    dims[1] = count;
    val_t *first = &im->vals[ox_val_find(im, n->output[0])], keep = *first;
    out_layer_t *l = ox_emit(im, n, "slice", &x, 1, x->rank, dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "from=%" PRId64 " out=%" PRId64, from, count);
    if (k > 0) { /* ox_emit defines output 0: put it back, and define output k */
        *first = keep;
        ox_layer_rename(im, im->n_layers - 1, n->output[k]);
        if (ox_data_define(im, n, k, im->n_layers - 1, x->rank, dims)) return -1;
    }
    return 0;
}

static bool channel_data(imp_t *im, const val_t *x)
{
    return x->kind == VAL_DATA && !x->seq && x->rank >= 2 && x->rank <= 4 &&
           ox_data_is_layer_shaped(im, x);
}

/* Split along the channels -> one slice per output */
static int op_split(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    int64_t axis, parts[ONNX_SHAPE_ARGS_MAX];
    int got = 0;
    if (ox_attr_int(im, n, "axis", 0, &axis)) return -1;
    if (axis < 0) axis += x->rank;
    if (axis != 1 || n->n_output > ONNX_SHAPE_ARGS_MAX)
        return ox_node_fail(im, n, "only a split of the channels (axis 1), in at most %d parts, "
                            "maps", ONNX_SHAPE_ARGS_MAX);
    if (im->opset >= 13 && ox_has_input(n, 1)) {
        val_t *s = ox_in_ints(im, n, 1);
        if (!s) return -1;
        got = (int)(s->n_values == (int64_t)n->n_output ? s->n_values : -1);
        for (int i = 0; i < got; i++) parts[i] = s->ints[i];
    } else if (im->opset < 13 &&
               ox_attr_ints(im, n, "split", -1, parts, ONNX_SHAPE_ARGS_MAX, &got))
        return -1;
    int64_t c = x->dims[1], sum = 0;
    if (got == 0) {
        got = (int)n->n_output;
        if (c % got) return ox_node_fail(im, n, "%" PRId64 " channels in %d equal parts", c, got);
        for (int i = 0; i < got; i++) parts[i] = c / got;
    }
    if (got != (int)n->n_output) return ox_node_fail(im, n, "split sizes do not match the outputs");
    for (int i = 0; i < got; i++) sum += parts[i] > 0 ? parts[i] : -ONNX_DIM_MAX;
    if (sum != c) return ox_node_fail(im, n, "split sizes do not add up to %" PRId64, c);
    int64_t from = 0;
    for (int i = 0; i < got; i++) {
        if (n->output[i][0] && slice_emit(im, n, (size_t)i, x, from, parts[i])) return -1;
        from += parts[i];
    }
    return 1;
}

/* Slice of the channels (constant starts and ends, axis 1, step 1) -> slice */
static int op_slice(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    if (im->opset < 10) return ox_node_fail(im, n, "Slice of operator sets before 10 does not map");
    val_t *st = ox_in_ints(im, n, 1), *en = st ? ox_in_ints(im, n, 2) : NULL;
    val_t *ax = ox_has_input(n, 3) ? ox_in_ints(im, n, 3) : NULL;
    val_t *sp = ox_has_input(n, 4) ? ox_in_ints(im, n, 4) : NULL;
    if (!st || !en || (ox_has_input(n, 3) && !ax) || (ox_has_input(n, 4) && !sp)) return -1;
    int64_t axis = ax && ax->n_values == 1 ? ax->ints[0] : ax ? -1 : 0;
    if (axis < 0 && ax) axis += x->rank;
    if (st->n_values != 1 || en->n_values != 1 || axis != 1 || (sp && (sp->n_values != 1 ||
                                                                         sp->ints[0] != 1)))
        return ox_node_fail(im, n, "only a slice of the channels (axis 1, step 1) of data maps");
    int64_t c = x->dims[1], a = st->ints[0], b = en->ints[0];
    a = a < 0 ? a + c : a;
    b = b < 0 ? b + c : b;
    a = a < 0 ? 0 : a > c ? c : a;
    b = b < a ? a : b > c ? c : b;
    if (b == a) return ox_node_fail(im, n, "an empty slice");
    return slice_emit(im, n, 0, x, a, b - a) ? -1 : 1;
}

/* Reshape (N,C,H,W) -> (N,G,C/G,H,W), the first step of a channel shuffle */
static int shuffle_split(imp_t *im, const Onnx__NodeProto *n, val_t *x, int rank,
                         const int64_t *dims)
{
    if (rank != 5 || dims[0] != x->dims[0] || dims[1] * dims[2] != x->dims[1] ||
        dims[3] != x->dims[2] || dims[4] != x->dims[3] || dims[1] < 2)
        return 0;
    if (ox_data_define(im, n, 0, x->layer, rank, dims)) return -1;
    im->vals[ox_val_find(im, n->output[0])].shuffle_groups = (int)dims[1];
    return 1;
}

/* Transpose of the groups' two axes of a shuffle on its way */
static int shuffle_transpose(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    int64_t perm[ONNX_RANK_MAX];
    int got;
    if (ox_attr_ints(im, n, "perm", -1, perm, ONNX_RANK_MAX, &got)) return -1;
    static const int64_t want[5] = {0, 2, 1, 3, 4};
    if (got != 5 || memcmp(perm, want, sizeof want) || x->shuffle_transposed)
        return ox_node_fail(im, n, "a transpose of (N,G,C/G,H,W) data other than of axes 1 and 2 "
                            "(a channel shuffle)");
    int64_t dims[5] = {x->dims[0], x->dims[2], x->dims[1], x->dims[3], x->dims[4]};
    if (ox_data_define(im, n, 0, x->layer, 5, dims)) return -1;
    val_t *y = &im->vals[ox_val_find(im, n->output[0])];
    y->shuffle_groups = x->shuffle_groups;
    y->shuffle_transposed = true;
    return 1;
}

/* Reshape: the steps of a channel shuffle; 0 for any other (op_reshape's) */
static int zoo_reshape(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    if (x->kind != VAL_DATA || x->seq || !ox_has_input(n, 1)) return 0;
    bool after = x->shuffle_groups && x->shuffle_transposed;
    bool before = x->rank == 4 && ox_data_is_layer_shaped(im, x);
    if (!after && !before) return 0;
    int rank;
    int64_t dims[ONNX_RANK_MAX];
    if (ox_reshape_dims(im, n, x, &rank, dims)) return -1;
    if (before) return shuffle_split(im, n, x, rank, dims);
    const shape_t s = im->layers[x->layer].shape;
    if (rank != 4 || dims[0] != x->dims[0] || dims[1] != s.c || dims[2] != s.h || dims[3] != s.w)
        return ox_node_fail(im, n, "a channel shuffle that does not end in (N,C,H,W)");
    val_t *in = x;
    out_layer_t *l = ox_emit(im, n, "shuffle", &in, 1, 4, dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "groups=%d", x->shuffle_groups);
    return 1;
}

/* Mul of (N,C,H,W) data by a learned (C,1,1) weight -> scale (ConvNeXt's layer scale) */
static int op_scale(imp_t *im, const Onnx__NodeProto *n, size_t k_data)
{
    val_t *x = ox_in(im, n, k_data), *w = ox_in_weight(im, n, 1 - k_data, -1, true);
    if (!w) return -1;
    int64_t c = x->dims[1];
    if (x->rank != 4 || !ox_data_is_layer_shaped(im, x) || w->rank != 3 || w->dims[0] != c ||
        w->dims[1] != 1 || w->dims[2] != 1)
        return ox_node_fail(im, n, "multiplies data by weight '%s': only (N,C,H,W) data by a "
                            "(C,1,1) weight maps (to scale)", w->name);
    return ox_emit(im, n, "scale", &x, 1, x->rank, x->dims) ? 1 : -1;
}

static bool learned(const val_t *v)
{
    return v && (v->kind == VAL_PARAM || v->kind == VAL_INPUT ||
                 (v->kind == VAL_CONST && v->initializer && v->reals && v->n_values > 1));
}

int ox_zoo_node(imp_t *im, const Onnx__NodeProto *n)
{
    const char *op = ox_node_op(n);
    val_t *a = ox_in(im, n, 0), *b = ox_in(im, n, 1);
    if (!strcmp(op, "Mul") && a && b && learned(a) && b->kind == VAL_DATA && !b->seq)
        return op_scale(im, n, 1);
    if (!strcmp(op, "Mul") && a && b && learned(b) && a->kind == VAL_DATA && !a->seq)
        return op_scale(im, n, 0);
    if (!a || a->kind != VAL_DATA || a->seq) return 0;
    if (a->shuffle_groups && !strcmp(op, "Transpose")) return shuffle_transpose(im, n, a);
    if (!strcmp(op, "Reshape")) return zoo_reshape(im, n, a);
    if (a->shuffle_groups || (a->rank > 4 && !a->seq))
        return ox_node_fail(im, n, "reads '%s', a 5-D view of a channel shuffle on its way",
                            a->name);
    if (!strcmp(op, "Mul") && b && b->kind == VAL_DATA && !b->seq) return op_mul(im, n, a, b);
    if (!strcmp(op, "Split") && channel_data(im, a)) return op_split(im, n, a);
    if (!strcmp(op, "Slice") && channel_data(im, a)) return op_slice(im, n, a);
    if (!strcmp(op, "ReduceMean")) return op_reduce_mean(im, n, a);
    if (!strcmp(op, "Clip")) return op_clip(im, n, a);
    if (!strcmp(op, "Sigmoid")) return act_emit(im, n, a, "fn=sigmoid");
    if (!strcmp(op, "HardSigmoid")) return op_hardsigmoid(im, n, a);
    if (!strcmp(op, "HardSwish")) return act_emit(im, n, a, "fn=hardswish");
    return 0;
}
