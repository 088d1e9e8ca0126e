#include "reports/speedup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "reports/csv.h"
#include "reports/gnuplot.h"

int report_sim_csv_header(const char *header)
{
    return !strncmp(header, "model,nodes,gbps,scheme,", 24) && strstr(header, ",speedup,");
}

/* The columns the plots read (0-based), found by name. */
typedef struct {
    int nodes, gbps, scheme, speedup;
} sim_cols_t;

static void sim_cols(const csv_t *c, sim_cols_t *k)
{
    k->nodes = csv_column(c, "nodes");
    k->gbps = csv_column(c, "gbps");
    k->scheme = csv_column(c, "scheme");
    k->speedup = csv_column(c, "speedup");
}

/* What the speedup plot needs of the CSV: its columns, largest node count, schemes and
 * bandwidths. Returns the row count, or -1 after naming the file (and line) on stderr. */
static int sim_csv_scan(const char *path, sim_cols_t *k, int *max_nodes, csv_distinct_t *schemes,
                        csv_distinct_t *gbps)
{
    csv_t c;
    if (csv_open(&c, path)) {
        fprintf(stderr, "poseidon report: %s: cannot read: %s\n", path, strerror(errno));
        return -1;
    }
    if (!report_sim_csv_header(c.header)) {
        fprintf(stderr, "poseidon report: %s:1: expected the header of poseidon sim --csv "
                        "(model,nodes,gbps,scheme,...,speedup,...)\n", path);
        csv_close(&c);
        return -1;
    }
    sim_cols(&c, k);
    int rows = 0;
    *max_nodes = 1;
    while (csv_next(&c)) {
        char nodes[32], g[CSV_VALUE_MAX], s[CSV_VALUE_MAX], sp[CSV_VALUE_MAX];
        if (csv_get(&c, k->nodes, nodes, sizeof nodes) || csv_get(&c, k->gbps, g, sizeof g) ||
            csv_get(&c, k->scheme, s, sizeof s) || csv_get(&c, k->speedup, sp, sizeof sp) ||
            atoi(nodes) < 1) {
            fprintf(stderr, "poseidon report: %s:%d: expected a row of poseidon sim --csv\n",
                    path, c.line_no);
            csv_close(&c);
            return -1;
        }
        if (atoi(nodes) > *max_nodes) *max_nodes = atoi(nodes);
        csv_distinct_add(schemes, s);
        csv_distinct_add(gbps, g);
        rows++;
    }
    csv_close(&c);
    if (!rows) fprintf(stderr, "poseidon report: %s: no rows\n", path);
    return rows ? rows : -1;
}

int report_speedup(const char *csv, const char *prefix, FILE *msg)
{
    sim_cols_t k;
    int max_nodes;
    csv_distinct_t schemes = {0}, gbps = {0};
    int rows = sim_csv_scan(csv, &k, &max_nodes, &schemes, &gbps);
    if (rows < 0) return 2;
    /* gnuplot numbers columns from 1 */
    char setup[1024], *plot = NULL;
    snprintf(setup, sizeof setup,
             "set datafile separator ','\n"
             "set key outside right top box\nset grid\n"
             "set xlabel 'nodes'\nset ylabel 'speedup over 1 node (images/s)'\n"
             "set title 'Simulated weak scaling: %s'\n"
             "set logscale xy 2\nset xrange [1:%d]\nset yrange [0.5:%d]\n"
             "sel(s, g) = (strcol(%d) eq s && strcol(%d) eq g) ? $%d : NaN",
             csv, max_nodes * 2, max_nodes * 2, k.scheme + 1, k.gbps + 1, k.speedup + 1);
    size_t plot_len = 0;
    FILE *g = open_memstream(&plot, &plot_len);
    if (!g) die("report: open_memstream: %s", strerror(errno));
    fprintf(g, "plot x title 'ideal' with lines dt 2 lc rgb 'gray'");
    for (int i = 0; i < schemes.n; i++)
        for (int j = 0; j < gbps.n; j++)
            fprintf(g, ", '%s' using %d:(sel('%s', '%s')) skip 1 with linespoints lc %d pt %d "
                       "dt %d title '%s %s Gbit/s'",
                    csv, k.nodes + 1, schemes.v[i], gbps.v[j], i + 1, 7 - (j % 2), j + 1,
                    schemes.v[i], gbps.v[j]);
    fclose(g);
    int rc = gnuplot_png_svg(setup, plot, prefix);
    free(plot);
    if (rc) return rc;
    if (msg)
        fprintf(msg, "wrote %s.png and %s.svg (%d rows, %d schemes, %d bandwidths)\n", prefix,
                prefix, rows, schemes.n, gbps.n);
    return 0;
}

int report_bandwidth_svg(const char *csv, const char *svg)
{
    csv_t c;
    if (csv_open(&c, csv)) {
        fprintf(stderr, "poseidon report: %s: cannot read: %s\n", csv, strerror(errno));
        return 2;
    }
    int ok = report_sim_csv_header(c.header);
    sim_cols_t k;
    sim_cols(&c, &k);
    csv_close(&c);
    if (!ok) {
        fprintf(stderr, "poseidon report: %s:1: expected the header of poseidon sim --csv "
                        "(model,nodes,gbps,scheme,...,speedup,...)\n", csv);
        return 2;
    }
    char *prog = NULL;
    if (asprintf(&prog,
             "set datafile separator ','\nset terminal svg size 800,560 font 'sans,11'\n"
             "set output '%s'\nset key outside right top box\nset grid\n"
             "set xlabel 'NIC bandwidth (Gbit/s)'\nset ylabel 'speedup over 1 node (images/s)'\n"
             "set title 'Simulated speedup versus bandwidth: %s' noenhanced\n"
             "set yrange [0:*]\nset xrange [0:*]\n"
             "plot for [s in 'ps ps+wfbp sfb+wfbp hybrid hybrid3 allreduce+wfbp'] '%s' "
             "using %d:(strcol(%d) eq s ? $%d : NaN) skip 1 with linespoints pt 7 title s\n"
             "unset output\n",
             svg, csv, csv, k.gbps + 1, k.scheme + 1, k.speedup + 1) < 0)
        die("report: out of memory");
    int rc = gnuplot_run(prog);
    free(prog);
    return rc;
}
