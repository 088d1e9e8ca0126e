/* outfile: opening a file the program writes (CSV, trace, plot, checkpoint), creating its
 * missing parent directories first, so `--csv out/run/x.csv` works in a fresh checkout. */
#ifndef POSEIDON_OUTFILE_H
#define POSEIDON_OUTFILE_H

#include <stdio.h>

/* mkdir -p of path's directory part. Returns 0, or -1 with errno set. */
int outfile_make_parents(const char *path);

/* fopen(path, mode) after outfile_make_parents(path); NULL with errno set on failure. */
FILE *outfile_open(const char *path, const char *mode);

#endif
