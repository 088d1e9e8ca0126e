/* report_gnuplot: what the `poseidon report` subcommands share: running a gnuplot program and
 * reading a trace CSV into rows. */
#ifndef POSEIDON_CLI_REPORT_GNUPLOT_H
#define POSEIDON_CLI_REPORT_GNUPLOT_H

#include "core/trace.h"

/* Runs a gnuplot program (through a temporary file, removed after). Returns 0, or 1 after
 * saying why on stderr. */
int gnuplot_run(const char *program);

/* Reads every row of a trace CSV (core/trace.h) into *rows (malloc'ed; the caller frees).
 * Returns the count, or -1 after naming the file and line of the first bad one on stderr. */
int trace_file_read(const char *path, trace_rec_t **rows);

#endif
