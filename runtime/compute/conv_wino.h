/* conv_wino: 5x5 stride-1 convolution by Winograd's minimal filtering F(2x2, 5x5) (Lavin and
 * Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016) on the CPU: each 2x2
 * block of outputs from a 6x6 input tile with 36 multiplications instead of 100, as 36
 * matrix products (one per point of the transformed tile) of (o, c) by (c, tiles); and the
 * filters' gradient by F(5x5, 2x2) on the same tiles, as 36 products of (o, tiles) by
 * (tiles, c).
 *
 * Owns only the scratch in a conv_wino_scratch_t, which the caller embeds, one per thread; the
 * buffers grow as needed and conv_wino_scratch_fini() frees them.
 */
#ifndef POSEIDON_CONV_WINO_H
#define POSEIDON_CONV_WINO_H

#include <stdbool.h>
#include <stdint.h>

/* A host buffer that grows to the largest size asked for (contents not kept). */
typedef struct {
    float *p;
    int64_t count;
} conv_wino_buf_t;

/* b->p with room for at least count floats; dies when memory runs out. */
float *conv_wino_buf_get(conv_wino_buf_t *b, int64_t count);
void conv_wino_buf_fini(conv_wino_buf_t *b);

typedef struct {
    conv_wino_buf_t u;   /* transformed filters (36, o, c) */
    conv_wino_buf_t v;   /* transformed input tiles (36, c, tiles) */
    conv_wino_buf_t m;   /* their products (36, o, tiles) */
    conv_wino_buf_t pad; /* zero-padded input planes of a chunk of samples */
    conv_wino_buf_t idx; /* per tile: its offsets in pad and in y (int64_t pairs) */
} conv_wino_scratch_t;

typedef struct {
    int batch, c, h, w;        /* input planes */
    int o, oh, ow;             /* output planes: oh = h + 2*ph - 4, ow = w + 2*pw - 4 */
    int ph, pw;                /* zero padding */
    int64_t x_stride, y_stride; /* floats from one sample's first plane to the next's */
} conv_wino_shape_t;

void conv_wino_scratch_fini(conv_wino_scratch_t *s);

/* Whether the Winograd path is the one to take for a convolution of this shape: 5x5, stride
 * 1, padding below the kernel and at least 8 input channels (with fewer the transforms cost
 * more than the multiplications they save: LeNet's and CIFAR-10 quick's first layers). */
bool conv_wino_suits(int c, int kh, int kw, int sh, int sw, int ph, int pw);

/* y (batch, o, oh, ow) = (or, with add, +=) the cross-correlation of x (batch, c, h, w) with
 * wt (o, c, 5, 5), plus bias[o] unless bias is NULL. */
void conv_wino_run(conv_wino_scratch_t *s, const conv_wino_shape_t *sh, const float *wt,
                   const float *bias, const float *x, bool add, float *y);

/* dw (o, c, 5, 5) = the gradient of that convolution's filters, given x and dy (batch, o,
 * oh, ow, samples y_stride apart): summed over the batch, overwriting dw. */
void conv_wino_weight_grad(conv_wino_scratch_t *s, const conv_wino_shape_t *sh, const float *x,
                           const float *dy, float *dw);

#endif
