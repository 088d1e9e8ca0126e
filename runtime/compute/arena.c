#include "runtime/compute/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

static void add_entry(arena_t *a, int layer, const char *lname, const char *suffix,
                      int64_t count, bool is_bias)
{
    arena_entry_t *e = &a->entries[a->n_entries++];
    snprintf(e->name, sizeof e->name, "%s.%s", lname, suffix);
    e->layer = layer;
    e->offset = a->count;
    e->count = count;
    e->is_bias = is_bias;
    a->count += count;
}

void arena_init(arena_t *a, const model_t *m, compute_t *c)
{
    memset(a, 0, sizeof *a);
    a->compute = c;
    a->n_layers = m->n_layers;
    a->entries = xcalloc((size_t)m->n_layers * 2 + 1, sizeof *a->entries);
    a->layer_offset = xcalloc((size_t)m->n_layers, sizeof(int64_t));
    a->layer_count = xcalloc((size_t)m->n_layers, sizeof(int64_t));
    a->state_offset = xcalloc((size_t)m->n_layers, sizeof(int64_t));
    a->state_len = xcalloc((size_t)m->n_layers, sizeof(int64_t));
    for (int i = 0; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        a->layer_offset[i] = a->count;
        a->state_offset[i] = a->state_count;
        if (l->weights > 0) add_entry(a, i, l->name, "weight", l->weights, false);
        if (l->biases > 0) add_entry(a, i, l->name, "bias", l->biases, true);
        a->layer_count[i] = a->count - a->layer_offset[i];
        if (l->type == LAYER_BATCHNORM) {
            a->state_len[i] = 2 * (int64_t)l->out_shape.c;
            a->state_count += a->state_len[i];
        }
    }
    a->params = compute_alloc_floats(c, a->count);
    a->grads = compute_alloc_floats(c, a->count);
    a->state = compute_alloc_floats(c, a->state_count);
}

void arena_fini(arena_t *a)
{
    if (!a->compute) return;
    compute_release(a->compute, a->params);
    compute_release(a->compute, a->grads);
    compute_release(a->compute, a->state);
    free(a->entries);
    free(a->layer_offset);
    free(a->layer_count);
    free(a->state_offset);
    free(a->state_len);
    memset(a, 0, sizeof *a);
}

int arena_find(const arena_t *a, const char *name)
{
    for (int i = 0; i < a->n_entries; i++)
        if (!strcmp(a->entries[i].name, name)) return i;
    return -1;
}
