/* speedup: the plots of the simulator's scaling CSV (`poseidon sim --csv`) — speedup over
 * one node versus nodes, a line per scheme and bandwidth with the ideal line, and versus NIC
 * bandwidth for a sweep of one node count. The plot programs read the CSV itself; the
 * columns are found by name (reports/csv.h). */
#ifndef POSEIDON_REPORTS_SPEEDUP_H
#define POSEIDON_REPORTS_SPEEDUP_H

#include <stdio.h>

/* 1 when a CSV header line is that of `poseidon sim --csv` (model,nodes,gbps,scheme,...,
 * speedup,...), else 0. */
int report_sim_csv_header(const char *header);

/* PREFIX.png and PREFIX.svg of speedup versus nodes. Returns 0, or 1 (gnuplot failed) or 2
 * (bad input) after saying why on stderr; msg (NULL: none) gets the line naming the files. */
int report_speedup(const char *csv, const char *prefix, FILE *msg);

/* The SVG file svg of speedup versus NIC bandwidth, a line per scheme. Returns 0, or 1 or 2
 * after saying why on stderr. */
int report_bandwidth_svg(const char *csv, const char *svg);

#endif
