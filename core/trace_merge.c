#include "trace_merge.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "outfile.h"
#include "trace.h"
#include "trace_read.h"

/* A group's rows are keyed by (node, iteration, layer). */
static int rec_cmp(const void *a, const void *b)
{
    const trace_rec_t *x = a, *y = b;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    if (x->iteration != y->iteration) return x->iteration < y->iteration ? -1 : 1;
    return strcmp(x->layer, y->layer);
}

typedef struct {
    trace_rec_t *v;
    int64_t n, cap;
} rec_list_t;

static void rec_push(rec_list_t *l, const trace_rec_t *r)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->v = xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n++] = *r;
}

/* One merged row into both files (CSV and Chrome/Perfetto JSON). */
static void emit(trace_t *out, const trace_rec_t *r)
{
    trace_row_t row = {r->node, r->iteration, r->op, r->layer, r->peer, r->bytes,
                       r->t_start_ns, r->t_end_ns, trace_lane_of_op(r->op)};
    trace_write(out, &row);
}

/* Ends each own row of a transfer group at the last arrival of its bytes at another node;
 * a row without arrivals elsewhere (a push to the rank's own shard only, or a rank whose
 * file was not readable) stays as the rank wrote it. */
static void end_at_arrivals(trace_t *out, rec_list_t *own, rec_list_t *arrive)
{
    if (arrive->n) qsort(arrive->v, (size_t)arrive->n, sizeof *arrive->v, rec_cmp);
    for (int64_t i = 0; i < own->n; i++) {
        trace_rec_t g = own->v[i];
        const trace_rec_t *a =
            arrive->n ? bsearch(&g, arrive->v, (size_t)arrive->n, sizeof *arrive->v, rec_cmp)
                      : NULL;
        if (a) {
            int64_t last = -1;
            while (a > arrive->v && !rec_cmp(a - 1, &g)) a--;
            for (; a < arrive->v + arrive->n && !rec_cmp(a, &g); a++)
                if (a->peer != g.node && a->t_end_ns > last) last = a->t_end_ns;
            if (last >= 0) g.t_end_ns = last > g.t_start_ns ? last : g.t_start_ns;
        }
        emit(out, &g);
    }
}

int trace_merge_ranks(const char *prefix, int world, char *err, size_t errlen)
{
    char path[1100];
    trace_t *out = trace_open(prefix, err, errlen);
    if (!out) return -1;
    enum { PULL, PUSH_OWN, PUSH_ARRIVE, SFB_OWN, SFB_ARRIVE, N_KEPT };
    rec_list_t kept[N_KEPT] = {{0}};
    int rc = 0;
    for (int r = 0; r < world && rc == 0; r++) {
        snprintf(path, sizeof path, "%s-rank%d.csv", prefix, r);
        trace_rec_t *rows;
        int n = trace_file_read(path, 0, &rows, err, errlen);
        if (n == -1) {
            log_warn("trace: %s not readable here (another host?): not merged", path);
            continue;
        }
        if (n < 0) {
            rc = -1;
            break;
        }
        for (int i = 0; i < n; i++) {
            const trace_rec_t *m = &rows[i];
            int k = -1;
            if (!strcmp(m->op, "PULL")) k = PULL;
            else if (!strcmp(m->op, "PUSH")) k = m->peer >= 0 ? PUSH_ARRIVE : PUSH_OWN;
            else if (!strcmp(m->op, "SFB")) k = m->peer >= 0 ? SFB_ARRIVE : SFB_OWN;
            if (k < 0) emit(out, m);
            else rec_push(&kept[k], m);
        }
        free(rows);
    }
    rec_list_t *pull = &kept[PULL];
    if (pull->n) qsort(pull->v, (size_t)pull->n, sizeof *pull->v, rec_cmp);
    for (int64_t i = 0, j; i < pull->n; i = j) {
        trace_rec_t g = pull->v[i];
        for (j = i + 1; j < pull->n && !rec_cmp(&pull->v[j], &g); j++) {
            g.bytes += pull->v[j].bytes;
            if (pull->v[j].t_start_ns < g.t_start_ns) g.t_start_ns = pull->v[j].t_start_ns;
            if (pull->v[j].t_end_ns > g.t_end_ns) g.t_end_ns = pull->v[j].t_end_ns;
            g.peer = -1;
        }
        emit(out, &g);
    }
    end_at_arrivals(out, &kept[PUSH_OWN], &kept[PUSH_ARRIVE]);
    end_at_arrivals(out, &kept[SFB_OWN], &kept[SFB_ARRIVE]);
    for (int k = 0; k < N_KEPT; k++) free(kept[k].v);
    if (trace_close(&out) && rc == 0) {
        snprintf(err, errlen, "error writing %s.csv or %s.json", prefix, prefix);
        rc = -1;
    }
    return rc;
}
