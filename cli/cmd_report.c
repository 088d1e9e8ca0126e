/* poseidon report SUB: argument parsing and dispatch to the renderers of reports/ — plots and
 * tables from the CSVs the simulator and the runtime write:
 *   speedup SIM.csv --out PREFIX   speedup versus nodes (reports/speedup.h)
 *   train TRAIN.csv --out PREFIX   the training curve (reports/train.h)
 *   compare SIM.csv REAL.csv       two traces joined, per op kind (reports/compare.h)
 *   timeline TRACE.csv ...         one iteration as lanes per node (reports/timeline.h)
 *   html DIR                       one page per study (reports/html.h)
 *   merge PART.csv... -o OUT.csv   a sweep's parts into its CSV (cli/cmd_sim_merge.c)
 * Every subcommand reads its options as the other commands do (cli/flags.h: getopt_long) and
 * answers --help (-h) with its usage on stdout, exit 0. A wrong option or a missing argument is exit 2; bad input (unreadable
 * file, wrong header, malformed row) is reported as file:line by the renderer and exits 2.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/log.h"
#include "reports/compare.h"
#include "reports/html.h"
#include "reports/paths.h"
#include "reports/speedup.h"
#include "reports/timeline.h"
#include "reports/train.h"

static const char s_usage_speedup[] =
    "usage: poseidon report speedup SIM.csv --out PREFIX\n\n"
    "Speedup over one node versus nodes, a line per scheme and bandwidth, and the ideal\n"
    "(linear) line, from `poseidon sim --csv` (columns nodes, gbps, scheme, speedup);\n"
    "gnuplot writes PREFIX.png and PREFIX.svg.\n";

static const char s_usage_train[] =
    "usage: poseidon report train TRAIN.csv --out PREFIX\n\n"
    "Loss, training and test accuracy versus epochs, from `poseidon train --csv` (one\n"
    "worker or distributed); gnuplot writes PREFIX.png and PREFIX.svg.\n";

static const char s_usage_compare[] =
    "usage: poseidon report compare SIM_TRACE.csv REAL_TRACE.csv [--from-iteration I]\n"
    "                               [--csv FILE]\n\n"
    "Joins a simulated and a real trace (node,iteration,op,layer,peer,bytes,t_start_ns,\n"
    "t_end_ns; from `poseidon sim --trace` and `poseidon train --trace`) on (node,\n"
    "iteration, op, layer), iterations >= I only (default 1: the first is a warm-up), and\n"
    "prints per op kind: rows joined, mean predicted and measured duration, error =\n"
    "(predicted - measured) / measured of the sums, and the rows found on one side only.\n"
    "Several rows of one key (APPLY per KV block) are summed. --csv also writes the table\n"
    "as CSV.\n";

static const char s_usage_timeline[] =
    "usage: poseidon report timeline TRACE.csv [--iteration I] [--nodes LIST]\n"
    "                [--compare OTHER.csv] [--job EXPERIMENT] [--top N] [-o OUT.png|.svg]\n\n"
    "Draws one iteration of a trace (poseidon sim --trace, poseidon train --trace) as\n"
    "lanes per node: compute, sends (sub-lanes where they overlap), server, update;\n"
    "ops coloured by kind, labelled by layer where wide enough, the critical path\n"
    "outlined and joined by dashes.\n"
    "  --iteration I   the iteration (default the middle one: iterations 0..N-1 give\n"
    "                  N/2, past the first, the warm-up, and the short last one)\n"
    "  --nodes LIST    the nodes drawn, e.g. 0-3,8 (default all; the critical path is\n"
    "                  found over all of them)\n"
    "  --compare F     a second trace of the same plan, drawn below on the same time\n"
    "                  axis; prints the --top N (default 10) ops whose durations differ\n"
    "                  most\n"
    "  --job EXP       the experiment (or a run's written job) the trace executed: the\n"
    "                  critical path follows the plan's edges and resources; without,\n"
    "                  each op's predecessor is the row that ended last before it began\n"
    "  --set KEY=VALUE an override of the job, as poseidon sim takes it\n"
    "  -o OUT          .png or .svg (default TRACE-timeline.png)\n";

static const char s_usage_html[] =
    "usage: poseidon report html DIR [-o OUT.html]\n\n"
    "One self-contained page for a study folder (an experiment's outputs, a validation\n"
    "run, the demo's): commands.txt, the *.exp and *.cluster files, the plots of its CSVs\n"
    "(speedup or bandwidth, training, validation, the timelines of its traces; two traces\n"
    "drawn together) as inline SVG, and every CSV as a table; default OUT: DIR/report.html.\n";

static void usage(FILE *f)
{
    fprintf(f, "usage: poseidon report SUB ...   (poseidon report SUB --help for each)\n\n");
    const char *const subs[] = {s_usage_speedup, s_usage_train, s_usage_compare, s_usage_html,
                                NULL};
    for (int i = 0; subs[i]; i++) fprintf(f, "%s\n", subs[i]);
    cmd_report_merge_usage(f);
    fputc('\n', f);
    fprintf(f, "usage: poseidon report timeline TRACE.csv [--compare OTHER.csv] [options]\n"
               "       (poseidon report timeline --help)\n");
}

/* The positional arguments of a subcommand, in their order. */
typedef struct {
    const char *cmd; /* "report html": the messages' prefix */
    const char *usage;
    const char *v[4];
    int n;
} pos_t;

/* Keeps one: 0, or -1 after saying there is one too many. */
static int pos_add(pos_t *ps, const char *arg)
{
    if (ps->n == (int)(sizeof ps->v / sizeof ps->v[0])) {
        fprintf(stderr, "poseidon %s: unexpected argument '%s'\n", ps->cmd, arg);
        return -1;
    }
    ps->v[ps->n++] = arg;
    return 0;
}

/* Exactly n of them: 0, or 2 after the usage (too few) or the first extra one on stderr. */
static int pos_want(const pos_t *ps, int n)
{
    if (ps->n == n) return 0;
    if (ps->n > n) fprintf(stderr, "poseidon %s: unexpected argument '%s'\n", ps->cmd, ps->v[n]);
    else fputs(ps->usage, stderr);
    return 2;
}

/* The options of speedup, train and html: --out (-o) and --help; the positionals into ps.
 * Returns -1 to go on, or the exit code (0 after --help). */
static int parse_out(int argc, char **argv, pos_t *ps, const char **out)
{
    static const struct option opts[] = {
        {"out", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    flag_parser_t p;
    flag_begin(&p, ps->cmd, argc, argv, "ho:", opts);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        if (c == 'h') {
            fputs(ps->usage, stdout);
            return 0;
        }
        if (c == 'o') *out = p.arg;
        else if (c != FLAG_ARG || pos_add(ps, p.arg)) return 2;
    }
    return -1;
}

/* speedup and train: one CSV, --out PREFIX. */
static int run_plot(int argc, char **argv)
{
    int speedup = !strcmp(argv[0], "speedup");
    pos_t ps = {.cmd = speedup ? "report speedup" : "report train",
                .usage = speedup ? s_usage_speedup : s_usage_train};
    const char *out = NULL;
    int rc = parse_out(argc, argv, &ps, &out);
    if (rc >= 0) return rc;
    if (pos_want(&ps, 1)) return 2;
    if (!out) {
        fprintf(stderr, "poseidon %s: --out PREFIX is required\n", ps.cmd);
        return 2;
    }
    return speedup ? report_speedup(ps.v[0], out, stdout) : report_train(ps.v[0], out, stdout);
}

static int run_compare(int argc, char **argv)
{
    static const struct option opts[] = {{"from-iteration", required_argument, 0, 'f'},
                                         {"csv", required_argument, 0, 'c'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    pos_t ps = {.cmd = "report compare", .usage = s_usage_compare};
    int from = 1;
    const char *csv = NULL;
    flag_parser_t p;
    flag_begin(&p, ps.cmd, argc, argv, "h", opts);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        switch (c) {
        case 'h': fputs(ps.usage, stdout); return 0;
        case 'f':
            if (flag_int32(ps.cmd, p.opt, p.arg, 0, INT32_MAX, &from)) return 2;
            break;
        case 'c': csv = p.arg; break;
        case FLAG_ARG:
            if (pos_add(&ps, p.arg)) return 2;
            break;
        default: return 2;
        }
    }
    if (pos_want(&ps, 2)) return 2;
    return report_compare(ps.v[0], ps.v[1], from, csv);
}

/* The timeline's options into *o (sets: room for its --set values). Returns -1 to go on, or
 * the exit code (0 after --help). */
static int timeline_parse(int argc, char **argv, timeline_opts_t *o, const char **sets,
                          pos_t *ps)
{
    static const struct option opts[] = {
        {"iteration", required_argument, 0, 'i'}, {"top", required_argument, 0, 't'},
        {"nodes", required_argument, 0, 'n'},     {"compare", required_argument, 0, 'c'},
        {"job", required_argument, 0, 'j'},       {"set", required_argument, 0, 's'},
        {"out", required_argument, 0, 'o'},       {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    flag_parser_t p;
    flag_begin(&p, ps->cmd, argc, argv, "ho:", opts);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        int rc = 0;
        switch (c) {
        case 'h': fputs(ps->usage, stdout); return 0;
        case 'i': rc = flag_int32(ps->cmd, p.opt, p.arg, 0, INT32_MAX, &o->iteration); break;
        case 't': rc = flag_int32(ps->cmd, p.opt, p.arg, 0, INT32_MAX, &o->top); break;
        case 'n': o->nodes = p.arg; break;
        case 'c': o->other = p.arg; break;
        case 'j': o->job = p.arg; break;
        case 's':
            if (o->n_sets == 64) {
                fprintf(stderr, "poseidon %s: at most 64 --set\n", ps->cmd);
                return 2;
            }
            sets[o->n_sets++] = p.arg;
            break;
        case 'o': o->out = p.arg; break;
        case FLAG_ARG: rc = pos_add(ps, p.arg); break;
        default: return 2;
        }
        if (rc) return 2;
    }
    if (ps->n > 1) {
        fprintf(stderr, "poseidon %s: one TRACE expected (--compare for a second)\n", ps->cmd);
        return 2;
    }
    return pos_want(ps, 1) ? 2 : -1;
}

static int run_timeline(int argc, char **argv)
{
    timeline_opts_t o = {.iteration = -1, .top = 10};
    const char *sets[64];
    pos_t ps = {.cmd = "report timeline", .usage = s_usage_timeline};
    int rc = timeline_parse(argc, argv, &o, sets, &ps);
    if (rc >= 0) return rc;
    o.trace = ps.v[0];
    o.sets = sets;
    char def_out[PATH_MAX];
    if (!o.out) {
        size_t n = strlen(o.trace);
        if (paths_ends_with(o.trace, ".csv")) n -= 4;
        snprintf(def_out, sizeof def_out, "%.*s-timeline.png", (int)n, o.trace);
        o.out = def_out;
    }
    return report_timeline(&o, stdout, stdout);
}

static int run_html(int argc, char **argv)
{
    pos_t ps = {.cmd = "report html", .usage = s_usage_html};
    const char *out = NULL;
    int rc = parse_out(argc, argv, &ps, &out);
    if (rc >= 0) return rc;
    if (ps.n > 1) {
        fprintf(stderr, "poseidon report html: one DIR expected\n");
        return 2;
    }
    if (pos_want(&ps, 1)) return 2;
    char def[PATH_MAX];
    if (!out) {
        snprintf(def, sizeof def, "%s/report.html", ps.v[0]);
        out = def;
    }
    return report_html(ps.v[0], out);
}

int cmd_report(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } subs[] = {{"speedup", run_plot},       {"train", run_plot}, {"compare", run_compare},
                {"timeline", run_timeline}, {"html", run_html},
                {"merge", cmd_report_merge}};
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        if (strcmp(argv[1], subs[i].name)) continue;
        if (argc >= 3) log_banner(argc, argv, 0);
        return subs[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "poseidon report: unknown report '%s' (speedup, train, compare, timeline, "
                    "html, merge)\n", argv[1]);
    return 2;
}
