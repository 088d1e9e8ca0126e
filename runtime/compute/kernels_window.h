/* kernels_window: the geometry of the Swin layers' windows (window_attn.h), written once and
 * called by both backends (the CPU loops of compute_cpu_layers.c and the CUDA kernels of
 * compute_cuda_window.cu), so that both cut the plane into the same windows, give the same
 * positions the same relative position bias and mask the same pairs.
 *
 * The windows follow torchvision's shifted_window_attention: the plane is padded with zeros
 * on the bottom and right to whole windows, rolled up and left by the shift (an axis whose
 * padded side is no longer than a window is not shifted), cut into windows of N = window^2
 * positions, numbered row-major; position t of the windows is window t / N, row-major
 * within it. As kernels_elementwise.h: static inline, __host__ __device__ under nvcc, no
 * state, no allocation.
 */
#ifndef POSEIDON_KERNELS_WINDOW_H
#define POSEIDON_KERNELS_WINDOW_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "runtime/compute/kernels_elementwise.h"

/* The windows of one winattn layer. */
typedef struct {
    int H, W, win, N, heads, D, dh;
    int pH, pW, sh, sw; /* padded plane; shifts in effect */
    int nw;             /* windows */
    int64_t P;          /* positions of the padded plane, nw * N */
} ke_swin_t;

/* Position t of the windows on the rolled padded plane. */
KE_FN void ke_swin_at(const ke_swin_t *g, int64_t t, int *py, int *px)
{
    int wi = (int)(t / g->N), i = (int)(t % g->N), per_row = g->pW / g->win;
    *py = wi / per_row * g->win + i / g->win;
    *px = wi % per_row * g->win + i % g->win;
}

/* Row of the input that position t of the windows holds, or -1 for padding. */
KE_FN int64_t ke_swin_src(const ke_swin_t *g, int64_t t)
{
    int py, px;
    ke_swin_at(g, t, &py, &px);
    int sy = (py + g->sh) % g->pH, sx = (px + g->sw) % g->pW;
    return sy < g->H && sx < g->W ? (int64_t)sy * g->W + sx : -1;
}

/* The three regions of a shifted axis: those that were neighbours before the roll. */
KE_FN int ke_swin_band(int p, int side, int win, int shift)
{
    return shift == 0 ? 0 : p < side - win ? 0 : p < side - shift ? 1 : 2;
}

/* Region label of position t of the windows: two positions of one window with different
 * labels are masked (-100) from each other; 0 everywhere when nothing is shifted. */
KE_FN int ke_swin_label(const ke_swin_t *g, int64_t t)
{
    if (!g->sh && !g->sw) return 0;
    int py, px;
    ke_swin_at(g, t, &py, &px);
    return 3 * ke_swin_band(py, g->pH, g->win, g->sh) + ke_swin_band(px, g->pW, g->win, g->sw);
}

/* Row of the bias table for positions i and j of a window (torchvision's
 * relative_position_index). */
KE_FN int ke_swin_rel(const ke_swin_t *g, int i, int j)
{
    int dy = i / g->win - j / g->win + g->win - 1, dx = i % g->win - j % g->win + g->win - 1;
    return dy * (2 * g->win - 1) + dx;
}

/* The softmax of one window's row of n scores, in place, in float. */
KE_FN void ke_swin_softmax_row(float *p, int n)
{
    float mx = -FLT_MAX, z = 0;
    for (int j = 0; j < n; j++) mx = p[j] > mx ? p[j] : mx;
    for (int j = 0; j < n; j++) z += (p[j] = expf(p[j] - mx));
    for (int j = 0; j < n; j++) p[j] /= z;
}

/* Its backward in place: d[j] = p[j] * (d[j] - sum over k of p[k] d[k]). */
KE_FN void ke_swin_dsoftmax_row(const float *p, float *d, int n)
{
    float r = 0;
    for (int j = 0; j < n; j++) r += p[j] * d[j];
    for (int j = 0; j < n; j++) d[j] = p[j] * (d[j] - r);
}

/* patchmerge's four neighbours of a 2x2 block, part k of a merged position: (2 y2 + k % 2,
 * 2 x2 + k / 2), the order of torchvision's _patch_merging_pad. */
KE_FN int ke_patch_dy(int k) { return k % 2; }
KE_FN int ke_patch_dx(int k) { return k / 2; }

#endif
