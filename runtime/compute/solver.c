#include "runtime/compute/solver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/rng.h"

struct solver {
    solver_config_t cfg;
    arena_t *arena;
    float *history;
};

int solver_policy_parse(const char *s, lr_policy_t *p)
{
    if (!strcmp(s, "fixed")) *p = LR_FIXED;
    else if (!strcmp(s, "step")) *p = LR_STEP;
    else if (!strcmp(s, "poly")) *p = LR_POLY;
    else return -1;
    return 0;
}

double solver_lr(const solver_config_t *cfg, int64_t t)
{
    switch (cfg->policy) {
    case LR_STEP:
        ASSERT(cfg->step_iters > 0, "step policy needs step_iters > 0");
        return cfg->lr * pow(cfg->gamma, (double)(t / cfg->step_iters));
    case LR_POLY: {
        ASSERT(cfg->max_iters > 0, "poly policy needs max_iters > 0");
        double f = 1.0 - (double)t / (double)cfg->max_iters;
        return f <= 0 ? 0.0 : cfg->lr * pow(f, cfg->power);
    }
    case LR_FIXED:
    default:
        return cfg->lr;
    }
}

solver_t *solver_new(const solver_config_t *cfg, arena_t *arena)
{
    solver_t *s = xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    s->arena = arena;
    s->history = compute_alloc_floats(arena->compute, arena->count);
    return s;
}

void solver_destroy(solver_t **sp)
{
    if (!sp || !*sp) return;
    compute_release((*sp)->arena->compute, (*sp)->history);
    free(*sp);
    *sp = NULL;
}

float *solver_history(solver_t *s) { return s->history; }

static void step_entries(solver_t *s, int first, int last, int64_t t)
{
    arena_t *a = s->arena;
    compute_t *c = a->compute;
    float lr = (float)solver_lr(&s->cfg, t);
    for (int i = first; i < last; i++) {
        const arena_entry_t *e = &a->entries[i];
        c->ops->sgd_update(c->ctx, e->count, lr, (float)s->cfg.momentum,
                           e->is_bias ? 0.0f : (float)s->cfg.weight_decay,
                           a->params + e->offset, a->grads + e->offset,
                           s->history + e->offset);
    }
}

void solver_step(solver_t *s, int64_t t) { step_entries(s, 0, s->arena->n_entries, t); }

void solver_step_layer(solver_t *s, int l, int64_t t)
{
    const arena_t *a = s->arena;
    int first = -1, last = -1;
    for (int i = 0; i < a->n_entries; i++)
        if (a->entries[i].layer == l) {
            if (first < 0) first = i;
            last = i + 1;
        }
    if (first >= 0) step_entries(s, first, last, t);
}

/* true when some layer reads l and is a ReLU */
static bool feeds_relu(const model_t *m, int l)
{
    for (int i = l + 1; i < m->n_layers; i++)
        for (int k = 0; k < m->layers[i].n_inputs; k++)
            if (m->layers[i].inputs[k] == l && m->layers[i].type == LAYER_RELU) return true;
    return false;
}

void solver_init_params(const model_t *m, arena_t *a, init_kind_t kind, uint64_t seed)
{
    rng_t *r = rng_new(seed, 1);
    /* a device arena is filled on the host, then sent: the same values on every backend */
    bool host = compute_is_host(a->compute);
    float *params = host ? a->params : xcalloc((size_t)a->count + 1, sizeof(float));
    for (int i = 0; i < a->n_entries; i++) {
        const arena_entry_t *e = &a->entries[i];
        const layer_t *l = &m->layers[e->layer];
        float *p = params + e->offset;
        if (e->is_bias) {
            memset(p, 0, (size_t)e->count * sizeof(float));
            continue;
        }
        if (l->type == LAYER_BATCHNORM || l->type == LAYER_LAYERNORM || l->type == LAYER_SCALE) {
            for (int64_t k = 0; k < e->count; k++) p[k] = 1.0f;
            continue;
        }
        if (l->type == LAYER_EMBED || l->type == LAYER_POSEMBED || l->type == LAYER_CLSTOKEN) {
            /* N(0, 0.02), as GPT-2 and BERT initialise their embeddings */
            for (int64_t j = 0; j < e->count; j++) p[j] = (float)rng_gaussian(r, 0.02);
            continue;
        }
        /* fan_in: inputs per output unit */
        int64_t fan_in = e->count / l->out; /* conv: Cin/groups*kh*kw; fc, linear: inputs */
        init_kind_t k = kind;
        if (k == INIT_AUTO) k = feeds_relu(m, e->layer) ? INIT_HE : INIT_XAVIER;
        if (k == INIT_HE) {
            double sd = sqrt(2.0 / (double)fan_in);
            for (int64_t j = 0; j < e->count; j++) p[j] = (float)rng_gaussian(r, sd);
        } else {
            double lim = sqrt(3.0 / (double)fan_in);
            for (int64_t j = 0; j < e->count; j++)
                p[j] = (float)((2.0 * rng_uniform(r) - 1.0) * lim);
        }
    }
    rng_destroy(&r);
    if (!host) {
        a->compute->ops->upload(a->compute->ctx, a->params, params,
                                (size_t)a->count * sizeof(float));
        free(params);
    }
}
