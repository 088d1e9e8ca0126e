#include "reports/train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/csv.h"
#include "reports/gnuplot.h"

int report_train_csv_header(const char *header)
{
    return !strncmp(header, "epoch,", 6) && strstr(header, ",loss,") &&
           strstr(header, ",train_acc,");
}

/* The columns the plot reads (0-based), found by name. */
typedef struct {
    int epoch, loss, train, test;
} train_cols_t;

/* Checks the CSV: its header, and an epoch number and a test_acc field in every row.
 * Returns the row count, or -1 after naming the file (and line) on stderr. */
static int train_csv_scan(const char *path, train_cols_t *k)
{
    csv_t c;
    if (csv_open(&c, path)) {
        fprintf(stderr, "poseidon report: %s: cannot read: %s\n", path, strerror(errno));
        return -1;
    }
    k->epoch = csv_column(&c, "epoch");
    k->loss = csv_column(&c, "loss");
    k->train = csv_column(&c, "train_acc");
    k->test = csv_column(&c, "test_acc");
    if (k->epoch < 0 || k->loss < 0 || k->train < 0 || k->test < 0) {
        fprintf(stderr, "poseidon report: %s:1: expected the header of poseidon train --csv "
                        "(epoch,...,loss,train_acc,test_acc,...)\n", path);
        csv_close(&c);
        return -1;
    }
    int rows = 0;
    while (csv_next(&c)) {
        char e[CSV_VALUE_MAX], *end;
        if (csv_get(&c, k->test, e, sizeof e) || csv_get(&c, k->epoch, e, sizeof e) ||
            (strtod(e, &end), end == e)) {
            fprintf(stderr, "poseidon report: %s:%d: expected a row of poseidon train --csv\n",
                    path, c.line_no);
            csv_close(&c);
            return -1;
        }
        rows++;
    }
    csv_close(&c);
    if (!rows) fprintf(stderr, "poseidon report: %s: no rows\n", path);
    return rows ? rows : -1;
}

int report_train(const char *csv, const char *prefix, FILE *msg)
{
    train_cols_t k;
    int rows = train_csv_scan(csv, &k);
    if (rows < 0) return 2;
    char setup[1024], plot[2048];
    /* an empty field (a row without evaluation) is a missing point */
    snprintf(setup, sizeof setup,
             "set datafile separator ','\nset datafile missing ''\n"
             "set key below horizontal box\nset grid\n"
             "set xlabel 'epoch'\nset ylabel 'training loss'\nset y2label 'accuracy'\n"
             "set ytics nomirror\nset y2tics\nset y2range [0:1]\n"
             "set title 'Training: %s'", csv);
    /* gnuplot numbers columns from 1 */
    snprintf(plot, sizeof plot,
             "plot '%s' using %d:%d skip 1 with linespoints pt 7 title 'loss', "
             "'%s' using %d:%d skip 1 axes x1y2 with linespoints pt 6 title 'train accuracy', "
             "'%s' using %d:%d skip 1 axes x1y2 with linespoints pt 5 title 'test accuracy'",
             csv, k.epoch + 1, k.loss + 1, csv, k.epoch + 1, k.train + 1, csv, k.epoch + 1,
             k.test + 1);
    int rc = gnuplot_png_svg(setup, plot, prefix);
    if (rc) return rc;
    if (msg) fprintf(msg, "wrote %s.png and %s.svg (%d rows)\n", prefix, prefix, rows);
    return 0;
}
