/* gnuplot: how every report draws — a gnuplot program run through a temporary file, the
 * PNG-and-SVG pair of a plot, and the gnuplot scripts of this folder (its .gp files) found
 * from the binary. The rendering modules call down to it; it calls no report. */
#ifndef POSEIDON_REPORTS_GNUPLOT_H
#define POSEIDON_REPORTS_GNUPLOT_H

#include <stddef.h>

/* Runs a gnuplot program (through a temporary file, removed after). Returns 0, or 1 after
 * saying why on stderr. */
int gnuplot_run(const char *program);

/* PREFIX.png and PREFIX.svg (their folder made first): gnuplot runs `setup`, then `plot`
 * once per format. Returns 0, or 1 (gnuplot failed) or 2 (the folder cannot be made) after
 * saying why on stderr. */
int gnuplot_png_svg(const char *setup, const char *plot, const char *prefix);

/* The path of reports/NAME (a .gp script) into out: in the folder POSEIDON_REPORTS names,
 * else in reports/ of a folder up to three levels above the binary's, else ./reports/.
 * Returns 0 when the file is readable there, -1 when not (out holds the last path tried). */
int gnuplot_script_find(const char *name, char *out, size_t len);

#endif
