/* conv_wino: see conv_wino.h.
 *
 * F(2x2, 5x5) with the interpolation points 0, 1, -1, 2, -2 and infinity. The matrices AT
 * (2x6), G (6x5) and BT (6x6), written out in at6, g6 and bt6 below, were solved exactly (in
 * rationals) from the condition AT [(G g) * (BT d)] = the correlation of d (6) with g (5); the
 * 2-D form nests the 1-D one: Y = AT [(G g G^T) * (BT d BT^T)] AT^T.
 *
 * Samples go in chunks of about TILES_PER_CHUNK tiles, so that each of the 36 products is one
 * GEMM of a useful width, not 36 small calls a sample (LeNet's conv2 has 49 tiles a sample;
 * chunks of 48 to 256 tiles measured about equally fast there, 512 slower).
 * The transforms run on 4 tiles at once, one per lane of vec.h's vectors; a tile's 6x6 input
 * is read from a zero-padded copy of its planes, so no tile needs a border test.
 */
#include "runtime/compute/conv_wino.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/vec.h"

enum { TILES_PER_CHUNK = 256 };

float *conv_wino_buf_get(conv_wino_buf_t *b, int64_t count)
{
    if (count > b->count) {
        free(b->p);
        b->p = xmalloc((size_t)count * sizeof(float));
        b->count = count;
    }
    return b->p;
}

void conv_wino_buf_fini(conv_wino_buf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->count = 0;
}

void conv_wino_scratch_fini(conv_wino_scratch_t *s)
{
    conv_wino_buf_fini(&s->u);
    conv_wino_buf_fini(&s->v);
    conv_wino_buf_fini(&s->m);
    conv_wino_buf_fini(&s->pad);
    conv_wino_buf_fini(&s->idx);
}

bool conv_wino_suits(int c, int kh, int kw, int sh, int sw, int ph, int pw)
{
    return kh == 5 && kw == 5 && sh == 1 && sw == 1 && ph >= 0 && pw >= 0 && ph < 5 && pw < 5 &&
           c >= 8;
}

/* G (6x5), the filter transform, applied to five vectors: r = G g */
static inline void g6(const vec_f4 g[5], vec_f4 r[6])
{
    const vec_f4 two = {2, 2, 2, 2}, four = {4, 4, 4, 4}, sixteen = {16, 16, 16, 16};
    vec_f4 even = g[0] + g[2] + g[4], odd = g[1] + g[3];
    vec_f4 even2 = g[0] + four * g[2] + sixteen * g[4], odd2 = two * g[1] + four * two * g[3];
    r[0] = g[0] / 4.0f;
    r[1] = -(even + odd) / 6.0f;
    r[2] = -(even - odd) / 6.0f;
    r[3] = (even2 + odd2) / 24.0f;
    r[4] = (even2 - odd2) / 24.0f;
    r[5] = g[4];
}

/* u (36, nf) = G g G^T for each of the nf filters g (5x5) of wt, four filters at a time (the
 * last group repeats the last filter in its spare lanes and stores only the real ones). */
static void filters_transform(const float *wt, int64_t nf, float *u)
{
    for (int64_t f = 0; f < nf; f += 4) {
        const float *g[4];
        for (int l = 0; l < 4; l++) g[l] = wt + (f + l < nf ? f + l : nf - 1) * 25;
        vec_f4 t[6][5]; /* G g: t[i][col] */
        for (int col = 0; col < 5; col++) {
            vec_f4 d[5], r[6];
            for (int k = 0; k < 5; k++)
                d[k] = (vec_f4){g[0][k * 5 + col], g[1][k * 5 + col], g[2][k * 5 + col],
                                g[3][k * 5 + col]};
            g6(d, r);
            for (int i = 0; i < 6; i++) t[i][col] = r[i];
        }
        for (int i = 0; i < 6; i++) {
            vec_f4 r[6];
            g6(t[i], r);
            for (int j = 0; j < 6; j++) {
                float *up = u + (i * 6 + j) * nf + f;
                if (f + 4 <= nf) vec_store(up, r[j]);
                else
                    for (int l = 0; f + l < nf; l++) up[l] = r[j][l];
            }
        }
    }
}

/* BT (6x6) applied to six vectors: r = BT d */
static inline void bt6(const vec_f4 d[6], vec_f4 r[6])
{
    const vec_f4 two = {2, 2, 2, 2}, four = {4, 4, 4, 4}, five = {5, 5, 5, 5};
    r[0] = four * d[0] - five * d[2] + d[4];
    r[1] = d[3] + d[4] - four * (d[1] + d[2]);
    r[2] = four * (d[1] - d[2]) + d[4] - d[3];
    r[3] = two * (d[3] - d[1]) + d[4] - d[2];
    r[4] = two * (d[1] - d[3]) + d[4] - d[2];
    r[5] = four * d[1] - five * d[3] + d[5];
}

/* AT (2x6) applied to six vectors */
static inline void at6(const vec_f4 m[6], vec_f4 *y0, vec_f4 *y1)
{
    const vec_f4 two = {2, 2, 2, 2};
    *y0 = m[0] + m[1] + m[2] + m[3] + m[4];
    *y1 = m[1] - m[2] + two * (m[3] - m[4]) + m[5];
}

/* v (c, 36, nt) for the tiles of one chunk, 4 at a time: BT d BT^T of each tile's 6x6 input,
 * d read at pad + off[t] + channel * plane (row stride wp). nt is a multiple of 4. */
static void inputs_transform(const float *pad, const int64_t *off, int64_t plane, int wp, int c,
                             int64_t nt, float *v)
{
    for (int ch = 0; ch < c; ch++)
        for (int64_t t = 0; t < nt; t += 4) {
            const float *p[4];
            for (int j = 0; j < 4; j++) p[j] = pad + off[3 * (t + j)] + ch * plane;
            vec_f4 rows[6][6]; /* BT d: rows[i][col] */
            for (int col = 0; col < 6; col++) {
                vec_f4 d[6], r[6];
                for (int y = 0; y < 6; y++)
                    d[y] = (vec_f4){p[0][y * wp + col], p[1][y * wp + col],
                                    p[2][y * wp + col], p[3][y * wp + col]};
                bt6(d, r);
                for (int i = 0; i < 6; i++) rows[i][col] = r[i];
            }
            float *vt = v + (int64_t)ch * 36 * nt + t;
            for (int i = 0; i < 6; i++) {
                vec_f4 r[6];
                bt6(rows[i], r);
                for (int j = 0; j < 6; j++) vec_store(vt + (i * 6 + j) * nt, r[j]);
            }
        }
}

/* The 2x2 outputs of 4 tiles from m (o, 36, nt) at output channel oc and tiles t..t+3, into
 * y: tile j's top-left output is at y + idx[3j + 1] (-1: no tile), idx[3j + 2] says whether
 * its second row (bit 0) and second column (bit 1) lie inside the output. */
static void outputs_store4(const float *m, int64_t on, const int64_t *idx, float bias, bool add,
                           int ow, float *y)
{
    vec_f4 rows[2][6]; /* AT m: rows[i][col] */
    for (int col = 0; col < 6; col++) {
        vec_f4 d[6];
        for (int a = 0; a < 6; a++) d[a] = vec_load(m + (a * 6 + col) * on);
        at6(d, &rows[0][col], &rows[1][col]);
    }
    vec_f4 r[2][2];
    for (int i = 0; i < 2; i++) at6(rows[i], &r[i][0], &r[i][1]);
    for (int j = 0; j < 4; j++) {
        if (idx[3 * j + 1] < 0) continue;
        float *yt = y + idx[3 * j + 1];
        float v[2][2] = {{r[0][0][j] + bias, r[0][1][j] + bias},
                         {r[1][0][j] + bias, r[1][1][j] + bias}};
        int rows = idx[3 * j + 2] & 1 ? 2 : 1, cols = idx[3 * j + 2] & 2 ? 2 : 1;
        if (rows == 2 && cols == 2 && !add) { /* the common case, without tests */
            yt[0] = v[0][0], yt[1] = v[0][1], yt[ow] = v[1][0], yt[ow + 1] = v[1][1];
            continue;
        }
        for (int i = 0; i < rows; i++)
            for (int k = 0; k < cols; k++) yt[i * ow + k] = (add ? yt[i * ow + k] : 0.0f) + v[i][k];
    }
}

/* Per tile t of a chunk of n samples (nt slots, the last ones empty): idx[3t] its input's
 * offset in the padded planes, idx[3t + 1] its output's offset in y (-1 when empty),
 * idx[3t + 2] the flags of outputs_store4. */
static void chunk_index(const conv_wino_shape_t *sh, int n, int tw, int64_t timg, int64_t nt,
                        int wp, int64_t plane, int64_t *idx)
{
    for (int64_t t = 0; t < nt; t++) {
        int64_t tt = t < n * timg ? t : 0, b = tt / timg, r = tt % timg;
        int ty = (int)(r / tw), tx = (int)(r % tw);
        idx[3 * t] = b * sh->c * plane + (int64_t)2 * ty * wp + 2 * tx;
        idx[3 * t + 1] = t < n * timg ? b * sh->y_stride + (int64_t)2 * ty * sh->ow + 2 * tx : -1;
        idx[3 * t + 2] = (2 * ty + 1 < sh->oh ? 1 : 0) | (2 * tx + 1 < sh->ow ? 2 : 0);
    }
}

/* The planes of n samples from x into pad (n, c, hp, wp), zero around them. */
static void chunk_pad(const conv_wino_shape_t *sh, int n, const float *x, int hp, int wp,
                      float *pad)
{
    int64_t plane = (int64_t)hp * wp;
    memset(pad, 0, (size_t)n * sh->c * plane * sizeof(float));
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < sh->c; ch++) {
            const float *xp = x + b * sh->x_stride + (int64_t)ch * sh->h * sh->w;
            float *pp = pad + ((int64_t)b * sh->c + ch) * plane + (int64_t)sh->ph * wp + sh->pw;
            for (int yy = 0; yy < sh->h; yy++)
                memcpy(pp + (int64_t)yy * wp, xp + (int64_t)yy * sh->w,
                       (size_t)sh->w * sizeof(float));
        }
}

/* m (o, 36, nt) = u (36, o, c) times v (c, 36, nt), point by point: the points of one channel
 * lie together, where the transforms read and write them. */
static void products(const float *u, const float *v, int o, int c, int64_t nt, float *m)
{
    /* zeroed here and added to (beta = 1): OpenBLAS's own beta = 0 pass is slow (compute_cpu.c) */
    memset(m, 0, (size_t)36 * o * nt * sizeof(float));
    for (int pt = 0; pt < 36; pt++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, o, (int)nt, c, 1.0f,
                    u + (int64_t)pt * o * c, c, v + pt * nt, (int)(36 * nt), 1.0f,
                    m + pt * nt, (int)(36 * nt));
}

/* A chunking of the batch and the buffers of one chunk, for the forward pass and the weight
 * gradient alike. */
typedef struct {
    int tw, hp, wp, nb;            /* tiles across a plane; padded plane; samples a chunk */
    int64_t plane, timg, ntmax;    /* padded plane's floats; tiles a sample; tile slots */
    float *v, *pad;                /* transformed input tiles; padded planes */
    int64_t *idx;                  /* chunk_index's table */
} chunking_t;

static chunking_t chunking_new(conv_wino_scratch_t *s, const conv_wino_shape_t *sh)
{
    chunking_t k;
    int th = (sh->oh + 1) / 2;
    k.tw = (sh->ow + 1) / 2, k.hp = 2 * th + 4, k.wp = 2 * k.tw + 4;
    k.plane = (int64_t)k.hp * k.wp, k.timg = (int64_t)th * k.tw;
    k.nb = k.timg >= TILES_PER_CHUNK ? 1 : (int)(TILES_PER_CHUNK / k.timg);
    if (k.nb > sh->batch) k.nb = sh->batch;
    k.ntmax = (k.nb * k.timg + 3) / 4 * 4;
    k.v = conv_wino_buf_get(&s->v, 36 * sh->c * k.ntmax);
    k.pad = conv_wino_buf_get(&s->pad, (int64_t)k.nb * sh->c * k.plane);
    /* 3 int64_t a tile; the buffer only ever holds int64_t */
    k.idx = (int64_t *)(void *)conv_wino_buf_get(&s->idx, 6 * k.ntmax);
    return k;
}

/* The chunk of samples from b0 (*n of them): its tiles indexed and its input transformed into
 * k->v. Returns its tile slots, nt. */
static int64_t chunk_inputs(const chunking_t *k, const conv_wino_shape_t *sh, const float *x,
                            int b0, int *n)
{
    *n = sh->batch - b0 < k->nb ? sh->batch - b0 : k->nb;
    int64_t nt = (*n * k->timg + 3) / 4 * 4;
    chunk_pad(sh, *n, x + b0 * sh->x_stride, k->hp, k->wp, k->pad);
    chunk_index(sh, *n, k->tw, k->timg, nt, k->wp, k->plane, k->idx);
    inputs_transform(k->pad, k->idx, k->plane, k->wp, sh->c, nt, k->v);
    return nt;
}

void conv_wino_run(conv_wino_scratch_t *s, const conv_wino_shape_t *sh, const float *wt,
                   const float *bias, const float *x, bool add, float *y)
{
    chunking_t k = chunking_new(s, sh);
    int64_t ohw = (int64_t)sh->oh * sh->ow;
    float *u = conv_wino_buf_get(&s->u, (int64_t)36 * sh->o * sh->c);
    float *m = conv_wino_buf_get(&s->m, 36 * sh->o * k.ntmax);
    filters_transform(wt, (int64_t)sh->o * sh->c, u);
    for (int b0 = 0, n; b0 < sh->batch; b0 += n) {
        int64_t nt = chunk_inputs(&k, sh, x, b0, &n);
        products(u, k.v, sh->o, sh->c, nt, m);
        float *yb = y + b0 * sh->y_stride;
        for (int oc = 0; oc < sh->o; oc++)
            for (int64_t t = 0; t < nt; t += 4)
                outputs_store4(m + (int64_t)oc * 36 * nt + t, nt, k.idx + 3 * t,
                               bias ? bias[oc] : 0.0f, add, sh->ow, yb + oc * ohw);
    }
}

/* ---- the weight gradient: F(5x5, 2x2) -------------------------------------------------
 * dW[o][c] = sum over the 2x2 blocks of dy of the correlation of the block's 6x6 input tile
 * with the block: the same tiles, padded planes and input transform BT as above (F(5x5, 2x2)
 * on these points has the same BT), the block transformed by G2 (6x2) and, once the products
 * are summed over every tile of the batch (36 GEMMs whose inner dimension is the tiles), one
 * output transform A5 (5x6) per filter. 36 multiplications per block and filter tap pair
 * where im2col + GEMM does 100. */

/* G2 (6x2) applied to two vectors */
static inline void g2(vec_f4 g0, vec_f4 g1, vec_f4 r[6])
{
    const vec_f4 two = {2, 2, 2, 2};
    r[0] = g0 / 4.0f;
    r[1] = -(g0 + g1) / 6.0f;
    r[2] = -(g0 - g1) / 6.0f;
    r[3] = (g0 + two * g1) / 24.0f;
    r[4] = (g0 - two * g1) / 24.0f;
    r[5] = g1;
}

/* A5 (5x6) applied to six vectors: row i is (i == 0, 1, (-1)^i, 2^i, (-2)^i, i == 4) */
static inline void a5(const vec_f4 m[6], vec_f4 y[5])
{
    vec_f4 s1 = m[1] + m[2], d1 = m[1] - m[2], s2 = m[3] + m[4], d2 = m[3] - m[4];
    y[0] = m[0] + s1 + s2;
    y[1] = d1 + 2.0f * d2;
    y[2] = s1 + 4.0f * s2;
    y[3] = d1 + 8.0f * d2;
    y[4] = s1 + 16.0f * s2 + m[5];
}

/* u (o, 36, nt) = G2 g G2^T of each tile's 2x2 block g of dy (zeros outside dy, and for the
 * empty slots), 4 tiles at a time; tile t's block starts at dy + idx[3t + 1] + channel*ohw. */
static void dys_transform(const float *dy, const int64_t *idx, int o, int64_t ohw, int ow,
                          int64_t nt, float *u)
{
    for (int oc = 0; oc < o; oc++)
        for (int64_t t = 0; t < nt; t += 4) {
            float g[2][2][4]; /* [a][b][lane] */
            for (int j = 0; j < 4; j++) {
                const int64_t *it = idx + 3 * (t + j);
                const float *p = dy + it[1] + oc * ohw;
                bool in = it[1] >= 0, row2 = in && (it[2] & 1), col2 = in && (it[2] & 2);
                g[0][0][j] = in ? p[0] : 0.0f;
                g[0][1][j] = col2 ? p[1] : 0.0f;
                g[1][0][j] = row2 ? p[ow] : 0.0f;
                g[1][1][j] = row2 && col2 ? p[ow + 1] : 0.0f;
            }
            vec_f4 cols[2][6]; /* G2 applied down each of the two columns: cols[b][i] */
            for (int b = 0; b < 2; b++) g2(vec_load(g[0][b]), vec_load(g[1][b]), cols[b]);
            float *ut = u + (int64_t)oc * 36 * nt + t;
            for (int i = 0; i < 6; i++) {
                vec_f4 r[6];
                g2(cols[0][i], cols[1][i], r);
                for (int j = 0; j < 6; j++) vec_store(ut + (i * 6 + j) * nt, r[j]);
            }
        }
}

/* dw (nf, 5, 5) = A5 m A5^T of each filter's 6x6 sums in mw (36, nf), four at a time. */
static void weights_out(const float *mw, int64_t nf, float *dw)
{
    for (int64_t f = 0; f < nf; f += 4) {
        vec_f4 rows[5][6]; /* A5 m: rows[i][col] */
        for (int col = 0; col < 6; col++) {
            vec_f4 d[6], r[5];
            for (int a = 0; a < 6; a++) {
                const float *p = mw + (a * 6 + col) * nf + f;
                if (f + 4 <= nf) d[a] = vec_load(p);
                else
                    for (int l = 0; l < 4; l++) d[a][l] = f + l < nf ? p[l] : 0.0f;
            }
            a5(d, r);
            for (int i = 0; i < 5; i++) rows[i][col] = r[i];
        }
        for (int i = 0; i < 5; i++) {
            vec_f4 r[5];
            a5(rows[i], r);
            for (int l = 0; l < 4 && f + l < nf; l++)
                for (int k = 0; k < 5; k++) dw[(f + l) * 25 + i * 5 + k] = r[k][l];
        }
    }
}

void conv_wino_weight_grad(conv_wino_scratch_t *s, const conv_wino_shape_t *sh, const float *x,
                           const float *dy, float *dw)
{
    chunking_t k = chunking_new(s, sh);
    int64_t ohw = (int64_t)sh->oh * sh->ow, oc = (int64_t)sh->o * sh->c;
    float *u = conv_wino_buf_get(&s->m, 36 * sh->o * k.ntmax); /* dy's blocks (o, 36, nt) */
    float *mw = conv_wino_buf_get(&s->u, 36 * oc);             /* the sums (36, o, c) */
    memset(mw, 0, (size_t)(36 * oc) * sizeof(float));
    for (int b0 = 0, n; b0 < sh->batch; b0 += n) {
        int64_t nt = chunk_inputs(&k, sh, x, b0, &n);
        dys_transform(dy + b0 * sh->y_stride, k.idx, sh->o, ohw, sh->ow, nt, u);
        for (int pt = 0; pt < 36; pt++) /* mw[pt] (o, c) += u[pt] (o, nt) v[pt]^T (nt, c) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sh->o, sh->c, (int)nt, 1.0f,
                        u + pt * nt, (int)(36 * nt), k.v + pt * nt, (int)(36 * nt), 1.0f,
                        mw + pt * oc, sh->c);
    }
    weights_out(mw, oc, dw);
}
