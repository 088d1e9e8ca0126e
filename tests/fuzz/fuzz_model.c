/* Fuzz the model parser (core/model.c): the bytes are a .net file. A model it accepts must
 * keep model.h's invariants and give the device model non-negative times, so that no value
 * the parser lets through breaks the simulator's int64 nanoseconds later. */
#include "tests/fuzz/fuzz.h"

#include "core/cluster.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/unit_times.h"

static int name_order(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void check_model(const model_t *m)
{
    FUZZ_ASSERT(m->n_layers >= 1 && layer_is_input(&m->layers[0]), "%d layers, the first a %s",
                m->n_layers, m->n_layers ? layer_type_name(m->layers[0].type) : "-");
    int64_t params = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        FUZZ_ASSERT(l->n_inputs >= 0 && l->n_inputs <= MODEL_MAX_INPUTS, "%s", l->name);
        for (int k = 0; k < l->n_inputs; k++)
            FUZZ_ASSERT(l->inputs[k] >= 0 && l->inputs[k] < i, "%s input %d", l->name, k);
        FUZZ_ASSERT(l->out_shape.c >= 1 && l->out_shape.h >= 1 && l->out_shape.w >= 1,
                    "%s: empty output", l->name);
        FUZZ_ASSERT(l->params >= 0 && l->fwd_flops >= 0 && l->bwd_flops >= 0 &&
                        l->act_bytes >= 0 && l->param_bytes >= 0,
                    "%s: a negative cost", l->name);
        params += l->params;
    }
    FUZZ_ASSERT(params == m->total_params, "total %lld", (long long)m->total_params);
    /* Unique names, sorted rather than looked up one by one: a repeat makes 10^5 layers. */
    const char **names = malloc((size_t)m->n_layers * sizeof *names);
    if (!names) abort();
    for (int i = 0; i < m->n_layers; i++) names[i] = m->layers[i].name;
    qsort(names, (size_t)m->n_layers, sizeof *names, name_order);
    for (int i = 1; i < m->n_layers; i++)
        FUZZ_ASSERT(strcmp(names[i - 1], names[i]) != 0, "%s: name not unique", names[i]);
    free(names);
}

int fuzz_model(const uint8_t *data, size_t size)
{
    model_t m;
    char err[1024] = "";
    /* The buffer is not NUL-terminated: the parser must keep within len. */
    if (model_parse(&m, "fuzz.net", (const char *)data, size, err, sizeof err) != 0) {
        fuzz_check_error(err);
        return 0;
    }
    check_model(&m);

    cluster_t c;
    cluster_init(&c);
    plan_t p;
    if (plan_build(&p, &m, &c, (scheme_t){SCHEME_PS, true}, 0, 32, 0, err, sizeof err) == 0) {
        unit_times_t t;
        unit_times_device(&t, &p);
        for (int u = 0; u < t.n_units; u++)
            FUZZ_ASSERT(t.fwd_ns[u] >= 0 && t.bwd_ns[u] >= 0, "unit %d: %lld / %lld ns", u,
                        (long long)t.fwd_ns[u], (long long)t.bwd_ns[u]);
        unit_times_fini(&t);
        plan_fini(&p);
    }
    model_fini(&m);
    return 1;
}

FUZZ_LIBFUZZER_ENTRY(fuzz_model)
