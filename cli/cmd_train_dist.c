/* poseidon train --workers N ...: distributed training. Each rank runs runtime/worker (the
 * plan built by core/, executed for real over ZeroMQ). --workers N forks a local job; without
 * it the rank comes from the launcher's environment (mpirun, srun, or RANK/WORLD_SIZE/
 * MASTER_ADDR/MASTER_PORT by hand). Rank 0 prints the report rows on stdout. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "core/log.h"
#include "runtime/launch.h"
#include "runtime/worker.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon train --workers N --model FILE [options]   (a local job)\n"
            "       mpirun -np N poseidon train --model FILE [options]  (or srun, or RANK=...)\n\n"
            "Data-parallel training on N workers that execute the plan of the simulator: per\n"
            "layer PS (sharded, one shard per worker), SFB or ring all-reduce, wait-free\n"
            "backprop, BSP or SSP. Rank 0 prints rows: epoch,iteration,loss,train_acc,\n"
            "test_acc,images_per_s,seconds (loss and accuracies are rank 0's).\n\n"
            "  --workers N         fork N local workers (default: rank from the environment)\n"
            "  --model FILE        network description (models/NAME.net)\n"
            "  --scheme S          ps | ps+wfbp | sfb+wfbp | allreduce+wfbp | hybrid | hybrid3\n"
            "                      (default hybrid; any X+none / X+wfbp)\n"
            "  --ssp S             staleness (default 0: BSP)\n"
            "  --batch K           samples per worker and step (default 16)\n"
            "  --epochs E          epochs over the training set (default 1)\n"
            "  --iterations I      total steps instead of epochs\n"
            "  --report-every I    steps between report rows (default: one per epoch)\n"
            "  --data D            fashion-mnist (default) or synthetic\n"
            "  --data-dir DIR      IDX files (default /usr/share/datasets/fashion-mnist)\n"
            "  --synthetic-n N     synthetic training samples in all (default 1024)\n"
            "  --limit N           use only the first N training samples\n"
            "  --no-shuffle        keep each partition in order\n"
            "  --no-eval           no test accuracy in the rows\n"
            "  --compute C         real (default) or emulate: FWD/BWD sleep for --profile times\n"
            "  --profile CSV       per-layer times (poseidon profile's CSV)\n"
            "  --cluster FILE      cluster file for the cost model (device, shards); nodes = N\n"
            "  --no-probe          keep the cluster's bandwidth and latency (no link probe)\n"
            "  --probe-bytes B     bulk bytes of the probe (default 4194304, sent twice)\n"
            "  --kv-block BYTES    PS block (default 4194304; 0: split evenly over shards)\n"
            "  --kv-placement P    least_loaded (default) or round_robin: which shard each\n"
            "                      block goes to (the experiment key kv_placement)\n"
            "  --bucket-mb X       fuse the all-reduce layers, in backward order, into buckets\n"
            "                      of >= X MB, one ring each (default 0: one ring per layer;\n"
            "                      the experiment key allreduce_bucket_mb of poseidon sim)\n"
            "  --lr X --momentum X --weight-decay X   SGD (defaults 0.01, 0.9, 0.0005)\n"
            "  --seed S            initialisation, shuffling, synthetic data (default 1)\n"
            "  --threads T         BLAS threads per worker (default 1)\n"
            "  --timeout-ms MS     bound of every wait (default 60000)\n"
            "  --csv FILE          rank 0's rows\n"
            "  --trace PREFIX      PREFIX-rank<R>.csv/.json per rank, merged into PREFIX.csv\n"
            "  --params-out PATH   each rank writes its final parameters to PATH.<rank>\n"
            "  --print-plan        rank 0 prints the plan's per-unit table\n");
}

static int num(const char *opt, const char *v, double lo, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(v, &end);
    if (errno || end == v || *end || *out < lo) {
        fprintf(stderr, "poseidon train: %s expects a number >= %g, got '%s'\n", opt, lo, v);
        return -1;
    }
    return 0;
}

typedef struct {
    worker_config_t cfg;
} td_t;

static int run_rank(int rank, void *arg)
{
    (void)rank;
    return worker_run(&((td_t *)arg)->cfg);
}

int cmd_train_distributed(int argc, char **argv)
{
    td_t td;
    worker_config_t *c = &td.cfg;
    worker_config_init(c);
    double workers = 0, v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-shuffle")) { c->shuffle = false; continue; }
        if (!strcmp(a, "--no-eval")) { c->evaluate = false; continue; }
        if (!strcmp(a, "--no-probe")) { c->probe = false; continue; }
        if (!strcmp(a, "--print-plan")) { c->print_plan = true; continue; }
        if (i + 1 >= argc) {
            fprintf(stderr, "poseidon train: unknown option or missing value: '%s'\n", a);
            return 2;
        }
        const char *s = argv[++i];
        int rc = 0;
        if (!strcmp(a, "--workers")) rc = num(a, s, 1, &workers);
        else if (!strcmp(a, "--model")) c->model_path = s;
        else if (!strcmp(a, "--scheme")) {
            if (scheme_parse(s, &c->scheme)) {
                fprintf(stderr, "poseidon train: --scheme: unknown scheme '%s'\n", s);
                return 2;
            }
        } else if (!strcmp(a, "--ssp")) rc = num(a, s, 0, &v), c->staleness = (int)v;
        else if (!strcmp(a, "--batch")) rc = num(a, s, 1, &v), c->batch = (int)v;
        else if (!strcmp(a, "--epochs")) rc = num(a, s, 1, &v), c->epochs = (int)v;
        else if (!strcmp(a, "--iterations")) rc = num(a, s, 1, &v), c->iterations = (int64_t)v;
        else if (!strcmp(a, "--report-every")) rc = num(a, s, 1, &v), c->report_every = (int64_t)v;
        else if (!strcmp(a, "--data")) c->data = s;
        else if (!strcmp(a, "--data-dir")) c->data_dir = s;
        else if (!strcmp(a, "--limit")) rc = num(a, s, 1, &v), c->limit = (int)v;
        else if (!strcmp(a, "--synthetic-n")) rc = num(a, s, 1, &v), c->synthetic_n = (int)v;
        else if (!strcmp(a, "--compute")) {
            if (!strcmp(s, "real")) c->compute = WORKER_COMPUTE_REAL;
            else if (!strcmp(s, "emulate")) c->compute = WORKER_COMPUTE_EMULATE;
            else {
                fprintf(stderr, "poseidon train: --compute is real or emulate, not '%s'\n", s);
                return 2;
            }
        } else if (!strcmp(a, "--profile")) c->profile_path = s;
        else if (!strcmp(a, "--cluster")) c->cluster_path = s;
        else if (!strcmp(a, "--probe-bytes")) rc = num(a, s, 4, &v), c->probe_bytes = (int64_t)v;
        else if (!strcmp(a, "--kv-block")) rc = num(a, s, 0, &v), c->kv_block_bytes = (int64_t)v;
        else if (!strcmp(a, "--kv-placement")) {
            if (kv_place_parse(s, &c->kv_placement)) {
                fprintf(stderr, "poseidon train: --kv-placement is least_loaded or round_robin, "
                                "not '%s'\n", s);
                return 2;
            }
        } else if (!strcmp(a, "--bucket-mb")) {
            rc = num(a, s, 0, &v);
            if (!rc && v > 1e6) {
                fprintf(stderr, "poseidon train: --bucket-mb expects at most 1e6, got '%s'\n", s);
                rc = -1;
            }
            c->allreduce_bucket_bytes = llround(v * (1 << 20));
        }
        else if (!strcmp(a, "--lr")) rc = num(a, s, 0, &c->solver.lr);
        else if (!strcmp(a, "--momentum")) rc = num(a, s, 0, &c->solver.momentum);
        else if (!strcmp(a, "--weight-decay")) rc = num(a, s, 0, &c->solver.weight_decay);
        else if (!strcmp(a, "--seed")) rc = num(a, s, 0, &v), c->seed = (uint64_t)v;
        else if (!strcmp(a, "--threads")) rc = num(a, s, 1, &v), c->threads = (int)v;
        else if (!strcmp(a, "--timeout-ms")) rc = num(a, s, 100, &v), c->timeout_ms = (int)v;
        else if (!strcmp(a, "--csv")) c->csv_path = s;
        else if (!strcmp(a, "--trace")) c->trace_prefix = s;
        else if (!strcmp(a, "--params-out")) c->params_out = s;
        else {
            fprintf(stderr, "poseidon train: unknown option '%s' (--help lists them)\n", a);
            return 2;
        }
        if (rc) return 2;
    }
    if (!c->model_path) {
        usage(stderr);
        return 2;
    }
    if (c->kv_block_bytes % 4) {
        fprintf(stderr, "poseidon train: --kv-block must be a multiple of 4 bytes\n");
        return 2;
    }
    if (c->compute == WORKER_COMPUTE_EMULATE && !c->profile_path) {
        fprintf(stderr, "poseidon train: --compute emulate needs --profile CSV\n");
        return 2;
    }
    log_banner(argc, argv, c->seed);
    if (workers > 0) return launch_local((int)workers, launch_free_port(), 15000, run_rank, &td);
    return worker_run(c);
}
