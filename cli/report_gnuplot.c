#include "cli/report_gnuplot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/check.h"

int gnuplot_run(const char *program)
{
    char gp[] = "/tmp/poseidon-report-XXXXXX";
    int fd = mkstemp(gp);
    if (fd < 0) die("report: mkstemp: %s", strerror(errno));
    FILE *g = fdopen(fd, "w");
    if (!g) die("report: fdopen: %s", strerror(errno));
    fputs(program, g);
    fclose(g);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "gnuplot '%s'", gp);
    int rc = system(cmd);
    unlink(gp);
    if (rc != 0) {
        fprintf(stderr, "poseidon report: gnuplot failed (exit status %d); is gnuplot installed?\n",
                WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
        return 1;
    }
    return 0;
}

int trace_file_read(const char *path, trace_rec_t **rows)
{
    *rows = NULL;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "poseidon report: %s: cannot read: %s\n", path, strerror(errno));
        return -1;
    }
    char line[4096];
    if (!fgets(line, sizeof line, f) ||
        strncmp(line, trace_csv_header, strlen(trace_csv_header)) != 0) {
        fprintf(stderr, "poseidon report: %s:1: expected the trace header '%s'\n", path,
                trace_csv_header);
        fclose(f);
        return -1;
    }
    trace_rec_t *v = NULL;
    int n = 0, cap = 0, lineno = 1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        trace_rec_t r;
        int got = trace_rec_parse(line, &r);
        if (got == 1) continue;
        if (got < 0) {
            fprintf(stderr, "poseidon report: %s:%d: expected node,iteration,op,layer,peer,"
                            "bytes,t_start_ns,t_end_ns with t_end_ns >= t_start_ns\n",
                    path, lineno);
            fclose(f);
            free(v);
            return -1;
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
