/* poseidon report: plots and tables from the CSVs the simulator and the runtime write.
 *   speedup SIM.csv --out PREFIX   speedup versus nodes per scheme (and bandwidth), with the
 *                                  ideal line, from `poseidon sim --csv`: gnuplot writes
 *                                  PREFIX.png and PREFIX.svg (the plot reads the CSV only)
 *   train TRAIN.csv --out PREFIX   loss and accuracies versus epochs, from `poseidon train --csv`
 *   timeline TRACE.csv ...         one iteration as lanes per node (cli/cmd_report_timeline.c)
 *   html DIR                       one page per study (cli/report_html.c)
 *   compare SIM.csv REAL.csv       joins two traces (core/trace.h) on (node, iteration, op,
 *                                  layer) and prints per op kind the mean predicted and
 *                                  measured durations and their relative error
 * Bad input (unreadable file, wrong header, malformed row) is reported as file:line and
 * exits 2.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/report.h"
#include "cli/report_gnuplot.h"
#include "core/check.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/outfile.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon report speedup SIM.csv --out PREFIX\n"
            "       poseidon report train TRAIN.csv --out PREFIX\n"
            "       poseidon report compare SIM_TRACE.csv REAL_TRACE.csv [--from-iteration I]\n"
            "                                [--csv FILE]\n"
            "       poseidon report timeline TRACE.csv [--compare OTHER.csv] [options]\n"
            "                                (poseidon report timeline --help)\n"
            "       poseidon report html DIR [-o OUT.html]\n\n"
            "speedup: speedup over one node versus nodes, a line per scheme and bandwidth, and\n"
            "  the ideal (linear) line, from `poseidon sim --csv` (columns nodes, gbps, scheme,\n"
            "  speedup); gnuplot writes PREFIX.png and PREFIX.svg.\n"
            "train: loss, training and test accuracy versus epochs, from `poseidon train --csv`\n"
            "  (one worker or distributed); PREFIX.png and PREFIX.svg.\n"
            "html: one self-contained page for a study folder (an experiment's outputs, a\n"
            "  validation run, the demo's): commands.txt, the *.exp and *.cluster files, the\n"
            "  plots of its CSVs (speedup or bandwidth, training, validation, the timelines of\n"
            "  its traces; two traces drawn together) as inline SVG, and every CSV as a table;\n"
            "  default OUT: DIR/report.html.\n"
            "compare: joins a simulated and a real trace (node,iteration,op,layer,peer,bytes,\n"
            "  t_start_ns,t_end_ns; from `poseidon sim --trace` and `poseidon train --trace`)\n"
            "  on (node, iteration, op, layer), iterations >= I only (default 1: the first is\n"
            "  a warm-up), and prints per op kind: rows joined, mean predicted and measured\n"
            "  duration, error = (predicted - measured) / measured of the sums, and the rows\n"
            "  found on one side only. Several rows of one key (APPLY per KV block) are\n"
            "  summed. --csv also writes the table as CSV.\n");
}

/* ----------------------------------------------------------------------- speedup */

/* Distinct values of a column (1-based) of a CSV, in order of first appearance. */
typedef struct {
    int n;
    char v[64][64];
} distinct_t;

static void distinct_add(distinct_t *d, const char *s)
{
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->v[i], s)) return;
    if (d->n < 64) snprintf(d->v[d->n++], sizeof d->v[0], "%s", s);
}

/* Field k (0-based) of a CSV line into buf. Returns 0, or -1 when the line has fewer. */
static int csv_field(const char *line, int k, char *buf, size_t len)
{
    const char *p = line;
    for (int i = 0; i < k; i++) {
        p = strchr(p, ',');
        if (!p) return -1;
        p++;
    }
    size_t n = strcspn(p, ",\r\n");
    if (n >= len) n = len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 0;
}

/* PREFIX.png and PREFIX.svg (their folder made first): gnuplot runs `setup`, then `plot`
 * once per format. Returns 0, or 1 or 2 after saying why. */
static int gnuplot_png_svg(const char *setup, const char *plot, const char *prefix)
{
    if (outfile_make_parents(prefix) != 0) {
        fprintf(stderr, "poseidon report: %s: cannot create its folder: %s\n", prefix,
                strerror(errno));
        return 2;
    }
    char *prog = NULL;
    size_t prog_len = 0;
    FILE *g = open_memstream(&prog, &prog_len);
    if (!g) die("report: open_memstream: %s", strerror(errno));
    fprintf(g, "%s\nset terminal pngcairo size 800,560\nset output '%s.png'\n%s\nunset output\n"
               "set terminal svg size 800,560 dynamic\nset output '%s.svg'\n%s\nunset output\n",
            setup, prefix, plot, prefix, plot);
    fclose(g);
    int rc = gnuplot_run(prog);
    free(prog);
    return rc;
}

int report_speedup(const char *csv, const char *prefix, FILE *msg)
{
    FILE *f = fopen(csv, "r");
    if (!f) {
        fprintf(stderr, "poseidon report: %s: cannot read: %s\n", csv, strerror(errno));
        return 2;
    }
    char line[4096];
    int lineno = 0, rows = 0, max_nodes = 1;
    distinct_t schemes = {0}, gbps = {0};
    if (!fgets(line, sizeof line, f) || strncmp(line, "model,nodes,gbps,scheme,", 24) != 0 ||
        !strstr(line, ",speedup,")) {
        fprintf(stderr, "poseidon report: %s:1: expected the header of poseidon sim --csv "
                        "(model,nodes,gbps,scheme,...,speedup,...)\n", csv);
        fclose(f);
        return 2;
    }
    lineno = 1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char nodes[32], g[64], s[64], sp[64];
        if (csv_field(line, 1, nodes, sizeof nodes) || csv_field(line, 2, g, sizeof g) ||
            csv_field(line, 3, s, sizeof s) || csv_field(line, 8, sp, sizeof sp) ||
            atoi(nodes) < 1) {
            fprintf(stderr, "poseidon report: %s:%d: expected a row of poseidon sim --csv\n",
                    csv, lineno);
            fclose(f);
            return 2;
        }
        if (atoi(nodes) > max_nodes) max_nodes = atoi(nodes);
        distinct_add(&schemes, s);
        distinct_add(&gbps, g);
        rows++;
    }
    fclose(f);
    if (!rows) {
        fprintf(stderr, "poseidon report: %s: no rows\n", csv);
        return 2;
    }
    char setup[1024], *plot = NULL;
    snprintf(setup, sizeof setup,
             "set datafile separator ','\n"
             "set key outside right top box\nset grid\n"
             "set xlabel 'nodes'\nset ylabel 'speedup over 1 node (images/s)'\n"
             "set title 'Simulated weak scaling: %s'\n"
             "set logscale xy 2\nset xrange [1:%d]\nset yrange [0.5:%d]\n"
             "sel(s, g) = (strcol(4) eq s && strcol(3) eq g) ? $9 : NaN",
             csv, max_nodes * 2, max_nodes * 2);
    size_t plot_len = 0;
    FILE *g = open_memstream(&plot, &plot_len);
    if (!g) die("report: open_memstream: %s", strerror(errno));
    fprintf(g, "plot x title 'ideal' with lines dt 2 lc rgb 'gray'");
    for (int i = 0; i < schemes.n; i++)
        for (int j = 0; j < gbps.n; j++)
            fprintf(g, ", '%s' using 2:(sel('%s', '%s')) skip 1 with linespoints lc %d pt %d "
                       "dt %d title '%s %s Gbit/s'",
                    csv, schemes.v[i], gbps.v[j], i + 1, 7 - (j % 2), j + 1, schemes.v[i],
                    gbps.v[j]);
    fclose(g);
    int rc = gnuplot_png_svg(setup, plot, prefix);
    free(plot);
    if (rc) return rc;
    if (msg)
        fprintf(msg, "wrote %s.png and %s.svg (%d rows, %d schemes, %d bandwidths)\n", prefix,
                prefix, rows, schemes.n, gbps.n);
    return 0;
}

/* ----------------------------------------------------------------------- train */

/* Index of column `name` in a CSV header line, or -1. */
static int csv_column(const char *header, const char *name)
{
    char field[64];
    for (int k = 0; csv_field(header, k, field, sizeof field) == 0; k++)
        if (!strcmp(field, name)) return k;
    return -1;
}

/* Loss and accuracies versus epochs, from `poseidon train --csv` (one worker or many). */
int report_train(const char *csv, const char *prefix, FILE *msg)
{
    FILE *f = fopen(csv, "r");
    if (!f) {
        fprintf(stderr, "poseidon report: %s: cannot read: %s\n", csv, strerror(errno));
        return 2;
    }
    char header[1024], line[1024];
    int c_epoch = -1, c_loss = -1, c_train = -1, c_test = -1;
    if (fgets(header, sizeof header, f)) {
        c_epoch = csv_column(header, "epoch");
        c_loss = csv_column(header, "loss");
        c_train = csv_column(header, "train_acc");
        c_test = csv_column(header, "test_acc");
    }
    if (c_epoch < 0 || c_loss < 0 || c_train < 0 || c_test < 0) {
        fprintf(stderr, "poseidon report: %s:1: expected the header of poseidon train --csv "
                        "(epoch,...,loss,train_acc,test_acc,...)\n", csv);
        fclose(f);
        return 2;
    }
    int rows = 0, lineno = 1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char e[64];
        char *end;
        if (csv_field(line, c_test, e, sizeof e) || csv_field(line, c_epoch, e, sizeof e) ||
            (strtod(e, &end), end == e)) {
            fprintf(stderr, "poseidon report: %s:%d: expected a row of poseidon train --csv\n",
                    csv, lineno);
            fclose(f);
            return 2;
        }
        rows++;
    }
    fclose(f);
    if (!rows) {
        fprintf(stderr, "poseidon report: %s: no rows\n", csv);
        return 2;
    }
    char setup[1024], plot[2048];
    /* an empty field (a row without evaluation) is a missing point */
    snprintf(setup, sizeof setup,
             "set datafile separator ','\nset datafile missing ''\n"
             "set key below horizontal box\nset grid\n"
             "set xlabel 'epoch'\nset ylabel 'training loss'\nset y2label 'accuracy'\n"
             "set ytics nomirror\nset y2tics\nset y2range [0:1]\n"
             "set title 'Training: %s'", csv);
    /* gnuplot numbers columns from 1 */
    snprintf(plot, sizeof plot,
             "plot '%s' using %d:%d skip 1 with linespoints pt 7 title 'loss', "
             "'%s' using %d:%d skip 1 axes x1y2 with linespoints pt 6 title 'train accuracy', "
             "'%s' using %d:%d skip 1 axes x1y2 with linespoints pt 5 title 'test accuracy'",
             csv, c_epoch + 1, c_loss + 1, csv, c_epoch + 1, c_train + 1, csv, c_epoch + 1,
             c_test + 1);
    int rc = gnuplot_png_svg(setup, plot, prefix);
    if (rc) return rc;
    if (msg) fprintf(msg, "wrote %s.png and %s.svg (%d rows)\n", prefix, prefix, rows);
    return 0;
}

/* ----------------------------------------------------------------------- compare */

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
    int n_recs = trace_file_read(path, &recs);
    if (n_recs < 0) return -1;
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

static int report_compare(const char *sim_path, const char *real_path, int from,
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

int cmd_report(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 3) {
        usage(stderr);
        return 2;
    }
    log_banner(argc, argv, 0);
    if (!strcmp(argv[1], "timeline")) return cmd_report_timeline(argc - 1, argv + 1);
    if (!strcmp(argv[1], "html")) return cmd_report_html(argc - 1, argv + 1);
    if (!strcmp(argv[1], "speedup") || !strcmp(argv[1], "train")) {
        const char *out = NULL;
        for (int i = 3; i < argc; i++) {
            if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
            else {
                fprintf(stderr, "poseidon report %s: unknown option '%s'\n", argv[1], argv[i]);
                return 2;
            }
        }
        if (!out) {
            fprintf(stderr, "poseidon report %s: --out PREFIX is required\n", argv[1]);
            return 2;
        }
        return !strcmp(argv[1], "speedup") ? report_speedup(argv[2], out, stdout)
                                           : report_train(argv[2], out, stdout);
    }
    if (!strcmp(argv[1], "compare")) {
        if (argc < 4) {
            usage(stderr);
            return 2;
        }
        int from = 1;
        const char *csv = NULL;
        for (int i = 4; i < argc; i++) {
            if (!strcmp(argv[i], "--from-iteration") && i + 1 < argc) {
                if (flag_int32("report compare", argv[i], argv[i + 1], 0, INT32_MAX, &from))
                    return 2;
                i++;
            } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) {
                csv = argv[++i];
            } else {
                fprintf(stderr, "poseidon report compare: unknown option '%s'\n", argv[i]);
                return 2;
            }
        }
        return report_compare(argv[2], argv[3], from, csv);
    }
    fprintf(stderr, "poseidon report: unknown report '%s' (speedup, train, compare, timeline, html)\n", argv[1]);
    return 2;
}
