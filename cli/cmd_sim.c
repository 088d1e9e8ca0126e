/* poseidon sim EXPERIMENT [--csv FILE] [--trace PREFIX] [--set KEY=VALUE]... */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/experiment_open.h"
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

int cmd_sim(int argc, char **argv)
{
    const char *path = NULL, *csv_path = NULL, *trace_prefix = NULL;
    const char *sets[64];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            sim_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
        else if (!strcmp(argv[i], "--trace") && i + 1 < argc) trace_prefix = argv[++i];
        else if (!strcmp(argv[i], "--set") && i + 1 < argc && n_sets < 64) sets[n_sets++] = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "poseidon sim: unknown or incomplete option '%s'\n", argv[i]);
            return 2;
        } else if (path) {
            fprintf(stderr, "poseidon sim: one EXPERIMENT expected\n");
            return 2;
        } else path = argv[i];
    }
    if (!path) {
        sim_usage(stderr);
        return 2;
    }
    experiment_t e;
    model_t m;
    if (experiment_open(argc, argv, path, sets, n_sets, &e, &m)) return 1;
    char err[2048];
    FILE *csv = NULL;
    int table = 1;
    if (csv_path && !strcmp(csv_path, "-")) {
        csv = stdout;
        table = 0;
    } else if (csv_path && !(csv = outfile_open(csv_path, "w"))) {
        fprintf(stderr, "%s: cannot write\n", csv_path);
        model_fini(&m);
        return 1;
    }
    if (csv) simrun_csv_header(csv);
    if (table)
        printf("%-14s %6s %6s %-15s %10s %10s %8s %10s %7s %7s\n", "model", "nodes", "gbps",
               "scheme", "iter_ms", "images/s", "speedup", "MB/node", "idle", "hidden");

    /* The one-node baseline (no communication, so one run serves every scheme/bandwidth). */
    int rc = 0;
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
    int n = experiment_config_count(&e);
    for (int i = 0; i < n && rc == 0; i++) {
        cluster_t c;
        scheme_t s;
        experiment_config(&e, i, &c, &s);
        char sb[64];
        scheme_name(s, sb, sizeof sb);
        trace_t *tr = NULL;
        if (trace_prefix) {
            char pre[1024];
            if (n == 1) snprintf(pre, sizeof pre, "%s", trace_prefix);
            else snprintf(pre, sizeof pre, "%s-%dn-%gg-%s", trace_prefix, c.nodes,
                          c.nic_Bps * 8 / 1e9, sb);
            if (!(tr = trace_open(pre, err, sizeof err))) {
                fprintf(stderr, "%s\n", err);
                rc = 1;
                break;
            }
        }
        /* on a terminal, what runs now (a configuration of thousands of nodes takes a
         * while); erased before its row */
        bool tty = log_is_tty();
        if (tty)
            fprintf(stderr, "\r\033[K  simulating %d of %d: %s on %d nodes at %g Gbit/s ...", i + 1,
                    n, sb, c.nodes, c.nic_Bps * 8 / 1e9);
        simrun_out_t o;
        int failed = simrun_config(&e, &m, i, &c, tr, &o, err, sizeof err);
        if (tty) fprintf(stderr, "\r\033[K");
        if (failed) {
            fprintf(stderr, "%s\n", err);
            trace_close(&tr);
            rc = 1;
            break;
        }
        trace_close(&tr);
        double speedup = base.r.images_per_s > 0 ? o.r.images_per_s / base.r.images_per_s : 0;
        if (csv) simrun_csv_row(csv, &e, &m, &c, s, &o, speedup);
        if (table)
            printf("%-14s %6d %6g %-15s %10.2f %10.1f %8.2f %10.1f %7.3f %7.3f\n", m.name, c.nodes,
                   c.nic_Bps * 8 / 1e9, sb, o.r.iter_ns / 1e6, o.r.images_per_s, speedup,
                   (o.r.sent_bytes_per_node + o.r.recv_bytes_per_node) / 1e6,
                   o.r.compute_idle_frac, o.r.comm_hidden_frac);
        fflush(stdout);
    }
    if (csv && csv != stdout && fclose(csv)) rc = 1;
    model_fini(&m);
    return rc;
}
