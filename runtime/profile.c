#include "runtime/profile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "core/rng.h"
#include "runtime/data.h"
#include "runtime/nnet.h"
#include "runtime/solver.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

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

/* The GEMMs of layer l's forward (fwd) or backward, as the layer issues them. */
static void layer_gemms(compute_t *c, const layer_t *l, int batch, bool fwd, bool need_dx,
                        float *a, float *b, float *out)
{
    if (l->type == LAYER_FC) {
        int N = batch, M = l->out, K = (int)shape_count(l->in_shape);
        if (fwd) {
            compute_sgemm(c, false, true, N, M, K, 1.0f, a, K, b, K, 0.0f, out, M);
        } else {
            compute_sgemm(c, true, false, M, K, N, 1.0f, a, M, b, K, 0.0f, out, K);
            if (need_dx) compute_sgemm(c, false, false, N, K, M, 1.0f, a, M, b, K, 1.0f, out, K);
        }
        return;
    }
    int G = l->groups, Og = l->out / G, K = l->in_shape.c / G * l->kernel_h * l->kernel_w;
    int P = l->out_shape.h * l->out_shape.w;
    for (int n = 0; n < batch; n++)
        for (int g = 0; g < G; g++) {
            if (fwd) {
                compute_sgemm(c, false, false, Og, P, K, 1.0f, a, K, b, P, 0.0f, out, P);
            } else {
                compute_sgemm(c, false, true, Og, K, P, 1.0f, a, P, b, P, 1.0f, out, K);
                if (need_dx)
                    compute_sgemm(c, true, false, K, P, Og, 1.0f, a, K, b, P, 0.0f, out, P);
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
    rng_t *r = rng_new(seed, 3);
    float *x = nnet_input(n);
    for (int64_t i = 0; i < nnet_out_count(n, 0) * batch; i++) x[i] = (float)rng_gaussian(r, 1);
    int classes = 1;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].type == LAYER_SOFTMAX_LOSS) classes = (int)nnet_out_count(n, i);
    for (int b = 0; b < batch; b++) nnet_labels(n)[b] = (int)rng_uint(r, (uint64_t)classes);
    rng_destroy(&r);

    int L = m->n_layers;
    int64_t *f = xcalloc((size_t)L * repeats, sizeof *f);
    int64_t *bw = xcalloc((size_t)L * repeats, sizeof *bw);
    for (int rep = -warmup; rep < repeats; rep++) {
        for (int l = 1; l < L; l++) {
            int64_t t0 = now_ns();
            nnet_forward_layer(n, l);
            c->ops->sync(c->ctx);
            if (rep >= 0) f[(int64_t)l * repeats + rep] = now_ns() - t0;
        }
        nnet_backward_begin(n);
        for (int l = L - 1; l >= 1; l--) {
            int64_t t0 = now_ns();
            nnet_backward_layer(n, l);
            c->ops->sync(c->ctx);
            if (rep >= 0) bw[(int64_t)l * repeats + rep] = now_ns() - t0;
        }
    }
    memset(rows, 0, (size_t)L * sizeof *rows);
    for (int l = 1; l < L; l++) {
        rows[l].fwd_ns = median(f + (int64_t)l * repeats, repeats);
        rows[l].bwd_ns = median(bw + (int64_t)l * repeats, repeats);
    }
    /* bare GEMMs of the conv and fc shapes, on buffers of the largest operand size */
    for (int l = 1; l < L; l++) {
        const layer_t *ly = &m->layers[l];
        if (ly->type != LAYER_CONV && ly->type != LAYER_FC) continue;
        bool need_dx = m->layers[ly->inputs[0]].type != LAYER_INPUT;
        int64_t big = (int64_t)ly->in_shape.c * ly->kernel_h * ly->kernel_w * ly->out_shape.h *
                      ly->out_shape.w; /* the im2col buffer */
        if (ly->type == LAYER_FC) big = shape_count(ly->in_shape) * batch;
        int64_t cnt = big;
        if (ly->weights > cnt) cnt = ly->weights;
        if (shape_count(ly->out_shape) * batch > cnt) cnt = shape_count(ly->out_shape) * batch;
        float *a = compute_alloc_floats(c, cnt), *b = compute_alloc_floats(c, cnt);
        float *o = compute_alloc_floats(c, cnt);
        for (int pass = 0; pass < 2; pass++) {
            bool fwd = pass == 0;
            for (int rep = -warmup; rep < repeats; rep++) {
                int64_t t0 = now_ns();
                layer_gemms(c, ly, batch, fwd, need_dx, a, b, o);
                c->ops->sync(c->ctx);
                if (rep >= 0) f[rep] = now_ns() - t0;
            }
            int64_t med = median(f, repeats);
            if (fwd) rows[l].gemm_fwd_ns = med;
            else rows[l].gemm_bwd_ns = med;
        }
        compute_release(c, a);
        compute_release(c, b);
        compute_release(c, o);
    }
    free(f);
    free(bw);
    nnet_destroy(&n);
    return 0;
}

void profile_write_csv(FILE *out, const model_t *m, int batch, const profile_row_t *rows)
{
    fprintf(out, "layer,batch,fwd_ns,bwd_ns,type,params,fwd_flops,gemm_fwd_ns,gemm_bwd_ns\n");
    for (int l = 1; l < m->n_layers; l++) {
        const layer_t *ly = &m->layers[l];
        fprintf(out, "%s,%d,%lld,%lld,%s,%lld,%lld,%lld,%lld\n", ly->name, batch,
                (long long)rows[l].fwd_ns, (long long)rows[l].bwd_ns, layer_type_name(ly->type),
                (long long)ly->params, (long long)(ly->fwd_flops * batch),
                (long long)rows[l].gemm_fwd_ns, (long long)rows[l].gemm_bwd_ns);
    }
}
