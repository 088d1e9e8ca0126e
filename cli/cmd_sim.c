/* poseidon sim EXPERIMENT [--csv FILE] [--trace PREFIX] [--set KEY=VALUE]... */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/experiment_open.h"
#include "core/check.h"
#include "core/experiment.h"
#include "core/log.h"
#include "core/model.h"
#include "core/trace.h"
#include "sim/simrun.h"
#include "core/outfile.h"

static void sim_usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon sim EXPERIMENT [--csv FILE] [--trace PREFIX] [--set KEY=VALUE]...\n\n"
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
            "  --set KEY=VALUE  override an experiment key, or a cluster key as cluster.KEY\n\n"
            "Speedup is throughput over that of one node with the same settings (weak scaling,\n"
            "as in Poseidon's evaluation). experiment keys:\n%s\ncluster keys:\n%s",
            experiment_keys_help(), cluster_keys_help());
}

typedef struct {
    const char *path, *csv_path, *trace_prefix;
    const char *sets[64];
    int n_sets;
} sim_args_t;

/* Returns -1 to go on, or the exit code (0 after --help). */
static int sim_parse(sim_args_t *a, int argc, char **argv)
{
    static const struct option opts[] = {{"csv", required_argument, NULL, 'c'},
                                         {"trace", required_argument, NULL, 't'},
                                         {"set", required_argument, NULL, 's'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0}};
    flag_parser_t p;
    flag_begin(&p, "sim", argc, argv, "h", opts);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        switch (c) {
        case 'h': sim_usage(stdout); return 0;
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

/* Simulates configuration i of e and prints its row (table and/or CSV). 0, or -1 (printed). */
static int sim_one(const experiment_t *e, const model_t *m, int i, const sim_args_t *a,
                   FILE *csv, bool table, const simrun_out_t *base)
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
    bool tty = log_is_tty();
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
    if (csv) simrun_csv_row(csv, e, m, &c, s, &o, speedup);
    if (table)
        printf("%-14s %6d %6g %-15s %10.2f %10.1f %8.2f %10.1f %7.3f %7.3f\n", m->name, c.nodes,
               c.nic_Bps * 8 / 1e9, sb, o.r.iter_ns / 1e6, o.r.images_per_s, speedup,
               (o.r.sent_bytes_per_node + o.r.recv_bytes_per_node) / 1e6, o.r.compute_idle_frac,
               o.r.comm_hidden_frac);
    fflush(stdout);
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
    for (int i = 0; i < experiment_config_count(&e) && rc == 0; i++)
        if (sim_one(&e, &m, i, &a, csv, table, &base)) rc = 1;
    if (csv && csv != stdout && fclose(csv)) rc = 1;
    model_fini(&m);
    return rc;
}
