/* window_attn: the layers of Swin Transformers (winattn, patchmerge; models/README.md) for
 * runtime/compute/nnet.c, on every backend: the buffers are the backend's (compute.h).
 *
 * Layout: a batch of B planes of h x w positions of D features is B x (h*w) x D, row-major,
 * as every sequence (seq_layers.h); a position (y, x) is row y*w + x. winattn's parameters:
 * weights [Wqkv (3D x D) | Wproj (D x D) | table ((2 window - 1)^2 x heads)], biases
 * [bqkv (3D) | bproj (D)], the order of torchvision's ShiftedWindowAttention (Q, K, V the
 * rows of Wqkv in that order, heads the columns h*D/heads.. of each). Backwards ADD into the
 * input gradient and WRITE the parameter gradients (summed over the batch).
 */
#ifndef POSEIDON_WINDOW_ATTN_H
#define POSEIDON_WINDOW_ATTN_H

#include <stdint.h>

#include "core/model.h"
#include "runtime/compute/compute.h"

/* Floats per sample winattn keeps from its forward for its backward. */
int64_t winattn_aux_count(const layer_t *l);
/* Floats of the backend's memory a pass needs as scratch (the caller's, reused across passes:
 * an allocation per pass would cost a GPU a synchronisation each). */
int64_t winattn_scratch_count(const layer_t *l);

/* out = the layer of x (B x h*w x D); w, b its parameters (b NULL without biases); aux as
 * winattn_aux_count() says, per sample; scratch as winattn_scratch_count() says. */
void winattn_forward(compute_t *c, const layer_t *l, int batch, const float *x, const float *w,
                     const float *b, float *aux, float *scratch, float *out);
/* dw, db = parameter gradients; dx += input gradient (dx may be NULL). */
void winattn_backward(compute_t *c, const layer_t *l, int batch, const float *w, const float *b,
                      const float *aux, const float *dout, float *scratch, float *dw, float *db,
                      float *dx);

void patchmerge_forward(compute_t *c, const layer_t *l, int batch, int dim, const float *x,
                        float *out);
/* dx += the gradient of the input */
void patchmerge_backward(compute_t *c, const layer_t *l, int batch, int dim, const float *dout,
                         float *dx);

#endif
