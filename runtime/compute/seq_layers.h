/* seq_layers: multi-head attention (models/README.md, "Sequences") for runtime/compute/nnet.c, on
 * the backend's buffers: GEMMs and the row softmax through compute.h. The other sequence
 * layers are single backend operations (compute_layer_ops_t) that nnet.c calls directly.
 *
 * Layout: a batch of B sequences of S positions of D features is B x S x D, row-major (the
 * D features of a position are contiguous). Token ids travel as floats holding exact
 * integers. Every backward ADDS into the input gradient it is given (a value may feed
 * several layers); parameter gradients are written as the comment of each function says.
 * Reductions over a batch run in a fixed order, so equal inputs give equal bits.
 */
#ifndef POSEIDON_SEQ_LAYERS_H
#define POSEIDON_SEQ_LAYERS_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/compute/compute.h"

/* Multi-head scaled dot-product attention: per sequence b and head h (dh = D/H features),
 * P = softmax(Q_h K_h^T / sqrt(dh)) (causal: position i sees j <= i), out_h = P V_h.
 * Keeps P (B x H x S x S) for the backward. */
void seq_attention_forward(compute_t *c, const float *q, const float *k, const float *v,
                           int batch, int seq, int dim, int heads, bool causal, float *p,
                           float *out);
/* dq, dk, dv += their gradients (each may be NULL); scratch: S x S floats (backend memory). */
void seq_attention_backward(compute_t *c, const float *q, const float *k, const float *v,
                            const float *p, const float *dout, int batch, int seq, int dim,
                            int heads, float *dq, float *dk, float *dv, float *scratch);

#endif
