/* poseidon report SUB: argument parsing and dispatch to the renderers of reports/ — plots and
 * tables from the CSVs the simulator and the runtime write:
 *   speedup SIM.csv --out PREFIX   speedup versus nodes (reports/speedup.h)
 *   train TRAIN.csv --out PREFIX   the training curve (reports/train.h)
 *   compare SIM.csv REAL.csv       two traces joined, per op kind (reports/compare.h)
 *   timeline TRACE.csv ...         one iteration as lanes per node (reports/timeline.h)
 *   html DIR                       one page per study (reports/html.h)
 * Every subcommand reads its options with getopt_long and answers --help (-h) with its usage
 * on stdout, exit 0. A wrong option or a missing argument is exit 2; bad input (unreadable
 * file, wrong header, malformed row) is reported as file:line by the renderer and exits 2.
 */
#include <getopt.h>
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
    fprintf(f, "usage: poseidon report timeline TRACE.csv [--compare OTHER.csv] [options]\n"
               "       (poseidon report timeline --help)\n");
}

/* A subcommand's arguments (argv[0] its name): options by getopt_long, the others
 * (positional, in order) into pos. "--help"/"-h" is every subcommand's; `shorts` names the
 * others' short letters as getopt does. */
typedef struct {
    const char *sub;
    const char *usage;
    const char *pos[4];
    int n_pos;
} args_t;

enum { OPT_HELP = 'h', OPT_MISSING = ':', OPT_UNKNOWN = '?', OPT_DONE = -1, OPT_BAD = -2 };

/* Keeps a positional argument: 0, or -1 after saying there is one too many. */
static int args_keep(args_t *a, const char *arg)
{
    if (a->n_pos == (int)(sizeof a->pos / sizeof a->pos[0])) {
        fprintf(stderr, "poseidon report %s: unexpected argument '%s'\n", a->sub, arg);
        return -1;
    }
    a->pos[a->n_pos++] = arg;
    return 0;
}

/* The next option's letter; a positional argument is kept and skipped; OPT_HELP after
 * printing the usage on stdout; OPT_BAD after saying what is wrong on stderr. */
static int args_next(args_t *a, int argc, char **argv, const char *shorts,
                     const struct option *longs)
{
    char spec[32];
    snprintf(spec, sizeof spec, "-:h%s", shorts); /* '-': positionals in order; ':' quiet */
    for (;;) {
        int ch = getopt_long(argc, argv, spec, longs, NULL);
        if (ch == 1) {
            if (args_keep(a, optarg)) return OPT_BAD;
            continue;
        }
        if (ch == OPT_DONE) { /* the arguments after "--" */
            for (; optind < argc; optind++)
                if (args_keep(a, argv[optind])) return OPT_BAD;
            return OPT_DONE;
        }
        if (ch == OPT_HELP) fputs(a->usage, stdout);
        if (ch == OPT_MISSING) {
            fprintf(stderr, "poseidon report %s: %s needs a value\n", a->sub, argv[optind - 1]);
            return OPT_BAD;
        }
        if (ch == OPT_UNKNOWN) {
            fprintf(stderr, "poseidon report %s: unknown option '%s'\n", a->sub, argv[optind - 1]);
            return OPT_BAD;
        }
        return ch;
    }
}

static void args_init(args_t *a, const char *sub, const char *usage)
{
    *a = (args_t){.sub = sub, .usage = usage};
    optind = 0; /* glibc: start over (a fresh argv) */
    opterr = 0;
}

/* The positional count a subcommand takes: 0, or 2 after its usage on stderr. */
static int args_want(const args_t *a, int n)
{
    if (a->n_pos == n) return 0;
    if (a->n_pos > n)
        fprintf(stderr, "poseidon report %s: unexpected argument '%s'\n", a->sub, a->pos[n]);
    else
        fputs(a->usage, stderr);
    return 2;
}

/* speedup and train: one CSV, --out PREFIX. */
static int run_plot(int argc, char **argv)
{
    int speedup = !strcmp(argv[0], "speedup");
    static const struct option longs[] = {
        {"out", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    args_t a;
    args_init(&a, argv[0], speedup ? s_usage_speedup : s_usage_train);
    const char *out = NULL;
    int ch;
    while ((ch = args_next(&a, argc, argv, "", longs)) != OPT_DONE) {
        if (ch == OPT_HELP) return 0;
        if (ch != 'o') return 2;
        out = optarg;
    }
    if (args_want(&a, 1)) return 2;
    if (!out) {
        fprintf(stderr, "poseidon report %s: --out PREFIX is required\n", a.sub);
        return 2;
    }
    return speedup ? report_speedup(a.pos[0], out, stdout) : report_train(a.pos[0], out, stdout);
}

static int run_compare(int argc, char **argv)
{
    static const struct option longs[] = {{"from-iteration", required_argument, 0, 'f'},
                                          {"csv", required_argument, 0, 'c'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    args_t a;
    args_init(&a, "compare", s_usage_compare);
    int from = 1, ch;
    const char *csv = NULL;
    while ((ch = args_next(&a, argc, argv, "", longs)) != OPT_DONE) {
        if (ch == OPT_HELP) return 0;
        if (ch == 'f') {
            if (flag_int32("report compare", "--from-iteration", optarg, 0, INT32_MAX, &from))
                return 2;
        } else if (ch == 'c') {
            csv = optarg;
        } else {
            return 2;
        }
    }
    if (args_want(&a, 2)) return 2;
    return report_compare(a.pos[0], a.pos[1], from, csv);
}

static int run_timeline(int argc, char **argv)
{
    static const struct option longs[] = {
        {"iteration", required_argument, 0, 'i'}, {"top", required_argument, 0, 't'},
        {"nodes", required_argument, 0, 'n'},     {"compare", required_argument, 0, 'c'},
        {"job", required_argument, 0, 'j'},       {"set", required_argument, 0, 's'},
        {"out", required_argument, 0, 'o'},       {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    args_t a;
    args_init(&a, "timeline", s_usage_timeline);
    timeline_opts_t o = {.iteration = -1, .top = 10};
    const char *sets[64];
    int ch, rc = 0;
    while (rc == 0 && (ch = args_next(&a, argc, argv, "o:", longs)) != OPT_DONE) {
        switch (ch) {
        case OPT_HELP: return 0;
        case 'i': rc = flag_int32("report timeline", "--iteration", optarg, 0, INT32_MAX,
                                  &o.iteration); break;
        case 't': rc = flag_int32("report timeline", "--top", optarg, 0, INT32_MAX, &o.top); break;
        case 'n': o.nodes = optarg; break;
        case 'c': o.other = optarg; break;
        case 'j': o.job = optarg; break;
        case 's':
            if (o.n_sets < 64) sets[o.n_sets++] = optarg;
            break;
        case 'o': o.out = optarg; break;
        default: return 2;
        }
    }
    if (rc) return 2;
    if (a.n_pos > 1) {
        fprintf(stderr, "poseidon report timeline: one TRACE expected (--compare for a second)\n");
        return 2;
    }
    if (args_want(&a, 1)) return 2;
    o.trace = a.pos[0];
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
    static const struct option longs[] = {
        {"out", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    args_t a;
    args_init(&a, "html", s_usage_html);
    const char *out = NULL;
    int ch;
    while ((ch = args_next(&a, argc, argv, "o:", longs)) != OPT_DONE) {
        if (ch == OPT_HELP) return 0;
        if (ch != 'o') return 2;
        out = optarg;
    }
    if (a.n_pos > 1) {
        fprintf(stderr, "poseidon report html: one DIR expected\n");
        return 2;
    }
    if (args_want(&a, 1)) return 2;
    char def[PATH_MAX];
    if (!out) {
        snprintf(def, sizeof def, "%s/report.html", a.pos[0]);
        out = def;
    }
    return report_html(a.pos[0], out);
}

int cmd_report(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } subs[] = {{"speedup", run_plot},       {"train", run_plot}, {"compare", run_compare},
                {"timeline", run_timeline}, {"html", run_html}};
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
                    "html)\n", argv[1]);
    return 2;
}
