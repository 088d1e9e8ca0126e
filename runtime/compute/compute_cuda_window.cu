/* compute_cuda_window: the CUDA backend's operations for the Swin layers (compute.h's
 * win_* and patch_merge*; runtime/compute/window_attn.c sequences them around cuBLAS GEMMs).
 * The windows' geometry, the softmax row and its backward are kernels_window.h's bodies, the
 * same code the CPU backend runs.
 *
 * Threads: one per output element, each summing its terms in a fixed order (no atomics),
 * except the softmax rows (one thread per row). The CPU scatters the attention's gradients
 * (dV, dK, the bias table) as it walks the rows; here each element of them gathers its terms
 * instead, so the sums differ from the CPU's by float rounding only. The partition's reverse
 * and patch merging's backward write each input position from exactly one window position,
 * so they need no atomics either.
 */
#include "runtime/compute/compute_cuda.h"
#include "runtime/compute/kernels_window.h"

/* ---- sums, partition ------------------------------------------------------------------------ */

/* one thread per column, rows added in order from 0 (the CPU's order) */
__global__ void k_sum_rows_add(int64_t rows, int64_t m, const float *x, int64_t stride, float *y)
{
    GRID_STRIDE(j, m)
    {
        float acc = y[j];
        for (int64_t r = 0; r < rows; r++) acc += x[r * stride + j];
        y[j] = acc;
    }
}

/* per element of xw (P, D) */
__global__ void k_win_partition(ke_swin_t g, const float *x, float *xw)
{
    GRID_STRIDE(i, g.P * g.D)
    {
        int64_t s = ke_swin_src(&g, i / g.D);
        xw[i] = s >= 0 ? x[s * g.D + i % g.D] : 0.0f;
    }
}

/* per element of yw (P, D): the one input element it lands on, unless padding */
__global__ void k_win_reverse(ke_swin_t g, const float *yw, float *x, bool add)
{
    GRID_STRIDE(i, g.P * g.D)
    {
        int64_t s = ke_swin_src(&g, i / g.D);
        if (s < 0) continue;
        float *o = &x[s * g.D + i % g.D];
        *o = add ? *o + yw[i] : yw[i];
    }
}

/* ---- attention forward ---------------------------------------------------------------------- */

/* Element (wi, h, i, j) of p (nw, heads, N, N): the score before the softmax. */
__global__ void k_win_scores(ke_swin_t g, const float *qkv, const float *table, float scale,
                             float *p)
{
    int N = g.N, D = g.D, dh = g.dh;
    bool masked = g.sh || g.sw;
    GRID_STRIDE(at, (int64_t)g.nw * g.heads * N * N)
    {
        int j = (int)(at % N), i = (int)(at / N % N), h = (int)(at / ((int64_t)N * N) % g.heads);
        int64_t wi = at / ((int64_t)N * N * g.heads);
        const float *q = qkv + (wi * N + i) * 3 * D + h * dh;
        const float *k = qkv + (wi * N + j) * 3 * D + D + h * dh;
        float s = 0;
        for (int e = 0; e < dh; e++) s += q[e] * k[e];
        s = s * scale + table[(int64_t)ke_swin_rel(&g, i, j) * g.heads + h];
        if (masked && ke_swin_label(&g, wi * N + i) != ke_swin_label(&g, wi * N + j))
            s -= 100.0f;
        p[at] = s;
    }
}

/* one thread per row of N scores */
__global__ void k_win_softmax(int64_t rows, int n, float *p)
{
    GRID_STRIDE(r, rows) ke_swin_softmax_row(p + r * n, n);
}

/* Element (t, h*dh + e) of o (P, D): row t's probabilities times V's column. */
__global__ void k_win_pv(ke_swin_t g, const float *qkv, const float *p, float *o)
{
    int N = g.N, D = g.D, dh = g.dh;
    GRID_STRIDE(at, g.P * D)
    {
        int64_t t = at / D, wi = t / N;
        int i = (int)(t % N), c = (int)(at % D), h = c / dh;
        const float *pi = p + ((wi * g.heads + h) * N + i) * N;
        const float *v = qkv + wi * N * 3 * D + 2 * D + c;
        float acc = 0;
        for (int j = 0; j < N; j++) acc += pi[j] * v[(int64_t)j * 3 * D];
        o[at] = acc;
    }
}

/* ---- attention backward --------------------------------------------------------------------- */

/* Element (wi, h, i, j) of ds: dO row i times V row j, in head h. */
__global__ void k_win_dp(ke_swin_t g, const float *qkv, const float *dO, float *ds)
{
    int N = g.N, D = g.D, dh = g.dh;
    GRID_STRIDE(at, (int64_t)g.nw * g.heads * N * N)
    {
        int j = (int)(at % N), i = (int)(at / N % N), h = (int)(at / ((int64_t)N * N) % g.heads);
        int64_t wi = at / ((int64_t)N * N * g.heads);
        const float *doi = dO + (wi * N + i) * D + h * dh;
        const float *v = qkv + (wi * N + j) * 3 * D + 2 * D + h * dh;
        float s = 0;
        for (int e = 0; e < dh; e++) s += doi[e] * v[e];
        ds[at] = s;
    }
}

/* one thread per row: ds becomes the scores' gradient */
__global__ void k_win_dsoftmax(int64_t rows, int n, const float *p, float *ds)
{
    GRID_STRIDE(r, rows) ke_swin_dsoftmax_row(p + r * n, ds + r * n, n);
}

/* Element (t, c) of dqkv (P, 3D): dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO, each
 * summed over the window's positions in order. */
__global__ void k_win_dqkv(ke_swin_t g, const float *qkv, const float *p, const float *ds,
                           const float *dO, float scale, float *dqkv)
{
    int N = g.N, D = g.D, dh = g.dh;
    GRID_STRIDE(at, g.P * 3 * D)
    {
        int64_t t = at / (3 * D), wi = t / N;
        int pos = (int)(t % N), c = (int)(at % (3 * D)), part = c / D, h = c % D / dh;
        const float *pw = p + wi * g.heads * N * N + (int64_t)h * N * N;
        const float *dsw = ds + wi * g.heads * N * N + (int64_t)h * N * N;
        const float *rows = qkv + wi * N * 3 * D; /* the window's first row */
        float acc = 0;
        if (part == 0) /* dQ[pos] = scale sum_j dS[pos, j] K[j] */
            for (int j = 0; j < N; j++)
                acc += scale * dsw[(int64_t)pos * N + j] * rows[(int64_t)j * 3 * D + D + c];
        else if (part == 1) /* dK[pos] = scale sum_i dS[i, pos] Q[i] */
            for (int i = 0; i < N; i++)
                acc += scale * dsw[(int64_t)i * N + pos] * rows[(int64_t)i * 3 * D + c - D];
        else /* dV[pos] = sum_i P[i, pos] dO[i] */
            for (int i = 0; i < N; i++)
                acc += pw[(int64_t)i * N + pos] * dO[(wi * N + i) * D + c - 2 * D];
        dqkv[at] = acc;
    }
}

/* Element (r, h) of the table ((2 win - 1)^2, heads): the scores' gradients of every pair
 * (i, j) of every window whose relative position is r, added to dtable. */
__global__ void k_win_dtable(ke_swin_t g, const float *ds, float *dtable)
{
    int N = g.N, span = 2 * g.win - 1;
    GRID_STRIDE(at, (int64_t)span * span * g.heads)
    {
        int h = (int)(at % g.heads), r = (int)(at / g.heads);
        int oy = r / span - (g.win - 1), ox = r % span - (g.win - 1); /* i - j per axis */
        float acc = 0;
        for (int64_t wi = 0; wi < g.nw; wi++)
            for (int i = 0; i < N; i++) {
                int jy = i / g.win - oy, jx = i % g.win - ox;
                if (jy < 0 || jy >= g.win || jx < 0 || jx >= g.win) continue;
                acc += ds[((wi * g.heads + h) * N + i) * N + jy * g.win + jx];
            }
        dtable[at] += acc;
    }
}

/* ---- patch merging -------------------------------------------------------------------------- */

/* per element of y (batch, H2*W2, 4 dim) */
__global__ void k_patch_merge(int64_t n, int H, int W, int dim, const float *x, float *y)
{
    int H2 = (H + 1) / 2, W2 = (W + 1) / 2;
    GRID_STRIDE(at, n)
    {
        int e = (int)(at % dim), k = (int)(at / dim % 4);
        int64_t cell = at / (4 * dim), bi = cell / ((int64_t)H2 * W2);
        int y2 = (int)(cell / W2 % H2), x2 = (int)(cell % W2);
        int yy = 2 * y2 + ke_patch_dy(k), xx = 2 * x2 + ke_patch_dx(k);
        y[at] = yy < H && xx < W ? x[((bi * H + yy) * W + xx) * dim + e] : 0.0f;
    }
}

/* per element of dx (batch, H*W, dim): the one merged part it went to */
__global__ void k_patch_merge_grad(int64_t n, int H, int W, int dim, const float *dy, float *dx)
{
    int H2 = (H + 1) / 2, W2 = (W + 1) / 2;
    GRID_STRIDE(at, n)
    {
        int e = (int)(at % dim);
        int64_t pos = at / dim, bi = pos / ((int64_t)H * W);
        int yy = (int)(pos / W % H), xx = (int)(pos % W);
        int k = yy % 2 + 2 * (xx % 2); /* ke_patch_dy(k) = yy % 2, ke_patch_dx(k) = xx % 2 */
        dx[at] += dy[(((bi * H2 + yy / 2) * W2 + xx / 2) * 4 + k) * dim + e];
    }
}

/* ---- the operations ------------------------------------------------------------------------- */

extern "C" void cu_sum_rows_add(void *ctx, int64_t rows, int64_t m, const float *x,
                                int64_t stride, float *y)
{
    LAUNCH(k_sum_rows_add, m, rows, m, x, stride, y);
}

extern "C" void cu_win_partition(void *ctx, const ke_swin_t *g, const float *x, float *xw)
{
    LAUNCH(k_win_partition, g->P * g->D, *g, x, xw);
}

extern "C" void cu_win_reverse(void *ctx, const ke_swin_t *g, const float *yw, float *x,
                               bool add)
{
    LAUNCH(k_win_reverse, g->P * g->D, *g, yw, x, add);
}

extern "C" void cu_win_attn_forward(void *ctx, const ke_swin_t *g, const float *qkv,
                                    const float *table, float *p, float *o)
{
    float scale = (float)(1.0 / sqrt((double)g->dh));
    int64_t rows = (int64_t)g->nw * g->heads * g->N;
    LAUNCH(k_win_scores, rows * g->N, *g, qkv, table, scale, p);
    LAUNCH(k_win_softmax, rows, rows, g->N, p);
    LAUNCH(k_win_pv, g->P * g->D, *g, qkv, p, o);
}

/* The scores' gradients of the sample go to the context's scratch. */
extern "C" void cu_win_attn_backward(void *ctx, const ke_swin_t *g, const float *qkv,
                                     const float *p, const float *dO, float *dqkv,
                                     float *dtable)
{
    float scale = (float)(1.0 / sqrt((double)g->dh));
    int64_t rows = (int64_t)g->nw * g->heads * g->N, span = 2 * g->win - 1;
    if (rows == 0) return;
    float *ds = (float *)cuda_scratch(CTX, (size_t)(rows * g->N) * sizeof(float));
    LAUNCH(k_win_dp, rows * g->N, *g, qkv, dO, ds);
    LAUNCH(k_win_dsoftmax, rows, rows, g->N, p, ds);
    LAUNCH(k_win_dqkv, g->P * 3 * g->D, *g, qkv, p, ds, dO, scale, dqkv);
    LAUNCH(k_win_dtable, span * span * g->heads, *g, ds, dtable);
}

extern "C" void cu_patch_merge(void *ctx, int batch, int h, int w, int dim, const float *x,
                               float *y)
{
    int64_t n = (int64_t)batch * ((h + 1) / 2) * ((w + 1) / 2) * 4 * dim;
    LAUNCH(k_patch_merge, n, n, h, w, dim, x, y);
}

extern "C" void cu_patch_merge_grad(void *ctx, int batch, int h, int w, int dim,
                                    const float *dy, float *dx)
{
    int64_t n = (int64_t)batch * h * w * dim;
    LAUNCH(k_patch_merge_grad, n, n, h, w, dim, dy, dx);
}
