/* onnx_seq: sequence operators of transformer graphs onto the sequence layers (tokens, embed,
 * posembed, clstoken, to_seq, linear, attention, layernorm, gelu, tanh, select, seq_loss;
 * models/README.md, "Sequences").
 *
 * A sequence layer holds D×1×S per sample. An exporter shows it as (1,S,D), as (S,1,D) when
 * the model runs sequence-first, as (S,D) around a Gemm, and, inside attention, with D split
 * into heads × head size and transposed. So a sequence value carries a name per axis (ax_t)
 * and Reshape, Transpose, Unsqueeze and Squeeze only rename axes; the layers read values
 * whose named axes are S then D (D last). The batch must be 1 (or left open).
 *
 * Patterns that are one layer but several operators are followed value by value:
 *   - attention: MatMul(Q heads, K heads transposed) -> scores, scaled once by 1/sqrt(head
 *     size) (on Q or on the scores), masked causally or not at all (Where or Add of a
 *     constant mask), Softmax over the last axis, an optional Dropout, MatMul with V heads
 *     -> the attention layer reading the Q, K and V projections;
 *   - GELU written out with Erf (x·(1+erf(x/√2))·½) or Tanh (x·(1+tanh(√(2/π)(x+0.044715x³)))·½);
 *   - a packed Q/K/V projection (one MatMul, then Split or three Slices along D) -> one linear
 *     layer per part, with the same parameters in all;
 *   - a position table indexed by 0..S-1 (Gather) or added whole -> posembed; a learned
 *     vector expanded and concatenated before the positions -> clstoken.
 * Anything else that reads such a value in between is refused by name.
 */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "onnx/onnx_internal.h"

/* ---- axes ------------------------------------------------------------------------------ */

static bool is_seq(const val_t *v) { return v && v->kind == VAL_DATA && v->seq; }

/* The named (non-unit) axes of v into a[], sizes into sz[]; returns how many. */
static int named_axes(const val_t *v, uint8_t *a, int64_t *sz)
{
    int k = 0;
    for (int d = 0; d < v->rank; d++)
        if (v->ax[d] != AX_UNIT) {
            if (a) a[k] = v->ax[d];
            if (sz) sz[k] = v->dims[d];
            k++;
        }
    return k;
}

/* A sequence a layer can read: named axes S then D, D the last axis. */
static bool seq_plain(const val_t *v)
{
    uint8_t a[ONNX_RANK_MAX];
    return is_seq(v) && named_axes(v, a, NULL) == 2 && a[0] == AX_S && a[1] == AX_D &&
           v->ax[v->rank - 1] == AX_D && !v->pad_node;
}

static int axis_of(const val_t *v, ax_t a)
{
    for (int d = 0; d < v->rank; d++)
        if (v->ax[d] == a) return d;
    return -1;
}

static bool has_heads(const val_t *v) { return is_seq(v) && axis_of(v, AX_H) >= 0; }

static int vindex(const imp_t *im, const val_t *v) { return (int)(v - im->vals); }

static bool near(double a, double b) { return fabs(a - b) <= 1e-3 * fabs(b); }

static void layout_str(const val_t *v, char *buf, size_t len)
{
    static const char *const names[] = {"1", "S", "D", "H", "E", "S", "S"};
    size_t o = 0;
    buf[0] = '\0';
    for (int d = 0; d < v->rank && o < len; d++)
        o += snprintf(buf + o, len - o, "%s%s=%" PRId64, d ? "," : "(", names[v->ax[d]],
                      v->dims[d]);
    if (o < len) snprintf(buf + o, len - o, ")");
}

/* Output k of n becomes a copy of src (a renamed view, a scaled Q, masked scores). */
static val_t *out_copy(imp_t *im, const Onnx__NodeProto *n, size_t k, const val_t *src)
{
    val_t *y = ox_out(im, n, k);
    if (!y) return NULL;
    const char *name = y->name;
    int uses = y->uses;
    *y = *src;
    y->name = name;
    y->uses = uses;
    y->ints = NULL;
    y->reals = NULL;
    y->source = NULL;
    y->owner_node = NULL;
    return y;
}

/* Output k of n becomes a sequence value of layer `layer`. */
static val_t *seq_define(imp_t *im, const Onnx__NodeProto *n, size_t k, int layer, int rank,
                         const int64_t *dims, const uint8_t *ax, int heads)
{
    val_t *y = ox_out(im, n, k);
    if (!y) return NULL;
    y->kind = VAL_DATA;
    y->seq = true;
    y->layer = layer;
    y->rank = rank;
    memcpy(y->dims, dims, rank * sizeof *dims);
    memcpy(y->ax, ax, rank);
    y->dims_known = true;
    y->heads = heads;
    y->scale = 1;
    return y;
}

/* A sequence layer of D×1×S reading the given layers; returns its index or -1. */
static int seq_emit(imp_t *im, const Onnx__NodeProto *n, const char *type, const int *ins,
                    int n_in, int64_t S, int64_t D)
{
    if (S < 1 || D < 1 || S > INT_MAX || D > INT_MAX || ox_mul_sat(S, D) > ONNX_ELEMS_MAX)
        return ox_node_fail(im, n, "a sequence of %" PRId64 " positions of %" PRId64
                            " features is out of range", S, D);
    out_layer_t *l = ox_layer_add(im, type, n, NULL);
    l->shape = (shape_t){(int)D, 1, (int)S};
    l->n_in = n_in;
    for (int i = 0; i < n_in; i++) l->in[i] = ins[i];
    return im->n_layers - 1;
}

static int64_t lay_S(const imp_t *im, const val_t *v) { return im->layers[v->layer].shape.w; }
static int64_t lay_D(const imp_t *im, const val_t *v) { return im->layers[v->layer].shape.c; }

/* A layer of the same layout as x (relu, tanh, gelu, dropout, layernorm). */
static out_layer_t *seq_like(imp_t *im, const Onnx__NodeProto *n, const char *type, val_t *x)
{
    int in = x->layer;
    int k = seq_emit(im, n, type, &in, 1, lay_S(im, x), lay_D(im, x));
    if (k < 0) return NULL;
    seq_define(im, n, 0, k, x->rank, x->dims, x->ax, 0);
    return &im->layers[k];
}

/* ---- renaming axes --------------------------------------------------------------------- */

/* The layout of x reshaped to (rank, dims): each named axis is kept, D is split into heads ×
 * head size or merged back, size-1 axes are units. */
static int seq_reshape_to(imp_t *im, const Onnx__NodeProto *n, val_t *x, int rank,
                          const int64_t *dims)
{
    uint8_t a[ONNX_RANK_MAX], out[ONNX_RANK_MAX];
    int64_t sz[ONNX_RANK_MAX];
    int na = named_axes(x, a, sz), i = 0, heads = x->heads;
    bool ok = true;
    for (int j = 0; j < rank && ok; j++) {
        if (dims[j] == 1) {
            out[j] = AX_UNIT;
            continue;
        }
        if (i >= na) ok = false;
        else if (dims[j] == sz[i]) out[j] = a[i++];
        else if (a[i] == AX_D && j + 1 < rank && dims[j] > 1 && dims[j + 1] > 1 &&
                 dims[j] * dims[j + 1] == sz[i]) {
            out[j] = AX_H;
            out[j + 1] = AX_E;
            heads = (int)dims[j];
            j++;
            i++;
        } else if (a[i] == AX_H && i + 1 < na && a[i + 1] == AX_E && dims[j] == sz[i] * sz[i + 1]) {
            out[j] = AX_D;
            i += 2;
        } else ok = false;
    }
    if (!ok || i != na) {
        char b1[160], b2[96];
        layout_str(x, b1, sizeof b1);
        ox_dims_str(rank, dims, b2, sizeof b2);
        return ox_node_fail(im, n, "reshapes a sequence %s to %s: only splitting features into "
                            "heads (or back) and adding or removing size-1 axes map", b1, b2);
    }
    seq_define(im, n, 0, x->layer, rank, dims, out, heads)->scale = x->scale;
    return 1;
}

static int seq_reshape(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    val_t *s = ox_in_ints(im, n, 1);
    if (!s) return -1;
    if (s->rank != 1 || s->n_values > ONNX_RANK_MAX)
        return ox_node_fail(im, n, "target shape is not a list of at most %d sizes",
                            ONNX_RANK_MAX);
    int64_t dims[ONNX_RANK_MAX], known = 1, total = ox_dims_count(x->rank, x->dims);
    int rank = (int)s->n_values, infer = -1;
    for (int i = 0; i < rank; i++) {
        dims[i] = s->ints[i] == 0 && i < x->rank ? x->dims[i] : s->ints[i];
        if (dims[i] == -1) {
            if (infer >= 0) return ox_node_fail(im, n, "two dimensions to infer");
            infer = i;
        } else if (dims[i] < 1 || dims[i] > ONNX_DIM_MAX)
            return ox_node_fail(im, n, "target dimension %" PRId64 " out of range", dims[i]);
        else known = ox_mul_sat(known, dims[i]);
    }
    if (infer >= 0) dims[infer] = total / known;
    if (ox_dims_count(rank, dims) != total) return ox_node_fail(im, n, "changes the element count");
    return seq_reshape_to(im, n, x, rank, dims);
}

static int seq_transpose(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    int64_t perm[ONNX_RANK_MAX];
    int got;
    if (ox_attr_ints(im, n, "perm", x->rank, perm, ONNX_RANK_MAX, &got)) return -1;
    if (!got)
        for (int d = 0; d < x->rank; d++) perm[d] = x->rank - 1 - d;
    int64_t dims[ONNX_RANK_MAX];
    uint8_t ax[ONNX_RANK_MAX];
    bool seen[ONNX_RANK_MAX] = {false};
    for (int d = 0; d < x->rank; d++) {
        if (perm[d] < 0 || perm[d] >= x->rank || seen[perm[d]])
            return ox_node_fail(im, n, "perm is not a permutation");
        seen[perm[d]] = true;
        dims[d] = x->dims[perm[d]];
        ax[d] = x->ax[perm[d]];
    }
    val_t *y = out_copy(im, n, 0, x);
    memcpy(y->dims, dims, sizeof dims);
    memcpy(y->ax, ax, sizeof ax);
    return 1;
}

/* Unsqueeze/Squeeze of a sequence: size-1 axes come and go. */
static int seq_unsqueeze(imp_t *im, const Onnx__NodeProto *n, val_t *x, bool squeeze)
{
    int64_t axes[ONNX_RANK_MAX];
    int n_axes = 0;
    if (im->opset >= 13) {
        if (ox_has_input(n, 1)) {
            val_t *a = ox_in_ints(im, n, 1);
            if (!a) return -1;
            if (a->n_values > ONNX_RANK_MAX) return ox_node_fail(im, n, "too many axes");
            for (int i = 0; i < a->n_values; i++) axes[i] = a->ints[i];
            n_axes = (int)a->n_values;
        }
    } else if (ox_attr_ints(im, n, "axes", -1, axes, ONNX_RANK_MAX, &n_axes))
        return -1;
    int64_t dims[ONNX_RANK_MAX];
    int rank = 0;
    if (squeeze) {
        for (int d = 0; d < x->rank; d++) {
            bool drop = n_axes == 0 && x->dims[d] == 1;
            for (int i = 0; i < n_axes; i++) drop |= (axes[i] < 0 ? axes[i] + x->rank : axes[i]) == d;
            if (!drop) dims[rank++] = x->dims[d];
            else if (x->dims[d] != 1) return ox_node_fail(im, n, "squeezes an axis of size > 1");
        }
    } else {
        rank = x->rank + n_axes;
        if (rank > ONNX_RANK_MAX) return ox_node_fail(im, n, "rank above %d", ONNX_RANK_MAX);
        bool unit[ONNX_RANK_MAX] = {false};
        for (int i = 0; i < n_axes; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
            if (a < 0 || a >= rank) return ox_node_fail(im, n, "axis out of range");
            unit[a] = true;
        }
        for (int d = 0, k = 0; d < rank; d++) dims[d] = unit[d] ? 1 : x->dims[k++];
    }
    return seq_reshape_to(im, n, x, rank, dims);
}

/* ---- weights as aliases ---------------------------------------------------------------- */

/* Transpose or Expand of a weight: the same parameters seen with other dimensions. */
static int weight_alias(imp_t *im, const Onnx__NodeProto *n, val_t *w)
{
    if (!w->dims_known || w->dynamic_dim >= 0)
        return ox_node_fail(im, n, "weight '%s' has no static shape", w->name);
    int64_t dims[ONNX_RANK_MAX];
    int8_t axes[ONNX_RANK_MAX]; /* the source's axis each output axis is */
    int rank = w->rank;
    if (!strcmp(ox_node_op(n), "Transpose")) {
        int64_t perm[ONNX_RANK_MAX];
        int got;
        bool seen[ONNX_RANK_MAX] = {false};
        if (ox_attr_ints(im, n, "perm", w->rank, perm, ONNX_RANK_MAX, &got)) return -1;
        for (int d = 0; d < rank; d++) {
            int64_t p = got ? perm[d] : rank - 1 - d;
            if (p < 0 || p >= rank || seen[p]) return ox_node_fail(im, n, "perm is not a permutation");
            seen[p] = true;
            dims[d] = w->dims[p];
            axes[d] = w->src_axis[p];
        }
    } else { /* Expand to a shape with the same element count: the batch of 1 */
        val_t *s = ox_in_ints(im, n, 1);
        if (!s) return -1;
        if (s->n_values > ONNX_RANK_MAX) return ox_node_fail(im, n, "too many dimensions");
        int srank = (int)s->n_values;
        rank = srank > w->rank ? srank : w->rank;
        for (int d = 0; d < rank; d++) {
            int kw = d - (rank - w->rank), ks = d - (rank - srank);
            int64_t a = kw >= 0 ? w->dims[kw] : 1, b = ks >= 0 ? s->ints[ks] : 1;
            dims[d] = a == 1 ? b : a;
            axes[d] = kw >= 0 ? w->src_axis[kw] : -1;
            if (b != 1 && b != a && a != 1) return ox_node_fail(im, n, "shapes do not broadcast");
        }
        if (ox_dims_count(rank, dims) != ox_dims_count(w->rank, w->dims))
            return ox_node_fail(im, n, "expands weight '%s' to more elements (a batch above 1)",
                                w->name);
    }
    val_t *y = ox_out(im, n, 0);
    val_t *src = w->source ? w->source : w;
    y->kind = VAL_PARAM;
    y->rank = rank;
    memcpy(y->dims, dims, sizeof dims);
    y->dims_known = true;
    y->dynamic_dim = -1;
    y->source = src;
    memcpy(y->src_axis, axes, sizeof axes);
    return 1;
}

static bool is_weight(const val_t *v)
{
    return v && (v->kind == VAL_PARAM || v->kind == VAL_INPUT ||
                 (v->kind == VAL_CONST && v->n_values > 1));
}

/* ---- images into sequences and back ---------------------------------------------------- */

/* A to_seq layer of (1,C,H,W) image data x: the H*W pixels, a sequence of C features, seen
 * as (1,C,S) (ViT's Reshape) or with the features last, (1,S,C) (a Transpose to channels
 * last). Returns 1, or -1 with the error set. */
static int to_seq_emit(imp_t *im, const Onnx__NodeProto *n, const val_t *x, bool features_last)
{
    int in = x->layer;
    int64_t S = x->dims[2] * x->dims[3], C = x->dims[1];
    int k = seq_emit(im, n, "to_seq", &in, 1, S, C);
    if (k < 0) return -1;
    int64_t dims[3] = {1, features_last ? S : C, features_last ? C : S};
    uint8_t ax[3] = {AX_UNIT, features_last ? AX_S : AX_D, features_last ? AX_D : AX_S};
    seq_define(im, n, 0, k, 3, dims, ax, 0);
    return 1;
}

/* Reshape of (N,C,H,W) to (N,C,H·W): ViT's patches, a to_seq layer seen as (1,D,S). */
static int to_seq(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    val_t *s = ox_in_ints(im, n, 1);
    if (!s) return -1;
    if (s->n_values != 3) return 0;
    int64_t c = x->dims[1], p = x->dims[2] * x->dims[3];
    int64_t t0 = s->ints[0] == 0 ? x->dims[0] : s->ints[0];
    int64_t t1 = s->ints[1] == 0 ? c : s->ints[1], t2 = s->ints[2];
    if (t0 == -1) t0 = x->dims[0];
    if (t2 == -1) t2 = p;
    if (t0 != 1 || t1 != c || t2 != p) return 0;
    return to_seq_emit(im, n, x, false);
}

/* Gather: token embedding, rows 0..S-1 of a position table, or one position (select). */
static int seq_gather(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *data = ox_in(im, n, 0), *idx = ox_in(im, n, 1);
    if (!data || !idx) return 0;
    int64_t axis;
    if (ox_attr_int(im, n, "axis", 0, &axis)) return -1;
    if (is_seq(data)) { /* x[:, p]: one position */
        if (axis < 0) axis += data->rank;
        double p;
        if (!seq_plain(data) || axis != axis_of(data, AX_S) || !ox_const_scalar(idx, &p) ||
            idx->rank != 0)
            return ox_node_fail(im, n, "only one position (a constant index along the "
                                "positions) of a sequence maps, to select");
        int64_t pos = (int64_t)p < 0 ? (int64_t)p + lay_S(im, data) : (int64_t)p;
        if (pos < 0 || pos >= lay_S(im, data)) return ox_node_fail(im, n, "position out of range");
        int64_t dims[ONNX_RANK_MAX];
        for (int d = 0, o = 0; d < data->rank; d++)
            if (d != axis) dims[o++] = data->dims[d];
        if (data->rank != 3)
            return ox_node_fail(im, n, "select of a rank-%d sequence (expected 3)", data->rank);
        out_layer_t *l = ox_emit(im, n, "select", &data, 1, 2, dims);
        if (!l) return -1;
        snprintf(l->keys, sizeof l->keys, "pos=%" PRId64, pos);
        return 1;
    }
    if (!is_weight(data) || data->rank != 2 || axis != 0) return 0;
    int64_t rows = data->dims[0], D = data->dims[1];
    if (idx->kind == VAL_CONST && idx->ints) { /* positions 0..S-1 of a table */
        for (int64_t i = 0; i < idx->n_values; i++)
            if (idx->ints[i] != i)
                return ox_node_fail(im, n, "gathers rows other than 0..S-1 of '%s': only a "
                                    "position table maps (to posembed)", data->name);
        val_t *y = ox_out(im, n, 0);
        y->kind = VAL_POSEMB;
        y->rank = idx->rank + 1;
        memcpy(y->dims, idx->dims, idx->rank * sizeof *y->dims);
        y->dims[idx->rank] = D;
        y->dims_known = true;
        y->pos_table = vindex(im, data);
        y->n_values = rows; /* the table's rows: posembed's max */
        return 1;
    }
    /* token ids: an integer graph input (N, S) -> tokens + embed */
    if (idx->kind == VAL_INPUT) {
        if (idx->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
            idx->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
            return ox_node_fail(im, n, "indices '%s' are not integer token ids", idx->name);
        if (!idx->dims_known || idx->rank != 2)
            return ox_node_fail(im, n, "token ids '%s' are not (N, S)", idx->name);
        int a = -1;
        for (int i = 0; im->opts && i < im->opts->n_shapes; i++)
            if (!strcmp(im->opts->shapes[i].name, idx->name)) a = i;
        if (a >= 0) {
            if (im->opts->shapes[a].rank != 2)
                return ox_imp_fail(im, "--input-shape %s: token ids are (N, S)", idx->name);
            for (int d = 0; d < 2; d++) {
                if (idx->dims[d] >= 0 && idx->dims[d] != im->opts->shapes[a].dims[d])
                    return ox_imp_fail(im, "--input-shape %s: dimension %d is %" PRId64
                                       " but the graph fixes it at %" PRId64, idx->name, d,
                                       im->opts->shapes[a].dims[d], idx->dims[d]);
                idx->dims[d] = im->opts->shapes[a].dims[d];
            }
        }
        if (idx->dims[0] < 0) idx->dims[0] = 1;
        if (idx->dims[1] < 0)
            return ox_imp_fail(im, "input '%s' has a dynamic dimension 1 ('%s'): give the shape "
                               "with --input-shape %s=1xS", idx->name,
                               idx->dim_name[1] ? idx->dim_name[1] : "", idx->name);
        if (idx->dims[0] != 1)
            return ox_imp_fail(im, "input '%s' has a batch of %" PRId64 ": sequence graphs "
                               "import with a batch of 1", idx->name, idx->dims[0]);
        if (rows > (1 << 24) || idx->dims[1] > INT_MAX)
            return ox_node_fail(im, n, "vocabulary or sequence out of range");
        out_layer_t *t = ox_layer_add(im, "tokens", NULL, idx->name);
        snprintf(t->keys, sizeof t->keys, "seq=%" PRId64 " vocab=%" PRId64, idx->dims[1], rows);
        t->shape = (shape_t){1, 1, (int)idx->dims[1]};
        idx->kind = VAL_DATA;
        idx->layer = im->n_layers - 1;
        idx->seq = true;
        idx->ax[0] = AX_UNIT;
        idx->ax[1] = AX_S;
    }
    if (idx->kind != VAL_DATA || strcmp(im->layers[idx->layer].type, "tokens"))
        return ox_node_fail(im, n, "embeds '%s', which is not the graph's token ids", idx->name);
    if (!ox_in_weight(im, n, 0, 2, true)) return -1;
    int in = idx->layer;
    int k = seq_emit(im, n, "embed", &in, 1, im->layers[in].shape.w, D);
    if (k < 0) return -1;
    (data->source ? data->source : data)->embed_layer = k; /* an output head may tie to it */
    snprintf(im->layers[k].keys, sizeof im->layers[k].keys, "vocab=%" PRId64 " dim=%" PRId64,
             rows, D);
    int64_t dims[3] = {1, idx->dims[1], D};
    uint8_t ax[3] = {AX_UNIT, AX_S, AX_D};
    seq_define(im, n, 0, k, 3, dims, ax, 0);
    return 1;
}

/* ---- linear layers --------------------------------------------------------------------- */

/* Whether weight input 1 of a MatMul or Gemm over a sequence is the table (V×D) of an embed
 * layer, multiplied by its transpose: an output head tied to the embedding (GPT-2's lm_head
 * is wte), mapped to `linear tie=EMBED`, whose weight is counted once, with the embed's. The
 * product reads the weight as in×out, or out×in under Gemm's transB; the table, in that
 * reading, must be D×V. Returns the embed layer's index, -1 when the weight is not an
 * embedding's table, -2 with the error set when it is one read otherwise, or tied twice. */
static int tied_head(imp_t *im, const Onnx__NodeProto *n, bool trans_b)
{
    val_t *w = ox_in(im, n, 1);
    if (!w || (w->kind != VAL_PARAM && w->kind != VAL_CONST)) return -1;
    val_t *src = w->source ? w->source : w;
    if (src->embed_layer < 0) return -1;
    const char *embed = im->layers[src->embed_layer].name;
    bool as_stored = w->rank == 2 && w->src_axis[0] == 0 && w->src_axis[1] == 1;
    bool transposed = w->rank == 2 && w->src_axis[0] == 1 && w->src_axis[1] == 0;
    if (trans_b ? !as_stored : !transposed) {
        ox_node_fail(im, n, "multiplies by the table '%s' of embedding '%s' other than by its "
                     "transpose: a shared table maps only as an output head tied to the "
                     "embedding (x times its transpose, linear tie=)", src->name, embed);
        return -2;
    }
    if (src->tied_node) {
        ox_node_fail(im, n, "the table '%s' of embedding '%s' is already the output head of "
                     "node '%s': one tied head per embedding maps", src->name, embed,
                     src->tied_node);
        return -2;
    }
    src->tied_node = ox_node_name(n);
    return src->embed_layer;
}

static int seq_linear(imp_t *im, const Onnx__NodeProto *n, val_t *x, bool gemm)
{
    if (!seq_plain(x)) {
        char b[160];
        layout_str(x, b, sizeof b);
        return ox_node_fail(im, n, "multiplies a sequence laid out as %s by a weight: only "
                            "positions × features maps (to linear)", b);
    }
    int64_t trans_a = 0, trans_b = 0;
    if (gemm && (ox_attr_int(im, n, "transA", 0, &trans_a) ||
                 ox_attr_int(im, n, "transB", 0, &trans_b)))
        return -1;
    if (trans_a) return ox_node_fail(im, n, "transA of a sequence does not map");
    int tie = tied_head(im, n, trans_b != 0);
    if (tie == -2) return -1;
    val_t *w = tie >= 0 ? ox_in(im, n, 1) : ox_in_weight(im, n, 1, 2, true);
    if (!w) return -1;
    int64_t D = lay_D(im, x), S = lay_S(im, x);
    int64_t k = trans_b ? w->dims[1] : w->dims[0], out = trans_b ? w->dims[0] : w->dims[1];
    if (k != D)
        return ox_node_fail(im, n, "weight '%s' expects %" PRId64 " features, the sequence has %"
                            PRId64, w->name, k, D);
    if (ox_mul_sat(ox_mul_sat(S, D), out) > ONNX_MACS_MAX)
        return ox_node_fail(im, n, "more than %" PRId64 " multiply-adds", ONNX_MACS_MAX);
    bool bias = gemm && ox_has_input(n, 2);
    if (bias && tie >= 0)
        return ox_node_fail(im, n, "an output head tied to embedding '%s' adds a bias: a tied "
                            "linear has none", im->layers[tie].name);
    if (bias) {
        val_t *c = ox_in_weight(im, n, 2, -1, true);
        if (!c) return -1;
        if (ox_dims_count(c->rank, c->dims) != out || c->dims[c->rank - 1] != out)
            return ox_node_fail(im, n, "bias '%s' does not have %" PRId64 " values", c->name, out);
    }
    int in = x->layer;
    int l = seq_emit(im, n, "linear", &in, 1, S, out);
    if (l < 0) return -1;
    snprintf(im->layers[l].keys, sizeof im->layers[l].keys, "out=%" PRId64, out);
    im->layers[l].bias = bias; /* a MatMul's bias may follow as an Add */
    im->layers[l].tie = tie;
    int64_t dims[ONNX_RANK_MAX];
    memcpy(dims, x->dims, sizeof dims);
    dims[x->rank - 1] = out;
    seq_define(im, n, 0, l, x->rank, dims, x->ax, 0);
    return 1;
}

/* Parts of a packed projection (Split, Slice along D) become linear layers of their own. */
static int seq_part(imp_t *im, const Onnx__NodeProto *n, size_t k, val_t *x, int64_t start,
                    int64_t len)
{
    int parent = x->layer;
    out_layer_t *p = &im->layers[parent];
    if (strcmp(p->type, "linear") || p->tie >= 0 || !seq_plain(x) || len < 1 || start < 0 ||
        start + len > lay_D(im, x))
        return ox_node_fail(im, n, "splits a sequence along its features: only the output of "
                            "a projection (a MatMul) splits, into linear layers");
    int64_t S = lay_S(im, x);
    int bias = p->bias, in = p->in[0];
    im->layers[parent].split = true;
    int l = seq_emit(im, n, "linear", &in, 1, S, len);
    if (l < 0) return -1;
    snprintf(im->layers[l].keys, sizeof im->layers[l].keys, "out=%" PRId64, len);
    im->layers[l].bias = bias;
    /* one layer per output: named after the output when the node makes several */
    if (n->n_output > 1) ox_layer_rename(im, l, n->output[k]);
    int64_t dims[ONNX_RANK_MAX];
    memcpy(dims, x->dims, sizeof dims);
    dims[x->rank - 1] = len;
    seq_define(im, n, k, l, x->rank, dims, x->ax, 0);
    return 1;
}

static int seq_split(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    int64_t axis, sizes[64];
    if (ox_attr_int(im, n, "axis", 0, &axis)) return -1;
    if (axis < 0) axis += x->rank;
    if (axis != x->rank - 1 || x->ax[axis] != AX_D)
        return ox_node_fail(im, n, "splits a sequence other than along its features");
    size_t parts = n->n_output;
    if (parts < 1 || parts > 64) return ox_node_fail(im, n, "%zu outputs", parts);
    int got = 0;
    if (im->opset >= 13 && ox_has_input(n, 1)) {
        val_t *s = ox_in_ints(im, n, 1);
        if (!s) return -1;
        got = (int)s->n_values;
        for (int i = 0; i < got && i < 64; i++) sizes[i] = s->ints[i];
    } else if (im->opset < 13 && ox_attr_ints(im, n, "split", -1, sizes, 64, &got))
        return -1;
    int64_t D = x->dims[axis];
    if (!got) {
        if (D % (int64_t)parts) return ox_node_fail(im, n, "features do not split evenly");
        for (size_t i = 0; i < parts; i++) sizes[i] = D / (int64_t)parts;
    } else if ((size_t)got != parts)
        return ox_node_fail(im, n, "%d sizes for %zu outputs", got, parts);
    for (size_t i = 0, start = 0; i < parts; start += sizes[i], i++)
        if (seq_part(im, n, i, x, (int64_t)start, sizes[i]) < 0) return -1;
    return 1;
}

static int seq_slice(imp_t *im, const Onnx__NodeProto *n, val_t *x)
{
    val_t *st = ox_in_ints(im, n, 1), *en = st ? ox_in_ints(im, n, 2) : NULL;
    if (!en) return -1;
    val_t *ax = ox_has_input(n, 3) ? ox_in_ints(im, n, 3) : NULL;
    val_t *sp = ox_has_input(n, 4) ? ox_in_ints(im, n, 4) : NULL;
    if ((ox_has_input(n, 3) && !ax) || (ox_has_input(n, 4) && !sp)) return -1;
    int64_t axis = ax ? ax->ints[0] : 0;
    if (axis < 0) axis += x->rank;
    if (st->n_values != 1 || en->n_values != 1 || (ax && ax->n_values != 1) ||
        (sp && (sp->n_values != 1 || sp->ints[0] != 1)) || axis != x->rank - 1 ||
        x->ax[axis] != AX_D)
        return ox_node_fail(im, n, "slices a sequence other than one unit-step range of its "
                            "features");
    int64_t D = x->dims[axis], b = st->ints[0], e = en->ints[0];
    if (b < 0) b += D;
    if (e < 0) e += D;
    b = b < 0 ? 0 : b > D ? D : b;
    e = e < b ? b : e > D ? D : e;
    return seq_part(im, n, 0, x, b, e - b);
}

/* ---- attention ------------------------------------------------------------------------- */

/* Batch axes (all but the last two) of a and b agree and hold the heads. */
static bool same_batch_axes(const val_t *a, const val_t *b)
{
    if (a->rank != b->rank || a->rank < 3) return false;
    bool heads = false;
    for (int d = 0; d < a->rank - 2; d++) {
        if (a->ax[d] != b->ax[d] || a->dims[d] != b->dims[d]) return false;
        heads |= a->ax[d] == AX_H;
    }
    return heads;
}

static int seq_scores(imp_t *im, const Onnx__NodeProto *n, val_t *q, val_t *k)
{
    int r = q->rank;
    if (!same_batch_axes(q, k) || q->ax[r - 2] != AX_S || q->ax[r - 1] != AX_E ||
        k->ax[r - 2] != AX_E || k->ax[r - 1] != AX_S || q->heads != k->heads ||
        lay_D(im, q) != lay_D(im, k) || lay_S(im, q) != lay_S(im, k)) {
        char b1[160], b2[160];
        layout_str(q, b1, sizeof b1);
        layout_str(k, b2, sizeof b2);
        return ox_node_fail(im, n, "multiplies sequences %s and %s: only per-head Q times "
                            "transposed K (attention scores) maps", b1, b2);
    }
    val_t *y = ox_out(im, n, 0);
    y->kind = VAL_SCORES;
    y->seq = true;
    y->rank = r;
    memcpy(y->dims, q->dims, sizeof y->dims);
    memcpy(y->ax, q->ax, sizeof y->ax);
    y->dims[r - 1] = q->dims[r - 2];
    y->ax[r - 2] = AX_SQ;
    y->ax[r - 1] = AX_SK;
    y->dims_known = true;
    y->layer = q->layer;
    y->att_k = k->layer;
    y->heads = q->heads;
    y->scale = q->scale * k->scale;
    return 1;
}

static int seq_context(imp_t *im, const Onnx__NodeProto *n, val_t *p, val_t *v)
{
    int r = v->rank;
    if (!p->softmaxed)
        return ox_node_fail(im, n, "multiplies attention scores without a Softmax by V");
    if (!is_seq(v) || v->rank != p->rank || v->ax[r - 2] != AX_S || v->ax[r - 1] != AX_E ||
        v->heads != p->heads || lay_D(im, v) != im->layers[p->layer].shape.c ||
        lay_S(im, v) != im->layers[p->layer].shape.w)
        return ox_node_fail(im, n, "multiplies attention probabilities by something other than "
                            "the per-head V of the same shape");
    for (int d = 0; d < r - 2; d++)
        if (v->ax[d] != p->ax[d] || v->dims[d] != p->dims[d])
            return ox_node_fail(im, n, "V's heads are laid out unlike the scores'");
    double want = 1 / sqrt((double)v->dims[r - 1]);
    if (!near(p->scale, want))
        return ox_node_fail(im, n, "scores scaled by %g, not 1/sqrt(head size) = %g: the "
                            "attention layer scales by the latter", p->scale, want);
    int64_t S = lay_S(im, v), D = lay_D(im, v);
    if (ox_mul_sat(ox_mul_sat(S, S), D) > ONNX_MACS_MAX)
        return ox_node_fail(im, n, "more than %" PRId64 " multiply-adds", ONNX_MACS_MAX);
    int ins[3] = {p->layer, p->att_k, v->layer};
    int l = seq_emit(im, n, "attention", ins, 3, S, D);
    if (l < 0) return -1;
    snprintf(im->layers[l].keys, sizeof im->layers[l].keys, "heads=%d causal=%d", p->heads,
             p->causal);
    seq_define(im, n, 0, l, r, v->dims, v->ax, v->heads);
    return 1;
}

/* A mask over the scores: masked(i, j) for i, j < S must be "j > i" (causal) or nowhere.
 * Returns 1 causal, 0 none, -1 with the error set. */
static int mask_kind(imp_t *im, const Onnx__NodeProto *n, const val_t *m, int64_t S,
                     bool masked_when_true, bool additive)
{
    if (m->n_values != S * S)
        return ox_node_fail(im, n, "mask '%s' of %" PRId64 " values for %" PRId64 "x%" PRId64
                            " scores", m->name, m->n_values, S, S);
    bool any = false, causal = true;
    for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < S; j++) {
            double x = m->reals ? m->reals[i * S + j] : (double)m->ints[i * S + j];
            bool masked;
            if (additive) {
                masked = x <= -1e4;
                if (!masked && x != 0)
                    return ox_node_fail(im, n, "additive mask holds %g: only 0 and -inf map", x);
            } else masked = (x != 0) == masked_when_true;
            any |= masked;
            causal &= masked == (j > i);
        }
    if (any && !causal)
        return ox_node_fail(im, n, "mask '%s' is neither causal nor empty: the attention layer "
                            "knows no other", m->name);
    return any;
}

static int seq_where(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *c = ox_in(im, n, 0), *x = ox_in(im, n, 1), *y = ox_in(im, n, 2);
    if (!c || !x || !y) return 0;
    val_t *s = x->kind == VAL_SCORES ? x : y->kind == VAL_SCORES ? y : NULL;
    if (!s) return 0;
    val_t *other = s == x ? y : x;
    double fill;
    if (s->softmaxed || c->kind != VAL_CONST || !ox_const_scalar(other, &fill) || fill > -1e4)
        return ox_node_fail(im, n, "only masking scores before the Softmax with -inf where a "
                            "constant mask says maps");
    int kind = mask_kind(im, n, c, s->dims[s->rank - 1], s == y, false);
    if (kind < 0) return -1;
    out_copy(im, n, 0, s)->causal |= kind;
    return 1;
}

/* ---- GELU written out ------------------------------------------------------------------ */

enum { G_X2 = 1, G_X3, G_CX3, G_INNER, G_TARG, G_TANH, G_EARG, G_ERF, G_ONEP, G_XONEP, G_HALFX };

/* Data GELU may start from: a plain sequence or an image/vector layer's output. */
static bool gelu_input(const val_t *v)
{
    return v && v->kind == VAL_DATA && !v->pad_node && (!v->seq || seq_plain(v));
}

static bool stage(const val_t *v, int s) { return v && v->kind == VAL_GELU && v->gelu_stage == s; }

static int gelu_set(imp_t *im, const Onnx__NodeProto *n, int s, int x, bool tanh_form)
{
    val_t *y = ox_out(im, n, 0), *xv = &im->vals[x];
    y->kind = VAL_GELU;
    y->gelu_stage = s;
    y->gelu_x = x;
    y->gelu_tanh = tanh_form;
    y->rank = xv->rank;
    memcpy(y->dims, xv->dims, sizeof y->dims);
    y->dims_known = true;
    return 1;
}

static int gelu_done(imp_t *im, const Onnx__NodeProto *n, int x, bool tanh_form)
{
    val_t *xv = &im->vals[x];
    out_layer_t *l = xv->seq ? seq_like(im, n, "gelu", xv)
                             : ox_emit(im, n, "gelu", &xv, 1, xv->rank, xv->dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "approx=%s", tanh_form ? "tanh" : "erf");
    return 1;
}

/* One step of either formula; 0 when n is not one. */
/* ---- layer norm written out ---------------------------------------------------------- */

/* Before opset 17 PyTorch writes LayerNorm over the features as
 *   m = ReduceMean(x), d = x - m, v = ReduceMean(d^2), y = d / Sqrt(v + eps) * g + b
 * (means over the last axis, kept): each term is a VAL_LNORM of its stage, and the Add of b
 * is the layernorm layer, whose scale and shift are g and b. */
enum { LN_MEAN, LN_DIFF, LN_SQ, LN_VAR, LN_VEPS, LN_STD, LN_NORM, LN_SCALED };

static bool ln_stage(const val_t *v, int s) { return v && v->kind == VAL_LNORM && v->ln_stage == s; }

static int ln_set(imp_t *im, const Onnx__NodeProto *n, int s, const val_t *from, double eps)
{
    val_t *y = ox_out(im, n, 0), *x = &im->vals[from->kind == VAL_LNORM ? from->ln_x
                                                                         : vindex(im, from)];
    y->kind = VAL_LNORM;
    y->ln_stage = s;
    y->ln_x = vindex(im, x);
    y->ln_eps = eps;
    y->rank = x->rank;
    memcpy(y->dims, x->dims, sizeof y->dims);
    y->dims_known = true;
    return 1;
}

/* A mean over the last axis, kept: the features of a sequence */
static int ln_mean_of(imp_t *im, const Onnx__NodeProto *n, const val_t *x, bool *yes)
{
    int64_t axes[ONNX_RANK_MAX], keep;
    int got;
    *yes = false;
    if (ox_attr_ints(im, n, "axes", -1, axes, ONNX_RANK_MAX, &got) ||
        ox_attr_int(im, n, "keepdims", 1, &keep))
        return -1;
    *yes = got == 1 && keep && (axes[0] == -1 || axes[0] == x->rank - 1);
    return 0;
}

/* The scale or the shift: a weight of D values; read (and counted) as input k of n */
static int ln_param(imp_t *im, const Onnx__NodeProto *n, size_t k, const val_t *x)
{
    val_t *p = ox_in_weight(im, n, k, -1, true);
    if (!p) return -1;
    if (ox_dims_count(p->rank, p->dims) != lay_D(im, x))
        return ox_node_fail(im, n, "'%s' does not have the %" PRId64 " values of a layer norm's "
                            "scale or shift", p->name, lay_D(im, x));
    return 0;
}

static int ln_step(imp_t *im, const Onnx__NodeProto *n)
{
    const char *op = ox_node_op(n);
    val_t *a = ox_in(im, n, 0), *b = ox_in(im, n, 1);
    double c;
    bool yes;
    if (!strcmp(op, "ReduceMean") && (seq_plain(a) || ln_stage(a, LN_SQ))) {
        if (ln_mean_of(im, n, a, &yes)) return -1;
        if (!yes) return ox_node_fail(im, n, "a mean of a sequence other than over its features");
        return ln_set(im, n, a->kind == VAL_LNORM ? LN_VAR : LN_MEAN, a, 0);
    }
    if (!strcmp(op, "Sqrt") && ln_stage(a, LN_VEPS)) return ln_set(im, n, LN_STD, a, a->ln_eps);
    if (!b) return 0;
    if (!strcmp(op, "Sub") && seq_plain(a) && ln_stage(b, LN_MEAN) && b->ln_x == vindex(im, a))
        return ln_set(im, n, LN_DIFF, a, 0);
    if (!strcmp(op, "Pow") && ln_stage(a, LN_DIFF) && ox_const_scalar(b, &c) && c == 2)
        return ln_set(im, n, LN_SQ, a, 0);
    if (!strcmp(op, "Div") && ln_stage(a, LN_DIFF) && ln_stage(b, LN_STD) && a->ln_x == b->ln_x)
        return ln_set(im, n, LN_NORM, a, b->ln_eps);
    for (size_t k = 0; k < 2; k++) {
        val_t *p = k ? b : a, *q = k ? a : b;
        if (!strcmp(op, "Add") && ln_stage(p, LN_VAR) && ox_const_scalar(q, &c)) {
            if (!(c >= 0 && c <= 1)) return ox_node_fail(im, n, "epsilon %g outside [0, 1]", c);
            return ln_set(im, n, LN_VEPS, p, c);
        }
        if (!strcmp(op, "Mul") && ln_stage(p, LN_NORM) && is_weight(q))
            return ln_param(im, n, 1 - k, &im->vals[p->ln_x]) ? -1
                                                              : ln_set(im, n, LN_SCALED, p, p->ln_eps);
        if (!strcmp(op, "Add") && ln_stage(p, LN_SCALED) && is_weight(q)) {
            val_t *x = &im->vals[p->ln_x];
            if (ln_param(im, n, 1 - k, x)) return -1;
            out_layer_t *l = seq_like(im, n, "layernorm", x);
            if (!l) return -1;
            snprintf(l->keys, sizeof l->keys, "eps=%.7g", p->ln_eps);
            l->op = "LayerNorm written out";
            return 1;
        }
    }
    return 0;
}

static int gelu_step(imp_t *im, const Onnx__NodeProto *n)
{
    const char *op = ox_node_op(n);
    val_t *a = ox_in(im, n, 0), *b = ox_in(im, n, 1);
    double c;
    if (!a) return 0;
    if (!strcmp(op, "Tanh") && stage(a, G_TARG)) return gelu_set(im, n, G_TANH, a->gelu_x, true);
    if (!strcmp(op, "Erf") && stage(a, G_EARG)) return gelu_set(im, n, G_ERF, a->gelu_x, false);
    if (!b) return 0;
    if (!strcmp(op, "Pow") && gelu_input(a) && ox_const_scalar(b, &c) && c == 3)
        return gelu_set(im, n, G_X3, vindex(im, a), true);
    if (!strcmp(op, "Div") && gelu_input(a) && ox_const_scalar(b, &c) && near(c, M_SQRT2))
        return gelu_set(im, n, G_EARG, vindex(im, a), false);
    for (int order = 0; order < 2; order++) {
        val_t *p = order ? b : a, *q = order ? a : b;
        int xp = vindex(im, p);
        if (!strcmp(op, "Add")) {
            if (stage(p, G_CX3) && gelu_input(q) && vindex(im, q) == p->gelu_x)
                return gelu_set(im, n, G_INNER, p->gelu_x, true);
            if ((stage(p, G_TANH) || stage(p, G_ERF)) && ox_const_scalar(q, &c) && near(c, 1))
                return gelu_set(im, n, G_ONEP, p->gelu_x, p->gelu_tanh);
            continue;
        }
        if (strcmp(op, "Mul")) continue;
        if (gelu_input(p) && q == p) return gelu_set(im, n, G_X2, xp, true);
        if (gelu_input(p) && stage(q, G_X2) && q->gelu_x == xp)
            return gelu_set(im, n, G_X3, xp, true);
        if (stage(q, G_X3) && ox_const_scalar(p, &c) && near(c, 0.044715))
            return gelu_set(im, n, G_CX3, q->gelu_x, true);
        if (stage(q, G_INNER) && ox_const_scalar(p, &c) && near(c, sqrt(2 / M_PI)))
            return gelu_set(im, n, G_TARG, q->gelu_x, true);
        if (gelu_input(p) && ox_const_scalar(q, &c) && near(c, M_SQRT1_2))
            return gelu_set(im, n, G_EARG, xp, false);
        if (gelu_input(p) && stage(q, G_ONEP) && q->gelu_x == xp)
            return gelu_set(im, n, G_XONEP, xp, q->gelu_tanh);
        if (stage(q, G_XONEP) && ox_const_scalar(p, &c) && near(c, 0.5))
            return gelu_done(im, n, q->gelu_x, q->gelu_tanh);
        if (gelu_input(p) && ox_const_scalar(q, &c) && near(c, 0.5))
            return gelu_set(im, n, G_HALFX, xp, false);
        if (stage(p, G_HALFX) && stage(q, G_ONEP) && p->gelu_x == q->gelu_x)
            return gelu_done(im, n, q->gelu_x, q->gelu_tanh);
    }
    return 0;
}

/* ---- the operators --------------------------------------------------------------------- */

static int seq_add(imp_t *im, const Onnx__NodeProto *n, val_t *a, val_t *b)
{
    if (a->kind == VAL_SCORES || b->kind == VAL_SCORES) {
        val_t *s = a->kind == VAL_SCORES ? a : b, *m = s == a ? b : a;
        if (s->softmaxed || m->kind != VAL_CONST)
            return ox_node_fail(im, n, "adds to attention scores something other than a "
                                "constant mask before the Softmax");
        int kind = mask_kind(im, n, m, s->dims[s->rank - 1], true, true);
        if (kind < 0) return -1;
        out_copy(im, n, 0, s)->causal |= kind;
        return 1;
    }
    if (a->kind == VAL_POSEMB || b->kind == VAL_POSEMB) { /* table rows 0..S-1 + sequence */
        val_t *pe = a->kind == VAL_POSEMB ? a : b, *x = pe == a ? b : a;
        if (!seq_plain(x) || pe->dims[pe->rank - 1] != lay_D(im, x) ||
            ox_dims_count(pe->rank, pe->dims) != lay_S(im, x) * lay_D(im, x))
            return ox_node_fail(im, n, "adds position embeddings to something other than a "
                                "sequence of their shape");
        val_t *table = &im->vals[pe->pos_table];
        val_t *src = table->source ? table->source : table;
        if (src->owner_node)
            return ox_node_fail(im, n, "position table '%s' is shared with node '%s'",
                                table->name, src->owner_node);
        src->owner_node = ox_node_name(n);
        im->learnable += ox_dims_count(table->rank, table->dims);
        out_layer_t *l = seq_like(im, n, "posembed", x);
        if (!l) return -1;
        snprintf(l->keys, sizeof l->keys, "max=%" PRId64, pe->n_values);
        return 1;
    }
    if (is_seq(a) && is_seq(b)) { /* a residual */
        if (!seq_plain(a) || !seq_plain(b) || a->rank != b->rank ||
            memcmp(a->dims, b->dims, a->rank * sizeof *a->dims) ||
            memcmp(a->ax, b->ax, a->rank) || lay_D(im, a) != lay_D(im, b) ||
            lay_S(im, a) != lay_S(im, b))
            return ox_node_fail(im, n, "adds sequences of different layouts or shapes");
        int ins[2] = {a->layer, b->layer};
        int l = seq_emit(im, n, "add", ins, 2, lay_S(im, a), lay_D(im, a));
        if (l < 0) return -1;
        seq_define(im, n, 0, l, a->rank, a->dims, a->ax, 0);
        return 1;
    }
    val_t *x = is_seq(a) ? a : b, *w = x == a ? b : a;
    size_t wk = w == a ? 0 : 1;
    if (!is_weight(w)) return 0;
    if (!seq_plain(x))
        return ox_node_fail(im, n, "adds a parameter to a sequence not laid out positions × "
                            "features");
    out_layer_t *l = &im->layers[x->layer];
    int64_t D = lay_D(im, x), S = lay_S(im, x), count = ox_dims_count(w->rank, w->dims);
    if (!strcmp(l->type, "linear") && l->tie >= 0)
        return ox_node_fail(im, n, "adds '%s' to the output head '%s' tied to embedding '%s': a "
                            "tied linear has no bias", w->name, l->name, im->layers[l->tie].name);
    if (!strcmp(l->type, "linear") && l->bias == 0 && !strcmp(l->op, "MatMul") && x->uses == 1) {
        if (count != D || w->dims[w->rank - 1] != D)
            return ox_node_fail(im, n, "bias '%s' does not have the %" PRId64 " outputs of '%s'",
                                w->name, D, l->name);
        if (!ox_in_weight(im, n, wk, -1, true)) return -1;
        l->bias = 1;
        val_t *y = out_copy(im, n, 0, x);
        (void)y;
        return 1;
    }
    if (count == S * D && w->dims[w->rank - 1] == D) { /* a learned position table, whole */
        if (!ox_in_weight(im, n, wk, -1, true)) return -1;
        out_layer_t *p = seq_like(im, n, "posembed", x);
        if (!p) return -1;
        snprintf(p->keys, sizeof p->keys, "max=%" PRId64, S);
        return 1;
    }
    return ox_node_fail(im, n, "adds parameter '%s' to a sequence: only a bias after a MatMul "
                        "or a position table maps", w->name);
}

static int seq_layernorm(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *x = ox_in_data(im, n, 0);
    if (!x) return -1;
    int64_t axis;
    double eps;
    if (ox_attr_int(im, n, "axis", -1, &axis) || ox_attr_float(im, n, "epsilon", 1e-5, &eps))
        return -1;
    if (axis < 0) axis += x->rank;
    if (!seq_plain(x) || axis != x->rank - 1)
        return ox_node_fail(im, n, "only normalising the features of a sequence maps (to "
                            "layernorm)");
    if (!(eps >= 0 && eps <= 1)) return ox_node_fail(im, n, "epsilon %g outside [0, 1]", eps);
    for (size_t k = 1; k <= 2; k++) {
        if (!ox_has_input(n, k)) return ox_node_fail(im, n, "scale and bias are both needed");
        val_t *p = ox_in_weight(im, n, k, -1, true);
        if (!p) return -1;
        if (ox_dims_count(p->rank, p->dims) != lay_D(im, x))
            return ox_node_fail(im, n, "'%s' does not have %" PRId64 " values", p->name,
                                lay_D(im, x));
    }
    if (ox_outputs_unused_from(im, n, 1)) return -1;
    out_layer_t *l = seq_like(im, n, "layernorm", x);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "eps=%.7g", eps);
    return 1;
}

/* Class token: Concat of a learned (1,1,D) vector and a sequence along the positions. */
static int seq_concat(imp_t *im, const Onnx__NodeProto *n)
{
    val_t *a = ox_in(im, n, 0), *b = ox_in(im, n, 1);
    int64_t axis;
    if (ox_attr_int(im, n, "axis", 0, &axis)) return -1;
    if (n->n_input != 2 || !a || !b || !is_weight(a) || !seq_plain(b))
        return ox_node_fail(im, n, "concatenates a sequence with something other than a "
                            "learned vector before it: only a class token maps (to clstoken)");
    if (axis < 0) axis += b->rank;
    int64_t D = lay_D(im, b);
    if (axis != axis_of(b, AX_S) || a->rank != b->rank || ox_dims_count(a->rank, a->dims) != D ||
        a->dims[a->rank - 1] != D)
        return ox_node_fail(im, n, "the class token '%s' is not one vector of %" PRId64
                            " features put before the positions", a->name, D);
    if (!ox_in_weight(im, n, 0, -1, true)) return -1;
    int in = b->layer;
    int l = seq_emit(im, n, "clstoken", &in, 1, lay_S(im, b) + 1, D);
    if (l < 0) return -1;
    int64_t dims[ONNX_RANK_MAX];
    memcpy(dims, b->dims, sizeof dims);
    dims[axis]++;
    seq_define(im, n, 0, l, b->rank, dims, b->ax, 0);
    return 1;
}

int ox_seq_node(imp_t *im, const Onnx__NodeProto *n)
{
    const char *op = ox_node_op(n);
    val_t *a = ox_in(im, n, 0), *b = ox_in(im, n, 1);
    if (!strcmp(op, "Identity")) return 0; /* a copy of any value, made by the importer */
    if (!strcmp(op, "LayerNormalization")) return seq_layernorm(im, n);
    if (!strcmp(op, "Gather")) return seq_gather(im, n);
    if (!a) return 0;
    int g = gelu_step(im, n);
    if (g) return g;
    g = ln_step(im, n);
    if (g) return g;
    /* a weight exported with its values is a real constant; integer ones are shape data */
    if ((!strcmp(op, "Transpose") || !strcmp(op, "Expand")) && is_weight(a) &&
        (a->kind != VAL_CONST || a->reals))
        return weight_alias(im, n, a);
    if (!strcmp(op, "Reshape") && a->kind == VAL_DATA && !a->seq && a->rank == 4 &&
        ox_data_is_layer_shaped(im, a) && ox_has_input(n, 1))
        return to_seq(im, n, a);
    bool seqish = false;
    for (size_t k = 0; k < n->n_input; k++) {
        val_t *v = ox_in(im, n, k);
        seqish |= v && (is_seq(v) || v->kind == VAL_SCORES || v->kind == VAL_POSEMB);
    }
    if (!seqish) return 0;
    if (!strcmp(op, "Reshape")) return is_seq(a) ? seq_reshape(im, n, a) : 0;
    if (!strcmp(op, "Transpose")) return seq_transpose(im, n, a);
    if (!strcmp(op, "Unsqueeze")) return seq_unsqueeze(im, n, a, false);
    if (!strcmp(op, "Squeeze")) return seq_unsqueeze(im, n, a, true);
    if (!strcmp(op, "Split")) return seq_split(im, n, a);
    if (!strcmp(op, "Slice")) return seq_slice(im, n, a);
    if (!strcmp(op, "Concat")) return seq_concat(im, n);
    if (!strcmp(op, "Where")) return seq_where(im, n);
    if (!strcmp(op, "Add") && b) return seq_add(im, n, a, b);
    if (!strcmp(op, "MatMul") && b) {
        if (a->kind == VAL_SCORES) return seq_context(im, n, a, b);
        if (is_seq(a) && is_seq(b)) return seq_scores(im, n, a, b);
        if (is_seq(a)) return seq_linear(im, n, a, false);
        return 0;
    }
    if (!strcmp(op, "Gemm")) return is_seq(a) ? seq_linear(im, n, a, true) : 0;
    double c;
    if ((!strcmp(op, "Mul") || !strcmp(op, "Div")) && b) { /* attention's 1/sqrt(head size) */
        val_t *x = a->kind == VAL_SCORES || has_heads(a) ? a : b, *k = x == a ? b : a;
        bool div = !strcmp(op, "Div");
        if ((x->kind == VAL_SCORES || has_heads(x)) && ox_const_scalar(k, &c) && c != 0 &&
            (!div || x == a)) {
            out_copy(im, n, 0, x)->scale = x->scale * (div ? 1 / c : c);
            return 1;
        }
    }
    if (!strcmp(op, "Softmax") && a->kind == VAL_SCORES) {
        int64_t axis;
        if (ox_attr_int(im, n, "axis", -1, &axis)) return -1;
        if (axis < 0) axis += a->rank;
        if (axis != a->rank - 1 || a->softmaxed)
            return ox_node_fail(im, n, "a Softmax of attention scores other than over the keys");
        out_copy(im, n, 0, a)->softmaxed = true;
        return 1;
    }
    if (!strcmp(op, "Dropout")) {
        if (ox_outputs_unused_from(im, n, 1)) return -1;
        double ratio = 0.5;
        val_t *r = ox_in(im, n, 1);
        if (im->opset < 12) {
            if (ox_attr_float(im, n, "ratio", 0.5, &ratio)) return -1;
        } else if (r && !ox_const_scalar(r, &ratio))
            return ox_node_fail(im, n, "the ratio must be a constant scalar");
        /* the attention layer has no dropout of its probabilities: it is left out (its cost
         * is one multiply per probability); a ratio of 0 is no layer at all */
        if (a->kind == VAL_SCORES || ratio == 0) {
            out_copy(im, n, 0, a);
            return 1;
        }
        if (!seq_plain(a)) return ox_node_fail(im, n, "dropout of a sequence laid out otherwise");
        if (!(ratio > 0 && ratio < 1)) return ox_node_fail(im, n, "ratio %g outside [0, 1)", ratio);
        out_layer_t *l = seq_like(im, n, "dropout", a);
        if (!l) return -1;
        snprintf(l->keys, sizeof l->keys, "ratio=%.7g", ratio);
        return 1;
    }
    if ((!strcmp(op, "Relu") || !strcmp(op, "Tanh")) && seq_plain(a))
        return seq_like(im, n, !strcmp(op, "Relu") ? "relu" : "tanh", a) ? 1 : -1;
    if (a->kind == VAL_SCORES || (b && b->kind == VAL_SCORES))
        return ox_node_fail(im, n, "operator %s on attention scores does not map", op);
    char buf[160];
    layout_str(is_seq(a) ? a : b, buf, sizeof buf);
    return ox_node_fail(im, n, "operator %s on a sequence %s maps to no layer type", op, buf);
}

int ox_seq_output(imp_t *im, val_t *v)
{
    if (!is_seq(v)) return 0;
    if (!seq_plain(v)) {
        char b[160];
        layout_str(v, b, sizeof b);
        return ox_imp_fail(im, "graph output '%s' is a sequence laid out as %s: a loss reads "
                           "positions × features", v->name, b);
    }
    char fb[MODEL_NAME_MAX];
    snprintf(fb, sizeof fb, "loss%s%.80s", im->g->n_output > 1 ? "_" : "",
             im->g->n_output > 1 ? v->name : "");
    out_layer_t *l = ox_layer_add(im, "seq_loss", NULL, fb);
    l->op = "objective";
    l->node = v->name;
    l->shape = (shape_t){1, 1, 1};
    l->n_in = 1;
    l->in[0] = v->layer;
    return 1;
}

/* ---- channels last -------------------------------------------------------------------- */

/* The plane of the image a channels-last sequence came from: the input of the to_seq that a
 * Transpose made, found up the first inputs of the layers since. false when there is none. */
static bool channels_last_plane(const imp_t *im, int layer, int64_t *h, int64_t *w)
{
    for (int k = layer; k >= 0; k = im->layers[k].n_in ? im->layers[k].in[0] : -1) {
        const out_layer_t *l = &im->layers[k];
        if (l->plane_h > 0) { /* Swin's layers: patch merging halves the plane */
            *h = l->plane_h;
            *w = l->plane_w;
            return true;
        }
        if (strcmp(l->type, "to_seq")) continue;
        if (strcmp(l->op, "Transpose")) return false;
        *h = im->layers[l->in[0]].shape.h;
        *w = im->layers[l->in[0]].shape.w;
        return true;
    }
    return false;
}

int ox_seq_channels_last(imp_t *im, const Onnx__NodeProto *n)
{
    if (strcmp(ox_node_op(n), "Transpose")) return 0;
    val_t *x = ox_in(im, n, 0);
    int64_t perm[ONNX_RANK_MAX];
    int got;
    if (!x || x->kind != VAL_DATA || ox_attr_ints(im, n, "perm", -1, perm, ONNX_RANK_MAX, &got))
        return x && x->kind == VAL_DATA ? -1 : 0;
    static const int64_t to_last[4] = {0, 2, 3, 1}, to_first[4] = {0, 3, 1, 2};
    if (got == 4 && !memcmp(perm, to_last, sizeof to_last) && !x->seq && x->rank == 4 &&
        x->dims[0] == 1 && ox_data_is_layer_shaped(im, x))
        return to_seq_emit(im, n, x, true); /* (1,C,H,W) -> (1,H,W,C), held as (1,S,C) */
    int64_t h, w;
    if (got != 4 || memcmp(perm, to_first, sizeof to_first) || !seq_plain(x) || x->rank != 3 ||
        !channels_last_plane(im, x->layer, &h, &w))
        return 0;
    if (h * w != lay_S(im, x))
        return ox_node_fail(im, n, "a channels-last sequence of %" PRId64 " positions back to a "
                            "%" PRId64 "x%" PRId64 " plane", lay_S(im, x), h, w);
    int64_t dims[4] = {1, lay_D(im, x), h, w};
    out_layer_t *l = ox_emit(im, n, "to_image", &x, 1, 4, dims);
    if (!l) return -1;
    snprintf(l->keys, sizeof l->keys, "h=%" PRId64 " w=%" PRId64, h, w);
    return 1;
}

int ox_seq_emit(imp_t *im, const Onnx__NodeProto *n, const char *type, const int *ins,
                int n_in, int64_t S, int64_t D)
{
    return seq_emit(im, n, type, ins, n_in, S, D);
}

val_t *ox_seq_define_plain(imp_t *im, const Onnx__NodeProto *n, size_t k, int layer)
{
    int64_t dims[3] = {1, lay_S(im, &(val_t){.layer = layer}), lay_D(im, &(val_t){.layer = layer})};
    static const uint8_t ax[3] = {AX_UNIT, AX_S, AX_D};
    return seq_define(im, n, k, layer, 3, dims, ax, 0);
}

bool ox_seq_plane(const imp_t *im, const val_t *x, int64_t *h, int64_t *w)
{
    return seq_plain(x) && x->rank == 3 && channels_last_plane(im, x->layer, h, w) &&
           *h * *w == lay_S(im, x);
}
