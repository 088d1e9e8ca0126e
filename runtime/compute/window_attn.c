/* window_attn: see window_attn.h. winattn follows torchvision's shifted_window_attention
 * (Swin Transformer, Liu et al. 2021): the plane is padded with zeros on the bottom and
 * right to whole windows, rolled up and left by the shift (an axis whose padded side is
 * no longer than a window is not shifted), cut into windows of N = window^2 positions; per
 * window and head P = softmax(Q K^T / sqrt(dh) + B + M) with B the relative position bias
 * gathered from the table and M -100 between positions of different regions of the rolled
 * plane (shifted windows only), O = P V; the output projection, rolled back, cropped.
 *
 * The projections are GEMMs over all the windows' positions at once; the attention of one
 * window is small (N = 49 in Swin-T) and runs as plain loops. A padded position takes part
 * in the attention (its Q, K, V are the biases), as in PyTorch, and its output is dropped. */
#include "runtime/compute/window_attn.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

/* The windows of a winattn layer. */
typedef struct {
    int H, W, win, N, heads, D, dh;
    int pH, pW, sh, sw; /* padded plane; shifts in effect */
    int nw;             /* windows */
    int64_t P;          /* positions of the padded plane, nw * N */
} geom_t;

static geom_t geom_of(const layer_t *l)
{
    geom_t g = {.H = l->image_h, .W = l->image_w, .win = l->window, .heads = l->heads,
                .D = l->out};
    g.N = g.win * g.win;
    g.dh = g.D / g.heads;
    g.pH = (g.H + g.win - 1) / g.win * g.win;
    g.pW = (g.W + g.win - 1) / g.win * g.win;
    g.sh = g.win >= g.pH ? 0 : l->shift;
    g.sw = g.win >= g.pW ? 0 : l->shift;
    g.nw = (g.pH / g.win) * (g.pW / g.win);
    g.P = (int64_t)g.nw * g.N;
    return g;
}

/* Position t of the windows (window t / N, row-major within it) on the rolled padded plane. */
static void token_at(const geom_t *g, int64_t t, int *py, int *px)
{
    int wi = (int)(t / g->N), i = (int)(t % g->N), per_row = g->pW / g->win;
    *py = wi / per_row * g->win + i / g->win;
    *px = wi % per_row * g->win + i % g->win;
}

/* Row of the input that position t of the windows holds, or -1 for padding. */
static int64_t token_src(const geom_t *g, int64_t t)
{
    int py, px;
    token_at(g, t, &py, &px);
    int sy = (py + g->sh) % g->pH, sx = (px + g->sw) % g->pW;
    return sy < g->H && sx < g->W ? (int64_t)sy * g->W + sx : -1;
}

/* The three regions of a shifted axis: those that were neighbours before the roll. */
static int band(int p, int side, int win, int shift)
{
    return shift == 0 ? 0 : p < side - win ? 0 : p < side - shift ? 1 : 2;
}

/* Region labels of every position of the windows; NULL when nothing is shifted. */
static int *labels_new(const geom_t *g)
{
    if (!g->sh && !g->sw) return NULL;
    int *lab = xmalloc((size_t)g->P * sizeof *lab);
    for (int64_t t = 0; t < g->P; t++) {
        int py, px;
        token_at(g, t, &py, &px);
        lab[t] = 3 * band(py, g->pH, g->win, g->sh) + band(px, g->pW, g->win, g->sw);
    }
    return lab;
}

/* Row of the table for positions i and j of a window (torchvision's relative_position_index). */
static int rel_index(const geom_t *g, int i, int j)
{
    int dy = i / g->win - j / g->win + g->win - 1, dx = i % g->win - j % g->win + g->win - 1;
    return dy * (2 * g->win - 1) + dx;
}

int64_t winattn_aux_count(const layer_t *l)
{
    geom_t g = geom_of(l);
    return g.P * 5 * g.D + (int64_t)g.nw * g.heads * g.N * g.N;
}

/* Per window and head: the probabilities into pr (nw x heads x N x N), O into o (P x D). */
static void heads_forward(const geom_t *g, const float *qkv, const float *table, const int *lab,
                          float *pr, float *o)
{
    int N = g->N, D = g->D, dh = g->dh;
    float scale = (float)(1.0 / sqrt((double)dh));
    for (int wi = 0; wi < g->nw; wi++)
        for (int h = 0; h < g->heads; h++) {
            float *p = pr + ((int64_t)wi * g->heads + h) * N * N;
            const float *base = qkv + (int64_t)wi * N * 3 * D + h * dh;
            for (int i = 0; i < N; i++) {
                const float *q = base + (int64_t)i * 3 * D;
                float *pi = p + (int64_t)i * N, mx = -FLT_MAX, z = 0;
                for (int j = 0; j < N; j++) {
                    const float *k = base + (int64_t)j * 3 * D + D;
                    float s = 0;
                    for (int e = 0; e < dh; e++) s += q[e] * k[e];
                    s = s * scale + table[(int64_t)rel_index(g, i, j) * g->heads + h];
                    if (lab && lab[(int64_t)wi * N + i] != lab[(int64_t)wi * N + j]) s -= 100.0f;
                    pi[j] = s;
                    mx = s > mx ? s : mx;
                }
                for (int j = 0; j < N; j++) z += (pi[j] = expf(pi[j] - mx));
                for (int j = 0; j < N; j++) pi[j] /= z;
                float *oi = o + ((int64_t)wi * N + i) * D + h * dh;
                memset(oi, 0, (size_t)dh * sizeof *oi);
                for (int j = 0; j < N; j++) {
                    const float *v = base + (int64_t)j * 3 * D + 2 * D;
                    for (int e = 0; e < dh; e++) oi[e] += pi[j] * v[e];
                }
            }
        }
}

/* y (rows x cols) += the bias b per row */
static void add_rows(int64_t rows, int cols, const float *b, float *y)
{
    for (int64_t r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) y[r * cols + k] += b[k];
}

/* db += the sum of the rows of y */
static void sum_rows(int64_t rows, int cols, const float *y, float *db)
{
    for (int64_t r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) db[k] += y[r * cols + k];
}

void winattn_forward(compute_t *c, const layer_t *l, int batch, const float *x, const float *w,
                     const float *b, float *aux, float *out)
{
    geom_t g = geom_of(l);
    int D = g.D;
    int64_t S = (int64_t)g.H * g.W, per = winattn_aux_count(l);
    const float *wproj = w + (int64_t)3 * D * D, *table = wproj + (int64_t)D * D;
    int *lab = labels_new(&g);
    float *y = xmalloc((size_t)(g.P * D) * sizeof *y);
    for (int bi = 0; bi < batch; bi++) {
        const float *xb = x + bi * S * D;
        float *xw = aux + bi * per, *qkv = xw + g.P * D, *o = qkv + g.P * 3 * D;
        float *pr = o + g.P * D, *ob = out + bi * S * D;
        for (int64_t t = 0; t < g.P; t++) {
            int64_t s = token_src(&g, t);
            if (s >= 0) memcpy(xw + t * D, xb + s * D, (size_t)D * sizeof *xw);
            else memset(xw + t * D, 0, (size_t)D * sizeof *xw);
        }
        compute_sgemm(c, false, true, (int)g.P, 3 * D, D, 1.0f, xw, D, w, D, 0.0f, qkv, 3 * D);
        if (b) add_rows(g.P, 3 * D, b, qkv);
        heads_forward(&g, qkv, table, lab, pr, o);
        compute_sgemm(c, false, true, (int)g.P, D, D, 1.0f, o, D, wproj, D, 0.0f, y, D);
        if (b) add_rows(g.P, D, b + 3 * D, y);
        for (int64_t t = 0; t < g.P; t++) {
            int64_t s = token_src(&g, t);
            if (s >= 0) memcpy(ob + s * D, y + t * D, (size_t)D * sizeof *y);
        }
    }
    free(y);
    free(lab);
}

/* dqkv (zeroed by the caller) and dtable += the gradients through the attention of every
 * window and head, from dO (P x D). */
static void heads_backward(const geom_t *g, const float *qkv, const float *pr, const float *dO,
                           float *dqkv, float *dtable, float *ds)
{
    int N = g->N, D = g->D, dh = g->dh;
    float scale = (float)(1.0 / sqrt((double)dh));
    for (int wi = 0; wi < g->nw; wi++)
        for (int h = 0; h < g->heads; h++) {
            const float *p = pr + ((int64_t)wi * g->heads + h) * N * N;
            int64_t off = (int64_t)wi * N * 3 * D + h * dh;
            const float *base = qkv + off;
            float *dbase = dqkv + off;
            for (int i = 0; i < N; i++) {
                const float *pi = p + (int64_t)i * N, *q = base + (int64_t)i * 3 * D;
                const float *doi = dO + ((int64_t)wi * N + i) * D + h * dh;
                float r = 0;
                for (int j = 0; j < N; j++) {
                    const float *v = base + (int64_t)j * 3 * D + 2 * D;
                    float *dv = dbase + (int64_t)j * 3 * D + 2 * D, dp = 0;
                    for (int e = 0; e < dh; e++) {
                        dp += doi[e] * v[e];
                        dv[e] += pi[j] * doi[e];
                    }
                    ds[j] = dp;
                    r += pi[j] * dp;
                }
                float *dq = dbase + (int64_t)i * 3 * D;
                for (int j = 0; j < N; j++) {
                    float dsj = pi[j] * (ds[j] - r);
                    dtable[(int64_t)rel_index(g, i, j) * g->heads + h] += dsj;
                    const float *k = base + (int64_t)j * 3 * D + D;
                    float *dk = dbase + (int64_t)j * 3 * D + D;
                    for (int e = 0; e < dh; e++) {
                        dq[e] += scale * dsj * k[e];
                        dk[e] += scale * dsj * q[e];
                    }
                }
            }
        }
}

void winattn_backward(compute_t *c, const layer_t *l, int batch, const float *w, const float *b,
                      const float *aux, const float *dout, float *dw, float *db, float *dx)
{
    geom_t g = geom_of(l);
    int D = g.D;
    int64_t S = (int64_t)g.H * g.W, per = winattn_aux_count(l), PD = g.P * D;
    const float *wproj = w + (int64_t)3 * D * D;
    float *dwproj = dw + (int64_t)3 * D * D, *dtable = dwproj + (int64_t)D * D;
    memset(dw, 0, (size_t)l->weights * sizeof *dw);
    if (b) memset(db, 0, (size_t)l->biases * sizeof *db);
    /* scratch: dY and dXw (P x D each), dO (P x D), dQKV (P x 3D), a row of N */
    float *dyw = xmalloc((size_t)(6 * PD + g.N) * sizeof *dyw);
    float *dO = dyw + PD, *dqkv = dO + PD, *dxw = dqkv + 3 * PD, *ds = dxw + PD;
    for (int bi = 0; bi < batch; bi++) {
        const float *xw = aux + bi * per, *qkv = xw + PD, *o = qkv + 3 * PD, *pr = o + PD;
        const float *dob = dout + bi * S * D;
        for (int64_t t = 0; t < g.P; t++) {
            int64_t s = token_src(&g, t);
            if (s >= 0) memcpy(dyw + t * D, dob + s * D, (size_t)D * sizeof *dyw);
            else memset(dyw + t * D, 0, (size_t)D * sizeof *dyw);
        }
        compute_sgemm(c, true, false, D, D, (int)g.P, 1.0f, dyw, D, o, D, 1.0f, dwproj, D);
        if (b) sum_rows(g.P, D, dyw, db + 3 * D);
        compute_sgemm(c, false, false, (int)g.P, D, D, 1.0f, dyw, D, wproj, D, 0.0f, dO, D);
        memset(dqkv, 0, (size_t)(3 * PD) * sizeof *dqkv);
        heads_backward(&g, qkv, pr, dO, dqkv, dtable, ds);
        compute_sgemm(c, true, false, 3 * D, D, (int)g.P, 1.0f, dqkv, 3 * D, xw, D, 1.0f, dw, D);
        if (b) sum_rows(g.P, 3 * D, dqkv, db);
        if (!dx) continue;
        compute_sgemm(c, false, false, (int)g.P, D, 3 * D, 1.0f, dqkv, 3 * D, w, D, 0.0f, dxw, D);
        float *dxb = dx + bi * S * D;
        for (int64_t t = 0; t < g.P; t++) {
            int64_t s = token_src(&g, t);
            if (s < 0) continue;
            for (int k = 0; k < D; k++) dxb[s * D + k] += dxw[t * D + k];
        }
    }
    free(dyw);
}

/* patchmerge's four neighbours, in the order of torchvision's _patch_merging_pad */
static const int s_dy[4] = {0, 1, 0, 1}, s_dx[4] = {0, 0, 1, 1};

/* Forward: out = the merged x (padding zeros). Backward: dx += dout put back in place (the
 * padding's gradient dropped). The same walk over the output's parts. */
static void patchmerge_walk(const layer_t *l, int batch, int dim, bool backward,
                            const float *from, float *to)
{
    int H = l->image_h, W = l->image_w, H2 = (H + 1) / 2, W2 = (W + 1) / 2;
    for (int bi = 0; bi < batch; bi++)
        for (int y2 = 0; y2 < H2; y2++)
            for (int x2 = 0; x2 < W2; x2++)
                for (int k = 0; k < 4; k++) {
                    int y = 2 * y2 + s_dy[k], x = 2 * x2 + s_dx[k];
                    int64_t part = (((int64_t)bi * H2 + y2) * W2 + x2) * 4 * dim + k * dim;
                    int64_t pos = (((int64_t)bi * H + y) * W + x) * dim;
                    bool inside = y < H && x < W;
                    if (backward && inside)
                        for (int e = 0; e < dim; e++) to[pos + e] += from[part + e];
                    else if (!backward && inside)
                        memcpy(to + part, from + pos, (size_t)dim * sizeof *to);
                    else if (!backward)
                        memset(to + part, 0, (size_t)dim * sizeof *to);
                }
}

void patchmerge_forward(const layer_t *l, int batch, int dim, const float *x, float *out)
{
    patchmerge_walk(l, batch, dim, false, x, out);
}

void patchmerge_backward(const layer_t *l, int batch, int dim, const float *dout, float *dx)
{
    patchmerge_walk(l, batch, dim, true, dout, dx);
}
