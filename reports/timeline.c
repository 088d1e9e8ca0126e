#include "reports/timeline.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/critpath.h"
#include "core/experiment.h"
#include "core/experiment_open.h"
#include "core/job.h"
#include "core/model.h"
#include "core/outfile.h"
#include "core/plan.h"
#include "core/trace.h"
#include "core/trace_read.h"
#include "reports/gnuplot.h"
#include "reports/paths.h"

enum { TL_NET_MAX = 3, TL_WIDTH_PX = 1600, TL_LANE_PX = 16, TL_PLOT_PX = 1380 };

/* The kinds in legend order and their colours (Tableau 10). */
static const char *const s_kinds[] = {"FWD",  "BWD",    "PUSH",    "PULL",   "SFB", "ALLREDUCE",
                                      "APPLY", "UPDATE", "LREDUCE", "LBCAST", NULL};
static const char *const s_colours[] = {"#8cb5e0", "#4e79a7", "#f28e2b", "#59a14f",
                                        "#b07aa1", "#e15759", "#9c755f", "#ff9da7",
                                        "#bab0ac", "#edc948", "#79706e"};
enum { N_KINDS = 10 };

static int kind_index(const char *op)
{
    for (int k = 0; k < N_KINDS; k++)
        if (!strcmp(s_kinds[k], op)) return k;
    return N_KINDS; /* drawn grey, legend "other" */
}

/* The lanes of a node, top to bottom. */
enum { LANE_COMPUTE, LANE_NET, LANE_SERVER, LANE_UPDATE, LANE_KINDS };
static const char *const s_lane_names[LANE_KINDS] = {"compute", "send", "server", "update"};

static int lane_of(const char *op)
{
    switch (trace_lane_of_op(op)) {
    case TRACE_LANE_COMPUTE: return LANE_COMPUTE;
    case TRACE_LANE_SERVER: return LANE_SERVER;
    case TRACE_LANE_UPDATE:
    case TRACE_LANE_INTRA: return LANE_UPDATE;
    default: return LANE_NET;
    }
}

/* One trace, its iteration's rows on the shown nodes, their lanes and the critical path. */
typedef struct {
    const char *path;
    trace_rec_t *rows;
    int n;
    int64_t t0_ns, t1_ns; /* the iteration's first start and last end, over every node */
    int *sub;             /* per row: the sub-lane of a send (0 elsewhere) */
    int *crit, n_crit, before;
} tl_trace_t;

static void tl_trace_free(tl_trace_t *t)
{
    free(t->rows);
    free(t->sub);
    free(t->crit);
}

/* "0-3,8" into a mask of n_nodes. Returns 0, or -1 with a message. */
static int nodes_parse(const char *spec, int n_nodes, unsigned char *mask)
{
    memset(mask, 0, (size_t)n_nodes);
    const char *s = spec;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0) goto bad;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a) goto bad;
            s = end;
        }
        if (*s == ',') s++;
        else if (*s) goto bad;
        if (b >= n_nodes) {
            fprintf(stderr, "poseidon report timeline: --nodes %s: node %ld is not in the trace "
                            "(nodes 0-%d)\n", spec, b, n_nodes - 1);
            return -1;
        }
        for (long i = a; i <= b; i++) mask[i] = 1;
    }
    return 0;
bad:
    fprintf(stderr, "poseidon report timeline: --nodes %s: expected a list such as 0-3,8\n", spec);
    return -1;
}

static int max_node(const trace_rec_t *r, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (r[i].node > m) m = r[i].node;
    return m;
}

static int has_iteration(const trace_rec_t *r, int n, int it)
{
    for (int i = 0; i < n; i++)
        if (r[i].iteration == it) return 1;
    return 0;
}

static int start_cmp(const void *a, const void *b)
{
    const trace_rec_t *x = *(const trace_rec_t *const *)a, *y = *(const trace_rec_t *const *)b;
    if (x->t_start_ns != y->t_start_ns) return x->t_start_ns < y->t_start_ns ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Packs each node's sends of the iteration into sub-lanes: a row goes to the first sub-lane
 * free at its start; beyond TL_NET_MAX, to the one that frees first (drawn overlapping).
 * Returns the sub-lanes used by the busiest node. */
static int pack_sends(tl_trace_t *t, int iteration, int n_nodes)
{
    t->sub = xcalloc((size_t)(t->n ? t->n : 1), sizeof *t->sub);
    const trace_rec_t **order = xmalloc((size_t)(t->n ? t->n : 1) * sizeof *order);
    int m = 0, used = 1;
    for (int i = 0; i < t->n; i++)
        if (t->rows[i].iteration == iteration && lane_of(t->rows[i].op) == LANE_NET)
            order[m++] = &t->rows[i];
    qsort(order, (size_t)m, sizeof *order, start_cmp);
    int64_t *free_at = xmalloc((size_t)n_nodes * TL_NET_MAX * sizeof *free_at);
    int *n_sub = xcalloc((size_t)n_nodes, sizeof *n_sub);
    for (int i = 0; i < m; i++) {
        const trace_rec_t *r = order[i];
        int64_t *fa = free_at + (size_t)r->node * TL_NET_MAX;
        int s = -1;
        for (int k = 0; k < n_sub[r->node] && s < 0; k++)
            if (fa[k] <= r->t_start_ns) s = k;
        if (s < 0 && n_sub[r->node] < TL_NET_MAX) {
            s = n_sub[r->node]++;
            fa[s] = r->t_end_ns;
        }
        if (s < 0) {
            s = 0;
            for (int k = 1; k < TL_NET_MAX; k++)
                if (fa[k] < fa[s]) s = k;
        }
        if (r->t_end_ns > fa[s]) fa[s] = r->t_end_ns;
        t->sub[r - t->rows] = s;
        if (n_sub[r->node] > used) used = n_sub[r->node];
    }
    free(order);
    free(free_at);
    free(n_sub);
    return used;
}

/* The lane layout shared by both panels: lane y values per (node, lane kind), top to bottom. */
typedef struct {
    int n_nodes;
    const unsigned char *shown;
    int present[LANE_KINDS]; /* lane kinds with a row in either trace */
    int n_sub;               /* send sub-lanes */
    int n_lanes;
    double *y;               /* [node * (LANE_KINDS + TL_NET_MAX) + slot]: the lane's y */
} tl_layout_t;

static int slot_of(int lane, int sub) { return lane == LANE_NET ? LANE_KINDS + sub : lane; }

static double *y_at(const tl_layout_t *l, int node, int lane, int sub)
{
    return &l->y[(size_t)node * (LANE_KINDS + TL_NET_MAX) + (size_t)slot_of(lane, sub)];
}

static void layout_build(tl_layout_t *l)
{
    l->y = xcalloc((size_t)l->n_nodes * (LANE_KINDS + TL_NET_MAX), sizeof *l->y);
    int k = 0;
    for (int node = 0; node < l->n_nodes; node++) {
        if (!l->shown[node]) continue;
        for (int lane = 0; lane < LANE_KINDS; lane++) {
            if (!l->present[lane]) continue;
            for (int s = 0; s < (lane == LANE_NET ? l->n_sub : 1); s++) *y_at(l, node, lane, s) = k++;
        }
    }
    l->n_lanes = k;
    /* top lane highest: y = n_lanes - index */
    for (size_t i = 0; i < (size_t)l->n_nodes * (LANE_KINDS + TL_NET_MAX); i++)
        l->y[i] = l->n_lanes - l->y[i];
}

static double row_y(const tl_layout_t *l, const tl_trace_t *t, int i)
{
    const trace_rec_t *r = &t->rows[i];
    int lane = lane_of(r->op);
    return *y_at(l, r->node, lane, lane == LANE_NET ? t->sub[i] : 0);
}

/* A layer name as gnuplot reads it in a quoted data field. */
static void put_name(FILE *g, const char *s)
{
    fputc('"', g);
    for (; *s; s++) fputc(*s == '"' || *s == '\\' ? '_' : *s, g);
    fputc('"', g);
}

/* What a panel's datablocks hold: gnuplot warns about an empty one, so only those with rows
 * are plotted. */
typedef struct {
    unsigned kinds; /* a bit per kind with boxes */
    int labels, crit, joins;
} tl_blocks_t;

/* The datablocks of one panel: $T<p>K<k> boxes of kind k, $T<p>L labels, $T<p>C the critical
 * path's boxes, $T<p>V its joins. */
static tl_blocks_t write_blocks(FILE *g, const tl_trace_t *t, const tl_layout_t *l, int p,
                             int iteration, double x_max_ms)
{
    tl_blocks_t bl = {0};
    for (int k = 0; k <= N_KINDS; k++) {
        fprintf(g, "$T%dK%d << EOD\n", p, k);
        for (int i = 0; i < t->n; i++) {
            const trace_rec_t *r = &t->rows[i];
            if (r->iteration != iteration || !l->shown[r->node] || kind_index(r->op) != k)
                continue;
            double a = (r->t_start_ns - t->t0_ns) / 1e6, b = (r->t_end_ns - t->t0_ns) / 1e6;
            fprintf(g, "%.6f %.2f %.6f 0.38\n", (a + b) / 2, row_y(l, t, i), (b - a) / 2);
            bl.kinds |= 1u << k;
        }
        fputs("EOD\n", g);
    }
    fprintf(g, "$T%dL << EOD\n", p);
    for (int i = 0; i < t->n; i++) {
        const trace_rec_t *r = &t->rows[i];
        if (r->iteration != iteration || !l->shown[r->node]) continue;
        double w_px = (r->t_end_ns - r->t_start_ns) / 1e6 / x_max_ms * TL_PLOT_PX;
        if (w_px < 5.5 * (double)strlen(r->layer) + 6) continue;
        fprintf(g, "%.6f %.2f ", (r->t_start_ns + r->t_end_ns) / 2e6 - t->t0_ns / 1e6,
                row_y(l, t, i));
        put_name(g, r->layer);
        fputc('\n', g);
        bl.labels++;
    }
    fprintf(g, "EOD\n$T%dC << EOD\n", p);
    for (int j = 0; j < t->n_crit; j++) {
        const trace_rec_t *r = &t->rows[t->crit[j]];
        if (!l->shown[r->node]) continue;
        double a = (r->t_start_ns - t->t0_ns) / 1e6, b = (r->t_end_ns - t->t0_ns) / 1e6;
        fprintf(g, "%.6f %.2f %.6f 0.42\n", (a + b) / 2, row_y(l, t, t->crit[j]), (b - a) / 2);
        bl.crit++;
    }
    fprintf(g, "EOD\n$T%dV << EOD\n", p);
    for (int j = 1; j < t->n_crit; j++) {
        const trace_rec_t *a = &t->rows[t->crit[j - 1]], *b = &t->rows[t->crit[j]];
        if (!l->shown[a->node] || !l->shown[b->node]) continue;
        double ya = row_y(l, t, t->crit[j - 1]), yb = row_y(l, t, t->crit[j]);
        if (ya == yb && a->t_end_ns == b->t_start_ns) continue;
        double xa = (a->t_end_ns - t->t0_ns) / 1e6, xb = (b->t_start_ns - t->t0_ns) / 1e6;
        fprintf(g, "%.6f %.2f %.6f %.2f\n", xa, ya, xb - xa, yb - ya);
        bl.joins++;
    }
    fputs("EOD\n", g);
    return bl;
}

/* The axes, lane labels and node separators of one panel. */
static void write_axes(FILE *g, const tl_layout_t *l, double x_max_ms)
{
    fprintf(g, "set xrange [0:%.6f]\nset yrange [0.4:%d.6]\n", x_max_ms, l->n_lanes);
    fputs("set ytics () font ',8'\nunset arrow\n", g);
    for (int node = 0; node < l->n_nodes; node++) {
        if (!l->shown[node]) continue;
        double top = -1;
        for (int lane = 0; lane < LANE_KINDS; lane++) {
            if (!l->present[lane]) continue;
            for (int s = 0; s < (lane == LANE_NET ? l->n_sub : 1); s++) {
                double y = *y_at(l, node, lane, s);
                if (top < 0) top = y;
                if (s == 0)
                    fprintf(g, "set ytics add ('n%d %s' %.2f)\n", node, s_lane_names[lane], y);
            }
        }
        fprintf(g, "set arrow from graph 0, first %.2f to graph 1, first %.2f nohead "
                   "lc rgb '#999999' lw 0.5 back\n", top + 0.5, top + 0.5);
    }
}

/* One panel's plot command; the first panel's key lists every kind of either panel. */
static void write_plot(FILE *g, int p, const tl_blocks_t *bl, unsigned key_kinds,
                       const char *crit_how)
{
    fputs("plot ", g);
    const char *sep = "";
    for (int k = 0; k <= N_KINDS; k++) {
        if (key_kinds & (1u << k)) {
            fprintf(g, "%skeyentry with boxes fs solid 1.0 noborder lc rgb '%s' title '%s'", sep,
                    s_colours[k], k < N_KINDS ? s_kinds[k] : "other");
            sep = ", ";
        }
        if (!(bl->kinds & (1u << k))) continue;
        fprintf(g, "%s$T%dK%d using 1:2:3:4 with boxxyerror fs solid 1.0 noborder "
                   "lc rgb '%s' notitle", sep, p, k, s_colours[k]);
        sep = ", ";
    }
    if (key_kinds)
        fprintf(g, "%skeyentry with boxes fs empty lc rgb 'black' lw 2 title '%s'", sep,
                crit_how);
    if (bl->labels) fprintf(g, ", $T%dL using 1:2:3 with labels font ',7' notitle", p);
    if (bl->crit)
        fprintf(g, ", $T%dC using 1:2:3:4 with boxxyerror fs empty lc rgb 'black' lw 2 notitle", p);
    if (bl->joins)
        fprintf(g, ", $T%dV using 1:2:3:4 with vectors nohead dt 2 lw 1.5 lc rgb 'black' notitle",
                p);
    fputc('\n', g);
}

typedef struct {
    int node;
    const char *op, *layer;
    int64_t a_ns, b_ns;
} tl_diff_t;

static int diff_cmp(const void *x, const void *y)
{
    const tl_diff_t *a = x, *b = y;
    int64_t da = llabs(a->a_ns - a->b_ns), db = llabs(b->a_ns - b->b_ns);
    if (da != db) return da > db ? -1 : 1;
    if (a->node != b->node) return a->node - b->node;
    int c = strcmp(a->op, b->op);
    return c ? c : strcmp(a->layer, b->layer);
}

/* Duration of key (node, op, layer) in the iteration: the rows of the key summed; -1 if none. */
static int64_t key_dur(const tl_trace_t *t, int iteration, const trace_rec_t *k)
{
    int64_t d = -1;
    for (int i = 0; i < t->n; i++) {
        const trace_rec_t *r = &t->rows[i];
        if (r->iteration == iteration && r->node == k->node && !strcmp(r->op, k->op) &&
            !strcmp(r->layer, k->layer))
            d = (d < 0 ? 0 : d) + r->t_end_ns - r->t_start_ns;
    }
    return d;
}

/* The ops of the iteration whose durations differ most between the traces: `top` of them,
 * as a table on f. */
static void print_diffs(FILE *f, const tl_trace_t *a, const tl_trace_t *b, int iteration, int top)
{
    tl_diff_t *v = xmalloc((size_t)(a->n ? a->n : 1) * sizeof *v);
    int n = 0, only_a = 0;
    for (int i = 0; i < a->n; i++) {
        const trace_rec_t *r = &a->rows[i];
        if (r->iteration != iteration) continue;
        int seen = 0; /* the first row of its key only */
        for (int j = 0; j < i && !seen; j++)
            seen = a->rows[j].iteration == iteration && a->rows[j].node == r->node &&
                   !strcmp(a->rows[j].op, r->op) && !strcmp(a->rows[j].layer, r->layer);
        if (seen) continue;
        int64_t db = key_dur(b, iteration, r);
        if (db < 0) {
            only_a++;
            continue;
        }
        v[n++] = (tl_diff_t){r->node, r->op, r->layer, key_dur(a, iteration, r), db};
    }
    qsort(v, (size_t)n, sizeof *v, diff_cmp);
    fprintf(f, "ops of iteration %d whose durations differ most (%d joined on node, op, layer; "
               "%d in %s alone):\n", iteration, n, only_a, a->path);
    fprintf(f, "%5s %-10s %-24s %12s %12s %12s\n", "node", "op", "layer", "top_ms", "bottom_ms",
            "diff_ms");
    for (int i = 0; i < n && i < top; i++)
        fprintf(f, "%5d %-10s %-24s %12.3f %12.3f %+12.3f\n", v[i].node, v[i].op, v[i].layer,
                v[i].a_ns / 1e6, v[i].b_ns / 1e6, (v[i].a_ns - v[i].b_ns) / 1e6);
    free(v);
}

/* Time along the critical path per op kind, and the gaps between its ops. */
static void print_path(FILE *f, const tl_trace_t *t, int iteration, const char *how)
{
    double kind_ms[N_KINDS + 1] = {0}, gap_ms = 0;
    int kind_n[N_KINDS + 1] = {0};
    for (int j = 0; j < t->n_crit; j++) {
        const trace_rec_t *r = &t->rows[t->crit[j]];
        int k = kind_index(r->op);
        kind_ms[k] += (r->t_end_ns - r->t_start_ns) / 1e6;
        kind_n[k]++;
        if (j > 0) {
            int64_t g = r->t_start_ns - t->rows[t->crit[j - 1]].t_end_ns;
            if (g > 0) gap_ms += g / 1e6;
        }
    }
    fprintf(f, "%s: iteration %d spans %.3f ms; critical path (%s) of %d ops:", t->path,
            iteration, (t->t1_ns - t->t0_ns) / 1e6, how, t->n_crit);
    for (int k = 0; k <= N_KINDS; k++)
        if (kind_n[k]) fprintf(f, " %s %d/%.3f ms", k < N_KINDS ? s_kinds[k] : "other", kind_n[k],
                               kind_ms[k]);
    fprintf(f, ", waits between them %.3f ms\n", gap_ms);
    if (t->before >= 0) {
        const trace_rec_t *b = &t->rows[t->before];
        fprintf(f, "  its first op waited for %s %s of node %d, iteration %d, which ended at "
                   "%.3f ms (0: the iteration's first start)\n", b->op, b->layer, b->node,
                b->iteration, (b->t_end_ns - t->t0_ns) / 1e6);
    }
}

/* The plan of the job file, for a trace of n_nodes nodes: the first configuration of the
 * experiment (opened as `poseidon sim` opens it, overrides checked) with that many nodes.
 * Returns 0 with *p and *m filled, or -1 after saying why. */
static int job_plan(const timeline_opts_t *o, int n_nodes, plan_t *p, model_t *m)
{
    experiment_t e;
    char err[2048];
    if (experiment_open(0, NULL, o->job, o->sets, o->n_sets, &e, m)) return -1;
    for (int i = 0; i < experiment_config_count(&e); i++) {
        cluster_t c;
        plan_opts_t po;
        job_config(&e, i, NULL, &c, &po);
        if (c.nodes != n_nodes) continue;
        if (plan_build_opts(p, m, &c, &po, err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", o->job, err);
            model_fini(m);
            return -1;
        }
        return 0;
    }
    fprintf(stderr, "poseidon report timeline: %s: no configuration of %d nodes (the trace's)\n",
            o->job, n_nodes);
    model_fini(m);
    return -1;
}

/* Reads a trace file; -1 after naming the file (and line) on stderr. */
static int read_rows(const char *path, trace_rec_t **rows)
{
    char err[1200];
    int n = trace_file_read(path, 1, rows, err, sizeof err);
    if (n < 0) fprintf(stderr, "poseidon report: %s\n", err);
    return n < 0 ? -1 : n;
}

static int load_trace(tl_trace_t *t, const char *path, int iteration, const plan_t *plan)
{
    memset(t, 0, sizeof *t);
    t->path = path;
    t->before = -1;
    t->n = read_rows(path, &t->rows);
    if (t->n < 0) return -1;
    if (!has_iteration(t->rows, t->n, iteration)) {
        fprintf(stderr, "poseidon report timeline: %s: no rows of iteration %d\n", path, iteration);
        return -1;
    }
    t->t0_ns = INT64_MAX;
    t->t1_ns = INT64_MIN;
    for (int i = 0; i < t->n; i++) {
        const trace_rec_t *r = &t->rows[i];
        if (r->iteration != iteration) continue;
        if (r->t_start_ns < t->t0_ns) t->t0_ns = r->t_start_ns;
        if (r->t_end_ns > t->t1_ns) t->t1_ns = r->t_end_ns;
    }
    if (plan) {
        char err[512];
        t->n_crit = critpath_plan(plan, t->rows, t->n, iteration, &t->crit, &t->before, err,
                                  sizeof err);
        if (t->n_crit < 0) {
            fprintf(stderr, "poseidon report timeline: %s: %s\n", path, err);
            return -1;
        }
    } else {
        t->n_crit = critpath_rows(t->rows, t->n, iteration, &t->crit, &t->before);
    }
    return 0;
}

/* One drawing: what report_timeline gathers before it writes the gnuplot program. */
typedef struct {
    const timeline_opts_t *o;
    int n_nodes, iteration, n_tr, have_plan;
    plan_t plan;
    model_t model;
    tl_trace_t tr[2];
    unsigned char *shown; /* per node: drawn */
    tl_layout_t l;
    double x_max_ms;      /* the time axis: the longer iteration, and a margin */
} tl_run_t;

static void tl_run_free(tl_run_t *r)
{
    for (int k = 0; k < 2; k++) tl_trace_free(&r->tr[k]);
    free(r->l.y);
    free(r->shown);
    if (r->have_plan) {
        plan_fini(&r->plan);
        model_fini(&r->model);
    }
}

/* The node count of the drawn trace and the iteration drawn (the option's, else the middle
 * one: past the warm-up, not the short last one). Returns 0, or -1 after saying why. */
static int tl_pick_iteration(tl_run_t *r)
{
    trace_rec_t *probe = NULL;
    int n_probe = read_rows(r->o->trace, &probe);
    if (n_probe < 0) return -1;
    r->n_nodes = max_node(probe, n_probe) + 1;
    r->iteration = r->o->iteration;
    if (r->iteration < 0) {
        int last = 0;
        for (int i = 0; i < n_probe; i++)
            if (probe[i].iteration > last) last = probe[i].iteration;
        r->iteration = (last + 1) / 2;
    }
    free(probe);
    return 0;
}

/* The job's plan (when given), both traces with their critical paths, the nodes drawn.
 * Returns 0, or -1 after saying why. */
static int tl_load(tl_run_t *r)
{
    const timeline_opts_t *o = r->o;
    r->shown = xcalloc((size_t)r->n_nodes, 1);
    r->l = (tl_layout_t){.n_nodes = r->n_nodes, .shown = r->shown};
    if (o->job) {
        if (job_plan(o, r->n_nodes, &r->plan, &r->model)) return -1;
        r->have_plan = 1;
    }
    r->n_tr = o->other ? 2 : 1;
    for (int k = 0; k < r->n_tr; k++)
        if (load_trace(&r->tr[k], k ? o->other : o->trace, r->iteration,
                       r->have_plan ? &r->plan : NULL))
            return -1;
    int other_nodes = max_node(r->tr[1].rows, r->tr[1].n) + 1;
    if (r->n_tr == 2 && other_nodes != r->n_nodes) {
        fprintf(stderr, "poseidon report timeline: %s has %d nodes, %s %d: not the same plan\n",
                o->trace, r->n_nodes, o->other, other_nodes);
        return -1;
    }
    if (o->nodes) return nodes_parse(o->nodes, r->n_nodes, r->shown);
    memset(r->shown, 1, (size_t)r->n_nodes);
    return 0;
}

/* The lanes both panels share and the time axis. */
static void tl_measure(tl_run_t *r)
{
    r->x_max_ms = 0;
    for (int k = 0; k < r->n_tr; k++) {
        const tl_trace_t *t = &r->tr[k];
        int s = pack_sends(&r->tr[k], r->iteration, r->n_nodes);
        if (s > r->l.n_sub) r->l.n_sub = s;
        for (int i = 0; i < t->n; i++)
            if (t->rows[i].iteration == r->iteration && r->shown[t->rows[i].node])
                r->l.present[lane_of(t->rows[i].op)] = 1;
        double span = (t->t1_ns - t->t0_ns) / 1e6;
        if (span > r->x_max_ms) r->x_max_ms = span;
    }
    if (r->x_max_ms <= 0) r->x_max_ms = 1e-3;
    r->x_max_ms *= 1.01;
    r->l.present[LANE_COMPUTE] = 1;
    layout_build(&r->l);
}

/* The gnuplot program of the drawing (malloc'ed; the caller frees). */
static char *tl_program(const tl_run_t *r, int svg)
{
    const char *how = r->have_plan ? "critical path (plan edges)" : "critical path (trace rows)";
    int panel_px = 150 + r->l.n_lanes * TL_LANE_PX, n_tr = r->n_tr;
    if (panel_px < 420) panel_px = 420;
    char *prog = NULL;
    size_t prog_len = 0;
    FILE *g = open_memstream(&prog, &prog_len);
    if (!g) die("report: open_memstream: %s", strerror(errno));
    fprintf(g, "set terminal %s size %d,%d %sfont 'sans,10' noenhanced\n",
            svg ? "svg" : "pngcairo", TL_WIDTH_PX, panel_px * n_tr, svg ? "dynamic " : "");
    fprintf(g, "set output '%s'\n", r->o->out);
    tl_blocks_t bl[2] = {{0}};
    for (int k = 0; k < n_tr; k++)
        bl[k] = write_blocks(g, &r->tr[k], &r->l, k, r->iteration, r->x_max_ms);
    fputs("set xlabel \"time since the iteration's first op started (ms)\"\n"
          "set grid xtics lc rgb '#dddddd'\nset ytics scale 0\nset xtics nomirror\n"
          "set lmargin at screen 0.085\nset rmargin at screen 0.985\n", g);
    if (n_tr == 2) fputs("set multiplot layout 2,1\n", g);
    int shown_n = 0;
    for (int i = 0; i < r->n_nodes; i++) shown_n += r->shown[i];
    for (int k = 0; k < n_tr; k++) {
        write_axes(g, &r->l, r->x_max_ms);
        if (k == 0)
            fputs("set key outside top center horizontal samplen 2 spacing 1.1 maxrows 2\n", g);
        else
            fputs("unset key\n", g);
        fprintf(g, "set title \"%s: iteration %d, %d of %d nodes, %.3f ms\"\n", r->tr[k].path,
                r->iteration, shown_n, r->n_nodes, (r->tr[k].t1_ns - r->tr[k].t0_ns) / 1e6);
        write_plot(g, k, &bl[k], k == 0 ? bl[0].kinds | bl[1].kinds : 0, how);
    }
    if (n_tr == 2) fputs("unset multiplot\n", g);
    fputs("unset output\n", g);
    fclose(g);
    return prog;
}

int report_timeline(const timeline_opts_t *o, FILE *table, FILE *msg)
{
    int svg = paths_ends_with(o->out, ".svg");
    if (!svg && !paths_ends_with(o->out, ".png")) {
        fprintf(stderr, "poseidon report timeline: -o %s: expected a .png or .svg file\n", o->out);
        return 2;
    }
    tl_run_t r = {.o = o};
    if (tl_pick_iteration(&r)) return 2;
    int rc = 2;
    if (tl_load(&r)) goto out;
    tl_measure(&r);
    if (outfile_make_parents(o->out) != 0) {
        fprintf(stderr, "poseidon report timeline: %s: cannot create its folder: %s\n", o->out,
                strerror(errno));
        goto out;
    }
    char *prog = tl_program(&r, svg);
    rc = gnuplot_run(prog) ? 1 : 0;
    free(prog);
    if (rc) goto out;
    for (int k = 0; k < r.n_tr; k++)
        print_path(table, &r.tr[k], r.iteration, r.have_plan ? "plan edges" : "trace rows");
    if (r.n_tr == 2) print_diffs(table, &r.tr[0], &r.tr[1], r.iteration, o->top);
    if (msg) fprintf(msg, "wrote %s (%d lanes)\n", o->out, r.l.n_lanes);
out:
    tl_run_free(&r);
    return rc;
}
