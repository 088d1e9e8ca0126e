/* report: the `poseidon report` subcommands that live in files of their own. */
#ifndef POSEIDON_CLI_REPORT_H
#define POSEIDON_CLI_REPORT_H

#include <stdio.h>

typedef struct {
    const char *trace;   /* the trace drawn (on top) */
    const char *other;   /* a second trace of the same plan, drawn below; NULL: none */
    const char *job;     /* the experiment whose plan gives the critical path; NULL: rows */
    const char *const *sets; /* --set KEY=VALUE overrides of the job, n_sets of them */
    int n_sets;
    const char *nodes;   /* "0-3,8"; NULL: all */
    const char *out;     /* .png or .svg */
    int iteration;       /* -1: the middle one of the trace */
    int top;             /* ops listed whose durations differ most */
} timeline_opts_t;

/* Draws the timeline (cli/cmd_report_timeline.c) and prints the critical path's summary and,
 * with two traces, the ops that differ most on `table`. Returns 0, or 1 (gnuplot failed) or
 * 2 (bad input) after saying why on stderr. */
int report_timeline(const timeline_opts_t *o, FILE *table);
void timeline_usage(FILE *f);
/* argv[0] is "timeline" */
int cmd_report_timeline(int argc, char **argv);

/* PREFIX.png and PREFIX.svg of `poseidon sim --csv` (speedup) and `poseidon train --csv`
 * (cli/cmd_report.c). Return 0, or 1 or 2 after saying why on stderr; msg (NULL: none)
 * gets the line naming the files. */
int report_speedup(const char *csv, const char *prefix, FILE *msg);
int report_train(const char *csv, const char *prefix, FILE *msg);

/* The page of a study folder (cli/report_html.c). Returns 0, or 1 or 2 after saying why. */
int report_html(const char *dir, const char *out_path);
/* argv[0] is "html" */
int cmd_report_html(int argc, char **argv);

#endif
