/* html: one self-contained HTML page for a study — an experiment folder, a validation run
 * (out/validate/) or the demo's — so it can be shared as one file.
 *
 * What it shows, from the files under DIR (two levels down; per-rank trace files left out):
 * the commands that made it (DIR/commands.txt when there is one, and every command the page
 * ran for its plots); the configuration (*.exp, *.cluster); each CSV as a table; and plots,
 * made again from the CSVs and inlined as SVG: the speedup of `poseidon sim --csv` (several
 * node counts) or its bandwidth sweep (one node count, several bandwidths)
 * (reports/speedup.h), the training curve of `poseidon train --csv` (reports/train.h),
 * predicted against measured of experiments/validate.sh (reports/validate.gp), and the
 * timeline of each trace (reports/timeline.h) — of two traces, one above the other (a
 * simulated and a real run of one plan), the critical path following the plan of the
 * folder's one experiment file when it has one. The page holds what the plots and tables
 * say, never a log line: the renderers it calls log nothing into it. */
#ifndef POSEIDON_REPORTS_HTML_H
#define POSEIDON_REPORTS_HTML_H

/* Writes the page of the folder dir to out_path and prints "wrote OUT (N plots)" on stdout.
 * Returns 0, or 1 (the page could not be written whole) or 2 (dir is not a folder, or
 * out_path cannot be opened) after saying why on stderr. */
int report_html(const char *dir, const char *out_path);

#endif
