#include "reports/gnuplot.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/check.h"
#include "core/outfile.h"

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

int gnuplot_png_svg(const char *setup, const char *plot, const char *prefix)
{
    if (outfile_make_parents(prefix) != 0) {
        fprintf(stderr, "poseidon report: %s: cannot create its folder: %s\n", prefix,
                strerror(errno));
        return 2;
    }
    char *prog = NULL;
    size_t prog_len = 0;
    FILE *g = open_memstream(&prog, &prog_len);
    if (!g) die("report: open_memstream: %s", strerror(errno));
    fprintf(g, "%s\nset terminal pngcairo size 800,560\nset output '%s.png'\n%s\nunset output\n"
               "set terminal svg size 800,560 dynamic\nset output '%s.svg'\n%s\nunset output\n",
            setup, prefix, plot, prefix, plot);
    fclose(g);
    int rc = gnuplot_run(prog);
    free(prog);
    return rc;
}

int gnuplot_script_find(const char *name, char *out, size_t len)
{
    const char *env = getenv("POSEIDON_REPORTS");
    if (env) {
        snprintf(out, len, "%s/%s", env, name);
        return access(out, R_OK);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        for (int up = 1; up <= 3; up++) {
            char dir[PATH_MAX + 32];
            snprintf(dir, sizeof dir, "%s", exe);
            for (int i = 0; i < up; i++) {
                char *s = strrchr(dir, '/');
                if (s) *s = 0;
            }
            if ((size_t)snprintf(out, len, "%s/reports/%s", dir, name) < len &&
                access(out, R_OK) == 0)
                return 0;
        }
    }
    snprintf(out, len, "reports/%s", name);
    return access(out, R_OK);
}
