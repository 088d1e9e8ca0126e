#include "trace_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int trace_file_read(const char *path, int need_header, trace_rec_t **rows, char *err,
                    size_t errlen)
{
    *rows = NULL;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    char line[4096];
    int line_no = 0;
    if (need_header) {
        line_no = 1;
        if (!fgets(line, sizeof line, f) ||
            strncmp(line, trace_csv_header, strlen(trace_csv_header)) != 0) {
            snprintf(err, errlen, "%s:1: expected the trace header '%s'", path,
                     trace_csv_header);
            fclose(f);
            return -2;
        }
    }
    trace_rec_t *v = NULL;
    int n = 0, cap = 0;
    while (fgets(line, sizeof line, f)) {
        line_no++;
        trace_rec_t r;
        int got = trace_rec_parse(line, &r);
        if (got == 1) continue;
        if (got < 0) {
            snprintf(err, errlen, "%s:%d: expected a trace row (%s) with t_end_ns >= "
                                  "t_start_ns", path, line_no, trace_csv_header);
            fclose(f);
            free(v);
            return -2;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            v = xrealloc(v, (size_t)cap * sizeof *v);
        }
        v[n++] = r;
    }
    fclose(f);
    *rows = v;
    return n;
}
