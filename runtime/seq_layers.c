/* seq_layers: see seq_layers.h. Attention runs two GEMMs per (sequence, head) forward and
 * four backward on strided views of Q, K and V (a head's features are columns h*dh.. of the
 * B x S x D arrays), so no copy reorders them by head. */
#include "runtime/seq_layers.h"

#include <math.h>
#include <string.h>

#include "core/check.h"

static int token_id(float f, int vocab)
{
    int id = (int)f;
    ASSERT((float)id == f && id >= 0 && id < vocab, "token id %g outside [0, %d)", (double)f,
           vocab);
    return id;
}

void seq_embed_forward(const float *ids, int64_t tokens, const float *w, int vocab, int dim,
                       float *out)
{
    for (int64_t t = 0; t < tokens; t++)
        memcpy(out + t * dim, w + (int64_t)token_id(ids[t], vocab) * dim,
               (size_t)dim * sizeof(float));
}

void seq_embed_backward(const float *ids, int64_t tokens, const float *dout, int dim, float *dw)
{
    for (int64_t t = 0; t < tokens; t++) {
        float *row = dw + (int64_t)ids[t] * dim;
        const float *g = dout + t * dim;
        for (int d = 0; d < dim; d++) row[d] += g[d];
    }
}

void seq_posembed_forward(const float *x, const float *p, int batch, int seq, int dim,
                          float *out)
{
    int64_t n = (int64_t)seq * dim;
    for (int b = 0; b < batch; b++)
        for (int64_t i = 0; i < n; i++) out[b * n + i] = x[b * n + i] + p[i];
}

void seq_posembed_backward(const float *dout, int batch, int seq, int dim, float *dp,
                           float *dx)
{
    int64_t n = (int64_t)seq * dim;
    memset(dp, 0, (size_t)n * sizeof(float));
    for (int b = 0; b < batch; b++)
        for (int64_t i = 0; i < n; i++) {
            dp[i] += dout[b * n + i];
            if (dx) dx[b * n + i] += dout[b * n + i];
        }
}

void seq_clstoken_forward(const float *x, const float *w, int batch, int seq, int dim,
                          float *out)
{
    int64_t n = (int64_t)seq * dim;
    for (int b = 0; b < batch; b++) {
        float *o = out + b * (n + dim);
        memcpy(o, w, (size_t)dim * sizeof(float));
        memcpy(o + dim, x + b * n, (size_t)n * sizeof(float));
    }
}

void seq_clstoken_backward(const float *dout, int batch, int seq, int dim, float *dw, float *dx)
{
    int64_t n = (int64_t)seq * dim;
    memset(dw, 0, (size_t)dim * sizeof(float));
    for (int b = 0; b < batch; b++) {
        const float *g = dout + b * (n + dim);
        for (int d = 0; d < dim; d++) dw[d] += g[d];
        if (dx)
            for (int64_t i = 0; i < n; i++) dx[b * n + i] += g[dim + i];
    }
}

void seq_to_seq_forward(const float *x, int batch, int c, int p, float *out)
{
    int64_t n = (int64_t)c * p;
    for (int b = 0; b < batch; b++)
        for (int ch = 0; ch < c; ch++)
            for (int i = 0; i < p; i++) out[b * n + (int64_t)i * c + ch] = x[b * n + (int64_t)ch * p + i];
}

void seq_to_seq_backward(const float *dout, int batch, int c, int p, float *dx)
{
    int64_t n = (int64_t)c * p;
    for (int b = 0; b < batch; b++)
        for (int ch = 0; ch < c; ch++)
            for (int i = 0; i < p; i++) dx[b * n + (int64_t)ch * p + i] += dout[b * n + (int64_t)i * c + ch];
}

void seq_select_forward(const float *x, int batch, int seq, int dim, int pos, float *out)
{
    for (int b = 0; b < batch; b++)
        memcpy(out + (int64_t)b * dim, x + ((int64_t)b * seq + pos) * dim,
               (size_t)dim * sizeof(float));
}

void seq_select_backward(const float *dout, int batch, int seq, int dim, int pos, float *dx)
{
    for (int b = 0; b < batch; b++) {
        float *d = dx + ((int64_t)b * seq + pos) * dim;
        for (int i = 0; i < dim; i++) d[i] += dout[(int64_t)b * dim + i];
    }
}

void seq_layernorm_forward(const float *x, int64_t tokens, int dim, double eps, const float *g,
                           const float *b, float *out, float *xhat, float *invstd)
{
    for (int64_t t = 0; t < tokens; t++) {
        const float *xt = x + t * dim;
        double sum = 0, sq = 0;
        for (int d = 0; d < dim; d++) sum += xt[d];
        double mean = sum / dim;
        for (int d = 0; d < dim; d++) sq += (xt[d] - mean) * (xt[d] - mean);
        float is = (float)(1.0 / sqrt(sq / dim + eps));
        invstd[t] = is;
        for (int d = 0; d < dim; d++) {
            float h = (float)(xt[d] - mean) * is;
            xhat[t * dim + d] = h;
            out[t * dim + d] = g[d] * h + b[d];
        }
    }
}

void seq_layernorm_backward(const float *dout, int64_t tokens, int dim, const float *g,
                            const float *xhat, const float *invstd, float *dg, float *db,
                            float *dx)
{
    memset(dg, 0, (size_t)dim * sizeof(float));
    memset(db, 0, (size_t)dim * sizeof(float));
    for (int64_t t = 0; t < tokens; t++) {
        const float *dy = dout + t * dim, *h = xhat + t * dim;
        double sum_dh = 0, sum_dh_h = 0;
        for (int d = 0; d < dim; d++) {
            dg[d] += dy[d] * h[d];
            db[d] += dy[d];
            double dh = (double)dy[d] * g[d];
            sum_dh += dh;
            sum_dh_h += dh * h[d];
        }
        if (!dx) continue;
        /* dx = invstd/D (D dxhat - sum dxhat - xhat sum(dxhat xhat)) */
        double k = (double)invstd[t] / dim;
        float *dxt = dx + t * dim;
        for (int d = 0; d < dim; d++)
            dxt[d] += (float)(k * (dim * (double)dy[d] * g[d] - sum_dh - h[d] * sum_dh_h));
    }
}

static const double s_sqrt_2_over_pi = 0.7978845608028654;
static const double s_gelu_c = 0.044715;

void seq_gelu_forward(const float *x, int64_t n, bool tanh_approx, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        out[i] = tanh_approx
                     ? (float)(0.5 * v * (1 + tanh(s_sqrt_2_over_pi * (v + s_gelu_c * v * v * v))))
                     : (float)(0.5 * v * (1 + erf(v * M_SQRT1_2)));
    }
}

void seq_gelu_backward(const float *x, const float *dout, int64_t n, bool tanh_approx,
                       float *dx)
{
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], d;
        if (tanh_approx) {
            double u = s_sqrt_2_over_pi * (v + s_gelu_c * v * v * v);
            double t = tanh(u);
            d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * s_sqrt_2_over_pi *
                                    (1 + 3 * s_gelu_c * v * v);
        } else {
            d = 0.5 * (1 + erf(v * M_SQRT1_2)) + v * exp(-0.5 * v * v) * 0.3989422804014327;
        }
        dx[i] += (float)(d * dout[i]);
    }
}

void seq_tanh_forward(const float *x, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++) out[i] = tanhf(x[i]);
}

void seq_tanh_backward(const float *y, const float *dout, int64_t n, float *dx)
{
    for (int64_t i = 0; i < n; i++) dx[i] += dout[i] * (1 - y[i] * y[i]);
}

void seq_attention_forward(compute_t *c, const float *q, const float *k, const float *v,
                           int batch, int seq, int dim, int heads, bool causal, float *p,
                           float *out)
{
    int dh = dim / heads, S = seq, D = dim;
    float scale = (float)(1.0 / sqrt((double)dh));
    int64_t n = (int64_t)S * D, ss = (int64_t)S * S;
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++) {
            const float *qb = q + b * n + h * dh, *kb = k + b * n + h * dh, *vb = v + b * n + h * dh;
            float *pb = p + ((int64_t)b * heads + h) * ss;
            /* scores (S x S) = Q_h K_h^T * scale */
            compute_sgemm(c, false, true, S, S, dh, scale, qb, D, kb, D, 0.0f, pb, S);
            for (int i = 0; i < S; i++) {
                float *row = pb + (int64_t)i * S;
                int last = causal ? i : S - 1;
                float mx = row[0];
                for (int j = 1; j <= last; j++) mx = row[j] > mx ? row[j] : mx;
                double z = 0;
                for (int j = 0; j <= last; j++) z += exp((double)row[j] - mx);
                for (int j = 0; j <= last; j++) row[j] = (float)(exp((double)row[j] - mx) / z);
                for (int j = last + 1; j < S; j++) row[j] = 0.0f;
            }
            /* out_h (S x dh) = P V_h */
            compute_sgemm(c, false, false, S, dh, S, 1.0f, pb, S, vb, D, 0.0f,
                          out + b * n + h * dh, D);
        }
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
            for (int i = 0; i < S; i++) {
                const float *pr = pb + (int64_t)i * S;
                float *dr = scratch + (int64_t)i * S;
                double dot = 0;
                for (int j = 0; j < S; j++) dot += (double)pr[j] * dr[j];
                for (int j = 0; j < S; j++) dr[j] = pr[j] * (float)(dr[j] - dot);
            }
            /* dQ_h += scale dS K_h, dK_h += scale dS^T Q_h */
            if (dq)
                compute_sgemm(c, false, false, S, dh, S, scale, scratch, S, k + off, D, 1.0f,
                              dq + off, D);
            if (dk)
                compute_sgemm(c, true, false, S, dh, S, scale, scratch, S, q + off, D, 1.0f,
                              dk + off, D);
        }
}

double seq_loss_forward(const float *x, int64_t tokens, int vocab, const int *labels,
                        float *prob)
{
    double total = 0;
    for (int64_t t = 0; t < tokens; t++) {
        const float *xt = x + t * vocab;
        float *pt = prob + t * vocab;
        float mx = xt[0];
        for (int j = 1; j < vocab; j++) mx = xt[j] > mx ? xt[j] : mx;
        double z = 0;
        for (int j = 0; j < vocab; j++) z += exp((double)xt[j] - mx);
        for (int j = 0; j < vocab; j++) pt[j] = (float)(exp((double)xt[j] - mx) / z);
        int y = labels[t];
        if (y < 0) continue;
        ASSERT(y < vocab, "target %d outside a vocabulary of %d", y, vocab);
        total += -((double)xt[y] - mx - log(z));
    }
    return total;
}

void seq_loss_backward(const float *prob, int64_t tokens, int vocab, const int *labels,
                       float scale, float *dx)
{
    for (int64_t t = 0; t < tokens; t++) {
        int y = labels[t];
        if (y < 0) continue;
        const float *pt = prob + t * vocab;
        float *d = dx + t * vocab;
        for (int j = 0; j < vocab; j++) d[j] += scale * (pt[j] - (j == y ? 1.0f : 0.0f));
    }
}
