/* poseidon plan EXPERIMENT [--csv] [--set KEY=VALUE]... */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/experiment_open.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/log.h"
#include "core/model.h"
#include "core/plan.h"

static void plan_usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon plan EXPERIMENT [--csv] [--set KEY=VALUE]...\n\n"
            "Build the plan of an experiment (experiments/*.exp) for each configuration of its\n"
            "sweep and print, per layer with parameters, the sync method chosen and every\n"
            "alternative's bytes per node (sent + received, busiest node) and predicted time\n"
            "alone on the network (core/cost.h), and the all-reduce bucket of the layer (units\n"
            "that share a bucket share one ring; allreduce_bucket_mb, core/plan.h). With racks\n"
            "(nodes_per_rack) also each alternative's bytes through the busiest rack uplink.\n\n"
            "  --csv            one CSV table per configuration (header: unit,layer,type,params,\n"
            "                   method,ps_bytes,ps_ns,sfb_bytes,sfb_ns,allreduce_bytes,\n"
            "                   allreduce_ns,bucket; -1: method not allowed, no bucket; then\n"
            "                   lreduce_bytes,lbcast_bytes with several devices per node,\n"
            "                   ps_rack_bytes,sfb_rack_bytes,allreduce_rack_bytes with racks)\n"
            "  --set KEY=VALUE  override an experiment key, or a cluster key as cluster.KEY\n\n"
            "experiment keys:\n%s\ncluster keys:\n%s",
            experiment_keys_help(), cluster_keys_help());
}

int cmd_plan(int argc, char **argv)
{
    const char *path = NULL;
    int csv = 0;
    const char *sets[64];
    int n_sets = 0;
    static const struct option opts[] = {{"csv", no_argument, NULL, 'c'},
                                         {"set", required_argument, NULL, 's'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0}};
    flag_parser_t p;
    flag_begin(&p, "plan", argc, argv, "h", opts);
    for (int ch; (ch = flag_next(&p)) != FLAG_END;) {
        if (ch == 'h') {
            plan_usage(stdout);
            return 0;
        } else if (ch == 'c') {
            csv = 1;
        } else if (ch == 's') {
            if (n_sets == 64) {
                fprintf(stderr, "poseidon plan: at most 64 --set\n");
                return 2;
            }
            sets[n_sets++] = p.arg;
        } else if (ch == FLAG_ARG && !path) {
            path = p.arg;
        } else {
            if (ch == FLAG_ARG) fprintf(stderr, "poseidon plan: one EXPERIMENT expected\n");
            return 2;
        }
    }
    if (!path) {
        plan_usage(stderr);
        return 2;
    }
    experiment_t e;
    model_t m;
    if (experiment_open(argc, argv, path, sets, n_sets, &e, &m)) return 1;
    char err[2048];
    int rc = 0;
    for (int i = 0; i < experiment_config_count(&e) && rc == 0; i++) {
        cluster_t c;
        plan_opts_t po;
        job_config(&e, i, NULL, &c, &po);
        scheme_t s = po.scheme;
        plan_t p;
        if (plan_build_opts(&p, &m, &c, &po, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            rc = 1;
            break;
        }
        if (i > 0) fputc('\n', stdout);
        if (csv) {
            char sb[64];
            printf("# %s nodes=%d gbps=%g scheme=%s", m.name, c.nodes, c.nic_Bps * 8 / 1e9,
                   scheme_name(s, sb, sizeof sb));
            if (po.precision != PRECISION_FP32 || po.wire_precision != PRECISION_FP32)
                printf(" precision=%s wire_precision=%s", precision_name(po.precision),
                       precision_name(po.wire_precision));
            if (po.send_order != SEND_ORDER_ARRIVAL)
                printf(" send_order=%s slice_bytes=%lld", send_order_name(p.send_order),
                       (long long)p.slice_bytes);
            putchar('\n');
        }
        plan_print(&p, stdout, csv);
        plan_fini(&p);
    }
    model_fini(&m);
    if (fflush(stdout)) rc = 1;
    return rc;
}
