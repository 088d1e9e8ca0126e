/* onnx_vals: the values a graph's tensor names stand for (a name index over imp_t's table),
 * declared types and tensors read into them, the layers being emitted and how data values
 * map onto them, and reading a node's inputs as data, weights or integer constants. Above
 * onnx_attr.c, below the graph walk (onnx_import.c) and the operator mappings (onnx_fold.c,
 * onnx_seq.c).
 */
#include "onnx/onnx_internal.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

/* ---- the value table ------------------------------------------------------------------- */

static unsigned str_hash(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int ox_val_find(const imp_t *im, const char *name)
{
    if (!im->ix_cap) return -1;
    for (unsigned i = str_hash(name) % (unsigned)im->ix_cap;; i = (i + 1) % (unsigned)im->ix_cap) {
        if (!im->ix_key[i]) return -1;
        if (!strcmp(im->ix_key[i], name)) return im->ix_val[i];
    }
}

static void index_put(imp_t *im, const char *name, int v)
{
    for (unsigned i = str_hash(name) % (unsigned)im->ix_cap;; i = (i + 1) % (unsigned)im->ix_cap)
        if (!im->ix_key[i]) {
            im->ix_key[i] = (char *)name;
            im->ix_val[i] = v;
            return;
        }
}

/* Adds a value named name; returns its index, or -1 if the name exists already. */
int ox_val_add(imp_t *im, const char *name, val_kind_t kind)
{
    if (ox_val_find(im, name) >= 0) return -1;
    if (2 * (im->n_vals + 1) > im->ix_cap) {
        char **ok = im->ix_key;
        int oc = im->ix_cap;
        im->ix_cap = 2 * oc + 64;
        im->ix_key = xcalloc(im->ix_cap, sizeof *im->ix_key);
        int *ov = im->ix_val;
        im->ix_val = xcalloc(im->ix_cap, sizeof *im->ix_val);
        for (int i = 0; i < oc; i++)
            if (ok[i]) index_put(im, ok[i], ov[i]);
        free(ok);
        free(ov);
    }
    if (im->n_vals == im->cap_vals) {
        im->cap_vals = 2 * im->cap_vals + 64;
        im->vals = xrealloc(im->vals, im->cap_vals * sizeof *im->vals);
    }
    val_t *v = &im->vals[im->n_vals];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->kind = kind;
    v->dynamic_dim = -1;
    v->layer = -1;
    v->scale = 1;
    v->embed_layer = -1;
    for (int d = 0; d < ONNX_RANK_MAX; d++) v->src_axis[d] = (int8_t)d;
    index_put(im, name, im->n_vals);
    return im->n_vals++;
}

/* ---- tensors and types ----------------------------------------------------------------- */

/* Dimensions of a declared tensor type. Returns 0; dims_known false when the type has no
 * shape; a dimension without a value is recorded in dynamic_dim/dynamic_name. */
int ox_type_dims(imp_t *im, const char *what, const Onnx__TypeProto *t, val_t *v)
{
    v->dims_known = false;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type ||
        !t->tensor_type->shape)
        return 0;
    const Onnx__TensorShapeProto *s = t->tensor_type->shape;
    v->elem_type = t->tensor_type->has_elem_type ? t->tensor_type->elem_type : 0;
    if (s->n_dim > ONNX_RANK_MAX)
        return ox_imp_fail(im, "%s '%s' has rank %zu (at most %d)", what, v->name, s->n_dim,
                        ONNX_RANK_MAX);
    v->rank = (int)s->n_dim;
    for (int i = 0; i < v->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = s->dim[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0 || d->dim_value > ONNX_DIM_MAX)
                return ox_imp_fail(im, "%s '%s' has dimension %d of size %" PRId64
                                ": expected 0 to %" PRId64,
                                what, v->name, i, d->dim_value, ONNX_DIM_MAX);
            v->dims[i] = d->dim_value;
        } else {
            v->dims[i] = -1;
            if (v->dynamic_dim < 0) v->dynamic_dim = i;
            bool named = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            v->dim_name[i] = named && d->dim_param ? d->dim_param : "";
        }
    }
    v->dims_known = true;
    return 0;
}

/* Reads the data of a tensor (a Constant's value or an initializer) into v as integers or
 * reals. A tensor without data (an initializer of a graph exported without weights) leaves
 * the value a parameter. */
int ox_tensor_read(imp_t *im, const char *what, const Onnx__TensorProto *t, val_t *v)
{
    if (t->n_dims > ONNX_RANK_MAX)
        return ox_imp_fail(im, "%s '%s' has rank %zu (at most %d)", what, v->name, t->n_dims,
                        ONNX_RANK_MAX);
    v->rank = (int)t->n_dims;
    for (int i = 0; i < v->rank; i++) {
        if (t->dims[i] < 0 || t->dims[i] > ONNX_DIM_MAX)
            return ox_imp_fail(im, "%s '%s' has dimension %d of size %" PRId64, what, v->name, i,
                            t->dims[i]);
        v->dims[i] = t->dims[i];
    }
    v->dims_known = true;
    int64_t n = ox_dims_count(v->rank, v->dims);
    int type = t->has_data_type ? t->data_type : 0;
    size_t elem = 0;
    int64_t have = 0;
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: elem = 4; have = (int64_t)t->n_float_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: elem = 8; have = (int64_t)t->n_double_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: elem = 8; have = (int64_t)t->n_int64_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: elem = 4; have = (int64_t)t->n_int32_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: elem = 1; have = (int64_t)t->n_int32_data; break;
    default: break;
    }
    if (t->has_raw_data && elem) have = (int64_t)(t->raw_data.len / elem);
    if (have == 0 || n > ONNX_CONST_VALUES_MAX || !elem) {
        v->kind = VAL_PARAM; /* shape only */
        return 0;
    }
    if (have != n)
        return ox_imp_fail(im, "%s '%s' holds %" PRId64 " values for %" PRId64 " elements", what,
                        v->name, have, n);
    bool real = type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
                type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    v->kind = VAL_CONST;
    v->n_values = n;
    if (real) v->reals = xcalloc(n ? n : 1, sizeof *v->reals);
    else v->ints = xcalloc(n ? n : 1, sizeof *v->ints);
    const uint8_t *raw = t->has_raw_data ? t->raw_data.data : NULL;
    for (int64_t i = 0; i < n; i++) {
        switch (type) { /* raw data is little-endian, as on every host this builds for */
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: {
            float f;
            if (raw) memcpy(&f, raw + 4 * i, 4);
            else f = t->float_data[i];
            v->reals[i] = f;
            break;
        }
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
            if (raw) memcpy(&v->reals[i], raw + 8 * i, 8);
            else v->reals[i] = t->double_data[i];
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
            if (raw) memcpy(&v->ints[i], raw + 8 * i, 8);
            else v->ints[i] = t->int64_data[i];
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: {
            int32_t x;
            if (raw) memcpy(&x, raw + 4 * i, 4);
            else x = t->int32_data[i];
            v->ints[i] = x;
            break;
        }
        default: /* bool */
            v->ints[i] = raw ? raw[i] != 0 : t->int32_data[i] != 0;
        }
    }
    return 0;
}

/* ---- layers ---------------------------------------------------------------------------- */

static bool name_taken(const imp_t *im, const char *name)
{
    for (int i = 0; i < im->n_layers; i++)
        if (!strcmp(im->layers[i].name, name)) return true;
    return false;
}

/* A .net name from an ONNX name: '/' (reserved for blocks) becomes '.', other characters
 * outside [A-Za-z0-9_.-] become '_', made unique with a suffix. */
static void layer_name(const imp_t *im, const char *onnx, const char *op, const char *fallback,
                       char *out)
{
    char base[MODEL_NAME_MAX - 8];
    size_t o = 0;
    const char *s = onnx && onnx[0] ? onnx : fallback;
    while (*s == '/') s++;
    /* PyTorch names a node module path + "/" + operator: the module path is the name */
    size_t len = strlen(s), ol = op ? strlen(op) : 0;
    if (ol && len > ol + 1 && s[len - ol - 1] == '/' && !strcmp(s + len - ol, op)) len -= ol + 1;
    for (const char *e = s + len; s < e && o + 1 < sizeof base; s++) {
        unsigned char c = (unsigned char)*s;
        bool keep = isalnum(c) || c == '_' || c == '-' || c == '.';
        base[o++] = c == '/' ? '.' : keep ? (char)c : '_';
    }
    base[o] = '\0';
    if (!o) snprintf(base, sizeof base, "%s", "layer");
    snprintf(out, MODEL_NAME_MAX, "%s", base);
    for (int k = 2; name_taken(im, out); k++) snprintf(out, MODEL_NAME_MAX, "%s_%d", base, k);
}

out_layer_t *ox_layer_add(imp_t *im, const char *type, const Onnx__NodeProto *n,
                              const char *fallback)
{
    if (im->n_layers == im->cap_layers) {
        im->cap_layers = 2 * im->cap_layers + 64;
        im->layers = xrealloc(im->layers, im->cap_layers * sizeof *im->layers);
    }
    out_layer_t *l = &im->layers[im->n_layers];
    memset(l, 0, sizeof *l);
    char fb[MODEL_NAME_MAX];
    snprintf(fb, sizeof fb, "%s", fallback ? fallback : type);
    layer_name(im, n ? n->name : NULL, n ? n->op_type : NULL,
               n && n->n_output ? n->output[0] : fb, l->name);
    l->type = type;
    l->bias = -1;
    l->tie = -1;
    l->node = n ? ox_node_name(n) : fallback;
    l->op = n ? ox_node_op(n) : "graph input";
    im->n_layers++;
    return l;
}

void ox_layer_rename(imp_t *im, int layer, const char *onnx_name)
{
    char name[MODEL_NAME_MAX];
    im->layers[layer].name[0] = '\0';
    layer_name(im, onnx_name, NULL, "layer", name);
    snprintf(im->layers[layer].name, sizeof im->layers[layer].name, "%s", name);
}

/* Per-sample .net shape of an ONNX shape (batch first): (N,C,H,W) -> CxHxW, (N,C,L) ->
 * Cx1xL (a 1-D signal is a plane of one row), (N,F) -> F. */
static int ox_net_shape(int rank, const int64_t *dims, shape_t *s)
{
    if (rank == 4) *s = (shape_t){(int)dims[1], (int)dims[2], (int)dims[3]};
    else if (rank == 3) *s = (shape_t){(int)dims[1], 1, (int)dims[2]};
    else if (rank == 2) *s = (shape_t){(int)dims[1], 1, 1};
    else return -1;
    return 0;
}

/* true when the ONNX shape of a data value is what its layer holds (not a flattened view):
 * only then do channel-wise layers (batchnorm, concat, conv, pool) see what ONNX means. */
bool ox_data_is_layer_shaped(const imp_t *im, const val_t *v)
{
    shape_t s;
    if (v->seq) return false;
    if (ox_net_shape(v->rank, v->dims, &s)) return false;
    if (v->pad_node) { /* compared before a pending Pad */
        s.h -= v->pad[0] + v->pad[2];
        s.w -= v->pad[1] + v->pad[3];
    }
    shape_t l = im->layers[v->layer].shape;
    return s.c == l.c && s.h == l.h && s.w == l.w;
}

/* Makes output k of node n a data value of layer `layer` with the given ONNX shape. */
int ox_data_define(imp_t *im, const Onnx__NodeProto *n, size_t k, int layer, int rank,
                       const int64_t *dims)
{
    if (k >= n->n_output || !n->output[k][0]) return 0;
    val_t *v = &im->vals[ox_val_find(im, n->output[k])];
    v->kind = VAL_DATA;
    v->layer = layer;
    v->rank = rank;
    memcpy(v->dims, dims, rank * sizeof *dims);
    v->dims_known = true;
    return 0;
}

/* Emits a layer reading data values ins[0..n_in) with output of ONNX shape (rank, dims),
 * defining output 0 of node n. Returns the layer, or NULL with the error set. */
out_layer_t *ox_emit(imp_t *im, const Onnx__NodeProto *n, const char *type,
                         val_t *const *ins, int n_in, int rank, const int64_t *dims)
{
    shape_t s;
    if (ox_net_shape(rank, dims, &s)) {
        char b[96];
        ox_dims_str(rank, dims, b, sizeof b);
        ox_node_fail(im, n, "output of shape %s: only (N,C,H,W), (N,C,L) and (N,F) tensors map to "
                     "layers", b);
        return NULL;
    }
    if (n_in > MODEL_MAX_INPUTS) {
        ox_node_fail(im, n, "%d inputs (a layer takes at most %d)", n_in, MODEL_MAX_INPUTS);
        return NULL;
    }
    if (ox_dims_count(rank - 1, dims + 1) > ONNX_ELEMS_MAX) {
        ox_node_fail(im, n, "output of more than %" PRId64 " elements per sample", ONNX_ELEMS_MAX);
        return NULL;
    }
    out_layer_t *l = ox_layer_add(im, type, n, NULL);
    l->shape = s;
    l->n_in = n_in;
    for (int i = 0; i < n_in; i++) l->in[i] = ins[i]->layer;
    ox_data_define(im, n, 0, im->n_layers - 1, rank, dims);
    return l;
}

/* ---- reading a node's inputs ----------------------------------------------------------- */

bool ox_has_input(const Onnx__NodeProto *n, size_t k)
{
    return k < n->n_input && n->input[k][0];
}

val_t *ox_in(imp_t *im, const Onnx__NodeProto *n, size_t k)
{
    return ox_has_input(n, k) ? &im->vals[ox_val_find(im, n->input[k])] : NULL;
}

val_t *ox_out(imp_t *im, const Onnx__NodeProto *n, size_t k)
{
    return k < n->n_output && n->output[k][0] ? &im->vals[ox_val_find(im, n->output[k])] : NULL;
}

static int shape_arg_for(const imp_t *im, const char *name)
{
    if (!im->opts) return -1;
    for (int i = 0; i < im->opts->n_shapes; i++)
        if (!strcmp(im->opts->shapes[i].name, name)) return i;
    return -1;
}

/* A graph input read as data becomes an input layer. */
int ox_input_to_layer(imp_t *im, const Onnx__NodeProto *n, val_t *v)
{
    int a = shape_arg_for(im, v->name);
    if (a >= 0) {
        const onnx_shape_arg_t *sa = &im->opts->shapes[a];
        if (v->dims_known && sa->rank != v->rank)
            return ox_imp_fail(im, "--input-shape %s has %d dimensions, the graph declares %d",
                            v->name, sa->rank, v->rank);
        for (int i = 0; v->dims_known && i < v->rank; i++)
            if (v->dims[i] >= 0 && v->dims[i] != sa->dims[i])
                return ox_imp_fail(im, "--input-shape %s: dimension %d is %" PRId64
                                " but the graph fixes it at %" PRId64, v->name, i, sa->dims[i],
                                v->dims[i]);
        v->rank = sa->rank;
        memcpy(v->dims, sa->dims, sizeof v->dims);
        v->dims_known = true;
        v->dynamic_dim = -1;
    }
    if (!v->dims_known)
        return ox_imp_fail(im, "input '%s' has no declared shape: give it with --input-shape "
                        "%s=1x3x224x224 (for example)", v->name, v->name);
    /* the batch (dimension 0) may stay open: costs are per sample */
    if (v->rank > 0 && v->dims[0] < 0) v->dims[0] = 1;
    for (int i = 1; i < v->rank; i++)
        if (v->dims[i] < 0)
            return ox_imp_fail(im, "input '%s' has a dynamic dimension %d ('%s'): give the shape "
                            "with --input-shape %s=DIMS (e.g. 1x3x224x224)", v->name, i,
                            v->dim_name[i] ? v->dim_name[i] : "", v->name);
    for (int i = 0; i < v->rank; i++)
        if (v->dims[i] < 1)
            return ox_imp_fail(im, "input '%s' has an empty dimension %d", v->name, i);
    if (ox_dims_count(v->rank - 1, v->dims + 1) > ONNX_ELEMS_MAX)
        return ox_imp_fail(im, "input '%s' has more than %" PRId64 " elements per sample", v->name,
                        ONNX_ELEMS_MAX);
    shape_t s;
    if (ox_net_shape(v->rank, v->dims, &s)) {
        char b[96];
        ox_dims_str(v->rank, v->dims, b, sizeof b);
        return ox_node_fail(im, n, "reads graph input '%s' of shape %s: only (N,C,H,W) images, "
                         "(N,C,L) signals and (N,F) vectors map to an input layer", v->name, b);
    }
    out_layer_t *l = ox_layer_add(im, "input", NULL, v->name);
    snprintf(l->keys, sizeof l->keys, "shape=%dx%dx%d", s.c, s.h, s.w);
    l->shape = s;
    v->kind = VAL_DATA;
    v->layer = im->n_layers - 1;
    return 0;
}

/* Input k of node n read as data (a layer's output). A pending Pad is allowed only where
 * the caller folds it (allow_pad). Returns NULL with the error set. */
val_t *ox_in_data_pad(imp_t *im, const Onnx__NodeProto *n, size_t k, bool allow_pad)
{
    if (!ox_has_input(n, k)) {
        ox_node_fail(im, n, "input %zu is missing", k);
        return NULL;
    }
    val_t *v = &im->vals[ox_val_find(im, n->input[k])];
    if (v->kind == VAL_INPUT && ox_input_to_layer(im, n, v)) return NULL;
    if (v->kind != VAL_DATA) {
        static const char *const what[] = {
            [VAL_UNDEFINED] = "value no node made", [VAL_INPUT] = "graph input",
            [VAL_PARAM] = "parameter", [VAL_CONST] = "constant",
            [VAL_SCORES] = "part of an attention (scores not yet multiplied by V)",
            [VAL_GELU] = "term of an unfinished GELU formula (or a product with a constant)",
            [VAL_POSEMB] = "position table not added to a sequence"};
        ox_node_fail(im, n, "input '%s' is a %s, not data from a layer: no layer computes this",
                     v->name, what[v->kind]);
        return NULL;
    }
    if (v->pad_node && !allow_pad) {
        ox_node_fail(im, n, "its input is padded by Pad '%s', which maps only when a Conv or pool "
                  "follows it", v->pad_node);
        return NULL;
    }
    return v;
}

val_t *ox_in_data(imp_t *im, const Onnx__NodeProto *n, size_t k)
{
    return ox_in_data_pad(im, n, k, false);
}

/* Input k read as a weight of the given rank (-1: any). A learnable weight counts toward
 * the parameters and may be taken by one node only (the .net format shares no weight but an
 * embedding's table with a tied output head, which onnx_seq.c maps before it gets here).
 * Returns NULL with the error set. */
val_t *ox_in_weight(imp_t *im, const Onnx__NodeProto *n, size_t k, int rank, bool learnable)
{
    if (!ox_has_input(n, k)) {
        ox_node_fail(im, n, "input %zu is missing", k);
        return NULL;
    }
    val_t *v = &im->vals[ox_val_find(im, n->input[k])];
    if (v->kind == VAL_INPUT) {
        if (!v->dims_known || v->dynamic_dim >= 0) {
            ox_node_fail(im, n, "weight '%s' has no static shape", v->name);
            return NULL;
        }
        v->kind = VAL_PARAM;
    }
    if (v->kind != VAL_PARAM && v->kind != VAL_CONST) {
        ox_node_fail(im, n, "weight '%s' is computed by the graph, not a parameter", v->name);
        return NULL;
    }
    if (rank >= 0 && v->rank != rank) {
        char b[96];
        ox_dims_str(v->rank, v->dims, b, sizeof b);
        ox_node_fail(im, n, "weight '%s' has shape %s, expected %d dimensions", v->name, b, rank);
        return NULL;
    }
    if (ox_dims_count(v->rank, v->dims) > ONNX_ELEMS_MAX) {
        ox_node_fail(im, n, "weight '%s' has more than %" PRId64 " elements", v->name, ONNX_ELEMS_MAX);
        return NULL;
    }
    if (learnable) {
        val_t *src = v->source ? v->source : v;
        if (src->owner_node) {
            ox_node_fail(im, n, "weight '%s'%s%s%s is shared with node '%s': shared weights do "
                         "not map (each layer owns its parameters; only an embedding's table "
                         "may be shared, by an output head over the sequence that multiplies "
                         "by its transpose)", src->name, src != v ? " (read as '" : "",
                         src != v ? v->name : "", src != v ? "')" : "", src->owner_node);
            return NULL;
        }
        src->owner_node = ox_node_name(n);
        im->learnable += ox_dims_count(v->rank, v->dims);
    }
    return v;
}

/* Input k as constant integers (a Reshape's target, a Pad's amounts). */
val_t *ox_in_ints(imp_t *im, const Onnx__NodeProto *n, size_t k)
{
    if (!ox_has_input(n, k)) {
        ox_node_fail(im, n, "input %zu is missing", k);
        return NULL;
    }
    val_t *v = &im->vals[ox_val_find(im, n->input[k])];
    if (v->kind != VAL_CONST || !v->ints) {
        ox_node_fail(im, n, "input '%s' must be a constant list of integers (it is computed at run "
                  "time or has no data)", v->name);
        return NULL;
    }
    return v;
}

/* Outputs from index k on must be read by nobody (BatchNormalization's running statistics,
 * Dropout's mask, MaxPool's indices). */
int ox_outputs_unused_from(imp_t *im, const Onnx__NodeProto *n, size_t k)
{
    for (size_t i = k; i < n->n_output; i++)
        if (n->output[i][0] && im->vals[ox_val_find(im, n->output[i])].uses > 0)
            return ox_node_fail(im, n, "output %zu ('%s') is read by the graph: it has no "
                             "counterpart in a layer", i, n->output[i]);
    return 0;
}

/* The dimensions a Reshape of x makes (its target read as ONNX reads it: 0 copies x's
 * dimension unless allowzero, -1 is inferred). Returns 0, or -1 with the error set. */
int ox_reshape_dims(imp_t *im, const Onnx__NodeProto *n, const val_t *x, int *rank_out,
                    int64_t *dims)
{
    val_t *s = ox_in_ints(im, n, 1);
    if (!s) return -1;
    if (s->rank != 1 || s->n_values > ONNX_RANK_MAX)
        return ox_node_fail(im, n, "target shape '%s' is not a list of at most %d sizes", s->name,
                         ONNX_RANK_MAX);
    int64_t allow_zero;
    if (ox_attr_int(im, n, "allowzero", 0, &allow_zero)) return -1;
    int rank = (int)s->n_values, infer = -1;
    int64_t known = 1;
    for (int i = 0; i < rank; i++) {
        int64_t d = s->ints[i];
        if (d == 0 && !allow_zero) {
            if (i >= x->rank) return ox_node_fail(im, n, "copies a dimension the input lacks");
            d = x->dims[i];
        }
        if (d == -1) {
            if (infer >= 0) return ox_node_fail(im, n, "two dimensions to infer");
            infer = i;
            d = 1;
        } else if (d < 0 || d > ONNX_DIM_MAX)
            return ox_node_fail(im, n, "target dimension %" PRId64 " out of range", d);
        dims[i] = d;
        known = ox_mul_sat(known, d);
    }
    int64_t total = ox_dims_count(x->rank, x->dims);
    if (infer >= 0) {
        if (known == 0 || total % known) return ox_node_fail(im, n, "cannot infer a dimension");
        dims[infer] = total / known;
    }
    *rank_out = rank;
    return 0;
}
