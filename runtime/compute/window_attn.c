/* window_attn: see window_attn.h. winattn follows torchvision's shifted_window_attention
 * (Swin Transformer, Liu et al. 2021): the plane is padded with zeros on the bottom and
 * right to whole windows, rolled up and left by the shift (an axis whose padded side is
 * no longer than a window is not shifted), cut into windows of N = window^2 positions
 * (kernels_window.h); per window and head P = softmax(Q K^T / sqrt(dh) + B + M) with B the
 * relative position bias gathered from the table and M -100 between positions of different
 * regions of the rolled plane (shifted windows only), O = P V; the output projection,
 * rolled back, cropped.
 *
 * This file sequences the layer, the same on every backend: the projections are GEMMs
 * (compute_sgemm) over all the windows' positions at once; the rest (the partition and its
 * reverse, the attention of the small windows, N = 49 in Swin-T) are the backend's layer
 * operations (compute.h), so the CPU and a GPU run the same algorithm on their own buffers.
 * A padded position takes part in the attention (its Q, K, V are the biases), as in
 * PyTorch, and its output is dropped. The scratch of a pass (one sample's projected windows
 * and gradients) is the caller's, in the backend's memory (winattn_scratch_count). */
#include "runtime/compute/window_attn.h"

#include <stdbool.h>

static ke_swin_t geom_of(const layer_t *l)
{
    ke_swin_t g = {.H = l->image_h, .W = l->image_w, .win = l->window, .heads = l->heads,
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

int64_t winattn_aux_count(const layer_t *l)
{
    ke_swin_t g = geom_of(l);
    return g.P * 5 * g.D + (int64_t)g.nw * g.heads * g.N * g.N;
}

/* the backward's dY, dO, dQKV and dXw (P x D, P x D, P x 3D, P x D); the forward's Y (P x D)
 * fits in it */
int64_t winattn_scratch_count(const layer_t *l)
{
    ke_swin_t g = geom_of(l);
    return 6 * g.P * g.D;
}

void winattn_forward(compute_t *c, const layer_t *l, int batch, const float *x, const float *w,
                     const float *b, float *aux, float *scratch, float *out)
{
    const compute_layer_ops_t *L = c->layers;
    ke_swin_t g = geom_of(l);
    int D = g.D;
    int64_t S = (int64_t)g.H * g.W, per = winattn_aux_count(l);
    const float *wproj = w + (int64_t)3 * D * D, *table = wproj + (int64_t)D * D;
    float *y = scratch;
    for (int bi = 0; bi < batch; bi++) {
        float *xw = aux + bi * per, *qkv = xw + g.P * D, *o = qkv + g.P * 3 * D;
        float *pr = o + g.P * D;
        L->win_partition(c->ctx, &g, x + bi * S * D, xw);
        compute_sgemm(c, false, true, (int)g.P, 3 * D, D, 1.0f, xw, D, w, D, 0.0f, qkv, 3 * D);
        if (b) L->add_rows(c->ctx, g.P, 3 * D, qkv, 3 * D, b, 0);
        L->win_attn_forward(c->ctx, &g, qkv, table, pr, o);
        compute_sgemm(c, false, true, (int)g.P, D, D, 1.0f, o, D, wproj, D, 0.0f, y, D);
        if (b) L->add_rows(c->ctx, g.P, D, y, D, b + 3 * D, 0);
        L->win_reverse(c->ctx, &g, y, out + bi * S * D, false);
    }
}

void winattn_backward(compute_t *c, const layer_t *l, int batch, const float *w, const float *b,
                      const float *aux, const float *dout, float *scratch, float *dw, float *db,
                      float *dx)
{
    const compute_layer_ops_t *L = c->layers;
    ke_swin_t g = geom_of(l);
    int D = g.D;
    int64_t S = (int64_t)g.H * g.W, per = winattn_aux_count(l), PD = g.P * D;
    const float *wproj = w + (int64_t)3 * D * D;
    float *dwproj = dw + (int64_t)3 * D * D, *dtable = dwproj + (int64_t)D * D;
    c->ops->zero(c->ctx, dw, (size_t)l->weights * sizeof *dw);
    if (b) c->ops->zero(c->ctx, db, (size_t)l->biases * sizeof *db);
    /* scratch: dY and dXw (P x D each), dO (P x D), dQKV (P x 3D) */
    float *dyw = scratch;
    float *dO = dyw + PD, *dqkv = dO + PD, *dxw = dqkv + 3 * PD;
    for (int bi = 0; bi < batch; bi++) {
        const float *xw = aux + bi * per, *qkv = xw + PD, *o = qkv + 3 * PD, *pr = o + PD;
        L->win_partition(c->ctx, &g, dout + bi * S * D, dyw);
        compute_sgemm(c, true, false, D, D, (int)g.P, 1.0f, dyw, D, o, D, 1.0f, dwproj, D);
        if (b) L->sum_rows_add(c->ctx, g.P, D, dyw, D, db + 3 * D);
        compute_sgemm(c, false, false, (int)g.P, D, D, 1.0f, dyw, D, wproj, D, 0.0f, dO, D);
        L->win_attn_backward(c->ctx, &g, qkv, pr, dO, dqkv, dtable);
        compute_sgemm(c, true, false, 3 * D, D, (int)g.P, 1.0f, dqkv, 3 * D, xw, D, 1.0f, dw, D);
        if (b) L->sum_rows_add(c->ctx, g.P, 3 * D, dqkv, 3 * D, db);
        if (!dx) continue;
        compute_sgemm(c, false, false, (int)g.P, D, 3 * D, 1.0f, dqkv, 3 * D, w, D, 0.0f, dxw, D);
        L->win_reverse(c->ctx, &g, dxw, dx + bi * S * D, true);
    }
}

void patchmerge_forward(compute_t *c, const layer_t *l, int batch, int dim, const float *x,
                        float *out)
{
    c->layers->patch_merge(c->ctx, batch, l->image_h, l->image_w, dim, x, out);
}

void patchmerge_backward(compute_t *c, const layer_t *l, int batch, int dim, const float *dout,
                         float *dx)
{
    c->layers->patch_merge_grad(c->ctx, batch, l->image_h, l->image_w, dim, dout, dx);
}
