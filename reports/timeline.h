/* timeline: one iteration of a trace (core/trace.h) drawn as lanes per node — compute (FWD,
 * BWD), the node's sends (PUSH, PULL, SFB, ALLREDUCE: as many sub-lanes as overlap), the
 * server (APPLY) and the update thread (UPDATE; the interconnect's LREDUCE and LBCAST share
 * it) — ops coloured by kind and labelled by layer where the box is wide enough, the
 * critical path (core/critpath.h) outlined and joined. With a second trace of the same plan
 * both are drawn one above the other on one time axis (each from its iteration's first
 * start) and the ops whose durations differ most are listed. gnuplot writes PNG or SVG by
 * the output's extension. */
#ifndef POSEIDON_REPORTS_TIMELINE_H
#define POSEIDON_REPORTS_TIMELINE_H

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

/* Draws the timeline into o->out and prints on `table` the critical path's summary and,
 * with two traces, the ops that differ most; msg (NULL: none) gets the line naming the file
 * written. Returns 0, or 1 (gnuplot failed) or 2 (bad input) after saying why on stderr. */
int report_timeline(const timeline_opts_t *o, FILE *table, FILE *msg);

#endif
