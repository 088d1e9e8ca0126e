/* onnx_swin: Swin Transformers (torchvision's swin_t, swin_s, swin_b) onto the winattn and
 * patchmerge layers (models/README.md).
 *
 * PyTorch exports one shifted-window attention as a few hundred nodes: the padding of the
 * plane to whole windows (its amounts computed with Mod from the shape), torch.roll as
 * Slices and Concats, the window partition as 6-D Reshapes and Transposes, the Q/K/V
 * projection and its split, the relative position bias (a table gathered by a constant
 * index, or that gather folded into a (1,heads,N,N) tensor), the mask of shifted windows
 * built from the shape with ConstantOfShape, ScatterND, Equal and Where, the softmax, the
 * output projection, the windows put back, rolled back and cropped. Patch merging is a Pad
 * (Mod of the shape again), four strided Slices and a Concat.
 *
 * Rather than follow those nodes value by value, a region is claimed whole once the value
 * that starts it is known: a channels-last sequence x (a value with a plane, ox_seq_plane)
 * read by a Pad. The region is what follows from the Pad's output alone: every node that
 * reads a value of the region and no other data (the residual Add that reads the block's
 * input ends it), with the nodes that compute only constants for it (the padding amounts,
 * the mask, the bias gather). A region with one Softmax and four MatMuls is a window
 * attention, read from what the layer needs — the Q/K/V and output weights and biases,
 * the bias table or its gathered form (which gives the window and the heads), the roll of
 * the Slices before the projection (the shift) — and emitted at the node that makes the
 * region's one output; everything else in it is skipped, as the layer computes the padding,
 * the roll and the mask itself. A Pad whose output only strided Slices read, joined by one
 * Concat, is a patch merge. A Pad of a channels-last sequence that is neither is left to
 * the node-by-node mapping, which names the node it cannot map.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "onnx/onnx_internal.h"

enum { CLS_NONE, CLS_CONST, CLS_DATA, CLS_REGION };
enum { MARK_NONE, MARK_SKIP, MARK_EMIT };
enum { KIND_ATTN, KIND_MERGE };

typedef struct {
    int kind;
    int pad_node;  /* the Pad that starts it */
    int x;         /* value index of the Pad's input */
    int out_node;  /* the node making the region's output, and which output */
    int out_k;
} region_t;

struct swin {
    int *producer;               /* per value: the node that makes it (-1: none) */
    int *cons_first, *cons_list; /* per value: the nodes that read it (CSR) */
    uint8_t *mark;               /* per node: MARK_* */
    int *region_of;              /* per node: its region (-1) */
    uint8_t *in_fwd;             /* per node: in a region's forward part */
    region_t *regions;
    int n_regions, cap_regions;
    uint8_t *cls;                /* per value: CLS_* scratch of a claim */
};

/* ---- the graph's indexes --------------------------------------------------------------- */

static struct swin *swin_get(imp_t *im)
{
    if (im->swin) return im->swin;
    const Onnx__GraphProto *g = im->g;
    struct swin *s = xcalloc(1, sizeof *s);
    int nv = im->n_vals, nn = (int)g->n_node;
    s->producer = xmalloc((size_t)(nv + 1) * sizeof *s->producer);
    s->cons_first = xcalloc((size_t)nv + 1, sizeof *s->cons_first);
    for (int v = 0; v < nv; v++) s->producer[v] = -1;
    int64_t edges = 0;
    for (int i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_output; k++)
            if (n->output[k][0]) s->producer[ox_val_find(im, n->output[k])] = i;
        for (size_t k = 0; k < n->n_input; k++)
            if (n->input[k][0]) s->cons_first[ox_val_find(im, n->input[k]) + 1]++, edges++;
    }
    for (int v = 0; v < nv; v++) s->cons_first[v + 1] += s->cons_first[v];
    s->cons_list = xmalloc((size_t)(edges + 1) * sizeof *s->cons_list);
    int *fill = xcalloc((size_t)nv + 1, sizeof *fill);
    for (int i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++)
            if (n->input[k][0]) {
                int v = ox_val_find(im, n->input[k]);
                s->cons_list[s->cons_first[v] + fill[v]++] = i;
            }
    }
    free(fill);
    s->mark = xcalloc((size_t)nn + 1, 1);
    s->in_fwd = xcalloc((size_t)nn + 1, 1);
    s->region_of = xmalloc((size_t)(nn + 1) * sizeof *s->region_of);
    for (int i = 0; i < nn; i++) s->region_of[i] = -1;
    s->cls = xcalloc((size_t)nv + 1, 1);
    im->swin = s;
    return s;
}

void ox_swin_free(imp_t *im)
{
    struct swin *s = im->swin;
    if (!s) return;
    free(s->producer);
    free(s->cons_first);
    free(s->cons_list);
    free(s->mark);
    free(s->in_fwd);
    free(s->region_of);
    free(s->regions);
    free(s->cls);
    free(s);
    im->swin = NULL;
}

static int vidx(const imp_t *im, const char *name) { return name[0] ? ox_val_find(im, name) : -1; }

/* Value index of input k of n, -1 when absent. */
static int in_val(const imp_t *im, const Onnx__NodeProto *n, size_t k)
{
    return k < n->n_input ? vidx(im, n->input[k]) : -1;
}

/* The node that makes input k of n, -1 when none (absent, a graph input, a weight). */
static int in_producer(const imp_t *im, const Onnx__NodeProto *n, size_t k)
{
    int v = in_val(im, n, k);
    return v < 0 ? -1 : im->swin->producer[v];
}

static bool op_is(const Onnx__NodeProto *n, const char *op) { return !strcmp(ox_node_op(n), op); }

/* Operators a window attention's region may hold: its arithmetic on data and the shape
 * arithmetic of the padding and the mask. */
static bool attn_op(const Onnx__NodeProto *n)
{
    static const char *const ok[] = {
        "Pad", "Slice", "Concat", "Reshape", "Transpose", "MatMul", "Add", "Mul", "Div", "Sub",
        "Gather", "Softmax", "Dropout", "Shape", "Cast", "Unsqueeze", "Squeeze", "Identity",
        "Expand", "ConstantOfShape", "Equal", "Where", "Range", "ScatterND", "Not", "Pow",
        "Mod", "Neg"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (op_is(n, ok[i])) return true;
    return false;
}

/* ---- claiming a region ----------------------------------------------------------------- */

/* The class of every value from node `from` on, walking forward from the Pad p: the region
 * (values that follow from the Pad's output alone), data, constants. Marks the region's
 * forward nodes in fwd[] and returns the last node looked at, or -1 when the region holds
 * an operator of neither kind (merge: only Slices, ending at one Concat). */
static int grow(imp_t *im, int from, int p, int kind, uint8_t *fwd)
{
    struct swin *s = im->swin;
    const Onnx__GraphProto *g = im->g;
    int64_t pending = 0;
    int last = p;
    for (int i = from; i < (int)g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        bool region = false, data = false;
        for (size_t k = 0; k < n->n_input; k++) {
            int v = vidx(im, n->input[k]);
            if (v < 0) continue;
            if (s->cls[v] == CLS_REGION) region = true, pending--;
            if (s->cls[v] == CLS_DATA) data = true;
        }
        uint8_t out = CLS_CONST;
        if (i == p) region = true, data = false;
        if (region && !data) {
            fwd[i] = 1;
            last = i;
            if (kind == KIND_ATTN && !attn_op(n)) return -1;
            if (kind == KIND_MERGE && i != p && !op_is(n, "Slice") && !op_is(n, "Concat") &&
                !op_is(n, "Shape"))
                return -1;
            out = kind == KIND_MERGE && op_is(n, "Concat") ? CLS_DATA : CLS_REGION;
        } else if ((region || data) && !op_is(n, "Shape")) {
            out = CLS_DATA;
        }
        for (size_t k = 0; k < n->n_output; k++) {
            int v = vidx(im, n->output[k]);
            if (v < 0) continue;
            s->cls[v] = out;
            if (out == CLS_REGION) pending += s->cons_first[v + 1] - s->cons_first[v];
        }
        if (i >= p && pending <= 0) return last;
    }
    return last;
}

/* Nodes (not Constant) from `from` to `last` that compute only constants read only by the
 * region: marked in back[]. */
static void close_back(imp_t *im, int from, int last, const uint8_t *fwd, uint8_t *back)
{
    struct swin *s = im->swin;
    const Onnx__GraphProto *g = im->g;
    for (int i = last; i >= from; i--) {
        const Onnx__NodeProto *n = g->node[i];
        if (fwd[i] || op_is(n, "Constant") || !n->n_output) continue;
        bool only = true, any = false;
        for (size_t k = 0; k < n->n_output && only; k++) {
            int v = vidx(im, n->output[k]);
            if (v < 0) continue;
            if (s->cls[v] != CLS_CONST) only = false;
            for (int c = s->cons_first[v]; c < s->cons_first[v + 1] && only; c++) {
                int j = s->cons_list[c];
                any = true;
                if (!(j <= last && (fwd[j] || back[j]))) only = false;
            }
        }
        back[i] = only && any;
    }
}

/* The region's one output: the value of a forward node read outside the region. Returns its
 * producer (output index in *k), or -1 when there is not exactly one. */
static int region_output(imp_t *im, int last, const uint8_t *fwd, const uint8_t *back, int *kout)
{
    struct swin *s = im->swin;
    const Onnx__GraphProto *g = im->g;
    int found = -1, nfound = 0;
    for (int i = 0; i <= last; i++) {
        if (!fwd[i]) continue;
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_output; k++) {
            int v = vidx(im, n->output[k]);
            if (v < 0) continue;
            bool outside = im->vals[v].uses > s->cons_first[v + 1] - s->cons_first[v];
            for (int c = s->cons_first[v]; c < s->cons_first[v + 1]; c++) {
                int j = s->cons_list[c];
                if (j > last || (!fwd[j] && !back[j])) outside = true;
            }
            if (!outside) continue;
            if (found != i || *kout != (int)k) nfound++;
            found = i;
            *kout = (int)k;
        }
    }
    return nfound == 1 ? found : -1;
}

/* Counts of an operator among the forward nodes. */
static int count_op(const imp_t *im, int from, int last, const uint8_t *fwd, const char *op)
{
    int c = 0;
    for (int i = from; i <= last; i++) c += fwd[i] && op_is(im->g->node[i], op);
    return c;
}

/* Tries a region of the given kind for Pad p of value x; 1 when claimed, 0 when not. */
static int try_claim(imp_t *im, int from, int p, int x, int kind)
{
    struct swin *s = im->swin;
    int nn = (int)im->g->n_node;
    for (int v = 0; v < im->n_vals; v++)
        s->cls[v] = im->vals[v].kind == VAL_UNDEFINED ? CLS_NONE
                    : im->vals[v].kind == VAL_DATA    ? CLS_DATA
                                                      : CLS_CONST;
    uint8_t *fwd = xcalloc((size_t)nn, 1), *back = xcalloc((size_t)nn, 1);
    int last = grow(im, from, p, kind, fwd), k = 0, out = -1;
    bool ok = last >= 0;
    if (ok) {
        close_back(im, from, last, fwd, back);
        out = region_output(im, last, fwd, back, &k);
        ok = out >= 0;
    }
    if (ok && kind == KIND_ATTN)
        ok = count_op(im, p, last, fwd, "Softmax") == 1 && count_op(im, p, last, fwd, "MatMul") == 4;
    if (ok && kind == KIND_MERGE)
        ok = count_op(im, p, last, fwd, "Concat") == 1 && op_is(im->g->node[out], "Concat");
    for (int i = from; ok && i <= last; i++) /* a node of another region: not ours */
        if ((fwd[i] || back[i]) && s->region_of[i] >= 0) ok = false;
    if (ok) {
        if (s->n_regions == s->cap_regions) {
            s->cap_regions = 2 * s->cap_regions + 8;
            s->regions = xrealloc(s->regions, (size_t)s->cap_regions * sizeof *s->regions);
        }
        int r = s->n_regions++;
        s->regions[r] = (region_t){kind, p, x, out, k};
        for (int i = from; i <= last; i++) {
            if (!fwd[i] && !back[i]) continue;
            s->region_of[i] = r;
            s->in_fwd[i] = fwd[i];
            s->mark[i] = i == out ? MARK_EMIT : MARK_SKIP;
        }
    }
    free(fwd);
    free(back);
    return ok;
}

int ox_swin_claim(imp_t *im, size_t i)
{
    const Onnx__NodeProto *n = im->g->node[i];
    for (size_t k = 0; k < n->n_output; k++) {
        if (!n->output[k][0]) continue;
        int x = ox_val_find(im, n->output[k]);
        int64_t h, w;
        if (!ox_seq_plane(im, &im->vals[x], &h, &w)) continue;
        struct swin *s = swin_get(im);
        for (int c = s->cons_first[x]; c < s->cons_first[x + 1]; c++) {
            int p = s->cons_list[c];
            const Onnx__NodeProto *pn = im->g->node[p];
            if (!op_is(pn, "Pad") || s->region_of[p] >= 0 || in_val(im, pn, 0) != x)
                continue;
            if (!try_claim(im, (int)i + 1, p, x, KIND_ATTN))
                try_claim(im, (int)i + 1, p, x, KIND_MERGE);
        }
    }
    return 0;
}

/* ---- emitting the layers --------------------------------------------------------------- */

/* A weight read by node j as input k (a graph input, an initializer with or without its
 * values, or an Identity's copy of one), else NULL. */
static val_t *weight_in(imp_t *im, int j, size_t k)
{
    const Onnx__NodeProto *n = im->g->node[j];
    if (k >= n->n_input || !n->input[k][0]) return NULL;
    val_t *v = &im->vals[ox_val_find(im, n->input[k])];
    if (v->kind == VAL_PARAM || v->kind == VAL_INPUT) return v;
    const val_t *src = v->source ? v->source : v;
    return v->kind == VAL_CONST && v->reals && src->initializer ? v : NULL;
}

/* The weight of MatMul j, (in, out): its input 1, or the Transpose of a weight (out, in)
 * there (an export without constant folding); the node and input that read the weight into
 * *wn, *wk. NULL when neither. */
static val_t *matmul_weight(imp_t *im, int j, int64_t *in, int64_t *out, int *wn, size_t *wk)
{
    val_t *w = weight_in(im, j, 1);
    *wn = j, *wk = 1;
    if (!w) {
        int t = in_producer(im, im->g->node[j], 1);
        int64_t perm[2];
        int got;
        const Onnx__NodeProto *tn = t >= 0 ? im->g->node[t] : NULL;
        if (!tn || !op_is(tn, "Transpose") || !(w = weight_in(im, t, 0)) || w->rank != 2 ||
            ox_attr_ints(im, tn, "perm", 2, perm, 2, &got) || perm[0] != 1 || perm[1] != 0)
            return NULL;
        *wn = t, *wk = 0;
        *in = w->dims[1], *out = w->dims[0];
        return w;
    }
    if (w->rank != 2) return NULL;
    *in = w->dims[0], *out = w->dims[1];
    return w;
}

/* What a window attention needs from its region. */
typedef struct {
    int qkv, proj;         /* MatMul nodes of the projections */
    int qkv_wn, proj_wn;   /* the nodes that read their weights, as input qkv_wk, proj_wk */
    size_t qkv_wk, proj_wk;
    int qkv_b, proj_b;     /* Add nodes of their biases (-1: none) */
    int bias_node;         /* Add of the gathered bias, or Gather of the table */
    size_t qkv_bk, proj_bk, bias_k;
    int64_t D, heads, win;
    bool table;            /* bias_node gathers the table itself */
} attn_t;

/* Finds the projections, their biases and the bias (table) among region r's nodes. */
static int attn_read(imp_t *im, int r, attn_t *a)
{
    struct swin *s = im->swin;
    const Onnx__NodeProto *pad = im->g->node[s->regions[r].pad_node];
    *a = (attn_t){.qkv = -1, .proj = -1, .qkv_b = -1, .proj_b = -1, .bias_node = -1};
    for (int j = 0; j < (int)im->g->n_node; j++) {
        if (s->region_of[j] != r) continue;
        const Onnx__NodeProto *n = im->g->node[j];
        val_t *w1 = weight_in(im, j, 1), *w0 = weight_in(im, j, 0);
        int64_t win, wout;
        int wn;
        size_t wk;
        if (op_is(n, "MatMul") && s->in_fwd[j] && matmul_weight(im, j, &win, &wout, &wn, &wk)) {
            if (wout == 3 * win && a->qkv < 0) a->qkv = j, a->D = win, a->qkv_wn = wn, a->qkv_wk = wk;
            else if (wout == win && a->proj < 0) a->proj = j, a->proj_wn = wn, a->proj_wk = wk;
            else return ox_node_fail(im, n, "a projection of a window attention that is "
                                     "neither Q/K/V (D x 3D) nor the output's (D x D)");
        } else if (op_is(n, "Add") && s->in_fwd[j] && (w0 || w1)) {
            val_t *b = w0 ? w0 : w1;
            size_t k = w0 ? 0 : 1;
            if (b->rank == 1 && a->qkv_b < 0 && a->proj < 0) a->qkv_b = j, a->qkv_bk = k;
            else if (b->rank == 1) a->proj_b = j, a->proj_bk = k;
            else if (b->rank >= 3 && b->dims[b->rank - 1] == b->dims[b->rank - 2]) {
                a->bias_node = j, a->bias_k = k;
                a->heads = b->dims[b->rank - 3];
                a->win = (int64_t)llround(sqrt((double)b->dims[b->rank - 1]));
                if (a->win * a->win != b->dims[b->rank - 1])
                    return ox_node_fail(im, n, "a relative position bias over %" PRId64
                                        " positions: not a square window", b->dims[b->rank - 1]);
            }
        } else if (op_is(n, "Gather") && w0 && w0->rank == 2) { /* the table, not folded */
            a->bias_node = j, a->bias_k = 0, a->table = true;
            a->heads = w0->dims[1];
            int64_t side = (int64_t)llround(sqrt((double)w0->dims[0]));
            a->win = (side + 1) / 2;
            if (side * side != w0->dims[0] || side % 2 == 0)
                return ox_node_fail(im, n, "a relative position table of %" PRId64 " rows: "
                                    "not (2 window - 1)^2", w0->dims[0]);
        }
    }
    if (a->qkv < 0 || a->proj < 0 || a->bias_node < 0)
        return ox_node_fail(im, pad, "a window attention without %s", a->qkv < 0 ? "its Q/K/V "
                            "projection" : a->proj < 0 ? "its output projection" : "a relative "
                            "position bias");
    if ((a->qkv_b < 0) != (a->proj_b < 0))
        return ox_node_fail(im, pad, "a window attention with a bias on one projection only");
    if (a->heads < 1 || a->D % a->heads)
        return ox_node_fail(im, pad, "%" PRId64 " features do not split into %" PRId64 " heads",
                            a->D, a->heads);
    return 0;
}

/* The roll before the projection: the start of the first Slice of each Concat of two Slices
 * (torch.roll), per axis of the plane (1: rows, 2: columns); 0 where none. */
static int attn_shift(imp_t *im, int r, int qkv, int64_t side_h, int64_t side_w, int64_t *sh,
                      int64_t *sw)
{
    struct swin *s = im->swin;
    *sh = *sw = 0;
    for (int j = s->regions[r].pad_node; j < qkv; j++) {
        const Onnx__NodeProto *n = im->g->node[j];
        if (s->region_of[j] != r || !s->in_fwd[j] || !op_is(n, "Concat") || n->n_input != 2)
            continue;
        int a = in_producer(im, n, 0), b = in_producer(im, n, 1);
        if (a < 0 || b < 0 || !op_is(im->g->node[a], "Slice") || !op_is(im->g->node[b], "Slice"))
            continue;
        int64_t axis;
        if (ox_attr_int(im, n, "axis", 0, &axis)) return -1;
        val_t *st = ox_in_ints(im, im->g->node[a], 1);
        if (!st) return -1;
        if (st->n_values != 1 || (axis != 1 && axis != 2))
            return ox_node_fail(im, n, "a roll of the plane along axis %" PRId64 " of a "
                                "(1,H,W,C) view", axis);
        int64_t side = axis == 1 ? side_h : side_w, v = st->ints[0];
        if (v < 0) v += side;
        *(axis == 1 ? sh : sw) = v;
    }
    return 0;
}

/* A few numbers the exporter computes from the block's input shape (torchvision's scale,
 * (C // heads) ** -0.5, is Pow(Cast(Div(Gather(Shape(x), 3), heads)), -0.5)). */
typedef struct {
    double v[ONNX_RANK_MAX];
    int n;
    bool ints;
} small_t;

/* Value v as a small_t: a constant, the Shape of x (as ONNX sees it, (1,h,w,D)), or Gather,
 * Cast, Div, Mul, Pow, Sqrt of those. false when it is none of them. */
static bool eval_small(imp_t *im, int v, int x, const int64_t *xdims, small_t *out, int depth)
{
    const val_t *c = &im->vals[v];
    if (c->kind == VAL_CONST && c->n_values <= ONNX_RANK_MAX && (c->ints || c->reals)) {
        out->n = (int)c->n_values;
        out->ints = c->ints != NULL;
        for (int i = 0; i < out->n; i++) out->v[i] = c->ints ? (double)c->ints[i] : c->reals[i];
        return true;
    }
    int p = im->swin->producer[v];
    if (p < 0 || depth > 16) return false;
    const Onnx__NodeProto *n = im->g->node[p];
    small_t a = {0}, b = {0};
    if (op_is(n, "Shape")) {
        if (in_val(im, n, 0) != x || n->n_attribute) return false;
        *out = (small_t){.n = 4, .ints = true};
        for (int i = 0; i < 4; i++) out->v[i] = (double)xdims[i];
        return true;
    }
    int v0 = in_val(im, n, 0), v1 = in_val(im, n, 1);
    if (v0 < 0 || !eval_small(im, v0, x, xdims, &a, depth + 1)) return false;
    if (v1 >= 0 && !eval_small(im, v1, x, xdims, &b, depth + 1)) return false;
    int64_t to;
    if (op_is(n, "Gather") && b.n == 1 && b.v[0] >= 0 && b.v[0] < a.n) {
        *out = (small_t){.n = 1, .ints = a.ints, .v = {a.v[(int)b.v[0]]}};
    } else if (op_is(n, "Cast") && a.n == 1 && !ox_attr_int(im, n, "to", 1, &to)) {
        bool ints = to != 1 && to != 10 && to != 11; /* not float, float16, double */
        *out = (small_t){.n = 1, .ints = ints, .v = {ints ? trunc(a.v[0]) : a.v[0]}};
    } else if (op_is(n, "Sqrt") && a.n == 1) {
        *out = (small_t){.n = 1, .v = {sqrt(a.v[0])}};
    } else if (a.n == 1 && b.n == 1 && (op_is(n, "Div") || op_is(n, "Mul") || op_is(n, "Pow"))) {
        bool ints = a.ints && b.ints;
        double r = op_is(n, "Mul") ? a.v[0] * b.v[0] : op_is(n, "Pow") ? pow(a.v[0], b.v[0])
                   : b.v[0] == 0 ? NAN : ints ? trunc(a.v[0] / b.v[0]) : a.v[0] / b.v[0];
        *out = (small_t){.n = 1, .ints = ints, .v = {r}};
    } else {
        return false;
    }
    return true;
}

/* The scores of region r, Q·Kᵀ (its first MatMul of two computed values), must read Q
 * scaled by 1/sqrt(head size), as the layer computes them: a number known from the
 * constants and the block's input shape. */
static int attn_scale(imp_t *im, int r, const attn_t *a, int64_t h, int64_t w)
{
    struct swin *s = im->swin;
    const int64_t xdims[4] = {1, h, w, a->D};
    small_t got = {0};
    int scores = -1;
    for (int j = s->regions[r].pad_node; j < (int)im->g->n_node && scores < 0; j++)
        if (s->region_of[j] == r && s->in_fwd[j] && op_is(im->g->node[j], "MatMul") &&
            j != a->qkv && j != a->proj)
            scores = j;
    double want = 1.0 / sqrt((double)(a->D / a->heads));
    bool found = false;
    for (size_t k = 0; k < 2 && !found && scores >= 0; k++) {
        int m = in_producer(im, im->g->node[scores], k);
        const Onnx__NodeProto *mn = m >= 0 ? im->g->node[m] : NULL;
        for (size_t q = 0; mn && op_is(mn, "Mul") && q < 2 && !found; q++)
            found = in_val(im, mn, q) >= 0 &&
                    eval_small(im, in_val(im, mn, q), s->regions[r].x, xdims, &got, 0) &&
                    got.n == 1;
    }
    const Onnx__NodeProto *at = im->g->node[scores >= 0 ? scores : s->regions[r].pad_node];
    if (!found)
        return ox_node_fail(im, at, "window attention scores that are not Q scaled by a "
                            "constant times Kᵀ");
    if (!(fabs(got.v[0] - want) <= 1e-3 * want))
        return ox_node_fail(im, at, "window attention scaled by %g, not 1/sqrt(head size) = %g",
                            got.v[0], want);
    return 0;
}

static int emit_attn(imp_t *im, int r, const Onnx__NodeProto *on)
{
    struct swin *s = im->swin;
    region_t *rg = &s->regions[r];
    const Onnx__NodeProto *pad = im->g->node[rg->pad_node];
    val_t *x = &im->vals[rg->x];
    int64_t h, w, sh, sw;
    attn_t a;
    if (!ox_seq_plane(im, x, &h, &w) || attn_read(im, r, &a) || attn_scale(im, r, &a, h, w))
        return -1;
    if (a.D != im->layers[x->layer].shape.c)
        return ox_node_fail(im, pad, "a window attention over %d features with a %" PRId64
                            "-feature projection", im->layers[x->layer].shape.c, a.D);
    int64_t ph = (h + a.win - 1) / a.win * a.win, pw = (w + a.win - 1) / a.win * a.win;
    if (attn_shift(im, r, a.qkv, ph, pw, &sh, &sw)) return -1;
    int64_t shift = sh > sw ? sh : sw;
    /* the layer shifts an axis unless the window covers it (torchvision's rule) */
    if (shift >= a.win || (a.win < ph ? shift : 0) != sh || (a.win < pw ? shift : 0) != sw)
        return ox_node_fail(im, pad, "a window attention rolled by %" PRId64 " rows and %" PRId64
                            " columns: windows of %" PRId64 " shift both axes alike, by less "
                            "than a window", sh, sw, a.win);
    if (!ox_in_weight(im, im->g->node[a.qkv_wn], a.qkv_wk, 2, true) ||
        !ox_in_weight(im, im->g->node[a.proj_wn], a.proj_wk, 2, true))
        return -1;
    if (a.qkv_b >= 0 && (!ox_in_weight(im, im->g->node[a.qkv_b], a.qkv_bk, 1, true) ||
                         !ox_in_weight(im, im->g->node[a.proj_b], a.proj_bk, 1, true)))
        return -1;
    /* the table is the layer's parameter; a gather of it folded by the exporter stands for
     * it, and is not counted as itself */
    if (!ox_in_weight(im, im->g->node[a.bias_node], a.bias_k, -1, a.table)) return -1;
    if (!a.table) im->learnable += (2 * a.win - 1) * (2 * a.win - 1) * a.heads;
    int in = x->layer;
    int k = ox_seq_emit(im, pad, "winattn", &in, 1, h * w, a.D); /* named as the module */
    if (k < 0) return -1;
    out_layer_t *l = &im->layers[k];
    snprintf(l->keys, sizeof l->keys, "h=%" PRId64 " w=%" PRId64 " window=%" PRId64
             " shift=%" PRId64 " heads=%" PRId64, h, w, a.win, shift, a.heads);
    l->bias = a.qkv_b >= 0;
    l->plane_h = h, l->plane_w = w;
    l->op = "window attention";
    ox_seq_define_plain(im, on, (size_t)rg->out_k, k);
    return 0;
}

/* The strided Slice chain from the Pad to Concat input k: rows and columns from 0 or 1 in
 * steps of 2, in the order of torchvision's _patch_merging_pad. */
static int merge_check(imp_t *im, int r, const Onnx__NodeProto *cat)
{
    struct swin *s = im->swin;
    static const int64_t dy[4] = {0, 1, 0, 1}, dx[4] = {0, 0, 1, 1};
    if (cat->n_input != 4) return ox_node_fail(im, cat, "a patch merge of %zu parts, not 4",
                                               cat->n_input);
    int64_t axis;
    if (ox_attr_int(im, cat, "axis", 0, &axis)) return -1;
    if (axis != -1 && axis != 3)
        return ox_node_fail(im, cat, "a patch merge joined along axis %" PRId64, axis);
    for (int k = 0; k < 4; k++) {
        int64_t start[3] = {-1, -1, -1};
        int j = in_producer(im, cat, (size_t)k);
        for (int depth = 0; j >= 0 && j != s->regions[r].pad_node && depth < 4; depth++) {
            const Onnx__NodeProto *n = im->g->node[j];
            val_t *st = op_is(n, "Slice") ? ox_in_ints(im, n, 1) : NULL;
            val_t *ax = st ? ox_in_ints(im, n, 3) : NULL, *sp = ax ? ox_in_ints(im, n, 4) : NULL;
            if (!sp || st->n_values != 1 || ax->n_values != 1 || sp->n_values != 1 ||
                sp->ints[0] != 2 || ax->ints[0] < 1 || ax->ints[0] > 2)
                return ox_node_fail(im, n, "a patch merge reads the plane in steps of 2 along "
                                    "its rows and columns");
            start[ax->ints[0]] = st->ints[0];
            j = in_producer(im, n, 0);
        }
        if (start[1] != dy[k] || start[2] != dx[k])
            return ox_node_fail(im, cat, "part %d of a patch merge starts at row %" PRId64
                                " column %" PRId64 ", not %" PRId64 ", %" PRId64 " (torchvision's "
                                "order)", k, start[1], start[2], dy[k], dx[k]);
    }
    return 0;
}

static int emit_merge(imp_t *im, int r, const Onnx__NodeProto *on)
{
    struct swin *s = im->swin;
    region_t *rg = &s->regions[r];
    val_t *x = &im->vals[rg->x];
    int64_t h, w;
    if (!ox_seq_plane(im, x, &h, &w) || merge_check(im, r, on)) return -1;
    int in = x->layer;
    int64_t h2 = (h + 1) / 2, w2 = (w + 1) / 2;
    int k = ox_seq_emit(im, im->g->node[rg->pad_node], "patchmerge", &in, 1, h2 * w2,
                        4 * (int64_t)im->layers[in].shape.c);
    if (k < 0) return -1;
    out_layer_t *l = &im->layers[k];
    snprintf(l->keys, sizeof l->keys, "h=%" PRId64 " w=%" PRId64, h, w);
    l->plane_h = h2, l->plane_w = w2;
    l->op = "patch merge";
    ox_seq_define_plain(im, on, (size_t)rg->out_k, k);
    return 0;
}

int ox_swin_node(imp_t *im, size_t i)
{
    struct swin *s = im->swin;
    if (!s || s->mark[i] == MARK_NONE) return 0;
    if (s->mark[i] == MARK_SKIP) return 1;
    int r = s->region_of[i];
    const Onnx__NodeProto *n = im->g->node[i];
    int rc = s->regions[r].kind == KIND_ATTN ? emit_attn(im, r, n) : emit_merge(im, r, n);
    return rc ? -1 : 1;
}
