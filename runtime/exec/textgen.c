#include "runtime/exec/textgen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/rng.h"
#include "runtime/exec/data.h"

static int char_id(char c)
{
    if (c == '\n') return 0;
    return c >= ' ' && c <= '~' ? c - ' ' + 1 : -1;
}

static char id_char(int id) { return id == 0 ? '\n' : (char)(' ' + id - 1); }

int textgen_sample(nnet_t *trained, const char *prompt, int n, double temperature,
                   uint64_t seed, char *out, size_t outlen, char *err, size_t errlen)
{
    const model_t *m = nnet_model(trained);
    int loss = m->n_layers - 1;
    if (m->layers[0].type != LAYER_TOKENS || m->layers[loss].type != LAYER_SEQ_LOSS ||
        m->layers[loss].in_shape.c != DATA_TEXT_VOCAB) {
        snprintf(err, errlen, "%s: not a character model (tokens first, seq_loss over %d last)",
                 m->path, DATA_TEXT_VOCAB);
        return -1;
    }
    size_t plen = strlen(prompt);
    for (size_t i = 0; i < plen; i++)
        if (char_id(prompt[i]) < 0) {
            snprintf(err, errlen, "prompt character 0x%02x is outside the vocabulary",
                     (unsigned char)prompt[i]);
            return -1;
        }
    ASSERT(temperature > 0 && outlen > plen + (size_t)n, "temperature %g, %zu bytes", temperature,
           outlen);
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, errlen);
    if (!c) return -1;
    nnet_t *g = nnet_new(m, 1, c, seed, err, errlen);
    if (!g) {
        compute_destroy(&c);
        return -1;
    }
    arena_t *src = nnet_arena(trained), *dst = nnet_arena(g);
    /* the trained net may live on a GPU: its buffers come through its backend */
    compute_download(src->compute, dst->params, src->params, (size_t)src->count * sizeof(float));
    compute_download(src->compute, dst->state, src->state,
                     (size_t)src->state_count * sizeof(float));
    nnet_set_train(g, false);
    int S = m->layers[0].out_shape.w, V = DATA_TEXT_VOCAB;
    memcpy(out, prompt, plen);
    size_t len = plen;
    if (len == 0) out[len++] = '\n'; /* a start: the beginning of a line */
    rng_t *r = rng_new(seed, 0x74657874ULL);
    double *p = xmalloc((size_t)V * sizeof *p);
    for (int k = 0; k < n && len + 1 < outlen; k++) {
        size_t first = len > (size_t)S ? len - S : 0;
        int filled = (int)(len - first);
        float *x = nnet_input(g);
        for (int i = 0; i < S; i++) x[i] = i < filled ? (float)char_id(out[first + i]) : 0.0f;
        memset(nnet_labels(g), 0, (size_t)S * sizeof(int));
        nnet_forward(g);
        const float *prob = nnet_output(g, loss) + (int64_t)(filled - 1) * V;
        double z = 0;
        for (int j = 0; j < V; j++) z += p[j] = pow((double)prob[j] + 1e-30, 1.0 / temperature);
        double u = rng_uniform(r) * z;
        int pick = V - 1;
        for (int j = 0; j < V; j++)
            if ((u -= p[j]) < 0) {
                pick = j;
                break;
            }
        out[len++] = id_char(pick);
    }
    out[len] = '\0';
    free(p);
    rng_destroy(&r);
    nnet_destroy(&g);
    compute_destroy(&c);
    return 0;
}
