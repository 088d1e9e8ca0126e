/* poseidon report html DIR: one self-contained HTML page for a study — an experiment folder,
 * a validation run (out/validate/) or the demo's — so it can be shared as one file.
 *
 * What it shows, from the files under DIR (two levels down; per-rank trace files left out):
 *   the commands that made it (DIR/commands.txt when there is one, and every command the page
 *   ran for its plots); the configuration (*.exp, *.cluster); each CSV as a table; and plots,
 *   made again from the CSVs and inlined as SVG: the speedup of `poseidon sim --csv` (several
 *   node counts) or its bandwidth sweep (one node count, several bandwidths), the training
 *   curve of `poseidon train --csv`, predicted against measured of experiments/validate.sh
 *   (reports/validate.gp), and the timeline of each trace — of two traces, one above the
 *   other (a simulated and a real run of one plan), the critical path following the plan of
 *   the folder's one experiment file when it has one.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/report.h"
#include "cli/report_gnuplot.h"
#include "core/check.h"
#include "core/outfile.h"
#include "core/trace.h"

enum { HTML_MAX_FILES = 256, HTML_MAX_ROWS = 200 };

typedef enum { CSV_SIM, CSV_TRAIN, CSV_VALIDATE, CSV_TRACE, CSV_OTHER } csv_kind_t;

static const char s_style[] =
    "body{font-family:sans-serif;margin:2em auto;max-width:1700px;padding:0 1em;color:#222}"
    "h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:2em}"
    "h3{font-size:1em}table{border-collapse:collapse;font-size:.85em;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}"
    "pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}"
    ".plot svg{max-width:100%;height:auto;display:block;border:1px solid #eee}"
    ".note{color:#666;font-size:.85em}";

static void esc(FILE *h, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", h); break;
        case '>': fputs("&gt;", h); break;
        case '&': fputs("&amp;", h); break;
        case '"': fputs("&quot;", h); break;
        default: fputc(*s, h);
        }
    }
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int path_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files under dir (depth levels down), path relative to top, into v. */
static void list_files(const char *top, const char *rel, int depth, char **v, int *n)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", top, *rel ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && *n < HTML_MAX_FILES) {
        if (e->d_name[0] == '.') continue;
        char sub[PATH_MAX], full[PATH_MAX * 2];
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", top, sub);
        struct stat st;
        if (stat(full, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth > 0) list_files(top, sub, depth - 1, v, n);
        } else if (S_ISREG(st.st_mode)) {
            v[*n] = strdup(sub);
            if (!v[*n]) die("report html: out of memory");
            (*n)++;
        }
    }
    closedir(d);
}

static csv_kind_t csv_kind(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return CSV_OTHER;
    char line[4096] = "";
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    if (!strncmp(line, trace_csv_header, strlen(trace_csv_header))) return CSV_TRACE;
    if (!strncmp(line, "model,nodes,gbps,scheme,", 24) && strstr(line, ",speedup,")) return CSV_SIM;
    if (!strncmp(line, "model,nodes,gbps,scheme,predicted_s,measured_s,error", 52))
        return CSV_VALIDATE;
    if (!strncmp(line, "epoch,", 6) && strstr(line, ",loss,") && strstr(line, ",train_acc,"))
        return CSV_TRAIN;
    return CSV_OTHER;
}

/* A CSV as a table: the first HTML_MAX_ROWS rows. */
static void csv_table(FILE *h, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(h, "<p class=note>cannot read: %s</p>\n", strerror(errno));
        return;
    }
    char line[8192];
    int rows = 0, more = 0;
    fputs("<table>\n", h);
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        if (rows > HTML_MAX_ROWS) {
            more++;
            continue;
        }
        line[strcspn(line, "\r\n")] = 0;
        const char *cell = rows ? "td" : "th";
        fputs("<tr>", h);
        for (char *s = line, *c;; s = c + 1) {
            c = strchr(s, ',');
            if (c) *c = 0;
            fprintf(h, "<%s>", cell);
            esc(h, s);
            fprintf(h, "</%s>", cell);
            if (!c) break;
        }
        fputs("</tr>\n", h);
        rows++;
    }
    fclose(f);
    fputs("</table>\n", h);
    if (more) fprintf(h, "<p class=note>%d more rows in the file</p>\n", more);
}

/* Copies an SVG file into the page from its <svg element on. Returns 0, or -1. */
static int inline_svg(FILE *h, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) die("report html: open_memstream: %s", strerror(errno));
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, k, m);
    fclose(f);
    fclose(m);
    const char *svg = strstr(buf, "<svg");
    if (svg) {
        fputs("<div class=plot>\n", h);
        fputs(svg, h);
        fputs("</div>\n", h);
    }
    free(buf);
    return svg ? 0 : -1;
}

/* The commands of the page's plots, listed under each. */
static void command(FILE *h, const char *fmt, const char *a, const char *b, const char *c,
                    const char *d)
{
    char *buf = NULL;
    if (asprintf(&buf, fmt, a, b, c, d) < 0) die("report html: out of memory");
    fputs("<pre>$ ", h);
    esc(h, buf);
    fputs("</pre>\n", h);
    free(buf);
}

/* Distinct values of column k (0-based) of a CSV's rows. */
static int distinct_values(const char *path, int k)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4096], seen[64][64];
    int n = 0, first = 1;
    while (fgets(line, sizeof line, f)) {
        if (first) {
            first = 0;
            continue;
        }
        const char *p = line;
        for (int i = 0; i < k && p; i++) p = strchr(p, ','), p = p ? p + 1 : NULL;
        if (!p) continue;
        char v[64];
        snprintf(v, sizeof v, "%.*s", (int)strcspn(p, ",\r\n"), p);
        int dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = !strcmp(seen[i], v);
        if (!dup && n < 64) snprintf(seen[n++], sizeof seen[0], "%s", v);
    }
    fclose(f);
    return n;
}

/* Bandwidth sweep: speedup versus NIC bandwidth, a line per scheme. */
static int bandwidth_svg(const char *csv, const char *svg)
{
    char *prog = NULL;
    if (asprintf(&prog,
             "set datafile separator ','\nset terminal svg size 800,560 font 'sans,11'\n"
             "set output '%s'\nset key outside right top box\nset grid\n"
             "set xlabel 'NIC bandwidth (Gbit/s)'\nset ylabel 'speedup over 1 node (images/s)'\n"
             "set title 'Simulated speedup versus bandwidth: %s' noenhanced\n"
             "set yrange [0:*]\nset xrange [0:*]\n"
             "plot for [s in 'ps ps+wfbp sfb+wfbp hybrid hybrid3 allreduce+wfbp'] '%s' "
             "using 3:(strcol(4) eq s ? $9 : NaN) skip 1 with linespoints pt 7 title s\n"
             "unset output\n",
             svg, csv, csv) < 0)
        die("report html: out of memory");
    int rc = gnuplot_run(prog);
    free(prog);
    return rc;
}

/* reports/validate.gp beside the binary's build folder (or POSEIDON_REPORTS). */
static int find_validate_gp(char *out, size_t len)
{
    const char *env = getenv("POSEIDON_REPORTS");
    if (env) {
        snprintf(out, len, "%s/validate.gp", env);
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
            if ((size_t)snprintf(out, len, "%s/reports/validate.gp", dir) < len &&
                access(out, R_OK) == 0)
                return 0;
        }
    }
    snprintf(out, len, "reports/validate.gp");
    return access(out, R_OK);
}

static void plot_of(FILE *h, const char *title, const char *svg, int rc)
{
    fprintf(h, "<h3>");
    esc(h, title);
    fprintf(h, "</h3>\n");
    if (rc != 0 || inline_svg(h, svg) != 0)
        fputs("<p class=note>no plot: gnuplot failed (see the command's error output)</p>\n", h);
}

int report_html(const char *dir, const char *out_path)
{
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "poseidon report html: %s: not a folder\n", dir);
        return 2;
    }
    char *files[HTML_MAX_FILES];
    int n = 0;
    list_files(dir, "", 2, files, &n);
    qsort(files, (size_t)n, sizeof *files, path_cmp);
    char tmp[] = "/tmp/poseidon-html-XXXXXX";
    if (!mkdtemp(tmp)) die("report html: mkdtemp: %s", strerror(errno));
    FILE *h = outfile_open(out_path, "w");
    if (!h) {
        fprintf(stderr, "poseidon report html: %s: cannot write: %s\n", out_path, strerror(errno));
        rmdir(tmp);
        return 2;
    }
    fprintf(h, "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>\n<title>");
    esc(h, dir);
    fprintf(h, "</title>\n<style>%s</style></head><body>\n<h1>", s_style);
    esc(h, dir);
    fprintf(h, "</h1>\n");

    /* what made the study */
    char path[PATH_MAX * 2], svg[PATH_MAX];
    const char *job = NULL;
    int n_exp = 0, n_traces = 0, n_plots = 0;
    const char *traces[2] = {NULL, NULL};
    static char abs_paths[HTML_MAX_FILES][PATH_MAX * 2];
    for (int i = 0; i < n; i++) {
        snprintf(abs_paths[i], sizeof abs_paths[i], "%s/%s", dir, files[i]);
        if (ends_with(files[i], ".exp")) {
            n_exp++;
            job = abs_paths[i];
        }
    }
    if (n_exp != 1) job = NULL;
    snprintf(path, sizeof path, "%s/commands.txt", dir);
    FILE *cf = fopen(path, "r");
    if (cf) {
        fputs("<h2>Commands</h2>\n<pre>", h);
        char line[4096];
        while (fgets(line, sizeof line, cf)) esc(h, line);
        fputs("</pre>\n", h);
        fclose(cf);
    }
    fputs("<h2>Configuration</h2>\n", h);
    int n_conf = 0;
    for (int i = 0; i < n; i++) {
        if (!ends_with(files[i], ".exp") && !ends_with(files[i], ".cluster")) continue;
        FILE *f = fopen(abs_paths[i], "r");
        if (!f) continue;
        fputs("<h3>", h);
        esc(h, files[i]);
        fputs("</h3>\n<pre>", h);
        char line[4096];
        while (fgets(line, sizeof line, f)) esc(h, line);
        fputs("</pre>\n", h);
        fclose(f);
        n_conf++;
    }
    if (!n_conf) fputs("<p class=note>no experiment or cluster file in the folder</p>\n", h);

    fputs("<h2>Plots</h2>\n", h);
    for (int i = 0; i < n; i++) {
        if (!ends_with(files[i], ".csv")) continue;
        const char *csv = abs_paths[i];
        snprintf(svg, sizeof svg, "%s/plot%d", tmp, i);
        char svg_file[PATH_MAX + 8];
        snprintf(svg_file, sizeof svg_file, "%s.svg", svg);
        switch (csv_kind(csv)) {
        case CSV_SIM:
            if (distinct_values(csv, 1) > 1) {
                command(h, "poseidon report speedup %s --out PREFIX%s%s%s", csv, "", "", "");
                plot_of(h, files[i], svg_file, report_speedup(csv, svg, NULL));
            } else if (distinct_values(csv, 2) > 1) {
                command(h, "poseidon report html %s (speedup of column 9 against gbps, a line "
                           "per scheme, of %s)%s%s", dir, files[i], "", "");
                plot_of(h, files[i], svg_file, bandwidth_svg(csv, svg_file));
            } else {
                continue;
            }
            n_plots++;
            break;
        case CSV_TRAIN:
            command(h, "poseidon report train %s --out PREFIX%s%s%s", csv, "", "", "");
            plot_of(h, files[i], svg_file, report_train(csv, svg, NULL));
            n_plots++;
            break;
        case CSV_VALIDATE: {
            /* validate_detail.csv holds the same points as validate.csv, with more columns:
             * drawn once */
            if (strstr(files[i], "validate_detail.csv")) continue;
            char gp[PATH_MAX], prog[PATH_MAX * 4];
            if (find_validate_gp(gp, sizeof gp)) {
                fputs("<p class=note>reports/validate.gp not found (POSEIDON_REPORTS names its "
                      "folder): no validation plot</p>\n", h);
                break;
            }
            snprintf(prog, sizeof prog, "csv='%s'; out='%s'\nload '%s'\n", csv, svg, gp);
            command(h, "gnuplot -e \"csv='%s'; out='PREFIX'\" %s%s%s", csv, gp, "", "");
            plot_of(h, files[i], svg_file, gnuplot_run(prog));
            n_plots++;
            break;
        }
        case CSV_TRACE:
            if (strstr(files[i], "-rank")) continue; /* a rank's part of a merged trace */
            if (n_traces < 2) traces[n_traces] = csv;
            n_traces++;
            break;
        default: break;
        }
    }
    /* timelines: two traces drawn together (a simulated one, by its name, on top), else
     * each alone */
    if (n_traces == 2 && strstr(traces[1], "sim") && !strstr(traces[0], "sim")) {
        const char *t = traces[0];
        traces[0] = traces[1];
        traces[1] = t;
    }
    for (int k = 0; k < (n_traces == 2 ? 1 : n_traces > 2 ? 0 : n_traces); k++) {
        timeline_opts_t o = {.trace = traces[k], .other = n_traces == 2 ? traces[1] : NULL,
                             .job = job, .iteration = -1, .top = 10};
        snprintf(svg, sizeof svg, "%s/timeline%d.svg", tmp, k);
        o.out = svg;
        char *table = NULL;
        size_t tlen = 0;
        int rc = 2;
        for (int attempt = 0; attempt < 2 && rc; attempt++) {
            /* a job that is not the traces' plan: the critical path from the rows alone */
            if (attempt) o.job = NULL;
            if (attempt && !job) break;
            free(table);
            table = NULL;
            FILE *tf = open_memstream(&table, &tlen);
            if (!tf) die("report html: open_memstream: %s", strerror(errno));
            rc = report_timeline(&o, tf);
            fclose(tf);
        }
        command(h, "poseidon report timeline %s%s%s%s -o OUT.svg", o.trace,
                o.other ? " --compare " : "", o.other ? o.other : "", o.job ? " --job ..." : "");
        plot_of(h, o.other ? "timeline: one iteration of each trace" : "timeline", svg, rc);
        fputs("<pre>", h);
        esc(h, table ? table : "");
        fputs("</pre>\n", h);
        free(table);
        n_plots++;
    }
    if (n_traces > 2) {
        fprintf(h, "<p class=note>%d traces in the folder: draw them with poseidon report "
                   "timeline</p>\n", n_traces);
    }
    if (!n_plots) fputs("<p class=note>no CSV in the folder that a plot reads</p>\n", h);

    fputs("<h2>Tables</h2>\n", h);
    for (int i = 0; i < n; i++) {
        if (!ends_with(files[i], ".csv") || csv_kind(abs_paths[i]) == CSV_TRACE) continue;
        fputs("<h3>", h);
        esc(h, files[i]);
        fputs("</h3>\n", h);
        csv_table(h, abs_paths[i]);
    }
    fputs("</body></html>\n", h);
    int bad = ferror(h);
    bad |= fclose(h) != 0;
    for (int i = 0; i < n; i++) free(files[i]);
    char rm[PATH_MAX];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    if (system(rm) != 0) fprintf(stderr, "poseidon report html: could not remove %s\n", tmp);
    if (bad) {
        fprintf(stderr, "poseidon report html: error writing %s\n", out_path);
        return 1;
    }
    printf("wrote %s (%d plots)\n", out_path, n_plots);
    return 0;
}

int cmd_report_html(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "poseidon report html: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (dir) {
            fprintf(stderr, "poseidon report html: one DIR expected\n");
            return 2;
        } else dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: poseidon report html DIR [-o OUT.html]\n");
        return 2;
    }
    char def[PATH_MAX];
    if (!out) {
        snprintf(def, sizeof def, "%s/report.html", dir);
        out = def;
    }
    return report_html(dir, out);
}
