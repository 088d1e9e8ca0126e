#include "runtime/exec/profile.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/rng.h"
#include "runtime/exec/data.h"
#include "runtime/compute/nnet.h"
#include "runtime/compute/solver.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t median(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The GEMMs of layer l's forward (fwd) or backward, as the layer issues them, on the same
 * memory footprint: a conv layer's per-sample GEMMs write (forward) or read (backward) that
 * sample's slice of the batch's output or output gradient, so the bare GEMMs pay for the same
 * traffic to the activations as the layer, but none of its im2col, col2im or bias work.
 * a: weights; b: the im2col matrix (one sample, reused) or the fc input; act: the batch's
 * activations (batch x out_count); out: the weight gradient or the im2col gradient. */
static void layer_gemms(compute_t *c, const layer_t *l, int batch, bool fwd, bool need_dx,
                        float *a, float *b, float *act, float *out)
{
    if (l->type == LAYER_FC) {
        int N = batch, M = l->out, K = (int)shape_count(l->in_shape);
        if (fwd) {
            compute_sgemm(c, false, true, N, M, K, 1.0f, b, K, a, K, 0.0f, act, M);
        } else {
            compute_sgemm(c, true, false, M, K, N, 1.0f, act, M, b, K, 0.0f, out, K);
            if (need_dx) compute_sgemm(c, false, false, N, K, M, 1.0f, act, M, a, K, 1.0f, b, K);
        }
        return;
    }
    int G = l->groups, Og = l->out / G, K = l->in_shape.c / G * l->kernel_h * l->kernel_w;
    int P = l->out_shape.h * l->out_shape.w;
    for (int n = 0; n < batch; n++)
        for (int g = 0; g < G; g++) {
            float *y = act + ((int64_t)n * l->out + (int64_t)g * Og) * P;
            const float *w = a + (int64_t)g * Og * K, *col = b + (int64_t)g * K * P;
            if (fwd) {
                compute_sgemm(c, false, false, Og, P, K, 1.0f, w, K, col, P, 0.0f, y, P);
            } else {
                compute_sgemm(c, false, true, Og, K, P, 1.0f, y, P, col, P, n ? 1.0f : 0.0f,
                              out + (int64_t)g * Og * K, K);
                if (need_dx)
                    compute_sgemm(c, true, false, K, P, Og, 1.0f, w, K, y, P, 0.0f,
                                  out + (int64_t)g * K * P, P);
            }
        }
}

/* Random inputs (token ids, or values) and labels in n's input buffers, drawn from seed. */
static void random_batch(nnet_t *n, const model_t *m, int batch, uint64_t seed)
{
    rng_t *r = rng_new(seed, 3);
    float *x = nnet_input(n);
    bool ids = m->layers[0].type == LAYER_TOKENS; /* token ids, not values */
    for (int64_t i = 0; i < nnet_out_count(n, 0) * batch; i++)
        x[i] = ids ? (float)rng_uint(r, (uint64_t)m->layers[0].vocab) : (float)rng_gaussian(r, 1);
    int classes = 1;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].type == LAYER_SOFTMAX_LOSS) classes = (int)nnet_out_count(n, i);
        else if (m->layers[i].type == LAYER_SEQ_LOSS) classes = m->layers[i].in_shape.c;
    for (int b = 0; b < batch * nnet_label_count(n); b++)
        nnet_labels(n)[b] = (int)rng_uint(r, (uint64_t)classes);
    rng_destroy(&r);
}

/* Operands of the bare GEMMs (layer_gemms), on c. */
typedef struct {
    float *a, *b, *act, *out;
} gemm_bufs_t;

/* Buffers for the bare GEMMs, of the largest operand sizes over the conv and fc layers
 * (zero-filled: the values do not change a GEMM's time). */
static gemm_bufs_t gemm_bufs_new(compute_t *c, const model_t *m, int batch)
{
    int64_t wmax = 1, colmax = 1, actmax = 1;
    for (int l = 1; l < m->n_layers; l++) {
        const layer_t *ly = &m->layers[l];
        if (ly->type != LAYER_CONV && ly->type != LAYER_FC) continue;
        int64_t col = (int64_t)ly->in_shape.c * ly->kernel_h * ly->kernel_w *
                      ly->out_shape.h * ly->out_shape.w; /* one sample's im2col matrix */
        if (ly->type == LAYER_FC) col = shape_count(ly->in_shape) * batch;
        if (ly->weights > wmax) wmax = ly->weights;
        if (col > wmax) wmax = col; /* the conv backward writes the im2col gradient there */
        if (col > colmax) colmax = col;
        if (shape_count(ly->out_shape) * batch > actmax)
            actmax = shape_count(ly->out_shape) * batch;
    }
    return (gemm_bufs_t){compute_alloc_floats(c, wmax), compute_alloc_floats(c, colmax),
                         compute_alloc_floats(c, actmax), compute_alloc_floats(c, wmax)};
}

static void gemm_bufs_free(compute_t *c, gemm_bufs_t *g)
{
    compute_release(c, g->a);
    compute_release(c, g->b);
    compute_release(c, g->act);
    compute_release(c, g->out);
}

/* Times of each layer (l) and repeat (rep), at l x repeats + rep: ns. */
typedef struct {
    int64_t *fwd, *bwd, *gemm_fwd, *gemm_bwd;
    int repeats;
} profile_times_t;

/* One pass of the net: every layer's FWD and BWD between the events ev (L + 1 of them);
 * rep < 0, a warm-up, keeps nothing. */
static void time_pass(nnet_t *n, compute_t *c, int L, compute_event_t **ev, profile_times_t *pt,
                      int rep)
{
    compute_event_record(c, ev[0]);
    for (int l = 1; l < L; l++) {
        nnet_forward_layer(n, l);
        compute_event_record(c, ev[l]);
    }
    for (int l = 1; rep >= 0 && l < L; l++)
        pt->fwd[(int64_t)l * pt->repeats + rep] = compute_event_elapsed_ns(c, ev[l - 1], ev[l]);
    nnet_backward_begin(n);
    compute_event_record(c, ev[L]);
    for (int l = L - 1; l >= 1; l--) {
        nnet_backward_layer(n, l);
        compute_event_record(c, ev[l]);
    }
    for (int l = L - 1; rep >= 0 && l >= 1; l--)
        pt->bwd[(int64_t)l * pt->repeats + rep] = compute_event_elapsed_ns(c, ev[l + 1], ev[l]);
}

/* The bare GEMMs of every conv and fc layer, forward and backward, each between ev[0] and
 * ev[1]; rep < 0 keeps nothing. */
static void time_gemms(compute_t *c, const model_t *m, int batch, const gemm_bufs_t *g,
                       compute_event_t **ev, profile_times_t *pt, int rep)
{
    for (int l = 1; l < m->n_layers; l++) {
        const layer_t *ly = &m->layers[l];
        if (ly->type != LAYER_CONV && ly->type != LAYER_FC) continue;
        bool need_dx = m->layers[ly->inputs[0]].type != LAYER_INPUT;
        for (int pass = 0; pass < 2; pass++) {
            compute_event_record(c, ev[0]);
            layer_gemms(c, ly, batch, pass == 0, need_dx, g->a, g->b, g->act, g->out);
            compute_event_record(c, ev[1]);
            if (rep >= 0)
                (pass == 0 ? pt->gemm_fwd : pt->gemm_bwd)[(int64_t)l * pt->repeats + rep] =
                    compute_event_elapsed_ns(c, ev[0], ev[1]);
        }
    }
}

int profile_run(const model_t *m, int batch, int warmup, int repeats, compute_t *c,
                uint64_t seed, profile_row_t *rows, char *err, size_t errlen)
{
    ASSERT(repeats >= 1 && warmup >= 0, "repeats %d warmup %d", repeats, warmup);
    nnet_t *n = nnet_new(m, batch, c, seed, err, errlen);
    if (!n) return -1;
    solver_init_params(m, nnet_arena(n), INIT_AUTO, seed);
    random_batch(n, m, batch, seed);
    int L = m->n_layers;
    gemm_bufs_t g = gemm_bufs_new(c, m, batch);
    profile_times_t pt = {xcalloc((size_t)L * repeats, sizeof(int64_t)),
                          xcalloc((size_t)L * repeats, sizeof(int64_t)),
                          xcalloc((size_t)L * repeats, sizeof(int64_t)),
                          xcalloc((size_t)L * repeats, sizeof(int64_t)), repeats};
    /* Timed with the backend's events: on a GPU, CUDA events around each layer on the
     * compute stream (the GPU's own time, the host never waits mid-pass); on the CPU the
     * clock read at each boundary, as the work there is done when the call returns. ev[i]
     * and ev[i + 1] enclose the i-th timed piece of a pass; the pass waits at its end. */
    compute_event_t **ev = xcalloc((size_t)L + 1, sizeof *ev);
    for (int i = 0; i <= L; i++) ev[i] = compute_event_new(c);
    /* One repeat times every layer's FWD and BWD, then the bare GEMMs of every conv/fc layer:
     * interleaved, so that a layer and its GEMMs see the same load on a shared machine. */
    for (int rep = -warmup; rep < repeats; rep++) {
        time_pass(n, c, L, ev, &pt, rep);
        time_gemms(c, m, batch, &g, ev, &pt, rep);
    }
    for (int i = 0; i <= L; i++) compute_event_destroy(c, &ev[i]);
    free(ev);
    memset(rows, 0, (size_t)(L > 0 ? L : 0) * sizeof *rows);
    for (int l = 1; l < L; l++) {
        rows[l].fwd_ns = median(pt.fwd + (int64_t)l * repeats, repeats);
        rows[l].bwd_ns = median(pt.bwd + (int64_t)l * repeats, repeats);
        rows[l].gemm_fwd_ns = median(pt.gemm_fwd + (int64_t)l * repeats, repeats);
        rows[l].gemm_bwd_ns = median(pt.gemm_bwd + (int64_t)l * repeats, repeats);
    }
    gemm_bufs_free(c, &g);
    free(pt.fwd);
    free(pt.bwd);
    free(pt.gemm_fwd);
    free(pt.gemm_bwd);
    nnet_destroy(&n);
    return 0;
}

void profile_write_csv(FILE *out, const model_t *m, int batch, const profile_row_t *rows,
                       precision_t prec, bool detail)
{
    if (prec != PRECISION_FP32) fprintf(out, "# precision = %s\n", precision_name(prec));
    fprintf(out, "layer,batch,fwd_ns,bwd_ns%s\n",
            detail ? ",type,params,fwd_flops,gemm_fwd_ns,gemm_bwd_ns" : "");
    for (int l = 1; l < m->n_layers; l++) {
        const layer_t *ly = &m->layers[l];
        fprintf(out, "%s,%d,%lld,%lld", ly->name, batch, (long long)rows[l].fwd_ns,
                (long long)rows[l].bwd_ns);
        if (detail)
            fprintf(out, ",%s,%lld,%lld,%lld,%lld", layer_type_name(ly->type),
                    (long long)ly->params, (long long)(ly->fwd_flops * batch),
                    (long long)rows[l].gemm_fwd_ns, (long long)rows[l].gemm_bwd_ns);
        fputc('\n', out);
    }
}
