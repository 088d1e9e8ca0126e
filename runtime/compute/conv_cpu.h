/* conv_cpu: the CPU backend's convolution kernels on host arrays: im2col and its adjoint
 * col2im (Caffe's column layout: row (channel, ki, kj), column the output pixel), the forward
 * pass and the filters' gradient of the shapes that conv_wino.c computes faster than im2col +
 * GEMM, and the data gradient of a stride-1 convolution computed as a convolution of dy with
 * the flipped filters.
 *
 * Owns nothing but the scratch in a conv_cpu_scratch_t, which the caller embeds, one per
 * thread (the CPU backend's context): the buffers grow as needed and are freed by
 * conv_cpu_scratch_fini().
 */
#ifndef POSEIDON_CONV_CPU_H
#define POSEIDON_CONV_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/compute/conv_wino.h"
#include "runtime/compute/kernels_elementwise.h"

typedef struct {
    conv_wino_buf_t pad;   /* one zero-padded image (im2col, col2im) */
    conv_wino_buf_t col;   /* im2col of one sample's dy (conv_cpu_data_grad) */
    conv_wino_buf_t wflip; /* the filters, flipped and transposed (conv_cpu_data_grad) */
    conv_wino_scratch_t wino;
} conv_cpu_scratch_t;

void conv_cpu_scratch_fini(conv_cpu_scratch_t *s);

/* One image x (c,h,w) to columns col (c*kh*kw, oh*ow), zeros outside the image. */
void conv_cpu_im2col(conv_cpu_scratch_t *cs, const float *x, int c, int h, int w, int kh, int kw,
                     int ph, int pw, int sh, int sw, int oh, int ow, float *col);
/* The adjoint of im2col: ADDS the columns back into x (c,h,w). */
void conv_cpu_col2im(conv_cpu_scratch_t *cs, const float *col, int c, int h, int w, int kh,
                     int kw, int ph, int pw, int sh, int sw, int oh, int ow, float *x);

/* y (batch, o, k->oh, k->ow) = the convolution of x (batch, c, k->h, k->w) with wt
 * (o, c/groups, k->kh, k->kw), plus bias[o] unless bias is NULL, where conv_wino_suits() the
 * shape; returns false, having done nothing, for other shapes. */
bool conv_cpu_forward(conv_cpu_scratch_t *cs, const ke_window_t *k, int batch, int c, int o,
                      int groups, const float *wt, const float *bias, const float *x, float *y);

/* dw (o, c/groups, k->kh, k->kw) = the gradient of the same convolution's filters, summed
 * over the batch, where conv_wino_suits() the shape; returns false, having done nothing, for
 * other shapes. */
bool conv_cpu_weight_grad(conv_cpu_scratch_t *cs, const ke_window_t *k, int batch, int c, int o,
                          int groups, const float *x, const float *dy, float *dw);

/* dx (batch, c, k->h, k->w) += the gradient with respect to the input of the convolution
 * y = conv(x, wt) with wt (o, c/groups, k->kh, k->kw), given dy (batch, o, k->oh, k->ow).
 * Applies to stride 1 with padding below the kernel size (k->ph < k->kh, k->pw < k->kw) where
 * it is the faster way: by Winograd where conv_wino_suits() the transposed shape, else where
 * o <= c (with more output channels, im2col of dy costs more than col2im saves); returns
 * false, having done nothing, for other shapes. */
bool conv_cpu_data_grad(conv_cpu_scratch_t *cs, const ke_window_t *k, int batch, int c, int o,
                        int groups, const float *wt, const float *dy, float *dx);

#endif
