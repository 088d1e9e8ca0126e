#include "critpath.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The plan's op of a row: kind and unit name as the executors write them. -1: none. */
static int op_of_row(const plan_t *p, const trace_rec_t *r)
{
    for (int i = 0; i < p->n_ops; i++) {
        const plan_op_t *o = &p->ops[i];
        const plan_unit_t *u = &p->units[o->unit];
        const char *name = p->model->layers[u->layer >= 0 ? u->layer : u->first].name;
        if (!strcmp(op_kind_name(o->kind), r->op) && !strcmp(name, r->layer)) return i;
    }
    return -1;
}

static int max_iteration(const trace_rec_t *rows, int n)
{
    int m = -1;
    for (int i = 0; i < n; i++)
        if (rows[i].iteration > m) m = rows[i].iteration;
    return m;
}

/* The row of `iteration` that ends last (ties: the lower node, then the first row). */
static int last_row(const trace_rec_t *rows, int n, int iteration)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (rows[i].iteration == iteration &&
            (best < 0 || rows[i].t_end_ns > rows[best].t_end_ns ||
             (rows[i].t_end_ns == rows[best].t_end_ns && rows[i].node < rows[best].node)))
            best = i;
    return best;
}

/* Appends to a growing index list. */
static void list_push(int **v, int *n, int *cap, int x)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *v = xrealloc(*v, (size_t)*cap * sizeof **v);
    }
    (*v)[(*n)++] = x;
}

/* Reverses the walk (last op first) into time order. */
static void reverse(int *v, int n)
{
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        int t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

typedef struct {
    const trace_rec_t *rows;
    int *inst;       /* (iteration, op, node) -> the row ending last of that instance, or -1 */
    int *op_of;      /* per row */
    int iters, ops, nodes;
} index_t;

static int *inst_at(const index_t *x, int t, int op, int node)
{
    return &x->inst[((size_t)t * (size_t)x->ops + (size_t)op) * (size_t)x->nodes + (size_t)node];
}

/* Considers row r as a candidate: the one ending last wins; on a tie the earlier-found. */
static void consider(const trace_rec_t *rows, int r, int *best)
{
    if (r >= 0 && (*best < 0 || rows[r].t_end_ns > rows[*best].t_end_ns)) *best = r;
}

/* The binding predecessor of row c under the plan, or -1. */
static int plan_pred(const plan_t *p, const index_t *x, int n_rows, int c)
{
    const trace_rec_t *rows = x->rows, *cr = &rows[c];
    const plan_op_t *o = &p->ops[x->op_of[c]];
    int best = -1;
    for (int d = o->dep_first; d < o->dep_first + o->n_deps; d++) {
        const plan_dep_t *dep = &p->deps[d];
        int t = cr->iteration - dep->iter_back;
        if (t < 0 || t >= x->iters) continue;
        if (dep->scope == DEP_LOCAL) {
            consider(rows, *inst_at(x, t, dep->op, cr->node), &best);
            continue;
        }
        for (int n = 0; n < x->nodes; n++) {
            if (!plan_has_instance(p, dep->op, n)) continue;
            int sends_here = dep->scope == DEP_ALL;
            int64_t bytes;
            int self;
            if (!sends_here && plan_dest_broadcast(p, dep->op, n, &bytes, &self))
                sends_here = n != cr->node || self;
            else
                for (int i = 0; !sends_here && i < plan_n_dests(p, dep->op, n); i++)
                    sends_here = plan_dest(p, dep->op, n, i, &bytes) == cr->node;
            if (sends_here) consider(rows, *inst_at(x, t, dep->op, n), &best);
        }
    }
    if (o->res != RES_NET) { /* the row that held the exclusive resource before this one */
        int res_best = -1;
        for (int r = 0; r < n_rows; r++)
            if (r != c && rows[r].node == cr->node && x->op_of[r] >= 0 &&
                p->ops[x->op_of[r]].res == o->res && rows[r].t_end_ns <= cr->t_start_ns &&
                (rows[r].iteration != cr->iteration || x->op_of[r] != x->op_of[c]))
                consider(rows, r, &res_best);
        /* a dependency wins a tie: it is the edge the op was waiting on */
        if (res_best >= 0 && (best < 0 || rows[res_best].t_end_ns > rows[best].t_end_ns))
            best = res_best;
    }
    return best;
}

/* Walks back from the last row of `iteration`; pred() gives each row's binding predecessor. */
typedef int (*pred_fn)(const void *ctx, int row);

static int walk(const trace_rec_t *rows, int n, int iteration, pred_fn pred, const void *ctx,
                int **path, int *before)
{
    *path = NULL;
    *before = -1;
    int c = last_row(rows, n, iteration), len = 0, cap = 0;
    while (c >= 0) {
        list_push(path, &len, &cap, c);
        int b = pred(ctx, c);
        if (b >= 0 && rows[b].iteration != iteration) {
            *before = b;
            break;
        }
        for (int i = 0; b >= 0 && i < len; i++) /* a cycle: clocks out of order */
            if ((*path)[i] == b) b = -1;
        c = b;
    }
    reverse(*path, len);
    return len;
}

typedef struct {
    const plan_t *p;
    const index_t *x;
    int n;
} plan_ctx_t;

static int plan_pred_fn(const void *ctx, int row)
{
    const plan_ctx_t *pc = ctx;
    return plan_pred(pc->p, pc->x, pc->n, row);
}

int critpath_plan(const plan_t *p, const trace_rec_t *rows, int n, int iteration, int **path,
                  int *before, char *err, size_t errlen)
{
    *path = NULL;
    *before = -1;
    index_t x = {.rows = rows, .iters = max_iteration(rows, n) + 1, .ops = p->n_ops,
                 .nodes = p->cluster.nodes};
    x.op_of = xmalloc((size_t)(n ? n : 1) * sizeof *x.op_of);
    for (int i = 0; i < n; i++) {
        x.op_of[i] = op_of_row(p, &rows[i]);
        if (x.op_of[i] < 0 || rows[i].node >= x.nodes ||
            !plan_has_instance(p, x.op_of[i], rows[i].node)) {
            snprintf(err, errlen, "row %d (node %d, %s %s) is not an op of the plan (%d nodes): "
                     "the trace ran another plan", i + 1, rows[i].node, rows[i].op,
                     rows[i].layer, x.nodes);
            free(x.op_of);
            return -1;
        }
    }
    size_t cells = (size_t)x.iters * (size_t)x.ops * (size_t)x.nodes;
    x.inst = xmalloc((cells ? cells : 1) * sizeof *x.inst);
    for (size_t i = 0; i < cells; i++) x.inst[i] = -1;
    for (int i = 0; i < n; i++) {
        int *cell = inst_at(&x, rows[i].iteration, x.op_of[i], rows[i].node);
        if (*cell < 0 || rows[i].t_end_ns > rows[*cell].t_end_ns) *cell = i;
    }
    plan_ctx_t ctx = {p, &x, n};
    int len = walk(rows, n, iteration, plan_pred_fn, &ctx, path, before);
    free(x.inst);
    free(x.op_of);
    return len;
}

typedef struct {
    const trace_rec_t *rows;
    int n;
} rows_ctx_t;

static int rows_pred_fn(const void *ctx, int c)
{
    const rows_ctx_t *rc = ctx;
    const trace_rec_t *rows = rc->rows, *cr = &rows[c];
    int best = -1;
    for (int r = 0; r < rc->n; r++) {
        const trace_rec_t *x = &rows[r];
        if (r == c || x->t_end_ns > cr->t_start_ns) continue;
        if (x->node == cr->node && x->iteration == cr->iteration && !strcmp(x->op, cr->op) &&
            !strcmp(x->layer, cr->layer))
            continue; /* another row of the same instance */
        if (best < 0 || x->t_end_ns > rows[best].t_end_ns ||
            (x->t_end_ns == rows[best].t_end_ns && x->node == cr->node &&
             rows[best].node != cr->node))
            best = r;
    }
    return best;
}

int critpath_rows(const trace_rec_t *rows, int n, int iteration, int **path, int *before)
{
    rows_ctx_t ctx = {rows, n};
    return walk(rows, n, iteration, rows_pred_fn, &ctx, path, before);
}
