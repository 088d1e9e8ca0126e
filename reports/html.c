#include "reports/html.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "core/outfile.h"
#include "core/trace.h"
#include "reports/csv.h"
#include "reports/gnuplot.h"
#include "reports/paths.h"
#include "reports/speedup.h"
#include "reports/timeline.h"
#include "reports/train.h"

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

static csv_kind_t csv_kind(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return CSV_OTHER;
    char line[4096] = "";
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    if (!strncmp(line, trace_csv_header, strlen(trace_csv_header))) return CSV_TRACE;
    if (report_sim_csv_header(line)) return CSV_SIM;
    if (!strncmp(line, "model,nodes,gbps,scheme,predicted_s,measured_s,error", 52))
        return CSV_VALIDATE;
    if (report_train_csv_header(line)) return CSV_TRAIN;
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

static void plot_of(FILE *h, const char *title, const char *svg, int rc)
{
    fprintf(h, "<h3>");
    esc(h, title);
    fprintf(h, "</h3>\n");
    if (rc != 0 || inline_svg(h, svg) != 0)
        fputs("<p class=note>no plot: gnuplot failed (see the command's error output)</p>\n", h);
}

/* The folder the page is of, and what the page found in it so far. */
typedef struct {
    const char *dir;
    FILE *h;                       /* the page */
    char tmp[32];                  /* the plots' scratch folder, removed after */
    char *files[HTML_MAX_FILES];   /* relative to dir, sorted */
    char (*abs)[PATH_MAX * 2];     /* [i]: dir/files[i] */
    int n;
    const char *job;               /* the folder's one experiment file; NULL: none or several */
    const char *traces[2];         /* the first two traces (a rank's part left out) */
    int n_traces, n_plots;
} study_t;

/* The folder's files and its one experiment file. */
static void study_list(study_t *s)
{
    s->n = paths_list(s->dir, 2, s->files, HTML_MAX_FILES);
    s->abs = xcalloc((size_t)(s->n ? s->n : 1), sizeof *s->abs);
    int n_exp = 0;
    for (int i = 0; i < s->n; i++) {
        snprintf(s->abs[i], sizeof s->abs[i], "%s/%s", s->dir, s->files[i]);
        if (paths_ends_with(s->files[i], ".exp")) {
            n_exp++;
            s->job = s->abs[i];
        }
    }
    if (n_exp != 1) s->job = NULL;
}

static void study_free(study_t *s)
{
    for (int i = 0; i < s->n; i++) free(s->files[i]);
    free(s->abs);
}

/* A file's lines as a <pre> block under an <h3> of its name; 0, or -1 when unreadable. */
static int file_pre(FILE *h, const char *title, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    if (title) {
        fputs("<h3>", h);
        esc(h, title);
        fputs("</h3>\n", h);
    }
    fputs("<pre>", h);
    char line[4096];
    while (fgets(line, sizeof line, f)) esc(h, line);
    fputs("</pre>\n", h);
    fclose(f);
    return 0;
}

/* What made the study: its commands.txt and its experiment and cluster files. */
static void page_config(study_t *s)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/commands.txt", s->dir);
    if (access(path, R_OK) == 0) {
        fputs("<h2>Commands</h2>\n", s->h);
        file_pre(s->h, NULL, path);
    }
    fputs("<h2>Configuration</h2>\n", s->h);
    int n_conf = 0;
    for (int i = 0; i < s->n; i++) {
        if (!paths_ends_with(s->files[i], ".exp") && !paths_ends_with(s->files[i], ".cluster"))
            continue;
        if (file_pre(s->h, s->files[i], s->abs[i]) == 0) n_conf++;
    }
    if (!n_conf) fputs("<p class=note>no experiment or cluster file in the folder</p>\n", s->h);
}

/* A simulator CSV: speedup versus nodes (several node counts) or versus bandwidth (one node
 * count, several bandwidths). Returns 1 when drawn, 0 when the CSV holds neither sweep. */
static int plot_sim(study_t *s, int i, const char *prefix, const char *svg_file)
{
    const char *csv = s->abs[i];
    if (csv_distinct_count(csv, "nodes") > 1) {
        command(s->h, "poseidon report speedup %s --out PREFIX%s%s%s", csv, "", "", "");
        plot_of(s->h, s->files[i], svg_file, report_speedup(csv, prefix, NULL));
        return 1;
    }
    if (csv_distinct_count(csv, "gbps") > 1) {
        command(s->h, "poseidon report html %s (column speedup against gbps, a line per "
                      "scheme, of %s)%s%s", s->dir, s->files[i], "", "");
        plot_of(s->h, s->files[i], svg_file, report_bandwidth_svg(csv, svg_file));
        return 1;
    }
    return 0;
}

/* Predicted against measured of experiments/validate.sh, by reports/validate.gp. Returns 1
 * when drawn, 0 when the script is not found (said on the page). */
static int plot_validate(study_t *s, int i, const char *prefix, const char *svg_file)
{
    char gp[PATH_MAX], prog[PATH_MAX * 4];
    if (gnuplot_script_find("validate.gp", gp, sizeof gp)) {
        fputs("<p class=note>reports/validate.gp not found (POSEIDON_REPORTS names its "
              "folder): no validation plot</p>\n", s->h);
        return 0;
    }
    snprintf(prog, sizeof prog, "csv='%s'; out='%s'\nload '%s'\n", s->abs[i], prefix, gp);
    command(s->h, "gnuplot -e \"csv='%s'; out='PREFIX'\" %s%s%s", s->abs[i], gp, "", "");
    plot_of(s->h, s->files[i], svg_file, gnuplot_run(prog));
    return 1;
}

/* The plot of the folder's i-th file by its kind; a trace is kept for the timelines. */
static void plot_file(study_t *s, int i)
{
    char prefix[PATH_MAX], svg_file[PATH_MAX + 8];
    snprintf(prefix, sizeof prefix, "%s/plot%d", s->tmp, i);
    snprintf(svg_file, sizeof svg_file, "%s.svg", prefix);
    switch (csv_kind(s->abs[i])) {
    case CSV_SIM: s->n_plots += plot_sim(s, i, prefix, svg_file); break;
    case CSV_TRAIN:
        command(s->h, "poseidon report train %s --out PREFIX%s%s%s", s->abs[i], "", "", "");
        plot_of(s->h, s->files[i], svg_file, report_train(s->abs[i], prefix, NULL));
        s->n_plots++;
        break;
    case CSV_VALIDATE:
        /* validate_detail.csv holds the same points as validate.csv, with more columns:
         * drawn once */
        if (strstr(s->files[i], "validate_detail.csv")) break;
        s->n_plots += plot_validate(s, i, prefix, svg_file);
        break;
    case CSV_TRACE:
        if (strstr(s->files[i], "-rank")) break; /* a rank's part of a merged trace */
        if (s->n_traces < 2) s->traces[s->n_traces] = s->abs[i];
        s->n_traces++;
        break;
    default: break;
    }
}

/* The k-th timeline: its plot, then its critical path (and differences) as text. A job that
 * is not the traces' plan is dropped: the critical path then comes from the rows alone. */
static void plot_timeline(study_t *s, int k)
{
    char svg[PATH_MAX];
    timeline_opts_t o = {.trace = s->traces[k], .other = s->n_traces == 2 ? s->traces[1] : NULL,
                         .job = s->job, .iteration = -1, .top = 10, .out = svg};
    snprintf(svg, sizeof svg, "%s/timeline%d.svg", s->tmp, k);
    char *table = NULL;
    size_t tlen = 0;
    int rc = 2;
    for (int attempt = 0; attempt < 2 && rc; attempt++) {
        if (attempt) o.job = NULL;
        if (attempt && !s->job) break;
        free(table);
        table = NULL;
        FILE *tf = open_memstream(&table, &tlen);
        if (!tf) die("report html: open_memstream: %s", strerror(errno));
        rc = report_timeline(&o, tf, NULL); /* the file it wrote is ours, named on no page */
        fclose(tf);
    }
    command(s->h, "poseidon report timeline %s%s%s%s -o OUT.svg", o.trace,
            o.other ? " --compare " : "", o.other ? o.other : "", o.job ? " --job ..." : "");
    plot_of(s->h, o.other ? "timeline: one iteration of each trace" : "timeline", svg, rc);
    fputs("<pre>", s->h);
    esc(s->h, table ? table : "");
    fputs("</pre>\n", s->h);
    free(table);
    s->n_plots++;
}

/* Every plot: the CSVs' by kind, then the timelines — two traces drawn together (a
 * simulated one, by its name, on top), else each alone. */
static void page_plots(study_t *s)
{
    fputs("<h2>Plots</h2>\n", s->h);
    for (int i = 0; i < s->n; i++)
        if (paths_ends_with(s->files[i], ".csv")) plot_file(s, i);
    if (s->n_traces == 2 && strstr(s->traces[1], "sim") && !strstr(s->traces[0], "sim")) {
        const char *t = s->traces[0];
        s->traces[0] = s->traces[1];
        s->traces[1] = t;
    }
    int n_timelines = s->n_traces == 2 ? 1 : s->n_traces > 2 ? 0 : s->n_traces;
    for (int k = 0; k < n_timelines; k++) plot_timeline(s, k);
    if (s->n_traces > 2)
        fprintf(s->h, "<p class=note>%d traces in the folder: draw them with poseidon report "
                      "timeline</p>\n", s->n_traces);
    if (!s->n_plots) fputs("<p class=note>no CSV in the folder that a plot reads</p>\n", s->h);
}

/* Every CSV but the traces as a table. */
static void page_tables(study_t *s)
{
    fputs("<h2>Tables</h2>\n", s->h);
    for (int i = 0; i < s->n; i++) {
        if (!paths_ends_with(s->files[i], ".csv") || csv_kind(s->abs[i]) == CSV_TRACE) continue;
        fputs("<h3>", s->h);
        esc(s->h, s->files[i]);
        fputs("</h3>\n", s->h);
        csv_table(s->h, s->abs[i]);
    }
}

int report_html(const char *dir, const char *out_path)
{
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "poseidon report html: %s: not a folder\n", dir);
        return 2;
    }
    study_t s = {.dir = dir, .tmp = "/tmp/poseidon-html-XXXXXX"};
    study_list(&s);
    if (!mkdtemp(s.tmp)) die("report html: mkdtemp: %s", strerror(errno));
    s.h = outfile_open(out_path, "w");
    if (!s.h) {
        fprintf(stderr, "poseidon report html: %s: cannot write: %s\n", out_path, strerror(errno));
        rmdir(s.tmp);
        study_free(&s);
        return 2;
    }
    fprintf(s.h, "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>\n<title>");
    esc(s.h, dir);
    fprintf(s.h, "</title>\n<style>%s</style></head><body>\n<h1>", s_style);
    esc(s.h, dir);
    fprintf(s.h, "</h1>\n");
    page_config(&s);
    page_plots(&s);
    page_tables(&s);
    fputs("</body></html>\n", s.h);
    int bad = ferror(s.h);
    bad |= fclose(s.h) != 0;
    study_free(&s);
    char rm[PATH_MAX];
    snprintf(rm, sizeof rm, "rm -rf '%s'", s.tmp);
    if (system(rm) != 0) fprintf(stderr, "poseidon report html: could not remove %s\n", s.tmp);
    if (bad) {
        fprintf(stderr, "poseidon report html: error writing %s\n", out_path);
        return 1;
    }
    printf("wrote %s (%d plots)\n", out_path, s.n_plots);
    return 0;
}
