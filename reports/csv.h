/* csv: the CSVs the reports read (`poseidon sim --csv`, `poseidon train --csv`), row by row,
 * their fields found by the column's NAME in the header, so a report does not break when a
 * writer adds or moves a column. Fields hold no commas (the project's CSVs quote nothing);
 * a line is at most CSV_LINE_MAX bytes. */
#ifndef POSEIDON_REPORTS_CSV_H
#define POSEIDON_REPORTS_CSV_H

#include <stddef.h>
#include <stdio.h>

enum { CSV_LINE_MAX = 8192, CSV_DISTINCT_MAX = 64, CSV_VALUE_MAX = 64 };

typedef struct {
    FILE *f;
    int line_no;              /* of the line last read: 1 for the header */
    char header[CSV_LINE_MAX]; /* empty for an empty file */
    char row[CSV_LINE_MAX];   /* the row last read by csv_next */
} csv_t;

/* Opens path and reads its header. Returns 0, or -1 (errno set) when it cannot be opened. */
int csv_open(csv_t *c, const char *path);
void csv_close(csv_t *c);

/* The index of column `name` in the header, or -1. */
int csv_column(const csv_t *c, const char *name);

/* Reads the next row into c->row. Returns 1, or 0 at the end of the file. */
int csv_next(csv_t *c);

/* Field k (0-based) of the row last read into buf (truncated to len). Returns 0, or -1 when
 * k < 0 or the row has fewer fields. */
int csv_get(const csv_t *c, int k, char *buf, size_t len);

/* The distinct values of a column, in order of first appearance (the first
 * CSV_DISTINCT_MAX). */
typedef struct {
    int n;
    char v[CSV_DISTINCT_MAX][CSV_VALUE_MAX];
} csv_distinct_t;

void csv_distinct_add(csv_distinct_t *d, const char *value);

/* How many distinct values column `name` of the CSV at path holds over its rows (rows too
 * short for it skipped); 0 when the file cannot be read or has no such column. */
int csv_distinct_count(const char *path, const char *name);

#endif
