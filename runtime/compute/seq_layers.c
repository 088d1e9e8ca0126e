/* seq_layers: see seq_layers.h. Attention runs two GEMMs per (sequence, head) forward and
 * four backward on strided views of Q, K and V (a head's features are columns h*dh.. of the
 * B x S x D arrays), so no copy reorders them by head; the row softmax of every head's
 * scores is one backend operation between the two rounds of GEMMs. */
#include "runtime/compute/seq_layers.h"

#include <math.h>

void seq_attention_forward(compute_t *c, const float *q, const float *k, const float *v,
                           int batch, int seq, int dim, int heads, bool causal, float *p,
                           float *out)
{
    int dh = dim / heads, S = seq, D = dim;
    float scale = (float)(1.0 / sqrt((double)dh));
    int64_t n = (int64_t)S * D, ss = (int64_t)S * S;
    /* scores (S x S) = Q_h K_h^T * scale, for every sequence and head */
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++)
            compute_sgemm(c, false, true, S, S, dh, scale, q + b * n + h * dh, D,
                          k + b * n + h * dh, D, 0.0f, p + ((int64_t)b * heads + h) * ss, S);
    c->layers->softmax_rows(c->ctx, (int64_t)batch * heads * S, S, causal, p);
    /* out_h (S x dh) = P V_h */
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++)
            compute_sgemm(c, false, false, S, dh, S, 1.0f, p + ((int64_t)b * heads + h) * ss, S,
                          v + b * n + h * dh, D, 0.0f, out + b * n + h * dh, D);
}

void seq_attention_backward(compute_t *c, const float *q, const float *k, const float *v,
                            const float *p, const float *dout, int batch, int seq, int dim,
                            int heads, float *dq, float *dk, float *dv, float *scratch)
{
    int dh = dim / heads, S = seq, D = dim;
    float scale = (float)(1.0 / sqrt((double)dh));
    int64_t n = (int64_t)S * D, ss = (int64_t)S * S;
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++) {
            int64_t off = b * n + h * dh;
            const float *pb = p + ((int64_t)b * heads + h) * ss, *dob = dout + off;
            /* dV_h += P^T dO_h */
            if (dv) compute_sgemm(c, true, false, S, dh, S, 1.0f, pb, S, dob, D, 1.0f, dv + off, D);
            if (!dq && !dk) continue;
            /* dP = dO_h V_h^T, then dS = P (dP - rowsum(P dP)) in place */
            compute_sgemm(c, false, true, S, S, dh, 1.0f, dob, D, v + off, D, 0.0f, scratch, S);
            c->layers->dsoftmax_rows(c->ctx, S, S, pb, scratch);
            /* dQ_h += scale dS K_h, dK_h += scale dS^T Q_h */
            if (dq)
                compute_sgemm(c, false, false, S, dh, S, scale, scratch, S, k + off, D, 1.0f,
                              dq + off, D);
            if (dk)
                compute_sgemm(c, true, false, S, dh, S, scale, scratch, S, q + off, D, 1.0f,
                              dk + off, D);
        }
}
