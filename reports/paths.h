/* paths: file names as the reports see them — a name's suffix (a plot's format, a study
 * file's kind) and the files of a study folder, listed in a stable order. */
#ifndef POSEIDON_REPORTS_PATHS_H
#define POSEIDON_REPORTS_PATHS_H

/* 1 when s ends with suffix, else 0. */
int paths_ends_with(const char *s, const char *suffix);

/* The regular files under top, up to `depth` folders down (names starting with '.' left
 * out), as paths relative to top, sorted, into v (strdup'ed: the caller frees each), at
 * most max of them. Returns the count (0 when top cannot be read). */
int paths_list(const char *top, int depth, char **v, int max);

#endif
