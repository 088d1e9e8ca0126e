#include "tests/trace_edges.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/trace.h"

typedef struct {
    int64_t t0, t1;   /* first start, last end; t0 > t1: no row */
    int64_t t1_first; /* the first row's end (the runtime's first KV block applied) */
} te_span_t;

/* The op of kind `kind` whose unit is named `layer`, or -1. */
static int op_of(const plan_t *p, const char *kind, const char *layer)
{
    for (int o = 0; o < p->n_ops; o++) {
        const plan_unit_t *un = &p->units[p->ops[o].unit];
        const char *name = p->model->layers[un->layer >= 0 ? un->layer : un->first].name;
        if (!strcmp(op_kind_name(p->ops[o].kind), kind) && !strcmp(name, layer)) return o;
    }
    return -1;
}

int trace_edge_violations(const plan_t *p, const char *csv, bool real, int corrupt,
                          const char *what, int *checked)
{
    FILE *f = fopen(csv, "r");
    if (!f) return -1;
    int nodes = p->workers, iters = 0;
    /* first pass: iterations; second: spans */
    te_span_t *span = NULL;
    char line[1024];
    for (int pass = 0; pass < 2; pass++) {
        rewind(f);
        if (pass == 1) {
            span = xmalloc((size_t)p->n_ops * nodes * iters * sizeof *span);
            for (int64_t i = 0; i < (int64_t)p->n_ops * nodes * iters; i++)
                span[i] = (te_span_t){INT64_MAX, INT64_MIN, INT64_MAX};
        }
        while (fgets(line, sizeof line, f)) {
            trace_rec_t r;
            if (trace_rec_parse(line, &r) != 0) continue; /* the header */
            int node = r.node, it = r.iteration;
            int64_t t0 = r.t_start_ns, t1 = r.t_end_ns;
            if (pass == 0) {
                if (it + 1 > iters) iters = it + 1;
                continue;
            }
            int o = op_of(p, r.op, r.layer);
            if (o < 0 || node < 0 || node >= nodes) {
                fprintf(stderr, "%s: row names no op of the plan: %s", what, line);
                fclose(f);
                free(span);
                return -1;
            }
            te_span_t *s = &span[((int64_t)o * nodes + node) * iters + it];
            if (t0 < s->t0) s->t0 = t0;
            if (t1 > s->t1) s->t1 = t1;
            if (t1 < s->t1_first) s->t1_first = t1;
        }
    }
    fclose(f);
    int bad = 0, n = 0;
    for (int o = 0; o < p->n_ops; o++) {
        const plan_op_t *po = &p->ops[o];
        for (int node = 0; node < nodes; node++)
            for (int t = 0; t < iters; t++) {
                te_span_t *s = &span[((int64_t)o * nodes + node) * iters + t];
                if (s->t0 > s->t1) continue;
                for (int d = 0; d < po->n_deps; d++) {
                    const plan_dep_t *dp = &p->deps[po->dep_first + d];
                    int need = t - dp->iter_back;
                    if (dp->scope != DEP_LOCAL || need < 0 || dp->op == o) continue;
                    op_kind_t k = p->ops[dp->op].kind;
                    if (real && (k == OP_PUSH || k == OP_SFB)) continue;
                    const te_span_t *ds = &span[((int64_t)dp->op * nodes + node) * iters + need];
                    if (ds->t0 > ds->t1) continue;
                    /* the runtime's shard applies and answers KV block by block: a PULL
                     * follows the apply of its first block */
                    int64_t end = real && k == OP_APPLY ? ds->t1_first : ds->t1;
                    if (++n == corrupt) s->t0 = end - 1;
                    if (s->t0 < end) {
                        if (bad++ < 5)
                            fprintf(stderr, "%s: %s(%s) of node %d, iteration %d, starts at %lld "
                                            "before %s of iteration %d ends at %lld\n",
                                    what, op_kind_name(po->kind),
                                    p->model->layers[p->units[po->unit].first].name, node, t,
                                    (long long)s->t0, op_kind_name(k), need, (long long)end);
                    }
                }
            }
    }
    free(span);
    *checked = n;
    return bad;
}
