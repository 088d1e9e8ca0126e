#include "reports/compare.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/outfile.h"
#include "core/trace.h"
#include "core/trace_read.h"

typedef struct {
    int node, iteration;
    char op[TRACE_OP_MAX];
    char layer[TRACE_LAYER_MAX];
    double dur_ns; /* summed over the rows of this key */
    int rows;
} trow_t;

static int trow_cmp(const void *a, const void *b)
{
    const trow_t *x = a, *y = b;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    if (x->iteration != y->iteration) return x->iteration < y->iteration ? -1 : 1;
    int c = strcmp(x->op, y->op);
    return c ? c : strcmp(x->layer, y->layer);
}

/* Reads a trace CSV: rows of iteration >= from, one per key (durations summed), sorted.
 * Returns the count, or -1 with a message. */
static int trace_read(const char *path, int from, trow_t **out)
{
    trace_rec_t *recs;
    char err[1200];
    int n_recs = trace_file_read(path, 1, &recs, err, sizeof err);
    if (n_recs < 0) {
        fprintf(stderr, "poseidon report: %s\n", err);
        return -1;
    }
    trow_t *v = xcalloc((size_t)n_recs + 1, sizeof *v);
    int n = 0;
    for (int i = 0; i < n_recs; i++) {
        const trace_rec_t *rec = &recs[i];
        if (rec->iteration < from) continue;
        trow_t r = {.node = rec->node, .iteration = rec->iteration,
                    .dur_ns = (double)(rec->t_end_ns - rec->t_start_ns), .rows = 1};
        snprintf(r.op, sizeof r.op, "%s", rec->op);
        snprintf(r.layer, sizeof r.layer, "%s", rec->layer);
        v[n++] = r;
    }
    free(recs);
    if (n) qsort(v, (size_t)n, sizeof *v, trow_cmp);
    int k = 0; /* sum the rows of one key */
    for (int i = 0; i < n; i++) {
        if (k && !trow_cmp(&v[k - 1], &v[i])) {
            v[k - 1].dur_ns += v[i].dur_ns;
            v[k - 1].rows++;
        } else {
            v[k++] = v[i];
        }
    }
    *out = v;
    return k;
}

typedef struct {
    char op[16];
    int joined, sim_only, real_only;
    double sim_ns, real_ns;
} opstat_t;

static opstat_t *opstat(opstat_t *s, int *n, const char *op)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(s[i].op, op)) return &s[i];
    ASSERT(*n < 32, "more than 32 op kinds");
    memset(&s[*n], 0, sizeof s[*n]);
    snprintf(s[*n].op, sizeof s[*n].op, "%s", op);
    return &s[(*n)++];
}

int report_compare(const char *sim_path, const char *real_path, int from,
                          const char *csv_out)
{
    trow_t *a = NULL, *b = NULL;
    int na = trace_read(sim_path, from, &a);
    if (na < 0) return 2;
    int nb = trace_read(real_path, from, &b);
    if (nb < 0) {
        free(a);
        return 2;
    }
    opstat_t st[32];
    int ns = 0;
    for (int i = 0, j = 0; i < na || j < nb;) {
        int c = i >= na ? 1 : j >= nb ? -1 : trow_cmp(&a[i], &b[j]);
        if (c == 0) {
            opstat_t *s = opstat(st, &ns, a[i].op);
            s->joined++;
            s->sim_ns += a[i].dur_ns;
            s->real_ns += b[j].dur_ns;
            i++, j++;
        } else if (c < 0) {
            opstat(st, &ns, a[i++].op)->sim_only++;
        } else {
            opstat(st, &ns, b[j++].op)->real_only++;
        }
    }
    FILE *cf = NULL;
    if (csv_out && !(cf = outfile_open(csv_out, "w"))) {
        fprintf(stderr, "poseidon report: %s: cannot write: %s\n", csv_out, strerror(errno));
        free(a);
        free(b);
        return 2;
    }
    if (cf) fprintf(cf, "op,joined,predicted_ms,measured_ms,error,sim_only,real_only\n");
    printf("%s (predicted) joined with %s (measured), iterations >= %d\n", sim_path, real_path,
           from);
    printf("%-10s %7s %13s %13s %8s %9s %9s\n", "op", "joined", "predicted_ms", "measured_ms",
           "error", "sim_only", "real_only");
    for (int i = 0; i < ns; i++) {
        const opstat_t *s = &st[i];
        double p = s->joined ? s->sim_ns / s->joined / 1e6 : 0;
        double m = s->joined ? s->real_ns / s->joined / 1e6 : 0;
        double e = s->real_ns > 0 ? (s->sim_ns - s->real_ns) / s->real_ns : 0;
        printf("%-10s %7d %13.3f %13.3f %+7.1f%% %9d %9d\n", s->op, s->joined, p, m, e * 100,
               s->sim_only, s->real_only);
        if (cf) fprintf(cf, "%s,%d,%.6f,%.6f,%.6f,%d,%d\n", s->op, s->joined, p, m, e,
                        s->sim_only, s->real_only);
    }
    free(a);
    free(b);
    if (cf && fclose(cf)) {
        fprintf(stderr, "poseidon report: error writing %s\n", csv_out);
        return 1;
    }
    return 0;
}
