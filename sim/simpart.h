/* simpart: a sweep cut into parts and put back together. `poseidon sim EXP --part I/N` runs
 * the configurations i (0-based, experiment_config order) with i % N == I - 1, a split fixed
 * by (I, N) and the configuration count alone, which deals the large node counts of every
 * scheme and bandwidth round the parts. A part's CSV opens with one '#' line naming the part
 * and the sweep it belongs to:
 *   # poseidon sim part I/N configurations C experiment HASH
 * (HASH: simpart_fingerprint, the same on every machine for the same experiment and
 * overrides), then poseidon sim's header and the part's rows in configuration order.
 * simpart_merge puts the rows of parts 1..N back in configuration order: the CSV the whole
 * sweep writes in one run, byte for byte but for the wall_s column.
 */
#ifndef POSEIDON_SIMPART_H
#define POSEIDON_SIMPART_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "experiment.h"
#include "model.h"

/* "I/N" with 1 <= I <= N. Returns 0, or -1 with the reason in err. */
int simpart_parse(const char *s, int *part, int *nparts, char *err, size_t errlen);

/* Whether configuration `config` belongs to part `part` (1-based) of nparts. */
int simpart_owns(int config, int part, int nparts);

/* FNV-1a over what every configuration runs (experiment_write's keys, paths left out so that
 * the parts may run from different checkouts) and the model's name. */
uint64_t simpart_fingerprint(const experiment_t *e, const model_t *m);

/* The '#' line a part's CSV opens with. */
void simpart_csv_comment(FILE *f, int part, int nparts, int configs, uint64_t fingerprint);

/* Write to out the CSV of the whole sweep from the part files paths[0..n) (any order).
 * Returns 0, or -1 with one line in err: a file unreadable or without the part line, parts
 * of different sweeps, a part missing or given twice, a part whose rows are not the number
 * its configurations make, or headers that differ. Nothing is written on failure. */
int simpart_merge(const char *const *paths, int n, FILE *out, char *err, size_t errlen);

#endif
