/* poseidon sim EXPERIMENT [--csv FILE] [--trace PREFIX] [--set KEY=VALUE]... [-j N]
 * [--part I/N] */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_sim_jobs.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/experiment_open.h"
#include "core/check.h"
#include "core/experiment.h"
#include "core/log.h"
#include "core/model.h"
#include "core/trace.h"
#include "sim/simpart.h"
#include "sim/simrun.h"
#include "core/outfile.h"

static void sim_usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon sim EXPERIMENT [--csv FILE] [--trace PREFIX] [--set KEY=VALUE]...\n"
            "                    [-j N] [--part I/N]\n\n"
            "Simulate every configuration of an experiment's sweep (nodes x bandwidths x schemes)\n"
            "in virtual time and print per configuration: iteration time, images/s, speedup over\n"
            "one node, bytes per node and iteration, compute idle fraction, fraction of\n"
            "communication hidden behind compute.\n\n"
            "  --csv FILE       also write the rows as CSV ('-': stdout instead of the table);\n"
            "                   columns model,nodes,gbps,scheme,consistency,batch,iter_s,\n"
            "                   images_per_s,speedup,sent_MB_per_node,recv_MB_per_node,\n"
            "                   compute_idle,comm_hidden,predicted_sync_s,layers_ps,layers_sfb,\n"
            "                   layers_allreduce,events,wall_s\n"
            "  --trace PREFIX   write PREFIX.csv (node,iteration,op,layer,peer,bytes,t_start_ns,\n"
            "                   t_end_ns) and PREFIX.json (Chrome/Perfetto); with several\n"
            "                   configurations PREFIX-NODESn-GBPSg-SCHEME.{csv,json}\n"
            "  --set KEY=VALUE  override an experiment key, or a cluster key as cluster.KEY\n"
            "  -j N             simulate N configurations at a time, each in a process of its\n"
            "                   own (default: the cores this process may use); the output is\n"
            "                   the same as with -j 1, in the same order, but for wall_s\n"
            "  --part I/N       only part I of N of the configurations: those whose index i\n"
            "                   (0-based, in sweep order) has i %% N == I-1; the CSV opens with a\n"
            "                   '#' line naming the part, and `poseidon report merge` puts\n"
            "                   the N parts' CSVs back into the whole sweep's\n\n"
            "Speedup is throughput over that of one node with the same settings (weak scaling,\n"
            "as in Poseidon's evaluation). experiment keys:\n%s\ncluster keys:\n%s",
            experiment_keys_help(), cluster_keys_help());
}

typedef struct {
    const char *path, *csv_path, *trace_prefix;
    const char *sets[64];
    int n_sets;
    int jobs;          /* -j; 0: the cores */
    int part, nparts;  /* --part I/N; 1/1 without */
} sim_args_t;

/* Returns -1 to go on, or the exit code (0 after --help). */
static int sim_parse(sim_args_t *a, int argc, char **argv)
{
    static const struct option opts[] = {{"csv", required_argument, NULL, 'c'},
                                         {"trace", required_argument, NULL, 't'},
                                         {"set", required_argument, NULL, 's'},
                                         {"jobs", required_argument, NULL, 'j'},
                                         {"part", required_argument, NULL, 'p'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0}};
    flag_parser_t p;
    char err[256];
    a->part = a->nparts = 1;
    flag_begin(&p, "sim", argc, argv, "hj:", opts);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        switch (c) {
        case 'h': sim_usage(stdout); return 0;
        case 'j':
            if (flag_int32("sim", p.opt, p.arg, 1, 4096, &a->jobs)) return 2;
            break;
        case 'p':
            if (simpart_parse(p.arg, &a->part, &a->nparts, err, sizeof err)) {
                fprintf(stderr, "poseidon sim: %s\n", err);
                return 2;
            }
            break;
        case 'c': a->csv_path = p.arg; break;
        case 't': a->trace_prefix = p.arg; break;
        case 's':
            if (a->n_sets == 64) {
                fprintf(stderr, "poseidon sim: at most 64 --set\n");
                return 2;
            }
            a->sets[a->n_sets++] = p.arg;
            break;
        case FLAG_ARG:
            if (a->path) {
                fprintf(stderr, "poseidon sim: one EXPERIMENT expected\n");
                return 2;
            }
            a->path = p.arg;
            break;
        default: return 2;
        }
    }
    if (!a->path) {
        sim_usage(stderr);
        return 2;
    }
    return -1;
}

/* Where sim_one writes: the CSV rows (NULL: none), the table rows (NULL: none), and whether
 * to show on the terminal what runs now. */
typedef struct {
    FILE *csv, *table;
    bool progress;
} sim_out_t;

/* Simulates configuration i of e and prints its row (table and/or CSV). 0, or -1 (printed). */
static int sim_one(const experiment_t *e, const model_t *m, int i, const sim_args_t *a,
                   const sim_out_t *out, const simrun_out_t *base)
{
    char err[2048];
    int n = experiment_config_count(e);
    cluster_t c;
    scheme_t s;
    experiment_config(e, i, &c, &s);
    char sb[64];
    scheme_name(s, sb, sizeof sb);
    trace_t *tr = NULL;
    if (a->trace_prefix) {
        char pre[1024];
        if (n == 1) snprintf(pre, sizeof pre, "%s", a->trace_prefix);
        else snprintf(pre, sizeof pre, "%s-%dn-%gg-%s", a->trace_prefix, c.nodes,
                      c.nic_Bps * 8 / 1e9, sb);
        if (!(tr = trace_open(pre, err, sizeof err))) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
    }
    /* on a terminal, what runs now (a configuration of thousands of nodes takes a while);
     * erased before its row */
    bool tty = out->progress && log_is_tty();
    if (tty)
        fprintf(stderr, "\r\033[K  simulating %d of %d: %s on %d nodes at %g Gbit/s ...", i + 1,
                n, sb, c.nodes, c.nic_Bps * 8 / 1e9);
    simrun_out_t o;
    int failed = simrun_config(e, m, i, &c, tr, &o, err, sizeof err);
    if (tty) fprintf(stderr, "\r\033[K");
    trace_close(&tr);
    if (failed) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    double speedup = base->r.images_per_s > 0 ? o.r.images_per_s / base->r.images_per_s : 0;
    if (out->csv) simrun_csv_row(out->csv, e, m, &c, s, &o, speedup);
    if (out->table) {
        fprintf(out->table, "%-14s %6d %6g %-15s %10.2f %10.1f %8.2f %10.1f %7.3f %7.3f\n",
                m->name, c.nodes, c.nic_Bps * 8 / 1e9, sb, o.r.iter_ns / 1e6, o.r.images_per_s,
                speedup, (o.r.sent_bytes_per_node + o.r.recv_bytes_per_node) / 1e6,
                o.r.compute_idle_frac, o.r.comm_hidden_frac);
        fflush(out->table);
    }
    return 0;
}

/* The sweep as cmd_sim runs it: the configurations of the part, and where rows go. */
typedef struct {
    const experiment_t *e;
    const model_t *m;
    const sim_args_t *a;
    const simrun_out_t *base;
    const int *configs;  /* the part's configuration indices, in order */
    FILE *csv;
    bool table;
} sweep_t;

/* A task of sim_jobs_run: configuration configs[k]; its output is the CSV row, a '\0', the
 * table row. */
static int sweep_task(int k, FILE *out, void *arg)
{
    const sweep_t *w = arg;
    char *table = NULL;
    size_t len = 0;
    FILE *tf = NULL;
    if (w->table && !(tf = open_memstream(&table, &len))) die("poseidon sim: out of memory");
    sim_out_t o = {.csv = w->csv ? out : NULL, .table = tf, .progress = false};
    int rc = sim_one(w->e, w->m, w->configs[k], w->a, &o, w->base);
    if (tf) fclose(tf);
    fputc('\0', out);
    if (table) fwrite(table, 1, len, out);
    free(table);
    return rc;
}

static void sweep_emit(int k, const char *buf, size_t len, void *arg)
{
    (void)k;
    const sweep_t *w = arg;
    size_t csv_len = strnlen(buf, len);
    if (w->csv) fwrite(buf, 1, csv_len, w->csv);
    if (w->table && csv_len < len) {
        fwrite(buf + csv_len + 1, 1, len - csv_len - 1, stdout);
        fflush(stdout);
    }
}

/* Runs the part's configurations, -j at a time. 0, or -1 (printed). */
static int sweep_run(sweep_t *w, int n, int jobs)
{
    if (jobs > 1 && n > 1) return sim_jobs_run(n, jobs, sweep_task, sweep_emit, w);
    sim_out_t o = {.csv = w->csv, .table = w->table ? stdout : NULL, .progress = true};
    for (int k = 0; k < n; k++)
        if (sim_one(w->e, w->m, w->configs[k], w->a, &o, w->base)) return -1;
    return 0;
}

int cmd_sim(int argc, char **argv)
{
    sim_args_t a = {0};
    int rc = sim_parse(&a, argc, argv);
    if (rc >= 0) return rc;
    experiment_t e;
    model_t m;
    if (experiment_open(argc, argv, a.path, a.sets, a.n_sets, &e, &m)) return 1;
    char err[2048];
    FILE *csv = NULL;
    bool table = true;
    if (a.csv_path && !strcmp(a.csv_path, "-")) {
        csv = stdout;
        table = false;
    } else if (a.csv_path && !(csv = outfile_open(a.csv_path, "w"))) {
        fprintf(stderr, "%s: cannot write\n", a.csv_path);
        model_fini(&m);
        return 1;
    }
    int count = experiment_config_count(&e);
    if (csv && a.nparts > 1)
        simpart_csv_comment(csv, a.part, a.nparts, count, simpart_fingerprint(&e, &m));
    if (csv) simrun_csv_header(csv);
    if (table)
        printf("%-14s %6s %6s %-15s %10s %10s %8s %10s %7s %7s\n", "model", "nodes", "gbps",
               "scheme", "iter_ms", "images/s", "speedup", "MB/node", "idle", "hidden");

    /* The one-node baseline (no communication, so one run serves every scheme/bandwidth). */
    simrun_out_t base;
    experiment_t *e1 = xmalloc(sizeof *e1);
    experiment_baseline(&e, e1);
    cluster_t c1;
    rc = simrun_config(e1, &m, 0, &c1, NULL, &base, err, sizeof err);
    free(e1);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        rc = 1;
    }
    int *configs = xmalloc((count > 0 ? count : 1) * sizeof *configs), n = 0;
    for (int i = 0; i < count; i++)
        if (simpart_owns(i, a.part, a.nparts)) configs[n++] = i;
    sweep_t w = {.e = &e, .m = &m, .a = &a, .base = &base, .configs = configs, .csv = csv,
                 .table = table};
    if (rc == 0 && sweep_run(&w, n, a.jobs ? a.jobs : sim_jobs_cores())) rc = 1;
    free(configs);
    if (csv && csv != stdout && fclose(csv)) rc = 1;
    model_fini(&m);
    return rc;
}
