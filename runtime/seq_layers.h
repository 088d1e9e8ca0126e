/* seq_layers: forward and backward of the sequence layers (models/README.md, "Sequences") on
 * plain host arrays, for runtime/nnet.c.
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

#include "runtime/compute.h"

/* out (T x D) = rows ids[t] of w (V x D), T = B*S tokens. Dies on an id outside [0, V). */
void seq_embed_forward(const float *ids, int64_t tokens, const float *w, int vocab, int dim,
                       float *out);
/* dw (V x D) += the rows of dout scattered to their ids. */
void seq_embed_backward(const float *ids, int64_t tokens, const float *dout, int dim,
                        float *dw);

/* out = x + p[position] (p: S x D, the first S rows of the layer's table). */
void seq_posembed_forward(const float *x, const float *p, int batch, int seq, int dim,
                          float *out);
/* dp (S x D) = sum over the batch of dout (overwritten); dx += dout (dx may be NULL). */
void seq_posembed_backward(const float *dout, int batch, int seq, int dim, float *dp,
                           float *dx);

/* out (B x (S+1) x D): position 0 is w, then x. */
void seq_clstoken_forward(const float *x, const float *w, int batch, int seq, int dim,
                          float *out);
/* dw = sum over the batch of dout at position 0 (overwritten); dx += the rest. */
void seq_clstoken_backward(const float *dout, int batch, int seq, int dim, float *dw, float *dx);

/* image B x C x P (P = H*W pixels) -> sequence B x P x C, and its backward (dx += ...). */
void seq_to_seq_forward(const float *x, int batch, int c, int p, float *out);
void seq_to_seq_backward(const float *dout, int batch, int c, int p, float *dx);

/* out (B x D) = x at position pos; dx at that position += dout. */
void seq_select_forward(const float *x, int batch, int seq, int dim, int pos, float *out);
void seq_select_backward(const float *dout, int batch, int seq, int dim, int pos, float *dx);

/* Layer norm over the D features of each of the T tokens: xhat = (x - mean) * invstd,
 * out = g * xhat + b. Keeps xhat (T x D) and invstd (T) for the backward. */
void seq_layernorm_forward(const float *x, int64_t tokens, int dim, double eps, const float *g,
                           const float *b, float *out, float *xhat, float *invstd);
/* dg, db overwritten; dx (may be NULL) += the input gradient. */
void seq_layernorm_backward(const float *dout, int64_t tokens, int dim, const float *g,
                            const float *xhat, const float *invstd, float *dg, float *db,
                            float *dx);

/* GELU: x * Phi(x) (erf), or GPT-2's 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void seq_gelu_forward(const float *x, int64_t n, bool tanh_approx, float *out);
void seq_gelu_backward(const float *x, const float *dout, int64_t n, bool tanh_approx,
                       float *dx);
void seq_tanh_forward(const float *x, int64_t n, float *out);
void seq_tanh_backward(const float *y, const float *dout, int64_t n, float *dx);

/* Multi-head scaled dot-product attention: per sequence b and head h (dh = D/H features),
 * P = softmax(Q_h K_h^T / sqrt(dh)) (causal: position i sees j <= i), out_h = P V_h.
 * Keeps P (B x H x S x S) for the backward. */
void seq_attention_forward(compute_t *c, const float *q, const float *k, const float *v,
                           int batch, int seq, int dim, int heads, bool causal, float *p,
                           float *out);
/* dq, dk, dv += their gradients (each may be NULL); scratch: S x S floats. */
void seq_attention_backward(compute_t *c, const float *q, const float *k, const float *v,
                            const float *p, const float *dout, int batch, int seq, int dim,
                            int heads, float *dq, float *dk, float *dv, float *scratch);

/* Cross-entropy over V classes at each of the T tokens: prob (T x V) the softmax, labels
 * (T; -1: ignored). Returns the sum of the cross-entropies over the labelled tokens. */
double seq_loss_forward(const float *x, int64_t tokens, int vocab, const int *labels,
                        float *prob);
/* dx += scale * (prob - onehot(label)) at the labelled tokens. */
void seq_loss_backward(const float *prob, int64_t tokens, int vocab, const int *labels,
                       float scale, float *dx);

#endif
