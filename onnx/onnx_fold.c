/* onnx_fold: constant folding of the shape arithmetic exporters write into a graph.
 *
 * PyTorch's exporter computes a Reshape's target, a Slice's bounds or an attention mask
 * with small integer graphs (Shape, Gather, Unsqueeze, Concat, Div, Trilu, Where, ...). Their
 * inputs are all known here (shapes are static), so they are evaluated, and the operators
 * that read their results (Reshape, Slice, Where on scores) see constants. Tensors are small
 * (ONNX_CONST_VALUES_MAX values at most); integers stay int64, reals double.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "onnx/onnx_internal.h"

static bool is_const(const val_t *v) { return v && v->kind == VAL_CONST; }

static double cval(const val_t *v, int64_t i) { return v->reals ? v->reals[i] : (double)v->ints[i]; }

/* Makes y a constant of the given shape, integer or real, values zeroed. */
static int const_make(imp_t *im, const Onnx__NodeProto *n, val_t *y, int rank,
                      const int64_t *dims, bool real)
{
    if (rank > ONNX_RANK_MAX) return ox_node_fail(im, n, "constant of rank %d", rank);
    int64_t count = ox_dims_count(rank, dims);
    if (count > ONNX_CONST_VALUES_MAX)
        return ox_node_fail(im, n, "constant of %" PRId64 " values (at most %d fold)", count,
                            ONNX_CONST_VALUES_MAX);
    free(y->ints);
    free(y->reals);
    y->ints = NULL;
    y->reals = NULL;
    y->kind = VAL_CONST;
    y->rank = rank;
    memcpy(y->dims, dims, rank * sizeof *dims);
    y->dims_known = true;
    y->n_values = count;
    if (real) y->reals = xcalloc(count ? count : 1, sizeof *y->reals);
    else y->ints = xcalloc(count ? count : 1, sizeof *y->ints);
    return 0;
}

static void const_set(val_t *y, int64_t i, double x)
{
    if (y->reals) y->reals[i] = x;
    else y->ints[i] = (int64_t)x;
}

/* Numpy broadcasting of the shapes of ins[0..n) into dims; returns the rank or -1. */
static int broadcast(val_t *const *ins, int n, int64_t *dims)
{
    int rank = 0;
    for (int i = 0; i < n; i++)
        if (ins[i]->rank > rank) rank = ins[i]->rank;
    for (int d = 0; d < rank; d++) {
        int64_t size = 1;
        for (int i = 0; i < n; i++) {
            int k = d - (rank - ins[i]->rank);
            if (k < 0) continue;
            int64_t s = ins[i]->dims[k];
            if (s != 1 && size != 1 && s != size) return -1;
            if (s != 1) size = s;
        }
        dims[d] = size;
    }
    return rank;
}

/* The element of v that broadcasts to position flat of a tensor of shape (rank, dims). */
static int64_t broadcast_index(const val_t *v, int rank, const int64_t *dims, int64_t flat)
{
    int64_t idx = 0, stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int64_t coord = flat % dims[d];
        flat /= dims[d];
        int k = d - (rank - v->rank);
        if (k < 0) continue;
        if (v->dims[k] != 1) idx += coord * stride;
        stride *= v->dims[k];
    }
    return idx;
}

static int fold_elementwise(imp_t *im, const Onnx__NodeProto *n, const char *op, val_t *y)
{
    val_t *ins[3];
    int n_in = (int)n->n_input;
    int want = !strcmp(op, "Where") ? 3 : !strcmp(op, "Not") || !strcmp(op, "Neg") ? 1 : 2;
    if (n_in != want) return ox_node_fail(im, n, "%d inputs (%s takes %d)", n_in, op, want);
    for (int i = 0; i < n_in; i++)
        if (!(ins[i] = ox_in(im, n, i))) return ox_node_fail(im, n, "input %d is missing", i);
    int64_t dims[ONNX_RANK_MAX];
    int rank = broadcast(ins, n_in, dims);
    if (rank < 0) return ox_node_fail(im, n, "shapes do not broadcast");
    bool real = false;
    if (!strcmp(op, "Where")) real = ins[1]->reals || ins[2]->reals;
    else if (strcmp(op, "Equal") && strcmp(op, "Not") && strcmp(op, "Less") &&
             strcmp(op, "Greater"))
        for (int i = 0; i < n_in; i++) real |= ins[i]->reals != NULL;
    if (const_make(im, n, y, rank, dims, real)) return -1;
    for (int64_t i = 0; i < y->n_values; i++) {
        double a = cval(ins[0], broadcast_index(ins[0], rank, dims, i));
        double b = n_in > 1 ? cval(ins[1], broadcast_index(ins[1], rank, dims, i)) : 0;
        double r;
        if (!strcmp(op, "Add")) r = a + b;
        else if (!strcmp(op, "Sub")) r = a - b;
        else if (!strcmp(op, "Mul")) r = a * b;
        else if (!strcmp(op, "Div")) {
            if (!real && b == 0) return ox_node_fail(im, n, "integer division by zero");
            r = real ? a / b : (double)((int64_t)a / (int64_t)b);
        } else if (!strcmp(op, "Equal")) r = a == b;
        else if (!strcmp(op, "Less")) r = a < b;
        else if (!strcmp(op, "Greater")) r = a > b;
        else if (!strcmp(op, "Not")) r = a == 0;
        else if (!strcmp(op, "Neg")) r = -a;
        else { /* Where */
            double c = cval(ins[2], broadcast_index(ins[2], rank, dims, i));
            r = a != 0 ? b : c;
        }
        const_set(y, i, r);
    }
    return 1;
}

/* Axes of Unsqueeze/Squeeze: an input from opset 13, an attribute before. */
static int fold_axes(imp_t *im, const Onnx__NodeProto *n, int64_t *axes, int *n_axes)
{
    if (im->opset >= 13) {
        *n_axes = 0;
        if (!ox_has_input(n, 1)) return 0;
        val_t *a = ox_in_ints(im, n, 1);
        if (!a) return -1;
        if (a->n_values > ONNX_RANK_MAX) return ox_node_fail(im, n, "too many axes");
        for (int64_t i = 0; i < a->n_values; i++) axes[i] = a->ints[i];
        *n_axes = (int)a->n_values;
        return 0;
    }
    return ox_attr_ints(im, n, "axes", -1, axes, ONNX_RANK_MAX, n_axes);
}

static int fold_unsqueeze(imp_t *im, const Onnx__NodeProto *n, val_t *x, val_t *y, bool squeeze)
{
    int64_t axes[ONNX_RANK_MAX];
    int n_axes;
    if (fold_axes(im, n, axes, &n_axes)) return -1;
    int out_rank = squeeze ? x->rank - n_axes : x->rank + n_axes;
    if (squeeze && n_axes == 0) {
        out_rank = 0;
        for (int d = 0; d < x->rank; d++) out_rank += x->dims[d] != 1;
    }
    if (out_rank < 0 || out_rank > ONNX_RANK_MAX) return ox_node_fail(im, n, "bad axes");
    bool mark[ONNX_RANK_MAX] = {false};
    int mark_rank = squeeze ? x->rank : out_rank;
    for (int i = 0; i < n_axes; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + mark_rank : axes[i];
        if (a < 0 || a >= mark_rank || mark[a]) return ox_node_fail(im, n, "bad axes");
        mark[a] = true;
    }
    int64_t dims[ONNX_RANK_MAX];
    if (squeeze) {
        int o = 0;
        for (int d = 0; d < x->rank; d++) {
            bool drop = n_axes ? mark[d] : x->dims[d] == 1;
            if (drop && x->dims[d] != 1) return ox_node_fail(im, n, "squeezes a dimension > 1");
            if (!drop) dims[o++] = x->dims[d];
        }
    } else
        for (int d = 0, k = 0; d < out_rank; d++) dims[d] = mark[d] ? 1 : x->dims[k++];
    if (x->kind == VAL_DATA) return 0; /* a sequence value: onnx_seq relabels it */
    if (const_make(im, n, y, out_rank, dims, x->reals != NULL)) return -1;
    for (int64_t i = 0; i < y->n_values; i++) const_set(y, i, cval(x, i));
    return 1;
}

static int fold_concat(imp_t *im, const Onnx__NodeProto *n, val_t *y)
{
    int64_t axis;
    if (ox_attr_int(im, n, "axis", 0, &axis)) return -1;
    val_t *first = ox_in(im, n, 0);
    int rank = first->rank;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return ox_node_fail(im, n, "axis out of range");
    int64_t dims[ONNX_RANK_MAX];
    memcpy(dims, first->dims, sizeof dims);
    dims[axis] = 0;
    bool real = false;
    for (size_t k = 0; k < n->n_input; k++) {
        val_t *v = ox_in(im, n, k);
        if (v->rank != rank) return ox_node_fail(im, n, "inputs of different ranks");
        for (int d = 0; d < rank; d++)
            if (d != axis && v->dims[d] != first->dims[d])
                return ox_node_fail(im, n, "inputs of different shapes");
        dims[axis] += v->dims[axis];
        real |= v->reals != NULL;
    }
    if (const_make(im, n, y, rank, dims, real)) return -1;
    int64_t outer = ox_dims_count((int)axis, dims), inner = ox_dims_count(rank - (int)axis - 1,
                                                                          dims + axis + 1);
    int64_t o = 0;
    for (int64_t a = 0; a < outer; a++)
        for (size_t k = 0; k < n->n_input; k++) {
            val_t *v = ox_in(im, n, k);
            int64_t block = v->dims[axis] * inner;
            for (int64_t i = 0; i < block; i++) const_set(y, o++, cval(v, a * block + i));
        }
    return 1;
}

/* Gather along axis 0 of a 1-D or 2-D constant (shape lists, rows of a mask). */
static int fold_gather(imp_t *im, const Onnx__NodeProto *n, val_t *x, val_t *y)
{
    int64_t axis;
    if (ox_attr_int(im, n, "axis", 0, &axis)) return -1;
    val_t *idx = ox_in(im, n, 1);
    if (axis < 0) axis += x->rank;
    if (axis != 0 || x->rank < 1 || !idx->ints)
        return ox_node_fail(im, n, "folds only a gather along axis 0 with integer indices");
    int64_t dims[ONNX_RANK_MAX];
    int rank = idx->rank + x->rank - 1;
    if (rank > ONNX_RANK_MAX) return ox_node_fail(im, n, "result of rank %d", rank);
    memcpy(dims, idx->dims, idx->rank * sizeof *dims);
    memcpy(dims + idx->rank, x->dims + 1, (x->rank - 1) * sizeof *dims);
    if (const_make(im, n, y, rank, dims, x->reals != NULL)) return -1;
    int64_t row = ox_dims_count(x->rank - 1, x->dims + 1);
    for (int64_t i = 0; i < idx->n_values; i++) {
        int64_t r = idx->ints[i] < 0 ? idx->ints[i] + x->dims[0] : idx->ints[i];
        if (r < 0 || r >= x->dims[0]) return ox_node_fail(im, n, "index out of range");
        for (int64_t j = 0; j < row; j++) const_set(y, i * row + j, cval(x, r * row + j));
    }
    return 1;
}

/* Slice of a 1-D constant (bounds of shape lists). */
static int fold_slice(imp_t *im, const Onnx__NodeProto *n, val_t *x, val_t *y)
{
    if (x->rank != 1) return ox_node_fail(im, n, "folds only slices of lists");
    val_t *st = ox_in_ints(im, n, 1), *en = st ? ox_in_ints(im, n, 2) : NULL;
    if (!en) return -1;
    val_t *ax = ox_in(im, n, 3), *sp = ox_in(im, n, 4);
    if ((ax && (!ax->ints || ax->n_values != 1 || (ax->ints[0] != 0 && ax->ints[0] != -1))) ||
        (sp && (!sp->ints || sp->n_values != 1 || sp->ints[0] != 1)) || st->n_values != 1 ||
        en->n_values != 1)
        return ox_node_fail(im, n, "folds only unit-step slices of one axis");
    int64_t len = x->dims[0], b = st->ints[0], e = en->ints[0];
    if (b < 0) b += len;
    if (e < 0) e += len;
    b = b < 0 ? 0 : b > len ? len : b;
    e = e < b ? b : e > len ? len : e;
    int64_t dims[1] = {e - b};
    if (const_make(im, n, y, 1, dims, x->reals != NULL)) return -1;
    for (int64_t i = b; i < e; i++) const_set(y, i - b, cval(x, i));
    return 1;
}

static int fold_reshape(imp_t *im, const Onnx__NodeProto *n, val_t *x, val_t *y)
{
    val_t *s = ox_in_ints(im, n, 1);
    if (!s) return -1;
    if (s->n_values > ONNX_RANK_MAX) return ox_node_fail(im, n, "target of too many dimensions");
    int64_t dims[ONNX_RANK_MAX], known = 1;
    int infer = -1;
    for (int i = 0; i < s->n_values; i++) {
        dims[i] = s->ints[i] == 0 && i < x->rank ? x->dims[i] : s->ints[i];
        if (dims[i] == -1) {
            if (infer >= 0) return ox_node_fail(im, n, "two dimensions to infer");
            infer = i;
        } else if (dims[i] < 0) return ox_node_fail(im, n, "negative target dimension");
        else known = ox_mul_sat(known, dims[i]);
    }
    if (infer >= 0) dims[infer] = known ? x->n_values / known : 0;
    if (ox_dims_count((int)s->n_values, dims) != x->n_values)
        return ox_node_fail(im, n, "changes the element count");
    if (const_make(im, n, y, (int)s->n_values, dims, x->reals != NULL)) return -1;
    for (int64_t i = 0; i < y->n_values; i++) const_set(y, i, cval(x, i));
    return 1;
}

static int fold_trilu(imp_t *im, const Onnx__NodeProto *n, val_t *x, val_t *y)
{
    int64_t upper, k = 0;
    if (ox_attr_int(im, n, "upper", 1, &upper)) return -1;
    val_t *kv = ox_in(im, n, 1);
    if (kv) {
        double d;
        if (!ox_const_scalar(kv, &d)) return ox_node_fail(im, n, "k must be a constant scalar");
        k = (int64_t)d;
    }
    if (x->rank < 2) return ox_node_fail(im, n, "needs a matrix");
    if (const_make(im, n, y, x->rank, x->dims, x->reals != NULL)) return -1;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    for (int64_t i = 0; i < y->n_values; i++) {
        int64_t r = (i / cols) % rows, c = i % cols;
        bool keep = upper ? c - r >= k : c - r <= k;
        const_set(y, i, keep ? cval(x, i) : 0);
    }
    return 1;
}

static int fold_cast(imp_t *im, const Onnx__NodeProto *n, val_t *x, val_t *y)
{
    int64_t to;
    if (ox_attr_int(im, n, "to", 0, &to)) return -1;
    bool real = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    bool boolean = to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    int64_t dims[ONNX_RANK_MAX];
    memcpy(dims, x->dims, sizeof dims);
    if (const_make(im, n, y, x->rank, dims, real)) return -1;
    for (int64_t i = 0; i < y->n_values; i++) {
        double v = cval(x, i);
        const_set(y, i, boolean ? v != 0 : real ? v : trunc(v));
    }
    return 1;
}

/* ConstantOfShape, Expand, Range: constants made to a shape. */
static int fold_make(imp_t *im, const Onnx__NodeProto *n, const char *op, val_t *y)
{
    if (!strcmp(op, "Range")) {
        double st, li, de;
        if (!ox_const_scalar(ox_in(im, n, 0), &st) || !ox_const_scalar(ox_in(im, n, 1), &li) ||
            !ox_const_scalar(ox_in(im, n, 2), &de) || de == 0)
            return ox_node_fail(im, n, "start, limit and delta must be constant scalars");
        double count = ceil((li - st) / de);
        int64_t dims[1] = {count > 0 ? (int64_t)count : 0};
        if (dims[0] > ONNX_CONST_VALUES_MAX) return ox_node_fail(im, n, "too long a range");
        bool real = ox_in(im, n, 0)->reals != NULL;
        if (const_make(im, n, y, 1, dims, real)) return -1;
        for (int64_t i = 0; i < dims[0]; i++) const_set(y, i, st + (double)i * de);
        return 1;
    }
    val_t *shape = ox_in_ints(im, n, !strcmp(op, "Expand") ? 1 : 0);
    if (!shape) return -1;
    if (shape->n_values > ONNX_RANK_MAX) return ox_node_fail(im, n, "too many dimensions");
    int64_t dims[ONNX_RANK_MAX];
    for (int64_t i = 0; i < shape->n_values; i++) {
        dims[i] = shape->ints[i];
        if (dims[i] < 0 || dims[i] > ONNX_DIM_MAX) return ox_node_fail(im, n, "bad dimension");
    }
    int rank = (int)shape->n_values;
    if (!strcmp(op, "ConstantOfShape")) {
        /* the fill value: a one-element tensor, 0.0 (float) when absent */
        val_t fill = {.name = "value"};
        const Onnx__AttributeProto *a = ox_attr_find(n, "value");
        if (a && a->t && ox_tensor_read(im, "value", a->t, &fill)) return -1;
        bool real = !fill.ints;
        double v = fill.n_values >= 1 && (fill.reals || fill.ints) ? cval(&fill, 0) : 0;
        free(fill.reals);
        free(fill.ints);
        if (const_make(im, n, y, rank, dims, real)) return -1;
        for (int64_t i = 0; i < y->n_values; i++) const_set(y, i, v);
        return 1;
    }
    val_t *x = ox_in(im, n, 0); /* Expand: bidirectional broadcast */
    val_t shape_only = {.rank = rank};
    memcpy(shape_only.dims, dims, sizeof dims);
    val_t *both[2] = {x, &shape_only};
    int64_t out[ONNX_RANK_MAX];
    int out_rank = broadcast(both, 2, out);
    if (out_rank < 0) return ox_node_fail(im, n, "shapes do not broadcast");
    if (const_make(im, n, y, out_rank, out, x->reals != NULL)) return -1;
    for (int64_t i = 0; i < y->n_values; i++)
        const_set(y, i, cval(x, broadcast_index(x, out_rank, out, i)));
    return 1;
}

int ox_fold(imp_t *im, const Onnx__NodeProto *n)
{
    const char *op = ox_node_op(n);
    val_t *y = ox_out(im, n, 0);
    if (!y || n->n_output != 1) return 0;
    if (!strcmp(op, "Shape")) { /* of anything with known dimensions */
        val_t *x = ox_in(im, n, 0);
        if (!x || !x->dims_known || x->kind == VAL_UNDEFINED) return 0;
        int64_t start, end;
        if (ox_attr_int(im, n, "start", 0, &start) ||
            ox_attr_int(im, n, "end", x->rank, &end))
            return -1;
        if (start < 0) start += x->rank;
        if (end < 0) end += x->rank;
        start = start < 0 ? 0 : start > x->rank ? x->rank : start;
        end = end < start ? start : end > x->rank ? x->rank : end;
        for (int d = (int)start; d < end; d++)
            if (x->dims[d] < 0) return ox_node_fail(im, n, "reads a dynamic dimension");
        int64_t dims[1] = {end - start};
        if (const_make(im, n, y, 1, dims, false)) return -1;
        for (int64_t d = start; d < end; d++) y->ints[d - start] = x->dims[d];
        return 1;
    }
    for (size_t k = 0; k < n->n_input; k++)
        if (n->input[k][0] && !is_const(ox_in(im, n, k))) return 0;
    if (n->n_input == 0) return 0; /* Constant: mapped by the importer */
    val_t *x = ox_in(im, n, 0);
    if (!x) return 0;
    static const char *const elementwise[] = {"Add",  "Sub",  "Mul",     "Div",   "Equal", "Less",
                                              "Greater", "Not", "Neg", "Where"};
    for (size_t i = 0; i < sizeof elementwise / sizeof *elementwise; i++)
        if (!strcmp(op, elementwise[i])) return fold_elementwise(im, n, op, y);
    if (!strcmp(op, "Unsqueeze")) return fold_unsqueeze(im, n, x, y, false);
    if (!strcmp(op, "Squeeze")) return fold_unsqueeze(im, n, x, y, true);
    if (!strcmp(op, "Concat")) return fold_concat(im, n, y);
    /* rows of a table exported with its values are an embedding's or positions', not
     * arithmetic: left to the sequence mapping, which counts the table's parameters */
    if (!strcmp(op, "Gather") && x->initializer && x->reals && x->rank == 2) return 0;
    if (!strcmp(op, "Gather")) return fold_gather(im, n, x, y);
    if (!strcmp(op, "Slice")) return fold_slice(im, n, x, y);
    if (!strcmp(op, "Reshape")) return fold_reshape(im, n, x, y);
    if (!strcmp(op, "Trilu")) return fold_trilu(im, n, x, y);
    if (!strcmp(op, "Cast")) return fold_cast(im, n, x, y);
    if (!strcmp(op, "ConstantOfShape") || !strcmp(op, "Expand") || !strcmp(op, "Range"))
        return fold_make(im, n, op, y);
    return 0;
}
