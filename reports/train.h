/* train: the training curve of `poseidon train --csv` (one worker or distributed) — loss,
 * training and test accuracy versus epochs; the columns found by name (reports/csv.h). */
#ifndef POSEIDON_REPORTS_TRAIN_H
#define POSEIDON_REPORTS_TRAIN_H

#include <stdio.h>

/* 1 when a CSV header line is that of `poseidon train --csv` (epoch,...,loss,...,
 * train_acc,...), else 0. */
int report_train_csv_header(const char *header);

/* PREFIX.png and PREFIX.svg. Returns 0, or 1 (gnuplot failed) or 2 (bad input) after
 * saying why on stderr; msg (NULL: none) gets the line naming the files. */
int report_train(const char *csv, const char *prefix, FILE *msg);

#endif
